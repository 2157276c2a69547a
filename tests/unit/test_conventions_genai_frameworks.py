"""OTel GenAI shapes of agent frameworks, from small synthetic spans made with the real SDK.

Strands Agents records content as span events: in its default shape the legacy per-message events
(`gen_ai.user.message`, `gen_ai.choice`, ...) with Bedrock-style content blocks as JSON strings, in
`gen_ai_latest_experimental` one `gen_ai.client.inference.operation.details` span event per field.
Google ADK (content in log records) records only the call id on its tool span; the result comes in
the next LLM input, wrapped as `{"result": ...}`. Microsoft Agent Framework writes
`gen_ai.response.finish_reasons` as a JSON string.
"""

from __future__ import annotations

from typing import Any

import pytest
from _sdk import Captured, Recorder, capture, dumps, normalize_all, outline, run_outline, trajectory

from tracehound.conventions._messages import content_text, parse_part
from tracehound.conventions.genai import finish_reasons_of
from tracehound.steps import Trajectory, TrajectoryBuilder

SYSTEM = "You are a travel assistant."
QUESTION = "What is the weather in Oslo?"
CITY = {"city": "Oslo"}
CANON_CITY = '{"city":"Oslo"}'
WEATHER = "Oslo: 7°C, light rain"
ANSWER = "It is 7°C with light rain in Oslo."
THOUGHT = "The tool gave the weather; say it plainly."
STRANDS = "strands.telemetry.tracer"
ADK = "gcp.vertex.agent"


def S(kind: str, span: str, run: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "span_id": span, "run_id": run, **fields}


def build(scenario: Any) -> tuple[Captured, Trajectory]:
    captured = capture(scenario)
    return captured, trajectory(captured)


def blocks(*items: Any) -> str:
    return dumps(list(items))


