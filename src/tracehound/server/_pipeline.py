"""The sidecar's pipeline: admission, the evaluation worker, in-place annotation, hold/stream.

Threads and queues (the Collector's shape: receivers → one processing stage → exporters):

- **Receiver threads** (gRPC and HTTP handlers) call `submit_traces` / `submit_logs` /
  `submit_metrics` with a parsed request. They charge the request's bytes to its signal's
  `Budget` — or refuse with `Overloaded` (UNAVAILABLE / 503, retryable) when it is full — check
  the ids of every span (a span with a bad trace, span or parent id is cut out and counted in
  `partial_success`), drop duplicates, and then either hand the request to the worker (it may
  hold GenAI, or belongs to a trace the engine knows) or put it straight on the traces lane,
  as received. They never evaluate and never block on the downstream.
- **One worker thread** owns the `Engine`, like the processor's worker: it takes requests in
  arrival order, views each span, feeds the engine, writes each span's results into it
  (`tracehound.*` attributes, optional span events and redaction), cuts out the spans that must
  wait (`stream`: the local root of a GenAI trace; `hold`: every span of an evaluated trace) and
  hands the rest of the request to the traces lane — the bytes as received when nothing
  changed. Every `poll_interval` it finalizes due traces (`Engine.poll`), writes the trace
  results onto the held root, and forwards the held spans. Results also leave as
  `gen_ai.evaluation.result` log records (written as bytes, on the logs lane) and as metrics.

  With the C accelerator, a request the receiver's scan validated stays bytes all the way
  (`_annotate_wire`): one C call (`read_trace_views`) reads every span, scope and resource
  and makes the span views (those of `SpanView.from_wire`), results are encoded and appended
  to their spans' bytes, held spans are kept as their bytes, and the request to forward is
  spliced from the bytes received (`splice_trace_request`: spans cut out, lengths rewritten).
  Otherwise (redaction, JSON, no accelerator) the request is parsed by upb, views are
  `SpanView.from_proto`, results are written into the protobuf spans in place and the request
  is re-serialized once.
- **One lane thread per signal** sends to the downstream (`tracehound.server._forward`).

Cheap paths. A request whose bytes hold no GenAI key (`tracehound._wire`) and none of whose
spans belongs to a trace the engine knows never reaches the worker: the receiver reads every
span's ids from the bytes in one pass (the C scan, else a regex: `_fast_keys`; the span-by-span
pass only when that does not account for every span), dedupes them with set operations and
forwards the request as received. With the C accelerator such a request is not even parsed:
trace requests arrive here as bytes, and the same scan checks them as upb would (wire structure,
UTF-8 strings); upb parses only the requests the span-by-span pass or the worker's upb path
needs.

A trace becomes known when a request that may hold GenAI, or a GenAI log event, of it is
accepted — before it is queued, so a later non-GenAI span of it (the HTTP root, say) goes to the
engine after it and gets the trace results. Duplicates (at-least-once
delivery) are dropped by (trace id, span id) over the last `DEDUPE_WINDOW`–2×`DEDUPE_WINDOW`
spans, whether or not they reach the engine.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field
from operator import itemgetter, methodcaller
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracehound import names
from tracehound._wire import (
    may_hold_genai,
    read_trace_views,
    scan_trace_request,
    splice_trace_request,
)
from tracehound.conventions.base import slots_maker
from tracehound.emit import (
    MetricsRecorder,
    event_attributes,
    result_measurements,
    root_attributes,
    span_attributes,
    trace_agent,
)
from tracehound.engine import (
    SPAN_DEFERRED,
    SPAN_DUPLICATE,
    SPAN_LATE,
    SPAN_PLAIN,
    Engine,
    FinalizedTrace,
    SpanOutcome,
)
from tracehound.evaluators.base import EvaluationResult, Evaluator
from tracehound.history import HistoryWriter, history_store_of
from tracehound.server._forward import Lane
from tracehound.server._otlp import (
    LOGS,
    METRICS,
    SPAN_ATTRIBUTES_TAG,
    TRACES,
    BadRequest,
    Overloaded,
    add_event,
    encoded_attributes,
    encoded_event,
    encoded_result_attributes,
    framed_result_records,
    framed_span_result_records,
    logs_request_bytes,
    merge_attributes,
    parse_protobuf,
    redact_span,
    traces_request_bytes,
)
from tracehound.server._settings import ServeSettings
from tracehound.spans import AttributeValue, LogView, ResourceView, SpanView

__all__ = ["DEDUPE_WINDOW", "Pipeline", "PipelineStats", "Submitted"]

_logger = logging.getLogger("tracehound.server")

DEDUPE_WINDOW = 100_000
"""Spans remembered for duplicate detection (two generations of this size)."""
_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_MAX_MESSAGES = 3


@dataclass(frozen=True, slots=True)
class Submitted:
    """What a receiver answers: rejected items and why (an English message, or '')."""

    rejected: int = 0
    message: str = ""


@dataclass(slots=True)
class PipelineStats:
    spans_accepted: int = 0
    spans_rejected: int = 0
    spans_duplicate: int = 0
    spans_bypassed: int = 0
    spans_evaluated: int = 0
    spans_held: int = 0
    log_records_accepted: int = 0
    log_records_rejected: int = 0
    refused_requests: int = 0
    events_emitted: int = 0
    events_dropped: int = 0
    traces_finalized: int = 0
    internal_errors: int = 0
    runs_recorded: int = 0
    history_errors: int = 0


@dataclass(slots=True)
class _Work:
    kind: str
    request: Any
    raw: bytes | None
    size: int
    items: int
    modified: bool
    keys: list[bytes] = field(default_factory=list)
    # From the receiver's scan of `raw` (C accelerator), when `raw` is still the request as is:
    # whether it may hold GenAI (None: not scanned) and each span's range in `raw`.
    genai: bool | None = None
    offsets: list[int] | None = None
    # When `request` is None (bytes only): `read_trace_views` of `raw` (scopes, span views).
    wire: tuple[list[tuple[Any, ...]], list[Any]] | None = None


@dataclass(slots=True)
class _Container:
    """Resource and scope of held spans, serialized (a held span must not pin its request)."""

    resource: bytes
    resource_schema_url: str
    scope: bytes
    scope_schema_url: str


@dataclass(slots=True)
class _Held:
    # the protobuf span, or its bytes (spans of requests never parsed); None: cut, never copied
    span: Any
    span_id: str
    container: _Container
    results: tuple[EvaluationResult, ...]
    present: Container[str] | None  # the span's attribute keys, for `_write`
    end_ns: int = 0  # of a span held as bytes (the time of its result events)


# Held spans are made per root span (stream) or per span (hold): without the dataclass __init__
_new_held = slots_maker(_Held)


class _Seen:
    """Two generations of (trace id + span id) keys: O(1) membership, bounded memory."""

    __slots__ = ("_current", "_limit", "_previous")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._current: set[bytes] = set()
        self._previous: set[bytes] = set()

    def add_all_new(self, keys: list[bytes]) -> bool:
        """Add `keys` if none was seen (False, nothing added, otherwise). C-speed set ops."""
        current = self._current
        if not (current.isdisjoint(keys) and self._previous.isdisjoint(keys)):
            return False
        current.update(keys)
        if len(current) >= self._limit:
            self._previous, self._current = current, set()
        return True

    def check_and_add(self, key: bytes) -> bool:
        if key in self._current or key in self._previous:
            return True
        current = self._current
        current.add(key)
        if len(current) >= self._limit:
            self._previous, self._current = current, set()
        return False


def _is_own_scope(scope_name: str) -> bool:
    return scope_name == names.SCOPE_NAME or scope_name.startswith(names.SCOPE_NAME + ".")


class Pipeline:
    """Receivers' entry points, the evaluation worker and the held spans. See the module doc."""

    def __init__(
        self,
        settings: ServeSettings,
        evaluators: Sequence[Evaluator],
        lanes: dict[str, Lane],
        *,
        recorder: MetricsRecorder | None = None,
        on_items: Callable[[str, str, int], None] | None = None,
        scope_version: str = "0",
    ) -> None:
        self.settings = settings
        self.engine = Engine(evaluators, settings.engine)
        history = settings.history
        # the run history lives in the drift evaluator's store (none without drift)
        store = history_store_of(evaluators) if history.enabled else None
        self._history = (
            HistoryWriter(lambda: store, retention=history.retention, content=history.content)
            if store is not None
            else None
        )
        self.lanes = lanes
        self.stats = PipelineStats()
        self._recorder = recorder
        self._on_items = on_items
        self._scope_version = scope_version
        self._hold = settings.mode == "hold"
        self._redact = settings.redact
        self._span_events = settings.span_events
        self._emit_events = settings.events
        self._poll_interval = settings.engine.poll_interval
        self._work: deque[_Work] = deque()
        self._wake = threading.Event()
        self._idle = threading.Condition()
        self._busy = False
        self._stopping = False
        self._seen = _Seen(DEDUPE_WINDOW)
        cache = settings.engine.max_traces + settings.engine.finalized_cache_size
        self._known_limit = max(cache, 1)
        self._known: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()  # the dedupe window and the known traces
        self._held: dict[str, list[_Held]] = {}
        # Spans of earlier requests whose evaluation the engine deferred (`SPAN_DEFERRED`), by
        # (trace id, span id): cut out until evaluated (`stream`; in `hold` they are in `_held`
        # too, and only get their results)
        self._deferred: dict[tuple[str, str], _Held] = {}
        self._reorder_counts = (0, 0)  # the engine's, as last recorded as metrics
        # each GenAI trace's resource, serialized (in a 1-tuple: records are grouped by its id);
        # its keys are the traces with a GenAI span (whose root span is held)
        self._trace_resource: dict[str, tuple[bytes]] = {}
        self._released: list[_Held] = []
        # `gen_ai.evaluation.result` records by resource, until the next flush: [resource, the
        # records serialized (each item those of one span or trace), how many]
        self._events: dict[int, list[Any]] = {}
        self._scope_bytes = InstrumentationScope(
            name=names.SCOPE_NAME, version=scope_version
        ).SerializeToString()
        self._error_logged = False
        self._thread = threading.Thread(name="tracehound-evaluate", target=self._run, daemon=True)

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def accepting(self) -> bool:
        return not self._stopping

    @property
    def held_spans(self) -> int:
        """Spans held until their trace is finalized, or (`stream`) until they are evaluated."""
        held = sum(len(v) for v in self._held.values())
        return held if self._hold else held + len(self._deferred)

    @property
    def queued_requests(self) -> int:
        return len(self._work)

    def stop(self, deadline: float) -> bool:
        """Refuse new requests, evaluate what is queued, finalize every trace and hand all held
        spans and events to the lanes. True if the worker finished before `deadline`."""
        self._stopping = True
        self._wake.set()
        self._thread.join(max(deadline - time.monotonic(), 0.0))
        return not self._thread.is_alive()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the work queue is empty and the worker idle (tests, benchmarks)."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._work and not self._busy, timeout)

    # --- receivers' side (any thread) ------------------------------------------------------------

    def _admit(self, signal: str, size: int, items: int) -> None:
        lane = self.lanes[signal]
        if self._stopping or not lane.budget.try_acquire(size):
            with self._lock:
                self.stats.refused_requests += 1
            if self._on_items is not None:
                self._on_items(signal, "refused", items)
            hint = min(max(lane.retry_hint(), 1.0), 5.0)
            reason = "shutting down" if self._stopping else "tracehound's queue is full"
            raise Overloaded(f"{reason}: retry later", retry_after=float(round(hint)))

    def submit_traces(self, request: Any, raw: bytes | None, size: int) -> Submitted:
        """Take an `ExportTraceServiceRequest`: parsed (`raw`: its bytes, None for JSON), or as
        protobuf bytes only (`request` None), parsed here only when needed.

        One pass over the spans, under the pipeline's lock: cut out spans with bad ids (counted
        in partial_success) and duplicates; when the bytes may hold GenAI, mark the request's
        traces as known (so that a later non-GenAI span of them — the HTTP root, say — goes to
        the engine too, after them); otherwise, when no span belongs to a known trace, forward
        the request straight to the traces lane, as received: the worker never sees it. With the
        C accelerator, such a request is checked as upb would check it by the same scan that
        reads its ids, and is never parsed; nor is a request for the worker whose spans
        `read_trace_views` reads (it goes to the worker as bytes, with the views).
        """
        scan = None
        if request is None:
            assert raw is not None
            scan = scan_trace_request(raw, validate=True)
            if scan is None:  # not validated here: upb checks it
                request = parse_protobuf(TRACES, raw)
        if scan is not None:
            total = len(scan[1])
        else:
            total = 0
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    total += len(ss.spans)
        self._admit(TRACES.name, size, total)
        if raw is None:  # JSON: the bytes of what was parsed, for the pre-check and forwarding
            raw = request.SerializeToString()
        modified = False
        if scan is None:
            scan = scan_trace_request(raw)
        offsets: list[int] | None = None
        if scan is not None:
            genai, offsets = scan[0], scan[2]
            fast = _checked_keys(scan[1], total)
        else:
            genai = may_hold_genai(raw)
            fast = _fast_keys(raw, total)
        keys: list[bytes] = []
        messages: list[str] = []
        rejected = duplicates = 0
        routed = genai
        seen = self._seen
        known = self._known
        with self._lock:
            fast_done = fast is not None and seen.add_all_new(fast[0])
            if fast_done:
                assert fast is not None
                keys = fast[0]
                if genai:
                    for trace_id in fast[1]:
                        self._touch(trace_id)
                else:
                    routed = not known.keys().isdisjoint(fast[1])
        # A routed request the scan validated goes to the worker as bytes, with the span views
        # `read_trace_views` made of them; upb parses it only when that cannot be read so.
        wire: tuple[list[tuple[Any, ...]], list[Any]] | None = None
        if request is None and routed and fast_done and not self._redact:
            assert fast is not None
            wire = read_trace_views(raw, SpanView, ResourceView.from_wire)
            if wire is not None and len(wire[1]) != len(fast[0]):
                wire = None
        if request is None and (wire is None if routed else not fast_done):
            try:
                request = parse_protobuf(TRACES, raw)
            except BadRequest:
                if fast_done:  # validated by the scan, yet upb refuses it: never lose it
                    self.stats.internal_errors += 1
                    _logger.error("a request the byte scan accepted does not parse; forwarded")
                    routed = False
                else:
                    self.lanes[TRACES.name].budget.release(size)
                    raise
        with self._lock:
            request_list: Any = () if fast_done else request.resource_spans
            for rs in request_list:
                for ss in rs.scope_spans:
                    spans = ss.spans
                    cut: list[int] | None = None
                    for index, span in enumerate(spans):
                        trace_id = span.trace_id
                        span_id = span.span_id
                        if (
                            len(trace_id) != 16
                            or len(span_id) != 8
                            or trace_id == _ZERO_TRACE
                            or span_id == _ZERO_SPAN
                            or len(span.parent_span_id) not in (0, 8)
                        ):
                            if cut is None:
                                cut = []
                            cut.append(index)
                            rejected += 1
                            if len(messages) < _MAX_MESSAGES:
                                messages.append(
                                    f"span {span.name!r}: trace id must be 16 non-zero bytes, "
                                    "span id 8 non-zero bytes, parent span id empty or 8 bytes"
                                )
                            continue
                        key = trace_id + span_id
                        if seen.check_and_add(key):
                            if cut is None:
                                cut = []
                            cut.append(index)
                            duplicates += 1
                            continue
                        keys.append(key)
                        if genai:
                            self._touch(trace_id)
                        elif not routed and trace_id in known:
                            routed = True
                    if cut:
                        for index in reversed(cut):
                            del spans[index]
        stats = self.stats
        with self._lock:  # receivers run concurrently
            stats.spans_rejected += rejected
            stats.spans_duplicate += duplicates
            stats.spans_accepted += len(keys)
        if self._on_items is not None:
            self._on_items(TRACES.name, "accepted", len(keys))
            if rejected:
                self._on_items(TRACES.name, "rejected", rejected)
            if duplicates:
                self._on_items(TRACES.name, "duplicate", duplicates)
        lane = self.lanes[TRACES.name]
        if not keys:
            lane.budget.release(size)
        elif routed:
            modified = modified or bool(rejected or duplicates)
            self._enqueue(
                _Work(
                    "traces",
                    request,
                    raw,
                    size,
                    len(keys),
                    modified,
                    keys,
                    genai if scan is not None else None,
                    None if modified else offsets,
                    wire,
                )
            )
        else:
            with self._lock:
                stats.spans_bypassed += len(keys)
            if modified or rejected or duplicates:
                _drop_empty(request)
                raw = request.SerializeToString()
            lane.put(raw, len(keys), reserved=size)
        return _submitted(rejected, "spans", messages)

    def submit_logs(self, request: Any, raw: bytes | None, size: int) -> Submitted:
        total = 0
        for rl in request.resource_logs:
            for sl in rl.scope_logs:
                total += len(sl.log_records)
        self._admit(LOGS.name, size, total)
        messages: list[str] = []
        rejected = 0
        for rl in request.resource_logs:
            for sl in rl.scope_logs:
                records = sl.log_records
                bad = [
                    i
                    for i, r in enumerate(records)
                    if len(r.trace_id) not in (0, 16) or len(r.span_id) not in (0, 8)
                ]
                for index in reversed(bad):
                    del records[index]
                rejected += len(bad)
        if rejected:
            messages.append(
                "log records with a trace id that is not 16 bytes or a span id that is not 8"
            )
        if raw is None or b"gen_ai." in raw:
            # Their traces are known from now on: later non-GenAI spans of them go to the engine.
            with self._lock:
                for rl in request.resource_logs:
                    for sl in rl.scope_logs:
                        for record in sl.log_records:
                            if (
                                record.trace_id
                                and record.span_id
                                and (
                                    not record.event_name or record.event_name.startswith("gen_ai.")
                                )
                            ):
                                self._touch(bytes(record.trace_id))
        accepted = total - rejected
        with self._lock:
            self.stats.log_records_rejected += rejected
            self.stats.log_records_accepted += accepted
        if self._on_items is not None:
            self._on_items(LOGS.name, "accepted", accepted)
            if rejected:
                self._on_items(LOGS.name, "rejected", rejected)
        if not accepted:
            self.lanes[LOGS.name].budget.release(size)
        else:
            self._enqueue(_Work("logs", request, raw, size, accepted, bool(rejected)))
        return _submitted(rejected, "log records", messages)

    def submit_metrics(self, request: Any, raw: bytes | None, size: int) -> Submitted:
        """Metrics pass through: straight to the metrics lane, not evaluated."""
        count = 0
        for rm in request.resource_metrics:
            for sm in rm.scope_metrics:
                count += len(sm.metrics)
        self._admit(METRICS.name, size, count)
        if self._on_items is not None:
            self._on_items(METRICS.name, "accepted", count)
        if not count:
            self.lanes[METRICS.name].budget.release(size)
            return Submitted()
        payload = raw if raw is not None else request.SerializeToString()
        self.lanes[METRICS.name].put(payload, count, reserved=size)
        return Submitted()

    def _enqueue(self, work: _Work) -> None:
        self._work.append(work)
        self._wake.set()

    # --- the worker ------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            if not self._stopping:
                idle = not self.engine.active_traces and not self._held
                self._wake.wait(2.0 if idle else self._poll_interval)
                self._wake.clear()
            stopping = self._stopping
            with self._idle:
                self._busy = True
            try:
                self._drain()
                self._guarded(lambda: self._finalize(self.engine.poll()))
                if stopping and not self._work:
                    self._guarded(lambda: self._finalize(self.engine.flush()))
                    self._guarded(self._flush_outputs)
                    return
                self._guarded(self._flush_outputs)
            finally:
                with self._idle:
                    self._busy = False
                    self._idle.notify_all()

    def _drain(self) -> None:
        work = self._work
        while work:
            item = work.popleft()
            if item.kind == "traces":
                self._guarded(lambda item=item: self._process_traces(item))  # type: ignore[misc]
            else:
                self._guarded(lambda item=item: self._process_logs(item))  # type: ignore[misc]
            if len(self._released) >= 512 or len(self._events) >= 64:
                self._guarded(self._flush_outputs)

    def _guarded(self, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception:
            self.stats.internal_errors += 1
            if not self._error_logged:
                self._error_logged = True
                _logger.exception(
                    "internal error in the evaluation worker (further ones are counted)"
                )

    def _touch(self, trace_key: bytes) -> None:
        known = self._known
        if trace_key in known:
            known.move_to_end(trace_key)
            return
        known[trace_key] = None
        if len(known) > self._known_limit:
            known.popitem(last=False)

    def _process_traces(self, work: _Work) -> None:
        request = work.request
        raw = work.raw
        lane = self.lanes[TRACES.name]
        if request is None:  # validated by the receiver's scan and never parsed
            assert raw is not None
            held: list[_Held] = []
            try:
                payload, remaining = self._annotate_wire(raw, work, held)
            except Exception:
                # Never lose accepted spans to a bug: forward the request as received (the
                # spans held from it so far are left out of the held spans' release).
                self.stats.internal_errors += 1
                _logger.exception("evaluating a request failed; forwarding it unevaluated")
                for item in held:
                    item.span = None
                payload, remaining = raw, work.items
            if remaining:
                lane.put(payload, remaining, reserved=work.size)
            else:
                lane.budget.release(work.size)
            return
        try:
            modified = self._annotate_request(request, raw, work) or work.modified
        except Exception:
            # Never lose accepted spans to a bug: forward what we have, as it is now.
            self.stats.internal_errors += 1
            _logger.exception("evaluating a request failed; forwarding it unevaluated")
            modified = True
        remaining = _drop_empty(request) if modified else work.items
        if not remaining:
            lane.budget.release(work.size)
            return
        payload = raw if raw is not None and not modified else request.SerializeToString()
        lane.put(payload, remaining, reserved=work.size)

    def _annotate_request(self, request: Any, raw: bytes | None, work: _Work) -> bool:
        """Feed every span to the engine (or past it) and edit the request in place; True when
        anything in it changed."""
        engine = self.engine
        stats = self.stats
        known = self._known
        hold_all = self._hold
        recorder = self._recorder
        keys = work.keys
        offsets = work.offsets
        wire = raw if raw is not None else b""  # offsets are set only with the bytes they index
        request_gate: bool | None = None
        if work.genai is not None:
            request_gate = None if work.genai else False
        elif raw is not None and not may_hold_genai(raw):
            request_gate = False
        resource_list = request.resource_spans
        single_scope = len(resource_list) == 1 and len(resource_list[0].scope_spans) == 1
        modified = False
        # the spans cut out, per scope (cut at the end: a span deferred may be evaluated by a
        # later one of the request), and the deferred spans of the request (`stream`)
        cuts: list[tuple[Any, list[tuple[int, _Held | None]]]] = []
        pending: dict[tuple[str, str], tuple[Any, SpanView, _Container, list[Any], int]] = {}
        k = 0
        for rs in resource_list:
            resource_view: ResourceView | None = None
            resource_copy: tuple[bytes] | None = None
            for ss in rs.scope_spans:
                spans = ss.spans
                count = len(spans)
                gate = request_gate
                if gate is None and not single_scope and not may_hold_genai(ss.SerializeToString()):
                    gate = False
                scope = ss.scope
                own = _is_own_scope(scope.name)
                container: _Container | None = None
                cut: list[tuple[int, _Held | None]] = []
                for index in range(count):
                    key = keys[k]
                    k += 1
                    trace_key = key[:16]
                    if gate is False and trace_key not in known:
                        stats.spans_bypassed += 1
                        continue
                    span = spans[index]
                    if resource_view is None:
                        resource_view = ResourceView(rs.resource, "proto")
                    try:
                        view = SpanView.from_proto(span, resource_view, scope)
                    except ValueError:  # a bad parent id the fast id check does not read
                        continue  # forwarded as received, not evaluated
                    if gate is False:
                        view.mark_not_genai()  # the request- or scope-level check answered
                    elif offsets is not None:  # attributes decoded from the bytes (C)
                        view.locate_in(wire, offsets[2 * k - 2], offsets[2 * k - 1])
                    if own:
                        continue
                    started = time.perf_counter()
                    outcome = engine.add_span(view)
                    trace_id = view.trace_id
                    deferred = outcome.deferred
                    if outcome.genai:
                        if not deferred:
                            stats.spans_evaluated += 1
                        if trace_id not in self._trace_resource:
                            if resource_copy is None:
                                resource_copy = (rs.resource.SerializeToString(),)
                            self._trace_resource[trace_id] = resource_copy
                        if recorder is not None:
                            recorder.duration(time.perf_counter() - started, "span")
                    if outcome.late and recorder is not None:
                        recorder.add(names.METRIC_LATE_SPANS, 1)
                    results = outcome.results
                    if results:
                        resource = self._trace_resource.get(trace_id)
                        self._emit(results, trace_id, view.span_id, resource, None)
                    if outcome.duplicate:
                        stats.spans_duplicate += 1
                        cut.append((index, None))
                        continue
                    if not outcome.late:
                        is_root = not view.parent_span_id or view.parent_is_remote
                        if hold_all or (is_root and trace_id in self._trace_resource):
                            if container is None:
                                container = self._container(rs, ss)
                            # only a span written to later needs its keys (None: read then)
                            present = (
                                frozenset(view.attributes)
                                if results or is_root or deferred
                                else None
                            )
                            held = _Held(None, view.span_id, container, results, present)
                            cut.append((index, held))
                            self._held.setdefault(trace_id, []).append(held)
                            if deferred:
                                self._deferred[trace_id, view.span_id] = held
                            continue
                        if deferred:  # written here if evaluated by a later span, else cut
                            if container is None:
                                container = self._container(rs, ss)
                            pending[trace_id, view.span_id] = (span, view, container, cut, index)
                            continue
                    if results:
                        self._write(span, span_attributes(results), results, view.attributes)
                        modified = True
                    if self._redact and view.may_be_genai() and redact_span(span):
                        modified = True
                cuts.append((spans, cut))
        released = engine.take_released()
        if released:
            for outcome in self._apply_released(released, pending):
                span, view, _, _, _ = pending.pop((outcome.trace_id, outcome.span_id))
                results = outcome.results
                if results:
                    self._write(span, span_attributes(results), results, view.attributes)
                    modified = True
                if self._redact and redact_span(span):
                    modified = True
        for pending_key, (_, view, container, cut, index) in pending.items():  # cut out
            present = frozenset(view.attributes)  # until evaluated
            held = _Held(None, view.span_id, container, (), present)
            cut.append((index, held))
            self._deferred[pending_key] = held
        for spans, cut in cuts:
            if not cut:
                continue
            modified = True
            for index, cut_held in sorted(cut, key=_first, reverse=True):
                span = spans.pop(index)
                if cut_held is not None:
                    copy = Span()
                    copy.CopyFrom(span)
                    cut_held.span = copy
                    stats.spans_held += 1
        return modified

    def _container(self, rs: Any, ss: Any) -> _Container:
        return _Container(
            rs.resource.SerializeToString(),
            rs.schema_url,
            ss.scope.SerializeToString(),
            ss.schema_url,
        )

    def _annotate_wire(self, raw: bytes, work: _Work, held_here: list[_Held]) -> tuple[bytes, int]:
        """`_annotate_request` for a request the receiver's scan validated, on its bytes: the
        views `read_trace_views` made (`work.wire`), held spans cut out as byte ranges, results
        appended to their spans' bytes, and the request to forward spliced from the bytes
        received (`splice_trace_request`). Returns (payload, spans in it)."""
        keys = work.keys
        assert work.wire is not None
        scopes, views = work.wire
        engine = self.engine
        stats = self.stats
        known = self._known
        hold_all = self._hold
        recorder = self._recorder
        trace_resource = self._trace_resource
        span_events = self._span_events
        request_gate = None if work.genai else False
        single_scope = len(scopes) == 1
        edits: list[Any] = [b""] * len(keys)  # per span: b"" as is, None cut, or its edit
        removed = 0
        resources: dict[int, tuple[bytes]] = {}
        take_span = engine.span_taker()
        evaluated = 0
        # (results, trace id, span id) of the spans with results since the last `_emit_spans`,
        # whose traces' resource is `emitting`
        emitted: list[tuple[tuple[EvaluationResult, ...], str, str]] = []
        emitting: tuple[bytes] | None = None
        # the deferred spans of the request (`stream`): written in place if a later span of it
        # has them evaluated, else cut out (at the end)
        pending: dict[tuple[str, str], tuple[int, Any, _Container]] = {}
        k = 0
        try:
            for (
                resource_index,
                resource_start,
                resource_end,
                resource_schema_url,
                scope_start,
                scope_end,
                scope_name,
                _scope_version,
                scope_schema_url,
                count,
                scope_spans_start,
                scope_spans_end,
            ) in scopes:
                first = k
                k += count
                gate = request_gate
                if (
                    gate is None
                    and not single_scope
                    and not may_hold_genai(raw[scope_spans_start:scope_spans_end])
                ):
                    gate = False
                own = _is_own_scope(scope_name)
                container: _Container | None = None
                resource = resources.get(resource_index)
                if resource is None:  # serialized once per request (trace resources, containers)
                    resource = resources[resource_index] = (raw[resource_start:resource_end],)
                for index in range(first, k):
                    if gate is False and keys[index][:16] not in known:
                        stats.spans_bypassed += 1
                        continue
                    view = views[index]
                    if view is None:  # a bad parent id the fast id check does not read
                        continue  # forwarded as received, not evaluated
                    if gate is False:
                        view.mark_not_genai()  # the request- or scope-level check answered
                    if own:
                        continue
                    if recorder is None:
                        taken = take_span(view)
                    else:
                        started = time.perf_counter()
                        taken = take_span(view)
                        if type(taken) is tuple:
                            recorder.duration(time.perf_counter() - started, "span")
                        elif taken == SPAN_LATE:
                            recorder.add(names.METRIC_LATE_SPANS, 1)
                    trace_id = view.trace_id
                    results: tuple[EvaluationResult, ...]  # only a GenAI span has results
                    deferred = False
                    if type(taken) is tuple:
                        results = taken
                        evaluated += 1
                        span_resource = trace_resource.setdefault(trace_id, resource)
                        if results:  # `_emit`, for the request's spans at once
                            if span_resource is not emitting:
                                self._emit_spans(emitted, emitting)
                                emitted = []
                                emitting = span_resource
                            emitted.append((results, trace_id, view.span_id))
                    elif taken == SPAN_PLAIN:
                        results = ()
                    elif taken == SPAN_DEFERRED:  # its results come later (`_apply_released`)
                        results = ()
                        deferred = True
                        trace_resource.setdefault(trace_id, resource)
                    elif taken == SPAN_DUPLICATE:
                        stats.spans_duplicate += 1
                        edits[index] = None
                        removed += 1
                        continue
                    else:  # late: forwarded as it is
                        continue
                    is_root = not view.parent_span_id or view.parent_is_remote
                    if hold_all or deferred or (is_root and trace_id in trace_resource):
                        if container is None:
                            container = _Container(
                                resource[0],
                                resource_schema_url,
                                raw[scope_start:scope_end],
                                scope_schema_url,
                            )
                        if deferred and not hold_all:
                            pending[trace_id, view.span_id] = (index, view, container)
                            continue
                        # only a span written to later needs its keys (None: read then)
                        present = _present_keys(view) if results or is_root or deferred else None
                        _, start, end = view.wire_range()
                        held = _new_held(
                            raw[start:end],
                            view.span_id,
                            container,
                            results,
                            present,
                            view.end_ns,
                        )
                        held_here.append(held)
                        self._held.setdefault(trace_id, []).append(held)
                        if deferred:
                            self._deferred[trace_id, view.span_id] = held
                        stats.spans_held += 1
                        edits[index] = None
                        removed += 1
                        continue
                    if results:
                        edits[index] = self._wire_edit(raw, view, results, span_events)
            released = engine.take_released()
            if released:
                for outcome in self._apply_released(released, pending):
                    index, view, _ = pending.pop((outcome.trace_id, outcome.span_id))
                    if outcome.results:
                        edits[index] = self._wire_edit(raw, view, outcome.results, span_events)
            for (trace_id, span_id), (index, view, container) in pending.items():
                _, start, end = view.wire_range()  # still deferred: cut out until evaluated
                held = _new_held(
                    raw[start:end], span_id, container, (), _present_keys(view), view.end_ns
                )
                held_here.append(held)
                self._deferred[trace_id, span_id] = held
                stats.spans_held += 1
                edits[index] = None
                removed += 1
        finally:  # what was evaluated is counted and emitted, also when a later span failed
            stats.spans_evaluated += evaluated
            self._emit_spans(emitted, emitting)
        if not removed and not any(edits):
            return raw, len(keys)
        spliced = splice_trace_request(raw, edits)
        if spliced is None:  # the validating scan accepted these bytes: never here
            raise ValueError("a validated request could not be spliced")
        return spliced, len(keys) - removed

    def _wire_edit(
        self,
        raw: bytes,
        view: Any,
        results: tuple[EvaluationResult, ...],
        span_events: bool,
    ) -> bytes | tuple[bytes]:
        """The edit of the span of `view` (a view of `raw`, `SpanView.from_wire`) that adds
        `results` (`_span_edit`)."""
        span_keys = _present_keys(view)
        # the usual case: the attributes appended as they are (with span events, `_span_edit`
        # encodes both)
        if not span_events:
            added = encoded_result_attributes(results, span_keys)
            if added is not None:
                return added
        _, start, end = view.wire_range()
        return self._span_edit(
            raw,
            start,
            end,
            attributes=span_attributes(results),
            results=results,
            present=span_keys,
            end_ns=view.end_ns,
        )

    def _span_edit(
        self,
        data: bytes,
        start: int,
        end: int,
        *,
        attributes: dict[str, AttributeValue],
        results: Sequence[EvaluationResult],
        present: Container[str] | None,
        end_ns: int,
    ) -> bytes | tuple[bytes]:
        """What `_write` adds to the span serialized as `data[start:end]`: the encoded fields to
        append, or (when they cannot be appended: a key already there, say) the whole span
        rewritten by upb, in a 1-tuple."""
        added = encoded_attributes(SPAN_ATTRIBUTES_TAG, attributes, present)
        if added is not None and self._span_events and results:
            when = end_ns or time.time_ns()
            events = [
                encoded_event(names.EVENT_EVALUATION_RESULT, event_attributes(result), when)
                for result in results
            ]
            if any(event is None for event in events):
                added = None
            else:
                added += b"".join(events)  # type: ignore[arg-type]
        if added is not None:
            return added
        message = Span.FromString(data[start:end])
        self._write(message, attributes, results, present)
        return (message.SerializeToString(),)

    def _write(
        self,
        span: Any,
        attributes: dict[str, AttributeValue],
        results: Sequence[EvaluationResult],
        present: Container[str] | None = None,
    ) -> None:
        """Add the results' attributes (and events) to `span`; `present`: its attribute keys
        (None: unknown, read from the span)."""
        merge_attributes(span, SPAN_ATTRIBUTES_TAG, attributes, present)
        if self._span_events and results:
            when = span.end_time_unix_nano or time.time_ns()
            for result in results:
                add_event(span, names.EVENT_EVALUATION_RESULT, event_attributes(result), when)

    def _process_logs(self, work: _Work) -> None:
        request = work.request
        raw = work.raw
        if raw is None or b"gen_ai." in raw:
            engine = self.engine
            for rl in request.resource_logs:
                for sl in rl.scope_logs:
                    scope = sl.scope
                    if _is_own_scope(scope.name):
                        continue
                    for record in sl.log_records:
                        if not record.trace_id or not record.span_id:
                            continue
                        name = record.event_name
                        if name and (
                            not name.startswith("gen_ai.") or name == names.EVENT_EVALUATION_RESULT
                        ):
                            continue
                        view = LogView.from_proto(record, scope)
                        if not view.event_name.startswith("gen_ai.") or (
                            view.event_name == names.EVENT_EVALUATION_RESULT
                        ):
                            continue
                        self._touch(bytes(record.trace_id))
                        engine.add_log(view)
        payload = raw if raw is not None and not work.modified else request.SerializeToString()
        self.lanes[LOGS.name].put(payload, work.items, reserved=work.size)

    # --- deferred spans --------------------------------------------------------------------------

    def _apply_released(
        self, released: list[SpanOutcome], here: Container[tuple[str, str]]
    ) -> list[SpanOutcome]:
        """The spans the engine evaluated after deferring them: their results emitted; those of
        earlier requests (`_deferred`) written and forwarded (`stream`) or kept with their held
        trace (`hold`). Returns the outcomes of the spans of the request being read (keys
        `here`), for it to write them in place."""
        stats = self.stats
        deferred = self._deferred
        trace_resource = self._trace_resource
        hold_all = self._hold
        in_request: list[SpanOutcome] = []
        emitted: list[tuple[tuple[EvaluationResult, ...], str, str]] = []
        emitting: tuple[bytes] | None = None
        try:
            for outcome in released:
                trace_id, span_id, results = outcome.trace_id, outcome.span_id, outcome.results
                stats.spans_evaluated += 1
                if results:  # `_emit`, for the spans with the same resource at once
                    resource = trace_resource.get(trace_id)
                    if resource is not emitting:
                        self._emit_spans(emitted, emitting)
                        emitted = []
                        emitting = resource
                    emitted.append((results, trace_id, span_id))
                key = (trace_id, span_id)
                if key in here:
                    in_request.append(outcome)
                    continue
                held = deferred.pop(key, None)
                if held is None:
                    continue
                held.results = results
                if hold_all:
                    continue  # written when its trace is finalized
                if held.span is None:  # forwarded unevaluated after an internal error
                    continue
                if results:
                    self._write_held(held, span_attributes(results), results)
                if self._redact and not isinstance(held.span, bytes):
                    redact_span(held.span)
                self._released.append(held)
        finally:
            self._emit_spans(emitted, emitting)
            self._count_reordered()
        return in_request

    def _count_reordered(self) -> None:
        recorder = self._recorder
        if recorder is None:
            return
        engine_stats = self.engine.stats
        counts = (engine_stats.spans_reordered, engine_stats.spans_reorder_expired)
        if counts == self._reorder_counts:
            return
        (ordered, expired), (was_ordered, was_expired) = counts, self._reorder_counts
        self._reorder_counts = counts
        for outcome, n in (
            ("ancestors", ordered - was_ordered),
            ("expired", expired - was_expired),
        ):
            if n:
                recorder.add(
                    names.METRIC_SPANS_REORDERED, n, {names.METRIC_ATTR_REORDER_OUTCOME: outcome}
                )

    # --- finalization and outputs ----------------------------------------------------------------

    def _finalize(self, traces: list[FinalizedTrace]) -> None:
        """Write the results of `traces` (just finalized: `Engine.poll` or `flush`) on their held
        spans and release them — after the spans the engine evaluated since the last request
        (by `reorder_delay`, or those of `traces`) got theirs."""
        released = self.engine.take_released()
        if released:
            self._apply_released(released, {})
        if not traces:
            return
        recorder = self._recorder
        # (results, trace id, root span id) of the traces since the last `_emit_spans`, whose
        # resource is `emitting` (without a recorder: its metrics need each trace's agent)
        emitted: list[tuple[tuple[EvaluationResult, ...], str, str]] = []
        emitting: tuple[bytes] | None = None
        try:
            for trace in traces:
                trace_id = trace.trace_id
                self.stats.traces_finalized += 1
                held = self._held.pop(trace_id, ())
                resource = self._trace_resource.pop(trace_id, None)
                genai = bool(trace.trajectory.steps)
                if recorder is not None:
                    recorder.add(
                        names.METRIC_TRACES_FINALIZED,
                        1,
                        {names.METRIC_ATTR_FINALIZE_REASON: trace.reason},
                    )
                    if trace.reason == "max_traces":
                        recorder.add(names.METRIC_TRACES_FINALIZED_EARLY, 1)
                if genai and self._history is not None:
                    stats = self.stats
                    if self._history.write(trace):  # never raises: failures are counted
                        stats.runs_recorded = self._history.written
                    stats.history_errors = self._history.errors
                if genai:
                    if recorder is not None:  # the agent: a metric attribute
                        agent = trace_agent(trace)
                        self._emit(trace.results, trace_id, trace.root_span_id, resource, agent)
                    else:  # `_emit`, for the traces with the same resource at once
                        if resource is not emitting:
                            self._emit_spans(emitted, emitting)
                            emitted = []
                            emitting = resource
                        emitted.append((trace.results, trace_id, trace.root_span_id))
                for item in held:
                    if item.span is None:  # cut but never copied: an internal error
                        continue
                    if genai and item.span_id == trace.root_span_id:
                        results = item.results
                        if self._span_events:  # the events of the root's own and the trace's
                            results = (
                                *results,
                                *(r for r in trace.results if r.span_id in (None, item.span_id)),
                            )
                        self._write_held(item, root_attributes(trace, item.results), results)
                    elif item.results:
                        self._write_held(item, span_attributes(item.results), item.results)
                    if self._redact and not isinstance(item.span, bytes):
                        redact_span(item.span)
                    self._released.append(item)
        finally:  # the records of the traces finalized, also when a later one failed
            self._emit_spans(emitted, emitting)

    def _write_held(
        self,
        item: _Held,
        attributes: dict[str, AttributeValue],
        results: Sequence[EvaluationResult],
    ) -> None:
        span = item.span
        if not isinstance(span, bytes):
            self._write(span, attributes, results, item.present)
            return
        edit = self._span_edit(
            span,
            0,
            len(span),
            attributes=attributes,
            results=results,
            present=item.present,
            end_ns=item.end_ns,
        )
        item.span = edit[0] if isinstance(edit, tuple) else span + edit

    def _emit(
        self,
        results: Sequence[EvaluationResult],
        trace_id: str,
        span_id: str,
        resource: tuple[bytes] | None,
        agent: str | None,
    ) -> None:
        """Record `results` as metrics and queue their log records (a result without a span id
        of its own is about span `span_id`)."""
        recorder = self._recorder
        if recorder is not None:
            for result in results:
                recorder.record(result_measurements(result, agent))
        if self._emit_events:
            records = framed_result_records(results, trace_id, span_id, time.time_ns())
            self._queue_records(resource, records, len(results))

    def _emit_spans(
        self, spans: list[tuple[tuple[EvaluationResult, ...], str, str]], resource: Any
    ) -> None:
        """`_emit(results, trace_id, span_id, resource, None)` of each (results, trace_id,
        span_id) of `spans` (one request's spans, or traces finalized at once, whose traces have
        `resource`), in one call."""
        if not spans:
            return
        recorder = self._recorder
        if recorder is not None:
            for results, _, _ in spans:
                for result in results:
                    recorder.record(result_measurements(result, None))
        if not self._emit_events:
            return
        self._queue_records(resource, *framed_span_result_records(spans, time.time_ns()))

    def _queue_records(self, resource: Any, records: bytes, count: int) -> None:
        """Queue `count` encoded log records under their resource (None: the empty one)."""
        if resource is None:
            resource = _EMPTY_RESOURCE
        group = self._events.get(id(resource))
        if group is None:
            group = self._events[id(resource)] = [resource, [], 0]
        group[1].append(records)
        group[2] += count

    def _flush_outputs(self) -> None:
        released, self._released = self._released, []
        if released:
            by_container: dict[int, tuple[_Container, list[bytes]]] = {}
            for item in released:
                group = by_container.get(id(item.container))
                if group is None:
                    group = by_container[id(item.container)] = (item.container, [])
                span = item.span
                group[1].append(span if isinstance(span, bytes) else span.SerializeToString())
            payload = traces_request_bytes(
                [
                    (c.resource, c.resource_schema_url, c.scope, c.scope_schema_url, spans)
                    for c, spans in by_container.values()
                ]
            )
            self.lanes[TRACES.name].put(payload, len(released))
        groups, self._events = self._events, {}
        if groups:
            scope = self._scope_bytes
            count = sum(group[2] for group in groups.values())
            payload = logs_request_bytes(
                [(resource[0], scope, records) for resource, records, _ in groups.values()],
                framed=True,
            )
            if self.lanes[LOGS.name].offer(payload, count):
                self.stats.events_emitted += count
            else:
                self.stats.events_dropped += count


_EMPTY_RESOURCE = (b"",)


# The `spans` field tag and a 1-5 byte varint length, just before the trace id's tag: checked
# behind the match, so that the pattern starts with a literal, which the regex engine searches
# for directly instead of trying every 0x12 byte (twice as fast on plain spans).
_SPAN_START = b"|".join(
    rb"(?<=\x12" + rb"[\x80-\xff]" * extra + rb"[\x00-\x7f]\x0a\x10)" for extra in range(5)
)
_SPAN_IDS = re.compile(rb"\x0a\x10(?:" + _SPAN_START + rb")(.{16})\x12\x08(.{8})", re.DOTALL)
"""A `Span` as every OTLP encoder writes it: the `spans` field tag and length, then `trace_id`
(16 bytes) and `span_id` (8 bytes), fields 1 and 2, first."""


_TRACE_PART = itemgetter(slice(0, 16))
_first = itemgetter(0)
_ENDS_WITH_ZERO_SPAN = methodcaller("endswith", _ZERO_SPAN)


def _present_keys(view: SpanView) -> Container[str]:
    """The attribute keys of `view`, to check the keys written to its span against: the keys
    only (the message strings the views leave undecoded stay so)."""
    return frozenset(view.attribute_keys)


def _checked_keys(keys: list[bytes], count: int) -> tuple[list[bytes], set[bytes]] | None:
    """The (trace id + span id) keys of a request read from its bytes (the C scan, or
    `_fast_keys`) with its trace ids — when there is one key per span, no id is all zeros and no
    span repeats within the request; None otherwise (then the span-by-span pass decides)."""
    if len(keys) != count:
        return None
    trace_ids = set(map(_TRACE_PART, keys))  # map and any run in C: no frame per span
    if _ZERO_TRACE in trace_ids or any(map(_ENDS_WITH_ZERO_SPAN, keys)):
        return None
    if len(set(keys)) != count:
        return None
    return keys, trace_ids


def _fast_keys(raw: bytes, count: int) -> tuple[list[bytes], set[bytes]] | None:
    """(trace id + span id) of every span, read from the bytes in one C-speed pass, and the
    trace ids — when there is exactly one match per span, no id is all zeros and no span
    repeats within the request; None otherwise (then the span-by-span pass decides). Parent
    ids are checked span by span only for the spans that reach the engine."""
    pairs = _SPAN_IDS.findall(raw)
    if len(pairs) != count:
        return None
    return _checked_keys([trace_id + span_id for trace_id, span_id in pairs], count)


def _drop_empty(request: Any) -> int:
    """Delete the scopes and resources left without spans; return the spans left."""
    remaining = 0
    resource_list = request.resource_spans
    for r in range(len(resource_list) - 1, -1, -1):
        scopes = resource_list[r].scope_spans
        for s in range(len(scopes) - 1, -1, -1):
            count = len(scopes[s].spans)
            if count:
                remaining += count
            else:
                del scopes[s]
        if not len(scopes):
            del resource_list[r]
    return remaining


def _submitted(rejected: int, what: str, messages: list[str]) -> Submitted:
    if not rejected:
        return Submitted()
    detail = "; ".join(messages)
    return Submitted(rejected, f"{rejected} {what} rejected: {detail}")
