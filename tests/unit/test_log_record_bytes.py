"""`encoded_log_record` / `logs_request_bytes`: evaluation log records written as bytes.

The sidecar emits about one `gen_ai.evaluation.result` record per GenAI span; it writes them as
bytes rather than building `LogRecord` messages. Those bytes must be exactly what upb serializes
for the record `evaluation_log_record` builds, and the framed request must parse back to the
request the message API would build.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from tracehound import _accel
from tracehound.evaluators.base import EvaluationResult
from tracehound.server import _otlp
from tracehound.server._otlp import encoded_log_record, evaluation_log_record, logs_request_bytes

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_texts = st.text(max_size=40)
_results = st.builds(
    EvaluationResult,
    name=st.sampled_from(["tracehound.drift", "tracehound.evidence.reuse", "é"]),
    evaluator=_texts,
    evaluator_version=_texts,
    span_id=st.none(),
    score_value=st.one_of(st.none(), st.floats(allow_nan=True), st.integers(-5, 5)),
    score_label=st.one_of(st.none(), _texts),
    explanation=st.one_of(st.none(), st.text(max_size=300)),
    error_type=st.one_of(st.none(), st.sampled_from(["ValueError", "TimeoutError"])),
    attributes=st.just({}),
)
_hex_ids = st.tuples(st.binary(min_size=16, max_size=16), st.binary(min_size=8, max_size=8))
_times = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**63, 2**64 - 1]))


@SETTINGS
@given(result=_results, ids=_hex_ids, time_ns=_times)
def test_record_bytes_are_upb_serialization(
    result: EvaluationResult, ids: tuple[bytes, bytes], time_ns: int
) -> None:
    trace_id, span_id = ids[0].hex(), ids[1].hex()
    expected = evaluation_log_record(result, trace_id, span_id, time_ns).SerializeToString()
    assert encoded_log_record(result, trace_id, span_id, time_ns) == expected


@pytest.mark.parametrize(("trace_id", "span_id"), [("zz" * 16, "01" * 8), ("01" * 8, "02" * 8)])
def test_odd_ids_take_the_message_path(trace_id: str, span_id: str) -> None:
    result = EvaluationResult(name="n", evaluator="e", evaluator_version="1", score_value=1.0)
    try:
        expected = evaluation_log_record(result, trace_id, span_id, 5).SerializeToString()
    except ValueError:
        with pytest.raises(ValueError):
            encoded_log_record(result, trace_id, span_id, 5)
        return
    assert encoded_log_record(result, trace_id, span_id, 5) == expected


@pytest.mark.skipif(_accel._in_use is None, reason="the C accelerator is off or not built")
def test_accelerated_path_does_not_build_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("the bytes path should not build a LogRecord")

    monkeypatch.setattr(_otlp, "evaluation_log_record", refuse)
    result = EvaluationResult(name="n", evaluator="e", evaluator_version="1", score_value=0.5)
    assert encoded_log_record(result, "01" * 16, "02" * 8, 7)


@SETTINGS
@given(
    groups=st.lists(
        st.tuples(
            st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
            st.lists(_results, max_size=3),
        ),
        max_size=3,
    ),
    version=st.text(max_size=5),
)
def test_request_bytes_parse_to_the_message_request(
    groups: list[tuple[dict[str, str], list[EvaluationResult]]], version: str
) -> None:
    scope = InstrumentationScope(name="tracehound", version=version)
    expected = ExportLogsServiceRequest()
    framed: list[tuple[bytes, bytes, list[bytes]]] = []
    for attributes, results in groups:
        resource = Resource()
        for key, value in attributes.items():
            resource.attributes.append(KeyValue(key=key))
            resource.attributes[-1].value.string_value = value
        records = [evaluation_log_record(r, "01" * 16, "02" * 8, 9) for r in results]
        rl = expected.resource_logs.add()
        rl.resource.CopyFrom(resource)
        sl = rl.scope_logs.add()
        sl.scope.CopyFrom(scope)
        sl.log_records.extend(records)
        framed.append(
            (
                resource.SerializeToString(),
                scope.SerializeToString(),
                [r.SerializeToString() for r in records],
            )
        )
    payload = logs_request_bytes(framed)
    assert ExportLogsServiceRequest.FromString(payload) == expected
    assert payload == expected.SerializeToString()


@SETTINGS
@given(result=_results, ids=_hex_ids, time_ns=_times, upper=st.booleans())
def test_framed_records_are_log_records_fields(
    result: EvaluationResult, ids: tuple[bytes, bytes], time_ns: int, upper: bool
) -> None:
    trace_id, span_id = ids[0].hex(), ids[1].hex()
    if upper:  # bytes.fromhex reads either case
        trace_id, span_id = trace_id.upper(), span_id.upper()
    record = evaluation_log_record(result, trace_id, span_id, time_ns).SerializeToString()
    framed = encoded_log_record(result, trace_id, span_id, time_ns, framed=True)
    assert framed == _otlp._length_delimited(b"\x12", record)
    scope = InstrumentationScope(name="tracehound").SerializeToString()
    assert logs_request_bytes([(b"", scope, [framed])], framed=True) == logs_request_bytes(
        [(b"", scope, [record])]
    )


@pytest.mark.parametrize(
    ("trace_id", "span_id"),
    [("01 " * 16, "02" * 8), ("01" * 16, "0x" * 8), ("é" * 32, "02" * 8), ("01" * 16, "02" * 9)],
)
def test_ids_the_c_encoder_does_not_read_take_the_message_path(trace_id: str, span_id: str) -> None:
    result = EvaluationResult(name="n", evaluator="e", evaluator_version="1", score_value=1.0)
    assert _accel._in_use is None or (
        _accel._in_use.encode_log_record({}, trace_id, span_id, 5, _otlp._LOG_PARTS[False], False)
        is None
    )
    try:
        expected = evaluation_log_record(result, trace_id, span_id, 5).SerializeToString()
    except ValueError:
        with pytest.raises(ValueError):
            encoded_log_record(result, trace_id, span_id, 5, framed=True)
        return
    framed = encoded_log_record(result, trace_id, span_id, 5, framed=True)
    assert framed == _otlp._length_delimited(b"\x12", expected)


@pytest.mark.skipif(_accel._in_use is None, reason="needs the C accelerator")
def test_encode_log_record_arguments_and_leaks() -> None:
    from _leaks import assert_leak_free, expecting

    native = _accel._in_use
    parts = _otlp._LOG_PARTS[True]
    attributes = {"gen_ai.evaluation.name": "x", "score": 0.5, "n": 3}
    trace_id, span_id = "ab" * 16, "cd" * 8
    with pytest.raises(TypeError):
        native.encode_log_record(attributes, trace_id, span_id, 1, (b"",) * 4, False)
    with pytest.raises(TypeError):
        native.encode_log_record(attributes, trace_id, span_id, 1, parts[:3], False)
    assert native.encode_log_record(attributes, trace_id, span_id, -1, parts, True) is None
    assert native.encode_log_record(attributes, trace_id, span_id, 2**64, parts, True) is None
    assert native.encode_log_record({1: "x"}, trace_id, span_id, 1, parts, True) is None
    watched: list[object] = [attributes, trace_id, span_id, parts]
    assert_leak_free(
        lambda: native.encode_log_record(attributes, trace_id, span_id, 7, parts, True),
        watched,
        n=20_000,
    )
    assert_leak_free(
        lambda: native.encode_log_record(attributes, trace_id, "zz", 7, parts, True),
        watched,
        n=20_000,
    )
    assert_leak_free(
        expecting(
            lambda: native.encode_log_record(attributes, trace_id, span_id, 7, (1, 2), True),
            TypeError,
        ),
        watched,
        n=20_000,
    )
