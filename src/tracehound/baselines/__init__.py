"""Baseline stores: where each agent's drift baseline lives between runs and processes.

- `BaselineStore`: the protocol (get, atomic update-by-merge, put, list, pin/unpin, reset,
  export/import, close). Every write is a merge or a replacement of one stored value, so a shared
  store implements it with one atomic script per operation.
- `MemoryStore`: in process memory (tests, one-shot evaluation).
- `SQLiteStore`: the embedded default, one file (`default_store_path()`), safe with several
  processes writing.
- `RedisStore`: shared by the replicas of a scaled-out sidecar (`redis://`, `rediss://`,
  `unix://` URLs; needs `tracehound[redis]`); each write is one atomic Lua script.

`open_store(location)` picks one from a string: `memory` (or `:memory:`) for a `MemoryStore`,
a `redis://`, `rediss://` or `unix://` URL for a `RedisStore`, anything else is a path for a
`SQLiteStore`; None opens the default SQLite file.

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
from tracehound.baselines._redis import ENV_REDIS_URL, RedisStore, is_redis_url, redact_url
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
    "ENV_REDIS_URL",
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "SCHEMA_VERSION",
    "BaselineInfo",
    "BaselineStore",
    "BaselineStoreError",
    "ImportMode",
    "MemoryStore",
    "RedisStore",
    "SQLiteStore",
    "UpdateResult",
    "apply_update",
    "check_location",
    "default_store_path",
    "is_redis_url",
    "open_store",
    "parse_export",
    "shown_location",
]


def shown_location(location: str) -> str:
    """A store location fit for messages and `--check-config`: a URL without its password."""
    return redact_url(location) if "://" in location else location


def check_location(location: str) -> None:
    """Raise `BaselineStoreError` unless `location` names a kind of store `open_store` opens
    (whether it can be opened is only known by opening it)."""
    if "://" in location and not is_redis_url(location):
        raise BaselineStoreError(
            f"unsupported baseline store {shown_location(location)!r}: give a file path, "
            "'memory', or a redis://, rediss:// or unix:// URL"
        )


def open_store(
    location: str | os.PathLike[str] | None = None, *, timeout: float = 30.0
) -> BaselineStore:
    """`memory` / `:memory:` → `MemoryStore`; `redis://`, `rediss://`, `unix://` → `RedisStore`
    (connected: an unreachable server fails here); a path → `SQLiteStore`; None → the default
    file. `timeout` is SQLite's wait for a lock (Redis timeouts are URL parameters).

    Raises `BaselineStoreError` when the location is not a usable baseline store.
    """
    if isinstance(location, str):
        if location in ("memory", ":memory:"):
            return MemoryStore()
        if is_redis_url(location):
            return RedisStore(location)
        check_location(location)
    return SQLiteStore(location, timeout=timeout)
