"""Mergeable baseline statistics of one agent.

Everything in a `Baseline` is a weighted sum over runs, so that baselines built on several
replicas (or several stores) merge *exactly* into the baseline of all their runs:

- complexity: weighted mean and M2 per dimension (Welford for one run, Chan et al. for a merge);
- tool mix: the sum of each run's normalized tool-frequency vector (its direction is the
  centroid);
- semantics: the sum of the runs' unit text embeddings (the centroid, up to scale), tagged with
  the embedder's name and dimension;
- a ring of the most recent run summaries (by run end time), for explanations and for the
  spread of the baseline's own semantic distances.

Exponential decay (a half-life in runs) scales every sum by `2 ** (-k / half_life)` before `k`
new runs are added; the run count itself never decays (confidence is about evidence seen).
Merging refuses baselines of different embedders or complexity dimensions.

Serialization (`to_dict` / `from_dict`) gives JSON-able dicts; vectors are base64 of
little-endian float64 (the centroid sum, exact) or float16 (the recent runs' embeddings).
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from operator import itemgetter
from typing import Any

import numpy as np

from tracehound.conventions.base import fields_maker
from tracehound.drift._embed import Blocks, Embedder, FloatArray
from tracehound.drift._features import COMPLEXITY_DIMENSIONS, RunFeatures

__all__ = [
    "BASELINE_FORMAT",
    "BASELINE_VERSION",
    "RECENT_RUNS",
    "Baseline",
    "BaselineFormatError",
    "BaselineMismatchError",
    "RunSummary",
    "RunningStats",
]

BASELINE_FORMAT = "tracehound.drift.baseline"
BASELINE_VERSION = 1
RECENT_RUNS = 8
"""Default size of the ring of recent run summaries kept in a baseline."""


class BaselineFormatError(ValueError):
    """A serialized baseline that cannot be read (wrong format, version or shape)."""


class BaselineMismatchError(ValueError):
    """Runs or baselines of different embedding spaces (or dimensions) were mixed."""


# --- weighted Welford / Chan -------------------------------------------------------------------


@dataclass(slots=True)
class RunningStats:
    """Weighted mean and M2 (sum of squared deviations) of a fixed-length vector."""

    weight: float
    mean: FloatArray
    m2: FloatArray

    @classmethod
    def empty(cls, size: int) -> RunningStats:
        return cls(0.0, np.zeros(size, dtype=np.float64), np.zeros(size, dtype=np.float64))

    @classmethod
    def of(cls, values: Sequence[float], weight: float = 1.0) -> RunningStats:
        # `np.array` copies, as `np.asarray(...).copy()` did, in one call
        return cls(float(weight), np.array(values, dtype=np.float64), np.zeros(len(values)))

    def copy(self) -> RunningStats:
        return RunningStats(self.weight, self.mean.copy(), self.m2.copy())

    def add(self, values: Sequence[float], weight: float = 1.0) -> None:
        """Welford's update with one weighted observation."""
        x = np.asarray(values, dtype=np.float64)
        total = self.weight + weight
        if total <= 0.0:
            return
        delta = x - self.mean
        self.mean = self.mean + delta * (weight / total)
        self.m2 = self.m2 + weight * delta * (x - self.mean)
        self.weight = total

    def merged(self, other: RunningStats) -> RunningStats:
        """Chan et al.'s parallel combination (exact for weighted means and M2)."""
        if other.weight <= 0.0:
            return self.copy()
        if self.weight <= 0.0:
            return other.copy()
        total = self.weight + other.weight
        ratio = other.weight / total
        spread = self.weight * other.weight / total
        # numpy's elementwise `mean + delta * ratio`, `m2 + m2' + delta * delta * spread`, on
        # Python floats (the same operations, so the same bits; fewer calls on short vectors)
        mean: list[float] = []
        m2: list[float] = []
        for a, b, p, q in zip(
            self.mean.tolist(),
            other.mean.tolist(),
            self.m2.tolist(),
            other.m2.tolist(),
            strict=True,
        ):
            delta = b - a
            mean.append(a + delta * ratio)
            m2.append(p + q + delta * delta * spread)
        return RunningStats(total, np.array(mean, dtype=np.float64), np.array(m2, dtype=np.float64))

    def scale(self, factor: float) -> None:
        """Decay: every observation's weight times `factor` (the mean does not move)."""
        self.weight *= factor
        self.m2 = self.m2 * factor

    @property
    def variance(self) -> FloatArray:
        """Population (weighted) variance; zeros when there is no weight."""
        if self.weight <= 0.0:
            return np.zeros_like(self.m2)
        return np.maximum(self.m2 / self.weight, 0.0)

    @property
    def std(self) -> FloatArray:
        """Population standard deviation."""
        return np.sqrt(self.variance)

    @property
    def sample_std(self) -> FloatArray:
        """Bessel-corrected standard deviation (`M2 / (W - 1)`); population one when W <= 1."""
        if self.weight <= 1.0:
            return self.std
        return np.sqrt(np.maximum(self.m2 / (self.weight - 1.0), 0.0))


