"""`reasontrace`'s five drift scenarios in both ports (OTLP/JSON and SDK-recorded), the WordLlama
embedder, sustained drift (episodes, hysteresis, `baseline accept`) on SQLite and Redis.

Acceptance (issue 19): every drifted run flagged (`warning` or worse) with the right primary
driver, not only the first; no false positive on the control; no drifted run learned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _drift_ports import PORTS, SCENARIO_NAMES, case, passed, port_rows, verdict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import names as N
from tracehound.baselines import BaselineStore, MemoryStore, SQLiteStore, open_store
from tracehound.cli import main
from tracehound.drift import (
    BaselineMismatchError,
    HashingEmbedder,
    WordLlamaEmbedder,
    default_embedder,
)
from tracehound.drift._embed import wordllama_directory

pytestmark = pytest.mark.skipif(
    wordllama_directory() is None, reason="tracehound[semantic] (wordllama) is not installed"
)

KEY_A = "research-service/planner"


@pytest.fixture(scope="module")
def embedder() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


@pytest.mark.parametrize("port", PORTS)
@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_every_drifted_run_is_flagged_with_the_right_driver(
    port: str, name: str, embedder: WordLlamaEmbedder
) -> None:
    scenario = case(port, name)
    rows = port_rows(scenario, embedder=embedder)
    result = verdict(rows, scenario)
    assert passed(result), result
    drifted = [r for r in rows if r.drifted]
    if name == "control":
        assert not drifted and all(r.updated for r in rows)
        assert all(r.drifting_runs == 0 for r in rows)
        return
    assert len(drifted) == 5
    # the shift persists, and so does the report: drifting runs count up, since stays put
    assert [r.drifting_runs for r in drifted] == [1, 2, 3, 4, 5]
    assert len({r.drifting_since for r in drifted}) == 1
    assert not any(r.updated for r in drifted)


def test_the_default_embedder_is_wordllama_when_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TRACEHOUND_EMBEDDER", raising=False)
    chosen = default_embedder()
    assert isinstance(chosen, WordLlamaEmbedder)
    assert chosen.name == "wordllama-l2_supercat-256(stance=0.3)" and chosen.dim == 261
    monkeypatch.setenv("TRACEHOUND_EMBEDDER", "hashing")
    assert isinstance(default_embedder(), HashingEmbedder)
    monkeypatch.setenv("TRACEHOUND_EMBEDDER", "bert")
    with pytest.raises(ValueError, match="TRACEHOUND_EMBEDDER='bert'"):
        default_embedder()


def test_wordllama_vectors_are_deterministic_and_unit(embedder: WordLlamaEmbedder) -> None:
    texts = ["The refund went through.", "", "Maybe it could work, I am not sure.", "   "]
    rows = embedder.embed(texts)
    again = WordLlamaEmbedder().embed(texts)
    assert np.array_equal(rows, again)
    assert rows.shape == (4, 261)
    assert np.linalg.norm(rows[0, :256]) == pytest.approx(1.0)
    assert not rows[1].any() and not rows[3].any()
    assert rows[0, 256:].any() is np.False_  # no cue word: empty stance block
    assert np.linalg.norm(rows[2, 256:]) == pytest.approx(1.0)


_PIECE_TEXTS = st.text(
    alphabet=st.sampled_from(list(" ab.,\t\n\u2581\u00e9\u65e5\U0001f642-_1")), max_size=40
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.one_of(_PIECE_TEXTS, st.text(max_size=60)))
def test_word_pieces_give_the_tokenizers_ids(embedder: WordLlamaEmbedder, text: str) -> None:
    """Tokenizing piece by piece (the cache) gives exactly `encode`'s ids, so the vectors are
    the ones the whole-text tokenizer gives."""
    assert embedder._pieces  # the packaged tokenizer is one the pieces are exact for
    expected = embedder._tokenizer.encode(text, add_special_tokens=False).ids
    assert embedder._ids_by_piece(text) == expected
    assert embedder._ids_by_piece(text) == expected  # from the cache too


def test_word_pieces_on_prose_match_the_whole_text_path(embedder: WordLlamaEmbedder) -> None:
    prose = (
        "The order A-1042 is  PENDING_REVIEW at warehouse Troms\u00f8-7; ticket ZX-5519 (\u2018"
        "see notes\u2019) \u2014 retry in 30s.\nNext:   call get_order_status again \U0001f642"
    )
    texts = [prose, prose.upper(), " lead", "trail ", "", "   "]
    whole = WordLlamaEmbedder()
    whole._pieces = False  # the reference: each text through `encode` whole
    assert np.array_equal(embedder.embed(texts), whole.embed(texts))


def test_wordllama_without_its_files_fails_with_the_install_hint(tmp_path: Path) -> None:
    with pytest.raises(ImportError, match=r"pip install 'tracehound\[semantic\]'"):
        WordLlamaEmbedder(tmp_path)


def test_a_hashing_baseline_refuses_wordllama_runs(embedder: WordLlamaEmbedder) -> None:
    scenario = case("sdk", "control")
    store = MemoryStore()
    port_rows(scenario, store=store, embedder=HashingEmbedder())
    (info,) = store.list()
    stored = store.get(info.key)
    assert stored is not None
    with pytest.raises(BaselineMismatchError) as caught:
        stored.check_compatible(embedder.name, embedder.dim, embedder.blocks)
    message = str(caught.value)
    assert "\n" not in message and "hashing-v1" in message and "wordllama" in message


def test_results_are_the_same_on_the_pure_python_path(
    monkeypatch: pytest.MonkeyPatch, embedder: WordLlamaEmbedder
) -> None:
    from tracehound import _accel

    scenario = case("otlp-json", "semantic_drift")
    native = port_rows(scenario, embedder=embedder)
    monkeypatch.setattr(_accel, "kernel", lambda name: None)
    pure = port_rows(scenario, embedder=embedder)
    assert [(r.severity, r.driver, r.updated, r.drifting_runs) for r in native] == [
        (r.severity, r.driver, r.updated, r.drifting_runs) for r in pure
    ]
    for a, b in zip(native, pure, strict=True):
        assert a.score == pytest.approx(b.score, abs=1e-12)


# --- sustained drift on the persistent stores ---------------------------------------------------


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_sustained_drift_stays_visible_until_accepted(
    kind: str,
    tmp_path: Path,
    embedder: WordLlamaEmbedder,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    location = (
        str(tmp_path / "baselines.sqlite3")
        if kind == "sqlite"
        else str(request.getfixturevalue("redis_url"))
    )
    store: BaselineStore = open_store(location)
    try:
        scenario = case("otlp-json", "tool_drift")
        rows = port_rows(scenario, store=store, embedder=embedder)
        drifted = [r for r in rows if r.drifted]
        assert [r.drifting_runs for r in drifted] == [1, 2, 3, 4, 5]
        assert all(r.severity != "none" and r.driver == "tool_mix" for r in drifted)
        baseline = store.get(KEY_A)
        episode = store.get(KEY_A + N.DRIFT_EPISODE_SUFFIX)
        assert baseline is not None and baseline.runs == 10  # the drifted runs were not learned
        assert episode is not None and episode.runs == 5
    finally:
        store.close()
    # `baseline list` shows the open episode as the agent's DRIFTING count, not as a row
    code, text = _run_cli(["baseline", "list", "--baselines", location], capsys)
    assert code == 0, text
    assert "DRIFTING" in text and N.DRIFT_EPISODE_SUFFIX not in text
    row = next(line.split() for line in text.splitlines() if line.startswith(KEY_A))
    assert row[1:3] == ["10", "5"]
    code, text = _run_cli(["baseline", "list", "--baselines", location, "--format", "json"], capsys)
    listed = json.loads(text)["baselines"]
    assert [(b["agent"], b["runs"], b["drifting_runs"]) for b in listed] == [(KEY_A, 10, 5)]
    code, text = _run_cli(["baseline", "accept", KEY_A, "--baselines", location], capsys)
    assert code == 0, text
    assert "5 drifted run(s)" in text and "10 run(s)" in text
    store = open_store(location)
    try:
        accepted = store.get(KEY_A)
        assert accepted is not None and accepted.runs == 5
        assert store.get(KEY_A + N.DRIFT_EPISODE_SUFFIX) is None
        # the accepted behaviour is the new normal: runs like the drifted ones score `none`
        again = port_rows(_only(scenario, range(10, 15)), store=store, embedder=embedder)
        assert again and all(r.severity == "none" and r.drifting_runs == 0 for r in again)
    finally:
        store.close()
    code, text = _run_cli(["baseline", "reset", KEY_A, "--baselines", location], capsys)
    assert code == 0, text
    code, text = _run_cli(["baseline", "accept", KEY_A, "--baselines", location], capsys)
    assert code == 2 and KEY_A in text


def _only(scenario: Any, indices: range) -> Any:
    from dataclasses import replace

    return replace(
        scenario,
        traces=[scenario.traces[i] for i in indices],
        drifted=[False for _ in indices],
    )


def test_a_run_back_to_normal_ends_the_episode(embedder: WordLlamaEmbedder) -> None:
    """Hysteresis: once drifting, a run stays in the episode until it scores below
    `release_at` (0.15); that run is learned and ends the episode."""
    scenario = case("sdk", "tool_drift")
    steady = case("sdk", "control")
    mixed = type(scenario)(
        port="sdk",
        name="back",
        driver="tool_mix",
        baseline_runs=10,
        traces=[*scenario.traces[:12], *steady.traces[3:10]],
        drifted=[*scenario.drifted[:12], *[False] * 7],
    )
    store = MemoryStore()
    rows = port_rows(mixed, store=store, embedder=embedder)
    after = [r for r in rows if r.index >= 12]
    assert [r.drifting_runs for r in rows if r.index in (10, 11)] == [1, 2]
    released = next(i for i, r in enumerate(after) if r.score < 0.15)
    assert released >= 1  # the first steady run (0.17) is still above `release_at`
    for k, row in enumerate(after[:released]):
        assert row.severity == "warning" and row.drifting_runs == 3 + k and not row.updated
        assert "Drifting since" in row.explanation and "No action needed" not in row.explanation
    assert after[released].drifting_runs == 0 and after[released].updated
    assert "Drifting since" not in after[released].explanation
    assert all(r.drifting_runs == 0 for r in after[released:])
    assert store.get(KEY_B + N.DRIFT_EPISODE_SUFFIX) is None


KEY_B = "support-desk/order-assistant"


def test_accept_without_drift_says_so(
    tmp_path: Path, embedder: WordLlamaEmbedder, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "b.sqlite3"
    store = SQLiteStore(path)
    port_rows(case("sdk", "control"), store=store, embedder=embedder)
    store.close()
    code, text = _run_cli(["baseline", "accept", KEY_B, "--baselines", str(path)], capsys)
    assert code == 0 and "not drifting" in text


def test_the_embedder_setting_is_checked_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracehound.drift import _embed, embedder_setting

    monkeypatch.setenv("TRACEHOUND_EMBEDDER", " Hashing ")
    assert embedder_setting() == "hashing"
    monkeypatch.setenv("TRACEHOUND_EMBEDDER", "auto")
    assert embedder_setting() == "wordllama"
    monkeypatch.setattr(_embed, "wordllama_directory", lambda: None)
    assert embedder_setting() == "hashing"  # auto without the extra: the fallback
    monkeypatch.setenv("TRACEHOUND_EMBEDDER", "wordllama")
    with pytest.raises(
        ValueError, match=r"^TRACEHOUND_EMBEDDER=wordllama: .*tracehound\[semantic\]"
    ):
        embedder_setting()


def test_drifting_runs_become_a_metric(embedder: WordLlamaEmbedder) -> None:
    from tracehound.emit import result_measurements
    from tracehound.engine import Engine
    from tracehound.evaluators.drift import DriftEvaluator

    scenario = case("otlp-json", "tool_drift")
    engine = Engine([DriftEvaluator(MemoryStore(), embedder=embedder)])
    points = []
    for views in scenario.traces:
        for view in views:
            engine.add_span(view)
        (finalized,) = engine.flush()
        (result,) = [r for r in finalized.results if r.name == N.EVAL_DRIFT]
        points.extend(
            m.value
            for m in result_measurements(result, "a")
            if m.instrument == N.METRIC_DRIFT_DRIFTING_RUNS
        )
    assert points == [1, 2, 3, 4, 5]


_STEADY = [*case("sdk", "control").traces, *case("sdk", "complexity_drift").traces[:10]]
_DRIFT = [*case("sdk", "tool_drift").traces[10:], *case("sdk", "combined_drift").traces[10:]]
"""Traces of one agent (each used once per example: the engine finalizes a trace once)."""


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.booleans(), min_size=4, max_size=10))
def test_every_scored_run_is_learned_or_drifting_never_both(pattern: list[bool]) -> None:
    """Whatever the order of steady and drifted runs: each scored run either joins the baseline
    or the episode; an episode counts its runs one by one; the baseline holds the learned ones."""
    embedder = _shared_embedder()
    traces = [*_STEADY[:6]]
    steady, drift = iter(_STEADY[6:]), iter(_DRIFT)
    traces += [next(drift) if flag else next(steady) for flag in pattern]
    scenario = type(case("sdk", "control"))(
        port="sdk",
        name="mixed",
        driver=None,
        baseline_runs=6,
        traces=traces,
        drifted=[False] * 6 + pattern,
    )
    store = MemoryStore()
    rows = port_rows(scenario, store=store, embedder=embedder)
    previous = 0
    for row in rows:
        assert row.updated != (row.drifting_runs > 0), row
        assert row.drifting_runs in (0, previous + 1), row
        previous = row.drifting_runs
    baseline = store.get(KEY_B)
    assert baseline is not None and baseline.runs == 1 + sum(r.updated for r in rows)
    episode = store.get(KEY_B + N.DRIFT_EPISODE_SUFFIX)
    assert (episode.runs if episode is not None else 0) == rows[-1].drifting_runs


_EMBEDDER: list[WordLlamaEmbedder] = []


def _shared_embedder() -> WordLlamaEmbedder:
    if not _EMBEDDER:
        _EMBEDDER.append(WordLlamaEmbedder())
    return _EMBEDDER[0]