def tool_use(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": call_id, "name": name, "input": arguments}}


def tool_result(call_id: str, text: str) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": call_id, "status": "success", "content": [{"text": text}]}}


# --- Strands Agents, default shape: legacy per-message events on the spans ----------------------


def _legacy(system: str = "gen_ai.system") -> dict[str, Any]:
    return {system: "strands-agents"}


def strands_default(rec: Recorder, *, reasoning: bool = False) -> None:
    """An agent, two event-loop cycles, two chat spans and a tool span, as Strands 1.x records
    them with `OTEL_SEMCONV_STABILITY_OPT_IN` unset."""
    chat = {"gen_ai.operation.name": "chat", **_legacy(), "gen_ai.request.model": "gpt-4o-mini"}
    cycle = {"gen_ai.operation.name": "execute_event_loop_cycle", **_legacy()}
    agent = {"gen_ai.operation.name": "invoke_agent", **_legacy(), "gen_ai.agent.name": "travel"}
    call = tool_use("call_1", "get_weather", CITY)
    user = {"content": blocks({"text": QUESTION})}
    final = [{"text": ANSWER}]
    if reasoning:
        final.insert(
            0, {"reasoningContent": {"reasoningText": {"text": THOUGHT, "signature": "x"}}}
        )
    with rec.span("invoke_agent travel", agent, scope=STRANDS) as a:
        a.add_event("gen_ai.system.message", {"content": blocks({"text": SYSTEM})})
        a.add_event("gen_ai.user.message", user)
        with rec.span("execute_event_loop_cycle", cycle, scope=STRANDS) as c:
            c.add_event("gen_ai.user.message", user)
            with rec.span("chat", chat, scope=STRANDS) as s:
                s.add_event("gen_ai.system.message", {"content": blocks({"text": SYSTEM})})
                s.add_event("gen_ai.user.message", user)
                s.add_event("gen_ai.choice", {"finish_reason": "tool_use", "message": blocks(call)})
            tool = {
                "gen_ai.operation.name": "execute_tool",
                **_legacy(),
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
            }
            with rec.span("execute_tool get_weather", tool, scope=STRANDS) as t:
                t.add_event(
                    "gen_ai.tool.message", {"role": "tool", "content": dumps(CITY), "id": "call_1"}
                )
                t.add_event("gen_ai.choice", {"message": blocks({"text": WEATHER}), "id": "call_1"})
            c.add_event(
                "gen_ai.choice",
                {"message": blocks(call), "tool.result": blocks(tool_result("call_1", WEATHER))},
            )
        with rec.span("execute_event_loop_cycle", cycle, scope=STRANDS) as c:
            c.add_event("gen_ai.user.message", user)
            c.add_event("gen_ai.assistant.message", {"content": blocks(call)})
            c.add_event("gen_ai.tool.message", {"content": blocks(tool_result("call_1", WEATHER))})
            with rec.span("chat", chat, scope=STRANDS) as s:
                s.add_event("gen_ai.user.message", user)
                s.add_event("gen_ai.assistant.message", {"content": blocks(call)})
                s.add_event(
                    "gen_ai.tool.message", {"content": blocks(tool_result("call_1", WEATHER))}
                )
                s.add_event("gen_ai.choice", {"finish_reason": "end_turn", "message": dumps(final)})
        a.add_event("gen_ai.choice", {"message": ANSWER + "\n", "finish_reason": "end_turn"})


def strands_outline(*, reasoning: bool = False) -> list[dict[str, Any]]:
    run = "invoke_agent travel"
    tool = "execute_tool get_weather"
    out = [
        S("agent", run, run, agent="travel"),
        S("system", "chat#1", run, text=SYSTEM),
        S("user", "chat#1", run, text=QUESTION),
        S("llm", "chat#1", run, model="gpt-4o-mini", finish_reason="tool_use"),
        S(
            "tool_call",
            "chat#1",
            run,
            tool="get_weather",
            call_id="call_1",
            arguments=CANON_CITY,
            exec_span_id=tool,
        ),
        S("tool_result", tool, run, tool="get_weather", call_id="call_1", text=WEATHER),
        S("llm", "chat#2", run, model="gpt-4o-mini", finish_reason="end_turn"),
    ]
    if reasoning:
        out.append(S("reasoning", "chat#2", run, text=THOUGHT, finish_reason="end_turn"))
    out.append(S("assistant", "chat#2", run, text=ANSWER, finish_reason="end_turn"))
    return out


@pytest.mark.parametrize("reasoning", [False, True], ids=["text", "reasoning"])
def test_strands_default_shape_reads_the_span_events(reasoning: bool) -> None:
    captured, traj = build(lambda rec: strands_default(rec, reasoning=reasoning))
    assert captured.logs == ()  # everything is on the spans
    assert outline(traj, captured) == strands_outline(reasoning=reasoning)
    assert traj.final_answer() == ANSWER
    assert traj.conventions == ("otel_genai_legacy",)
    # an event-loop cycle repeats its chat span's messages: it is not a model call
    labels = captured.labels()
    ops = {labels[k]: v.operation for k, v in normalize_all(captured.span_views()).items() if v}
    assert ops["execute_event_loop_cycle#1"] == ops["execute_event_loop_cycle#2"] == "other"


# --- Strands Agents, gen_ai_latest_experimental: operation.details span events ------------------


def strands_latest(rec: Recorder, *, result_attribute: bool = True) -> None:
    """One `operation.details` span event per field (system instructions, inputs, outputs);
    the tool span has `gen_ai.tool.call.arguments` / `.result` with the result as content
    blocks, and the same call and result as details events."""
    details = "gen_ai.client.inference.operation.details"
    provider = {"gen_ai.provider.name": "strands-agents"}
    chat = {"gen_ai.operation.name": "chat", **provider, "gen_ai.request.model": "gpt-4o-mini"}
    user = {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    call = {"type": "tool_call", "name": "get_weather", "id": "call_1", "arguments": CITY}
    response = {"type": "tool_call_response", "id": "call_1", "response": [{"text": WEATHER}]}
    agent = {"gen_ai.operation.name": "invoke_agent", **provider, "gen_ai.agent.name": "travel"}
    with rec.span("invoke_agent travel", agent, scope=STRANDS):
        with rec.span("chat", chat, scope=STRANDS) as s:
            instructions = dumps([{"type": "text", "content": SYSTEM}])
            s.add_event(details, {"gen_ai.system_instructions": instructions})
            s.add_event(details, {"gen_ai.input.messages": dumps([user])})
            out = [{"role": "assistant", "parts": [call], "finish_reason": "tool_use"}]
            s.add_event(details, {"gen_ai.output.messages": dumps(out)})
        tool: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            **provider,
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.arguments": dumps(CITY),
        }
        if result_attribute:
            tool["gen_ai.tool.call.result"] = blocks({"text": WEATHER})
        with rec.span("execute_tool get_weather", tool, scope=STRANDS) as t:
            t.add_event(
                details, {"gen_ai.input.messages": dumps([{"role": "tool", "parts": [call]}])}
            )
            outputs = [{"role": "tool", "parts": [response]}]
            t.add_event(details, {"gen_ai.output.messages": dumps(outputs)})
        with rec.span("chat", chat, scope=STRANDS) as s:
            history = [
                user,
                {"role": "assistant", "parts": [call]},
                {"role": "user", "parts": [response]},
            ]
            s.add_event(details, {"gen_ai.input.messages": dumps(history)})
            reasoning = {
                "type": "reasoningContent",
                "content": {"reasoningText": {"text": THOUGHT}},
            }
            text = {"type": "text", "content": ANSWER}
            out = [{"role": "assistant", "parts": [reasoning, text], "finish_reason": "end_turn"}]
            s.add_event(details, {"gen_ai.output.messages": dumps(out)})


@pytest.mark.parametrize("result_attribute", [True, False], ids=["attribute", "event only"])
def test_strands_latest_shape_reads_every_details_span_event(result_attribute: bool) -> None:
    captured, traj = build(lambda rec: strands_latest(rec, result_attribute=result_attribute))
    assert outline(traj, captured) == strands_outline(reasoning=True)
    assert traj.final_answer() == ANSWER
    assert traj.conventions == ("otel_genai",)


def test_strands_agent_used_as_a_tool_is_a_tool_call_and_a_nested_run() -> None:
    inner_answer = "Kp index 6 tonight."

    def scenario(rec: Recorder) -> None:
        base = {"gen_ai.system": "strands-agents"}
        chat = {"gen_ai.operation.name": "chat", **base, "gen_ai.request.model": "m"}

        def agent(name: str) -> dict[str, Any]:
            return {"gen_ai.operation.name": "invoke_agent", **base, "gen_ai.agent.name": name}

        call = tool_use("call_o", "research", {"input": "aurora"})
        with rec.span("invoke_agent coordinator", agent("coordinator"), scope=STRANDS):
            with rec.span("chat", chat, scope=STRANDS) as s:
                s.add_event("gen_ai.user.message", {"content": blocks({"text": QUESTION})})
                s.add_event("gen_ai.choice", {"finish_reason": "tool_use", "message": blocks(call)})
            tool = {
                "gen_ai.operation.name": "execute_tool",
                **base,
                "gen_ai.tool.name": "research",
                "gen_ai.tool.call.id": "call_o",
            }
            with rec.span("execute_tool research", tool, scope=STRANDS) as t:
                t.add_event("gen_ai.tool.message", {"content": dumps({"input": "aurora"})})
                with rec.span("invoke_agent research", agent("research"), scope=STRANDS) as a:
                    with rec.span("chat", chat, scope=STRANDS) as s:
                        s.add_event("gen_ai.user.message", {"content": blocks({"text": "aurora"})})
                        s.add_event(
                            "gen_ai.choice",
                            {
                                "finish_reason": "end_turn",
                                "message": blocks({"text": inner_answer}),
                            },
                        )
                    a.add_event("gen_ai.choice", {"message": inner_answer + "\n"})
                t.add_event("gen_ai.choice", {"message": blocks({"text": inner_answer + "\n"})})
            with rec.span("chat", chat, scope=STRANDS) as s:
                s.add_event("gen_ai.assistant.message", {"content": blocks(call)})
                s.add_event(
                    "gen_ai.tool.message",
                    {"content": blocks(tool_result("call_o", inner_answer + "\n"))},
                )
                s.add_event(
                    "gen_ai.choice",
                    {"finish_reason": "end_turn", "message": blocks({"text": ANSWER})},
                )

    captured, traj = build(scenario)
    calls = [(s.tool, s.arguments) for s in traj.steps if s.kind == "tool_call"]
    assert calls == [("research", '{"input":"aurora"}')]
    results = [(s.call_id, s.text) for s in traj.steps if s.kind == "tool_result"]
    assert results == [("call_o", inner_answer + "\n")]
    runs = run_outline(traj, captured)
    assert [(r[1], r[2]) for r in runs] == [
        ("coordinator", None),
        ("research", "invoke_agent coordinator"),
    ]
    assert traj.final_answer() == ANSWER
    inner = next(r for r in traj.runs if r.agent_name == "research")
    assert traj.final_answer(inner.run_id) == inner_answer


# --- a tool span with only the call id: the result comes later, by that id ----------------------


def adk_logs(rec: Recorder, *, scope: str = ADK) -> None:
    """Google ADK with content only in log records: the tool span has the call id alone; the
    next LLM call's details record has the result, as ADK's `{"result": ...}` wrapper."""
    details = "gen_ai.client.inference.operation.details"
    llm = {"gen_ai.operation.name": "generate_content", "gen_ai.request.model": "m"}
    call = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": CITY}
    user = {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    response = {"type": "tool_call_response", "id": "call_1", "response": {"result": WEATHER}}
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"}
    with rec.span("invoke_agent travel", agent, scope=scope):
        with rec.span("generate_content m", llm, scope=scope):
            outputs = [{"role": "assistant", "parts": [call], "finish_reason": "stop"}]
            rec.event(
                details, None, {"gen_ai.input.messages": [user], "gen_ai.output.messages": outputs}
            )
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
        }
        with rec.span("execute_tool get_weather", tool, scope=scope):
            pass
        with rec.span("generate_content m", llm, scope=scope):
            history = [
                user,
                {"role": "assistant", "parts": [call]},
                {"role": "user", "parts": [response]},
            ]
            outputs = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
            rec.event(
                details, None, {"gen_ai.input.messages": history, "gen_ai.output.messages": outputs}
            )


@pytest.mark.parametrize("order", ["by end", "reversed"])
def test_tool_span_without_result_is_filled_by_the_later_result(order: str) -> None:
    captured = capture(adk_logs)
    views = captured.span_views()
    normalized = [n for n in normalize_all(views, captured.log_views()).values() if n]
    if order == "reversed":  # the LLM span that carries the result before the tool span
        normalized.reverse()
    builder = TrajectoryBuilder(captured.trace_id)
    for span in normalized:
        builder.add(span)
    traj = builder.build({v.span_id: v.parent_span_id for v in views})
    tool = "execute_tool get_weather"
    results = [d for d in outline(traj, captured) if d["kind"] == "tool_result"]
    # one step, on the tool span, with the tool's own return value (ADK's wrapper removed)
    run = "invoke_agent travel"
    assert results == [
        S("tool_result", tool, run, tool="get_weather", call_id="call_1", text=WEATHER)
    ]
    assert traj == trajectory(captured)


def test_result_wrapper_is_read_as_such_only_for_adk() -> None:
    captured = capture(lambda rec: adk_logs(rec, scope="some.other.library"))
    traj = trajectory(captured)
    (result,) = [s for s in traj.steps if s.kind == "tool_result"]
    assert result.text == dumps({"result": WEATHER})


def test_tool_span_without_result_and_no_later_result_keeps_its_empty_step() -> None:
    def scenario(rec: Recorder) -> None:
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
        }
        with rec.span("execute_tool get_weather", tool):
            pass

    _, traj = build(scenario)
    assert [(s.kind, s.call_id, s.text) for s in traj.steps] == [
        ("tool_call", "call_1", None),
        ("tool_result", "call_1", None),
    ]


