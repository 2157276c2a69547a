"""`SQLiteStore`: the embedded default — one SQLite file, safe with several writing processes.

Location: the path given, else `$TRACEHOUND_BASELINES`, else
`$XDG_STATE_HOME/tracehound/baselines.sqlite3` (`~/.local/state/...` when XDG_STATE_HOME is unset
or not absolute). The file is opened in WAL mode (readers never block the writer) with
`synchronous=NORMAL` (a committed update survives the process being killed; a power loss may
lose the last commits, never the file) and a busy timeout. Every read-modify-write runs inside
`BEGIN IMMEDIATE`, so concurrent `update`s from several processes serialize and none is lost.

Layout (schema version in table `tracehound_meta`, plus `PRAGMA application_id`):

- version 1: `baselines(agent_key PRIMARY KEY, data)` — the baseline as JSON;
- version 2: adds `pinned`, `runs`, `embedder`, `dim`, `first_ns`, `last_ns`, `updated_at`
  columns, so that `list()` reads no JSON;
- version 3: adds the run history, `runs(record_key PRIMARY KEY, trace_id, agent, end_ns,
  recorded_at, data)` — the record as JSON, indexed by trace id, end time and write time —
  and its row count in `tracehound_meta` (`run_count`), so that the count bound costs no scan.

Opening migrates an older schema in one transaction. A file that is not SQLite, an SQLite
database of another application, a schema newer than this tracehound, or a damaged file raises
`BaselineStoreError` naming the path — the file is never reinitialized or modified then.
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from tracehound.baselines._base import (
    DRIFT_EPISODE_SUFFIX,
    BaselineInfo,
    BaselineStoreError,
    ImportMode,
    UpdateResult,
    apply_update,
    check_key,
    export_document,
    parse_import,
    without_runs,
)
from tracehound.drift import Baseline, BaselineFormatError
from tracehound.history._record import RunQuery, RunRecord, record_key
from tracehound.history._store import Retention

__all__ = [
    "APPLICATION_ID",
    "ENV_BASELINES",
    "SCHEMA_VERSION",
    "SQLiteStore",
    "default_store_path",
]

ENV_BASELINES = "TRACEHOUND_BASELINES"
"""Environment variable naming the SQLite baseline file (when no path is given)."""

APPLICATION_ID = 0x54484244  # "THBD"
"""`PRAGMA application_id` of a tracehound baseline store."""
SCHEMA_VERSION = 3
_FORMAT = "tracehound.baselines"
_SQLITE_HEADER = b"SQLite format 3\x00"

T = TypeVar("T")


def default_store_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$TRACEHOUND_BASELINES`, else the user's state dir `/tracehound/baselines.sqlite3`."""
    env = os.environ if environ is None else environ
    explicit = env.get(ENV_BASELINES)
    if explicit:
        return Path(explicit).expanduser()
    state = env.get("XDG_STATE_HOME", "")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local" / "state"
    return base / "tracehound" / "baselines.sqlite3"


# --- schema ------------------------------------------------------------------------------------

_V1 = (
    "CREATE TABLE tracehound_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE baselines (agent_key TEXT PRIMARY KEY, data TEXT NOT NULL)",
)


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    for column in (
        "pinned INTEGER NOT NULL DEFAULT 0",
        "runs INTEGER NOT NULL DEFAULT 0",
        "embedder TEXT NOT NULL DEFAULT ''",
        "dim INTEGER NOT NULL DEFAULT 0",
        "first_ns INTEGER NOT NULL DEFAULT 0",
        "last_ns INTEGER NOT NULL DEFAULT 0",
        "updated_at REAL NOT NULL DEFAULT 0",
    ):
        conn.execute(f"ALTER TABLE baselines ADD COLUMN {column}")
    now = time.time()
    for key, data in conn.execute("SELECT agent_key, data FROM baselines").fetchall():
        baseline = Baseline.from_dict(json.loads(data))
        conn.execute(
            "UPDATE baselines SET pinned=?, runs=?, embedder=?, dim=?, first_ns=?, last_ns=?, "
            "updated_at=? WHERE agent_key=?",
            (
                int(baseline.pinned),
                baseline.runs,
                baseline.embedder,
                baseline.dim,
                baseline.first_ns,
                baseline.last_ns,
                now,
                key,
            ),
        )


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE runs (record_key TEXT PRIMARY KEY, trace_id TEXT NOT NULL, "
        "agent TEXT NOT NULL, end_ns INTEGER NOT NULL, recorded_at REAL NOT NULL, "
        "data TEXT NOT NULL)"
    )
    conn.execute("CREATE INDEX runs_by_trace ON runs (trace_id)")
    conn.execute("CREATE INDEX runs_by_end ON runs (end_ns)")
    conn.execute("CREATE INDEX runs_by_recorded ON runs (recorded_at, record_key)")
    conn.execute("INSERT INTO tracehound_meta (key, value) VALUES ('run_count', '0')")


_MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
}
"""version → the function that brings a store from that version to the next."""


class SQLiteStore:
    """A `BaselineStore` in one SQLite file (see the module docstring).

    One connection, guarded by a lock, so a store may be shared by the threads of one process;
    other processes open their own `SQLiteStore` on the same file.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0
    ) -> None:
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        if not timeout > 0:
            raise ValueError("timeout must be > 0 seconds")
        self._lock = threading.RLock()
        self._closed = False
        self._conn = self._open(timeout)

    @property
    def location(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- opening -------------------------------------------------------------------------------

    def _not_ours(self, why: str) -> BaselineStoreError:
        return BaselineStoreError(f"{self.path} is not a tracehound baseline store ({why})")

    def _open(self, timeout: float) -> sqlite3.Connection:
        path = self.path
        if path.is_dir():
            raise self._not_ours("it is a directory")
        if path.exists() and path.stat().st_size > 0:
            with path.open("rb") as f:
                header = f.read(len(_SQLITE_HEADER))
            if header != _SQLITE_HEADER:
                raise self._not_ours("not an SQLite database")
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BaselineStoreError(f"cannot create the directory of {path}: {exc}") from exc
        try:
            conn = sqlite3.connect(
                str(path), timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise BaselineStoreError(f"cannot open baseline store {path}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            self._check_identity(conn)  # read-only: a foreign file is left untouched
            mode = _when_unlocked(
                lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone(), timeout
            )
            if not mode or str(mode[0]).lower() != "wal":
                raise BaselineStoreError(f"{path}: cannot switch the baseline store to WAL mode")
            conn.execute("PRAGMA synchronous = NORMAL")
            with _transaction(conn):
                self._check_identity(conn)
                self._initialize_or_migrate(conn)
        except BaselineStoreError:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise self._not_ours(f"unreadable: {exc}") from exc
        except (BaselineFormatError, ValueError) as exc:
            conn.close()
            raise BaselineStoreError(f"{path}: cannot migrate the baseline store: {exc}") from exc
        return conn

    def _check_identity(self, conn: sqlite3.Connection) -> None:
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        if not tables and app_id in (0, APPLICATION_ID):
            return  # new (or empty) file
        if "tracehound_meta" not in tables:
            listed = ", ".join(sorted(tables)[:5]) or "none"
            raise self._not_ours(f"an SQLite database of another application; tables: {listed}")
        meta = dict(conn.execute("SELECT key, value FROM tracehound_meta").fetchall())
        if meta.get("format") != _FORMAT:
            raise self._not_ours(f"its tracehound_meta names format {meta.get('format')!r}")
        version = _int_or_none(meta.get("schema_version"))
        if version is None or version < 1:
            raise self._not_ours(f"bad schema version {meta.get('schema_version')!r}")
        if version > SCHEMA_VERSION:
            raise BaselineStoreError(
                f"{self.path} uses baseline store schema version {version}; this tracehound "
                f"reads up to version {SCHEMA_VERSION} — upgrade tracehound"
            )

    def _initialize_or_migrate(self, conn: sqlite3.Connection) -> None:
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if not tables:
            for statement in _V1:
                conn.execute(statement)
            conn.executemany(
                "INSERT INTO tracehound_meta (key, value) VALUES (?, ?)",
                [("format", _FORMAT), ("schema_version", "1")],
            )
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            version = 1
        else:
            row = conn.execute(
                "SELECT value FROM tracehound_meta WHERE key = 'schema_version'"
            ).fetchone()
            version = int(row[0])
        while version < SCHEMA_VERSION:
            _MIGRATIONS[version](conn)
            version += 1
            conn.execute(
                "UPDATE tracehound_meta SET value = ? WHERE key = 'schema_version'", (str(version),)
            )

    @property
    def schema_version(self) -> int:
        return self._run(
            lambda c: int(
                c.execute(
                    "SELECT value FROM tracehound_meta WHERE key = 'schema_version'"
                ).fetchone()[0]
            )
        )

    # --- plumbing ------------------------------------------------------------------------------

    def _run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = False) -> T:
        with self._lock:
            if self._closed:
                raise BaselineStoreError(f"baseline store {self.path} is closed")
            conn = self._conn
            try:
                if not write:
                    return fn(conn)
                with _transaction(conn):
                    return fn(conn)
            except sqlite3.OperationalError as exc:
                raise BaselineStoreError(f"baseline store {self.path}: {exc}") from exc
            except sqlite3.DatabaseError as exc:
                raise BaselineStoreError(f"baseline store {self.path} is damaged: {exc}") from exc

    def _decode(self, key: str, data: str) -> Baseline:
        try:
            return Baseline.from_dict(json.loads(data))
        except (ValueError, RecursionError) as exc:
            raise BaselineStoreError(
                f"{self.path}: baseline {key!r} is unreadable ({exc})"
            ) from exc

    def _load(self, conn: sqlite3.Connection, key: str) -> Baseline | None:
        row = conn.execute("SELECT data FROM baselines WHERE agent_key = ?", (key,)).fetchone()
        return None if row is None else self._decode(key, row[0])

    @staticmethod
    def _store(conn: sqlite3.Connection, key: str, baseline: Baseline) -> None:
        data = json.dumps(baseline.to_dict(), separators=(",", ":"), allow_nan=False)
        conn.execute(
            "INSERT INTO baselines (agent_key, data, pinned, runs, embedder, dim, first_ns, "
            "last_ns, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(agent_key) DO UPDATE SET "
            "data = excluded.data, pinned = excluded.pinned, runs = excluded.runs, "
            "embedder = excluded.embedder, dim = excluded.dim, first_ns = excluded.first_ns, "
            "last_ns = excluded.last_ns, updated_at = excluded.updated_at",
            (
                key,
                data,
                int(baseline.pinned),
                baseline.runs,
                baseline.embedder,
                baseline.dim,
                baseline.first_ns,
                baseline.last_ns,
                time.time(),
            ),
        )

    # --- the protocol --------------------------------------------------------------------------

    def get(self, key: str) -> Baseline | None:
        check_key(key)
        return self._run(lambda c: self._load(c, key))

    def update(
        self, key: str, delta: Baseline, *, half_life_runs: float | None = None
    ) -> UpdateResult:
        check_key(key)

        def rmw(conn: sqlite3.Connection) -> UpdateResult:
            new, result = apply_update(key, self._load(conn, key), delta, half_life_runs)
            if new is not None:
                self._store(conn, key, new)
            return result

        return self._run(rmw, write=True)

    def put(self, key: str, baseline: Baseline) -> None:
        check_key(key)
        self._run(lambda c: self._store(c, key, baseline), write=True)

    def list(self) -> builtins.list[BaselineInfo]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT agent_key, runs, pinned, embedder, dim, first_ns, last_ns, updated_at "
                "FROM baselines ORDER BY agent_key"
            ).fetchall()
        )
        return [
            BaselineInfo(
                key=r[0],
                runs=r[1],
                pinned=bool(r[2]),
                embedder=r[3],
                dim=r[4],
                first_ns=r[5],
                last_ns=r[6],
                updated_at=r[7],
            )
            for r in rows
        ]

    def pin(self, key: str) -> bool:
        return self._set_pinned(key, True)

    def unpin(self, key: str) -> bool:
        return self._set_pinned(key, False)

    def _set_pinned(self, key: str, pinned: bool) -> bool:
        check_key(key)

        def rmw(conn: sqlite3.Connection) -> bool:
            stored = self._load(conn, key)
            if stored is None:
                raise KeyError(f"no baseline for agent {key!r} in {self.path}")
            if stored.pinned == pinned:
                return False
            stored.pinned = pinned
            self._store(conn, key, stored)
            return True

        return self._run(rmw, write=True)

    def reset(self, key: str) -> bool:
        check_key(key)
        return self._run(
            lambda c: c.execute("DELETE FROM baselines WHERE agent_key = ?", (key,)).rowcount > 0,
            write=True,
        )

    def export_baselines(self) -> dict[str, Any]:
        rows = self._run(lambda c: c.execute("SELECT agent_key, data FROM baselines").fetchall())
        return export_document((key, self._decode(key, data)) for key, data in rows)

    def import_baselines(
        self, document: Mapping[str, Any], *, mode: ImportMode = "replace"
    ) -> builtins.list[str]:
        incoming = parse_import(document, mode)

        def write(conn: sqlite3.Connection) -> builtins.list[str]:
            staged: dict[str, Baseline] = {}
            for key, baseline in incoming.items():
                stored = self._load(conn, key) if mode == "merge" else None
                staged[key] = baseline if stored is None else stored.merged(baseline)
            for key, baseline in staged.items():
                self._store(conn, key, baseline)
            return sorted(incoming)

        return self._run(write, write=True)

    # --- run history ---------------------------------------------------------------------------

    def add_runs(self, records: Sequence[RunRecord], retention: Retention) -> int:
        rows = [(r.key, r.trace_id, r.agent, r.end_ns, r.recorded_at, r.to_json()) for r in records]

        def write(conn: sqlite3.Connection) -> int:
            added = 0
            for row in rows:
                exists = conn.execute(
                    "SELECT 1 FROM runs WHERE record_key = ?", (row[0],)
                ).fetchone()
                conn.execute(
                    "INSERT INTO runs (record_key, trace_id, agent, end_ns, recorded_at, data) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(record_key) DO UPDATE SET "
                    "trace_id = excluded.trace_id, agent = excluded.agent, "
                    "end_ns = excluded.end_ns, recorded_at = excluded.recorded_at, "
                    "data = excluded.data",
                    row,
                )
                added += exists is None
            _add_count(conn, added)
            return _prune(conn, retention, time.time())

        return self._run(write, write=True)

    def query_runs(self, query: RunQuery) -> builtins.list[RunRecord]:
        # the indexed filters narrow in SQL; `query.select` applies every filter and the order
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        if query.trace_id is not None:
            where.append("trace_id = ?")
            params.append(query.trace_id)
        if query.since_ns is not None:
            where.append("end_ns >= ?")
            params.append(query.since_ns)
        if query.until_ns is not None:
            where.append("end_ns < ?")
            params.append(query.until_ns)
        sql = "SELECT record_key, end_ns, data FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY end_ns DESC"
        selected: builtins.list[RunRecord] = []
        limit = query.limit
        if limit == 0:
            return []

        def read(conn: sqlite3.Connection) -> None:
            for key, end_ns, data in conn.execute(sql, params):
                # past the limit, only the rows ending with the last one (ties sort by id)
                if limit is not None and len(selected) >= limit and end_ns != selected[-1].end_ns:
                    break
                record = self._record(key, data)
                if query.matches(record):
                    selected.append(record)

        self._run(read)
        return query.select(selected)

    def _record(self, key: str, data: str) -> RunRecord:
        try:
            return RunRecord.from_json(data)
        except ValueError as exc:
            raise BaselineStoreError(f"{self.path}: run {key!r} is unreadable ({exc})") from None

    def delete_runs(self, keys: Sequence[tuple[str, str]]) -> int:
        def write(conn: sqlite3.Connection) -> int:
            gone = 0
            for trace_id, run_id in keys:
                gone += conn.execute(
                    "DELETE FROM runs WHERE record_key = ?", (record_key(trace_id, run_id),)
                ).rowcount
            _add_count(conn, -gone)
            return gone

        return self._run(write, write=True)

    def prune_runs(self, retention: Retention, *, now: float | None = None) -> int:
        at = time.time() if now is None else now
        return self._run(lambda c: _prune(c, retention, at), write=True)

    def count_runs(self) -> int:
        return self._run(lambda c: int(c.execute("SELECT count(*) FROM runs").fetchone()[0]))

    def forget_recent(self, agent: str, keys: Sequence[tuple[str, str]]) -> int:
        check_key(agent)
        gone = set(keys)

        def write(conn: sqlite3.Connection) -> int:
            removed = 0
            for key in (agent, agent + DRIFT_EPISODE_SUFFIX):
                stored = self._load(conn, key)
                kept = None if stored is None else without_runs(stored, gone)
                if stored is not None and kept is not None:
                    removed += len(stored.recent) - len(kept.recent)
                    self._store(conn, key, kept)
            return removed

        return self._run(write, write=True)

    def integrity_check(self) -> str:
        """SQLite's `PRAGMA integrity_check` result (`ok` for a sound file)."""
        return self._run(lambda c: str(c.execute("PRAGMA integrity_check").fetchone()[0]))

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()


