"""The evaluator protocol, its result type, the safe wrapper and plugin loading.

An evaluator is a small class with a name, a version and three hooks that do nothing by default
(like the OTel SDK's `SpanProcessor`):

- `start_trace(trace)` returns the evaluator's per-trace state (incremental evaluators keep their
  indexes there);
- `on_span(state, span, steps, trace)` is called when a GenAI span arrives, with the steps it
  contributed; its results annotate that span;
- `finish_trace(state, trajectory, trace)` is called once at finalization with the canonical,
  order-independent trajectory; its results annotate the root span (or the span they name).

Hooks run on the engine's thread and must not block. An evaluator that raises is isolated by
`SafeEvaluator`: the failure is counted, logged once, and becomes an evaluation error result.
A plugin (loaded from an entry point) may also hang: `load_plugins` wraps each in
`BudgetedEvaluator`, whose hooks run on a thread of their own within `PLUGIN_TIME_BUDGET` seconds
per call; one call over it fails that trace's evaluation by the plugin (an `EvaluatorTimeout`
error result) and disables the plugin for good, so the pipeline never waits for it again.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, ClassVar

from tracehound.conventions import NormalizedSpan
from tracehound.spans import AttributeValue
from tracehound.steps import Step, Trajectory
from tracehound.text import TextCache

__all__ = [
    "PLUGIN_GROUP",
    "PLUGIN_TIME_BUDGET",
    "BudgetedEvaluator",
    "DetailedResult",
    "EvaluationResult",
    "Evaluator",
    "EvaluatorTimeout",
    "PluginError",
    "SafeEvaluator",
    "TraceInfo",
    "load_plugins",
]

_logger = logging.getLogger(__name__)

PLUGIN_GROUP = "tracehound.evaluators"


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationResult:
    """One evaluation outcome, mirroring the `gen_ai.evaluation.result` event.

    `name` → `gen_ai.evaluation.name`, `score_value` → `gen_ai.evaluation.score.value` (a double),
    `score_label` → `gen_ai.evaluation.score.label` (low cardinality), `explanation` →
    `gen_ai.evaluation.explanation`, `error_type` → `error.type` when the evaluation itself failed.
    `span_id` is the evaluated span (None: the trace's root span). `attributes` are the
    `tracehound.*` span attributes this result puts on that span.
    """

    name: str
    evaluator: str
    evaluator_version: str
    span_id: str | None = None
    score_value: float | None = None
    score_label: str | None = None
    explanation: str | None = None
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    error_type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DetailedResult(EvaluationResult):
    """An `EvaluationResult` that also carries its evaluator's structured findings (`detail`,
    JSON-able) for the run history (`tracehound.history`). `detail` is never emitted and takes
    no part in equality: the result is the same event with or without it."""

    detail: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(slots=True)
class TraceInfo:
    """What an evaluator may know about the trace beyond its steps."""

    trace_id: str
    service_name: str = ""
    truncated: bool = False
    texts: TextCache = field(default_factory=TextCache, repr=False, compare=False)
    """The trace's tokenized texts, shared by its evaluators (each text tokenized once)."""


class Evaluator:
    """Base class: hooks that do nothing. Subclasses set `name` and `version`."""

    name: ClassVar[str] = ""
    version: ClassVar[str] = "0"

    def start_trace(self, trace: TraceInfo) -> Any:
        """Return per-trace state (anything); called before the trace's first span."""
        return None

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        """Per-span results, from the steps logically before and in this span. Must not block."""
        return ()

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        """Trace results from the whole, order-independent trajectory."""
        return ()


