"""What the sidecar keeps from trace to trace stays bounded, and what it keeps for one trace goes
with it.

- A finalized trace's state (engine, evaluators, pipeline) is freed by reference counting: no
  reference cycle waits for the cyclic GC, which `tracehound serve` runs rarely
  (`GC_THRESHOLDS`), so cyclic garbage piles up between its collections and raises the heap's
  high-water mark.
- Fed traces that are all different — trace ids, agent, tool, span and model names, texts — the
  pipeline's and the engine's id caches stay under their caps, the per-trace maps empty, and the
  memoizing caches (span names, embedder tokens) under theirs.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import types
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from helpers import FIXTURES, RecordingLane, feed_engine
from tracehound import conventions
from tracehound.baselines import MemoryStore
from tracehound.cli import select_evaluators
from tracehound.drift import HashingEmbedder
from tracehound.drift import _embed as embed_module
from tracehound.engine import Engine, EngineConfig
from tracehound.evaluators.base import Evaluator
from tracehound.evaluators.drift import DriftEvaluator
from tracehound.files import read_paths
from tracehound.server import ServeSettings
from tracehound.server._pipeline import Pipeline, _Seen

CORPUS = FIXTURES.parent / "corpus"


def _evaluators() -> list[Evaluator]:
    """Every built-in evaluator, drift with in-memory baselines and the hashing embedder."""
    return [*select_evaluators(None), DriftEvaluator(MemoryStore(), embedder=HashingEmbedder())]


def _captures() -> list[Path]:
    """Every capture of spans: the fixtures, the framework captures, the loop corpora."""
    spans = [p for p in FIXTURES.rglob("*.otlp.json") if not p.name.endswith(".logs.otlp.json")]
    return sorted(spans) + sorted(CORPUS.rglob("*.json"))


def _logs_of(path: Path) -> list[Path]:
    logs = path.with_name(path.name.replace(".otlp.json", ".logs.otlp.json"))
    return [logs] if logs != path and logs.exists() else []


class _CyclicGarbage:
    """What `gc.collect()` finds unreachable between `__enter__` and `__exit__` (kept, not
    freed: `DEBUG_SAVEALL`)."""

    def __enter__(self) -> _CyclicGarbage:
        gc.collect()
        gc.garbage.clear()
        gc.set_debug(gc.DEBUG_SAVEALL)
        self.found: list[Any] = []
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            gc.collect()
            self.found = list(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()

    def described(self) -> str:
        kinds = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in self.found)
        functions = {o.__qualname__ for o in self.found if isinstance(o, types.FunctionType)}
        return f"{len(self.found)} objects: {kinds.most_common(12)}; functions {functions}"


def _add_span(
    spans: Any,
    trace_id: bytes,
    span_id: int,
    name: str,
    attributes: dict[str, str],
    *,
    parent: bytes,
) -> bytes:
    s = spans.add(trace_id=trace_id, span_id=span_id.to_bytes(8, "big"), parent_span_id=parent)
    s.name = name
    s.start_time_unix_nano, s.end_time_unix_nano = 1_000 * span_id, 1_000 * span_id + 500
    for key, value in attributes.items():
        s.attributes.add(key=key).value.string_value = value
    return bytes(s.span_id)


def _tool_loop_request(salt: int) -> ExportTraceServiceRequest:
    """A trace whose agent polls one tool with arguments that are not all strings (a number, a
    list, a date): the loop detector's flattening, near-duplicate and retry paths."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    trace_id = salt.to_bytes(16, "big")
    root = (salt * 100).to_bytes(8, "big")
    for n in range(1, 7):
        arguments = {"job": 42, "tags": ["a", n % 2], "since": f"2026-01-0{n % 3 + 1}"}
        _add_span(
            spans,
            trace_id,
            salt * 100 + n,
            "execute_tool status",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "status",
                "gen_ai.tool.call.id": f"call{n}",
                "gen_ai.tool.call.arguments": json.dumps(arguments),
                "gen_ai.tool.call.result": "pending" if n < 6 else "done",
            },
            parent=root,
        )
    _add_span(
        spans,
        trace_id,
        salt * 100,
        "invoke_agent poller",
        {"gen_ai.operation.name": "invoke_agent"},
        parent=b"",
    )
    return request


