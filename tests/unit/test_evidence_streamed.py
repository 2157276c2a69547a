"""The evidence evaluator's trace results come from the index it built as spans arrived
(`_streamed_survival`) when that index saw the canonical sequence; they must equal those of a
fresh analysis of the canonical trajectory (`trajectory_items`, `analyze_items`, `summarize`),
which is also the path taken when spans arrived in another order. Both ways, with the C
accelerator on and off. The per-tool and per-source totals are written as `json.dumps` writes
them.
"""

from __future__ import annotations

import json
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
from tracehound.evaluators import evidence
from tracehound.evaluators._evidence_index import analyze_items, summarize
from tracehound.evaluators.evidence import (
    EvidenceEvaluator,
    _compact_totals,
    _State,
    _streamed_survival,
    _Survival,
    _totals_json,
    trajectory_items,
)
from tracehound.steps import Run, Step, Trajectory
from tracehound.text import TextCache

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NATIVE = _accel._in_use


@contextmanager
def accelerator(on: bool) -> Iterator[None]:
    if on and NATIVE is None:
        pytest.skip("the C accelerator is off (TRACEHOUND_PURE_PYTHON=1 or not built)")
    with native_module(NATIVE if on else None):
        yield


WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "GPT-5", "the", "of", "is"]
BREAKS = [". ", "! ", "\n\n", " "]
TEXT = st.lists(st.sampled_from(WORDS + BREAKS), max_size=14).map("".join)


