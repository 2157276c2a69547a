"""emit: what a result produces (pure) and how it is written (SDK copies, log records, metrics)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from tracehound import names
from tracehound.emit import (
    INSTRUMENTS,
    EventEmitter,
    copy_span,
    event_attributes,
    is_content_key,
    redact_attributes,
    redact_event_attributes,
    result_measurements,
    span_attributes,
)
from tracehound.evaluators.base import EvaluationResult


def result(**kw: Any) -> EvaluationResult:
    base: dict[str, Any] = {
        "name": "tracehound.test",
        "evaluator": "test",
        "evaluator_version": "2",
    }
    return EvaluationResult(**{**base, **kw})


def test_event_attributes_mirror_the_semconv_event() -> None:
    attrs = event_attributes(result(score_value=1, score_label="pass", explanation="fine"))
    assert attrs == {
        "gen_ai.evaluation.name": "tracehound.test",
        "gen_ai.evaluation.score.value": 1.0,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.evaluation.explanation": "fine",
        "tracehound.evaluator.name": "test",
        "tracehound.evaluator.version": "2",
    }
    assert isinstance(attrs["gen_ai.evaluation.score.value"], float)
    failed = event_attributes(result(error_type="RuntimeError", explanation="boom"))
    assert failed["error.type"] == "RuntimeError"
    assert "gen_ai.evaluation.score.value" not in failed


def test_span_attributes_merge_in_order() -> None:
    a = result(attributes={"tracehound.x": 1, "tracehound.y": "a"})
    b = result(attributes={"tracehound.y": "b"})
    assert span_attributes([a, b]) == {"tracehound.x": 1, "tracehound.y": "b"}


def test_measurements_of_a_loop_summary() -> None:
    loops = result(
        name=names.EVAL_LOOPS,
        evaluator="loops",
        score_value=0.4,
        score_label="fail",
        attributes={
            names.ATTR_LOOPS_BY_KIND["repeat"]: 2,
            names.ATTR_LOOPS_BY_KIND["cycle"]: 1,
            names.ATTR_LOOPS_WASTED_TOKENS: 120,
            names.ATTR_LOOPS_WASTED_SECONDS: 0.75,
        },
    )
    points = {
        (m.instrument, tuple(sorted(m.attributes.items())), m.value)
        for m in result_measurements(loops, agent="bot")
    }
    agent = ("gen_ai.agent.name", "bot")
    assert (names.METRIC_LOOPS, (agent, ("tracehound.loop.kind", "repeat")), 2) in points
    assert (names.METRIC_LOOPS, (agent, ("tracehound.loop.kind", "cycle")), 1) in points
    assert (names.METRIC_LOOPS_WASTED_TOKENS, (agent,), 120) in points
    assert (names.METRIC_LOOPS_WASTED_SECONDS, (agent,), 0.75) in points
    score = [p for p in points if p[0] == names.METRIC_EVALUATION_SCORE]
    assert len(score) == 1 and score[0][2] == 0.4


def test_measurements_of_survival_drift_and_errors() -> None:
    final = result(
        name=names.EVAL_EVIDENCE_FINAL_SURVIVAL, score_value=0.25, score_label="grounded"
    )
    scopes = [
        dict(m.attributes).get("tracehound.evidence.scope")
        for m in result_measurements(final)
        if m.instrument == names.METRIC_EVIDENCE_SURVIVAL
    ]
    assert scopes == ["final"]
    drift = result(evaluator="drift", name="tracehound.drift", score_value=0.7, score_label="alert")
    severities = [
        m for m in result_measurements(drift) if m.instrument == names.METRIC_DRIFT_SEVERITY
    ]
    assert [dict(m.attributes) for m in severities] == [{"tracehound.drift.severity": "alert"}]
    failed = result(error_type="KeyError")
    assert [(m.instrument, dict(m.attributes)) for m in result_measurements(failed)] == [
        (
            names.METRIC_EVALUATION_ERRORS,
            {"tracehound.evaluator.name": "test", "error.type": "KeyError"},
        )
    ]
    assert [m.instrument for m in result_measurements(result(score_value=math.nan))] == []


def test_every_metric_name_is_declared_in_names() -> None:
    declared = {v for k, v in vars(names).items() if k.startswith("METRIC_") and "ATTR" not in k}
    assert set(INSTRUMENTS) == declared


def test_redaction_rules() -> None:
    attrs = {
        "gen_ai.input.messages": "[...]",
        "gen_ai.tool.call.result": "secret",
        "llm.input_messages.0.message.content": "hi",
        "retrieval.documents.1.document.content": "doc",
        "gen_ai.request.model": "gpt",
        "tracehound.loop.kind": "repeat",
    }
    kept, removed = redact_attributes(attrs)
    assert kept == {"gen_ai.request.model": "gpt", "tracehound.loop.kind": "repeat"}
    assert removed == 4
    assert is_content_key("gen_ai.prompt.0.content") and not is_content_key(
        "gen_ai.usage.input_tokens"
    )
    kept, n = redact_event_attributes(
        "gen_ai.user.message", {"content": "x", "gen_ai.system": "openai"}
    )
    assert kept == {"gen_ai.system": "openai"} and n == 1
    kept, n = redact_event_attributes("exception", {"exception.type": "E"})
    assert n == 0


def _span() -> ReadableSpan:
    attributes = BoundedAttributes(
        maxlen=2, attributes={"a": 1, "gen_ai.input.messages": "x"}, immutable=False
    )
    attributes["c"] = 3  # over maxlen: the oldest ("a") is dropped and counted
    return ReadableSpan(
        name="s",
        context=SpanContext(1, 2, False, TraceFlags(TraceFlags.SAMPLED)),
        attributes=attributes,
        events=(Event("gen_ai.choice", {"message": "secret", "index": 0}, 5),),
    )


def test_copy_span_adds_redacts_and_keeps_the_original() -> None:
    span = _span()
    assert span.dropped_attributes == 1
    assert copy_span(span) is span  # nothing to change: no copy
    copy = copy_span(
        span,
        {"tracehound.loop.kinds": ["repeat", "cycle"], "tracehound.n": 2},
        [("gen_ai.evaluation.result", {"gen_ai.evaluation.name": "x"}, 7)],
        redact=True,
    )
    assert copy is not span
    assert dict(span.attributes or {}) == {"gen_ai.input.messages": "x", "c": 3}
    assert dict(copy.attributes or {}) == {
        "c": 3,
        "tracehound.loop.kinds": ("repeat", "cycle"),
        "tracehound.n": 2,
        "tracehound.redacted": 2,
    }
    assert copy.dropped_attributes == 1
    assert [(e.name, dict(e.attributes or {})) for e in copy.events] == [
        ("gen_ai.choice", {"index": 0}),
        ("gen_ai.evaluation.result", {"gen_ai.evaluation.name": "x"}),
    ]
    assert copy.context == span.context


def test_event_emitter_parents_the_record() -> None:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    EventEmitter(provider).emit(result(score_value=0.5), "0" * 31 + "a", "0" * 15 + "b", 123)
    (record,) = exporter.get_finished_logs()
    assert (record.log_record.trace_id, record.log_record.span_id) == (10, 11)
    assert record.log_record.event_name == "gen_ai.evaluation.result"
    assert record.log_record.timestamp == 123
    assert record.instrumentation_scope is not None
    assert record.instrumentation_scope.name == "tracehound"
    provider.shutdown()


_EMIT_TWICE = """
import logging, sys
from opentelemetry._logs import set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider
from tracehound.emit import EventEmitter
from tracehound.evaluators.base import EvaluationResult
logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
if sys.argv[1] == "global":
    set_logger_provider(LoggerProvider())
emitter = EventEmitter(LoggerProvider() if sys.argv[1] == "given" else None)
result = EvaluationResult(name="x", evaluator="test", evaluator_version="1", score_value=1.0)
for _ in range(2):
    emitter.emit(result, "0" * 31 + "1", "0" * 15 + "1")
"""


@pytest.mark.parametrize("provider", ["none", "global", "given"])
def test_results_without_a_logger_provider_are_not_lost_silently(provider: str) -> None:
    """Without a global LoggerProvider (and none given), the API drops every record: say so,
    once. A process of its own: the global provider can be set only once."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run(
        [sys.executable, "-c", _EMIT_TWICE, provider],
        env={**os.environ, "PYTHONPATH": src},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    if provider == "none":
        assert len(warnings) == 1
        assert warnings[0].startswith("WARNING tracehound.emit evaluation results are log records")
        assert "set_logger_provider" in warnings[0] and "logger_provider=" in warnings[0]
    else:
        assert warnings == []
