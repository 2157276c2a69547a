"""A plugin evaluator that hangs or raises is isolated: `BudgetedEvaluator` runs its hooks on a
thread of its own within a time budget; a call over budget is that trace's error result and
disables the plugin, so later traces never wait for it. The other evaluators are unaffected."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_engine import ROOT, Recorder, _install_plugin, app_root, chat

from tracehound import Engine, EvaluationResult, Evaluator, TraceInfo
from tracehound.conventions import NormalizedSpan
from tracehound.evaluators.base import (
    PLUGIN_TIME_BUDGET,
    BudgetedEvaluator,
    EvaluatorTimeout,
    load_plugins,
)
from tracehound.spans import SpanView
from tracehound.steps import Step, Trajectory

TRACE2 = "1bf7651916cd43dd8448eb211c80319d"


class Hanging(Evaluator):
    """Blocks in `on_span` until released (a plugin stuck on a network call, say)."""

    name = "hanging"
    version = "0.1"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        self.calls += 1
        self.release.wait(60)
        return ()


class Raising(Evaluator):
    name = "raising"
    version = "0.1"

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        raise SystemExit(3)  # even this must not end the engine's thread


@pytest.fixture
def hanging() -> Iterator[Hanging]:
    plugin = Hanging()
    yield plugin
    plugin.release.set()  # let its thread finish


def on_trace2(view: SpanView) -> SpanView:
    view.trace_id = TRACE2
    return view


def test_a_hanging_plugin_costs_one_budget_then_is_skipped(hanging: Hanging) -> None:
    budgeted = BudgetedEvaluator(hanging, budget=0.3)
    recorder = Recorder()
    engine = Engine([budgeted, recorder])
    engine.add_span(app_root())
    started = time.monotonic()
    outcome = engine.add_span(chat("b" * 16, ROOT, 100, "hi", "hello"))
    first = time.monotonic() - started
    assert 0.25 <= first < 3
    assert [(r.evaluator, r.error_type) for r in outcome.results if r.error_type] == [
        ("hanging", "EvaluatorTimeout")
    ]
    assert [r.name for r in outcome.results if r.evaluator == "recorder"] == ["seen"]
    assert budgeted.disabled and budgeted.timeouts == 1
    # A new trace: the plugin is disabled, nothing waits for it.
    started = time.monotonic()
    engine.add_span(on_trace2(app_root()))
    later = engine.add_span(on_trace2(chat("c" * 16, ROOT, 100, "again", "sure")))
    assert time.monotonic() - started < 0.2
    assert [r.name for r in later.results if r.evaluator == "recorder"] == ["seen"]
    assert hanging.calls == 1
    done = engine.flush()
    assert len(done) == 2
    for trace in done:
        assert {r.evaluator for r in trace.results} == {"hanging", "recorder"}
        assert all(r.error_type for r in trace.results if r.evaluator == "hanging")
    assert engine.stats.evaluator_errors >= 2


def test_a_raising_plugin_is_an_error_result_and_stays_enabled() -> None:
    budgeted = BudgetedEvaluator(Raising(), budget=2.0)
    engine = Engine([budgeted, Recorder()])
    for trace_id in (None, TRACE2):
        root, call = app_root(), chat("b" * 16, ROOT, 100, "hi", "hello")
        if trace_id:
            root, call = on_trace2(root), on_trace2(call)
        engine.add_span(root)
        engine.add_span(call)
    done = engine.flush()
    assert len(done) == 2
    for trace in done:
        errors = [(r.evaluator, r.error_type) for r in trace.results if r.error_type]
        assert errors == [("raising", "RuntimeError")]
        assert any(r.name == "steps" for r in trace.results)
    assert not budgeted.disabled and budgeted.timeouts == 0


def test_plugins_without_a_span_hook_are_still_skipped_per_span() -> None:
    budgeted = BudgetedEvaluator(Raising())
    assert "on_span" not in vars(budgeted)  # the engine reads this to skip the hook
    assert "on_span" in vars(BudgetedEvaluator(Hanging()))


def test_load_plugins_wraps_every_plugin_in_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_plugin(tmp_path, monkeypatch, "good = thplugin:Good")
    [wrapped] = load_plugins(["good"])
    assert isinstance(wrapped, BudgetedEvaluator)
    assert wrapped.budget == PLUGIN_TIME_BUDGET
    assert (wrapped.name, wrapped.version) == ("good", "2.0")
    [plain] = load_plugins(["good"], budget=None)
    assert not isinstance(plain, BudgetedEvaluator)


def test_a_disabled_plugin_raises_at_once() -> None:
    plugin = Hanging()
    try:
        budgeted = BudgetedEvaluator(plugin, budget=0.05)
        with pytest.raises(EvaluatorTimeout, match="took over"):
            budgeted.on_span(None, None, (), None)  # type: ignore[arg-type]
        started = time.monotonic()
        with pytest.raises(EvaluatorTimeout, match="disabled"):
            budgeted.start_trace(None)  # type: ignore[arg-type]
        assert time.monotonic() - started < 0.05
    finally:
        plugin.release.set()
