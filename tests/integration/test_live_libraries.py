"""Spans produced live by real instrumentation libraries, fed straight to tracehound.

Each test instruments a real library against in-memory OTel exporters (SimpleSpanProcessor /
SimpleLogRecordProcessor), drives it, and reads what was captured the way tracehound's span
processor would: `SpanView.from_readable` / `LogView.from_sdk` → `normalize` → `build_trajectory`.

- pydantic-ai (FunctionModel, no network), instrumentation format versions 2, 5 and 6: an agent
  that uses its tool results, an agent looping on the same call, an agent whose tool raises.
- opentelemetry-instrumentation-openai-v2 (util-genai 1.1b0) and
  openinference-instrumentation-openai, driving the real `openai` client through a two-call tool
  loop against `fake_openai` on 127.0.0.1.

Instrumentors patch the `openai` module globally: every test instruments and uninstruments through
a fixture. A guard refuses (and reports) any socket connection that is not to the loopback
interface, so nothing here can reach the network.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import openai
import pytest
from fake_openai import FakeOpenAI, Script
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as OpenAIV2Instrumentor
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, PydanticAIDeprecationWarning, Tool
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tracehound.conventions import NormalizedSpan, normalize
from tracehound.spans import LogView, SpanView
from tracehound.steps import Step, Trajectory, build_trajectory

pytestmark = [pytest.mark.integration]


# --- network guard ------------------------------------------------------------------------------

_LOOPBACK = frozenset(("127.0.0.1", "::1", "localhost"))


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Refuse every IP connection that is not to the loopback interface, and fail the test.

    Yields the list of refused addresses (a test of the guard itself may inspect and clear it).
    """
    refused: list[Any] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOOPBACK:
            refused.append(address)
            raise ConnectionRefusedError(
                f"integration tests may only connect to 127.0.0.1: {address}"
            )

    def connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    # Belt and braces: whatever builds an OpenAI client gets the loopback and a dummy key.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    yield refused
    assert refused == [], f"non-loopback connections attempted: {refused}"


# --- in-memory OTel pipeline and the tracehound side ---------------------------------------------


@dataclass
class Capture:
    tracer_provider: TracerProvider
    logger_provider: LoggerProvider
    span_exporter: InMemorySpanExporter
    log_exporter: InMemoryLogRecordExporter

    def spans(self) -> list[ReadableSpan]:
        self.tracer_provider.force_flush()
        return list(self.span_exporter.get_finished_spans())

    def logs(self) -> list[ReadableLogRecord]:
        self.logger_provider.force_flush()
        return list(self.log_exporter.get_finished_logs())


@pytest.fixture
def capture() -> Iterator[Capture]:
    resource = Resource.create({"service.name": "tracehound-integration"})
    tracer_provider = TracerProvider(resource=resource)
    span_exporter = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    logger_provider = LoggerProvider(resource=resource)
    log_exporter = InMemoryLogRecordExporter()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    yield Capture(tracer_provider, logger_provider, span_exporter, log_exporter)
    tracer_provider.shutdown()
    logger_provider.shutdown()


@dataclass
class Traced:
    """What tracehound made of one captured trace."""

    views: list[SpanView]
    normalized: list[NormalizedSpan]
    trajectory: Trajectory

    def span(self, name: str, nth: int = 0) -> SpanView:
        """The nth span with this name, in start order."""
        found = sorted((v for v in self.views if v.name == name), key=lambda v: v.start_ns)
        return found[nth]

    def steps(self, kind: str) -> list[Step]:
        return [s for s in self.trajectory.steps if s.kind == kind]


