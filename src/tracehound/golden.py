"""Golden-trace comparison: each agent run's path against a pinned golden run of the same agent.

The `proveai-sdk` snapshot / verify idea without re-running anything: golden traces are plain OTLP
files kept in the repository; `tracehound eval --against GOLDEN NEW...` compares the runs of the
new traces with the golden runs of the same agent key and gates on the verdicts.

**Path of a run** — the multiset of its child steps, counted from the run's own steps (nested
agents have their own paths):

- `llm` — one per LLM call;
- `tool:NAME` — one per tool call;
- `retrieval:SOURCE` — one per retrieval;
- `agent:NAME` — one per agent invoked directly by this run (a nested run);

plus its error count (failed tool results and error spans) and whether it produced a final answer
(`Trajectory.final_answer`). Runs are those the drift evaluator observes: every agent run, or the
whole trace when it has no agent span; the key is `service.name/agent name` by default.

**Facts** of a comparison (golden run G, new run R):

- `path_changed`: the *set* of child steps differs (`added`: in R only, `removed`: in G only);
- `iteration_count_changed`: same set, different counts (`count_changes`: step → [G, R]);
- `errors_appeared`: R has more error steps than G;
- `answer_lost`: G produced a final answer and R did not.

**Verdict**:

- `regressed` — the final answer was lost; or the path changed and an expected step is missing
  (`removed` is not empty: a tool, retrieval source or sub-agent of G that R never used); or the
  path changed and errors appeared;
- `drifted` — not regressed, but the path changed (only additions), the iteration counts changed,
  or errors appeared;
- `unchanged` — the same multiset of child steps, no new error, the answer kept.

An agent with several golden runs (several golden traces, or one agent invoked several times)
is compared with the closest of them: best verdict first, then fewest added/removed steps, then
smallest count difference. A run whose agent has no golden run is reported as `no_golden`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracehound import names
from tracehound.evaluators.base import EvaluationResult, Evaluator, TraceInfo
from tracehound.evaluators.drift import AgentKey, default_agent_key
from tracehound.spans import AttributeValue
from tracehound.steps import Run, Trajectory

__all__ = [
    "NOT_SEEN",
    "NO_GOLDEN",
    "AgentSummary",
    "Comparison",
    "GoldenEvaluator",
    "GoldenSet",
    "PathCollector",
    "RunPath",
    "compare_paths",
    "observed_runs",
    "run_path",
    "summarize",
]

NO_GOLDEN = "no_golden"
"""Label of a run whose agent has no golden run."""
NOT_SEEN = "not_seen"
"""Per-agent summary status of a golden agent that no new run matched."""
_RANK = {v: i for i, v in enumerate(names.GOLDEN_VERDICTS)}


@dataclass(frozen=True, slots=True)
class RunPath:
    """What a comparison looks at in one run."""

    key: str
    trace_id: str
    run_id: str
    steps: Mapping[str, int]
    """Child step → count (`llm`, `tool:NAME`, `retrieval:SOURCE`, `agent:NAME`)."""
    errors: int = 0
    answered: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.key,
            "trace_id": self.trace_id,
            "run_id": self.run_id,
            "steps": dict(sorted(self.steps.items())),
            "errors": self.errors,
            "answered": self.answered,
        }


def observed_runs(trajectory: Trajectory) -> list[Run]:
    """The runs compared (and drift-scored): the agent runs, else the implicit whole-trace run."""
    if not trajectory.steps:
        return []
    agent_runs = [r for r in trajectory.runs if not r.implicit]
    return agent_runs or list(trajectory.runs)


def run_path(trajectory: Trajectory, run: Run, key: str) -> RunPath:
    """The path of one run of a trajectory."""
    steps: Counter[str] = Counter()
    errors = 0
    for step in trajectory.run_steps(run.run_id):
        if step.kind == "llm":
            steps["llm"] += 1
        elif step.kind == "tool_call":
            steps[f"tool:{step.tool or '?'}"] += 1
        elif step.kind == "retrieval":
            steps[f"retrieval:{step.source or '?'}"] += 1
        elif step.kind == "error" or (step.kind == "tool_result" and step.error):
            errors += 1
    for child in trajectory.runs:
        if child.parent_run_id == run.run_id and not child.implicit:
            steps[f"agent:{child.agent_name}"] += 1
    return RunPath(
        key=key,
        trace_id=trajectory.trace_id,
        run_id=run.run_id,
        steps=dict(sorted(steps.items())),
        errors=errors,
        answered=bool(trajectory.final_answer(run.run_id)),
    )


@dataclass(frozen=True, slots=True)
class Comparison:
    """One run compared with one golden run (see the module docstring for the rules)."""

    key: str
    verdict: str
    golden: RunPath
    run: RunPath
    path_changed: bool
    iteration_count_changed: bool
    added: tuple[str, ...]
    removed: tuple[str, ...]
    count_changes: Mapping[str, tuple[int, int]]
    errors_appeared: bool
    answer_lost: bool

    def _closeness(self) -> tuple[int, int, int, int]:
        count_delta = sum(abs(g - r) for g, r in self.count_changes.values())
        errors = max(self.run.errors - self.golden.errors, 0)
        return (_RANK[self.verdict], len(self.added) + len(self.removed), count_delta, errors)

    def reasons(self) -> list[str]:
        """Short phrases, worst first; empty for an unchanged run."""
        out: list[str] = []
        if self.answer_lost:
            out.append("final answer lost")
        if self.path_changed:
            parts = []
            if self.removed:
                parts.append("removed " + ", ".join(self.removed))
            if self.added:
                parts.append("added " + ", ".join(self.added))
            out.append("path changed: " + "; ".join(parts))
        elif self.iteration_count_changed:
            moves = ", ".join(f"{s} {g}→{r}" for s, (g, r) in self.count_changes.items())
            out.append(f"iteration counts changed: {moves}")
        if self.errors_appeared:
            out.append(f"errors appeared ({self.golden.errors} → {self.run.errors})")
        return out

    def explanation(self) -> str:
        why = "; ".join(self.reasons()) or "same path, same counts, no new error"
        return f"{self.verdict} against golden trace {self.golden.trace_id}: {why}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.key,
            "verdict": self.verdict,
            "path_changed": self.path_changed,
            "iteration_count_changed": self.iteration_count_changed,
            "added": list(self.added),
            "removed": list(self.removed),
            "count_changes": {k: list(v) for k, v in self.count_changes.items()},
            "errors_appeared": self.errors_appeared,
            "answer_lost": self.answer_lost,
            "golden": self.golden.to_dict(),
            "run": self.run.to_dict(),
        }

    def attributes(self) -> dict[str, AttributeValue]:
        """The `tracehound.golden.*` attributes of the run's result."""
        return {
            names.ATTR_GOLDEN_AGENT: self.key,
            names.ATTR_GOLDEN_VERDICT: self.verdict,
            names.ATTR_GOLDEN_PATH_CHANGED: self.path_changed,
            names.ATTR_GOLDEN_ITERATION_COUNT_CHANGED: self.iteration_count_changed,
            names.ATTR_GOLDEN_ADDED: self.added,
            names.ATTR_GOLDEN_REMOVED: self.removed,
            names.ATTR_GOLDEN_COUNT_CHANGES: json.dumps(
                {k: list(v) for k, v in self.count_changes.items()}, sort_keys=True
            ),
            names.ATTR_GOLDEN_ERRORS: self.run.errors,
            names.ATTR_GOLDEN_ERRORS_APPEARED: self.errors_appeared,
            names.ATTR_GOLDEN_ANSWER_LOST: self.answer_lost,
            names.ATTR_GOLDEN_TRACE_ID: self.golden.trace_id,
        }