# --- list attributes as JSON strings; content blocks ---------------------------------------------


def test_finish_reasons_as_a_json_string_are_a_list() -> None:
    assert finish_reasons_of('["tool_calls"]') == ["tool_calls"]
    assert finish_reasons_of('["stop", "length"]') == ["stop", "length"]
    assert finish_reasons_of(["stop"]) == ["stop"]
    assert finish_reasons_of("stop") == ["stop"]
    assert finish_reasons_of("[not json") == ["[not json"]

    def scenario(rec: Recorder) -> None:
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.response.finish_reasons": '["length"]',
        }
        with rec.span("chat gpt-4o-mini", attrs, scope="agent_framework"):
            pass

    _, traj = build(scenario)
    assert [(s.kind, s.finish_reason) for s in traj.steps] == [("llm", "length")]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ([{"text": "a"}, {"text": "b"}], "a\nb"),
        ('[{"text": "a"}]', "a"),
        ([{"type": "text", "text": "x"}], "x"),
        ({"type": "text", "content": "y"}, "y"),
        ([{"json": {"k": 1}}], '{"k": 1}'),
        ('{"temp": 7}', '{"temp": 7}'),  # a JSON result that is not content blocks stays as is
        ("plain", "plain"),
        ("[1, 2]", "[1, 2]"),
        ('[{"id": 3, "name": "x"}]', '[{"id": 3, "name": "x"}]'),
        ([{"image": {"format": "png"}}], '[{"image": {"format": "png"}}]'),
        ([{"text": "a", "extra": 1}], '[{"extra": 1, "text": "a"}]'),
    ],
)
def test_content_text_unwraps_text_blocks_only(value: Any, text: str) -> None:
    assert content_text(value) == text


