"""The same spans give the same trajectory whichever carrier brought them (DESIGN §1, §2).

Sources compared for every fixture: OTLP/JSON with hex ids (collector file exporter), binary
OTLP protobuf, OTel SDK `ReadableSpan`s rebuilt from the protobuf (what a `SpanProcessor` sees),
and protobuf's own JSON mapping (base64 ids). Log events are compared the same way.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from helpers import (
    FIXTURE_NAMES,
    fixture_json,
    fixture_logs_request,
    fixture_request,
    has_logs,
    load_fixture,
    logs_from_json,
    logs_from_proto,
    readable_spans_from_request,
    sdk_logs_from_request,
    single_trajectory,
    spans_from_json,
    spans_from_proto,
    steps_as_dicts,
)
from tracehound.spans import LogView, SpanView
from tracehound.steps import Trajectory

LOG_FIXTURES = [n for n in FIXTURE_NAMES if has_logs(n)]


def test_fixture_set() -> None:
    assert {"pydantic_ai_v5", "openai_v2_latest", "openinference_openai"} <= set(FIXTURE_NAMES)
    assert {"openai_v2_latest", "openai_v2_latest_error"} <= set(LOG_FIXTURES)


def _span_facts(view: SpanView) -> tuple[Any, ...]:
    return (
        view.trace_id,
        view.span_id,
        view.parent_span_id,
        view.parent_is_remote,
        view.name,
        view.kind,
        view.start_ns,
        view.end_ns,
        view.status_code,
        view.status_message,
        view.scope_name,
        view.scope_version,
        view.attribute_keys,
        view.attributes,
        [(e.name, e.time_ns, e.attributes) for e in view.events],
        view.resource.attributes,
        view.service_name,
    )


def _log_facts(log: LogView) -> tuple[Any, ...]:
    return (
        log.trace_id,
        log.span_id,
        log.event_name,
        log.time_ns,
        log.attributes,
        log.body,
        log.scope_name,
    )


def _sources(name: str) -> dict[str, tuple[list[SpanView], list[LogView]]]:
    request = fixture_request(name)
    logs_request = fixture_logs_request(name) if has_logs(name) else None
    json_logs = logs_from_json(fixture_json(name, logs=True)) if logs_request else []
    proto_logs = logs_from_proto(logs_request) if logs_request else []
    sdk_logs = sdk_logs_from_request(logs_request) if logs_request else []
    base64_json = json_format.MessageToDict(request, use_integers_for_enums=True)
    base64_spans, errors = spans_from_json(base64_json)
    assert errors == []
    return {
        "json": load_fixture(name, "json"),
        "protobuf": load_fixture(name, "pb"),
        "sdk": (
            [SpanView.from_readable(s) for s in readable_spans_from_request(request)],
            sdk_logs,
        ),
        "protobuf-json-mapping": (base64_spans, json_logs),
        "iter_proto_spans": (spans_from_proto(request), proto_logs),
    }


def _summary(trajectory: Trajectory) -> tuple[Any, ...]:
    return (
        trajectory.trace_id,
        steps_as_dicts(trajectory),
        trajectory.runs,
        trajectory.conventions,
        trajectory.problems,
        trajectory.final_answer(),
    )


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_span_views_agree(name: str) -> None:
    sources = _sources(name)
    reference = [_span_facts(v) for v in sources["json"][0]]
    assert reference  # something was read
    for source, (spans, _) in sources.items():
        assert [_span_facts(v) for v in spans] == reference, source


@pytest.mark.parametrize("name", LOG_FIXTURES)
def test_log_views_agree(name: str) -> None:
    sources = _sources(name)
    reference = [_log_facts(lg) for lg in sources["json"][1]]
    assert reference
    assert all(
        lg.event_name == "gen_ai.client.inference.operation.details" for lg in sources["json"][1]
    )
    for source, (_, logs) in sources.items():
        assert [_log_facts(lg) for lg in logs] == reference, source


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_trajectories_agree(name: str) -> None:
    sources = _sources(name)
    reference = _summary(single_trajectory(*sources["json"]))
    assert reference[1]  # the fixture has steps
    for source, (spans, logs) in sources.items():
        assert _summary(single_trajectory(spans, logs)) == reference, source


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_trajectory_does_not_depend_on_span_order(name: str) -> None:
    spans, logs = load_fixture(name, "pb")
    reference = _summary(single_trajectory(spans, logs))
    shuffled = list(spans)
    random.Random(name).shuffle(shuffled)
    assert _summary(single_trajectory(reversed(spans), reversed(logs))) == reference
    assert _summary(single_trajectory(shuffled, logs)) == reference


_CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages")


@pytest.mark.parametrize("name", LOG_FIXTURES)
def test_content_from_log_events_agrees_across_sources(name: str) -> None:
    """Spans without content + the details events: JSON, protobuf and SDK logs give one result."""
    request = fixture_request(name)
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                kept = [kv for kv in span.attributes if kv.key not in _CONTENT_KEYS]
                del span.attributes[:]
                span.attributes.extend(kept)
    logs_request = fixture_logs_request(name)
    stripped_json = json_format.MessageToDict(request, use_integers_for_enums=True)
    json_spans, errors = spans_from_json(stripped_json)
    assert errors == []
    results = {
        "json": single_trajectory(json_spans, logs_from_json(fixture_json(name, logs=True))),
        "protobuf": single_trajectory(spans_from_proto(request), logs_from_proto(logs_request)),
        "sdk": single_trajectory(
            [SpanView.from_readable(s) for s in readable_spans_from_request(request)],
            sdk_logs_from_request(logs_request),
        ),
    }
    full = _summary(single_trajectory(*load_fixture(name, "json")))
    for source, trajectory in results.items():
        assert _summary(trajectory) == full, source
        assert {"user", "system"} <= {s.kind for s in trajectory.steps}, source


def test_readable_spans_are_real_sdk_spans() -> None:
    request = fixture_request("pydantic_ai_error")
    readable = readable_spans_from_request(request)
    assert all(isinstance(s, ReadableSpan) for s in readable)
    by_name = {s.name: s for s in readable}
    assert set(by_name) == {
        "chat scripted-model",
        "execute_tool search",
        "invoke_agent research_agent",
    }
    agent = by_name["invoke_agent research_agent"]
    tool = by_name["execute_tool search"]
    chat = by_name["chat scripted-model"]
    assert agent.parent is None
    assert tool.parent is not None and tool.parent.span_id == agent.context.span_id
    assert tool.parent.trace_id == agent.context.trace_id
    assert not tool.parent.is_remote
    assert chat.kind is SpanKind.CLIENT and tool.kind is SpanKind.INTERNAL
    assert agent.status.status_code is StatusCode.ERROR
    assert agent.status.description == "RuntimeError: search backend unavailable"
    assert chat.status.status_code is StatusCode.UNSET
    (event,) = tool.events
    assert isinstance(event, Event)
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "RuntimeError"
    assert event.attributes["exception.message"] == "search backend unavailable"
    assert event.timestamp > 0
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.resource.attributes["service.name"] == "fixture-pydantic-ai"
    # the resource as encoded, without SDK defaults added
    assert set(agent.resource.attributes) == {
        kv.key for kv in request.resource_spans[0].resource.attributes
    }
    assert tool.instrumentation_scope is not None
    assert tool.instrumentation_scope.name == "pydantic-ai"
    assert tool.instrumentation_scope.version == "2.68.0"
    assert tool.start_time is not None and tool.end_time is not None
    assert tool.start_time < tool.end_time


def test_sdk_array_attributes_are_tuples_and_read_as_lists() -> None:
    request = fixture_request("openai_v2_latest")
    readable = [s for s in readable_spans_from_request(request) if s.name.startswith("chat")]
    finish = [s.attributes["gen_ai.response.finish_reasons"] for s in readable]
    assert finish == [("tool_calls",), ("stop",)]
    views = [SpanView.from_readable(s) for s in readable]
    assert [v.get("gen_ai.response.finish_reasons") for v in views] == [["tool_calls"], ["stop"]]
