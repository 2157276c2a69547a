"""The package's public surface: `from tracehound import …` for everything a newcomer needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tracehound

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_all_names_resolve() -> None:
    for name in tracehound.__all__:
        assert getattr(tracehound, name) is not None, name
    assert set(tracehound.__all__) <= set(dir(tracehound))


def test_lazy_names_are_the_submodule_objects() -> None:
    from tracehound.evaluators.drift import DriftEvaluator
    from tracehound.evaluators.evidence import EvidenceEvaluator
    from tracehound.evaluators.loops import LoopConfig, LoopEvaluator
    from tracehound.processor import TracehoundSpanProcessor

    assert tracehound.TracehoundSpanProcessor is TracehoundSpanProcessor
    assert tracehound.EvidenceEvaluator is EvidenceEvaluator
    assert tracehound.LoopEvaluator is LoopEvaluator
    assert tracehound.LoopConfig is LoopConfig
    assert tracehound.DriftEvaluator is DriftEvaluator


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        tracehound.Nope  # noqa: B018


def test_import_stays_cheap() -> None:
    """`import tracehound` loads neither the OTel SDK's tracing nor the processor."""
    code = (
        "import sys, tracehound; "
        "print(sorted(m for m in ('tracehound.processor', 'opentelemetry.sdk.trace', "
        "'tracehound.evaluators.drift') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
