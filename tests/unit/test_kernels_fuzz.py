"""The C kernels that read client bytes against their Python references on fuzzed inputs: a
short, seeded run of `scripts/fuzz_kernels.py`'s generators and checks (`_kernel_fuzz`), which
must find no mismatch. The full run (1,000,000 inputs) is `scripts/fuzz_kernels.py`; the
sanitizer build runs this file too (`scripts/sanitize`).

With TRACEHOUND_PURE_PYTHON=1 (or without the C build) the comparisons are skipped; the
references still run over the same inputs, with their own invariants (see `_kernel_fuzz`).
`TRACEHOUND_FUZZ_INPUTS` sets the inputs per kernel (default 4,000: 20,000 in all).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import _kernel_fuzz as kf
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

SEED = 16
INPUTS = int(os.environ.get("TRACEHOUND_FUZZ_INPUTS", "4000"))
NATIVE = kf.native_module()
needs_c = pytest.mark.skipif(
    NATIVE is None,
    reason="the C accelerator is off (TRACEHOUND_PURE_PYTHON=1) or not built: no C answer to "
    "compare with the reference",
)
ROOT = Path(__file__).resolve().parents[2]


def _report(failures: list[kf.Failure]) -> str:
    replay = "scripts/fuzz_kernels.py --replay"
    return "\n".join(
        f"{f.error}\n  reproducer: {replay} {f.kernel} {f.case.hex()[:4000]}" for f in failures
    )


@needs_c
@pytest.mark.parametrize("kernel", list(kf.KERNELS))
def test_c_answers_equal_the_reference(kernel: str) -> None:
    failures: list[kf.Failure] = []
    counts = kf.run_kernel(kernel, INPUTS, SEED, NATIVE, failures=failures)
    assert counts.mismatches == 0, _report(failures)
    assert counts.inputs == INPUTS
    # the inputs reach both sides: the C answers often, and declines often
    assert counts.answered - counts.unchecked > INPUTS // 5
    assert counts.declined > INPUTS // 20


@pytest.mark.parametrize("kernel", list(kf.KERNELS))
def test_references_run_on_the_fuzzed_inputs(kernel: str) -> None:
    """The Python side alone (what the callers do where the C declines), with its invariants:
    no exception but the expected ones."""
    failures: list[kf.Failure] = []
    counts = kf.run_kernel(kernel, INPUTS // 4, SEED, None, failures=failures)
    assert counts.mismatches == 0, _report(failures)


def test_cases_depend_on_the_seed_and_kernel_only() -> None:
    for name, kernel in kf.KERNELS.items():
        rng_a, rng_b = random.Random(f"{SEED}:{name}"), random.Random(f"{SEED}:{name}")
        a = [kernel.generate(rng_a, []) for _ in range(30)]
        b = [kernel.generate(rng_b, []) for _ in range(30)]
        assert a == b
        assert len(set(a)) > 10


def test_structural_mutations_rewrite_the_enclosing_lengths() -> None:
    """Replacing a field anywhere by a well-formed field leaves a request upb parses."""
    rng = random.Random(SEED)
    descriptor = ExportTraceServiceRequest.DESCRIPTOR
    for data in kf.seeds().requests[:40]:
        for _ in range(5):
            picked = kf.pick_field(rng, data, descriptor)
            assert picked is not None
            ancestors, siblings, i = picked
            node = siblings[i]
            same = kf.rebuild(data, ancestors, node.start, node.end, data[node.start : node.end])
            assert same == data
            grown = kf.rebuild(data, ancestors, node.start, node.end, kf.ld(9999, b"x" * 300))
            ExportTraceServiceRequest.FromString(grown)  # lengths all rewritten
            assert kf.ld(9999, b"x" * 300) in grown


def test_seeds_are_what_upb_writes() -> None:
    s = kf.seeds()
    assert len(s.requests) > 50 and s.full_requests
    for data in s.requests + s.full_requests:
        assert ExportTraceServiceRequest.FromString(data).SerializeToString() == data
    assert all(s.messages[number] for number in kf.ATTRIBUTE_MESSAGES)


@needs_c
def test_driver_runs_and_replays() -> None:
    """`scripts/fuzz_kernels.py` end to end on a few inputs: the table, exit status 0, and a
    case replayed."""
    command = [sys.executable, str(ROOT / "scripts" / "fuzz_kernels.py")]
    run = subprocess.run(
        [
            *command,
            "--inputs",
            "300",
            "--kernel",
            "decode_key_values",
            "--kernel",
            "scan_trace_request",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "300 inputs, 0 mismatches" in run.stdout
    assert "decode_key_values" in run.stdout and "scan_trace_request" in run.stdout
    case = kf.KERNELS["decode_key_values"].generate(random.Random(1), [])
    replay = subprocess.run(
        [*command, "--replay", "decode_key_values", case.hex()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "ok: " in replay.stdout
