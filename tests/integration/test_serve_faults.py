"""Faults around a running `tracehound serve` (fast variants; docs/reliability.md has the long
ones): SIGTERM while senders keep sending, a downstream down for longer than the retry limit,
and an evaluator plugin that hangs. Each runs the real process."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from _serve import Serve
from test_serve_backpressure import FAST_RETRIES, TRACES, request_of, span_ids

from helpers import fixture_request
from tracehound.testing import OTLPSink

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
