"""Expectations on live captures of real frameworks, in the three shapes.

Rules are written from each capture's `manifest.json` truth (`expectation_rules.rules_for`: what
the real tool functions were called with, the real final answer), never from tracehound. Every
truth rule must pass and the `must_fail` one fail, with an explanation naming expected and
actual.

The same spans must give the same expectation results — span, name, score, label, explanation
— through `tracehound eval --config`, the sidecar's pipeline (evaluators built from the settings
file by `tracehound serve`'s own start-up code) and the in-process processor
(`TRACEHOUND_CONFIG`), and the processor's exported root span carries the trace summary eval
reports.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from _processor_rig import make_rig, results_from_events, results_from_json, sampled
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from expectation_rules import CAPTURES, MANIFEST, agents, input_paths, rules_for
from helpers import RecordingLane, readable_spans_from_request
from tracehound import names
from tracehound.cli import main
from tracehound.config import ProcessorSettings
from tracehound.engine import EngineConfig
from tracehound.server import ServeSettings
from tracehound.server._app import build_serve_evaluators
from tracehound.server._otlp import LOGS, TRACES, decode_request
from tracehound.server._pipeline import Pipeline
from tracehound.spans import decode_any_value_proto

SHAPES_ON = (
    "openai_agents_responses_nested.otlp.json",
    "openai_agents_chat_loop.otlp.json",
    "strands_latest_clean.otlp.json",
    "strands_default_nested.otlp.json",
    "agent_framework_loop.otlp.json",  # content in log records
    "google_adk_content_logs_nested.otlp.json",
)


@cache
def config_file(capture: str, folder: str) -> Path:
    path = Path(folder) / f"{capture}.toml"
    path.write_text(rules_for(capture), encoding="utf-8")
    return path


def eval_json(capture: str, config: Path, capsys: Any) -> list[dict[str, Any]]:
    argv = ["eval", *map(str, input_paths(capture)), "--config", str(config)]
    assert main([*argv, "--format", "json", "--genai-only"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def expectation_keys(keys: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [k for k in keys if k[5] == "expectations"]


@pytest.mark.parametrize("capture", sorted(MANIFEST))
def test_truth_rules_pass_on_the_capture(capture: str, tmp_path: Path, capsys: Any) -> None:
    truth = MANIFEST[capture]["truth"]
    [report] = eval_json(capture, config_file(capture, str(tmp_path)), capsys)
    results = {
        r["name"][len(names.EVAL_EXPECTATION_PREFIX) :]: r
        for r in report["results"]
        if r["evaluator"] == "expectations"
    }
    wanted = {f"truth{i}.tool_sequence" for i in range(len(agents(truth["agents"])))}
    assert wanted <= set(results), sorted(results)
    failed = sorted(rule for rule, r in results.items() if r["label"] == "fail")
    if not truth.get("content_captured", True):  # no text: the answer rules cannot pass
        assert {r for r in failed if r.startswith("answer.")} == {
            "answer.answer_regex",
            "answer.answer_length",
        }
        assert results["answer.answer_regex"]["explanation"].endswith("gave no final answer")
        failed = [r for r in failed if not r.startswith("answer.")]
    must_fail = [rule for rule in failed if rule.startswith("must_fail.")]
    assert failed == must_fail, [results[r]["explanation"] for r in failed]
    if truth["tool_calls"]:
        assert must_fail, "the runs that called tools must fail must_fail"
        why = results[must_fail[0]]["explanation"]
        assert "expected no call of [" in why and "; called [" in why
    attributes = report["attributes"]
    all_failed = sorted({r for r, x in results.items() if x["label"] == "fail"})
    assert attributes[names.ATTR_EXPECTATIONS_FAILED] == all_failed
    assert attributes[names.ATTR_EXPECTATIONS_FAILED_COUNT] == len(all_failed)
    checked = [r for r in report["results"] if r["evaluator"] == "expectations"]
    assert attributes[names.ATTR_EXPECTATIONS_CHECKED] == len(checked)  # a rule once per run
    if len(truth["agents"]) == 1 and truth.get("content_captured", True):
        assert results["answer.answer_regex"]["label"] == "pass"


def sidecar_keys(capture: str, config: Path) -> list[tuple[Any, ...]]:
    entry = MANIFEST[capture]
    settings = ServeSettings.resolve(
        {"otlp_grpc": "none", "otlp_http": "127.0.0.1:0", "forward": "none"},
        environ={"TRACEHOUND_METRICS": "false"},
        config_file=str(config),
    )
    evaluators, _ = build_serve_evaluators(settings, open_store=False)  # drift left out
    assert evaluators[-1].name == "expectations"
    lanes: dict[str, Any] = {name: RecordingLane() for name in ("traces", "logs", "metrics")}
    pipeline = Pipeline(settings, evaluators, lanes)
    now = [0.0]
    pipeline.engine._clock = lambda: now[0]
    if entry.get("logs_file"):
        logs = decode_request(
            LOGS, (CAPTURES / entry["logs_file"]).read_bytes(), "application/json"
        )
        raw = logs.SerializeToString()
        pipeline.submit_logs(logs, raw, len(raw))
        pipeline._drain()
    traces = decode_request(TRACES, (CAPTURES / entry["file"]).read_bytes(), "application/json")
    raw = traces.SerializeToString()
    pipeline.submit_traces(None, raw, len(raw))
    pipeline._drain()
    now[0] += 100.0
    pipeline._finalize(pipeline.engine.poll())
    pipeline._finalize(pipeline.engine.flush())
    pipeline._flush_outputs()
    assert pipeline.stats.internal_errors == 0
    out = []
    for data, _ in lanes["logs"].payloads:
        for rl in ExportLogsServiceRequest.FromString(data).resource_logs:
            for sl in rl.scope_logs:
                for record in sl.log_records:
                    a = {kv.key: decode_any_value_proto(kv.value) for kv in record.attributes}
                    if names.ATTR_EVALUATION_NAME in a:
                        out.append(
                            (
                                record.span_id.hex(),
                                a[names.ATTR_EVALUATION_NAME],
                                a.get(names.ATTR_EVALUATION_SCORE_VALUE),
                                a.get(names.ATTR_EVALUATION_SCORE_LABEL),
                                a.get(names.ATTR_EVALUATION_EXPLANATION),
                                a.get(names.ATTR_EVALUATOR_NAME),
                                a.get(names.ATTR_ERROR_TYPE),
                            )
                        )
    return sorted(out, key=repr)


def processor_run(capture: str, config: Path) -> Any:
    from _processor_rig import replay_logs

    entry = MANIFEST[capture]
    settings = ProcessorSettings.from_env({"TRACEHOUND_CONFIG": str(config)})
    rig = make_rig(
        settings=settings, engine_config=EngineConfig(quiet_period=60.0, trace_timeout=120.0)
    )
    if entry.get("logs_file"):
        logs = decode_request(
            LOGS, (CAPTURES / entry["logs_file"]).read_bytes(), "application/json"
        )
        replay_logs(rig, logs)
    request = decode_request(TRACES, (CAPTURES / entry["file"]).read_bytes(), "application/json")
    for span in readable_spans_from_request(request):
        rig.processor.on_end(sampled(span))
    assert rig.processor.force_flush(10_000)
    return rig


@pytest.mark.parametrize("capture", SHAPES_ON)
def test_the_same_expectation_results_in_all_three_shapes(
    capture: str, tmp_path: Path, capsys: Any
) -> None:
    config = config_file(capture, str(tmp_path))
    reports = eval_json(capture, config, capsys)
    from_eval = expectation_keys(results_from_json(reports))
    assert from_eval
    assert any(k[3] == "fail" for k in from_eval) and any(k[3] == "pass" for k in from_eval)
    assert expectation_keys(sidecar_keys(capture, config)) == from_eval
    rig = processor_run(capture, config)
    try:
        assert expectation_keys(results_from_events(rig.events())) == from_eval
        [report] = reports
        summary = {
            k: v
            for k, v in report["attributes"].items()
            if k.startswith("tracehound.expectations.")
        }
        roots = [
            dict(s.attributes or {})
            for s in rig.exported()
            if names.ATTR_EXPECTATIONS_CHECKED in (s.attributes or {})
            and (s.parent is None or s.parent.is_remote)
        ]
        assert len(roots) == 1
        assert {k: _plain(roots[0].get(k)) for k in summary} == summary
        points = rig.metric_points(names.METRIC_EXPECTATIONS)
        failed = [p for p in points if p[0][names.ATTR_EXPECTATION_OUTCOME] == "fail"]
        assert sum(v for _, v in points) == len(from_eval)
        assert {p[0][names.ATTR_EXPECTATION_RULE] for p in failed} == {
            name[len(names.EVAL_EXPECTATION_PREFIX) :]
            for _, name, _, label, *_ in from_eval
            if label == "fail"
        }
    finally:
        rig.close()


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
