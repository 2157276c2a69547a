"""The drift scorer's fast paths against their references.

- The scorer's arithmetic on Python floats (`_ring_distances`, `_tool_mix`, the sigmas and the
  complexity component, the Welford/Chan merge, the text sample) against the numpy (or plain)
  formulas it replaced: the same bits.
- The C accelerator's `round_float16` against numpy's `astype(np.float16)`: the same bits.
- Its `embedding_distance` and `ring_distances` against the numpy code: their sums run in
  another order than BLAS's and einsum's, so they agree within 1e-12 (not to the bit), and the
  whole score within 1e-12 on every number, with the same severities, labels, primary drivers,
  rankings of the recent runs and explanations; `merge_moments` (the Welford/Chan merge),
  `any_nonzero`, `joined_words` (the text sample's words) and `divide_block` against the Python
  and numpy code: the same bits and strings.

The scoring rules themselves (components, composite, severity, ranking, explanation) have one
implementation, in Python: the accelerator has no copy of them to compare.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import pickle
import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from _leaks import assert_leak_free
from _native import pure_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import _accel
from tracehound.drift import (
    COMPLEXITY_DIMENSIONS,
    Baseline,
    DriftScorer,
    HashingEmbedder,
    RunFeatures,
    RunningStats,
    _score,
    block_distances,
    embedding_distance,
    tool_mix_distance,
)
from tracehound.drift._baseline import _float16_copy, tool_shares_of
from tracehound.drift._features import SAMPLE_CHARS, embed_run, make_sample

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EMBEDDER = HashingEmbedder(64)
BLOCKS = EMBEDDER.blocks

compares_both_paths = pytest.mark.skipif(
    bool(os.environ.get("TRACEHOUND_PURE_PYTHON")),
    reason="TRACEHOUND_PURE_PYTHON=1: the C path is off, so there is nothing to compare",
)


def native(name: str) -> Callable[..., Any]:
    function = getattr(_accel._in_use, name, None)
    assert function is not None, f"the C accelerator has no {name}"
    return function  # type: ignore[no-any-return]


def same_float(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b


def close(a: float | None, b: float | None, tolerance: float = 1e-12) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tolerance


# --- strategies ----------------------------------------------------------------------------------


def unit_blocks(rng: random.Random, dim: int, blocks: Any, zero: float = 0.2) -> np.ndarray:
    """A vector whose blocks are unit or zero, sparse or dense."""
    out = np.zeros(dim)
    for start, stop, _ in blocks:
        if rng.random() < zero:
            continue
        part = np.array(
            [rng.gauss(0, 1) if rng.random() < 0.7 else 0.0 for _ in range(stop - start)]
        )
        norm = math.sqrt(float(part @ part))
        if norm > 0:
            out[start:stop] = part / norm
    return out


@st.composite
def ring_inputs(
    draw: st.DrawFn,
) -> tuple[list[np.ndarray | None], np.ndarray, np.ndarray | None, Any]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    dim = draw(st.sampled_from([2, 7, 64, 130]))
    if dim == 2:
        blocks: Any = ((0, 2, 1.0),)
    else:
        cut = draw(st.integers(1, dim - 1))
        w = draw(st.sampled_from([0.0, 0.25, 0.5, 1.0]))
        blocks = ((0, cut, 1.0 - w), (cut, dim, w))
    n = draw(st.integers(0, 9))
    rows: list[np.ndarray | None] = [
        None if rng.random() < 0.15 else _float16_copy(unit_blocks(rng, dim, blocks))
        for _ in range(n)
    ]
    runs = draw(st.integers(1, 300))
    centroid = sum((unit_blocks(rng, dim, blocks, 0.0) for _ in range(min(runs, 5))), np.zeros(dim))
    centroid = centroid * (runs / min(runs, 5))
    run = None if rng.random() < 0.2 else unit_blocks(rng, dim, blocks)
    return rows, centroid, run, blocks


def numpy_columns(
    rows: list[np.ndarray | None], centroid: np.ndarray, run: np.ndarray | None, blocks: Any
) -> tuple[list[float], list[float]]:
    zeros = np.zeros(centroid.shape[0])
    matrix = np.array([zeros if r is None else r for r in rows]).reshape(
        len(rows), centroid.shape[0]
    )
    targets = np.array([centroid, zeros if run is None else run])
    out = block_distances(matrix, targets, blocks)
    return out[:, 0].tolist(), out[:, 1].tolist()


# --- pure Python: the same bits as numpy ---------------------------------------------------------


@SETTINGS
@given(ring_inputs())
def test_ring_distances_in_python_are_block_distances_bit_for_bit(inputs: Any) -> None:
    rows, centroid, run, blocks = inputs
    zeros = np.zeros(centroid.shape[0])
    matrix = np.array([zeros if r is None else r for r in rows]).reshape(
        len(rows), centroid.shape[0]
    )
    targets = np.array([centroid, zeros if run is None else run])
    columns = _score._ring_distances(matrix, targets, blocks)
    expected = numpy_columns(rows, centroid, run, blocks)
    for got, want in zip(columns, expected, strict=True):
        assert len(got) == len(want)
        assert all(same_float(a, b) for a, b in zip(got, want, strict=True)), (got, want)


tool_counts = st.dictionaries(
    st.sampled_from(["a", "b", "c", "search", "fetch", "ütf", ""]), st.integers(0, 50), max_size=6
)
tool_sums = st.dictionaries(
    st.sampled_from(["a", "b", "c", "search", "fetch", "ütf", ""]),
    st.floats(0, 200, allow_nan=False),
    max_size=6,
)


@SETTINGS
@given(tool_counts, st.one_of(tool_counts, tool_sums))
def test_tool_mix_of_shares_is_tool_mix_distance_bit_for_bit(
    run: dict[str, int], baseline: dict[str, float]
) -> None:
    try:
        expected: float | type[ZeroDivisionError] = tool_mix_distance(run, baseline)
    except ZeroDivisionError:
        expected = ZeroDivisionError
    try:
        got: float | type[ZeroDivisionError] = _score._tool_mix(
            tool_shares_of(run), tool_shares_of(baseline)
        )
    except ZeroDivisionError:
        got = ZeroDivisionError
    assert got == expected


stats_values = st.lists(
    st.floats(-1e6, 1e6, allow_nan=False), min_size=len(COMPLEXITY_DIMENSIONS), max_size=10
)


@st.composite
def running_stats(draw: st.DrawFn) -> RunningStats:
    weight = draw(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 7.25, 300.0]))
    mean = np.array(draw(stats_values))
    m2 = np.abs(np.array(draw(stats_values))) * draw(st.sampled_from([0.0, 1e-9, 1.0]))
    return RunningStats(weight, mean, m2)


@SETTINGS
@given(running_stats(), running_stats())
def test_chan_merge_in_python_is_numpys_bit_for_bit(a: RunningStats, b: RunningStats) -> None:
    merged = a.merged(b)
    if b.weight <= 0.0 or a.weight <= 0.0:
        return
    total = a.weight + b.weight
    delta = b.mean - a.mean
    mean = a.mean + delta * (b.weight / total)
    m2 = a.m2 + b.m2 + delta * delta * (a.weight * b.weight / total)
    assert merged.weight == total
    assert merged.mean.tobytes() == mean.tobytes()
    assert merged.m2.tobytes() == m2.tobytes()


@SETTINGS
@given(running_stats(), stats_values)
def test_sigmas_and_complexity_in_python_are_numpys_bit_for_bit(
    stats: RunningStats, values: list[float]
) -> None:
    scorer = DriftScorer()
    baseline = Baseline.empty(EMBEDDER)
    baseline.complexity = stats
    absolute, relative = scorer.config.floors()
    floors = np.maximum(absolute, relative * np.abs(stats.mean))
    sigmas = np.maximum(stats.sample_std, floors)
    assert scorer.sigmas(baseline).tobytes() == sigmas.tobytes()
    x = np.asarray(values, dtype=np.float64)
    z = (x - stats.mean) / sigmas
    active = (x != 0.0) | (stats.mean != 0.0) | (stats.m2 > 0.0)
    cap = scorer.config.z_cap
    capped = np.minimum(np.abs(z[active]), cap) / cap
    expected = (
        0.0
        if not active.any()
        else _score._clip01(math.sqrt(float(capped @ capped) / active.sum()))
    )
    complexity, z_list = scorer._complexity_of(
        x.tolist(), stats.mean.tolist(), stats.m2.tolist(), sigmas.tolist()
    )
    assert complexity == expected
    assert np.array(z_list).tobytes() == z.tobytes()


texts = st.lists(
    st.sampled_from([*"ab ÿ\t\n\u00a0\u2003\u3000é", "x" * 30, "  ", "long word "]), max_size=300
).map("".join)


@SETTINGS
@given(st.lists(texts, max_size=3))
def test_sample_is_the_first_line_of_the_first_text(values: list[str]) -> None:
    expected = ""
    for text in values:
        line = " ".join(text.split())
        if line:
            expected = line if len(line) <= SAMPLE_CHARS else line[: SAMPLE_CHARS - 1] + "…"
            break
    assert make_sample(values) == expected


# --- C: round_float16, the same bits -------------------------------------------------------------


@compares_both_paths
@SETTINGS
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=50))
def test_round_float16_is_numpys_cast(values: list[float]) -> None:
    vector = np.array(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        expected = vector.astype(np.float16).astype(np.float64)
    out = np.full(len(values), np.nan)
    assert native("round_float16")(vector, out) is True
    assert out.tobytes() == expected.tobytes()


@compares_both_paths
def test_round_float16_ties_and_edges() -> None:
    steps = np.arange(-70_000, 70_000, dtype=np.float64)
    edges = np.array(
        [0.0, -0.0, 5e-324, -5e-324, 2.0**-25, 3 * 2.0**-26, 65504.0, 65519.99, 65520.0]
    )
    for vector in [*(steps * 2.0**k for k in range(-36, 6)), edges, -edges]:
        with np.errstate(over="ignore"):
            expected = vector.astype(np.float16).astype(np.float64)
        out = np.empty_like(vector)
        assert native("round_float16")(vector, out) is True
        assert out.tobytes() == expected.tobytes()


@compares_both_paths
def test_round_float16_leaves_other_input_to_numpy() -> None:
    round_float16 = native("round_float16")
    out = np.zeros(3)
    assert round_float16(np.array([1.0, np.nan, 2.0]), out) is None
    assert round_float16(np.array([1.0, np.inf, 2.0]), out) is None
    assert round_float16(np.array([1.0, 2.0], dtype=np.float32), out[:2]) is None
    assert round_float16(np.zeros(4), out) is None  # lengths differ
    assert round_float16(np.zeros((3, 1)), out) is None
    assert round_float16(np.zeros(3), np.zeros(3)[::-1].copy()[::2]) is None  # not contiguous
    assert round_float16("abc", out) is None
    assert round_float16(np.zeros(3), b"123456781234567812345678") is None  # read-only
    with pytest.raises(TypeError):
        round_float16(np.zeros(3))
    vector = np.array([1.0, np.nan])
    assert np.array_equal(
        _float16_copy(vector), vector.astype(np.float16).astype(np.float64), equal_nan=True
    )


# --- C: distances, within 1e-12 ------------------------------------------------------------------


@compares_both_paths
@SETTINGS
@given(ring_inputs())
def test_ring_distances_in_c_are_within_1e_12(inputs: Any) -> None:
    rows, centroid, run, blocks = inputs
    columns = native("ring_distances")(rows, centroid, run, blocks)
    assert columns is not None
    expected = numpy_columns(rows, centroid, run, blocks)
    for got, want in zip(columns, expected, strict=True):
        assert len(got) == len(want)
        assert all(close(a, b) for a, b in zip(got, want, strict=True)), (got, want)


@compares_both_paths
@SETTINGS
@given(ring_inputs())
def test_embedding_distance_in_c_is_within_1e_12(inputs: Any) -> None:
    rows, centroid, run, blocks = inputs
    a = run if run is not None else np.zeros(centroid.shape[0])
    for b in [centroid, *(r for r in rows if r is not None)]:
        got = embedding_distance(a, b, blocks)
        with pure_python():
            expected = embedding_distance(a, b, blocks)
        assert close(got, expected), (got, expected)


@compares_both_paths
def test_distances_leave_other_input_to_numpy() -> None:
    ring_distances = native("ring_distances")
    distance = native("embedding_distance")
    v = np.ones(4) / 2
    blocks = ((0, 2, 0.5), (2, 4, 0.5))
    assert ring_distances([v], v, v, blocks) is not None
    for bad in [
        ((0, 5, 1.0),),  # beyond the vector
        ((-1, 4, 1.0),),
        ((0, 4, 1),),  # an int weight
        ((0, 4),),
        [[0, 4, 1.0]],
        "blocks",
        tuple((0, 4, 1.0 / 17) for _ in range(17)),  # more blocks than it takes
    ]:
        assert ring_distances([v], v, v, bad) is None
        assert distance(v, v, bad) is NotImplemented
    assert ring_distances([v.astype(np.float32)], v, v, blocks) is None
    assert ring_distances([np.ones(3)], v, v, blocks) is None
    assert ring_distances([v], v, np.ones(5), blocks) is None
    assert ring_distances((x for x in [v]), v, v, blocks) is None
    assert ring_distances([v], np.ones((2, 2)), v, blocks) is None
    assert distance(v, np.ones(5), blocks) is NotImplemented
    assert distance(v[::2], v[:2], ((0, 2, 1.0),)) is NotImplemented
    with pytest.raises(TypeError):
        ring_distances([v], v, v)
    with pytest.raises(TypeError):
        distance(v, v)
    # the numpy code then answers, or raises, as it always did
    assert embedding_distance(v.astype(np.float32), v, blocks) == pytest.approx(0.0)


def features_of(rng: random.Random, index: int) -> RunFeatures:
    tools = {t: rng.randint(1, 4) for t in rng.sample(["a", "b", "c", "d"], rng.randint(0, 3))}
    words = ["search", "maybe", "records", "error", "not", "clearly", "page", "summary", "retry"]
    texts = [
        " ".join(rng.choice(words) for _ in range(rng.randint(1, 30)))
        for _ in range(rng.randint(0, 3))
    ]
    embedding = EMBEDDER.embed(texts).sum(axis=0) if texts else np.zeros(EMBEDDER.dim)
    for start, stop, _ in EMBEDDER.blocks:
        norm = math.sqrt(float(embedding[start:stop] @ embedding[start:stop]))
        if norm > 0:
            embedding[start:stop] /= norm
    return RunFeatures(
        run_id=f"r{index}",
        trace_id=f"t{index % 3}",
        start_ns=index * 10,
        end_ns=index * 10 + 5,
        tools=tools,
        complexity=tuple(
            float(rng.choice([0, 1, 2, 3, 8, 150, 1e4])) for _ in COMPLEXITY_DIMENSIONS
        ),
        embedding=embedding,
        sample=texts[0][:20] if texts else "",
    )


def numbers(score: Any) -> list[float | None]:
    explanation = score.explanation
    out = [
        score.composite,
        score.tool_mix,
        score.semantic,
        score.complexity,
        score.semantic_distance,
        score.semantic_typical,
        *score.complexity_z.values(),
    ]
    if explanation is not None:
        out += [d.divergence for d in explanation.diverged_from]
        out += [m.z for m in explanation.complexity_moved]
    return out


@compares_both_paths
@SETTINGS
@given(st.integers(0, 2**32), st.integers(1, 14))
def test_scores_with_the_c_distances_are_within_1e_12(seed: int, n_runs: int) -> None:
    rng = random.Random(seed)
    runs = [features_of(rng, i) for i in range(n_runs + 1)]
    baseline = Baseline.from_run(runs[0], EMBEDDER)
    with pure_python():
        reference = Baseline.from_run(runs[0], EMBEDDER)
    scorer = DriftScorer()
    for features in runs[1:]:
        got = scorer.score(features, baseline, embedder=EMBEDDER)
        with pure_python():
            expected = scorer.score(features, reference, embedder=EMBEDDER)
        got_numbers, expected_numbers = numbers(got), numbers(expected)
        assert len(got_numbers) == len(expected_numbers)
        assert all(close(a, b) for a, b in zip(got_numbers, expected_numbers, strict=True))
        assert (got.severity, got.confidence, got.primary_driver) == (
            expected.severity,
            expected.confidence,
            expected.primary_driver,
        )
        assert got.explanation_text() == expected.explanation_text()
        assert got.explanation is not None and expected.explanation is not None
        assert [(d.trace_id, d.run_id) for d in got.explanation.diverged_from] == [
            (d.trace_id, d.run_id) for d in expected.explanation.diverged_from
        ]
        baseline = baseline.with_run(features, EMBEDDER)
        with pure_python():
            reference = reference.with_run(features, EMBEDDER)
        # baselines are the same bits either way (the float16 copies included)
        assert baseline.to_dict() == reference.to_dict()


@compares_both_paths
def test_the_scorer_and_baselines_take_the_c_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Would fail if the scorer or the baselines silently ran the numpy code for a kernel the
    accelerator has."""
    module = _accel._in_use
    calls: dict[str, list[Any]] = {}

    class Spy:
        def __getattr__(self, name: str) -> Any:
            function = getattr(module, name)

            def call(*args: Any) -> Any:
                result = function(*args)
                calls.setdefault(name, []).append(result)
                return result

            return call

    names = [
        "ring_distances",
        "embedding_distance",
        "round_float16",
        "merge_moments",
        "any_nonzero",
    ]
    rng = random.Random(7)
    # copies: the features found has_text before the spy came in
    runs = [dataclasses.replace(r) for r in (features_of(rng, i) for i in range(8)) if r.has_text]
    monkeypatch.setattr(_accel, "_in_use", Spy())
    baseline = Baseline.from_run(runs[0], EMBEDDER)
    for features in runs[1:]:
        DriftScorer().score(features, baseline, embedder=EMBEDDER)
        baseline = baseline.with_run(features, EMBEDDER)
    assert all(calls.get(n) for n in names), calls
    assert all(r is not None and r is not NotImplemented for n in names for r in calls[n])


