"""The forwarder: serialized OTLP requests out to a downstream endpoint, a file, or nowhere.

Payloads are protobuf bytes, never SDK objects (DESIGN §6): the receivers and the evaluation
worker hand over `Export*ServiceRequest` bytes, and a lane sends them as they are. Because a
request is only `repeated ResourceX resource_x = 1`, concatenating serialized requests of one
signal *is* a valid merged request, so batching costs a `bytes.join`.

One `Lane` per signal (traces, logs, metrics), each with one thread, a FIFO of payloads and a
`Budget` of bytes. A byte is charged to the budget when a receiver accepts it and released when
its lane has sent it or dropped it, so the budget bounds everything accepted and not yet
forwarded; a receiver whose budget is full refuses with a retryable status (backpressure reaches
the sender, and nothing accepted is dropped while there is room). A failing send is retried with
exponential backoff and jitter, honouring the downstream's `RetryInfo` (gRPC) or `Retry-After`
(HTTP), until `max_elapsed`; then the payload is dropped and counted, as are payloads the
downstream rejects as permanently bad.

Senders (`Sender.send(payload) -> Outcome`, called on the lane's thread):

- `GrpcSender`: unary `Export` of raw bytes over one channel (TLS or not, gzip, headers, timeout);
- `HttpSender`: `POST /v1/<signal>` with `http.client` (keep-alive, TLS, gzip/deflate, headers);
  `http/json` re-encodes the payload as OTLP/JSON with hex ids;
- `FileSender`: one OTLP/JSON line per payload, the Collector file-exporter shape;
- `NullSender`: `--forward none`.
"""

from __future__ import annotations

import gzip
import http.client
import logging
import random
import ssl
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import grpc  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

from tracehound.server._otlp import JSON, PROTOBUF, Signal, to_json_line
from tracehound.server._settings import SignalTarget

__all__ = [
    "Budget",
    "FileSender",
    "GrpcSender",
    "HttpSender",
    "Lane",
    "NullSender",
    "Outcome",
    "RetryPolicy",
    "Sender",
]

_logger = logging.getLogger("tracehound.server.forward")

