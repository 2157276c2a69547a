"""Drift: the cost of scoring one finished run and of updating its baseline.

One finished agent run — 8 LLM calls, 8 tool calls over 4 tools, 8 reasoning texts of ~250
characters (~2 KB of real English prose from Python's own documentation, fixed seed) — is scored
against a 50-run baseline with the default 1024-d hashing embedder, then merged into that baseline
in an `SQLiteStore` file (WAL, `synchronous=NORMAL`, one `BEGIN IMMEDIATE` transaction per update)
and, for reference, in a `MemoryStore`. `reasontrace`'s `DriftScorer.score` is timed on the same
session in the same repetitions, with a stub 384-d embedder (its sentence-transformers model is not
installed; perf-baseline B7 measured it the same way), so its figure is numpy/list plumbing only.

Configurations are interleaved inside each repetition and ratios are taken within a repetition;
figures are medians over the repetitions with their min–max.

    python benchmarks/drift_cost.py            # 15 repetitions
    python benchmarks/drift_cost.py --reps 5 --json
    python benchmarks/drift_cost.py --redis redis://127.0.0.1:6379/15   # + a RedisStore update

With `--redis URL` (a server you run; the benchmark writes one key under its own prefix and
deletes it), the same update also goes through a `RedisStore`: one Lua script, one round trip.

With `tracehound[semantic]` installed, the same run's features and score are also timed with the
WordLlama embedder (256-d static embeddings + the stance block: one tokenizer pass and one gather
per text), against a 50-run baseline of its own, and its one-off load time is reported.

Targets (issue 4): ≤ 1 ms to score one run (features + score), ≤ 5 ms per SQLite update.
"""

from __future__ import annotations

import argparse
import json
import os
import pydoc_data.topics
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tracehound.baselines import MemoryStore, SQLiteStore
from tracehound.drift import Baseline, DriftScorer, Embedder, HashingEmbedder, run_features
from tracehound.drift._embed import WordLlamaEmbedder, wordllama_directory
from tracehound.steps import Run, Step, Trajectory

TOOLS = ("web_search", "fetch_page", "extract_records", "summarize")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences() -> list[str]:
    out: list[str] = []
    for text in pydoc_data.topics.topics.values():
        for sentence in _SENTENCE_END.split(" ".join(text.split())):
            if 60 <= len(sentence) <= 250:
                out.append(sentence)
    return out


def make_run(
    index: int, pool: list[str], rng: random.Random
) -> tuple[Trajectory, Run, dict[str, Any]]:
    """One finished run as a trajectory, and the same run as a reasontrace session."""
    t0 = 1_700_000_000_000_000_000 + index * 10_000_000_000
    steps: list[Step] = []
    texts: list[str] = []
    tools: list[str] = []
    clock = t0
    for k in range(8):
        text = ""
        while len(text) < 250:
            text = f"{text} {rng.choice(pool)}".strip()
        texts.append(text)
        tool = TOOLS[k % len(TOOLS)] if k < 6 else rng.choice(TOOLS)
        tools.append(tool)
        span = f"{index:08x}{k:08x}"
        steps.append(
            Step(
                kind="llm",
                span_id=span,
                start_ns=clock,
                end_ns=clock + 600_000_000,
                run_id="run",
                input_tokens=400 + 150 * k,
                output_tokens=rng.randint(60, 120),
            )
        )
        steps.append(
            Step(
                kind="reasoning",
                span_id=span,
                start_ns=clock,
                end_ns=clock,
                run_id="run",
                text=text,
            )
        )
        steps.append(
            Step(
                kind="tool_call",
                span_id=span,
                start_ns=clock,
                end_ns=clock,
                run_id="run",
                tool=tool,
                call_id=f"c{k}",
                arguments=json.dumps({"q": f"query {index} {k}"}),
            )
        )
        clock += 650_000_000
        steps.append(
            Step(
                kind="tool_result",
                span_id=span + "t",
                start_ns=clock,
                end_ns=clock + 200_000_000,
                run_id="run",
                tool=tool,
                call_id=f"c{k}",
                text="result",
            )
        )
        clock += 250_000_000
    run = Run(
        run_id="run",
        agent_name="agent",
        span_id="run",
        parent_run_id=None,
        start_ns=t0,
        end_ns=clock,
        depth=0,
        service_name="svc",
    )
    trajectory = Trajectory(
        trace_id=f"{index:032x}", steps=tuple(steps), runs=(run,), conventions=()
    )
    session = {
        "session_id": f"s{index}",
        "reasoning_checkpoints": [{"step": k + 1, "content": t} for k, t in enumerate(texts)],
        "tool_calls": [{"step": k + 1, "tool_name": t} for k, t in enumerate(tools)],
        "decisions": [],
    }
    return trajectory, run, session


