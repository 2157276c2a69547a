"""Scoring one run against its agent's baseline.

Three components, each in [0, 1] (the components, default weights and tiers of `reasontrace`):

- **tool mix** (weight 0.35): cosine distance between the run's normalized tool-frequency vector
  and the baseline's tool centroid, over the union of both tool sets — a run that uses only tools
  the baseline never saw is at distance 1.0, and so is a run without tools against a baseline with
  tools (and the reverse). Unlike `reasontrace`, new tools are not projected away: a run that adds
  a new tool to its usual ones moves by the share the new tool takes.
- **semantic** (weight 0.40): cosine distance between the run's text embedding (its reasoning and
  assistant text) and the baseline centroid, as in `reasontrace`. For an embedder made of blocks
  (the hashing embedder: lexical + stance), the weighted mean of the blocks' cosine distances, so
  that each block keeps its weight however many texts and runs are summed. A run or a baseline
  without text scores 0 (nothing to compare). Explanations also give the mean distance of the
  recent baseline runs to the centroid, for scale: raw distances depend on the embedder.
- **complexity** (weight 0.25): z-scores of the run's `COMPLEXITY_DIMENSIONS` against the
  baseline's weighted Welford statistics, each capped at `z_cap` (3) standard deviations and
  divided by it, combined as a root mean square — `‖min(|z|, 3)‖ / (3 √D)`, which is
  `reasontrace`'s `‖z‖ / √(9·3)` for its three dimensions when no z exceeds 3. D counts the
  dimensions the agent uses: one that is zero in every baseline run and in this run (no nested
  agents, never an error) is left out rather than diluting the others. Standard deviations
  are the sample ones (Bessel-corrected: a handful of baseline runs underestimates spread), never
  below a floor — `sigma_floors` (absolute) or `relative_sigma_floors` times the baseline mean,
  whichever is larger — so one extra call against a constant baseline is one standard deviation,
  not infinitely many, and latency jitter of a few percent is not drift.

Composite = weighted sum (weights normalized to sum 1). Severity: `none` < 0.3 ≤ `warning` < 0.6 ≤
`alert` ≤ 0.8 < `critical`. Baseline confidence from its run count: `initializing` (< 2), `low`
(< 5), `medium` (< 10), `high`. A run against no baseline (or an empty one) is not scored.
The primary driver is the largest component (as in `reasontrace`; ties go to the first of tool
mix, semantic, complexity). The explanation names the tools that appeared, disappeared or shifted
share, the complexity dimensions that moved most (baseline mean → this run, in σ), the semantic
distance with a sample of the run's text, the recent baseline runs the run diverged from most
(the composite's weights applied to run-to-run distances), and a recommendation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import isnan
from typing import Any, Literal

import numpy as np

from tracehound.conventions.base import fields_maker
from tracehound.drift._baseline import Baseline, BaselineMismatchError, tool_shares_of
from tracehound.drift._embed import Blocks, Embedder, FloatArray
from tracehound.drift._features import COMPLEXITY_DIMENSIONS, RunFeatures

__all__ = [
    "COMPONENTS",
    "CONFIDENCES",
    "DEFAULT_RELATIVE_SIGMA_FLOORS",
    "DEFAULT_SIGMA_FLOORS",
    "MIN_SPREAD_RUNS",
    "SEVERITIES",
    "DimensionShift",
    "Divergence",
    "DriftConfig",
    "DriftExplanation",
    "DriftScore",
    "DriftScorer",
    "ToolShift",
    "block_distances",
    "confidence_of",
    "embedding_distance",
    "semantic_spread",
    "severity_of",
    "severity_rank",
]

Component = Literal["tool_mix", "semantic", "complexity"]
COMPONENTS: tuple[Component, ...] = ("tool_mix", "semantic", "complexity")
"""Component names, in the order of `DriftConfig.weights` (also the primary-driver values)."""
SEVERITIES = ("none", "warning", "alert", "critical")
CONFIDENCES = ("initializing", "low", "medium", "high")

DEFAULT_SIGMA_FLOORS: Mapping[str, float] = {
    "llm_calls": 1.0,
    "tool_calls": 1.0,
    "distinct_tools": 1.0,
    "steps": 1.0,
    "input_tokens": 1.0,
    "output_tokens": 1.0,
    "errors": 1.0,
    "retries": 1.0,
    "duration_s": 0.01,
    "depth": 1.0,
}
"""Smallest standard deviation assumed per complexity dimension (counts: one; time: 10 ms)."""

DEFAULT_RELATIVE_SIGMA_FLOORS: Mapping[str, float] = {
    **dict.fromkeys(COMPLEXITY_DIMENSIONS, 0.1),
    "duration_s": 0.25,
}
"""Smallest standard deviation as a fraction of the baseline mean (latency jitters more)."""

_LABELS: Mapping[str, str] = {
    "tool_mix": "tool mix",
    "semantic": "semantic",
    "complexity": "complexity",
}


def severity_of(score: float) -> str:
    """`none` < 0.3 ≤ `warning` < 0.6 ≤ `alert` ≤ 0.8 < `critical`."""
    if score < 0.3:
        return "none"
    if score < 0.6:
        return "warning"
    if score <= 0.8:
        return "alert"
    return "critical"


def severity_rank(severity: str) -> int:
    """0 for `none` … 3 for `critical` (`ValueError` for anything else)."""
    try:
        return SEVERITIES.index(severity)
    except ValueError:
        raise ValueError(
            f"unknown drift severity {severity!r} (one of {', '.join(SEVERITIES)})"
        ) from None


def confidence_of(runs: int) -> str:
    """`initializing` (< 2 runs), `low` (< 5), `medium` (< 10), else `high`."""
    if runs < 2:
        return "initializing"
    if runs < 5:
        return "low"
    if runs < 10:
        return "medium"
    return "high"


@dataclass(frozen=True, slots=True, kw_only=True)
class DriftConfig:
    """Scoring parameters. Invalid values raise `ValueError` at construction."""

    weights: tuple[float, float, float] = (0.35, 0.40, 0.25)
    """Weights of (tool mix, semantic, complexity); normalized to sum 1."""
    z_cap: float = 3.0
    """Standard deviations at which a complexity dimension (and the semantic excess) saturates."""
    relative_sigma_floors: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_RELATIVE_SIGMA_FLOORS)
    )
    """Smallest complexity standard deviation per dimension, as a fraction of the baseline mean."""
    sigma_floors: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_SIGMA_FLOORS))
    """Smallest complexity standard deviation per dimension (absolute)."""
    single_component: float = 0.6
    """The composite is at least this times the largest component: one component at 1 (complexity
    3σ out on every dimension it moved, a disjoint tool set, semantics far outside the
    baseline's spread) is a `warning` on its own, whatever the weights."""
    semantic_z_span: float = 12.0
    """Standard deviations of the baseline's own semantic distances, beyond the first, over which
    the semantic component rises from 0 to 1."""
    semantic_sigma_floor: float = 0.02
    """Smallest standard deviation of the baseline's semantic distances (absolute)."""
    semantic_relative_floor: float = 0.25
    """Smallest standard deviation of the baseline's semantic distances, times their mean."""
    shift_threshold: float = 0.15
    """Explanations list a tool as shifted when its share moved at least this much."""
    explain_top: int = 3
    """Complexity dimensions and diverging baseline runs named in explanations."""

    def __post_init__(self) -> None:
        problems: list[str] = []
        weights = self.weights
        if len(weights) != 3 or not all(
            isinstance(w, (int, float)) and math.isfinite(w) and w >= 0 for w in weights
        ):
            problems.append(
                "weights must be three finite numbers >= 0 (tool mix, semantic, complexity)"
            )
        elif sum(weights) <= 0:
            problems.append("weights must not all be 0")
        if not (math.isfinite(self.z_cap) and self.z_cap > 0):
            problems.append("z_cap must be > 0")
        for label, floors, minimum in (
            ("sigma_floors", self.sigma_floors, "> 0"),
            ("relative_sigma_floors", self.relative_sigma_floors, ">= 0"),
        ):
            unknown = set(floors) - set(COMPLEXITY_DIMENSIONS)
            if unknown:
                problems.append(f"{label} has unknown dimensions: {', '.join(sorted(unknown))}")
            for value in floors.values():
                if not math.isfinite(value) or value < 0 or (minimum == "> 0" and value == 0):
                    problems.append(f"{label} values must be {minimum}")
                    break
        if not (math.isfinite(self.single_component) and 0 <= self.single_component <= 1):
            problems.append("single_component must be within [0, 1]")
        if not (math.isfinite(self.semantic_z_span) and self.semantic_z_span > 0):
            problems.append("semantic_z_span must be > 0")
        if not (math.isfinite(self.semantic_sigma_floor) and self.semantic_sigma_floor > 0):
            problems.append("semantic_sigma_floor must be > 0")
        if not (math.isfinite(self.semantic_relative_floor) and self.semantic_relative_floor >= 0):
            problems.append("semantic_relative_floor must be >= 0")
        if not 0 < self.shift_threshold <= 1:
            problems.append("shift_threshold must be within (0, 1]")
        if self.explain_top < 0:
            problems.append("explain_top must be >= 0")
        if problems:
            raise ValueError("invalid drift configuration: " + "; ".join(problems))

    @property
    def normalized_weights(self) -> tuple[float, float, float]:
        total = float(sum(self.weights))
        return (self.weights[0] / total, self.weights[1] / total, self.weights[2] / total)

    def floors(self) -> tuple[FloatArray, FloatArray]:
        """(absolute, relative) floors per dimension, in `COMPLEXITY_DIMENSIONS` order."""
        absolute = {**DEFAULT_SIGMA_FLOORS, **self.sigma_floors}
        relative = {**DEFAULT_RELATIVE_SIGMA_FLOORS, **self.relative_sigma_floors}
        return (
            np.array([absolute[d] for d in COMPLEXITY_DIMENSIONS], dtype=np.float64),
            np.array([relative[d] for d in COMPLEXITY_DIMENSIONS], dtype=np.float64),
        )


# --- results -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolShift:
    tool: str
    baseline_share: float
    run_share: float


@dataclass(frozen=True, slots=True)
class DimensionShift:
    dimension: str
    baseline_mean: float
    value: float
    z: float


@dataclass(frozen=True, slots=True)
class Divergence:
    """A recent baseline run and how far this run is from it (the composite's weights)."""

    trace_id: str
    run_id: str
    divergence: float
    sample: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DriftExplanation:
    primary_driver: Component
    tools_appeared: tuple[str, ...] = ()
    tools_disappeared: tuple[str, ...] = ()
    tools_shifted: tuple[ToolShift, ...] = ()
    complexity_moved: tuple[DimensionShift, ...] = ()
    semantic_distance: float | None = None
    semantic_typical: float | None = None
    sample: str = ""
    diverged_from: tuple[Divergence, ...] = ()
    recommendation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "primary_driver": self.primary_driver,
            "tools_appeared": list(self.tools_appeared),
            "tools_disappeared": list(self.tools_disappeared),
            "tools_shifted": [
                {"tool": s.tool, "baseline_share": s.baseline_share, "run_share": s.run_share}
                for s in self.tools_shifted
            ],
            "complexity_moved": [
                {
                    "dimension": m.dimension,
                    "baseline_mean": m.baseline_mean,
                    "value": m.value,
                    "z": m.z,
                }
                for m in self.complexity_moved
            ],
            "semantic_distance": self.semantic_distance,
            "semantic_typical": self.semantic_typical,
            "sample": self.sample,
            "diverged_from": [
                {
                    "trace_id": d.trace_id,
                    "run_id": d.run_id,
                    "divergence": d.divergence,
                    "sample": d.sample,
                }
                for d in self.diverged_from
            ],
            "recommendation": self.recommendation,
        }

    def text(self) -> str:
        """One paragraph for `gen_ai.evaluation.explanation`."""
        parts = [f"primary driver: {_LABELS[self.primary_driver]}."]
        tools: list[str] = []
        if self.tools_appeared:
            tools.append("appeared " + ", ".join(self.tools_appeared))
        if self.tools_disappeared:
            tools.append("disappeared " + ", ".join(self.tools_disappeared))
        if self.tools_shifted:
            tools.append(
                "shifted "
                + ", ".join(
                    f"{s.tool} {s.baseline_share:.0%}→{s.run_share:.0%}" for s in self.tools_shifted
                )
            )
        parts.append(("Tools: " + "; ".join(tools) + ".") if tools else "Tools: same mix.")
        if self.complexity_moved:
            parts.append(
                "Complexity: "
                + ", ".join(
                    f"{m.dimension} {_num(m.baseline_mean)}→{_num(m.value)} ({m.z:+.1f}σ)"
                    for m in self.complexity_moved
                )
                + "."
            )
        else:
            parts.append("Complexity: within one standard deviation.")
        if self.semantic_distance is not None:
            typical = (
                "" if self.semantic_typical is None else f", typical {self.semantic_typical:.2f}"
            )
            sample = f' — "{self.sample}"' if self.sample else ""
            parts.append(f"Semantic distance {self.semantic_distance:.2f}{typical}{sample}.")
        else:
            parts.append("Semantic: no text to compare.")
        if self.diverged_from:
            parts.append(
                "Diverged most from baseline runs "
                + ", ".join(
                    f"{d.trace_id}/{d.run_id} ({d.divergence:.2f})" for d in self.diverged_from
                )
                + "."
            )
        parts.append(self.recommendation)
        return " ".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class DriftScore:
    """The drift of one run. Without a baseline, `composite` and the components are None."""

    composite: float | None
    severity: str | None
    """`none` / `warning` / `alert` / `critical`; None when the run could not be scored."""
    confidence: str
    baseline_runs: int
    tool_mix: float | None = None
    semantic: float | None = None
    complexity: float | None = None
    primary_driver: Component | None = None
    semantic_distance: float | None = None
    """Raw cosine distance to the baseline centroid (None: no text on one side)."""
    semantic_typical: float | None = None
    """Mean distance of the recent baseline runs to the centroid (None: no text, or scored
    without explanation)."""
    complexity_z: Mapping[str, float] = field(default_factory=dict)
    explanation: DriftExplanation | None = None

    @property
    def scored(self) -> bool:
        return self.composite is not None

    def components(self) -> dict[str, float]:
        if not self.scored:
            return {}
        return {
            "tool_mix": self.tool_mix or 0.0,
            "semantic": self.semantic or 0.0,
            "complexity": self.complexity or 0.0,
        }

    def explanation_text(self) -> str:
        if self.explanation is None or self.composite is None:
            return "no baseline yet for this agent: this run starts it; no score."
        head = (
            f"drift {self.composite:.2f} ({self.severity}; baseline of {self.baseline_runs} "
            f"run{'s' if self.baseline_runs != 1 else ''}, confidence {self.confidence}); "
        )
        return head + self.explanation.text()

    def to_dict(self) -> dict[str, Any]:
        return {
            "composite": self.composite,
            "severity": self.severity,
            "confidence": self.confidence,
            "baseline_runs": self.baseline_runs,
            "components": self.components(),
            "primary_driver": self.primary_driver,
            "semantic_distance": self.semantic_distance,
            "semantic_typical": self.semantic_typical,
            "complexity_z": dict(self.complexity_z),
            "explanation": None if self.explanation is None else self.explanation.to_dict(),
        }


