"""Faults around a running `tracehound serve` (fast variants; docs/reliability.md has the long
ones): SIGTERM while senders keep sending, a downstream down for longer than the retry limit,
an evaluator plugin that hangs, and the Redis baseline store down and back (a `redis-server` of
the test's own). Each runs the real process."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import grpc
import pytest
from _serve import Serve
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SpanExportResult
from test_serve_backpressure import FAST_RETRIES, TRACES, readyz, request_of, span_ids

from helpers import fixture_request, readable_spans_from_request
from redis_helpers import free_port, redis_server
from tracehound import names
from tracehound.baselines._redis import DEFAULT_OUTAGE_BACKOFF, DEFAULT_TIMEOUT
from tracehound.testing import OTLPSink, attributes

pytestmark = [pytest.mark.integration]


@pytest.fixture
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


def forwarded(sink: OTLPSink) -> set[bytes]:
    return {bytes(s.span.span_id) for s in sink.spans()}


def test_sigterm_under_load_forwards_everything_accepted(sink: OTLPSink) -> None:
    serve = Serve.start(
        ["--forward", sink.url, "--evaluators", "evidence,loops", "--quiet-period", "0.2"],
        env={"TRACEHOUND_METRICS": "false"},
    )
    accepted: set[bytes] = set()
    lock = threading.Lock()
    refused = [0]
    stop = threading.Event()

    def send() -> None:
        with grpc.insecure_channel(serve.grpc) as channel:
            call = channel.unary_unary(TRACES)
            while not stop.is_set():
                genai = fixture_request("pydantic_ai_v6")
                for rs in genai.resource_spans:  # fresh ids: every request a new trace
                    trace_id = os.urandom(16)
                    for ss in rs.scope_spans:
                        for span in ss.spans:
                            span.trace_id, span.span_id = trace_id, os.urandom(8)
                            span.parent_span_id = b""
                for request in (genai, request_of(20, 50)):
                    try:
                        call(request.SerializeToString(), timeout=5)
                    except grpc.RpcError:
                        with lock:
                            refused[0] += 1
                        if serve.process.poll() is not None:
                            return
                        continue
                    with lock:
                        accepted.update(span_ids(request))

    senders = [threading.Thread(target=send, daemon=True) for _ in range(3)]
    for thread in senders:
        thread.start()
    time.sleep(1.5)
    assert accepted, "nothing was accepted before SIGTERM"
    started = time.monotonic()
    code = serve.stop()  # SIGTERM while the senders keep sending
    stop.set()
    for thread in senders:
        thread.join(10)
    assert code == 0
    assert time.monotonic() - started < 25
    assert refused[0] > 0  # the senders were still sending while it shut down
    stopped = serve.stopped_record()
    assert stopped["clean"] is True
    assert stopped["dropped"]["traces"] == 0
    assert stopped["spans_accepted"] == len(accepted)  # a refusal never counted as accepted
    assert accepted <= forwarded(sink)  # nothing accepted is lost


def test_downstream_down_past_the_retry_limit_drops_are_counted(sink: OTLPSink) -> None:
    sink.refuse_with(grpc.StatusCode.UNAVAILABLE)
    serve = Serve.start(
        ["--forward", sink.url, "--max-queue-bytes", "32KiB", "--evaluators", "loops"],
        env={**FAST_RETRIES, "TRACEHOUND_FORWARD_RETRY_MAX_ELAPSED": "1"},
    )
    accepted: set[bytes] = set()
    refusals: list[grpc.StatusCode] = []
    try:
        with grpc.insecure_channel(serve.grpc) as channel:
            call = channel.unary_unary(TRACES)
            deadline = time.monotonic() + 4  # past the 1 s retry limit: the queue drains by drops
            while time.monotonic() < deadline:
                request = request_of(10, 200)
                try:
                    call(request.SerializeToString(), timeout=5)
                    accepted |= span_ids(request)
                except grpc.RpcError as error:
                    refusals.append(error.code())
                    time.sleep(0.05)
            assert refusals, "the full queue never pushed back"
            assert set(refusals) == {grpc.StatusCode.UNAVAILABLE}  # retryable, never another
            sink.refuse_with(None)  # back
            later = request_of(5, 10)
            deadline = time.monotonic() + 10
            while True:
                try:
                    call(later.SerializeToString(), timeout=5)
                    break
                except grpc.RpcError:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
            accepted |= span_ids(later)
            assert sink.wait_for(lambda: span_ids(later) <= forwarded(sink), 10)
    finally:
        assert serve.stop() == 0
    stopped = serve.stopped_record()
    dropped = stopped["dropped"]["traces"]
    assert dropped > 0
    # Everything accepted is forwarded or counted as dropped, nothing else.
    assert len(accepted) == len(forwarded(sink) & accepted) + dropped


HANGING_PLUGIN = """\
import threading
from tracehound import Evaluator