@compares_both_paths
@SETTINGS
@given(st.integers(0, 2**32), st.integers(1, 12), st.integers(0, 4))
def test_recent_runs_with_the_c_distances_are_the_python_ranking(
    seed: int, n_runs: int, top: int
) -> None:
    rng = random.Random(seed)
    runs = [features_of(rng, i) for i in range(n_runs + 1)]
    baseline = Baseline.from_run(runs[0], EMBEDDER)
    for features in runs[1:-1]:
        baseline = baseline.with_run(features, EMBEDDER)
    scorer = DriftScorer()
    features = runs[-1]
    stats = baseline.complexity
    sigmas = scorer._sigma_list(baseline)
    x = [float(v) for v in features.complexity]
    has_text = features.has_text
    run_shares = tool_shares_of(features.tools)
    got = scorer._recent_runs(features, baseline, x, sigmas, has_text, run_shares, top)
    with pure_python():
        expected = scorer._recent_runs(features, baseline, x, sigmas, has_text, run_shares, top)
    assert stats is baseline.complexity
    assert [(d.trace_id, d.run_id, d.sample) for d in got[0]] == [
        (d.trace_id, d.run_id, d.sample) for d in expected[0]
    ]
    assert all(close(a.divergence, b.divergence) for a, b in zip(got[0], expected[0], strict=True))
    assert close(got[1], expected[1])


