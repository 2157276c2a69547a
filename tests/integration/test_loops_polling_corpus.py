"""The polling corpus (`tests/corpus/loops_polling`, hand-written scenario tables) against its
labels and against the real `tracecheck` package.

- The committed files are what `scenarios.py` writes; the tables cover every case they are
  meant to (status words, percentages, counters, JSON fields, long and short results,
  timestamps, cursors, retries) on both sides.
- Precision and recall of every kind with support, and of "any loop", are at least 0.95.
- Every trace tracecheck flags `infinite_loop` is flagged `repeat` by tracehound unless every
  repetition made progress (`corpus.results_change`), and those are exactly the traces labelled
  without a loop.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

CORPORA = Path(__file__).resolve().parents[1] / "corpus"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


corpus = _load("loops_corpus", CORPORA / "loops" / "loops_corpus.py")
tables = _load("loops_polling_scenarios", CORPORA / "loops_polling" / "scenarios.py")
ROOT = corpus.POLLING
TARGET = 0.95


@cache
def expected() -> dict[str, frozenset[str]]:
    return corpus.labels(ROOT)


@cache
def found() -> dict[str, frozenset[str]]:
    return {t: o.kinds for t, o in corpus.run_tracehound(corpus.spans_by_trace(ROOT)).items()}


def test_files_are_what_the_tables_write() -> None:
    for rel, data in tables.build().items():
        assert (ROOT / rel).read_bytes() == data, f"{rel} is stale: run scenarios.py"


def test_tables_cover_progress_and_stuck_cases() -> None:
    labels = expected()
    traces = corpus.spans_by_trace(ROOT)
    assert set(labels) == set(traces) and len(labels) == len(tables.SCENARIOS)
    names = {corpus.scenario_of(spans): labels[t] for t, spans in traces.items()}
    loops = set(corpus.LOOP_KINDS)
    negatives = {n for n, kinds in names.items() if not kinds & loops}
    positives = set(names) - negatives
    assert len(negatives) >= 15 and len(positives) >= 15
    for name in (
        "job_status_words",
        "export_percentages",
        "upload_counter",
        "json_changing_field",
        "json_long_listing",
        "queue_position_short",
        "stream_cursor_same_call",
        "two_retries_then_success",
        "ten_polls_within_budget",
    ):
        assert name in negatives, name
    for name in (
        "status_word_identical",
        "timestamp_only_changes",
        "json_updated_at_only",
        "request_uuid_only",
        "epoch_seconds_only",
        "long_identical_log",
        "short_identical_empty",
        "polls_past_the_budget",
        "retries_never_succeed",
    ):
        assert name in positives, name
    shapes = Counter(s.shape for s in tables.SCENARIOS)
    assert set(shapes) == {"chat", "tools", "workflow"}


@pytest.mark.parametrize("kind", ["repeat", "consecutive", "no_progress", "retry_storm"])
def test_precision_and_recall_per_kind(kind: str) -> None:
    (score,) = corpus.score(expected(), found(), (kind,))
    assert score.support >= 2
    detail = corpus.mismatches(expected(), found())
    assert score.precision >= TARGET, detail
    assert score.recall >= TARGET, detail


def test_any_loop_precision_and_recall() -> None:
    loops = set(corpus.LOOP_KINDS)
    want = {t: frozenset({"loop"} if k & loops else ()) for t, k in expected().items()}
    got = {t: frozenset({"loop"} if k & loops else ()) for t, k in found().items()}
    (score,) = corpus.score(want, got, ("loop",))
    assert (score.precision, score.recall) == (1.0, 1.0), corpus.mismatches(want, got)


def test_tracecheck_infinite_loops_are_flagged_unless_every_repetition_made_progress() -> None:
    theirs = corpus.run_tracecheck(ROOT)
    changing = corpus.results_change(ROOT)
    loops = set(corpus.LOOP_KINDS)
    flagged = [t for t, modes in theirs.items() if "infinite_loop" in modes]
    assert len(flagged) >= 25
    for trace_id in flagged:
        if not changing[trace_id]:
            assert "repeat" in found()[trace_id], trace_id
    spared = {t for t in flagged if "repeat" not in found()[t]}
    assert spared == {t for t in flagged if not expected()[t] & loops}
    assert all(changing[t] for t in spared) and len(spared) >= 10
