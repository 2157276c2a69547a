"""The evidence evaluator on the C accelerator, whose per-trace state is an `EvidenceCore` fed
whole spans (`feed_span`) and summarized at the end (`summary`), against its Python path (the
`EvidenceIndex` loop of `on_span`, `_streamed_survival`): the same per-span results and trace
results, span after span, for texts of the tokenizer's ASCII path and for the others (which the
core reads through the `TextCache`), with spans in canonical order or not. Plus: the core path
is the one taken, and its entry points leave nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from _leaks import assert_leak_free, expecting
from _native import native_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import _wire
from tracehound.conventions.base import Document
from tracehound.evaluators import _evidence_index, evidence
from tracehound.evaluators.evidence import EvidenceEvaluator, _State
from tracehound.steps import Run, Step, Trajectory
from tracehound.text import TextCache

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NATIVE = _wire._native

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
    """Each span's results, the trace results (as reprs), and whether the core was used."""
    with accelerator(native):
        evaluator = EvidenceEvaluator()
        state = evaluator.start_trace(SimpleNamespace(texts=TextCache()))  # type: ignore[arg-type]
        per_span = []
        for operation, span in spans:
            view = SimpleNamespace(operation=operation, span_id=span[0].span_id)
            results = evaluator.on_span(state, view, span, None)  # type: ignore[arg-type]
            per_span.append([repr(r) for r in results])
        trace = [repr(r) for r in evaluator.finish_trace(state, trajectory, None)]  # type: ignore[arg-type]
        return per_span, trace, state.core is not None


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


def test_the_core_path_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the accelerator, spans in canonical order need neither the Python index nor a
    fresh analysis."""

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the Python path was taken")

    monkeypatch.setattr(_evidence_index.EvidenceIndex, "add_source", refused)
    monkeypatch.setattr(_evidence_index.EvidenceIndex, "match_output", refused)
    monkeypatch.setattr(evidence, "_fresh_survival", refused)
    monkeypatch.setattr(evidence.Trajectory, "final_answer", refused)
    monkeypatch.setattr(EvidenceEvaluator, "_reuse_result", refused)  # (made by the span hook)
    steps = [
        Step(kind="tool_result", span_id="a", start_ns=0, end_ns=0, run_id="r", text="Alpha beta."),
        Step(kind="assistant", span_id="b", start_ns=0, end_ns=0, run_id="r", text="alpha beta"),
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
    per_span, trace, used = evaluate(
        Trajectory("t", tuple(steps), (run,), ()),
        [("tool", steps[:1]), ("llm", steps[1:])],
        native=True,
    )
    assert used
    assert per_span[1] and "reuses_evidence" in per_span[1][0]
    assert "1 of 1 evidence units reused" in trace[0]


_STEPS = [
    Step(kind="tool_result", span_id="a", start_ns=0, end_ns=0, text="Alpha beta. Gamma delta."),
    Step(kind="tool_result", span_id="a", start_ns=0, end_ns=0, text="Caf\u00e9 na\u00efve."),
    Step(
        kind="retrieval",
        span_id="b",
        start_ns=0,
        end_ns=0,
        source="kb",
        documents=(Document(content="Zeta eta theta."), Document(id="d", content="")),
    ),
    Step(kind="assistant", span_id="c", start_ns=0, end_ns=0, text="alpha beta zeta eta"),
    Step(kind="reasoning", span_id="c", start_ns=0, end_ns=0, text="caf\u00e9 na\u00efve"),
]
_TRAJECTORY = Trajectory("t", tuple(_STEPS), (), ())
_ANSWERED = Trajectory(
    "t",
    tuple(_STEPS),
    (
        Run(
            run_id="",
            agent_name="a",
            span_id="a",
            parent_run_id=None,
            start_ns=0,
            end_ns=1,
            depth=0,
        ),
    ),
    (),
)
_CACHE = TextCache()


def _trace() -> None:
    core = _State(_CACHE).core
    assert core is not None
    core.feed_span(_STEPS[:3], _CACHE)
    core.feed_span(_STEPS[3:], _CACHE)
    core.summary(_TRAJECTORY.steps, "the answer", _CACHE)
    core.summary(_STEPS[:1], None, _CACHE)  # not what was fed: None
    core.summary_of(_ANSWERED, _CACHE)
    NATIVE.final_answer(_ANSWERED)
    NATIVE.final_answer(_TRAJECTORY)


def test_feed_span_and_summary_leave_nothing_behind() -> None:
    _trace()  # (the cache filled)
    core = _State(_CACHE).core
    assert core is not None

    def bad_calls() -> None:
        expecting(lambda: core.feed_span([object()], _CACHE), AttributeError)()
        expecting(lambda: core.feed_span(1, _CACHE), TypeError)()  # type: ignore[arg-type]
        expecting(lambda: core.summary(_STEPS, None), TypeError)()  # type: ignore[call-arg]
        expecting(lambda: core.summary_of(_STEPS, _CACHE), AttributeError)()
        expecting(lambda: NATIVE.final_answer(Trajectory("t", 1, (), ())), TypeError)()  # type: ignore[arg-type]

    assert_leak_free(_trace, [*_STEPS, _CACHE], 20_000)
    assert_leak_free(bad_calls, [*_STEPS, _CACHE], 20_000)


RUN_IDS = ["r", "s", "t", ""]


@st.composite
def answered(draw: st.DrawFn) -> Trajectory:
    """Trajectories of nested runs (parents first, some runs under none of the others) whose
    steps belong to any run, or to none."""
    runs = []
    for k, run_id in enumerate(draw(st.lists(st.sampled_from(RUN_IDS), max_size=4))):
        parent = draw(st.sampled_from([None, *RUN_IDS[:k], "elsewhere"]))
        runs.append(
            Run(
                run_id=run_id,
                agent_name="agent",
                span_id="s",
                parent_run_id=parent,
                start_ns=0,
                end_ns=1,
                depth=0,
                declared_output=draw(st.sampled_from([None, "", "declared"])),
                implicit=draw(st.booleans()),
            )
        )
    steps = tuple(
        Step(
            kind=draw(st.sampled_from(["assistant", "assistant", "reasoning", "user"])),
            span_id="s",
            start_ns=0,
            end_ns=0,
            run_id=draw(st.sampled_from(RUN_IDS)),
            text=draw(st.sampled_from([None, "", "one", "two", "three"])),
        )
        for _ in range(draw(st.integers(0, 8)))
    )
    return Trajectory("t", steps, tuple(runs), ())


@SETTINGS
@given(answered())
def test_the_final_answer_is_the_trajectorys(trajectory: Trajectory) -> None:
    """`summary_of` finds the final answer itself: that of `Trajectory.final_answer`."""
    assert NATIVE.final_answer(trajectory) == trajectory.final_answer()


def test_the_span_hook_is_the_evaluators_own() -> None:
    """With the accelerator, an evaluator's `on_span` is the C hook (the engine calls it as the
    instance's own); a subclass that has its own `on_span` keeps it."""

    class Mine(EvidenceEvaluator):
        def on_span(self, *args: Any) -> Any:
            return ()

    assert type(EvidenceEvaluator().on_span) is NATIVE.EvidenceSpanHook
    assert Mine().on_span() == ()
    with accelerator(False):
        assert not isinstance(EvidenceEvaluator().on_span, NATIVE.EvidenceSpanHook)


