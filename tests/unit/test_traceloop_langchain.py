"""Traceloop's LangChain / LangGraph instrumentation and the traceloop-sdk decorators, from the
shapes `opentelemetry-instrumentation-langchain` 0.62.4 and `traceloop-sdk` 0.62.4 emit
(`callback_handler.py`, `patch.py`, `traceloop/sdk/decorators/base.py`).

Each trace is emitted with the real OTel SDK (`_sdk.py`), normalized and built into a trajectory.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _processor_rig import make_rig, replay_spans
from _sdk import Recorder, capture, dumps, normalize_all, outline, run_outline, trajectory
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.trace import SpanKind

from tracehound.cli import main as cli_main
from tracehound.cli import select_evaluators
from tracehound.engine import Engine, EngineConfig

SCOPE = "opentelemetry.instrumentation.langchain"
QUESTION = "What is the weather in Oslo?"
WEATHER = "Oslo: 7°C, light rain"
ANSWER = "It is 7°C with light rain in Oslo."
CALL = "call_w1"
ARGS = {"city": "Oslo"}


def _chat(rec: Recorder, inputs: list[Any], outputs: list[Any]) -> None:
    with rec.span(
        "ChatOpenAI.chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "traceloop.workflow.name": "weather_agent",
            "gen_ai.input.messages": dumps(inputs),
            "gen_ai.output.messages": dumps(outputs),
        },
        kind=SpanKind.CLIENT,
        scope=SCOPE,
    ):
        pass


def _tool_message(content: Any, call_id: str = CALL, status: str = "success") -> dict[str, Any]:
    return {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "ToolMessage"],
        "kwargs": {
            "content": content,
            "type": "tool",
            "name": "get_weather",
            "tool_call_id": call_id,
            "status": status,
        },
    }


def tool_start(inputs: Any, input_str: str, call_id: str | None = CALL) -> str:
    """`on_tool_start`'s payload, as the callback handler serializes it."""
    return dumps(
        {
            "input_str": input_str,
            "tags": ["seq:step:1"],
            "metadata": {"langgraph_node": "tools", "langgraph_step": 2},
            "inputs": inputs,
            "kwargs": {"color": "green", "name": None, "tool_call_id": call_id},
        }
    )


def tool_end(output: Any) -> str:
    return dumps({"output": output, "kwargs": {"tags": ["seq:step:1"], "name": "get_weather"}})


def langgraph_agent(
    rec: Recorder,
    *,
    start: str,
    end: str | None,
    error: str | None = None,
    call_id_on_model: str | None = CALL,
) -> None:
    """`invoke_agent` graph span → workflow chain → model node (chat) → tools node
    (execute_tool with callback payloads) → model node (chat with the tool message)."""
    call = {"type": "tool_call", "id": call_id_on_model, "name": "get_weather", "arguments": ARGS}
    result = {"type": "tool_call_response", "id": call_id_on_model, "response": WEATHER}
    user = {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    graph = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "langgraph",
        "gen_ai.agent.name": "weather_agent",
    }
    workflow = {
        **graph,
        "traceloop.span.kind": "workflow",
        "traceloop.entity.name": "weather_agent",
        "traceloop.workflow.name": "weather_agent",
        # the graph state: not the answer
        "traceloop.entity.output": dumps({"outputs": {"messages": [QUESTION, ANSWER]}}),
    }
    task = {"traceloop.span.kind": "task", "gen_ai.operation.name": "execute_task"}
    with (
        rec.span("invoke_agent weather_agent", graph, scope=SCOPE),
        rec.span("weather_agent.workflow", workflow, scope=SCOPE),
    ):
        with rec.span(
            "execute_task model", {**task, "traceloop.entity.name": "model"}, scope=SCOPE
        ):
            _chat(rec, [user], [{"role": "assistant", "parts": [call]}])
        with rec.span(
            "execute_task tools", {**task, "traceloop.entity.name": "tools"}, scope=SCOPE
        ):
            attrs = {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "get_weather",
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.type": "function",
                "traceloop.entity.input": start,
                "gen_ai.tool.call.arguments": start,
            }
            if end is not None:
                attrs["traceloop.entity.output"] = end
                attrs["gen_ai.tool.call.result"] = end
            with rec.span("execute_tool get_weather", attrs, scope=SCOPE, error=error):
                pass
        with rec.span(
            "execute_task model", {**task, "traceloop.entity.name": "model"}, scope=SCOPE
        ):
            _chat(
                rec,
                [
                    user,
                    {"role": "assistant", "parts": [call]},
                    {"role": "tool", "parts": [result]},
                ],
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": ANSWER}],
                        "finish_reason": "stop",
                    }
                ],
            )