@compares_both_paths
def test_recent_runs_break_ties_by_ids() -> None:
    """The same run under other ids diverges by exactly as much with the C distances (the same
    sums for the same rows), and the ids order them (with numpy's, sums may differ by a
    rounding from row to row: a tie is a rounding boundary)."""
    rng = random.Random(3)
    runs = [features_of(rng, i) for i in range(4)]
    runs += [replace_ids(runs[-1], run_id) for run_id in ("b", "a", "c")]
    baseline = Baseline.from_run(runs[0], EMBEDDER)
    for features in runs[1:]:
        baseline = baseline.with_run(features, EMBEDDER)
    scorer = DriftScorer()
    features = runs[0]
    sigmas = scorer._sigma_list(baseline)
    x = [float(v) for v in features.complexity]
    shares = tool_shares_of(features.tools)
    got, _ = scorer._recent_runs(features, baseline, x, sigmas, features.has_text, shares, 8)
    same = [d for d in got if d.run_id in ("a", "b", "c", "r3")]
    assert len({d.divergence for d in same}) == 1
    assert [d.run_id for d in same] == ["a", "b", "c", "r3"]


def replace_ids(features: RunFeatures, run_id: str) -> RunFeatures:
    return RunFeatures(
        run_id=run_id,
        trace_id=features.trace_id,
        start_ns=features.start_ns + 1,
        end_ns=features.end_ns + 1,
        tools=features.tools,
        complexity=features.complexity,
        embedding=features.embedding,
        sample=features.sample,
    )


