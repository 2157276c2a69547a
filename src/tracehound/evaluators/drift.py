"""The `drift` evaluator: each run scored against its agent's baseline, which it then updates.

One observation per run: each agent run of the trace (an `invoke_agent` subtree, nested agents
each observed on their own), or the whole trace when it has no agent span; a trace without any
GenAI step (a plain HTTP request) has no run. The run's baseline key
is `service.name/agent name` by default (`DriftEvaluatorConfig.key`; the implicit run's agent
name is the trace's root span name).

For each run, at finalization: features (`tracehound.drift.run_features`), score against the
stored baseline (`DriftScorer`), then — unless updates are disabled, the baseline is pinned or the
trace was truncated (its runs are incomplete) — one of:

- the run scored below `no_update_at` (`warning` by default: only runs that look like the agent's
  normal behaviour are learned): it is merged into the baseline through the store's atomic
  `update`, and it ends the agent's drift episode if one was open;
- otherwise the run is *drift*: the baseline does not learn it (a shift that persists is
  reported on every run, never learned away), and it is merged into the agent's drift episode,
  a baseline of its own under the key `AGENT#drifting` (`names.DRIFT_EPISODE_SUFFIX`) in the
  same store. The episode's first run is the `drifting since` time, its run count the
  `drifting_runs` attribute and metric. `tracehound baseline accept AGENT` makes the episode the
  agent's baseline (the new normal); `reset` deletes both.

While the baseline has fewer than `settle_runs` runs (a young baseline is noisy), runs below
`alert` are learned as before and open no episode.

Results are trace-level: one `tracehound.drift` result per run, on the run's agent span (the
trace root for a trace without agent spans), with `tracehound.drift.*` attributes. Runs of a
trace are scored in trajectory order, so a second run of the same agent in one trace sees the
first one in its baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from tracehound import names
from tracehound.baselines import BaselineStore, BaselineStoreError, MemoryStore
from tracehound.drift import (
    Baseline,
    BaselineMismatchError,
    DriftConfig,
    DriftScore,
    DriftScorer,
    Embedder,
    default_embedder,
    run_features,
    severity_rank,
)
from tracehound.evaluators.base import DetailedResult, EvaluationResult, Evaluator, TraceInfo
from tracehound.spans import AttributeValue
from tracehound.steps import Run, Trajectory

__all__ = ["AgentKey", "DriftEvaluator", "DriftEvaluatorConfig", "default_agent_key"]

AgentKey = Callable[[Run, TraceInfo], str]


def default_agent_key(run: Run, trace: TraceInfo) -> str:
    """`service.name/agent name` (the trace's service when the run's span has none)."""
    return f"{run.service_name or trace.service_name}/{run.agent_name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DriftEvaluatorConfig:
    scoring: DriftConfig = field(default_factory=DriftConfig)
    update: bool = True
    """Merge scored runs into their baselines (False: score only, as a CI gate does)."""
    no_update_at: str | None = "warning"
    """Runs scoring at or above this severity are drift: the baseline does not learn them, they
    join the agent's drift episode (None: every run is learned, no episodes)."""
    release_at: float = 0.15
    """While the agent's drift episode is open, a run scoring at or above this stays in it (and
    is reported as `warning` at least): only a run below it is learned and ends the episode."""
    settle_runs: int = 5
    """Until its baseline has this many runs, a run below `alert` is learned and opens no
    episode."""
    half_life_runs: float | None = None
    """Exponential decay of the baseline, as a half-life in runs (None: no decay)."""
    key: AgentKey = default_agent_key
    """Baseline key of a run."""

    def __post_init__(self) -> None:
        if self.no_update_at is not None:
            severity_rank(self.no_update_at)
        if not 0.0 <= self.release_at <= 1.0:
            raise ValueError("release_at must be within [0, 1]")
        if self.settle_runs < 0:
            raise ValueError("settle_runs must be >= 0")
        if self.half_life_runs is not None and not self.half_life_runs > 0:
            raise ValueError("half_life_runs must be > 0 (or None for no decay)")