def S(kind: str, span: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "span_id": span, "run_id": "invoke_agent weather_agent", **fields}


def expected(result: str = WEATHER, error: str | None = None) -> list[dict[str, Any]]:
    failed = {"error": error} if error else {}
    return [
        S("agent", "invoke_agent weather_agent", agent="weather_agent"),
        S("user", "ChatOpenAI.chat#1", text=QUESTION),
        S("llm", "ChatOpenAI.chat#1", model="gpt-4o-mini"),
        S(
            "tool_call",
            "ChatOpenAI.chat#1",
            tool="get_weather",
            call_id=CALL,
            arguments='{"city":"Oslo"}',
            exec_span_id="execute_tool get_weather",
        ),
        S(
            "tool_result",
            "execute_tool get_weather",
            tool="get_weather",
            call_id=CALL,
            text=result,
            **failed,
        ),
        S("llm", "ChatOpenAI.chat#2", model="gpt-4o-mini", finish_reason="stop"),
        S("assistant", "ChatOpenAI.chat#2", text=ANSWER, finish_reason="stop"),
    ]


@pytest.mark.parametrize(
    "content",
    [WEATHER, [{"type": "text", "text": "Oslo: 7°C,"}, " light rain"]],
    ids=["string", "content blocks"],
)
def test_a_tool_span_reads_the_callback_payload_once_joined_by_call_id(content: Any) -> None:
    """`inputs` is what the tool received, `kwargs.tool_call_id` joins it to the model's call,
    the ToolMessage's content (blocks joined) is the result: one call, one result."""

    def scenario(rec: Recorder) -> None:
        langgraph_agent(
            rec, start=tool_start(ARGS, "{'city': 'Oslo'}"), end=tool_end(_tool_message(content))
        )

    captured = capture(scenario)
    traj = trajectory(captured)
    text = WEATHER if isinstance(content, str) else "Oslo: 7°C,\n light rain"
    assert outline(traj, captured) == expected(text)
    # the workflow chain span (op invoke_agent, kind workflow) is not a second agent, and the
    # graph state on it is not the answer
    assert run_outline(traj, captured) == [
        ("invoke_agent weather_agent", "weather_agent", None, 0, False, None)
    ]
    assert traj.final_answer() == ANSWER
    tool = next(
        n
        for n in normalize_all(captured.span_views()).values()
        if n is not None and n.operation == "tool"
    )
    assert (tool.tool_call_id, tool.tool_arguments, tool.problems) == (CALL, ARGS, [])


def test_without_inputs_the_input_string_is_read_as_the_literal_it_prints() -> None:
    """Older LangChain passes only `input_str` (`str()` of the dict); the tool's raw return
    (no ToolMessage, no call id on the span) is the result, joined by name and arguments."""

    def scenario(rec: Recorder) -> None:
        langgraph_agent(
            rec, start=tool_start(None, "{'city': 'Oslo'}", None), end=tool_end(WEATHER)
        )

    captured = capture(scenario)
    assert outline(trajectory(captured), captured) == expected()


def test_a_plain_string_input_stays_a_string() -> None:
    def scenario(rec: Recorder) -> None:
        langgraph_agent(rec, start=tool_start(None, "Oslo", None), end=tool_end(WEATHER))

    captured = capture(scenario)
    tool = next(
        n
        for n in normalize_all(captured.span_views()).values()
        if n is not None and n.operation == "tool"
    )
    assert (tool.tool_arguments, tool.tool_call_id, tool.tool_result) == ("Oslo", None, WEATHER)
    # joined to the model's one-argument call by its sole value
    assert outline(trajectory(captured), captured) == expected()


@pytest.mark.parametrize(
    ("binding", "received"),
    [
        ({"args": [], "kwargs": {}}, {}),  # a tool that takes no arguments
        ({"args": [], "kwargs": {"city": "Oslo"}}, {"city": "Oslo"}),
        ({"args": ["Oslo"], "kwargs": {}}, "Oslo"),
        ({"args": ["a", "b"], "kwargs": {}}, ["a", "b"]),
        ({"args": ["a"], "kwargs": {"b": 1}}, {"args": ["a"], "kwargs": {"b": 1}}),
    ],
)
def test_a_decorated_tool_received_what_its_call_binding_says(
    binding: dict[str, Any], received: Any
) -> None:
    def scenario(rec: Recorder) -> None:
        attrs = {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "get_server_time",
            "traceloop.entity.input": dumps(binding),
            "traceloop.entity.output": dumps("12:00"),
        }
        with rec.span("get_server_time.tool", attrs):
            pass

    (tool,) = [n for n in normalize_all(capture(scenario).span_views()).values() if n]
    assert tool.operation == "tool"
    assert tool.tool_arguments == received


