"""The run history of every baseline store: writes, queries, deletion, retention.

The same tests for `MemoryStore`, `SQLiteStore` and `RedisStore` (a real server: `redis_url`
in tests/conftest.py); queries are checked against `RunQuery.select` over all records, the
rule every store must agree with.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound.baselines import BaselineStore, MemoryStore, RedisStore, SQLiteStore
from tracehound.drift import Baseline, HashingEmbedder, RunFeatures, embed_run
from tracehound.history import Retention, RunHistoryStore, RunQuery, RunRecord

NOW = time.time()
AGENTS = ("svc/support_agent", "svc/order_agent", "other/support_agent")
TOOLS = ("get_order", "search", "refund")
SEVERITIES = (None, "none", "warning", "alert", "critical")


def make_record(i: int, **fields: Any) -> RunRecord:
    agent = AGENTS[i % len(AGENTS)]
    severity = SEVERITIES[i % len(SEVERITIES)]
    values: dict[str, Any] = {
        "trace_id": f"{i:032x}",
        "run_id": f"{i % 7:016x}",
        "agent": agent,
        "agent_name": agent.split("/")[1],
        "service_name": agent.split("/")[0],
        "start_ns": 1_700_000_000_000_000_000 + i * 1_000_000_000,
        "end_ns": 1_700_000_000_000_000_000 + i * 1_000_000_000 + 500_000_000,
        "recorded_at": NOW,
        "verdict": ("pass", "warn", "fail")[i % 3],
        "drift_score": None if severity is None else (i % 10) / 10,
        "drift_severity": severity,
        "tool_calls": {TOOLS[i % 3]: 1 + i % 4},
        "loop_kinds": ("repeat",) if i % 4 == 0 else (),
        "loop_tools": (TOOLS[i % 3],) if i % 4 == 0 else (),
    }
    values.update(fields)
    return RunRecord(**values)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    opened: BaselineStore
    if request.param == "memory":
        opened = MemoryStore()
    elif request.param == "sqlite":
        opened = SQLiteStore(tmp_path / "baselines.sqlite3")
    else:
        opened = RedisStore(request.getfixturevalue("redis_url"))
    yield opened
    opened.close()


def test_every_store_keeps_run_history(store: Any) -> None:
    assert isinstance(store, RunHistoryStore)


def test_write_get_replace_and_delete(store: Any) -> None:
    records = [make_record(i) for i in range(10)]
    assert store.add_runs(records, Retention()) == 0
    assert store.count_runs() == 10
    one = store.query_runs(RunQuery(trace_id=records[3].trace_id))
    assert one == [records[3]]
    # a record written again under the same key replaces the first one
    changed = make_record(3, verdict="fail", drift_score=0.9, drift_severity="critical")
    store.add_runs([changed], Retention())
    assert store.count_runs() == 10
    assert store.query_runs(RunQuery(trace_id=changed.trace_id)) == [changed]
    assert store.delete_runs([(changed.trace_id, changed.run_id), ("f" * 32, "0" * 16)]) == 1
    assert store.count_runs() == 9
    assert store.query_runs(RunQuery(trace_id=changed.trace_id)) == []


def test_queries_answer_newest_first_with_limit(store: Any) -> None:
    records = [make_record(i) for i in range(40)]
    store.add_runs(records, Retention())
    got = store.query_runs(RunQuery(limit=5))
    assert [r.trace_id for r in got] == [records[i].trace_id for i in range(39, 34, -1)]
    assert store.query_runs(RunQuery(limit=0)) == []
    assert len(store.query_runs(RunQuery(limit=None))) == 40


def test_ties_on_end_time_sort_by_id(store: Any) -> None:
    same_end = [make_record(i, end_ns=1_700_000_000_000_000_000) for i in range(6)]
    store.add_runs(same_end, Retention())
    got = store.query_runs(RunQuery(limit=2))
    assert got == RunQuery(limit=2).select(same_end)


_queries = st.builds(
    RunQuery,
    agent=st.sampled_from([None, "svc/*", "support_agent", "*/order_agent", "nobody"]),
    min_severity=st.sampled_from([None, "none", "warning", "alert", "critical"]),
    min_drift=st.sampled_from([None, 0.0, 0.3, 0.75]),
    max_drift=st.sampled_from([None, 0.2, 0.6, 1.0]),
    tool=st.sampled_from([None, "get_order", "re*", "missing"]),
    loop_kind=st.sampled_from([None, "repeat", "any", "consecutive"]),
    since_ns=st.sampled_from([None, 1_700_000_010_000_000_000, 1_700_000_030_500_000_000]),
    until_ns=st.sampled_from([None, 1_700_000_020_500_000_000]),
    verdict=st.sampled_from([None, "pass", "warn", "fail"]),
    keyword=st.sampled_from([None, "REFUND", "order", "0000000000000000000000000000001"]),
    limit=st.sampled_from([None, 0, 1, 3, 10]),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=_queries)
def test_a_query_equals_filtering_every_record(store: Any, query: RunQuery) -> None:
    records = [make_record(i) for i in range(45)]
    if store.count_runs() == 0:  # the fixture is shared by the examples: written once
        store.add_runs(records, Retention())
    assert store.query_runs(query) == query.select(records)


def test_count_bound_drops_the_oldest_written(store: Any) -> None:
    retention = Retention(max_runs=5)
    for i in range(12):
        store.add_runs([make_record(i, recorded_at=NOW + i)], retention)
        assert store.count_runs() <= 5
    kept = store.query_runs(RunQuery(limit=None))
    assert sorted(r.trace_id for r in kept) == [f"{i:032x}" for i in range(7, 12)]


def test_age_bound(store: Any) -> None:
    retention = Retention(max_age=3600)
    store.add_runs([make_record(0, recorded_at=NOW - 7200)], Retention(max_age=1e9))
    store.add_runs([make_record(1, recorded_at=NOW - 60)], Retention(max_age=1e9))
    assert store.count_runs() == 2
    assert store.prune_runs(retention) == 1
    assert [r.trace_id for r in store.query_runs(RunQuery())] == [f"{1:032x}"]
    # a write trims too
    store.add_runs([make_record(2, recorded_at=NOW - 7200)], Retention(max_age=1e9))
    assert store.add_runs([make_record(3)], retention) == 1
    assert store.count_runs() == 2


def test_run_flood_stays_within_the_bounds(store: Any) -> None:
    """50,000 records written as fast as the store takes them, 100 per write."""
    retention = Retention(max_runs=2_000, max_age=3600)
    written = 0
    for start in range(0, 50_000, 100):
        batch = [
            make_record(i, recorded_at=NOW - (7200 if i % 10 == 0 else 0))
            for i in range(start, start + 100)
        ]
        store.add_runs(batch, retention)
        written += len(batch)
        assert store.count_runs() <= retention.max_runs
    assert written == 50_000
    assert store.count_runs() == retention.max_runs
    kept = store.query_runs(RunQuery(limit=None))
    assert len(kept) == retention.max_runs
    assert all(r.recorded_at >= NOW - 3600 for r in kept)
    if isinstance(store, SQLiteStore):
        (rows,) = sqlite3.connect(store.path).execute("SELECT count(*) FROM runs").fetchone()
        assert rows == retention.max_runs
    if isinstance(store, RedisStore):
        client = store._client
        data, by_end, by_recorded = store._runs_keys
        assert client.hlen(data) == client.zcard(by_end) == client.zcard(by_recorded) == 2_000


EMBEDDER = HashingEmbedder(64)


def delta(trace_id: str, run_id: str, end_ns: int) -> Baseline:
    features = RunFeatures(
        run_id=run_id,
        trace_id=trace_id,
        start_ns=end_ns - 1,
        end_ns=end_ns,
        tools={"get_order": 2},
        complexity=tuple(float(end_ns + d) for d in range(10)),
        embedding=embed_run(["where is my order"], EMBEDDER),
        sample="where is my order",
    )
    return Baseline.update_delta(features, EMBEDDER)


def test_forget_recent_removes_ring_entries_only(store: Any) -> None:
    key = "svc/support_agent"
    for i in range(3):
        store.update(key, delta(f"{i:032x}", "r", 10 + i))
    before = store.get(key)
    assert before is not None
    assert {(r.trace_id, r.run_id) for r in before.recent} >= {(f"{1:032x}", "r")}
    assert store.forget_recent(key, [(f"{1:032x}", "r"), ("nope", "r")]) == 1
    after = store.get(key)
    assert after is not None
    assert (f"{1:032x}", "r") not in {(r.trace_id, r.run_id) for r in after.recent}
    assert len(after.recent) == len(before.recent) - 1
    # the merged sums stay as they were
    assert after.runs == before.runs
    assert after.tools == before.tools
    assert store.forget_recent(key, [(f"{1:032x}", "r")]) == 0
    assert store.forget_recent("svc/no_such_agent", [(f"{1:032x}", "r")]) == 0