class Hangs(Evaluator):
    name = "hangs"
    version = "0.1"

    def on_span(self, state, span, steps, trace):
        threading.Event().wait(3600)  # never returns
        return ()
"""


def test_a_hanging_plugin_does_not_stop_the_sidecar(sink: OTLPSink, tmp_path: Path) -> None:
    (tmp_path / "hangplugin.py").write_text(HANGING_PLUGIN)
    dist = tmp_path / "hangplugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hangplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[tracehound.evaluators]\nhangs = hangplugin:Hangs\n")
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    serve = Serve.start(
        ["--forward", sink.url, "--evaluators", "loops,hangs", "--quiet-period", "0.2"],
        env={"PYTHONPATH": path, "TRACEHOUND_METRICS": "false"},
    )
    try:
        with grpc.insecure_channel(serve.grpc) as channel:
            call = channel.unary_unary(TRACES)
            first = fixture_request("pydantic_ai_v6")
            call(first.SerializeToString(), timeout=5)
            # One budget (5 s) for the first call, then the plugin is disabled.
            assert sink.wait_for(lambda: span_ids(first) <= forwarded(sink), 20)
            second = fixture_request("pydantic_ai_v5")
            started = time.monotonic()
            call(second.SerializeToString(), timeout=5)
            assert sink.wait_for(lambda: span_ids(second) <= forwarded(sink), 5)
            assert time.monotonic() - started < 4
        assert any("hangs" in str(r.get("message", "")) for r in serve.records)
    finally:
        started = time.monotonic()
        assert serve.stop() == 0  # the stuck plugin thread does not hold the exit
        assert time.monotonic() - started < 15
    errors = [r for r in sink.evaluation_events() if "EvaluatorTimeout" in str(r.attributes)]
    assert errors, "the plugin's timeout is an evaluation error result"


def fresh_agent_run() -> ExportTraceServiceRequest:
    """The pydantic-ai capture (one `invoke_agent` run) under new trace and span ids."""
    request = fixture_request("pydantic_ai_v6")
    trace_id = os.urandom(16)
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    new_ids = {span.span_id: os.urandom(8) for span in spans}
    for span in spans:
        span.trace_id, span.span_id = trace_id, new_ids[span.span_id]
        span.parent_span_id = new_ids.get(span.parent_span_id, b"")
    return request


def drift_outcome(sink: OTLPSink, request: ExportTraceServiceRequest) -> dict[str, Any] | None:
    """The run's forwarded `tracehound.drift.*` attributes and its drift result record (None
    until every span of the run and that record have arrived)."""
    ids = span_ids(request)
    trace_id = request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
    spans = [s for s in sink.spans() if bytes(s.span.span_id) in ids]
    events = [
        e
        for e in sink.evaluation_events()
        if e.trace_id == trace_id and e.attributes[names.ATTR_EVALUATION_NAME] == names.EVAL_DRIFT
    ]
    if len(spans) < len(ids) or not events:
        return None
    (agent,) = [s for s in spans if names.ATTR_DRIFT_AGENT in s.attributes]
    (event,) = events
    return {"span": agent.attributes, "event": event.attributes}


def drift_errors_counted(sink: OTLPSink) -> float:
    """The latest cumulative `tracehound.evaluation.errors` of drift's `BaselineStoreError`s."""
    latest = 0.0
    for request in sink.metric_requests:
        for rm in request.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name != names.METRIC_EVALUATION_ERRORS:
                        continue
                    for point in metric.sum.data_points:
                        attrs = attributes(point.attributes)
                        if attrs.get(names.ATTR_EVALUATOR_NAME) == "drift" and (
                            attrs.get(names.ATTR_ERROR_TYPE) == "BaselineStoreError"
                        ):
                            latest = max(latest, point.as_double or float(point.as_int))
    return latest


HUNG_TIMEOUT = 2.0
"""The store's socket timeouts (URL parameters) in the hung-server case."""