# --- Google ADK telemetry schema 1: google-genai JSON on `call_llm`, `<elided>` log content -----


def adk_schema_1(rec: Recorder) -> None:
    fc = {"function_call": {"id": "call_1", "args": CITY, "name": "get_weather"}}
    fr = {
        "function_response": {
            "id": "call_1",
            "name": "get_weather",
            "response": {"result": WEATHER},
        }
    }
    question = {"role": "user", "parts": [{"text": QUESTION}]}

    def call_llm(contents: list[Any], parts: list[Any]) -> dict[str, Any]:
        request = {"model": "m", "config": {"system_instruction": SYSTEM}, "contents": contents}
        response = {"content": {"parts": parts, "role": "model"}, "finish_reason": "STOP"}
        return {
            "gen_ai.system": "gcp.vertex.agent",
            "gen_ai.request.model": "m",
            "gcp.vertex.agent.llm_request": dumps(request),
            "gcp.vertex.agent.llm_response": dumps(response),
        }

    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"}
    with rec.span("invoke_agent travel", agent, scope=ADK):
        with rec.span("call_llm", call_llm([question], [fc]), scope=ADK):
            rec.event("gen_ai.user.message", {"content": "<elided>"})
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
            "gcp.vertex.agent.tool_call_args": dumps(CITY),
            "gcp.vertex.agent.tool_response": dumps({"result": WEATHER}),
        }
        with rec.span("execute_tool get_weather", tool, scope=ADK):
            pass
        thought = {"text": THOUGHT, "thought": True}
        history = [question, {"role": "model", "parts": [fc]}, {"role": "user", "parts": [fr]}]
        with rec.span("call_llm", call_llm(history, [thought, {"text": ANSWER}]), scope=ADK):
            pass


