"""Convention shapes without a real capture, tested from their documented description.

Every trace here is emitted with the real OTel SDK (see `_sdk.py`) using the attribute keys of
conventions.md, viewed as a SpanProcessor sees it (`SpanView.from_readable`, `LogView.from_sdk`),
normalized and built into a trajectory; the tests spell out the exact steps.
"""

from __future__ import annotations

from typing import Any

import pytest
from _scenarios import (
    AGENT,
    ALPHA,
    ANSWER,
    BETA,
    CANON_CITY,
    CHAT,
    CRITIC,
    DELEGATE,
    DETAILS_CHAT,
    DOCS,
    DONE,
    DRAFT,
    FANOUT,
    HELLO,
    HTTP_OUT,
    HTTP_ROOT,
    LEGACY_CHAT,
    OI_AGENT,
    OI_ANSWER,
    OI_LLM,
    OI_QUERY,
    OI_QUESTION,
    OI_RESULT,
    OI_RETRIEVER,
    OI_SYSTEM,
    OI_TOOL,
    PLAN,
    PLANNER,
    PYDANTIC_1X_CHAT,
    QUESTION,
    REASONING,
    RETRIEVAL,
    REVIEW,
    SEARCH_TOOL,
    SYSTEM,
    THINKING,
    TL_AGENT,
    TL_ANSWER,
    TL_CHAT,
    TL_DOC_1,
    TL_DOC_2,
    TL_FORECAST,
    TL_TOOL,
    TL_VECTOR,
    TL_WORKFLOW,
    TOOL,
    TRACELOOP_CHAT,
    V_CALL,
    V_TOOL,
    V_TOP,
    WEATHER,
    WRITER,
    details_event,
    genai_agent,
    http_service,
    legacy_openai,
    multi_agent,
    openinference_langchain,
    parallel_fanout,
    pydantic_1x_logs,
    repeated_history,
    traceloop_decorators,
    traceloop_events,
    vercel_ai,
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
from opentelemetry.trace import SpanKind

from tracehound.conventions import normalize
from tracehound.spans import SpanView
from tracehound.steps import Trajectory


def S(kind: str, span: str, run: str, **fields: Any) -> dict[str, Any]:
    """An expected step, in the shape of `_sdk.outline`: ids as span labels, no times."""
    return {"kind": kind, "span_id": span, "run_id": run, **fields}


def build(scenario: Any) -> tuple[Captured, Trajectory]:
    captured = capture(scenario)
    return captured, trajectory(captured)


def normalized_by_label(captured: Captured) -> dict[str, Any]:
    labels = captured.labels()
    views = captured.span_views()
    return {labels[sid]: n for sid, n in normalize_all(views, captured.log_views()).items()}


# --- OTel GenAI legacy: per-message log events ------------------------------------------------


def legacy_outline(chat: str, run: str, *, tokens: bool, finish_1: str) -> list[dict[str, Any]]:
    t1 = {"input_tokens": 57, "output_tokens": 18} if tokens else {}
    t2 = {"input_tokens": 131, "output_tokens": 42} if tokens else {}
    return [
        S("system", f"{chat}#1", run, text=SYSTEM),
        S("user", f"{chat}#1", run, text=QUESTION),
        S("llm", f"{chat}#1", run, model="gpt-4o-mini", finish_reason=finish_1, **t1),
        S("tool_call", f"{chat}#1", run, tool="weather", call_id="call_1", arguments=CANON_CITY),
        # the tool result comes from the second call's gen_ai.tool.message, paired by id
        S("tool_result", f"{chat}#2", run, tool="weather", call_id="call_1", text=WEATHER),
        S("llm", f"{chat}#2", run, model="gpt-4o-mini", finish_reason="stop", **t2),
        S("assistant", f"{chat}#2", run, text=ANSWER, finish_reason="stop"),
    ]


@pytest.mark.parametrize("name_in_attribute", [False, True], ids=["event_name", "event.name attr"])
@pytest.mark.parametrize("tool_calls_in_message", [False, True], ids=["beside", "inside"])
def test_legacy_per_message_events(name_in_attribute: bool, tool_calls_in_message: bool) -> None:
    def scenario(rec: Recorder) -> None:
        legacy_openai(
            rec, name_in_attribute=name_in_attribute, tool_calls_in_message=tool_calls_in_message
        )

    captured, traj = build(scenario)
    # the SDK put the event name where the mode says, and nowhere else
    records = [r.log_record for r in captured.logs]
    assert len(records) == 8
    if name_in_attribute:
        assert all(not r.event_name for r in records)
        assert {r.attributes["event.name"] for r in records} >= {"gen_ai.tool.message"}
    else:
        assert all(r.event_name and "event.name" not in r.attributes for r in records)
    chat_ids = captured.span_ids(LEGACY_CHAT)
    assert {format(r.span_id, "016x") for r in records} == set(chat_ids)

    assert outline(traj, captured) == legacy_outline(
        LEGACY_CHAT, "agent_loop", tokens=True, finish_1="tool_calls"
    )
    assert traj.conventions == ("otel_genai_legacy",)
    assert run_outline(traj, captured) == [("agent_loop", "agent_loop", None, 0, True, None)]
    chat = normalized_by_label(captured)[f"{LEGACY_CHAT}#1"]
    assert (chat.provider, chat.input_tokens, chat.output_tokens) == ("openai", 57, 18)


def test_gen_ai_system_alone_is_the_legacy_convention() -> None:
    def scenario(rec: Recorder) -> None:
        base = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}
        with rec.span("chat legacy", {**base, "gen_ai.system": "openai"}):
            pass
        with rec.span("chat current", {**base, "gen_ai.provider.name": "openai"}):
            pass
        both = {**base, "gen_ai.provider.name": "openai", "gen_ai.system": "openai"}
        with rec.span("chat both", both):
            pass

    captured = capture(scenario)
    found = normalized_by_label(captured)
    assert {k: (v.convention, v.operation, v.provider) for k, v in found.items()} == {
        "chat legacy": ("otel_genai_legacy", "llm", "openai"),
        "chat current": ("otel_genai", "llm", "openai"),
        "chat both": ("otel_genai", "llm", "openai"),
    }


