"""The loop corpus against its labels and against the real `tracecheck` package.

- Every failure mode tracecheck 0.7.0 reports on a corpus trace (its own JSONL ingest, its
  `FailureModesEvaluator` called directly) is reported by tracehound on the same trace:
  `infinite_loop` as a `repeat` loop — unless every repetition of the repeated call made
  progress (`corpus.results_change`: a new output each time, or success after a failure, within
  the poll budget), the deliberate difference, where tracehound reports no `repeat`;
  `context_window_overflow` as such, `tool_call_error` as such — or as
  `context_window_overflow` where tracehound recognizes the error as one
  (`error.type`, provider wordings tracecheck does not know).
- Precision and recall per kind against `labels.json` are at least 0.95.
- The committed corpus is what its generator writes, and it covers every kind and the hard
  negatives.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "loops"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


corpus = _load("loops_corpus", CORPUS / "loops_corpus.py")
generate = _load("loops_corpus_generate", CORPUS / "generate.py")

TARGET = 0.95


@cache
def expected() -> dict[str, frozenset[str]]:
    return corpus.labels()


@cache
def tracehound_found() -> dict[str, frozenset[str]]:
    return {t: o.kinds for t, o in corpus.run_tracehound(corpus.spans_by_trace()).items()}


@cache
def tracecheck_found() -> dict[str, frozenset[str]]:
    return corpus.run_tracecheck()


def test_corpus_is_what_the_generator_writes() -> None:
    files = generate.build()
    for rel, data in files.items():
        assert (CORPUS / rel).read_bytes() == data, f"{rel} is stale: run generate.py"
    committed = {p.relative_to(CORPUS).as_posix() for p in (CORPUS / "otlp").glob("*.jsonl")}
    assert committed == {rel for rel in files if rel.startswith("otlp/")}


def test_corpus_covers_every_kind_and_the_hard_negatives() -> None:
    labels = expected()
    traces = corpus.spans_by_trace()
    assert len(labels) >= 200
    assert set(traces) == set(labels)
    support = Counter(kind for kinds in labels.values() for kind in kinds)
    for kind in corpus.KINDS:
        assert support[kind] >= 10, (kind, support[kind])
    scenarios = Counter(corpus.scenario_of(spans) for spans in traces.values())
    negatives = {
        "pagination_0",
        "pagination_1",
        "pagination_2",
        "fanout_0",
        "fanout_1",
        "fanout_2",
        "fanout_3",
        "polling",
        "retry_once",
        "sequential_0",
        "sequential_1",
        "sequential_2",
        "sequential_3",
        "refine",
        "sub_agents_once",
        "outputs_across_runs",
        "near_miss",
        "clean",
    }
    assert negatives <= set(scenarios), negatives - set(scenarios)
    no_loop = [t for t, kinds in labels.items() if not kinds & set(corpus.LOOP_KINDS)]
    assert len(no_loop) >= 80
    # the tracecheck export holds the same traces
    lines = corpus.TRACECHECK_FILE.read_text("utf-8").splitlines()
    tracecheck_ids = [json.loads(line)["trace_id"] for line in lines]
    assert sorted(tracecheck_ids) == sorted(labels)


def test_every_trace_tracecheck_flags_is_flagged_by_tracehound() -> None:
    theirs = tracecheck_found()
    mine = tracehound_found()
    flagged = {t for t, modes in theirs.items() if modes}
    assert len(flagged) >= 100  # the comparison is not vacuous
    assert {m for modes in theirs.values() for m in modes} == set(corpus.TRACECHECK_MODES)
    changing = corpus.results_change()
    misses = []
    for trace_id, modes in sorted(theirs.items()):
        found = mine[trace_id]
        for mode in modes:
            if mode == "infinite_loop":
                ok = "repeat" in found or changing[trace_id]
            elif mode == "tool_call_error":
                ok = bool(found & {"tool_call_error", "context_window_overflow"})
            else:
                ok = mode in found
            if not ok:
                misses.append((trace_id, mode, sorted(found)))
    assert misses == []


def test_where_every_repetition_made_progress_tracehound_reports_no_repeat() -> None:
    theirs = tracecheck_found()
    mine = tracehound_found()
    changing = corpus.results_change()
    progress = [t for t, m in theirs.items() if "infinite_loop" in m and "repeat" not in mine[t]]
    assert len(progress) >= 10  # polls and backoff that tracecheck calls infinite loops
    assert all(changing[t] for t in progress)
    assert [t for t in progress if "repeat" in expected()[t]] == []


def test_tracehound_adds_what_tracecheck_cannot_see() -> None:
    """Cycles are caught by both (each call repeats); the other kinds only by tracehound."""
    theirs = tracecheck_found()
    mine = tracehound_found()
    only_mine = Counter()
    for trace_id, found in mine.items():
        if found & set(corpus.LOOP_KINDS) and "infinite_loop" not in theirs[trace_id]:
            only_mine.update(found & set(corpus.LOOP_KINDS))
    assert only_mine["near_duplicate"] >= 10
    assert only_mine["no_progress"] >= 10
    assert only_mine["output_repeat"] >= 10


@pytest.mark.parametrize("kind", corpus.KINDS)
def test_precision_and_recall_per_kind(kind: str) -> None:
    (score,) = corpus.score(expected(), tracehound_found(), (kind,))
    detail = {
        t: found
        for t, found in corpus.mismatches(expected(), tracehound_found()).items()
        if kind in found[0] or kind in found[1]
    }
    assert score.precision >= TARGET, detail
    assert score.recall >= TARGET, detail
