"""The run-history side of a baseline store: the protocol and the retention bounds.

Every built-in store (`MemoryStore`, `SQLiteStore`, `RedisStore`) keeps its run history next
to its baselines. Retention is global (not per agent): at most `max_runs` records, none
recorded more than `max_age` seconds ago; each `add_runs` trims, so the bounds hold after every
write. The oldest records (by `recorded_at`) go first.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tracehound.history._record import RunQuery, RunRecord

__all__ = [
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_RUNS",
    "HistorySettings",
    "Retention",
    "RunHistoryStore",
]

DEFAULT_MAX_AGE = 30 * 86400.0
"""Seconds a record is kept: 30 days."""
DEFAULT_MAX_RUNS = 10_000
"""Records kept at most (over all agents)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Retention:
    """How much history a store keeps (see the module docstring)."""

    max_runs: int = DEFAULT_MAX_RUNS
    max_age: float = DEFAULT_MAX_AGE
    """Seconds."""

    def __post_init__(self) -> None:
        if isinstance(self.max_runs, bool) or not isinstance(self.max_runs, int):
            raise ValueError("max_runs must be a whole number")
        if self.max_runs < 1:
            raise ValueError("max_runs must be >= 1")
        if not (math.isfinite(self.max_age) and self.max_age > 0):
            raise ValueError("max_age must be a number of seconds > 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class HistorySettings:
    """Whether and how the shapes record runs (`history`, `history_max_runs`,
    `history_max_age`, `history_content`)."""

    enabled: bool = True
    retention: Retention = Retention()
    content: bool = False
    """Keep message content (the final answer, drift's text samples): off by default."""


@runtime_checkable
class RunHistoryStore(Protocol):
    """Run records in a store, keyed by (trace id, run id). Methods raise `BaselineStoreError`
    when the store fails."""

    def add_runs(self, records: Sequence[RunRecord], retention: Retention) -> int:
        """Write (or replace, by key) the records, then trim to `retention`; return how many
        records the trim removed."""
        ...

    def query_runs(self, query: RunQuery) -> builtins.list[RunRecord]:
        """The records matching `query`, newest first (`RunQuery.select`'s answer)."""
        ...

    def delete_runs(self, keys: Sequence[tuple[str, str]]) -> int:
        """Delete the records of these (trace id, run id) pairs; return how many existed."""
        ...

    def prune_runs(self, retention: Retention, *, now: float | None = None) -> int:
        """Trim to `retention` (as of `now`, wall-clock seconds); return how many went."""
        ...

    def count_runs(self) -> int:
        """How many records the store holds."""
        ...

    def forget_recent(self, agent: str, keys: Sequence[tuple[str, str]]) -> int:
        """Remove these runs from the recent-runs ring of the baseline `agent` and of its drift
        episode (`agent#drifting`); return how many ring entries went. Their sums (centroid,
        statistics, tool counts) stay: they are merged, not kept per run."""
        ...
