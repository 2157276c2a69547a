"""`tracehound eval` end to end: summary, JSON lines, HTML, exit codes, inputs, imports."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _html_check import assert_self_contained
from _report_inputs import (
    BANANAS,
    PARIS,
    nested_otlp,
    reports_for,
    write_evidenceflow,
    write_tracecheck,
)

from helpers import feed_engine
from tracehound import cli
from tracehound.cli import example_paths, main
from tracehound.conventions import NormalizedSpan
from tracehound.engine import Engine
from tracehound.evaluators.base import EvaluationResult, Evaluator, TraceInfo
from tracehound.evaluators.evidence import EvidenceEvaluator
from tracehound.evaluators.loops import LoopEvaluator
from tracehound.files import read_paths
from tracehound.importers import import_document
from tracehound.steps import Step, Trajectory

FIXTURES = Path(__file__).parent.parent / "fixtures"
# The bundled examples: openai-v2 (grounded), pydantic-ai (grounded), pydantic-ai (tool error).
OPENAI, PYDANTIC, PYDANTIC_ERROR = (
    "9839b321f0dee415cc6a1b46499f228a",
    "9ecc73c50a4f3c4dac37f0bfb1425881",
    "0f22d739c18e441989d25fef2b383c7d",
)
RESULT_KEYS = {"evaluator", "name", "span_id", "score", "label", "explanation", "attributes"}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def imported_trace_id(kind: str, key: str) -> str:
    return hashlib.sha256(f"{kind}:{key}".encode()).hexdigest()[:32]


@pytest.fixture
def steps_file(tmp_path: Path) -> Path:
    return write_evidenceflow(tmp_path / "steps.json")


@pytest.fixture
def traces_file(tmp_path: Path) -> Path:
    return write_tracecheck(tmp_path / "traces.jsonl")


@pytest.fixture
def steps_trace_id(steps_file: Path) -> str:
    steps = json.loads(steps_file.read_text("utf-8"))
    return imported_trace_id("evidenceflow", json.dumps(steps, sort_keys=True, default=str))


GROUNDED, ERRORED, LOOPING = (
    imported_trace_id("tracecheck", key) for key in ("tc-grounded", "tc-error", "tc-loop")
)


class Boom(Evaluator):
    """Fails at finalization: its trace result becomes an evaluation error (status WARN)."""

    name = "boom"
    version = "1"

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        raise RuntimeError("kaboom")


class SpanBoom(Evaluator):
    """Fails on the first span of each trace (per-span evaluation error)."""

    name = "spanboom"
    version = "1"

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        raise ValueError("bad span")


@pytest.fixture
def boom(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli.BUILTIN_EVALUATORS, "boom", Boom)
    monkeypatch.setitem(cli.BUILTIN_EVALUATORS, "spanboom", SpanBoom)


# --- text summary -------------------------------------------------------------------------------


def test_text_summary_of_the_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["eval", "--examples"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert f"PASS  trace {OPENAI}  agent_loop · otel_genai · 7 step(s)" in lines
    assert f"PASS  trace {PYDANTIC}  research_agent · pydantic_ai · 12 step(s)" in lines
    assert f"FAIL  trace {PYDANTIC_ERROR}  research_agent · pydantic_ai · 7 step(s)" in lines
    block = out[out.index(PYDANTIC) :].split("\n", 1)[1].split("PASS  trace", 1)[0]
    assert block.startswith(
        "      PASS evidence     tracehound.evidence.survival = 0.50 reused — 2 of 4 evidence "
        "units reused (50%); the final answer uses 2 (50%)\n"
        "      PASS evidence     tracehound.evidence.final_survival = 0.50 grounded — final answer "
        "reuses 50% of the evidence units (threshold 20%)\n"
        "      PASS loops        tracehound.loops = 1.00 pass — "
    )
    failing = out[out.index(PYDANTIC_ERROR) :].split("\n")[1:]
    assert failing[0] == (
        "      PASS evidence     tracehound.evidence.survival = - no_evidence — no tool result or "
        "retrieved document with text in this trace"
    )
    # (the loop evaluator's own wording is its business: only the shape is checked here)
    assert any(
        line.startswith("      FAIL loops        tracehound.failure_modes = 0.00 fail — ")
        and "tool_call_error" in line
        for line in failing
    )
    assert any(line.startswith("      WARN loops        span ") for line in failing)
    assert (
        err.splitlines()[-1]
        == "3 trace(s): 2 PASS, 0 WARN, 1 FAIL (12 span(s), 0 evaluator error(s))"
    )


def test_text_summary_warn_fail_and_reasons(
    capsys: pytest.CaptureFixture[str],
    steps_file: Path,
    steps_trace_id: str,
    traces_file: Path,
    boom: None,
) -> None:
    argv = ["eval", "--evaluators", "evidence,loops", "--evaluators", "boom,spanboom"]
    code, out, err = run([*argv, str(steps_file), str(traces_file)], capsys)
    assert code == 0
    lines = out.splitlines()
    headers = [line for line in lines if not line.startswith(" ")]
    # every trace has a failing evaluator: at least WARN; the loop and the error trace FAIL
    assert {h.split()[2]: h.split()[0] for h in headers} == {
        steps_trace_id: "WARN",
        GROUNDED: "WARN",
        ERRORED: "FAIL",
        LOOPING: "FAIL",
    }
    assert f"WARN  trace {steps_trace_id}  imported · otel_genai · 10 step(s)" in headers
    assert (
        "      PASS evidence     tracehound.evidence.survival = 0.67 reused — 2 of 3 evidence "
        "units reused (67%); the final answer uses 1 (33%); unused sources: doc-bananas"
    ) in lines
    assert (
        "      WARN boom         boom = - RuntimeError — evaluator failed in finish_trace: kaboom"
    ) in lines
    assert any(
        line.startswith("      WARN spanboom     span ")
        and line.endswith(": evaluator failed in on_span: bad span")
        for line in lines
    )
    loop_block = out[out.index(f"trace {LOOPING}") :]
    assert "      FAIL loops        tracehound.loops = " in loop_block
    assert any(
        line.startswith("      WARN loops        span ") and "search" in line
        for line in loop_block.splitlines()
    )
    assert "4 trace(s): 0 PASS, 2 WARN, 2 FAIL" in err
    assert "8 evaluator error(s)" in err  # boom ×4 traces, spanboom ×4 traces


def test_width_clips_explanations(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(["eval", "--examples", "--evaluators", "evidence", "--width", "20"], capsys)
    reasons = [line.split(" — ", 1)[1] for line in out.splitlines() if " — " in line]
    assert reasons and all(len(r) <= 20 for r in reasons)
    assert "2 of 4 evidence uni…" in reasons


# --- JSON lines ---------------------------------------------------------------------------------


def test_json_lines_shape_is_trace_report_to_json(
    capsys: pytest.CaptureFixture[str], steps_file: Path, traces_file: Path
) -> None:
    paths = [str(steps_file), str(traces_file)]
    code, out, _ = run(["eval", "--format", "json", "--examples", *paths], capsys)
    assert code == 0
    records = json_lines(out)
    expected = [
        json.loads(json.dumps(r.to_json(), default=str)) for r in reports_for(paths, examples=True)
    ]
    assert records == expected
    assert len(records) == 7
    for record in records:
        assert list(record) == ["trace_id", "status", "attributes", "results"]
        assert record["status"] in ("PASS", "WARN", "FAIL")
        assert all(key.startswith("tracehound.") for key in record["attributes"])
        assert record["results"]
        for result in record["results"]:
            assert set(result) == RESULT_KEYS  # error_type only for failed evaluations
            assert result["evaluator"] in ("evidence", "loops")
            assert result["name"].startswith("tracehound.")
            assert isinstance(result["span_id"], str) and len(result["span_id"]) == 16
            assert result["score"] is None or isinstance(result["score"], float)
            assert all(key.startswith("tracehound.") for key in result["attributes"])
    by_id = {r["trace_id"]: r for r in records}
    pydantic = by_id[PYDANTIC]
    assert pydantic["status"] == "PASS"
    assert pydantic["attributes"]["tracehound.evidence.final_survival_ratio"] == 0.5
    assert pydantic["attributes"]["tracehound.loops.detected"] is False
    [final] = [r for r in pydantic["results"] if r["name"] == "tracehound.evidence.final_survival"]
    assert final == {
        "evaluator": "evidence",
        "name": "tracehound.evidence.final_survival",
        "span_id": final["span_id"],
        "score": 0.5,
        "label": "grounded",
        "explanation": "final answer reuses 50% of the evidence units (threshold 20%)",
        "attributes": {},
    }
    # trace results sit on the root span and their attributes are the trace's
    root = final["span_id"]
    merged: dict[str, Any] = {}
    for result in pydantic["results"]:
        if result["span_id"] == root:
            merged.update(result["attributes"])
    assert merged == pydantic["attributes"]
    # array attributes are JSON lists
    looping = by_id[LOOPING]
    assert looping["status"] == "FAIL"
    assert isinstance(looping["attributes"]["tracehound.loops.kinds"], list)
    assert "repeat" in looping["attributes"]["tracehound.loops.kinds"]


def test_json_error_type_on_failed_evaluations(
    capsys: pytest.CaptureFixture[str], boom: None
) -> None:
    _, out, _ = run(["eval", "--format", "json", "--examples", "--evaluators", "boom"], capsys)
    for record in json_lines(out):
        assert record["status"] == "WARN"
        [result] = record["results"]
        assert set(result) == {*RESULT_KEYS, "error_type"}
        assert result["error_type"] == "RuntimeError"
        assert result["explanation"] == "evaluator failed in finish_trace: kaboom"


# --- HTML ---------------------------------------------------------------------------------------


def test_html_report_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, traces_file: Path
) -> None:
    target = tmp_path / "report.html"
    code, out, err = run(["eval", "--examples", str(traces_file), "--html", str(target)], capsys)
    assert code == 0
    assert f"wrote {target}" in err
    assert out.startswith(("PASS", "WARN", "FAIL"))  # the summary is still printed
    page = target.read_text("utf-8")
    assert_self_contained(page)
    assert "<b>6</b> trace(s)" in page
    assert '<span class="st st-FAIL">3 FAIL</span>' in page
    for trace_id in (OPENAI, PYDANTIC, PYDANTIC_ERROR, GROUNDED, ERRORED, LOOPING):
        assert f">{trace_id}</a>" in page
    assert "loop highlights" in page and "evidence flow" in page


def test_html_report_unwritable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "missing-folder" / "report.html"
    code, _, err = run(["eval", "--examples", "--html", str(target)], capsys)
    assert code == 2
    assert f"tracehound: error: {target}: cannot write the HTML report" in err


# --- exit codes ---------------------------------------------------------------------------------


def test_exit_0_when_no_rule_trips(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        ["eval", "--examples", "--fail-on", "evidence<0.2", "--fail-on", "loops>=1"], capsys
    )
    assert code == 0
    assert "tripped" not in err


def test_exit_1_when_evidence_rule_trips_on_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        ["eval", "--examples", "--evaluators", "evidence", "--fail-on", "evidence<0.6"], capsys
    )
    assert code == 1
    assert f"--fail-on evidence<0.6: tripped by 2 trace(s): {OPENAI}, {PYDANTIC}" in err
    assert len([line for line in out.splitlines() if not line.startswith(" ")]) == 3
    # the trace without evidence has no survival ratio: a rule on it cannot trip
    code, _, err = run(["eval", "--examples", "--fail-on", "evidence<=1"], capsys)
    assert code == 1 and "tripped by 2 trace(s)" in err


def test_exit_1_when_loop_rule_trips(capsys: pytest.CaptureFixture[str], traces_file: Path) -> None:
    code, _, err = run(["eval", "--examples", "--fail-on", "loop"], capsys)
    assert code == 0
    code, _, err = run(
        ["eval", "--examples", str(traces_file), "--fail-on", "loop", "--fail-on", "fail",
         "--fail-on", "wasted_steps>0", "--fail-on", "evidence<0.01"],
        capsys,
    )  # fmt: skip
    assert code == 1
    tripped = [line for line in err.splitlines() if "tripped" in line]
    assert len(tripped) == 3  # evidence<0.01 trips nothing
    assert tripped[0] == f"--fail-on loop: tripped by 1 trace(s): {LOOPING}"
    prefix = "--fail-on fail: tripped by 3 trace(s): "
    assert tripped[1].startswith(prefix)
    assert set(tripped[1].removeprefix(prefix).split(", ")) == {PYDANTIC_ERROR, ERRORED, LOOPING}
    assert tripped[2] == f"--fail-on wasted_steps>0: tripped by 1 trace(s): {LOOPING}"


def test_exit_1_on_error_and_warn_rules(capsys: pytest.CaptureFixture[str], boom: None) -> None:
    code, _, err = run(
        ["eval", "--examples", "--evaluators", "evidence", "--fail-on", "warn"], capsys
    )
    assert code == 0
    code, _, err = run(
        ["eval", "--examples", "--evaluators", "evidence,boom", "--fail-on", "error"], capsys
    )
    assert code == 1 and "--fail-on error: tripped by 3 trace(s)" in err
    code, _, err = run(
        ["eval", "--examples", "--evaluators", "evidence,boom", "--fail-on", "warn"], capsys
    )
    assert code == 1 and "--fail-on warn: tripped by 3 trace(s)" in err


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("evidence<<0.5", "invalid --fail-on rule 'evidence<<0.5': '<0.5' is not a number"),
        ("evidence=0.5", "invalid --fail-on rule 'evidence=0.5': use loop, fail, warn, error"),
        ("evidnce<0.5", "invalid --fail-on rule 'evidnce<0.5': unknown name 'evidnce'"),
        ("drift>=high", "'high' is not a number, true/false, or one of none, warning, alert"),
        ("", "invalid --fail-on rule ''"),
    ],
)
def test_exit_2_for_a_bad_rule(capsys: pytest.CaptureFixture[str], rule: str, message: str) -> None:
    code, out, err = run(["eval", "--examples", "--fail-on", rule], capsys)
    assert code == 2
    assert out == ""  # refused before reading anything
    assert err.startswith("tracehound: error: ") and message in err


def test_exit_2_for_a_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    code, out, err = run(["eval", "--examples", str(missing)], capsys)
    assert code == 2 and out == ""
    assert err == f"tracehound: error: {missing}: No such file or directory\n"


def test_exit_2_for_an_unknown_evaluator(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["eval", "--examples", "--evaluators", "evidence,nosuch"], capsys)
    assert code == 2 and out == ""
    assert "built-in evaluators are evidence, loops, drift" in err


def test_drift_is_a_built_in_evaluator(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        ["eval", "--examples", "--evaluators", "drift", "--baselines", "memory"], capsys
    )
    assert code == 0, err
    lines = [line.split()[1] for line in out.splitlines() if line.startswith("      ")]
    assert lines and set(lines) == {"drift"}  # drift only: evidence and loops not asked for
    code, out, err = run(
        ["eval", "--examples", "--evaluators", "loops, drift", "--baselines", "memory"], capsys
    )
    evaluators = {line.split()[1] for line in out.splitlines() if line.startswith("      ")}
    assert code == 0 and evaluators == {"loops", "drift"}
    code, out, err = run(["eval", "--examples", "--evaluators", "drift"], capsys)
    assert code == 2 and out == ""
    assert err == (
        "tracehound: error: --evaluators drift needs --baselines PATH (a SQLite file) or "
        "--baselines memory\n"
    )


@pytest.mark.parametrize("kind", ["empty folder", "empty file", "empty stdin", "no spans"])
def test_empty_input_with_a_gate_exits_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    kind: str,
) -> None:
    """A wrong path in CI must not pass: nothing to gate on is an error, not exit 0."""
    where = str(tmp_path)
    if kind == "empty file":
        where = str(tmp_path / "traces.json")
        Path(where).write_bytes(b"")
    elif kind == "no spans":
        where = str(tmp_path / "traces.json")
        Path(where).write_text('{"resourceSpans": []}')
    elif kind == "empty stdin":
        monkeypatch.setattr(sys, "stdin", _Stdin(b""))
        where = "-"
    code, out, err = run(["eval", where, "--fail-on", "loop"], capsys)
    assert code == 2 and out == ""
    assert err == (
        f"tracehound: error: no spans in the input ({where}): nothing to gate on (check the path)\n"
    )
    # without a gate, an empty input is just an empty report
    if kind == "empty stdin":
        monkeypatch.setattr(sys, "stdin", _Stdin(b""))
    code, out, err = run(["eval", where], capsys)
    assert code == 0 and out == "" and err.startswith("0 trace(s)")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "not valid JSON or JSON lines"),
        (b'{"a": "\xff"}', "not UTF-8"),
        (b'{"hello": 1}', "neither OTLP (resourceSpans/resourceLogs), a tracecheck trace, nor"),
        (b'[{"type": "tool_call", "tool": "x"}, 3]', "neither OTLP"),
        (b"\x00\x01garbage\xff", "neither OTLP JSON nor OTLP protobuf"),
    ],
)
def test_exit_2_for_unreadable_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, reason: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    code, out, err = run(["eval", "--evaluators", "evidence", str(bad)], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"tracehound: error: {bad}") and reason in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["eval", "--format", "xml"])
    assert info.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


# --- inputs: stdin, folders ---------------------------------------------------------------------


class _Stdin(io.TextIOWrapper):
    def __init__(self, data: bytes, *, tty: bool = False) -> None:
        super().__init__(io.BytesIO(data), encoding="utf-8")
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, steps_file: Path
) -> None:
    fixture = FIXTURES / "pydantic_ai_v6.pb"
    _, from_file, _ = run(["eval", "--format", "json", str(fixture)], capsys)
    monkeypatch.setattr(sys, "stdin", _Stdin(fixture.read_bytes()))
    code, from_stdin, _ = run(["eval", "--format", "json", "-"], capsys)
    assert code == 0 and from_stdin == from_file and len(json_lines(from_stdin)) == 1
    # no file at all: stdin, when it is not a terminal; imports work from stdin too
    _, from_file, _ = run(["eval", str(steps_file)], capsys)
    monkeypatch.setattr(sys, "stdin", _Stdin(steps_file.read_bytes()))
    code, from_stdin, _ = run(["eval"], capsys)
    assert code == 0 and from_stdin == from_file and "imported · otel_genai" in from_stdin
    # stdin and files together
    monkeypatch.setattr(sys, "stdin", _Stdin(steps_file.read_bytes()))
    code, out, _ = run(["eval", "--format", "json", "-", str(fixture)], capsys)
    assert code == 0 and len(json_lines(out)) == 2


def test_no_input_from_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", _Stdin(b"", tty=True))
    code, _, err = run(["eval"], capsys)
    assert code == 2 and "no input" in err


def test_stdin_subprocess(traces_file: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracehound.cli",
            "eval",
            "--format",
            "json",
            "--fail-on",
            "loop",
            "-",
        ],
        input=traces_file.read_bytes(),
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    records = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert {r["trace_id"]: r["status"] for r in records} == {
        GROUNDED: "PASS",
        ERRORED: "FAIL",
        LOOPING: "FAIL",
    }
    err = proc.stderr.decode()
    assert f"--fail-on loop: tripped by 1 trace(s): {LOOPING}" in err
    assert "3 trace(s): 1 PASS, 0 WARN, 2 FAIL" in err


def test_folders(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, steps_file: Path, traces_file: Path
) -> None:
    folder = tmp_path / "in"
    (folder / "deeper").mkdir(parents=True)
    shutil.copy(steps_file, folder / "steps.json")
    shutil.copy(traces_file, folder / "deeper" / "traces.jsonl")
    # the same trace as JSON and as protobuf counts once; other files are ignored
    shutil.copy(FIXTURES / "pydantic_ai_v6.otlp.json", folder / "deeper" / "v6.otlp.json")
    shutil.copy(FIXTURES / "pydantic_ai_v6.pb", folder / "v6.pb")
    (folder / "notes.txt").write_text("not telemetry")
    (folder / "nested.json").write_text(json.dumps(nested_otlp()))
    code, out, err = run(["eval", "--format", "json", str(folder)], capsys)
    assert code == 0, err
    records = json_lines(out)
    assert len(records) == 6
    files = [
        folder / "deeper" / "traces.jsonl",
        folder / "deeper" / "v6.otlp.json",
        folder / "nested.json",
        folder / "steps.json",
        folder / "v6.pb",
    ]
    expected = [json.loads(json.dumps(r.to_json(), default=str)) for r in reports_for(files)]
    assert records == expected


# --- imports ------------------------------------------------------------------------------------


def test_evidenceflow_import(
    capsys: pytest.CaptureFixture[str], steps_file: Path, steps_trace_id: str
) -> None:
    code, out, _ = run(["inspect", "--format", "json", str(steps_file)], capsys)
    assert code == 0
    [trace] = json_lines(out)
    assert trace["trace_id"] == steps_trace_id
    assert trace["conventions"] == ["otel_genai"]
    [run_] = trace["runs"]
    assert run_["agent"] == "imported" and run_["final_answer"] == PARIS
    steps = trace["steps"]
    kinds = [s["kind"] for s in steps]
    assert kinds == [
        "agent", "user", "llm", "tool_call", "tool_result", "retrieval",
        "assistant", "user", "llm", "assistant",
    ]  # fmt: skip
    call, result, retrieval = steps[3:6]
    assert call["tool"] == "search" and call["call_id"] == "ev-search"
    assert call["arguments"] == '{"q":"France"}'
    assert result["tool"] == "search" and result["call_id"] == "ev-search"
    assert retrieval["source"] == "wiki"
    assert retrieval["documents"] == [{"id": "doc-bananas", "content": BANANAS}]
    assert [s["text"] for s in steps if s["kind"] == "user"] == [
        "Tell me about France.",
        "And the capital?",
    ]

    code, out, _ = run(["eval", "--format", "json", str(steps_file)], capsys)
    [record] = json_lines(out)
    assert record["status"] == "PASS"
    attributes = record["attributes"]
    assert attributes["tracehound.evidence.sources"] == 2
    assert attributes["tracehound.evidence.units"] == 3
    assert attributes["tracehound.evidence.reused_units"] == 2
    assert attributes["tracehound.evidence.final_survival_ratio"] == pytest.approx(1 / 3)
    assert attributes["tracehound.evidence.unused_sources"] == 1
    reuse = [r for r in record["results"] if r["name"] == "tracehound.evidence.reuse"]
    assert [(r["score"], r["label"], r["attributes"]) for r in reuse] == [
        (1.0, "reuses_evidence", {
            "tracehound.evidence.reused_units": 1, "tracehound.evidence.reused_from": ["search"],
        }),
    ] * 2  # fmt: skip
    labels = {
        r["name"]: r["label"] for r in record["results"] if r["span_id"] == reuse[0]["span_id"]
    }
    assert labels == {"tracehound.evidence.reuse": "reuses_evidence"}


def test_tracecheck_import_states_the_user_input_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """tracecheck traces often repeat `user_input` as the first LLM call's `input`."""
    trace = {
        "trace_id": "tc-echo",
        "agent_name": "bot",
        "user_input": "Weather in Oslo?",
        "steps": [
            {"type": "llm_call", "name": "m", "input": "Weather in Oslo?", "output": "Snow."},
            {"type": "llm_call", "name": "m", "input": "And Bergen?", "output": "Rain."},
        ],
    }
    path = write_tracecheck(tmp_path / "echo.jsonl", [trace])
    code, out, _ = run(["inspect", "--format", "json", str(path)], capsys)
    assert code == 0
    [imported] = json_lines(out)
    users = [s["text"] for s in imported["steps"] if s["kind"] == "user"]
    assert users == ["Weather in Oslo?", "And Bergen?"]


