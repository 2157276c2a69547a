"""Results → telemetry: span attributes, `gen_ai.evaluation.result` events, metrics.

Two layers, so that every shape (in-process processor, sidecar, CLI) writes the same names:

- **What** a result produces is decided by pure functions over plain values, with no SDK or
  protobuf object in sight: `span_attributes` / `root_attributes` (the `tracehound.*` attributes
  of an evaluated span), `event_attributes` (the attributes of one `gen_ai.evaluation.result`
  event), `result_measurements` (the metric points of one result), `is_content_key` /
  `redact_attributes` / `redact_event_attributes` (what the redaction option strips). The sidecar
  applies these to OTLP protobuf spans in place.
- **How** they are written in-process: `copy_span` (an enriched *copy* of a frozen SDK
  `ReadableSpan`), `EventEmitter` (log records through the OTel Logs SDK, parented to the evaluated
  span), `MetricsRecorder` (instruments of the OTel Metrics SDK).

Every name comes from `tracehound.names`. Metric attributes are low-cardinality by construction:
evaluation and evaluator names, score labels (low-cardinality by the evaluator contract), loop
kinds, severities, the top-level agent name; never trace or span ids.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from opentelemetry import metrics
from opentelemetry._logs import Logger as ApiLogger
from opentelemetry._logs import (
    LoggerProvider,
    NoOpLoggerProvider,
    SeverityNumber,
    get_logger_provider,
)
from opentelemetry._logs._internal import ProxyLoggerProvider
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    TraceFlags,
    set_span_in_context,
)
from opentelemetry.util.types import AttributeValue as OtelAttributeValue

from tracehound import names
from tracehound.engine import FinalizedTrace
from tracehound.evaluators.base import EvaluationResult
from tracehound.spans import AttributeValue

__all__ = [
    "INSTRUMENTS",
    "EventEmitter",
    "InstrumentSpec",
    "Measurement",
    "MetricsRecorder",
    "copy_span",
    "event_attributes",
    "is_content_key",
    "redact_attributes",
    "redact_event_attributes",
    "result_measurements",
    "root_attributes",
    "span_attributes",
    "trace_agent",
]


def _tracehound_version() -> str:
    try:
        return version("tracehound")
    except PackageNotFoundError:  # running from a source tree without install
        return "0"


_VERSION = _tracehound_version()
_log = logging.getLogger(__name__)

# --- what: span attributes ---------------------------------------------------------------------


def span_attributes(results: Iterable[EvaluationResult]) -> dict[str, AttributeValue]:
    """The `tracehound.*` attributes that per-span results put on their span (later wins)."""
    out: dict[str, AttributeValue] = {}
    for result in results:
        if result.attributes:
            out.update(result.attributes)
    return out


def root_attributes(
    trace: FinalizedTrace, span_results: Iterable[EvaluationResult] = ()
) -> dict[str, AttributeValue]:
    """Attributes of the trace's local root: its own per-span results, then the trace results."""
    out = span_attributes(span_results)
    out.update(trace.attributes)
    return out


def trace_agent(trace: FinalizedTrace) -> str | None:
    """The trace's top-level agent name (a metric attribute), or None without an agent span."""
    for run in trace.trajectory.runs:
        if run.depth == 0 and not run.implicit and run.agent_name:
            return run.agent_name
    return None


# --- what: events ------------------------------------------------------------------------------


def event_attributes(result: EvaluationResult) -> dict[str, AttributeValue]:
    """Attributes of the `gen_ai.evaluation.result` event for one result (absent values left out).

    `gen_ai.evaluation.score.value` is always a double; `error.type` is set only when the
    evaluation itself failed.
    """
    attrs: dict[str, AttributeValue] = {names.ATTR_EVALUATION_NAME: result.name}
    if result.score_value is not None:
        attrs[names.ATTR_EVALUATION_SCORE_VALUE] = float(result.score_value)
    if result.score_label:
        attrs[names.ATTR_EVALUATION_SCORE_LABEL] = result.score_label
    if result.explanation:
        attrs[names.ATTR_EVALUATION_EXPLANATION] = result.explanation
    if result.error_type:
        attrs[names.ATTR_ERROR_TYPE] = result.error_type
    attrs[names.ATTR_EVALUATOR_NAME] = result.evaluator
    attrs[names.ATTR_EVALUATOR_VERSION] = result.evaluator_version
    return attrs


# --- what: metrics -----------------------------------------------------------------------------

InstrumentKind = Literal["counter", "histogram", "gauge"]


@dataclass(frozen=True, slots=True)
class InstrumentSpec:
    kind: InstrumentKind
    unit: str
    description: str
    buckets: tuple[float, ...] | None = None


_SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 2.0, 5.0, 10.0, 50.0)
_RATIO_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_SECONDS_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0)
_RUN_BUCKETS = (1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 500.0)

INSTRUMENTS: dict[str, InstrumentSpec] = {
    names.METRIC_EVALUATION_SCORE: InstrumentSpec(
        "histogram", "1", "Evaluation scores", _SCORE_BUCKETS
    ),
    names.METRIC_EVALUATION_ERRORS: InstrumentSpec(
        "counter", "{error}", "Evaluations that failed because an evaluator raised"
    ),
    names.METRIC_EVALUATION_DURATION: InstrumentSpec(
        "histogram", "s", "Evaluation latency per GenAI span and per trace", _SECONDS_BUCKETS
    ),
    names.METRIC_LOOPS: InstrumentSpec("counter", "{loop}", "Loop instances, by kind"),
    names.METRIC_LOOPS_WASTED_TOKENS: InstrumentSpec(
        "counter", "{token}", "Tokens of LLM calls that only repeated earlier work"
    ),
    names.METRIC_LOOPS_WASTED_SECONDS: InstrumentSpec(
        "counter", "s", "Time spent in steps that only repeated earlier work"
    ),
    names.METRIC_EVIDENCE_SURVIVAL: InstrumentSpec(
        "histogram", "1", "Evidence survival ratio per trace", _RATIO_BUCKETS
    ),
    names.METRIC_DRIFT_SEVERITY: InstrumentSpec("counter", "{run}", "Drift results by severity"),
    names.METRIC_DRIFT_DRIFTING_RUNS: InstrumentSpec(
        "histogram", "{run}", "Drifted runs so far in each open drift episode", _RUN_BUCKETS
    ),
    names.METRIC_EXPECTATIONS: InstrumentSpec(
        "counter", "{result}", "Expectation results, by rule and outcome"
    ),
    names.METRIC_SPANS_QUEUED: InstrumentSpec(
        "counter", "{span}", "Spans and GenAI log records taken off the processor queue"
    ),
    names.METRIC_SPANS_DROPPED: InstrumentSpec(
        "counter", "{span}", "Spans and log records dropped by the processor"
    ),
    names.METRIC_SPANS_EXPORTED: InstrumentSpec(
        "counter", "{span}", "Spans handed to the wrapped exporter, by outcome"
    ),
    names.METRIC_QUEUE_SIZE: InstrumentSpec("gauge", "{item}", "Items waiting in the queue"),
    names.METRIC_TRACES_ACTIVE: InstrumentSpec("gauge", "{trace}", "Traces not finalized yet"),
    names.METRIC_TRACES_FINALIZED: InstrumentSpec(
        "counter", "{trace}", "Finalized traces, by reason"
    ),
    names.METRIC_TRACES_FINALIZED_EARLY: InstrumentSpec(
        "counter", "{trace}", "Traces finalized early because max_traces was reached"
    ),
    names.METRIC_LATE_SPANS: InstrumentSpec(
        "counter", "{span}", "Spans that arrived after their trace was finalized"
    ),
    names.METRIC_SPANS_REORDERED: InstrumentSpec(
        "counter", "{span}", "GenAI spans whose evaluation waited for their ancestors, by outcome"
    ),
}
"""Every instrument tracehound creates: name → kind, unit, description, histogram buckets."""


@dataclass(frozen=True, slots=True)
class Measurement:
    """One metric point: instrument name (from `INSTRUMENTS`), value, attributes."""

    instrument: str
    value: float
    attributes: Mapping[str, str]


