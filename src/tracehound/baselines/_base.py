"""The baseline store protocol and the semantics every store shares.

A store maps an *agent key* (`service.name/agent name` by default) to a `Baseline`. Every write
is expressible as an atomic merge on the stored value, so that a shared store (Redis, in a Lua
script) can implement the same protocol:

- `update(key, delta, half_life_runs=...)`: if the baseline is pinned, nothing; if it does not
  exist, store `delta`; else store `stored.decayed(half_life_runs, delta.runs).merged(delta)`.
  Refuses (`BaselineMismatchError`) a delta of another embedder or dimension.
- `put(key, baseline)`: replace; `reset(key)`: delete (the next runs rebuild the baseline);
  `pin(key)` / `unpin(key)`: set the pinned flag (a pinned baseline is never updated — the
  reference a regression gate compares against).
- `export_baselines()` / `import_baselines(document, mode=...)`: every baseline as one JSON-able
  document; an import is validated completely before anything is written.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from tracehound.drift import Baseline, BaselineFormatError
from tracehound.names import DRIFT_EPISODE_SUFFIX

__all__ = [
    "DRIFT_EPISODE_SUFFIX",
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "MAX_KEY_LENGTH",
    "BaselineInfo",
    "BaselineStore",
    "BaselineStoreError",
    "ImportMode",
    "UpdateResult",
    "apply_update",
    "check_key",
    "export_document",
    "info_of",
    "parse_export",
    "parse_import",
    "without_runs",
]

EXPORT_FORMAT = "tracehound.baselines"
EXPORT_VERSION = 1
MAX_KEY_LENGTH = 1024

ImportMode = Literal["replace", "merge"]


class BaselineStoreError(Exception):
    """A store that cannot be opened or used (foreign or corrupt file, newer schema, I/O)."""


Outcome = Literal["created", "updated", "pinned"]


class UpdateResult:
    """What `update` did: `created`, `updated`, or `pinned` (left unchanged). Immutable."""

    __slots__ = ("_baseline", "_source", "key", "outcome")

    key: str
    outcome: Outcome
    _baseline: Baseline | None
    _source: Baseline | None

    def __init__(self, key: str, outcome: Outcome, baseline: Baseline) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "outcome", outcome)
        object.__setattr__(self, "_baseline", baseline)
        object.__setattr__(self, "_source", None)

    @classmethod
    def copying(cls, key: str, outcome: Outcome, stored: Baseline) -> UpdateResult:
        """A result whose `baseline` is a copy of `stored`, made when first read: `stored` must
        not change afterwards (a store that replaces its baselines rather than modifying them).
        Most callers only look at the outcome."""
        out = cls(key, outcome, stored)
        object.__setattr__(out, "_baseline", None)
        object.__setattr__(out, "_source", stored)
        return out

    @property
    def baseline(self) -> Baseline:
        """The stored baseline after the operation."""
        baseline = self._baseline
        if baseline is None:
            source = self._source
            assert source is not None
            baseline = source.copy()
            object.__setattr__(self, "_baseline", baseline)
            object.__setattr__(self, "_source", None)
        return baseline

    @property
    def applied(self) -> bool:
        return self.outcome != "pinned"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of an UpdateResult")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of an UpdateResult")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UpdateResult):
            return NotImplemented
        return (self.key, self.outcome, self.baseline) == (other.key, other.outcome, other.baseline)

    __hash__ = None  # type: ignore[assignment]  # as the dataclass it was: its Baseline is not hashable

    def __repr__(self) -> str:
        return (
            f"UpdateResult(key={self.key!r}, outcome={self.outcome!r}, baseline={self.baseline!r})"
        )


@dataclass(frozen=True, slots=True)
class BaselineInfo:
    """One line of `list()`: enough to show baselines without their vectors."""

    key: str
    runs: int
    pinned: bool
    embedder: str
    dim: int
    first_ns: int
    last_ns: int
    updated_at: float
    """Wall-clock time (seconds since the epoch) of the last write in this store."""


@runtime_checkable
class BaselineStore(Protocol):
    """Persistent baselines per agent key. Implementations: `MemoryStore`, `SQLiteStore`.

    Methods raise `BaselineStoreError` when the store itself fails, `KeyError` for `pin`/`unpin`
    of a missing key, `BaselineMismatchError` for an update of another embedder, `ValueError` for
    an invalid key or import document.
    """

    @property
    def location(self) -> str:
        """Where the store lives (a path, `memory`), for messages."""
        ...

    def get(self, key: str) -> Baseline | None:
        """The stored baseline (a private copy), or None."""
        ...

    def update(
        self, key: str, delta: Baseline, *, half_life_runs: float | None = None
    ) -> UpdateResult:
        """Atomically merge `delta` into the stored baseline (see the module docstring)."""
        ...

    def put(self, key: str, baseline: Baseline) -> None:
        """Replace the stored baseline (pinned flag included)."""
        ...

    def list(self) -> builtins.list[BaselineInfo]:
        """Every baseline, sorted by key."""
        ...

    def pin(self, key: str) -> bool:
        """Freeze the baseline; False if it was already pinned. `KeyError` if missing."""
        ...

    def unpin(self, key: str) -> bool:
        """Unfreeze the baseline; False if it was not pinned. `KeyError` if missing."""
        ...

    def reset(self, key: str) -> bool:
        """Delete the baseline (the next runs rebuild it); False if there was none."""
        ...

    def export_baselines(self) -> dict[str, Any]:
        """Every baseline in one JSON-able document (`EXPORT_FORMAT`)."""
        ...

    def import_baselines(
        self, document: Mapping[str, Any], *, mode: ImportMode = "replace"
    ) -> builtins.list[str]:
        """Write the baselines of an export document; return their keys.

        `replace` overwrites each baseline (pinned flag included); `merge` merges each into the
        stored one (the stored pinned flag wins), as replicas' partial baselines combine.
        Nothing is written when any baseline in the document is invalid or mismatched.
        """
        ...

    def close(self) -> None:
        """Release resources; idempotent."""
        ...


def check_key(key: Any) -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
        raise ValueError(
            f"baseline key must be a non-empty string of at most {MAX_KEY_LENGTH} characters"
        )
    return key


def apply_update(
    key: str, stored: Baseline | None, delta: Baseline, half_life_runs: float | None
) -> tuple[Baseline | None, UpdateResult]:
    """The new value of `key` (None: unchanged) and the result, for every store."""
    if half_life_runs is not None and not (math.isfinite(half_life_runs) and half_life_runs > 0):
        raise ValueError("half_life_runs must be a number > 0 (or None for no decay)")
    if stored is None:
        created = delta.copy()
        created.pinned = False
        return created, UpdateResult(key, "created", created)
    if stored.pinned:
        return None, UpdateResult(key, "pinned", stored)
    # `merged` returns a new baseline and leaves `stored` alone: without decay, no copy first
    aged = stored if half_life_runs is None else stored.decayed(half_life_runs, delta.runs)
    new = aged.merged(delta)
    return new, UpdateResult(key, "updated", new)


def info_of(key: str, baseline: Baseline, updated_at: float) -> BaselineInfo:
    return BaselineInfo(
        key=key,
        runs=baseline.runs,
        pinned=baseline.pinned,
        embedder=baseline.embedder,
        dim=baseline.dim,
        first_ns=baseline.first_ns,
        last_ns=baseline.last_ns,
        updated_at=updated_at,
    )


def export_document(items: Iterable[tuple[str, Baseline]]) -> dict[str, Any]:
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "baselines": {
            key: baseline.to_dict() for key, baseline in sorted(items, key=lambda kv: kv[0])
        },
    }


def parse_import(document: Any, mode: str) -> dict[str, Baseline]:
    """What every store's `import_baselines` checks first: the mode, then the whole document."""
    if mode not in ("replace", "merge"):
        raise ValueError("import mode must be 'replace' or 'merge'")
    return parse_export(document)