_new_score = fields_maker(DriftScore)


# --- the scorer ----------------------------------------------------------------------------------


class DriftScorer:
    """Scores `RunFeatures` against a `Baseline`. Stateless apart from its configuration.

    The arithmetic on the complexity dimensions and on the few run-to-run distances is done on
    Python floats, element by element, as numpy would do it (the same IEEE operations in the same
    order, so the same bits), and numpy is kept for the reductions (dot products, norms), whose
    summation order is numpy's own: a numpy call costs more than a handful of float operations.
    """

    __slots__ = ("_floor_pairs", "_single", "_weights", "_z_cap", "config")

    def __init__(self, config: DriftConfig | None = None) -> None:
        self.config = config or DriftConfig()
        absolute, relative = self.config.floors()
        self._floor_pairs = tuple(zip(absolute.tolist(), relative.tolist(), strict=True))
        self._weights = self.config.normalized_weights
        self._z_cap = float(self.config.z_cap)
        self._single = float(self.config.single_component)

    def score(
        self,
        features: RunFeatures,
        baseline: Baseline | None,
        *,
        embedder: Embedder | None = None,
        explain: bool = True,
    ) -> DriftScore:
        """The run's drift against the baseline (None or empty: not scored).

        With `embedder` (the one that produced `features.embedding`), a baseline of another
        embedder raises `BaselineMismatchError`; so does any baseline whose dimension differs
        from the run's embedding.
        """
        if baseline is None or baseline.runs == 0 or baseline.weight <= 0.0:
            runs = 0 if baseline is None else baseline.runs
            return DriftScore(
                composite=None, severity=None, confidence=confidence_of(runs), baseline_runs=runs
            )
        if embedder is not None:
            baseline.check_compatible(embedder.name, embedder.dim, tuple(embedder.blocks))
        embedding = features.embedding
        if embedding.size != baseline.dim:
            raise BaselineMismatchError(
                f"run embedding has {embedding.size} dimensions, baseline "
                f"({baseline.embedder!r}) has {baseline.dim}"
            )
        has_text = features.has_text
        run_shares = tool_shares_of(features.tools)
        tool = _tool_mix(run_shares, tool_shares_of(baseline.tools))
        distance = None
        spread: tuple[float, float] | None = None
        if has_text and baseline.text_weight > 0.0:
            distance = embedding_distance(embedding, baseline.centroid_sum, baseline.blocks)
        if distance is None:
            semantic = 0.0
        else:
            spread = semantic_spread(baseline)
            semantic = self._semantic_of(distance, spread)
        stats = baseline.complexity
        mean = stats.mean.tolist()
        x = [float(v) for v in features.complexity]
        sigmas = self._sigma_list(baseline)
        complexity, z = self._complexity_of(x, mean, stats.m2.tolist(), sigmas)
        w_tool, w_sem, w_cx = self._weights
        composite = min(1.0, max(0.0, w_tool * tool + w_sem * semantic + w_cx * complexity))
        # one component far outside the baseline's spread is drift on its own
        largest = self._single * max(tool, semantic, complexity)
        if largest > composite:
            composite = min(1.0, largest)
        # the primary driver: the largest component, the first of equals in `COMPONENTS` order
        primary: Component = "tool_mix"
        if semantic > tool:
            primary = "semantic"
        if complexity > (semantic if semantic > tool else tool):
            primary = "complexity"
        severity = severity_of(composite)
        z_by_dim = dict(zip(baseline.dimensions, z, strict=True))
        explanation = None
        typical = None
        if explain:
            divergences, typical = self._recent_runs(
                features, baseline, x, sigmas, has_text, run_shares, self.config.explain_top
            )
            if spread is not None:
                typical = spread[0]
            explanation = self._explain(
                features,
                baseline=baseline,
                primary=primary,
                severity=severity,
                distance=distance,
                typical=typical,
                z=z_by_dim,
                divergences=divergences,
                means=mean,
            )
        return _new_score(
            composite,
            severity,
            confidence_of(baseline.runs),
            baseline.runs,
            tool,
            semantic,
            complexity,
            primary,
            distance,
            typical,
            z_by_dim,
            explanation,
        )

    def score_text(
        self, features: RunFeatures, baseline: Baseline | None, *, embedder: Embedder | None = None
    ) -> tuple[DriftScore, str]:
        """`score(features, baseline, embedder=embedder, explain=False)` and the text of the
        explanation `score(features, baseline, embedder=embedder)` would give
        (`explanation_text()`): what the drift evaluator reports."""
        score, text, _ = self.score_explained(features, baseline, embedder=embedder)
        return score, text

    def score_explained(
        self, features: RunFeatures, baseline: Baseline | None, *, embedder: Embedder | None = None
    ) -> tuple[DriftScore, str, DriftExplanation | None]:
        """`score_text`'s answer and the explanation itself (None: not scored), which the
        drift evaluator keeps for the run history."""
        explained = self.score(features, baseline, embedder=embedder)
        if not explained.scored:
            return explained, explained.explanation_text(), None
        return (
            replace(explained, semantic_typical=None, explanation=None),
            explained.explanation_text(),
            explained.explanation,
        )

    # --- components --------------------------------------------------------------------------

    def _semantic_of(self, distance: float, spread: tuple[float, float] | None) -> float:
        """The semantic component of a raw distance: its excess over the baseline's own spread,
        `(d - typical - σ) / (semantic_z_span · σ)` clipped to [0, 1] (one σ above the typical
        distance is nothing, `1 + semantic_z_span` σ saturates); 0 while the baseline has too
        few runs with text for a spread (`MIN_SPREAD_RUNS`: a raw distance means nothing on its
        own; `semantic_distance` still reports it)."""
        if spread is None:
            return 0.0
        typical, sigma = spread
        config = self.config
        sigma = _max(
            sigma, _max(config.semantic_sigma_floor, config.semantic_relative_floor * typical)
        )
        return _clip01((distance - typical - sigma) / (config.semantic_z_span * sigma))

    def sigmas(self, baseline: Baseline) -> FloatArray:
        """The standard deviations z-scores use: the baseline's sample ones, floored."""
        return np.array(self._sigma_list(baseline), dtype=np.float64)

    def _sigma_list(self, baseline: Baseline) -> list[float]:
        # np.maximum(sample_std, np.maximum(absolute, relative * np.abs(mean))), elementwise
        stats = baseline.complexity
        weight = stats.weight
        m2 = stats.m2.tolist()
        if weight > 1.0:
            divisor = weight - 1.0
            std = [math.sqrt(_max(v / divisor, 0.0)) for v in m2]
        elif weight > 0.0:
            std = [math.sqrt(_max(v / weight, 0.0)) for v in m2]
        else:
            std = [0.0] * len(m2)
        return [
            _max(s, _max(absolute, relative * abs(m)))
            for s, m, (absolute, relative) in zip(
                std, stats.mean.tolist(), self._floor_pairs, strict=True
            )
        ]

    def _complexity_of(
        self, x: list[float], mean: list[float], m2: list[float], sigmas: list[float]
    ) -> tuple[float, list[float]]:
        """The complexity component and the z-score of each dimension."""
        z = [(v - m) / s for v, m, s in zip(x, mean, sigmas, strict=True)]
        # Dimensions the agent never uses (zero in every baseline run and in this run: no
        # sub-agents, no errors...) say nothing about it and are left out of the mean.
        cap = self._z_cap
        capped = [
            _min(abs(zv), cap) / cap
            for zv, v, m, q in zip(z, x, mean, m2, strict=True)
            if v != 0.0 or m != 0.0 or q > 0.0
        ]
        if not capped:
            return 0.0, z
        squares = np.array(capped, dtype=np.float64)
        return _clip01(math.sqrt(float(squares @ squares) / len(capped))), z

    def _recent_runs(  # noqa: PLR0917 - private, one caller
        self,
        features: RunFeatures,
        baseline: Baseline,
        x: list[float],
        sigmas: list[float],
        has_text: bool,
        run_shares: dict[str, float] | None,
        top: int,
    ) -> tuple[tuple[Divergence, ...], float | None]:
        """The `top` recent runs by divergence from this run; all recent runs' mean distance to
        the centroid."""
        recent = baseline.recent
        if not recent:
            return (), None
        cap = self._z_cap
        w_tool, w_sem, w_cx = self._weights
        others = np.array([r.complexity_array() for r in recent])
        diff = np.minimum(np.abs(others - np.array(x)) / np.array(sigmas), cap) / cap
        n_dims = diff.shape[1]
        complexity = [math.sqrt(v / n_dims) for v in np.einsum("ij,ij->i", diff, diff).tolist()]
        tools = [_tool_mix(run_shares, r.tool_shares()) for r in recent]
        semantic = [0.0] * len(recent)
        typical = None
        if any(r.embedding is not None for r in recent):
            to_centroid, to_run = _recent_distances(
                [r.embedding for r in recent],
                baseline.centroid_sum,
                features.embedding if has_text else None,
                baseline.blocks,
            )
            own = [d for d in to_centroid if not isnan(d)]  # NaN: no text on one side
            if own:
                # `own.mean()`, without its Python-level wrapper
                typical = float(np.add.reduce(np.array(own, dtype=np.float64))) / len(own)
            semantic = [0.0 if isnan(d) else d for d in to_run]
        ranked = sorted(
            (
                -(w_tool * tools[i] + (w_sem * semantic[i] + w_cx * complexity[i])),
                run.trace_id,
                run.run_id,
                i,
            )
            for i, run in enumerate(recent)
        )
        # explanations name the first few: only those become `Divergence`s
        return tuple(
            Divergence(trace_id, run_id, -negated, recent[i].sample)
            for negated, trace_id, run_id, i in ranked[:top]
        ), typical

    # --- explanation -------------------------------------------------------------------------

    def _explain(
        self,
        features: RunFeatures,
        *,
        baseline: Baseline,
        primary: Component,
        severity: str,
        distance: float | None,
        typical: float | None,
        z: Mapping[str, float],
        divergences: tuple[Divergence, ...],
        means: list[float],
    ) -> DriftExplanation:
        config = self.config
        base_shares = baseline.tool_shares()
        total = sum(features.tools.values())
        run_shares = {k: v / total for k, v in features.tools.items()} if total else {}
        # sorted by share (largest first), then name; tool names are distinct, so sorting
        # stops there
        appeared = tuple(
            t
            for _, t in sorted(
                [(-s, t) for t, s in run_shares.items() if base_shares.get(t, 0.0) <= 0.0]
            )
        )
        disappeared = tuple(
            t
            for _, t in sorted(
                [(-s, t) for t, s in base_shares.items() if s >= 0.05 and t not in run_shares]
            )[:5]
        )
        moves = sorted(
            [(-abs(s - base_shares[t]), t, s) for t, s in run_shares.items() if t in base_shares]
        )
        shifted = tuple(
            ToolShift(t, base_shares[t], s)
            for negated, t, s in moves
            if -negated >= config.shift_threshold
        )
        # by |z| (largest first), then name; the dimensions are distinct, so sorting stops there
        ranked = sorted(
            [
                (-abs(z_value), d, mean, value, z_value)
                for (d, z_value), mean, value in zip(
                    z.items(), means, features.complexity, strict=True
                )
            ]
        )
        moved = tuple(
            DimensionShift(d, mean, float(value), z_value)
            for negated, d, mean, value, z_value in ranked[: config.explain_top]
            if -negated >= 1.0
        )
        return DriftExplanation(
            primary_driver=primary,
            tools_appeared=appeared,
            tools_disappeared=disappeared,
            tools_shifted=shifted,
            complexity_moved=moved,
            semantic_distance=distance,
            semantic_typical=typical,
            sample=features.sample if distance is not None else "",
            diverged_from=divergences,
            recommendation=_recommendation(severity, primary, appeared, disappeared, moved),
        )