def trace_of(spans: Sequence[ReadableSpan], logs: Sequence[ReadableLogRecord] = ()) -> Traced:
    """The tracehound pipeline, as a span processor runs it: views → normalize → trajectory."""
    views = [SpanView.from_readable(s) for s in spans]
    log_views = [
        LogView.from_sdk(
            r.log_record, r.instrumentation_scope.name if r.instrumentation_scope else ""
        )
        for r in logs
    ]
    by_span: dict[tuple[str, str], list[LogView]] = defaultdict(list)
    for log in log_views:
        by_span[(log.trace_id, log.span_id)].append(log)
    trace_ids = {v.trace_id for v in views}
    assert len(trace_ids) == 1, f"expected one trace, got {trace_ids}"
    normalized = [
        n
        for v in views
        if (n := normalize(v, by_span.get((v.trace_id, v.span_id), []))) is not None
    ]
    trajectory = build_trajectory(
        trace_ids.pop(),
        normalized,
        {v.span_id: v.parent_span_id for v in views},
        {v.span_id: v.name for v in views},
    )
    return Traced(views, normalized, trajectory)


def shape(step: Step) -> tuple[Any, ...]:
    """What a step says, without the ids and times that differ from run to run."""
    return (step.kind, step.tool, step.call_id, step.arguments, step.text, step.error)