def compare_paths(golden: RunPath, run: RunPath) -> Comparison:
    """Compare a run's path with a golden run's (the rules are in the module docstring)."""
    golden_set, run_set = set(golden.steps), set(run.steps)
    added = tuple(sorted(run_set - golden_set))
    removed = tuple(sorted(golden_set - run_set))
    path_changed = bool(added or removed)
    count_changes = {
        step: (golden.steps.get(step, 0), run.steps.get(step, 0))
        for step in sorted(golden_set | run_set)
        if golden.steps.get(step, 0) != run.steps.get(step, 0)
    }
    iteration_count_changed = not path_changed and bool(count_changes)
    errors_appeared = run.errors > golden.errors
    answer_lost = golden.answered and not run.answered
    if answer_lost or (path_changed and (removed or errors_appeared)):
        verdict = "regressed"
    elif path_changed or iteration_count_changed or errors_appeared:
        verdict = "drifted"
    else:
        verdict = "unchanged"
    return Comparison(
        key=run.key,
        verdict=verdict,
        golden=golden,
        run=run,
        path_changed=path_changed,
        iteration_count_changed=iteration_count_changed,
        added=added,
        removed=removed,
        count_changes=count_changes,
        errors_appeared=errors_appeared,
        answer_lost=answer_lost,
    )


