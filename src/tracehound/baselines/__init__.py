"""Baseline stores: where each agent's drift baseline lives between runs and processes.

- `BaselineStore`: the protocol (get, atomic update-by-merge, put, list, pin/unpin, reset,
  export/import, close). Every write is a merge or a replacement of one stored value, so a shared
  store (Redis, later) implements it with one atomic script per operation.
- `MemoryStore`: in process memory (tests, one-shot evaluation).
- `SQLiteStore`: the embedded default, one file (`default_store_path()`), safe with several
  processes writing.

`open_store(location)` picks one from a string: `memory` (or `:memory:`) for a `MemoryStore`,
anything else is a path for a `SQLiteStore`; None opens the default SQLite file.

Typical use::

    from tracehound.baselines import open_store
    from tracehound.drift import Baseline, DriftScorer, HashingEmbedder, run_features

    store = open_store("baselines.sqlite3")
    embedder = HashingEmbedder()
    features = run_features(trajectory, run, embedder)
    score = DriftScorer().score(features, store.get(key), embedder=embedder)
    store.update(key, Baseline.from_run(features, embedder))
    store.close()
"""

from __future__ import annotations

import os

from tracehound.baselines._base import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    BaselineInfo,
    BaselineStore,
    BaselineStoreError,
    ImportMode,
    UpdateResult,
    apply_update,
    parse_export,
)
from tracehound.baselines._memory import MemoryStore
from tracehound.baselines._sqlite import (
    APPLICATION_ID,
    ENV_BASELINES,
    SCHEMA_VERSION,
    SQLiteStore,
    default_store_path,
)

__all__ = [
    "APPLICATION_ID",
    "ENV_BASELINES",
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "SCHEMA_VERSION",
    "BaselineInfo",
    "BaselineStore",
    "BaselineStoreError",
    "ImportMode",
    "MemoryStore",
    "SQLiteStore",
    "UpdateResult",
    "apply_update",
    "default_store_path",
    "open_store",
    "parse_export",
]


def open_store(
    location: str | os.PathLike[str] | None = None, *, timeout: float = 30.0
) -> BaselineStore:
    """`memory` / `:memory:` → `MemoryStore`; a path → `SQLiteStore`; None → the default file.

    Raises `BaselineStoreError` when the file is not a usable baseline store.
    """
    if isinstance(location, str):
        if location in ("memory", ":memory:"):
            return MemoryStore()
        if "://" in location:
            raise BaselineStoreError(
                f"unsupported baseline store {location!r}: give a file path or 'memory'"
            )
    return SQLiteStore(location, timeout=timeout)
