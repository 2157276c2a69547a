"""Drift: `reasontrace`'s five scenarios in two independent ports, every drifted run checked.

Run from the repository root with the project's virtualenv:

    python benchmarks/drift_scenarios.py                 # table, default embedder
    python benchmarks/drift_scenarios.py --embedder hashing
    python benchmarks/drift_scenarios.py --json

Ports (`tests/unit/_drift_ports.py`): `otlp-json` (`tests/unit/_drift_scenarios.py`: OTLP/JSON
documents, one reasoning part and one tool call per chat, a failed call retried) and `sdk`
(`tests/unit/_drift_scenarios_sdk.py`: written apart, recorded with the OpenTelemetry SDK — another
agent, other tools and texts, parallel tool calls in one chat, reconsiderations as extra chat calls
with only a reasoning part). Each scenario: control = 15 steady runs; the others = 10 baseline
runs, then 5 drifted ones. Runs go one by one through `Engine([DriftEvaluator(MemoryStore())])`
with the evaluator's defaults (only runs below `warning` are learned; drifted runs join the agent's
drift episode).

Acceptance: every drifted run at `warning` or worse with the expected primary driver (any for the
combined scenario) and not learned; no control run at `warning` or worse. Exit code 1 if any
scenario fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit"))
sys.path.insert(0, str(ROOT / "src"))

from _drift_ports import PORTS, SCENARIO_NAMES, case, passed, port_rows, verdict  # noqa: E402

from tracehound.drift import Embedder, HashingEmbedder, default_embedder  # noqa: E402
from tracehound.drift._embed import WordLlamaEmbedder  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--embedder", choices=("default", "wordllama", "hashing"), default="default"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    embedder: Embedder = {
        "default": default_embedder,
        "wordllama": WordLlamaEmbedder,
        "hashing": HashingEmbedder,
    }[args.embedder]()
    results = []
    started = time.perf_counter()
    for port in PORTS:
        for name in SCENARIO_NAMES:
            scenario = case(port, name)
            result = verdict(port_rows(scenario, embedder=embedder), scenario)
            result["passed"] = passed(result)
            results.append(result)
    elapsed = time.perf_counter() - started
    ok = all(r["passed"] for r in results)
    if args.json:
        print(json.dumps({"embedder": embedder.name, "results": results, "passed": ok}))
        return 0 if ok else 1
    print(f"embedder {embedder.name}; {len(results)} scenarios in {elapsed:.1f} s")
    print(
        f"{'port':<10} {'scenario':<17} {'verdict':<7} {'flagged':>8} {'steady max':>10}  "
        "drifted scores (drivers)"
    )
    for r in results:
        flagged = (
            f"{r['flagged_right_driver']}/{r['drifted_runs']}"
            if r["drifted_runs"]
            else f"FP {len(r['false_positives'])}"
        )
        scores = ", ".join(f"{s:.2f}" for s in r["drifted_scores"])
        drivers = f" ({', '.join(r['drifted_drivers'])})" if r["drifted_drivers"] else ""
        print(
            f"{r['port']:<10} {r['scenario']:<17} {'pass' if r['passed'] else 'FAIL':<7} "
            f"{flagged:>8} {r['max_steady_score']:>10.3f}  {scores}{drivers}"
        )
    print("all scenarios pass" if ok else "some scenarios FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
