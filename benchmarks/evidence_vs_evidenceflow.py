"""Evidence analysis: tracehound's indexed matcher vs the `evidenceflow` package, same inputs.

Generated traces repeat [tool_call, tool_result of 3–10 sentences, reasoning reusing 1–3 earlier
evidence sentences, assistant reusing 0–2] and end with an assistant step; sentences are real
English prose from Python's own documentation (`pydoc_data.topics`), fixed seed. For each length
both implementations run on the same steps in the same process, interleaved; results must be
identical. Prints the median time (min–max), the speed-up, and tracehound's cost per step with its
ratio to the 10-step cost.

    python benchmarks/evidence_vs_evidenceflow.py           # 10, 50, 200 (+1000 for tracehound)
    python benchmarks/evidence_vs_evidenceflow.py --full    # also evidenceflow at 1000 (~75 s)
    python benchmarks/evidence_vs_evidenceflow.py --json

Targets (issue 3): identical results; ≥ 100× faster at 200 steps; cost per step within 2× from
10 to 1000 steps.
"""

from __future__ import annotations

import argparse
import json
import pydoc_data.topics
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import evidenceflow

from tracehound.compat.evidenceflow import analyze

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences() -> list[str]:
    out: list[str] = []
    for text in pydoc_data.topics.topics.values():
        for sentence in _SENTENCE_END.split(" ".join(text.split())):
            if 30 <= len(sentence) <= 240:
                out.append(sentence)
    return out


def generate(n_steps: int, pool: list[str], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    evidence: list[str] = []
    while len(steps) < n_steps - 1:
        tool = rng.choice(["search", "fetch_page", "lookup"])
        steps.append({"type": "tool_call", "tool": tool})
        chunk = rng.sample(pool, rng.randint(3, 10))
        evidence.extend(chunk)
        steps.append({"type": "tool_result", "tool": tool, "content": " ".join(chunk)})
        steps.append(
            {"type": "reasoning", "content": " ".join(rng.sample(evidence, rng.randint(1, 3)))}
        )
        reuse = rng.sample(evidence, rng.randint(0, 2))
        steps.append({"type": "assistant", "content": " ".join(reuse) or "Let me look further."})
    steps = steps[: n_steps - 1]
    steps.append({"type": "assistant", "content": " ".join(rng.sample(evidence, 2))})
    return steps


def timed(fn: Callable[[], Any], reps: int) -> tuple[list[float], Any]:
    times: list[float] = []
    result: Any = None
    for _ in range(reps):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10,50,200,1000")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--full", action="store_true", help="run evidenceflow at 1000 steps too")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    pool = sentences()
    rows: list[dict[str, Any]] = []
    base_per_step: float | None = None
    for n in (int(s) for s in args.sizes.split(",")):
        steps = generate(n, pool, seed=n)
        run_anchor = n <= 200 or args.full
        ours_times: list[float] = []
        anchor_times: list[float] = []
        ours: Any = None
        theirs: Any = None
        anchor_reps = args.reps if n <= 200 else 1
        for rep in range(max(args.reps, anchor_reps)):
            if rep < args.reps:
                t, ours = timed(lambda steps=steps: analyze(steps), 1)
                ours_times += t
            if run_anchor and rep < anchor_reps:
                t, theirs = timed(lambda steps=steps: evidenceflow.analyze(steps), 1)
                anchor_times += t
        ours_med = statistics.median(ours_times)
        per_step = ours_med / n
        base_per_step = base_per_step or per_step
        row: dict[str, Any] = {
            "steps": n,
            "units": ours["evidence_units"],
            "tracehound_ms": ours_med * 1e3,
            "tracehound_ms_min": min(ours_times) * 1e3,
            "tracehound_ms_max": max(ours_times) * 1e3,
            "tracehound_us_per_step": per_step * 1e6,
            "per_step_vs_10": per_step / base_per_step,
        }
        if run_anchor:
            anchor_med = statistics.median(anchor_times)
            row.update(
                evidenceflow_ms=anchor_med * 1e3,
                evidenceflow_ms_min=min(anchor_times) * 1e3,
                evidenceflow_ms_max=max(anchor_times) * 1e3,
                speedup=anchor_med / ours_med,
                identical=ours == theirs,
            )
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{'steps':>6} {'units':>6} {'evidenceflow ms':>22} {'tracehound ms':>20} {'speed-up':>9} "
        f"{'µs/step':>8} {'vs 10':>6} identical"
    )
    for r in rows:
        anchor = (
            f"{r['evidenceflow_ms']:9.1f} "
            f"({r['evidenceflow_ms_min']:.0f}–{r['evidenceflow_ms_max']:.0f})"
            if "evidenceflow_ms" in r
            else "not run (--full)"
        )
        ours = (
            f"{r['tracehound_ms']:7.2f} ({r['tracehound_ms_min']:.2f}–{r['tracehound_ms_max']:.2f})"
        )
        speed = f"{r['speedup']:8.0f}x" if "speedup" in r else f"{'-':>9}"
        same = str(r.get("identical", "-"))
        print(
            f"{r['steps']:>6} {r['units']:>6} {anchor:>22} {ours:>20} {speed} "
            f"{r['tracehound_us_per_step']:8.1f} {r['per_step_vs_10']:5.2f}x {same}"
        )
    at200 = next((r for r in rows if r["steps"] == 200 and "speedup" in r), None)
    last = rows[-1]
    checks = [
        ("identical results", all(r.get("identical", True) for r in rows)),
        ("≥ 100x faster at 200 steps", at200 is not None and at200["speedup"] >= 100),
        (
            f"cost per step within 2x from {rows[0]['steps']} to {last['steps']}",
            last["per_step_vs_10"] <= 2.0,
        ),
    ]
    for name, ok in checks:
        print(f"{'PASS' if ok else 'MISS'}  {name}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
