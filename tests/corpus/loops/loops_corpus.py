"""The labelled loop corpora: reading them, running tracehound and tracecheck on them, scoring.

Two corpora share this layout (`otlp/*.jsonl`, `labels.json`, `tracecheck.jsonl`): this folder
(`generate.py`) and `../loops_polling` (hand-written scenario tables, `scenarios.py`); the
functions take the folder, this one by default.

Shared by `benchmarks/loop_corpus.py` and `tests/integration/test_loops_parity.py`
(module name distinct from the `tests/corpus` folder, which is importable as a package).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from tracehound import Engine
from tracehound.evaluators.loops import LoopConfig, LoopEvaluator
from tracehound.files import read_paths
from tracehound.names import (
    ATTR_FAILURE_MODES,
    ATTR_LOOPS_KINDS,
    EVAL_FAILURE_MODES,
    EVAL_LOOPS,
    FAILURE_MODES,
    LOOP_KINDS,
)
from tracehound.spans import SpanView

HERE = Path(__file__).resolve().parent
POLLING = HERE.parent / "loops_polling"
OTLP_DIR = HERE / "otlp"
TRACECHECK_FILE = HERE / "tracecheck.jsonl"
LABELS_FILE = HERE / "labels.json"
KINDS: tuple[str, ...] = (*LOOP_KINDS, *FAILURE_MODES)
TRACECHECK_MODES = ("infinite_loop", "context_window_overflow", "tool_call_error")


def labels(root: Path = HERE) -> dict[str, frozenset[str]]:
    data = json.loads((root / "labels.json").read_text("utf-8"))
    return {trace_id: frozenset(kinds) for trace_id, kinds in data.items()}


def spans_by_trace(root: Path = HERE) -> dict[str, list[SpanView]]:
    """Every corpus span, grouped by trace, in file order."""
    telemetry = read_paths([root / "otlp"])
    if telemetry.problems:
        raise ValueError(f"corpus files have problems: {telemetry.problems[:3]}")
    traces: dict[str, list[SpanView]] = defaultdict(list)
    for view in telemetry.spans:
        traces[view.trace_id].append(view)
    return dict(traces)


def scenario_of(spans: Iterable[SpanView]) -> str:
    for view in spans:
        scenario = view.get("corpus.scenario")
        if isinstance(scenario, str):
            return scenario
    return "?"


@dataclass(frozen=True)
class Outcome:
    """What tracehound found in one trace."""

    kinds: frozenset[str]
    tool_calls: int


def run_tracehound(
    traces: Mapping[str, Sequence[SpanView]], config: LoopConfig | None = None
) -> dict[str, Outcome]:
    """Each trace through one engine with only the loop evaluator; trace-level kinds found."""
    engine = Engine([LoopEvaluator(config)])
    for spans in traces.values():
        for view in spans:
            engine.add_span(view)
    return {f.trace_id: outcome_of(f) for f in engine.flush()}


def outcome_of(finalized: Any) -> Outcome:
    found: set[str] = set()
    for result in finalized.results:
        if result.name == EVAL_LOOPS:
            found.update(result.attributes[ATTR_LOOPS_KINDS])
        elif result.name == EVAL_FAILURE_MODES:
            found.update(result.attributes[ATTR_FAILURE_MODES])
    calls = sum(1 for s in finalized.trajectory.steps if s.kind == "tool_call")
    return Outcome(frozenset(found), calls)


def run_tracecheck(root: Path = HERE) -> dict[str, frozenset[str]]:
    """tracecheck's failure modes per trace, from its own JSONL ingest and evaluator."""
    from tracecheck.evaluators.failure_modes import FailureModesEvaluator
    from tracecheck.ingest.json import load_traces

    evaluator = FailureModesEvaluator()
    out: dict[str, frozenset[str]] = {}
    for trace in load_traces(root / "tracecheck.jsonl"):
        result = evaluator.evaluate(trace)
        out[trace.trace_id] = frozenset(result.metadata["modes"])
    return out


POLL_BUDGET = 10  # tracehound's default `LoopConfig.poll_budget`


def results_change(root: Path = HERE) -> dict[str, bool]:
    """Per trace of the tracecheck export: True when every call tracecheck counts as an
    `infinite_loop` (the same name and input 3+ times) made progress: from its third attempt
    on, each one succeeded with an output, after a failed attempt or with an output other than
    the previous attempt's; no two successive attempts returned the same output; at most
    `POLL_BUDGET` attempts. Read from the export alone (outputs compared exactly), not from
    tracehound."""
    out: dict[str, bool] = {}
    for line in (root / "tracecheck.jsonl").read_text("utf-8").splitlines():
        record = json.loads(line)
        attempts: dict[str, list[str | None]] = defaultdict(list)  # output; None: failed
        last: list[str | None] | None = None
        for step in record["steps"]:
            if step["type"] == "tool_call":
                key = step["name"] + "\0" + json.dumps(step["input"], sort_keys=True)
                last = attempts[key]
                last.append(step.get("output", "\0unknown"))
            elif step["type"] == "error" and last is not None and last:
                last[-1] = None
                last = None
            else:
                last = None
        changing = True
        for outcomes in attempts.values():
            if len(outcomes) < 3:
                continue
            if len(outcomes) > POLL_BUDGET:
                changing = False
            for k, (before, now) in enumerate(pairwise(outcomes), start=2):
                if before is not None and now == before:
                    changing = False  # the same output twice in a row (or both unknown)
                elif k >= 3 and (now is None or now == "\0unknown"):
                    changing = False  # a failed or unknown attempt
                elif k >= 3 and before == "\0unknown":
                    changing = False
        out[record["trace_id"]] = changing
    return out


@dataclass(frozen=True)
class Score:
    kind: str
    support: int
    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


def score(
    expected: Mapping[str, frozenset[str]],
    found: Mapping[str, frozenset[str]],
    kinds: Iterable[str] = KINDS,
    alias: Mapping[str, str] | None = None,
) -> list[Score]:
    """Per kind: true/false positives and false negatives over the labelled traces.

    `alias` renames found kinds before comparing (tracecheck's `infinite_loop` → `repeat`).
    """
    alias = alias or {}
    scores = []
    for kind in kinds:
        tp = fp = fn = support = 0
        for trace_id, want in expected.items():
            got = {alias.get(k, k) for k in found.get(trace_id, frozenset())}
            support += kind in want
            if kind in got and kind in want:
                tp += 1
            elif kind in got:
                fp += 1
            elif kind in want:
                fn += 1
        scores.append(Score(kind, support, tp, fp, fn))
    return scores


def mismatches(
    expected: Mapping[str, frozenset[str]], found: Mapping[str, frozenset[str]]
) -> dict[str, tuple[list[str], list[str]]]:
    """Trace id → (kinds missed, kinds found but not expected), for the traces that differ."""
    out = {}
    for trace_id, want in expected.items():
        got = found.get(trace_id, frozenset())
        if got != want:
            out[trace_id] = (sorted(want - got), sorted(got - want))
    return out
