"""Bad input never stops the pipeline: it is mapped as far as valid, and said.

A file that cannot be read at all is an `InputError` naming the file; a bad line, span or
attribute inside an otherwise good file is skipped or mapped partially and reported (in
`Telemetry.problems` for the reader, in `Trajectory.problems` for the mapping), while the good
data beside it is kept.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from helpers import (
    fixture_json,
    fixture_path,
    fixture_request,
    fixture_trajectory,
    single_trajectory,
    steps_as_dicts,
    trajectory_of,
)
from tracehound.conventions import normalize
from tracehound.conventions.base import MAX_JSON_BYTES
from tracehound.files import InputError, Telemetry, read_bytes, read_paths
from tracehound.spans import (
    MAX_VALUE_DEPTH,
    LogView,
    SpanView,
    decode_any_value_json,
    iter_json_spans,
)
from tracehound.steps import Trajectory

TRACE = "0af7651916cd43dd8448eb211c80319c"
SEARCH_PREFIX = "OpenTelemetry's GenAI semantic conventions define spans such as"


# --- building OTLP/JSON by hand ------------------------------------------------------------------


def s(value: str) -> dict[str, Any]:
    return {"stringValue": value}


def span_json(
    span_id: str,
    name: str,
    attributes: dict[str, dict[str, Any]],
    *,
    parent: str = "",
    start: int = 1_000,
    end: int = 2_000,
    trace_id: str = TRACE,
) -> dict[str, Any]:
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": [{"key": k, "value": v} for k, v in attributes.items()],
        "status": {},
    }


def document(*spans: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": s("bad-input")}]},
                "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}],
            }
        ]
    }


def read_document(doc: dict[str, Any], name: str = "doc.json") -> Telemetry:
    return read_bytes(json.dumps(doc).encode("utf-8"), name)


def trajectory_from(doc: dict[str, Any]) -> Trajectory:
    telemetry = read_document(doc)
    assert telemetry.problems == []
    return single_trajectory(telemetry.spans, telemetry.logs)


def messages(*items: Any) -> dict[str, Any]:
    return s(json.dumps(list(items)))


ANSWER = messages({"role": "assistant", "parts": [{"type": "text", "content": "ok"}]})


def chat_with_input(value: dict[str, Any]) -> Trajectory:
    """One chat span whose input messages are `value`; its (valid) output says "ok"."""
    attrs = {
        "gen_ai.operation.name": s("chat"),
        "gen_ai.request.model": s("m"),
        "gen_ai.input.messages": value,
        "gen_ai.output.messages": ANSWER,
    }
    return trajectory_from(document(span_json("1" * 16, "chat m", attrs)))


def kinds_and_texts(trajectory: Trajectory) -> list[tuple[str, str | None]]:
    return [(step.kind, step.text) for step in trajectory.steps]


def problems_about(trajectory: Trajectory, text: str) -> list[str]:
    return [p for p in trajectory.problems if text in p]


# --- files that cannot be read at all ------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b'{"resourceSpans": [',
        b"{not json at all}",
        b'[{"resourceSpans": []}, ',
    ],
)
def test_malformed_json_file_is_an_input_error_naming_the_file(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "broken-traces.json"
    path.write_bytes(content)
    with pytest.raises(InputError, match=r"broken-traces\.json"):
        read_paths([path])


def test_json_that_is_not_utf8_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(InputError, match=r"latin1\.json: not UTF-8"):
        read_paths([path])


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nowhere\.json"):
        read_paths([tmp_path / "nowhere.json"])


@pytest.mark.parametrize(
    "content",
    [
        b"garbage",
        b"\xff\xff\xff\xff",
        b"\x0a\x05abc",  # a length that runs past the end
    ],
)
def test_malformed_protobuf_is_an_input_error_naming_the_file(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "broken.pb"
    path.write_bytes(content)
    with pytest.raises(InputError, match=r"broken\.pb"):
        read_paths([path])


@pytest.mark.parametrize("cut", [1, 7, 100])
def test_truncated_protobuf_is_an_input_error(tmp_path: Path, cut: int) -> None:
    data = fixture_path("pydantic_ai_v5", "pb").read_bytes()
    path = tmp_path / "truncated.pb"
    path.write_bytes(data[:-cut])
    with pytest.raises(InputError, match=r"truncated\.pb"):
        read_paths([path])


def test_input_error_stops_at_the_bad_file_only_when_read_alone(tmp_path: Path) -> None:
    good = fixture_path("openai_v2_latest")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"{")
    assert len(read_paths([good]).spans) == 3
    with pytest.raises(InputError, match=r"bad\.json"):
        read_paths([good, bad])


# --- JSON lines: one bad line ------------------------------------------------------------------


def test_json_lines_with_a_bad_line_keep_the_good_lines(tmp_path: Path) -> None:
    lines = [
        fixture_path("pydantic_ai_v5").read_text("utf-8").strip(),
        '{"resourceSpans": [ {"oops"',
        fixture_path("openai_v2_latest").read_text("utf-8").strip(),
        "",
        fixture_path("openai_v2_latest", logs=True).read_text("utf-8").strip(),
    ]
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    telemetry = read_paths([path])
    assert telemetry.problems == [f"{path}:2: not valid JSON, line skipped"]
    assert len(telemetry.spans) == 6 + 3
    assert len(telemetry.logs) == 2
    trajectories = trajectory_of(telemetry.spans, telemetry.logs)
    assert len(trajectories) == 2
    for name in ("pydantic_ai_v5", "openai_v2_latest"):
        expected = fixture_trajectory(name)
        assert steps_as_dicts(trajectories[expected.trace_id]) == steps_as_dicts(expected)


def test_json_lines_with_only_bad_lines_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "all-bad.jsonl"
    path.write_text("{oops\n[1, 2\n", "utf-8")
    with pytest.raises(InputError, match=r"all-bad\.jsonl"):
        read_paths([path])


# --- invalid ids ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("spanId", "not-hex!"),
        ("spanId", ""),
        ("spanId", "abcd"),  # valid base64, but 3 bytes
        ("traceId", "0af7651916cd43dd"),  # 8 bytes: a span id, not a trace id
        ("traceId", None),
        ("traceId", ["0af7651916cd43dd8448eb211c80319c"]),
        ("parentSpanId", "zz"),
    ],
)
def test_span_with_invalid_id_is_skipped_and_reported(field: str, value: Any) -> None:
    doc = fixture_json("pydantic_ai_v5")
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    (tool_span,) = [
        sp
        for sp in spans
        if sp["name"] == "execute_tool search"
        and any(kv["value"].get("stringValue") == "call_1" for kv in sp["attributes"])
    ]
    tool_span[field] = value
    telemetry = read_document(doc, "bad-ids.json")
    assert len(telemetry.spans) == 5
    assert "execute_tool search" in [v.name for v in telemetry.spans]  # the other tool span
    assert len(telemetry.problems) == 1
    assert telemetry.problems[0].startswith("bad-ids.json: span 'execute_tool search'")

    # mapped as far as valid: the call is still known from the model's output, and its result
    # from the next chat's input, only the link to the execution span is gone
    trajectory = single_trajectory(telemetry.spans, telemetry.logs)
    reference = fixture_trajectory("pydantic_ai_v5")
    assert [s.kind for s in trajectory.steps] == [s.kind for s in reference.steps]
    call_1 = [s for s in trajectory.steps if s.call_id == "call_1"]
    assert [(s.kind, s.exec_span_id) for s in call_1] == [
        ("tool_call", None),
        ("tool_result", None),
    ]
    assert call_1[0].arguments == '{"query":"OpenTelemetry GenAI semantic conventions"}'
    assert (call_1[1].text or "").startswith(SEARCH_PREFIX)
    assert trajectory.final_answer() == reference.final_answer()


def test_protobuf_span_with_invalid_id_is_skipped_and_reported() -> None:
    request = fixture_request("pydantic_ai_v5")
    spans = request.resource_spans[0].scope_spans[0].spans
    chat = next(sp for sp in spans if sp.name.startswith("chat"))
    chat.span_id = b"\x01\x02\x03"
    tool = next(sp for sp in spans if sp.name.startswith("execute_tool"))
    tool.trace_id = b""
    telemetry = read_bytes(request.SerializeToString(), "bad-ids.pb")
    assert len(telemetry.spans) == 4
    assert sorted(telemetry.problems) == [
        "bad-ids.pb: span 'chat scripted-model': invalid trace/span/parent id size",
        "bad-ids.pb: span 'execute_tool search': invalid trace/span/parent id size",
    ]
    assert all(len(v.span_id) == 16 and len(v.trace_id) == 32 for v in telemetry.spans)
    trajectory = single_trajectory(telemetry.spans, telemetry.logs)
    assert trajectory.runs[0].agent_name == "research_agent"
    assert trajectory.problems == ()


def test_protobuf_logs_request_is_still_told_from_traces() -> None:
    data = fixture_path("openai_v2_latest", "pb", logs=True).read_bytes()
    telemetry = read_bytes(data, "events.pb")
    assert (len(telemetry.spans), len(telemetry.logs)) == (0, 2)
    assert telemetry.problems == []


def test_log_record_with_invalid_ids_is_skipped_and_reported() -> None:
    doc = fixture_json("openai_v2_latest", logs=True)
    records = doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    records[0]["spanId"] = "xyz"
    telemetry = read_document(doc, "events.json")
    assert len(telemetry.logs) == 1
    assert telemetry.logs[0].span_id == records[1]["spanId"]
    assert len(telemetry.problems) == 1
    assert telemetry.problems[0].startswith("events.json: log record:")


def test_iter_json_spans_skips_non_dict_spans_and_scopes() -> None:
    doc = document(span_json("1" * 16, "ok", {}))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][:0] = [None, 5, "span"]
    doc["resourceSpans"][0]["scopeSpans"].append("not a scope")
    doc["resourceSpans"].append(["not", "a", "resource"])
    errors: list[str] = []
    views = list(iter_json_spans(doc, errors))
    assert [v.name for v in views] == ["ok"]


# --- wrong attribute types -----------------------------------------------------------------------


def test_messages_as_an_int() -> None:
    trajectory = chat_with_input({"intValue": "42"})
    assert kinds_and_texts(trajectory) == [("llm", None), ("assistant", "ok")]
    assert trajectory.problems == (
        "chat m (1111111111111111): gen_ai.input.messages: unexpected type int",
    )


@pytest.mark.parametrize("text", ['[{"role": "user", "parts": [', "not json", "{'single': 1}"])
def test_messages_as_invalid_json(text: str) -> None:
    trajectory = chat_with_input(s(text))
    assert kinds_and_texts(trajectory) == [("llm", None), ("assistant", "ok")]
    assert problems_about(trajectory, "gen_ai.input.messages: not valid JSON")
    assert len(trajectory.problems) == 1


def test_messages_as_a_json_object_instead_of_an_array() -> None:
    one = {"role": "user", "parts": [{"type": "text", "content": "hello"}]}
    trajectory = chat_with_input(s(json.dumps(one)))
    # read as the one message it is, and said
    assert kinds_and_texts(trajectory) == [("user", "hello"), ("llm", None), ("assistant", "ok")]
    assert len(problems_about(trajectory, "an object, not an array of messages")) == 1
    assert len(trajectory.problems) == 1


@pytest.mark.parametrize("text", ["5", '"hello"', "true"])
def test_messages_as_a_json_scalar(text: str) -> None:
    trajectory = chat_with_input(s(text))
    assert kinds_and_texts(trajectory) == [("llm", None), ("assistant", "ok")]
    assert problems_about(trajectory, "expected an array of messages")


def test_messages_that_are_not_objects_are_skipped() -> None:
    value = messages(
        5, "text", None, {"role": "user", "parts": [{"type": "text", "content": "hi"}]}
    )
    trajectory = chat_with_input(value)
    assert kinds_and_texts(trajectory) == [("user", "hi"), ("llm", None), ("assistant", "ok")]
    assert len(problems_about(trajectory, "a message that is not an object was skipped")) == 3


def test_parts_that_are_not_objects_are_skipped() -> None:
    value = messages(
        {"role": "user", "parts": [42, None, ["x"], {"type": "text", "content": "hello"}, 1.5]},
    )
    trajectory = chat_with_input(value)
    assert kinds_and_texts(trajectory) == [("user", "hello"), ("llm", None), ("assistant", "ok")]
    assert len(problems_about(trajectory, "a part that is not an object was skipped")) == 4
    assert len(trajectory.problems) == 4


def test_parts_that_are_not_an_array() -> None:
    value = messages(
        {"role": "user", "parts": {"type": "text", "content": "lost"}},
        {"role": "user", "parts": [{"type": "text", "content": "kept"}]},
    )
    trajectory = chat_with_input(value)
    assert kinds_and_texts(trajectory) == [("user", "kept"), ("llm", None), ("assistant", "ok")]
    assert len(problems_about(trajectory, "`parts` that is not an array")) == 1


def test_parts_with_wrong_field_types_still_map() -> None:
    value = messages(
        {"role": ["user"], "parts": [{"type": "text", "content": {"nested": [1, 2]}}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": 7, "name": ["search"], "arguments": "{bad"}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": 7, "response": [1, "a"]}]},
    )
    trajectory = chat_with_input(value)
    # content that is not text becomes JSON text; ids that are not strings become strings;
    # arguments that are not valid JSON are kept as given
    assert [st.kind for st in trajectory.steps] == [
        "assistant",
        "tool_call",
        "tool_result",
        "llm",
        "assistant",
    ]
    first, call, result = trajectory.steps[:3]
    assert first.text == '{"nested": [1, 2]}'
    assert (call.call_id, call.arguments) == ("7", "{bad")
    assert (result.call_id, result.text) == ("7", '[1, "a"]')
    assert result.tool == call.tool


def test_structured_messages_are_accepted_like_json() -> None:
    """An AnyValue array of kvlists (as on log events) maps like the JSON string."""
    structured = {
        "arrayValue": {
            "values": [
                {
                    "kvlistValue": {
                        "values": [
                            {"key": "role", "value": s("user")},
                            {
                                "key": "parts",
                                "value": {
                                    "arrayValue": {
                                        "values": [
                                            {
                                                "kvlistValue": {
                                                    "values": [
                                                        {"key": "type", "value": s("text")},
                                                        {"key": "content", "value": s("hello")},
                                                    ]
                                                }
                                            }
                                        ]
                                    }
                                },
                            },
                        ]
                    }
                }
            ]
        }
    }
    as_json = messages({"role": "user", "parts": [{"type": "text", "content": "hello"}]})
    assert steps_as_dicts(chat_with_input(structured)) == steps_as_dicts(chat_with_input(as_json))
    assert chat_with_input(structured).problems == ()


@pytest.mark.parametrize(
    "value",
    [
        {"intValue": "not a number"},
        {"doubleValue": "not a number"},
        {"doubleValue": "NaN"},
        {"bytesValue": "%%%"},
        {"arrayValue": {"values": "nope"}},
        {"arrayValue": "nope"},
        {"kvlistValue": {"values": [{"key": 5}, "x", {"key": "k"}]}},
        {},
        "a bare string",
        None,
    ],
)
def test_odd_any_values_never_raise(value: Any) -> None:
    attrs = {
        "gen_ai.operation.name": s("chat"),
        "gen_ai.usage.input_tokens": value,
        "gen_ai.request.model": value,
        "gen_ai.response.finish_reasons": value,
        "gen_ai.input.messages": value,
        "gen_ai.output.messages": ANSWER,
    }
    trajectory = trajectory_from(document(span_json("1" * 16, "chat m", attrs)))
    assert [st.kind for st in trajectory.steps] == ["llm", "assistant"]
    assert trajectory.steps[1].text == "ok"


def test_wrong_types_in_tool_span() -> None:
    attrs = {
        "gen_ai.operation.name": s("execute_tool"),
        "gen_ai.tool.name": {"intValue": "3"},
        "gen_ai.tool.call.id": {"boolValue": True},
        "gen_ai.tool.call.arguments": {
            "kvlistValue": {
                "values": [
                    {"key": "b", "value": {"intValue": "1"}},
                    {"key": "a", "value": s("x")},
                ]
            }
        },
        "gen_ai.tool.call.result": {"arrayValue": {"values": [s("r1"), {"intValue": "2"}]}},
    }
    trajectory = trajectory_from(document(span_json("2" * 16, "execute_tool t", attrs)))
    outline = [(st.kind, st.tool, st.call_id, st.arguments, st.text) for st in trajectory.steps]
    # a tool name that is not a string is not a name: the span name stands in
    assert outline == [
        ("tool_call", "execute_tool t", None, '{"a":"x","b":1}', None),
        ("tool_result", "execute_tool t", None, None, '["r1", 2]'),
    ]


def test_invalid_json_in_pydantic_attributes_is_reported() -> None:
    doc = fixture_json("pydantic_ai_v5")
    for sp in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for kv in sp["attributes"]:
            if kv["key"] in ("pydantic_ai.all_messages", "gen_ai.system_instructions"):
                kv["value"] = s("[{broken")
    trajectory = trajectory_from(doc)
    reference = fixture_trajectory("pydantic_ai_v5")
    # no system step any more; everything else is what the chat and tool spans say
    expected = [st.kind for st in reference.steps if st.kind != "system"]
    assert [st.kind for st in trajectory.steps] == expected
    assert trajectory.final_answer() == reference.final_answer()
    assert problems_about(trajectory, "pydantic_ai.all_messages: not valid JSON")
    assert problems_about(trajectory, "gen_ai.system_instructions: not valid JSON")


# --- absurdly large values -----------------------------------------------------------------------

BIG = 20 * 1024 * 1024


def test_twenty_megabyte_messages_string() -> None:
    value = messages({"role": "user", "parts": [{"type": "text", "content": "x" * BIG}]})
    assert len(value["stringValue"]) > MAX_JSON_BYTES
    trajectory = chat_with_input(value)
    assert kinds_and_texts(trajectory) == [("llm", None), ("assistant", "ok")]
    (problem,) = trajectory.problems
    assert "gen_ai.input.messages" in problem
    assert f"over the {MAX_JSON_BYTES} byte limit" in problem


def test_twenty_megabyte_arguments_and_result() -> None:
    attrs = {
        "gen_ai.operation.name": s("execute_tool"),
        "gen_ai.tool.name": s("search"),
        "gen_ai.tool.call.id": s("c1"),
        "gen_ai.tool.call.arguments": s('{"q": "' + "y" * BIG + '"}'),
        "gen_ai.tool.call.result": s("z" * BIG),
    }
    trajectory = trajectory_from(document(span_json("2" * 16, "execute_tool search", attrs)))
    call, result = trajectory.steps
    assert (call.kind, call.tool, call.call_id) == ("tool_call", "search", "c1")
    # too large to parse: kept as the raw text rather than canonicalized
    assert call.arguments is not None and call.arguments.startswith('{"q": "yyy')
    assert (result.kind, result.call_id) == ("tool_result", "c1")
    assert result.text is not None and len(result.text) == BIG


# --- deep nesting --------------------------------------------------------------------------------

DEPTH = 10_000


def _deep_kvlist(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = s("leaf")
    for _ in range(depth):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    return value


def _deep_array(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = s("leaf")
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


def _nesting(value: Any) -> tuple[int, Any]:
    depth = 0
    while isinstance(value, (dict, list)):
        value = value["k"] if isinstance(value, dict) else value[0]
        depth += 1
    return depth, value


@pytest.mark.parametrize("build", [_deep_kvlist, _deep_array])
def test_decode_any_value_json_stops_at_the_depth_limit(build: Any) -> None:
    assert sys.getrecursionlimit() < DEPTH * 4  # deep enough to blow a naive decoder
    decoded = decode_any_value_json(build(DEPTH))
    assert _nesting(decoded) == (MAX_VALUE_DEPTH, None)
    # shallow values are decoded whole
    assert _nesting(decode_any_value_json(build(5))) == (5, "leaf")


@pytest.mark.parametrize("build", [_deep_kvlist, _deep_array])
def test_deep_values_through_the_whole_mapping(build: Any) -> None:
    attrs = {
        "gen_ai.operation.name": s("chat"),
        "gen_ai.input.messages": build(DEPTH),
        "gen_ai.output.messages": build(DEPTH),
        "gen_ai.system_instructions": build(DEPTH),
        "gen_ai.response.finish_reasons": build(DEPTH),
    }
    tool_attrs = {
        "gen_ai.operation.name": s("execute_tool"),
        "gen_ai.tool.name": s("t"),
        "gen_ai.tool.call.arguments": build(DEPTH),
        "gen_ai.tool.call.result": build(DEPTH),
    }
    doc = document(
        span_json("1" * 16, "chat m", attrs),
        span_json("2" * 16, "execute_tool t", tool_attrs, start=3_000, end=4_000),
    )
    errors: list[str] = []
    views = list(iter_json_spans(doc, errors))  # built in memory: no json.loads involved
    assert errors == []
    normalized = [normalize(v) for v in views]
    assert all(n is not None for n in normalized)
    trajectory = single_trajectory(views)
    assert [st.kind for st in trajectory.steps] == ["llm", "tool_call", "tool_result"]
    for step in trajectory.steps:
        step.to_dict()


def test_deep_values_in_sdk_log_bodies_and_attributes() -> None:
    deep: Any = "leaf"
    for _ in range(DEPTH):
        deep = {"k": (deep,)}
    record = SimpleNamespace(
        trace_id=int(TRACE, 16),
        span_id=0x1111111111111111,
        event_name="gen_ai.client.inference.operation.details",
        timestamp=1,
        observed_timestamp=1,
        attributes={"gen_ai.input.messages": (deep,)},
        body=deep,
    )
    log = LogView.from_sdk(record)
    assert isinstance(log.body, dict)
    assert isinstance(log.attributes["gen_ai.input.messages"], list)


def _deep_json_text(depth: int) -> str:
    head = '{"kvlistValue":{"values":[{"key":"k","value":' * depth
    tail = "}]}}" * depth
    return head + '{"stringValue":"leaf"}' + tail


def _document_text(value_text: str) -> str:
    """An OTLP/JSON document as text, built without json.dumps (which could not nest so deep)."""
    span = (
        f'{{"traceId":"{TRACE}","spanId":"{"1" * 16}","name":"chat m","attributes":['
        '{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},'
        '{"key":"gen_ai.input.messages","value":' + value_text + "}]}"
    )
    return '{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[' + span + "]}]}]}"


def test_json_document_too_deep_for_the_parser_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(_document_text(_deep_json_text(DEPTH)), "utf-8")
    with pytest.raises(InputError, match=r"deep\.json"):
        read_paths([path])


def test_json_document_deeper_than_the_value_limit_is_read() -> None:
    telemetry = read_bytes(_document_text(_deep_json_text(100)).encode(), "deep.json")
    assert telemetry.problems == []
    (view,) = telemetry.spans
    assert _nesting(view.attributes["gen_ai.input.messages"]) == (MAX_VALUE_DEPTH, None)
    trajectory = single_trajectory(telemetry.spans)
    assert [st.kind for st in trajectory.steps] == ["llm"]


def test_deeply_nested_json_string_attribute() -> None:
    nested = "[" * 100_000 + "]" * 100_000
    trajectory = chat_with_input(s(nested))
    assert kinds_and_texts(trajectory) == [("llm", None), ("assistant", "ok")]
    assert problems_about(trajectory, "gen_ai.input.messages: not valid JSON")
    attrs = {
        "gen_ai.operation.name": s("execute_tool"),
        "gen_ai.tool.name": s("t"),
        "gen_ai.tool.call.arguments": s(nested),
    }
    tool = trajectory_from(document(span_json("2" * 16, "execute_tool t", attrs)))
    assert tool.steps[0].arguments == nested  # not parseable: kept as given


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def test_protobuf_too_deep_for_the_parser_is_an_input_error() -> None:
    value = _field(1, b"leaf")  # AnyValue.string_value
    for _ in range(DEPTH):
        key_value = _field(1, b"k") + _field(2, value)  # KeyValue{key, value}
        value = _field(6, _field(1, key_value))  # AnyValue.kvlist_value{values}
    attribute = _field(1, b"deep") + _field(2, value)
    span = _field(1, bytes.fromhex(TRACE)) + _field(2, b"\x01" * 8) + _field(9, attribute)
    request = _field(1, _field(2, _field(2, span)))  # resource_spans.scope_spans.spans
    with pytest.raises(InputError, match=r"deep\.pb"):
        read_bytes(request, "deep.pb")


# --- parent cycles -------------------------------------------------------------------------------

A, B, C, X, Y = "a" * 16, "b" * 16, "c" * 16, "d" * 16, "e" * 16


def _agent(span_id: str, name: str, parent: str, start: int, end: int) -> dict[str, Any]:
    attrs = {"gen_ai.operation.name": s("invoke_agent"), "gen_ai.agent.name": s(name)}
    return span_json(span_id, f"invoke_agent {name}", attrs, parent=parent, start=start, end=end)


def _chat(span_id: str, parent: str, text: str, start: int, end: int) -> dict[str, Any]:
    attrs = {
        "gen_ai.operation.name": s("chat"),
        "gen_ai.output.messages": messages(
            {"role": "assistant", "parts": [{"type": "text", "content": text}]}
        ),
    }
    return span_json(span_id, "chat m", attrs, parent=parent, start=start, end=end)


def _check_tree(trajectory: Trajectory) -> None:
    """Runs form a tree: one root, every parent known, no run its own ancestor."""
    by_id = {run.run_id: run for run in trajectory.runs}
    roots = [run for run in trajectory.runs if run.parent_run_id is None]
    assert len(roots) == 1
    for run in trajectory.runs:
        seen = {run.run_id}
        parent = run.parent_run_id
        while parent is not None:
            assert parent in by_id
            assert parent not in seen
            seen.add(parent)
            parent = by_id[parent].parent_run_id
        assert run.depth == len(seen) - 1


@pytest.mark.parametrize("reverse", [False, True])
def test_two_agent_spans_parent_of_each_other(reverse: bool) -> None:
    spans = [
        _agent(A, "alpha", B, 100, 900),
        _agent(B, "beta", A, 200, 800),
        _chat(C, B, "from beta", 300, 400),
    ]
    doc = document(*(reversed(spans) if reverse else spans))
    trajectory = trajectory_from(doc)
    _check_tree(trajectory)
    runs = {run.agent_name: run for run in trajectory.runs}
    assert set(runs) == {"alpha", "beta"}
    # cut above the earlier span: alpha is the root, beta inside it
    assert runs["alpha"].parent_run_id is None
    assert runs["beta"].parent_run_id == A
    assert [(st.kind, st.agent or st.text, st.run_id) for st in trajectory.steps] == [
        ("agent", "alpha", A),
        ("agent", "beta", B),
        ("llm", None, B),
        ("assistant", "from beta", B),
    ]
    assert trajectory.problems == (
        f"parent ids form a cycle ({A} -> {B}); span {A} taken as a root",
    )
    assert trajectory.final_answer(B) == "from beta"
    assert [st.text for st in trajectory.run_steps(A, nested=True) if st.text] == ["from beta"]


def test_agent_span_that_is_its_own_parent() -> None:
    trajectory = trajectory_from(
        document(_agent(A, "alpha", A, 100, 900), _chat(C, A, "hi", 200, 300))
    )
    _check_tree(trajectory)
    (run,) = trajectory.runs
    assert (run.run_id, run.parent_run_id, run.agent_name) == (A, None, "alpha")
    assert trajectory.final_answer() == "hi"
    assert len(problems_about(trajectory, "cycle")) == 1


def test_cycle_through_spans_that_are_not_genai() -> None:
    """X and Y (plain app spans) are each other's parent; the agent sits below X."""
    spans = [
        span_json(X, "app x", {}, parent=Y, start=10, end=1_000),
        span_json(Y, "app y", {}, parent=X, start=20, end=990),
        _agent(A, "alpha", X, 100, 900),
        _chat(C, A, "hi", 200, 300),
        _chat(B, Y, "outside", 400, 500),  # a chat span outside any agent
    ]
    telemetry = read_document(document(*spans))
    trajectory = single_trajectory(telemetry.spans)
    _check_tree(trajectory)
    names = [(run.agent_name, run.implicit) for run in trajectory.runs]
    assert names[0][1] is True  # the implicit run of the trace, named after a root app span
    assert names[0][0] in ("app x", "app y")
    assert ("alpha", False) in names
    assert trajectory.final_answer(A) == "hi"
    assert problems_about(trajectory, "cycle")
    # the same set of spans in another order gives the same trajectory
    again = single_trajectory(list(reversed(telemetry.spans)))
    assert steps_as_dicts(again) == steps_as_dicts(trajectory)
    assert again.runs == trajectory.runs
    assert again.problems == trajectory.problems


