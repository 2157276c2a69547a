"""`SQLiteStore` against real processes and real files: SIGKILL mid-run, concurrent writers,
foreign and damaged files, schema migration."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from tracehound.baselines import APPLICATION_ID, SCHEMA_VERSION, BaselineStoreError, SQLiteStore
from tracehound.drift import Baseline, HashingEmbedder, RunFeatures, embed_run

UNIT_TESTS = Path(__file__).resolve().parents[1] / "unit"
EMBEDDER = HashingEmbedder(64)


def features(worker: int, index: int) -> RunFeatures:
    return RunFeatures(
        run_id=f"w{worker}r{index}",
        trace_id=f"{worker:016x}{index:016x}",
        start_ns=index * 100 + worker,
        end_ns=index * 100 + worker + 50,
        tools={"search": 1 + index % 3, "extract": 1 + worker},
        complexity=tuple(float((index * 7 + worker * 3 + d) % 11) for d in range(10)),
        embedding=embed_run([f"worker {worker} step {index % 5} searched"], EMBEDDER),
        sample="x",
    )


# --- a writer killed with SIGKILL ----------------------------------------------------------------

ENGINE_WRITER = textwrap.dedent(
    """
    import random, sys
    sys.path.insert(0, {unit!r})
    from _drift_scenarios import SCENARIOS, otlp_document, span_views
    from tracehound import Engine
    from tracehound.baselines import SQLiteStore
    from tracehound.evaluators.drift import DriftEvaluator, DriftEvaluatorConfig

    store = SQLiteStore({path!r})
    engine = Engine([DriftEvaluator(store, config=DriftEvaluatorConfig(no_update_at=None))])
    specs = SCENARIOS["combined_drift"]().runs
    rng = random.Random(1)
    for i in range(100_000):
        for view in span_views(otlp_document(specs[i % len(specs)], i, rng, scenario="kill")):
            engine.add_span(view)
        engine.flush()
        print(i + 1, flush=True)
    """
)


def test_a_writer_killed_mid_run_leaves_a_readable_store(tmp_path: Path) -> None:
    path = tmp_path / "baselines.sqlite3"
    key = "research-service/planner"
    committed = 0
    for _ in range(3):  # kill it three times; each restart continues the same baseline
        proc = subprocess.Popen(
            [sys.executable, "-c", ENGINE_WRITER.format(unit=str(UNIT_TESTS), path=str(path))],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 25 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen = int(line)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # what it printed before dying: each line is written after its update committed
        seen = max([seen, *(int(line) for line in proc.stdout.read().split())])
        proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL
        assert seen >= 25, "the writer made no progress"
        store = SQLiteStore(path)
        assert store.integrity_check() == "ok"
        baseline = store.get(key)
        assert baseline is not None
        # every update acknowledged before the kill is there; at most the one in flight is extra
        assert committed + seen <= baseline.runs <= committed + seen + 1
        committed = baseline.runs
        assert baseline.weight == baseline.runs  # no decay: the statistics are whole
        json.dumps(store.export_baselines())
        store.close()


# --- concurrent writers --------------------------------------------------------------------------

CONCURRENT_WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {here!r})
    from test_sqlite_store import EMBEDDER, features
    from tracehound.baselines import SQLiteStore
    from tracehound.drift import Baseline

    worker, n = int(sys.argv[1]), int(sys.argv[2])
    store = SQLiteStore({path!r}, timeout=60)
    for i in range(n):
        delta = Baseline.from_run(features(worker, i), EMBEDDER)
        store.update("shared/agent", delta)
        store.update(f"own/{{worker}}", delta)
    store.close()
    """
)


SIMULTANEOUS_OPENER = textwrap.dedent(
    """
    import sys, time
    from tracehound.baselines import SQLiteStore
    folder, start, rounds = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    for r in range(rounds):
        time.sleep(max(0.0, start + 0.15 * r - time.time()))
        SQLiteStore(f"{folder}/new-{r}.sqlite3", timeout=30).close()
    """
)