def canonical(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"))


# --- pydantic-ai ---------------------------------------------------------------------------------

AGENT_NAME = "research_agent"
MODEL_NAME = "scripted-model"
INSTRUCTIONS = "You are a careful assistant. Use the tools, then answer."
WEATHER = {"Paris": "sunny, 21 C", "Oslo": "light rain, 9 C"}
LOOP_ARGS = {"job": "build-42"}
PAGE_ARGS = {"page": "home"}


def _tool_returns(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        for p in getattr(m, "parts", ())
        if isinstance(p, ToolReturnPart)
    ]


def weather_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks for Paris, then Oslo, then answers from both tool results."""
    results = _tool_returns(messages)
    if len(results) < 2:
        city = ("Paris", "Oslo")[len(results)]
        return ModelResponse(
            parts=[
                ToolCallPart(
                    "get_weather", {"city": city}, tool_call_id=f"call_w{len(results) + 1}"
                )
            ]
        )
    return ModelResponse(parts=[TextPart(f"Paris: {results[0]}. Oslo: {results[1]}.")])


def get_weather(city: str) -> str:
    """Current weather of a city."""
    return WEATHER[city]


def looping_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls check_status with the same arguments four times, then gives up."""
    results = _tool_returns(messages)
    if len(results) < 4:
        return ModelResponse(
            parts=[
                ToolCallPart(
                    "check_status", dict(LOOP_ARGS), tool_call_id=f"call_s{len(results) + 1}"
                )
            ]
        )
    return ModelResponse(parts=[TextPart("The build is still pending after 4 checks; giving up.")])


def check_status(job: str) -> str:
    """Status of a CI job."""
    return f"{job}: pending"


def failing_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if _tool_returns(messages):  # never reached: the tool raises
        return ModelResponse(parts=[TextPart("unreachable")])
    return ModelResponse(
        parts=[ToolCallPart("fetch_page", dict(PAGE_ARGS), tool_call_id="call_f1")]
    )


def fetch_page(page: str) -> str:
    """Fetch a page of the knowledge base."""
    raise RuntimeError(f"backend unavailable for {page}")


def run_agent(
    capture: Capture,
    version: int,
    model: Callable[[list[ModelMessage], AgentInfo], ModelResponse],
    tool: Callable[..., str],
    prompt: str,
) -> str:
    def settings() -> InstrumentationSettings:
        return InstrumentationSettings(
            tracer_provider=capture.tracer_provider,
            meter_provider=NoOpMeterProvider(),
            version=version,  # type: ignore[arg-type]
            include_content=True,
        )

    if version in (2, 3, 4):
        # pydantic-ai 2.68 deprecates formats 2-4 with a UserWarning subclass; assert it here
        # instead of filtering it (filterwarnings=error would otherwise fail the test).
        with pytest.warns(
            PydanticAIDeprecationWarning, match="versions 2, 3, and 4 are deprecated"
        ):
            instrumentation = settings()
    else:
        instrumentation = settings()
    agent = Agent(
        FunctionModel(model, model_name=MODEL_NAME),
        name=AGENT_NAME,
        instructions=INSTRUCTIONS,
        tools=[Tool(tool, takes_ctx=False)],
        capabilities=[Instrumentation(settings=instrumentation)],
    )
    # not run_sync: it leaves its event loop open as the thread's loop, for a later test to collect
    return asyncio.run(agent.run(prompt)).output


AGENT_SPAN = {2: "agent run", 5: f"invoke_agent {AGENT_NAME}", 6: f"invoke_agent {AGENT_NAME}"}


def tool_span_name(version: int, tool: str) -> str:
    return "running tool" if version == 2 else f"execute_tool {tool}"


def check_pydantic_common(traced: Traced, version: int) -> None:
    """Facts every pydantic-ai trajectory shares: one named run owning every step."""
    traj = traced.trajectory
    agent_span = traced.span(AGENT_SPAN[version])
    assert traj.conventions == ("pydantic_ai",)
    assert traj.problems == ()
    assert len(traj.runs) == 1
    run = traj.runs[0]
    assert (run.agent_name, run.run_id, run.implicit, run.parent_run_id) == (
        AGENT_NAME,
        agent_span.span_id,
        False,
        None,
    )
    assert run.service_name == "tracehound-integration"
    assert {s.run_id for s in traj.steps} == {agent_span.span_id}
    agent_steps = traced.steps("agent")
    assert [(s.span_id, s.agent) for s in agent_steps] == [(agent_span.span_id, AGENT_NAME)]
    assert traj.steps[0].kind == "agent"
    # Each tool execution is joined to the call the model made: same id, exec span recorded,
    # and its result comes from that execute_tool span (not a second copy from the next chat).
    for call in traced.steps("tool_call"):
        exec_span = next(
            v
            for v in traced.views
            if v.name == tool_span_name(version, call.tool or "")
            and v.get("gen_ai.tool.call.id") == call.call_id
        )
        assert call.exec_span_id == exec_span.span_id
        results = [r for r in traced.steps("tool_result") if r.call_id == call.call_id]
        assert [r.span_id for r in results] == [exec_span.span_id]
    for llm in traced.steps("llm"):
        assert llm.model == MODEL_NAME
        assert isinstance(llm.input_tokens, int) and llm.input_tokens > 0
        assert isinstance(llm.output_tokens, int) and llm.output_tokens > 0


def tool_result_roles(traced: Traced) -> set[str]:
    """Roles of the messages carrying tool results in the chat spans' inputs."""
    return {
        m.role
        for n in traced.normalized
        if n.operation == "llm"
        for m in n.input_messages
        if any(p.type == "tool_call_response" for p in m.parts)
    }


VERSIONS = pytest.mark.parametrize("version", [2, 5, 6])


@VERSIONS
def test_pydantic_ai_agent_uses_tool_results(capture: Capture, version: int) -> None:
    output = run_agent(capture, version, weather_model, get_weather, "Weather in Paris and Oslo?")
    traced = trace_of(capture.spans(), capture.logs())
    traj = traced.trajectory
    paris, oslo = canonical({"city": "Paris"}), canonical({"city": "Oslo"})
    assert output == "Paris: sunny, 21 C. Oslo: light rain, 9 C."
    assert [shape(s) for s in traj.steps] == [
        ("agent", None, None, None, None, None),
        ("system", None, None, None, INSTRUCTIONS, None),
        ("user", None, None, None, "Weather in Paris and Oslo?", None),
        ("llm", None, None, None, None, None),
        ("tool_call", "get_weather", "call_w1", paris, None, None),
        ("tool_result", "get_weather", "call_w1", None, "sunny, 21 C", None),
        ("llm", None, None, None, None, None),
        ("tool_call", "get_weather", "call_w2", oslo, None, None),
        ("tool_result", "get_weather", "call_w2", None, "light rain, 9 C", None),
        ("llm", None, None, None, None, None),
        ("assistant", None, None, None, output, None),
    ]
    check_pydantic_common(traced, version)
    assert traj.runs[0].declared_output == output
    assert traj.final_answer() == output
    # The answer really is built from what the tools returned.
    assert all(r.text and r.text in output for r in traced.steps("tool_result"))
    # Tool calls come from the chat span that produced them, in order.
    chats = [traced.span(f"chat {MODEL_NAME}", i).span_id for i in range(3)]
    assert [s.span_id for s in traced.steps("tool_call")] == chats[:2]
    assert [s.span_id for s in traced.steps("llm")] == chats
    assert traced.steps("assistant")[0].span_id == chats[2]
    assert tool_result_roles(traced) == ({"tool"} if version == 6 else {"user"})


@VERSIONS
def test_pydantic_ai_agent_looping_on_the_same_call(capture: Capture, version: int) -> None:
    output = run_agent(capture, version, looping_model, check_status, "Is build-42 done?")
    traced = trace_of(capture.spans(), capture.logs())
    traj = traced.trajectory
    args = canonical(LOOP_ARGS)
    loop = []
    for i in range(1, 5):
        loop += [
            ("llm", None, None, None, None, None),
            ("tool_call", "check_status", f"call_s{i}", args, None, None),
            ("tool_result", "check_status", f"call_s{i}", None, "build-42: pending", None),
        ]
    assert [shape(s) for s in traj.steps] == [
        ("agent", None, None, None, None, None),
        ("system", None, None, None, INSTRUCTIONS, None),
        ("user", None, None, None, "Is build-42 done?", None),
        *loop,
        ("llm", None, None, None, None, None),
        ("assistant", None, None, None, output, None),
    ]
    check_pydantic_common(traced, version)
    # The repeated calls stay distinct steps (loop detection counts them), with equal arguments.
    calls = traced.steps("tool_call")
    assert len({c.call_id for c in calls}) == 4
    assert len({c.exec_span_id for c in calls}) == 4
    assert {c.arguments for c in calls} == {args}
    assert traj.final_answer() == output == "The build is still pending after 4 checks; giving up."


@VERSIONS
def test_pydantic_ai_tool_raises(capture: Capture, version: int) -> None:
    with pytest.raises(RuntimeError, match="backend unavailable for home"):
        run_agent(capture, version, failing_model, fetch_page, "Open the home page.")
    traced = trace_of(capture.spans(), capture.logs())
    traj = traced.trajectory
    message = "RuntimeError: backend unavailable for home"
    assert [shape(s) for s in traj.steps] == [
        ("agent", None, None, None, None, None),
        ("system", None, None, None, INSTRUCTIONS, None),
        ("user", None, None, None, "Open the home page.", None),
        ("llm", None, None, None, None, None),
        ("tool_call", "fetch_page", "call_f1", canonical(PAGE_ARGS), None, None),
        ("tool_result", "fetch_page", "call_f1", None, None, message),
        ("error", None, None, None, None, message),
    ]
    check_pydantic_common(traced, version)
    agent_span = traced.span(AGENT_SPAN[version])
    assert traced.steps("error")[0].span_id == agent_span.span_id
    assert traj.runs[0].declared_output is None
    assert traj.final_answer() is None


# --- raw openai client: openai-v2 and OpenInference ----------------------------------------------

REQUEST_MODEL = "gpt-4o-mini"
RESPONSE_MODEL = "gpt-4o-mini-2024-07-18"
SYSTEM_PROMPT = "You are a research assistant. Use the search tool."
QUESTION = "What do the GenAI conventions say about tool spans?"
QUERY = {"query": "OpenTelemetry GenAI tool spans"}
SEARCH_RESULT = (
    "Tool executions are 'execute_tool {gen_ai.tool.name}' spans carrying gen_ai.tool.call.id, "
    "gen_ai.tool.call.arguments and gen_ai.tool.call.result."
)
FINAL_ANSWER = f"According to the search result: {SEARCH_RESULT}"
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the knowledge base.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}
SERVER_ERROR = "Error code: 500 - The server had an error while processing your request."