MIN_SPREAD_RUNS = 3
"""Recent runs with text a baseline needs before the semantic component is calibrated."""


def semantic_spread(baseline: Baseline) -> tuple[float, float] | None:
    """(mean, sample standard deviation) of the baseline's own semantic distances: each recent
    run's `embedding_distance` to the centroid of the *other* runs (the centroid sum minus the
    run's weighted embedding — leave-one-out, so that the spread is what a new run from the same
    agent would show). None with fewer than `MIN_SPREAD_RUNS` recent runs with text.

    numpy on every path (no accelerator kernel): the same bits with and without the C extension.
    """
    rows = [(r.weight, r.embedding) for r in baseline.recent if r.embedding is not None]
    if len(rows) < MIN_SPREAD_RUNS:
        return None
    matrix = np.array([e for _, e in rows], dtype=np.float64)
    weights = np.array([w for w, _ in rows], dtype=np.float64)
    others = baseline.centroid_sum[None, :] - weights[:, None] * matrix
    total = np.zeros(len(rows))
    weight_sum = np.zeros(len(rows))
    for start, stop, weight in baseline.blocks:
        if weight <= 0.0:
            continue
        x = matrix[:, start:stop]
        y = others[:, start:stop]
        denominator = np.sqrt(np.einsum("ij,ij->i", x, x) * np.einsum("ij,ij->i", y, y))
        both = denominator > 0.0
        cosine = np.einsum("ij,ij->i", x, y) / np.where(both, denominator, 1.0)
        total += np.where(both, weight * (1.0 - cosine), 0.0)
        weight_sum += np.where(both, weight, 0.0)
    known = weight_sum > 0.0
    if int(known.sum()) < MIN_SPREAD_RUNS:
        return None
    # `np.clip(...)`, `.mean()` and `.std(ddof=1)` written out as the ufuncs numpy runs for
    # them (the same operations in the same order: the same bits), without their Python wrappers
    distances = np.minimum(np.maximum(total[known] / weight_sum[known], 0.0), 1.0)
    count = len(distances)
    mean = float(_sum(distances)) / count
    deviations = distances - mean
    return mean, math.sqrt(float(_sum(deviations * deviations)) / (count - 1))


