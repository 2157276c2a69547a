#!/usr/bin/env python3
"""Seeded differential fuzzing of the C kernels that read client bytes (`tracehound._speedups`)
against their Python references: every C answer (anything but None) must equal the reference's,
the C must never crash, and never raise where the reference succeeds (but for its documented
errors). The kernels, generators and checks are in `tests/unit/_kernel_fuzz.py`.

    scripts/fuzz_kernels.py                       # 1,000,000 inputs over all kernels, seed 16
    scripts/fuzz_kernels.py --inputs 50000000 --jobs 2 --seed 1   # the longer run (below)
    scripts/fuzz_kernels.py --kernel decode_key_values --kernel read_trace_views --inputs 200000
    scripts/fuzz_kernels.py --seed 7              # other inputs; the same seed, the same inputs
    scripts/fuzz_kernels.py --replay KERNEL HEX   # one case again (as printed on a failure)
    scripts/fuzz_kernels.py --jobs 2              # kernels split over two processes

It fuzzes the extension built in place (`python setup.py build_ext --inplace`) or installed;
run it from the checkout (it puts `src/` first on the path). The inputs are split evenly over
the kernels chosen; each kernel's inputs depend only on the seed and the kernel, so a run of one
kernel repeats that kernel's share of a full run with the same seed and size. The table gives,
per kernel: inputs, answered (the C answered: compared with the reference; "unchecked" of them
were bytes upb refuses, for which the kernel promises nothing since its callers pass only bytes
upb parses or the validating scan accepted), declined (None: the caller's Python path), raised
(documented errors: edits not one per span) and mismatches.

It exits 1 on any mismatch, printing each (up to --max-failures per kernel) with a reproducer:
the case as hex for --replay, and the call it makes. The kernels run in a child process; if the
child dies (a crash, a sanitizer report), the case it was running is printed the same way (the
child keeps it in a shared file mapping) and the exit status is 2. Long runs: raise --inputs and
vary --seed; --jobs N runs the kernels in N processes (the machine has 2 cores; leave one free).

Times on the 2-core development machine: 1,000,000 inputs (200,000 per kernel) take about
270 s in one process (the span views about a third of it) and half that with --jobs 2, so the
longer run of 50,000,000 inputs (a new --seed each time) takes about 4 hours in one process, 2
with --jobs 2; run it after changing a kernel, or overnight. CI runs the default 1,000,000
(`.ci/run`).

Why not atheris: it installs from PyPI here and runs, but libFuzzer's coverage feedback needs the
extension built by clang with -fsanitize=fuzzer (gcc cannot), so it would be guided by the
Python references' coverage only; its generic byte mutations seldom keep a nested protobuf
well-formed, where this driver's structural mutations reach the C's answering paths (70% of
inputs answered); and libFuzzer ends the process when its -runs are done, which leaves no place
for per-kernel counts. The same checks could be handed to atheris as its `TestOneInput`
(`_kernel_fuzz.replay(kernel, case, native)`, a case being bytes).
"""

from __future__ import annotations

import argparse
import mmap
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit"))
sys.path.insert(0, str(ROOT / "src"))

DEFAULT_SEED = 16  # issue #16
_LAST_CASE_SIZE = 64 << 20  # the shared mapping that keeps the running case (cases are small)


def _load() -> tuple[object, object]:
    import _kernel_fuzz

    from tracehound import _accel

    try:
        from tracehound import _speedups
    except ImportError as e:
        sys.exit(
            f"tracehound._speedups is not built ({e}): run "
            "`python setup.py build_ext --inplace` first"
        )
    _accel.loaded()  # given Python's constants, as at its first kernel call
    _accel._in_use = _speedups  # the views' attributes too (whatever TRACEHOUND_PURE_PYTHON says)
    return _kernel_fuzz, _speedups


def _split(total: int, kernels: list[str]) -> dict[str, int]:
    share, extra = divmod(total, len(kernels))
    return {k: share + (i < extra) for i, k in enumerate(kernels)}


def _worker(args: argparse.Namespace) -> int:
    """Run the kernels given, one after another, printing one line of counts per kernel."""
    kf, native = _load()
    mapped = None
    if args.last_case:
        with open(args.last_case, "r+b") as f:
            mapped = mmap.mmap(f.fileno(), _LAST_CASE_SIZE)
    names = list(kf.KERNELS)  # type: ignore[attr-defined]
    failed = False
    for name, inputs in args.share:
        number = names.index(name)

        def keep(case: bytes, number: int = number) -> None:
            if mapped is not None and len(case) + 8 <= _LAST_CASE_SIZE:
                mapped[8 : 8 + len(case)] = case
                mapped[:8] = struct.pack("<II", number, len(case))

        failures: list[object] = []
        started = time.perf_counter()
        counts = kf.run_kernel(  # type: ignore[attr-defined]
            name,
            inputs,
            args.seed,
            native,
            on_case=keep,
            failures=failures,
            max_failures=args.max_failures,
        )
        seconds = time.perf_counter() - started
        print(
            "counts",
            name,
            counts.inputs,
            counts.answered,
            counts.unchecked,
            counts.declined,
            counts.raised,
            counts.mismatches,
            f"{seconds:.1f}",
            flush=True,
        )
        for failure in failures:
            failed = True
            _print_failure(kf, failure.kernel, failure.case, failure.error)  # type: ignore[attr-defined]
    if mapped is not None:
        mapped[:8] = b"\xff" * 8  # done: nothing running
    return 1 if failed else 0


