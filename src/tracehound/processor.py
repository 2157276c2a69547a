"""`TracehoundSpanProcessor`: evaluate spans in-process, on a worker thread.

Registered on an existing `TracerProvider` in one line, in one of two modes:

- **wrap** — `provider.add_span_processor(TracehoundSpanProcessor(exporter))`, a drop-in for
  `BatchSpanProcessor(exporter)`: same queue / batch / delay / timeout settings and `OTEL_BSP_*`
  variables, same `shutdown` / `force_flush` contract, fork safety. It exports *copies* of the
  ended spans carrying tracehound's attributes (ended SDK spans are frozen and never touched).
  Forwarding is `stream` (each span is exported once evaluated; only the local root of a GenAI
  trace is held until the trace is finalized, to carry the trace results) or `hold` (whole traces
  are held until finalization, then exported with their final results).
- **observe** — `TracehoundSpanProcessor()` (no exporter) beside the user's own processors: it
  exports nothing and changes nothing they export; results leave as `gen_ai.evaluation.result`
  log records and metrics only.

Threads and queues. `on_end` (and the companion log processor's `on_emit`) run on the
application's thread: they only append to one bounded `deque`; when it is full the item is dropped
and counted, never blocking, never raising. One worker thread owns everything else: it drains the
queue in arrival order, views each span (`SpanView`), feeds the `Engine` (log events first, as they
arrive before their span ends), emits each result (events, metrics), finalizes due traces
(`Engine.poll`) and batches spans for export. Exports run on a second thread (the export lane) so
that the worker can stop waiting after `export_timeout_millis`: a hung exporter then delays no
evaluation, and spans waiting for it are bounded by `max_queue_size` (oldest dropped, counted).
Both threads run with instrumentation suppressed, so exporting and emitting never trace
themselves; spans and log records of tracehound's own scope are never evaluated.

Traces without any GenAI step produce no results: their spans pass through unchanged (in stream
mode their root is not held either).

Log events. Libraries that put message content in log records (legacy per-message GenAI events,
`gen_ai.client.inference.operation.details`, Traceloop event mode, pydantic-ai 1.x logs mode) are
joined to their span by the engine. Register the companion on the `LoggerProvider`:
`logger_provider.add_log_record_processor(processor.log_processor)`. It enqueues `gen_ai.*`
records that carry a span id, into the same queue.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry._logs import LoggerProvider as ApiLoggerProvider
from opentelemetry.context import (
    _SUPPRESS_INSTRUMENTATION_KEY,
    Context,
    attach,
    detach,
    set_value,
)
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk._logs import LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracehound import names
from tracehound.config import (
    BatchSettings,
    Forwarding,
    ProcessorSettings,
    open_evaluators,
    reopen_baselines,
)
from tracehound.emit import (
    EventEmitter,
    MetricsRecorder,
    copy_span,
    event_attributes,
    result_measurements,
    root_attributes,
    span_attributes,
    trace_agent,
)
from tracehound.engine import (
    SPAN_DEFERRED,
    SPAN_LATE,
    SPAN_PLAIN,
    Engine,
    EngineConfig,
    FinalizedTrace,
)
from tracehound.evaluators.base import EvaluationResult, Evaluator
from tracehound.history import HistoryWriter, history_store_of
from tracehound.spans import AttributeValue, LogView, SpanView

if TYPE_CHECKING:
    from tracehound.baselines import BaselineStore

__all__ = ["ProcessorStats", "TracehoundLogProcessor", "TracehoundSpanProcessor"]

_logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProcessorStats:
    """A snapshot of the processor's own counters (also exported as metrics)."""

    queued: int
    """Items (spans and GenAI log records) the worker took off the queue."""
    dropped_queue_full: int
    dropped_shutdown: int
    dropped_export_backlog: int
    """Evaluated spans dropped because the exporter was stuck longer than the queue holds."""
    spans_evaluated: int
    spans_exported: int
    export_failures: int
    results_emitted: int
    traces_finalized: int
    late_spans: int
    internal_errors: int
    queue_size: int
    active_traces: int
    spans_reordered: int = 0
    """GenAI spans whose evaluation waited for their ancestors (`EngineConfig.reorder_delay`)
    and got them."""
    spans_reorder_expired: int = 0
    """GenAI spans that waited for their ancestors and were evaluated without them."""
    runs_recorded: int = 0
    """Run records written to the run history of the drift evaluator's store."""
    history_errors: int = 0
    """Run-history writes that failed (the store was unusable); evaluation went on."""


