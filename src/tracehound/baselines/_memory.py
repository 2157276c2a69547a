"""`MemoryStore`: baselines in a dict (tests, one-shot runs, the evaluator's default)."""

from __future__ import annotations

import builtins
import threading
import time
from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from typing import Any

from tracehound.baselines._base import (
    DRIFT_EPISODE_SUFFIX,
    BaselineInfo,
    ImportMode,
    UpdateResult,
    apply_update,
    check_key,
    export_document,
    info_of,
    parse_import,
    without_runs,
)
from tracehound.drift import Baseline
from tracehound.history._record import RunQuery, RunRecord, record_key
from tracehound.history._store import Retention

__all__ = ["MemoryStore"]


class MemoryStore:
    """A `BaselineStore` in process memory; thread-safe; copies in and out (`get_shared`
    lends the stored baseline to a reader instead)."""

    __slots__ = ("_baselines", "_by_recorded", "_lock", "_runs", "_updated")

    def __init__(self) -> None:
        self._baselines: dict[str, Baseline] = {}
        self._updated: dict[str, float] = {}
        self._runs: dict[str, RunRecord] = {}
        # (write time, key) of every record, sorted: retention drops from the front
        self._by_recorded: builtins.list[tuple[float, str]] = []
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        return "memory"

    def get(self, key: str) -> Baseline | None:
        with self._lock:
            stored = self._baselines.get(check_key(key))
            return None if stored is None else stored.copy()

    def get_shared(self, key: str) -> Baseline | None:
        """The stored baseline itself, not a copy (None: none), for a caller that only reads
        it: never modify it. It stays as it was read: the store replaces its baselines (update,
        pin, import) rather than modifying them."""
        with self._lock:
            return self._baselines.get(check_key(key))

    def update(
        self, key: str, delta: Baseline, *, half_life_runs: float | None = None
    ) -> UpdateResult:
        check_key(key)
        with self._lock:
            new, result = apply_update(key, self._baselines.get(key), delta, half_life_runs)
            if new is not None:
                self._set(key, new)
            # stored baselines are replaced, never modified (see `_set_pinned`): the copy the
            # result owes its caller can wait until it is read
            return UpdateResult.copying(result.key, result.outcome, result.baseline)

    def put(self, key: str, baseline: Baseline) -> None:
        check_key(key)
        with self._lock:
            self._set(key, baseline.copy())

    def list(self) -> builtins.list[BaselineInfo]:
        with self._lock:
            return [info_of(k, b, self._updated[k]) for k, b in sorted(self._baselines.items())]

    def pin(self, key: str) -> bool:
        return self._set_pinned(key, True)

    def unpin(self, key: str) -> bool:
        return self._set_pinned(key, False)

    def reset(self, key: str) -> bool:
        check_key(key)
        with self._lock:
            self._updated.pop(key, None)
            return self._baselines.pop(key, None) is not None

    def export_baselines(self) -> dict[str, Any]:
        with self._lock:
            return export_document(self._baselines.items())

    def import_baselines(
        self, document: Mapping[str, Any], *, mode: ImportMode = "replace"
    ) -> builtins.list[str]:
        incoming = parse_import(document, mode)
        with self._lock:
            staged: dict[str, Baseline] = {}
            for key, baseline in incoming.items():
                stored = self._baselines.get(key)
                staged[key] = (
                    baseline if mode == "replace" or stored is None else stored.merged(baseline)
                )
            for key, baseline in staged.items():
                self._set(key, baseline)
        return sorted(incoming)

    def close(self) -> None:
        return None

    # --- run history ---------------------------------------------------------------------------

    def add_runs(self, records: Sequence[RunRecord], retention: Retention) -> int:
        with self._lock:
            for record in records:
                key = record.key
                self._drop(key)  # a record written again replaces the first one
                self._runs[key] = record
                insort(self._by_recorded, (record.recorded_at, key))
            return self._prune(retention, time.time())

    def query_runs(self, query: RunQuery) -> builtins.list[RunRecord]:
        with self._lock:
            records = builtins.list(self._runs.values())
        return query.select(records)

    def delete_runs(self, keys: Sequence[tuple[str, str]]) -> int:
        with self._lock:
            return sum(self._drop(record_key(t, r)) for t, r in keys)

    def prune_runs(self, retention: Retention, *, now: float | None = None) -> int:
        with self._lock:
            return self._prune(retention, time.time() if now is None else now)

    def count_runs(self) -> int:
        with self._lock:
            return len(self._runs)

    def forget_recent(self, agent: str, keys: Sequence[tuple[str, str]]) -> int:
        gone = set(keys)
        removed = 0
        with self._lock:
            for key in (check_key(agent), agent + DRIFT_EPISODE_SUFFIX):
                stored = self._baselines.get(key)
                kept = None if stored is None else without_runs(stored, gone)
                if stored is not None and kept is not None:
                    removed += len(stored.recent) - len(kept.recent)
                    self._set(key, kept)
        return removed

    def _drop(self, key: str) -> bool:
        record = self._runs.pop(key, None)
        if record is None:
            return False
        order = self._by_recorded
        del order[bisect_left(order, (record.recorded_at, key))]
        return True

    def _prune(self, retention: Retention, now: float) -> int:
        """Drop the records written before the age bound, then the oldest past the count."""
        order = self._by_recorded
        stale = bisect_left(order, (now - retention.max_age, ""))
        excess = max(0, len(order) - stale - retention.max_runs)
        gone = stale + excess
        for _, key in order[:gone]:
            del self._runs[key]
        del order[:gone]
        return gone

    def _set(self, key: str, baseline: Baseline) -> None:
        self._baselines[key] = baseline
        self._updated[key] = time.time()

    def _set_pinned(self, key: str, pinned: bool) -> bool:
        check_key(key)
        with self._lock:
            stored = self._baselines.get(key)
            if stored is None:
                raise KeyError(f"no baseline for agent {key!r}")
            if stored.pinned == pinned:
                return False
            # a new object: update results may still share the old one
            changed = stored.copy()
            changed.pinned = pinned
            self._set(key, changed)
            return True