_sum = np.add.reduce


def block_distances(matrix: FloatArray, targets: FloatArray, blocks: Blocks) -> FloatArray:
    """`embedding_distance` of each row of `matrix` to each row of `targets`: shape (m, k).

    NaN where no block is non-zero on both sides.
    """
    total = np.zeros((matrix.shape[0], targets.shape[0]))
    weights = np.zeros_like(total)
    for start, stop, weight in blocks:
        if weight <= 0.0:
            continue
        x = matrix[:, start:stop]
        y = targets[:, start:stop]
        denominator = np.outer(
            np.sqrt(np.einsum("ij,ij->i", x, x)), np.sqrt(np.einsum("ij,ij->i", y, y))
        )
        both = denominator > 0.0
        cosine = (x @ y.T) / np.where(both, denominator, 1.0)
        w = weight * both
        total += w * (1.0 - cosine)
        weights += w
    with np.errstate(invalid="ignore", divide="ignore"):
        out: FloatArray = np.clip(total / weights, 0.0, 1.0)
    out[weights == 0.0] = np.nan
    return out


def _recent_distances(
    rows: list[FloatArray | None], centroid: FloatArray, run: FloatArray | None, blocks: Blocks
) -> tuple[list[float], list[float]]:
    """Each recent run's `block_distances` to the centroid and to the run (None: no text)."""
    zeros = np.zeros(centroid.shape[0])
    matrix = np.array([zeros if row is None else row for row in rows])
    targets = np.array([centroid, zeros if run is None else run])
    return _ring_distances(matrix, targets, blocks)