@compares_both_paths
@SETTINGS
@given(running_stats(), running_stats())
def test_chan_merge_in_c_is_pythons_bit_for_bit(a: RunningStats, b: RunningStats) -> None:
    if a.mean.shape != b.mean.shape:
        return
    got = a.merged(b)
    with pure_python():
        expected = a.merged(b)
    assert got.weight == expected.weight
    assert got.mean.tobytes() == expected.mean.tobytes()
    assert got.m2.tobytes() == expected.m2.tobytes()


@compares_both_paths
def test_merge_moments_leaves_other_input_to_python() -> None:
    merge = native("merge_moments")
    v = np.ones(3)
    assert merge(v, v, v, v, 0.5, 0.25, np.empty(3), np.empty(3)) is True
    assert merge(v, v, v, v, 1, 0.25, np.empty(3), np.empty(3)) is None
    assert merge(v, v, v[:2], v, 0.5, 0.25, np.empty(3), np.empty(3)) is None
    assert merge(v, v, v, v, 0.5, 0.25, np.empty(2), np.empty(3)) is None
    assert merge(v, v, v, v, 0.5, 0.25, np.empty(3), b"x" * 24) is None  # read-only
    assert merge(v, v, v, v.astype(np.float32), 0.5, 0.25, np.empty(3), np.empty(3)) is None
    with pytest.raises(TypeError):
        merge(v)