def test_finalized_traces_leave_no_cyclic_garbage() -> None:
    """Every capture, evaluated by every built-in evaluator: once the engine has finalized the
    trace, nothing of it is left for the cyclic GC."""
    captures = _captures()
    assert len(captures) > 50
    leaks: dict[str, str] = {}
    for path in captures:
        telemetry = read_paths([path, *_logs_of(path)])

        def evaluate(telemetry: Any = telemetry) -> Engine:
            engine = Engine(_evaluators(), EngineConfig(quiet_period=0))
            for log in telemetry.logs:
                engine.add_log(log)
            feed_engine(engine, telemetry.spans)
            return engine

        evaluate()  # first use: module-level memos, lazily built tables
        with _CyclicGarbage() as garbage:
            engine = evaluate()
        assert engine.active_traces == 0
        if garbage.found:
            leaks[path.name] = garbage.described()
    assert not leaks, leaks


def _rig(mode: str, **engine: Any) -> tuple[Pipeline, dict[str, RecordingLane]]:
    settings = ServeSettings.resolve(
        {"otlp_grpc": "none", "otlp_http": "127.0.0.1:0", "forward": "none", "mode": mode},
        environ={"TRACEHOUND_METRICS": "false"},
    )
    if engine:
        settings = dataclasses.replace(
            settings, engine=dataclasses.replace(settings.engine, **engine)
        )
    lanes = {name: RecordingLane() for name in ("traces", "logs", "metrics")}
    pipeline = Pipeline(settings, _evaluators(), lanes)  # type: ignore[arg-type]
    return pipeline, lanes


def _run(pipeline: Pipeline, requests: list[bytes]) -> None:
    """Submit, evaluate and finalize each request in turn, on the pipeline's own steps."""
    now = [0.0]
    pipeline.engine._clock = lambda: now[0]
    for raw in requests:
        pipeline.submit_traces(None, raw, len(raw))
        pipeline._drain()
        pipeline._finalize(pipeline.engine.poll())
        pipeline._flush_outputs()
        now[0] += 100.0
    pipeline._finalize(pipeline.engine.flush())
    pipeline._flush_outputs()
    assert pipeline.stats.internal_errors == 0


@pytest.mark.parametrize("mode", ["stream", "hold"])
def test_the_sidecar_pipeline_leaves_no_cyclic_garbage(mode: str) -> None:
    requests = [_tool_loop_request(salt).SerializeToString() for salt in range(1, 4)]
    for path in [FIXTURES / "pydantic_ai_v6.otlp.json", FIXTURES / "openai_v2_latest.otlp.json"]:
        pb = path.with_name(path.name.replace(".otlp.json", ".pb"))
        requests.append(pb.read_bytes())
    pipeline, lanes = _rig(mode)
    _run(pipeline, requests[:1])  # first use
    with _CyclicGarbage() as garbage:
        _run(pipeline, requests[1:])
    assert lanes["traces"].payloads
    assert not garbage.found, garbage.described()


