"""Every captured fixture gives the trajectory a careful reader of the capture expects.

What each fixture holds is described in `conventions.md` Part B: pydantic-ai runs an agent that
calls `search` twice and then answers (with a `thinking` part first); the raw-client fixtures
(openai-v2, OpenInference, Traceloop) make two chat calls under one app span `agent_loop`, the
first returning a `search` tool call, the second the answer quoting the tool result; the `_error`
fixtures fail (tool raises / HTTP 500); the `_nocontent` fixtures carry no message content.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from helpers import (
    FIXTURE_NAMES,
    fixture_json,
    fixture_logs_request,
    fixture_request,
    fixture_trajectory,
    load_fixture,
    logs_from_json,
    logs_from_proto,
    single_trajectory,
    spans_from_json,
    spans_from_proto,
    steps_as_dicts,
)
from tracehound.steps import Step, Trajectory

# --- what the captures say ----------------------------------------------------------------------

SEARCH_RESULT = (
    "OpenTelemetry's GenAI semantic conventions define spans such as 'chat {model}', "
    "'execute_tool {tool}' and 'invoke_agent {agent}', with attributes like "
    "gen_ai.operation.name, gen_ai.input.messages and gen_ai.output.messages. "
    "They are in Development status."
)
QUESTION = "What do the OpenTelemetry GenAI conventions say about tool spans?"

PYDANTIC_SYSTEM = "You are a research assistant. Use the search tool, then answer."
PYDANTIC_THINKING = "Both searches returned the same paragraph; quote its first sentence."
PYDANTIC_ANSWER = (
    "Based on the search results: OpenTelemetry's GenAI semantic conventions define spans such "
    "as 'chat {model}', 'execute_tool {tool}' and 'invoke_agent {agent}', with attri"
)
ARGS_1 = '{"query":"OpenTelemetry GenAI semantic conventions"}'
ARGS_2 = '{"query":"execute_tool span attributes"}'
MODEL = "scripted-model"

CLIENT_SYSTEM = "You are a helpful research assistant. Use the search tool."
CLIENT_ANSWER = (
    "According to the search result: OpenTelemetry's GenAI semantic conventions define spans "
    "such as 'chat {model}', 'execute_tool {tool}' and 'invoke_agent "
)
SERVER_ERROR = "Error code: 500 - The server had an error while processing your request."
TOOL_ERROR = "RuntimeError: search backend unavailable"


def outline(step: Step) -> tuple[Any, ...]:
    """The facts of a step a reader checks, by kind."""
    kind = step.kind
    if kind in ("system", "user", "assistant", "reasoning"):
        return (kind, step.text)
    if kind == "llm":
        return (kind, step.model, step.input_tokens, step.output_tokens, step.finish_reason)
    if kind == "tool_call":
        return (kind, step.tool, step.call_id, step.arguments)
    if kind == "tool_result":
        return (kind, step.tool, step.call_id, step.text, step.error)
    if kind == "agent":
        return (kind, step.agent)
    if kind == "error":
        return (kind, step.error)
    return (kind,)


def pydantic_flow(tool_span: str, *, agent_span: str) -> dict[str, Any]:
    chat = f"chat {MODEL}"
    return {
        "convention": "pydantic_ai",
        "outline": [
            ("agent", "research_agent"),
            ("system", PYDANTIC_SYSTEM),
            ("user", QUESTION),
            ("llm", MODEL, 60, 8, None),
            ("tool_call", "search", "call_1", ARGS_1),
            ("tool_result", "search", "call_1", SEARCH_RESULT, None),
            ("llm", MODEL, 94, 15, None),
            ("tool_call", "search", "call_2", ARGS_2),
            ("tool_result", "search", "call_2", SEARCH_RESULT, None),
            ("llm", MODEL, 128, 48, None),
            ("reasoning", PYDANTIC_THINKING),
            ("assistant", PYDANTIC_ANSWER),
        ],
        "span_names": [
            agent_span,
            chat,
            chat,
            chat,
            chat,
            tool_span,
            chat,
            chat,
            tool_span,
            chat,
            chat,
            chat,
        ],
        "run": ("research_agent", False),
        "declared_output": PYDANTIC_ANSWER,
        "final_answer": PYDANTIC_ANSWER,
    }


def client_flow(
    convention: str, chat: str, model: str, first_finish: str, answer_finish: str | None
) -> dict[str, Any]:
    return {
        "convention": convention,
        "outline": [
            ("system", CLIENT_SYSTEM),
            ("user", QUESTION),
            ("llm", model, 57, 18, first_finish),
            ("tool_call", "search", "call_fake0001", ARGS_1),
            ("tool_result", "search", "call_fake0001", SEARCH_RESULT, None),
            ("llm", model, 131, 42, "stop"),
            ("assistant", CLIENT_ANSWER),
        ],
        "span_names": [chat] * 7,
        "run": ("agent_loop", True),
        "declared_output": None,
        "final_answer": CLIENT_ANSWER,
        "answer_finish": answer_finish,
    }


EXPECTED: dict[str, dict[str, Any]] = {
    "pydantic_ai_v5": pydantic_flow(
        "execute_tool search", agent_span="invoke_agent research_agent"
    ),
    "pydantic_ai_v6": pydantic_flow(
        "execute_tool search", agent_span="invoke_agent research_agent"
    ),
    "pydantic_ai_v3": pydantic_flow(
        "execute_tool search", agent_span="invoke_agent research_agent"
    ),
    # v2: `agent run` / `running tool` names, tool_arguments / tool_response attributes
    "pydantic_ai_v2": pydantic_flow("running tool", agent_span="agent run"),
    # 1.x v1: messages only in the JSON `events` attribute of each chat span
    "pydantic_ai_1x_v1": pydantic_flow("running tool", agent_span="agent run"),
    "pydantic_ai_nocontent": {
        "convention": "pydantic_ai",
        "outline": [
            ("agent", "research_agent"),
            ("llm", MODEL, 60, 8, None),
            ("tool_call", "search", "call_1", None),
            ("tool_result", "search", "call_1", None, None),
            ("llm", MODEL, 94, 15, None),
            ("tool_call", "search", "call_2", None),
            ("tool_result", "search", "call_2", None, None),
            ("llm", MODEL, 128, 48, None),
        ],
        "span_names": [
            "invoke_agent research_agent",
            *(["chat scripted-model"] * 2),
            "execute_tool search",
            *(["chat scripted-model"] * 2),
            "execute_tool search",
            "chat scripted-model",
        ],
        "run": ("research_agent", False),
        "declared_output": None,
        "final_answer": None,
    },
    "pydantic_ai_error": {
        "convention": "pydantic_ai",
        "outline": [
            ("agent", "research_agent"),
            ("system", PYDANTIC_SYSTEM),
            ("user", QUESTION),
            ("llm", MODEL, 60, 8, None),
            ("tool_call", "search", "call_1", ARGS_1),
            ("tool_result", "search", "call_1", None, TOOL_ERROR),
            ("error", TOOL_ERROR),
        ],
        "span_names": [
            "invoke_agent research_agent",
            *(["chat scripted-model"] * 4),
            "execute_tool search",
            "invoke_agent research_agent",
        ],
        "run": ("research_agent", False),
        "declared_output": None,
        "final_answer": None,
    },
    "openai_v2_latest": client_flow(
        "otel_genai", "chat gpt-4o-mini", "gpt-4o-mini", "tool_calls", "stop"
    ),
    "traceloop_openai": client_flow("traceloop", "openai.chat", "gpt-4o-mini", "tool_call", "stop"),
    # OpenInference records the response model and no per-message finish reason
    "openinference_openai": client_flow(
        "openinference", "ChatCompletion", "gpt-4o-mini-2024-07-18", "tool_calls", None
    ),
    "openai_v2_nocontent": {
        "convention": "otel_genai",
        # no content at all: neither the tool call nor the answer can be recovered
        "outline": [
            ("llm", "gpt-4o-mini", 57, 18, "tool_calls"),
            ("llm", "gpt-4o-mini", 131, 42, "stop"),
        ],
        "span_names": ["chat gpt-4o-mini"] * 2,
        "run": ("agent_loop", True),
        "declared_output": None,
        "final_answer": None,
    },
    "openai_v2_latest_error": {
        "convention": "otel_genai",
        # error.type is junk ("<class 'openai.InternalServerError'>"); the status message is not
        "outline": [
            ("system", CLIENT_SYSTEM),
            ("user", "FAIL please"),
            ("llm", "gpt-4o-mini", None, None, None),
            ("error", SERVER_ERROR),
        ],
        "span_names": ["chat gpt-4o-mini"] * 4,
        "run": ("agent_loop", True),
        "declared_output": None,
        "final_answer": None,
    },
    "openinference_openai_error": {
        "convention": "openinference",
        "outline": [
            ("system", CLIENT_SYSTEM),
            ("user", "FAIL please"),
            ("llm", None, None, None, None),
            ("error", f"openai.InternalServerError: {SERVER_ERROR}"),
        ],
        "span_names": ["ChatCompletion"] * 4,
        "run": ("agent_loop", True),
        "declared_output": None,
        "final_answer": None,
    },
}


def test_every_fixture_has_an_expectation() -> None:
    assert sorted(EXPECTED) == sorted(FIXTURE_NAMES)


def _names(name: str) -> tuple[dict[str, str], dict[str, str]]:
    spans, _ = load_fixture(name)
    return {s.span_id: s.name for s in spans}, {s.span_id: s.parent_span_id for s in spans}


@pytest.fixture(scope="module")
def trajectories() -> dict[str, Trajectory]:
    return {name: fixture_trajectory(name) for name in FIXTURE_NAMES}


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_steps_in_order(name: str, trajectories: dict[str, Trajectory]) -> None:
    expected = EXPECTED[name]
    trajectory = trajectories[name]
    assert [outline(s) for s in trajectory.steps] == expected["outline"]
    names, _ = _names(name)
    assert [names[s.span_id] for s in trajectory.steps] == expected["span_names"]


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_convention_and_no_problems(name: str, trajectories: dict[str, Trajectory]) -> None:
    trajectory = trajectories[name]
    assert trajectory.conventions == (EXPECTED[name]["convention"],)
    assert trajectory.problems == ()
    spans, _ = load_fixture(name)
    assert trajectory.trace_id == spans[0].trace_id


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_runs(name: str, trajectories: dict[str, Trajectory]) -> None:
    expected = EXPECTED[name]
    trajectory = trajectories[name]
    names, parents = _names(name)
    (root,) = [sid for sid, parent in parents.items() if not parent]
    agent_name, implicit = expected["run"]
    assert len(trajectory.runs) == 1
    run = trajectory.runs[0]
    assert (run.agent_name, run.implicit) == (agent_name, implicit)
    # the run is the trace's root span: the agent span, or the app span `agent_loop`
    assert run.run_id == run.span_id == root
    assert names[root] == ("agent_loop" if implicit else expected["span_names"][0])
    assert run.parent_run_id is None
    assert run.depth == 0
    assert run.declared_output == expected["declared_output"]
    assert run.service_name.startswith("fixture-")
    assert {s.run_id for s in trajectory.steps} == {run.run_id}
    assert trajectory.run_steps(run.run_id) == list(trajectory.steps)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_final_answer(name: str, trajectories: dict[str, Trajectory]) -> None:
    assert trajectories[name].final_answer() == EXPECTED[name]["final_answer"]


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_logs_add_nothing_when_spans_carry_content(name: str) -> None:
    with_logs = fixture_trajectory(name)
    without_logs = fixture_trajectory(name, with_logs=False)
    assert steps_as_dicts(with_logs) == steps_as_dicts(without_logs)
    assert with_logs.runs == without_logs.runs


@pytest.mark.parametrize(
    "name",
    [n for n in FIXTURE_NAMES if n.startswith("pydantic_ai") and n != "pydantic_ai_nocontent"],
)
def test_pydantic_tool_calls_are_linked_to_their_tool_spans(
    name: str, trajectories: dict[str, Trajectory]
) -> None:
    """One tool_call step per call: the model's request, joined to the span that executed it."""
    trajectory = trajectories[name]
    names, parents = _names(name)
    calls = [s for s in trajectory.steps if s.kind == "tool_call"]
    results = {s.call_id: s for s in trajectory.steps if s.kind == "tool_result"}
    assert calls
    for call in calls:
        assert names[call.span_id] == f"chat {MODEL}"
        assert call.exec_span_id is not None
        assert names[call.exec_span_id] in ("execute_tool search", "running tool")
        assert results[call.call_id].span_id == call.exec_span_id
    # the agent step is the root span, and every other step comes from a span below it
    agent = trajectory.steps[0]
    assert agent.kind == "agent" and not parents[agent.span_id]