# --- recent runs ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """A recent baseline run, kept for explanations ("diverged most from …")."""

    trace_id: str
    run_id: str
    end_ns: int
    weight: float = 1.0
    tools: Mapping[str, int] = field(default_factory=dict)
    complexity: tuple[float, ...] = ()
    embedding: FloatArray | None = None
    """float16-precision copy of the run's unit embedding (None: the run had no text)."""
    sample: str = ""
    # Computed once, when first scored against: a summary stays in the ring for several runs.
    _shares: dict[str, float] | None = field(default=None, init=False, repr=False, compare=False)
    _complexity: FloatArray | None = field(default=None, init=False, repr=False, compare=False)

    def __getstate__(self) -> list[Any]:
        """The fields, as the dataclass pickles them, without the caches (they are made again
        when needed)."""
        return [None if f.name in _CACHES else getattr(self, f.name) for f in fields(self)]

    def __setstate__(self, state: list[Any]) -> None:
        for f, value in zip(fields(self), state, strict=True):
            object.__setattr__(self, f.name, value)

    @property
    def order_key(self) -> tuple[int, str, str]:
        return (self.end_ns, self.trace_id, self.run_id)

    def complexity_array(self) -> FloatArray:
        """`complexity` as a float64 array (cached; do not modify it)."""
        array = self._complexity
        if array is None:
            array = np.array(self.complexity, dtype=np.float64)
            object.__setattr__(self, "_complexity", array)
        return array

    def tool_shares(self) -> dict[str, float] | None:
        """`tool_shares_of(self.tools)` (cached; do not modify it)."""
        shares = self._shares
        if shares is None and self.tools:
            shares = tool_shares_of(self.tools)
            object.__setattr__(self, "_shares", shares)
        return shares

    @classmethod
    def of(cls, features: RunFeatures, has_text: bool | None = None) -> RunSummary:
        """The summary of a run (`has_text`: `features.has_text`, when known)."""
        embedding = None
        if features.has_text if has_text is None else has_text:
            embedding = _float16_copy(features.embedding)
        if cls is not RunSummary:
            return cls(
                trace_id=features.trace_id,
                run_id=features.run_id,
                end_ns=features.end_ns,
                tools=dict(features.tools),
                complexity=tuple(features.complexity),
                embedding=embedding,
                sample=features.sample,
            )
        return _new_summary(
            features.trace_id,
            features.run_id,
            features.end_ns,
            1.0,
            dict(features.tools),
            tuple(features.complexity),
            embedding,
            features.sample,
            None,
            None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "run_id": self.run_id,
            "end_ns": self.end_ns,
            "weight": self.weight,
            "tools": dict(sorted(self.tools.items())),
            "complexity": list(self.complexity),
            "embedding": None if self.embedding is None else _encode(self.embedding, "<f2"),
            "sample": self.sample,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], dim: int, n_dims: int) -> RunSummary:
        embedding = data.get("embedding")
        complexity = tuple(_floats(data.get("complexity"), "recent.complexity"))
        if len(complexity) != n_dims:
            raise BaselineFormatError("recent run with a complexity vector of the wrong length")
        tools = data.get("tools")
        if not isinstance(tools, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
            for k, v in tools.items()
        ):
            raise BaselineFormatError("recent run tools must map names to integer counts")
        return cls(
            trace_id=_str(data.get("trace_id"), "recent.trace_id"),
            run_id=_str(data.get("run_id"), "recent.run_id"),
            end_ns=_int(data.get("end_ns"), "recent.end_ns"),
            weight=_float(data.get("weight"), "recent.weight"),
            tools=dict(tools),
            complexity=complexity,
            embedding=None if embedding is None else _decode(embedding, "<f2", dim),
            sample=_str(data.get("sample", ""), "recent.sample"),
        )


