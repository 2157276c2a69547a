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
