"""Live captures of real agent frameworks read as a careful reader of each capture reads them.

`tests/fixtures/frameworks/` holds what each framework's own instrumentation exported (spans in
the order the SDK exported them, log records beside them), made by `scripts/frameworks/capture.py`
against a scripted fake LLM on 127.0.0.1; `manifest.json` gives, per capture, the truth taken
from the scenario and from what the real tool functions returned — never from tracehound.

Each capture must give: every executed tool call once, with the arguments the tool received and
its result text once; the real final answer; the agents as the user defined them; the loop
verdict `tracehound eval` would give; and a final-answer evidence survival within 0.1 of the
true value (loop scenarios reuse no tool result, clean ones reuse every one).
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from helpers import RecordingLane
from tracehound import names
from tracehound.cli import OFFLINE_CONFIG, run_engine, select_evaluators
from tracehound.conventions.base import canonical_arguments
from tracehound.engine import Engine, FinalizedTrace
from tracehound.files import read_paths
from tracehound.server import ServeSettings
from tracehound.server._otlp import LOGS, TRACES, decode_request
from tracehound.server._pipeline import Pipeline
from tracehound.spans import decode_any_value_proto
from tracehound.steps import Step, Trajectory

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
MANIFEST: dict[str, Any] = json.loads((CAPTURES / "manifest.json").read_text())["captures"]
_GAPS = CAPTURES / "known_gaps.json"
KNOWN_GAPS: dict[str, dict[str, str]] = json.loads(_GAPS.read_text()) if _GAPS.exists() else {}
"""Captures whose reading is known to be wrong, by check: {capture: {check: why}} (each one a
gap the README's supported-frameworks table states)."""

CHECKS = (
    "tool_calls",
    "results_once",
    "final_answer",
    "agents",
    "loop_verdict",
    "survival",
    "preambles",
)


@cache
def evaluated(capture: str) -> FinalizedTrace:
    entry = MANIFEST[capture]
    paths = [CAPTURES / entry["file"]]
    if entry.get("logs_file"):
        paths.append(CAPTURES / entry["logs_file"])
    telemetry = read_paths(paths)
    assert telemetry.problems == [], telemetry.problems
    engine = Engine(select_evaluators(None), config=OFFLINE_CONFIG)
    traces, _ = run_engine(telemetry, engine)
    genai = [t for t in traces if t.trajectory.steps]
    assert len(genai) == 1, [t.trace_id for t in traces]
    return genai[0]


def _words(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def tool_calls(trajectory: Trajectory) -> list[tuple[str, str | None]]:
    return [(s.tool or "", s.arguments) for s in trajectory.steps if s.kind == "tool_call"]


def results_by_call(trajectory: Trajectory) -> dict[str, list[Step]]:
    out: dict[str, list[Step]] = {}
    for step in trajectory.steps:
        if step.kind == "tool_result":
            out.setdefault(step.call_id or f"<no id {step.span_id}>", []).append(step)
    return out


def agent_tree(trajectory: Trajectory) -> list[tuple[str, str | None]]:
    """(agent, parent agent) of each agent run, in order; the implicit run is not an agent."""
    by_id = {r.run_id: r for r in trajectory.runs}
    out = []
    for run in trajectory.runs:
        if run.implicit:
            continue
        parent = by_id.get(run.parent_run_id or "")
        out.append(
            (run.agent_name, None if parent is None or parent.implicit else parent.agent_name)
        )
    return out


def true_agent_tree(agents: list[dict[str, Any]], parent: str | None = None) -> list[Any]:
    out: list[tuple[str, str | None]] = []
    for agent in agents:
        out.append((agent["name"], parent))
        out.extend(true_agent_tree(agent.get("sub_agents", []), agent["name"]))
    return out


def true_survival(truth: dict[str, Any]) -> float | None:
    """The final answer's share of the distinct successful tool results it reuses: 0 for a loop
    whose answer reuses none, 1 for a clean run reusing each, the share when it reuses some of
    them (each scenario result is one sentence); None where the scenario sets no such share (an
    answer quoting parts of a result, or an agent's answer). A failed call's error message is not
    evidence."""
    results = {
        _words(c["result"])
        for c in truth["tool_calls"]
        if c.get("kind") != "agent" and not c.get("error") and isinstance(c["result"], str)
    }
    if truth.get("final_reuses_no_tool_result"):
        return 0.0
    reused = {_words(r) for r in truth.get("final_reuses_tool_results", [])}
    if results and reused >= results:
        return 1.0
    if reused and reused < results:
        return len(reused) / len(results)
    return None


def _parsed(text: str) -> Any:
    """A serialized object result as JSON or as a Python literal (frameworks write either)."""
    try:
        return json.loads(text)
    except ValueError:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return None


def result_matches(step: Step, call: dict[str, Any]) -> bool:
    """Whether a tool-result step is what the truth's call returned: the same text; for a dict
    result the same object however serialized; for a failed call, marked as an error with the
    exception's message in its text or error (frameworks prefix or wrap it)."""
    text = step.text or ""
    if call.get("error"):
        return bool(step.error) and _words(call["result"]) in _words(f"{text} {step.error}")
    if isinstance(call["result"], dict | list):
        return _parsed(text) == call["result"] and not step.error
    return _words(text) == _words(call["result"]) and not step.error


def check(capture: str, what: str) -> None:
    truth = MANIFEST[capture]["truth"]
    content = truth.get("content_captured", True)  # False: the capture holds no content
    trace = evaluated(capture)
    trajectory = trace.trajectory
    if what == "tool_calls":
        expected = [
            (c["name"], canonical_arguments(c["arguments"]) if content else None)
            for c in truth["tool_calls"]
        ]
        assert tool_calls(trajectory) == expected
    elif what == "results_once":
        by_call = results_by_call(trajectory)
        assert all(len(steps) == 1 for steps in by_call.values()), by_call
        if content:
            unmatched = [steps[0] for steps in by_call.values()]
            for call in truth["tool_calls"]:
                match = next((s for s in unmatched if result_matches(s, call)), None)
                assert match is not None, (call, [(s.text, s.error) for s in unmatched])
                unmatched.remove(match)
            assert unmatched == []
        else:
            assert {_words(steps[0].text) for steps in by_call.values()} <= {""}
    elif what == "final_answer":
        expected_answer = truth["final_answer"] if content else None
        assert _words(trajectory.final_answer()) == _words(expected_answer)
    elif what == "agents":
        assert agent_tree(trajectory) == true_agent_tree(truth["agents"])
    elif what == "loop_verdict":
        detected = trace.attributes.get(names.ATTR_LOOPS_DETECTED, False)
        assert bool(detected) is bool(truth["is_loop"])
    elif what == "survival":
        expected = true_survival(truth)
        assert content and expected is not None, "not a survival case (see checks_of)"
        got = trace.attributes.get(names.ATTR_EVIDENCE_FINAL_SURVIVAL_RATIO)
        assert isinstance(got, float) and abs(got - expected) <= 0.1, got
    elif what == "preambles":  # text written before tool calls, read once each, in order
        preambles = [_words(p) for p in truth["preambles"]]
        said = [_words(s.text) for s in trajectory.steps if s.kind == "assistant"]
        assert [t for t in said if t in preambles] == preambles, said


def checks_of(capture: str) -> list[str]:
    """What a capture's truth sets: survival only where the scenario fixes the share, preambles
    only where it has them, both only where the capture holds the content."""
    truth = MANIFEST[capture]["truth"]
    content = truth.get("content_captured", True)
    settled = {
        "survival": content and true_survival(truth) is not None,
        "preambles": content and bool(truth.get("preambles")),
    }
    return [what for what in CHECKS if settled.get(what, True)]


CASES = [(capture, what) for capture in sorted(MANIFEST) for what in checks_of(capture)]


def test_survival_is_checked_on_most_captures() -> None:
    survival = [capture for capture, what in CASES if what == "survival"]
    assert len(survival) >= len(MANIFEST) // 2, survival
    # a loop whose answer reuses nothing, a clean run reusing every result, and a share between
    shares = {true_survival(MANIFEST[capture]["truth"]) for capture in survival}
    assert {0.0, 1.0} <= shares and any(0.0 < s < 1.0 for s in shares if s is not None), shares


def test_every_known_gap_is_a_case_that_runs() -> None:
    gaps = {(capture, what) for capture, checks in KNOWN_GAPS.items() for what in checks}
    assert gaps <= set(CASES), gaps - set(CASES)


@pytest.mark.parametrize(("capture", "what"), CASES)
def test_capture_reads_exactly(capture: str, what: str, request: pytest.FixtureRequest) -> None:
    gap = KNOWN_GAPS.get(capture, {}).get(what)
    if gap:  # strict: once the reading is right, the gap must be struck off
        request.applymarker(pytest.mark.xfail(reason=gap, strict=True))
    check(capture, what)


def test_every_capture_has_its_truth_and_versions() -> None:
    assert MANIFEST, "no captures"
    for name, entry in MANIFEST.items():
        assert (CAPTURES / entry["file"]).exists(), name
        assert entry["versions"], name
        assert {"tool_calls", "final_answer", "agents", "is_loop"} <= set(entry["truth"]), name


# --- the sidecar gives what `tracehound eval` gives -----------------------------------------------


Fact = tuple[str, str, Any, Any]


def _fact(name: Any, span_id: str, value: Any, label: Any) -> Fact:
    return (str(name), span_id, round(value, 9) if isinstance(value, float) else value, label)


def eval_results(capture: str) -> list[Fact]:
    """Every evaluation result `tracehound eval` gives for the capture (name, span, value,
    label)."""
    entry = MANIFEST[capture]
    paths = [CAPTURES / entry["file"]]
    if entry.get("logs_file"):
        paths.append(CAPTURES / entry["logs_file"])
    engine = Engine(select_evaluators(None), config=OFFLINE_CONFIG)
    traces, per_span = run_engine(read_paths(paths), engine)
    results = [r for t in traces for r in t.results] + [
        r for results in per_span.values() for r in results
    ]
    root_of = {t.trace_id: t.root_span_id for t in traces}
    return sorted(
        _fact(r.name, r.span_id or next(iter(root_of.values())), r.score_value, r.score_label)
        for r in results
    )


def sidecar_results(capture: str, mode: str) -> list[Fact]:
    """The `gen_ai.evaluation.result` records the sidecar's pipeline emits for the capture, sent
    as one request (logs first) in the SDK's export order."""
    entry = MANIFEST[capture]
    settings = ServeSettings.resolve(
        {"otlp_grpc": "none", "otlp_http": "127.0.0.1:0", "forward": "none", "mode": mode},
        environ={"TRACEHOUND_METRICS": "false"},
    )
    lanes: dict[str, Any] = {name: RecordingLane() for name in ("traces", "logs", "metrics")}
    pipeline = Pipeline(settings, select_evaluators(None), lanes)
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
    pipeline._finalize(pipeline.engine.poll())
    pipeline._flush_outputs()
    now[0] += 100.0
    pipeline._finalize(pipeline.engine.poll())
    pipeline._finalize(pipeline.engine.flush())
    pipeline._flush_outputs()
    assert pipeline.stats.internal_errors == 0
    out: list[Fact] = []
    for data, _ in lanes["logs"].payloads:
        for rl in ExportLogsServiceRequest.FromString(data).resource_logs:
            for sl in rl.scope_logs:
                for record in sl.log_records:
                    attrs = {kv.key: decode_any_value_proto(kv.value) for kv in record.attributes}
                    if names.ATTR_EVALUATION_NAME not in attrs:
                        continue  # the app's own log records, forwarded as they came
                    out.append(
                        _fact(
                            attrs[names.ATTR_EVALUATION_NAME],
                            record.span_id.hex(),
                            attrs.get(names.ATTR_EVALUATION_SCORE_VALUE),
                            attrs.get(names.ATTR_EVALUATION_SCORE_LABEL),
                        )
                    )
    return sorted(out)


@pytest.mark.parametrize("mode", ["stream", "hold"])
@pytest.mark.parametrize("capture", sorted(MANIFEST))
def test_the_sidecar_gives_what_eval_gives(capture: str, mode: str) -> None:
    expected = eval_results(capture)
    if MANIFEST[capture]["truth"].get("content_captured", True):  # else: no text to judge
        assert any(name == names.EVAL_EVIDENCE_FINAL_SURVIVAL for name, *_ in expected), expected
    assert expected
    assert sidecar_results(capture, mode) == expected