def result_measurements(result: EvaluationResult, agent: str | None = None) -> list[Measurement]:
    """The metric points one result produces.

    - a failed evaluation: one `tracehound.evaluation.errors` point, nothing else;
    - every finite score: `tracehound.evaluation.score`;
    - evidence survival results: `tracehound.evidence.survival` (scope overall / final);
    - the loop summary: `tracehound.loops` per kind, `tracehound.loops.wasted_tokens` and
      `tracehound.loops.wasted_seconds`;
    - expectation results: `tracehound.expectations.results` by rule and outcome;
    - drift results: `tracehound.drift.severity` (severity from the result's
      `tracehound.drift.severity` attribute, else its label).
    """
    if result.error_type:
        return [
            Measurement(
                names.METRIC_EVALUATION_ERRORS,
                1,
                {
                    names.ATTR_EVALUATOR_NAME: result.evaluator,
                    names.ATTR_ERROR_TYPE: result.error_type,
                },
            )
        ]
    out: list[Measurement] = []
    base: dict[str, str] = {}
    if agent:
        base[names.METRIC_ATTR_AGENT] = agent
    score = result.score_value
    finite = score is not None and math.isfinite(score)
    if finite and score is not None:
        attrs = {
            **base,
            names.ATTR_EVALUATION_NAME: result.name,
            names.ATTR_EVALUATOR_NAME: result.evaluator,
        }
        if result.score_label:
            attrs[names.ATTR_EVALUATION_SCORE_LABEL] = result.score_label
        out.append(Measurement(names.METRIC_EVALUATION_SCORE, float(score), attrs))
        if result.name == names.EVAL_EVIDENCE_SURVIVAL:
            out.append(
                Measurement(
                    names.METRIC_EVIDENCE_SURVIVAL,
                    float(score),
                    {**base, names.METRIC_ATTR_EVIDENCE_SCOPE: "overall"},
                )
            )
        elif result.name == names.EVAL_EVIDENCE_FINAL_SURVIVAL:
            out.append(
                Measurement(
                    names.METRIC_EVIDENCE_SURVIVAL,
                    float(score),
                    {**base, names.METRIC_ATTR_EVIDENCE_SCOPE: "final"},
                )
            )
    if result.name == names.EVAL_LOOPS:
        for kind, key in names.ATTR_LOOPS_BY_KIND.items():
            count = result.attributes.get(key)
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                out.append(
                    Measurement(names.METRIC_LOOPS, count, {**base, names.ATTR_LOOP_KIND: kind})
                )
        wasted = result.attributes.get(names.ATTR_LOOPS_WASTED_TOKENS)
        if isinstance(wasted, int) and not isinstance(wasted, bool) and wasted > 0:
            out.append(Measurement(names.METRIC_LOOPS_WASTED_TOKENS, wasted, dict(base)))
        seconds = result.attributes.get(names.ATTR_LOOPS_WASTED_SECONDS)
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > 0:
            out.append(Measurement(names.METRIC_LOOPS_WASTED_SECONDS, float(seconds), dict(base)))
    if result.name.startswith(names.EVAL_EXPECTATION_PREFIX) and result.score_label:
        rule = result.name[len(names.EVAL_EXPECTATION_PREFIX) :]
        point = {
            **base,
            names.ATTR_EXPECTATION_RULE: rule,
            names.ATTR_EXPECTATION_OUTCOME: result.score_label,
        }
        run_agent = result.attributes.get(names.ATTR_EXPECTATIONS_AGENT)
        if isinstance(run_agent, str):  # the checked run's agent key (a nested agent's own)
            point[names.ATTR_EXPECTATIONS_AGENT] = run_agent
        out.append(Measurement(names.METRIC_EXPECTATIONS, 1, point))
    severity = result.attributes.get(names.ATTR_DRIFT_SEVERITY)
    if severity is None and result.evaluator == "drift":
        severity = result.score_label
    if isinstance(severity, str) and severity in names.DRIFT_SEVERITIES:
        out.append(
            Measurement(
                names.METRIC_DRIFT_SEVERITY, 1, {**base, names.ATTR_DRIFT_SEVERITY: severity}
            )
        )
        drifting = result.attributes.get(names.ATTR_DRIFT_DRIFTING_RUNS)
        if isinstance(drifting, int) and not isinstance(drifting, bool) and drifting > 0:
            out.append(Measurement(names.METRIC_DRIFT_DRIFTING_RUNS, drifting, dict(base)))
    return out


# --- what: redaction ---------------------------------------------------------------------------

_CONTENT_KEYS = frozenset(
    (
        # OTel GenAI (current and legacy)
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.retrieval.documents",
        "gen_ai.retrieval.query.text",
        "gen_ai.prompt",
        "gen_ai.completion",
        # pydantic-ai
        "pydantic_ai.all_messages",
        "all_messages_events",
        "events",
        "final_result",
        "tool_arguments",
        "tool_response",
        # OpenInference
        "input.value",
        "output.value",
        # OpenLLMetry / Traceloop
        "traceloop.entity.input",
        "traceloop.entity.output",
        # Vercel AI SDK
        "ai.prompt",
        "ai.prompt.messages",
        "ai.response.text",
        "ai.response.toolCalls",
        "ai.response.object",
        "ai.response.reasoning",
        "ai.result.text",
        "ai.result.toolCalls",
        "ai.result.object",
        "ai.toolCall.args",
        "ai.toolCall.input",
        "ai.toolCall.result",
        "ai.toolCall.output",
        # vector stores (documents on span events)
        "db.query.result.document",
    )
)
_CONTENT_PREFIXES = (
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "llm.input_messages.",
    "llm.output_messages.",
    "llm.prompts.",
    "retrieval.documents.",
    "embedding.embeddings.",
    "reranker.input_documents.",
    "reranker.output_documents.",
)
# Span events that carry one message each (legacy GenAI events recorded as span events): every
# attribute but these is content.
_MESSAGE_EVENTS = frozenset(
    (
        "gen_ai.content.prompt",
        "gen_ai.content.completion",
        "gen_ai.system.message",
        "gen_ai.user.message",
        "gen_ai.assistant.message",
        "gen_ai.tool.message",
        "gen_ai.choice",
        "gen_ai.client.inference.operation.details",
    )
)
_EVENT_SAFE_KEYS = frozenset(
    ("gen_ai.system", "gen_ai.provider.name", "event.name", "index", "finish_reason", "role", "id")
)


