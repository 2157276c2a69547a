"""The sidecar's OTLP wire helpers: decompression limits, JSON with hex ids, statuses, in-place
span edits, evaluation log records."""

from __future__ import annotations

import base64
import gzip
import json
import zlib

import pytest
from google.rpc import code_pb2, error_details_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracehound.evaluators.base import EvaluationResult
from tracehound.server._otlp import (
    JSON,
    PROTOBUF,
    TRACES,
    BadRequest,
    Overloaded,
    TooLarge,
    UnsupportedMediaType,
    decode_request,
    decompress,
    evaluation_log_record,
    media_type,
    redact_span,
    retry_info_trailers,
    set_attributes,
    status_body,
    to_json_line,
)
from tracehound.testing import attributes


def test_decompress_identity_gzip_deflate_and_multi_member() -> None:
    data = b"otlp" * 1000
    assert decompress(data, "", 10_000) == data
    assert decompress(gzip.compress(data), "gzip", 10_000) == data
    assert decompress(zlib.compress(data), "deflate", 10_000) == data
    raw = zlib.compressobj(wbits=-15)
    raw_deflate = raw.compress(data) + raw.flush()
    assert decompress(raw_deflate, "deflate", 10_000) == data
    two = gzip.compress(data[:2000]) + gzip.compress(data[2000:])
    assert decompress(two, "GZIP", 10_000) == data


def test_decompress_limits_apply_to_the_output() -> None:
    bomb = gzip.compress(b"\0" * 10_000_000)
    assert len(bomb) < 20_000
    with pytest.raises(TooLarge):
        decompress(bomb, "gzip", 1_000_000)
    with pytest.raises(TooLarge):
        decompress(b"x" * 101, "identity", 100)
    assert decompress(gzip.compress(b"x" * 100), "gzip", 100) == b"x" * 100


@pytest.mark.parametrize(
    ("body", "encoding"), [(b"not gzip", "gzip"), (gzip.compress(b"x")[:-6], "gzip"), (b"x", "br")]
)
def test_decompress_bad_input(body: bytes, encoding: str) -> None:
    with pytest.raises(BadRequest):
        decompress(body, encoding, 1000)


def test_media_types() -> None:
    assert media_type("application/x-protobuf") == PROTOBUF
    assert media_type("application/json; charset=utf-8") == JSON
    with pytest.raises(UnsupportedMediaType):
        media_type("text/plain")


def test_json_hex_ids_and_invalid_ids_are_per_span() -> None:
    trace_id, span_id = bytes(range(16)), bytes(range(1, 9))
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id.hex().upper(),
                                "spanId": span_id.hex(),
                                "name": "a",
                            },
                            {"traceId": "zz", "spanId": span_id.hex(), "name": "b"},
                            {
                                "traceId": base64.b64encode(trace_id).decode(),
                                "spanId": span_id.hex(),
                                "name": "c",
                            },
                        ]
                    }
                ]
            }
        ]
    }
    request = decode_request(TRACES, json.dumps(document).encode(), JSON)
    spans = request.resource_spans[0].scope_spans[0].spans
    assert bytes(spans[0].trace_id) == trace_id
    assert len(spans[1].trace_id) == 1  # invalid: left for per-span rejection
    assert bytes(spans[2].trace_id) == trace_id  # protobuf's base64 JSON mapping accepted


def test_json_ignores_snake_case_and_unknown_keys() -> None:
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "name": "a",
                                "dropped_events_count": 2,
                                "futureField": 1,
                                "droppedLinksCount": 3,
                            }
                        ]
                    }
                ]
            }
        ],
        "extra": True,
    }
    span = (
        decode_request(TRACES, json.dumps(document).encode(), JSON)
        .resource_spans[0]
        .scope_spans[0]
        .spans[0]
    )
    assert (span.dropped_events_count, span.dropped_links_count) == (0, 3)


@pytest.mark.parametrize("body", [b"[]", b"{", b'{"resourceSpans": 3}', b"\xff\xfe"])
def test_json_malformed(body: bytes) -> None:
    with pytest.raises(BadRequest):
        decode_request(TRACES, body, JSON)


def test_protobuf_malformed() -> None:
    with pytest.raises(BadRequest):
        decode_request(TRACES, b"\x0a\xff\xff\xff\x0f", PROTOBUF)


