"""Expectation rules written from a framework capture's `manifest.json` truth (never from
tracehound), for the live tests of the `expectations` evaluator.

Per agent: its expected tool sequence (exact, no excess, no more calls) and the tools it must
call; for a single top-level agent, a word of the final answer; and one rule that must fail
wherever a tool was called (`must_fail`: no call of the tools the capture called).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

CAPTURES = Path(__file__).resolve().parent / "fixtures" / "frameworks"
MANIFEST: dict[str, Any] = json.loads((CAPTURES / "manifest.json").read_text())["captures"]


def agents(tree: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for agent in tree:
        out.append(agent["name"])
        out.extend(agents(agent.get("sub_agents", [])))
    return out


def _toml(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # JSON strings and arrays are TOML too


def rules_for(capture: str) -> str:
    """A TOML settings file (`[serve]` and `[[expectations.rule]]`) for the capture."""
    truth = MANIFEST[capture]["truth"]
    lines = ['[serve]\notlp_grpc = "none"\n']
    called: dict[str, list[str]] = {name: [] for name in agents(truth["agents"])}
    for call in truth["tool_calls"]:
        called.setdefault(call["agent"], []).append(call["name"])
    for i, (agent, tools) in enumerate(called.items()):
        lines.append(
            f"[[expectations.rule]]\nname = 'truth{i}'\nagent = {_toml(agent)}\n"
            f"expected_tools = {_toml(tools)}\nmax_excess = 0\n"
            f"max_tool_calls = {len(tools)}\n"
        )
        if tools:
            lines.append(f"tools_called = {_toml(sorted(set(tools)))}\n")
    if len(truth["agents"]) == 1:
        word = max(re.findall(r"[A-Za-z]{4,}", truth["final_answer"]), key=len)
        lines.append(
            f"[[expectations.rule]]\nname = 'answer'\nagent = {_toml(truth['agents'][0]['name'])}"
            f"\nanswer_regex = {_toml(re.escape(word))}\nanswer_min_length = 1\n"
        )
    every_tool = sorted({c["name"] for c in truth["tool_calls"]})
    lines.append(
        f"[[expectations.rule]]\nname = 'must_fail'\ntools_not_called = {_toml(every_tool)}\n"
    )
    return "\n".join(lines)


def input_paths(capture: str) -> list[Path]:
    entry = MANIFEST[capture]
    paths = [CAPTURES / entry["file"]]
    if entry.get("logs_file"):
        paths.append(CAPTURES / entry["logs_file"])
    return paths
