"""OpenInference instrumentations of agent frameworks, read by meaning.

Small traces in the shapes the real instrumentations emit (smolagents 0.1.43, llama-index 4.6.1,
langchain 0.1.80 with LangGraph, openai-agents 2.6.0, crewai 1.1.21; see
`tests/fixtures/frameworks/`), emitted with the real OTel SDK (`_sdk.py`), normalized and built
into a trajectory.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _sdk import Recorder, capture, normalize_all, outline, run_outline, trajectory

from tracehound.conventions.openinference import (
    CREWAI_SCOPE,
    LANGCHAIN_SCOPE,
    LLAMA_INDEX_SCOPE,
    OPENAI_AGENTS_SCOPE,
    SMOLAGENTS_SCOPE,
)
from tracehound.steps import TrajectoryBuilder


def S(kind: str, span: str, run: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "span_id": span, "run_id": run, **fields}


def llm(
    inputs: list[tuple[str, str]],
    *,
    calls: list[tuple[str, str, dict[str, Any]]] = (),  # type: ignore[assignment]
    text: str | None = None,
) -> dict[str, Any]:
    """An OpenInference LLM span's flattened messages: (role, text) inputs, output tool calls
    (id, name, arguments) and/or output text."""
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.model_name": "m"}
    for i, (role, content) in enumerate(inputs):
        attrs[f"llm.input_messages.{i}.message.role"] = role
        attrs[f"llm.input_messages.{i}.message.contents.0.message_content.type"] = "text"
        attrs[f"llm.input_messages.{i}.message.contents.0.message_content.text"] = content
    out = "llm.output_messages.0.message."
    attrs[out + "role"] = "assistant"
    for k, (cid, name, args) in enumerate(calls):
        attrs[f"{out}tool_calls.{k}.tool_call.id"] = cid
        attrs[f"{out}tool_calls.{k}.tool_call.function.name"] = name
        attrs[f"{out}tool_calls.{k}.tool_call.function.arguments"] = json.dumps(args)
    if text is not None:
        attrs[out + "content"] = text
    return attrs


def tool(name: str, input_value: Any, output: str) -> dict[str, Any]:
    return {
        "openinference.span.kind": "TOOL",
        "tool.name": name,
        "input.value": input_value if isinstance(input_value, str) else json.dumps(input_value),
        "output.value": output,
    }


def chain(**extra: Any) -> dict[str, Any]:
    return {"openinference.span.kind": "CHAIN", **extra}


def kinds(steps: list[dict[str, Any]]) -> list[str]:
    return [s["kind"] for s in steps]


# --- smolagents -----------------------------------------------------------------------------------

SMOL = SMOLAGENTS_SCOPE


def smolagents_run(rec: Recorder) -> None:
    """Two tools called in one turn, then the answer given through `final_answer`."""
    agent = {"openinference.span.kind": "AGENT", "input.value": '{"task": "q"}'}
    agent["output.value"] = "Oslo is wet; 1 NOK = 0.0853 EUR."
    with rec.span("travel_agent.run", agent, scope=SMOL):
        with rec.span("Step 1", chain(), scope=SMOL):
            calls = [("c1", "weather", {"city": "Oslo"}), ("c2", "rate", {"base": "NOK"})]
            with rec.span("OpenAIModel.generate", llm([("user", "q")], calls=calls), scope=SMOL):
                pass
            for name, args, result in (
                ("weather", {"city": "Oslo"}, "Oslo: rain"),
                ("rate", {"base": "NOK"}, "1 NOK = 0.0853 EUR"),
            ):
                binding = {"args": [], "sanitize_inputs_outputs": True, "kwargs": args}
                with rec.span("SimpleTool", tool(name, binding, result), scope=SMOL):
                    pass
        with rec.span("Step 2", chain(), scope=SMOL):
            history = [
                ("user", "q"),
                ("tool-call", "Calling tools:\n[{'id': 'c1', 'type': 'function'}]"),
                ("tool-response", "Observation:\nOslo: rain\n1 NOK = 0.0853 EUR"),
            ]
            answer = {"answer": "Oslo is wet; 1 NOK = 0.0853 EUR."}
            gen = llm(history, calls=[("c3", "final_answer", answer)])
            with rec.span("OpenAIModel.generate", gen, scope=SMOL):
                pass
            final = tool("final_answer", {"args": [], "kwargs": answer}, answer["answer"])
            with rec.span("FinalAnswerTool", final, scope=SMOL):
                pass


def test_smolagents_tools_history_echoes_and_final_answer() -> None:
    captured = capture(smolagents_run)
    traj = trajectory(captured)
    run = "travel_agent.run"
    llm1, llm2 = "OpenAIModel.generate#1", "OpenAIModel.generate#2"
    tool1, tool2 = "SimpleTool#1", "SimpleTool#2"
    steps = outline(traj, captured)
    assert [s for s in steps if s["kind"] in ("tool_call", "tool_result", "assistant")] == [
        S("tool_call", llm1, run, tool="weather", call_id="c1", arguments='{"city":"Oslo"}')
        | {"exec_span_id": tool1},
        S("tool_call", llm1, run, tool="rate", call_id="c2", arguments='{"base":"NOK"}')
        | {"exec_span_id": tool2},
        S("tool_result", tool1, run, tool="weather", call_id="c1", text="Oslo: rain"),
        S("tool_result", tool2, run, tool="rate", call_id="c2", text="1 NOK = 0.0853 EUR"),
        # the echoed calls and observations are no steps; `final_answer` is the answer
        S("assistant", llm2, run, text="Oslo is wet; 1 NOK = 0.0853 EUR."),
    ]
    assert run_outline(traj, captured) == [
        (run, "travel_agent", None, 0, False, "Oslo is wet; 1 NOK = 0.0853 EUR.")
    ]
    by_name = {n.view.name: n for n in normalize_all(captured.span_views()).values() if n}
    assert by_name["FinalAnswerTool"].operation == "other"  # how smolagents answers


def test_smolagents_managed_agent_executes_the_call_of_its_name() -> None:
    def scenario(rec: Recorder) -> None:
        outer = {"openinference.span.kind": "AGENT", "output.value": "It is Kp 6."}
        call = [("c1", "research_agent", {"task": "aurora"})]
        inner = {"openinference.span.kind": "AGENT", "output.value": "Kp 6"}
        answer = llm([("user", "aurora")], text="Kp 6")
        with (
            rec.span("coordinator.run", outer, scope=SMOL),
            rec.span("Step 1", chain(), scope=SMOL),
        ):
            with rec.span("OpenAIModel.generate", llm([("user", "q")], calls=call), scope=SMOL):
                pass
            with (
                rec.span("research_agent.run", inner, scope=SMOL),
                rec.span("OpenAIModel.generate", answer, scope=SMOL),
            ):
                pass

    captured = capture(scenario)
    traj = trajectory(captured)
    steps = outline(traj, captured)
    calls = [s for s in steps if s["kind"] in ("tool_call", "tool_result")]
    assert calls == [
        S("tool_call", "OpenAIModel.generate#1", "coordinator.run", tool="research_agent")
        | {"call_id": "c1", "arguments": '{"task":"aurora"}', "exec_span_id": "research_agent.run"},
        # the result is the sub-agent's answer, a step of the caller's run
        S("tool_result", "Step 1", "coordinator.run", tool="research_agent", call_id="c1")
        | {"text": "Kp 6"},
    ]
    assert [r[:3] for r in run_outline(traj, captured)] == [
        ("coordinator.run", "coordinator", None),
        ("research_agent.run", "research_agent", "coordinator.run"),
    ]


# --- LlamaIndex -----------------------------------------------------------------------------------

LI = LLAMA_INDEX_SCOPE


def llamaindex_agent(rec: Recorder) -> None:
    ev = "AgentSetup(input=[ChatMessage(role=<MessageRole.USER: 'user'>)], current_agent_name='{}')"
    with rec.span("FunctionAgent.run", chain(**{"output.value": "StopEvent(...)"}), scope=LI):
        with rec.span("BaseWorkflowAgent.init_run", chain(), scope=LI):
            pass
        step = chain(**{"input.value": json.dumps({"ev": ev.format("travel_agent")})})
        with rec.span("BaseWorkflowAgent.run_agent_step", step, scope=LI):
            prep = {"openinference.span.kind": "LLM", "llm.model_name": "m"}
            prep["input.value"] = '{"tools": ["<FunctionTool object>"]}'
            with rec.span("OpenAI._prepare_chat_with_tools", prep, scope=LI):
                pass
            calls = [("c1", "weather", {"city": "Oslo"})]
            with rec.span("OpenAI.astream_chat", llm([("user", "q")], calls=calls), scope=LI):
                pass
        with rec.span("BaseWorkflowAgent.call_tool", chain(), scope=LI):
            output = {
                "blocks": [{"text": "Oslo: rain"}],
                "tool_name": "weather",
                "raw_input": {"args": [], "kwargs": {"city": "Oslo"}},
                "raw_output": "Oslo: rain",
                "is_error": False,
            }
            span = tool("weather", {"kwargs": {"city": "Oslo"}}, json.dumps(output))
            with rec.span("FunctionTool.acall", span, scope=LI):
                pass
        with rec.span("BaseWorkflowAgent.run_agent_step", step, scope=LI):
            gen = llm([("user", "q")], text="Oslo is rainy.")
            gen["llm.input_messages.1.message.role"] = "tool"
            gen["llm.input_messages.1.message.content"] = "Oslo: rain"
            gen["llm.input_messages.1.message.tool_call_id"] = "c1"
            with rec.span("OpenAI.astream_chat", gen, scope=LI):
                pass


def test_llamaindex_function_agent() -> None:
    captured = capture(llamaindex_agent)
    traj = trajectory(captured)
    run = "FunctionAgent.run"
    steps = outline(traj, captured)
    # `_prepare_chat_with_tools` made no model call: two llm steps, the two `astream_chat`
    assert [s["span_id"] for s in steps if s["kind"] == "llm"] == [
        "OpenAI.astream_chat#1",
        "OpenAI.astream_chat#2",
    ]
    assert [s for s in steps if s["kind"] in ("tool_call", "tool_result")] == [
        S("tool_call", "OpenAI.astream_chat#1", run, tool="weather", call_id="c1")
        | {"arguments": '{"city":"Oslo"}', "exec_span_id": "FunctionTool.acall"},
        S(
            "tool_result",
            "FunctionTool.acall",
            run,
            tool="weather",
            call_id="c1",
            text="Oslo: rain",
        ),
    ]
    # the workflow's steps say whose run it is: the agent the user defined
    assert run_outline(traj, captured) == [(run, "travel_agent", None, 0, False, None)]
    assert traj.final_answer() == "Oslo is rainy."


def test_llamaindex_tool_error_and_inner_retrieve() -> None:
    def scenario(rec: Recorder) -> None:
        with rec.span("RetrieverQueryEngine.query", chain(), scope=LI):
            outer = {
                "openinference.span.kind": "RETRIEVER",
                "input.value": "kettle warranty",
                "retrieval.documents.0.document.id": "d1",
                "retrieval.documents.0.document.content": "27 months",
            }
            with rec.span("VectorIndexRetriever.retrieve", outer, scope=LI):
                inner = {"openinference.span.kind": "RETRIEVER", "input.value": '{"q": 1}'}
                with rec.span("VectorIndexRetriever._retrieve", inner, scope=LI):
                    pass
            bad = {"blocks": [{"text": "no such city"}], "tool_name": "w", "is_error": True}
            with rec.span(
                "FunctionTool.acall", tool("w", {"kwargs": {}}, json.dumps(bad)), scope=LI
            ):
                pass

    captured = capture(scenario)
    steps = outline(trajectory(captured), captured)
    assert kinds(steps) == ["retrieval", "tool_call", "tool_result"]
    assert steps[0]["span_id"] == "VectorIndexRetriever.retrieve"
    assert steps[2]["text"] == "no such city" and steps[2]["error"] == "no such city"


# --- LangGraph (OpenInference LangChain) ----------------------------------------------------------

LC = LANGCHAIN_SCOPE


def node_meta(node: str, step: int, **extra: Any) -> str:
    return json.dumps(
        {"ls_integration": "langgraph", "langgraph_step": step, "langgraph_node": node, **extra}
    )


def graph_state(*messages: tuple[str, str]) -> str:
    return json.dumps({"messages": [{"type": t, "data": {"content": c}} for t, c in messages]})


def react_graph(rec: Recorder) -> None:
    """`create_react_agent`: the graph (CHAIN: its name has no "agent"), its `agent` nodes
    (AGENT: their name has), a tool whose name has "agent" (AGENT, with `tool.name`)."""
    root = chain(metadata='{"ls_integration": "langgraph"}')
    root["output.value"] = graph_state(
        ("human", "q"), ("ai", ""), ("tool", "Kp 6"), ("ai", "Kp 6.")
    )
    with rec.span("coordinator", root, scope=LC):
        for step, calls, text in (
            (1, [("c1", "research_agent", {"query": "aurora"})], None),
            (3, [], "Kp 6."),
        ):
            node = {"openinference.span.kind": "AGENT", "metadata": node_meta("agent", step)}
            with rec.span("agent", node, scope=LC):
                gen = llm([("user", "q")], calls=calls, text=text)
                gen["metadata"] = node_meta("agent", step, ls_integration="langchain_chat_model")
                with rec.span("ChatOpenAI", gen, scope=LC):
                    pass
            if step == 1:
                with rec.span("tools", chain(metadata=node_meta("tools", 2)), scope=LC):
                    message = {"type": "tool", "data": {"content": "Kp 6", "status": "success"}}
                    span = tool("research_agent", "aurora", json.dumps(message))
                    span["openinference.span.kind"] = "AGENT"
                    span["metadata"] = node_meta("tools", 2)
                    with rec.span("research_agent", span, scope=LC):
                        pass


def test_langgraph_nodes_are_steps_of_the_graph_agent() -> None:
    captured = capture(react_graph)
    traj = trajectory(captured)
    steps = outline(traj, captured)
    assert [s for s in steps if s["kind"] in ("tool_call", "tool_result")] == [
        S("tool_call", "ChatOpenAI#1", "coordinator", tool="research_agent", call_id="c1")
        | {"arguments": '{"query":"aurora"}', "exec_span_id": "research_agent"},
        S("tool_result", "research_agent", "coordinator", tool="research_agent", call_id="c1")
        | {"text": "Kp 6"},
    ]
    # one run: the graph; its answer is the last AI message, not the state
    assert run_outline(traj, captured) == [("coordinator", "coordinator", None, 0, False, "Kp 6.")]


def test_create_agent_is_named_by_lc_agent_name() -> None:
    def scenario(rec: Recorder) -> None:
        meta = {"ls_integration": "langchain_create_agent", "lc_agent_name": "helper"}
        root = chain(metadata=json.dumps(meta), **{"output.value": graph_state(("ai", "hi"))})
        node = chain(metadata=node_meta("model", 1, lc_agent_name="helper"))
        with (
            rec.span("helper", root, scope=LC),
            rec.span("model", node, scope=LC),
            rec.span("ChatOpenAI", llm([("user", "q")], text="hi"), scope=LC),
        ):
            pass

    captured = capture(scenario)
    traj = trajectory(captured)
    assert run_outline(traj, captured) == [("helper", "helper", None, 0, False, "hi")]


# --- OpenAI Agents SDK ----------------------------------------------------------------------------

OA = OPENAI_AGENTS_SCOPE


def test_openai_agents_text_once_stream_output_and_trace_span() -> None:
    response = {
        "object": "response",
        "output": [
            {"type": "function_call", "call_id": "c1", "name": "w", "arguments": '{"c": 1}'},
        ],
    }

    def scenario(rec: Recorder) -> None:
        with rec.span("Agent workflow", {"openinference.span.kind": "AGENT"}, scope=OA):
            agent = {"openinference.span.kind": "AGENT", "agent.name": "helper"}
            with rec.span("helper", agent, scope=OA):
                # a streamed Chat Completions generation: only `output.value`
                gen = llm([("user", "q")])
                del gen["llm.output_messages.0.message.role"]
                gen["output.value"] = json.dumps([response])
                with rec.span("generation", gen, scope=OA):
                    pass
                with rec.span("w", tool("w", {"c": 1}, "sunny"), scope=OA):
                    pass
                with rec.span("handoff to other", {"openinference.span.kind": "TOOL"}, scope=OA):
                    pass
                # the Responses model: the text as content parts and again as `content`
                final = llm([("user", "q")], text="It is sunny.")
                out = "llm.output_messages.0.message.contents.0.message_content."
                final[out + "type"] = "text"
                final[out + "text"] = "It is sunny."
                with rec.span("response", final, scope=OA):
                    pass

    captured = capture(scenario)
    traj = trajectory(captured)
    steps = outline(traj, captured)
    assert [s for s in steps if s["kind"] in ("tool_call", "tool_result", "assistant")] == [
        S("tool_call", "generation", "helper", tool="w", call_id="c1", arguments='{"c":1}')
        | {"exec_span_id": "w"},
        S("tool_result", "w", "helper", tool="w", call_id="c1", text="sunny"),
        S("assistant", "response", "helper", text="It is sunny."),
    ]
    # the trace's span is no agent: the implicit run stands for it
    assert [(r[1], r[4]) for r in run_outline(traj, captured)] == [
        ("Agent workflow", True),
        ("helper", False),
    ]


def test_tool_whose_parameters_are_named_args_and_kwargs_is_read_as_is() -> None:
    def scenario(rec: Recorder) -> None:
        value = {"args": ["x"], "kwargs": {"k": 1}, "mode": "fast"}
        with rec.span("t", tool("t", value, "ok"), scope=SMOL):
            pass

    captured = capture(scenario)
    steps = outline(trajectory(captured), captured)
    assert steps[0]["arguments"] == '{"args":["x"],"kwargs":{"k":1},"mode":"fast"}'


def test_langchain_agent_kind_is_read_from_what_the_run_is() -> None:
    """A retriever and a chat model whose names contain "agent" get kind AGENT from the
    LangChain instrumentation; they are a retrieval and a model call."""

    def scenario(rec: Recorder) -> None:
        docs = {
            "openinference.span.kind": "AGENT",
            "input.value": "kettle",
            "retrieval.documents.0.document.content": "27 months",
        }
        model = llm([("user", "kettle?")], text="27 months.")
        model["openinference.span.kind"] = "AGENT"
        with rec.span("RunnableSequence", chain(), scope=LC):
            with rec.span("agent_docs", docs, scope=LC):
                pass
            with rec.span("agent_model", model, scope=LC):
                pass

    captured = capture(scenario)
    traj = trajectory(captured)
    assert kinds(outline(traj, captured)) == ["retrieval", "user", "llm", "assistant"]
    assert [r[1] for r in run_outline(traj, captured)] == ["RunnableSequence"]


def test_autogen_agents_are_named_without_the_method_their_span_wraps() -> None:
    scope = "openinference.instrumentation.autogen_agentchat"

    def scenario(rec: Recorder) -> None:
        agent = {"openinference.span.kind": "AGENT"}
        with rec.span("travel_agent.on_messages_stream", agent, scope=scope):
            with rec.span("OpenAIChatCompletionClient.create", llm([("user", "q")]), scope=scope):
                pass
            with rec.span("helper.run", agent, scope=scope):
                pass
        with rec.span("report.on_messages_stream", agent, scope="another.instrumentation"):
            pass

    captured = capture(scenario)
    names = {n.view.name: n.agent_name for n in normalize_all(captured.span_views()).values() if n}
    assert names["travel_agent.on_messages_stream"] == "travel_agent"
    assert names["helper.run"] == "helper"
    # another instrumentation's span of the same shape keeps its name
    assert names["report.on_messages_stream"] == "report.on_messages_stream"


def test_a_named_tool_call_without_arguments_was_made_with_none() -> None:
    """OpenInference records no empty value: LangChain's `args: {}` leaves the call without
    `function.arguments`. It is the call `{}`, the same call each time (a repeat is a repeat)."""

    def scenario(rec: Recorder) -> None:
        attrs = llm([("user", "q")], calls=[("c1", "get_server_time", {})])
        del attrs["llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments"]
        with rec.span("ChatOpenAI", attrs, scope=LANGCHAIN_SCOPE):
            pass

    (step,) = [s for s in trajectory(capture(scenario)).steps if s.kind == "tool_call"]
    assert (step.tool, step.arguments) == ("get_server_time", "{}")


def test_autogen_text_beside_tool_calls_is_the_results_thought() -> None:
    """AutoGen's `CreateResult.thought` (text the model wrote beside its calls) is read as
    assistant text before them; a thought of a span that already has text, a null one and
    another instrumentation's are left alone."""
    scope = "openinference.instrumentation.autogen_agentchat"

    def create_result(thought: str | None) -> str:
        return json.dumps({"finish_reason": "function_calls", "content": [], "thought": thought})

    def scenario(rec: Recorder) -> None:
        calls = [("c1", "get_weather", {"city": "Bergen"})]
        spans = [
            (scope, create_result("Let me check Bergen."), None),
            (scope, create_result(None), None),
            (scope, create_result("Thinking aloud."), "Checking now."),
            ("another.instrumentation", create_result("Not read."), None),
        ]
        agent = {"openinference.span.kind": "AGENT"}
        with rec.span("sky_agent.on_messages_stream", agent, scope=scope):
            for number, (where, output, text) in enumerate(spans):
                attrs = llm([("user", "q")], calls=[(f"{c}-{number}", n, a) for c, n, a in calls])
                if text is not None:
                    attrs["llm.output_messages.0.message.content"] = text
                attrs["output.value"] = output
                with rec.span("OpenAIChatCompletionClient.create", attrs, scope=where):
                    pass

    said = [s.text for s in trajectory(capture(scenario)).steps if s.kind == "assistant"]
    assert said == ["Let me check Bergen.", "Checking now."]