def _print_failure(kf: object, kernel: str, case: bytes, error: str) -> None:
    describe = kf.KERNELS[kernel].describe  # type: ignore[attr-defined]
    print(f"MISMATCH in {kernel}: {error}", flush=True)
    print(f"  reproducer: scripts/fuzz_kernels.py --replay {kernel} {case.hex()}")
    call = describe(case)
    print(f"  call: {call if len(call) < 4000 else call[:4000] + ' …'}", flush=True)


def _replay(kernel: str, hexed: str) -> int:
    kf, native = _load()
    case = bytes.fromhex(hexed)
    print(kf.KERNELS[kernel].describe(case))  # type: ignore[attr-defined]
    try:
        outcome = kf.replay(kernel, case, native)  # type: ignore[attr-defined]
    except Exception as e:
        print(f"MISMATCH: {type(e).__name__}: {e}")
        return 1
    print(f"ok: {outcome}")
    return 0


def _parent(args: argparse.Namespace) -> int:
    kf, native = _load()
    names = list(kf.KERNELS)  # type: ignore[attr-defined]
    chosen = args.kernel or names
    for name in chosen:
        if name not in names:
            sys.exit(f"unknown kernel {name!r}; kernels: {', '.join(names)}")
    share = _split(args.inputs, chosen)
    jobs = max(1, min(args.jobs, len(chosen)))
    groups: list[list[str]] = [chosen[i::jobs] for i in range(jobs)]
    print(
        f"fuzzing {', '.join(chosen)}: {args.inputs} inputs, seed {args.seed}, {jobs} process(es)",
        flush=True,
    )
    print(f"C kernels: {native.__file__}", flush=True)  # type: ignore[attr-defined]
    started = time.perf_counter()
    children = []
    for group in groups:
        with tempfile.NamedTemporaryFile(prefix="fuzz-kernels-", delete=False) as last:
            last.write(b"\xff" * 8)  # no case running yet
            last.truncate(_LAST_CASE_SIZE)
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            "--seed",
            str(args.seed),
            "--max-failures",
            str(args.max_failures),
            "--last-case",
            last.name,
        ]
        for name in group:
            command += ["--share", name, str(share[name])]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        children.append((child, last.name))
    rows: dict[str, list[str]] = {}
    status = 0
    for child, last_name in children:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("counts "):
                fields = line.split()
                rows[fields[1]] = fields[2:]
                print(f"  {fields[1]}: {fields[2]} inputs in {fields[-1]} s", flush=True)
            else:
                sys.stdout.write(line)
        code = child.wait()
        if code == 1:
            status = max(status, 1)
        elif code != 0:
            status = 2
            print(f"the fuzzing process died (exit status {code})", flush=True)
            with open(last_name, "rb") as f:
                head = f.read(8)
                number, size = struct.unpack("<II", head)
                if number < len(names):
                    case = f.read(size)
                    _print_failure(kf, names[number], case, "the C crashed on this case")
                else:
                    print("(it was not running a case)", flush=True)
        os.unlink(last_name)
    seconds = time.perf_counter() - started
    header = (
        f"{'kernel':<22} {'inputs':>9} {'answered':>9} {'unchecked':>9} {'declined':>9} "
        f"{'raised':>7} {'mismatches':>10} {'seconds':>8}"
    )
    print(header)
    totals = [0] * 6
    for name in chosen:
        row = rows.get(name)
        if row is None:
            print(f"{name:<22} (not finished)")
            continue
        numbers = [int(x) for x in row[:6]]
        totals = [a + b for a, b in zip(totals, numbers, strict=True)]
        print(
            f"{name:<22} {numbers[0]:>9} {numbers[1]:>9} {numbers[2]:>9} {numbers[3]:>9} "
            f"{numbers[4]:>7} {numbers[5]:>10} {row[6]:>8}"
        )
    print(
        f"{'total':<22} {totals[0]:>9} {totals[1]:>9} {totals[2]:>9} {totals[3]:>9} "
        f"{totals[4]:>7} {totals[5]:>10} {seconds:>8.1f}"
    )
    ok = status == 0 and totals[5] == 0 and len(rows) == len(chosen)
    print(f"{totals[0]} inputs, {totals[5]} mismatches, in {seconds:.0f} s")
    # the closing line CI reads: inputs that agreed, inputs that did not (or the crash)
    failed = totals[5] + (status == 2)
    print(f"fuzz_kernels: {totals[0] - totals[5]} passed, {failed} failed")
    return 0 if ok else (status or 1)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--inputs", type=int, default=1_000_000, help="in all (1,000,000)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"({DEFAULT_SEED})")
    parser.add_argument(
        "--kernel", action="append", help="a kernel to fuzz (repeatable; default: all)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="processes (1)")
    parser.add_argument(
        "--max-failures", type=int, default=5, help="mismatches printed per kernel (5)"
    )
    parser.add_argument("--replay", nargs=2, metavar=("KERNEL", "HEX"), help="run one case")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--last-case", help=argparse.SUPPRESS)
    parser.add_argument(
        "--share",
        nargs=2,
        action="append",
        default=[],
        metavar=("KERNEL", "N"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args()
    if args.replay:
        return _replay(*args.replay)
    if args.worker:
        args.share = [(name, int(n)) for name, n in args.share]
        return _worker(args)
    return _parent(args)


if __name__ == "__main__":
    sys.exit(main())