MAX_BATCH_BYTES = 4 * 1024 * 1024
"""Payloads of one signal are merged up to this size (a single larger one is sent alone)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    retryable: bool = False
    retry_after: float | None = None
    """Delay the downstream asked for (RetryInfo / Retry-After), seconds."""
    rejected: int = 0
    """`partial_success` rejected count reported by the downstream."""
    message: str = ""


SUCCESS = Outcome(True)


class Sender(Protocol):
    batches: bool
    """True when payloads may be merged before sending (False: one send per payload)."""

    def send(self, payload: bytes) -> Outcome: ...

    def close(self) -> None: ...


class NullSender:
    """`--forward none`: everything is 'sent' at once."""

    batches = True

    def send(self, payload: bytes) -> Outcome:
        return SUCCESS

    def close(self) -> None:
        return None


class FileSender:
    """`file:PATH`: one OTLP/JSON line (hex ids) per payload, shared by the three lanes."""

    batches = False

    def __init__(self, path: Path, signal: Signal, lock: threading.Lock) -> None:
        self._path = path
        self._signal = signal
        self._lock = lock

    def send(self, payload: bytes) -> Outcome:
        try:
            line = to_json_line(self._signal.request.FromString(payload))
        except (DecodeError, ValueError) as exc:  # our own bytes: a bug, not a retry case
            return Outcome(False, message=f"cannot encode the payload as JSON: {exc}")
        try:
            with self._lock, self._path.open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as exc:
            return Outcome(False, retryable=True, message=f"{self._path}: {exc}")
        return SUCCESS

    def close(self) -> None:
        return None


_RETRYABLE_GRPC = frozenset(
    (
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    )
)


def _read(path: str | None) -> bytes | None:
    if not path:
        return None
    return Path(path).expanduser().read_bytes()


def grpc_retry_delay(metadata: Any) -> float | None:
    """The RetryInfo delay in gRPC trailing metadata (`google.rpc.retryinfo-bin`, else inside
    `grpc-status-details-bin`), in seconds; None without one."""
    items = dict(metadata or ())
    raw = items.get("google.rpc.retryinfo-bin")
    info = error_details_pb2.RetryInfo()
    try:
        if raw is not None:
            info.ParseFromString(raw)
            return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
        details = items.get("grpc-status-details-bin")
        if details is not None:
            status = status_pb2.Status.FromString(details)
            for detail in status.details:
                if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                    detail.Unpack(info)
                    return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    except (DecodeError, ValueError):
        return None
    return None


class GrpcSender:
    """Unary `Export` of raw request bytes to an OTLP/gRPC endpoint."""

    batches = True

    def __init__(self, target: SignalTarget, signal: Signal) -> None:
        options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
        if target.insecure:
            channel = grpc.insecure_channel(target.endpoint, options=options)
        else:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(target.certificate),
                private_key=_read(target.client_key),
                certificate_chain=_read(target.client_certificate),
            )
            channel = grpc.secure_channel(target.endpoint, credentials, options=options)
        self._channel = channel
        self._call = channel.unary_unary(signal.grpc_method)  # bytes in, bytes out
        self._signal = signal
        self._metadata = tuple(target.headers) or None
        self._timeout = target.timeout
        self._compression = (
            grpc.Compression.Gzip
            if target.compression == "gzip"
            else grpc.Compression.NoCompression
        )

    def send(self, payload: bytes) -> Outcome:
        try:
            response = self._call(
                payload,
                timeout=self._timeout,
                metadata=self._metadata,
                compression=self._compression,
            )
        except grpc.RpcError as error:
            code = error.code()
            delay = grpc_retry_delay(error.trailing_metadata())
            retryable = code in _RETRYABLE_GRPC or (
                code == grpc.StatusCode.RESOURCE_EXHAUSTED and delay is not None
            )
            return Outcome(
                False,
                retryable=retryable,
                retry_after=delay,
                message=f"{code.name}: {error.details()}",
            )
        return _partial(self._signal, response, PROTOBUF)

    def close(self) -> None:
        self._channel.close()


def _partial(signal: Signal, body: bytes, mime: str) -> Outcome:
    """A 200 / OK answer: success, with the downstream's partial_success if it set one."""
    if not body:
        return SUCCESS
    try:
        if mime == JSON:
            from google.protobuf import json_format

            response = json_format.Parse(body, signal.response(), ignore_unknown_fields=True)
        else:
            response = signal.response.FromString(body)
    except Exception:  # an unreadable success body is still a success
        return SUCCESS
    if not response.HasField("partial_success"):
        return SUCCESS
    partial = response.partial_success
    return Outcome(
        True, rejected=int(getattr(partial, signal.rejected_field)), message=partial.error_message
    )


