"""Agent traces written with the real OTel SDK from each convention's documented description.

Each scenario emits what one instrumentation family emits (attribute keys exactly as in
conventions.md, Parts A–D) for a short agent run. They are shared by the convention tests, the run
tests and the span-order property test. Span names, texts and ids are module constants so the
tests can spell out the exact steps they expect.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from _sdk import Recorder, dumps
from opentelemetry.trace import SpanKind

CLIENT = SpanKind.CLIENT
SERVER = SpanKind.SERVER

# --- shared content ---------------------------------------------------------------------------

SYSTEM = "You answer weather questions in one sentence."
QUESTION = "What is the weather in Paris?"
CITY_ARGS = {"city": "Paris"}
CITY_ARGS_JSON = '{"city": "Paris"}'  # as OpenAI returns `function.arguments`: a JSON string
CANON_CITY = '{"city":"Paris"}'  # canonical form in Step.arguments
WEATHER = "Sunny, 21 C, light wind from the west."
ANSWER = "It is sunny and 21 C in Paris."


def text_message(role: str, content: str) -> dict[str, Any]:
    """An OTel GenAI `ChatMessage` with one text part."""
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def tool_call_message(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}],
    }


def tool_response_message(
    call_id: str, response: str, *, key: str = "response", role: str = "tool"
) -> dict[str, Any]:
    return {
        "role": role,
        "parts": [{"type": "tool_call_response", "id": call_id, key: response}],
    }


def legacy_tool_calls(call_id: str) -> list[dict[str, Any]]:
    """`tool_calls` of a legacy assistant/choice body (`function.arguments` a JSON string)."""
    return [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": "weather", "arguments": CITY_ARGS_JSON},
        }
    ]


# --- OTel GenAI legacy (≤1.36): per-message log events ------------------------------------------

LEGACY_CHAT = "chat gpt-4o-mini"


def legacy_openai(
    rec: Recorder, *, name_in_attribute: bool = False, tool_calls_in_message: bool = False
) -> None:
    """openai-v2 2.2 default mode: spans with `gen_ai.system` only, content in log events.

    `name_in_attribute`: the event name only in an `event.name` attribute (SDK 1.36 Events API,
    pydantic-ai 1.x logs mode). `tool_calls_in_message`: the choice's `tool_calls` inside
    `message` (openai-v2 2.2) rather than beside it (deprecated spec, Traceloop).
    """
    span_attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    }
    event_attrs = {"gen_ai.system": "openai"}

    def event(name: str, body: dict[str, Any]) -> None:
        rec.event(name, body, event_attrs, name_in_attribute=name_in_attribute)

    calls = legacy_tool_calls("call_1")
    if tool_calls_in_message:
        choice = {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {"role": "assistant", "tool_calls": calls},
        }
    else:
        choice = {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {"role": "assistant"},
            "tool_calls": calls,
        }
    with rec.span("agent_loop"):
        usage = {"gen_ai.usage.prompt_tokens": 57, "gen_ai.usage.completion_tokens": 18}
        with rec.span(LEGACY_CHAT, {**span_attrs, **usage}, kind=CLIENT):
            event("gen_ai.system.message", {"content": SYSTEM})
            event("gen_ai.user.message", {"content": QUESTION})
            event("gen_ai.choice", choice)
        usage = {"gen_ai.usage.prompt_tokens": 131, "gen_ai.usage.completion_tokens": 42}
        with rec.span(LEGACY_CHAT, {**span_attrs, **usage}, kind=CLIENT):
            event("gen_ai.system.message", {"content": SYSTEM})
            event("gen_ai.user.message", {"content": QUESTION})
            event("gen_ai.assistant.message", {"tool_calls": legacy_tool_calls("call_1")})
            event("gen_ai.tool.message", {"content": WEATHER, "id": "call_1"})
            event(
                "gen_ai.choice",
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": ANSWER},
                },
            )


TRACELOOP_CHAT = "openai.chat"


def traceloop_events(rec: Recorder) -> None:
    """Traceloop openai 0.62 with `use_attributes=False`: a raw-client two-call loop.

    No tool span; the tool message carries no `id`; events name `gen_ai.provider.name`.
    """
    span_attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.is_streaming": False,
        "gen_ai.openai.api_base": "http://127.0.0.1:8000/v1/",
    }
    event_attrs = {"gen_ai.provider.name": "openai"}
    with rec.span("agent_loop"):
        with rec.span(
            TRACELOOP_CHAT,
            {**span_attrs, "gen_ai.response.finish_reasons": ("tool_call",)},
            kind=CLIENT,
        ):
            rec.event("gen_ai.system.message", {"content": SYSTEM}, event_attrs)
            rec.event("gen_ai.user.message", {"content": QUESTION}, event_attrs)
            rec.event(
                "gen_ai.choice",
                {
                    "index": 0,
                    "message": {"content": ""},
                    "finish_reason": "tool_calls",
                    "tool_calls": legacy_tool_calls("call_1"),
                },
                event_attrs,
            )
        with rec.span(
            TRACELOOP_CHAT,
            {**span_attrs, "gen_ai.response.finish_reasons": ("stop",)},
            kind=CLIENT,
        ):
            rec.event("gen_ai.system.message", {"content": SYSTEM}, event_attrs)
            rec.event("gen_ai.user.message", {"content": QUESTION}, event_attrs)
            rec.event(
                "gen_ai.assistant.message",
                {"content": "", "tool_calls": legacy_tool_calls("call_1")},
                event_attrs,
            )
            rec.event("gen_ai.tool.message", {"content": WEATHER}, event_attrs)  # no id
            rec.event(
                "gen_ai.choice",
                {"index": 0, "message": {"content": ANSWER}, "finish_reason": "stop"},
                event_attrs,
            )


PYDANTIC_SCOPE = "pydantic-ai"
PYDANTIC_1X_CHAT = "chat scripted-model"
THINKING = "The tool reported sun, so answer with it."


def pydantic_1x_logs(rec: Recorder) -> None:
    """pydantic-ai 1.0 instrumentation v1, `event_mode='logs'`: `agent run` / `running tool`,
    events named only by an `event.name` attribute, thinking in the choice's content list."""
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "function",
        "gen_ai.request.model": "scripted-model",
        "gen_ai.response.model": "scripted-model",
        "model_request_parameters": dumps({"function_tools": []}),
    }

    def event(name: str, body: dict[str, Any], index: int) -> None:
        rec.event(
            name,
            body,
            {"gen_ai.system": "function", "gen_ai.message.index": index},
            name_in_attribute=True,
            scope=PYDANTIC_SCOPE,
        )

    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": CITY_ARGS},  # an object in pydantic-ai
    }
    agent_attrs = {
        "gen_ai.agent.name": "weather_agent",
        "agent_name": "weather_agent",
        "model_name": "scripted-model",
        "final_result": ANSWER,
        "gen_ai.usage.input_tokens": 90,
        "gen_ai.usage.output_tokens": 20,
    }
    with rec.span("agent run", agent_attrs, scope=PYDANTIC_SCOPE):
        usage = {"gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 8}
        with rec.span(PYDANTIC_1X_CHAT, {**chat, **usage}, scope=PYDANTIC_SCOPE):
            event("gen_ai.system.message", {"content": SYSTEM, "role": "system"}, 0)
            event("gen_ai.user.message", {"content": QUESTION, "role": "user"}, 0)
            event(
                "gen_ai.choice",
                {"index": 0, "message": {"role": "assistant", "tool_calls": [call]}},
                1,
            )
        with (
            rec.span(
                "running tools",
                {"tools": ("weather",), "logfire.msg": "running 1 tool"},
                scope=PYDANTIC_SCOPE,
            ),
            rec.span(
                "running tool",
                {
                    "gen_ai.tool.name": "weather",
                    "gen_ai.tool.call.id": "call_1",
                    "tool_arguments": dumps(CITY_ARGS),
                    "tool_response": WEATHER,
                    "logfire.msg": "running tool: weather",
                },
                scope=PYDANTIC_SCOPE,
            ),
        ):
            pass
        usage = {"gen_ai.usage.input_tokens": 50, "gen_ai.usage.output_tokens": 12}
        with rec.span(PYDANTIC_1X_CHAT, {**chat, **usage}, scope=PYDANTIC_SCOPE):
            event("gen_ai.system.message", {"content": SYSTEM, "role": "system"}, 0)
            event("gen_ai.user.message", {"content": QUESTION, "role": "user"}, 0)
            event("gen_ai.assistant.message", {"role": "assistant", "tool_calls": [call]}, 1)
            tool_body = {"content": WEATHER, "role": "tool", "id": "call_1", "name": "weather"}
            event("gen_ai.tool.message", tool_body, 2)
            content = [{"kind": "thinking", "text": THINKING}, {"kind": "text", "text": ANSWER}]
            event(
                "gen_ai.choice",
                {"index": 0, "message": {"role": "assistant", "content": content}},
                3,
            )


# --- OTel GenAI current: gen_ai.client.inference.operation.details event --------------------

DETAILS_CHAT = "chat gpt-4o-mini"


def details_event(rec: Recorder) -> None:
    """openai-v2 2.4 latest mode, `EVENT_ONLY`: no content on the span; the details event carries
    the messages as structured values (array of kvlist), and an empty body."""
    span_attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.usage.input_tokens": 25,
        "gen_ai.usage.output_tokens": 11,
        "gen_ai.response.finish_reasons": ("stop",),
    }
    with rec.span("agent_loop"), rec.span(DETAILS_CHAT, span_attrs, kind=CLIENT):
        rec.event(
            "gen_ai.client.inference.operation.details",
            None,
            {
                **span_attrs,
                "gen_ai.system_instructions": [{"type": "text", "content": SYSTEM}],
                "gen_ai.input.messages": [text_message("user", QUESTION)],
                "gen_ai.output.messages": [
                    {**text_message("assistant", ANSWER), "finish_reason": "stop"}
                ],
            },
            scope="opentelemetry.util.genai.handler",
        )