class SafeEvaluator:
    """Wraps an evaluator so that its failure cannot break the pipeline.

    A hook that raises yields one result with `error_type` set; the evaluator is then skipped for
    the rest of that trace. Failures are counted; the first one per evaluator is logged with its
    traceback, later ones are only counted (high-frequency events go to metrics, not logs).

    The engine calls the evaluators' own `start_trace`, `on_span` and `finish_trace` directly
    (one `try` for all of a span's hooks, no frame of this class per evaluator per span or
    trace) and hands a failure to `start_failed` / `span_failed` / `trace_failed`, which answer
    as these hooks do.
    """

    __slots__ = ("_logged", "errors", "inner")

    BROKEN: ClassVar[object] = object()
    """The state of an evaluator that failed in this trace (it is skipped until its end)."""

    def __init__(self, inner: Evaluator) -> None:
        self.inner = inner
        self.errors = 0
        self._logged = False

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def version(self) -> str:
        return self.inner.version

    def _failed(self, exc: Exception, hook: str, span_id: str | None) -> list[EvaluationResult]:
        self.errors += 1
        if not self._logged:
            self._logged = True
            _logger.warning(
                "evaluator %s %s failed in %s; it is skipped for the rest of the trace "
                "(further failures are counted, not logged)",
                self.inner.name,
                self.inner.version,
                hook,
                exc_info=exc,
            )
        return [
            EvaluationResult(
                name=self.inner.name,
                evaluator=self.inner.name,
                evaluator_version=self.inner.version,
                span_id=span_id,
                error_type=type(exc).__name__,
                explanation=f"evaluator failed in {hook}: {exc}"[:500],
            )
        ]

    def span_failed(self, exc: Exception, span_id: str) -> list[EvaluationResult]:
        """`on_span`'s answer to a failure of the evaluator's `on_span` on span `span_id`: the
        failure counted (and logged, the first time) and its error result. The caller then
        holds the state `BROKEN`."""
        return self._failed(exc, "on_span", span_id)

    def start_trace(self, trace: TraceInfo) -> Any:
        try:
            return self.inner.start_trace(trace)
        except Exception as exc:
            return self.start_failed(exc)

    def start_failed(self, exc: Exception) -> Any:
        """`start_trace`'s answer to a failure of the evaluator's `start_trace`: the failure
        counted (and logged, the first time), and the `BROKEN` state."""
        self._failed(exc, "start_trace", None)
        return self.BROKEN

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> tuple[Any, Sequence[EvaluationResult]]:
        """Returns (state, results): the state becomes broken after a failure."""
        if state is self.BROKEN:
            return state, ()
        try:
            return state, self.inner.on_span(state, span, steps, trace)
        except Exception as exc:
            return self.BROKEN, self.span_failed(exc, span.span_id)

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        if state is self.BROKEN:
            return [
                EvaluationResult(
                    name=self.inner.name,
                    evaluator=self.inner.name,
                    evaluator_version=self.inner.version,
                    error_type="EvaluatorFailed",
                    explanation="evaluator failed earlier in this trace",
                )
            ]
        try:
            return self.inner.finish_trace(state, trajectory, trace)
        except Exception as exc:
            return self.trace_failed(exc)

    def trace_failed(self, exc: Exception) -> list[EvaluationResult]:
        """`finish_trace`'s answer to a failure of the evaluator's `finish_trace`."""
        return self._failed(exc, "finish_trace", None)


class PluginError(Exception):
    """An evaluator plugin that cannot be loaded (raised at start-up, never later)."""


PLUGIN_TIME_BUDGET = 5.0
"""Seconds one hook call of a plugin evaluator may take before the plugin is disabled."""


class EvaluatorTimeout(Exception):
    """A plugin's hook took longer than its time budget (or the plugin was disabled by one)."""