def search(query: str) -> str:
    return SEARCH_RESULT


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(Script(tool_name="search", tool_arguments=QUERY)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        yield server


def run_tool_loop(capture: Capture, server: FakeOpenAI, question: str = QUESTION) -> str:
    """A hand-written agent loop: call → run the requested tool → call again, in one app span."""
    tracer = capture.tracer_provider.get_tracer("tracehound.tests.app")
    with (
        openai.OpenAI(base_url=server.base_url, api_key="sk-test-dummy", max_retries=0) as client,
        tracer.start_as_current_span("agent_loop"),
    ):
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": question},
        ]
        first = client.chat.completions.create(
            model=REQUEST_MODEL, messages=messages, tools=[SEARCH_TOOL], temperature=0.2
        )
        reply = first.choices[0].message
        calls = reply.tool_calls or []
        messages.append(
            {
                "role": "assistant",
                "content": reply.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in calls
                ],
            }
        )
        tools = {"search": search}
        for c in calls:
            result = tools[c.function.name](**json.loads(c.function.arguments))
            messages.append({"role": "tool", "tool_call_id": c.id, "content": result})
        second = client.chat.completions.create(
            model=REQUEST_MODEL, messages=messages, tools=[SEARCH_TOOL], temperature=0.2
        )
        return second.choices[0].message.content or ""