def _distinct_requests(count: int, *, salt: int = 0) -> Iterator[bytes]:
    """`count` traces, no two alike: ids, service, agent, tool, span and model names, texts."""
    for n in range(salt, salt + count):
        request = ExportTraceServiceRequest()
        rs = request.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = f"service-{n}"
        spans = rs.scope_spans.add().spans
        trace_id = (n + 1).to_bytes(16, "big")
        root = ((n + 1) * 10).to_bytes(8, "big")
        word = os.urandom(6).hex()
        text = f"ticket {n} {word} reopened after the {word} deploy"
        _add_span(
            spans,
            trace_id,
            (n + 1) * 10 + 1,
            f"chat model-{n}",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": f"model-{n}",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": text}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": word}]}]
                ),
            },
            parent=root,
        )
        _add_span(
            spans,
            trace_id,
            (n + 1) * 10 + 2,
            f"execute_tool tool-{n}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": f"tool-{n}",
                "gen_ai.tool.call.id": f"call-{n}",
                "gen_ai.tool.call.arguments": json.dumps({"id": n, "q": word}),
                "gen_ai.tool.call.result": text,
            },
            parent=root,
        )
        _add_span(
            spans,
            trace_id,
            (n + 1) * 10,
            f"invoke_agent agent-{n}",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"agent-{n}"},
            parent=b"",
        )
        yield request.SerializeToString()


def test_id_caches_and_per_trace_maps_stay_bounded_over_distinct_traces() -> None:
    finalized_cap, max_traces = 40, 10
    pipeline, lanes = _rig("stream", finalized_cache_size=finalized_cap, max_traces=max_traces)
    engine = pipeline.engine
    sizes: list[tuple[int, int, int]] = []
    for batch in range(6):
        _run(pipeline, list(_distinct_requests(50, salt=batch * 50)))
        sizes.append((len(engine._finalized), len(pipeline._known), engine.active_traces))
    assert engine.stats.traces_finalized == 300
    assert sum(items for _, items in lanes["traces"].payloads) == 900  # all forwarded
    assert all(f <= finalized_cap for f, _, _ in sizes), sizes
    assert all(k <= finalized_cap + max_traces for _, k, _ in sizes), sizes
    assert sizes[-1] == (finalized_cap, finalized_cap + max_traces, 0)  # full, no further
    # nothing per trace is left once every trace is finalized and forwarded
    assert engine._traces == {} and engine._late_by_trace == {}
    assert pipeline._held == {} and pipeline._deferred == {}
    assert pipeline._trace_resource == {} and pipeline._events == {}


def test_late_span_counts_go_with_their_evicted_trace() -> None:
    pipeline, _ = _rig("stream", finalized_cache_size=5)
    requests = list(_distinct_requests(30))
    _run(pipeline, requests)
    _run(pipeline, requests)  # every span again, now late (or a duplicate, dropped)
    assert len(pipeline.engine._late_by_trace) <= 5


def test_the_duplicate_filter_keeps_two_generations() -> None:
    seen = _Seen(100)
    keys = [n.to_bytes(24, "big") for n in range(1_000)]
    for key in keys:
        assert not seen.check_and_add(key)
        assert len(seen._current) + len(seen._previous) <= 200
    assert seen.check_and_add(keys[-1]) and seen.check_and_add(keys[-100])  # recent: caught
    assert not seen.check_and_add(keys[0])  # forgotten beyond two generations
    assert seen.add_all_new(keys[500:503]) is True and not seen.add_all_new(keys[500:503])


def test_memo_caches_stay_under_their_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Span names and embedder tokens memoized per distinct value: past the cap the memo starts
    over (the caps are small here so the test reaches them)."""
    monkeypatch.setattr(conventions, "_NAME_FLAGS_MAX", 64)
    monkeypatch.setattr(conventions, "_NAME_FLAGS", {})
    monkeypatch.setattr(embed_module, "_TOKEN_CACHE_LIMIT", 64)
    embedder = HashingEmbedder()
    name_sizes, token_sizes = [], []
    for n in range(400):
        conventions._name_flags(f"chat model-{n}")
        name_sizes.append(len(conventions._NAME_FLAGS))
        embedder._hash_miss(f"token{n}")
        token_sizes.append(len(embedder._cache))
    assert max(name_sizes) <= 64 and max(token_sizes) <= 64
    assert conventions._name_flags("chat m") == conventions._name_flags("chat m")