class _Call:
    __slots__ = ("args", "done", "error", "hook", "value")

    def __init__(self, hook: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.hook = hook
        self.args = args
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class BudgetedEvaluator(Evaluator):
    """An evaluator whose hooks run one at a time on a daemon thread of their own, each call
    within `budget` seconds.

    A call over budget raises `EvaluatorTimeout` on the caller's thread (`SafeEvaluator` makes
    it the trace's error result) and disables the evaluator: its thread may never come back, so
    no further call is sent to it, and every later call raises `EvaluatorTimeout` at once.
    `timeouts` counts the calls that ran over (0 or 1). Costs a thread hand-off per call (tens
    of microseconds): used for plugins, never for the built-in evaluators.
    """

    def __init__(self, inner: Evaluator, budget: float = PLUGIN_TIME_BUDGET) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]  # the plugin's own, per instance
        self.version = inner.version  # type: ignore[misc]
        self.budget = budget
        self.timeouts = 0
        self.disabled = False
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # Only the hooks the plugin has: the engine skips an evaluator without its own on_span.
        if type(inner).on_span is not Evaluator.on_span or "on_span" in vars(inner):
            self.on_span = self._on_span  # type: ignore[method-assign]

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            try:
                call.value = call.hook(*call.args)
            except BaseException as exc:  # handed to the caller, which decides
                call.error = exc
            call.done.set()

    def _call(self, hook: Callable[..., Any], *args: Any) -> Any:
        if self.disabled:
            raise EvaluatorTimeout(
                f"disabled: a call took longer than its {self.budget:g} s budget"
            )
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name=f"tracehound-plugin-{self.name}", daemon=True
                )
                self._thread.start()
        call = _Call(hook, args)
        self._calls.put(call)
        if not call.done.wait(self.budget):
            self.disabled = True
            self.timeouts += 1
            _logger.error(
                "evaluator plugin %s %s took longer than %g s in %s; it is disabled",
                self.name,
                self.version,
                self.budget,
                getattr(hook, "__name__", "a hook"),
            )
            raise EvaluatorTimeout(
                f"{getattr(hook, '__name__', 'hook')} took over {self.budget:g} s"
            )
        error = call.error
        if error is not None:
            if not isinstance(error, Exception):  # SystemExit & co. must not end the caller
                raise RuntimeError(f"{type(error).__name__} raised in the plugin") from error
            raise error
        return call.value

    def start_trace(self, trace: TraceInfo) -> Any:
        return self._call(self.inner.start_trace, trace)

    def _on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        result: Sequence[EvaluationResult] = self._call(
            self.inner.on_span, state, span, steps, trace
        )
        return result

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        result: Sequence[EvaluationResult] = self._call(
            self.inner.finish_trace, state, trajectory, trace
        )
        return result


def load_plugins(
    names: Sequence[str] | None = None,
    group: str = PLUGIN_GROUP,
    _entry_points: Callable[..., Any] = entry_points,
    *,
    budget: float | None = PLUGIN_TIME_BUDGET,
) -> list[Evaluator]:
    """Instantiate the evaluators registered under the `tracehound.evaluators` entry-point group.

    An entry point names an `Evaluator` subclass or a zero-argument factory returning one. With
    `names`, only those are loaded, and a missing one is an error. Each is wrapped in
    `BudgetedEvaluator` with `budget` seconds per hook call (None: called directly).
    """
    found = {ep.name: ep for ep in _entry_points(group=group)}
    wanted = list(found) if names is None else list(names)
    missing = [n for n in wanted if n not in found]
    if missing:
        available = ", ".join(sorted(found)) or "none installed"
        raise PluginError(
            f"unknown evaluator plugin(s) {', '.join(missing)} (available: {available})"
        )
    evaluators: list[Evaluator] = []
    for name in wanted:
        ep = found[name]
        try:
            target = ep.load()
            evaluator = target()
        except Exception as exc:
            raise PluginError(
                f"evaluator plugin {name!r} ({ep.value}) failed to load: {exc}"
            ) from exc
        if not isinstance(evaluator, Evaluator) and not _quacks_like_evaluator(evaluator):
            raise PluginError(
                f"evaluator plugin {name!r} ({ep.value}) did not produce an Evaluator "
                f"(got {type(evaluator).__name__})"
            )
        if not getattr(evaluator, "name", ""):
            raise PluginError(f"evaluator plugin {name!r} ({ep.value}) has no name")
        evaluators.append(evaluator if budget is None else BudgetedEvaluator(evaluator, budget))
    return evaluators


def _quacks_like_evaluator(obj: Any) -> bool:
    return all(
        callable(getattr(obj, hook, None)) for hook in ("start_trace", "on_span", "finish_trace")
    ) and isinstance(getattr(obj, "version", None), str)