def test_raw_client_tool_message_without_id_still_pairs_with_the_call() -> None:
    """Traceloop events mode: `gen_ai.tool.message` has no `id`, the choice's `tool_calls` sit
    beside an empty `message`; the result must still be the result of call_1."""
    captured, traj = build(traceloop_events)
    tool_bodies = [
        r.log_record.body for r in captured.logs if r.log_record.event_name == "gen_ai.tool.message"
    ]
    assert tool_bodies == [{"content": WEATHER}]  # really no id
    expected = legacy_outline(TRACELOOP_CHAT, "agent_loop", tokens=False, finish_1="tool_call")
    assert outline(traj, captured) == expected
    assert traj.conventions == ("traceloop",)


def test_pydantic_ai_1x_logs_mode() -> None:
    """Event names only in `event.name`; `running tools` / `running tool` spans with
    `tool_arguments` / `tool_response`; thinking inside the choice's content list."""
    captured, traj = build(pydantic_1x_logs)
    assert all(not r.log_record.event_name for r in captured.logs)
    run = "agent run"
    chat1, chat2 = f"{PYDANTIC_1X_CHAT}#1", f"{PYDANTIC_1X_CHAT}#2"
    model = "scripted-model"
    assert outline(traj, captured) == [
        S("agent", run, run, agent="weather_agent"),
        S("system", chat1, run, text=SYSTEM),
        S("user", chat1, run, text=QUESTION),
        S("llm", chat1, run, model=model, input_tokens=40, output_tokens=8),
        S(
            "tool_call",
            chat1,
            run,
            tool="weather",
            call_id="call_1",
            arguments=CANON_CITY,
            exec_span_id="running tool",
        ),
        S("tool_result", "running tool", run, tool="weather", call_id="call_1", text=WEATHER),
        S("llm", chat2, run, model=model, input_tokens=50, output_tokens=12),
        S("reasoning", chat2, run, text=THINKING),
        S("assistant", chat2, run, text=ANSWER),
    ]
    assert traj.conventions == ("pydantic_ai",)
    assert run_outline(traj, captured) == [(run, "weather_agent", None, 0, False, ANSWER)]
    assert normalized_by_label(captured)["running tools"].operation == "other"


# --- OTel GenAI current -----------------------------------------------------------------------