_CACHES = frozenset(("_shares", "_complexity"))
"""`RunSummary`'s cached values (not pickled)."""

# summaries are made for every run that updates a baseline: without the dataclass's __init__
_new_summary = fields_maker(RunSummary)


# --- the baseline ------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Baseline:
    """The mergeable behavioural baseline of one agent (see the module docstring).

    Build one with `Baseline.empty(...)` or `Baseline.from_run(features, ...)`; combine with
    `merged`, age with `decayed`, add a run with `with_run`. Instances are not shared between
    threads; the methods named like verbs in the past tense return new objects.
    """

    embedder: str
    dim: int
    blocks: Blocks = ()
    """The embedding's blocks (start, stop, weight); default: one block."""
    dimensions: tuple[str, ...] = COMPLEXITY_DIMENSIONS
    runs: int = 0
    """Runs merged into the baseline (never decays)."""
    complexity: RunningStats = field(default_factory=lambda: RunningStats.empty(0))
    tools: dict[str, float] = field(default_factory=dict)
    """Tool name → sum over runs of the tool's share of the run's calls (times the run weight)."""
    centroid_sum: FloatArray = field(default_factory=lambda: np.zeros(0))
    text_weight: float = 0.0
    """Weight of the runs that had text (those in `centroid_sum`)."""
    first_ns: int = 0
    """Earliest start of a baseline run (0: no run)."""
    last_ns: int = 0
    """Latest end of a baseline run."""
    pinned: bool = False
    recent: tuple[RunSummary, ...] = ()
    recent_limit: int = RECENT_RUNS

    def __post_init__(self) -> None:
        if self.dim < 1:
            raise BaselineFormatError("baseline dim must be >= 1")
        if not self.blocks:
            self.blocks = ((0, self.dim, 1.0),)
        _check_blocks(self.blocks, self.dim)
        if self.complexity.mean.size == 0 and self.dimensions:
            self.complexity = RunningStats.empty(len(self.dimensions))
        if self.centroid_sum.size == 0:
            self.centroid_sum = np.zeros(self.dim, dtype=np.float64)
        if self.complexity.mean.shape != (len(self.dimensions),):
            raise BaselineFormatError("complexity statistics do not match the dimensions")
        if self.centroid_sum.shape != (self.dim,):
            raise BaselineFormatError(
                f"centroid has {self.centroid_sum.size} values, not {self.dim}"
            )

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def empty(cls, embedder: Embedder, *, recent_limit: int = RECENT_RUNS) -> Baseline:
        return cls(
            embedder=embedder.name,
            dim=embedder.dim,
            blocks=tuple(embedder.blocks),
            recent_limit=recent_limit,
        )

    @classmethod
    def from_run(
        cls, features: RunFeatures, embedder: Embedder, *, recent_limit: int = RECENT_RUNS
    ) -> Baseline:
        """A baseline of one run (weight 1): the delta a store merges on update."""
        return cls._of_run(features, embedder, recent_limit, True)

    @classmethod
    def update_delta(cls, features: RunFeatures, embedder: Embedder) -> Baseline:
        """`from_run(features, embedder)` for a store's `update`, which merges the delta or
        copies it: its centroid sum is the run's float64 embedding itself rather than a copy
        (neither may be modified afterwards)."""
        return cls._of_run(features, embedder, RECENT_RUNS, False)

    @classmethod
    def _of_run(
        cls, features: RunFeatures, embedder: Embedder, recent_limit: int, copy: bool
    ) -> Baseline:
        dim = embedder.dim
        if features.embedding.shape != (dim,):
            raise BaselineMismatchError(
                f"run embedding has {features.embedding.size} dimensions, the embedder "
                f"{embedder.name!r} has {dim}"
            )
        if len(features.complexity) != len(COMPLEXITY_DIMENSIONS):
            raise ValueError("run features have a complexity vector of the wrong length")
        total = sum(features.tools.values())
        tools = {name: count / total for name, count in features.tools.items()} if total else {}
        has_text = features.has_text
        embedding = features.embedding
        if not has_text:
            centroid_sum = np.zeros(dim, dtype=np.float64)
        elif copy or type(embedding) is not np.ndarray or embedding.dtype is not _FLOAT64:
            centroid_sum = embedding.astype(np.float64, copy=True)
        else:
            centroid_sum = embedding
        blocks = tuple(embedder.blocks)
        if _known_valid(blocks, dim):
            # what `__post_init__` checks holds: the blocks tile `dim`, and the shapes were
            # checked above
            return cls._of_valid(
                embedder.name,
                dim,
                blocks,
                COMPLEXITY_DIMENSIONS,
                1,
                RunningStats.of(features.complexity),
                tools,
                centroid_sum,
                1.0 if has_text else 0.0,
                features.start_ns,
                features.end_ns,
                False,
                (RunSummary.of(features, has_text),),
                recent_limit,
            )
        return cls(
            embedder=embedder.name,
            dim=dim,
            blocks=blocks,
            runs=1,
            complexity=RunningStats.of(features.complexity),
            tools=tools,
            centroid_sum=centroid_sum,
            text_weight=1.0 if has_text else 0.0,
            first_ns=features.start_ns,
            last_ns=features.end_ns,
            recent=(RunSummary.of(features),),
            recent_limit=recent_limit,
        )

    @classmethod
    def _of_valid(  # noqa: PLR0917 - every field, in order
        cls,
        embedder: str,
        dim: int,
        blocks: Blocks,
        dimensions: tuple[str, ...],
        runs: int,
        complexity: RunningStats,
        tools: dict[str, float],
        centroid_sum: FloatArray,
        text_weight: float,
        first_ns: int,
        last_ns: int,
        pinned: bool,
        recent: tuple[RunSummary, ...],
        recent_limit: int,
    ) -> Baseline:
        """A baseline of fields already known to be consistent (no `__post_init__` checks):
        copies and merges of valid baselines, which run once per scored run."""
        out = object.__new__(cls)
        out.embedder = embedder
        out.dim = dim
        out.blocks = blocks
        out.dimensions = dimensions
        out.runs = runs
        out.complexity = complexity
        out.tools = tools
        out.centroid_sum = centroid_sum
        out.text_weight = text_weight
        out.first_ns = first_ns
        out.last_ns = last_ns
        out.pinned = pinned
        out.recent = recent
        out.recent_limit = recent_limit
        return out

    def copy(self) -> Baseline:
        return Baseline._of_valid(
            self.embedder,
            self.dim,
            self.blocks,
            self.dimensions,
            self.runs,
            self.complexity.copy(),
            dict(self.tools),
            self.centroid_sum.copy(),
            self.text_weight,
            self.first_ns,
            self.last_ns,
            self.pinned,
            self.recent,
            self.recent_limit,
        )

    # --- combination -------------------------------------------------------------------------

    def check_compatible(
        self,
        embedder: str,
        dim: int,
        blocks: Blocks | None = None,
        dimensions: Sequence[str] | None = None,
    ) -> None:
        """Raise `BaselineMismatchError` unless runs of that embedder can join this baseline."""
        if (
            embedder != self.embedder
            or dim != self.dim
            or (blocks is not None and tuple(blocks) != self.blocks)
        ):
            raise BaselineMismatchError(
                f"baseline was built with embedder {self.embedder!r} ({self.dim}-d); "
                f"refusing to mix it with {embedder!r} ({dim}-d) — keep the same embedder "
                "(installing or removing tracehound[semantic] changes the default one; "
                "TRACEHOUND_EMBEDDER=hashing or =wordllama pins it), or reset this agent's "
                "baseline to rebuild it with the new one"
            )
        if dimensions is not None and tuple(dimensions) != self.dimensions:
            raise BaselineMismatchError(
                "baseline complexity dimensions differ: "
                f"{', '.join(self.dimensions)} vs {', '.join(dimensions)}"
            )

    def merged(self, other: Baseline) -> Baseline:
        """The baseline of both sets of runs (exact for every statistic). Keeps `self.pinned`."""
        if not (
            other.blocks is self.blocks
            and other.dimensions is self.dimensions
            and other.embedder == self.embedder
            and other.dim == self.dim
        ):  # the same objects (a delta of the baseline's embedder) are compatible
            self.check_compatible(other.embedder, other.dim, other.blocks, other.dimensions)
        tools = dict(self.tools)
        for name, value in other.tools.items():
            tools[name] = tools.get(name, 0.0) + value
        first, other_first = self.first_ns, other.first_ns
        # the earliest of those that are set (0: none)
        if not first or (other_first and other_first < first):
            first = other_first
        # both are valid and compatible: so is their merge
        return Baseline._of_valid(
            self.embedder,
            self.dim,
            self.blocks,
            self.dimensions,
            self.runs + other.runs,
            self.complexity.merged(other.complexity),
            tools,
            self.centroid_sum + other.centroid_sum,
            self.text_weight + other.text_weight,
            first,
            max(self.last_ns, other.last_ns),
            self.pinned,
            _merge_recent(self.recent, other.recent, self.recent_limit),
            self.recent_limit,
        )

    def decayed(self, half_life_runs: float | None, runs: int = 1) -> Baseline:
        """Each past run's weight times `2 ** (-runs / half_life_runs)` (a copy; None: none)."""
        if half_life_runs is None or self.runs == 0 or runs <= 0:
            return self.copy()
        if not half_life_runs > 0:
            raise ValueError("half_life_runs must be > 0")
        factor = 2.0 ** (-runs / half_life_runs)
        out = self.copy()
        out.complexity.scale(factor)
        out.tools = {name: value * factor for name, value in out.tools.items()}
        out.centroid_sum = out.centroid_sum * factor
        out.text_weight *= factor
        out.recent = tuple(replace(r, weight=r.weight * factor) for r in out.recent)
        return out

    def with_run(
        self, features: RunFeatures, embedder: Embedder, *, half_life_runs: float | None = None
    ) -> Baseline:
        """This baseline (decayed by one run) plus one run."""
        delta = Baseline.from_run(features, embedder, recent_limit=self.recent_limit)
        return self.decayed(half_life_runs, 1).merged(delta)

    # --- views -------------------------------------------------------------------------------

    @property
    def weight(self) -> float:
        """Total (decayed) weight of the runs: equals `runs` without decay."""
        return self.complexity.weight

    def tool_shares(self) -> dict[str, float]:
        """Tool name → its share of the baseline's tool mix (sums to 1; empty without tools)."""
        total = sum(self.tools.values())
        if total <= 0.0:
            return {}
        return {name: value / total for name, value in sorted(self.tools.items())}

    def centroid(self) -> FloatArray:
        """The baseline's text centroid, each block unit (zeros without text)."""
        out: FloatArray = self.centroid_sum.copy()
        for start, stop, _ in self.blocks:
            norm = math.sqrt(float(out[start:stop] @ out[start:stop]))
            if norm > 0.0:
                out[start:stop] /= norm
        return out

    def complexity_means(self) -> dict[str, float]:
        return dict(zip(self.dimensions, (float(v) for v in self.complexity.mean), strict=True))

    def complexity_stds(self) -> dict[str, float]:
        return dict(zip(self.dimensions, (float(v) for v in self.complexity.std), strict=True))

    def summary(self) -> dict[str, Any]:
        """A small JSON-able description (for `baseline list` / `show`)."""
        shares = self.tool_shares()
        return {
            "runs": self.runs,
            "weight": self.weight,
            "pinned": self.pinned,
            "embedder": self.embedder,
            "dim": self.dim,
            "first_ns": self.first_ns,
            "last_ns": self.last_ns,
            "tools": {k: round(v, 4) for k, v in sorted(shares.items(), key=lambda kv: -kv[1])},
            "complexity_mean": {k: round(v, 4) for k, v in self.complexity_means().items()},
            "complexity_std": {k: round(v, 4) for k, v in self.complexity_stds().items()},
            "recent_runs": [
                {"trace_id": r.trace_id, "run_id": r.run_id, "end_ns": r.end_ns, "sample": r.sample}
                for r in self.recent
            ],
        }

    # --- serialization -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": BASELINE_FORMAT,
            "version": BASELINE_VERSION,
            "embedder": {
                "name": self.embedder,
                "dim": self.dim,
                "blocks": [list(b) for b in self.blocks],
            },
            "runs": self.runs,
            "pinned": self.pinned,
            "first_ns": self.first_ns,
            "last_ns": self.last_ns,
            "complexity": {
                "dimensions": list(self.dimensions),
                "weight": self.complexity.weight,
                "mean": [float(v) for v in self.complexity.mean],
                "m2": [float(v) for v in self.complexity.m2],
            },
            "tools": dict(sorted(self.tools.items())),
            "text_weight": self.text_weight,
            "centroid_sum": _encode(self.centroid_sum, "<f8"),
            "recent_limit": self.recent_limit,
            "recent": [r.to_dict() for r in self.recent],
        }

    @classmethod
    def from_dict(cls, data: Any) -> Baseline:
        """Read `to_dict` output; `BaselineFormatError` on anything else."""
        if not isinstance(data, Mapping):
            raise BaselineFormatError("a baseline must be a JSON object")
        if data.get("format") != BASELINE_FORMAT:
            raise BaselineFormatError(f"not a tracehound baseline (format {data.get('format')!r})")
        version = data.get("version")
        if version != BASELINE_VERSION:
            raise BaselineFormatError(
                f"baseline version {version!r} is not supported (this tracehound reads "
                f"version {BASELINE_VERSION})"
            )
        try:
            embedder = data["embedder"]
            name = _str(embedder["name"], "embedder.name")
            dim = _int(embedder["dim"], "embedder.dim")
            raw_blocks = embedder.get("blocks", [])
            if not isinstance(raw_blocks, list):
                raise BaselineFormatError("embedder.blocks must be a list")
            blocks = tuple(_block(b) for b in raw_blocks)
            cx = data["complexity"]
            dimensions = tuple(_str(d, "complexity.dimensions") for d in cx["dimensions"])
            mean = _floats(cx["mean"], "complexity.mean")
            m2 = _floats(cx["m2"], "complexity.m2")
            if len(mean) != len(dimensions) or len(m2) != len(dimensions):
                raise BaselineFormatError("complexity vectors do not match the dimensions")
            tools = data["tools"]
            if not isinstance(tools, Mapping):
                raise BaselineFormatError("tools must be an object")
            recent_limit = _int(data.get("recent_limit", RECENT_RUNS), "recent_limit")
            recent = data.get("recent", [])
            if not isinstance(recent, list):
                raise BaselineFormatError("recent must be a list")
            return cls(
                embedder=name,
                dim=dim,
                blocks=blocks,
                dimensions=dimensions,
                runs=_int(data["runs"], "runs"),
                complexity=RunningStats(
                    _float(cx["weight"], "complexity.weight"),
                    np.asarray(mean, dtype=np.float64),
                    np.asarray(m2, dtype=np.float64),
                ),
                tools={_str(k, "tools"): _float(v, "tools") for k, v in tools.items()},
                centroid_sum=_decode(data["centroid_sum"], "<f8", dim),
                text_weight=_float(data["text_weight"], "text_weight"),
                first_ns=_int(data.get("first_ns", 0), "first_ns"),
                last_ns=_int(data.get("last_ns", 0), "last_ns"),
                pinned=bool(data.get("pinned", False)),
                recent=tuple(
                    RunSummary.from_dict(r, dim, len(dimensions))
                    for r in recent
                    if _is_mapping(r, "recent run")
                ),
                recent_limit=recent_limit,
            )
        except (KeyError, TypeError) as exc:
            raise BaselineFormatError(f"malformed baseline: missing or bad field {exc}") from exc


