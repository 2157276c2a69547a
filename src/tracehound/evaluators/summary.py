"""Trace-level summaries of per-run results, put on the root span by the engine.

Drift and golden results sit on each run's agent span, so without these the root span would hold
them only for a trace without agent spans. The engine adds them at finalization, so the processor,
the sidecar and `tracehound eval` all emit the same root attributes and gate on the same values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tracehound import names
from tracehound.evaluators.base import EvaluationResult

__all__ = ["LEVELS", "derived_attributes"]

# Drift severities compare by rank.
LEVELS = {"none": 0, "warning": 1, "alert": 2, "critical": 3}
_LEVEL_OF_RANK = {rank: level for level, rank in LEVELS.items()}


def derived_attributes(root: Any, results: Sequence[EvaluationResult]) -> dict[str, str | float]:
    """Trace-level summaries of the per-run drift and golden results.

    Drift and golden results sit on each run's agent span, so the root span's attributes only
    hold them for a trace without agent spans (or whose root is the agent). These read every run:
    `tracehound.drift.max_severity` / `.max_score` / `.max_agent` (the root's own
    `tracehound.drift.severity` / `.score` count too) and `tracehound.golden.worst_verdict`.
    """
    out: dict[str, str | float] = {}
    scored: list[tuple[int, float, str]] = []
    root_severity = str(root.get(names.ATTR_DRIFT_SEVERITY, "")).lower()
    root_score = root.get(names.ATTR_DRIFT_SCORE)
    if root_severity in LEVELS or (root_score is not None and _is_number(root_score)):
        scored.append(
            (
                LEVELS.get(root_severity, -1),
                float(root_score) if _is_number(root_score) else -1.0,
                str(root.get(names.ATTR_DRIFT_AGENT, "")),
            )
        )
    verdicts: list[str] = []
    drift, golden = names.EVAL_DRIFT, names.EVAL_GOLDEN
    for result in results:
        name = result.name
        if name not in (drift, golden):  # most results: neither
            continue
        attrs = result.attributes
        if name == drift and not result.error_type:
            severity = str(attrs.get(names.ATTR_DRIFT_SEVERITY, "")).lower()
            score = attrs.get(names.ATTR_DRIFT_SCORE, -1.0)
            if severity in LEVELS and _is_number(score):
                agent = str(attrs.get(names.ATTR_DRIFT_AGENT, ""))
                scored.append((LEVELS[severity], float(score), agent))
        elif name == golden:
            verdict = attrs.get(names.ATTR_GOLDEN_VERDICT)
            if verdict in names.GOLDEN_VERDICTS:
                verdicts.append(str(verdict))
    if scored:
        rank, _, agent = max(scored)
        if rank >= 0:
            out[names.ATTR_DRIFT_MAX_SEVERITY] = _LEVEL_OF_RANK[rank]
        scores = [s for _, s, _ in scored if s >= 0.0]
        if scores:
            out[names.ATTR_DRIFT_MAX_SCORE] = max(scores)
        if agent:
            out[names.ATTR_DRIFT_MAX_AGENT] = agent
    if verdicts:
        out[names.ATTR_GOLDEN_WORST_VERDICT] = max(verdicts, key=names.GOLDEN_VERDICTS.index)
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