# --- OTel GenAI current: agent with retrieval, chat and execute_tool spans -------------------

AGENT = "invoke_agent weather_agent"
CHAT = "chat gpt-4o"
TOOL = "execute_tool weather"
RETRIEVAL = "retrieval kb"
DOCS = [
    {"id": "doc-1", "score": 0.92, "content": "Paris has mild springs."},
    {"id": "doc-2", "score": 0.41, "content": "Umbrellas are sold everywhere."},
]
REASONING = "The forecast tool says sunny; the documents agree it is mild."


def _chat_attrs(inputs: list[Any], outputs: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.input.messages": dumps(inputs),
        "gen_ai.output.messages": dumps(outputs),
        **extra,
    }


def _agent_attrs(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "openai",
        "gen_ai.agent.name": name,
        **extra,
    }


def _tool_attrs(name: str, call_id: str, arguments: Any, result: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.call.arguments": dumps(arguments),
        "gen_ai.tool.call.result": result,
    }


def genai_agent(
    rec: Recorder,
    *,
    tool_span: bool = True,
    response_key: str = "response",
    tool_role: str = "tool",
    reasoning_type: str = "reasoning",
) -> None:
    """An `invoke_agent` run: retrieval, chat → tool call, execute_tool, chat → answer.

    `tool_span=False` is the raw-client shape (no execute_tool span). The variants are those of
    Part D: tool result key `response` / `result`, role `tool` / `user`, part `reasoning` /
    `thinking`.
    """
    history = [text_message("system", SYSTEM), text_message("user", QUESTION)]
    call = tool_call_message("call_w1", "weather", CITY_ARGS)
    response = tool_response_message("call_w1", WEATHER, key=response_key, role=tool_role)
    with rec.span(AGENT, _agent_attrs("weather_agent")):
        with rec.span(
            RETRIEVAL,
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.provider.name": "openai",
                "gen_ai.data_source.id": "kb",
                "gen_ai.retrieval.query.text": "Paris weather",
                "gen_ai.request.top_k": 2,
                "gen_ai.retrieval.documents": dumps(DOCS),
            },
            kind=CLIENT,
        ):
            pass
        with rec.span(
            CHAT,
            _chat_attrs(history, [{**call, "finish_reason": "tool_call"}]),
            kind=CLIENT,
        ):
            pass
        if tool_span:
            with rec.span(TOOL, _tool_attrs("weather", "call_w1", CITY_ARGS, WEATHER)):
                pass
        output = {
            "role": "assistant",
            "parts": [
                {"type": reasoning_type, "content": REASONING},
                {"type": "text", "content": ANSWER},
            ],
            "finish_reason": "stop",
        }
        with rec.span(CHAT, _chat_attrs([*history, call, response], [output]), kind=CLIENT):
            pass