@pytest.mark.parametrize("name", ["pydantic_ai_v5", "pydantic_ai_v2", "pydantic_ai_1x_v1"])
def test_pydantic_token_totals_match_aggregated_usage(
    name: str, trajectories: dict[str, Trajectory]
) -> None:
    llm = [s for s in trajectories[name].steps if s.kind == "llm"]
    assert sum(s.input_tokens or 0 for s in llm) == 282
    assert sum(s.output_tokens or 0 for s in llm) == 71


@pytest.mark.parametrize("name", ["openai_v2_latest", "traceloop_openai", "openinference_openai"])
def test_raw_client_tool_call_recovered_from_two_chat_calls(
    name: str, trajectories: dict[str, Trajectory]
) -> None:
    """No tool span: the call is the first chat's output, the result the second chat's input."""
    trajectory = trajectories[name]
    llm = [s for s in trajectory.steps if s.kind == "llm"]
    (call,) = [s for s in trajectory.steps if s.kind == "tool_call"]
    (result,) = [s for s in trajectory.steps if s.kind == "tool_result"]
    assert [call.span_id, result.span_id] == [llm[0].span_id, llm[1].span_id]
    assert call.exec_span_id is None
    (answer,) = [s for s in trajectory.steps if s.kind == "assistant"]
    assert answer.span_id == llm[1].span_id
    assert answer.finish_reason == EXPECTED[name]["answer_finish"]