def test_an_error_tool_message_and_a_failed_tool() -> None:
    def returned_error(rec: Recorder) -> None:
        message = _tool_message("Error: city not found", status="error")
        langgraph_agent(rec, start=tool_start(ARGS, str(ARGS)), end=tool_end(message))

    captured = capture(returned_error)
    assert outline(trajectory(captured), captured) == expected(
        "Error: city not found", error="Error: city not found"
    )

    def raised(rec: Recorder) -> None:  # on_tool_error: no output, status ERROR
        langgraph_agent(rec, start=tool_start(ARGS, str(ARGS)), end=None, error="TimeoutError")

    captured = capture(raised)
    steps = outline(trajectory(captured), captured)
    results = [s for s in steps if s["kind"] == "tool_result"]
    # one result, the tool span's, with the text the model was then given (the tool message
    # resent in the next input is the same result, filling the span's empty one)
    assert results == [
        S(
            "tool_result",
            "execute_tool get_weather",
            tool="get_weather",
            call_id=CALL,
            text=WEATHER,
            error="TimeoutError",
        )
    ]


def test_a_command_output_gives_the_tool_message_of_this_call() -> None:
    command = {
        "graph": None,
        "update": {"messages": [_tool_message("other", call_id="call_zz"), _tool_message(WEATHER)]},
        "resume": None,
        "goto": [],
    }

    def scenario(rec: Recorder) -> None:
        langgraph_agent(rec, start=tool_start(ARGS, str(ARGS)), end=tool_end(command))

    captured = capture(scenario)
    assert outline(trajectory(captured), captured) == expected()


def test_a_langchain_retriever_span_is_a_retrieval() -> None:
    kettle = "The X3 kettle carries a 27-month warranty."

    def scenario(rec: Recorder) -> None:
        with rec.span(
            "vector_db_retrieve VectorStoreRetriever",
            {
                "traceloop.span.kind": "task",
                "traceloop.entity.name": "VectorStoreRetriever",
                "gen_ai.operation.name": "vector_db_retrieve",
                "gen_ai.provider.name": "langchain",
                "traceloop.entity.input": dumps(
                    {
                        "query": "warranty?",
                        "tags": [],
                        "metadata": {"ls_retriever_name": "vectorstore"},
                        "kwargs": {"name": "VectorStoreRetriever"},
                    }
                ),
                "traceloop.entity.output": dumps(
                    {
                        "documents": [{"page_content": kettle, "metadata": {"id": "doc-kettle"}}],
                        "count": 1,
                    }
                ),
            },
            kind=SpanKind.CLIENT,
            scope=SCOPE,
        ):
            pass

    captured = capture(scenario)
    label = "vector_db_retrieve VectorStoreRetriever"
    assert outline(trajectory(captured), captured) == [
        {
            "kind": "retrieval",
            "span_id": label,
            "run_id": label,
            "source": "VectorStoreRetriever",
            "text": "warranty?",
            "documents": [{"id": "doc-kettle", "content": kettle}],
        }
    ]


@pytest.mark.parametrize(
    ("returned", "answer"),
    [
        ("The answer.", "The answer."),
        ({"messages": ["q", "The answer."], "steps": 3}, "From the model."),
        (
            {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain", "schema", "messages", "AIMessage"],
                "kwargs": {"content": [{"type": "text", "text": "The answer."}]},
            },
            "The answer.",
        ),
    ],
    ids=["string", "a state dict", "an AIMessage"],
)
def test_an_agent_decorator_declares_its_answer_only_when_it_returns_text(
    returned: Any, answer: str
) -> None:
    """`@agent`'s `traceloop.entity.output` is the JSON of what the function returned: a
    string (or a message) is the answer; a state dict is not, the run's last text is."""

    def scenario(rec: Recorder) -> None:
        with rec.span(
            "helper.agent",
            {
                "traceloop.span.kind": "agent",
                "traceloop.entity.name": "helper",
                "traceloop.entity.input": dumps({"args": ["q"], "kwargs": {}}),
                "traceloop.entity.output": json.dumps(returned),
            },
        ):
            _chat(
                rec,
                [{"role": "user", "parts": [{"type": "text", "content": "q"}]}],
                [{"role": "assistant", "parts": [{"type": "text", "content": "From the model."}]}],
            )

    traj = trajectory(capture(scenario))
    assert traj.final_answer() == answer