# --- OTel GenAI current: multi-agent, and an agent invoked as a tool ---------------------------

PLANNER = "invoke_agent planner"
WRITER = "invoke_agent writer"
CRITIC = "invoke_agent critic"
DELEGATE = "execute_tool writer"
DRAFT = "Day 1: the Louvre. Day 2: Montmartre."
REVIEW = "The plan is realistic."
PLAN = "Two days: the Louvre, then Montmartre."


def multi_agent(rec: Recorder) -> None:
    """planner → (chat → tool call `writer`; execute_tool writer → invoke_agent writer → chat);
    invoke_agent critic → chat; final chat of the planner."""
    ask = text_message("user", "Plan two days in Paris.")
    delegate = tool_call_message("call_d1", "writer", {"topic": "two days in Paris"})
    with rec.span(PLANNER, _agent_attrs("planner")):
        with rec.span(
            CHAT, _chat_attrs([ask], [{**delegate, "finish_reason": "tool_call"}]), kind=CLIENT
        ):
            pass
        with (
            rec.span(
                DELEGATE, _tool_attrs("writer", "call_d1", {"topic": "two days in Paris"}, DRAFT)
            ),
            rec.span(WRITER, _agent_attrs("writer")),
            rec.span(
                CHAT,
                _chat_attrs(
                    [text_message("user", "Write: two days in Paris")],
                    [{**text_message("assistant", DRAFT), "finish_reason": "stop"}],
                ),
                kind=CLIENT,
            ),
        ):
            pass
        with (
            rec.span(CRITIC, _agent_attrs("critic")),
            rec.span(
                CHAT,
                _chat_attrs(
                    [text_message("user", f"Review: {DRAFT}")],
                    [{**text_message("assistant", REVIEW), "finish_reason": "stop"}],
                ),
                kind=CLIENT,
            ),
        ):
            pass
        response = tool_response_message("call_d1", DRAFT)
        with rec.span(
            CHAT,
            _chat_attrs(
                [ask, delegate, response],
                [{**text_message("assistant", PLAN), "finish_reason": "stop"}],
            ),
            kind=CLIENT,
        ):
            pass


