"""Golden-trace comparison (`tracehound.golden`, `tracehound eval --against`): each verdict, the
facts behind it, nested agents, the closest golden run, the per-agent summary and the gate."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tracehound import Engine
from tracehound import names as N
from tracehound.cli import main
from tracehound.golden import (
    NO_GOLDEN,
    NOT_SEEN,
    GoldenEvaluator,
    GoldenSet,
    PathCollector,
    RunPath,
    compare_paths,
    summarize,
)
from tracehound.report import TraceReport, parse_fail_rule
from tracehound.spans import SpanView, iter_json_spans

SERVICE = "support-service"
KEY = f"{SERVICE}/planner"

# --- a small OTel GenAI trace builder -------------------------------------------------------------

Call = tuple[str, bool]  # (tool, succeeded)
PIPELINE: tuple[Call, ...] = (("search", True), ("fetch", True), ("summarize", True))


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


class _Trace:
    def __init__(self, number: int) -> None:
        self.trace_id = f"{number:032x}"
        self.number = number
        self.ids = 0
        self.clock = 1_767_225_600_000_000_000 + number * 10**12
        self.spans: list[dict[str, Any]] = []

    def span_id(self) -> str:
        self.ids += 1
        return f"{self.number:08x}{self.ids:08x}"

    def add(
        self, name: str, parent: str, attrs: dict[str, Any], *, error: str | None = None
    ) -> str:
        span_id = self.span_id()
        start = self.clock
        self.clock += 1_000_000
        span: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": span_id,
            "parentSpanId": parent,
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(self.clock),
            "attributes": [_attr(k, v) for k, v in attrs.items()],
        }
        if error:
            span["status"] = {"code": 2, "message": error}
        self.spans.append(span)
        return span_id

    def agent(
        self,
        name: str,
        parent: str,
        calls: Sequence[Call],
        answer: str | None,
        children: Sequence[tuple[str, Sequence[Call], str | None]] = (),
    ) -> str:
        agent_id = self.add(
            f"invoke_agent {name}",
            parent,
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name},
        )
        history: list[dict[str, Any]] = [
            {"role": "user", "parts": [{"type": "text", "content": "Help me."}]}
        ]
        for k, (tool, ok) in enumerate(calls):
            call_id = f"call_{self.number}_{name}_{k}"
            part = {"type": "tool_call", "id": call_id, "name": tool, "arguments": {"q": k}}
            self.chat(agent_id, history, [part], "tool_call")
            history.append({"role": "assistant", "parts": [part]})
            result = f"{tool} found {k + 2} items" if ok else None
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": call_id,
            }
            if result is not None:
                attrs["gen_ai.tool.call.result"] = result
            self.add(f"execute_tool {tool}", agent_id, attrs, error=None if ok else "timeout")
            history.append(
                {
                    "role": "tool",
                    "parts": [
                        {"type": "tool_call_response", "id": call_id, "response": result or "error"}
                    ],
                }
            )
        for child, child_calls, child_answer in children:
            self.agent(child, agent_id, child_calls, child_answer)
        if answer is not None:
            self.chat(agent_id, history, [{"type": "text", "content": answer}], "stop")
        return agent_id

    def chat(
        self, parent: str, history: list[dict[str, Any]], parts: list[dict[str, Any]], finish: str
    ) -> None:
        output = [{"role": "assistant", "parts": parts, "finish_reason": finish}]
        self.add(
            "chat model-a",
            parent,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "model-a",
                "gen_ai.input.messages": json.dumps(history),
                "gen_ai.output.messages": json.dumps(output),
            },
        )

    def document(self, service: str = SERVICE) -> dict[str, Any]:
        return {
            "resourceSpans": [
                {
                    "resource": {"attributes": [_attr("service.name", service)]},
                    "scopeSpans": [{"scope": {"name": "tests.golden"}, "spans": self.spans}],
                }
            ]
        }


def trace_doc(
    number: int,
    calls: Sequence[Call] = PIPELINE,
    answer: str | None = "Here is your summary.",
    *,
    agent: str = "planner",
    children: Sequence[tuple[str, Sequence[Call], str | None]] = (),
    service: str = SERVICE,
) -> dict[str, Any]:
    trace = _Trace(number)
    trace.agent(agent, "", calls, answer, children)
    return trace.document(service)


def views(document: dict[str, Any]) -> list[SpanView]:
    errors: list[str] = []
    out = list(iter_json_spans(document, errors))
    assert not errors
    return out


def golden_set(*documents: dict[str, Any]) -> GoldenSet:
    collector = PathCollector()
    engine = Engine([collector])
    for document in documents:
        for view in views(document):
            engine.add_span(view)
    engine.flush()
    return GoldenSet(collector.paths, sources=["test"])


def compare(golden: GoldenSet, document: dict[str, Any]) -> tuple[GoldenEvaluator, list[Any]]:
    evaluator = GoldenEvaluator(golden)
    engine = Engine([evaluator])
    for view in views(document):
        engine.add_span(view)
    (finalized,) = engine.flush()
    results = [r for r in finalized.results if r.name == N.EVAL_GOLDEN]
    return evaluator, results


GOLDEN = trace_doc(1)


# --- paths ----------------------------------------------------------------------------------------


def test_the_path_of_a_run_counts_its_child_steps() -> None:
    golden = golden_set(
        trace_doc(1, (*PIPELINE, ("search", False)), children=[("writer", [("draft", True)], "ok")])
    )
    planner, writer = sorted(golden.by_key)
    (outer,) = golden.by_key[planner]
    assert outer.steps == {
        "agent:writer": 1,
        "llm": 5,  # 4 tool-calling turns and the answer
        "tool:fetch": 1,
        "tool:search": 2,
        "tool:summarize": 1,
    }
    assert outer.errors == 1 and outer.answered
    (inner,) = golden.by_key[writer]
    assert inner.key == f"{SERVICE}/writer"
    assert inner.steps == {"llm": 2, "tool:draft": 1} and inner.errors == 0 and inner.answered


# --- each verdict ---------------------------------------------------------------------------------


def test_same_path_is_unchanged() -> None:
    _, (result,) = compare(golden_set(GOLDEN), trace_doc(2, answer="A different wording."))
    attrs = result.attributes
    assert result.score_label == "unchanged" and result.score_value is None
    assert attrs[N.ATTR_GOLDEN_VERDICT] == "unchanged"
    assert attrs[N.ATTR_GOLDEN_PATH_CHANGED] is False
    assert attrs[N.ATTR_GOLDEN_ITERATION_COUNT_CHANGED] is False
    assert attrs[N.ATTR_GOLDEN_TRACE_ID] == f"{1:032x}"
    assert attrs[N.ATTR_GOLDEN_AGENT] == KEY
    assert "same path" in (result.explanation or "")


def test_more_iterations_of_the_same_steps_is_drifted() -> None:
    more = (("search", True), ("search", True), ("search", True), *PIPELINE[1:])
    _, (result,) = compare(golden_set(GOLDEN), trace_doc(2, more))
    attrs = result.attributes
    assert result.score_label == "drifted"
    assert attrs[N.ATTR_GOLDEN_PATH_CHANGED] is False
    assert attrs[N.ATTR_GOLDEN_ITERATION_COUNT_CHANGED] is True
    assert json.loads(attrs[N.ATTR_GOLDEN_COUNT_CHANGES]) == {
        "llm": [4, 6],
        "tool:search": [1, 3],
    }
    assert attrs[N.ATTR_GOLDEN_ADDED] == () and attrs[N.ATTR_GOLDEN_REMOVED] == ()
    assert "iteration counts changed: llm 4→6, tool:search 1→3" in (result.explanation or "")


def test_a_path_change_with_an_error_is_regressed() -> None:
    calls = (("search", True), ("fallback_search", False), *PIPELINE[1:])
    _, (result,) = compare(golden_set(GOLDEN), trace_doc(2, calls))
    attrs = result.attributes
    assert result.score_label == "regressed"
    assert attrs[N.ATTR_GOLDEN_PATH_CHANGED] is True
    assert attrs[N.ATTR_GOLDEN_ADDED] == ("tool:fallback_search",)
    assert attrs[N.ATTR_GOLDEN_REMOVED] == ()  # nothing expected is missing: the error decides
    assert attrs[N.ATTR_GOLDEN_ERRORS] == 1 and attrs[N.ATTR_GOLDEN_ERRORS_APPEARED] is True
    assert attrs[N.ATTR_GOLDEN_ANSWER_LOST] is False
    assert "errors appeared (0 → 1)" in (result.explanation or "")


def test_an_added_step_without_error_is_drifted() -> None:
    calls = (*PIPELINE, ("translate", True))
    _, (result,) = compare(golden_set(GOLDEN), trace_doc(2, calls))
    assert result.score_label == "drifted"
    assert result.attributes[N.ATTR_GOLDEN_PATH_CHANGED] is True
    assert result.attributes[N.ATTR_GOLDEN_ADDED] == ("tool:translate",)
    # a path change is not also reported as an iteration-count change
    assert result.attributes[N.ATTR_GOLDEN_ITERATION_COUNT_CHANGED] is False


def test_a_missing_expected_tool_is_regressed() -> None:
    calls = (("search", True), ("summarize", True))
    _, (result,) = compare(golden_set(GOLDEN), trace_doc(2, calls))
    assert result.score_label == "regressed"
    assert result.attributes[N.ATTR_GOLDEN_REMOVED] == ("tool:fetch",)
    assert result.attributes[N.ATTR_GOLDEN_ERRORS_APPEARED] is False


def test_a_lost_final_answer_is_regressed_without_a_path_change() -> None:
    _, (result,) = compare(golden_set(GOLDEN), trace_doc(2, answer=None))
    attrs = result.attributes
    assert result.score_label == "regressed"
    assert attrs[N.ATTR_GOLDEN_ANSWER_LOST] is True
    assert attrs[N.ATTR_GOLDEN_PATH_CHANGED] is False  # one LLM call fewer: the same set
    assert attrs[N.ATTR_GOLDEN_ITERATION_COUNT_CHANGED] is True
    assert (result.explanation or "").startswith(
        f"regressed against golden trace {1:032x}: final answer lost; iteration counts changed"
    )
    # the same counts and no answer: still regressed
    golden = RunPath(KEY, "g", "r", {"llm": 2, "tool:search": 1}, errors=0, answered=True)
    lost = RunPath(KEY, "n", "r", {"llm": 2, "tool:search": 1}, errors=0, answered=False)
    comparison = compare_paths(golden, lost)
    assert comparison.verdict == "regressed" and comparison.reasons() == ["final answer lost"]
    # a golden run without an answer loses nothing
    assert compare_paths(lost, lost).verdict == "unchanged"


def test_errors_on_the_same_path_are_drifted() -> None:
    golden = RunPath(KEY, "g", "r", {"llm": 2, "tool:search": 1}, errors=0, answered=True)
    run = RunPath(KEY, "n", "r", {"llm": 2, "tool:search": 1}, errors=1, answered=True)
    comparison = compare_paths(golden, run)
    assert comparison.verdict == "drifted" and comparison.errors_appeared
    assert not comparison.path_changed and not comparison.iteration_count_changed
    # fewer errors than the golden run is no change
    assert compare_paths(run, golden).verdict == "unchanged"


def test_an_agent_without_golden_run_is_not_compared() -> None:
    evaluator, (result,) = compare(golden_set(GOLDEN), trace_doc(2, agent="router"))
    assert result.score_label == NO_GOLDEN
    assert result.attributes == {N.ATTR_GOLDEN_AGENT: f"{SERVICE}/router"}
    (outcome,) = evaluator.outcomes
    assert outcome.comparison is None


def test_nested_agents_are_compared_on_their_own() -> None:
    golden = golden_set(trace_doc(1, children=[("writer", [("draft", True)], "ok")]))
    new = trace_doc(2, children=[("writer", [("draft", True), ("draft", True)], "ok")])
    _, results = compare(golden, new)
    verdicts = {r.attributes[N.ATTR_GOLDEN_AGENT]: r.score_label for r in results}
    assert verdicts == {KEY: "unchanged", f"{SERVICE}/writer": "drifted"}
    # each result sits on its own agent span
    assert len({r.span_id for r in results}) == 2
    # the outer agent no longer calling the writer is an expected step missing
    _, (outer,) = compare(golden, trace_doc(3))
    assert outer.score_label == "regressed"
    assert outer.attributes[N.ATTR_GOLDEN_REMOVED] == ("agent:writer",)


def test_the_closest_golden_run_is_used() -> None:
    short = trace_doc(1, PIPELINE[:1] + PIPELINE[2:])  # search, summarize
    full = trace_doc(2)
    golden = golden_set(short, full)
    assert len(golden) == 2
    _, (result,) = compare(golden, trace_doc(3))
    assert result.score_label == "unchanged"
    assert result.attributes[N.ATTR_GOLDEN_TRACE_ID] == f"{2:032x}"
    _, (result,) = compare(golden, trace_doc(4, PIPELINE[:1] + PIPELINE[2:]))
    assert result.score_label == "unchanged"
    assert result.attributes[N.ATTR_GOLDEN_TRACE_ID] == f"{1:032x}"


def test_per_agent_summary_takes_the_worst_run() -> None:
    golden = golden_set(GOLDEN, trace_doc(9, agent="archivist"))
    evaluator = GoldenEvaluator(golden)
    engine = Engine([evaluator])
    for document in (trace_doc(2), trace_doc(3, PIPELINE[:1]), trace_doc(4, agent="router")):
        for view in views(document):
            engine.add_span(view)
    engine.flush()
    summaries = {s.key: s for s in summarize(evaluator.outcomes, golden)}
    assert summaries[KEY].status == "regressed"
    assert summaries[KEY].runs == 2 and summaries[KEY].golden_runs == 1
    assert dict(summaries[KEY].verdicts) == {"unchanged": 1, "regressed": 1}
    worst = summaries[KEY].worst
    assert worst is not None and worst.run.trace_id == f"{3:032x}"
    assert summaries[f"{SERVICE}/router"].status == NO_GOLDEN
    assert summaries[f"{SERVICE}/archivist"].status == NOT_SEEN
    assert summaries[f"{SERVICE}/archivist"].to_dict()["worst"] is None
    quiet = GoldenEvaluator(golden, record=False)
    engine = Engine([quiet])
    for view in views(trace_doc(5)):
        engine.add_span(view)
    (finalized,) = engine.flush()
    assert [r.score_label for r in finalized.results] == ["unchanged"] and quiet.outcomes == []


# --- gate rules -----------------------------------------------------------------------------------


def reports(golden: GoldenSet, *documents: dict[str, Any]) -> list[TraceReport]:
    engine = Engine([GoldenEvaluator(golden)])
    for document in documents:
        for view in views(document):
            engine.add_span(view)
    return [TraceReport(t, ()) for t in engine.flush()]


def test_rules_read_the_worst_verdict_of_the_trace() -> None:
    golden = golden_set(trace_doc(1, children=[("writer", [("draft", True)], "ok")]))
    unchanged, drifted_inner = reports(
        golden,
        trace_doc(2, children=[("writer", [("draft", True)], "ok")]),
        trace_doc(3, children=[("writer", [("draft", True), ("draft", True)], "ok")]),
    )
    assert unchanged.attributes[N.ATTR_GOLDEN_WORST_VERDICT] == "unchanged"
    # the nested agent's verdict (on its own span, not the root) reaches the trace attributes
    assert drifted_inner.attributes[N.ATTR_GOLDEN_WORST_VERDICT] == "drifted"
    assert drifted_inner.status == "WARN"
    drifted, regressed = parse_fail_rule("drifted"), parse_fail_rule(" Regressed ")
    assert not drifted.check(unchanged) and not regressed.check(unchanged)
    assert drifted.check(drifted_inner) and not regressed.check(drifted_inner)
    (lost,) = reports(golden, trace_doc(4))
    assert lost.status == "FAIL" and drifted.check(lost) and regressed.check(lost)
    assert lost.to_json()["attributes"][N.ATTR_GOLDEN_WORST_VERDICT] == "regressed"


# --- the command line -----------------------------------------------------------------------------


def write(folder: Path, name: str, document: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.otlp.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.fixture
def golden_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "golden"
    write(folder, "planner", GOLDEN)
    return folder


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_eval_against_prints_verdicts_and_gates(
    tmp_path: Path, golden_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = write(tmp_path / "new", "same", trace_doc(2))
    more = write(tmp_path / "new", "more", trace_doc(3, (("search", True), *PIPELINE)))
    failing = (("search", True), ("fallback_search", False), *PIPELINE[1:])
    broken = write(tmp_path / "new", "broken", trace_doc(4, failing))
    base = ["eval", "--evaluators", "loops", "--against", str(golden_dir)]

    code, out, err = run([*base, str(same), "--fail-on", "drifted"], capsys)
    assert code == 0, err
    assert f"PASS golden       {KEY}: unchanged (golden {1:032x}) — same path" in out
    assert f"golden comparison against {golden_dir}: 1 agent(s): 1 unchanged" in out

    code, out, err = run([*base, str(same), str(more), "--fail-on", "regressed"], capsys)
    assert code == 0, err
    assert f"WARN golden       {KEY}: drifted" in out and "tool:search 1→2" in out
    code, out, err = run([*base, str(same), str(more), "--fail-on", "drifted"], capsys)
    assert code == 1 and "--fail-on drifted: tripped by 1 trace(s)" in err

    code, out, err = run(
        [*base, str(same), str(more), str(broken), "--fail-on", "regressed"], capsys
    )
    assert code == 1
    assert "--fail-on regressed: tripped by 1 trace(s): " + f"{4:032x}" in err
    assert f"  regressed  {KEY}  3 run(s), 1 golden: 1 unchanged, 1 drifted, 1 regressed" in out
    assert "path changed: added tool:fallback_search; errors appeared (0 → 1)" in out


def test_eval_against_json(
    tmp_path: Path, golden_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = write(tmp_path / "new", "less", trace_doc(2, PIPELINE[:2]))
    other = write(tmp_path / "new", "router", trace_doc(3, agent="router"))
    code, out, err = run(
        ["eval", "--evaluators", "loops", "--against", str(golden_dir), "--format", "json",
         str(new), str(other)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    *traces, last = [json.loads(line) for line in out.splitlines()]
    assert len(traces) == 2
    first = next(t for t in traces if t["trace_id"] == f"{2:032x}")
    (result,) = [r for r in first["results"] if r["name"] == N.EVAL_GOLDEN]
    assert result["label"] == "regressed"
    assert result["attributes"][N.ATTR_GOLDEN_REMOVED] == ["tool:summarize"]
    assert first["attributes"][N.ATTR_GOLDEN_WORST_VERDICT] == "regressed"
    summary = last["golden"]
    assert summary["against"] == [str(golden_dir)]
    agents = {a["agent"]: a for a in summary["agents"]}
    assert set(agents) == {KEY, f"{SERVICE}/router"}
    planner = agents[KEY]
    assert planner["verdict"] == "regressed" and planner["path_changed"] is True
    assert planner["iteration_count_changed"] is False
    assert planner["worst"]["removed"] == ["tool:summarize"]
    assert planner["worst"]["count_changes"] == {"llm": [4, 3], "tool:summarize": [1, 0]}
    assert agents[f"{SERVICE}/router"]["verdict"] == NO_GOLDEN


def test_eval_against_usage_errors(
    tmp_path: Path, golden_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = write(tmp_path / "new", "same", trace_doc(2))
    code, _, err = run(["eval", str(new), "--fail-on", "regressed"], capsys)
    assert code == 2 and "--fail-on regressed needs --against GOLDEN" in err
    code, _, err = run(["eval", str(new), "--against", str(tmp_path / "nowhere")], capsys)
    assert code == 2 and "nowhere: no such file or folder" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(["eval", str(new), "--against", str(empty)], capsys)
    assert code == 2 and "no agent run in the golden traces" in err