def is_content_key(key: str) -> bool:
    """True for attribute keys that hold message content, tool arguments/results or documents."""
    return key in _CONTENT_KEYS or key.startswith(_CONTENT_PREFIXES)


def redact_attributes(
    attributes: Mapping[str, Any],
) -> tuple[dict[str, Any], int]:
    """The attributes without their content keys, and how many were stripped."""
    kept = {k: v for k, v in attributes.items() if not is_content_key(k)}
    return kept, len(attributes) - len(kept)


def redact_event_attributes(
    event_name: str, attributes: Mapping[str, Any]
) -> tuple[dict[str, Any], int]:
    """A span event's attributes without content (per-message events keep only structure)."""
    if event_name in _MESSAGE_EVENTS:
        kept = {k: v for k, v in attributes.items() if k in _EVENT_SAFE_KEYS}
    else:
        kept = {k: v for k, v in attributes.items() if not is_content_key(k)}
    return kept, len(attributes) - len(kept)


# --- how: enriched copies of SDK spans ----------------------------------------------------------


def _sdk_value(value: AttributeValue) -> OtelAttributeValue | None:
    """An attribute value the SDK accepts: a primitive or a homogeneous sequence of them."""
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        items = [v for v in value if isinstance(v, (str, bool, int, float))]
        if len(items) == len(value) and len({type(v) for v in items}) <= 1:
            return tuple(items)
        return tuple(str(v) for v in value)
    if value is None:
        return None
    return str(value)


class _SpanCopy(ReadableSpan):
    """A ReadableSpan copy that keeps the original's dropped counts (attributes, events, links)."""

    __slots__ = ("_dropped",)

    def __init__(self, original: ReadableSpan, dropped: tuple[int, int, int], **kwargs: Any):
        super().__init__(**kwargs)
        self._dropped = dropped

    @property
    def dropped_attributes(self) -> int:
        return self._dropped[0]

    @property
    def dropped_events(self) -> int:
        return self._dropped[1]

    @property
    def dropped_links(self) -> int:
        return self._dropped[2]