def _float16_copy(vector: FloatArray) -> FloatArray:
    """The vector rounded to float16, as float64."""
    return vector.astype(np.float16).astype(np.float64)


def tool_shares_of(tools: Mapping[str, int | float]) -> dict[str, float] | None:
    """Each tool's share of the calls, in the mapping's order (None: a total that is not > 0).

    The values `tool_mix_distance` divides by the total, computed once.
    """
    total = float(sum(tools.values()))
    if total <= 0.0:
        return None
    return {name: value / total for name, value in tools.items()}


def _merge_recent(
    a: Iterable[RunSummary], b: Iterable[RunSummary], limit: int
) -> tuple[RunSummary, ...]:
    """The `limit` latest runs of both rings (by end time, then ids); a run kept once."""
    if limit > 0 and type(a) is tuple and type(b) is tuple and len(b) == 1:
        appended = _appended(a, b[0])
        if appended is not None:
            return appended[-limit:]
    by_id: dict[tuple[str, str], tuple[tuple[int, str, str], RunSummary]] = {}
    for run in (*a, *b):
        order = (run.end_ns, run.trace_id, run.run_id)  # `run.order_key`
        key = (run.trace_id, run.run_id)
        kept = by_id.get(key)
        if kept is None or order > kept[0]:
            by_id[key] = (order, run)
    ordered = sorted(by_id.values(), key=itemgetter(0))
    return tuple(run for _, run in ordered[-limit:]) if limit > 0 else ()