class DriftEvaluator(Evaluator):
    """Drift of each run against its agent's baseline in `store` (a `MemoryStore` by default).

    `embedder`: `default_embedder()` unless given (WordLlama with `tracehound[semantic]`, else
    the hashing embedder).
    """

    name = "drift"
    version = "2.0.0"

    def __init__(
        self,
        store: BaselineStore | None = None,
        *,
        embedder: Embedder | None = None,
        config: DriftEvaluatorConfig | None = None,
    ) -> None:
        self.store: BaselineStore = store if store is not None else MemoryStore()
        self.embedder: Embedder = embedder if embedder is not None else default_embedder()
        self.config = config or DriftEvaluatorConfig()
        self.scorer = DriftScorer(self.config.scoring)

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        if not trajectory.steps:  # no GenAI span (a health check, a plain HTTP trace): no run
            return []
        agent_runs = [r for r in trajectory.runs if not r.implicit]
        runs = agent_runs or list(trajectory.runs)
        return [self.evaluate_run(trajectory, run, trace) for run in runs]

    def evaluate_run(self, trajectory: Trajectory, run: Run, trace: TraceInfo) -> EvaluationResult:
        """Score one run, update its baseline as configured, and describe both."""
        key = self.config.key(run, trace)
        span_id = None if run.implicit else run.span_id
        embedder = self.embedder
        features = run_features(trajectory, run, embedder, trace.texts)
        try:
            # the scorer only reads the baseline: a store that can lend it saves the copy
            get_shared = getattr(self.store, "get_shared", None)
            baseline = self.store.get(key) if get_shared is None else get_shared(key)
            score, text, explained = self.scorer.score_explained(
                features, baseline, embedder=embedder
            )
            updated = False
            episode: Baseline | None = None
            episode_key = key + names.DRIFT_EPISODE_SUFFIX
            open_episode = self._read(episode_key) if score.scored else None
            drifted = self._drifted(score, baseline, open_episode)
            if drifted and score.severity == "none":
                # hysteresis: a run of an open episode that has not come back below `release_at`
                score = replace(score, severity="warning")
                text = text.replace("(none;", "(warning: drifting;", 1).replace(
                    _NO_ACTION,
                    f"The episode stays open until a run scores below {self.config.release_at:g}.",
                    1,
                )
            writes = self.config.update and not trace.truncated
            if writes and not drifted and not (baseline is not None and baseline.pinned):
                delta = Baseline.update_delta(features, embedder)
                outcome = self.store.update(key, delta, half_life_runs=self.config.half_life_runs)
                updated = outcome.applied
            if drifted:
                if writes:
                    delta = Baseline.update_delta(features, embedder)
                    episode = self.store.update(episode_key, delta).baseline
                else:
                    episode = Baseline.from_run(features, embedder)
                    if open_episode is not None:
                        episode = open_episode.merged(episode)
            elif open_episode is not None and writes:
                self.store.reset(episode_key)  # back to normal: the episode ends
            if episode is not None:
                text += (
                    f" Drifting since {drifting_since(episode)} ({episode.runs} run(s)), not "
                    f"learned: `tracehound baseline accept {key}` makes it the new baseline."
                )
        except (BaselineMismatchError, BaselineStoreError) as exc:
            return EvaluationResult(
                name=names.EVAL_DRIFT,
                evaluator=self.name,
                evaluator_version=self.version,
                span_id=span_id,
                error_type=type(exc).__name__,
                explanation=f"drift of {key!r} not evaluated: {exc}"[:1000],
                attributes={names.ATTR_DRIFT_AGENT: key},
            )
        return DetailedResult(
            name=names.EVAL_DRIFT,
            evaluator=self.name,
            evaluator_version=self.version,
            span_id=span_id,
            score_value=score.composite,
            score_label=score.severity or "initializing",
            explanation=text,
            attributes=drift_attributes(
                key, score, updated, baseline is not None and baseline.pinned, episode
            ),
            # the structured explanation, for the run history (`tracehound runs explain`)
            detail={} if explained is None else explained.to_dict(),
        )

    def _read(self, key: str) -> Baseline | None:
        get_shared = getattr(self.store, "get_shared", None)
        return self.store.get(key) if get_shared is None else get_shared(key)

    def _drifted(
        self, score: DriftScore, baseline: Baseline | None, episode: Baseline | None
    ) -> bool:
        """Whether the run is drift (kept out of the baseline, added to the episode)."""
        config = self.config
        if (
            score.severity is None
            or score.composite is None
            or config.no_update_at is None
            or baseline is None
        ):
            return False
        rank = severity_rank(score.severity)
        if episode is not None and score.composite >= config.release_at:
            return True
        if baseline.runs < config.settle_runs:
            return rank >= max(_ALERT, severity_rank(config.no_update_at))
        return rank >= severity_rank(config.no_update_at)


_ALERT = severity_rank("alert")
_NO_ACTION = "No action needed: the run is consistent with its baseline."
"""The recommendation of a `none` score (`tracehound.drift`), replaced in a drifting run's."""


def drifting_since(episode: Baseline) -> str:
    """The episode's first run start as ISO-8601 UTC (seconds, `Z`)."""
    moment = datetime.fromtimestamp(episode.first_ns / 1e9, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def drift_attributes(
    key: str, score: DriftScore, updated: bool, pinned: bool, episode: Baseline | None = None
) -> dict[str, AttributeValue]:
    """The `tracehound.drift.*` attributes of one scored run."""
    attributes: dict[str, AttributeValue] = {
        names.ATTR_DRIFT_AGENT: key,
        names.ATTR_DRIFT_CONFIDENCE: score.confidence,
        names.ATTR_DRIFT_BASELINE_RUNS: score.baseline_runs,
        names.ATTR_DRIFT_BASELINE_UPDATED: updated,
        names.ATTR_DRIFT_BASELINE_PINNED: pinned,
    }
    if (
        score.composite is not None
        and score.severity is not None
        and score.primary_driver is not None
    ):
        attributes[names.ATTR_DRIFT_SCORE] = score.composite
        attributes[names.ATTR_DRIFT_SEVERITY] = score.severity
        attributes[names.ATTR_DRIFT_PRIMARY_DRIVER] = score.primary_driver
        attributes[names.ATTR_DRIFT_TOOL_MIX] = score.tool_mix or 0.0
        attributes[names.ATTR_DRIFT_SEMANTIC] = score.semantic or 0.0
        attributes[names.ATTR_DRIFT_COMPLEXITY] = score.complexity or 0.0
        if score.semantic_distance is not None:
            attributes[names.ATTR_DRIFT_SEMANTIC_DISTANCE] = score.semantic_distance
        attributes[names.ATTR_DRIFT_DRIFTING_RUNS] = 0 if episode is None else episode.runs
        if episode is not None:
            attributes[names.ATTR_DRIFT_DRIFTING_SINCE] = drifting_since(episode)
    return attributes