class GoldenSet:
    """The golden runs, by agent key."""

    __slots__ = ("by_key", "sources")

    def __init__(self, paths: Iterable[RunPath] = (), *, sources: Sequence[str] = ()) -> None:
        self.by_key: dict[str, list[RunPath]] = {}
        for path in paths:
            self.by_key.setdefault(path.key, []).append(path)
        self.sources = tuple(sources)
        """Where the golden traces came from (for messages)."""

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_key.values())

    def keys(self) -> list[str]:
        return sorted(self.by_key)

    def compare(self, run: RunPath) -> Comparison | None:
        """The comparison with the closest golden run of the same agent (None: no golden run)."""
        goldens = self.by_key.get(run.key)
        if not goldens:
            return None
        return min((compare_paths(g, run) for g in goldens), key=Comparison._closeness)


class PathCollector(Evaluator):
    """Records the path of every observed run (to build a `GoldenSet` from golden traces)."""

    name = "golden-paths"
    version = "1.0.0"

    def __init__(self, *, key: AgentKey = default_agent_key) -> None:
        self.key = key
        self.paths: list[RunPath] = []

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        for run in observed_runs(trajectory):
            self.paths.append(run_path(trajectory, run, self.key(run, trace)))
        return ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """One compared run (kept by `GoldenEvaluator` for the per-agent summary)."""

    path: RunPath
    comparison: Comparison | None


class GoldenEvaluator(Evaluator):
    """Compares each observed run with the golden runs of its agent: one `tracehound.golden`
    result per run, labelled with the verdict (`no_golden` when the agent has none).

    With `record` (offline use), every comparison is also kept in `outcomes`, for `summarize`;
    a long-running pipeline passes `record=False`.
    """

    name = "golden"
    version = "1.0.0"

    def __init__(
        self, golden: GoldenSet, *, key: AgentKey = default_agent_key, record: bool = True
    ) -> None:
        self.golden = golden
        self.key = key
        self.record = record
        self.outcomes: list[Outcome] = []

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        results = []
        for run in observed_runs(trajectory):
            path = run_path(trajectory, run, self.key(run, trace))
            comparison = self.golden.compare(path)
            if self.record:
                self.outcomes.append(Outcome(path, comparison))
            span_id = None if run.implicit else run.span_id
            if comparison is None:
                results.append(
                    EvaluationResult(
                        name=names.EVAL_GOLDEN,
                        evaluator=self.name,
                        evaluator_version=self.version,
                        span_id=span_id,
                        score_label=NO_GOLDEN,
                        explanation=f"no golden run of agent {path.key!r}: not compared",
                        attributes={names.ATTR_GOLDEN_AGENT: path.key},
                    )
                )
                continue
            results.append(
                EvaluationResult(
                    name=names.EVAL_GOLDEN,
                    evaluator=self.name,
                    evaluator_version=self.version,
                    span_id=span_id,
                    score_label=comparison.verdict,
                    explanation=comparison.explanation()[:1000],
                    attributes=comparison.attributes(),
                )
            )
        return results


@dataclass(frozen=True, slots=True)
class AgentSummary:
    """Per agent: the worst verdict over its runs (`no_golden` / `not_seen` when unmatched)."""

    key: str
    status: str
    runs: int
    golden_runs: int
    verdicts: Mapping[str, int] = field(default_factory=dict)
    worst: Comparison | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.key,
            "verdict": self.status,
            "runs": self.runs,
            "golden_runs": self.golden_runs,
            "verdicts": dict(self.verdicts),
            "path_changed": self.worst.path_changed if self.worst else False,
            "iteration_count_changed": (
                self.worst.iteration_count_changed if self.worst else False
            ),
            "worst": self.worst.to_dict() if self.worst else None,
        }


def summarize(outcomes: Iterable[Outcome], golden: GoldenSet) -> list[AgentSummary]:
    """One summary per agent seen in the new runs or in the golden set, sorted by key."""
    by_key: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        by_key.setdefault(outcome.path.key, []).append(outcome)
    out: list[AgentSummary] = []
    for key in sorted(set(by_key) | set(golden.by_key)):
        seen = by_key.get(key, [])
        golden_runs = len(golden.by_key.get(key, ()))
        comparisons = [o.comparison for o in seen if o.comparison is not None]
        if not seen:
            out.append(AgentSummary(key, NOT_SEEN, 0, golden_runs))
            continue
        if not comparisons:
            out.append(AgentSummary(key, NO_GOLDEN, len(seen), golden_runs))
            continue
        worst = max(comparisons, key=Comparison._closeness)
        verdicts = Counter(c.verdict for c in comparisons)
        out.append(
            AgentSummary(
                key,
                worst.verdict,
                len(seen),
                golden_runs,
                {v: verdicts[v] for v in names.GOLDEN_VERDICTS if verdicts[v]},
                worst,
            )
        )
    return out