def test_crewai_tool_calls_in_output_value_quoted_history_and_role() -> None:
    def scenario(rec: Recorder) -> None:
        agent = {"openinference.span.kind": "AGENT", "graph.node.id": "travel_agent"}
        agent["output.value"] = "Oslo: rain"
        first = llm([("user", "q")])
        del first["llm.output_messages.0.message.role"]
        call = {"id": "c1", "type": "function"}
        call["function"] = {"name": "weather", "arguments": '{"city": "Oslo"}'}
        first["output.value"] = json.dumps([call])
        second = llm([("user", "q")], text="Oslo: rain")
        history = "llm.input_messages.1.message."
        second[history + "role"] = "assistant"
        second[history + "tool_calls.0.tool_call.id"] = "c1"
        second[history + "tool_calls.0.tool_call.function.name"] = "'weather'"
        second[history + "tool_calls.0.tool_call.function.arguments"] = '{"city": "Oslo"}'
        second["llm.input_messages.2.message.role"] = "tool"
        second["llm.input_messages.2.message.content"] = "Oslo: rain"
        second["llm.input_messages.2.message.tool_call_id"] = "c1"
        with rec.span("travel_agent.Weather in Oslo?.execute", agent, scope=CREWAI_SCOPE):
            with rec.span("gpt.llm_call", first, scope=CREWAI_SCOPE):
                pass
            with rec.span(
                "weather.run", tool("weather", {"city": "Oslo"}, "Oslo: rain"), scope=CREWAI_SCOPE
            ):
                pass
            with rec.span("gpt.llm_call", second, scope=CREWAI_SCOPE):
                pass

    captured = capture(scenario)
    traj = trajectory(captured)
    run = "travel_agent.Weather in Oslo?.execute"
    steps = [s for s in outline(traj, captured) if s["kind"] in ("tool_call", "tool_result")]
    # the call read from `output.value`, once; the resent call (named `'weather'`) is history
    assert steps == [
        S("tool_call", "gpt.llm_call#1", run, tool="weather", call_id="c1")
        | {"arguments": '{"city":"Oslo"}', "exec_span_id": "weather.run"},
        S("tool_result", "weather.run", run, tool="weather", call_id="c1", text="Oslo: rain"),
    ]
    assert [r[:2] for r in run_outline(traj, captured)] == [(run, "travel_agent")]


