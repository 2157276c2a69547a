"""Every name tracehound emits, in one place: the project's contract with its users' backends.

Span attributes live in the `tracehound.` namespace. Evaluation events use the OTel GenAI
`gen_ai.evaluation.result` event and its attributes (taken from `opentelemetry.semconv` where it
defines them, spelled out here where it does not yet).
"""

from __future__ import annotations

# --- trace-level span attributes (on the local root span) -----------------------------------------
ATTR_TRUNCATED = "tracehound.truncated"
"""bool: the trace exceeded a per-trace limit; part of it was not evaluated."""
ATTR_LATE_SPANS = "tracehound.late_spans"
"""int: spans that arrived after the trace was finalized (forwarded, not re-evaluated)."""
ATTR_CONVENTIONS = "tracehound.conventions"
"""string[]: the convention families detected in the trace."""

# --- evidence evaluator ---------------------------------------------------------------------------
EVAL_EVIDENCE_REUSE = "tracehound.evidence.reuse"
"""Per LLM span: evidence units its outputs reuse (score = count)."""
EVAL_EVIDENCE_SURVIVAL = "tracehound.evidence.survival"
"""Per trace: share of evidence units reused by any later output (score in [0, 1])."""
EVAL_EVIDENCE_FINAL_SURVIVAL = "tracehound.evidence.final_survival"
"""Per trace: share of evidence units reused by the final answer (label grounded/ungrounded)."""
ATTR_EVIDENCE_REUSED_UNITS = "tracehound.evidence.reused_units"
"""int: evidence units reused (per LLM span: by its outputs; on the root: in the whole trace)."""
ATTR_EVIDENCE_REUSED_FROM = "tracehound.evidence.reused_from"
"""string[]: tools / retrieval sources whose units an LLM span's outputs reused."""
ATTR_EVIDENCE_SOURCES = "tracehound.evidence.sources"
"""int: evidence sources (tool results, retrieved documents) in the trace."""
ATTR_EVIDENCE_UNITS = "tracehound.evidence.units"
"""int: evidence units (sentences/paragraphs with ≥ 2 informative words)."""
ATTR_EVIDENCE_SURVIVAL_RATIO = "tracehound.evidence.survival_ratio"
"""double: reused units / units."""
ATTR_EVIDENCE_FINAL_SURVIVAL_RATIO = "tracehound.evidence.final_survival_ratio"
"""double: units reused by the final answer / units."""
ATTR_EVIDENCE_UNUSED_SOURCES = "tracehound.evidence.unused_sources"
"""int: sources none of whose units was reused."""
ATTR_EVIDENCE_REPEATED_GROUPS = "tracehound.evidence.repeated_groups"
"""int: groups of sources that repeat each other's content."""
ATTR_EVIDENCE_MAX_STEPS_UNTIL_LAST_REUSE = "tracehound.evidence.max_steps_until_last_reuse"
"""int: the longest distance, in steps, from a source to its last reuse."""
ATTR_EVIDENCE_PER_TOOL = "tracehound.evidence.per_tool"
"""string (JSON): per tool name: sources, units, reused, final_reused, survival, final_survival."""
ATTR_EVIDENCE_PER_SOURCE = "tracehound.evidence.per_source"
"""string (JSON): the same per retrieval source."""

