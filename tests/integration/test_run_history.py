"""The run history end to end: the three shapes write the same records, and `tracehound runs`
answers from them.

The same captures, in the same order, go (1) through `tracehound eval --baselines FILE`, (2)
through a `TracehoundSpanProcessor` whose drift evaluator has an SQLite store, and (3) through a
real `tracehound serve --baselines FILE` fed by the SDK's OTLP/gRPC exporter. The three stores
must then hold the same records (all but the write time). `tracehound runs … --format json`
in a subprocess must print exactly what the query layer returns.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _serve import Serve
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SpanExportResult
from test_serve_parity import sampled

from helpers import FIXTURES, child_environ, readable_spans_from_request
from tracehound.baselines import SQLiteStore, open_store
from tracehound.cli import main as cli_main
from tracehound.config import ProcessorSettings
from tracehound.engine import EngineConfig
from tracehound.history import RunQuery, explain_run, list_runs
from tracehound.processor import TracehoundSpanProcessor
from tracehound.server._otlp import TRACES, decode_request

pytestmark = [pytest.mark.integration]

# two agents seen by two instrumentations (the second run of each is scored), nested agents,
# a loop, and a capture of tests/fixtures
CAPTURES = (
    FIXTURES / "frameworks" / "autogen_builtin_loop.otlp.json",
    FIXTURES / "frameworks" / "autogen_builtin_nested.otlp.json",
    FIXTURES / "frameworks" / "autogen_openinference_loop.otlp.json",
    FIXTURES / "frameworks" / "autogen_openinference_nested.otlp.json",
    FIXTURES / "pydantic_ai_v6.pb",
)
EVALUATORS = "evidence,loops,drift"


def request_of(path: Path) -> Any:
    if path.suffix == ".pb":
        return ExportTraceServiceRequest.FromString(path.read_bytes())
    return decode_request(TRACES, path.read_bytes(), "application/json")


def stored(path: Path) -> list[dict[str, Any]]:
    """Every record of the store, without its write time, in a stable order."""
    store = SQLiteStore(path)
    try:
        records = store.query_runs(RunQuery(limit=None))
    finally:
        store.close()
    out = []
    for record in sorted(records, key=lambda r: r.key):
        data = record.to_dict()
        data.pop("recorded_at")
        out.append(data)
    return out


@pytest.fixture
def hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEHOUND_EMBEDDER", "hashing")
    for name in ("TRACEHOUND_BASELINES", "TRACEHOUND_REDIS_URL", "TRACEHOUND_HISTORY_CONTENT"):
        monkeypatch.delenv(name, raising=False)


def run_eval(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for capture in CAPTURES:  # one at a time: each run scored against the ones before
        capsys.readouterr()
        code = cli_main(
            ["eval", "--baselines", str(path), "--evaluators", EVALUATORS, str(capture)]
        )
        assert code in (0, 1)
    capsys.readouterr()


def run_processor(path: Path) -> None:
    settings = ProcessorSettings(evaluators=tuple(EVALUATORS.split(",")), baselines=str(path))
    for capture in CAPTURES:
        processor = TracehoundSpanProcessor(
            settings=settings,
            engine_config=EngineConfig(quiet_period=60, trace_timeout=120),
            meter_provider=NoOpMeterProvider(),
            emit_metrics=False,
            emit_events=False,
        )
        try:
            for span in readable_spans_from_request(request_of(capture)):
                processor.on_end(sampled(span))
            assert processor.force_flush(30_000)
            assert processor.stats.history_errors == 0
            assert processor.stats.runs_recorded > 0
        finally:
            processor.shutdown()


def run_serve(path: Path, expected: set[str]) -> None:
    """`expected`: the trace ids with runs (those eval recorded)."""
    env = child_environ()
    env["TRACEHOUND_EMBEDDER"] = "hashing"
    serve = Serve.start(
        [
            "--baselines",
            str(path),
            "--evaluators",
            EVALUATORS,
            "--quiet-period",
            "0.2",
            "--forward",
            "none",
        ],
        env,
    )
    try:
        for capture in CAPTURES:
            spans = readable_spans_from_request(request_of(capture))
            traces = {format(s.context.trace_id, "032x") for s in spans if s.context} & expected
            exporter = OTLPSpanExporter(endpoint=serve.grpc, insecure=True, timeout=10)
            assert exporter.export(spans) is SpanExportResult.SUCCESS
            exporter.shutdown()
            # the next capture only once this one's runs are recorded (drift sees them in order)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with sqlite3.connect(path) as conn:
                    have = {
                        row[0]
                        for row in conn.execute("SELECT DISTINCT trace_id FROM runs").fetchall()
                    }
                if traces <= have:
                    break
                time.sleep(0.05)
            assert traces <= have, f"serve did not record {capture.name}"
    finally:
        assert serve.stop() == 0


def test_eval_processor_and_serve_write_the_same_records(
    tmp_path: Path, hashing: None, capsys: pytest.CaptureFixture[str]
) -> None:
    by_eval, by_processor, by_serve = (tmp_path / f"{n}.sqlite3" for n in ("e", "p", "s"))
    run_eval(by_eval, capsys)
    run_processor(by_processor)
    expected = stored(by_eval)
    run_serve(by_serve, {r["trace_id"] for r in expected})
    assert len(expected) >= 7
    # the records say something: scored runs, a loop on a named tool, nested agents
    assert any(r["drift"]["score"] is not None and r["drift"]["score"] > 0 for r in expected)
    assert any(r["loops"]["tools"] for r in expected)
    assert len({r["trace_id"] for r in expected}) < len(expected)
    assert all(r["content"] is None for r in expected)
    assert all(
        d["sample"] == "" for r in expected for d in r["drift"]["detail"].get("diverged_from", [])
    )
    assert stored(by_processor) == expected
    assert stored(by_serve) == expected


def tracehound(*args: str) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "tracehound.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**child_environ(), "TRACEHOUND_EMBEDDER": "hashing"},
        check=False,
    )


def test_runs_cli_prints_the_query_layer_answers(tmp_path: Path) -> None:
    path = tmp_path / "baselines.sqlite3"
    for capture in CAPTURES:
        done = tracehound("eval", "--baselines", str(path), str(capture))
        assert done.returncode in (0, 1), done.stderr
    listed = tracehound("runs", "list", "--baselines", str(path), "--format", "json")
    assert listed.returncode == 0, listed.stderr
    store = open_store(str(path))
    try:
        assert json.loads(listed.stdout) == list_runs(store)
        drifted = tracehound(
            "runs", "list", "--baselines", str(path), "--min-drift", "0.01", "--format", "json"
        )
        rows = json.loads(drifted.stdout)["runs"]
        assert rows == list_runs(store, min_drift=0.01)["runs"]
        assert rows, "no scored run"
        top = rows[0]
        explained = tracehound(
            "runs", "explain", "--baselines", str(path), top["trace_id"], "--format", "json"
        )
        assert explained.returncode == 0, explained.stderr
        answer = json.loads(explained.stdout)
        assert answer == explain_run(store, top["trace_id"])
        assert answer["primary_driver"] in ("tool_mix", "semantic", "complexity")
        assert [c["name"] for c in answer["components"]] == ["tool_mix", "semantic", "complexity"]
        assert answer["diverged_from"], "a scored run names the baseline runs it diverged from"
        assert answer["recommendation"]
        text = tracehound("runs", "list", "--baselines", str(path), "--tool", "get_*")
        assert text.returncode == 0
        assert text.stdout.splitlines()[0].split()[:3] == ["END", "TRACE/RUN", "AGENT"]
        looped = tracehound(
            "runs", "search", "--baselines", str(path), "get_order", "--loop-kind", "any"
        )
        assert looped.returncode == 0 and "run(s)" in looped.stdout
    finally:
        store.close()
    bad = tracehound("runs", "list", "--baselines", str(path), "--since", "last tuesday")
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("tracehound: error: since:")
    assert len(bad.stderr.strip().splitlines()) == 1
    unknown = tracehound("runs", "explain", "--baselines", str(path), "0" * 32)
    assert unknown.returncode == 2 and "no trace" in unknown.stderr
    refused = tracehound("runs", "delete", "--baselines", str(path))
    assert refused.returncode == 2
    deleted = tracehound(
        "runs", "delete", "--baselines", str(path), top["trace_id"], "--format", "json"
    )
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout)["count"] >= 1
    gone = tracehound("runs", "show", "--baselines", str(path), top["trace_id"])
    assert gone.returncode == 2