# --- OpenInference (LangChain, conventions.md B7) -----------------------------------------------

OI_SCOPE = "openinference.instrumentation.langchain"
OI_AGENT = "research_agent"
OI_RETRIEVER = "KBRetriever"
OI_CHAIN = "RunnableSequence"
OI_LLM = "FakeMessagesListChatModel"
OI_TOOL = "search"
OI_QUERY = "OpenTelemetry"
OI_RESULT = "OpenTelemetry is a CNCF observability framework."
OI_ANSWER = "OpenTelemetry is an observability framework from the CNCF."
OI_SYSTEM = "Answer with the search tool."
OI_QUESTION = "What is OpenTelemetry?"


def _oi_input_history() -> dict[str, Any]:
    return {
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": OI_SYSTEM,
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": OI_QUESTION,
    }


def openinference_langchain(rec: Recorder) -> None:
    """AGENT root with RETRIEVER, CHAIN ⊃ LLM (tool call), TOOL (no tool.id, bare query string
    input, ToolMessage JSON output) and LLM (tool message with tool_call_id) children."""
    call_prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
    with rec.span(
        OI_AGENT,
        {
            "openinference.span.kind": "AGENT",
            "input.value": OI_QUESTION,
            "output.value": OI_ANSWER,
        },
        scope=OI_SCOPE,
    ):
        with rec.span(
            OI_RETRIEVER,
            {
                "openinference.span.kind": "RETRIEVER",
                "input.value": OI_QUERY,
                "retrieval.documents.0.document.id": "doc-1",
                "retrieval.documents.0.document.content": "OpenTelemetry is a CNCF project.",
                "retrieval.documents.0.document.score": 0.87,
                "retrieval.documents.1.document.content": "Spans form traces.",
                "retrieval.documents.1.document.metadata": dumps({"score": 0.2}),
                "metadata": dumps({"ls_retriever_name": "kb"}),
            },
            scope=OI_SCOPE,
        ):
            pass
        with (
            rec.span(
                OI_CHAIN,
                {"openinference.span.kind": "CHAIN", "input.value": OI_QUESTION},
                scope=OI_SCOPE,
            ),
            rec.span(
                OI_LLM,
                {
                    "openinference.span.kind": "LLM",
                    "llm.provider": "fakemessageslistchatmodel",
                    "llm.invocation_parameters": dumps({"_type": "fake-messages-list-chat-model"}),
                    "input.value": dumps({"messages": [[{"type": "human"}]]}),
                    "output.value": dumps({"generations": [[{"type": "ChatGeneration"}]]}),
                    **_oi_input_history(),
                    "llm.output_messages.0.message.role": "assistant",
                    call_prefix + "id": "call_s1",
                    call_prefix + "function.name": "search",
                    call_prefix + "function.arguments": dumps({"query": OI_QUERY}),
                },
                scope=OI_SCOPE,
            ),
        ):
            pass
        tool_message = {"type": "tool", "data": {"content": OI_RESULT, "type": "tool"}}
        with rec.span(
            OI_TOOL,
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "search",
                "tool.description": "Search the knowledge base.",
                "input.value": OI_QUERY,
                "output.value": dumps(tool_message),
            },
            scope=OI_SCOPE,
        ):
            pass
        history_call = "llm.input_messages.2.message.tool_calls.0.tool_call."
        with rec.span(
            OI_LLM,
            {
                "openinference.span.kind": "LLM",
                "llm.provider": "fakemessageslistchatmodel",
                **_oi_input_history(),
                "llm.input_messages.2.message.role": "assistant",
                history_call + "id": "call_s1",
                history_call + "function.name": "search",
                history_call + "function.arguments": dumps({"query": OI_QUERY}),
                "llm.input_messages.3.message.role": "tool",
                "llm.input_messages.3.message.content": OI_RESULT,
                "llm.input_messages.3.message.tool_call_id": "call_s1",
                "llm.input_messages.3.message.name": "search",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": OI_ANSWER,
            },
            scope=OI_SCOPE,
        ):
            pass


