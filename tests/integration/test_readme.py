"""The README's code blocks, run as written: every `bash` and `python` block is executed.

A block that cannot run here carries `<!-- readme-test: skip (why) -->` on the line before its
fence, and the reason is required. Blocks run in a temporary folder (with `examples/` linked in)
under `bash -euo pipefail` or this interpreter, with three substitutions, all for the test's sake:
`pip` is a shell function that does nothing (the test environment already has `tracehound[dev]`),
the default ports 4317, 4318 and 9464 become free ports, in the block and in the sidecar's
defaults (`TRACEHOUND_OTLP_GRPC` / `_HTTP`: tests run beside other servers), and the state
directory is the temporary folder's (no baselines written in the user's).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import child_environ

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RUNNABLE = {"bash": "bash", "sh": "bash", "python": "python"}
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*\((?P<why>[^)]+)\)\s*-->")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")
TIMEOUT = 240


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip: str | None  # the reason, when marked

    @property
    def id(self) -> str:
        first = next((ln for ln in self.code.splitlines() if ln.strip()), "")
        return f"line{self.line}-{self.lang}-{first[:30]}"


def readme_blocks(text: str) -> list[Block]:
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        marker = SKIP.search(lines[i - 1]) if i else None
        blocks.append(
            Block(
                line=i + 1,
                lang=opening["lang"],
                code="\n".join(lines[i + 1 : end]) + "\n",
                skip=marker["why"].strip() if marker else None,
            )
        )
        i = end + 1
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
RUN = [b for b in BLOCKS if b.lang in RUNNABLE]


def test_the_readme_has_runnable_blocks_and_every_skip_says_why() -> None:
    assert len([b for b in RUN if b.skip is None]) >= 5
    for block in BLOCKS:
        if block.skip is not None:
            assert block.lang in RUNNABLE, f"line {block.line}: only code blocks are skipped"
            assert len(block.skip) > 20, f"line {block.line}: say why it cannot run"
    # a marker that does not sit right before a fence is a typo that would skip nothing
    text = README.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(text):
        if SKIP.search(line):
            assert n + 1 < len(text) and FENCE.match(text[n + 1]), f"line {n + 1}: stray marker"


def test_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 400


def test_readme_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (ROOT / target).exists(), target


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _environment(tmp_path: Path) -> dict[str, str]:
    env = child_environ()
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(ROOT / "src")
    env["HOME"] = str(tmp_path / "home")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


PRELUDE = """set -euo pipefail
pip() { echo "(pip $*: skipped, the test environment has tracehound[dev])"; }
"""


@pytest.mark.parametrize("block", [b for b in RUN if b.skip is None], ids=lambda b: b.id)
def test_readme_block_runs(block: Block, tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    code, ports = block.code, {p: str(_free_port()) for p in ("4317", "4318", "9464")}
    for default, free in ports.items():
        code = re.sub(rf"(?<!\d){default}(?!\d)", free, code)
    env = _environment(tmp_path)
    env["TRACEHOUND_OTLP_GRPC"] = f"localhost:{ports['4317']}"  # where the sidecar's defaults go
    env["TRACEHOUND_OTLP_HTTP"] = f"localhost:{ports['4318']}"
    if RUNNABLE[block.lang] == "bash":
        script = tmp_path / "block.sh"
        script.write_text(PRELUDE + code)
        command = ["bash", str(script)]
    else:
        script = tmp_path / "block.py"
        script.write_text(code)
        command = [sys.executable, str(script)]
    done = subprocess.run(
        command,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    where = f"README line {block.line}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, where
    assert "Traceback" not in done.stderr, where
    _check_what_it_made(block, tmp_path, done.stdout)


def _check_what_it_made(block: Block, tmp_path: Path, stdout: str) -> None:
    """What the README says each block does, checked on what it left behind."""
    if "examples/sidecar_app.py" in block.code:  # the walkthrough
        enriched = (tmp_path / "enriched.jsonl").read_text()
        assert '"tracehound.loops.detected"' in enriched
        assert (tmp_path / "enriched.metrics.jsonl").exists()
        assert "FAIL  trace" in stdout  # `tracehound eval enriched.jsonl`: the loop fails it
    if "--html report.html" in block.code:
        assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
        assert "gate tripped (exit 1)" in stdout
    if "tracehound inspect --examples" in block.code:
        assert "final answer:" in stdout
    if "--check-config" in block.code:
        assert "[toml tracehound.toml]" in stdout
