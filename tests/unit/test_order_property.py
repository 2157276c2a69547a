"""The trajectory is a function of the set of spans: any order in, the same steps and runs out.

Traces come from the synthetic scenarios (real SDK spans, `_scenarios.py`) and from the captured
fixtures in `tests/fixtures` (read with `tracehound.files.read_paths`, log events joined).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
from _scenarios import SCENARIOS
from _sdk import capture, normalize_all
from hypothesis import given, settings
from hypothesis import strategies as st

from tracehound.conventions import NormalizedSpan
from tracehound.files import read_paths
from tracehound.spans import LogView, SpanView
from tracehound.steps import Trajectory, TrajectoryBuilder, build_trajectory

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE_FILES = sorted(
    p for p in FIXTURES.glob("*.otlp.json") if not p.name.endswith(".logs.otlp.json")
)


class Case:
    """One trace: its normalized spans, the parents and names of all its spans, the baseline."""

    def __init__(self, views: list[SpanView], logs: list[LogView]) -> None:
        (self.trace_id,) = {v.trace_id for v in views}
        self.spans: list[NormalizedSpan] = [
            n for n in normalize_all(views, logs).values() if n is not None
        ]
        self.parents = [(v.span_id, v.parent_span_id) for v in views]
        self.names = [(v.span_id, v.name) for v in views]
        self.baseline = self.build(self.spans, self.parents, self.names)

    def build(
        self,
        spans: list[NormalizedSpan],
        parents: list[tuple[str, str]],
        names: list[tuple[str, str]],
    ) -> Trajectory:
        return build_trajectory(self.trace_id, spans, dict(parents), dict(names))


def _by_trace(views: list[SpanView], logs: list[LogView]) -> list[Case]:
    traces: dict[str, list[SpanView]] = {}
    for view in views:
        traces.setdefault(view.trace_id, []).append(view)
    return [
        Case(trace_views, [lg for lg in logs if lg.trace_id == trace_id])
        for trace_id, trace_views in sorted(traces.items())
    ]


@cache
def scenario_cases(name: str) -> list[Case]:
    captured = capture(SCENARIOS[name])
    return _by_trace(captured.span_views(), captured.log_views())


@cache
def fixture_cases(name: str) -> list[Case]:
    spans_file = FIXTURES / f"{name}.otlp.json"
    logs_file = FIXTURES / f"{name}.logs.otlp.json"
    telemetry = read_paths([spans_file, *([logs_file] if logs_file.exists() else [])])
    assert not telemetry.problems
    return _by_trace(telemetry.spans, telemetry.logs)


def summary(traj: Trajectory) -> tuple[Any, ...]:
    return (
        [s.to_dict() for s in traj.steps],
        traj.runs,
        traj.conventions,
        sorted(traj.problems),
    )


def check_any_order(cases: list[Case], data: st.DataObject) -> None:
    for case in cases:
        spans = data.draw(st.permutations(case.spans), label="spans")
        parents = data.draw(st.permutations(case.parents), label="parents")
        names = data.draw(st.permutations(case.names), label="names")
        assert summary(case.build(spans, parents, names)) == summary(case.baseline)
        # The engine's incremental builder, fed in this arrival order, ends up the same.
        builder = TrajectoryBuilder(case.trace_id)
        for span in spans:
            builder.add(span)
        assert summary(builder.build(dict(parents), dict(names))) == summary(case.baseline)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_scenario_steps_do_not_depend_on_span_order(name: str, data: st.DataObject) -> None:
    cases = scenario_cases(name)
    assert len(cases) == 1 and cases[0].baseline.steps
    check_any_order(cases, data)


@pytest.mark.parametrize("name", [p.name.removesuffix(".otlp.json") for p in FIXTURE_FILES])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_fixture_steps_do_not_depend_on_span_order(name: str, data: st.DataObject) -> None:
    cases = fixture_cases(name)
    assert cases and all(case.spans for case in cases)
    check_any_order(cases, data)


def test_fixtures_are_found() -> None:
    names = {p.name for p in FIXTURE_FILES}
    assert {"pydantic_ai_v5.otlp.json", "openai_v2_latest.otlp.json"} <= names
    assert len(FIXTURE_FILES) >= 10


def test_reversed_order_changes_nothing_even_for_the_tie() -> None:
    """A deterministic witness next to the property: the reversed order of the fan-out whose two
    tool spans share their start and end times."""
    (case,) = scenario_cases("parallel_fanout_same_times")
    reversed_traj = case.build(case.spans[::-1], case.parents[::-1], case.names[::-1])
    assert summary(reversed_traj) == summary(case.baseline)
    results = [s for s in case.baseline.steps if s.kind == "tool_result"]
    assert len(results) == 2 and results[0].end_ns == results[1].end_ns