# --- OpenLLMetry / Traceloop decorators, legacy indexed content, vector DB ---------------------

TL_WORKFLOW = "trip.workflow"
TL_AGENT = "planner.agent"
TL_VECTOR = "chroma.query"
TL_TOOL = "weather.tool"
TL_CHAT = "openai.chat"
TL_DOC_1 = "Paris gets spring showers."
TL_DOC_2 = "Pack layers for April."
TL_FORECAST = "Rain likely in the afternoon"
TL_ANSWER = "Pack an umbrella for the afternoon rain."


def _tl_prompt_history() -> dict[str, Any]:
    return {
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": SYSTEM,
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": QUESTION,
    }


def traceloop_decorators(rec: Recorder) -> None:
    """@workflow → @agent → (vector-DB query with `db.query.result` events, openai.chat with
    legacy `gen_ai.prompt.N` / `gen_ai.completion.N`, @tool, openai.chat)."""
    chat = {
        "llm.request.type": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
    }
    with (
        rec.span(
            TL_WORKFLOW,
            {
                "traceloop.span.kind": "workflow",
                "traceloop.entity.name": "trip",
                "traceloop.workflow.name": "trip",
                "traceloop.entity.input": dumps({"args": ["Paris"], "kwargs": {}}),
                "traceloop.entity.output": dumps(TL_ANSWER),
            },
        ),
        rec.span(
            TL_AGENT,
            {
                "traceloop.span.kind": "agent",
                "traceloop.entity.name": "planner",
                "traceloop.workflow.name": "trip",
                "traceloop.entity.input": dumps({"args": [], "kwargs": {"city": "Paris"}}),
                "traceloop.entity.output": dumps(TL_ANSWER),
            },
        ),
    ):
        with rec.span(
            TL_VECTOR,
            {"db.system": "chroma", "db.operation": "query", "db.vector.query.top_k": 2},
            kind=CLIENT,
        ) as span:
            span.add_event(
                "db.query.result",
                {
                    "db.query.result.id": "w1",
                    "db.query.result.score": 0.83,
                    "db.query.result.document": TL_DOC_1,
                },
                timestamp=rec.clock.tick(),
            )
            span.add_event(
                "db.query.result",
                {
                    "db.query.result.id": "w2",
                    "db.query.result.score": 0.61,
                    "db.query.result.document": TL_DOC_2,
                },
                timestamp=rec.clock.tick(),
            )
        calls = "gen_ai.completion.0.tool_calls.0."
        with rec.span(
            TL_CHAT,
            {
                **chat,
                "gen_ai.usage.prompt_tokens": 64,
                "gen_ai.usage.completion_tokens": 15,
                **_tl_prompt_history(),
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.finish_reason": "tool_calls",
                calls + "id": "call_t1",
                calls + "name": "weather",
                calls + "arguments": CITY_ARGS_JSON,
            },
            kind=CLIENT,
        ):
            pass
        with rec.span(
            TL_TOOL,
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "weather",
                "traceloop.workflow.name": "trip",
                "traceloop.entity.input": dumps({"args": [], "kwargs": CITY_ARGS}),
                "traceloop.entity.output": dumps(TL_FORECAST),
            },
        ):
            pass
        history = "gen_ai.prompt.2.tool_calls.0."
        with rec.span(
            TL_CHAT,
            {
                **chat,
                "gen_ai.usage.prompt_tokens": 101,
                "gen_ai.usage.completion_tokens": 12,
                **_tl_prompt_history(),
                "gen_ai.prompt.2.role": "assistant",
                history + "id": "call_t1",
                history + "name": "weather",
                history + "arguments": CITY_ARGS_JSON,
                "gen_ai.prompt.3.role": "tool",
                "gen_ai.prompt.3.content": TL_FORECAST,
                "gen_ai.prompt.3.tool_call_id": "call_t1",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": TL_ANSWER,
                "gen_ai.completion.0.finish_reason": "stop",
            },
            kind=CLIENT,
        ):
            pass