def test_tracecheck_import(capsys: pytest.CaptureFixture[str], traces_file: Path) -> None:
    code, out, _ = run(["inspect", "--format", "json", str(traces_file)], capsys)
    assert code == 0
    traces = {t["trace_id"]: t for t in json_lines(out)}
    assert set(traces) == {GROUNDED, ERRORED, LOOPING}
    grounded = traces[GROUNDED]
    assert grounded["runs"][0]["agent"] == "weather_bot"
    assert [s["kind"] for s in grounded["steps"]] == [
        "agent", "user", "llm", "assistant", "tool_call", "tool_result",
        "user", "llm", "assistant",
    ]  # fmt: skip
    llm = grounded["steps"][2]
    assert (llm["model"], llm["input_tokens"], llm["output_tokens"]) == ("gpt-4o", 10, 4)
    call, result = grounded["steps"][4:6]
    assert call["tool"] == "weather" and call["arguments"] == '{"city":"Oslo"}'
    assert result["text"] == "Oslo has light snow and minus three degrees today."
    # latency_ms gives the span durations: the tool result ends 50 ms after the call starts
    assert result["end_ns"] - call["start_ns"] == 50_000_000
    errored = traces[ERRORED]
    [failed] = [s for s in errored["steps"] if s.get("error")]
    assert failed["kind"] == "tool_result" and failed["tool"] == "weather"
    assert failed["error"] == "ConnectionError: upstream down"
    looping = traces[LOOPING]
    calls = [s for s in looping["steps"] if s["kind"] == "tool_call"]
    assert len(calls) == 4 and {c["arguments"] for c in calls} == {'{"q":"weather"}'}

    code, out, _ = run(["eval", "--format", "json", str(traces_file)], capsys)
    records = {r["trace_id"]: r for r in json_lines(out)}
    assert records[GROUNDED]["status"] == "PASS"
    assert records[GROUNDED]["attributes"]["tracehound.evidence.final_survival_ratio"] == 1.0
    assert records[GROUNDED]["attributes"]["tracehound.loops.detected"] is False
    assert records[ERRORED]["status"] == "FAIL"
    assert records[ERRORED]["attributes"]["tracehound.failure_modes"] == ["tool_call_error"]
    assert records[LOOPING]["status"] == "FAIL"
    loop_attributes = records[LOOPING]["attributes"]
    assert loop_attributes["tracehound.loops.detected"] is True
    assert loop_attributes["tracehound.loops.count"] >= 1
    assert "repeat" in loop_attributes["tracehound.loops.kinds"]
    # "none" is too short to hold an evidence unit: survival is undefined, not 0
    assert loop_attributes["tracehound.evidence.sources"] == 4
    assert "tracehound.evidence.survival_ratio" not in loop_attributes
    span_loops = [r for r in records[LOOPING]["results"] if r["name"] == "tracehound.loop"]
    assert span_loops and all(
        r["label"] in ("repeat", "consecutive", "no_progress") for r in span_loops
    )