def test_pydantic_error_tool_result_and_error_step(trajectories: dict[str, Trajectory]) -> None:
    trajectory = trajectories["pydantic_ai_error"]
    names, _ = _names("pydantic_ai_error")
    (result,) = [s for s in trajectory.steps if s.kind == "tool_result"]
    assert result.error == TOOL_ERROR
    assert result.text is None
    assert names[result.span_id] == "execute_tool search"
    # the failing tool span gives no separate error step; the agent span (status ERROR) does
    (error,) = [s for s in trajectory.steps if s.kind == "error"]
    assert error.span_id == trajectory.runs[0].span_id
    assert error.error == TOOL_ERROR
    # the chat span stayed UNSET and there is no further chat
    assert [s.error for s in trajectory.steps if s.kind == "llm"] == [None]


@pytest.mark.parametrize("name", ["openai_v2_latest_error", "openinference_openai_error"])
def test_client_error_is_an_error_step_of_the_chat_span(
    name: str, trajectories: dict[str, Trajectory]
) -> None:
    trajectory = trajectories[name]
    names, _ = _names(name)
    (error,) = [s for s in trajectory.steps if s.kind == "error"]
    (llm,) = [s for s in trajectory.steps if s.kind == "llm"]
    assert error.span_id == llm.span_id
    assert SERVER_ERROR in (error.error or "")
    assert names[error.span_id] != "agent_loop"
    assert trajectory.steps[-1] is error