_RETRYABLE_HTTP = frozenset((429, 502, 503, 504))


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After`: seconds or an HTTP-date (RFC 9110); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


class HttpSender:
    """`POST` of request bytes to an OTLP/HTTP URL (`http/protobuf` or `http/json`)."""

    batches = True

    def __init__(self, target: SignalTarget, signal: Signal) -> None:
        parts = urlsplit(target.endpoint)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._https else 80)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._signal = signal
        self._json = target.protocol == "http/json"
        self._timeout = target.timeout
        self._compression = target.compression
        self._headers = dict(target.headers)
        self._headers["Content-Type"] = JSON if self._json else PROTOBUF
        if self._compression != "none":
            self._headers["Content-Encoding"] = self._compression
        self._context: ssl.SSLContext | None = None
        if self._https:
            context = ssl.create_default_context(cafile=target.certificate or None)
            if target.client_certificate:
                context.load_cert_chain(target.client_certificate, target.client_key or None)
            self._context = context
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._https:
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self._timeout, context=self._context
                )
            else:
                self._conn = http.client.HTTPConnection(
                    self._host, self._port, timeout=self._timeout
                )
        return self._conn

    def send(self, payload: bytes) -> Outcome:
        body = payload
        if self._json:
            body = to_json_line(self._signal.request.FromString(payload)).encode()
        if self._compression == "gzip":
            body = gzip.compress(body, compresslevel=6)
        elif self._compression == "deflate":
            body = zlib.compress(body)
        try:
            conn = self._connection()
            conn.request("POST", self._path, body=body, headers=self._headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            return Outcome(False, retryable=True, message=f"connection error: {exc}")
        status = response.status
        if response.getheader("Connection", "").lower() == "close":
            self.close()
        if 200 <= status < 300:
            mime = JSON if "json" in (response.getheader("Content-Type") or "") else PROTOBUF
            return _partial(self._signal, data, mime)
        retryable = status in _RETRYABLE_HTTP
        return Outcome(
            False,
            retryable=retryable,
            retry_after=retry_after_seconds(response.getheader("Retry-After"))
            if retryable
            else None,
            message=f"HTTP {status}: {data[:200]!r}",
        )

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


# --- budget and lanes ---------------------------------------------------------------------------


class Budget:
    """Bytes accepted and not yet forwarded, for one signal. Thread-safe."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._used = 0
        self._refused = 0  # size of the last refused request, until it would fit
        self._cond = threading.Condition()

    @property
    def used(self) -> int:
        return self._used

    @property
    def full(self) -> bool:
        """True from a refusal until the refused request would fit."""
        return bool(self._refused)

    def try_acquire(self, size: int) -> bool:
        """Charge `size` if it fits (an empty pipeline always takes one request)."""
        with self._cond:
            if self._used and self._used + size > self.capacity:
                self._refused = size
                return False
            self._used += size
            self._refused = 0
            return True

    def charge(self, size: int) -> None:
        """Charge without refusing (bytes already accepted, e.g. held spans released)."""
        with self._cond:
            self._used += size

    def release(self, size: int) -> None:
        with self._cond:
            self._used = max(self._used - size, 0)
            if self._refused and (not self._used or self._used + self._refused <= self.capacity):
                self._refused = 0
            self._cond.notify_all()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    initial: float = 1.0
    max_interval: float = 30.0
    max_elapsed: float = 300.0

    def backoff(self, attempt: int) -> float:
        base = min(self.initial * 2**attempt, self.max_interval)
        return float(base * random.uniform(0.8, 1.2))


@dataclass(slots=True)
class _Payload:
    data: bytes
    items: int


ResultHook = Callable[[str, str, str, int], None]
"""(signal, outcome `success`/`dropped`, drop reason or "", items)."""


class Lane:
    """One signal's FIFO of payloads and the thread that sends them, with retries."""

    def __init__(
        self,
        signal: Signal,
        sender: Sender,
        budget: Budget,
        policy: RetryPolicy,
        *,
        on_result: ResultHook | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        self.signal = signal
        self.sender = sender
        self.budget = budget
        self.policy = policy
        self._on_result = on_result
        self._on_retry = on_retry
        self._queue: deque[_Payload] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._stop = False
        self._abandon = threading.Event()
        self._backoff_until = 0.0
        self._warned = 0.0
        self.sent_items = 0
        self.sent_payloads = 0
        self.dropped_items = 0
        self.retries = 0
        self.downstream_rejected = 0
        self._thread = threading.Thread(
            name=f"tracehound-forward-{signal.name}", target=self._run, daemon=True
        )
        self._thread.start()

    # --- producers -------------------------------------------------------------------------------

    def put(self, data: bytes, items: int, reserved: int = 0) -> None:
        """Queue a payload whose bytes were accepted; `reserved` bytes of it were charged at
        admission (the difference is charged now, without refusing)."""
        self.budget.charge(len(data) - reserved)
        with self._cond:
            self._queue.append(_Payload(data, items))
            self._cond.notify_all()

    def offer(self, data: bytes, items: int) -> bool:
        """Queue a payload tracehound produced (evaluation events) if the budget has room."""
        if not self.budget.try_acquire(len(data)):
            self._report("dropped", "queue_full", items)
            return False
        with self._cond:
            self._queue.append(_Payload(data, items))
            self._cond.notify_all()
        return True

    @property
    def queued(self) -> int:
        return len(self._queue)

    def retry_hint(self) -> float:
        """Seconds until this lane's downstream may take more (0 when it is not backing off)."""
        return max(self._backoff_until - time.monotonic(), 0.0)

    # --- lifecycle -------------------------------------------------------------------------------

    def drain(self, deadline: float) -> bool:
        """Wait until everything queued is sent or dropped, at most until `deadline`."""
        with self._cond:
            return self._cond.wait_for(
                lambda: not self._queue and not self._busy, max(deadline - time.monotonic(), 0.0)
            )

    def close(self, deadline: float) -> None:
        """Stop after what is queued (retrying at most until `deadline`), then drop the rest."""
        self.drain(deadline)
        self._abandon.set()
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(max(deadline - time.monotonic(), 0.0) + 1.0)
        with self._cond:
            left = list(self._queue)
            self._queue.clear()
        for payload in left:
            self._drop(payload, "shutdown")
        self.sender.close()

    # --- the lane's thread -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue) or self._stop)
                if not self._queue:
                    return
                batch = [self._queue.popleft()]
                if self.sender.batches:
                    size = len(batch[0].data)
                    while self._queue and size + len(self._queue[0].data) <= MAX_BATCH_BYTES:
                        size += len(self._queue[0].data)
                        batch.append(self._queue.popleft())
                self._busy = True
            try:
                self._deliver(batch)
            except Exception:  # never let the lane die
                _logger.exception("forwarding %s failed unexpectedly", self.signal.name)
                for payload in batch:
                    self._drop(payload, "error")
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _deliver(self, batch: list[_Payload]) -> None:
        data = batch[0].data if len(batch) == 1 else b"".join(p.data for p in batch)
        items = sum(p.items for p in batch)
        started = time.monotonic()
        attempt = 0
        while True:
            outcome = self.sender.send(data)
            if outcome.ok:
                self._backoff_until = 0.0
                if outcome.rejected or outcome.message:
                    self.downstream_rejected += outcome.rejected
                    self._warn(
                        f"downstream accepted {self.signal.name} partially: {outcome.rejected} "
                        f"rejected ({outcome.message})"
                    )
                self.sent_items += items
                self.sent_payloads += len(batch)
                self._release(batch)
                self._report("success", "", items)
                return
            if not outcome.retryable:
                self._warn(f"downstream refused {self.signal.name}, dropped: {outcome.message}")
                for payload in batch:
                    self._drop(payload, "rejected")
                return
            delay = (
                outcome.retry_after
                if outcome.retry_after is not None
                else self.policy.backoff(attempt)
            )
            if time.monotonic() + delay - started > self.policy.max_elapsed:
                self._warn(
                    f"forwarding {self.signal.name} kept failing for "
                    f"{self.policy.max_elapsed:g} s, "
                    f"dropped: {outcome.message}"
                )
                for payload in batch:
                    self._drop(payload, "retries_exhausted")
                return
            self.retries += 1
            if self._on_retry is not None:
                self._on_retry(self.signal.name)
            self._warn(
                f"forwarding {self.signal.name} failed, retrying in {delay:.2f} s: "
                f"{outcome.message}"
            )
            self._backoff_until = time.monotonic() + delay
            if self._abandon.wait(delay):
                for payload in batch:
                    self._drop(payload, "shutdown")
                return
            attempt += 1

    def _release(self, batch: list[_Payload]) -> None:
        self.budget.release(sum(len(p.data) for p in batch))

    def _drop(self, payload: _Payload, reason: str) -> None:
        self.dropped_items += payload.items
        self.budget.release(len(payload.data))
        self._report("dropped", reason, payload.items)

    def _report(self, outcome: str, reason: str, items: int) -> None:
        if self._on_result is not None and items:
            try:
                self._on_result(self.signal.name, outcome, reason, items)
            except Exception:
                _logger.exception("metrics hook failed")

    def _warn(self, message: str) -> None:
        # High-frequency events are counted in metrics; the log gets one line per 10 s per lane.
        now = time.monotonic()
        if now - self._warned >= 10.0:
            self._warned = now
            _logger.warning(message, extra={"signal": self.signal.name})
