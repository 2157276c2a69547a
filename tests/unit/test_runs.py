"""Runs: agent subtrees (nested), the implicit root run, and each run's final answer."""

from __future__ import annotations

from typing import Any

from _scenarios import (
    AGENT,
    ANSWER,
    CHAT,
    CITY_ARGS,
    CLIENT,
    DRAFT,
    HTTP_ROOT,
    OI_AGENT,
    OI_ANSWER,
    PLAN,
    PLANNER,
    QUESTION,
    REVIEW,
    SERVER,
    TL_ANSWER,
    TL_WORKFLOW,
    TOOL,
    WEATHER,
    WRITER,
    _agent_attrs,
    _chat_attrs,
    _tool_attrs,
    genai_agent,
    http_service,
    multi_agent,
    openinference_langchain,
    text_message,
    tool_call_message,
    tool_response_message,
    traceloop_decorators,
)
from _sdk import (
    Captured,
    Recorder,
    capture,
    dumps,
    normalize_all,
    outline,
    run_outline,
    trajectory,
)

from tracehound.steps import Trajectory, build_trajectory

PLANNER_RUN = "invoke_agent planner"
RESEARCHER = "invoke_agent researcher"
CHECKER = "invoke_agent checker"


def answer(text: str) -> list[dict[str, Any]]:
    return [{**text_message("assistant", text), "finish_reason": "stop"}]


def nested_agents(rec: Recorder) -> None:
    """planner → (chat; dispatch [not GenAI] → researcher → (execute_tool; checker → chat);
    chat). The researcher's parent is found through the non-GenAI `dispatch` span."""
    with rec.span(PLANNER_RUN, _agent_attrs("planner")):
        with rec.span(
            CHAT, _chat_attrs([text_message("user", QUESTION)], answer("On it.")), kind=CLIENT
        ):
            pass
        with rec.span("dispatch"), rec.span(RESEARCHER, _agent_attrs("researcher")):
            with rec.span(TOOL, _tool_attrs("weather", "call_r1", CITY_ARGS, WEATHER)):
                pass
            with (
                rec.span(CHECKER, _agent_attrs("checker")),
                rec.span(
                    CHAT,
                    _chat_attrs([text_message("user", "Check it.")], answer("Checked.")),
                    kind=CLIENT,
                ),
            ):
                pass
        with rec.span(CHAT, _chat_attrs([], answer(ANSWER)), kind=CLIENT):
            pass


def build(scenario: Any) -> tuple[Captured, Trajectory]:
    captured = capture(scenario)
    return captured, trajectory(captured)


def kinds(traj: Trajectory, run_id: str, *, nested: bool) -> list[tuple[str, str | None]]:
    return [(s.kind, s.text or s.tool) for s in traj.run_steps(run_id, nested=nested)]


def test_nested_runs_depth_parent_and_steps() -> None:
    captured, traj = build(nested_agents)
    assert run_outline(traj, captured) == [
        (PLANNER_RUN, "planner", None, 0, False, None),
        (RESEARCHER, "researcher", PLANNER_RUN, 1, False, None),
        (CHECKER, "checker", RESEARCHER, 2, False, None),
    ]
    planner, researcher, checker = (captured.span_id(n) for n in (PLANNER_RUN, RESEARCHER, CHECKER))
    for run in traj.runs:
        span = captured.span(captured.labels()[run.run_id])
        assert (run.span_id, run.start_ns, run.end_ns) == (
            run.run_id,
            span.start_time,
            span.end_time,
        )
        assert run.service_name == "unit-test"

    assert kinds(traj, planner, nested=False) == [
        ("agent", None),
        ("user", QUESTION),
        ("llm", None),
        ("assistant", "On it."),
        ("llm", None),
        ("assistant", ANSWER),
    ]
    assert kinds(traj, researcher, nested=False) == [
        ("agent", None),
        ("tool_call", "weather"),
        ("tool_result", WEATHER),
    ]
    assert kinds(traj, checker, nested=False) == [
        ("agent", None),
        ("user", "Check it."),
        ("llm", None),
        ("assistant", "Checked."),
    ]
    # nested: the run and everything below it, in trajectory order
    assert kinds(traj, researcher, nested=True) == [
        ("agent", None),
        ("tool_call", "weather"),
        ("tool_result", WEATHER),
        *kinds(traj, checker, nested=False),
    ]
    assert traj.run_steps(planner, nested=True) == list(traj.steps)
    assert traj.run_steps(checker, nested=True) == traj.run_steps(checker)
    # every step belongs to exactly one run
    assert sum(len(traj.run_steps(r.run_id)) for r in traj.runs) == len(traj.steps)