@compares_both_paths
@SETTINGS
@given(texts, st.integers(-400, 400))
def test_joined_words_in_c_are_pythons(text: str, stop: int) -> None:
    assert native("joined_words")(text, stop) == " ".join(text[:stop].split())


@compares_both_paths
def test_the_sample_takes_the_c_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """Would fail if the text sample silently split and joined in Python."""
    joined = native("joined_words")
    calls: list[object] = []

    def spy(*args: Any) -> Any:
        calls.append(joined(*args))
        return calls[-1]

    monkeypatch.setattr(_accel, "_in_use", SimpleNamespace(joined_words=spy))
    text = "word  " * 100
    assert make_sample(["", text]) == ("word " * 24)[: SAMPLE_CHARS - 1] + "…"
    assert calls and all(isinstance(c, str) for c in calls)


@compares_both_paths
def test_joined_words_edges_and_other_input() -> None:
    joined = native("joined_words")
    for text in ("", " ", "a", " a  b ", "\u3000x\u00a0y\x1cz\x85", "\U0001f600 a", "é " * 200):
        for stop in (0, 1, 2, 3, 239, 240, 10**6, -1, -(10**6)):
            assert joined(text, stop) == " ".join(text[:stop].split()), (text, stop)
    assert joined("a b", 2**70) is None  # beyond a Py_ssize_t: the slice takes it
    assert joined(b"a b", 3) is None
    assert joined("a b", 1.0) is None
    assert joined("a b", True) is None  # a bool is an int subclass
    with pytest.raises(TypeError):
        joined("a b")


