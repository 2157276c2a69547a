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


_DRIFT, _GOLDEN = names.EVAL_DRIFT, names.EVAL_GOLDEN
_SEVERITY, _SCORE = names.ATTR_DRIFT_SEVERITY, names.ATTR_DRIFT_SCORE
_AGENT = names.ATTR_DRIFT_AGENT
_EXPECTATION = names.EVAL_EXPECTATION_PREFIX
_NUMBERS = (int, float)
_isfinite = math.isfinite


def derived_attributes(
    root: Any, results: Sequence[EvaluationResult]
) -> dict[str, str | float | int | tuple[str, ...]]:
    """Trace-level summaries of the per-run drift and golden results.

    Drift and golden results sit on each run's agent span, so the root span's attributes only
    hold them for a trace without agent spans (or whose root is the agent). These read every run:
    `tracehound.drift.max_severity` / `.max_score` / `.max_agent` (the root's own
    `tracehound.drift.severity` / `.score` count too), `tracehound.golden.worst_verdict`, and
    the expectation counts over all runs (`tracehound.expectations.checked` / `.failed_count` /
    `.failed`, a rule counted once however many runs it failed on).
    """
    # `_is_number` written out (no frame per value), each value read once
    out: dict[str, str | float | int | tuple[str, ...]] = {}
    scored: list[tuple[int, float, str]] = []
    root_severity = str(root.get(_SEVERITY, "")).lower()
    root_score = root.get(_SCORE)
    root_number = (
        isinstance(root_score, _NUMBERS)
        and not isinstance(root_score, bool)
        and _isfinite(root_score)
    )
    if root_severity in LEVELS or root_number:
        scored.append(
            (
                LEVELS.get(root_severity, -1),
                float(root_score) if root_number else -1.0,
                str(root.get(_AGENT, "")),
            )
        )
    verdicts: list[str] = []
    checked, failed = 0, set()
    for result in results:
        name = result.name
        if name == _DRIFT:
            if result.error_type:
                continue
            attrs = result.attributes
            severity = str(attrs.get(_SEVERITY, "")).lower()
            score = attrs.get(_SCORE, -1.0)
            if (
                severity in LEVELS
                and isinstance(score, _NUMBERS)
                and not isinstance(score, bool)
                and _isfinite(score)
            ):
                scored.append((LEVELS[severity], float(score), str(attrs.get(_AGENT, ""))))
        elif name.startswith(_EXPECTATION) and not result.error_type:
            checked += 1
            if result.score_label == "fail":
                failed.add(name[len(_EXPECTATION) :])
        elif name == _GOLDEN:
            verdict = result.attributes.get(names.ATTR_GOLDEN_VERDICT)
            if verdict in names.GOLDEN_VERDICTS:
                verdicts.append(str(verdict))
    if scored:
        rank, _, agent = max(scored)
        if rank >= 0:
            out[names.ATTR_DRIFT_MAX_SEVERITY] = _LEVEL_OF_RANK[rank]
        best: float | None = None  # the first of the highest scores not below 0
        for _, score_value, _ in scored:
            if score_value >= 0.0 and (best is None or score_value > best):
                best = score_value
        if best is not None:
            out[names.ATTR_DRIFT_MAX_SCORE] = best
        if agent:
            out[names.ATTR_DRIFT_MAX_AGENT] = agent
    if checked:
        out[names.ATTR_EXPECTATIONS_CHECKED] = checked
        out[names.ATTR_EXPECTATIONS_FAILED_COUNT] = len(failed)
        out[names.ATTR_EXPECTATIONS_FAILED] = tuple(sorted(failed))
    if verdicts:
        out[names.ATTR_GOLDEN_WORST_VERDICT] = max(verdicts, key=names.GOLDEN_VERDICTS.index)
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
