"""`RedisStore` against a real redis-server: the same numbers as the other stores (bit for bit,
decay included), concurrent threads and processes, retried flushes, foreign and newer values,
an unreachable or vanishing server, the URL forms, the settings, `tracehound baseline` and two
`tracehound serve` replicas sharing one baseline.

(The store contract the other stores pass runs against Redis too: see
`tests/unit/test_drift_stores.py`.)
"""

from __future__ import annotations

import functools
import http.client
import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from _serve import Serve
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import child_environ
from redis_helpers import free_port, redis_server, with_prefix
from tracehound import names
from tracehound.baselines import (
    BaselineStore,
    BaselineStoreError,
    MemoryStore,
    RedisStore,
    SQLiteStore,
    open_store,
)
from tracehound.config import ConfigError
from tracehound.drift import (
    Baseline,
    BaselineMismatchError,
    HashingEmbedder,
    RunFeatures,
    embed_run,
)
from tracehound.history import Retention, RunQuery, RunRecord
from tracehound.server._settings import ServeSettings

UNIT_TESTS = Path(__file__).resolve().parents[1] / "unit"
if str(UNIT_TESTS) not in sys.path:
    sys.path.insert(0, str(UNIT_TESTS))

from _drift_scenarios import SCENARIOS, scenario_documents  # noqa: E402

pytestmark = [pytest.mark.integration]

EMBEDDER = HashingEmbedder(64)
BASE_NS = 1_767_225_600_000_000_000  # nanosecond times beyond 2**53, as real ones are
KEY = "research-service/planner"
TEXTS = (
    "Searched the catalogue and summarized the three best matches.",
    "Not sure which source fits; maybe the database, maybe the web.",
    "Extracted the records, then wrote the report.",
    "",
)


def features(worker: int, index: int, *, recent_limit: int | None = None) -> RunFeatures:
    text = TEXTS[(worker + index) % len(TEXTS)]
    return RunFeatures(
        run_id=f"w{worker}r{index}",
        trace_id=f"{worker:016x}{index:016x}",
        start_ns=BASE_NS + index * 1_000_003 + worker,
        end_ns=BASE_NS + index * 1_000_003 + worker + 50_000,
        tools={"search": 1 + index % 3, f"tool-{worker % 3}": 1 + worker},
        complexity=tuple(float((index * 7 + worker * 3 + d) % 11) / 3 for d in range(10)),
        embedding=embed_run([text], EMBEDDER) if text else np.zeros(EMBEDDER.dim),
        sample=text[:20],
    )


def delta(worker: int, index: int) -> Baseline:
    return Baseline.from_run(features(worker, index), EMBEDDER)


def merged_all(deltas: list[Baseline]) -> Baseline:
    return functools.reduce(lambda a, b: a.merged(b), deltas)