# --- loops evaluator ------------------------------------------------------------------------------
LOOP_KINDS = (
    "repeat",
    "consecutive",
    "cycle",
    "no_progress",
    "near_duplicate",
    "retry_storm",
    "output_repeat",
)
"""Values of `tracehound.loop.kind` (and labels of `tracehound.loop` results)."""
FAILURE_MODES = ("context_window_overflow", "tool_call_error")
"""Values of `tracehound.failure_mode(s)` (tracecheck's names, for users migrating from it)."""
EVAL_LOOP = "tracehound.loop"
"""Per span: a loop completed or extended at this span (label = loop kind, score 0)."""
EVAL_LOOPS = "tracehound.loops"
"""Per trace: loop summary (score 1.0 without loop, lower with waste; label pass/fail)."""
EVAL_FAILURE_MODE = "tracehound.failure_mode"
"""Per span: a failure mode this span shows (label = the mode, score 0)."""
EVAL_FAILURE_MODES = "tracehound.failure_modes"
"""Per trace: failure modes found (score 1.0 none / 0.0 some; label pass/fail)."""
ATTR_LOOP_DETECTED = "tracehound.loop.detected"
"""bool, per span: this span completes or extends a loop."""
ATTR_LOOP_KIND = "tracehound.loop.kind"
"""string, per span: the main loop kind at this span (one of `LOOP_KINDS`)."""
ATTR_LOOP_KINDS = "tracehound.loop.kinds"
"""string[], per span: every loop kind completed or extended at this span."""
ATTR_LOOP_COUNT = "tracehound.loop.count"
"""int, per span: occurrences so far of the main loop (calls, repetitions of a cycle, ...)."""
ATTR_LOOP_PERIOD = "tracehound.loop.period"
"""int, per span: period of the cycle (only when the main kind is `cycle`)."""
ATTR_LOOP_FIRST_SPAN_ID = "tracehound.loop.first_span_id"
"""string, per span: the span of the loop's first occurrence."""
ATTR_FAILURE_MODE = "tracehound.failure_mode"
"""string, per span: the failure mode this span shows (one of `FAILURE_MODES`)."""
ATTR_LOOPS_DETECTED = "tracehound.loops.detected"
"""bool, on the root: some run of the trace loops."""
ATTR_LOOPS_COUNT = "tracehound.loops.count"
"""int, on the root: loop instances found (all kinds, all runs)."""
ATTR_LOOPS_KINDS = "tracehound.loops.kinds"
"""string[], on the root: the loop kinds found, in `LOOP_KINDS` order."""
ATTR_LOOPS_BY_KIND = {kind: f"tracehound.loops.by_kind.{kind}" for kind in LOOP_KINDS}
"""int, on the root, one attribute per kind found: loop instances of that kind."""
ATTR_LOOPS_WASTED_STEPS = "tracehound.loops.wasted_steps"
"""int, on the root: tool calls and assistant outputs that only repeated earlier ones."""
ATTR_LOOPS_WASTED_TOKENS = "tracehound.loops.wasted_tokens"
"""int, on the root: tokens of the LLM calls whose every product was wasted."""
ATTR_LOOPS_WASTED_SECONDS = "tracehound.loops.wasted_seconds"
"""double, on the root: time of those LLM calls plus that of the wasted tool executions."""
ATTR_LOOPS_SCORE = "tracehound.loops.score"
"""double, on the root: 1 - wasted steps / (tool calls + assistant outputs); 1.0 without loop."""
ATTR_FAILURE_MODES = "tracehound.failure_modes"
"""string[], on the root: failure modes found in the trace, sorted."""

