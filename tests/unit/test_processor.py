"""TracehoundSpanProcessor behaviour: modes, copies, lifecycle, faults, suppression, fork.

Every wait is bounded (timeouts on events, joins and flushes); no test asserts on speed.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from _processor_rig import Rig, make_rig, replay_records, replay_spans
from _scenarios import SCENARIOS
from _sdk import Captured, capture
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, get_value
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracehound import names
from tracehound.config import ProcessorSettings
from tracehound.engine import EngineConfig
from tracehound.evaluators.base import Evaluator, TraceInfo
from tracehound.processor import TracehoundSpanProcessor

WAIT = 10.0  # upper bound for every wait in this file (seconds)
SLOW = EngineConfig(quiet_period=60.0, trace_timeout=120.0)  # only flush finalizes


@pytest.fixture(scope="module")
def agent_trace() -> Captured:
    return capture(SCENARIOS["genai_agent"])


@pytest.fixture
def rigs() -> Iterator[list[Rig]]:
    made: list[Rig] = []
    yield made
    for rig in made:
        rig.close()


def rig_of(rigs: list[Rig], *args: Any, **kwargs: Any) -> Rig:
    rig = make_rig(*args, **kwargs)
    rigs.append(rig)
    return rig


def feed(rig: Rig, captured: Captured) -> None:
    replay_records(rig, captured.logs)
    replay_spans(rig, captured.spans)


def hexid(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.span_id, "016x")


def wait_until(predicate: Any, timeout: float = WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


def run_bounded(target: Any, timeout: float = WAIT) -> None:
    """Run `target` on a thread; fail if it does not return in time or raises."""
    errors: list[BaseException] = []

    def runner() -> None:
        try:
            target()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=runner, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "the call blocked"
    assert errors == []


# --- wrap mode: copies, stream vs hold --------------------------------------------------------


def test_wrap_exports_enriched_copies_and_never_mutates(
    rigs: list[Rig], agent_trace: Captured
) -> None:
    rig = rig_of(rigs, engine_config=SLOW)
    before = {hexid(s): dict(s.attributes or {}) for s in agent_trace.spans}
    feed(rig, agent_trace)
    assert rig.processor.force_flush(10_000)
    exported = {hexid(s): s for s in rig.exported()}
    assert set(exported) == set(before)
    for span in agent_trace.spans:  # the ended SDK spans are untouched
        assert dict(span.attributes or {}) == before[hexid(span)]
    root = exported[agent_trace.span_id("invoke_agent weather_agent")]
    assert root is not agent_trace.span("invoke_agent weather_agent")
    attrs = root.attributes or {}
    assert attrs["tracehound.loops.detected"] is False
    assert attrs["tracehound.evidence.final_survival_ratio"] > 0
    assert attrs["gen_ai.agent.name"] == "weather_agent"  # the original attributes are kept
    # a span without results is exported as is (no copy)
    plain = [s for s in agent_trace.spans if s.name.startswith("execute_tool")]
    assert all(exported[hexid(s)] is s for s in plain)


def test_stream_exports_children_before_the_trace_is_finalized(
    rigs: list[Rig], agent_trace: Captured
) -> None:
    rig = rig_of(rigs, forwarding="stream", engine_config=SLOW, schedule_delay_millis=20)
    feed(rig, agent_trace)
    root_id = agent_trace.span_id("invoke_agent weather_agent")
    children = {hexid(s) for s in agent_trace.spans} - {root_id}
    assert wait_until(lambda: {hexid(s) for s in rig.exported()} == children)
    assert rig.processor.stats.active_traces == 1  # root held, trace not finalized
    assert rig.processor.force_flush(10_000)
    assert hexid(rig.exported()[-1]) == root_id


def test_hold_exports_nothing_before_finalization(rigs: list[Rig], agent_trace: Captured) -> None:
    rig = rig_of(rigs, forwarding="hold", engine_config=SLOW, schedule_delay_millis=20)
    feed(rig, agent_trace)
    assert wait_until(lambda: rig.processor.stats.spans_evaluated >= 4)
    time.sleep(0.1)  # a few worker cycles
    assert rig.exported() == []
    assert rig.processor.force_flush(10_000)
    assert len(rig.exported()) == len(agent_trace.spans)
    chats = [s for s in rig.exported() if s.name.startswith("chat")]
    assert any("tracehound.evidence.reused_units" in (s.attributes or {}) for s in chats)


def test_quiet_period_finalizes_without_flush(rigs: list[Rig], agent_trace: Captured) -> None:
    rig = rig_of(
        rigs,
        engine_config=EngineConfig(quiet_period=0.05, trace_timeout=5),
        schedule_delay_millis=20,
    )
    feed(rig, agent_trace)
    assert wait_until(lambda: len(rig.exported()) == len(agent_trace.spans))
    assert rig.processor.stats.traces_finalized == 1
    assert any(p[0] == {"tracehound.finalize.reason": "quiet"} for p in _finalized(rig))


def _finalized(rig: Rig) -> list[tuple[dict[str, Any], float]]:
    return rig.metric_points(names.METRIC_TRACES_FINALIZED)


def test_non_genai_trace_passes_through_unchanged(rigs: list[Rig]) -> None:
    captured = capture(_plain_web_request)
    rig = rig_of(rigs, engine_config=SLOW)
    feed(rig, captured)
    assert rig.processor.force_flush(10_000)
    assert [id(s) for s in rig.exported()] == [id(s) for s in captured.spans]
    assert rig.events() == []


def _plain_web_request(rec: Any) -> None:
    with rec.span("GET /health", {"http.request.method": "GET"}), rec.span("db.query"):
        pass


def test_span_events_option(rigs: list[Rig], agent_trace: Captured) -> None:
    rig = rig_of(rigs, engine_config=SLOW, span_events=True)
    feed(rig, agent_trace)
    assert rig.processor.force_flush(10_000)
    root = next(s for s in rig.exported() if s.parent is None)
    events = [e for e in root.events if e.name == "gen_ai.evaluation.result"]
    assert {e.attributes["gen_ai.evaluation.name"] for e in events} >= {  # type: ignore[index]
        "tracehound.evidence.final_survival",
        "tracehound.loops",
    }
    assert all(isinstance(e.attributes["gen_ai.evaluation.score.value"], float) for e in events)  # type: ignore[index]


def test_redaction_strips_content_after_evaluation(rigs: list[Rig], agent_trace: Captured) -> None:
    plain = rig_of(rigs, engine_config=SLOW)
    redacted = rig_of(rigs, engine_config=SLOW, redact=True)
    for rig in (plain, redacted):
        feed(rig, agent_trace)
        assert rig.processor.force_flush(10_000)
    assert redacted.results() == plain.results()  # evaluation saw the content
    content = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"}
    content |= {"gen_ai.tool.call.result", "gen_ai.retrieval.documents"}
    exported = redacted.exported()
    assert all(not (content & set(s.attributes or {})) for s in exported)
    assert sum(int((s.attributes or {}).get(names.ATTR_REDACTED, 0)) for s in exported) >= 5
    root = next(s for s in exported if s.parent is None)
    assert "tracehound.evidence.final_survival_ratio" in (root.attributes or {})
    # the originals still hold their content
    assert any("gen_ai.input.messages" in (s.attributes or {}) for s in agent_trace.spans)


# --- observe mode ------------------------------------------------------------------------------


def test_observe_changes_nothing_the_user_exports(rigs: list[Rig]) -> None:
    rig = rig_of(rigs, None, engine_config=SLOW)
    provider = TracerProvider()
    user_exporter = InMemorySpanExporter()
    provider.add_span_processor(rig.processor)
    provider.add_span_processor(SimpleSpanProcessor(user_exporter))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span(
        "invoke_agent helper",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"},
    ):
        for _ in range(3):
            with tracer.start_as_current_span(
                "execute_tool lookup",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": '{"q": "x"}',
                    "gen_ai.tool.call.result": "nothing found for x",
                },
            ):
                pass
    assert rig.processor.force_flush(10_000)
    exported = user_exporter.get_finished_spans()
    assert len(exported) == 4
    assert not any(k.startswith("tracehound.") for s in exported for k in (s.attributes or {}))
    assert {r[1] for r in rig.results()} >= {"tracehound.loop", "tracehound.loops"}
    assert rig.processor.mode == "observe" and rig.processor.stats.spans_exported == 0
    provider.shutdown()


# --- events and metrics ------------------------------------------------------------------------


def test_events_are_parented_to_the_evaluated_span(rigs: list[Rig], agent_trace: Captured) -> None:
    rig = rig_of(rigs, engine_config=SLOW)
    feed(rig, agent_trace)
    assert rig.processor.force_flush(10_000)
    events = rig.events()
    assert events
    trace_ids = {r.log_record.trace_id for r in events}
    assert trace_ids == {agent_trace.spans[0].context.trace_id}  # type: ignore[union-attr]
    span_ids = {format(r.log_record.span_id or 0, "016x") for r in events}
    assert span_ids <= {hexid(s) for s in agent_trace.spans}
    for record in events:
        assert record.log_record.event_name == "gen_ai.evaluation.result"
        assert record.instrumentation_scope is not None
        assert record.instrumentation_scope.name == "tracehound"
        attrs = record.log_record.attributes or {}
        assert attrs["tracehound.evaluator.name"] in ("evidence", "loops")
        assert attrs["tracehound.evaluator.version"]
    # the processor does not take its own events back as input
    assert rig.processor.stats.queued == len(agent_trace.spans) + len(agent_trace.logs)


def test_metrics(rigs: list[Rig], agent_trace: Captured) -> None:
    rig = rig_of(rigs, engine_config=SLOW)
    feed(rig, agent_trace)
    assert rig.processor.force_flush(10_000)
    queued = rig.metric_points(names.METRIC_SPANS_QUEUED)
    assert sum(v for _, v in queued) == len(agent_trace.spans)
    scores = rig.metric_points(names.METRIC_EVALUATION_SCORE)
    keys = {frozenset(a.items()) for a, _ in scores}
    assert all(
        set(a)
        <= {
            "gen_ai.evaluation.name",
            "tracehound.evaluator.name",
            "gen_ai.evaluation.score.label",
            "gen_ai.agent.name",
        }
        for a, _ in scores
    )
    assert any(dict(k).get("gen_ai.agent.name") == "weather_agent" for k in keys)
    survival = rig.metric_points(names.METRIC_EVIDENCE_SURVIVAL)
    assert {a["tracehound.evidence.scope"] for a, _ in survival} == {"overall", "final"}
    assert [a for a, _ in _finalized(rig)] == [{"tracehound.finalize.reason": "flush"}]
    stages = {a["tracehound.stage"] for a, _ in rig.metric_points(names.METRIC_EVALUATION_DURATION)}
    assert stages == {"span", "trace"}
    assert rig.metric_points(names.METRIC_TRACES_ACTIVE) == [({}, 0)]


def test_late_spans_are_forwarded_and_counted(rigs: list[Rig], agent_trace: Captured) -> None:
    rig = rig_of(rigs, engine_config=SLOW)
    feed(rig, agent_trace)
    assert rig.processor.force_flush(10_000)
    late = agent_trace.spans[0]
    rig.processor.on_end(late)
    assert rig.processor.force_flush(10_000)
    assert rig.processor.stats.late_spans == 1
    assert rig.exported()[-1] is late
    assert sum(v for _, v in rig.metric_points(names.METRIC_LATE_SPANS)) == 1


def test_own_spans_are_not_evaluated(rigs: list[Rig]) -> None:
    rig = rig_of(rigs, engine_config=SLOW)
    provider = TracerProvider()
    provider.add_span_processor(rig.processor)
    with provider.get_tracer("tracehound").start_as_current_span(
        "execute_tool x",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x"},
    ):
        pass
    assert rig.processor.force_flush(10_000)
    assert rig.processor.stats.spans_evaluated == 0
    assert rig.events() == []
    assert len(rig.exported()) == 1
    provider.shutdown()


# --- suppression -------------------------------------------------------------------------------


class RecordingExporter(SpanExporter):
    def __init__(self) -> None:
        self.batches: list[Sequence[ReadableSpan]] = []
        self.suppressed: list[Any] = []
        self.shutdowns = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.suppressed.append(get_value(_SUPPRESS_INSTRUMENTATION_KEY))
        self.batches.append(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.shutdowns += 1


def test_export_and_emit_run_with_instrumentation_suppressed(
    rigs: list[Rig], agent_trace: Captured
) -> None:
    exporter = RecordingExporter()
    rig = rig_of(rigs, exporter, engine_config=SLOW)
    seen: list[Any] = []

    class Spy:
        def on_emit(self, record: Any) -> None:
            seen.append(get_value(_SUPPRESS_INSTRUMENTATION_KEY))

        def shutdown(self) -> None: ...

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    rig.logger_provider.add_log_record_processor(Spy())  # type: ignore[arg-type]
    feed(rig, agent_trace)
    assert rig.processor.force_flush(10_000)
    assert exporter.suppressed and all(v is True for v in exporter.suppressed)
    assert seen and all(v is True for v in seen)
    assert get_value(_SUPPRESS_INSTRUMENTATION_KEY) is None  # not leaked to this thread


# --- batching ----------------------------------------------------------------------------------


def test_batches_respect_max_export_batch_size(rigs: list[Rig]) -> None:
    exporter = RecordingExporter()
    rig = rig_of(rigs, exporter, max_export_batch_size=3, max_queue_size=50, engine_config=SLOW)
    captured = capture(_many_plain_spans)
    replay_spans(rig, captured.spans)
    assert rig.processor.force_flush(10_000)
    sizes = [len(b) for b in exporter.batches]
    assert sum(sizes) == 10 and max(sizes) <= 3


def _many_plain_spans(rec: Any) -> None:
    with rec.span("root"):
        for i in range(9):
            with rec.span(f"child {i}"):
                pass


def test_bsp_environment_variables(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "64")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "16")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "not-a-number")
    processor = TracehoundSpanProcessor(InMemorySpanExporter(), settings=ProcessorSettings())
    try:
        batch = processor.batch_settings
        assert (batch.max_queue_size, batch.max_export_batch_size) == (64, 16)
        assert batch.schedule_delay_millis == 5000  # unparsable: logged, defaulted
        assert "OTEL_BSP_SCHEDULE_DELAY" in caplog.text
        # arguments win over the environment
        explicit = TracehoundSpanProcessor(
            InMemorySpanExporter(), 8, 100, 4, settings=ProcessorSettings()
        )
        assert explicit.batch_settings.max_queue_size == 8
        explicit.shutdown()
    finally:
        processor.shutdown()
    with pytest.raises(ValueError, match="max_export_batch_size must be less"):
        TracehoundSpanProcessor(InMemorySpanExporter(), 4, None, 8, settings=ProcessorSettings())


# --- lifecycle ---------------------------------------------------------------------------------


def test_shutdown_is_idempotent_and_safe_without_spans() -> None:
    exporter = RecordingExporter()
    processor = TracehoundSpanProcessor(exporter, settings=ProcessorSettings())
    processor.shutdown()
    processor.shutdown()
    assert exporter.shutdowns == 1
    assert processor.force_flush(1000) is False
    run_bounded(lambda: processor.on_end(_one_span()))
    assert processor.stats.dropped_shutdown == 1


def test_shutdown_flushes_what_is_queued(agent_trace: Captured) -> None:
    rig = make_rig(engine_config=SLOW, schedule_delay_millis=60_000)
    feed(rig, agent_trace)
    rig.processor.shutdown(timeout_millis=10_000)
    assert len(rig.exported()) == len(agent_trace.spans)
    assert rig.results()
    rig.close()


def _one_span() -> ReadableSpan:
    return capture(_single).spans[0]


def _single(rec: Any) -> None:
    with rec.span("x"):
        pass


# --- faults: the application's thread never blocks nor raises ----------------------------------


class RaisingEvaluator(Evaluator):
    name = "raiser"
    version = "1"

    def on_span(self, state: Any, span: Any, steps: Any, trace: TraceInfo) -> Any:
        raise RuntimeError("evaluator bug")


def test_an_evaluator_that_raises(rigs: list[Rig], agent_trace: Captured) -> None:
    from tracehound.evaluators.loops import LoopEvaluator

    rig = rig_of(rigs, engine_config=SLOW, evaluators=[RaisingEvaluator(), LoopEvaluator()])
    run_bounded(lambda: feed(rig, agent_trace))
    assert rig.processor.force_flush(10_000)
    assert len(rig.exported()) == len(agent_trace.spans)  # spans still flow
    failures = [r for r in rig.results() if r[5] == "raiser"]
    assert failures and all(r[6] for r in failures)  # error.type set
    assert {r[1] for r in rig.results() if r[5] == "loops"} == {
        "tracehound.loops",
        "tracehound.failure_modes",
    }
    errors = rig.metric_points(names.METRIC_EVALUATION_ERRORS)
    assert errors and all(a["tracehound.evaluator.name"] == "raiser" for a, _ in errors)
    assert rig.processor.stats.internal_errors == 0


class FailingExporter(RecordingExporter):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        super().export(spans)
        if self.mode == "raise":
            raise ConnectionError("collector down")
        return SpanExportResult.FAILURE


@pytest.mark.parametrize("mode", ["raise", "failure"])
def test_an_exporter_that_fails(rigs: list[Rig], agent_trace: Captured, mode: str) -> None:
    exporter = FailingExporter(mode)
    rig = rig_of(rigs, exporter, engine_config=SLOW)
    run_bounded(lambda: feed(rig, agent_trace))
    assert rig.processor.force_flush(10_000)
    assert sum(len(b) for b in exporter.batches) == len(agent_trace.spans)
    assert rig.processor.stats.export_failures >= 1
    assert rig.results()  # evaluation and events unaffected
    outcomes = {
        a["tracehound.export.outcome"] for a, _ in rig.metric_points(names.METRIC_SPANS_EXPORTED)
    }
    assert outcomes == {"error" if mode == "raise" else "failure"}


class HangingExporter(RecordingExporter):
    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        super().export(spans)
        self.entered.set()
        self.release.wait(WAIT)
        return SpanExportResult.SUCCESS


def test_an_exporter_that_hangs(rigs: list[Rig], agent_trace: Captured) -> None:
    exporter = HangingExporter()
    rig = rig_of(
        rigs,
        exporter,
        engine_config=SLOW,
        max_queue_size=8,
        max_export_batch_size=2,
        export_timeout_millis=50,
        schedule_delay_millis=10,
    )
    try:
        feed(rig, agent_trace)
        assert exporter.entered.wait(WAIT)
        # The exporter is stuck: evaluation goes on, and the app's thread never blocks.
        for _ in range(20):
            run_bounded(lambda: feed(rig, agent_trace), timeout=WAIT)
        started = time.monotonic()
        assert rig.processor.force_flush(timeout_millis=300) is False  # one deadline, honoured
        assert time.monotonic() - started < WAIT
        stats = rig.processor.stats
        assert stats.spans_evaluated >= len(agent_trace.spans) - 1
        assert stats.dropped_queue_full + stats.dropped_export_backlog > 0
        assert rig.events(), "results still emitted while the exporter hangs"
    finally:
        exporter.release.set()
    started = time.monotonic()
    rig.processor.shutdown(timeout_millis=5000)
    assert time.monotonic() - started < WAIT


class BlockingEvaluator(Evaluator):
    name = "blocker"
    version = "1"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def on_span(self, state: Any, span: Any, steps: Any, trace: TraceInfo) -> Any:
        self.entered.set()
        self.release.wait(WAIT)
        return ()


def test_a_full_queue_drops_and_counts(rigs: list[Rig], agent_trace: Captured) -> None:
    evaluator = BlockingEvaluator()
    rig = rig_of(
        rigs, engine_config=SLOW, evaluators=[evaluator], max_queue_size=4, max_export_batch_size=1
    )
    chat = next(s for s in agent_trace.spans if s.name.startswith("chat"))
    try:
        rig.processor.on_end(chat)  # the worker takes it and blocks in the evaluator
        assert evaluator.entered.wait(WAIT)
        assert wait_until(lambda: rig.processor.stats.queue_size == 0)
        others = [s for s in agent_trace.spans if s is not chat] * 3
        run_bounded(lambda: replay_spans(rig, others))
        stats = rig.processor.stats
        assert stats.queue_size == 4
        assert stats.dropped_queue_full == len(others) - 4
    finally:
        evaluator.release.set()
    assert rig.processor.force_flush(10_000)
    dropped = rig.metric_points(names.METRIC_SPANS_DROPPED)
    assert dropped == [({"tracehound.drop.reason": "queue_full"}, len(others) - 4)]


def test_on_end_never_raises_on_a_broken_span(rigs: list[Rig]) -> None:
    rig = rig_of(rigs, engine_config=SLOW)

    class Broken:
        @property
        def context(self) -> Any:
            raise RuntimeError("broken span")

    run_bounded(lambda: rig.processor.on_end(Broken()))  # type: ignore[arg-type]
    assert rig.processor.stats.internal_errors == 1


# --- fork safety -------------------------------------------------------------------------------

_FORK_SCRIPT = r"""
import os, sys
sys.path[:0] = [{tests!r}, {unit!r}]
from _scenarios import SCENARIOS
from _sdk import capture
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tracehound.config import ProcessorSettings
from tracehound.engine import EngineConfig
from tracehound.processor import TracehoundSpanProcessor

