"""`tracehound inspect`: text and JSON output, stdin, folders, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tracehound.cli import main

FIXTURES = Path(__file__).parent.parent / "fixtures"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_inspect_examples_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["inspect", "--examples"], capsys)
    assert code == 0
    assert "conventions: pydantic_ai" in out
    assert "run 'research_agent' (agent" in out
    assert 'search({"query":"OpenTelemetry GenAI semantic conventions"}) [call_1]' in out
    assert "search ✗ RuntimeError: search backend unavailable" in out
    assert "run 'agent_loop' (trace" in out
    assert "final answer: Based on the search results:" in out
    assert "3 trace(s), 3 with GenAI steps" in err


def test_inspect_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["inspect", "--format", "json", str(FIXTURES / "pydantic_ai_v6.otlp.json")], capsys
    )
    assert code == 0
    [line] = out.splitlines()
    record = json.loads(line)
    assert set(record) == {"trace_id", "conventions", "runs", "steps", "problems"}
    assert record["conventions"] == ["pydantic_ai"]
    assert [s["kind"] for s in record["steps"]] == [
        "agent",
        "system",
        "user",
        "llm",
        "tool_call",
        "tool_result",
        "llm",
        "tool_call",
        "tool_result",
        "llm",
        "reasoning",
        "assistant",
    ]
    call = record["steps"][4]
    assert call["tool"] == "search" and call["call_id"] == "call_1"
    assert call["arguments"] == '{"query":"OpenTelemetry GenAI semantic conventions"}'
    assert record["runs"][0]["agent"] == "research_agent"
    assert record["runs"][0]["final_answer"].startswith("Based on the search results:")


def test_inspect_traces_and_logs_by_content_any_order(capsys: pytest.CaptureFixture[str]) -> None:
    logs = str(FIXTURES / "openai_v2_latest.logs.pb")
    spans = str(FIXTURES / "openai_v2_latest.pb")
    _, out1, _ = run(["inspect", "--format", "json", logs, spans], capsys)
    _, out2, _ = run(["inspect", "--format", "json", spans, logs], capsys)
    assert out1 == out2
    steps = json.loads(out1)["steps"]
    assert [s["kind"] for s in steps] == [
        "system",
        "user",
        "llm",
        "tool_call",
        "tool_result",
        "llm",
        "assistant",
    ]


def test_inspect_folder_dedupes_json_and_protobuf_copies(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for suffix in (".otlp.json", ".pb"):
        (tmp_path / f"t{suffix}").write_bytes((FIXTURES / f"pydantic_ai_v5{suffix}").read_bytes())
    code, out, _ = run(["inspect", "--format", "json", str(tmp_path)], capsys)
    assert code == 0
    assert len(out.splitlines()) == 1


def test_unreadable_input_exits_2_with_file_and_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = run(["inspect", str(bad)], capsys)
    assert code == 2
    assert "bad.json" in err and "not valid JSON" in err
    code, _, err = run(["inspect", str(tmp_path / "missing.pb")], capsys)
    assert code == 2 and "missing.pb" in err


def test_stdin_subprocess() -> None:
    data = (FIXTURES / "openinference_openai.pb").read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "tracehound.cli", "inspect", "--format", "json", "-"],
        input=data,
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["conventions"] == ["openinference"]
    assert record["runs"][0]["agent"] == "agent_loop"


def test_usage_error_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["inspect", "--format", "xml"])
    assert info.value.code == 2