def test_adk_schema_1_reads_call_llm_and_tool_attributes() -> None:
    captured, traj = build(adk_schema_1)
    run, tool = "invoke_agent travel", "execute_tool get_weather"
    assert outline(traj, captured) == [
        S("agent", run, run, agent="travel"),
        S("system", "call_llm#1", run, text=SYSTEM),
        S("user", "call_llm#1", run, text=QUESTION),  # not the `<elided>` log placeholder
        S("llm", "call_llm#1", run, model="m", finish_reason="STOP"),
        S(
            "tool_call",
            "call_llm#1",
            run,
            tool="get_weather",
            call_id="call_1",
            arguments=CANON_CITY,
            exec_span_id=tool,
        ),
        S("tool_result", tool, run, tool="get_weather", call_id="call_1", text=WEATHER),
        S("llm", "call_llm#2", run, model="m", finish_reason="STOP"),
        S("reasoning", "call_llm#2", run, text=THOUGHT, finish_reason="STOP"),
        S("assistant", "call_llm#2", run, text=ANSWER, finish_reason="STOP"),
    ]


def test_adk_schema_1_uncaptured_tool_response_is_no_result() -> None:
    def scenario(rec: Recorder) -> None:
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
            "gcp.vertex.agent.tool_call_args": "{}",
            "gcp.vertex.agent.tool_response": "{}",
        }
        with rec.span("execute_tool get_weather", tool, scope=ADK):
            pass

    _, traj = build(scenario)
    assert [(s.kind, s.text) for s in traj.steps] == [("tool_call", None), ("tool_result", None)]


