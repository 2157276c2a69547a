"""Engine: finalization, limits, late and duplicate spans, log joining, evaluator isolation."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _native import pure_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import Engine, EngineConfig, EvaluationResult, Evaluator, TraceInfo
from tracehound.conventions import NormalizedSpan, normalize
from tracehound.engine import SPAN_DEFERRED, SPAN_DUPLICATE, SPAN_LATE, SPAN_PLAIN
from tracehound.evaluators.base import PluginError, SafeEvaluator, load_plugins
from tracehound.names import ATTR_LATE_SPANS, ATTR_TRUNCATED
from tracehound.spans import LogView, SpanView
from tracehound.steps import Step, Trajectory

TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACE2 = "1bf7651916cd43dd8448eb211c80319d"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def span(
    span_id: str,
    parent: str = "",
    *,
    trace: str = TRACE,
    name: str = "op",
    start: int = 0,
    end: int = 0,
    attrs: dict[str, Any] | None = None,
) -> SpanView:
    doc = {
        "traceId": trace,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end or start + 1),
        "attributes": [_attr(k, v) for k, v in (attrs or {}).items()],
    }
    return SpanView.from_json(doc)


def chat(span_id: str, parent: str, start: int, user: str, answer: str, **kw: Any) -> SpanView:
    return span(
        span_id,
        parent,
        name="chat m",
        start=start,
        end=start + 10,
        attrs={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "m",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": user}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
            ),
        },
        **kw,
    )


def tool(span_id: str, parent: str, start: int, call_id: str, result: str) -> SpanView:
    return span(
        span_id,
        parent,
        name="execute_tool search",
        start=start,
        end=start + 5,
        attrs={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": '{"q": "x"}',
            "gen_ai.tool.call.result": result,
        },
    )


ROOT = "a" * 16


def app_root(start: int = 0, end: int = 10_000) -> SpanView:
    """The local root the chat and tool spans of these tests hang under (an application span):
    fed first, it lets them be evaluated on arrival (parents first)."""
    return span(ROOT, name="app", start=start, end=end)


class Recorder(Evaluator):
    """Records every hook call; returns one result per span and one per trace."""

    name = "recorder"
    version = "1.0"

    def __init__(self) -> None:
        self.spans: list[tuple[str, list[str]]] = []
        self.finished: list[Trajectory] = []

    def start_trace(self, trace: TraceInfo) -> list[str]:
        return []

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        state.append(span.span_id)
        self.spans.append((span.span_id, [s.kind for s in steps]))
        return [
            EvaluationResult(
                name="seen",
                evaluator=self.name,
                evaluator_version=self.version,
                span_id=span.span_id,
                score_value=float(len(state)),
            )
        ]

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        self.finished.append(trajectory)
        return [
            EvaluationResult(
                name="steps",
                evaluator=self.name,
                evaluator_version=self.version,
                score_value=float(len(trajectory.steps)),
                attributes={"tracehound.test.steps": len(trajectory.steps)},
            )
        ]


class Exploding(Evaluator):
    name = "exploding"
    version = "0.1"

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        raise RuntimeError("boom")


def test_quiet_period_after_root_ends() -> None:
    clock = FakeClock()
    engine = Engine(config=EngineConfig(quiet_period=2.0, trace_timeout=30.0), clock=clock)
    engine.add_span(chat("b" * 16, ROOT, 100, "hi", "hello"))
    clock.now += 5
    assert engine.poll() == []  # root not ended yet: only the idle timeout applies
    engine.add_span(span(ROOT, name="invoke_agent a", start=50, end=200))
    clock.now += 1.9
    assert engine.poll() == []
    clock.now += 0.2
    [done] = engine.poll()
    assert done.reason == "quiet"
    assert done.root_span_id == ROOT
    assert [s.kind for s in done.trajectory.steps] == ["user", "llm", "assistant"]
    assert engine.active_traces == 0


def test_idle_timeout_without_root() -> None:
    clock = FakeClock()
    engine = Engine(config=EngineConfig(quiet_period=2.0, trace_timeout=30.0), clock=clock)
    engine.add_span(chat("b" * 16, ROOT, 100, "hi", "hello"))
    clock.now += 29.9
    assert engine.poll() == []
    clock.now += 0.2
    [done] = engine.poll()
    assert done.reason == "timeout"
    assert engine.stats.traces_timed_out == 1


def test_max_traces_finalizes_oldest_early_never_drops() -> None:
    clock = FakeClock()
    engine = Engine(config=EngineConfig(max_traces=2), clock=clock)
    ids = [f"{i:032x}" for i in range(1, 5)]
    for i, trace_id in enumerate(ids):
        engine.add_span(chat(f"{i + 1:016x}", "", 100 * i, f"q{i}", f"a{i}", trace=trace_id))
    early = engine.poll(now=clock.now)  # nothing due by time; the two early ones are returned
    assert [t.trace_id for t in early] == ids[:2]
    assert all(t.reason == "max_traces" for t in early)
    assert engine.stats.traces_finalized_early == 2
    rest = engine.flush()
    assert [t.trace_id for t in rest] == ids[2:]
    assert engine.stats.traces_finalized == 4


def test_max_spans_per_trace_marks_truncated() -> None:
    engine = Engine(config=EngineConfig(max_spans_per_trace=2))
    outcomes = [
        engine.add_span(chat(f"{i + 1:016x}", ROOT, 10 * i, f"q{i}", f"a{i}")) for i in range(4)
    ]
    # the first two wait for their parent (never sent), the others are past the limit
    assert [o.deferred for o in outcomes] == [True, True, False, False]
    assert not any(o.evaluated for o in outcomes)
    [done] = engine.flush()
    assert [(o.span_id, o.evaluated) for o in engine.take_released()] == [
        ("0000000000000001", True),
        ("0000000000000002", True),
    ]
    assert engine.stats.spans_reorder_expired == 2
    assert done.truncated
    assert done.attributes[ATTR_TRUNCATED] is True
    assert [s.text for s in done.trajectory.steps if s.kind == "user"] == ["q0", "q1"]
    assert engine.stats.spans_over_limit == 2


def test_text_budget_keeps_structure_drops_text() -> None:
    engine = Engine(config=EngineConfig(max_text_bytes_per_trace=30))
    engine.add_span(chat("1" * 16, ROOT, 0, "short", "reply"))  # 10 bytes
    engine.add_span(tool("2" * 16, ROOT, 20, "c1", "x" * 100))  # over the budget
    [done] = engine.flush()
    assert done.truncated
    kinds = [(s.kind, s.text) for s in done.trajectory.steps]
    assert kinds == [
        ("user", "short"),
        ("llm", None),
        ("assistant", "reply"),
        ("tool_call", None),
        ("tool_result", None),
    ]
    tool_call = done.trajectory.steps[3]
    assert (tool_call.tool, tool_call.call_id, tool_call.arguments) == ("search", "c1", '{"q":"x"}')


def test_late_and_duplicate_spans_are_counted_not_reevaluated() -> None:
    recorder = Recorder()
    engine = Engine([recorder])
    engine.add_span(chat("b" * 16, ROOT, 100, "hi", "hello"))
    dup = engine.add_span(chat("b" * 16, ROOT, 100, "hi", "hello"))
    assert dup.duplicate and not dup.evaluated
    assert engine.stats.spans_duplicate == 1
    [first] = engine.flush()
    late = engine.add_span(chat("c" * 16, ROOT, 300, "again", "again"))
    assert late.late and not late.evaluated
    assert engine.stats.late_spans == 1
    assert engine.late_spans_of(TRACE) == 1
    assert engine.flush() == []  # the trace is not evaluated twice
    assert len(recorder.finished) == 1
    assert first.trace_id == TRACE


def test_late_spans_attribute_when_known_before_finalization() -> None:
    engine = Engine(config=EngineConfig(max_traces=1))
    engine.add_span(chat("b" * 16, "", 100, "hi", "hello"))
    engine.add_span(chat("c" * 16, "", 100, "x", "y", trace=TRACE2))  # finalizes TRACE early
    engine.add_span(chat("d" * 16, "b" * 16, 200, "late", "late"))
    first, *_ = engine.poll()
    assert first.trace_id == TRACE and ATTR_LATE_SPANS not in first.attributes
    assert engine.late_spans_of(TRACE) == 1


def test_per_span_and_trace_results_and_root_attributes() -> None:
    """Children first (as SDK exporters send them): they wait for their root, and are evaluated
    when it arrives, as if it had come first."""
    recorder = Recorder()
    engine = Engine([recorder])
    d1 = engine.add_span(chat("b" * 16, ROOT, 100, "hi", "hello"))
    d2 = engine.add_span(tool("c" * 16, ROOT, 120, "c1", "result text"))
    assert d1.genai and d1.deferred and not d1.evaluated and d1.results == ()
    assert d2.deferred and engine.take_released() == [] and recorder.spans == []
    o3 = engine.add_span(span(ROOT, name="app", start=0, end=500))
    assert not o3.genai and o3.results == ()
    o1, o2 = engine.take_released()
    assert (o1.span_id, o2.span_id) == ("b" * 16, "c" * 16)
    assert o1.evaluated and not o1.deferred
    assert [r.score_value for r in o1.results] == [1.0]
    assert [r.score_value for r in o2.results] == [2.0]
    assert engine.stats.spans_reordered == 2 and engine.stats.spans_reorder_expired == 0
    assert list(recorder.spans[1][1]) == ["tool_call", "tool_result"]
    [done] = engine.flush()
    [trace_result] = done.results
    assert trace_result.span_id == ROOT  # trace results default to the local root
    assert done.attributes["tracehound.test.steps"] == 5


def test_trace_without_genai_spans_is_followed_not_evaluated() -> None:
    """An HTTP trace gets no evaluator state and no results; a GenAI span arriving late for it
    (after its non-GenAI root) starts the evaluation then."""

    class Counting(Recorder):
        started = 0

        def start_trace(self, trace: TraceInfo) -> list[str]:
            Counting.started += 1
            return []

    recorder = Counting()
    engine = Engine([recorder])
    engine.add_span(span("d" * 16, ROOT, trace=TRACE2, name="SELECT", start=10, end=20))
    engine.add_span(span(ROOT, trace=TRACE2, name="GET /health", start=0, end=30))
    engine.add_span(span(ROOT, name="POST /ask", start=0, end=500))
    assert Counting.started == 0
    engine.add_span(chat("b" * 16, ROOT, 100, "hi", "hello"))
    assert Counting.started == 1
    done = {t.trace_id: t for t in engine.flush()}
    plain, agent = done[TRACE2], done[TRACE]
    assert plain.results == () and plain.trajectory.steps == () and plain.attributes == {}
    assert [r.name for r in agent.results] == ["steps"]
    assert recorder.finished == [agent.trajectory]  # finish_trace ran for the GenAI trace only


def test_failing_evaluator_is_isolated(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder()
    engine = Engine([Exploding(), recorder])
    engine.add_span(app_root())
    with caplog.at_level(logging.WARNING):
        o1 = engine.add_span(chat("b" * 16, ROOT, 100, "hi", "hello"))
        o2 = engine.add_span(chat("c" * 16, ROOT, 200, "more", "sure"))
    errors = [r for r in o1.results if r.error_type]
    assert [(r.evaluator, r.error_type, r.span_id) for r in errors] == [
        ("exploding", "RuntimeError", "b" * 16)
    ]
    assert [r.evaluator for r in o2.results] == ["recorder"]  # skipped for the rest of the trace
    [done] = engine.flush()
    assert {r.evaluator for r in done.results} == {"exploding", "recorder"}
    assert (
        next(r for r in done.results if r.evaluator == "exploding").error_type == "EvaluatorFailed"
    )
    assert engine.stats.evaluator_errors == 1
    assert sum("exploding" in rec.getMessage() for rec in caplog.records) == 1  # logged once


class _Flaky(Evaluator):
    """Fails in the hook named `fails` on the spans listed (every span: None); returns one
    result per span otherwise."""

    version = "0.2"

    def __init__(self, name: str, fails: str, spans: set[str] | None = None) -> None:
        self.name = name  # type: ignore[misc]
        self.fails = fails
        self.failing_spans = spans
        self.calls: list[str] = []

    def start_trace(self, trace: TraceInfo) -> list[str]:
        if self.fails == "start_trace":
            raise ValueError("no start")
        return []

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        self.calls.append(span.span_id)
        if self.fails == "on_span" and (
            self.failing_spans is None or span.span_id in self.failing_spans
        ):
            raise KeyError(span.span_id)
        return (EvaluationResult(name="flaky", evaluator=self.name, evaluator_version="0.2"),)

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        if self.fails == "finish_trace":
            raise RuntimeError("no finish")
        return [EvaluationResult(name="done", evaluator=self.name, evaluator_version="0.2")]


def _run_safely(evaluators: list[Evaluator]) -> tuple[list[list[tuple[str, str | None]]], Any]:
    """The per-span (evaluator, error type) of three GenAI spans of one trace, the finalized
    trace, as the engine makes them; the same through `SafeEvaluator` one by one is the
    reference (`_reference_outcomes`)."""
    engine = Engine(evaluators)
    engine.add_span(app_root())
    outcomes = [
        engine.add_span(chat(f"{i + 1:016x}", ROOT, 100 * i, f"q{i}", f"a{i}")) for i in range(3)
    ]
    [done] = engine.flush()
    return [[(r.evaluator, r.error_type) for r in o.results] for o in outcomes], (
        [(r.evaluator, r.name, r.error_type, r.span_id) for r in done.results],
        engine.stats.evaluator_errors,
    )


def _reference_outcomes(evaluators: list[Evaluator]) -> Any:
    """What the engine did before it called the evaluators' hooks directly: each hook through
    its `SafeEvaluator`, one by one."""
    safe = [SafeEvaluator(e) for e in evaluators]
    info = TraceInfo(TRACE)
    states = [e.start_trace(info) for e in safe]
    per_span = []
    spans = [chat(f"{i + 1:016x}", ROOT, 100 * i, f"q{i}", f"a{i}") for i in range(3)]
    engine = Engine()  # for the normalized spans and their steps only
    engine.add_span(app_root())
    for view in spans:
        engine.add_span(view)
    [done] = engine.flush()
    for view in spans:
        normalized = normalize(view)
        assert normalized is not None
        results = []
        for i, evaluator in enumerate(safe):
            states[i], span_results = evaluator.on_span(states[i], normalized, (), info)
            results.extend(span_results)
        per_span.append([(r.evaluator, r.error_type) for r in results])
    finished = []
    for evaluator, state in zip(safe, states, strict=True):
        finished.extend(evaluator.finish_trace(state, done.trajectory, info))
    return per_span, (
        [(r.evaluator, r.name, r.error_type, r.span_id or done.root_span_id) for r in finished],
        sum(e.errors for e in safe),
    )


@pytest.mark.parametrize(
    "fails",
    [
        [],
        [("on_span", None)],
        [("on_span", {"0000000000000002"})],
        [("start_trace", None)],
        [("finish_trace", None)],
        [("on_span", {"0000000000000001"}), ("on_span", {"0000000000000003"})],
        [("on_span", {"0000000000000002"}), ("finish_trace", None)],
    ],
)
def test_direct_hooks_isolate_failures_as_safe_evaluator_does(
    fails: list[tuple[str, set[str] | None]],
) -> None:
    """Evaluators failing as `fails` says (in that hook, on those spans; None: every span)
    among plain ones: the results, in order, and the failures counted are those of each hook
    called through its `SafeEvaluator`."""

    def make() -> list[Evaluator]:
        made: list[Evaluator] = [
            _Flaky(f"f{i}", hook, spans) for i, (hook, spans) in enumerate(fails)
        ]
        made.insert(len(made) // 2, _Flaky("a", ""))
        made.append(_Flaky("z", ""))
        made.append(Evaluator())  # Evaluator's own hooks: nothing per span
        return made

    expected = _reference_outcomes(make())
    assert _run_safely(make()) == expected
    with pure_python():  # the engine's own loop, without the accelerator's `call_span_hooks`
        assert _run_safely(make()) == expected


def test_evaluators_without_their_own_span_hook_are_not_called_per_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    class Quiet(Evaluator):
        name = "quiet"

    class Instance(Evaluator):
        name = "instance"

    instance = Instance()
    instance.on_span = lambda *args: calls.append("instance") or ()  # type: ignore[method-assign]

    def counted(self: Any, *args: Any) -> Any:
        calls.append("base")
        return ()

    monkeypatch.setattr(Evaluator, "on_span", counted)
    engine = Engine([Quiet(), instance])
    engine.add_span(app_root())
    engine.add_span(chat("b" * 16, ROOT, 100, "hi", "hello"))
    assert calls == ["instance"]  # Quiet is skipped: the engine read the hook at its start


def test_the_engine_calls_hooks_without_safe_evaluator_per_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any) -> Any:
        raise AssertionError("SafeEvaluator.on_span should only run after a failure")

    monkeypatch.setattr(SafeEvaluator, "start_trace", refuse)
    monkeypatch.setattr(SafeEvaluator, "on_span", refuse)
    monkeypatch.setattr(SafeEvaluator, "finish_trace", refuse)
    recorder = Recorder()
    engine = Engine([recorder])
    engine.add_span(app_root())
    outcome = engine.add_span(chat("b" * 16, ROOT, 100, "hi", "hello"))
    assert [r.name for r in outcome.results] == ["seen"]
    [done] = engine.flush()
    assert [r.name for r in done.results] == ["steps"]


def test_logs_join_whichever_arrives_first() -> None:
    body_user = {"content": "What is 2+2?"}
    legacy_span = span(
        "b" * 16,
        ROOT,
        name="chat m",
        start=100,
        end=200,
        attrs={"gen_ai.operation.name": "chat", "gen_ai.system": "openai"},
    )

    def log(name: str, body: Any) -> LogView:
        return LogView(
            trace_id=TRACE, span_id="b" * 16, event_name=name, time_ns=150, attributes={}, body=body
        )

    before = Engine()
    before.add_log(log("gen_ai.user.message", body_user))
    before.add_span(legacy_span)
    before.add_log(
        log("gen_ai.choice", {"index": 0, "message": {"content": "4"}, "finish_reason": "stop"})
    )
    [a] = before.flush()

    after = Engine()
    after.add_span(legacy_span)
    after.add_log(
        log("gen_ai.choice", {"index": 0, "message": {"content": "4"}, "finish_reason": "stop"})
    )
    after.add_log(log("gen_ai.user.message", body_user))
    [b] = after.flush()
    for done in (a, b):
        assert [(s.kind, s.text) for s in done.trajectory.steps] == [
            ("user", "What is 2+2?"),
            ("llm", None),
            ("assistant", "4"),
        ]
        assert done.trajectory.conventions == ("otel_genai_legacy",)


def test_non_genai_logs_are_ignored_and_unjoined_logs_counted() -> None:
    engine = Engine()
    engine.add_log(
        LogView(trace_id=TRACE, span_id="b" * 16, event_name="", time_ns=1, attributes={}, body="x")
    )
    assert engine.stats.logs_received == 0
    engine.add_log(
        LogView(
            trace_id=TRACE,
            span_id="e" * 16,
            event_name="gen_ai.user.message",
            time_ns=1,
            attributes={},
            body={"content": "orphan"},
        )
    )
    engine.add_span(chat("b" * 16, "", 100, "hi", "hello"))
    engine.flush()
    assert engine.stats.logs_received == 1
    assert engine.stats.logs_unjoined == 1


def test_invalid_config_fails_fast() -> None:
    with pytest.raises(ValueError, match="quiet_period"):
        EngineConfig(quiet_period=-1)
    with pytest.raises(ValueError, match="max_traces"):
        EngineConfig(max_traces=0)
    with pytest.raises(ValueError, match="trace_timeout must be >= quiet_period"):
        EngineConfig(quiet_period=10, trace_timeout=5)


def _install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """A real distribution on sys.path with a `tracehound.evaluators` entry point."""
    (tmp_path / "thplugin.py").write_text(
        "from tracehound import Evaluator\n"
        "class Good(Evaluator):\n    name = 'good'\n    version = '2.0'\n"
        "class Nameless(Evaluator):\n    version = '1'\n"
        "def broken():\n    raise ImportError('missing dependency')\n"
    )
    dist = tmp_path / "thplugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[tracehound.evaluators]\n{target}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "thplugin", raising=False)


def test_plugins_load_from_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_plugin(tmp_path, monkeypatch, "good = thplugin:Good")
    [evaluator] = load_plugins(["good"])
    assert (evaluator.name, evaluator.version) == ("good", "2.0")
    with pytest.raises(PluginError, match="unknown evaluator plugin"):
        load_plugins(["absent"])


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("bad = thplugin:broken", "failed to load: missing dependency"),
        ("bad = thplugin:Nameless", "has no name"),
    ],
)
def test_bad_plugins_fail_at_startup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, message: str
) -> None:
    _install_plugin(tmp_path, monkeypatch, target)
    with pytest.raises(PluginError, match=message):
        load_plugins(["bad"])


# --- take_span: add_span without the SpanOutcome ----------------------------------------------

_SPAN_IDS = [f"{i:016x}" for i in range(1, 7)]


def _view(kind: int, trace: str, span_id: str, parent: str) -> SpanView:
    """A span of one of the kinds the engine tells apart: plain, chat, tool, a big chat."""
    if kind == 0:
        return span(span_id, parent, trace=trace)
    if kind == 1:
        return chat(span_id, parent, 100, "q " + span_id, "a " + span_id, trace=trace)
    if kind == 2:
        return span(
            span_id,
            parent,
            trace=trace,
            name="execute_tool search",
            attrs={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.id": "c" + span_id,
                "gen_ai.tool.call.result": "r" * 40,
            },
        )
    return chat(span_id, parent, 100, "x" * 300, "y" * 300, trace=trace)


# (trace, span, parent, kind, clock step) of each span fed
_feeds = st.lists(
    st.tuples(
        st.sampled_from([TRACE, TRACE2]),
        st.sampled_from(_SPAN_IDS),
        st.sampled_from(["", *_SPAN_IDS[:2]]),
        st.integers(0, 3),
        st.sampled_from([0.0, 0.0, 1.0, 3.0, 40.0]),
    ),
    max_size=14,
)


def _fed(feeds: list[Any], failing: str | None, taker: bool) -> Any:
    """What the engine makes of `feeds`: each span's answer (as `take_span` gives it), the
    finalized traces and the stats; through `add_span` or the engine's `span_taker`."""
    clock = FakeClock()
    evaluators: list[Evaluator] = [_Flaky("a", "")]
    if failing is not None:
        evaluators.append(_Flaky("f", "on_span", {failing}))
    evaluators.append(Recorder())
    config = EngineConfig(
        quiet_period=2.0,
        trace_timeout=30.0,
        max_traces=1,
        max_spans_per_trace=4,
        max_text_bytes_per_trace=900,
        finalized_cache_size=1,
    )
    engine = Engine(evaluators, config, clock=clock)
    take = engine.span_taker()
    answers: list[Any] = []
    done: list[Any] = []
    released: list[Any] = []  # (trace, span, results) of the deferred spans, when evaluated
    for trace, span_id, parent, kind, step in feeds:
        clock.now += step
        view = _view(kind, trace, span_id, parent if parent != span_id else "")
        if taker:
            answers.append(take(view))
        else:
            outcome = engine.add_span(view)
            answers.append(
                (SPAN_DEFERRED if outcome.deferred else outcome.results)
                if outcome.genai
                else SPAN_LATE
                if outcome.late
                else SPAN_DUPLICATE
                if outcome.duplicate
                else SPAN_PLAIN
            )
        released += engine.take_released()
        done += engine.poll()
        released += engine.take_released()
    done += engine.flush()
    released += engine.take_released()
    return (
        [a if isinstance(a, int) else [_result_facts(r) for r in a] for a in answers],
        [(o.trace_id, o.span_id, [_result_facts(r) for r in o.results]) for o in released],
        [
            (
                t.trace_id,
                t.root_span_id,
                t.reason,
                t.span_count,
                t.truncated,
                t.attributes,
                [_result_facts(r) for r in t.results],
                [(s.kind, s.span_id, s.text) for s in t.trajectory.steps],
            )
            for t in done
        ],
        engine.stats,
    )


def _result_facts(result: EvaluationResult) -> Any:
    return (result.name, result.evaluator, result.span_id, result.score_value, result.error_type)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(feeds=_feeds, failing=st.sampled_from([None, *_SPAN_IDS[:3]]))
def test_take_span_answers_what_add_span_says(feeds: list[Any], failing: str | None) -> None:
    """The engine's `span_taker` (the accelerator's `engine_take_span`, when loaded) does what
    `add_span` does: the same answers, finalized traces and counts, late, duplicate, over-limit
    and over-budget spans and a failing evaluator included."""
    expected = _fed(feeds, failing, taker=False)
    assert _fed(feeds, failing, taker=True) == expected
    with pure_python():
        assert _fed(feeds, failing, taker=True) == expected