def test_inference_details_event_with_structured_messages() -> None:
    captured, traj = build(details_event)
    chat = captured.span(DETAILS_CHAT)
    assert not {"gen_ai.input.messages", "gen_ai.output.messages"} & set(chat.attributes or {})
    (record,) = [r.log_record for r in captured.logs]
    assert record.body is None
    assert not isinstance(record.attributes["gen_ai.input.messages"], str)  # structured

    run = "agent_loop"
    assert outline(traj, captured) == [
        S("system", DETAILS_CHAT, run, text=SYSTEM),
        S("user", DETAILS_CHAT, run, text=QUESTION),
        S(
            "llm",
            DETAILS_CHAT,
            run,
            model="gpt-4o-mini",
            input_tokens=25,
            output_tokens=11,
            finish_reason="stop",
        ),
        S("assistant", DETAILS_CHAT, run, text=ANSWER, finish_reason="stop"),
    ]
    assert traj.conventions == ("otel_genai",)
    assert traj.problems == ()


def agent_outline(*, tool_span: bool) -> list[dict[str, Any]]:
    run = AGENT
    call_extra = {"exec_span_id": TOOL} if tool_span else {}
    result_span = TOOL if tool_span else f"{CHAT}#2"
    return [
        S("agent", AGENT, run, agent="weather_agent"),
        S(
            "retrieval",
            RETRIEVAL,
            run,
            source="kb",
            text="Paris weather",
            documents=[dict(d) for d in DOCS],
        ),
        S("system", f"{CHAT}#1", run, text=SYSTEM),
        S("user", f"{CHAT}#1", run, text=QUESTION),
        S("llm", f"{CHAT}#1", run, model="gpt-4o", finish_reason="tool_call"),
        S(
            "tool_call",
            f"{CHAT}#1",
            run,
            tool="weather",
            call_id="call_w1",
            arguments=CANON_CITY,
            **call_extra,
        ),
        S("tool_result", result_span, run, tool="weather", call_id="call_w1", text=WEATHER),
        S("llm", f"{CHAT}#2", run, model="gpt-4o", finish_reason="stop"),
        S("reasoning", f"{CHAT}#2", run, text=REASONING, finish_reason="stop"),
        S("assistant", f"{CHAT}#2", run, text=ANSWER, finish_reason="stop"),
    ]


def test_current_agent_with_retrieval_and_execute_tool() -> None:
    captured, traj = build(genai_agent)
    assert outline(traj, captured) == agent_outline(tool_span=True)
    assert traj.conventions == ("otel_genai",)
    assert run_outline(traj, captured) == [(AGENT, "weather_agent", None, 0, False, None)]
    tool = normalized_by_label(captured)[TOOL]
    assert (tool.operation, tool.tool_name, tool.tool_call_id) == ("tool", "weather", "call_w1")
    retrieval = normalized_by_label(captured)[RETRIEVAL]
    assert (retrieval.operation, retrieval.source, retrieval.query) == (
        "retrieval",
        "kb",
        "Paris weather",
    )


@pytest.mark.parametrize("tool_span", [True, False], ids=["execute_tool", "raw client"])
@pytest.mark.parametrize("response_key", ["response", "result"])
@pytest.mark.parametrize("tool_role", ["tool", "user"])
@pytest.mark.parametrize("reasoning_type", ["reasoning", "thinking"])
def test_current_message_variants(
    tool_span: bool, response_key: str, tool_role: str, reasoning_type: str
) -> None:
    """Part D 3/3b: `response` vs `result`, role `tool` vs `user`, `reasoning` vs `thinking` all
    give the same steps, with or without an execute_tool span."""

    def scenario(rec: Recorder) -> None:
        genai_agent(
            rec,
            tool_span=tool_span,
            response_key=response_key,
            tool_role=tool_role,
            reasoning_type=reasoning_type,
        )

    captured, traj = build(scenario)
    assert outline(traj, captured) == agent_outline(tool_span=tool_span)


