"""Drift of agent runs against persistent, mergeable per-agent baselines.

The pieces, in the order data flows through them:

1. `run_features(trajectory, run, embedder)` reduces one run (an agent invocation and what it
   contains, or a whole trace without agent spans) to `RunFeatures`: tool counts, the
   `COMPLEXITY_DIMENSIONS`, and a unit embedding of its reasoning and assistant text made by an
   `Embedder` — `default_embedder()`: `WordLlamaEmbedder` (static WordLlama embeddings, numpy
   only; `pip install 'tracehound[semantic]'`) when installed, else `HashingEmbedder`
   (deterministic, numpy only); or `SentenceTransformerEmbedder` (a local model;
   `pip install 'tracehound[embeddings]'`).
2. `DriftScorer(DriftConfig()).score(features, baseline, embedder=embedder)` compares the
   run with its agent's `Baseline` and returns a `DriftScore`: composite, components (tool mix,
   semantic, complexity), severity, confidence, primary driver and a `DriftExplanation`.
3. `baseline.with_run(features, embedder, half_life_runs=...)` — or, through a store,
   `store.update(key, Baseline.from_run(features, embedder))` — adds the run.
   Baselines are sums, so `a.merged(b)` is the baseline of both sets of runs.

The stores (`tracehound.baselines`) persist baselines; the `drift` evaluator
(`tracehound.evaluators.drift`) wires all of this into the engine.
"""

from tracehound.drift._baseline import (
    BASELINE_FORMAT,
    BASELINE_VERSION,
    RECENT_RUNS,
    Baseline,
    BaselineFormatError,
    BaselineMismatchError,
    RunningStats,
    RunSummary,
)
from tracehound.drift._embed import (
    DEFAULT_DIM,
    ENV_EMBEDDER,
    SEMANTIC_INSTALL_HINT,
    STANCE_CATEGORIES,
    Blocks,
    Embedder,
    HashingEmbedder,
    SentenceTransformerEmbedder,
    WordLlamaEmbedder,
    default_embedder,
    embedder_setting,
)
from tracehound.drift._features import (
    COMPLEXITY_DIMENSIONS,
    RunFeatures,
    complexity_vector,
    embed_run,
    normalize_blocks,
    run_features,
    run_texts,
)
from tracehound.drift._score import (
    COMPONENTS,
    CONFIDENCES,
    DEFAULT_RELATIVE_SIGMA_FLOORS,
    DEFAULT_SIGMA_FLOORS,
    MIN_SPREAD_RUNS,
    SEVERITIES,
    DimensionShift,
    Divergence,
    DriftConfig,
    DriftExplanation,
    DriftScore,
    DriftScorer,
    ToolShift,
    block_distances,
    confidence_of,
    embedding_distance,
    semantic_spread,
    severity_of,
    severity_rank,
    tool_mix_distance,
)

__all__ = [
    "BASELINE_FORMAT",
    "BASELINE_VERSION",
    "COMPLEXITY_DIMENSIONS",
    "COMPONENTS",
    "CONFIDENCES",
    "DEFAULT_DIM",
    "DEFAULT_RELATIVE_SIGMA_FLOORS",
    "DEFAULT_SIGMA_FLOORS",
    "ENV_EMBEDDER",
    "MIN_SPREAD_RUNS",
    "RECENT_RUNS",
    "SEMANTIC_INSTALL_HINT",
    "SEVERITIES",
    "STANCE_CATEGORIES",
    "Baseline",
    "BaselineFormatError",
    "BaselineMismatchError",
    "Blocks",
    "DimensionShift",
    "Divergence",
    "DriftConfig",
    "DriftExplanation",
    "DriftScore",
    "DriftScorer",
    "Embedder",
    "HashingEmbedder",
    "RunFeatures",
    "RunSummary",
    "RunningStats",
    "SentenceTransformerEmbedder",
    "ToolShift",
    "WordLlamaEmbedder",
    "block_distances",
    "complexity_vector",
    "confidence_of",
    "default_embedder",
    "embed_run",
    "embedder_setting",
    "embedding_distance",
    "normalize_blocks",
    "run_features",
    "run_texts",
    "semantic_spread",
    "severity_of",
    "severity_rank",
    "tool_mix_distance",
]