# --- Vercel AI SDK ----------------------------------------------------------------------------

V_TOP = "ai.generateText"
V_CALL = "ai.generateText.doGenerate"
V_TOOL = "ai.toolCall"
V_RESULT = {"sky": "sunny", "celsius": 21}


def vercel_ai(rec: Recorder) -> None:
    """ai.generateText (functionId) → doGenerate (tool call) → ai.toolCall → doGenerate."""
    model = {"ai.model.id": "gpt-4o", "ai.model.provider": "openai.chat"}
    system = {"role": "system", "content": SYSTEM}
    user = {"role": "user", "content": [{"type": "text", "text": QUESTION}]}
    with rec.span(
        V_TOP,
        {
            "ai.operationId": "ai.generateText",
            "operation.name": "ai.generateText weather-bot",
            "ai.telemetry.functionId": "weather-bot",
            "ai.telemetry.metadata.user": "u-42",
            **model,
            "ai.prompt": dumps({"system": SYSTEM, "prompt": QUESTION}),
            "ai.response.text": ANSWER,
            "ai.response.finishReason": "stop",
        },
    ):
        with rec.span(
            V_CALL,
            {
                "ai.operationId": V_CALL,
                **model,
                "gen_ai.system": "openai.chat",
                "gen_ai.request.model": "gpt-4o",
                "ai.prompt.messages": dumps([system, user]),
                "ai.response.toolCalls": dumps(
                    [
                        {
                            "toolCallType": "function",
                            "toolCallId": "call_v1",
                            "toolName": "weather",
                            "args": CITY_ARGS_JSON,
                        }
                    ]
                ),
                "ai.response.finishReason": "tool-calls",
                "ai.usage.promptTokens": 48,
                "ai.usage.completionTokens": 14,
            },
            kind=CLIENT,
        ):
            pass
        with rec.span(
            V_TOOL,
            {
                "ai.operationId": "ai.toolCall",
                "ai.toolCall.name": "weather",
                "ai.toolCall.id": "call_v1",
                "ai.toolCall.args": CITY_ARGS_JSON,
                "ai.toolCall.result": dumps(V_RESULT),
            },
        ):
            pass
        call_part = {
            "type": "tool-call",
            "toolCallId": "call_v1",
            "toolName": "weather",
            "args": CITY_ARGS,
        }
        result_part = {
            "type": "tool-result",
            "toolCallId": "call_v1",
            "toolName": "weather",
            "result": V_RESULT,
        }
        with rec.span(
            V_CALL,
            {
                "ai.operationId": V_CALL,
                **model,
                "gen_ai.system": "openai.chat",
                "gen_ai.request.model": "gpt-4o",
                "ai.prompt.messages": dumps(
                    [
                        system,
                        user,
                        {"role": "assistant", "content": [call_part]},
                        {"role": "tool", "content": [result_part]},
                    ]
                ),
                "ai.response.text": ANSWER,
                "ai.response.finishReason": "stop",
                "ai.usage.promptTokens": 90,
                "ai.usage.completionTokens": 11,
            },
            kind=CLIENT,
        ):
            pass