@compares_both_paths
@SETTINGS
@given(st.lists(st.sampled_from([0.0, -0.0, 1.0, -2.5, math.nan, math.inf, 1e-300]), max_size=9))
def test_any_nonzero_is_numpys_any(values: list[float]) -> None:
    vector = np.array(values, dtype=np.float64)
    assert native("any_nonzero")(vector) is (bool(vector.size) and bool(vector.any()))
    assert native("any_nonzero")(vector.astype(np.float32)) is None
    assert native("any_nonzero")("abc") is None


# --- leaks ---------------------------------------------------------------------------------------

_V = np.linspace(-1.0, 1.0, 64)
_OUT = np.empty(64)
_ROWS = [_V, None, _V * 0.5]
_BLOCKS = EMBEDDER.blocks
_X = (1.0, 2.0, 0.0)
_S = np.array([0.5, 1.0, 2.0])
_TEXT = "A run's  first\ttext, \u00e9t\u00e9 \U0001f600 " * 20
_M = np.empty(3)
_M2 = np.empty(3)


@compares_both_paths
@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: native("round_float16")(_V, _OUT), id="round"),
        pytest.param(lambda: native("round_float16")(_V, _OUT[:3]), id="round-unhandled"),
        pytest.param(lambda: native("embedding_distance")(_V, _V * 2, _BLOCKS), id="distance"),
        pytest.param(lambda: native("embedding_distance")(_V, _V, "x"), id="distance-unhandled"),
        pytest.param(lambda: native("ring_distances")(_ROWS, _V, _V, _BLOCKS), id="ring"),
        pytest.param(lambda: native("ring_distances")(_ROWS, _V, None, _BLOCKS), id="ring-no-run"),
        pytest.param(
            lambda: native("ring_distances")([*_ROWS, np.ones(3)], _V, _V, _BLOCKS),
            id="ring-unhandled",
        ),
        pytest.param(lambda: native("joined_words")(_TEXT, 240), id="words"),
        pytest.param(lambda: native("joined_words")(_TEXT, 2**70), id="words-unhandled"),
        pytest.param(lambda: native("any_nonzero")(_V), id="any"),
        pytest.param(lambda: native("any_nonzero")(_X), id="any-unhandled"),
        pytest.param(
            lambda: native("merge_moments")(_S, _S, _S, _S, 0.5, 0.25, _M, _M2), id="merge"
        ),
        pytest.param(
            lambda: native("merge_moments")(_S, _S, _S, _S, 0.5, 0.25, _M, _OUT),
            id="merge-unhandled",
        ),
    ],
)
def test_no_leaks(call: Callable[[], object]) -> None:
    watched = [_V, _OUT, _ROWS, _BLOCKS, *_BLOCKS, _X, *_X, _S, _M, _M2, _TEXT]
    assert_leak_free(call, watched, 20_000)