def test_multi_agent_and_agent_invoked_as_a_tool() -> None:
    captured, traj = build(multi_agent)
    chats = [f"{CHAT}#{i}" for i in range(1, 5)]
    assert outline(traj, captured) == [
        S("agent", PLANNER, PLANNER, agent="planner"),
        S("user", chats[0], PLANNER, text="Plan two days in Paris."),
        S("llm", chats[0], PLANNER, model="gpt-4o", finish_reason="tool_call"),
        S(
            "tool_call",
            chats[0],
            PLANNER,
            tool="writer",
            call_id="call_d1",
            arguments='{"topic":"two days in Paris"}',
            exec_span_id=DELEGATE,
        ),
        # the agent behind the tool runs inside the execute_tool span, as its own run
        S("agent", WRITER, WRITER, agent="writer"),
        S("user", chats[1], WRITER, text="Write: two days in Paris"),
        S("llm", chats[1], WRITER, model="gpt-4o", finish_reason="stop"),
        S("assistant", chats[1], WRITER, text=DRAFT, finish_reason="stop"),
        S("tool_result", DELEGATE, PLANNER, tool="writer", call_id="call_d1", text=DRAFT),
        S("agent", CRITIC, CRITIC, agent="critic"),
        S("user", chats[2], CRITIC, text=f"Review: {DRAFT}"),
        S("llm", chats[2], CRITIC, model="gpt-4o", finish_reason="stop"),
        S("assistant", chats[2], CRITIC, text=REVIEW, finish_reason="stop"),
        # the final call's history (ask, tool call, tool response) is not repeated
        S("llm", chats[3], PLANNER, model="gpt-4o", finish_reason="stop"),
        S("assistant", chats[3], PLANNER, text=PLAN, finish_reason="stop"),
    ]
    assert run_outline(traj, captured) == [
        (PLANNER, "planner", None, 0, False, None),
        (WRITER, "writer", PLANNER, 1, False, None),
        (CRITIC, "critic", PLANNER, 1, False, None),
    ]
    assert traj.final_answer() == PLAN
    assert traj.final_answer(captured.span_id(WRITER)) == DRAFT


# --- OpenInference ------------------------------------------------------------------------------


def test_openinference_langchain_agent() -> None:
    """B7: the TOOL span has no `tool.id` and a bare query as `input.value`; the call is the
    LLM output's tool call, the result the tool span's; neither repeats from the next input."""
    captured, traj = build(openinference_langchain)
    tool = captured.span(OI_TOOL)
    assert "tool.id" not in (tool.attributes or {})
    assert (tool.attributes or {})["input.value"] == OI_QUERY

    run = OI_AGENT
    llm1, llm2 = f"{OI_LLM}#1", f"{OI_LLM}#2"
    steps = outline(traj, captured)
    assert steps == [
        S("agent", OI_AGENT, run, agent="research_agent"),
        S(
            "retrieval",
            OI_RETRIEVER,
            run,
            source=OI_RETRIEVER,
            text=OI_QUERY,
            documents=[
                {"id": "doc-1", "content": "OpenTelemetry is a CNCF project.", "score": 0.87},
                {"content": "Spans form traces."},
            ],
        ),
        S("system", llm1, run, text=OI_SYSTEM),
        S("user", llm1, run, text=OI_QUESTION),
        S("llm", llm1, run),
        S(
            "tool_call",
            llm1,
            run,
            tool="search",
            call_id="call_s1",
            arguments='{"query":"OpenTelemetry"}',
            exec_span_id=OI_TOOL,
        ),
        S("tool_result", OI_TOOL, run, tool="search", call_id="call_s1", text=OI_RESULT),
        S("llm", llm2, run),
        S("assistant", llm2, run, text=OI_ANSWER),
    ]
    assert [s["kind"] for s in steps].count("tool_call") == 1
    assert [s["kind"] for s in steps].count("tool_result") == 1
    assert traj.conventions == ("openinference",)
    assert run_outline(traj, captured) == [(run, "research_agent", None, 0, False, OI_ANSWER)]
    assert normalized_by_label(captured)["RunnableSequence"].operation == "workflow"


def test_openinference_tool_span_with_id_and_json_input() -> None:
    """With `tool.id` the tool span is keyed by it; JSON arguments are canonicalized."""

    def scenario(rec: Recorder) -> None:
        with rec.span(
            "lookup",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "lookup",
                "tool.id": "call_x",
                "input.value": '{"b": 2, "a": 1}',
                "output.value": "found",
            },
        ):
            pass

    captured, traj = build(scenario)
    assert outline(traj, captured) == [
        S(
            "tool_call",
            "lookup",
            "lookup",
            tool="lookup",
            call_id="call_x",
            arguments='{"a":1,"b":2}',
            exec_span_id="lookup",
        ),
        S("tool_result", "lookup", "lookup", tool="lookup", call_id="call_x", text="found"),
    ]


