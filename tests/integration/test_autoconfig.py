"""Zero-code start: `opentelemetry-instrument python app.py` with tracehound's SDK configurator.

The app (written below, run in a subprocess) has no OpenTelemetry and no tracehound code: a
pydantic-ai agent (FunctionModel, no network) that calls the same tool three times. Only
environment variables select the configurator, the OTLP exporters (pointed at an
`OTLPSink` on 127.0.0.1) and tracehound's mode. At exit the configurator's handler evaluates the
last trace before the logger provider shuts down, so everything reaches the sink.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import child_environ
from tracehound.testing import OTLPSink

pytestmark = [pytest.mark.integration]

APP = """
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel


def model(messages, info):
    done = sum(isinstance(p, ToolReturnPart) for m in messages for p in getattr(m, "parts", ()))
    if done < 3:
        call = ToolCallPart("check_status", {"job": "build-42"}, tool_call_id=f"call_{done}")
        return ModelResponse(parts=[call])
    return ModelResponse(parts=[TextPart("The build is still pending.")])


def check_status(job: str) -> str:
    return f"{job} is pending: 3 runners busy, queue position 2."


Agent.instrument_all()  # pydantic-ai's own switch; it uses the global OTel providers
agent = Agent(
    FunctionModel(model, model_name="scripted"),
    name="zero_code_agent",
    tools=[Tool(check_status, takes_ctx=False)],
)
print(agent.run_sync("Is build-42 done?").output)
"""

INSTRUMENT = Path(sys.executable).with_name("opentelemetry-instrument")


@pytest.fixture
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


def run_app(tmp_path: Path, sink: OTLPSink, **extra: str) -> subprocess.CompletedProcess[str]:
    app = tmp_path / "app.py"
    app.write_text(APP)
    env = child_environ()
    env.update(
        OTEL_PYTHON_CONFIGURATOR="tracehound",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_LOGS_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT=sink.url,
        OTEL_EXPORTER_OTLP_INSECURE="true",
        OTEL_EXPORTER_OTLP_TIMEOUT="5",
        OTEL_SERVICE_NAME="zero-code-app",
        # two installed instrumentations both patch `openai`; the app does not use it
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="openai",
        TRACEHOUND_QUIET_PERIOD="0.2",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    env.update(extra)
    return subprocess.run(
        [str(INSTRUMENT), sys.executable, str(app)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_wrap_mode_without_code_changes(tmp_path: Path, sink: OTLPSink) -> None:
    result = run_app(tmp_path, sink)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "The build is still pending."
    assert sink.wait_for(lambda: sink.spans() and sink.evaluation_events(), timeout=10)
    root = sink.span_named("invoke_agent zero_code_agent")
    assert root.attributes["tracehound.loops.detected"] is True
    assert "repeat" in root.attributes["tracehound.loops.kinds"]
    service = root.resource.attributes
    assert any(
        kv.key == "service.name" and kv.value.string_value == "zero-code-app" for kv in service
    )
    events = sink.evaluation_events()
    assert {e.attributes["gen_ai.evaluation.name"] for e in events} >= {"tracehound.loops"}
    assert all(e.trace_id == root.trace_id for e in events)
    assert sink.wait_for(lambda: "tracehound.loops" in sink.metric_names(), timeout=10)


def test_observe_mode_leaves_exported_spans_unchanged(tmp_path: Path, sink: OTLPSink) -> None:
    result = run_app(tmp_path, sink, TRACEHOUND_MODE="observe")
    assert result.returncode == 0, result.stderr
    assert sink.wait_for(lambda: sink.spans() and sink.evaluation_events(), timeout=10)
    assert not any(k.startswith("tracehound.") for s in sink.spans() for k in s.attributes)
    assert {e.attributes["gen_ai.evaluation.name"] for e in sink.evaluation_events()} >= {
        "tracehound.loops"
    }


def test_disabled_gives_the_plain_sdk(tmp_path: Path, sink: OTLPSink) -> None:
    result = run_app(tmp_path, sink, TRACEHOUND_ENABLED="false")
    assert result.returncode == 0, result.stderr
    assert sink.wait_for(lambda: len(sink.spans()) >= 7, timeout=10)
    assert not any(k.startswith("tracehound.") for s in sink.spans() for k in s.attributes)
    assert sink.evaluation_events() == []


def test_bad_tracehound_setting_is_reported_at_start(tmp_path: Path, sink: OTLPSink) -> None:
    """opentelemetry-instrument logs a configurator failure and runs the app uninstrumented."""
    result = run_app(tmp_path, sink, TRACEHOUND_MODE="observer")
    assert "TRACEHOUND_MODE='observer': expected one of wrap, observe" in result.stderr
    assert sink.spans() == []
