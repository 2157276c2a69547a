"""The `drift` evaluator in the engine: one observation per run, keys, update policy, results."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from _drift_scenarios import AGENT, SCENARIOS, SERVICE, RunSpec, otlp_document, span_views

from tracehound import Engine, EngineConfig
from tracehound import names as N
from tracehound.baselines import MemoryStore
from tracehound.drift import HashingEmbedder
from tracehound.evaluators.base import EvaluationResult, TraceInfo
from tracehound.evaluators.drift import DriftEvaluator, DriftEvaluatorConfig
from tracehound.spans import SpanView
from tracehound.steps import Run

SPEC = SCENARIOS["control"]().runs[0]
KEY = f"{SERVICE}/{AGENT}"


def evaluate(engine: Engine, views: list[SpanView]) -> list[EvaluationResult]:
    for view in views:
        engine.add_span(view)
    (finalized,) = engine.flush()
    return [r for r in finalized.results if r.name == N.EVAL_DRIFT]


def trace(index: int, spec: RunSpec = SPEC, **kw: Any) -> list[SpanView]:
    return span_views(otlp_document(spec, index, random.Random(index), scenario="evaluator", **kw))


def test_agent_run_result_annotates_the_agent_span() -> None:
    store = MemoryStore()
    engine = Engine([DriftEvaluator(store)])
    views = trace(0)
    (first,) = evaluate(engine, views)
    agent_span = next(v.span_id for v in views if v.name.startswith("invoke_agent"))
    assert (
        first.span_id == agent_span
        and first.evaluator == "drift"
        and first.evaluator_version == "2.0.0"
    )
    assert first.score_value is None and first.score_label == "initializing"
    assert first.attributes == {
        N.ATTR_DRIFT_AGENT: KEY,
        N.ATTR_DRIFT_CONFIDENCE: "initializing",
        N.ATTR_DRIFT_BASELINE_RUNS: 0,
        N.ATTR_DRIFT_BASELINE_UPDATED: True,
        N.ATTR_DRIFT_BASELINE_PINNED: False,
    }
    assert "no baseline yet" in (first.explanation or "")
    (second,) = evaluate(engine, trace(1))
    attrs = second.attributes
    assert (
        second.score_value == attrs[N.ATTR_DRIFT_SCORE]
        and second.score_label == attrs[N.ATTR_DRIFT_SEVERITY]
    )
    assert (
        attrs[N.ATTR_DRIFT_BASELINE_RUNS] == 1 and attrs[N.ATTR_DRIFT_CONFIDENCE] == "initializing"
    )
    assert attrs[N.ATTR_DRIFT_PRIMARY_DRIVER] in N.DRIFT_DRIVERS
    for name in (
        N.ATTR_DRIFT_TOOL_MIX,
        N.ATTR_DRIFT_SEMANTIC,
        N.ATTR_DRIFT_COMPLEXITY,
        N.ATTR_DRIFT_SEMANTIC_DISTANCE,
    ):
        assert 0.0 <= attrs[name] <= 1.0  # type: ignore[operator]
    assert (second.explanation or "").startswith(f"drift {second.score_value:.2f} (")
    info = store.list()
    assert [(i.key, i.runs) for i in info] == [(KEY, 2)]


ANSWER_MESSAGES = json.dumps(
    [{"role": "assistant", "parts": [{"type": "text", "content": "Paris."}]}]
)


def _chat_only_trace(trace_id: str, root_name: str) -> list[SpanView]:
    doc = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": "a" * 16,
                                "name": root_name,
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "100",
                            },
                            {
                                "traceId": trace_id,
                                "spanId": "b" * 16,
                                "parentSpanId": "a" * 16,
                                "name": "chat m",
                                "startTimeUnixNano": "10",
                                "endTimeUnixNano": "90",
                                "attributes": [
                                    {
                                        "key": "gen_ai.operation.name",
                                        "value": {"stringValue": "chat"},
                                    },
                                    {
                                        "key": "gen_ai.provider.name",
                                        "value": {"stringValue": "openai"},
                                    },
                                    {
                                        "key": "gen_ai.output.messages",
                                        "value": {"stringValue": ANSWER_MESSAGES},
                                    },
                                ],
                            },
                        ]
                    }
                ],
            }
        ]
    }
    return span_views(doc)


def test_trace_without_agent_span_is_one_run_keyed_by_the_root_span_name() -> None:
    store = MemoryStore()
    engine = Engine([DriftEvaluator(store)])
    (result,) = evaluate(engine, _chat_only_trace("1" * 32, "POST /ask"))
    assert result.span_id == "a" * 16  # None from the evaluator: the engine puts it on the root
    assert result.attributes[N.ATTR_DRIFT_AGENT] == "svc/POST /ask"
    (again,) = evaluate(engine, _chat_only_trace("2" * 32, "POST /ask"))
    assert again.attributes[N.ATTR_DRIFT_BASELINE_RUNS] == 1
    assert again.attributes[N.ATTR_DRIFT_SEVERITY] == "none"


def test_custom_key_function() -> None:
    def by_agent_only(run: Run, info: TraceInfo) -> str:
        return f"agent:{run.agent_name}"

    store = MemoryStore()
    engine = Engine([DriftEvaluator(store, config=DriftEvaluatorConfig(key=by_agent_only))])
    evaluate(engine, trace(0, service="svc-1"))
    evaluate(engine, trace(1, service="svc-2"))
    assert [(i.key, i.runs) for i in store.list()] == [(f"agent:{AGENT}", 2)]


def test_update_policy() -> None:
    drifted = SCENARIOS["tool_drift"]().runs[-1]
    store = MemoryStore()
    engine = Engine([DriftEvaluator(store)])
    for i in range(4):
        evaluate(engine, trace(i))
    (alert,) = evaluate(engine, trace(10, drifted))
    assert alert.score_label in ("alert", "critical")
    assert alert.attributes[N.ATTR_DRIFT_BASELINE_UPDATED] is False
    assert store.list()[0].runs == 4
    # the same run with every run updating (reasontrace's protocol) is merged
    lenient = Engine([DriftEvaluator(store, config=DriftEvaluatorConfig(no_update_at=None))])
    (merged,) = evaluate(lenient, trace(11, drifted))
    assert merged.attributes[N.ATTR_DRIFT_BASELINE_UPDATED] is True and store.list()[0].runs == 5
    # score only (a CI gate): nothing is written
    gate = Engine([DriftEvaluator(store, config=DriftEvaluatorConfig(update=False))])
    (scored,) = evaluate(gate, trace(12))
    assert (
        scored.score_value is not None and scored.attributes[N.ATTR_DRIFT_BASELINE_UPDATED] is False
    )
    assert store.list()[0].runs == 5
    # pinned: scored against the frozen baseline, never updated
    store.pin(KEY)
    (frozen,) = evaluate(engine, trace(13))
    assert frozen.attributes[N.ATTR_DRIFT_BASELINE_PINNED] is True
    assert frozen.attributes[N.ATTR_DRIFT_BASELINE_UPDATED] is False and store.list()[0].runs == 5


def test_truncated_traces_are_scored_but_not_learned() -> None:
    store = MemoryStore()
    evaluate(Engine([DriftEvaluator(store)]), trace(0))
    tiny = Engine([DriftEvaluator(store)], EngineConfig(max_spans_per_trace=3))
    (result,) = evaluate(tiny, trace(1))
    assert result.score_value is not None
    assert result.attributes[N.ATTR_DRIFT_BASELINE_UPDATED] is False and store.list()[0].runs == 1


def test_decay_is_passed_to_the_store() -> None:
    store = MemoryStore()
    engine = Engine([DriftEvaluator(store, config=DriftEvaluatorConfig(half_life_runs=1.0))])
    for i in range(3):
        evaluate(engine, trace(i))
    baseline = store.get(KEY)
    assert baseline is not None and baseline.runs == 3 and baseline.weight == pytest.approx(1.75)


def test_embedder_mismatch_gives_an_error_result_not_a_crash() -> None:
    store = MemoryStore()
    evaluate(Engine([DriftEvaluator(store)]), trace(0))
    other = Engine([DriftEvaluator(store, embedder=HashingEmbedder(256))])
    (result,) = evaluate(other, trace(1))
    assert result.error_type == "BaselineMismatchError" and result.score_value is None
    assert "refusing to mix" in (result.explanation or "")
    assert result.attributes == {N.ATTR_DRIFT_AGENT: KEY}
    assert store.list()[0].runs == 1


def test_nested_agents_are_observed_each_under_its_own_key() -> None:
    views = trace(0)
    root = next(v for v in views if v.name.startswith("invoke_agent"))
    child_doc = otlp_document(SPEC, 1, random.Random(1), scenario="evaluator", agent="helper")
    child_views = span_views(child_doc)
    # graft the helper's spans under the planner's agent span, in the planner's trace
    for view in child_views:
        view.trace_id = root.trace_id
        if not view.parent_span_id:
            view.parent_span_id = root.span_id
    store = MemoryStore()
    results = evaluate(Engine([DriftEvaluator(store)]), [*views, *child_views])
    assert sorted(r.attributes[N.ATTR_DRIFT_AGENT] for r in results) == [f"{SERVICE}/helper", KEY]
    assert sorted(i.key for i in store.list()) == [f"{SERVICE}/helper", KEY]
    planner = store.get(KEY)
    helper = store.get(f"{SERVICE}/helper")
    assert planner is not None and helper is not None
    means, child_means = planner.complexity_means(), helper.complexity_means()
    assert means["depth"] == 1.0 and child_means["depth"] == 0.0
    assert means["tool_calls"] == 2 * child_means["tool_calls"]  # the planner's subtree


def test_bad_evaluator_configuration() -> None:
    with pytest.raises(ValueError, match="unknown drift severity"):
        DriftEvaluatorConfig(no_update_at="high")
    with pytest.raises(ValueError, match="half_life_runs"):
        DriftEvaluatorConfig(half_life_runs=0)


class _CopyingOnly(MemoryStore):
    """A store without `get_shared`: the evaluator reads it through `get`."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        if name == "get_shared":
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_the_evaluator_borrows_memory_baselines_and_copies_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same results whether the store lends its baseline or hands out copies; a
    `MemoryStore`'s is borrowed (no copy per run)."""
    gets: list[str] = []
    original_get = MemoryStore.get

    def counting_get(self: MemoryStore, key: str) -> Any:
        gets.append(key)
        return original_get(self, key)

    monkeypatch.setattr(MemoryStore, "get", counting_get)
    shared, copying = MemoryStore(), _CopyingOnly()
    results = []
    for store in (shared, copying):
        engine = Engine([DriftEvaluator(store)])
        results.append([evaluate(engine, trace(i)) for i in range(4)])
        if store is shared:
            assert gets == []
    assert len(gets) == 7  # each run reads its baseline, each scored run its drift episode
    assert results[0] == results[1]
    assert shared.export_baselines()["baselines"] == copying.export_baselines()["baselines"]