# --- OpenLLMetry / Traceloop --------------------------------------------------------------------


def test_traceloop_decorators_legacy_prompts_and_vector_db() -> None:
    captured, traj = build(traceloop_decorators)
    run = TL_AGENT
    chat1, chat2 = f"{TL_CHAT}#1", f"{TL_CHAT}#2"
    assert outline(traj, captured) == [
        S("agent", TL_AGENT, run, agent="planner"),
        S(
            "retrieval",
            TL_VECTOR,
            run,
            source=TL_VECTOR,
            documents=[
                {"id": "w1", "content": TL_DOC_1, "score": 0.83},
                {"id": "w2", "content": TL_DOC_2, "score": 0.61},
            ],
        ),
        S("system", chat1, run, text=SYSTEM),
        S("user", chat1, run, text=QUESTION),
        S(
            "llm",
            chat1,
            run,
            model="gpt-4o",
            input_tokens=64,
            output_tokens=15,
            finish_reason="tool_calls",
        ),
        S(
            "tool_call",
            chat1,
            run,
            tool="weather",
            call_id="call_t1",
            arguments=CANON_CITY,
            exec_span_id=TL_TOOL,
        ),
        # entity.output is the JSON of the return value: the result is the string itself
        S("tool_result", TL_TOOL, run, tool="weather", call_id="call_t1", text=TL_FORECAST),
        S(
            "llm",
            chat2,
            run,
            model="gpt-4o",
            input_tokens=101,
            output_tokens=12,
            finish_reason="stop",
        ),
        S("assistant", chat2, run, text=TL_ANSWER, finish_reason="stop"),
    ]
    assert traj.conventions == ("traceloop",)
    # the workflow span is outside every agent: an implicit root run holds the agent run
    assert run_outline(traj, captured) == [
        (TL_WORKFLOW, TL_WORKFLOW, None, 0, True, None),
        (TL_AGENT, "planner", TL_WORKFLOW, 1, False, TL_ANSWER),
    ]
    found = normalized_by_label(captured)
    assert {k: v.operation for k, v in found.items() if v is not None} == {
        TL_WORKFLOW: "workflow",
        TL_AGENT: "agent",
        TL_VECTOR: "retrieval",
        chat1: "llm",
        TL_TOOL: "tool",
        chat2: "llm",
    }
    assert found[TL_TOOL].tool_arguments == {"city": "Paris"}  # kwargs of {"args", "kwargs"}


def test_database_span_without_query_results_is_not_genai() -> None:
    def scenario(rec: Recorder) -> None:
        with rec.span("SELECT orders", {"db.system": "postgresql", "db.operation": "SELECT"}):
            pass

    captured = capture(scenario)
    (view,) = captured.span_views()
    assert normalize(view) is None


# --- Vercel AI SDK ------------------------------------------------------------------------------


def test_vercel_ai_generate_text_with_tool() -> None:
    captured, traj = build(vercel_ai)
    run = V_TOP
    call1, call2 = f"{V_CALL}#1", f"{V_CALL}#2"
    assert outline(traj, captured) == [
        S("agent", V_TOP, run, agent="weather-bot"),
        S("system", call1, run, text=SYSTEM),
        S("user", call1, run, text=QUESTION),
        S(
            "llm",
            call1,
            run,
            model="gpt-4o",
            input_tokens=48,
            output_tokens=14,
            finish_reason="tool-calls",
        ),
        S(
            "tool_call",
            call1,
            run,
            tool="weather",
            call_id="call_v1",
            arguments=CANON_CITY,
            exec_span_id=V_TOOL,
        ),
        S(
            "tool_result",
            V_TOOL,
            run,
            tool="weather",
            call_id="call_v1",
            text='{"celsius": 21, "sky": "sunny"}',
        ),
        S(
            "llm",
            call2,
            run,
            model="gpt-4o",
            input_tokens=90,
            output_tokens=11,
            finish_reason="stop",
        ),
        S("assistant", call2, run, text=ANSWER, finish_reason="stop"),
    ]
    assert traj.conventions == ("vercel_ai",)
    assert run_outline(traj, captured) == [(V_TOP, "weather-bot", None, 0, False, ANSWER)]
    top = normalized_by_label(captured)[V_TOP]
    assert top.system_instructions == [SYSTEM]


