"""The trajectory is a function of the set of spans: any order in, the same steps and runs out;
and so are the per-span results, for every order an SDK exports a trace in (see below).

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

from helpers import feed_engine
from tracehound import names as N
from tracehound.conventions import NormalizedSpan, normalize
from tracehound.engine import Engine, EngineConfig
from tracehound.evaluators.base import EvaluationResult, Evaluator, TraceInfo
from tracehound.evaluators.evidence import EvidenceEvaluator
from tracehound.evaluators.loops import LoopEvaluator
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


# --- per-span results ---------------------------------------------------------------------------
#
# The engine defers a GenAI span whose ancestors have not all arrived (SDK exporters send children
# before their parents) and evaluates the spans ready together parents first, the others as they
# ended. So the per-span results each span gets do not depend on the order in which the spans of
# a trace arrive, for every order in which the local root comes last — the shape of every SDK
# export, whatever the batching — and they are those of the parents-first order below. (When a
# parent arrives before its children and they then come out of order, nothing in the stream can
# tell; `hold` forwarding, which waits for the whole trace, is the answer then.)

CAPTURES = FIXTURES / "frameworks"
LOOP_CAPTURES = [
    "strands_latest_attrs_loop",
    "openai_agents_chat_loop",
    "openai_agents_responses_loop",
    "traceloop_sdk_loop",
]
"""Captures of real frameworks (spans in the order the SDK exported them) whose repeated tool
call reads right (`test_framework_captures.py`): their repeating spans must carry
`tracehound.loop.*` whatever the order."""


class Spans:
    """One trace as views (to feed an engine in any order) and its log records."""

    def __init__(self, views: list[SpanView], logs: list[LogView]) -> None:
        self.views = views
        self.logs = logs
        self.ids = {v.span_id for v in views}
        roots = [v for v in views if not v.parent_span_id or v.parent_span_id not in self.ids]
        self.root = min(roots, key=lambda v: (bool(v.parent_span_id), v.start_ns, v.span_id))


def _spans_by_trace(views: list[SpanView], logs: list[LogView]) -> list[Spans]:
    traces: dict[str, list[SpanView]] = {}
    for view in views:
        traces.setdefault(view.trace_id, []).append(view)
    return [
        Spans(trace_views, [lg for lg in logs if lg.trace_id == trace_id])
        for trace_id, trace_views in sorted(traces.items())
    ]


@cache
def scenario_spans(name: str) -> list[Spans]:
    captured = capture(SCENARIOS[name])
    return _spans_by_trace(captured.span_views(), captured.log_views())


@cache
def fixture_spans(path: Path) -> list[Spans]:
    logs_file = path.with_name(path.name.replace(".otlp.json", ".logs.otlp.json"))
    telemetry = read_paths([path, *([logs_file] if logs_file.exists() else [])])
    assert not telemetry.problems
    return _spans_by_trace(telemetry.spans, telemetry.logs)


def parents_first(views: list[SpanView]) -> list[SpanView]:
    """Parents before their children, the rest as they ended: by the earliest end in each
    span's subtree, then depth, then span id."""
    parents = {v.span_id: v.parent_span_id for v in views}
    first_end = {v.span_id: v.end_ns for v in views}
    depth: dict[str, int] = {}
    for view in views:
        level, current = 0, parents.get(view.span_id)
        while current and level < 256:
            level += 1
            if current in first_end:
                first_end[current] = min(first_end[current], view.end_ns)
            current = parents.get(current)
        depth[view.span_id] = level
    return sorted(views, key=lambda v: (first_end[v.span_id], depth[v.span_id], v.span_id))