# --- dedupe -----------------------------------------------------------------------------------

HELLO = "Hello! How can I help?"
DONE = "Bye."


def repeated_history(rec: Recorder) -> None:
    """Three chat calls resending the whole history. The user says "hi" twice (the second time
    in call 2's history) and the model answers it the same way twice (calls 1 and 2), so call
    3's history holds both repeats."""
    system = text_message("system", SYSTEM)
    hi = text_message("user", "hi")
    hello = text_message("assistant", HELLO)
    bye = text_message("user", "bye")
    with rec.span(AGENT, _agent_attrs("weather_agent")):
        for inputs, output in (
            ([system, hi], HELLO),
            ([system, hi, hello, hi], HELLO),
            ([system, hi, hello, hi, hello, bye], DONE),
        ):
            with rec.span(
                CHAT,
                _chat_attrs(
                    inputs, [{**text_message("assistant", output), "finish_reason": "stop"}]
                ),
                kind=CLIENT,
            ):
                pass


FANOUT = "invoke_agent fanout"
SEARCH_TOOL = "execute_tool search"
ALPHA = "Alpha is the first letter."
BETA = "Beta is the second letter."


def parallel_fanout(rec: Recorder, *, same_times: bool = False) -> None:
    """One chat asks for two `search` calls; their execute_tool spans overlap in time (the first
    started ends last), or, with `same_times`, start and end at the very same instants."""
    ask = text_message("user", "Explain alpha and beta.")
    calls = {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "id": "call_a", "name": "search", "arguments": {"q": "alpha"}},
            {"type": "tool_call", "id": "call_b", "name": "search", "arguments": {"q": "beta"}},
        ],
        "finish_reason": "tool_call",
    }
    with rec.span(FANOUT, _agent_attrs("fanout")):
        with rec.span(CHAT, _chat_attrs([ask], [calls]), kind=CLIENT):
            pass
        a_start = rec.clock.tick()
        b_start = a_start if same_times else rec.clock.tick()
        b_end = rec.clock.tick()
        a_end = b_end if same_times else rec.clock.tick()
        with rec.span(
            SEARCH_TOOL,
            _tool_attrs("search", "call_a", {"q": "alpha"}, ALPHA),
            start=a_start,
            end=a_end,
        ):
            pass
        with rec.span(
            SEARCH_TOOL,
            _tool_attrs("search", "call_b", {"q": "beta"}, BETA),
            start=b_start,
            end=b_end,
        ):
            pass
        history = [
            ask,
            {k: v for k, v in calls.items() if k != "finish_reason"},
            tool_response_message("call_a", ALPHA),
            tool_response_message("call_b", BETA),
        ]
        with rec.span(
            CHAT,
            _chat_attrs(history, [{**text_message("assistant", DONE), "finish_reason": "stop"}]),
            kind=CLIENT,
        ):
            pass


