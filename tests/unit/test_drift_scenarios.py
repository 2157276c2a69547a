"""`reasontrace`'s five evaluation scenarios as OTel traces, through the engine and the drift
evaluator; and `reasontrace`'s own scorer on the same sessions for the components it can compute
without sentence-transformers (tool pattern, complexity).

Scenario layout (see `_drift_scenarios`): control = 15 consistent runs; the four others = 10
baseline runs, then 5 drifted ones (index 10–14).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from _drift_scenarios import (
    SCENARIOS,
    Scenario,
    reasontrace_session,
    scenario_documents,
    span_views,
)

from tracehound import Engine
from tracehound import names as N
from tracehound.baselines import MemoryStore
from tracehound.drift import RunningStats, severity_rank
from tracehound.evaluators.drift import DriftEvaluator, DriftEvaluatorConfig

DRIFT_SCENARIOS = ("tool_drift", "semantic_drift", "complexity_drift", "combined_drift")


@dataclass(frozen=True)
class Row:
    index: int
    score: float
    severity: str
    driver: str
    tool_mix: float
    semantic: float
    complexity: float
    updated: bool


def run_scenario(
    scenario: Scenario, *, pin_after: int | None = None, config: DriftEvaluatorConfig | None = None
) -> list[Row]:
    """Feed the scenario's traces one by one; one row per scored run (run 0 starts the baseline)."""
    store = MemoryStore()
    evaluator = DriftEvaluator(store, config=config)
    engine = Engine([evaluator])
    rows: list[Row] = []
    for index, document in enumerate(scenario_documents(scenario)):
        if pin_after is not None and index == pin_after:
            (info,) = store.list()
            assert store.pin(info.key)
        for view in span_views(document):
            engine.add_span(view)
        (finalized,) = engine.flush()
        (result,) = [r for r in finalized.results if r.name == N.EVAL_DRIFT]
        assert result.error_type is None, result.explanation
        attrs = result.attributes
        assert attrs[N.ATTR_DRIFT_AGENT] == "research-service/planner"
        if index == 0:
            assert result.score_value is None and result.score_label == "initializing"
            assert attrs[N.ATTR_DRIFT_BASELINE_UPDATED] is True
            continue
        assert result.score_value == attrs[N.ATTR_DRIFT_SCORE]
        assert result.score_label == attrs[N.ATTR_DRIFT_SEVERITY]
        rows.append(
            Row(
                index=index,
                score=float(attrs[N.ATTR_DRIFT_SCORE]),  # type: ignore[arg-type]
                severity=str(attrs[N.ATTR_DRIFT_SEVERITY]),
                driver=str(attrs[N.ATTR_DRIFT_PRIMARY_DRIVER]),
                tool_mix=float(attrs[N.ATTR_DRIFT_TOOL_MIX]),  # type: ignore[arg-type]
                semantic=float(attrs[N.ATTR_DRIFT_SEMANTIC]),  # type: ignore[arg-type]
                complexity=float(attrs[N.ATTR_DRIFT_COMPLEXITY]),  # type: ignore[arg-type]
                updated=bool(attrs[N.ATTR_DRIFT_BASELINE_UPDATED]),
            )
        )
    return rows


def at_least(severity: str, floor: str) -> bool:
    return severity_rank(severity) >= severity_rank(floor)


def test_control_stays_none() -> None:
    rows = run_scenario(SCENARIOS["control"]())
    assert len(rows) == 14
    assert [r.severity for r in rows] == ["none"] * 14, rows
    assert all(r.tool_mix == 0.0 for r in rows)
    assert max(r.score for r in rows) < 0.3
    assert all(r.updated for r in rows)


@pytest.mark.parametrize("name", DRIFT_SCENARIOS)
def test_first_drifted_run_is_flagged_with_the_right_driver(name: str) -> None:
    scenario = SCENARIOS[name]()
    rows = run_scenario(scenario)
    first = next(r for r in rows if r.index == scenario.baseline_runs)
    if name == "combined_drift":
        assert at_least(first.severity, "alert"), first  # reasontrace's own verdict: alert
        assert min(first.tool_mix, first.semantic, first.complexity) >= 0.5, first
    else:
        assert at_least(first.severity, "warning"), first
        assert first.driver == scenario.expected_driver, first
    # drift is never learned: only runs below `warning` join the baseline
    assert not first.updated


@pytest.mark.parametrize("name", DRIFT_SCENARIOS)
def test_pinned_baseline_flags_every_drifted_run(name: str) -> None:
    """The regression-gate use: pin the baseline after the 10 good runs, score the rest."""
    scenario = SCENARIOS[name]()
    rows = run_scenario(scenario, pin_after=scenario.baseline_runs)
    drifted = [r for r in rows if r.index >= scenario.baseline_runs]
    assert len(drifted) == 5
    for row in drifted:
        assert not row.updated
        if name == "combined_drift":
            assert at_least(row.severity, "alert"), row
            assert row.driver == "tool_mix"
        else:
            assert at_least(row.severity, "warning"), row
            assert row.driver == scenario.expected_driver, row