captured = capture(SCENARIOS["genai_agent"])
exporter = InMemorySpanExporter()
processor = TracehoundSpanProcessor(
    exporter, settings=ProcessorSettings(), emit_metrics=False,
    engine_config=EngineConfig(quiet_period=60, trace_timeout=120),
)
processor.on_end(captured.spans[0])  # the parent has state when it forks
pid = os.fork()
if pid == 0:
    for span in captured.spans:
        processor.on_end(span)
    ok = processor.force_flush(10_000)
    n = len(exporter.get_finished_spans())
    roots = [s for s in exporter.get_finished_spans() if s.parent is None]
    good = ok and n == len(captured.spans) and "tracehound.loops.detected" in roots[0].attributes
    os._exit(0 if good else 1)
_, status = os.waitpid(pid, 0)
child = os.waitstatus_to_exitcode(status)
for span in captured.spans[1:]:
    processor.on_end(span)
assert processor.force_flush(10_000)
assert len(exporter.get_finished_spans()) == len(captured.spans)
processor.shutdown()
print("child", child)
"""


def test_fork_safety(tmp_path: Any) -> None:
    from pathlib import Path

    unit = Path(__file__).resolve().parent
    script = tmp_path / "fork.py"
    script.write_text(_FORK_SCRIPT.format(tests=str(unit.parent), unit=str(unit)))
    result = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "child 0"