_T = TypeVar("_T")


def _when_unlocked(action: Callable[[], _T], timeout: float) -> _T:
    """`action()`, retried while the database is locked, for up to `timeout` seconds.

    Switching a new file to WAL needs an exclusive lock, and SQLite answers "database is locked"
    at once there rather than through the busy handler: processes opening the same new store
    together (several instrumented apps starting on one machine) would otherwise fail.
    """
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """`BEGIN IMMEDIATE` … `COMMIT` (rollback on any exception): the write lock up front."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _add_count(conn: sqlite3.Connection, delta: int) -> None:
    if delta:
        conn.execute(
            "UPDATE tracehound_meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'run_count'",
            (delta,),
        )


def _prune(conn: sqlite3.Connection, retention: Retention, now: float) -> int:
    """Trim the run history to `retention` (in the caller's transaction); how many went."""
    removed = conn.execute(
        "DELETE FROM runs WHERE recorded_at < ?", (now - retention.max_age,)
    ).rowcount
    _add_count(conn, -removed)
    count = int(
        conn.execute("SELECT value FROM tracehound_meta WHERE key = 'run_count'").fetchone()[0]
    )
    excess = count - retention.max_runs
    if excess > 0:
        gone = conn.execute(
            "DELETE FROM runs WHERE record_key IN (SELECT record_key FROM runs "
            "ORDER BY recorded_at, record_key LIMIT ?)",
            (excess,),
        ).rowcount
        _add_count(conn, -gone)
        removed += gone
    return removed


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
