"""`Sidecar`: the receivers, the pipeline, the lanes and the sidecar's telemetry, wired together.

Lifecycle (one, for every stage: `start()` once, `shutdown()` idempotent and safe without start):

1. `start()`: evaluation worker, lanes, gRPC and HTTP receivers, Prometheus endpoint; logs one
   `listening` record with the bound addresses (ports may be 0 → ephemeral).
2. `shutdown()` — SIGTERM or SIGINT under `run()` — within one deadline (`shutdown_timeout`):
   stop accepting (health NOT_SERVING, `/readyz` 503, new exports refused with UNAVAILABLE), let
   in-flight requests finish, evaluate what is queued, finalize every trace (held spans get their
   results), forward everything (traces, events, a last collection of metrics), then close the
   lanes. Whatever the downstream has not taken by the deadline is dropped and counted. `run()`
   returns 0.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal as signals
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import FrameType
from typing import Any

from tracehound import _accel, names
from tracehound.config import ConfigError
from tracehound.emit import MetricsRecorder
from tracehound.evaluators.base import Evaluator, PluginError
from tracehound.server._forward import (
    Budget,
    FileSender,
    GrpcSender,
    HttpSender,
    Lane,
    NullSender,
    RetryPolicy,
    Sender,
)
from tracehound.server._grpc import HealthWatchers, build_grpc_server
from tracehound.server._http import OTLPHTTPServer, PrometheusServer
from tracehound.server._otlp import LOGS, METRICS, SIGNALS, TRACES, OTLPError, Signal
from tracehound.server._pipeline import Pipeline, Submitted
from tracehound.server._settings import Address, ServeSettings
from tracehound.server._telemetry import ServerMetrics, make_meter_provider, render_prometheus

__all__ = ["DEFAULT_EVALUATORS", "Sidecar", "build_serve_evaluators"]

_logger = logging.getLogger("tracehound.server")

DEFAULT_EVALUATORS = ("evidence", "loops", "drift")


def _version() -> str:
    try:
        return version("tracehound")
    except PackageNotFoundError:
        return "0"


def metrics_file(path: Path) -> Path:
    """Where `file:PATH` writes metrics: `PATH` with `.metrics` before its suffix."""
    return path.with_name(f"{path.stem}.metrics{path.suffix or '.jsonl'}")


def check_file_target(path: Path, settings: ServeSettings, *, create: bool) -> None:
    """`file:PATH` (and the metrics file beside it) can be appended to; raises `ConfigError`.
    `create`: open them (creating empty files), else only ask the file system (`--check-config`).
    """
    paths = [path, metrics_file(path)] if settings.metrics else [path]
    source = settings.sources.get("forward", "default")
    for target in paths:
        try:
            if create:
                with target.open("a", encoding="utf-8"):
                    pass
            else:
                where = target if target.exists() else target.parent
                if where != target and not where.is_dir():
                    raise NotADirectoryError(20, f"{where} is not a directory")
                if not os.access(where, os.W_OK):
                    raise PermissionError(13, "Permission denied")
        except OSError as exc:
            raise ConfigError(
                f"forward (from {source}): cannot write {target}: {exc.strerror or exc}"
            ) from None


def load_tls(settings: ServeSettings) -> tuple[ssl.SSLContext, bytes, bytes] | None:
    """The receivers' TLS material from `tls_cert` / `tls_key`: an `SSLContext` for the HTTP
    receiver and (PEM key, PEM chain) for gRPC; None when TLS is off. Raises `ConfigError`."""
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    material: dict[str, bytes] = {}
    for name in ("tls_cert", "tls_key"):
        path = Path(getattr(settings, name)).expanduser()
        try:
            material[name] = path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"{name} (from {settings.sources.get(name, 'default')}): cannot read {path}: "
                f"{exc.strerror or exc}"
            ) from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(
            Path(settings.tls_cert).expanduser(), Path(settings.tls_key).expanduser()
        )
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc.strerror or "unreadable"
        raise ConfigError(
            f"tls_cert (from {settings.sources.get('tls_cert', 'default')}): {settings.tls_cert} "
            f"with tls_key {settings.tls_key} is not a PEM certificate and its key "
            f"({str(reason).lower().replace('_', ' ')})"
        ) from None
    return context, material["tls_key"], material["tls_cert"]


@contextlib.contextmanager
def _listening(address: Address, what: str) -> Iterator[None]:
    """Turns a bind failure into one `OSError` line naming the address and the receiver."""
    try:
        yield
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise OSError(f"cannot listen on {address} ({what}): {reason}") from None


def build_serve_evaluators(
    settings: ServeSettings, *, open_store: bool = True
) -> tuple[list[Evaluator], Any]:
    """Evaluators by name (`drift` gets the baseline store of `settings.baselines`), and
    `expectations` when the settings file has `[expectations]` rules; returns them with the
    store to close at shutdown (None without drift). Raises `ConfigError`."""
    from tracehound.cli import select_evaluators
    from tracehound.config import EXPECTATIONS, configured_expectations

    named = settings.evaluators or ()
    expectations = configured_expectations(
        settings.config_file,
        required=EXPECTATIONS in named,
        source=settings.config_file or "--config / TRACEHOUND_CONFIG",
    )
    wanted = [n for n in (settings.evaluators or DEFAULT_EVALUATORS) if n != EXPECTATIONS]
    others = [n for n in wanted if n != "drift"]
    try:
        built = iter(select_evaluators(others) if others else [])  # in the order of `others`
    except PluginError as exc:
        raise ConfigError(f"evaluators: {exc}") from None
    store = None
    evaluators: list[Evaluator] = []
    for name in wanted:
        if name == "drift":
            drift, store = _drift(settings.baselines, open_store)
            if drift is not None:
                evaluators.append(drift)
        else:
            evaluators.append(next(built))
    if expectations is not None:  # `[expectations]` rules in the settings file turn it on
        evaluators.append(expectations)
    return evaluators, store


def _drift(location: str | None, open_it: bool) -> tuple[Evaluator | None, Any]:
    try:
        from tracehound.baselines import BaselineStoreError, open_store, shown_location
        from tracehound.evaluators.drift import DriftEvaluator
    except ImportError as exc:
        raise ConfigError(f"the drift evaluator is not available: {exc}") from None
    from tracehound.drift import default_embedder, embedder_setting

    try:
        embedder_setting()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if not open_it:
        return None, None
    try:
        embedder = default_embedder()
    except (ImportError, OSError, ValueError) as exc:
        raise ConfigError(f"drift embedder: {exc}") from None
    try:
        store = open_store(location)  # a Redis URL connects here: unreachable fails start-up
    except BaselineStoreError as exc:  # it names the store (a URL without its password)
        raise ConfigError(f"baselines: {exc}") from None
    except OSError as exc:
        shown = shown_location(location) if location else "(default)"
        raise ConfigError(f"baselines {shown}: {exc}") from None
    return DriftEvaluator(store, embedder=embedder), store


class Sidecar:
    """`tracehound serve` as an object: build from `ServeSettings`, `start()`, `shutdown()`.

    `evaluators` overrides the evaluators named by the settings (tests, embedding).
    """

    def __init__(
        self, settings: ServeSettings, evaluators: Sequence[Evaluator] | None = None
    ) -> None:
        self.settings = settings
        self._version = _version()
        self._store: Any = None
        if evaluators is None:
            built, self._store = build_serve_evaluators(settings)
            evaluators = built
        self.evaluator_names = [e.name for e in evaluators]
        if settings.forward.kind == "file":
            assert settings.forward.path is not None
            check_file_target(settings.forward.path, settings, create=True)
        self._tls = load_tls(settings)
        policy = RetryPolicy(
            settings.forward_retry_initial,
            settings.forward_retry_max_interval,
            settings.forward_retry_max_elapsed,
        )
        self.metrics: ServerMetrics | None = None
        file_lock = threading.Lock()
        self.lanes: dict[str, Lane] = {}
        for name, signal in SIGNALS.items():
            self.lanes[name] = Lane(
                signal,
                self._sender(signal, file_lock),
                Budget(settings.max_queue_bytes),
                policy,
                on_result=self._forwarded,
                on_retry=self._retried,
            )
        forwarding = settings.forward.kind != "none"
        exported = forwarding and settings.metrics
        pulled = settings.prometheus is not None
        self.meter_provider, self._pull = make_meter_provider(
            self.lanes[METRICS.name] if exported else None, pulled
        )
        self.metrics = ServerMetrics(self.meter_provider, self._version)
        # Evaluation metrics are recorded per span and per result, ~6-11 us each in the SDK: with
        # no reader (self-metrics off, no Prometheus) nobody could read them, so none are made.
        self.recorder = MetricsRecorder(self.meter_provider) if exported or pulled else None
        self.pipeline = Pipeline(
            settings,
            evaluators,
            self.lanes,
            recorder=self.recorder,
            on_items=self.metrics.items,
            scope_version=self._version,
        )
        self._register_gauges()
        self._grpc: Any = None
        self._health_watchers = HealthWatchers(self.ready)  # gRPC health `Watch` streams
        self._http: OTLPHTTPServer | None = None
        self._prometheus: PrometheusServer | None = None
        self._threads: list[threading.Thread] = []
        self.grpc_address: Address | None = None
        self.http_address: Address | None = None
        self.prometheus_address: Address | None = None
        self._started = False
        self._stopping = False
        self._stop_lock = threading.Lock()
        self._stopped = threading.Event()
        self.clean_shutdown: bool | None = None
        self._quiet = False

    # --- wiring ----------------------------------------------------------------------------------

    def _sender(self, signal: Signal, file_lock: threading.Lock) -> Sender:
        forward = self.settings.forward
        if forward.kind == "file":
            assert forward.path is not None
            path = forward.path
            if signal is METRICS:  # beside it: the traces-and-logs file stays `eval`-readable
                path = metrics_file(path)
            return FileSender(path, signal, file_lock)
        if forward.kind == "otlp":
            target = forward.signals[signal.name]
            if target.protocol == "grpc":
                return GrpcSender(target, signal)
            return HttpSender(target, signal)
        return NullSender()

    def _forwarded(self, signal: str, outcome: str, reason: str, count: int) -> None:
        if self.metrics is not None:
            self.metrics.forwarded(signal, outcome, reason, count)

    def _retried(self, signal: str) -> None:
        if self.metrics is not None:
            self.metrics.retry(signal)

    def _register_gauges(self) -> None:
        assert self.metrics is not None
        lanes = self.lanes
        self.metrics.gauge(
            names.SERVE_METRIC_QUEUE_SIZE,
            "By",
            "Bytes accepted and not yet forwarded",
            lambda: [
                (float(lane.budget.used), {names.METRIC_ATTR_SIGNAL: s})
                for s, lane in lanes.items()
            ],
        )
        pipeline = self.pipeline
        self.metrics.gauge(
            names.SERVE_METRIC_HELD_SPANS,
            "{span}",
            "Spans held until their trace is finalized",
            lambda: [(float(pipeline.held_spans), {})],
        )
        if self.recorder is not None:
            self.recorder.observe(names.METRIC_TRACES_ACTIVE, lambda: pipeline.engine.active_traces)

    # --- receivers' entry point ------------------------------------------------------------------

    def submit(
        self, signal: Signal, message: Any, raw: bytes | None, size: int, transport: str
    ) -> Submitted:
        if signal is TRACES:
            answer = self.pipeline.submit_traces(message, raw, size)
        elif signal is LOGS:
            answer = self.pipeline.submit_logs(message, raw, size)
        else:
            answer = self.pipeline.submit_metrics(message, raw, size)
        if self.metrics is not None:
            self.metrics.request(
                signal.name, transport, "partial" if answer.rejected else "success"
            )
        if answer.rejected:
            _logger.warning(
                answer.message, extra={"signal": signal.name, "rejected": answer.rejected}
            )
        return answer

    def _grpc_error(self, signal: Signal, error: OTLPError) -> None:
        self._count_error(signal, "grpc", error)

    def _http_error(self, signal: Signal, error: OTLPError) -> None:
        self._count_error(signal, "http", error)

    def _count_error(self, signal: Signal, transport: str, error: OTLPError) -> None:
        outcome = {
            400: "invalid",
            401: "unauthenticated",
            415: "invalid",
            413: "too_large",
            503: "refused",
        }.get(error.http_status, "error")
        if self.metrics is not None:
            self.metrics.request(signal.name, transport, outcome)
        if outcome != "refused":
            _logger.info(
                "refused an export request: %s",
                error.message,
                extra={"signal": signal.name, "transport": transport, "outcome": outcome},
            )

    def live(self) -> bool:
        return self.pipeline.alive and not self._stopped.is_set()

    def ready(self) -> bool:
        budget = self.lanes[TRACES.name].budget
        return self._started and not self._stopping and self.pipeline.alive and not budget.full

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Sidecar:
        if self._started:
            return self
        settings = self.settings
        self.pipeline.start()
        try:
            if settings.otlp_grpc is not None:
                server, port = build_grpc_server(
                    settings.otlp_grpc.host,
                    settings.otlp_grpc.port,
                    self.submit,
                    ready=self.ready,
                    on_error=self._grpc_error,
                    max_request_bytes=settings.max_request_bytes,
                    watchers=self._health_watchers,
                    tls=self._tls[1:] if self._tls else None,
                    token=settings.receiver_token,
                )
                server.start()
                self._grpc = server
                self.grpc_address = Address(settings.otlp_grpc.host, port)
            if settings.otlp_http is not None:
                with _listening(settings.otlp_http, "OTLP/HTTP"):
                    http = OTLPHTTPServer(
                        (settings.otlp_http.host, settings.otlp_http.port),
                        self.submit,
                        live=self.live,
                        ready=self.ready,
                        on_error=self._http_error,
                        max_request_bytes=settings.max_request_bytes,
                        tls=self._tls[0] if self._tls else None,
                        token=settings.receiver_token,
                    )
                self._http = http
                self.http_address = Address(settings.otlp_http.host, http.server_address[1])
                self._serve_in_thread(http, "tracehound-http")
            if settings.prometheus is not None:
                with _listening(settings.prometheus, "Prometheus"):
                    prom = PrometheusServer(
                        (settings.prometheus.host, settings.prometheus.port),
                        self.render_prometheus,
                    )
                self._prometheus = prom
                self.prometheus_address = Address(settings.prometheus.host, prom.server_address[1])
                self._serve_in_thread(prom, "tracehound-prometheus")
        except OSError:
            self._started = True
            self._quiet = True  # the caller reports the one line; nothing was accepted
            self.shutdown()
            raise
        self._started = True
        self._health_watchers.changed()  # watches opened while starting: now SERVING
        _logger.info(
            "listening",
            extra={
                "otlp_grpc": str(self.grpc_address) if self.grpc_address else None,
                "otlp_http": str(self.http_address) if self.http_address else None,
                "prometheus": str(self.prometheus_address) if self.prometheus_address else None,
                "forward": settings.forward.describe(),
                "mode": settings.mode,
                "evaluators": self.evaluator_names,
                "version": self._version,
                "accelerator": _accel.status(),
                "accelerator_fallbacks": _accel.fallbacks(),
            },
        )
        return self

    def _serve_in_thread(self, server: Any, name: str) -> None:
        thread = threading.Thread(
            name=name, target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
        )
        thread.start()
        self._threads.append(thread)

    def render_prometheus(self) -> str:
        return render_prometheus(self._pull.get_metrics_data() if self._pull is not None else None)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop accepting, finalize and forward everything, within one deadline. Idempotent;
        True when everything accepted was forwarded (or dropped by the downstream's own verdict)
        before the deadline."""
        with self._stop_lock:
            if self._stopping:
                self._stopped.wait(
                    timeout if timeout is not None else self.settings.shutdown_timeout
                )
                return bool(self.clean_shutdown)
            self._stopping = True
        started = time.monotonic()
        deadline = started + (timeout if timeout is not None else self.settings.shutdown_timeout)
        clean = True
        try:
            if not self._quiet:
                _logger.info("shutting down", extra={"deadline_s": round(deadline - started, 3)})
            grace = max(min(2.0, deadline - time.monotonic()), 0.0)
            # Watch streams get NOT_SERVING and end, so that they do not hold the grace below.
            self._health_watchers.close()
            if self._grpc is not None:
                self._grpc.stop(grace).wait(grace + 1.0)
            if self._http is not None:
                self._http.closing = True
                self._http.shutdown()
                self._http.server_close()
                self._http.wait_in_flight(grace)
            if self.pipeline.alive:
                clean = self.pipeline.stop(deadline) and clean
            try:
                self.meter_provider.force_flush(
                    timeout_millis=max((deadline - time.monotonic()) * 1e3, 0.0)
                )
            except Exception:
                _logger.exception("flushing tracehound's metrics failed")
            for lane in self.lanes.values():
                clean = lane.drain(deadline) and clean
            for lane in self.lanes.values():
                lane.close(deadline)
            try:
                self.meter_provider.shutdown(timeout_millis=1_000)
            except Exception:
                _logger.exception("shutting the meter provider down failed")
            if self._prometheus is not None:
                self._prometheus.shutdown()
                self._prometheus.server_close()
            if self._store is not None:
                try:
                    self._store.close()
                except Exception:
                    _logger.exception("closing the baseline store failed")
        finally:
            self.clean_shutdown = clean
            self._stopped.set()
        if self._quiet:
            return clean
        stats = self.pipeline.stats
        _logger.info(
            "stopped",
            extra={
                "clean": clean,
                "seconds": round(time.monotonic() - started, 3),
                "spans_accepted": stats.spans_accepted,
                "spans_rejected": stats.spans_rejected,
                "spans_duplicate": stats.spans_duplicate,
                "spans_evaluated": stats.spans_evaluated,
                "refused_requests": stats.refused_requests,
                "forwarded": {s: lane.sent_items for s, lane in self.lanes.items()},
                "dropped": {s: lane.dropped_items for s, lane in self.lanes.items()},
            },
        )
        return clean

    def run(self) -> int:
        """Start, serve until SIGTERM/SIGINT, shut down within the deadline; 0."""
        stop = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            _logger.info("signal received", extra={"signal_number": signum})
            stop.set()

        previous = {s: signals.signal(s, on_signal) for s in (signals.SIGTERM, signals.SIGINT)}
        try:
            self.start()
            while not stop.wait(1.0):
                if not self.pipeline.alive:  # never expected: the worker guards every step
                    _logger.error("the evaluation worker stopped; shutting down")
                    break
        finally:
            self.shutdown()
            for s, handler in previous.items():
                signals.signal(s, handler)
        return 0


# Young-generation collections every 700 allocations keep re-scanning the per-trace state the
# engine holds for a few seconds; in the sidecar's own process (`tracehound serve` calls this;
# never a library user's process) they are made rarer, and what start-up imported is left out
# of every scan.
# Measured on the GenAI workload of benchmarks/sidecar_throughput.py: ~10 % less CPU per span.
GC_THRESHOLDS = (10_000, 20, 10)


def tune_gc() -> None:
    """Freeze what exists now (modules, settings) and space out collections (own process only)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