def test_only_runs_below_warning_join_the_baseline() -> None:
    scenario = SCENARIOS["tool_drift"]()
    rows = run_scenario(scenario)
    for row in rows:
        assert row.updated == (row.severity == "none"), row
    # `no_update_at=None` learns every run (reasontrace's protocol): the drift decays
    lenient = run_scenario(scenario, config=DriftEvaluatorConfig(no_update_at=None))
    drifted = [r for r in lenient if r.index >= scenario.baseline_runs]
    assert all(r.updated for r in drifted)
    assert drifted[-1].tool_mix < drifted[0].tool_mix


def test_scenarios_are_reproducible() -> None:
    scenario = SCENARIOS["semantic_drift"]()
    assert run_scenario(scenario) == run_scenario(SCENARIOS["semantic_drift"]())


# --- reasontrace's scorer on the same sessions ---------------------------------------------------


@pytest.fixture
def reasontrace(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Any]:
    """reasontrace with its storage in tmp_path and a zero stub for its sentence embedder.

    Its semantic component needs sentence-transformers (not installed): with the stub it scores
    0, and only the tool-pattern and complexity components are compared.
    """
    monkeypatch.setenv("REASONTRACE_DIR", str(tmp_path))
    import reasontrace.baseline as rt_baseline
    import reasontrace.scorer as rt_scorer

    def no_embedding(checkpoints: Any) -> np.ndarray[Any, Any]:
        return np.zeros(384, dtype=np.float32)

    monkeypatch.setattr(rt_baseline, "embed_session_reasoning", no_embedding)
    monkeypatch.setattr(rt_scorer, "embed_session_reasoning", no_embedding)
    yield rt_baseline, rt_scorer


def reasontrace_rows(reasontrace: Any, scenario: Scenario) -> list[dict[str, Any]]:
    """reasontrace's evaluation protocol: score each session, then add it to the baseline."""
    rt_baseline, rt_scorer = reasontrace
    from reasontrace import storage

    storage.clear_baseline()
    scorer = rt_scorer.DriftScorer()
    out = []
    for index, spec in enumerate(scenario.runs):
        session = reasontrace_session(spec, index)
        baseline = storage.load_baseline()
        if baseline is not None and baseline.get("sessions_count", 0) >= 1:
            out.append({"index": index, **scorer.score(session, baseline)})
        rt_baseline.update_baseline(session)
    return out


EVERY_RUN_UPDATES = DriftEvaluatorConfig(no_update_at=None)  # reasontrace's protocol


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_tool_component_equals_reasontrace(reasontrace: Any, name: str) -> None:
    scenario = SCENARIOS[name]()
    theirs = reasontrace_rows(reasontrace, scenario)
    ours = run_scenario(scenario, config=EVERY_RUN_UPDATES)
    assert [r["index"] for r in theirs] == [r.index for r in ours]
    for their, our in zip(theirs, ours, strict=True):
        # reasontrace rounds to 4 decimals and computes in float32
        assert our.tool_mix == pytest.approx(their["tool_pattern_score"], abs=2e-4), (their, our)


def test_complexity_components_agree_on_the_drifted_runs(reasontrace: Any) -> None:
    scenario = SCENARIOS["complexity_drift"]()
    theirs = {r["index"]: r["complexity_score"] for r in reasontrace_rows(reasontrace, scenario)}
    ours = {r.index: r.complexity for r in run_scenario(scenario, config=EVERY_RUN_UPDATES)}
    first = scenario.baseline_runs
    for scores in (theirs, ours):
        baseline_phase = max(v for i, v in scores.items() if i < first)
        # the first drifted run stands out above every baseline run in both scorers ...
        assert scores[first] >= 0.75 > baseline_phase + 0.3
        # ... and, as the baseline absorbs the drifted runs, the score falls in both
        assert scores[first + 4] < scores[first]
    control = SCENARIOS["control"]()
    their_control = [r["complexity_score"] for r in reasontrace_rows(reasontrace, control)]
    our_control = [r.complexity for r in run_scenario(control, config=EVERY_RUN_UPDATES)]
    assert max(their_control) == 0.0  # reasontrace sees constant step/decision counts
    assert max(our_control) < 0.5  # tokens and latency vary a little from run to run


def test_welford_statistics_equal_reasontraces_on_its_complexity_vectors(reasontrace: Any) -> None:
    rt_baseline, _ = reasontrace
    from reasontrace import storage

    scenario = SCENARIOS["combined_drift"]()
    storage.clear_baseline()
    stats = RunningStats.empty(3)
    for index, spec in enumerate(scenario.runs):
        session = reasontrace_session(spec, index)
        rt_baseline.update_baseline(session)
        stats.add(rt_baseline._complexity_vector(session))
    baseline = storage.load_baseline()
    assert baseline is not None and baseline["sessions_count"] == len(scenario.runs)
    np.testing.assert_allclose(stats.mean, baseline["complexity_mean"], rtol=1e-12)
    np.testing.assert_allclose(stats.m2, baseline["complexity_m2"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(stats.std, baseline["complexity_std"], rtol=1e-9)
