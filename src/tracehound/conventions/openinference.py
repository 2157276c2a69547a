"""OpenInference (Arize): `openinference.span.kind` and flattened, indexed attributes.

Messages are flattened as `llm.input_messages.{i}.message.{role,content,tool_call_id,name}`, with
`...message.contents.{j}.message_content.{type,text}` and
`...message.tool_calls.{k}.tool_call.{id,function.name,function.arguments}`. Tool spans carry the
arguments and result in `input.value` / `output.value`; retriever spans carry
`retrieval.documents.{i}.document.{id,content,score}`.

Each framework's instrumentation gives these keys its own meaning, read here by scope: the
arguments a tool received inside a `{"args", "kwargs"}` call binding (smolagents, LlamaIndex);
tool results as a LangChain ToolMessage or a LlamaIndex ToolOutput; smolagents' `final_answer`
tool as its answer; LlamaIndex spans of kind LLM that made no model call; LangChain's AGENT kind,
which only says that a run's name contains "agent" (LangGraph nodes are steps of the graph, the
agent); the OpenAI Agents SDK's trace span, of kind AGENT but no agent; CrewAI's model tool
calls, recorded only as its `output.value`, and its agents named by role (`graph.node.id`);
AutoGen's text beside tool calls, recorded only as the `thought` in `output.value`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tracehound.conventions import genai
from tracehound.conventions._messages import failed_result
from tracehound.conventions.base import (
    MAX_JSON_BYTES,
    Document,
    Message,
    NormalizedSpan,
    Operation,
    Part,
    to_text,
)
from tracehound.spans import LogView, SpanView

NAME = "openinference"

KIND_MAP: dict[str, Operation] = {
    "LLM": "llm",
    "TOOL": "tool",
    "AGENT": "agent",
    "RETRIEVER": "retrieval",
    "EMBEDDING": "embeddings",
    "CHAIN": "workflow",
    "RERANKER": "other",
}


# The keys that make `detect` claim a span (it looks at nothing else).
CLAIM_KEYS = frozenset(("openinference.span.kind",))


def detect(view: SpanView, keys: frozenset[str]) -> bool:
    return not keys.isdisjoint(CLAIM_KEYS)


def _indexed(attrs: dict[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """Group `prefix.{i}.rest` keys into {i: {rest: value}}."""
    groups: dict[int, dict[str, Any]] = {}
    plen = len(prefix)
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[plen:].partition(".")
        if not index.isdigit() or not rest:
            continue
        groups.setdefault(int(index), {})[rest] = value
    return groups


# smolagents' memory roles: the model's earlier tool calls and the observations of their results,
# resent as text in every later LLM input. The calls were the LLM outputs, the results are on the
# TOOL spans: these echoes are not new steps (nor assistant text).
_ECHO_ROLES = frozenset(("tool-call", "tool-response"))


def _flat_messages(attrs: dict[str, Any], prefix: str) -> list[Message]:
    messages: list[Message] = []
    for _, fields in sorted(_indexed(attrs, prefix).items()):
        role = str(fields.get("message.role") or "assistant")
        if role in _ECHO_ROLES:
            continue
        parts: list[Part] = []
        content = fields.get("message.content")
        texts: list[str] = []
        for _, cfields in sorted(_indexed(fields, "message.contents.").items()):
            text = cfields.get("message_content.text")
            if text:
                texts.append(to_text(text) or "")
                parts.append(Part(type="text", content=texts[-1]))
        if role == "tool":
            parts = [
                Part(
                    type="tool_call_response",
                    id=_opt(fields.get("message.tool_call_id")),
                    name=_opt(fields.get("message.name")),
                    response=content,
                    content=to_text(content),
                )
            ]
        elif role == "function" and content is None:
            parts = _function_results(fields)
        elif content is not None and content != "":
            # The OpenAI Agents instrumentation records a message's text twice: as its content
            # parts and, joined, as `message.content`. The same text is one part.
            text = to_text(content)
            if not texts or (text not in texts and text != "".join(texts)):
                parts.insert(0, Part(type="text", content=text))
        for _, tfields in sorted(_indexed(fields, "message.tool_calls.").items()):
            name = _opt(tfields.get("tool_call.function.name"))
            arguments = tfields.get("tool_call.function.arguments")
            if arguments is None and name is not None:
                # the instrumentations record no empty value: a named call without arguments
                # was made with none (content hiding drops the whole message, not one field)
                arguments = "{}"
            parts.append(
                Part(
                    type="tool_call",
                    id=_opt(tfields.get("tool_call.id")),
                    name=name,
                    arguments=arguments,
                )
            )
        messages.append(Message(role=role, parts=parts))
    return messages


def _function_results(fields: dict[str, Any]) -> list[Part]:
    """AutoGen's tool results message (role `function`), recorded as `function.{k}`: one JSON
    FunctionExecutionResult per call, `{"name", "content", "call_id", "is_error"}`."""
    results = {
        int(key[9:]): value
        for key, value in fields.items()
        if key.startswith("function.") and key[9:].isdigit()
    }
    parts: list[Part] = []
    for _, result in sorted(results.items()):
        data = _json_object(result)
        if not isinstance(data, dict) or "call_id" not in data or "content" not in data:
            continue
        response = data["content"]
        parts.append(
            Part(
                type="tool_call_response",
                id=_opt(data.get("call_id")),
                name=_opt(data.get("name")),
                response=response,
                content=to_text(response),
                is_error=failed_result(data),
            )
        )
    return parts


def _opt(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def _json_object(value: Any) -> Any:
    """The JSON value of a string that looks like a JSON object or array; None otherwise."""
    if not isinstance(value, str) or value[:1] not in ("{", "[") or len(value) > MAX_JSON_BYTES:
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def _tool_input(value: Any) -> Any:
    """A TOOL span's `input.value`: the arguments the tool received.

    Instrumentations that wrap a tool's `__call__(*args, **kwargs)` record the bound call, e.g.
    smolagents `{"args": [], "sanitize_inputs_outputs": true, "kwargs": {"city": "Oslo"}}`,
    LlamaIndex `{"kwargs": {"city": "Oslo"}}`: the tool received the keyword arguments (or its
    single positional argument). Other keys of such a binding are the wrapper's own flags.
    """
    data = _json_object(value)
    if not isinstance(data, dict) or not ("kwargs" in data or "args" in data):
        return value
    kwargs = data.get("kwargs", {})
    args = data.get("args", [])
    if not isinstance(kwargs, dict) or not isinstance(args, list):
        return value
    for key, flag in data.items():
        if key not in ("args", "kwargs") and not (flag is None or isinstance(flag, bool)):
            return value  # a tool whose own parameters are named `args` / `kwargs`
    if not args:
        return kwargs
    if not kwargs and len(args) == 1:
        return args[0]
    return {"args": args, **kwargs}


def _tool_output(value: Any) -> tuple[Any, str | None]:
    """A TOOL span's `output.value` as the text the model gets back, and the error it reports.

    - LangChain records the tool's return as a serialized ToolMessage, `{"type": "tool", "data":
      {"content": ..., "status": ...}}`: the result is that content, the same text the next LLM
      call receives in its `tool` message.
    - LlamaIndex records a ToolOutput, `{"blocks": [{"text": ...}], "tool_name": ...,
      "raw_output": ..., "is_error": ...}`: the result is its content, the text of its blocks.
    """
    if not isinstance(value, str) or not value.startswith("{"):
        return value, None
    data = _json_object(value)
    if not isinstance(data, dict):
        return value, None
    if data.get("type") == "tool":
        inner = data.get("data")
        if isinstance(inner, dict) and "content" in inner:
            content = inner["content"]
            error = "error" if inner.get("status") == "error" else None
            return _content_text(content), error and (to_text(content) or error)
    blocks = data.get("blocks")
    if isinstance(blocks, list) and ("tool_name" in data or "raw_output" in data):
        texts = [
            b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)
        ]
        result: Any = "\n".join(texts) if texts else data.get("raw_output")
        error = to_text(result) if data.get("is_error") else None
        return result, error
    return value, None


def _content_text(content: Any) -> Any:
    """Message content that may be a list of content blocks (`[{"type": "text", "text": ...}]`):
    the text of its blocks; anything else as it is."""
    if isinstance(content, list):
        texts = [
            b.get("text") if isinstance(b, dict) else b
            for b in content
            if isinstance(b, str) or (isinstance(b, dict) and isinstance(b.get("text"), str))
        ]
        if texts:
            return "\n".join(str(t) for t in texts)
    return content


def _response_output(value: Any) -> list[Message]:
    """Output messages from an `output.value` holding OpenAI Responses API response objects.

    The OpenAI Agents instrumentation flattens a generation's output into `llm.output_messages`
    except for a streamed Chat Completions model, whose `output.value` is then the list of
    response objects the SDK built (`{"object": "response", "output": [items]}`).
    """
    if not isinstance(value, str) or '"response"' not in value:
        return []
    data = _json_object(value)
    items = data if isinstance(data, list) else [data]
    parts: list[Part] = []
    for response in items:
        if not isinstance(response, dict) or response.get("object") != "response":
            continue
        output = response.get("output")
        if not isinstance(output, list):
            continue
        for item in output:
            if not isinstance(item, dict):
                continue
            itype = item.get("type")
            if itype == "function_call":
                parts.append(
                    Part(
                        type="tool_call",
                        id=_opt(item.get("call_id") or item.get("id")),
                        name=_opt(item.get("name")),
                        arguments=item.get("arguments"),
                    )
                )
            elif itype == "message":
                content = item.get("content")
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, dict):
                        text = block.get("text") or block.get("refusal")
                        if isinstance(text, str) and text:
                            parts.append(Part(type="text", content=text))
            elif itype == "reasoning":
                summary = item.get("summary")
                for block in summary if isinstance(summary, list) else []:
                    if isinstance(block, dict) and isinstance(block.get("text"), str):
                        parts.append(Part(type="reasoning", content=block["text"]))
    return [Message(role="assistant", parts=parts)] if parts else []


def _final_answer_as_text(messages: list[Message]) -> None:
    """smolagents answers by calling its `final_answer` tool: the call's `answer` argument is
    the agent's answer (assistant text), not a tool whose result is evidence."""
    for message in messages:
        for i, part in enumerate(message.parts):
            if part.type == "tool_call" and part.name == _FINAL_ANSWER:
                args = part.arguments
                data = _json_object(args) if isinstance(args, str) else args
                answer = data.get("answer", data) if isinstance(data, dict) else args
                message.parts[i] = Part(type="text", content=to_text(answer))


def _metadata(attrs: dict[str, Any]) -> dict[str, Any]:
    """LangChain's `metadata` attribute (a JSON object), where it carries LangGraph keys."""
    raw = attrs.get("metadata")
    if not isinstance(raw, str) or "lang" not in raw:
        return {}
    data = _json_object(raw)
    return data if isinstance(data, dict) else {}


def _graph_answer(output: Any) -> str | None:
    """An agent span's answer: for a LangGraph graph, whose output is its state, the text of the
    last AI message of the state's `messages` (None if the state ends otherwise); other outputs
    as text."""
    data = _json_object(output) if isinstance(output, str) and output.startswith("{") else None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        messages = data["messages"]
        last = messages[-1] if messages else None
        if isinstance(last, dict) and last.get("type") == "ai":
            inner = last.get("data")
            content = inner.get("content") if isinstance(inner, dict) else None
            text = to_text(_content_text(content))
            return text or None
        return None
    return to_text(output) if output is not None else None


SMOLAGENTS_SCOPE = "openinference.instrumentation.smolagents"
LLAMA_INDEX_SCOPE = "openinference.instrumentation.llama_index"
LANGCHAIN_SCOPE = "openinference.instrumentation.langchain"
OPENAI_AGENTS_SCOPE = "openinference.instrumentation.openai_agents"
AUTOGEN_SCOPE = "openinference.instrumentation.autogen_agentchat"
CREWAI_SCOPE = "openinference.instrumentation.crewai._event_listener"  # event-listener mode
_CREWAI_SCOPES = frozenset((CREWAI_SCOPE, "openinference.instrumentation.crewai"))
_CREWAI_AGENT_SUFFIXES = (".execute", ".kickoff")
# AutoGen's agent spans are named `<agent name>.<method>` after the agent method they wrap
_AUTOGEN_AGENT_METHODS = (".on_messages_stream", ".on_messages", ".run_stream", ".run")

_FINAL_ANSWER = "final_answer"
# The steps of a LlamaIndex agent workflow (`BaseWorkflowAgent`: FunctionAgent, ReActAgent,
# CodeActAgent; `AgentWorkflow`): spans named `<class>.<step>`, children of the agent's run.
_AGENT_WORKFLOW_STEPS = frozenset(
    (
        "init_run",
        "setup_agent",
        "run_agent_step",
        "parse_agent_output",
        "call_tool",
        "aggregate_tool_results",
    )
)
_CURRENT_AGENT = re.compile(r"current_agent_name='([^'\\]*)'")
_LANGGRAPH_INTEGRATIONS = frozenset(("langgraph", "langchain_create_agent"))


def _langchain(span: NormalizedSpan, attrs: dict[str, Any]) -> None:
    """LangChain: its AGENT kind only says that the run's name contains "agent" (a tool called
    `research_agent`, the LangGraph node `agent`). Read what the run is instead: a tool (it has
    `tool.name`), a model call, a retriever, a LangGraph node (a step of its graph), the graph
    itself (the agent the user built), or a plain chain."""
    view = span.view
    if span.operation == "agent":
        if "tool.name" in attrs:
            span.operation = "tool"
            return
        if "llm.model_name" in attrs or "llm.invocation_parameters" in attrs:
            span.operation = "llm"
            return
        if any(key.startswith("retrieval.documents.") for key in attrs):
            span.operation = "retrieval"
            return
    elif span.operation != "workflow":
        return
    meta = _metadata(attrs)
    if not meta:
        return
    agent = meta.get("lc_agent_name")
    if meta.get("langgraph_node") == view.name and "langgraph_step" in meta:
        span.operation = "workflow"  # a node: its parent span is the graph
        span.parent_agent = agent if isinstance(agent, str) else ""
    elif agent == view.name or (
        meta.get("ls_integration") in _LANGGRAPH_INTEGRATIONS and "langgraph_node" not in meta
    ):
        span.operation = "agent"  # the graph the user built (`create_agent` names it)


def extract(view: SpanView, logs: list[LogView]) -> NormalizedSpan:
    attrs = view.attributes
    kind = str(attrs.get("openinference.span.kind", "")).upper()
    span = NormalizedSpan(view=view, convention=NAME, operation=KIND_MAP.get(kind, "other"))
    span.error = genai.error_of(view)
    scope = view.scope_name
    if scope == LANGCHAIN_SCOPE:
        _langchain(span, attrs)
    if span.operation == "llm":
        _llm(span, attrs, scope)
    elif span.operation == "tool":
        tool_name = genai.first_str(view, "tool.name")
        if (scope == SMOLAGENTS_SCOPE and tool_name == _FINAL_ANSWER) or (
            scope == OPENAI_AGENTS_SCOPE and tool_name is None and view.name.startswith("handoff")
        ):
            # smolagents answers through its `final_answer` tool: the answer is the LLM's output.
            # An Agents SDK handoff span is the change of agent, not a tool run: the model's
            # `transfer_to_*` call gets its result in the next agent's input.
            span.operation = "other"
            return span
        span.tool_name = tool_name or view.name
        span.tool_call_id = genai.first_str(view, "tool.id", "tool_call.id")
        span.tool_arguments = _tool_input(attrs.get("input.value"))
        span.tool_result, error = _tool_output(attrs.get("output.value"))
        span.error = span.error or error
    elif span.operation == "retrieval":
        if scope == LLAMA_INDEX_SCOPE and view.name.rpartition(".")[2].startswith("_"):
            # `BaseRetriever.retrieve` records the documents; the `_retrieve` it calls is the
            # same retrieval, seen from inside.
            span.operation = "other"
            return span
        span.query = genai.first_str(view, "input.value")
        span.source = view.name
        for _, fields in sorted(_indexed(attrs, "retrieval.documents.").items()):
            score = fields.get("document.score")
            span.documents.append(
                Document(
                    id=_opt(fields.get("document.id")),
                    content=to_text(fields.get("document.content")),
                    score=float(score) if isinstance(score, (int, float)) else None,
                )
            )
    elif span.operation == "agent":
        _agent(span, attrs, scope)
    elif (
        span.operation == "workflow"
        and scope == LLAMA_INDEX_SCOPE
        and view.name.rpartition(".")[2] in _AGENT_WORKFLOW_STEPS
    ):
        # a step of an agent workflow: its parent is the agent's run, named by the
        # `current_agent_name` of the events the step handles
        found = _CURRENT_AGENT.search(str(attrs.get("input.value") or ""))
        span.parent_agent = found.group(1) if found else ""
    return span


def _llm(span: NormalizedSpan, attrs: dict[str, Any], scope: str) -> None:
    view = span.view
    span.model = genai.first_str(
        view, "llm.model_name", "llm.request.model_name", "llm.response.model_name"
    )
    span.provider = genai.first_str(view, "llm.provider", "llm.system")
    span.input_tokens = genai.first_int(view, "llm.token_count.prompt")
    span.output_tokens = genai.first_int(view, "llm.token_count.completion")
    span.input_messages = _flat_messages(attrs, "llm.input_messages.")
    span.output_messages = _flat_messages(attrs, "llm.output_messages.")
    if not any(message.parts for message in span.output_messages):
        span.output_messages = _response_output(attrs.get("output.value")) or span.output_messages
    span.finish_reasons = genai.finish_reasons_of(attrs.get("llm.finish_reason"))
    if scope == SMOLAGENTS_SCOPE:
        _final_answer_as_text(span.output_messages)
    elif scope in _CREWAI_SCOPES:
        _crewai_llm(span, attrs)
    elif scope == AUTOGEN_SCOPE:
        _autogen_thought(span, attrs)
    elif (
        scope == LLAMA_INDEX_SCOPE
        and not span.input_messages
        and not span.output_messages
        and span.input_tokens is None
        and span.error is None
        and not any(key.startswith("llm.prompts") for key in attrs)
    ):
        # LlamaIndex gives every method of an LLM class a span of kind LLM; the model call's
        # span is the one with messages (`_prepare_chat_with_tools` only builds the request,
        # `predict` wraps the `chat` that calls the model).
        span.operation = "other"


def _autogen_thought(span: NormalizedSpan, attrs: dict[str, Any]) -> None:
    """AutoGen keeps the text a model writes beside its tool calls ("Let me check...") as the
    `thought` of its `CreateResult`, which the instrumentation records only in `output.value`:
    it is the assistant's text before those calls."""
    data = _json_object(attrs.get("output.value"))
    thought = data.get("thought") if isinstance(data, dict) else None
    if not isinstance(thought, str) or not thought.strip():
        return
    for message in span.output_messages:
        if message.role != "assistant" or not message.parts:
            continue
        parts = message.parts
        if any(p.type == "tool_call" for p in parts) and not any(p.type == "text" for p in parts):
            message.parts = [Part(type="text", content=thought), *parts]
        return


def _crewai_llm(span: NormalizedSpan, attrs: dict[str, Any]) -> None:
    """CrewAI's `LLMCallCompletedEvent.response` is the model's text or, when it called tools,
    the list of its tool calls (OpenAI `{"id", "function": {"name", "arguments"}}`), recorded
    as `output.value` only. Its earlier calls, resent in the input, name the tool as the repr
    of its name (`'get_weather'`)."""
    for message in span.input_messages:
        for part in message.parts:
            name = part.name
            if part.type == "tool_call" and name and len(name) > 2 and name[0] == name[-1] == "'":
                part.name = name[1:-1]
    if any(message.parts for message in span.output_messages):
        return
    output = attrs.get("output.value")
    if not isinstance(output, str) or not output.startswith("["):
        return
    calls = _json_object(output)
    parts: list[Part] = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return  # not a list of tool calls: leave the output as it is
        parts.append(
            Part(
                type="tool_call",
                id=_opt(call.get("id")),
                name=function["name"],
                arguments=function.get("arguments"),
            )
        )
    if parts:
        span.output_messages = [Message(role="assistant", parts=parts)]


def _agent(span: NormalizedSpan, attrs: dict[str, Any], scope: str) -> None:
    view = span.view
    name = genai.first_str(view, "agent.name")
    if scope == OPENAI_AGENTS_SCOPE and name is None:
        # the trace's own span ("Agent workflow"): agents have `agent.name`
        span.operation = "workflow"
        return
    if scope == SMOLAGENTS_SCOPE and name is None:
        # `<agent name>.run`; a managed agent is called as a tool of that name, with no tool
        # span of its own: its run executes the call
        name = view.name.removesuffix(".run")
        span.tool_name = name
    if name is None and scope in _CREWAI_SCOPES:
        # `<role>.<task>.execute` (crew agent) or `<role>.kickoff` (lite agent): the role is
        # the agent's `graph.node.id`
        name = genai.first_str(view, "graph.node.id")
        if name is None and view.name.endswith(_CREWAI_AGENT_SUFFIXES):
            name = view.name.rpartition(".")[0] or None
    if scope == AUTOGEN_SCOPE and name is None:
        for method in _AUTOGEN_AGENT_METHODS:
            if view.name.endswith(method):
                name = view.name.removesuffix(method)
                break
    span.agent_name = name or view.name
    output = attrs.get("output.value")
    if scope == LANGCHAIN_SCOPE:
        span.declared_output = _graph_answer(output)
    else:
        span.declared_output = to_text(output) if output is not None else None