def per_span_results(
    spans: Spans, order: list[SpanView], engine: Engine | None = None
) -> dict[str, list[tuple[Any, ...]]]:
    """Each span's per-span results (name, label, score, attributes), the spans fed in `order`
    (the clock still: only their ancestors' arrival, or the final flush, evaluates a deferred
    span); the trace results are checked to be those of parents-first order too."""
    engine = engine or Engine([EvidenceEvaluator(), LoopEvaluator()])
    for log in spans.logs:
        engine.add_log(log)
    outcomes, finalized = feed_engine(engine, order)
    out: dict[str, list[tuple[Any, ...]]] = {}
    for outcome in outcomes:
        for r in outcome.results:
            facts = (r.name, r.score_label, r.score_value, sorted(r.attributes.items()))
            out.setdefault(r.span_id or outcome.span_id, []).append(facts)
    assert len(outcomes) == len({o.span_id for o in outcomes})  # each evaluated once
    (trace,) = finalized
    out["<trace>"] = [
        (r.name, r.span_id, r.score_value, sorted(r.attributes.items())) for r in trace.results
    ]
    return out


def root_last(spans: Spans, data: st.DataObject) -> list[SpanView]:
    others = [v for v in spans.views if v is not spans.root]
    return [*data.draw(st.permutations(others), label="children"), spans.root]


def check_per_span_any_export_order(cases: list[Spans], data: st.DataObject) -> None:
    for spans in cases:
        baseline = per_span_results(spans, parents_first(spans.views))
        assert per_span_results(spans, root_last(spans, data)) == baseline


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_scenario_per_span_results_do_not_depend_on_export_order(
    name: str, data: st.DataObject
) -> None:
    check_per_span_any_export_order(scenario_spans(name), data)


SHAPE_CAPTURES = [
    "strands_default_parallel",
    "openai_agents_responses_parallel",
    "openai_agents_chat_tool_error",
    "smolagents_parallel",
    "smolagents_tool_error",
    "langgraph_openinference_react_tool_error",
    "langgraph_traceloop_create_agent_parallel",
    "autogen_openinference_preamble",
    "strands_latest_preamble",
]
"""Captures of parallel calls in one model response, of a failed call retried and of text written
beside tool calls: their per-span results too must not depend on the export order."""

PER_SPAN_FILES = [
    *FIXTURE_FILES,
    *(CAPTURES / f"{n}.otlp.json" for n in (*LOOP_CAPTURES, *SHAPE_CAPTURES)),
]


@pytest.mark.parametrize("path", PER_SPAN_FILES, ids=[p.name for p in PER_SPAN_FILES])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_fixture_per_span_results_do_not_depend_on_export_order(
    path: Path, data: st.DataObject
) -> None:
    check_per_span_any_export_order(fixture_spans(path), data)


class _Watch(Evaluator):
    """Records the spans evaluated before one of their ancestors (in the trace) arrived."""

    name = "watch"

    def __init__(self, parents: dict[str, str], arrived: set[str]) -> None:
        self.parents = parents
        self.arrived = arrived
        self.early: list[str] = []

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Any, trace: TraceInfo
    ) -> tuple[EvaluationResult, ...]:
        parents = self.parents
        current = parents.get(span.span_id)
        while current and current in parents:
            if current not in self.arrived:
                self.early.append(span.span_id)
            current = parents[current]
        return ()


def _trace_facts(trace: Any) -> list[tuple[Any, ...]]:
    return [(r.name, r.span_id, r.score_value, sorted(r.attributes.items())) for r in trace.results]