def assert_same_statistics(actual: Baseline, expected: Baseline) -> None:
    """Equal up to float rounding (merges in another order round differently)."""
    assert actual.runs == expected.runs
    assert (actual.first_ns, actual.last_ns) == (expected.first_ns, expected.last_ns)
    assert actual.weight == pytest.approx(expected.weight, rel=1e-12)
    np.testing.assert_allclose(actual.complexity.mean, expected.complexity.mean, rtol=1e-9)
    np.testing.assert_allclose(actual.complexity.m2, expected.complexity.m2, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(actual.centroid_sum, expected.centroid_sum, rtol=1e-9, atol=1e-12)
    assert actual.text_weight == pytest.approx(expected.text_weight, rel=1e-12)
    assert actual.tools == pytest.approx(expected.tools, rel=1e-9)
    assert [r.order_key for r in actual.recent] == [r.order_key for r in expected.recent]


@pytest.fixture
def store(redis_url: str) -> Iterator[RedisStore]:
    opened = RedisStore(redis_url)
    yield opened
    opened.close()


def raw_client(store: RedisStore) -> redis.Redis:
    return store._client


def without_query(url: str) -> str:
    return url.partition("?")[0]


# --- the same numbers as the other stores --------------------------------------------------------

tool_names = st.sampled_from(["search", "extract", "búsqueda", "工具", "a\u0000b", "z"])
run_features = st.builds(
    lambda trace, run, end, tools, cx, text: RunFeatures(
        run_id=run,
        trace_id=trace,
        start_ns=end - 1000 if end else 0,
        end_ns=end,
        tools=tools,
        complexity=tuple(cx),
        embedding=embed_run([text], EMBEDDER) if text else np.zeros(EMBEDDER.dim),
        sample=text,
    ),
    trace=st.sampled_from(["t1", "t2", "T1", "é", "\U0001f600", ""]),
    run=st.sampled_from(["r1", "r2", "ü"]),
    end=st.one_of(st.just(0), st.integers(BASE_NS, BASE_NS + 10**12), st.integers(1, 2**40)),
    tools=st.dictionaries(tool_names, st.integers(1, 5), max_size=4),
    cx=st.lists(
        st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False), min_size=10, max_size=10
    ),
    text=st.sampled_from(TEXTS),
)
operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("update"),
            run_features,
            st.one_of(st.none(), st.floats(0.5, 50.0)),
            st.integers(0, 4),
        ),
        st.tuples(st.sampled_from(["pin", "unpin", "reset"])),
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
def test_updates_equal_the_memory_store_bit_for_bit(store: RedisStore, ops: list[Any]) -> None:
    """Any sequence of updates (decay, duplicate run ids, unicode, pins, resets) leaves exactly
    the baseline the reference implementation computes: Lua does numpy's operations in order."""
    reference = MemoryStore()
    key = f"agent/{uuid.uuid4().hex}"
    for op in ops:
        if op[0] == "update":
            _, run, half_life, recent_limit = op
            change = Baseline.from_run(run, EMBEDDER, recent_limit=recent_limit)
            expected = reference.update(key, change, half_life_runs=half_life)
            actual = store.update(key, change, half_life_runs=half_life)
            assert actual.outcome == expected.outcome
            assert actual.baseline.to_dict() == expected.baseline.to_dict()
        elif op[0] == "reset":
            assert store.reset(key) == reference.reset(key)
        else:
            try:
                expected_change: bool | None = getattr(reference, op[0])(key)
            except KeyError:
                expected_change = None
            if expected_change is None:
                with pytest.raises(KeyError):
                    getattr(store, op[0])(key)
            else:
                assert getattr(store, op[0])(key) == expected_change
        stored, wanted = store.get(key), reference.get(key)
        assert (stored and stored.to_dict()) == (wanted and wanted.to_dict())
    assert store.export_baselines()["baselines"].get(key) == (
        reference.export_baselines()["baselines"].get(key)
    )


def test_a_pinned_baseline_ignores_even_a_mismatched_delta(store: RedisStore) -> None:
    """As `apply_update`: the pinned check comes before the embedder check."""
    store.update(KEY, delta(0, 0))
    store.pin(KEY)
    other = HashingEmbedder(32)
    foreign = Baseline.from_run(
        RunFeatures(run_id="x", embedding=embed_run(["t"], other), complexity=(0.0,) * 10), other
    )
    result = store.update(KEY, foreign)
    assert result.outcome == "pinned" and not result.applied and result.baseline.runs == 1


@pytest.mark.parametrize("what", ["embedder", "dimensions"])
def test_a_mismatch_is_refused_with_the_message_of_the_other_stores(
    store: RedisStore, what: str
) -> None:
    reference = MemoryStore()
    for target in (store, reference):
        target.update(KEY, delta(0, 0))
    if what == "embedder":
        other = HashingEmbedder(64, stance_weight=0.25)
        foreign = Baseline.from_run(
            RunFeatures(run_id="x", embedding=embed_run(["t"], other), complexity=(1.0,) * 10),
            other,
        )
    else:
        foreign = Baseline(
            embedder=EMBEDDER.name, dim=EMBEDDER.dim, blocks=EMBEDDER.blocks, dimensions=("a",)
        )
    with pytest.raises(BaselineMismatchError) as expected:
        reference.update(KEY, foreign)
    with pytest.raises(BaselineMismatchError) as actual:
        store.update(KEY, foreign)
    assert str(actual.value) == str(expected.value)
    with pytest.raises(BaselineMismatchError) as imported:
        store.import_baselines(
            {
                "format": "tracehound.baselines",
                "version": 1,
                "baselines": {"fresh/agent": delta(1, 1).to_dict(), KEY: foreign.to_dict()},
            },
            mode="merge",
        )
    assert str(imported.value) == str(expected.value)
    assert store.get("fresh/agent") is None  # nothing written
    stored = store.get(KEY)
    assert stored is not None and stored.to_dict() == delta(0, 0).to_dict()