def test_adk_merged_tools_span_is_no_tool_call() -> None:
    def scenario(rec: Recorder) -> None:
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"}
        with rec.span("invoke_agent travel", agent, scope=ADK):
            for call_id, name in (("call_1", "get_weather"), ("event-id", "(merged tools)")):
                tool = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call_id,
                }
                with rec.span(f"execute_tool {name}", tool, scope=ADK):
                    pass

    _, traj = build(scenario)
    assert [(s.kind, s.tool) for s in traj.steps] == [
        ("agent", None),
        ("tool_call", "get_weather"),
        ("tool_result", "get_weather"),
    ]


def test_failed_tool_span_gets_the_text_the_model_was_given() -> None:
    """Microsoft Agent Framework: a tool that raised has an ERROR span without a result; the
    next LLM input says what the model got back for that call id."""
    failure = "Error: Function failed."

    def scenario(rec: Recorder) -> None:
        chat = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}
        call = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": CITY}
        with rec.span("invoke_agent travel", {"gen_ai.operation.name": "invoke_agent"}):
            out = [{"role": "assistant", "parts": [call], "finish_reason": "tool_calls"}]
            with rec.span("chat gpt-4o-mini", {**chat, "gen_ai.output.messages": dumps(out)}):
                pass
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": dumps(CITY),
            }
            with rec.span("execute_tool get_weather", tool, error="RuntimeError: down"):
                pass
            response = {"type": "tool_call_response", "id": "call_1", "response": failure}
            history = [
                {"role": "assistant", "parts": [call]},
                {"role": "tool", "parts": [response]},
            ]
            with rec.span("chat gpt-4o-mini", {**chat, "gen_ai.input.messages": dumps(history)}):
                pass

    _, traj = build(scenario)
    results = [(s.span_id, s.text, s.error) for s in traj.steps if s.kind == "tool_result"]
    assert [(text, error) for _, text, error in results] == [(failure, "RuntimeError: down")]


def test_a_strands_tool_result_with_error_status_marks_the_step_failed() -> None:
    """Strands' `toolResult` block says `"status": "error"` for a tool that raised: with no tool
    span (only the chat spans), the result the next input carries is a failed call's."""
    failed = {"toolResult": {"toolUseId": "call_1", "status": "error"}}
    failed["toolResult"]["content"] = [{"text": "Error: unknown city"}]
    chat = {"gen_ai.operation.name": "chat", **_legacy(), "gen_ai.request.model": "gpt-4o-mini"}
    call = tool_use("call_1", "get_weather", CITY)
    user = {"content": blocks({"text": QUESTION})}

    def scenario(rec: Recorder) -> None:
        with rec.span("request", {}):
            with rec.span("chat", chat, scope=STRANDS) as s:
                s.add_event("gen_ai.user.message", user)
                s.add_event("gen_ai.choice", {"finish_reason": "tool_use", "message": blocks(call)})
            with rec.span("chat", chat, scope=STRANDS) as s:
                s.add_event("gen_ai.user.message", user)
                s.add_event("gen_ai.assistant.message", {"content": blocks(call)})
                s.add_event("gen_ai.tool.message", {"content": blocks(failed)})
                s.add_event("gen_ai.choice", {"finish_reason": "end_turn", "message": ANSWER})

    _, traj = build(scenario)
    (result,) = [s for s in traj.steps if s.kind == "tool_result"]
    assert (result.call_id, result.text, result.error) == (
        "call_1",
        "Error: unknown city",
        "Error: unknown city",
    )
    success = {"toolResult": {**failed["toolResult"], "status": "success"}}
    assert [parse_part(b).is_error for b in (success, failed)] == [False, True]  # type: ignore[union-attr]