def _ring_distances(
    matrix: FloatArray, targets: FloatArray, blocks: Blocks
) -> tuple[list[float], list[float]]:
    """`block_distances(matrix, targets, blocks)` for two targets, as its two columns.

    The same bits: numpy for the norms and dot products (the same calls on the same arrays),
    then the elementwise steps on Python floats in numpy's order and with its NaN rules (a
    comparison with NaN is false, as in `np.where` and `np.clip`).
    """
    n = matrix.shape[0]
    total_0 = [0.0] * n
    total_1 = [0.0] * n
    weights_0 = [0.0] * n
    weights_1 = [0.0] * n
    for start, stop, weight in blocks:
        if weight <= 0.0:
            continue
        x = matrix[:, start:stop]
        y = targets[:, start:stop]
        x_norms = np.sqrt(np.einsum("ij,ij->i", x, x)).tolist()
        y_0, y_1 = np.sqrt(np.einsum("ij,ij->i", y, y)).tolist()
        dots = (x @ y.T).tolist()
        unused = weight * 0.0  # `weight * both` where a side is zero
        for i, x_norm in enumerate(x_norms):
            dot_0, dot_1 = dots[i]
            denominator = x_norm * y_0
            if denominator > 0.0:
                total_0[i] += weight * (1.0 - dot_0 / denominator)
                weights_0[i] += weight
            else:
                total_0[i] += unused * (1.0 - dot_0)
                weights_0[i] += unused
            denominator = x_norm * y_1
            if denominator > 0.0:
                total_1[i] += weight * (1.0 - dot_1 / denominator)
                weights_1[i] += weight
            else:
                total_1[i] += unused * (1.0 - dot_1)
                weights_1[i] += unused
    return (
        [_clipped_ratio(t, w) for t, w in zip(total_0, weights_0, strict=True)],
        [_clipped_ratio(t, w) for t, w in zip(total_1, weights_1, strict=True)],
    )