# --- the evaluator's score and text --------------------------------------------------------------


@SETTINGS
@given(st.integers(0, 2**32), st.integers(1, 14))
def test_score_text_is_the_scores_text(seed: int, n_runs: int) -> None:
    """`score_text`: the unexplained score and the explained score's text."""
    rng = random.Random(seed)
    runs = [features_of(rng, i) for i in range(n_runs + 1)]
    scorer = DriftScorer()
    baseline = None
    for features in runs:
        score, text = scorer.score_text(features, baseline, embedder=EMBEDDER)
        assert score == scorer.score(features, baseline, embedder=EMBEDDER, explain=False)
        assert text == scorer.score(features, baseline, embedder=EMBEDDER).explanation_text()
        delta = Baseline.from_run(features, EMBEDDER)
        baseline = delta if baseline is None else baseline.merged(delta)


def test_scored_summaries_keep_their_caches_and_still_pickle_and_copy() -> None:
    """Scoring against a baseline fills its recent runs' caches (tool shares, complexity
    arrays); the summaries pickle and copy without them, to the same baseline."""
    rng = random.Random(17)
    runs = [r for r in (features_of(rng, i) for i in range(9)) if r.has_text]
    baseline = Baseline.from_run(runs[0], EMBEDDER)
    for features in runs[1:-1]:
        baseline = baseline.with_run(features, EMBEDDER)
    assert all(r._shares is None and r._complexity is None for r in baseline.recent)
    DriftScorer().score(runs[-1], baseline, embedder=EMBEDDER)
    for summary in baseline.recent:
        expected = tool_shares_of(summary.tools) if summary.tools else None
        assert summary._shares == expected
        if expected is not None:
            assert list(summary._shares.items()) == list(expected.items())
        assert summary._complexity is not None
        assert summary._complexity.tolist() == list(summary.complexity)
    copied = pickle.loads(pickle.dumps(baseline))
    assert copied.to_dict() == baseline.to_dict()
    assert all(r._shares is None and r._complexity is None for r in copied.recent)
    assert copy.deepcopy(baseline).to_dict() == baseline.to_dict()