@pytest.mark.parametrize("name", ["genai_agent", "multi_agent", "parallel_fanout"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_no_span_is_evaluated_before_its_ancestors_in_any_order(
    name: str, data: st.DataObject
) -> None:
    """Any arrival order at all (parents before children included): each GenAI span is
    evaluated once, and only after every ancestor it has in the trace arrived; the trace results
    are the same."""
    for spans in scenario_spans(name):
        order = data.draw(st.permutations(spans.views), label="spans")
        arrived: set[str] = set()
        watch = _Watch({v.span_id: v.parent_span_id for v in spans.views}, arrived)
        engine = Engine([watch, EvidenceEvaluator(), LoopEvaluator()])
        outcomes: list[Any] = []
        for view in order:
            arrived.add(view.span_id)
            outcomes += feed_engine(engine, [view], flush=False)[0]
        (trace,) = engine.flush()
        outcomes += engine.take_released()
        assert watch.early == []
        genai = [o.span_id for o in outcomes]
        assert len(genai) == len(set(genai)) and engine.stats.spans_reorder_expired == 0
        reference = per_span_results(spans, parents_first(spans.views))["<trace>"]
        assert _trace_facts(trace) == reference


@pytest.mark.parametrize("name", LOOP_CAPTURES)
def test_real_export_order_puts_loop_results_on_the_repeating_spans(name: str) -> None:
    """A real capture as the SDK exported it (children first): the repeated tool and chat spans
    carry `tracehound.loop.*`, as they do in parents-first order; no span waited in vain."""
    (spans,) = fixture_spans(CAPTURES / f"{name}.otlp.json")
    engine = Engine([EvidenceEvaluator(), LoopEvaluator()])
    exported = per_span_results(spans, spans.views, engine)
    assert engine.stats.spans_reordered > 0 and engine.stats.spans_reorder_expired == 0
    assert exported == per_span_results(spans, parents_first(spans.views))
    operations = {v.span_id: n.operation for v in spans.views if (n := normalize(v)) is not None}
    looped = {
        span_id
        for span_id, results in exported.items()
        if any(key == N.ATTR_LOOP_DETECTED for *_, attrs in results for key, _ in attrs)
    }
    assert len(looped) >= 2
    assert {operations.get(s) for s in looped} >= {"llm", "tool"}, looped
    # the evidence results of the LLM spans are there too
    reuse = [
        s for s, results in exported.items() if any(r[0] == N.EVAL_EVIDENCE_REUSE for r in results)
    ]
    assert {operations.get(s) for s in reuse} == {"llm"}


def test_a_span_whose_parent_never_comes_is_evaluated_after_the_reorder_delay() -> None:
    """Bounded: `poll` evaluates a deferred span as it is once `reorder_delay` passed (counted),
    after the deferred spans above it that did arrive."""
    (spans,) = fixture_spans(CAPTURES / "strands_latest_attrs_loop.otlp.json")
    now = [100.0]
    engine = Engine(
        [EvidenceEvaluator(), LoopEvaluator()],
        EngineConfig(reorder_delay=0.5),
        clock=lambda: now[0],
    )
    children = [v for v in spans.views if v is not spans.root]  # the agent span never comes
    for view in children:
        assert not engine.add_span(view).evaluated
    assert engine.poll() == [] and engine.take_released() == []
    now[0] += 0.5
    assert engine.poll() == []  # not finalized (no root): only evaluated
    released = engine.take_released()
    assert len(released) == sum(normalize(v) is not None for v in children)
    assert engine.stats.spans_reorder_expired == len(released)
    by_span = {o.span_id: o for o in released}
    # the event-loop cycles (above each chat and tool span) are evaluated before them
    position = {o.span_id: i for i, o in enumerate(released)}
    for view in children:
        parent = view.parent_span_id
        if view.span_id in position and parent in position:
            assert position[parent] < position[view.span_id]
    # the loop is found all the same: the run is the agent span they all wait for
    assert any(N.ATTR_LOOP_DETECTED in r.attributes for o in by_span.values() for r in o.results)


def test_reorder_delay_zero_evaluates_on_arrival() -> None:
    (spans,) = fixture_spans(CAPTURES / "openai_agents_chat_loop.otlp.json")
    engine = Engine([LoopEvaluator()], EngineConfig(reorder_delay=0))
    assert not any(engine.add_span(v).deferred for v in spans.views)
    assert engine.take_released() == []
    assert engine.stats.spans_reordered == 0