def test_to_json_line_writes_hex_ids_and_integer_enums() -> None:
    request = ExportTraceServiceRequest()
    span = (
        request.resource_spans.add()
        .scope_spans.add()
        .spans.add(
            trace_id=b"\xab" * 16, span_id=b"\xcd" * 8, parent_span_id=b"\xef" * 8, kind=3, name="x"
        )
    )
    span.links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    line = to_json_line(request)
    assert "\n" not in line
    decoded = json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert decoded["traceId"] == "ab" * 16
    assert decoded["parentSpanId"] == "ef" * 8
    assert decoded["kind"] == 3
    assert decoded["links"][0]["spanId"] == "02" * 8
    # and it parses back through the receiver's JSON path
    again = decode_request(TRACES, line.encode(), JSON)
    assert again == request


def test_status_bodies() -> None:
    bad = status_body(BadRequest("broken"))
    assert bad.code == code_pb2.INVALID_ARGUMENT
    assert bad.details[0].Is(error_details_pb2.BadRequest.DESCRIPTOR)
    too_large = TooLarge("big")
    assert status_body(too_large).code == code_pb2.RESOURCE_EXHAUSTED
    assert not status_body(too_large).details
    assert dict(retry_info_trailers(too_large)).keys() == {"grpc-status-details-bin"}
    busy = Overloaded("busy", retry_after=2.5)
    info = error_details_pb2.RetryInfo.FromString(
        dict(retry_info_trailers(busy))["google.rpc.retryinfo-bin"]
    )
    assert (info.retry_delay.seconds, info.retry_delay.nanos) == (2, 500_000_000)
    assert (busy.http_status, too_large.http_status, bad.code) == (503, 413, 3)


@pytest.mark.parametrize(
    ("present", "count"),
    [
        ({"tracehound.loop.count", "gen_ai.system"}, 1),  # known to be there: replaced
        (None, 1),  # unknown: read from the span, replaced
        ({"gen_ai.system"}, 2),  # the caller's word that it is not there: appended unread
    ],
)
def test_set_attributes_trusts_the_keys_the_caller_knows(
    present: set[str] | None, count: int
) -> None:
    span = Span()
    span.attributes.add(key="tracehound.loop.count").value.int_value = 1
    span.attributes.add(key="gen_ai.system").value.string_value = "openai"
    set_attributes(span.attributes, {"tracehound.loop.count": 3, "new": "x"}, present)
    keys = [kv.key for kv in span.attributes]
    assert keys.count("tracehound.loop.count") == count
    assert keys[-1] == "new"
    assert attributes(span.attributes)["tracehound.loop.count"] == 3  # the last value wins


def test_set_attributes_types_and_replacement() -> None:
    span = Span()
    span.attributes.add(key="tracehound.loop.count").value.int_value = 1
    set_attributes(
        span.attributes,
        {
            "tracehound.loop.count": 3,
            "b": True,
            "d": 0.5,
            "s": "x",
            "l": ["a", "b"],
            "e": [],
            "m": {"k": 1},
            "huge": 2**70,
        },
    )
    assert [kv.key for kv in span.attributes].count("tracehound.loop.count") == 1
    decoded = attributes(span.attributes)
    assert decoded == {
        "tracehound.loop.count": 3,
        "b": True,
        "d": 0.5,
        "s": "x",
        "l": ["a", "b"],
        "e": [],
        "m": {"k": 1},
        "huge": str(2**70),
    }
    by_key = {kv.key: kv.value for kv in span.attributes}
    assert by_key["e"].WhichOneof("value") == "array_value"


def test_redact_span_in_place() -> None:
    span = Span()
    set_attributes(
        span.attributes,
        {"gen_ai.input.messages": "[...]", "gen_ai.request.model": "m", "input.value": "q"},
    )
    event = span.events.add(name="gen_ai.user.message")
    set_attributes(event.attributes, {"content": "secret", "role": "user"})
    assert redact_span(span) == 3
    assert attributes(span.attributes) == {"gen_ai.request.model": "m", "tracehound.redacted": 3}
    assert attributes(span.events[0].attributes) == {"role": "user"}


def test_evaluation_log_record() -> None:
    result = EvaluationResult(
        name="tracehound.loop",
        evaluator="loops",
        evaluator_version="1",
        score_value=0,
        score_label="repeat",
        explanation="again",
    )
    record = evaluation_log_record(result, "ab" * 16, "cd" * 8, 123)
    assert record.event_name == "gen_ai.evaluation.result"
    assert bytes(record.span_id) == b"\xcd" * 8
    assert record.severity_number == 9
    values = {kv.key: kv.value for kv in record.attributes}
    assert values["gen_ai.evaluation.score.value"].WhichOneof("value") == "double_value"
    assert attributes(record.attributes)["gen_ai.evaluation.score.label"] == "repeat"
    logs = ExportLogsServiceRequest()
    logs.resource_logs.add().scope_logs.add().log_records.append(record)
    assert logs.SerializeToString()