def _clipped_ratio(total: float, weight: float) -> float:
    """`np.clip(total / weight, 0.0, 1.0)`, NaN when the weight is 0 (NaN stays NaN)."""
    if weight == 0.0:
        return _NAN
    value = total / weight
    if 0.0 < value < 1.0:
        return value
    if value >= 1.0:
        return 1.0
    return 0.0 if value <= 0.0 else value  # -0.0 becomes 0.0, as with np.clip; NaN stays


def _tool_mix(run: dict[str, float] | None, baseline: dict[str, float] | None) -> float:
    """`tool_mix_distance` of two `tool_shares_of` (the same operations in the same order)."""
    if run is None:
        return 0.0 if baseline is None else 1.0
    if baseline is None:
        return 1.0
    dot = run_sq = base_sq = 0.0
    run_get = run.get
    base_get = baseline.get
    for name in run.keys() | baseline.keys():
        r = run_get(name, 0.0)
        b = base_get(name, 0.0)
        dot += r * b
        run_sq += r * r
        base_sq += b * b
    return _clip01(1.0 - dot / math.sqrt(run_sq * base_sq))


def _max(a: float, b: float) -> float:
    """`np.maximum` of two floats (NaN wins)."""
    return a if a >= b or isnan(a) else b


def _min(a: float, b: float) -> float:
    """`np.minimum` of two floats (NaN wins)."""
    return a if a <= b or isnan(a) else b