def _baseline_of(history: list[tuple[Trajectory, Run, Any]], embedder: Embedder) -> Baseline:
    baseline: Baseline | None = None
    for past_traj, past_run, _ in history:
        features = run_features(past_traj, past_run, embedder)
        baseline = (
            Baseline.from_run(features, embedder)
            if baseline is None
            else baseline.with_run(features, embedder)
        )
    assert baseline is not None
    return baseline


def per_call(fn: Callable[[], Any], iterations: int) -> float:
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    return (time.perf_counter() - start) / iterations


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=200, help="calls per measurement")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--redis", metavar="URL", help="also time a RedisStore update there")
    args = parser.parse_args()

    import reasontrace.baseline as rt_baseline
    import reasontrace.scorer as rt_scorer
    from reasontrace import storage as rt_storage

    pool = sentences()
    rng = random.Random(42)
    embedder = HashingEmbedder()
    history = [make_run(i, pool, rng) for i in range(51)]
    trajectory, run, session = history[-1]

    stub_rng = np.random.default_rng(0)
    stub_vector = stub_rng.normal(size=384).astype(np.float32)

    def stub_embedding(checkpoints: Any) -> Any:
        return stub_vector if checkpoints else np.zeros(384, dtype=np.float32)

    rt_baseline.embed_session_reasoning = stub_embedding  # type: ignore[assignment]
    rt_scorer.embed_session_reasoning = stub_embedding  # type: ignore[assignment]

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["REASONTRACE_DIR"] = tmp
        for _, _, past in history[:-1]:
            rt_baseline.update_baseline(past)
        rt_base = rt_storage.load_baseline()
        assert rt_base is not None

        baseline: Baseline | None = None
        for past_traj, past_run, _ in history[:-1]:
            features = run_features(past_traj, past_run, embedder)
            baseline = (
                Baseline.from_run(features, embedder)
                if baseline is None
                else baseline.with_run(features, embedder)
            )
        assert baseline is not None
        sqlite = SQLiteStore(Path(tmp) / "baselines.sqlite3")
        sqlite.put("svc/agent", baseline)
        memory = MemoryStore()
        memory.put("svc/agent", baseline)
        redis = None
        if args.redis:
            from tracehound.baselines import open_store

            redis = open_store(f"{args.redis}{'&' if '?' in args.redis else '?'}prefix=bench")
            redis.reset("svc/agent")
            redis.put("svc/agent", baseline)
        scorer = DriftScorer()
        rt = rt_scorer.DriftScorer()
        features = run_features(trajectory, run, embedder)
        delta = Baseline.from_run(features, embedder)
        score = scorer.score(features, baseline, embedder=embedder)
        assert score.scored and score.explanation is not None

        semantic: dict[str, Callable[[], Any]] = {}
        load_s = None
        if wordllama_directory() is not None:
            started = time.perf_counter()
            wordllama: Embedder = WordLlamaEmbedder()
            load_s = time.perf_counter() - started
            wl_base = _baseline_of(history[:-1], wordllama)
            wl_features = run_features(trajectory, run, wordllama)
            semantic = {
                "features (WordLlama 256-d + stance)": lambda: run_features(
                    trajectory, run, wordllama
                ),
                "score one finished run (WordLlama)": lambda: scorer.score(
                    run_features(trajectory, run, wordllama), wl_base, embedder=wordllama
                ),
                "score vs WordLlama baseline": lambda: scorer.score(
                    wl_features, wl_base, embedder=wordllama
                ),
            }
        cases: dict[str, Callable[[], Any]] = {
            "features (tokenize + 1024-d embed)": lambda: run_features(trajectory, run, embedder),
            "score vs baseline (+ explanation)": lambda: scorer.score(
                features, baseline, embedder=embedder
            ),
            "score vs baseline (no explanation)": lambda: scorer.score(
                features, baseline, embedder=embedder, explain=False
            ),
            "score one finished run (both)": lambda: scorer.score(
                run_features(trajectory, run, embedder), baseline, embedder=embedder
            ),
            "SQLite update (from_run + RMW txn)": lambda: sqlite.update(
                "svc/agent", Baseline.from_run(features, embedder)
            ),
            "memory update": lambda: memory.update("svc/agent", delta),
            **(
                {
                    "Redis update (from_run + Lua merge)": lambda: redis.update(
                        "svc/agent", Baseline.from_run(features, embedder)
                    )
                }
                if redis is not None
                else {}
            ),
            **semantic,
            "reasontrace DriftScorer.score (stub)": lambda: rt.score(session, rt_base),
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        ratios: dict[str, list[float]] = {
            "score one finished run (both)": [],
            "score vs baseline (+ explanation)": [],
            "score vs baseline (no explanation)": [],
        }
        for _ in range(args.reps):
            for name, fn in cases.items():
                slow = "SQLite" in name or "Redis" in name
                iterations = args.iterations if not slow else max(20, args.iterations // 4)
                samples[name].append(per_call(fn, iterations))
            theirs = samples["reasontrace DriftScorer.score (stub)"][-1]
            for name, values in ratios.items():
                values.append(samples[name][-1] / theirs)
        final = sqlite.get("svc/agent")
        assert final is not None and final.runs > baseline.runs
        sqlite.close()
        if redis is not None:
            shared = redis.get("svc/agent")
            assert shared is not None and shared.runs == final.runs  # same updates, same merge
            redis.reset("svc/agent")
            redis.close()

    report = {
        name: {
            "median_us": statistics.median(values) * 1e6,
            "min_us": min(values) * 1e6,
            "max_us": max(values) * 1e6,
        }
        for name, values in samples.items()
    }
    ratio_report = {
        f"{name} / reasontrace": statistics.median(values) for name, values in ratios.items()
    }
    if args.json:
        print(
            json.dumps(
                {
                    "per_call": report,
                    "ratios": ratio_report,
                    "wordllama_load_s": load_s,
                    "python": sys.version.split()[0],
                }
            )
        )
        return
    text_bytes = sum(len(s.text or "") for s in trajectory.steps if s.kind == "reasoning")
    print(
        f"one run: 8 LLM calls, 8 tool calls, {text_bytes} B of reasoning text; baseline of 50 runs"
    )
    print(f"{'operation':<40} {'median':>10} {'min–max':>22}")
    for name, row in report.items():
        spread = f"{row['min_us']:.1f}–{row['max_us']:.1f}"
        print(f"{name:<40} {row['median_us']:>8.1f} µs {spread:>20} µs")
    if load_s is not None:
        print(f"WordLlama embedder load (once per process): {load_s * 1e3:.0f} ms")
    for name, value in ratio_report.items():
        print(f"ratio {name:<50} {value:>6.2f}×")
    score_us = report["score one finished run (both)"]["median_us"]
    update_us = report["SQLite update (from_run + RMW txn)"]["median_us"]
    print(
        f"targets: score ≤ 1000 µs: {'met' if score_us <= 1000 else 'MISSED'} ({score_us:.0f} µs); "
        f"SQLite update ≤ 5000 µs: {'met' if update_us <= 5000 else 'MISSED'} ({update_us:.0f} µs)"
    )


if __name__ == "__main__":
    main()
