"""Drift in the in-process processor: `TRACEHOUND_EVALUATORS=…,drift` with `TRACEHOUND_BASELINES`,
parsed like the other `TRACEHOUND_*` variables, the store opened at start-up (bad ones fail there)
and closed by the processor that opened it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracehound.baselines
from tracehound.baselines import (
    ENV_BASELINES,
    BaselineStore,
    BaselineStoreError,
    MemoryStore,
    SQLiteStore,
)
from tracehound.config import (
    TRACEHOUND_BASELINES,
    ConfigError,
    ProcessorSettings,
    build_evaluators,
    open_evaluators,
    reopen_baselines,
)
from tracehound.evaluators.drift import DriftEvaluator
from tracehound.processor import TracehoundSpanProcessor


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[BaselineStore]:
    """Every store `open_store` returns during the test, to check who closes it."""
    stores: list[BaselineStore] = []
    real = tracehound.baselines.open_store

    def spy(location: Any = None, **kwargs: Any) -> BaselineStore:
        store = real(location, **kwargs)
        stores.append(store)
        return store

    monkeypatch.setattr(tracehound.baselines, "open_store", spy)
    return stores


def is_closed(store: BaselineStore) -> bool:
    try:
        store.list()
    except BaselineStoreError as exc:
        return "closed" in str(exc)
    return False


def test_the_sidecar_and_cli_variable_name() -> None:
    assert TRACEHOUND_BASELINES == ENV_BASELINES == "TRACEHOUND_BASELINES"


def test_baselines_from_environment() -> None:
    assert ProcessorSettings.from_env({}).baselines is None
    assert ProcessorSettings.from_env({"TRACEHOUND_BASELINES": "  "}).baselines is None
    settings = ProcessorSettings.from_env(
        {"TRACEHOUND_EVALUATORS": "evidence, drift", "TRACEHOUND_BASELINES": " memory "}
    )
    assert settings.evaluators == ("evidence", "drift")
    assert settings.baselines == "memory"


def test_drift_is_built_only_when_named_and_in_the_given_order(
    opened: list[BaselineStore],
) -> None:
    evaluators, store = open_evaluators(None, "memory")
    assert [e.name for e in evaluators] == ["evidence", "loops"]
    assert store is None and opened == []

    evaluators, store = open_evaluators(("drift", "loops", "drift"), "memory")
    assert [e.name for e in evaluators] == ["drift", "loops"]  # a repeated drift counts once
    assert isinstance(store, MemoryStore) and opened == [store]
    drift = evaluators[0]
    assert isinstance(drift, DriftEvaluator) and drift.store is store


def test_sqlite_path_and_default_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sub" / "baselines.sqlite3"
    _, store = open_evaluators(("drift",), str(path))
    assert isinstance(store, SQLiteStore) and store.path == path and path.exists()
    store.close()

    monkeypatch.delenv("TRACEHOUND_BASELINES", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    _, store = open_evaluators(("drift",), None)
    assert isinstance(store, SQLiteStore)
    assert store.path == tmp_path / "state" / "tracehound" / "baselines.sqlite3"
    store.close()


def test_build_evaluators_keeps_drift_baselines_in_memory(opened: list[BaselineStore]) -> None:
    (drift,) = build_evaluators(("drift",))
    assert isinstance(drift, DriftEvaluator) and isinstance(drift.store, MemoryStore)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("directory", "is a directory"),
        ("text file", "not an SQLite database"),
        ("url", "unsupported baseline store"),
    ],
)
def test_unusable_store_fails_at_start_naming_the_variable(
    tmp_path: Path, kind: str, message: str
) -> None:
    (tmp_path / "notes.txt").write_text("not a database, but some notes\n" * 10)
    location = {
        "directory": str(tmp_path),
        "text file": str(tmp_path / "notes.txt"),
        "url": "ftp://user:hunter2@example.com/baselines",
    }[kind]
    with pytest.raises(ConfigError, match=message) as caught:
        open_evaluators(("loops", "drift"), location)
    # A URL is named without the password it may carry.
    shown = "ftp://user:***@example.com/baselines" if kind == "url" else location
    assert str(caught.value).startswith(f"TRACEHOUND_BASELINES={shown!r}: ")
    assert "hunter2" not in str(caught.value)
    with pytest.raises(ConfigError, match=message):
        TracehoundSpanProcessor(
            settings=ProcessorSettings(evaluators=("drift",), baselines=location)
        )


def test_unknown_evaluator_opens_no_store(opened: list[BaselineStore]) -> None:
    with pytest.raises(ConfigError, match="TRACEHOUND_EVALUATORS"):
        open_evaluators(("drift", "no-such-evaluator"), "memory")
    assert opened == []


def test_processor_closes_the_store_it_opened(tmp_path: Path, opened: list[BaselineStore]) -> None:
    settings = ProcessorSettings(evaluators=("loops", "drift"), baselines=str(tmp_path / "b.db"))
    processor = TracehoundSpanProcessor(InMemorySpanExporter(), settings=settings)
    (store,) = opened
    assert not is_closed(store)
    processor.shutdown(timeout_millis=5000)
    assert is_closed(store)


def test_processor_leaves_a_store_it_was_given_open(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "mine.db")
    processor = TracehoundSpanProcessor(
        InMemorySpanExporter(),
        evaluators=[DriftEvaluator(store)],
        settings=ProcessorSettings(evaluators=("drift",), baselines=str(tmp_path / "other.db")),
    )
    processor.shutdown(timeout_millis=5000)
    assert not is_closed(store)
    assert not (tmp_path / "other.db").exists()  # the settings' store was never opened
    store.close()


def test_a_forked_child_gets_its_own_connection(tmp_path: Path) -> None:
    """What the processor's at-fork handler does: SQLite connections must not cross a fork."""
    path = str(tmp_path / "b.db")
    evaluators, store = open_evaluators(("drift", "loops"), path)
    assert store is not None
    fresh = reopen_baselines(evaluators, store, path)
    drift = evaluators[0]
    assert isinstance(drift, DriftEvaluator) and drift.store is fresh
    assert isinstance(fresh, SQLiteStore) and fresh is not store and fresh.path == store.path
    assert not is_closed(store)  # the parent's connection is left alone in the child
    store.close()
    fresh.close()

    evaluators, memory = open_evaluators(("drift",), "memory")
    assert memory is not None
    assert reopen_baselines(evaluators, memory, "memory") is memory  # the child's own copy