_NAN = float("nan")


def tool_mix_distance(
    run_tools: Mapping[str, int | float], baseline_tools: Mapping[str, float]
) -> float:
    """Cosine distance of two tool-frequency vectors over the union of their tools.

    Both empty: 0 (nothing to compare). One empty: 1 (tools appeared or disappeared entirely).
    """
    run_total = float(sum(run_tools.values()))
    base_total = float(sum(baseline_tools.values()))
    if run_total <= 0.0 and base_total <= 0.0:
        return 0.0
    if run_total <= 0.0 or base_total <= 0.0:
        return 1.0
    dot = run_sq = base_sq = 0.0
    for name in run_tools.keys() | baseline_tools.keys():
        r = run_tools.get(name, 0) / run_total
        b = baseline_tools.get(name, 0.0) / base_total
        dot += r * b
        run_sq += r * r
        base_sq += b * b
    return _clip01(1.0 - dot / math.sqrt(run_sq * base_sq))


def embedding_distance(a: FloatArray, b: FloatArray, blocks: Blocks) -> float | None:
    """Weighted mean of the blocks' cosine distances, over blocks non-zero on both sides.

    None when no block can be compared (no text on one side).
    """
    total = weight_sum = 0.0
    for start, stop, weight in blocks:
        x = a[start:stop]
        y = b[start:stop]
        nx = math.sqrt(float(x @ x))
        ny = math.sqrt(float(y @ y))
        if nx == 0.0 or ny == 0.0 or weight <= 0.0:
            continue
        total += weight * (1.0 - float(x @ y) / (nx * ny))
        weight_sum += weight
    if weight_sum == 0.0:
        return None
    return _clip01(total / weight_sum)


def _recommendation(
    severity: str,
    primary: Component,
    appeared: Sequence[str],
    disappeared: Sequence[str],
    moved: Sequence[DimensionShift],
) -> str:
    label = _LABELS[primary]
    if severity == "none":
        return "No action needed: the run is consistent with its baseline."
    if primary == "tool_mix":
        what = "Check whether the available tools or the tool-selection prompt changed"
        if appeared:
            what += f" (new: {', '.join(appeared[:3])})"
    elif primary == "semantic":
        what = (
            "Compare this run's reasoning with the baseline runs it diverged from; "
            "check for a prompt or model change"
        )
    else:
        dims = ", ".join(m.dimension for m in moved[:2]) or "cost"
        what = f"Look for retries, loops or errors behind the change in {dims}"
    if severity == "warning":
        return f"Minor {label} drift: watch the next runs to see whether it persists. {what}."
    if severity == "alert":
        return f"Significant {label} drift: {what[0].lower()}{what[1:]}."
    return (
        f"Critical {label} drift: the agent behaves unlike its baseline. {what}; "
        "pin a known-good baseline to gate releases on it."
    )


def _clip01(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return 0.0 if value < 0.0 else 1.0 if value > 1.0 else value


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 1e-9 else f"{value:.1f}"
