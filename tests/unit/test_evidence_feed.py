"""The evidence evaluator with its index's state in the C accelerator's `EvidenceCore` and
without it: the same per-span results and trace results, span after span, for texts of the
tokenizer's ASCII path and for the others (which the index reads through the `TextCache`), with
spans in canonical order or not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from _native import native_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import _accel
from tracehound.conventions.base import Document
from tracehound.evaluators.evidence import EvidenceEvaluator
from tracehound.steps import Run, Step, Trajectory
from tracehound.text import TextCache

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NATIVE = _accel._in_use

pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="the C accelerator is off (TRACEHOUND_PURE_PYTHON=1 or not built)"
)


@contextmanager
def accelerator(on: bool) -> Iterator[None]:
    with native_module(NATIVE if on else None):
        yield


# ASCII words, typographic punctuation (still the ASCII path), and words off it: accents, a
# ligature NFKC splits, Greek (a final sigma), a character above U+FFFF.
WORDS = ["alpha", "beta", "Gamma", "delta", "GPT-5", "3.14", "the", "of", "is", "zeta"]
OTHER = ["caf\u00e9", "na\u00efve", "\ufb01ne", "\u03a3\u03af\u03c3\u03c5\u03c6\u03bf\u03c2"]
OTHER += ["\U0001f600ok", "\u201cquoted\u201d", "a\u2014b"]
BREAKS = [". ", "! ", "\n\n", " ", "\u2026 "]
TEXT = st.lists(st.sampled_from(WORDS + WORDS + OTHER + BREAKS), max_size=16).map("".join)
KINDS = ["tool_result", "retrieval", "assistant", "assistant", "reasoning", "user", "tool_call"]


@st.composite
def traces(draw: st.DrawFn) -> tuple[Trajectory, list[tuple[str, list[Step]]]]:
    """A trajectory of one run, and its steps cut into spans (with their operations), in
    canonical order."""
    pool: list[str] = []

    def text() -> str:
        if pool and draw(st.booleans()):
            return draw(st.sampled_from(pool))  # the same text again: repeats, the answer
        made = draw(TEXT)
        pool.append(made)
        return made

    spans: list[tuple[str, list[Step]]] = []
    for s in range(draw(st.integers(0, 7))):
        span: list[Step] = []
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(KINDS))
            fields: dict[str, Any] = {}
            if kind == "retrieval":
                fields["source"] = draw(st.sampled_from([None, "", "kb", "web"]))
                fields["documents"] = tuple(
                    Document(
                        id=draw(st.sampled_from([None, "", "d1", "d2"])),
                        content=draw(st.sampled_from([None, ""]))
                        if draw(st.booleans())
                        else text(),
                    )
                    for _ in range(draw(st.integers(0, 3)))
                )
            else:
                fields["text"] = (
                    draw(st.sampled_from([None, ""])) if draw(st.booleans()) else text()
                )
            if kind == "tool_result":
                fields["tool"] = draw(st.sampled_from([None, "", "search", "fetch"]))
                fields["call_id"] = draw(st.sampled_from([None, "", "c1", f"c{s}"]))
            span.append(
                Step(kind=kind, span_id=f"s{s}", start_ns=0, end_ns=0, run_id="r", **fields)
            )
        spans.append((draw(st.sampled_from(["llm", "llm", "tool", "agent"])), span))
    declared = draw(st.one_of(st.none(), st.just(""), st.sampled_from(pool) if pool else TEXT))
    run = Run(
        run_id="r",
        agent_name="agent",
        span_id="s0",
        parent_run_id=None,
        start_ns=0,
        end_ns=1,
        depth=0,
        declared_output=declared,
        implicit=draw(st.booleans()),
    )
    runs = (run,) if draw(st.integers(0, 5)) else ()
    steps = tuple(step for _, span in spans for step in span)
    return Trajectory("t", steps, runs, ()), spans


def evaluate(
    trajectory: Trajectory, spans: list[tuple[str, list[Step]]], *, native: bool
) -> tuple[list[list[str]], list[str], bool]:
    """Each span's results, the trace results (as reprs), and whether the index had a core."""
    with accelerator(native):
        evaluator = EvidenceEvaluator()
        state = evaluator.start_trace(SimpleNamespace(texts=TextCache()))  # type: ignore[arg-type]
        per_span = []
        for operation, span in spans:
            view = SimpleNamespace(operation=operation, span_id=span[0].span_id)
            results = evaluator.on_span(state, view, span, None)  # type: ignore[arg-type]
            per_span.append([repr(r) for r in results])
        trace = [repr(r) for r in evaluator.finish_trace(state, trajectory, None)]  # type: ignore[arg-type]
        return per_span, trace, state.index._core is not None


@SETTINGS
@given(traces(), st.randoms(use_true_random=False))
def test_the_core_gives_the_python_results(
    case: tuple[Trajectory, list[tuple[str, list[Step]]]], rng: Any
) -> None:
    trajectory, spans = case
    mine = evaluate(trajectory, spans, native=True)
    reference = evaluate(trajectory, spans, native=False)
    assert mine[2] and not reference[2]
    assert mine[:2] == reference[:2]
    shuffled = list(spans)
    rng.shuffle(shuffled)
    assert (
        evaluate(trajectory, shuffled, native=True)[:2]
        == evaluate(trajectory, shuffled, native=False)[:2]
    )