@pytest.mark.parametrize("fault", ["stopped", "hung"])
def test_redis_down_and_back(sink: OTLPSink, fault: str) -> None:
    """Redis goes away under a running sidecar and comes back: `stopped` terminates the server
    and starts a new (empty) one on the same port, `hung` freezes it (SIGSTOP: connections are
    accepted, nothing answers) and thaws it. Spans keep flowing, each run while it is away gets a
    drift error result, and scoring resumes without a restart of the sidecar."""
    # a missing server fails (as tests/redis_helpers.py does): CI installs it, a skip would hide it
    assert shutil.which("redis-server"), "needs redis-server on PATH (apt-get install redis-server)"
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    # a frozen server costs one socket timeout per attempt: keep it short, so a retried timeout
    # (three of them) would show
    slowest_allowed = DEFAULT_TIMEOUT
    if fault == "hung":
        url += f"?socket_timeout={HUNG_TIMEOUT:g}&socket_connect_timeout={HUNG_TIMEOUT:g}"
        slowest_allowed = 2 * HUNG_TIMEOUT
    with ExitStack() as stack:
        redis = stack.enter_context(redis_server(port=port))  # this test's own Redis
        args = ["--forward", sink.url, "--evaluators", "drift", "--quiet-period", "0.2"]
        serve = Serve.start(
            [*args, "--baselines", url],
            env={"OTEL_METRIC_EXPORT_INTERVAL": "300"},
        )
        exporter = GrpcSpans(endpoint=serve.grpc, insecure=True, timeout=10)
        outcomes: list[dict[str, Any]] = []

        def run_once(timeout: float = 15) -> dict[str, Any]:
            request = fresh_agent_run()
            started = time.monotonic()
            assert exporter.export(readable_spans_from_request(request)) is SpanExportResult.SUCCESS
            assert sink.wait_for(lambda: drift_outcome(sink, request) is not None, timeout)
            outcome = drift_outcome(sink, request)
            assert outcome is not None
            outcome["seconds"] = time.monotonic() - started  # export to forwarded result
            outcomes.append(outcome)
            assert readyz(serve) == 200
            return outcome

        def scored(outcome: dict[str, Any]) -> bool:
            return names.ATTR_DRIFT_BASELINE_RUNS in outcome["span"]

        def runs(outcome: dict[str, Any]) -> int:
            return int(outcome["span"][names.ATTR_DRIFT_BASELINE_RUNS])

        try:
            assert [runs(run_once()) for _ in range(3)] == [0, 1, 2]
            if fault == "stopped":
                stack.close()  # SIGTERM to redis-server; it is gone once `close` returns
            else:
                redis.send_signal(signal.SIGSTOP)
            down = [run_once() for _ in range(4)]
            for outcome in down:  # an error result per run: not a crash, not a silent pass
                assert not scored(outcome)
                assert outcome["event"][names.ATTR_ERROR_TYPE] == "BaselineStoreError"
                assert (
                    "cannot reach the server" in outcome["event"][names.ATTR_EVALUATION_EXPLANATION]
                )
                assert names.ATTR_EVALUATION_SCORE_VALUE not in outcome["event"]
                # no run waits for more than one connect or read timeout
                assert outcome["seconds"] < slowest_allowed
            if fault == "stopped":
                stack.enter_context(redis_server(port=port))  # back, empty (no persistence)
                first_back = 0
            else:
                redis.send_signal(signal.SIGCONT)  # back, with what it had
                first_back = 3
            back = time.monotonic()
            errors_after_back = 0
            while not scored(outcome := run_once()):
                errors_after_back += 1
                # calls fail at once for the outage backoff after the last failed attempt
                assert time.monotonic() - back < DEFAULT_OUTAGE_BACKOFF + 10, (
                    "drift never came back"
                )
                time.sleep(0.2)
            recovered = time.monotonic() - back
            # Learning resumes: the baseline grows again from the first scored run.
            assert [runs(outcome), runs(run_once()), runs(run_once())] == [
                first_back + i for i in range(3)
            ]
            errors = sum(1 for o in outcomes if o["event"].get(names.ATTR_ERROR_TYPE))
            assert errors == len(down) + errors_after_back
            assert sink.wait_for(lambda: drift_errors_counted(sink) == errors, 10)
            slowest = max(o["seconds"] for o in down)
            print(
                f"\nredis {fault}: {len(down)} error results while away (slowest run "
                f"{slowest:.2f} s from export to forwarded), {errors_after_back} more after it "
                f"came back, scoring back {recovered:.2f} s after it"
            )
        finally:
            exporter.shutdown()
            code = serve.stop()
    assert code == 0, serve.text
    stopped = serve.stopped_record()
    assert stopped["clean"] is True
    assert stopped["dropped"]["traces"] == 0