def expected_loop_steps() -> list[tuple[Any, ...]]:
    return [
        ("system", None, None, None, SYSTEM_PROMPT, None),
        ("user", None, None, None, QUESTION, None),
        ("llm", None, None, None, None, None),
        ("tool_call", "search", "call_fake0001", canonical(QUERY), None, None),
        ("tool_result", "search", "call_fake0001", None, SEARCH_RESULT, None),
        ("llm", None, None, None, None, None),
        ("assistant", None, None, None, FINAL_ANSWER, None),
    ]


def check_raw_client_loop(traced: Traced, chat_span_name: str, model: str) -> None:
    """The tool call is recovered from call 1's output, its result from call 2's input."""
    traj = traced.trajectory
    app = traced.span("agent_loop")
    first, second = traced.span(chat_span_name, 0), traced.span(chat_span_name, 1)
    assert [shape(s) for s in traj.steps] == expected_loop_steps()
    assert traj.problems == ()
    (call,) = traced.steps("tool_call")
    (result,) = traced.steps("tool_result")
    assert call.span_id == first.span_id and call.exec_span_id is None
    assert result.span_id == second.span_id
    assert result.call_id == call.call_id
    llm_steps = traced.steps("llm")
    assert [(s.span_id, s.model, s.finish_reason) for s in llm_steps] == [
        (first.span_id, model, "tool_calls"),
        (second.span_id, model, "stop"),
    ]
    assert [(s.input_tokens, s.output_tokens) for s in llm_steps] == [(57, 18), (131, 42)]
    # No agent span: one implicit run named after the application's root span.
    assert len(traj.runs) == 1
    run = traj.runs[0]
    assert (run.run_id, run.agent_name, run.implicit) == (app.span_id, "agent_loop", True)
    assert {s.run_id for s in traj.steps} == {app.span_id}
    assert traj.final_answer() == FINAL_ANSWER


def check_raw_client_error(traced: Traced, chat_span_name: str, error: str) -> None:
    traj = traced.trajectory
    app = traced.span("agent_loop")
    (chat,) = [v for v in traced.views if v.name == chat_span_name]
    assert chat.is_error
    assert [shape(s) for s in traj.steps] == [
        ("system", None, None, None, SYSTEM_PROMPT, None),
        ("user", None, None, None, "FAIL: " + QUESTION, None),
        ("llm", None, None, None, None, None),
        ("error", None, None, None, None, error),
    ]
    assert traced.steps("llm")[0].finish_reason is None
    assert traced.steps("error")[0].span_id == chat.span_id
    assert [r.run_id for r in traj.runs] == [app.span_id]
    assert traj.final_answer() is None


