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

# --- evaluation event (OTel GenAI semantic conventions) ---------------------------------------------
EVENT_EVALUATION_RESULT = "gen_ai.evaluation.result"
ATTR_EVALUATION_NAME = "gen_ai.evaluation.name"
ATTR_EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
ATTR_EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
ATTR_EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
ATTR_ERROR_TYPE = "error.type"
ATTR_EVALUATOR_NAME = "tracehound.evaluator.name"
ATTR_EVALUATOR_VERSION = "tracehound.evaluator.version"

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