def test_long_parent_chain_without_cycle_is_fine() -> None:
    chain = [
        span_json(f"{i + 1:016x}", "app", {}, parent=f"{i:016x}" if i else "") for i in range(3_000)
    ]
    chain.append(_agent("f" * 16, "deep", f"{3_000:016x}", 100, 200))
    trajectory = trajectory_from(document(*chain))
    assert trajectory.problems == ()
    (run,) = trajectory.runs
    assert (run.agent_name, run.parent_run_id) == ("deep", None)


# --- duplicate delivery --------------------------------------------------------------------------


def test_a_span_delivered_twice_counts_once() -> None:
    doc = fixture_json("openai_v2_latest")
    spans = doc["resourceSpans"][0]["scopeSpans"]
    doubled = copy.deepcopy(doc)
    doubled["resourceSpans"][0]["scopeSpans"] = spans + copy.deepcopy(spans)
    telemetry = read_document(doubled)
    assert len(telemetry.spans) == 6
    trajectory = single_trajectory(telemetry.spans, telemetry.logs)
    assert steps_as_dicts(trajectory) == steps_as_dicts(fixture_trajectory("openai_v2_latest"))


def test_span_views_of_hostile_json_never_raise() -> None:
    span = span_json("1" * 16, "x", {})
    span.update(
        {
            "kind": "CLIENT",
            "startTimeUnixNano": "yesterday",
            "endTimeUnixNano": 1.5e18,
            "status": {"code": "STATUS_CODE_ERROR", "message": 5},
            "flags": None,
            "events": [None, {"name": 5, "timeUnixNano": [], "attributes": "no"}],
            "name": 123,
        }
    )
    view = SpanView.from_json(span)
    assert (view.kind, view.start_ns, view.end_ns) == (0, 0, int(1.5e18))
    assert (view.status_code, view.status_message, view.name) == (2, "5", "123")
    assert [(e.name, e.time_ns, e.attributes) for e in view.events] == [("5", 0, {})]
    assert view.is_error