def parse_export(document: Any) -> dict[str, Baseline]:
    """Validate an export document completely; `ValueError` naming the first problem."""
    if not isinstance(document, Mapping):
        raise ValueError("a baselines export must be a JSON object")
    if document.get("format") != EXPORT_FORMAT:
        raise ValueError(f"not a tracehound baselines export (format {document.get('format')!r})")
    if document.get("version") != EXPORT_VERSION:
        raise ValueError(
            f"baselines export version {document.get('version')!r} is not supported "
            f"(this tracehound reads version {EXPORT_VERSION})"
        )
    baselines = document.get("baselines")
    if not isinstance(baselines, Mapping):
        raise ValueError("a baselines export needs a `baselines` object")
    out: dict[str, Baseline] = {}
    for key, data in baselines.items():
        check_key(key)
        try:
            out[key] = Baseline.from_dict(data)
        except BaselineFormatError as exc:
            raise ValueError(f"baseline {key!r}: {exc}") from exc
    return out


def without_runs(baseline: Baseline, keys: set[tuple[str, str]]) -> Baseline | None:
    """A copy of `baseline` without these (trace id, run id) in its recent-runs ring; None when
    none of them is there. The sums the runs were merged into are not touched."""
    kept = tuple(r for r in baseline.recent if (r.trace_id, r.run_id) not in keys)
    if len(kept) == len(baseline.recent):
        return None
    out = baseline.copy()
    out.recent = kept
    return out
