"""The runnable examples in `examples/`, run as CI runs them: subprocesses, checked on output.

Each example starts its own OTLP/gRPC sink on 127.0.0.1, exports to it and prints what it
received; these tests hold them to what their docstrings promise.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import child_environ

pytestmark = [pytest.mark.integration]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str) -> str:
    env = child_environ()
    env["OPENAI_API_KEY"] = "sk-example"
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def lines_with(output: str, text: str) -> list[str]:
    return [line for line in output.splitlines() if text in line]


def evaluations(output: str, name: str) -> list[str]:
    """The printed evaluation lines of one evaluation name."""
    return [line for line in output.splitlines() if line.split()[:1] == [name]]


def test_pydantic_ai_agent_example() -> None:
    out = run_example("pydantic_ai_agent.py")
    assert "agent answer: Everything looks fine" in out
    assert "spans received: 10" in out
    loops = evaluations(out, "tracehound.loop")
    assert {line.split("label=")[1].split()[0] for line in loops} >= {"repeat", "consecutive"}
    (final,) = evaluations(out, "tracehound.evidence.final_survival")
    assert "label=ungrounded" in final and "span=invoke_agent ci_agent" in final
    (summary,) = evaluations(out, "tracehound.loops")
    assert "label=fail" in summary
    assert "  tracehound.loops.detected = True" in out
    assert "  tracehound.evidence.unused_sources = 4" in out
    (metrics,) = lines_with(out, "metrics: ")
    for name in ("tracehound.loops", "tracehound.evaluation.score", "tracehound.traces.finalized"):
        assert name in metrics


def test_openai_agent_example() -> None:
    out = run_example("openai_agent.py")
    assert "agent answer: According to the search result:" in out
    # content only in log events: two details events, joined to the two chat spans
    assert "spans received: 3; GenAI detail events: 2" in out
    (reuse,) = evaluations(out, "tracehound.evidence.reuse")
    assert "label=reuses_evidence" in reuse and "span=chat gpt-4o-mini" in reuse
    (final,) = evaluations(out, "tracehound.evidence.final_survival")
    assert "score=1.0" in final and "label=grounded" in final and "span=research_agent" in final
    assert "  tracehound.loops.detected = False" in out
