"""The trace-level summaries the engine puts on the root span (`derived_attributes`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import names
from tracehound.evaluators.base import EvaluationResult
from tracehound.evaluators.summary import LEVELS, derived_attributes

_LEVEL_OF_RANK = {rank: level for level, rank in LEVELS.items()}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _reference(root: Any, results: Sequence[EvaluationResult]) -> dict[str, str | float]:
    """`derived_attributes` as first written: the reference of the one the engine runs."""
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
        if name not in (drift, golden):
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


_severities = st.one_of(
    st.sampled_from(["none", "warning", "alert", "critical", "ALERT", "Warning", "", "bad"]),
    st.integers(-1, 3),
    st.booleans(),
    st.none(),
)
_scores = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.5, 1.0, -1.0, 2, 0, -3, True, False]),
    st.integers(-(2**70), 2**70),
    st.none(),
    st.just("0.5"),
)
_agents = st.one_of(st.sampled_from(["", "a", "b", "agent/x"]), st.integers(0, 2), st.none())


@st.composite
def _drift_attributes(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out[names.ATTR_DRIFT_SEVERITY] = draw(_severities)
    if draw(st.booleans()):
        out[names.ATTR_DRIFT_SCORE] = draw(_scores)
    if draw(st.booleans()):
        out[names.ATTR_DRIFT_AGENT] = draw(_agents)
    if draw(st.booleans()):
        out[names.ATTR_GOLDEN_VERDICT] = draw(
            st.sampled_from([*names.GOLDEN_VERDICTS, "other", None, 3])
        )
    return out


_results = st.builds(
    EvaluationResult,
    name=st.sampled_from([names.EVAL_DRIFT, names.EVAL_GOLDEN, "tracehound.loops", "x"]),
    evaluator=st.just("e"),
    evaluator_version=st.just("1"),
    error_type=st.sampled_from([None, "", "ValueError"]),
    attributes=_drift_attributes(),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(root=_drift_attributes(), results=st.lists(_results, max_size=6))
def test_derived_attributes_are_the_references(root: dict[str, Any], results: list[Any]) -> None:
    def outcome(call: Any) -> Any:
        try:
            return call()
        except Exception as exc:  # a huge int's score: math.isfinite raises, in both
            return type(exc)

    expected = outcome(lambda: _reference(root, results))
    got = outcome(lambda: derived_attributes(root, results))
    assert got == expected
    if isinstance(got, dict):  # the same floats, signs of zeros included
        assert [math.copysign(1, v) for v in got.values() if isinstance(v, float)] == [
            math.copysign(1, v) for v in expected.values() if isinstance(v, float)
        ]
        assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]