@st.composite
def trajectories(draw: st.DrawFn) -> tuple[Trajectory, list[list[Step]]]:
    """A trajectory of one run, and its steps cut into spans (in canonical order)."""
    pool: list[str] = []

    def text() -> str:
        if pool and draw(st.booleans()):
            return draw(st.sampled_from(pool))  # the same text again: repeats, the answer
        made = draw(TEXT)
        pool.append(made)
        return made

    spans: list[list[Step]] = []
    for s in range(draw(st.integers(0, 7))):
        span: list[Step] = []
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(
                st.sampled_from(
                    ["tool_result", "retrieval", "assistant", "assistant", "reasoning", "user"]
                )
            )
            fields: dict[str, Any] = {}
            if kind == "retrieval":
                fields["source"] = draw(st.sampled_from([None, "kb", "web"]))
                fields["documents"] = tuple(
                    Document(
                        id=draw(st.sampled_from([None, "d1", "d2"])),
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
                fields["tool"] = draw(st.sampled_from([None, "search", "fetch"]))
                fields["call_id"] = draw(st.sampled_from([None, "c1", "c2", f"c{s}"]))
            span.append(
                Step(kind=kind, span_id=f"s{s}", start_ns=0, end_ns=0, run_id="r", **fields)
            )
        spans.append(span)
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
    steps = tuple(step for span in spans for step in span)
    return Trajectory("t", steps, runs, ()), spans


def fed(spans: list[list[Step]]) -> _State:
    state = EvidenceEvaluator().start_trace(SimpleNamespace(texts=TextCache()))  # type: ignore[arg-type]
    for span in spans:
        view = SimpleNamespace(operation="llm", span_id=span[0].span_id)
        EvidenceEvaluator().on_span(state, view, span, None)  # type: ignore[arg-type]
    return state


def reference(trajectory: Trajectory) -> _Survival:
    items, keys, final = trajectory_items(trajectory)
    return _Survival.of_report(summarize(analyze_items(items, final, TextCache()), keys))


def results(state: _State, trajectory: Trajectory) -> list[str]:
    return [repr(r) for r in EvidenceEvaluator().finish_trace(state, trajectory, None)]  # type: ignore[arg-type]


@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
@SETTINGS
@given(trajectories(), st.randoms(use_true_random=False))
def test_streamed_equals_a_fresh_analysis(
    native: bool, case: tuple[Trajectory, list[list[Step]]], rng: Any
) -> None:
    trajectory, spans = case
    with accelerator(native):
        expected = reference(trajectory)
        # in canonical order the streamed index is always the one used
        streamed = _streamed_survival(fed(spans), trajectory)
        assert streamed == expected
        # in another order: used only when the evidence and targets came in the same order
        shuffled = list(spans)
        rng.shuffle(shuffled)
        streamed = _streamed_survival(fed(shuffled), trajectory)
        assert streamed is None or streamed == expected
        # and the evaluator's results, either way: those of the fresh analysis
        fresh = EvidenceEvaluator()._trace_results(expected)
        assert results(fed(shuffled), trajectory) == [repr(r) for r in fresh]
        assert results(fed(spans), trajectory) == [repr(r) for r in fresh]


def test_the_streamed_index_is_used_and_refused() -> None:
    """Spans in canonical order: the streamed index answers (no fresh analysis); evidence fed
    in another order: it does not."""
    steps = [
        Step(kind="tool_result", span_id="a", start_ns=0, end_ns=0, run_id="r", text="Alpha beta."),
        Step(
            kind="tool_result", span_id="b", start_ns=0, end_ns=0, run_id="r", text="Gamma delta."
        ),
        Step(kind="assistant", span_id="c", start_ns=0, end_ns=0, run_id="r", text="alpha beta"),
    ]
    run = Run(
        run_id="r",
        agent_name="agent",
        span_id="a",
        parent_run_id=None,
        start_ns=0,
        end_ns=1,
        depth=0,
    )
    trajectory = Trajectory("t", tuple(steps), (run,), ())
    spans = [[step] for step in steps]
    survival = _streamed_survival(fed(spans), trajectory)
    assert survival is not None and (survival.units, survival.reused, survival.final_reused) == (
        2,
        1,
        1,
    )
    assert survival.unused == ["b#1"]
    assert _streamed_survival(fed([spans[1], spans[0], spans[2]]), trajectory) is None


@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
def test_results_of_the_same_text_from_two_tools_keep_their_tools(native: bool) -> None:
    """The same text returned by a tool and then by `search`, each after an answer quoting it:
    the answer of the first span reuses the first result. Fed in the other span order, the
    sequence of texts is the same, so the streamed index answers; the reuse must still be
    counted for the first result's tool, not for `search`."""

    def step(kind: str, span: str, text: str, tool: str | None = None) -> Step:
        return Step(kind=kind, span_id=span, start_ns=0, end_ns=0, run_id="r", text=text, tool=tool)

    spans = [
        [step("assistant", "s0", "alpha alpha"), step("tool_result", "s0", "alpha alpha")],
        [
            step("assistant", "s1", "alpha alpha"),
            step("tool_result", "s1", "alpha alpha", "search"),
        ],
    ]
    trajectory = Trajectory("t", tuple(s for span in spans for s in span), (), ())
    with accelerator(native):
        expected = reference(trajectory)
        assert expected.tools["search"]["reused"] == 0
        for order in (spans, spans[::-1]):
            assert _streamed_survival(fed(order), trajectory) in (None, expected)


TOTALS = st.dictionaries(
    st.text(max_size=12),
    st.builds(
        _compact_totals,
        st.integers(0, 10**6),
        st.integers(0, 10**6),
        st.integers(0, 10**6),
        st.integers(0, 10**6),
    ),
    max_size=5,
)


@SETTINGS
@given(TOTALS)
def test_totals_json_is_json_dumps(totals: dict[str, dict[str, Any]]) -> None:
    assert _totals_json(totals) == json.dumps(totals, sort_keys=True)


def test_totals_json_of_awkward_names() -> None:
    totals = {
        name: _compact_totals(3, 7, 2, 1)
        for name in ["", 'say "hi"', "back\\slash", "\n\t\x00", "caf\u00e9", "\U0001f600", "z", "A"]
    }
    assert _totals_json(totals) == json.dumps(totals, sort_keys=True)
    assert _totals_json({}) == "{}"


@SETTINGS
@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_kept_formatting_is_the_formatting(part: int, whole: int) -> None:
    """Ratios and percentages come from small tables: the same values as formatted each time."""
    ratio = part / whole if whole else 0.0
    for _ in range(2):  # made, then read from the table
        rounded = evidence._rounded_ratio(part, whole)
        assert repr(rounded) == repr(round(ratio, 4))
        assert evidence._percent(ratio) == f"{ratio:.0%}"


def test_the_formatting_tables_stay_small() -> None:
    size = evidence._MEMO_SIZE
    for k in range(size + 10):
        assert evidence._rounded_ratio(k, 10**7) == round(k / 10**7, 4)
        assert evidence._percent(k / 10**7) == f"{k / 10**7:.0%}"
        evidence._totals_json({"t": _compact_totals(1, k + 1, 0, 0)})
    assert 0 < len(evidence._ROUNDED) <= size
    assert 0 < len(evidence._PERCENT) <= size
    assert 0 < len(evidence._ENTRIES) <= size
