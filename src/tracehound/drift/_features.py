"""What the drift scorer sees of one run: tool counts, complexity dimensions, a text embedding.

A run is an agent invocation with everything inside it (nested agents included: a run's cost is
the cost of its subtree), or the whole trace for the implicit run of a trace without agent spans.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tracehound.conventions.base import fields_maker
from tracehound.drift._embed import Blocks, Embedder, FloatArray, HashingEmbedder
from tracehound.steps import Run, Step, Trajectory
from tracehound.text import TextCache

__all__ = [
    "COMPLEXITY_DIMENSIONS",
    "RunFeatures",
    "complexity_vector",
    "embed_run",
    "normalize_blocks",
    "run_features",
    "run_texts",
]

COMPLEXITY_DIMENSIONS: tuple[str, ...] = (
    "llm_calls",
    "tool_calls",
    "distinct_tools",
    "steps",
    "input_tokens",
    "output_tokens",
    "errors",
    "retries",
    "duration_s",
    "depth",
)
"""The complexity dimensions, in the order of every complexity vector:

- `llm_calls`: inference calls; `tool_calls`: tool calls; `distinct_tools`: distinct tool names;
- `steps`: trajectory steps (messages, calls, results, outputs; agent boundaries excluded);
- `input_tokens`, `output_tokens`: summed over the LLM calls (unknown counts as 0);
- `errors`: error steps plus failed tool results;
- `retries`: tool calls repeating an earlier call of the run (same tool, same recorded
  arguments) — retries after a failure and loops alike; calls without recorded arguments never
  count;
- `duration_s`: the run's wall time; `depth`: levels of nested agents below the run (0: none).
"""

SAMPLE_CHARS = 120


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFeatures:
    """One observation of an agent: what a run did, reduced to what drift compares."""

    run_id: str
    trace_id: str = ""
    start_ns: int = 0
    end_ns: int = 0
    tools: Mapping[str, int] = field(default_factory=dict)
    """Tool name → calls in the run."""
    complexity: tuple[float, ...] = ()
    """Values of `COMPLEXITY_DIMENSIONS`, in that order."""
    embedding: FloatArray = field(default_factory=lambda: np.zeros(0))
    """Embedding of the run's reasoning and assistant text, each block unit (zeros: no text)."""
    sample: str = ""
    """The start of the run's first reasoning/assistant text (for explanations)."""
    _has_text: bool | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def has_text(self) -> bool:
        """Whether the embedding is not all zeros (found once: scoring and updating ask)."""
        known = self._has_text
        if known is None:
            known = has_nonzero(self.embedding)
            object.__setattr__(self, "_has_text", known)
        return known


# features are made for every run: without the frozen dataclass's __init__
_new_features = fields_maker(RunFeatures)


def has_nonzero(vector: FloatArray) -> bool:
    """Whether the vector has an entry that is not zero."""
    return bool(vector.size) and bool(vector.any())


def run_texts(steps: Sequence[Step]) -> list[str]:
    """The reasoning and assistant texts of the steps, in order."""
    return [s.text for s in steps if s.kind in ("reasoning", "assistant") and s.text]


def complexity_vector(run: Run, steps: Sequence[Step], runs: Sequence[Run]) -> tuple[float, ...]:
    """The run's values of `COMPLEXITY_DIMENSIONS` (steps: the run's subtree)."""
    return _profile(run, steps, runs)[2]


def _subtree_run_ids(run: Run, runs: Sequence[Run]) -> set[str]:
    ids = {run.run_id}
    for other in runs:  # parents come before their children
        if other.parent_run_id in ids:
            ids.add(other.run_id)
    return ids


def run_features(
    trajectory: Trajectory, run: Run, embedder: Embedder, texts_cache: TextCache | None = None
) -> RunFeatures:
    """The drift observation of one run of a trajectory (its whole subtree).

    `texts_cache`: the trace's tokenized texts (the engine's `TraceInfo.texts`), which the hashing
    embedder reads tokens from instead of tokenizing the texts again.
    """
    steps = trajectory.run_steps(run.run_id, nested=True)
    tools, texts, complexity = _profile(run, steps, trajectory.runs)
    embedding, has_text = _embed_run(texts, embedder, texts_cache)
    return _new_features(
        run.run_id,
        trajectory.trace_id,
        run.start_ns,
        run.end_ns,
        tools,
        complexity,
        embedding,
        make_sample(texts),
        has_text,
    )