class _FlushRequest:
    __slots__ = ("done", "ok")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ok = False


class _Counter:
    """A counter the application's threads bump without a lock (`next()` on
    `itertools.count` is atomic in CPython); reads are rare and locked."""

    __slots__ = ("_count", "_lock", "_reads")

    def __init__(self) -> None:
        self._count = itertools.count()
        self._reads = 0
        self._lock = threading.Lock()

    def bump(self) -> None:
        next(self._count)

    @property
    def value(self) -> int:
        with self._lock:
            value = next(self._count) - self._reads
            self._reads += 1
            return value


def _is_own_scope(scope_name: str) -> bool:
    return scope_name == names.SCOPE_NAME or scope_name.startswith(names.SCOPE_NAME + ".")


def _suppressed() -> object:
    return attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))


class _ExportLane:
    """One daemon thread that calls `exporter.export(batch)`, one batch at a time.

    The worker hands a batch over and waits for it at most `timeout`; if the exporter hangs, the
    lane stays busy and the worker carries on evaluating.
    """

    def __init__(self, exporter: SpanExporter, on_done: Callable[[int, str], None]) -> None:
        self._exporter = exporter
        self._on_done = on_done
        self._cond = threading.Condition()
        self._batch: list[ReadableSpan] | None = None
        self._busy = False
        self._stop = False
        self._thread = threading.Thread(name="TracehoundExport", target=self._run, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        return self._busy

    def submit(self, batch: list[ReadableSpan], timeout: float) -> bool:
        """Export `batch`; False if the lane was busy (batch not taken). Waits ≤ `timeout`."""
        with self._cond:
            if self._busy:
                return False
            self._batch = batch
            self._busy = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: not self._busy, timeout=max(timeout, 0.0))
        return True

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._busy, timeout=max(timeout, 0.0))

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()

    def _run(self) -> None:
        token = _suppressed()
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._batch is not None or self._stop)
                    if self._batch is None:
                        return
                    batch = self._batch
                outcome = "error"
                try:
                    result = self._exporter.export(batch)
                    outcome = "success" if result is SpanExportResult.SUCCESS else "failure"
                except Exception:
                    _logger.exception("Exception while exporting spans (tracehound).")
                self._on_done(len(batch), outcome)
                with self._cond:
                    self._batch = None
                    self._busy = False
                    self._cond.notify_all()
        finally:
            detach(token)  # type: ignore[arg-type]


