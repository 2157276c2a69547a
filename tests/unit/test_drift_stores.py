"""The `BaselineStore` protocol, held by `MemoryStore`, `SQLiteStore` and `RedisStore` alike
(the Redis one against a real server: see `redis_url` in tests/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tracehound.baselines import (
    EXPORT_FORMAT,
    BaselineStore,
    BaselineStoreError,
    MemoryStore,
    RedisStore,
    SQLiteStore,
    default_store_path,
    open_store,
)
from tracehound.drift import (
    Baseline,
    BaselineMismatchError,
    HashingEmbedder,
    RunFeatures,
    embed_run,
)

EMBEDDER = HashingEmbedder(64)


def delta(
    index: int, tools: dict[str, int] | None = None, text: str = "Searched and summarized."
) -> Baseline:
    features = RunFeatures(
        run_id=f"r{index}",
        trace_id=f"t{index}",
        start_ns=index,
        end_ns=index + 1,
        tools={"search": 1} if tools is None else tools,
        complexity=tuple(float(index + d) for d in range(10)),
        embedding=embed_run([text], EMBEDDER),
        sample=text,
    )
    return Baseline.from_run(features, EMBEDDER)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaselineStore]:
    opened: BaselineStore
    if request.param == "memory":
        opened = MemoryStore()
    elif request.param == "sqlite":
        opened = SQLiteStore(tmp_path / "b.sqlite3")
    else:
        opened = RedisStore(request.getfixturevalue("redis_url"))
    assert isinstance(opened, BaselineStore)
    yield opened
    opened.close()
    opened.close()  # idempotent


def test_update_creates_then_merges(store: BaselineStore) -> None:
    assert store.get("svc/a") is None
    first = store.update("svc/a", delta(0))
    assert first.outcome == "created" and first.applied and first.baseline.runs == 1
    second = store.update("svc/a", delta(1))
    assert second.outcome == "updated" and second.baseline.runs == 2
    stored = store.get("svc/a")
    assert stored is not None and stored.runs == 2
    assert stored.to_dict() == delta(0).merged(delta(1)).to_dict()
    stored.runs = 99  # a copy: the store is unaffected
    again = store.get("svc/a")
    assert again is not None and again.runs == 2


def test_list_pin_unpin_reset(store: BaselineStore) -> None:
    store.update("svc/b", delta(0))
    store.update("svc/a", delta(1))
    store.update("svc/a", delta(2))
    infos = store.list()
    assert [(i.key, i.runs, i.pinned, i.embedder, i.dim) for i in infos] == [
        ("svc/a", 2, False, EMBEDDER.name, 64),
        ("svc/b", 1, False, EMBEDDER.name, 64),
    ]
    assert infos[0].first_ns == 1 and infos[0].last_ns == 3 and infos[0].updated_at > 0
    assert store.pin("svc/a") is True
    assert store.pin("svc/a") is False
    pinned = store.update("svc/a", delta(3))
    assert pinned.outcome == "pinned" and not pinned.applied and pinned.baseline.runs == 2
    stored = store.get("svc/a")
    assert stored is not None and stored.runs == 2 and stored.pinned
    assert [i.pinned for i in store.list()] == [True, False]
    assert store.unpin("svc/a") is True and store.unpin("svc/a") is False
    assert store.update("svc/a", delta(3)).baseline.runs == 3
    with pytest.raises(KeyError, match="svc/zzz"):
        store.pin("svc/zzz")
    assert store.reset("svc/a") is True
    assert store.reset("svc/a") is False
    assert store.get("svc/a") is None and [i.key for i in store.list()] == ["svc/b"]
    rebuilt = store.update("svc/a", delta(9))  # reset, then rebuilt from the next runs
    assert rebuilt.outcome == "created" and rebuilt.baseline.runs == 1


def test_put_replaces_and_keeps_the_pinned_flag(store: BaselineStore) -> None:
    store.update("k", delta(0))
    replacement = delta(5).merged(delta(6))
    replacement.pinned = True
    store.put("k", replacement)
    stored = store.get("k")
    assert stored is not None and stored.runs == 2 and stored.pinned


def test_export_and_import(store: BaselineStore, tmp_path: Path) -> None:
    store.update("svc/a", delta(0))
    store.update("svc/a", delta(1))
    store.update("svc/b", delta(2))
    store.pin("svc/b")
    document = json.loads(json.dumps(store.export_baselines()))
    assert document["format"] == EXPORT_FORMAT and sorted(document["baselines"]) == [
        "svc/a",
        "svc/b",
    ]
    other = SQLiteStore(tmp_path / "other.sqlite3")
    assert other.import_baselines(document) == ["svc/a", "svc/b"]
    assert other.export_baselines() == document
    # merge: partial baselines of replicas combine; the stored pinned flag wins
    other.unpin("svc/b")
    assert other.import_baselines(document, mode="merge") == ["svc/a", "svc/b"]
    merged = other.get("svc/a")
    assert merged is not None and merged.runs == 4
    b = other.get("svc/b")
    assert b is not None and b.runs == 2 and not b.pinned
    other.close()


def test_import_is_validated_before_anything_is_written(store: BaselineStore) -> None:
    store.update("svc/a", delta(0))
    good = store.export_baselines()
    bad = json.loads(json.dumps(good))
    bad["baselines"]["svc/new"] = delta(1).to_dict()
    bad["baselines"]["svc/broken"] = {"format": "tracehound.drift.baseline", "version": 1}
    with pytest.raises(ValueError, match="baseline 'svc/broken'"):
        store.import_baselines(bad)
    assert store.get("svc/new") is None
    with pytest.raises(ValueError, match="not a tracehound baselines export"):
        store.import_baselines({"format": "x"})
    with pytest.raises(ValueError, match="version"):
        store.import_baselines({**good, "version": 7})
    with pytest.raises(ValueError, match="import mode"):
        store.import_baselines(good, mode="upsert")  # type: ignore[arg-type]
    other = HashingEmbedder(32)
    mismatched = {
        **good,
        "baselines": {
            "svc/a": Baseline.from_run(
                RunFeatures(run_id="x", embedding=embed_run(["t"], other), complexity=(0.0,) * 10),
                other,
            ).to_dict(),
            "svc/c": delta(3).to_dict(),
        },
    }
    with pytest.raises(BaselineMismatchError):
        store.import_baselines(mismatched, mode="merge")
    assert store.get("svc/c") is None


def test_embedder_mismatch_is_refused_and_nothing_changes(store: BaselineStore) -> None:
    store.update("k", delta(0))
    other = HashingEmbedder(64, stance_weight=0.2)
    foreign = Baseline.from_run(
        RunFeatures(run_id="x", embedding=embed_run(["t"], other), complexity=(0.0,) * 10), other
    )
    with pytest.raises(BaselineMismatchError, match="refusing to mix"):
        store.update("k", foreign)
    stored = store.get("k")
    assert stored is not None and stored.runs == 1


@pytest.mark.parametrize("key", ["", "x" * 2000, 3])
def test_bad_keys(store: BaselineStore, key: Any) -> None:
    with pytest.raises(ValueError, match="baseline key"):
        store.get(key)
    with pytest.raises(ValueError, match="baseline key"):
        store.update(key, delta(0))


def test_bad_half_life(store: BaselineStore) -> None:
    store.update("k", delta(0))
    with pytest.raises(ValueError, match="half_life_runs"):
        store.update("k", delta(1), half_life_runs=-1.0)


def test_default_path_and_open_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_store_path({"TRACEHOUND_BASELINES": str(tmp_path / "x.db")}) == tmp_path / "x.db"
    assert (
        default_store_path({"XDG_STATE_HOME": str(tmp_path)})
        == tmp_path / "tracehound" / "baselines.sqlite3"
    )
    home = Path.home()
    assert (
        default_store_path({"XDG_STATE_HOME": "relative/dir"})
        == home / ".local/state/tracehound/baselines.sqlite3"
    )
    assert default_store_path({}) == home / ".local/state/tracehound/baselines.sqlite3"
    assert isinstance(open_store("memory"), MemoryStore)
    with pytest.raises(BaselineStoreError, match="unsupported baseline store"):
        open_store("ftp://localhost")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("TRACEHOUND_BASELINES", raising=False)
    default = open_store()
    assert isinstance(default, SQLiteStore)
    assert (
        default.path == tmp_path / "state" / "tracehound" / "baselines.sqlite3"
        and default.path.exists()
    )
    default.close()
    monkeypatch.setenv("TRACEHOUND_BASELINES", str(tmp_path / "env.sqlite3"))
    from_env = open_store()
    assert from_env.location == str(tmp_path / "env.sqlite3")
    from_env.close()
    with pytest.raises(BaselineStoreError, match="is closed"):
        from_env.get("k")


def test_memory_update_results_are_private_copies_fixed_at_the_update() -> None:
    """The result's baseline is copied when first read: still the state right after the update
    (a later pin does not show in it) and never the stored object itself."""
    store = MemoryStore()
    first = store.update("svc/a", delta(0))
    second = store.update("svc/a", delta(1))
    store.pin("svc/a")
    assert first.applied and second.applied and not second.baseline.pinned
    assert second.baseline.runs == 2 and first.baseline.runs == 1
    second.baseline.tools["mutated"] = 1.0
    stored = store.get("svc/a")
    assert stored is not None and "mutated" not in stored.tools and stored.pinned
    assert second.baseline is second.baseline  # copied once
    assert second != first and first == first.__class__("svc/a", "created", first.baseline)
    with pytest.raises(AttributeError):
        second.outcome = "pinned"  # type: ignore[misc]
    assert store.update("svc/a", delta(2)).outcome == "pinned"


def test_memory_get_shared_lends_the_stored_baseline_unchanged_by_updates() -> None:
    store = MemoryStore()
    assert store.get_shared("svc/a") is None
    store.update("svc/a", delta(0))
    lent = store.get_shared("svc/a")
    assert lent is not None and lent is store.get_shared("svc/a")
    before = lent.to_dict()
    store.update("svc/a", delta(1))
    store.pin("svc/a")
    assert lent.to_dict() == before  # replaced, not modified
    now = store.get_shared("svc/a")
    assert now is not None and now.runs == 2 and now.pinned
    assert now.to_dict() == store.get("svc/a").to_dict()  # type: ignore[union-attr]
