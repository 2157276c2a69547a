"""The engine: per-trace state, finalization, evaluator dispatch.

One engine serves the three shapes (processor, sidecar, `eval`), so the same spans give the same
results. It is a plain object owned by one thread: the processor's worker, the receiver's
evaluation loop, or the CLI. Callers push spans and log records in, and pull finalized traces out
with `poll()` (time-driven) or `flush()` (shutdown, end of input).

The per-trace buffer follows the Collector's tail-sampling processor: a bounded map of traces
(`max_traces`; on overflow the oldest trace is finalized early — never dropped), a wait after the
local root ends (`quiet_period`, like `decision_wait`), an idle timeout, and a cache of finalized
trace ids so that late spans are recognized and counted rather than starting a new trace.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import attrgetter
from typing import Any, Literal

from tracehound.conventions import Message, NormalizedSpan, Part, normalize
from tracehound.conventions.base import fields_maker, slots_maker
from tracehound.evaluators.base import EvaluationResult, Evaluator, SafeEvaluator, TraceInfo
from tracehound.evaluators.summary import derived_attributes
from tracehound.names import ATTR_LATE_SPANS, ATTR_TRUNCATED
from tracehound.spans import LogView, SpanView
from tracehound.steps import Step, Trajectory, TrajectoryBuilder
from tracehound.text import TextCache

__all__ = [
    "SPAN_DEFERRED",
    "SPAN_DUPLICATE",
    "SPAN_LATE",
    "SPAN_PLAIN",
    "Engine",
    "EngineConfig",
    "EngineStats",
    "FinalizedTrace",
    "SpanOutcome",
]

FinalizeReason = Literal["quiet", "timeout", "max_traces", "flush"]

# `Engine.take_span`'s answers for a span that is not evaluated as GenAI (a GenAI span's answer
# is its results, a tuple)
SPAN_PLAIN = 0
"""Not GenAI (or past the trace's span limit): the span passes through."""
SPAN_LATE = 1
"""Its trace was finalized already (`SpanOutcome.late`)."""
SPAN_DUPLICATE = 2
"""Its trace had a span with its id (`SpanOutcome.duplicate`)."""
SPAN_DEFERRED = 3
"""GenAI, its evaluation deferred until its ancestors arrive (`SpanOutcome.deferred`): its
results come later, from `Engine.take_released`."""

# Ancestors walked up from a span at most (deeper, or a cycle of parent links: taken as known)
_MAX_DEPTH = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """Engine limits. Times are seconds; sizes are counts or bytes."""

    quiet_period: float = 2.0
    """Wait after the local root span ended with no new span before finalizing."""
    trace_timeout: float = 30.0
    """Finalize a trace that has been idle this long, root or not."""
    max_traces: int = 10_000
    """Traces held at once; past it the oldest is finalized early (counted)."""
    max_spans_per_trace: int = 10_000
    """Spans evaluated per trace; later ones pass through unevaluated (trace marked truncated)."""
    max_text_bytes_per_trace: int = 16 * 1024 * 1024
    """Message/tool/document text indexed per trace; past it text is dropped (truncated)."""
    finalized_cache_size: int = 100_000
    """Finalized trace ids remembered to recognize late spans (16 bytes-ish each)."""
    reorder_delay: float = 1.0
    """Longest wait of a GenAI span's per-span evaluation for its ancestors (its parent chain up
    to the local root) to arrive; past it the span is evaluated as it is (counted). 0: every
    span is evaluated on arrival."""

    def __post_init__(self) -> None:
        problems = []
        if not self.quiet_period >= 0:
            problems.append("quiet_period must be >= 0")
        if not 0 <= self.reorder_delay <= self.trace_timeout:
            problems.append("reorder_delay must be >= 0 and <= trace_timeout")
        if not self.trace_timeout > 0:
            problems.append("trace_timeout must be > 0")
        if self.trace_timeout < self.quiet_period:
            problems.append("trace_timeout must be >= quiet_period")
        for name in ("max_traces", "max_spans_per_trace", "max_text_bytes_per_trace"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1")
        if self.finalized_cache_size < 0:
            problems.append("finalized_cache_size must be >= 0")
        if problems:
            raise ValueError("invalid engine configuration: " + "; ".join(problems))

    @property
    def poll_interval(self) -> float:
        """How often an owner should call `Engine.poll`: a quarter of the shortest wait it
        times (`quiet_period`, `reorder_delay` when set), within [10 ms, 0.5 s]."""
        wait = self.quiet_period
        if self.reorder_delay:
            wait = min(wait, self.reorder_delay)
        return min(max(wait / 4, 0.01), 0.5)


@dataclass(slots=True)
class EngineStats:
    """Counters for the pipeline's own health (exported as metrics by the shapes)."""

    spans_received: int = 0
    spans_genai: int = 0
    spans_duplicate: int = 0
    spans_over_limit: int = 0
    late_spans: int = 0
    logs_received: int = 0
    logs_unjoined: int = 0
    traces_finalized: int = 0
    traces_finalized_early: int = 0
    traces_timed_out: int = 0
    traces_truncated: int = 0
    mapping_problems: int = 0
    evaluator_errors: int = 0
    spans_reordered: int = 0
    """GenAI spans whose evaluation waited for their ancestors, evaluated once they arrived."""
    spans_reorder_expired: int = 0
    """GenAI spans that waited for their ancestors and were evaluated without them (after
    `reorder_delay`, or when their trace was finalized)."""


@dataclass(frozen=True, slots=True)
class SpanOutcome:
    """What the engine made of one span on arrival."""

    trace_id: str
    span_id: str
    genai: bool
    steps: tuple[Step, ...] = ()
    results: tuple[EvaluationResult, ...] = ()
    late: bool = False
    duplicate: bool = False
    evaluated: bool = True
    deferred: bool = False
    """GenAI, evaluated later (`SPAN_DEFERRED`): its outcome comes from `take_released`."""


@dataclass(frozen=True, slots=True)
class FinalizedTrace:
    trace_id: str
    root_span_id: str
    trajectory: Trajectory
    results: tuple[EvaluationResult, ...]
    reason: FinalizeReason
    span_count: int
    truncated: bool
    attributes: dict[str, Any] = field(default_factory=dict)
    """Trace-level `tracehound.*` attributes for the root span."""


# Outcomes are made for every span, the others per trace: without the dataclasses' __init__
# (Python code per field; see `slots_maker`)
_new_outcome = slots_maker(SpanOutcome)
_new_finalized = fields_maker(FinalizedTrace)
_new_result = fields_maker(EvaluationResult)
_new_info = fields_maker(TraceInfo)


def _at_span(result: EvaluationResult, span_id: str) -> EvaluationResult:
    """`replace(result, span_id=span_id)`, without the dataclass __init__ where it can."""
    if type(result) is not EvaluationResult:  # a subclass: `replace` keeps its class
        return replace(result, span_id=span_id)
    made: EvaluationResult = _new_result(
        result.name,
        result.evaluator,
        result.evaluator_version,
        span_id,
        result.score_value,
        result.score_label,
        result.explanation,
        result.attributes,
        result.error_type,
    )
    return made


# A span whose evaluation waits for its ancestors: (its span id, normalized span, arrival, end)
_Deferred = tuple[str, NormalizedSpan, float, int]


class _TraceState:
    __slots__ = (
        "builder",
        "deferred",
        "eval_states",
        "first_seen",
        "info",
        "known",
        "last_seen",
        "logs",
        "names",
        "parents",
        "relog",
        "root_ended",
        "span_count",
        "span_hooks",
        "text_bytes",
        "trace_id",
        "views",
        "waiting",
    )

    def __init__(self, trace_id: str, now: float) -> None:
        self.trace_id = trace_id
        self.builder = TrajectoryBuilder(trace_id)
        self.parents: dict[str, str] = {}
        self.names: dict[str, str] = {}
        self.views: dict[str, SpanView] = {}
        self.logs: dict[str, list[LogView]] = {}
        self.relog: set[str] = set()  # GenAI spans whose log events arrived after them
        self.first_seen = now
        self.last_seen = now
        self.root_ended: float | None = None
        self.span_count = 0
        self.text_bytes = 0
        self.info: TraceInfo = _new_info(trace_id, "", False, TextCache())
        # Evaluator states, made on the trace's first GenAI span: a trace without one (an HTTP
        # request, a health check) is followed for its parent links only, never evaluated.
        self.eval_states: list[Any] | None = None
        # (position, on_span, state) of the evaluators called per span (`Engine.add_span`)
        self.span_hooks: list[tuple[int, Any, Any]] | None = None
        # Arrival order (`Engine.add_span`): the spans whose ancestors up to a local root have
        # all arrived (roots included), the GenAI spans waiting for theirs (span id → its
        # normalized span, arrival time and end, in arrival order), and what they wait for (the
        # first ancestor not arrived → the spans waiting for it).
        self.known: set[str] = set()
        self.deferred: dict[str, _Deferred] = {}
        self.waiting: dict[str, list[str]] = {}


class Engine:
    """Per-trace state and evaluator dispatch. Not thread-safe: one owner thread."""

    __slots__ = (
        "_clock",
        "_evaluators",
        "_finalized",
        "_late_by_trace",
        "_ready",
        "_released",
        "_reorder_delay",
        "_span_hook_positions",
        "_traces",
        "config",
        "stats",
    )

    def __init__(
        self,
        evaluators: Sequence[Evaluator] = (),
        config: EngineConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or EngineConfig()
        self._evaluators = [SafeEvaluator(e) for e in evaluators]
        # The evaluators called per span: not those with `Evaluator`'s do-nothing `on_span`
        self._span_hook_positions = [i for i, e in enumerate(evaluators) if _has_span_hook(e)]
        self._clock = clock
        self._traces: OrderedDict[str, _TraceState] = OrderedDict()
        self._finalized: OrderedDict[str, None] = OrderedDict()
        self._ready: list[FinalizedTrace] = []
        self._late_by_trace: dict[str, int] = {}
        self._released: list[SpanOutcome] = []
        self._reorder_delay = self.config.reorder_delay
        self.stats = EngineStats()

    @property
    def evaluators(self) -> list[SafeEvaluator]:
        return self._evaluators

    @property
    def active_traces(self) -> int:
        return len(self._traces)

    # --- input ------------------------------------------------------------------------------

    def add_span(self, view: SpanView) -> SpanOutcome:
        """Take one ended span; return its per-span results. Never raises on bad data.

        A GenAI span whose ancestors have not all arrived (SDK exporters send a span before its
        parent: children end first) is not evaluated yet (`SpanOutcome.deferred`): its per-span
        results would read it as standing alone, outside its run. It is evaluated when its last
        missing ancestor arrives, or `reorder_delay` after it arrived (`poll`), or when its trace
        is finalized, whichever comes first; spans that become ready together are evaluated
        parents first, the others in the order they ended (`_canonical`), so the per-span
        results are those of that parents-first arrival. Their outcomes are collected by
        `take_released`."""
        stats = self.stats
        stats.spans_received += 1
        trace_id, span_id = view.trace_id, view.span_id
        if trace_id in self._finalized:
            stats.late_spans += 1
            self._late_by_trace[trace_id] = self._late_by_trace.get(trace_id, 0) + 1
            return SpanOutcome(trace_id, span_id, genai=False, late=True, evaluated=False)
        now = self._clock()
        state = self._traces.get(trace_id)
        if state is None:
            state = self._new_trace(trace_id, now)
        elif span_id in state.parents:
            stats.spans_duplicate += 1
            return SpanOutcome(trace_id, span_id, genai=False, duplicate=True, evaluated=False)
        state.last_seen = now
        parent = view.parent_span_id
        state.parents[span_id] = parent
        state.names[span_id] = view.name
        if not parent or view.parent_is_remote:
            state.root_ended = now
            state.known.add(span_id)
            if not state.info.service_name:
                state.info.service_name = view.service_name
        # the spans waiting for this one (their first missing ancestor)
        waiters = state.waiting.pop(span_id, None) if state.waiting else None
        state.span_count += 1
        if state.span_count > self.config.max_spans_per_trace:
            stats.spans_over_limit += 1
            state.info.truncated = True
            if waiters is not None:
                self._arrived(state, span_id, waiters, None)
            return SpanOutcome(trace_id, span_id, genai=False, evaluated=False)

        normalized = normalize(view, state.logs.get(span_id))
        if normalized is None:  # most spans of an application: `SpanOutcome(..., genai=False)`
            if waiters is not None:
                self._arrived(state, span_id, waiters, None)
            return _new_outcome(trace_id, span_id, False)
        stats.spans_genai += 1
        if normalized.problems:
            stats.mapping_problems += len(normalized.problems)
        state.views[span_id] = view
        if waiters is not None:
            outcome = self._arrived(state, span_id, waiters, normalized)
            assert outcome is not None  # (a GenAI span's)
            return outcome
        if self._reorder_delay and span_id not in state.known:
            missing = _missing_ancestor(state.known, state.parents, span_id)
            if missing is not None:
                state.deferred[span_id] = (span_id, normalized, now, view.end_ns)
                state.waiting.setdefault(missing, []).append(span_id)
                return _new_outcome(trace_id, span_id, True, (), (), False, False, False, True)
        return self._evaluate(state, normalized, span_id)

    def _arrived(
        self,
        state: _TraceState,
        span_id: str,
        waiters: list[str],
        normalized: NormalizedSpan | None,
    ) -> SpanOutcome | None:
        """Span `span_id` (GenAI: `normalized`) arrived and `waiters` waited for it. When its
        ancestors have all arrived, evaluate them with it (its outcome returned, theirs
        released), in canonical order; otherwise they (and it) wait for the first missing one
        (None returned)."""
        missing = _missing_ancestor(state.known, state.parents, span_id)
        deferred = state.deferred
        if missing is not None:
            waiting = state.waiting.setdefault(missing, [])
            waiting += waiters
            if normalized is not None:
                deferred[span_id] = (span_id, normalized, self._clock(), normalized.view.end_ns)
                waiting.append(span_id)
                return _new_outcome(
                    state.trace_id, span_id, True, (), (), False, False, False, True
                )
            return None
        ready = [deferred.pop(w) for w in waiters if w in deferred]
        self.stats.spans_reordered += len(ready)
        if normalized is None:
            self._release(state, ready)
            return None
        ready.append((span_id, normalized, 0.0, normalized.view.end_ns))
        if len(ready) > 1:
            ready = _canonical(ready, state.parents)
        outcome: SpanOutcome | None = None
        released = self._released
        for ready_id, span, _, _ in ready:
            made = self._evaluate(state, span, ready_id)
            if span is normalized:
                outcome = made
            else:
                released.append(made)
        return outcome

    def _release(self, state: _TraceState, spans: list[_Deferred]) -> None:
        """Evaluate deferred spans, in canonical order; their outcomes go to `take_released`."""
        if len(spans) > 1:
            spans = _canonical(spans, state.parents)
        released = self._released
        for span_id, span, _, _ in spans:
            released.append(self._evaluate(state, span, span_id))

    def _expire(self, state: _TraceState, before: float | None) -> None:
        """Evaluate as they are the deferred spans that arrived before `before` (None: all of
        them), with the deferred ancestors of each (so that a run's span is evaluated after
        the spans above it that did arrive)."""
        deferred = state.deferred
        if before is None:
            expired = list(deferred)
        else:
            expired = []
            for span_id, (_, _, arrived, _) in deferred.items():
                if arrived > before:
                    break  # arrival order
                expired.append(span_id)
            parents = state.parents
            chosen = set(expired)
            for span_id in list(expired):
                current = parents.get(span_id)
                for _ in range(_MAX_DEPTH):
                    if not current or current in chosen:
                        break
                    if current in deferred:
                        chosen.add(current)
                        expired.append(current)
                    current = parents.get(current)
        spans = [deferred.pop(span_id) for span_id in expired]
        self.stats.spans_reorder_expired += len(spans)
        if not deferred:  # nothing left waiting: what they waited for no longer matters
            state.waiting.clear()
        self._release(state, spans)

    def take_released(self) -> list[SpanOutcome]:
        """The outcomes of the deferred spans evaluated since the last call (in the order they
        were evaluated): after `add_span` of an ancestor of theirs, `poll` or `flush`."""
        released = self._released
        if not released:
            return released
        self._released = []
        return released

    def _evaluate(
        self, state: _TraceState, normalized: NormalizedSpan, span_id: str
    ) -> SpanOutcome:
        """A GenAI span's steps and per-span results, now."""
        trace_id = state.trace_id
        if span_id in state.relog:  # its log events arrived while it was deferred
            fresh = normalize(state.views[span_id], state.logs.get(span_id))
            if fresh is not None:
                normalized = fresh
                state.relog.discard(span_id)
        self._charge_text(state, normalized)
        steps = tuple(state.builder.add(normalized))
        hooks = state.span_hooks
        if hooks is None:
            hooks = self._start_evaluators(state)
        if not hooks:
            return _new_outcome(trace_id, span_id, True, steps, (), False, False, True)
        # The evaluators' own hooks, called directly (no `SafeEvaluator` frame per evaluator per
        # span): one `try` for them all, and `SafeEvaluator`'s isolation from the one that
        # raised on, for this span and the rest of the trace (`_isolate`).
        info = state.info
        results: list[EvaluationResult] = []
        position = 0
        try:
            for position, on_span, eval_state in hooks:  # noqa: B007 (read by the handler)
                results += on_span(eval_state, normalized, steps, info)
        except Exception as exc:
            self._isolate(state, position, exc, span=normalized, steps=steps, results=results)
        return _new_outcome(
            trace_id, span_id, True, steps, tuple(results) if results else (), False, False, True
        )

    def take_span(self, view: SpanView) -> tuple[EvaluationResult, ...] | int:
        """`add_span` for a caller that reads only what the outcome says of the span: its
        results (a tuple, maybe empty) when it is GenAI and evaluated, else `SPAN_DEFERRED`,
        `SPAN_LATE`, `SPAN_DUPLICATE` or `SPAN_PLAIN` (`span_taker` for many spans)."""
        outcome = self.add_span(view)
        if outcome.genai:
            return SPAN_DEFERRED if outcome.deferred else outcome.results
        if outcome.late:
            return SPAN_LATE
        return SPAN_DUPLICATE if outcome.duplicate else SPAN_PLAIN

    def span_taker(self) -> Callable[[SpanView], tuple[EvaluationResult, ...] | int]:
        """`take_span`, bound (for a caller that feeds many spans)."""
        return self.take_span

    def _start_evaluators(self, state: _TraceState) -> list[tuple[int, Any, Any]]:
        """Start the evaluators on the trace's first GenAI span; return its span hooks: (position,
        the evaluator's `on_span`, its state) of each evaluator with an `on_span` of its own and
        a state (not broken by a failed `start_trace`)."""
        info = state.info
        evaluators = self._evaluators
        eval_states = state.eval_states = _started(evaluators, info)
        broken = SafeEvaluator.BROKEN
        hooks = state.span_hooks = [
            (i, evaluators[i].inner.on_span, eval_states[i])
            for i in self._span_hook_positions
            if eval_states[i] is not broken
        ]
        return hooks

    def _isolate(
        self,
        state: _TraceState,
        failed: int,
        exc: Exception,
        *,
        span: NormalizedSpan,
        steps: tuple[Step, ...],
        results: list[EvaluationResult],
    ) -> None:
        """After the evaluator at `failed` raised `exc` on `span`: its error result, its state
        broken for the rest of the trace, and the evaluators after it called through their
        `SafeEvaluator` (what `SafeEvaluator.on_span` does for each, one by one)."""
        evaluators = self._evaluators
        eval_states = state.eval_states
        assert eval_states is not None
        hooks = state.span_hooks or []
        results += evaluators[failed].span_failed(exc, span.span_id)
        eval_states[failed] = SafeEvaluator.BROKEN
        after = [hook for hook in hooks if hook[0] > failed]
        for position, _, eval_state in after:
            new_state, span_results = evaluators[position].on_span(
                eval_state, span, steps, state.info
            )
            eval_states[position] = new_state
            results += span_results
        broken = SafeEvaluator.BROKEN
        state.span_hooks = [hook for hook in hooks if eval_states[hook[0]] is not broken]

    def add_log(self, log: LogView) -> None:
        """Take one log record; GenAI event records are joined to their span by ids."""
        if not log.event_name.startswith("gen_ai.") or not log.trace_id or not log.span_id:
            return
        self.stats.logs_received += 1
        if log.trace_id in self._finalized:
            self.stats.logs_unjoined += 1
            return
        state = self._traces.get(log.trace_id)
        if state is None:
            state = self._new_trace(log.trace_id, self._clock())
        state.last_seen = self._clock()
        state.logs.setdefault(log.span_id, []).append(log)
        if log.span_id in state.parents:
            state.relog.add(log.span_id)

    # --- output -----------------------------------------------------------------------------

    def poll(self, now: float | None = None) -> list[FinalizedTrace]:
        """Finalize the traces that are due; return them with those finalized early."""
        now = self._clock() if now is None else now
        quiet, timeout = self.config.quiet_period, self.config.trace_timeout
        due: list[tuple[str, FinalizeReason]] = []
        expire_before = now - self._reorder_delay
        for trace_id, state in self._traces.items():
            deferred = state.deferred
            if deferred and next(iter(deferred.values()))[2] <= expire_before:
                self._expire(state, expire_before)
            idle = now - state.last_seen
            if state.root_ended is not None and idle >= quiet:
                due.append((trace_id, "quiet"))
            elif idle >= timeout:
                due.append((trace_id, "timeout"))
        for trace_id, reason in due:
            self._finalize(trace_id, reason)
        ready, self._ready = self._ready, []
        return ready

    def flush(self) -> list[FinalizedTrace]:
        """Finalize every trace now (shutdown, end of input)."""
        for trace_id in list(self._traces):
            self._finalize(trace_id, "flush")
        ready, self._ready = self._ready, []
        return ready

    def late_spans_of(self, trace_id: str) -> int:
        return self._late_by_trace.get(trace_id, 0)

    # --- internals --------------------------------------------------------------------------

    def _new_trace(self, trace_id: str, now: float) -> _TraceState:
        if len(self._traces) >= self.config.max_traces:
            oldest = next(iter(self._traces))
            self.stats.traces_finalized_early += 1
            self._finalize(oldest, "max_traces")
        state = _TraceState(trace_id, now)
        self._traces[trace_id] = state
        return state

    def _charge_text(self, state: _TraceState, span: NormalizedSpan) -> None:
        size = _text_size(span)
        if state.text_bytes + size > self.config.max_text_bytes_per_trace:
            if not state.info.truncated:
                state.info.truncated = True
            _strip_text(span)
            return
        state.text_bytes += size

    def _finalize(self, trace_id: str, reason: FinalizeReason) -> None:
        state = self._traces[trace_id]
        if state.deferred:  # evaluated as they are, before the trace results
            self._expire(state, None)
        del self._traces[trace_id]
        stats = self.stats
        stats.traces_finalized += 1
        if reason == "timeout":
            stats.traces_timed_out += 1
        if state.info.truncated:
            stats.traces_truncated += 1
        builder = state.builder
        if state.relog:
            builder = self._rebuild_with_logs(state)
        if state.logs:
            joined = builder.spans
            stats.logs_unjoined += sum(len(v) for k, v in state.logs.items() if k not in joined)
        trajectory = builder.build(state.parents, state.names)
        results: list[EvaluationResult] = []
        eval_states = state.eval_states
        info = state.info
        if eval_states is None and trajectory.steps:  # GenAI only once its late logs joined
            eval_states = _started(self._evaluators, info)
        # A trace evaluates when its trajectory has steps, the rule the processor and the
        # sidecar use for emitting its results: a side trace whose GenAI spans give no step
        # (an agent's construction, `create_agent`; index building, `embeddings`) is not a run.
        if eval_states is not None and trajectory.steps:
            # `SafeEvaluator.finish_trace` of each, without its frame when the state is sound
            broken = SafeEvaluator.BROKEN
            for evaluator, eval_state in zip(self._evaluators, eval_states, strict=True):
                if eval_state is broken:
                    results += evaluator.finish_trace(eval_state, trajectory, info)
                    continue
                try:
                    results += evaluator.inner.finish_trace(eval_state, trajectory, info)
                except Exception as exc:
                    results += evaluator.trace_failed(exc)
        stats.evaluator_errors = sum(map(_errors_of, self._evaluators))
        root = _root_span_id(state.parents)
        attributes: dict[str, Any] = {}
        if info.truncated:
            attributes[ATTR_TRUNCATED] = True
        late = self._late_by_trace.get(trace_id)
        if late:
            attributes[ATTR_LATE_SPANS] = late
        # the results on their spans (the root's by default), the root's attributes in order
        placed: list[EvaluationResult] = []
        for result in results:
            span_id = result.span_id
            if span_id is None:  # `_at_span(result, root)`, without its frame for the usual class
                if type(result) is EvaluationResult:
                    result = _new_result(
                        result.name,
                        result.evaluator,
                        result.evaluator_version,
                        root,
                        result.score_value,
                        result.score_label,
                        result.explanation,
                        result.attributes,
                        result.error_type,
                    )
                else:
                    result = _at_span(result, root)
                span_id = root
            if span_id == root:
                attributes.update(result.attributes)
            placed.append(result)
        attributes.update(derived_attributes(attributes, placed))
        if self.config.finalized_cache_size:
            self._finalized[trace_id] = None
            while len(self._finalized) > self.config.finalized_cache_size:
                evicted, _ = self._finalized.popitem(last=False)
                self._late_by_trace.pop(evicted, None)
        self._ready.append(
            _new_finalized(
                trace_id,
                root,
                trajectory,
                tuple(placed),
                reason,
                state.span_count,
                info.truncated,
                attributes,
            )
        )

    def _rebuild_with_logs(self, state: _TraceState) -> TrajectoryBuilder:
        """Re-map the spans whose log events arrived after them, for the final trajectory."""
        builder = TrajectoryBuilder(state.trace_id)
        for span_id, old in state.builder.spans.items():
            if span_id in state.relog:
                fresh = normalize(state.views[span_id], state.logs.get(span_id))
                builder.add(fresh if fresh is not None else old)
            else:
                builder.add(old)
        for span_id in state.relog - set(state.builder.spans):
            view = state.views.get(span_id)
            if view is not None:
                fresh = normalize(view, state.logs.get(span_id))
                if fresh is not None:
                    builder.add(fresh)
        return builder


def _started(evaluators: list[SafeEvaluator], info: TraceInfo) -> list[Any]:
    """`[e.start_trace(info) for e in evaluators]`, each evaluator's own `start_trace` called
    directly (no `SafeEvaluator` frame per evaluator per trace) and a failure handed to
    `SafeEvaluator.start_failed`, which answers as its `start_trace` does."""
    states: list[Any] = []
    for evaluator in evaluators:
        try:
            states.append(evaluator.inner.start_trace(info))
        except Exception as exc:
            states.append(evaluator.start_failed(exc))
    return states


def _missing_ancestor(known: set[str], parents: dict[str, str], span_id: str) -> str | None:
    """The first ancestor of `span_id` (an arrived span) that has not arrived, or None when all
    have, up to a local root (those walked are then marked known). A chain deeper than
    `_MAX_DEPTH`, or a cycle of parent links, counts as known."""
    path = []
    current = span_id
    for _ in range(_MAX_DEPTH):
        if current in known:
            break
        parent = parents.get(current)
        if parent is None:
            return current
        path.append(current)
        current = parent
    known.update(path)
    return None


def _canonical(spans: list[_Deferred], parents: dict[str, str]) -> list[_Deferred]:
    """`spans` (ready together) in the order they are evaluated in: parents first, the rest as
    they ended — by the earliest end in each span's subtree (among `spans`), then by depth (a
    parent before its children), then by span id. Spans arriving one by one in that order are
    evaluated in it too: this is the parents-first order the per-span results are those of."""
    first_end: dict[str, int] = {span[0]: span[3] for span in spans}
    keys: dict[str, tuple[int, str]] = {}
    get = parents.get
    for span_id, _, _, end in spans:
        level = 0
        current = get(span_id)
        while current and level < _MAX_DEPTH:
            level += 1
            if current in first_end and end < first_end[current]:
                first_end[current] = end
            current = get(current)
        keys[span_id] = (level, span_id)
    return sorted(spans, key=lambda span: (first_end[span[0]], keys[span[0]]))


def _has_span_hook(evaluator: Evaluator) -> bool:
    """Does `evaluator` have an `on_span` other than `Evaluator`'s do-nothing one?"""
    own = getattr(evaluator, "__dict__", None)
    return getattr(type(evaluator), "on_span", None) is not Evaluator.on_span or bool(
        own and "on_span" in own
    )


def _root_span_id(parents: dict[str, str]) -> str:
    """The local root: a span whose parent is not in the trace (the earliest such, by id order:
    one without a parent, else one whose parent is elsewhere)."""
    for span_id, parent in parents.items():
        if not parent:
            return span_id
    for span_id, parent in parents.items():
        if parent not in parents:
            return span_id
    return next(iter(parents), "")


_part_content = attrgetter("content")
_message_parts = attrgetter("parts")
_errors_of = attrgetter("errors")


def _text_size(span: NormalizedSpan) -> int:
    # every part's content in one chain of C iterators (a chat span resends the whole history)
    parts = chain.from_iterable(
        map(_message_parts, chain(span.input_messages, span.output_messages, span.history))
    )
    size = sum(map(len, filter(None, map(_part_content, parts))))
    if span.system_instructions:
        size += sum(map(len, span.system_instructions))
    for value in (span.tool_arguments, span.tool_result, span.declared_output):
        if isinstance(value, str):
            size += len(value)
    for doc in span.documents:
        if doc.content:
            size += len(doc.content)
    span.text_bytes = size
    return size


def _strip_text(span: NormalizedSpan) -> None:
    """Keep a span's structure (kinds, tools, ids) but none of its text."""

    def bare(messages: list[Message]) -> list[Message]:
        return [
            Message(
                role=m.role,
                parts=[Part(type=p.type, id=p.id, name=p.name) for p in m.parts],
                finish_reason=m.finish_reason,
            )
            for m in messages
        ]

    span.input_messages = bare(span.input_messages)
    span.output_messages = bare(span.output_messages)
    span.history = []
    span.system_instructions = []
    span.tool_result = None
    span.declared_output = None
    span.documents = [replace(d, content=None) for d in span.documents]
    span.text_bytes = 0