def test_processes_creating_one_new_store_together_all_succeed(tmp_path: Path) -> None:
    """Several apps starting at once on one machine open the same default file: switching a new
    file to WAL is answered "database is locked" at once (not through the busy timeout), so
    opening retries it; before that, about one open in 25 failed here."""
    workers, rounds = 4, 8
    start = time.time() + 2.0  # every worker imported and waiting by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SIMULTANEOUS_OPENER, str(tmp_path), str(start), str(rounds)]
        )
        for _ in range(workers)
    ]
    codes = [proc.wait(timeout=120) for proc in procs]
    assert codes == [0] * workers
    for r in range(rounds):
        store = SQLiteStore(tmp_path / f"new-{r}.sqlite3")
        assert store.list() == []
        store.close()


def test_concurrent_writers_lose_no_update(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    workers, per_worker = 3, 40
    script = CONCURRENT_WRITER.format(here=str(Path(__file__).parent), path=str(path))
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(w), str(per_worker)])
        for w in range(workers)
    ]
    codes = [proc.wait(timeout=120) for proc in procs]  # every one, before asserting
    assert codes == [0] * workers
    store = SQLiteStore(path)
    shared = store.get("shared/agent")
    assert shared is not None and shared.runs == workers * per_worker
    expected = Baseline.from_run(features(0, 0), EMBEDDER)
    for w in range(workers):
        for i in range(per_worker):
            if (w, i) != (0, 0):
                expected = expected.merged(Baseline.from_run(features(w, i), EMBEDDER))
    np.testing.assert_allclose(shared.complexity.mean, expected.complexity.mean, rtol=1e-9)
    np.testing.assert_allclose(shared.complexity.m2, expected.complexity.m2, rtol=1e-9)
    np.testing.assert_allclose(shared.centroid_sum, expected.centroid_sum, rtol=1e-9, atol=1e-12)
    assert shared.tools == pytest.approx(expected.tools, rel=1e-9)
    assert [(i.key, i.runs) for i in store.list()] == [
        ("own/0", per_worker),
        ("own/1", per_worker),
        ("own/2", per_worker),
        ("shared/agent", workers * per_worker),
    ]
    assert store.integrity_check() == "ok"
    store.close()


# --- files that are not (or no longer) baseline stores -------------------------------------------


def test_new_store_is_wal_with_an_application_id(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "b.sqlite3"
    store = SQLiteStore(path)
    store.update("k", Baseline.from_run(features(0, 0), EMBEDDER))
    assert store.schema_version == SCHEMA_VERSION
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()
    store.close()
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    SQLiteStore(empty).close()  # a zero-byte file is a new store


def test_a_text_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    with pytest.raises(
        BaselineStoreError,
        match=r"notes\.txt is not a tracehound baseline store \(not an SQLite database\)",
    ):
        SQLiteStore(path)
    assert path.read_text() == "not a database\n" * 100
    with pytest.raises(BaselineStoreError, match="is a directory"):
        SQLiteStore(tmp_path)


def test_a_foreign_sqlite_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(
        BaselineStoreError,
        match=r"app\.db is not a tracehound baseline store "
        r"\(an SQLite database of another application; tables: users\)",
    ):
        SQLiteStore(path)
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE tracehound_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO tracehound_meta VALUES ('format', 'something.else')")
    conn.commit()
    conn.close()
    with pytest.raises(BaselineStoreError, match=r"names format 'something\.else'"):
        SQLiteStore(path)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite3"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE tracehound_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(
        BaselineStoreError,
        match=f"schema version 99; this tracehound reads up to version {SCHEMA_VERSION} — upgrade",
    ):
        SQLiteStore(path)