def test_the_span_hook_calls_the_python_method_for_states_without_a_core() -> None:
    evaluator = EvidenceEvaluator()  # (its hook made with the accelerator on)
    with accelerator(False):
        state = evaluator.start_trace(SimpleNamespace(texts=TextCache()))  # type: ignore[arg-type]
    assert state.core is None
    view = SimpleNamespace(operation="llm", span_id="b")
    results = evaluator.on_span(state, view, _STEPS, None)  # type: ignore[arg-type]
    assert len(results) == 1 and results[0].score_label == "reuses_evidence"


def _hook_calls() -> None:
    evaluator = EvidenceEvaluator()
    state = evaluator.start_trace(SimpleNamespace(texts=_CACHE))  # type: ignore[arg-type]
    for operation in ("llm", "tool"):
        view = SimpleNamespace(operation=operation, span_id="s")
        evaluator.on_span(state, view, _STEPS[:3], None)  # type: ignore[arg-type]
        evaluator.on_span(state, view, _STEPS[3:], None)  # type: ignore[arg-type]


def test_the_span_hook_leaves_nothing_behind() -> None:
    _hook_calls()
    hook = EvidenceEvaluator().on_span
    state = _State(_CACHE)
    view = SimpleNamespace(operation="llm", span_id="s")

    def bad_calls() -> None:
        expecting(lambda: hook(state, view, 1, None), TypeError)()  # type: ignore[arg-type]
        expecting(lambda: hook(object(), view, _STEPS, None), AttributeError)()  # type: ignore[arg-type]
        expecting(lambda: hook(state, object(), _STEPS[3:], None), AttributeError)()  # type: ignore[arg-type]
        expecting(lambda: NATIVE.EvidenceSpanHook(1), TypeError)()

    assert_leak_free(_hook_calls, [*_STEPS, _CACHE], 20_000)
    assert_leak_free(bad_calls, [*_STEPS, _CACHE], 20_000)