# --- drift evaluator ------------------------------------------------------------------------------
DRIFT_SEVERITIES = ("none", "warning", "alert", "critical")
"""Values of `tracehound.drift.severity`: none < 0.3 ≤ warning < 0.6 ≤ alert ≤ 0.8 < critical."""
DRIFT_CONFIDENCES = ("initializing", "low", "medium", "high")
"""Values of `tracehound.drift.confidence`: baseline of < 2, < 5, < 10, ≥ 10 runs."""
DRIFT_DRIVERS = ("tool_mix", "semantic", "complexity")
"""Values of `tracehound.drift.primary_driver` (the drift components)."""
EVAL_DRIFT = "tracehound.drift"
"""Per run (on its agent span; the root for a trace without agents): drift against the agent's
baseline (score = composite; label = severity, or `initializing` when there is no baseline yet)."""
ATTR_DRIFT_AGENT = "tracehound.drift.agent"
"""string: the baseline key of the run (`service.name/agent name` by default)."""
ATTR_DRIFT_SCORE = "tracehound.drift.score"
"""double: composite drift in [0, 1] (absent when there was no baseline to compare with)."""
ATTR_DRIFT_SEVERITY = "tracehound.drift.severity"
"""string: one of `DRIFT_SEVERITIES` (absent without a score)."""
ATTR_DRIFT_CONFIDENCE = "tracehound.drift.confidence"
"""string: one of `DRIFT_CONFIDENCES`, from the baseline's run count."""
ATTR_DRIFT_TOOL_MIX = "tracehound.drift.tool_mix"
"""double: tool-mix component in [0, 1]."""
ATTR_DRIFT_SEMANTIC = "tracehound.drift.semantic"
"""double: semantic component in [0, 1]."""
ATTR_DRIFT_COMPLEXITY = "tracehound.drift.complexity"
"""double: complexity component in [0, 1]."""
ATTR_DRIFT_SEMANTIC_DISTANCE = "tracehound.drift.semantic_distance"
"""double: raw cosine distance of the run's text embedding to the baseline centroid."""
ATTR_DRIFT_PRIMARY_DRIVER = "tracehound.drift.primary_driver"
"""string: the largest component, one of `DRIFT_DRIVERS`."""
ATTR_DRIFT_BASELINE_RUNS = "tracehound.drift.baseline_runs"
"""int: runs in the baseline the run was scored against."""
ATTR_DRIFT_BASELINE_UPDATED = "tracehound.drift.baseline_updated"
"""bool: the run was added to its baseline."""
ATTR_DRIFT_BASELINE_PINNED = "tracehound.drift.baseline_pinned"
"""bool: the baseline is pinned (a frozen reference; never updated)."""
ATTR_DRIFT_DRIFTING_SINCE = "tracehound.drift.drifting_since"
"""string: ISO-8601 UTC start of the first run of the current drift episode (the consecutive
runs scoring `warning` or worse that were kept out of the baseline); absent outside an episode."""
ATTR_DRIFT_DRIFTING_RUNS = "tracehound.drift.drifting_runs"
"""int: drifted runs in the current episode, this one included (0: the run is not drifting)."""
DRIFT_EPISODE_SUFFIX = "#drifting"
"""Suffix of the store key of an agent's drift episode (the baseline of its drifted runs, what
`tracehound baseline accept AGENT` makes the new baseline)."""
ATTR_DRIFT_MAX_SEVERITY = "tracehound.drift.max_severity"
"""string, trace level (`tracehound eval` reports): the worst `tracehound.drift.severity` over all
runs of the trace, nested agents included — what `--fail-on drift>=alert` reads."""
ATTR_DRIFT_MAX_SCORE = "tracehound.drift.max_score"
"""double, trace level (`tracehound eval` reports): the highest drift score over all runs."""
ATTR_DRIFT_MAX_AGENT = "tracehound.drift.max_agent"
"""string, trace level (`tracehound eval` reports): the baseline key of the run that scored it."""

# --- golden-trace comparison (`tracehound eval --against GOLDEN`) -------------------------------
GOLDEN_VERDICTS = ("unchanged", "drifted", "regressed")
"""Values of `tracehound.golden.verdict`, from best to worst."""
EVAL_GOLDEN = "tracehound.golden"
"""Per run (on its agent span; the root for a trace without agents): the run's path compared with
the golden trace of the same agent key (label = verdict, or `no_golden`; no score)."""
ATTR_GOLDEN_AGENT = "tracehound.golden.agent"
"""string: the agent key (`service.name/agent name`, as for drift baselines)."""
ATTR_GOLDEN_VERDICT = "tracehound.golden.verdict"
"""string: one of `GOLDEN_VERDICTS` (absent when the agent has no golden trace)."""
ATTR_GOLDEN_PATH_CHANGED = "tracehound.golden.path_changed"
"""bool: the run's set of child steps (LLM calls, tools, retrieval sources, sub-agents) differs."""
ATTR_GOLDEN_ITERATION_COUNT_CHANGED = "tracehound.golden.iteration_count_changed"
"""bool: same set of child steps, different repeat counts."""
ATTR_GOLDEN_ADDED = "tracehound.golden.added"
"""string[]: child steps the golden run did not have (`tool:NAME`, `retrieval:SOURCE`, ...)."""
ATTR_GOLDEN_REMOVED = "tracehound.golden.removed"
"""string[]: child steps of the golden run this run did not take."""
ATTR_GOLDEN_COUNT_CHANGES = "tracehound.golden.count_changes"
"""string (JSON): `{step: [golden count, run count]}` for every child step whose count changed."""
ATTR_GOLDEN_ERRORS = "tracehound.golden.errors"
"""int: error steps (failed tool calls, error spans) of the run."""
ATTR_GOLDEN_ERRORS_APPEARED = "tracehound.golden.errors_appeared"
"""bool: the run has more error steps than the golden run."""
ATTR_GOLDEN_ANSWER_LOST = "tracehound.golden.answer_lost"
"""bool: the golden run produced a final answer and this run did not."""
ATTR_GOLDEN_TRACE_ID = "tracehound.golden.trace_id"
"""string: the golden trace the run was compared with."""
ATTR_GOLDEN_WORST_VERDICT = "tracehound.golden.worst_verdict"
"""string, trace level (`tracehound eval` reports): the worst verdict over the trace's runs — what
`--fail-on regressed` / `--fail-on drifted` read."""

