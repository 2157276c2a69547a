"""Baseline statistics: exact merges across stores, decay, serialization, embedder mismatch."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound.baselines import MemoryStore, SQLiteStore
from tracehound.drift import (
    COMPLEXITY_DIMENSIONS,
    Baseline,
    BaselineFormatError,
    BaselineMismatchError,
    DriftScorer,
    HashingEmbedder,
    RunFeatures,
    RunningStats,
    RunSummary,
    embed_run,
)
from tracehound.drift._baseline import _merge_recent

EMBEDDER = HashingEmbedder(64)
TEXTS = (
    "Searched the web and extracted the records.",
    "Maybe the database is a better fit; not sure.",
    "Summarized the findings in three bullet points.",
    "",
    "Retrying after a timeout error from the search tool.",
)
EMBEDDINGS = [embed_run([t] if t else [], EMBEDDER) for t in TEXTS]
TOOLS = ("search", "extract", "summarize", "db_query")


def features(
    index: int, tools: dict[str, int], complexity: tuple[float, ...], text: int
) -> RunFeatures:
    return RunFeatures(
        run_id=f"run{index}",
        trace_id=f"trace{index:04d}",
        start_ns=1_000 * index,
        end_ns=1_000 * index + 500,
        tools=tools,
        complexity=complexity,
        embedding=EMBEDDINGS[text],
        sample=TEXTS[text][:20],
    )


run_strategy = st.tuples(
    st.dictionaries(st.sampled_from(TOOLS), st.integers(1, 5), max_size=3),
    st.tuples(
        *(
            st.one_of(st.integers(0, 40).map(float), st.floats(0, 1e4, allow_nan=False))
            for _ in COMPLEXITY_DIMENSIONS
        )
    ),
    st.integers(0, len(TEXTS) - 1),
)


def assert_close(a: Baseline, b: Baseline, tol: float = 1e-9) -> None:
    assert (a.embedder, a.dim, a.blocks, a.runs, a.pinned) == (
        b.embedder,
        b.dim,
        b.blocks,
        b.runs,
        b.pinned,
    )
    assert math.isclose(a.weight, b.weight, rel_tol=tol, abs_tol=tol)
    np.testing.assert_allclose(a.complexity.mean, b.complexity.mean, rtol=tol, atol=tol)
    np.testing.assert_allclose(a.complexity.m2, b.complexity.m2, rtol=tol, atol=tol)
    assert a.tools.keys() == b.tools.keys()
    for name, value in a.tools.items():
        assert math.isclose(value, b.tools[name], rel_tol=tol, abs_tol=tol)
    np.testing.assert_allclose(a.centroid_sum, b.centroid_sum, rtol=tol, atol=tol)
    assert math.isclose(a.text_weight, b.text_weight, rel_tol=tol, abs_tol=tol)
    assert (a.first_ns, a.last_ns) == (b.first_ns, b.last_ns)
    assert [r.to_dict() for r in a.recent] == [r.to_dict() for r in b.recent]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=st.lists(run_strategy, min_size=1, max_size=25),
    shards=st.integers(2, 4),
    assignment=st.lists(st.integers(0, 3), min_size=25, max_size=25),
)
def test_baselines_split_across_stores_merge_into_the_single_store_baseline(
    runs: list[tuple[dict[str, int], tuple[float, ...], int]], shards: int, assignment: list[int]
) -> None:
    observed = [features(i, *run) for i, run in enumerate(runs)]
    single = MemoryStore()
    replicas = [MemoryStore() for _ in range(shards)]
    for i, run in enumerate(observed):
        delta = Baseline.from_run(run, EMBEDDER)
        single.update("svc/agent", delta)
        replicas[assignment[i] % shards].update("svc/agent", delta)
    merged = MemoryStore()
    for replica in replicas:  # what `tracehound baseline import --merge` does with exports
        if replica.list():
            merged.import_baselines(replica.export_baselines(), mode="merge")
    expected = single.get("svc/agent")
    got = merged.get("svc/agent")
    assert expected is not None and got is not None
    assert_close(got, expected)
    # merging the in-memory objects in another order gives the same baseline too
    parts = [b for r in reversed(replicas) if (b := r.get("svc/agent")) is not None]
    combined = parts[0]
    for part in parts[1:]:
        combined = combined.merged(part)
    assert_close(combined, expected)


def test_merge_through_sqlite_exports_is_exact(tmp_path: Any) -> None:
    rng = np.random.default_rng(7)
    observed = [
        features(
            i,
            {TOOLS[int(rng.integers(0, 4))]: int(rng.integers(1, 4))},
            tuple(float(v) for v in rng.integers(0, 50, size=len(COMPLEXITY_DIMENSIONS))),
            int(rng.integers(0, len(TEXTS))),
        )
        for i in range(30)
    ]
    single = MemoryStore()
    stores = [SQLiteStore(tmp_path / f"replica{k}.sqlite3") for k in range(3)]
    for i, run in enumerate(observed):
        delta = Baseline.from_run(run, EMBEDDER)
        single.update("svc/a", delta)
        stores[i % 3].update("svc/a", delta)
    target = SQLiteStore(tmp_path / "merged.sqlite3")
    for store in stores:
        target.import_baselines(json.loads(json.dumps(store.export_baselines())), mode="merge")
        store.close()
    got, expected = target.get("svc/a"), single.get("svc/a")
    assert got is not None and expected is not None
    assert_close(got, expected)
    target.close()


def test_welford_and_chan_match_numpy() -> None:
    rng = np.random.default_rng(3)
    data = rng.normal(50, 12, size=(40, 3))
    weights = rng.uniform(0.1, 2.0, size=40)
    left, right = RunningStats.empty(3), RunningStats.empty(3)
    for k, (row, w) in enumerate(zip(data, weights, strict=True)):
        (left if k < 17 else right).add(row, w)
    merged = left.merged(right)
    mean = np.average(data, axis=0, weights=weights)
    np.testing.assert_allclose(merged.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(
        merged.m2, (weights[:, None] * (data - mean) ** 2).sum(axis=0), rtol=1e-10
    )
    assert merged.weight == pytest.approx(weights.sum())
    unweighted = RunningStats.empty(3)
    for row in data:
        unweighted.add(row)
    np.testing.assert_allclose(unweighted.std, data.std(axis=0), rtol=1e-10)
    np.testing.assert_allclose(unweighted.sample_std, data.std(axis=0, ddof=1), rtol=1e-10)
    assert RunningStats.empty(3).merged(left).mean.tolist() == left.mean.tolist()


def test_decay_weights_runs_by_half_life() -> None:
    half_life = 4.0
    observed = [
        features(i, {"search": i + 1}, tuple(float(i * (d + 1)) for d in range(10)), i % 3)
        for i in range(9)
    ]
    store = MemoryStore()
    for run in observed:
        store.update("k", Baseline.from_run(run, EMBEDDER), half_life_runs=half_life)
    baseline = store.get("k")
    assert baseline is not None
    n = len(observed)
    weights = np.array([2.0 ** (-(n - 1 - i) / half_life) for i in range(n)])
    assert weights[n - 1 - 4] == pytest.approx(0.5)  # a run 4 runs old counts half
    values = np.array([r.complexity for r in observed])
    mean = np.average(values, axis=0, weights=weights)
    assert baseline.runs == n  # the run count does not decay (confidence)
    assert baseline.weight == pytest.approx(weights.sum(), rel=1e-12)
    np.testing.assert_allclose(baseline.complexity.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(
        baseline.complexity.m2, (weights[:, None] * (values - mean) ** 2).sum(axis=0), rtol=1e-9
    )
    assert baseline.tools["search"] == pytest.approx(weights.sum())  # one tool: share 1 per run
    expected_centroid = sum(w * r.embedding for w, r in zip(weights, observed, strict=True))
    np.testing.assert_allclose(baseline.centroid_sum, expected_centroid, rtol=1e-9, atol=1e-12)
    assert [r.weight for r in baseline.recent] == pytest.approx(list(weights[-8:]))
    # without decay every run weighs 1
    plain = Baseline.from_run(observed[0], EMBEDDER)
    for run in observed[1:]:
        plain = plain.with_run(run, EMBEDDER)
    assert plain.weight == n
    assert plain.decayed(None).weight == n
    with pytest.raises(ValueError, match="half_life_runs"):
        plain.decayed(0.0)


def test_decay_makes_the_baseline_follow_a_change() -> None:
    old = [features(i, {"search": 1}, (3.0,) * 10, 0) for i in range(20)]
    new = [features(20 + i, {"db_query": 1}, (3.0,) * 10, 0) for i in range(6)]
    scorer = DriftScorer()

    def last_tool_score(half_life: float | None) -> float:
        baseline = Baseline.from_run(old[0], EMBEDDER)
        for run in [*old[1:], *new[:-1]]:
            baseline = baseline.with_run(run, EMBEDDER, half_life_runs=half_life)
        score = scorer.score(new[-1], baseline)
        assert score.tool_mix is not None
        return score.tool_mix

    assert last_tool_score(2.0) < 0.05
    assert last_tool_score(None) > 0.5


def test_recent_ring_keeps_the_latest_runs_by_end_time() -> None:
    observed = [features(i, {}, (1.0,) * 10, 0) for i in range(12)]
    a = Baseline.from_run(observed[11], EMBEDDER)
    for run in observed[:5]:
        a = a.with_run(run, EMBEDDER)
    b = Baseline.from_run(observed[5], EMBEDDER)
    for run in observed[6:11]:
        b = b.with_run(run, EMBEDDER)
    merged = a.merged(b)
    assert [r.run_id for r in merged.recent] == [f"run{i}" for i in range(4, 12)]
    assert (
        merged.merged(Baseline.from_run(observed[11], EMBEDDER)).recent == merged.recent
    )  # deduplicated


def test_serialization_round_trip() -> None:
    baseline = Baseline.from_run(features(0, {"search": 2, "extract": 1}, (1.5,) * 10, 1), EMBEDDER)
    baseline = baseline.with_run(features(1, {}, (2.0,) * 10, 3), EMBEDDER)
    baseline.pinned = True
    text = json.dumps(baseline.to_dict(), allow_nan=False)
    back = Baseline.from_dict(json.loads(text))
    assert_close(back, baseline, tol=0.0)
    assert back.to_dict() == baseline.to_dict()
    assert back.summary()["tools"] == {
        "search": pytest.approx(2 / 3, abs=1e-4),
        "extract": pytest.approx(1 / 3, abs=1e-4),
    }


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format="other"), "not a tracehound baseline"),
        (lambda d: d.update(version=99), "version 99 is not supported"),
        (lambda d: d.update(centroid_sum="!!!"), "bad base64"),
        (lambda d: d.update(centroid_sum="AAAA"), "expected 64"),
        (lambda d: d["complexity"].update(mean=[1.0]), "do not match"),
        (lambda d: d["complexity"].update(weight=float("inf")), "finite"),
        (lambda d: d.pop("tools"), "missing or bad field"),
        (lambda d: d["embedder"].update(blocks=[[0, 10, 1.0]]), "do not tile"),
        (lambda d: d["recent"][0].update(trace_id=1), "recent.trace_id must be a string"),
    ],
)
def test_bad_serialized_baselines_are_refused(mutate: Any, message: str) -> None:
    data = Baseline.from_run(features(0, {"search": 1}, (1.0,) * 10, 0), EMBEDDER).to_dict()
    mutate(data)
    with pytest.raises(BaselineFormatError, match=message):
        Baseline.from_dict(data)
    with pytest.raises(BaselineFormatError):
        Baseline.from_dict([1, 2])


def test_mixing_embedders_is_refused_with_a_clear_message() -> None:
    run = features(0, {"search": 1}, (1.0,) * 10, 0)
    baseline = Baseline.from_run(run, EMBEDDER)
    other = HashingEmbedder(64, stance_weight=0.0)
    other_run = RunFeatures(
        run_id="r", embedding=embed_run(["text"], other), complexity=(1.0,) * 10
    )
    with pytest.raises(
        BaselineMismatchError,
        match=r"built with embedder 'hashing-v1\(uni\+bi,stance=0\.5\)' \(64-d\)",
    ):
        baseline.merged(Baseline.from_run(other_run, other))
    with pytest.raises(BaselineMismatchError, match="reset this agent's baseline"):
        DriftScorer().score(other_run, baseline, embedder=other)
    bigger = HashingEmbedder(128)
    with pytest.raises(BaselineMismatchError, match="128-d"):
        DriftScorer().score(
            RunFeatures(run_id="r", embedding=embed_run(["x"], bigger), complexity=(1.0,) * 10),
            baseline,
            embedder=bigger,
        )
    with pytest.raises(BaselineMismatchError, match="dimensions"):
        Baseline.from_run(run, bigger)
    store = MemoryStore()
    store.update("k", baseline)
    with pytest.raises(BaselineMismatchError):
        store.update("k", Baseline.from_run(other_run, other))
    stored = store.get("k")
    assert stored is not None and stored.runs == 1 and stored.embedder == EMBEDDER.name


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.sampled_from("ab"), st.sampled_from("xy")), max_size=9
    ),
    st.tuples(st.integers(0, 7), st.sampled_from("abc"), st.sampled_from("xyz")),
    st.integers(0, 9),
)
def test_merge_recent_appends_exactly_as_it_sorts(
    ring: list[tuple[int, str, str]], run: tuple[int, str, str], limit: int
) -> None:
    """The shortcut for a ring that the run extends gives what the sort and dedupe give."""

    def summary(end_ns: int, trace_id: str, run_id: str) -> RunSummary:
        return RunSummary(trace_id=trace_id, run_id=run_id, end_ns=end_ns)

    a = tuple(summary(*r) for r in ring)
    b = (summary(*run),)
    got = _merge_recent(a, b, limit)
    by_id: dict[tuple[str, str], RunSummary] = {}
    for r in (*a, *b):
        kept = by_id.get((r.trace_id, r.run_id))
        if kept is None or r.order_key > kept.order_key:
            by_id[(r.trace_id, r.run_id)] = r
    expected = sorted(by_id.values(), key=lambda r: r.order_key)
    assert [r.order_key for r in got] == ([r.order_key for r in expected[-limit:]] if limit else [])
    assert all(any(g is r for r in (*a, *b)) for g in got)


@settings(max_examples=100, deadline=None)
@given(run_strategy)
def test_update_delta_is_from_run_sharing_the_embedding(run: Any) -> None:
    """`update_delta`: the baseline `from_run` makes (the same dict), its centroid sum the run's
    embedding itself when the run has text; merged or stored, the same baselines."""
    tools, complexity, text = run
    f = features(1, tools, complexity, text)
    delta = Baseline.update_delta(f, EMBEDDER)
    reference = Baseline.from_run(f, EMBEDDER)
    assert delta.to_dict() == reference.to_dict()
    assert (delta.centroid_sum is f.embedding) == f.has_text
    assert reference.centroid_sum is not f.embedding
    base = Baseline.from_run(features(0, {"search": 1}, (1.0,) * 10, 0), EMBEDDER)
    assert base.merged(delta).to_dict() == base.merged(reference).to_dict()
    store = MemoryStore()
    store.update("k", delta)
    stored = store.get("k")
    assert stored is not None and stored.centroid_sum is not f.embedding
    assert stored.to_dict() == reference.to_dict()
    other = features(2, tools, complexity, text)
    other_f32 = RunFeatures(
        run_id="r", complexity=complexity, embedding=other.embedding.astype(np.float32)
    )
    converted = Baseline.update_delta(other_f32, EMBEDDER)
    assert converted.centroid_sum.dtype == np.float64
    assert converted.centroid_sum is not other_f32.embedding