# --- same results as the engine ----------------------------------------------------------------


def result_tuples(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (
            record["trace_id"],
            r["evaluator"],
            r["name"],
            r["span_id"],
            r["score"],
            r["label"],
            r["explanation"],
            json.dumps(r["attributes"], sort_keys=True),
        )
        for record in records
        for r in record["results"]
    )


def engine_tuples(paths: Sequence[Path], *, reverse: bool = False) -> list[tuple[Any, ...]]:
    telemetry = read_paths(paths)
    spans = list(telemetry.spans)
    for where, doc in telemetry.other_documents:
        spans.extend(import_document(doc, where))
    if reverse:
        spans.reverse()
    engine = Engine([EvidenceEvaluator(), LoopEvaluator()])
    for log in telemetry.logs:
        engine.add_log(log)
    results: list[tuple[str, EvaluationResult]] = []
    outcomes, finalized = feed_engine(engine, spans)
    for outcome in outcomes:
        results.extend((outcome.trace_id, r) for r in outcome.results)
    for trace in finalized:
        results.extend((trace.trace_id, r) for r in trace.results)
    return sorted(
        (
            trace_id,
            r.evaluator,
            r.name,
            r.span_id,
            r.score_value,
            r.score_label,
            r.explanation,
            json.dumps(
                {k: list(v) if isinstance(v, tuple) else v for k, v in r.attributes.items()},
                sort_keys=True,
            ),
        )
        for trace_id, r in results
    )


def test_eval_results_equal_the_engine_results(
    capsys: pytest.CaptureFixture[str], steps_file: Path, traces_file: Path, tmp_path: Path
) -> None:
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps(nested_otlp()))
    paths = [*example_paths(), steps_file, traces_file, nested]
    code, out, _ = run(["eval", "--format", "json", *map(str, paths)], capsys)
    assert code == 0
    from_cli = result_tuples(json_lines(out))
    assert len(from_cli) > 30
    assert from_cli == engine_tuples(paths)
    # trace results do not depend on the order in which the spans arrive
    trace_level = {t for t in from_cli if t[2] in _TRACE_RESULTS}
    assert trace_level == {t for t in engine_tuples(paths, reverse=True) if t[2] in _TRACE_RESULTS}
    traces = {t[0] for t in from_cli}
    assert len(traces) == 8
    # four results per trace, but no final-survival result for the four without evidence
    assert len(trace_level) == 8 * 4 - 4


_TRACE_RESULTS = {
    "tracehound.evidence.survival",
    "tracehound.evidence.final_survival",
    "tracehound.loops",
    "tracehound.failure_modes",
}