def _appended(ring: tuple[RunSummary, ...], run: RunSummary) -> tuple[RunSummary, ...] | None:
    """`ring + (run,)` when that is already what `_merge_recent` sorts and dedupes to: the ring
    in strictly increasing order without a repeated run, and `run` later than all of it and not
    in it (a baseline updated run after run); None otherwise."""
    key = (run.trace_id, run.run_id)
    previous = None
    ids = set()
    for kept in ring:
        order = (kept.end_ns, kept.trace_id, kept.run_id)
        if previous is not None and not previous < order:
            return None
        previous = order
        ids.add(order[1:])
    if key in ids or len(ids) != len(ring):
        return None
    if previous is not None and not previous < (run.end_ns, *key):
        return None
    return (*ring, run)


_FLOAT64 = np.dtype(np.float64)

_VALID_BLOCKS: set[tuple[Blocks, int]] = set()
"""(blocks, dim) pairs that passed `_check_blocks` (a handful: one per embedder configuration)."""


_last_valid: tuple[Any, int] = (None, 0)
"""The (blocks, dim) pair `_known_valid` last found valid."""


def _known_valid(blocks: Blocks, dim: int) -> bool:
    """Whether a baseline of these blocks and dimension is valid, checked once per pair."""
    global _last_valid  # noqa: PLW0603 - a one-entry memo in front of the set
    last_blocks, last_dim = _last_valid
    if blocks is last_blocks and dim == last_dim:
        return True  # the pair of the last call (one embedder, run after run): no hashing
    try:
        if (blocks, dim) in _VALID_BLOCKS:
            _last_valid = (blocks, dim)
            return True
    except TypeError:  # blocks that cannot be hashed: the constructor checks them
        return False
    if not blocks or dim < 1:
        return False  # the constructor's default blocks, or its error
    try:
        _check_blocks(blocks, dim)
    except (BaselineFormatError, TypeError, ValueError):
        return False  # the constructor raises it
    _VALID_BLOCKS.add((blocks, dim))
    _last_valid = (blocks, dim)
    return True