# --- expectations (rules per agent: `[expectations]`, `eval --expect`) ---------------------------
EVAL_EXPECTATION_PREFIX = "tracehound.expectation."
"""Per run and rule: `tracehound.expectation.BLOCK.CHECK` (on the run's agent span; the root for
a trace without agents); score 1 / 0, label `pass` / `fail`."""
EXPECTATION_LABELS = ("pass", "fail")
ATTR_EXPECTATION_EXPECTED_TOOLS = "tracehound.expectation.expected_tools"
"""string[], on an agent span: the tools the run is expected to call, in order (set by the
`tracecheck` importer from `expected_tools`); checked when `declared_tools` is on."""
ATTR_EXPECTATION_RULE = "tracehound.expectation.rule"
"""Metric attribute: the rule (`BLOCK.CHECK`)."""
ATTR_EXPECTATION_OUTCOME = "tracehound.expectation.outcome"
"""Metric attribute: `pass` or `fail`."""
ATTR_EXPECTATIONS_AGENT = "tracehound.expectations.agent"
"""string, on a checked run's span: its agent key (`service.name/agent name`); also a metric
attribute of `tracehound.expectations.results`."""
ATTR_EXPECTATIONS_CHECKED = "tracehound.expectations.checked"
"""int: rules checked on the run (on the root: over all runs of the trace)."""
ATTR_EXPECTATIONS_FAILED_COUNT = "tracehound.expectations.failed_count"
"""int: rules that failed on the run (on the root: over all runs) — what `--fail-on
expectations` reads."""
ATTR_EXPECTATIONS_FAILED = "tracehound.expectations.failed"
"""string[]: the failed rules (`BLOCK.CHECK`), sorted (on the root: over all runs)."""

# --- evaluation event (OTel GenAI semantic conventions) -------------------------------------------
EVENT_EVALUATION_RESULT = "gen_ai.evaluation.result"
ATTR_EVALUATION_NAME = "gen_ai.evaluation.name"
ATTR_EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
ATTR_EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
ATTR_EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
ATTR_ERROR_TYPE = "error.type"
ATTR_EVALUATOR_NAME = "tracehound.evaluator.name"
ATTR_EVALUATOR_VERSION = "tracehound.evaluator.version"

# --- emission: in-process processor, redaction, own scope ----------------------------------------
SCOPE_NAME = "tracehound"
"""Instrumentation scope of everything tracehound emits (log records, meters); spans and log
records of this scope (or `tracehound.*`) are never evaluated."""
ATTR_REDACTED = "tracehound.redacted"
"""int: content attributes (messages, tool arguments/results, documents) stripped from this
exported copy after evaluation (redaction option)."""