# --- no agent span: an HTTP service making chat calls -------------------------------------------

HTTP_ROOT = "POST /ask"
HTTP_OUT = "POST"


def http_service(rec: Recorder) -> None:
    """A web handler (SERVER span, not GenAI) → app span → chat (+ its HTTP client span) ×2."""
    with (
        rec.span(
            HTTP_ROOT,
            {"http.request.method": "POST", "url.path": "/ask", "http.route": "/ask"},
            kind=SERVER,
        ),
        rec.span("handle_question"),
    ):
        for inputs, output in (
            ([text_message("user", QUESTION)], "Let me think."),
            (
                [text_message("user", QUESTION), text_message("assistant", "Let me think.")],
                ANSWER,
            ),
        ):
            with (
                rec.span(
                    CHAT,
                    _chat_attrs(
                        inputs, [{**text_message("assistant", output), "finish_reason": "stop"}]
                    ),
                    kind=CLIENT,
                ),
                rec.span(
                    HTTP_OUT,
                    {
                        "http.request.method": "POST",
                        "url.full": "https://api.openai.com/v1/chat/completions",
                        "http.response.status_code": 200,
                    },
                    kind=CLIENT,
                ),
            ):
                pass


# --- the catalogue used by the order property test ----------------------------------------------

SCENARIOS: dict[str, Callable[[Recorder], None]] = {
    "legacy_openai": legacy_openai,
    "legacy_openai_event_name_attr": partial(
        legacy_openai, name_in_attribute=True, tool_calls_in_message=True
    ),
    "traceloop_events": traceloop_events,
    "pydantic_1x_logs": pydantic_1x_logs,
    "details_event": details_event,
    "genai_agent": genai_agent,
    "genai_raw_client_variants": partial(
        genai_agent,
        tool_span=False,
        response_key="result",
        tool_role="user",
        reasoning_type="thinking",
    ),
    "multi_agent": multi_agent,
    "openinference_langchain": openinference_langchain,
    "traceloop_decorators": traceloop_decorators,
    "vercel_ai": vercel_ai,
    "repeated_history": repeated_history,
    "parallel_fanout": parallel_fanout,
    "parallel_fanout_same_times": partial(parallel_fanout, same_times=True),
    "http_service": http_service,
}