# --- C: divide_block, the same bits --------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)


@compares_both_paths
@SETTINGS
@given(
    st.lists(finite, max_size=40),
    st.integers(0, 45),
    st.integers(0, 45),
    st.one_of(finite, st.sampled_from([0.0, -0.0, float("inf"), float("nan"), 3.0])),
)
def test_divide_block_is_numpys_division(
    values: list[float], start: int, stop: int, divisor: float
) -> None:
    vector = np.array(values, dtype=np.float64)
    expected = vector.copy()
    handled = start <= stop <= len(values)
    with np.errstate(all="ignore"):
        expected[start:stop] /= divisor
    got = vector.copy()
    result = native("divide_block")(got, start, stop, divisor)
    if handled:
        assert result is True
        assert got.tobytes() == expected.tobytes()
    else:
        assert result is None
        assert got.tobytes() == vector.tobytes()


@compares_both_paths
def test_divide_block_leaves_other_input_to_numpy() -> None:
    call = native("divide_block")
    vector = np.ones(4)
    for args in [
        (vector.astype(np.float32), 0, 4, 2.0),
        (np.ones((2, 2)), 0, 2, 2.0),
        (vector[::2], 0, 2, 2.0),
        (bytes(32), 0, 4, 2.0),
        (vector, 0, 4, 2),
        (vector, -1, 4, 2.0),
        (vector, 0, 2**70, 2.0),
        (vector, 3, 2, 2.0),
    ]:
        assert call(*args) is None
    assert vector.tolist() == [1.0] * 4
    with pytest.raises(TypeError):
        call()
    watched = [vector]
    assert_leak_free(lambda: call(vector, 0, 4, 1.0), watched, 20_000)
    assert_leak_free(lambda: call(vector, 0, 5, 1.0), watched, 20_000)


@compares_both_paths
def test_embed_run_divides_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """Would fail if the run's embedding were silently normalized by numpy's division."""
    module = _accel._in_use
    results: list[Any] = []

    class Spy:
        def __getattr__(self, name: str) -> Any:
            function = getattr(module, name)
            if name != "divide_block":
                return function

            def call(*args: Any) -> Any:
                results.append(function(*args))
                return results[-1]

            return call

    texts = ["maybe the search failed again", "the records are clearly fine"]
    with pure_python():
        expected = embed_run(texts, EMBEDDER)
    monkeypatch.setattr(_accel, "_in_use", Spy())
    got = embed_run(texts, EMBEDDER)
    assert results == [True, True]
    assert got.tobytes() == expected.tobytes()