# --- metrics (OTel Metrics SDK; attributes below are low-cardinality only) ----------------------
METRIC_EVALUATION_SCORE = "tracehound.evaluation.score"
"""Histogram (1): every evaluation score; by evaluation name, evaluator, label, agent."""
METRIC_EVALUATION_ERRORS = "tracehound.evaluation.errors"
"""Counter ({error}): evaluations that failed (an evaluator raised); by evaluator, error.type."""
METRIC_EVALUATION_DURATION = "tracehound.evaluation.duration"
"""Histogram (s): evaluation latency of one GenAI span (stage `span`) or one trace at
finalization (stage `trace`)."""
METRIC_LOOPS = "tracehound.loops"
"""Counter ({loop}): loop instances found in finalized traces; by loop kind, agent."""
METRIC_LOOPS_WASTED_TOKENS = "tracehound.loops.wasted_tokens"
"""Counter ({token}): tokens of LLM calls that only repeated earlier work; by agent."""
METRIC_LOOPS_WASTED_SECONDS = "tracehound.loops.wasted_seconds"
"""Counter (s): time spent in steps that only repeated earlier work; by agent."""
METRIC_EVIDENCE_SURVIVAL = "tracehound.evidence.survival"
"""Histogram (1): evidence survival ratio per trace; `tracehound.evidence.scope` = overall/final."""
METRIC_DRIFT_SEVERITY = "tracehound.drift.runs"
"""Counter ({run}): drift results, by `tracehound.drift.severity` (`DRIFT_SEVERITIES`), agent."""
METRIC_DRIFT_DRIFTING_RUNS = "tracehound.drift.drifting_runs"
"""Histogram ({run}): for each run of an open drift episode, its drifted runs so far; by agent.
A series that keeps rising is a sustained shift nobody accepted yet."""
METRIC_EXPECTATIONS = "tracehound.expectations.results"
"""Counter ({result}): expectation results; by `tracehound.expectation.rule`,
`tracehound.expectation.outcome`, `tracehound.expectations.agent` (the checked run's agent key)
and agent (the trace's top-level agent)."""
METRIC_SPANS_QUEUED = "tracehound.processor.spans.queued"
"""Counter ({span}): spans (and GenAI log records) taken off the processor's queue."""
METRIC_SPANS_DROPPED = "tracehound.processor.spans.dropped"
"""Counter ({span}): spans or log records dropped by the processor; by `tracehound.drop.reason`."""
METRIC_SPANS_EXPORTED = "tracehound.processor.spans.exported"
"""Counter ({span}): spans handed to the wrapped exporter; by `tracehound.export.outcome`."""
METRIC_QUEUE_SIZE = "tracehound.processor.queue.size"
"""Observable gauge ({item}): items waiting in the processor's queue."""
METRIC_TRACES_ACTIVE = "tracehound.traces.active"
"""Observable gauge ({trace}): traces held by the engine, not finalized yet."""
METRIC_TRACES_FINALIZED = "tracehound.traces.finalized"
"""Counter ({trace}): finalized traces; by `tracehound.finalize.reason`."""
METRIC_TRACES_FINALIZED_EARLY = "tracehound.traces.finalized_early"
"""Counter ({trace}): traces finalized early because `max_traces` was reached."""
METRIC_LATE_SPANS = "tracehound.spans.late"
"""Counter ({span}): spans that arrived after their trace was finalized."""
METRIC_SPANS_REORDERED = "tracehound.spans.reordered"
"""Counter ({span}): GenAI spans that arrived before one of their ancestors (SDK exporters send
children first) and whose evaluation waited for them (at most `reorder_delay`); by
`tracehound.reorder.outcome`: `ancestors` (evaluated once they arrived) or `expired` (evaluated
without them, after `reorder_delay` or at the trace's finalization)."""
METRIC_ATTR_EVIDENCE_SCOPE = "tracehound.evidence.scope"
"""Metric attribute: `overall` (any later output) or `final` (the final answer)."""
METRIC_ATTR_STAGE = "tracehound.stage"
"""Metric attribute: `span` or `trace`."""
METRIC_ATTR_DROP_REASON = "tracehound.drop.reason"
"""Metric attribute: `queue_full` or `shutdown`."""
METRIC_ATTR_EXPORT_OUTCOME = "tracehound.export.outcome"
"""Metric attribute: `success`, `failure` (exporter returned FAILURE) or `error` (it raised)."""
METRIC_ATTR_FINALIZE_REASON = "tracehound.finalize.reason"
"""Metric attribute: `quiet`, `timeout`, `max_traces` or `flush`."""
METRIC_ATTR_REORDER_OUTCOME = "tracehound.reorder.outcome"
"""Metric attribute: `ancestors` or `expired` (see `METRIC_SPANS_REORDERED`)."""
METRIC_ATTR_AGENT = "gen_ai.agent.name"

