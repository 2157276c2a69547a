"""Run history: a compact record of every evaluated run, kept in the baseline store.

- `RunRecord`: one run (ids, agent, times, verdict, drift, loops, evidence, expectations,
  tool counts; content only when opted in), built from a finalized trace by `records_of`.
- `RunQuery`: a filter (agent glob, minimum severity, drift range, tool, loop kind, time
  range, verdict, keyword), applied alike by every store.
- `Retention`: the bounds a store keeps (max runs, max age), trimmed on every write.
- `HistoryWriter`: what `serve`, the processor and `eval --baselines` call per finalized trace.
- The query layer shared by `tracehound runs` and the MCP server: `list_runs`,
  `search_runs`, `get_run`, `explain_run`, `delete_runs`, `recent_findings`, `history_info`
  — each returns a JSON-ready dict (docs/history.md).
"""

from tracehound.history._query import (
    ROW_KEYS,
    RunNotFoundError,
    delete_runs,
    explain_run,
    get_run,
    history_info,
    history_of,
    list_runs,
    make_query,
    recent_findings,
    row_of,
    search_runs,
)
from tracehound.history._record import (
    CONTENT_CHARS,
    RECORD_FORMAT,
    VERDICTS,
    RunQuery,
    RunRecord,
    parse_duration,
    parse_moment,
    record_key,
    records_of,
    verdict_of,
)
from tracehound.history._store import (
    DEFAULT_MAX_AGE,
    DEFAULT_MAX_RUNS,
    HistorySettings,
    Retention,
    RunHistoryStore,
)
from tracehound.history._writer import HistoryWriter, history_store_of

__all__ = [
    "CONTENT_CHARS",
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_RUNS",
    "RECORD_FORMAT",
    "ROW_KEYS",
    "VERDICTS",
    "HistorySettings",
    "HistoryWriter",
    "Retention",
    "RunHistoryStore",
    "RunNotFoundError",
    "RunQuery",
    "RunRecord",
    "delete_runs",
    "explain_run",
    "get_run",
    "history_info",
    "history_of",
    "history_store_of",
    "list_runs",
    "make_query",
    "parse_duration",
    "parse_moment",
    "recent_findings",
    "record_key",
    "records_of",
    "row_of",
    "search_runs",
    "verdict_of",
]