def test_vercel_tool_result_reads_the_same_with_or_without_the_tool_span() -> None:
    """`ai.toolCall.result` is `JSON.stringify(result)`; a string result must not keep quotes."""

    def scenario(rec: Recorder, *, tool_span: bool) -> None:
        with rec.span(V_TOP, {"ai.operationId": V_TOP, "ai.telemetry.functionId": "bot"}):
            calls = [{"toolCallId": "c1", "toolName": "echo", "args": '{"x": 1}'}]
            with rec.span(
                V_CALL, {"ai.operationId": V_CALL, "ai.response.toolCalls": dumps(calls)}
            ):
                pass
            if tool_span:
                attrs = {
                    "ai.operationId": "ai.toolCall",
                    "ai.toolCall.name": "echo",
                    "ai.toolCall.id": "c1",
                    "ai.toolCall.args": '{"x": 1}',
                    "ai.toolCall.result": dumps("one"),
                }
                with rec.span(V_TOOL, attrs):
                    pass
            result = {
                "type": "tool-result",
                "toolCallId": "c1",
                "toolName": "echo",
                "result": "one",
            }
            messages = [{"role": "tool", "content": [result]}]
            with rec.span(
                V_CALL, {"ai.operationId": V_CALL, "ai.prompt.messages": dumps(messages)}
            ):
                pass

    results = []
    for tool_span in (True, False):
        _captured, traj = build(lambda rec, t=tool_span: scenario(rec, tool_span=t))
        results.append([(s.kind, s.call_id, s.text) for s in traj.steps if s.kind == "tool_result"])
    assert results == [[("tool_result", "c1", "one")]] * 2


# --- dedupe ---------------------------------------------------------------------------------------


def test_resent_history_gives_each_message_once_but_keeps_real_repeats() -> None:
    captured, traj = build(repeated_history)
    run = AGENT
    chats = [f"{CHAT}#{i}" for i in range(1, 4)]
    llm = {"model": "gpt-4o", "finish_reason": "stop"}
    assert outline(traj, captured) == [
        S("agent", AGENT, run, agent="weather_agent"),
        S("system", chats[0], run, text=SYSTEM),
        S("user", chats[0], run, text="hi"),
        S("llm", chats[0], run, **llm),
        S("assistant", chats[0], run, text=HELLO, finish_reason="stop"),
        # "hi" said again: the second occurrence in call 2's history is a new user step
        S("user", chats[1], run, text="hi"),
        S("llm", chats[1], run, **llm),
        # the model repeating itself is a new output, and call 3's history shows both
        S("assistant", chats[1], run, text=HELLO, finish_reason="stop"),
        S("user", chats[2], run, text="bye"),
        S("llm", chats[2], run, **llm),
        S("assistant", chats[2], run, text=DONE, finish_reason="stop"),
    ]


def test_tool_result_on_execute_tool_span_and_in_next_input_is_one_step() -> None:
    captured, traj = build(genai_agent)
    results = [s for s in traj.steps if s.kind == "tool_result"]
    assert [(s.call_id, s.text, s.span_id) for s in results] == [
        ("call_w1", WEATHER, captured.span_id(TOOL))
    ]
    calls = [s for s in traj.steps if s.kind == "tool_call"]
    assert [(s.call_id, s.span_id, s.exec_span_id) for s in calls] == [
        ("call_w1", captured.span_ids(CHAT)[0], captured.span_id(TOOL))
    ]