def _profile(
    run: Run, steps: Sequence[Step], runs: Sequence[Run]
) -> tuple[dict[str, int], list[str], tuple[float, ...]]:
    """The run's tool counts (by first call), `run_texts(steps)` and `complexity_vector(run,
    steps, runs)`, in one pass over the steps (the same values: a pass costs more than the
    arithmetic)."""
    llm_calls = tool_calls = errors = retries = n_steps = 0
    input_tokens = output_tokens = 0
    tools: dict[str, int] = {}
    texts: list[str] = []
    seen_calls: set[tuple[str, str]] = set()
    for step in steps:
        kind = step.kind
        if kind == "agent":
            continue
        n_steps += 1
        if kind == "llm":
            llm_calls += 1
            input_tokens += step.input_tokens or 0
            output_tokens += step.output_tokens or 0
        elif kind == "tool_call":
            tool_calls += 1
            name = step.tool or ""
            tools[name] = tools.get(name, 0) + 1
            if step.arguments is not None:
                key = (name, step.arguments)
                if key in seen_calls:
                    retries += 1
                else:
                    seen_calls.add(key)
        elif kind in ("reasoning", "assistant"):
            if step.text:
                texts.append(step.text)
        elif kind == "error" or (kind == "tool_result" and step.error):
            errors += 1
    inside = _subtree_run_ids(run, runs)
    depth = max((r.depth for r in runs if r.run_id in inside), default=run.depth) - run.depth
    duration = max(0, run.end_ns - run.start_ns) / 1e9
    complexity = (
        float(llm_calls),
        float(tool_calls),
        float(len(tools)),
        float(n_steps),
        float(input_tokens),
        float(output_tokens),
        float(errors),
        float(retries),
        duration,
        float(depth),
    )
    return tools, texts, complexity


def embed_run(
    texts: Sequence[str], embedder: Embedder, texts_cache: TextCache | None = None
) -> FloatArray:
    """The mean of the texts' embeddings, each block normalized (zeros without text)."""
    return _embed_run(texts, embedder, texts_cache)[0]


def _embed_run(
    texts: Sequence[str], embedder: Embedder, texts_cache: TextCache | None = None
) -> tuple[FloatArray, bool | None]:
    """`embed_run`, and `has_nonzero` of it when known on the way (None: not known): False
    without text, True when a block had a norm > 0 (a block of zeros has norm 0)."""
    if not texts:
        return np.zeros(embedder.dim, dtype=np.float64), False
    summed: FloatArray | None = None
    if isinstance(embedder, HashingEmbedder):
        # in C straight from the texts when it can; else from the cache's tokens: the same bits
        summed = embedder.embed_texts_sum(texts)
        if summed is None and texts_cache is not None:
            # `embed(texts)` is `embed_tokens` of each text's informative tokens: the same rows
            informative = texts_cache.informative
            summed = embedder.embed_tokens_sum([informative(t) if t else () for t in texts])
    total: FloatArray = (
        np.add.reduce(np.asarray(embedder.embed(texts), dtype=np.float64), axis=0)
        if summed is None
        else summed
    )
    return total, (True if _normalize_blocks_in_place(total, embedder.blocks) else None)


def normalize_blocks(vector: FloatArray, blocks: Blocks) -> FloatArray:
    """A copy with each block scaled to unit length (zero blocks stay zero)."""
    out = np.array(vector, dtype=np.float64, copy=True)
    _normalize_blocks_in_place(out, blocks)
    return out


def _normalize_blocks_in_place(out: FloatArray, blocks: Blocks) -> bool:
    """Each block of `out` scaled to unit length; whether one had a norm > 0 (then `out` is not
    all zeros: NaN is no norm > 0)."""
    nonzero = False
    for start, stop, _ in blocks:
        part = out[start:stop]
        norm = math.sqrt(float(part @ part))
        if norm > 0.0:
            nonzero = True
            part /= norm  # `part / norm`, element by element, into `out`
    return nonzero


def make_sample(texts: Sequence[str]) -> str:
    """A short, one-line sample of the first text."""
    for text in texts:
        line = _one_line_start(text)
        if line:
            return line if len(line) <= SAMPLE_CHARS else line[: SAMPLE_CHARS - 1] + "…"
    return ""


def _one_line_start(text: str) -> str:
    """`" ".join(text.split())`, or a prefix of it longer than `SAMPLE_CHARS` (all a sample
    needs): the words of ever longer prefixes of the text rather than of a long text."""
    size = 2 * SAMPLE_CHARS
    while size < len(text):
        # the words of text[:size] joined are a prefix of the whole text's (a word cut at the
        # end of the prefix is a prefix of that word)
        line = " ".join(text[:size].split())
        if len(line) > SAMPLE_CHARS:
            return line
        size *= 4
    return " ".join(text.split())