# --- sidecar (`tracehound serve`) self-metrics ------------------------------------------------
# Instruments of `tracehound.server._telemetry.ServerMetrics` (not `tracehound.emit.INSTRUMENTS`,
# which holds the instruments `MetricsRecorder` creates).
SERVE_METRIC_REQUESTS = "tracehound.server.requests"
"""Counter ({request}): OTLP export requests answered; by `tracehound.signal`,
`tracehound.transport`, `tracehound.outcome` (`success`, `partial`, `refused`, `invalid`,
`too_large`)."""
SERVE_METRIC_ITEMS = "tracehound.server.items"
"""Counter ({item}): spans, log records or metrics received; by `tracehound.signal` and
`tracehound.outcome` (`accepted`, `rejected` — bad ids, reported in partial_success — or
`refused` — the queue was full, the sender was told to retry)."""
SERVE_METRIC_SPANS_DUPLICATE = "tracehound.server.spans.duplicate"
"""Counter ({span}): spans received again (same trace and span id) and dropped."""
SERVE_METRIC_QUEUE_SIZE = "tracehound.server.queue.size"
"""Observable gauge (By): bytes accepted and not yet forwarded; by `tracehound.signal`."""
SERVE_METRIC_HELD_SPANS = "tracehound.server.spans.held"
"""Observable gauge ({span}): spans held until their trace is finalized (roots in `stream` mode,
whole traces in `hold` mode) or, in `stream` mode, until their ancestors arrived
(`reorder_delay`)."""
SERVE_METRIC_FORWARD_ITEMS = "tracehound.forward.items"
"""Counter ({item}): items forwarded downstream; by `tracehound.signal`,
`tracehound.export.outcome` (`success` / `dropped`) and, when dropped, `tracehound.drop.reason`
(`rejected` by the downstream, `retries_exhausted`, `queue_full`, `shutdown`)."""
SERVE_METRIC_FORWARD_RETRIES = "tracehound.forward.retries"
"""Counter ({retry}): forward attempts retried after a retryable failure; by `tracehound.signal`."""
SERVE_METRIC_ACCELERATOR_FALLBACKS = "tracehound.accelerator.fallbacks"
"""Counter ({input}): inputs a C kernel left to its Python reference (see `tracehound._accel`);
by `tracehound.kernel`."""
METRIC_ATTR_KERNEL = "tracehound.kernel"
"""Metric attribute: the C kernel's name."""
METRIC_ATTR_SIGNAL = "tracehound.signal"
"""Metric attribute: `traces`, `logs` or `metrics`."""
METRIC_ATTR_TRANSPORT = "tracehound.transport"
"""Metric attribute: `grpc` or `http`."""
METRIC_ATTR_OUTCOME = "tracehound.outcome"
"""Metric attribute: how a request or item was answered (see each metric)."""
"""Metric attribute: the trace's top-level agent (absent when the trace has no agent span)."""

__all__ = [
    "ATTR_CONVENTIONS",
    "ATTR_ERROR_TYPE",
    "ATTR_EVALUATION_EXPLANATION",
    "ATTR_EVALUATION_NAME",
    "ATTR_EVALUATION_SCORE_LABEL",
    "ATTR_EVALUATION_SCORE_VALUE",
    "ATTR_EVALUATOR_NAME",
    "ATTR_EVALUATOR_VERSION",
    "ATTR_LATE_SPANS",
    "ATTR_TRUNCATED",
    "EVENT_EVALUATION_RESULT",
]