def test_parallel_fan_out_is_ordered_by_time() -> None:
    captured, traj = build(parallel_fanout)
    tool_a, tool_b = captured.span_ids(SEARCH_TOOL)  # by start: call_a's span started first
    spans = {format(s.context.span_id, "016x"): s for s in captured.spans}
    assert spans[tool_a].start_time < spans[tool_b].start_time < spans[tool_b].end_time
    assert spans[tool_b].end_time < spans[tool_a].end_time  # overlapping; a ends last

    run = FANOUT
    chat1, chat2 = f"{CHAT}#1", f"{CHAT}#2"
    a, b = f"{SEARCH_TOOL}#1", f"{SEARCH_TOOL}#2"
    assert outline(traj, captured) == [
        S("agent", FANOUT, run, agent="fanout"),
        S("user", chat1, run, text="Explain alpha and beta."),
        S("llm", chat1, run, model="gpt-4o", finish_reason="tool_call"),
        S(
            "tool_call",
            chat1,
            run,
            tool="search",
            call_id="call_a",
            arguments='{"q":"alpha"}',
            exec_span_id=a,
        ),
        S(
            "tool_call",
            chat1,
            run,
            tool="search",
            call_id="call_b",
            arguments='{"q":"beta"}',
            exec_span_id=b,
        ),
        # results in the order the executions ended
        S("tool_result", b, run, tool="search", call_id="call_b", text=BETA),
        S("tool_result", a, run, tool="search", call_id="call_a", text=ALPHA),
        S("llm", chat2, run, model="gpt-4o", finish_reason="stop"),
        S("assistant", chat2, run, text=DONE, finish_reason="stop"),
    ]
    results = [s for s in traj.steps if s.kind == "tool_result"]
    assert [s.end_ns for s in results] == [spans[tool_b].end_time, spans[tool_a].end_time]
    times = [s.start_ns if s.kind in ("llm", "agent") else s.end_ns for s in traj.steps]
    assert times[1:] == sorted(times[1:])


def test_parallel_fan_out_with_identical_times_is_ordered_by_span_id() -> None:
    def scenario(rec: Recorder) -> None:
        parallel_fanout(rec, same_times=True)

    captured, traj = build(scenario)
    tool_ids = captured.span_ids(SEARCH_TOOL)
    results = [s for s in traj.steps if s.kind == "tool_result"]
    assert len({s.end_ns for s in results}) == 1
    assert [s.span_id for s in results] == sorted(tool_ids)
    reversed_traj = trajectory(captured, order=lambda spans: list(reversed(spans)))
    assert [s.to_dict() for s in reversed_traj.steps] == [s.to_dict() for s in traj.steps]


# --- non-GenAI spans and traces without an agent --------------------------------------------------


def test_http_span_is_not_genai() -> None:
    def scenario(rec: Recorder) -> None:
        with rec.span(
            "GET /health",
            {"http.request.method": "GET", "url.path": "/health", "http.response.status_code": 200},
            kind=SpanKind.SERVER,
        ):
            pass

    (view,) = capture(scenario).span_views()
    assert normalize(view) is None
    assert normalize(view, []) is None


def test_trace_without_agent_is_one_implicit_run_named_after_its_root() -> None:
    captured, traj = build(http_service)
    found = normalized_by_label(captured)
    assert found[HTTP_ROOT] is None
    assert found["handle_question"] is None
    assert found[f"{HTTP_OUT}#1"] is None and found[f"{HTTP_OUT}#2"] is None

    run = HTTP_ROOT  # the root is not a GenAI span; its name comes from `names`
    chat1, chat2 = f"{CHAT}#1", f"{CHAT}#2"
    assert outline(traj, captured) == [
        S("user", chat1, run, text=QUESTION),
        S("llm", chat1, run, model="gpt-4o", finish_reason="stop"),
        S("assistant", chat1, run, text="Let me think.", finish_reason="stop"),
        S("llm", chat2, run, model="gpt-4o", finish_reason="stop"),
        S("assistant", chat2, run, text=ANSWER, finish_reason="stop"),
    ]
    (only,) = traj.runs
    assert (only.run_id, only.agent_name, only.implicit, only.depth, only.parent_run_id) == (
        captured.span_id(HTTP_ROOT),
        HTTP_ROOT,
        True,
        0,
        None,
    )
    assert only.service_name == "unit-test"
    assert traj.final_answer() == ANSWER


def test_views_of_the_sdk_spans_keep_identity() -> None:
    """What the mapping relies on: ids, parent, kind and times of `from_readable` views."""
    captured = capture(http_service)
    views = {v.span_id: v for v in captured.span_views()}
    root = views[captured.span_id(HTTP_ROOT)]
    chat = views[captured.span_ids(CHAT)[0]]
    assert root.parent_span_id == "" and root.kind == 2  # OTLP SERVER
    assert chat.kind == 3  # OTLP CLIENT
    assert views[chat.parent_span_id].name == "handle_question"
    assert chat.trace_id == root.trace_id == captured.trace_id
    assert root.start_ns < chat.start_ns < chat.end_ns < root.end_ns
    assert isinstance(chat, SpanView) and chat.service_name == "unit-test"