def assert_fake_server_saw_tool_loop(server: FakeOpenAI) -> None:
    assert [r["path"] for r in server.requests] == ["/v1/chat/completions"] * 2
    second = server.requests[1]["body"]["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "call_fake0001", "content": SEARCH_RESULT}


CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")


@pytest.fixture
def openai_v2(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, capture: Capture
) -> Iterator[str]:
    """openai-v2 instrumented on the latest experimental conventions; param = capture mode."""
    mode = getattr(request, "param", "span_and_event")
    # Read by util-genai both at instrument time and on each call: set before instrumenting.
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT", raising=False)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", raising=False)
    completions = openai.resources.chat.completions.Completions
    original = completions.__dict__["create"]
    instrumentor = OpenAIV2Instrumentor()
    instrumentor.instrument(
        tracer_provider=capture.tracer_provider,
        logger_provider=capture.logger_provider,
        meter_provider=NoOpMeterProvider(),
    )
    assert completions.__dict__["create"] is not original
    try:
        yield mode
    finally:
        instrumentor.uninstrument()
    assert completions.__dict__["create"] is original


@pytest.fixture(name="openinference")
def openinference_instrumented(capture: Capture) -> Iterator[None]:
    original = openai.OpenAI.request
    instrumentor = OpenInferenceInstrumentor()
    instrumentor.instrument(tracer_provider=capture.tracer_provider)
    assert openai.OpenAI.request is not original
    try:
        yield
    finally:
        instrumentor.uninstrument()
    assert openai.OpenAI.request is original


@pytest.mark.parametrize("openai_v2", ["span_and_event", "span_only", "event_only"], indirect=True)
def test_openai_v2_tool_loop(capture: Capture, openai_v2: str, fake_openai: FakeOpenAI) -> None:
    mode = openai_v2
    assert run_tool_loop(capture, fake_openai) == FINAL_ANSWER
    assert_fake_server_saw_tool_loop(fake_openai)
    spans, logs = capture.spans(), capture.logs()
    chats = [s for s in spans if s.name == f"chat {REQUEST_MODEL}"]
    assert len(chats) == 2
    assert all(s.instrumentation_scope.name == "opentelemetry.util.genai.handler" for s in chats)
    # Where the content went: span attributes unless event_only, one details event per chat
    # call (joined by span id) unless span_only.
    on_spans = mode != "event_only"
    assert all((key in s.attributes) == on_spans for s in chats for key in CONTENT_KEYS[:2])
    assert not any("gen_ai.system_instructions" in s.attributes for s in chats)
    if mode == "span_only":
        assert logs == []
    else:
        assert [r.log_record.event_name for r in logs] == [
            "gen_ai.client.inference.operation.details"
        ] * 2
        assert [r.log_record.span_id for r in logs] == [s.context.span_id for s in chats]
        assert all("gen_ai.input.messages" in r.log_record.attributes for r in logs)

    traced = trace_of(spans, logs)
    assert traced.trajectory.conventions == ("otel_genai",)
    # Same trajectory whatever carried the content.
    check_raw_client_loop(traced, f"chat {REQUEST_MODEL}", REQUEST_MODEL)
    spans_alone = trace_of(spans).trajectory
    if mode == "event_only":  # the steps really came from the log events
        assert [s.kind for s in spans_alone.steps] == ["llm", "llm"]
    else:  # content on both carriers is not counted twice
        assert spans_alone == traced.trajectory


def test_openai_v2_server_error(capture: Capture, openai_v2: str, fake_openai: FakeOpenAI) -> None:
    with pytest.raises(openai.InternalServerError):
        run_tool_loop(capture, fake_openai, question="FAIL: " + QUESTION)
    assert len(fake_openai.requests) == 1  # max_retries=0: no retry
    spans, logs = capture.spans(), capture.logs()
    (chat,) = [s for s in spans if s.name == f"chat {REQUEST_MODEL}"]
    # openai-v2 2.4b0 passes the exception *class* as error.type; the SDK stringifies it.
    assert chat.attributes["error.type"] == "<class 'openai.InternalServerError'>"
    assert chat.status.description == SERVER_ERROR
    traced = trace_of(spans, logs)
    check_raw_client_error(traced, f"chat {REQUEST_MODEL}", SERVER_ERROR)
    assert traced.steps("llm")[0].model == REQUEST_MODEL
    assert trace_of(spans).trajectory == traced.trajectory


