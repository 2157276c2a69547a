"""`HistoryWriter`: records each finalized trace's runs in the store, never failing evaluation.

The three shapes call `write(trace)` once per finalized trace, after every evaluator ran: the
sidecar's evaluation loop, the processor's worker (when it has a store) and `tracehound eval
--baselines`. A store failure is counted (`errors`) and logged once, like the drift evaluator's
baseline errors become results rather than exceptions.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tracehound.history._record import records_of
from tracehound.history._store import Retention, RunHistoryStore

if TYPE_CHECKING:
    from tracehound.engine import FinalizedTrace

__all__ = ["HistoryWriter", "history_store_of"]

_logger = logging.getLogger(__name__)


def history_store_of(evaluators: Any) -> RunHistoryStore | None:
    """The store of the first drift evaluator among `evaluators`, if it keeps run history."""
    module = sys.modules.get("tracehound.evaluators.drift")
    if module is None:  # never imported: no drift evaluator (and no numpy import for nothing)
        return None
    DriftEvaluator = module.DriftEvaluator

    for evaluator in evaluators:
        inner = getattr(evaluator, "inner", evaluator)  # a `SafeEvaluator` wraps it
        if isinstance(inner, DriftEvaluator):
            store = inner.store
            return store if isinstance(store, RunHistoryStore) else None
    return None


class HistoryWriter:
    """Writes run records to the store `store_of()` returns (None: nothing to write).

    `store_of` is asked on every write, so a store reopened after a fork is the one written.
    """

    __slots__ = ("_logged", "_store_of", "content", "errors", "pruned", "retention", "written")

    def __init__(
        self,
        store_of: Callable[[], RunHistoryStore | None],
        *,
        retention: Retention | None = None,
        content: bool = False,
    ) -> None:
        self._store_of = store_of
        self.retention = retention or Retention()
        self.content = content
        self.written = 0
        self.pruned = 0
        self.errors = 0
        self._logged = False

    def write(self, trace: FinalizedTrace) -> int:
        """Record the trace's runs; return how many were written (0 after a failure)."""
        store = self._store_of()
        if store is None:
            return 0
        try:
            records = records_of(trace, content=self.content)
            if not records:
                return 0
            self.pruned += store.add_runs(records, self.retention)
        except Exception as exc:  # never break evaluation: counted, logged once
            self.errors += 1
            if not self._logged:
                self._logged = True
                _logger.warning(
                    "tracehound: writing the run history failed (%s); further failures are "
                    "counted, not logged",
                    exc,
                )
            return 0
        self.written += len(records)
        return len(records)