def test_runs_are_listed_parents_first() -> None:
    captured, traj = build(multi_agent)
    depth = {r.run_id: r.depth for r in traj.runs}
    for run in traj.runs:
        if run.parent_run_id is not None:
            assert depth[run.parent_run_id] == run.depth - 1
    ids = [r.run_id for r in traj.runs]
    assert all(
        ids.index(r.parent_run_id) < ids.index(r.run_id) for r in traj.runs if r.parent_run_id
    )
    assert [run_outline(traj, captured)[i][0] for i in range(3)] == [
        PLANNER,
        WRITER,
        "invoke_agent critic",
    ]


def router_then_agent(rec: Recorder) -> None:
    """A web handler routes with one chat call (outside every agent), then runs an agent."""
    with rec.span(HTTP_ROOT, {"http.request.method": "POST", "http.route": "/ask"}, kind=SERVER):
        with rec.span(
            CHAT,
            _chat_attrs([text_message("user", QUESTION)], answer("weather_agent")),
            kind=CLIENT,
        ):
            pass
        with (
            rec.span(AGENT, _agent_attrs("weather_agent")),
            rec.span(
                CHAT, _chat_attrs([text_message("user", QUESTION)], answer(ANSWER)), kind=CLIENT
            ),
        ):
            pass


def test_steps_outside_every_agent_go_to_an_implicit_root_run() -> None:
    captured, traj = build(router_then_agent)
    root = captured.span_id(HTTP_ROOT)
    agent = captured.span_id(AGENT)
    assert run_outline(traj, captured) == [
        (HTTP_ROOT, HTTP_ROOT, None, 0, True, None),
        (AGENT, "weather_agent", HTTP_ROOT, 1, False, None),
    ]
    assert traj.runs[0].run_id == root  # the trace's root, though it is not a GenAI span
    chat1, chat2 = f"{CHAT}#1", f"{CHAT}#2"
    assert [(s["kind"], s["span_id"], s["run_id"]) for s in outline(traj, captured)] == [
        ("user", chat1, HTTP_ROOT),
        ("llm", chat1, HTTP_ROOT),
        ("assistant", chat1, HTTP_ROOT),
        ("agent", AGENT, AGENT),
        # the same question asked again inside the agent is history already shown: not repeated
        ("llm", chat2, AGENT),
        ("assistant", chat2, AGENT),
    ]
    assert [s.kind for s in traj.run_steps(root)] == ["user", "llm", "assistant"]
    assert traj.run_steps(root, nested=True) == list(traj.steps)
    # the implicit run is the whole trace: its answer is the trace's last one
    assert traj.final_answer() == ANSWER
    assert traj.final_answer(root) == ANSWER
    assert traj.final_answer(agent) == ANSWER


def test_trace_without_agent_has_only_the_implicit_run() -> None:
    captured, traj = build(http_service)
    assert run_outline(traj, captured) == [(HTTP_ROOT, HTTP_ROOT, None, 0, True, None)]
    assert {s.run_id for s in traj.steps} == {captured.span_id(HTTP_ROOT)}


def test_implicit_run_name_falls_back_to_the_top_genai_span_without_names() -> None:
    """Without `names`, the root (not GenAI) has no known name; the top GenAI span names it."""
    captured = capture(http_service)
    views = captured.span_views()
    spans = [n for n in normalize_all(views).values() if n is not None]
    parents = {v.span_id: v.parent_span_id for v in views}
    traj = build_trajectory(captured.trace_id, spans, parents)
    (run,) = traj.runs
    assert (run.run_id, run.agent_name, run.implicit) == (captured.span_id(HTTP_ROOT), CHAT, True)


# --- final answers -------------------------------------------------------------------------------


def pydantic_structured_output(rec: Recorder) -> None:
    """pydantic-ai 2.x: `final_result` on the agent span differs from the last assistant text."""
    final = dumps({"city": "Paris", "sky": "sunny"})
    history = [text_message("user", QUESTION)]
    with (
        rec.span(
            "invoke_agent weather_agent",
            {**_agent_attrs("weather_agent"), "agent_name": "weather_agent", "final_result": final},
            scope="pydantic-ai",
        ),
        rec.span(
            "chat scripted-model",
            _chat_attrs(history, answer("Let me format that.")),
            scope="pydantic-ai",
            kind=CLIENT,
        ),
    ):
        pass