def test_a_damaged_store_raises_instead_of_resetting(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite3"
    store = SQLiteStore(path)
    for i in range(40):
        store.update(f"agent/{i}", Baseline.from_run(features(1, i), EMBEDDER))
    store.close()
    size = path.stat().st_size
    assert size > 8 * 4096
    with path.open("r+b") as f:  # scribble over the pages after the header page
        f.seek(4096)
        f.write(os.urandom(size - 4096))
    with pytest.raises(BaselineStoreError) as info:
        damaged = SQLiteStore(path)
        try:
            damaged.list()
            damaged.export_baselines()
        finally:
            damaged.close()
    assert str(path) in str(info.value)
    assert path.stat().st_size == size  # never reinitialized


def test_an_unreadable_baseline_row_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite3"
    store = SQLiteStore(path)
    store.update("k", Baseline.from_run(features(0, 0), EMBEDDER))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE baselines SET data = '{\"format\": 1' WHERE agent_key = 'k'")
    conn.commit()
    conn.close()
    with pytest.raises(BaselineStoreError, match=r"baseline 'k' is unreadable"):
        store.get("k")
    with pytest.raises(BaselineStoreError, match=r"baseline 'k' is unreadable"):
        store.update("k", Baseline.from_run(features(0, 1), EMBEDDER))
    store.close()


def test_a_version_1_store_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    baseline = Baseline.from_run(features(0, 0), EMBEDDER).merged(
        Baseline.from_run(features(0, 1), EMBEDDER)
    )
    baseline.pinned = True
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE tracehound_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("CREATE TABLE baselines (agent_key TEXT PRIMARY KEY, data TEXT NOT NULL)")
    conn.executemany(
        "INSERT INTO tracehound_meta VALUES (?, ?)",
        [("format", "tracehound.baselines"), ("schema_version", "1")],
    )
    conn.execute("INSERT INTO baselines VALUES (?, ?)", ("svc/a", json.dumps(baseline.to_dict())))
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    assert store.schema_version == SCHEMA_VERSION
    (info,) = store.list()
    assert (info.key, info.runs, info.pinned, info.embedder, info.dim) == (
        "svc/a",
        2,
        True,
        EMBEDDER.name,
        64,
    )
    stored = store.get("svc/a")
    assert stored is not None and stored.to_dict() == baseline.to_dict()
    store.close()
    SQLiteStore(path).close()  # reopening a migrated store changes nothing


def test_a_version_2_store_keeps_its_baselines_and_gains_the_run_history(
    tmp_path: Path,
) -> None:
    """A file written before the run history (schema 2, as that tracehound made it) opens,
    keeps every baseline as it was, and gets an empty run history it then keeps."""
    from tracehound.baselines._sqlite import _V1, _migrate_1_to_2
    from tracehound.history import Retention, RunQuery, RunRecord

    path = tmp_path / "v2.sqlite3"
    baseline = Baseline.from_run(features(0, 0), EMBEDDER)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for statement in _V1:
        conn.execute(statement)
    conn.executemany(
        "INSERT INTO tracehound_meta VALUES (?, ?)",
        [("format", "tracehound.baselines"), ("schema_version", "1")],
    )
    conn.execute("INSERT INTO baselines VALUES (?, ?)", ("svc/a", json.dumps(baseline.to_dict())))
    _migrate_1_to_2(conn)
    conn.execute("UPDATE tracehound_meta SET value = '2' WHERE key = 'schema_version'")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("COMMIT")
    conn.close()
    store = SQLiteStore(path)
    assert store.schema_version == SCHEMA_VERSION == 3
    stored = store.get("svc/a")
    assert stored is not None and stored.to_dict() == baseline.to_dict()
    assert store.count_runs() == 0
    record = RunRecord(
        trace_id="a" * 32, run_id="b" * 16, agent="svc/a", agent_name="a", recorded_at=time.time()
    )
    store.add_runs([record], Retention())
    store.close()
    reopened = SQLiteStore(path)
    assert reopened.query_runs(RunQuery()) == [record]
    assert reopened.integrity_check() == "ok"
    reopened.close()
