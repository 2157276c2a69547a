"""The drift scorer's fast arithmetic against the plain formulas it replaced.

`_ring_distances`, `_tool_mix`, the sigmas and the complexity component, the Welford/Chan merge
and the text sample run on Python floats (fewer numpy calls on short vectors) in numpy's order:
the same bits as the numpy (or plain) formulas. `embedding_distance` (one pair, a loop over the
blocks) and `block_distances` (many pairs, numpy) agree within 1e-12.
"""

from __future__ import annotations

import copy
import math
import pickle
import random
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
from tracehound.drift._features import SAMPLE_CHARS, make_sample

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EMBEDDER = HashingEmbedder(64)


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


@SETTINGS
@given(ring_inputs())
def test_embedding_distance_is_the_block_distance(inputs: Any) -> None:
    rows, centroid, run, blocks = inputs
    a = run if run is not None else np.zeros(centroid.shape[0])
    for b in [centroid, *(r for r in rows if r is not None)]:
        (expected,) = block_distances(a[None, :], b[None, :], blocks)[0].tolist()
        got = embedding_distance(a, b, blocks)
        assert close(got, None if math.isnan(expected) else expected), (got, expected)


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