# --- concurrency --------------------------------------------------------------------------------


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    workers=st.integers(2, 6),
    runs=st.integers(6, 30),
    seed=st.integers(0, 2**16),
)
def test_concurrent_threads_give_the_sequential_baseline(
    store: RedisStore, redis_url: str, workers: int, runs: int, seed: int
) -> None:
    """Threads racing on one agent (own stores, one connection pool each, as replicas have)
    lose no update and give the baseline of all runs, whatever the interleaving."""
    key = f"shared/{uuid.uuid4().hex}"
    deltas = [delta(seed % 7, seed + i) for i in range(runs)]
    shares = [deltas[w::workers] for w in range(workers)]
    start = threading.Barrier(workers)
    errors: list[BaseException] = []

    def replica(mine: list[Baseline]) -> None:
        try:
            with RedisStore(redis_url) as own:
                start.wait(10)
                for change in mine:
                    own.update(key, change)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=replica, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    stored = store.get(key)
    assert stored is not None
    assert_same_statistics(stored, merged_all(deltas))


def test_one_store_shared_by_threads(store: RedisStore) -> None:
    deltas = [delta(w, i) for w in range(4) for i in range(25)]
    threads = [
        threading.Thread(target=lambda part=part: [store.update(KEY, d) for d in part])
        for part in (deltas[w::4] for w in range(4))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    stored = store.get(KEY)
    assert stored is not None
    assert_same_statistics(stored, merged_all(deltas))


PROCESS_WRITER = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [{here!r}, {tests!r}]
    from test_redis_store import delta
    from tracehound.baselines import open_store

    worker, n = int(sys.argv[1]), int(sys.argv[2])
    store = open_store({url!r})
    for i in range(n):
        change = delta(worker, i)
        store.update("shared/agent", change)
        store.update(f"own/{{worker}}", change)
    store.close()
    """
)


def test_concurrent_processes_give_the_sequential_baseline(redis_url: str) -> None:
    workers, per_worker = 4, 30
    script = PROCESS_WRITER.format(
        here=str(Path(__file__).parent), tests=str(Path(__file__).parents[1]), url=redis_url
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(w), str(per_worker)])
        for w in range(workers)
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    with RedisStore(redis_url) as store:
        shared = store.get("shared/agent")
        assert shared is not None
        assert_same_statistics(
            shared, merged_all([delta(w, i) for w in range(workers) for i in range(per_worker)])
        )
        assert [(i.key, i.runs) for i in store.list()] == [
            *((f"own/{w}", per_worker) for w in range(workers)),
            ("shared/agent", workers * per_worker),
        ]


# --- idempotent flushes, keys --------------------------------------------------------------------


def test_a_retried_flush_is_applied_once(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that re-sends an update whose reply it lost (same flush id) changes nothing."""
    flush = store._flush_key(KEY)
    monkeypatch.setattr(store, "_flush_key", lambda key: flush)
    first = store.update(KEY, delta(0, 0))
    again = store.update(KEY, delta(0, 0))
    assert (first.outcome, again.outcome) == ("created", "created")
    stored = store.get(KEY)
    assert stored is not None and stored.runs == 1
    assert 0 < raw_client(store).ttl(flush) <= store.flush_ttl
    monkeypatch.undo()
    assert store.update(KEY, delta(0, 0)).baseline.runs == 2  # a new flush is merged
    # an import retried with the same id is not merged twice either
    document = store.export_baselines()
    monkeypatch.setattr(store, "_flush_key", lambda key: flush + b":import")
    store.import_baselines(document, mode="merge")
    store.import_baselines(document, mode="merge")
    stored = store.get(KEY)
    assert stored is not None and stored.runs == 4


def test_keys_are_namespaced_hash_tagged_and_isolated(redis_url: str) -> None:
    with RedisStore(redis_url) as store:
        store.update("svc/a", delta(0, 0))
        client = raw_client(store)
        key = f"{store.prefix}:{{svc/a}}".encode()
        assert client.type(key) == b"hash"
        assert client.hget(key, "embedder") == EMBEDDER.name.encode()
        markers = list(client.scan_iter(match=f"{store.prefix}:flush:*"))
        assert len(markers) == 1 and markers[0].startswith(
            f"{store.prefix}:flush:{{svc/a}}:".encode()
        )
        with RedisStore(with_prefix(without_query(redis_url), store.prefix + ":other")) as other:
            assert other.list() == [] and other.get("svc/a") is None
            other.update("svc/a", delta(1, 1))
            assert store.get("svc/a").runs == 1  # type: ignore[union-attr]
            other.reset("svc/a")
        assert store.location == redis_url  # the prefix is in the URL
        named = RedisStore(without_query(redis_url), prefix=store.prefix)
        assert named.location.endswith(f" (prefix {store.prefix})") and named.get("svc/a")
        named.close()


def test_odd_agent_keys_round_trip(store: RedisStore) -> None:
    keys = ["svc/{tagged}", "svc/}{", "svc/*?[x]\\", "svc/ünï/工具", "x" * 1024]
    for key in keys:
        store.update(key, delta(0, 0))
    assert [info.key for info in store.list()] == sorted(keys)
    assert sorted(store.export_baselines()["baselines"]) == sorted(keys)
    for key in keys:
        assert store.reset(key)


# --- values that are not ours ---------------------------------------------------------------------


def test_foreign_and_newer_values_are_refused_and_left_alone(store: RedisStore) -> None:
    client = raw_client(store)
    foreign = f"{store.prefix}:{{svc/foreign}}".encode()
    client.set(foreign, b"someone else's")
    for call in (
        lambda: store.get("svc/foreign"),
        lambda: store.update("svc/foreign", delta(0, 0)),
        lambda: store.pin("svc/foreign"),
        lambda: store.put("svc/foreign", delta(0, 0)),
        store.list,
        store.export_baselines,
    ):
        with pytest.raises(BaselineStoreError, match="WRONGTYPE"):
            call()
    assert client.get(foreign) == b"someone else's"
    client.delete(foreign)

    store.update("svc/new", delta(0, 0))
    newer = f"{store.prefix}:{{svc/new}}".encode()
    client.hset(newer, "version", "2")
    before = client.hgetall(newer)
    for call in (
        lambda: store.get("svc/new"),
        lambda: store.update("svc/new", delta(0, 1)),
        lambda: store.pin("svc/new"),
        lambda: store.import_baselines(store_document(), mode="merge"),
        lambda: store.import_baselines(store_document(), mode="replace"),
        lambda: store.put("svc/new", delta(0, 2)),
        store.list,
    ):
        with pytest.raises(BaselineStoreError, match=r"layout version 2.*upgrade tracehound"):
            call()
    assert client.hgetall(newer) == before

    client.hset(newer, mapping={"version": "1", "cx_mean": b"\x00" * 3})
    with pytest.raises(BaselineStoreError, match=r"baseline 'svc/new' is unreadable"):
        store.get("svc/new")
    with pytest.raises(BaselineStoreError, match=r"baseline 'svc/new' is unreadable"):
        store.update("svc/new", delta(0, 1))


def store_document() -> dict[str, Any]:
    return {
        "format": "tracehound.baselines",
        "version": 1,
        "baselines": {"svc/new": delta(3, 3).to_dict()},
    }


# --- connections ---------------------------------------------------------------------------------


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    started = time.monotonic()
    for opener in (RedisStore, open_store):
        with pytest.raises(BaselineStoreError, match="cannot reach the server") as info:
            opener(url)
        assert "hunter2" not in str(info.value) and ":***@127.0.0.1" in str(info.value)
        assert info.value.__cause__ is None and info.value.__context__ is not None
    assert time.monotonic() - started < 10


def test_a_server_that_goes_away_and_comes_back(tmp_path: Path) -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    with redis_server(port=port):
        store = RedisStore(url, outage_backoff=0.3)
        store.update(KEY, delta(0, 0))
    for call in (
        lambda: store.get(KEY),
        lambda: store.update(KEY, delta(0, 1)),
        lambda: store.pin(KEY),
        lambda: store.reset(KEY),
        store.list,
        store.export_baselines,
    ):
        with pytest.raises(BaselineStoreError, match="cannot reach the server"):
            call()
    with redis_server(port=port):  # a new, empty server: the store reconnects by itself
        time.sleep(0.35)  # once the outage back-off has passed
        assert store.get(KEY) is None
        assert store.update(KEY, delta(0, 1)).outcome == "created"
    store.close()
    store.close()  # idempotent
    with pytest.raises(BaselineStoreError, match="is closed"):
        store.get(KEY)


def test_an_unresponsive_server_costs_one_timeout_then_fails_fast() -> None:
    """A host that accepts connections and never answers (a hung Redis, a black-holed route)
    costs the caller one timeout; later calls fail at once until the back-off has passed."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # the kernel completes handshakes; nothing ever replies
        port = silent.getsockname()[1]
        url = f"redis://127.0.0.1:{port}/0?socket_timeout=0.5&socket_connect_timeout=0.5"
        started = time.monotonic()
        with pytest.raises(BaselineStoreError, match="cannot reach the server"):
            RedisStore(url)  # opening pings: the same timeout, reported at once
        assert time.monotonic() - started < 1.0  # one timeout: a timeout is never retried
        real_port = free_port()
        with redis_server(port=real_port):
            store = RedisStore(
                f"redis://127.0.0.1:{real_port}/0?socket_timeout=0.2", outage_backoff=30.0
            )
        # the server is gone now; the first call pays the failure, the next ones do not
        with pytest.raises(BaselineStoreError, match="cannot reach the server"):
            store.get(KEY)
        started = time.monotonic()
        for _ in range(20):
            with pytest.raises(BaselineStoreError, match=r"next attempt in \d+\.\d s"):
                store.get(KEY)
        assert time.monotonic() - started < 0.1
        store.close()


def test_unix_socket_and_tls_urls(tmp_path: Path, redis_base_url: str) -> None:
    socket_path = tmp_path / "redis.sock"
    with redis_server(port=0, unix_socket=socket_path):
        store = open_store(f"unix://{socket_path}?db=3&prefix=unix-test")
        assert isinstance(store, RedisStore) and store.prefix == "unix-test"
        store.update(KEY, delta(0, 0))
        assert [i.key for i in store.list()] == [KEY]
        store.close()
    # rediss:// is TLS: against a plain-text port the handshake fails, as a store error
    plain = without_query(redis_base_url).replace("redis://", "rediss://", 1)
    with pytest.raises(BaselineStoreError, match="cannot reach the server"):
        open_store(f"{plain}?socket_connect_timeout=0.5&socket_timeout=0.5")


def test_without_the_redis_package_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(BaselineStoreError, match=r"pip install 'tracehound\[redis\]'"):
        open_store(redis_url)


def test_bad_arguments(redis_url: str) -> None:
    with pytest.raises(BaselineStoreError, match="not a Redis URL"):
        RedisStore("http://localhost")
    with pytest.raises(ValueError, match="timeout"):
        RedisStore(redis_url, timeout=0)
    with pytest.raises(ValueError, match="flush_ttl"):
        RedisStore(redis_url, flush_ttl=0)
    with pytest.raises(BaselineStoreError, match="bad Redis URL"):
        RedisStore(without_query(redis_url) + "?socket_timeout=soon")


# --- settings, check-config, the baseline command -----------------------------------------------


def test_redis_url_setting_precedence(tmp_path: Path) -> None:
    url = "redis://:secret@redis.example:6379/0"
    toml = tmp_path / "t.toml"
    toml.write_text('[serve]\nbaselines = "from-toml.sqlite3"\n')
    resolved = ServeSettings.resolve({}, {"TRACEHOUND_REDIS_URL": url}, str(toml))
    assert resolved.baselines == url
    assert resolved.sources["baselines"] == "env TRACEHOUND_REDIS_URL"
    row = next(r for r in resolved.describe() if r[0] == "baselines")
    assert row[1] == "redis://:***@redis.example:6379/0"
    both = {"TRACEHOUND_REDIS_URL": url, "TRACEHOUND_BASELINES": "memory"}
    assert ServeSettings.resolve({}, both).baselines == "memory"
    assert ServeSettings.resolve({"baselines": "x.sqlite3"}, both).baselines == "x.sqlite3"
    assert ServeSettings.resolve({}, {}, str(toml)).baselines == "from-toml.sqlite3"
    with pytest.raises(ConfigError, match=r"TRACEHOUND_REDIS_URL.*redis://"):
        ServeSettings.resolve({}, {"TRACEHOUND_REDIS_URL": "/var/lib/baselines.sqlite3"})


def cli(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    environ = child_environ()
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "tracehound.cli", *args],
        capture_output=True,
        text=True,
        env=environ,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_check_config_connects_to_redis(redis_url: str, tmp_path: Path) -> None:
    result = cli(["serve", "--check-config"], {"TRACEHOUND_REDIS_URL": redis_url}, tmp_path)
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("baselines "))
    assert "[env TRACEHOUND_REDIS_URL]" in row
    assert "(Redis, reachable)" in result.stdout
    down = f"redis://:pw@127.0.0.1:{free_port()}/0"
    result = cli(["serve", "--check-config", "--baselines", down], cwd=tmp_path)
    assert result.returncode == 2
    assert "cannot reach the server" in result.stderr and ":pw@" not in result.stderr
    assert not list(tmp_path.iterdir())  # nothing created


def test_the_baseline_command_on_redis(redis_url: str, tmp_path: Path) -> None:
    with RedisStore(redis_url) as store:
        for i in range(3):
            store.update(KEY, delta(0, i))
        store.update("other/agent", delta(1, 0))
    listed = cli(["baseline", "list", "--baselines", redis_url, "--format", "json"], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert [(b["agent"], b["runs"]) for b in document["baselines"]] == [
        ("other/agent", 1),
        (KEY, 3),
    ]
    text = cli(["baseline", "--baselines", redis_url, "list"], cwd=tmp_path)
    assert "2 baseline(s) in redis://" in text.stdout
    assert cli(["baseline", "pin", KEY, "--baselines", redis_url]).returncode == 0
    export = tmp_path / "export.json"
    assert cli(["baseline", "export", str(export), "--baselines", redis_url]).returncode == 0
    assert cli(["baseline", "reset", "other/agent", "--baselines", redis_url]).returncode == 0
    imported = cli(["baseline", "import", str(export), "--merge", "--baselines", redis_url])
    assert imported.returncode == 0, imported.stderr
    with RedisStore(redis_url) as store:
        pinned = store.get(KEY)
        assert pinned is not None and pinned.pinned and pinned.runs == 6
        assert [i.key for i in store.list()] == ["other/agent", KEY]
    sqlite = tmp_path / "copy.sqlite3"
    assert cli(["baseline", "import", str(export), "--baselines", str(sqlite)]).returncode == 0
    with SQLiteStore(sqlite) as copy:
        assert copy.export_baselines() == json.loads(export.read_text())
    missing = cli(["baseline", "show", "nobody", "--baselines", redis_url])
    assert missing.returncode == 2 and "no baseline for agent 'nobody'" in missing.stderr
    assert not (tmp_path / "redis:").exists()  # never mistaken for a file path


# --- two sidecar replicas sharing one Redis ------------------------------------------------------


def post_traces(serve: Serve, document: dict[str, Any]) -> None:
    host, port = serve.http.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        body = json.dumps(document).encode()
        conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        assert response.status == 200
    finally:
        conn.close()


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def drift_results(path: Path) -> list[dict[str, Any]]:
    """The `tracehound.drift.*` attributes of every forwarded span that has them, in order."""
    found = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    attrs = {kv["key"]: kv["value"] for kv in span.get("attributes", [])}
                    if names.ATTR_DRIFT_AGENT in attrs:
                        found.append(attrs)
    return found


def runs_of(attrs: dict[str, Any]) -> int:
    return int(attrs[names.ATTR_DRIFT_BASELINE_RUNS]["intValue"])


def test_two_serve_replicas_share_their_baselines(redis_url: str, tmp_path: Path) -> None:
    documents = scenario_documents(SCENARIOS["control"]())
    outs = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    common = ["--evaluators", "drift", "--quiet-period", "0.2", "--baselines", redis_url]
    replicas = [Serve.start([*common, "--forward", f"file:{out}"]) for out in outs]
    store = RedisStore(redis_url)

    def runs() -> int:
        baseline = store.get(KEY)
        return 0 if baseline is None else baseline.runs

    try:
        for i, document in enumerate(documents[:4]):
            post_traces(replicas[0], document)  # one replica learns…
            wait_for(lambda i=i: runs() == i + 1)
        post_traces(replicas[1], documents[4])  # …the other scores against what it learned
        wait_for(lambda: runs() == 5)
        post_traces(replicas[0], documents[5])
        wait_for(lambda: runs() == 6)
    finally:
        codes = [replica.stop() for replica in replicas]
        store.close()
    assert codes == [0, 0], [replica.text for replica in replicas]
    seen_by_a, seen_by_b = (drift_results(out) for out in outs)
    assert [runs_of(a) for a in seen_by_a] == [0, 1, 2, 3, 5]
    assert [runs_of(b) for b in seen_by_b] == [4]
    assert all(a[names.ATTR_DRIFT_AGENT] == {"stringValue": KEY} for a in seen_by_a + seen_by_b)
    with RedisStore(redis_url) as check:
        (info,) = check.list()
        assert (info.key, info.runs) == (KEY, 6)
        # both replicas wrote their runs to the one run history, beside the baseline
        records = check.query_runs(RunQuery(limit=None))
        assert len(records) == check.count_runs() == 6
        assert {r.agent for r in records} == {KEY}
        assert [r.drift_baseline_runs for r in sorted(records, key=lambda r: r.end_ns)] == [
            0,
            1,
            2,
            3,
            4,
            5,
        ]
    listed = cli(["runs", "list", "--baselines", redis_url, "--format", "json"], {}, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["count"] == 6


def test_the_run_history_keys_share_one_hash_tag(redis_url: str) -> None:
    with RedisStore(redis_url) as store:
        store.update("svc/a", delta(0, 0))
        record = RunRecord(
            trace_id="a" * 32,
            run_id="b" * 16,
            agent="svc/a",
            agent_name="a",
            recorded_at=time.time(),
        )
        store.add_runs([record], Retention())
        client = raw_client(store)
        keys = sorted(client.scan_iter(match=f"{store.prefix}:runs:*"))
        tag = f"{store.prefix}:runs:{{history}}:".encode()
        assert keys == [tag + b"by_end", tag + b"by_recorded", tag + b"data"]
        assert [i.key for i in store.list()] == ["svc/a"]  # not taken for a baseline
        assert store.export_baselines()["baselines"].keys() == {"svc/a"}


def test_serve_refuses_to_start_without_its_redis(tmp_path: Path) -> None:
    result = cli(
        ["serve", "--otlp-grpc", "127.0.0.1:0", "--otlp-http", "127.0.0.1:0"],
        {"TRACEHOUND_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"},
        tmp_path,
    )
    assert result.returncode == 2
    assert "configuration error: baselines: Redis baseline store" in result.stderr
    assert "cannot reach the server" in result.stderr


def test_protocol_is_satisfied(store: RedisStore) -> None:
    assert isinstance(store, BaselineStore)