def test_openinference_tool_loop(
    capture: Capture, openinference: None, fake_openai: FakeOpenAI
) -> None:
    assert run_tool_loop(capture, fake_openai) == FINAL_ANSWER
    assert_fake_server_saw_tool_loop(fake_openai)
    spans, logs = capture.spans(), capture.logs()
    assert logs == []  # OpenInference puts everything on span attributes
    chats = [s for s in spans if s.name == "ChatCompletion"]
    assert len(chats) == 2
    assert all(s.attributes["openinference.span.kind"] == "LLM" for s in chats)
    traced = trace_of(spans, logs)
    assert traced.trajectory.conventions == ("openinference",)
    check_raw_client_loop(traced, "ChatCompletion", RESPONSE_MODEL)


def test_openinference_server_error(
    capture: Capture, openinference: None, fake_openai: FakeOpenAI
) -> None:
    with pytest.raises(openai.InternalServerError):
        run_tool_loop(capture, fake_openai, question="FAIL: " + QUESTION)
    assert len(fake_openai.requests) == 1
    traced = trace_of(capture.spans(), capture.logs())
    check_raw_client_error(traced, "ChatCompletion", f"openai.InternalServerError: {SERVER_ERROR}")


def test_instrumentation_is_removed_between_tests(
    capture: Capture, fake_openai: FakeOpenAI
) -> None:
    """Runs after the instrumented tests (file order): no library still patches openai."""
    assert run_tool_loop(capture, fake_openai) == FINAL_ANSWER
    assert [s.name for s in capture.spans()] == ["agent_loop"]
    assert capture.logs() == []


def test_network_guard_refuses_non_loopback(loopback_only: list[Any]) -> None:
    """The guard the other tests rely on: a non-loopback connection never leaves the process."""
    with pytest.raises(ConnectionRefusedError, match="only connect to 127"):
        socket.create_connection(("192.0.2.1", 443), timeout=0.5)  # TEST-NET-1
    assert loopback_only == [("192.0.2.1", 443)]
    loopback_only.clear()
    with FakeOpenAI() as server, socket.create_connection(server.server_address, timeout=2):
        pass
    assert loopback_only == []


def _post(server: FakeOpenAI, body: dict[str, Any], path: str = "/v1/chat/completions") -> Any:
    connection = http.client.HTTPConnection(*server.server_address, timeout=5)
    try:
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_fake_openai_script() -> None:
    """The fake endpoint: a tool call first, then a text quoting the tool result; 500 on FAIL."""
    script = Script(tool_name="lookup", tool_arguments={"key": "x"})
    user = {"role": "user", "content": "hi"}
    with FakeOpenAI(script) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        status, first = _post(server, {"model": "m", "messages": [user]})
        assert status == 200
        (choice,) = first["choices"]
        assert choice["finish_reason"] == "tool_calls"
        (call,) = choice["message"]["tool_calls"]
        assert call == {
            "id": "call_fake0001",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"key": "x"}'},
        }
        history = [
            user,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_fake0001", "content": "the value is 42"},
        ]
        status, second = _post(server, {"model": "m", "messages": history})
        assert status == 200
        assert second["model"] == "m-2024-07-18"
        assert second["choices"][0]["finish_reason"] == "stop"
        assert second["choices"][0]["message"]["content"] == (
            "According to the search result: the value is 42"
        )
        failing = {"role": "user", "content": [{"type": "text", "text": "please FAIL"}]}
        status, error = _post(server, {"model": "m", "messages": [failing]})
        assert (status, error["error"]["type"]) == (500, "server_error")
        status, _ = _post(server, {"model": "m"}, path="/v1/embeddings")
        assert status == 404
        assert [r["path"] for r in server.requests] == ["/v1/chat/completions"] * 3 + [
            "/v1/embeddings"
        ]
