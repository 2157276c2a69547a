"""Drift scoring in the in-process processor, selected by environment variables only.

A real `TracerProvider` carries a `TracehoundSpanProcessor()` built from `TRACEHOUND_EVALUATORS`
and `TRACEHOUND_BASELINES` (a SQLite file): an agent runs twice, the second run is scored against
the baseline the first one left, both roots carry `tracehound.drift.*`, the evaluation events say
so, and the baselines outlive the processor (which closes its store at shutdown). Then the same
through `opentelemetry-instrument` (`OTEL_PYTHON_CONFIGURATOR=tracehound`), across two processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_autoconfig import run_app

from tracehound import names
from tracehound.baselines import open_store
from tracehound.processor import TracehoundSpanProcessor
from tracehound.spans import AttributeValue
from tracehound.testing import OTLPSink

pytestmark = [pytest.mark.integration]

AGENT_KEY = "drift-env/planner"


def run_agent(provider: TracerProvider) -> None:
    """One agent run as GenAI instrumentations record it: an agent span, a chat, a tool call."""
    tracer = provider.get_tracer("drift.env.app")
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
    with tracer.start_as_current_span("invoke_agent planner", attributes=agent):
        chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "scripted"}
        with tracer.start_as_current_span("chat scripted", attributes=chat):
            pass
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
        with tracer.start_as_current_span("execute_tool lookup", attributes=tool):
            pass


def wal_files(path: Path) -> list[str]:
    """SQLite removes the write-ahead log when the last connection to the file closes."""
    return sorted(p.name for p in path.parent.glob(path.name + "-*"))


def test_processor_from_environment_scores_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    baselines = tmp_path / "baselines.sqlite3"
    monkeypatch.setenv("TRACEHOUND_EVALUATORS", "loops,drift")
    monkeypatch.setenv("TRACEHOUND_BASELINES", str(baselines))
    monkeypatch.setenv("TRACEHOUND_QUIET_PERIOD", "0.05")
    exporter = InMemorySpanExporter()
    log_exporter = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    processor = TracehoundSpanProcessor(
        exporter, schedule_delay_millis=50, logger_provider=logger_provider, emit_metrics=False
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "drift-env"}))
    provider.add_span_processor(processor)
    try:
        run_agent(provider)
        assert provider.force_flush(10_000)  # finalizes the first trace: its run is the baseline
        run_agent(provider)
        assert provider.force_flush(10_000)
        assert wal_files(baselines)  # open while the processor runs
    finally:
        provider.shutdown()
        logger_provider.shutdown()

    roots = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent planner"]
    assert len(roots) == 2
    first, second = (dict(root.attributes or {}) for root in roots)
    assert first[names.ATTR_DRIFT_AGENT] == second[names.ATTR_DRIFT_AGENT] == AGENT_KEY
    assert first[names.ATTR_DRIFT_BASELINE_RUNS] == 0
    assert first[names.ATTR_DRIFT_BASELINE_UPDATED] is True
    assert second[names.ATTR_DRIFT_BASELINE_RUNS] == 1  # scored against the first run
    assert second[names.ATTR_DRIFT_SEVERITY] == "none"  # the same run twice has not drifted
    assert isinstance(second[names.ATTR_DRIFT_SCORE], float)
    drift_events = [
        r.log_record
        for r in log_exporter.get_finished_logs()
        if (r.log_record.attributes or {}).get(names.ATTR_EVALUATION_NAME) == names.EVAL_DRIFT
    ]
    assert len(drift_events) == 2

    assert wal_files(baselines) == []  # the processor closed its store at shutdown
    store = open_store(str(baselines))
    try:
        baseline = store.get(AGENT_KEY)
        assert baseline is not None and baseline.runs == 2
    finally:
        store.close()


def test_zero_code_start_scores_drift_across_processes(tmp_path: Path) -> None:
    """`opentelemetry-instrument` with tracehound's configurator: the second process's run is
    scored against the baseline the first one left in the SQLite file."""
    baselines = tmp_path / "baselines.sqlite3"
    env = {"TRACEHOUND_EVALUATORS": "loops,drift", "TRACEHOUND_BASELINES": str(baselines)}
    root_name = "invoke_agent zero_code_agent"
    roots: list[dict[str, AttributeValue]] = []
    for _ in range(2):
        with OTLPSink() as sink:
            result = run_app(tmp_path, sink, **env)
            assert result.returncode == 0, result.stderr
            assert sink.wait_for(lambda: any(s.name == root_name for s in sink.spans()), 10)
            roots.append(sink.span_named(root_name).attributes)
        assert wal_files(baselines) == []  # closed by the exit handler
    key = "zero-code-app/zero_code_agent"
    assert [r[names.ATTR_DRIFT_AGENT] for r in roots] == [key, key]
    assert [r[names.ATTR_DRIFT_BASELINE_RUNS] for r in roots] == [0, 1]
    assert roots[1][names.ATTR_DRIFT_SEVERITY] in names.DRIFT_SEVERITIES
    assert roots[1]["tracehound.loops.detected"] is True  # the other evaluator still runs