def copy_span(
    span: ReadableSpan,
    add: Mapping[str, AttributeValue] | None = None,
    events: Sequence[tuple[str, Mapping[str, AttributeValue], int]] = (),
    *,
    redact: bool = False,
) -> ReadableSpan:
    """A copy of an ended SDK span with attributes and events added (the original is untouched).

    With `redact`, content attributes (and the content of message span events) are stripped and
    `tracehound.redacted` counts them. Returns `span` itself when there is nothing to change.
    """
    original_attrs: Mapping[str, Any] = span.attributes or {}
    original_events = span.events
    attrs: dict[str, Any]
    removed = 0
    if redact:
        attrs, removed = redact_attributes(original_attrs)
        new_events: list[Event] = []
        for event in original_events:
            kept, n = redact_event_attributes(event.name, event.attributes or {})
            removed += n
            new_events.append(Event(event.name, kept, event.timestamp) if n else event)
    else:
        attrs = dict(original_attrs)
        new_events = list(original_events)
    if not add and not events and not removed:
        return span
    for key, value in (add or {}).items():
        converted = _sdk_value(value)
        if converted is not None:
            attrs[key] = converted
    if removed:
        attrs[names.ATTR_REDACTED] = removed
    for name, event_attrs, timestamp in events:
        clean = {k: c for k, v in event_attrs.items() if (c := _sdk_value(v)) is not None}
        new_events.append(Event(name, clean, timestamp))
    return _SpanCopy(
        span,
        (span.dropped_attributes, span.dropped_events, span.dropped_links),
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attrs,
        events=tuple(new_events),
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


# --- how: events through the Logs SDK -----------------------------------------------------------


def _parent_context(trace_id: str, span_id: str) -> Context | None:
    try:
        tid, sid = int(trace_id, 16), int(span_id, 16)
    except ValueError:
        return None
    if not tid or not sid:
        return None
    parent = SpanContext(tid, sid, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return set_span_in_context(NonRecordingSpan(parent))


class EventEmitter:
    """Writes `gen_ai.evaluation.result` log records, parented to the evaluated span.

    The logger comes from `logger_provider`, else from the global logger provider (resolved on
    first use, so a provider configured after tracehound is still found). Not thread-safe: one
    owner thread (the processor's worker).
    """

    def __init__(self, logger_provider: LoggerProvider | None = None) -> None:
        self._provider = logger_provider
        self._logger: ApiLogger | None = None
        self._checked = logger_provider is not None  # the global one is checked on first use

    @property
    def provider(self) -> LoggerProvider:
        return self._provider if self._provider is not None else get_logger_provider()

    def _get_logger(self) -> ApiLogger:
        if self._logger is None:
            self._logger = self.provider.get_logger(names.SCOPE_NAME, _VERSION)
        return self._logger

    def emit(
        self,
        result: EvaluationResult,
        trace_id: str,
        span_id: str,
        timestamp_ns: int | None = None,
    ) -> None:
        """One log record for one result; `span_id` is the evaluated span (hex ids)."""
        if not self._checked:
            self._checked = True
            if isinstance(get_logger_provider(), (ProxyLoggerProvider, NoOpLoggerProvider)):
                _log.warning(
                    "evaluation results are log records for the global LoggerProvider, which is "
                    "not set: they are dropped until it is (set_logger_provider(...), or give "
                    "tracehound logger_provider=...)"
                )
        attributes = {
            k: c for k, v in event_attributes(result).items() if (c := _sdk_value(v)) is not None
        }
        self._get_logger().emit(
            timestamp=timestamp_ns if timestamp_ns is not None else time.time_ns(),
            context=_parent_context(trace_id, span_id),
            severity_number=SeverityNumber.WARN if result.error_type else SeverityNumber.INFO,
            attributes=attributes,
            event_name=names.EVENT_EVALUATION_RESULT,
        )


# --- how: metrics through the Metrics SDK -------------------------------------------------------


class MetricsRecorder:
    """The instruments of `INSTRUMENTS`, created on one meter (scope `tracehound`).

    `record` writes `Measurement`s; `add` bumps a pipeline counter; `observe` registers the
    callbacks of the observable gauges (queue size, active traces). Recording is thread-safe (the
    SDK instruments are).
    """

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        self._meter = provider.get_meter(names.SCOPE_NAME, _VERSION)
        self._counters: dict[str, metrics.Counter] = {}
        self._histograms: dict[str, metrics.Histogram] = {}
        self._gauges: dict[str, Callable[[], float]] = {}
        self._lock = threading.Lock()
        for name, spec in INSTRUMENTS.items():
            if spec.kind == "counter":
                self._counters[name] = self._meter.create_counter(
                    name, unit=spec.unit, description=spec.description
                )
            elif spec.kind == "histogram":
                self._histograms[name] = self._meter.create_histogram(
                    name,
                    unit=spec.unit,
                    description=spec.description,
                    explicit_bucket_boundaries_advisory=list(spec.buckets or ()) or None,
                )

    def record(self, measurements: Iterable[Measurement]) -> None:
        for m in measurements:
            counter = self._counters.get(m.instrument)
            if counter is not None:
                counter.add(m.value, dict(m.attributes))
                continue
            histogram = self._histograms.get(m.instrument)
            if histogram is not None:
                histogram.record(m.value, dict(m.attributes))

    def add(
        self, instrument: str, value: float, attributes: Mapping[str, str] | None = None
    ) -> None:
        if value:
            self._counters[instrument].add(value, dict(attributes or {}))

    def duration(self, seconds: float, stage: Literal["span", "trace"]) -> None:
        self._histograms[names.METRIC_EVALUATION_DURATION].record(
            seconds, {names.METRIC_ATTR_STAGE: stage}
        )

    def observe(self, instrument: str, read: Callable[[], float]) -> None:
        """Register (once per name) the callback of an observable gauge."""
        with self._lock:
            if instrument in self._gauges:
                self._gauges[instrument] = read
                return
            self._gauges[instrument] = read
        spec = INSTRUMENTS[instrument]

        def callback(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            return [metrics.Observation(self._gauges[instrument]())]

        self._meter.create_observable_gauge(
            instrument, callbacks=[callback], unit=spec.unit, description=spec.description
        )
