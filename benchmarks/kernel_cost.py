"""What each C kernel pays: the sidecar's whole per-span work, run in process, with the accelerator
on, off, and with one group of kernels turned off at a time.

    python benchmarks/kernel_cost.py                  # CPU time per span, 3 reps per setting
    python benchmarks/kernel_cost.py --callgrind      # instructions per span (valgrind), exact
    python benchmarks/kernel_cost.py --callgrind --only EvidenceCore   # one group against all on

The work is `tracehound serve`'s pipeline without its sockets: each request of the
`sidecar_throughput.py` GenAI workload (agent traces of 8 spans, 512 spans per request) is
submitted, read, evaluated (evidence, loops, drift with in-memory baselines), annotated, spliced
and written out as the forwarded request and its `gen_ai.evaluation.result` records, as the
sidecar's worker does. Each setting runs in a fresh process with `TRACEHOUND_PURE_PYTHON` set to
the kernels it turns off. With `--callgrind`, instructions are counted for two workload sizes and
their difference divided by the extra spans, so start-up (imports, numpy) cancels out; the count
does not depend on what else the machine runs. Drift embeds with the hashing embedder (what
`pip install tracehound` runs) unless `--embedder wordllama` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GROUPS: dict[str, tuple[str, ...]] = {
    "wire (scan, decode, read, splice)": (
        "scan_trace_request",
        "decode_key_values",
        "read_trace_spans",
        "read_trace_views",
        "splice_trace_request",
    ),
    "encoders (key values, log records)": ("encode_key_values", "encode_log_record"),
    "EvidenceCore": ("EvidenceCore",),
    "drift embedding (hashing)": ("embed_hashed", "embed_hashed_sum", "embed_texts_sum"),
}


def run_pipeline(spans: int) -> float:
    """Feed `spans` GenAI spans through the sidecar's pipeline; CPU seconds per span."""
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sidecar_throughput import workload

    from tracehound.baselines import MemoryStore
    from tracehound.cli import select_evaluators
    from tracehound.evaluators.drift import DriftEvaluator
    from tracehound.server._forward import Budget
    from tracehound.server._pipeline import Pipeline
    from tracehound.server._settings import ServeSettings

    class Lane:
        """What the pipeline uses of a forwarding lane: a budget, put and offer."""

        def __init__(self) -> None:
            self.budget = Budget(1 << 40)
            self.items = 0

        def put(self, data: bytes, items: int, reserved: int = 0) -> None:
            self.items += items

        def offer(self, data: bytes, items: int) -> bool:
            self.items += items
            return True

    batches = workload("genai", spans, 20261129)
    settings = ServeSettings.resolve(
        {"otlp_grpc": "none", "otlp_http": "127.0.0.1:0", "forward": "none"},
        environ={"TRACEHOUND_METRICS": "false"},
    )
    lanes: dict[str, Any] = {name: Lane() for name in ("traces", "logs", "metrics")}
    evaluators = [*select_evaluators(None), DriftEvaluator(MemoryStore())]
    pipeline = Pipeline(settings, evaluators, lanes)
    now = [0.0]
    pipeline.engine._clock = lambda: now[0]
    started = time.process_time()
    for raw in batches:
        pipeline.submit_traces(None, raw, len(raw))
        pipeline._drain()
        pipeline._finalize(pipeline.engine.poll())
        pipeline._flush_outputs()
        now[0] += 100.0
    pipeline._finalize(pipeline.engine.flush())
    pipeline._flush_outputs()
    assert pipeline.stats.internal_errors == 0
    return (time.process_time() - started) / spans


EMBEDDER = "hashing"  # --embedder


def _child(off: str, spans: int, callgrind: bool) -> float:
    env = {
        **os.environ,
        "TRACEHOUND_PURE_PYTHON": off,
        "PYTHONHASHSEED": "0",
        "TRACEHOUND_EMBEDDER": EMBEDDER,
    }
    command = [sys.executable, __file__, "--child", str(spans)]
    if not callgrind:
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        return float(done.stdout.strip().splitlines()[-1])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
            env=env,
            capture_output=True,
            check=True,
        )
        for line in out.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return float(line.split()[1])
    raise RuntimeError("callgrind wrote no total")


def measure(off: str, args: argparse.Namespace) -> float:
    """µs per span (CPU) or instructions per span (callgrind)."""
    if args.callgrind:
        small, large = args.spans // 4, args.spans
        return (_child(off, large, True) - _child(off, small, True)) / (large - small)
    return statistics.median(_child(off, args.spans, False) * 1e6 for _ in range(args.reps))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(GROUPS),
        help="measure only this group against all kernels on (repeatable; skips the pure run)",
    )
    parser.add_argument(
        "--embedder",
        choices=("hashing", "wordllama"),
        default="hashing",
        help="drift's semantic embedder (default: hashing; wordllama needs tracehound[semantic])",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global EMBEDDER  # noqa: PLW0603 - read by _child
    EMBEDDER = args.embedder
    if args.child:
        print(run_pipeline(args.child))
        return 0
    unit = "instructions/span" if args.callgrind else "µs/span (CPU)"
    rows: dict[str, float] = {"all kernels (accelerator on)": measure("", args)}
    if not args.only:
        rows["none (TRACEHOUND_PURE_PYTHON=1)"] = measure("1", args)
    for group, kernels in GROUPS.items():
        if not args.only or group in args.only:
            rows[f"without {group}"] = measure(",".join(kernels), args)
    base = rows["all kernels (accelerator on)"]
    if args.json:
        print(json.dumps({"unit": unit, "rows": rows}))
        return 0
    print(f"| setting | {unit} | cost of turning it off |")
    print("|---|---|---|")
    for name, value in rows.items():
        print(f"| {name} | {value:,.1f} | {100 * (value / base - 1):+.1f} % |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