# --- side traces: the same rule in eval, the engine and the processor --------------------------


def create_agent_trace(rec: Recorder) -> None:
    """What `create_agent_wrapper` (patch.py) emits when an agent is built: one span, a trace
    of its own."""
    with rec.span(
        "create_agent weather_agent",
        {
            "gen_ai.operation.name": "create_agent",
            "gen_ai.provider.name": "langgraph",
            "gen_ai.agent.name": "weather_agent",
            "gen_ai.system_instructions": "You are a weather assistant.",
            "gen_ai.tool.definitions": dumps([{"type": "function", "name": "get_weather"}]),
        },
        scope=SCOPE,
    ):
        pass


def test_an_agent_construction_trace_is_not_an_evaluated_run(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    captured = capture(create_agent_trace)
    assert trajectory(captured).steps == ()
    # the engine: no trace result (the rule the processor and the sidecar apply on emission)
    engine = Engine(select_evaluators(None), EngineConfig())
    per_span = [r for v in captured.span_views() for r in engine.add_span(v).results]
    (done,) = engine.flush()
    assert (per_span, done.results, done.attributes) == ([], (), {})
    # the processor: no evaluation event, the span exported untouched
    rig = make_rig("memory", forwarding="stream")
    replay_spans(rig, list(captured.spans))
    assert rig.processor.force_flush(10_000)
    assert rig.results() == []
    (exported,) = rig.exported()
    assert not any(k.startswith("tracehound.") for k in exported.attributes or {})
    rig.close()
    # eval: the trace is listed (as any trace is) with no result
    path = tmp_path / "create_agent.pb"
    path.write_bytes(encode_spans(list(captured.spans)).SerializeToString())
    capsys.readouterr()
    assert cli_main(["eval", "--format", "json", str(path)]) == 0
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (record["results"], record["attributes"]) == ([], {})


# --- a nested graph: its agent span is a childless sibling of its work ---------------------------


def nested_graph(rec: Recorder) -> None:
    """A coordinator graph whose tool runs a sub-graph: the sub-graph's `invoke_agent` span
    (started without being made current, patch.py) has no child; its chain
    (`execute_task research`, with the model call) is its sibling under the tool span; a
    later sibling outside its interval stays where it is."""
    graph = {"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "langgraph"}
    task = {"traceloop.span.kind": "task", "gen_ai.operation.name": "execute_task"}
    tool = {
        "traceloop.span.kind": "tool",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "research",
        "traceloop.entity.input": tool_start({"q": "aurora"}, "{'q': 'aurora'}", None),
        "traceloop.entity.output": tool_end("Kp 6"),
    }
    tracer = rec.tracer(SCOPE)
    with (
        rec.span("invoke_agent coordinator", {**graph, "gen_ai.agent.name": "coordinator"}),
        rec.span("execute_tool research", tool, scope=SCOPE),
    ):
        inner = tracer.start_span(
            "invoke_agent research",
            attributes={**graph, "gen_ai.agent.name": "research"},
            start_time=rec.clock.tick(),
        )
        with rec.span("execute_task research", {**task, "traceloop.entity.name": "research"}):
            _chat(
                rec,
                [{"role": "user", "parts": [{"type": "text", "content": "aurora"}]}],
                [{"role": "assistant", "parts": [{"type": "text", "content": "Kp 6"}]}],
            )
        inner.end(end_time=rec.clock.tick())
        with rec.span("execute_task after", {**task, "traceloop.entity.name": "after"}):
            _chat(
                rec,
                [{"role": "user", "parts": [{"type": "text", "content": "later"}]}],
                [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}],
            )


def test_a_childless_agent_span_holds_the_sibling_work_it_encloses() -> None:
    captured = capture(nested_graph)
    traj = trajectory(captured)
    assert run_outline(traj, captured) == [
        ("invoke_agent coordinator", "coordinator", None, 0, False, None),
        ("invoke_agent research", "research", "invoke_agent coordinator", 1, False, None),
    ]
    runs = {(s["kind"], s.get("text")): s["run_id"] for s in outline(traj, captured)}
    assert runs[("user", "aurora")] == runs[("assistant", "Kp 6")] == "invoke_agent research"
    assert runs[("assistant", "done")] == "invoke_agent coordinator"
    assert runs[("tool_result", "Kp 6")] == "invoke_agent coordinator"
    research = next(r for r in traj.runs if r.agent_name == "research")
    assert traj.final_answer(research.run_id) == "Kp 6"
