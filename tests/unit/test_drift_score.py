"""The drift scorer: components, tiers, weights, explanations; the hashing embedder."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any

import numpy as np
import pytest

from tracehound.drift import (
    COMPLEXITY_DIMENSIONS,
    Baseline,
    DriftConfig,
    DriftScorer,
    HashingEmbedder,
    RunFeatures,
    SentenceTransformerEmbedder,
    confidence_of,
    embed_run,
    embedding_distance,
    semantic_spread,
    severity_of,
    severity_rank,
    tool_mix_distance,
)

EMBEDDER = HashingEmbedder()
BASE = dict(zip(COMPLEXITY_DIMENSIONS, (3, 3, 3, 12, 600, 120, 0, 0, 2.5, 0), strict=True))


def run(
    tools: dict[str, int] | None = None,
    texts: tuple[str, ...] = ("Ran web_search, then extract_records, then summarize.",),
    index: int = 0,
    **complexity: float,
) -> RunFeatures:
    values = {**BASE, **complexity}
    return RunFeatures(
        run_id=f"r{index}",
        trace_id=f"t{index}",
        start_ns=index * 10,
        end_ns=index * 10 + 5,
        tools={"web_search": 1, "extract_records": 1, "summarize": 1} if tools is None else tools,
        complexity=tuple(float(values[d]) for d in COMPLEXITY_DIMENSIONS),
        embedding=embed_run(list(texts), EMBEDDER),
        sample=texts[0] if texts else "",
    )


def baseline_of(*runs: RunFeatures) -> Baseline:
    baseline = Baseline.from_run(runs[0], EMBEDDER)
    for r in runs[1:]:
        baseline = baseline.with_run(r, EMBEDDER)
    return baseline


def steady(n: int = 10) -> Baseline:
    return baseline_of(
        *(
            run(index=i, output_tokens=110 + 5 * (i % 5), duration_s=2.3 + 0.1 * (i % 4))
            for i in range(n)
        )
    )


def test_severity_and_confidence_tiers() -> None:
    assert [severity_of(v) for v in (0.0, 0.2999, 0.3, 0.5999, 0.6, 0.8, 0.8000001, 1.0)] == [
        "none",
        "none",
        "warning",
        "warning",
        "alert",
        "alert",
        "critical",
        "critical",
    ]
    assert [confidence_of(n) for n in (0, 1, 2, 4, 5, 9, 10, 500)] == [
        "initializing",
        "initializing",
        "low",
        "low",
        "medium",
        "medium",
        "high",
        "high",
    ]
    assert severity_rank("alert") == 2
    with pytest.raises(ValueError, match="unknown drift severity"):
        severity_rank("bad")


def test_no_baseline_is_not_scored() -> None:
    score = DriftScorer().score(run(), None)
    assert (score.composite, score.severity, score.confidence, score.baseline_runs) == (
        None,
        None,
        "initializing",
        0,
    )
    assert not score.scored and score.components() == {}
    assert "no baseline yet" in score.explanation_text()


def test_tool_mix_distance_cases() -> None:
    assert tool_mix_distance({}, {}) == 0.0
    assert tool_mix_distance({"a": 1}, {}) == 1.0  # tools appeared
    assert tool_mix_distance({}, {"a": 3.0}) == 1.0  # tools disappeared
    assert tool_mix_distance({"x": 2, "y": 1}, {"a": 1.0, "b": 2.0}) == 1.0  # only unseen tools
    assert tool_mix_distance({"a": 2, "b": 4}, {"a": 1.0, "b": 2.0}) == pytest.approx(
        0.0, abs=1e-12
    )
    # a new tool next to the usual ones moves the mix by the share it takes
    partial = tool_mix_distance({"a": 1, "b": 1, "new": 2}, {"a": 1.0, "b": 1.0})
    assert partial == pytest.approx(1 - 2 / (2**0.5 * 6**0.5))


def test_components_and_weights() -> None:
    baseline = steady()
    scorer = DriftScorer()
    same = scorer.score(run(index=20, output_tokens=115, duration_s=2.4), baseline)
    assert same.severity == "none" and same.confidence == "high" and same.baseline_runs == 10
    assert same.tool_mix == 0.0 and same.semantic is not None and same.semantic < 0.05
    assert same.complexity is not None and same.complexity < 0.3
    new_tools = scorer.score(run({"db_query": 2, "format_report": 1}, index=21), baseline)
    assert new_tools.tool_mix == 1.0 and new_tools.primary_driver == "tool_mix"
    weighted = 0.35 + 0.40 * new_tools.semantic + 0.25 * new_tools.complexity
    # one saturated component is an alert on its own: at least 0.6 times the largest component
    assert new_tools.composite == pytest.approx(max(weighted, 0.6))
    only_tools = DriftScorer(DriftConfig(weights=(2, 0, 0))).score(
        run({"db_query": 1}, index=22), baseline
    )
    assert only_tools.composite == 1.0 and only_tools.severity == "critical"


def test_complexity_z_scores_are_capped_and_floored() -> None:
    baseline = steady()
    scorer = DriftScorer()
    busy = scorer.score(
        run(index=30, llm_calls=12, tool_calls=12, steps=40, errors=3, retries=3), baseline
    )
    assert busy.complexity_z["llm_calls"] == pytest.approx(9.0)  # constant baseline: floor σ = 1
    assert busy.complexity_z["errors"] == pytest.approx(3.0)
    assert busy.primary_driver == "complexity"
    # 5 dims saturate (calls, tool calls, steps, errors, retries); depth is unused by this agent
    # (0 everywhere) and left out of the mean: sqrt(5 / 9), not sqrt(5 / 10)
    assert busy.complexity == pytest.approx((5 / 9) ** 0.5, abs=0.01)
    one_more = scorer.score(run(index=31, llm_calls=4), baseline)
    assert one_more.complexity_z["llm_calls"] == pytest.approx(1.0)
    # latency 10% above a steady mean stays well within the 25% relative floor
    slower = scorer.score(run(index=32, duration_s=2.6), baseline)
    assert abs(slower.complexity_z["duration_s"]) < 1.0


def test_semantic_component_is_the_distance_in_units_of_the_baselines_spread() -> None:
    baseline = steady()
    hedging = run(
        texts=("Not sure which tool fits; maybe db_query, perhaps web_search. Unclear.",), index=40
    )
    score = DriftScorer().score(hedging, baseline)
    expected = embedding_distance(hedging.embedding, baseline.centroid_sum, baseline.blocks)
    assert expected is not None and expected == score.semantic_distance and expected > 0.75
    # ten identical texts: no spread, the floor (0.02) is the unit, the component saturates
    assert semantic_spread(baseline) == (pytest.approx(0.0, abs=1e-3), pytest.approx(0.0, abs=1e-3))
    assert score.semantic == 1.0
    assert score.semantic_typical == pytest.approx(0.0, abs=1e-3)  # ten identical texts
    silent = DriftScorer().score(run(texts=(), index=41), baseline)
    assert silent.semantic == 0.0 and silent.semantic_distance is None


def test_explanation_names_what_moved() -> None:
    baseline = steady()
    drifted = run(
        {"web_search": 1, "db_query": 3},
        texts=("Not confident; db_query might be better than web_search here.",),
        index=50,
        llm_calls=9,
        errors=2,
    )
    score = DriftScorer().score(drifted, baseline)
    explanation = score.explanation
    assert explanation is not None
    assert explanation.primary_driver == score.primary_driver
    assert explanation.tools_appeared == ("db_query",)
    assert explanation.tools_disappeared == ("extract_records", "summarize")
    assert explanation.tools_shifted == ()  # web_search 33% → 25%: under the 15-point threshold
    moved = {m.dimension: m for m in explanation.complexity_moved}
    assert moved["llm_calls"].baseline_mean == 3.0 and moved["llm_calls"].value == 9.0
    assert explanation.semantic_distance == score.semantic_distance
    assert explanation.sample.startswith("Not confident")
    assert len(explanation.diverged_from) == 3
    assert explanation.diverged_from[0].divergence >= explanation.diverged_from[-1].divergence
    text = score.explanation_text()
    for part in (
        "primary driver",
        "appeared db_query",
        "llm_calls 3→9",
        "Semantic distance",
        "Diverged most",
    ):
        assert part in text, text
    assert explanation.recommendation and explanation.recommendation in text
    assert score.to_dict()["explanation"]["tools_appeared"] == ["db_query"]
    calm = DriftScorer().score(run(index=51), baseline)
    assert calm.explanation is not None
    assert calm.explanation.recommendation.startswith("No action needed")


def test_shifted_share_is_reported() -> None:
    baseline = baseline_of(*(run({"search": 1, "extract": 1}, index=i) for i in range(5)))
    score = DriftScorer().score(run({"search": 5, "extract": 1}, index=9), baseline)
    assert score.explanation is not None
    (shift,) = [s for s in score.explanation.tools_shifted if s.tool == "search"]
    assert (shift.baseline_share, shift.run_share) == (pytest.approx(0.5), pytest.approx(5 / 6))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weights": (1, 1)}, "three finite numbers"),
        ({"weights": (0, 0, 0)}, "must not all be 0"),
        ({"weights": (-1, 1, 1)}, "three finite numbers"),
        ({"weights": (float("nan"), 1, 1)}, "three finite numbers"),
        ({"z_cap": 0}, "z_cap"),
        ({"sigma_floors": {"bogus": 1.0}}, "unknown dimensions: bogus"),
        ({"sigma_floors": {"errors": 0.0}}, "sigma_floors values must be > 0"),
        ({"relative_sigma_floors": {"errors": -1.0}}, "relative_sigma_floors values must be >= 0"),
        ({"shift_threshold": 0}, "shift_threshold"),
    ],
)
def test_bad_configuration_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DriftConfig(**kwargs)


def test_weights_are_normalized() -> None:
    assert DriftConfig(weights=(7, 8, 5)).normalized_weights == pytest.approx((0.35, 0.40, 0.25))


# --- embedders -----------------------------------------------------------------------------------


def test_hashing_embedder_blocks_and_units() -> None:
    rows = EMBEDDER.embed(["Maybe not; unclear.", "Searched the web.", "", "the of and"])
    (lex_start, lex_stop, lex_w), (st_start, st_stop, st_w) = EMBEDDER.blocks
    assert (lex_start, lex_stop, st_stop, lex_w + st_w) == (0, EMBEDDER.dim - 5, EMBEDDER.dim, 1.0)
    assert np.linalg.norm(rows[0, :lex_stop]) == pytest.approx(1.0)
    assert np.linalg.norm(rows[0, st_start:]) == pytest.approx(1.0)  # tentative + negation cues
    assert np.linalg.norm(rows[1, st_start:]) == 0.0  # no stance cue
    assert not rows[2].any() and not rows[3].any()  # empty / stop words only
    plain = HashingEmbedder(256, stance_weight=0.0, bigrams=False)
    assert plain.blocks == ((0, 256, 1.0),) and plain.name == "hashing-v1(uni,stance=0)"
    assert np.linalg.norm(plain.embed(["Searched the web."])[0]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="dim"):
        HashingEmbedder(4)
    with pytest.raises(ValueError, match="stance_weight"):
        HashingEmbedder(stance_weight=1.0)


def test_hashing_embedder_is_deterministic_across_processes() -> None:
    text = "Chose web_search — fast, structured results; GPT-5 v1.2 costs 3.14 per call."
    code = (
        "from tracehound.drift import HashingEmbedder; import hashlib; "
        f"print(hashlib.sha256(HashingEmbedder().embed([{text!r}]).tobytes()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    import hashlib

    assert digests == {hashlib.sha256(EMBEDDER.embed([text]).tobytes()).hexdigest()}


def test_sentence_transformer_embedder_needs_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match=r"pip install 'tracehound\[embeddings\]'"):
        SentenceTransformerEmbedder(tmp_path)
    with pytest.raises(ValueError, match="not a directory"):
        SentenceTransformerEmbedder(tmp_path / "missing")


def test_sentence_transformer_embedder_adapter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    calls: list[dict[str, Any]] = []

    class FakeModel:
        def __init__(self, path: str, device: Any = None, local_files_only: bool = False) -> None:
            calls.append({"path": path, "local_files_only": local_files_only})

        def get_sentence_embedding_dimension(self) -> int:
            return 3

        def encode(self, texts: list[str], **kwargs: Any) -> np.ndarray[Any, Any]:
            assert kwargs["normalize_embeddings"] is True
            return np.array([[1.0, 0.0, 0.0] for _ in texts])

    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = FakeModel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    model_dir = tmp_path / "all-MiniLM-L6-v2"
    model_dir.mkdir()
    embedder = SentenceTransformerEmbedder(model_dir)
    assert calls == [{"path": str(model_dir), "local_files_only": True}]
    assert (embedder.name, embedder.dim, embedder.blocks) == (
        "st:all-MiniLM-L6-v2",
        3,
        ((0, 3, 1.0),),
    )
    rows = embedder.embed(["a", "", "b"])
    assert rows.tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    features = RunFeatures(
        run_id="r", embedding=embed_run(["a", "b"], embedder), complexity=(1.0,) * 10
    )
    baseline = Baseline.from_run(features, embedder)
    assert DriftScorer().score(features, baseline, embedder=embedder).semantic == 0.0
