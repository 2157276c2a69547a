"""The C accelerator (`tracehound._speedups`) changes speed, never results.

Views built over the bytes (attributes decoded by the C reader) and views over upb's objects
(the pure-Python path, forced here by switching the accelerator off) must give the same
attributes, keys, trajectories and evaluation results, on every captured fixture and on the
benchmarks' generated workloads. The C functions themselves are tested against upb in
`test_speedups.py`; the sidecar's pipeline tests run both ways (`test_server_pipeline.py`).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from helpers import FIXTURE_NAMES, fixture_logs_request, fixture_path, has_logs, logs_from_proto
from tracehound import _accel
from tracehound.cli import select_evaluators
from tracehound.engine import Engine, EngineConfig
from tracehound.spans import LogView, SpanView, iter_proto_spans

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import normalize_cost
import sidecar_throughput


def test_the_accelerator_is_built() -> None:
    """CI builds it (a C compiler is there); a missing build must not pass unnoticed."""
    if os.environ.get("TRACEHOUND_PURE_PYTHON"):
        assert not _accel.NATIVE
    else:
        assert _accel.NATIVE, (
            "tracehound._speedups is not built: install a C compiler and the Python headers, "
            "then `pip install -e .` again"
        )


# The tests below compare the C path with the pure-Python one: with the accelerator turned off
# (TRACEHOUND_PURE_PYTHON=1, a run of the suite on the pure-Python paths) there is only one.
# Unbuilt without that variable, they fail (`test_the_accelerator_is_built` says why).
compares_both_paths = pytest.mark.skipif(
    bool(os.environ.get("TRACEHOUND_PURE_PYTHON")),
    reason="TRACEHOUND_PURE_PYTHON=1: the C path is off, so there is nothing to compare",
)


def _plain(value: Any) -> Any:
    """NaN-aware, type-preserving comparison form."""
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return [(k, _plain(v)) for k, v in value.items()]  # key order matters too
    return (type(value).__name__, value)


def _views(raw: bytes) -> list[SpanView]:
    return list(iter_proto_spans(ExportTraceServiceRequest.FromString(raw), raw=raw))


def _read(raw: bytes) -> list[tuple[Any, ...]]:
    return [
        (
            *(v.trace_id, v.span_id, v.parent_span_id, v.name, v.parent_is_remote, v.scope_name),
            _plain(v.attributes),
            v.attribute_keys,
        )
        for v in _views(raw)
    ]


def _results(raw: bytes, logs: list[LogView]) -> list[str]:
    engine = Engine(select_evaluators(None), EngineConfig())
    for log in logs:
        engine.add_log(log)
    for view in _views(raw):
        engine.add_span(view)
    out = []
    for trace in engine.flush():
        out.append(repr(trace.trajectory))
        out.extend(repr(r) for r in trace.results)
        out.append(repr(sorted(trace.attributes.items())))
    return out


@compares_both_paths
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixtures_read_and_evaluate_the_same_either_way(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = fixture_path(name, "pb").read_bytes()
    logs = logs_from_proto(fixture_logs_request(name)) if has_logs(name) else []
    assert any(hasattr(v, "_wire_at") for v in _views(raw)), "the C path was not taken"
    native = (_read(raw), _results(raw, logs))
    monkeypatch.setattr(_accel, "_in_use", None)
    assert not any(hasattr(v, "_wire_at") for v in _views(raw))
    assert (_read(raw), _results(raw, logs)) == native


@pytest.mark.parametrize(
    "batches",
    [
        normalize_cost.make_workload("genai", 512)[:1],
        normalize_cost.make_workload("plain", 512)[:1],
        sidecar_throughput.workload("genai", 512, 7)[:1],
    ],
    ids=["chat-spans", "http-db-spans", "agent-traces"],
)
@compares_both_paths
def test_benchmark_workloads_read_the_same_either_way(
    batches: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    native = [_read(raw) for raw in batches]
    monkeypatch.setattr(_accel, "_in_use", None)
    assert [_read(raw) for raw in batches] == native


@compares_both_paths
def test_bad_ids_are_reported_the_same_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for n in range(1, 5):
        spans.add(trace_id=n.to_bytes(16, "big"), span_id=n.to_bytes(8, "big"), name=f"s{n}")
    spans[1].parent_span_id = b"\x01\x02\x03"  # the scan checks trace and span ids only
    raw = request.SerializeToString()

    def read() -> tuple[list[str], list[str]]:
        errors: list[str] = []
        views = iter_proto_spans(ExportTraceServiceRequest.FromString(raw), errors, raw=raw)
        return [v.span_id for v in views], errors

    native = read()
    assert native == (
        [n.to_bytes(8, "big").hex() for n in (1, 3, 4)],
        ["span 's2': invalid trace/span/parent id size"],
    )
    monkeypatch.setattr(_accel, "_in_use", None)
    assert read() == native