def _autogen_results_message(attrs: dict[str, Any], index: int, *results: dict[str, Any]) -> None:
    """AutoGen's tool results message in an LLM input: role `function`, one JSON
    FunctionExecutionResult per call as `function.{k}`."""
    attrs[f"llm.input_messages.{index}.message.role"] = "function"
    for k, result in enumerate(results):
        attrs[f"llm.input_messages.{index}.function.{k}"] = json.dumps(result)


def autogen_failed_then_retried(rec: Recorder, *, tool_spans: bool = True) -> None:
    """A tool span (no call id, no error status) whose call failed, as only the next LLM input
    says (`is_error`), then the retry and the answer; without the tool spans, the results are
    only in the inputs."""
    scope = "openinference.instrumentation.autogen_agentchat"
    failed = {"name": "invoice", "content": "id must be upper case", "call_id": "c1"}
    failed["is_error"] = True
    succeeded = {"name": "invoice", "content": "INV-7: 912 EUR", "call_id": "c2"}
    succeeded["is_error"] = False
    second = llm([("user", "q")], calls=[("c2", "invoice", {"id": "INV-7"})])
    second["llm.input_messages.1.message.role"] = "assistant"
    second["llm.input_messages.1.message.tool_calls.0.tool_call.id"] = "c1"
    second["llm.input_messages.1.message.tool_calls.0.tool_call.function.name"] = "invoice"
    second["llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments"] = "{}"
    _autogen_results_message(second, 2, failed)
    third = llm([("user", "q")], text="INV-7: 912 EUR.")
    _autogen_results_message(third, 1, failed)
    _autogen_results_message(third, 2, succeeded)
    agent = {"openinference.span.kind": "AGENT"}
    with rec.span("billing.on_messages_stream", agent, scope=scope):
        first = llm([("user", "q")], calls=[("c1", "invoice", {"id": "inv-7"})])
        with rec.span("OpenAIChatCompletionClient.create", first, scope=scope):
            pass
        if tool_spans:
            with rec.span("billing.invoice", tool("invoice", {"id": "inv-7"}, failed["content"])):
                pass
        with rec.span("OpenAIChatCompletionClient.create", second, scope=scope):
            pass
        if tool_spans:
            output = succeeded["content"]
            with rec.span("billing.invoice", tool("invoice", {"id": "INV-7"}, output)):
                pass
        with rec.span("OpenAIChatCompletionClient.create", third, scope=scope):
            pass


@pytest.mark.parametrize("tool_spans", [True, False], ids=["tool_spans", "inputs_only"])
def test_autogen_tool_results_in_the_input_mark_the_failed_call(tool_spans: bool) -> None:
    captured = capture(lambda rec: autogen_failed_then_retried(rec, tool_spans=tool_spans))
    expected = [("c1", "id must be upper case", True), ("c2", "INV-7: 912 EUR", False)]
    builder = TrajectoryBuilder(captured.trace_id)
    for normalized in normalize_all(captured.span_views()).values():
        if normalized is not None:
            builder.add(normalized)
    for traj in (trajectory(captured), builder.build()):  # canonical, and as spans arrived
        results = [s for s in traj.steps if s.kind == "tool_result"]
        assert [(s.call_id, s.text, bool(s.error)) for s in results] == expected
        assert [s.arguments for s in traj.steps if s.kind == "tool_call"] == [
            '{"id":"inv-7"}',
            '{"id":"INV-7"}',
        ]