def test_final_answer_is_the_declared_pydantic_final_result() -> None:
    _captured, traj = build(pydantic_structured_output)
    assert traj.conventions == ("pydantic_ai",)
    assert traj.runs[0].declared_output == '{"city": "Paris", "sky": "sunny"}'
    assert traj.final_answer() == '{"city": "Paris", "sky": "sunny"}'
    assert [s.text for s in traj.steps if s.kind == "assistant"] == ["Let me format that."]


def openinference_declared(rec: Recorder) -> None:
    with (
        rec.span(
            OI_AGENT,
            {"openinference.span.kind": "AGENT", "input.value": QUESTION, "output.value": "42"},
        ),
        rec.span(
            "llm",
            {
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "The answer is 42.",
            },
        ),
    ):
        pass


def test_final_answer_is_the_openinference_agent_output() -> None:
    _captured, traj = build(openinference_declared)
    assert traj.final_answer() == "42"
    assert [s.text for s in traj.steps if s.kind == "assistant"] == ["The answer is 42."]
    _, langchain = build(openinference_langchain)
    assert langchain.final_answer() == OI_ANSWER == langchain.runs[0].declared_output


def test_final_answer_without_declared_output_is_the_last_assistant_text() -> None:
    captured, traj = build(genai_agent)
    assert traj.runs[0].declared_output is None
    assert traj.final_answer() == ANSWER
    assert traj.final_answer(captured.span_id(AGENT)) == ANSWER


def test_final_answer_of_each_nested_run() -> None:
    captured, traj = build(multi_agent)
    assert traj.final_answer() == PLAN
    assert traj.final_answer(captured.span_id(PLANNER)) == PLAN
    assert traj.final_answer(captured.span_id(WRITER)) == DRAFT
    assert traj.final_answer(captured.span_id("invoke_agent critic")) == REVIEW


def test_final_answer_of_a_run_without_text_comes_from_the_runs_inside_it() -> None:
    captured, traj = build(traceloop_decorators)
    workflow = captured.span_id(TL_WORKFLOW)
    assert traj.runs[0].run_id == workflow and traj.runs[0].implicit
    assert not [s for s in traj.run_steps(workflow) if s.kind == "assistant"]
    assert traj.final_answer() == TL_ANSWER

    def delegating(rec: Recorder) -> None:
        with (
            rec.span("invoke_agent boss", _agent_attrs("boss")),
            rec.span(WRITER, _agent_attrs("writer")),
            rec.span(CHAT, _chat_attrs([], answer(DRAFT)), kind=CLIENT),
        ):
            pass

    captured, traj = build(delegating)
    assert traj.final_answer() == DRAFT
    assert traj.final_answer(captured.span_id(WRITER)) == DRAFT


def test_final_answer_with_no_text_at_all_is_none() -> None:
    def scenario(rec: Recorder) -> None:
        with (
            rec.span("invoke_agent quiet", _agent_attrs("quiet")),
            rec.span(TOOL, _tool_attrs("weather", "call_q", CITY_ARGS, WEATHER)),
        ):
            pass

    _, traj = build(scenario)
    assert traj.final_answer() is None


def test_agent_history_fills_only_what_the_child_spans_did_not_show() -> None:
    """`pydantic_ai.all_messages` on the agent span, with only the first chat span sampled:
    the tool result and final answer come from the history, at the agent span's end."""
    messages = [
        text_message("user", QUESTION),
        tool_call_message("call_1", "weather", CITY_ARGS),
        tool_response_message("call_1", WEATHER, key="result", role="user"),
        text_message("assistant", ANSWER),
    ]

    def scenario(rec: Recorder) -> None:
        with (
            rec.span(
                AGENT,
                {**_agent_attrs("weather_agent"), "pydantic_ai.all_messages": dumps(messages)},
                scope="pydantic-ai",
            ),
            rec.span(
                "chat m",
                _chat_attrs(messages[:1], [{**messages[1], "finish_reason": "tool_call"}]),
                scope="pydantic-ai",
                kind=CLIENT,
            ),
        ):
            pass

    captured, traj = build(scenario)
    assert [(s["kind"], s["span_id"]) for s in outline(traj, captured)] == [
        ("agent", AGENT),
        ("user", "chat m"),
        ("llm", "chat m"),
        ("tool_call", "chat m"),
        ("tool_result", AGENT),
        ("assistant", AGENT),
    ]
    agent_end = captured.span(AGENT).end_time
    assert [s.end_ns for s in traj.steps[-2:]] == [agent_end, agent_end]
    assert traj.steps[-2].call_id == "call_1" and traj.steps[-2].text == WEATHER
    assert traj.final_answer() == ANSWER