# --- validation and vector encoding helpers ----------------------------------------------------


def _encode(vector: FloatArray, dtype: str) -> str:
    return base64.b64encode(np.ascontiguousarray(vector, dtype=dtype).tobytes()).decode("ascii")


def _decode(value: Any, dtype: str, dim: int) -> FloatArray:
    if not isinstance(value, str):
        raise BaselineFormatError("vectors must be base64 strings")
    try:
        raw = base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise BaselineFormatError(f"bad base64 vector: {exc}") from exc
    itemsize = np.dtype(dtype).itemsize
    if len(raw) != dim * itemsize:
        raise BaselineFormatError(f"vector has {len(raw) // itemsize} values, expected {dim}")
    out: FloatArray = np.frombuffer(raw, dtype=dtype).astype(np.float64)
    if not np.all(np.isfinite(out)):
        raise BaselineFormatError("vector holds non-finite values")
    return out


def _block(value: Any) -> tuple[int, int, float]:
    if not isinstance(value, list) or len(value) != 3:
        raise BaselineFormatError("an embedder block must be [start, stop, weight]")
    return (
        _int(value[0], "block start"),
        _int(value[1], "block stop"),
        _float(value[2], "block weight"),
    )


def _check_blocks(blocks: Blocks, dim: int) -> None:
    position = 0
    for start, stop, weight in blocks:
        if start != position or stop <= start or weight < 0:
            raise BaselineFormatError(
                f"embedder blocks {list(blocks)} do not tile {dim} dimensions"
            )
        position = stop
    if position != dim or abs(sum(w for _, _, w in blocks) - 1.0) > 1e-9:
        raise BaselineFormatError(
            f"embedder blocks {list(blocks)} do not tile {dim} dimensions with weights summing to 1"
        )


def _is_mapping(value: Any, what: str) -> bool:
    if not isinstance(value, Mapping):
        raise BaselineFormatError(f"{what} must be an object")
    return True


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise BaselineFormatError(f"{what} must be a string")
    return value


def _int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BaselineFormatError(f"{what} must be an integer")
    return value


def _float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BaselineFormatError(f"{what} must be a finite number")
    return float(value)


def _floats(value: Any, what: str) -> list[float]:
    if not isinstance(value, list):
        raise BaselineFormatError(f"{what} must be a list of numbers")
    return [_float(v, what) for v in value]