def test_nocontent_tool_calls_have_no_arguments(trajectories: dict[str, Trajectory]) -> None:
    trajectory = trajectories["pydantic_ai_nocontent"]
    calls = [s for s in trajectory.steps if s.kind == "tool_call"]
    assert [(c.tool, c.call_id, c.arguments) for c in calls] == [
        ("search", "call_1", None),
        ("search", "call_2", None),
    ]
    assert all(c.exec_span_id for c in calls)
    assert "arguments" not in calls[0].to_dict()
    assert not any(s.kind in ("user", "system", "assistant", "reasoning") for s in trajectory.steps)


# --- openai-v2 latest: the log events alone carry the same content -------------------------------

_CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages")
LOG_FIXTURES = ["openai_v2_latest", "openai_v2_latest_error"]


def _strip_json(document: dict[str, Any]) -> tuple[dict[str, Any], int]:
    doc = copy.deepcopy(document)
    removed = 0
    for resource_spans in doc["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                attrs = span.get("attributes", [])
                kept = [kv for kv in attrs if kv["key"] not in _CONTENT_KEYS]
                removed += len(attrs) - len(kept)
                span["attributes"] = kept
    return doc, removed


@pytest.mark.parametrize("name", LOG_FIXTURES)
def test_log_events_alone_give_the_same_trajectory_json(name: str) -> None:
    full = fixture_trajectory(name)
    doc, removed = _strip_json(fixture_json(name))
    assert removed > 0
    spans, errors = spans_from_json(doc)
    assert errors == []
    assert not any(k in s.attributes for s in spans for k in _CONTENT_KEYS)
    logs = logs_from_json(fixture_json(name, logs=True))
    assert {lg.event_name for lg in logs} == {"gen_ai.client.inference.operation.details"}

    from_logs = single_trajectory(spans, logs)
    assert steps_as_dicts(from_logs) == steps_as_dicts(full)
    assert from_logs.runs == full.runs
    assert from_logs.conventions == full.conventions
    assert from_logs.final_answer() == full.final_answer()
    assert from_logs.problems == ()

    # and the stripped spans really lost the content: without the logs only llm/error steps remain
    bare = single_trajectory(spans)
    assert {s.kind for s in bare.steps} <= {"llm", "error"}


@pytest.mark.parametrize("name", LOG_FIXTURES)
def test_log_events_alone_give_the_same_trajectory_protobuf(name: str) -> None:
    full = fixture_trajectory(name, "pb")
    request = fixture_request(name)
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                kept = [kv for kv in span.attributes if kv.key not in _CONTENT_KEYS]
                del span.attributes[:]
                span.attributes.extend(kept)
    spans = spans_from_proto(request)
    assert not any(k in s.attributes for s in spans for k in _CONTENT_KEYS)
    logs = logs_from_proto(fixture_logs_request(name))
    from_logs = single_trajectory(spans, logs)
    assert steps_as_dicts(from_logs) == steps_as_dicts(full)
    assert from_logs.runs == full.runs


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_steps_equal_steps_built_by_their_constructor(
    name: str, trajectories: dict[str, Trajectory]
) -> None:
    """Trajectory steps are made by filling the instance dict (fast path): each must be the Step
    its dataclass constructor makes from the same fields, with no attribute beyond them."""
    field_names = {f.name for f in dataclasses.fields(Step)}
    for step in trajectories[name].steps:
        assert set(vars(step)) <= field_names
        values = {n: getattr(step, n) for n in field_names}
        rebuilt = Step(**values)
        assert rebuilt == step
        assert hash(rebuilt) == hash(step)
        assert dataclasses.replace(step, text="x").text == "x"
        with pytest.raises(dataclasses.FrozenInstanceError):
            step.text = "changed"  # type: ignore[misc]
