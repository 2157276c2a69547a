"""`tracehound serve` operations: SIGTERM drain, health and readiness, Prometheus, the file sink,
`--check-config` and the configuration precedence, start-up failures."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from _serve import Serve
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
from opentelemetry.sdk.trace.export import SpanExportResult

from helpers import fixture_path, fixture_request, readable_spans_from_request
from tracehound.cli import main as cli_main
from tracehound.server._grpc import encode_health_request, parse_health_response
from tracehound.testing import OTLPSink

pytestmark = [pytest.mark.integration]


@pytest.fixture
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


def get(address: str, path: str) -> tuple[int, str, str]:
    host, port = address.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read().decode()
    finally:
        conn.close()


def test_sigterm_finalizes_and_forwards_held_traces(sink: OTLPSink) -> None:
    """hold mode with a quiet period far beyond the test: only the shutdown can finalize."""
    serve = Serve.start(
        [
            *("--forward", sink.url, "--mode", "hold", "--quiet-period", "300"),
            *("--trace-timeout", "600", "--evaluators", "evidence,loops"),
        ]
    )
    exporter = OTLPSpanExporter(endpoint=serve.grpc, insecure=True, timeout=10)
    spans = readable_spans_from_request(fixture_request("pydantic_ai_v2"))
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        sink.wait_for(lambda: False, 0.3)
        assert sink.spans() == []  # held
    finally:
        exporter.shutdown()
    started = time.monotonic()
    assert serve.stop() == 0
    assert time.monotonic() - started < 10
    assert len(sink.spans()) == len(spans)
    root = next(s for s in sink.spans() if not s.span.parent_span_id)
    assert "tracehound.evidence.survival_ratio" in root.attributes
    assert any(e.span_id == root.span_id for e in sink.evaluation_events())
    stopped = serve.stopped_record()
    assert stopped["clean"] is True
    assert stopped["forwarded"]["traces"] == len(spans)


def test_sigterm_with_a_dead_downstream_exits_within_the_deadline(sink: OTLPSink) -> None:
    sink.refuse_with(grpc.StatusCode.UNAVAILABLE)
    serve = Serve.start(
        ["--forward", sink.url, "--shutdown-timeout", "1.5", "--evaluators", "loops"],
        env={"TRACEHOUND_FORWARD_RETRY_INITIAL": "0.05", "TRACEHOUND_METRICS": "false"},
    )
    exporter = OTLPSpanExporter(endpoint=serve.grpc, insecure=True, timeout=10)
    try:
        spans = readable_spans_from_request(fixture_request("pydantic_ai_v2"))
        assert exporter.export(spans) is SpanExportResult.SUCCESS  # accepted, not yet forwarded
    finally:
        exporter.shutdown()
    started = time.monotonic()
    assert serve.stop() == 0
    assert time.monotonic() - started < 6
    stopped = serve.stopped_record()
    assert stopped["clean"] is False
    assert stopped["dropped"]["traces"] == len(spans)  # counted, and logged


def test_health_readiness_and_prometheus() -> None:
    serve = Serve.start(
        ["--forward", "none", "--prometheus", "127.0.0.1:0", "--evaluators", "loops"]
    )
    try:
        with grpc.insecure_channel(serve.grpc) as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            assert parse_health_response(check(encode_health_request(""), timeout=5)) == 1
            service = "opentelemetry.proto.collector.trace.v1.TraceService"
            assert parse_health_response(check(encode_health_request(service), timeout=5)) == 1
            with pytest.raises(grpc.RpcError) as caught:
                check(encode_health_request("no.such.Service"), timeout=5)
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert get(serve.http, "/healthz")[0] == 200
        assert get(serve.http, "/readyz")[0] == 200
        exporter = HttpSpans(endpoint=serve.http + "/v1/traces", timeout=10)
        assert exporter.export(readable_spans_from_request(fixture_request("pydantic_ai_v2"))) is (
            SpanExportResult.SUCCESS
        )
        exporter.shutdown()
        prometheus = "http://" + str(serve.listening["prometheus"])
        status, content_type, text = get(prometheus, "/metrics")
        assert status == 200
        assert content_type.startswith("text/plain; version=0.0.4")
        assert "# TYPE tracehound_server_requests_total counter" in text
        line = next(
            line
            for line in text.splitlines()
            if line.startswith("tracehound_server_requests_total{")
            and 'tracehound_transport="http"' in line
        )
        assert 'tracehound_outcome="success"' in line and line.endswith(" 1")
        # The request is counted when it is accepted; the evaluation duration once the worker has
        # evaluated its spans, which happens after the export call returns.
        deadline = time.monotonic() + 10
        while "tracehound_evaluation_duration_seconds_bucket{" not in text:
            assert time.monotonic() < deadline, "no evaluation duration after 10 s"
            time.sleep(0.05)
            text = get(prometheus, "/metrics")[2]
        assert get(prometheus, "/other")[0] == 404
    finally:
        assert serve.stop() == 0


def test_file_sink_is_otlp_json_lines_that_eval_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "forwarded.jsonl"
    serve = Serve.start(
        ["--forward", f"file:{out}", "--quiet-period", "0.1", "--evaluators", "evidence,loops"],
        env={"TRACEHOUND_METRICS": "false"},
    )
    exporter = OTLPSpanExporter(endpoint=serve.grpc, insecure=True, timeout=10)
    spans = readable_spans_from_request(fixture_request("pydantic_ai_v2"))
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
        assert serve.stop() == 0
    lines = out.read_text().splitlines()
    documents = [json.loads(line) for line in lines]
    span_docs = [
        span
        for d in documents
        for rs in d.get("resourceSpans", [])
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    assert len(span_docs) == len(spans)
    for span in span_docs:
        assert len(span["traceId"]) == 32 and int(span["traceId"], 16)  # hex, not base64
        assert len(span["spanId"]) == 16
        assert isinstance(span["kind"], int)
    assert any("resourceLogs" in d for d in documents)  # the evaluation events
    # `tracehound eval` reads the sink and agrees with itself on the original capture.
    capsys.readouterr()
    assert cli_main(["eval", "--format", "json", str(out)]) == 0
    from_sink = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert cli_main(["eval", "--format", "json", str(fixture_path("pydantic_ai_v2", "pb"))]) == 0
    direct = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["results"] for r in from_sink] == [r["results"] for r in direct]


def run_cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACEHOUND_"))}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "tracehound.cli", "serve", *args],
        capture_output=True,
        text=True,
        env=environ,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_check_config_precedence_flags_env_toml_defaults(tmp_path: Path) -> None:
    config = tmp_path / "tracehound.toml"
    config.write_text(
        '[serve]\nmode = "hold"\nquiet_period = 7\nmax_traces = 55\notlp_http = "127.0.0.1:9999"\n'
    )
    result = run_cli(
        ["--config", str(config), "--check-config", "--quiet-period", "3"],
        {"TRACEHOUND_MAX_TRACES": "66", "TRACEHOUND_BASELINES": "memory"},
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "3.0" in rows["quiet_period"] and "[flag --quiet-period]" in rows["quiet_period"]
    assert "66" in rows["max_traces"] and "[env TRACEHOUND_MAX_TRACES]" in rows["max_traces"]
    assert "hold" in rows["mode"] and f"[toml {config}]" in rows["mode"]
    assert "127.0.0.1:9999" in rows["otlp_http"]
    assert "localhost:4317" in rows["otlp_grpc"] and "[default]" in rows["otlp_grpc"]
    # the accelerator is built in CI (`run_cli` passes no TRACEHOUND_* switch on); its kernels
    lines = result.stdout.splitlines()
    (accelerator,) = [line for line in lines if line.startswith("C accelerator")]
    assert accelerator.split(None, 2)[2].startswith("in use (")
    (kernels,) = [line for line in lines if line.startswith("C kernels")]
    assert "scan_trace_request" in kernels and "EvidenceCore" in kernels
    assert result.stdout.strip().endswith("configuration OK")


def test_check_config_says_when_the_accelerator_is_off(tmp_path: Path) -> None:
    result = run_cli(
        ["--check-config"],
        {"TRACEHOUND_BASELINES": "memory", "TRACEHOUND_PURE_PYTHON": "1"},
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r"^C accelerator +off \(TRACEHOUND_PURE_PYTHON\)$", result.stdout, re.M)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--mode", "sometimes"], {}, "mode (from flag --mode)"),
        (
            [],
            {"TRACEHOUND_QUIET_PERIOD": "soon"},
            "quiet_period (from env TRACEHOUND_QUIET_PERIOD)",
        ),
        (
            ["--baselines", "redis://:secret@127.0.0.1:1/0"],  # nothing listens on port 1
            {},
            "baselines: Redis baseline store redis://:***@127.0.0.1:1/0: cannot reach the server",
        ),
        (
            ["--otlp-grpc", "127.0.0.1:4317"],
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4317"},
            "tracehound's own receiver",
        ),
        (["--evaluators", "no_such_evaluator"], {}, "no_such_evaluator"),
    ],
)
def test_bad_configuration_fails_at_start_up(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    for check in ([], ["--check-config"]):
        result = run_cli([*args, *check], env, tmp_path)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr


def test_port_in_use_exits_2(tmp_path: Path) -> None:
    serve = Serve.start(["--forward", "none", "--evaluators", "loops"])
    try:
        result = run_cli(
            [
                *("--otlp-grpc", "none", "--otlp-http", serve.listening["otlp_http"]),
                *("--forward", "none", "--evaluators", "loops"),
            ],
            {},
            tmp_path,
        )
        assert result.returncode == 2
        assert f"cannot listen on {serve.listening['otlp_http']} (OTLP/HTTP)" in result.stderr
    finally:
        assert serve.stop() == 0


def test_readme_walkthrough(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's two minutes: start the sidecar with a file sink, point an instrumented app
    that knows nothing of tracehound at it, find the enriched spans in the file."""
    out = tmp_path / "enriched.jsonl"
    serve = Serve.start(
        ["--forward", f"file:{out}", "--quiet-period", "1", "--baselines", "memory"]
    )
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACEHOUND_"))}
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://" + serve.grpc
        app = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve().parents[2] / "examples" / "sidecar_app.py"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert app.returncode == 0, app.stderr
        assert "spans exported to" in app.stdout
    finally:
        assert serve.stop() == 0
    spans = [
        span
        for line in out.read_text().splitlines()
        for rs in json.loads(line).get("resourceSpans", [])
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    root = next(s for s in spans if not s.get("parentSpanId"))
    attrs = {kv["key"]: kv["value"] for kv in root["attributes"]}
    assert attrs["tracehound.loops.detected"] == {"boolValue": True}
    assert attrs["tracehound.evidence.final_survival_ratio"] == {"doubleValue": 0.0}
    assert "tracehound.drift.confidence" in attrs  # drift runs by default, baselines in memory
    capsys.readouterr()
    assert cli_main(["eval", str(out)]) == 0  # the sink is readable by eval
    assert "ci_agent" in capsys.readouterr().out
    metrics = [
        json.loads(line) for line in (tmp_path / "enriched.metrics.jsonl").read_text().splitlines()
    ]
    names = {
        m["name"]
        for d in metrics
        for rm in d["resourceMetrics"]
        for sm in rm["scopeMetrics"]
        for m in sm["metrics"]
    }
    assert "tracehound.server.requests" in names
