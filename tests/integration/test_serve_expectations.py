"""`tracehound serve --config` with `[expectations]` rules, live, against `tracehound eval`.

Real framework captures (their `manifest.json` truth gives the rules, `expectation_rules`) are
sent to the sidecar subprocess through the SDK's OTLP/gRPC exporters (log records first, as
content-on-logs frameworks send them); the expectation results the downstream receives must be
those `tracehound eval --config` gives for the capture files, and the forwarded root span must
carry the same trace summary.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _serve import Serve, emit_logs
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from expectation_rules import CAPTURES, MANIFEST, input_paths, rules_for
from helpers import readable_spans_from_request
from tracehound import names
from tracehound.cli import main as cli_main
from tracehound.server._otlp import LOGS, TRACES, decode_request
from tracehound.testing import OTLPSink

pytestmark = [pytest.mark.integration]

CAPTURED = (
    "openai_agents_responses_nested.otlp.json",
    "strands_latest_clean.otlp.json",
    "agent_framework_loop.otlp.json",  # content in log records
)
Key = tuple[Any, ...]


@pytest.fixture(scope="module")
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One settings file holding the rules of every capture (each block named per capture)."""
    folder = tmp_path_factory.mktemp("expectations")
    parts = ['[serve]\nevaluators = "evidence,loops"\n']
    for i, capture in enumerate(CAPTURED):
        rules = rules_for(capture).split("\n", 2)[2]  # without its [serve] table
        parts.append(rules.replace("name = '", f"name = 'c{i}_"))
    path = folder / "tracehound.toml"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def serve(sink: OTLPSink, config: Path) -> Iterator[Serve]:
    process = Serve.start(["--config", str(config), "--forward", sink.url, "--quiet-period", "0.2"])
    yield process
    assert process.stop() == 0


def expectation_keys_of_eval(capture: str, config: Path, capsys: Any) -> tuple[list[Key], Any]:
    capsys.readouterr()
    argv = ["eval", *map(str, input_paths(capture)), "--config", str(config)]
    assert (
        cli_main([*argv, "--format", "json", "--genai-only", "--evaluators", "evidence,loops"]) == 0
    )
    [report] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    keys = sorted(
        (r["span_id"], r["name"], r["score"], r["label"], r["explanation"])
        for r in report["results"]
        if r["evaluator"] == "expectations"
    )
    return keys, report


@pytest.mark.parametrize("capture", CAPTURED)
def test_serve_checks_the_rules_as_eval_does(
    capture: str, serve: Serve, sink: OTLPSink, config: Path, capsys: Any
) -> None:
    expected, report = expectation_keys_of_eval(capture, config, capsys)
    assert any(k[3] == "fail" for k in expected) and any(k[3] == "pass" for k in expected)
    entry = MANIFEST[capture]
    if entry.get("logs_file"):
        logs = decode_request(
            LOGS, (CAPTURES / entry["logs_file"]).read_bytes(), "application/json"
        )
        log_exporter = OTLPLogExporter(endpoint=serve.grpc, insecure=True, timeout=10)
        assert emit_logs(logs, log_exporter) > 0
        log_exporter.shutdown()
    request = decode_request(TRACES, (CAPTURES / entry["file"]).read_bytes(), "application/json")
    spans = readable_spans_from_request(request)
    exporter = OTLPSpanExporter(endpoint=serve.grpc, insecure=True, timeout=10)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()

    def received() -> list[Key]:
        return sorted(
            (
                e.span_id,
                e.attributes.get(names.ATTR_EVALUATION_NAME),
                e.attributes.get(names.ATTR_EVALUATION_SCORE_VALUE),
                e.attributes.get(names.ATTR_EVALUATION_SCORE_LABEL),
                e.attributes.get(names.ATTR_EVALUATION_EXPLANATION),
            )
            for e in sink.evaluation_events()
            if e.trace_id == report["trace_id"]
            and e.attributes.get(names.ATTR_EVALUATOR_NAME) == "expectations"
        )

    sink.wait_for(lambda: received() == expected, 15)
    assert received() == expected
    summary = {k: v for k, v in report["attributes"].items() if ".expectations." in k}
    assert summary[names.ATTR_EXPECTATIONS_FAILED_COUNT] >= 1

    def roots() -> list[Any]:
        """The forwarded local root (its parent is not in the trace), once it carries results."""
        mine = [s for s in sink.spans() if s.trace_id == report["trace_id"]]
        ids = {s.span_id for s in mine}
        return [
            s
            for s in mine
            if bytes(s.span.parent_span_id).hex() not in ids
            and names.ATTR_EXPECTATIONS_CHECKED in s.attributes
        ]

    sink.wait_for(lambda: len(roots()) == 1, 10)
    [root] = roots()
    assert {k: _plain(root.attributes[k]) for k in summary} == summary


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value
