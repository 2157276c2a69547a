"""Run records from real captures, the query layer's answers, the writer and the settings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from helpers import FIXTURES
from tracehound.baselines import BaselineStoreError, MemoryStore
from tracehound.cli import OFFLINE_CONFIG, load_input, run_engine, select_evaluators
from tracehound.config import ConfigError, ProcessorSettings
from tracehound.drift import HashingEmbedder
from tracehound.engine import Engine, FinalizedTrace
from tracehound.evaluators.drift import DriftEvaluator
from tracehound.history import (
    HistoryWriter,
    Retention,
    RunNotFoundError,
    RunQuery,
    RunRecord,
    delete_runs,
    explain_run,
    get_run,
    history_info,
    list_runs,
    make_query,
    parse_moment,
    recent_findings,
    search_runs,
)
from tracehound.report import TraceReport
from tracehound.server._settings import ServeSettings

FRAMEWORKS = FIXTURES / "frameworks"


def evaluate(store: MemoryStore, *paths: Path) -> list[FinalizedTrace]:
    """The captures through the engine, one at a time, with drift on `store`."""
    out: list[FinalizedTrace] = []
    for path in paths:
        engine = Engine(
            [*select_evaluators(None), DriftEvaluator(store, embedder=HashingEmbedder())],
            config=OFFLINE_CONFIG,
        )
        traces, _ = run_engine(load_input([str(path)], False), engine)
        out += traces
    return out


def recorded(*paths: Path, content: bool = False) -> tuple[MemoryStore, list[FinalizedTrace]]:
    store = MemoryStore()
    traces = evaluate(store, *paths)
    writer = HistoryWriter(lambda: store, content=content)
    for trace in traces:
        writer.write(trace)
    assert writer.errors == 0
    return store, traces


def test_a_looping_run_names_its_tool_and_kinds() -> None:
    store, traces = recorded(FRAMEWORKS / "agent_framework_loop.otlp.json")
    (record,) = store.query_runs(RunQuery())
    (trace,) = traces
    assert record.trace_id == trace.trace_id
    assert record.agent == "capture-agent-framework/order_agent"
    assert record.loop_tools == ("get_order_status",)
    assert set(record.loop_kinds) == set(trace.attributes["tracehound.loops.kinds"])
    assert sum(record.loop_counts.values()) == trace.attributes["tracehound.loops.count"]
    assert record.tool_calls == {"get_order_status": 4}
    assert record.verdict == TraceReport(trace, ()).status.lower() == "fail"
    assert (
        record.evidence["survival_ratio"] == trace.attributes["tracehound.evidence.survival_ratio"]
    )
    assert record.drift_score is None  # the agent's first run: no baseline yet
    assert record.drift_learned


def test_nested_agents_get_a_record_each_trace_findings_on_the_first() -> None:
    store, _ = recorded(FRAMEWORKS / "crewai_nested.otlp.json")
    records = sorted(store.query_runs(RunQuery()), key=lambda r: r.start_ns)
    assert [r.agent_name for r in records] == ["coordinator", "research_agent"]
    outer, inner = records
    assert outer.evidence and not inner.evidence
    assert set(inner.tool_calls) <= set(outer.tool_calls)


def test_no_content_unless_opted_in() -> None:
    paths = (
        FRAMEWORKS / "autogen_builtin_loop.otlp.json",
        FRAMEWORKS / "autogen_openinference_loop.otlp.json",
    )
    store, _ = recorded(*paths)
    records = store.query_runs(RunQuery(limit=None))
    scored = [r for r in records if r.drift_score is not None]
    assert scored, "the second capture of the agent is scored"
    for record in records:
        assert record.content is None
        assert record.drift_detail.get("sample", "") == ""
        assert all(d["sample"] == "" for d in record.drift_detail.get("diverged_from", ()))
    opted, _ = recorded(*paths, content=True)
    with_content = opted.query_runs(RunQuery(limit=None))
    assert any(r.content for r in with_content)
    assert all(len(r.content or "") <= 500 for r in with_content)


def test_records_survive_their_json_shape() -> None:
    store, _ = recorded(
        FRAMEWORKS / "autogen_builtin_nested.otlp.json",
        FRAMEWORKS / "autogen_openinference_nested.otlp.json",
    )
    for record in store.query_runs(RunQuery(limit=None)):
        assert RunRecord.from_json(record.to_json()) == record
    with pytest.raises(ValueError, match="newer than this tracehound"):
        RunRecord.from_dict({"format": 99})


def test_explain_names_driver_components_divergence_and_advice() -> None:
    store, _ = recorded(
        FRAMEWORKS / "autogen_builtin_loop.otlp.json",
        FRAMEWORKS / "autogen_openinference_loop.otlp.json",
    )
    top = list_runs(store, min_drift=0.01)["runs"][0]
    answer = explain_run(store, top["trace_id"])
    assert answer["primary_driver"] == top["primary_driver"]
    assert answer["drift"]["score"] == top["drift_score"]
    names = [c["name"] for c in answer["components"]]
    assert names == ["tool_mix", "semantic", "complexity"]
    by_name = {c["name"]: c for c in answer["components"]}
    assert by_name[answer["primary_driver"]]["value"] == max(
        c["value"] for c in answer["components"]
    )
    first_trace = {r["trace_id"] for r in list_runs(store)["runs"]} - {top["trace_id"]}
    assert {d["trace_id"] for d in answer["diverged_from"]} <= first_trace
    assert all(d["in_history"] for d in answer["diverged_from"])
    assert answer["recommendation"] == " ".join(answer["recommendations"])
    if answer["drift"]["severity"] != "none":
        assert f"tracehound baseline accept {answer['agent']}" in answer["recommendation"]
    assert any("looped" in s for s in answer["recommendations"])


def test_queries_filter_and_search() -> None:
    store, _ = recorded(
        FRAMEWORKS / "agent_framework_loop.otlp.json",
        FRAMEWORKS / "crewai_nested.otlp.json",
        FRAMEWORKS / "crewai_clean.otlp.json",
    )
    everything = list_runs(store)
    assert everything["count"] == 4
    assert [r["agent"] for r in list_runs(store, agent="research_agent")["runs"]] == [
        "capture-crewai/research_agent"
    ]
    assert list_runs(store, agent="capture-crewai/*")["count"] == 3
    assert list_runs(store, loop_kind="any")["count"] == 1
    assert list_runs(store, tool="get_*")["count"] == 2  # get_order_status, get_weather
    assert list_runs(store, verdict="fail")["count"] == 1
    assert list_runs(store, since="2020-01-01", until="2020-01-02")["count"] == 0
    found = search_runs(store, "GET_ORDER")
    assert found["keyword"] == "GET_ORDER"
    assert [r["agent"] for r in found["runs"]] == ["capture-agent-framework/order_agent"]
    assert list_runs(store, limit=2)["count"] == 2
    with pytest.raises(ValueError, match="keyword"):
        search_runs(store, "  ")
    with pytest.raises(ValueError, match="severity must be one of"):
        list_runs(store, severity="high")
    with pytest.raises(ValueError, match=r"^since: "):
        list_runs(store, since="yesterday-ish")
    with pytest.raises(ValueError, match="loop kind must be one of"):
        list_runs(store, loop_kind="spin")
    assert history_info(store) == {"location": "memory", "count": 4}


def test_get_and_delete() -> None:
    store, traces = recorded(
        FRAMEWORKS / "crewai_nested.otlp.json", FRAMEWORKS / "crewai_clean.otlp.json"
    )
    nested = next(t for t in traces if len([r for r in t.trajectory.runs if not r.implicit]) > 1)
    shown = get_run(store, nested.trace_id)
    assert [r["agent_name"] for r in shown["runs"]] == ["coordinator", "research_agent"]
    one = get_run(store, f"{nested.trace_id}/{shown['runs'][1]['run_id']}")
    assert [r["agent_name"] for r in one["runs"]] == ["research_agent"]
    with pytest.raises(RunNotFoundError, match="no trace"):
        get_run(store, "0" * 32)
    with pytest.raises(ValueError, match="name runs"):
        delete_runs(store)
    before = store.get("capture-crewai/coordinator")
    assert before is not None and len(before.recent) == 1
    gone = delete_runs(store, runs=[nested.trace_id], agent="*coordinator")
    assert gone["count"] == 1
    assert gone["deleted"][0]["agent"] == "capture-crewai/coordinator"
    assert gone["ring_entries_removed"] == 1
    after = store.get("capture-crewai/coordinator")
    assert after is not None and after.recent == () and after.runs == before.runs
    assert "stays" in gone["not_undone"]
    assert history_info(store)["count"] == 2
    with pytest.raises(RunNotFoundError):
        explain_run(store, f"{nested.trace_id}/{shown['runs'][0]['run_id']}")


def test_recent_findings() -> None:
    store, _ = recorded(
        FRAMEWORKS / "agent_framework_loop.otlp.json",
        FRAMEWORKS / "crewai_loop.otlp.json",
        FRAMEWORKS / "crewai_clean.otlp.json",
    )
    found = recent_findings(store, since="100000d")
    assert found["runs"] == 3
    assert found["verdicts"]["fail"] == 2
    (loop,) = found["loops"]
    assert loop["tool"] == "get_order_status" and loop["runs"] == 2
    assert recent_findings(store, "travel_agent", since="100000d")["loops"] == []
    assert recent_findings(store, since="1s")["runs"] == 0


def test_parse_moment() -> None:
    now = 1_800_000_000.0
    assert parse_moment("7d", now) == int((now - 7 * 86400) * 1e9)
    assert parse_moment("90m", now) == int((now - 5400) * 1e9)
    assert parse_moment("2026-01-31") == parse_moment("2026-01-31T00:00:00Z")
    assert parse_moment("2026-01-31T01:00:00+01:00") == parse_moment("2026-01-31")
    with pytest.raises(ValueError, match="neither an ISO"):
        parse_moment("soon")
    assert make_query(since="24h", now=now).since_ns == int((now - 86400) * 1e9)


class _BrokenStore(MemoryStore):
    def add_runs(self, records: Sequence[RunRecord], retention: Retention) -> int:
        raise BaselineStoreError("disk full")


def test_a_failing_store_is_counted_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    store = _BrokenStore()
    traces = evaluate(
        store, FRAMEWORKS / "crewai_loop.otlp.json", FRAMEWORKS / "crewai_clean.otlp.json"
    )
    writer = HistoryWriter(lambda: store)
    assert [writer.write(t) for t in traces] == [0, 0]
    assert writer.errors == 2 and writer.written == 0
    assert sum("run history failed" in r.getMessage() for r in caplog.records) == 1
    assert HistoryWriter(lambda: None).write(traces[0]) == 0


def test_writer_applies_its_retention() -> None:
    store = MemoryStore()
    traces = evaluate(
        store,
        FRAMEWORKS / "crewai_loop.otlp.json",
        FRAMEWORKS / "crewai_clean.otlp.json",
        FRAMEWORKS / "agent_framework_loop.otlp.json",
    )
    writer = HistoryWriter(lambda: store, retention=Retention(max_runs=2))
    for trace in traces:
        writer.write(trace)
    assert store.count_runs() == 2 and writer.pruned == 1


def test_history_settings_from_env() -> None:
    settings = ProcessorSettings.from_env(
        {
            "TRACEHOUND_HISTORY_MAX_AGE": "12h",
            "TRACEHOUND_HISTORY_MAX_RUNS": "500",
            "TRACEHOUND_HISTORY_CONTENT": "true",
        }
    ).history
    assert settings.enabled and settings.content
    assert settings.retention == Retention(max_runs=500, max_age=43200.0)
    assert ProcessorSettings.from_env({"TRACEHOUND_HISTORY": "false"}).history.enabled is False
    assert ProcessorSettings.from_env({"TRACEHOUND_HISTORY_MAX_AGE": "3600"}).history.retention == (
        Retention(max_age=3600.0)
    )
    with pytest.raises(ConfigError, match="TRACEHOUND_HISTORY_MAX_RUNS"):
        ProcessorSettings.from_env({"TRACEHOUND_HISTORY_MAX_RUNS": "0"})


def test_serve_history_settings_and_their_sources(tmp_path: Path) -> None:
    default = ServeSettings.resolve({}, environ={})
    assert default.history.enabled and not default.history.content
    assert default.history.retention == Retention()
    config = tmp_path / "serve.toml"
    config.write_text('[serve]\nhistory_max_age = "7d"\nhistory_content = true\n')
    settings = ServeSettings.resolve(
        {"history_max_runs": "123"}, environ={}, config_file=str(config)
    )
    assert settings.history.retention == Retention(max_runs=123, max_age=7 * 86400.0)
    assert settings.history.content
    rows = {name: (value, source) for name, value, source in settings.describe()}
    assert rows["history_max_runs"] == ("123", "flag --history-max-runs")
    assert rows["history_max_age"] == ("7d", f"toml {config}")
    assert rows["history"] == ("on", "default")
    with pytest.raises(
        ConfigError, match=r"history_max_age \(from env TRACEHOUND_HISTORY_MAX_AGE\)"
    ):
        ServeSettings.resolve({}, environ={"TRACEHOUND_HISTORY_MAX_AGE": "forever"})