class TracehoundLogProcessor(LogRecordProcessor):
    """The companion of a `TracehoundSpanProcessor` on the `LoggerProvider`.

    `on_emit` runs on the application's thread: it only filters (a `gen_ai.*` event with a span
    id, not an evaluation result) and enqueues. Flushing and shutting down belong to the span
    processor: here they do nothing.
    """

    def __init__(self, owner: TracehoundSpanProcessor) -> None:
        self._owner = weakref.ref(owner)

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        owner = self._owner()
        if owner is not None:
            owner._on_log(log_record)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class TracehoundSpanProcessor(SpanProcessor):
    """Evaluates GenAI spans on a worker thread; wraps an exporter (wrap) or observes (observe).

    Arguments left None come from the environment (`OTEL_BSP_*` for the batching arguments,
    `TRACEHOUND_*` for the rest; see `tracehound.config`), then from the defaults.

    Args:
        span_exporter: the exporter to wrap; None for observe mode.
        max_queue_size, schedule_delay_millis, max_export_batch_size, export_timeout_millis:
            as for `BatchSpanProcessor`.
        evaluators: evaluator instances; default: `TRACEHOUND_EVALUATORS`, else all built-in
            (`drift` there gets the baseline store of `TRACEHOUND_BASELINES`, which the
            processor opens, reopens in a forked child, and closes at shutdown).
        engine_config: engine limits and timings; default from `TRACEHOUND_*`.
        forwarding: wrap mode: `stream` or `hold`.
        redact: strip message content, tool arguments/results and documents from exported copies.
        span_events: also add `gen_ai.evaluation.result` span events to exported copies.
        emit_events: emit `gen_ai.evaluation.result` log records.
        emit_metrics: record metrics.
        logger_provider, meter_provider: where events and metrics go; default: the global ones.
        settings: a full `ProcessorSettings` instead of reading `TRACEHOUND_*`.
    """

    def __init__(
        self,
        span_exporter: SpanExporter | None = None,
        max_queue_size: int | None = None,
        schedule_delay_millis: float | None = None,
        max_export_batch_size: int | None = None,
        export_timeout_millis: float | None = None,
        *,
        evaluators: Sequence[Evaluator] | None = None,
        engine_config: EngineConfig | None = None,
        forwarding: Forwarding | None = None,
        redact: bool | None = None,
        span_events: bool | None = None,
        emit_events: bool | None = None,
        emit_metrics: bool | None = None,
        logger_provider: ApiLoggerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        settings: ProcessorSettings | None = None,
    ) -> None:
        batch = BatchSettings.resolve(
            max_queue_size, schedule_delay_millis, max_export_batch_size, export_timeout_millis
        )
        settings = settings if settings is not None else ProcessorSettings.from_env()
        forwarding = forwarding if forwarding is not None else settings.forwarding
        if forwarding not in ("stream", "hold"):
            raise ValueError(f"forwarding must be 'stream' or 'hold', not {forwarding!r}")
        self._exporter = span_exporter
        self._batch = batch
        self._max_queue_size = batch.max_queue_size
        self._batch_size = batch.max_export_batch_size
        self._schedule_delay = batch.schedule_delay_millis / 1e3
        self._export_timeout = batch.export_timeout_millis / 1e3
        self._forwarding: Forwarding = forwarding
        self._redact = settings.redact if redact is None else redact
        self._span_events = settings.span_events if span_events is None else span_events
        self._emit_events = settings.events if emit_events is None else emit_events
        self._engine_config = engine_config if engine_config is not None else settings.engine
        self._baselines = settings.baselines
        self._store: BaselineStore | None = None  # opened here for `drift`: closed at shutdown
        if evaluators is not None:
            self._evaluators = list(evaluators)
        else:
            self._evaluators, self._store = open_evaluators(
                settings.evaluators, self._baselines, settings.config_file
            )
        self._poll_interval = self._engine_config.poll_interval
        history = settings.history
        # the run history lives in the drift evaluator's store (none without drift)
        self._history = (
            HistoryWriter(
                lambda: history_store_of(self._evaluators),
                retention=history.retention,
                content=history.content,
            )
            if history.enabled
            else None
        )
        self._emitter = EventEmitter(logger_provider)
        use_metrics = settings.metrics if emit_metrics is None else emit_metrics
        self._metrics = MetricsRecorder(meter_provider) if use_metrics else None
        self._meter_provider = meter_provider
        self.log_processor = TracehoundLogProcessor(self)
        """Register on the `LoggerProvider` to join GenAI log events to their spans."""

        self._warned_full = False
        self._shutdown = False
        self._abandon = False  # shutdown timed out: stop exporting
        self._init_runtime()
        if self._metrics is not None:
            self._metrics.observe(names.METRIC_QUEUE_SIZE, lambda: len(self._queue))
            self._metrics.observe(names.METRIC_TRACES_ACTIVE, lambda: self._engine.active_traces)
        if hasattr(os, "register_at_fork"):
            weak_reinit = weakref.WeakMethod(self._at_fork_reinit)

            def _after_in_child() -> None:
                reinit = weak_reinit()
                if reinit is not None:
                    reinit()

            os.register_at_fork(after_in_child=_after_in_child)

    # --- state owned by the worker; rebuilt after fork --------------------------------------------

    def _init_runtime(self) -> None:
        # Locks are created here, never inherited: after a fork, one may have been held by a
        # thread that does not exist in the child.
        self._pid = os.getpid()
        self._reinit_lock = threading.Lock()
        self._shutdown_lock = threading.Lock()
        self._drop_full = _Counter()  # bumped by the application's threads
        self._drop_shutdown = _Counter()
        self._queue: deque[ReadableSpan | ReadWriteLogRecord] = deque()
        self._wake = threading.Event()
        self._flush_lock = threading.Lock()
        self._flush_requests: list[_FlushRequest] = []
        self._engine = Engine(self._evaluators, self._engine_config)
        self._held: dict[str, list[tuple[ReadableSpan, tuple[EvaluationResult, ...]]]] = {}
        self._genai_traces: set[str] = set()
        # spans whose evaluation the engine deferred (`SPAN_DEFERRED`), by (trace id, span id)
        self._deferred: dict[tuple[str, str], ReadableSpan] = {}
        self._reorder_counts = (0, 0)  # the engine's, as last recorded as metrics
        self._ready: deque[ReadableSpan] = deque()
        self._last_export = time.monotonic()
        self._reported_full = 0
        self._reported_shutdown = 0
        self._queued = 0
        self._spans_evaluated = 0
        self._spans_exported = 0
        self._export_failures = 0
        self._dropped_backlog = 0
        self._results_emitted = 0
        self._traces_finalized = 0
        self._late_spans = 0
        self._internal_errors = 0
        self._error_logged = False
        self._lane = (
            _ExportLane(self._exporter, self._export_done) if self._exporter is not None else None
        )
        self._worker = threading.Thread(
            name="TracehoundSpanProcessor", target=self._worker_main, daemon=True
        )
        self._worker.start()

    def _at_fork_reinit(self) -> None:
        # The parent's threads do not exist in the child, and its engine state may be mid-update:
        # start over with an empty engine and fresh threads (like BatchSpanProcessor).
        if self._store is not None:
            self._store = reopen_baselines(self._evaluators, self._store, self._baselines)
        self._init_runtime()

    # --- properties ----------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return "observe" if self._exporter is None else "wrap"

    @property
    def forwarding(self) -> Forwarding:
        return self._forwarding

    @property
    def batch_settings(self) -> BatchSettings:
        return self._batch

    @property
    def span_exporter(self) -> SpanExporter | None:
        return self._exporter

    @property
    def stats(self) -> ProcessorStats:
        return ProcessorStats(
            queued=self._queued,
            dropped_queue_full=self._drop_full.value,
            dropped_shutdown=self._drop_shutdown.value,
            dropped_export_backlog=self._dropped_backlog,
            spans_evaluated=self._spans_evaluated,
            spans_exported=self._spans_exported,
            export_failures=self._export_failures,
            results_emitted=self._results_emitted,
            traces_finalized=self._traces_finalized,
            late_spans=self._late_spans,
            internal_errors=self._internal_errors,
            queue_size=len(self._queue),
            active_traces=self._engine.active_traces,
            spans_reordered=self._engine.stats.spans_reordered,
            spans_reorder_expired=self._engine.stats.spans_reorder_expired,
            runs_recorded=0 if self._history is None else self._history.written,
            history_errors=0 if self._history is None else self._history.errors,
        )

    # --- the application's thread ----------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        """Enqueue an ended span. Called on the thread that ended it: never blocks, never raises."""
        try:
            context = span.context
            if context is None or not context.trace_flags.sampled:
                return
            if self._shutdown:
                self._drop_shutdown.bump()
                return
            if self._pid != os.getpid():
                self._reinit_after_fork()
            queue = self._queue
            if len(queue) >= self._max_queue_size:
                self._dropped_full()
                return
            queue.append(span)
            if len(queue) >= self._batch_size and not self._wake.is_set():
                self._wake.set()
        except Exception:  # never let tracehound break the application
            self._internal_errors += 1

    def _on_log(self, log_record: ReadWriteLogRecord) -> None:
        try:
            record = log_record.log_record
            if not record.span_id or not record.trace_id:
                return
            name = record.event_name
            if not name:
                attrs = record.attributes
                alt = attrs.get("event.name") if attrs else None
                name = alt if isinstance(alt, str) else ""
            if not name.startswith("gen_ai.") or name == names.EVENT_EVALUATION_RESULT:
                return
            scope = log_record.instrumentation_scope
            if scope is not None and _is_own_scope(scope.name):
                return
            if self._shutdown:
                self._drop_shutdown.bump()
                return
            if self._pid != os.getpid():
                self._reinit_after_fork()
            queue = self._queue
            if len(queue) >= self._max_queue_size:
                self._dropped_full()
                return
            queue.append(log_record)
        except Exception:
            self._internal_errors += 1

    def _dropped_full(self) -> None:
        self._drop_full.bump()
        if not self._warned_full:
            self._warned_full = True
            _logger.warning(
                "tracehound queue full (max_queue_size=%d): dropping spans; further drops are "
                "counted in %s, not logged",
                self._max_queue_size,
                names.METRIC_SPANS_DROPPED,
            )

    def _reinit_after_fork(self) -> None:
        with self._reinit_lock:
            if self._pid != os.getpid():
                self._at_fork_reinit()

    # --- lifecycle -------------------------------------------------------------------------------

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Evaluate everything queued, finalize every trace, export and emit; one deadline.

        Then flushes the logger and meter providers tracehound emits to, within what is left of
        the same deadline. False if the deadline passed first, or after shutdown.
        """
        if self._shutdown:
            return False
        deadline = time.monotonic() + timeout_millis / 1e3
        if threading.current_thread() in (self._worker, getattr(self._lane, "_thread", None)):
            return False  # called from an exporter or evaluator: the worker cannot wait on itself
        request = _FlushRequest()
        with self._flush_lock:
            self._flush_requests.append(request)
        self._wake.set()
        if not request.done.wait(max(deadline - time.monotonic(), 0.0)):
            return False
        flushed = self._flush_emitters(deadline)
        return request.ok and flushed

    def _flush_emitters(self, deadline: float) -> bool:
        ok = True
        token = _suppressed()
        try:
            providers: list[Any] = []
            if self._emit_events:
                providers.append(self._emitter.provider)
            if self._metrics is not None and self._meter_provider is not None:
                providers.append(self._meter_provider)
            for provider in providers:
                flush = getattr(provider, "force_flush", None)
                if callable(flush):
                    remaining = max(int((deadline - time.monotonic()) * 1e3), 0)
                    result = flush(timeout_millis=remaining) if _takes_timeout(flush) else flush()
                    ok = ok and result is not False
        except Exception:
            _logger.exception("tracehound: flushing the event/metric providers failed")
            ok = False
        finally:
            detach(token)  # type: ignore[arg-type]
        return ok

    def shutdown(self, timeout_millis: int = 30000) -> None:
        """Evaluate and export what is queued, then shut the exporter down. Idempotent."""
        with self._shutdown_lock:
            if self._shutdown:
                return
            self._shutdown = True
        deadline = time.monotonic() + timeout_millis / 1e3
        self._wake.set()
        if self._worker.is_alive() and threading.current_thread() is not self._worker:
            self._worker.join(max(deadline - time.monotonic(), 0.0))
        self._abandon = True  # a worker still running past the deadline exports no more
        if self._lane is not None:
            self._lane.stop()
        if self._exporter is not None:
            try:
                shutdown = self._exporter.shutdown
                if _takes_timeout(shutdown):
                    remaining = max((deadline - time.monotonic()) * 1e3, 0.0)
                    shutdown(timeout_millis=remaining)  # type: ignore[call-arg]
                else:
                    shutdown()
            except Exception:
                _logger.exception("tracehound: exporter shutdown failed")
        if self._store is not None:
            try:
                self._store.close()
            except Exception:
                _logger.exception("tracehound: closing the baseline store failed")

    # --- the worker ------------------------------------------------------------------------------

    def _worker_main(self) -> None:
        token = _suppressed()
        try:
            while not self._shutdown:
                self._wake.wait(self._next_timeout())
                self._wake.clear()
                if self._shutdown:
                    break
                with self._flush_lock:
                    requests, self._flush_requests = self._flush_requests, []
                self._guarded(self._cycle, bool(requests))
                self._answer(requests)
            self._guarded(self._cycle, True)
            with self._flush_lock:
                requests, self._flush_requests = self._flush_requests, []
            self._answer(requests)
        finally:
            detach(token)  # type: ignore[arg-type]

    def _answer(self, requests: list[_FlushRequest]) -> None:
        if not requests:
            return
        lane = self._lane
        ok = not self._queue_backlog() and (lane is None or not lane.busy)
        for request in requests:
            request.ok = ok
            request.done.set()

    def _queue_backlog(self) -> bool:
        return bool(self._ready)

    def _guarded(self, step: Callable[[bool], None], flush: bool) -> None:
        try:
            step(flush)
        except Exception:
            self._internal_error("worker cycle")

    def _internal_error(self, where: str) -> None:
        self._internal_errors += 1
        if not self._error_logged:
            self._error_logged = True
            _logger.exception(
                "tracehound: internal error in %s (further ones are counted, not logged)", where
            )

    def _next_timeout(self) -> float:
        if self._queue:
            return 0.0 if len(self._queue) >= self._batch_size else self._poll_interval
        timeout = self._schedule_delay
        if self._engine.active_traces:
            timeout = min(timeout, self._poll_interval)
        if self._ready:
            due = self._last_export + self._schedule_delay - time.monotonic()
            timeout = min(timeout, max(due, 0.0))
        return timeout

    def _cycle(self, flush: bool) -> None:
        queue = self._queue
        batch_size = self._batch_size
        while queue:
            taken = 0
            while queue and taken < batch_size:
                item = queue.popleft()
                taken += 1
                if isinstance(item, ReadableSpan):
                    self._on_span(item)
                else:
                    self._on_log_item(item)
            self._queued += taken
            if self._metrics is not None:
                self._metrics.add(names.METRIC_SPANS_QUEUED, taken)
            self._guarded(self._on_released, False)
            if len(self._ready) >= batch_size:
                self._export(all_=False)
            if self._abandon:
                return
        started = time.perf_counter()
        finalized = self._engine.flush() if flush else self._engine.poll()
        self._guarded(self._on_released, False)  # before their traces' held spans leave
        if finalized:
            per_trace = (time.perf_counter() - started) / len(finalized)
            for trace in finalized:
                self._on_finalized(trace, per_trace)
        due = time.monotonic() - self._last_export >= self._schedule_delay
        if self._ready and (flush or due or len(self._ready) >= batch_size):
            self._export(all_=True, wait=flush)
        self._report_drops()

    def _on_log_item(self, record: ReadWriteLogRecord) -> None:
        scope = record.instrumentation_scope
        try:
            view = LogView.from_sdk(record.log_record, scope.name if scope is not None else "")
        except Exception:
            self._internal_error("log record view")
            return
        self._engine.add_log(view)

    def _on_span(self, span: ReadableSpan) -> None:
        try:
            view = SpanView.from_readable(span)
        except Exception:
            self._internal_error("span view")
            self._forward(span, ())
            return
        if _is_own_scope(view.scope_name):
            self._forward(span, ())
            return
        started = time.perf_counter()
        try:
            taken = self._engine.take_span(view)
        except Exception:
            self._internal_error("engine")
            self._forward(span, ())
            return
        trace_id = view.trace_id
        results: tuple[EvaluationResult, ...] = ()  # only a GenAI span has results
        if taken == SPAN_DEFERRED:  # evaluated later (`_on_released`), then forwarded
            self._genai_traces.add(trace_id)
            if self._exporter is not None:
                self._deferred[trace_id, view.span_id] = span
            return
        if type(taken) is tuple:
            results = taken
            self._spans_evaluated += 1
            self._genai_traces.add(trace_id)
            if self._metrics is not None:
                self._metrics.duration(time.perf_counter() - started, "span")
        elif taken == SPAN_LATE:
            self._late_spans += 1
            if self._metrics is not None:
                self._metrics.add(names.METRIC_LATE_SPANS, 1)
        for result in results:
            self._emit(result, trace_id, result.span_id or view.span_id, None)
        if self._exporter is None:
            return
        if type(taken) is tuple or taken == SPAN_PLAIN:  # neither late nor a duplicate
            is_root = not view.parent_span_id or view.parent_is_remote
            if self._forwarding == "hold" or (is_root and trace_id in self._genai_traces):
                self._held.setdefault(trace_id, []).append((span, results))
                return
        self._forward(span, results)

    def _on_released(self, flush: bool) -> None:
        """The spans the engine evaluated after deferring them: their results emitted, and the
        spans forwarded (or held, in `hold` mode) as `_on_span` does for the others."""
        engine = self._engine
        released = engine.take_released()
        if released:
            deferred = self._deferred
            hold = self._forwarding == "hold"
            for outcome in released:
                trace_id, span_id, results = outcome.trace_id, outcome.span_id, outcome.results
                self._spans_evaluated += 1
                for result in results:
                    self._emit(result, trace_id, result.span_id or span_id, None)
                span = deferred.pop((trace_id, span_id), None)
                if span is None:
                    continue
                if hold:
                    self._held.setdefault(trace_id, []).append((span, results))
                else:
                    self._forward(span, results)
        metrics = self._metrics
        if metrics is not None:
            counts = (engine.stats.spans_reordered, engine.stats.spans_reorder_expired)
            if counts != self._reorder_counts:
                (ordered, expired), (was_ordered, was_expired) = counts, self._reorder_counts
                self._reorder_counts = counts
                for outcome_name, n in (
                    ("ancestors", ordered - was_ordered),
                    ("expired", expired - was_expired),
                ):
                    if n:
                        metrics.add(
                            names.METRIC_SPANS_REORDERED,
                            n,
                            {names.METRIC_ATTR_REORDER_OUTCOME: outcome_name},
                        )

    def _on_finalized(self, trace: FinalizedTrace, seconds: float) -> None:
        trace_id = trace.trace_id
        self._traces_finalized += 1
        self._genai_traces.discard(trace_id)
        held = self._held.pop(trace_id, ())
        genai = bool(trace.trajectory.steps)
        metrics = self._metrics
        if metrics is not None:
            metrics.add(
                names.METRIC_TRACES_FINALIZED, 1, {names.METRIC_ATTR_FINALIZE_REASON: trace.reason}
            )
            if trace.reason == "max_traces":
                metrics.add(names.METRIC_TRACES_FINALIZED_EARLY, 1)
            if genai:
                metrics.duration(seconds, "trace")
        if genai:
            agent = trace_agent(trace)
            for result in trace.results:
                self._emit(result, trace_id, result.span_id or trace.root_span_id, agent)
            if self._history is not None:
                self._history.write(trace)  # never raises: failures are counted
        for span, results in held:
            span_id = format(span.context.span_id, "016x") if span.context else ""
            if genai and span_id == trace.root_span_id:
                root_results = tuple(r for r in trace.results if r.span_id in (None, span_id))
                self._forward(span, results, root_attributes(trace, results), root_results)
            else:
                self._forward(span, results)

    def _emit(
        self, result: EvaluationResult, trace_id: str, span_id: str, agent: str | None
    ) -> None:
        self._results_emitted += 1
        try:
            if self._emit_events:
                self._emitter.emit(result, trace_id, span_id)
            if self._metrics is not None:
                self._metrics.record(result_measurements(result, agent))
        except Exception:
            self._internal_error("emit")

    def _forward(
        self,
        span: ReadableSpan,
        results: Sequence[EvaluationResult],
        attributes: dict[str, AttributeValue] | None = None,
        extra_results: Sequence[EvaluationResult] = (),
    ) -> None:
        """Queue a span for export: a copy with its results' attributes, or the span itself."""
        if self._exporter is None:
            return
        add = attributes if attributes is not None else span_attributes(results)
        events: list[tuple[str, dict[str, AttributeValue], int]] = []
        if self._span_events:
            when = span.end_time or time.time_ns()
            for result in (*results, *extra_results):
                events.append((names.EVENT_EVALUATION_RESULT, event_attributes(result), when))
        try:
            out = copy_span(span, add, events, redact=self._redact)
        except Exception:
            self._internal_error("span copy")
            out = span
        ready = self._ready
        ready.append(out)
        if len(ready) > self._max_queue_size:  # the exporter is stuck: bound what waits for it
            ready.popleft()
            self._dropped_backlog += 1
            if self._metrics is not None:
                self._metrics.add(
                    names.METRIC_SPANS_DROPPED, 1, {names.METRIC_ATTR_DROP_REASON: "export_backlog"}
                )

    def _export(self, all_: bool, wait: bool = False) -> None:
        """Hand batches to the export lane. Without `wait`, a busy lane (an export still running
        past `export_timeout_millis`) is left alone and the spans wait for the next cycle."""
        lane = self._lane
        if lane is None:
            self._ready.clear()
            return
        ready = self._ready
        while ready and (all_ or len(ready) >= self._batch_size) and not self._abandon:
            if lane.busy and not lane.wait_idle(self._export_timeout if wait else 0.0):
                return
            count = min(self._batch_size, len(ready))
            batch = [ready.popleft() for _ in range(count)]
            self._last_export = time.monotonic()
            lane.submit(batch, self._export_timeout)

    def _export_done(self, count: int, outcome: str) -> None:
        # Runs on the export lane.
        self._spans_exported += count
        if outcome != "success":
            self._export_failures += 1
        if self._metrics is not None:
            self._metrics.add(
                names.METRIC_SPANS_EXPORTED, count, {names.METRIC_ATTR_EXPORT_OUTCOME: outcome}
            )

    def _report_drops(self) -> None:
        if self._metrics is None:
            return
        full, shut = self._drop_full.value, self._drop_shutdown.value
        if full > self._reported_full:
            self._metrics.add(
                names.METRIC_SPANS_DROPPED,
                full - self._reported_full,
                {names.METRIC_ATTR_DROP_REASON: "queue_full"},
            )
            self._reported_full = full
        if shut > self._reported_shutdown:
            self._metrics.add(
                names.METRIC_SPANS_DROPPED,
                shut - self._reported_shutdown,
                {names.METRIC_ATTR_DROP_REASON: "shutdown"},
            )
            self._reported_shutdown = shut


def _takes_timeout(function: Callable[..., Any]) -> bool:
    try:
        return "timeout_millis" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
