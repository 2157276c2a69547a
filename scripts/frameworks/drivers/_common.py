"""What every framework driver shares. Runs inside a framework's venv: OTel SDK + stdlib only.

- `guard_network()`: refuse any socket connection that is not to loopback;
- `quiet_env()`: switch off the frameworks' telemetry phone-home;
- `Capture`: a TracerProvider (+ LoggerProvider) with in-memory exporters behind simple
  processors, so spans are kept in the order the SDK exports them (children first);
- `write_otlp_json()`: one OTLP/JSON ExportTraceServiceRequest line in the collector
  file-exporter shape (lowerCamelCase, hex ids, int64 as strings, integer enums);
- the scenario tools as plain Python functions that record what they really received/returned;
- `DriverArgs` / `finish()`: the command line shared by all drivers and the results file that
  `capture.py` turns into the manifest.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent))  # fake_llm, scenarios

from scenarios import SCENARIOS, Scenario, ToolFailure, tool_error, tool_result  # noqa: E402

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


class NetworkRefused(OSError):
    pass


def guard_network() -> None:
    """Monkeypatch socket connects: loopback and unix sockets only."""
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0] if isinstance(address, tuple) else str(address)
            if host not in _LOOPBACK:
                raise NetworkRefused(f"capture driver refused a connection to {address!r}")

    def connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        original_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return original_connect_ex(sock, address)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]


QUIET_ENV = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING": "false",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "LITELLM_TELEMETRY": "False",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "DO_NOT_TRACK": "1",
    "ANONYMIZED_TELEMETRY": "false",
    "TRACELOOP_TELEMETRY": "false",
    "AUTOGEN_DISABLE_RUNTIME_TRACING": "false",
    "OPENAI_AGENTS_DISABLE_TRACING": "0",
    "POSTHOG_DISABLED": "1",
    "SCARF_NO_ANALYTICS": "true",
    "TOKENIZERS_PARALLELISM": "false",
}


def quiet_env() -> None:
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    # the OTel SDK must stay on: a disabled SDK gives no-op spans
    os.environ.pop("OTEL_SDK_DISABLED", None)
    os.environ.setdefault("OPENAI_API_KEY", "sk-fake-capture-key")


# --- OTel capture ----------------------------------------------------------------------------


class Capture:
    """In-memory span (and log) capture; `take()` returns and clears what was exported."""

    def __init__(self, service_name: str, with_logs: bool = False) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        # a fixed resource: no host names or process ids in the committed captures
        self.resource = Resource(
            {
                "service.name": service_name,
                "telemetry.sdk.language": "python",
                "telemetry.sdk.name": "opentelemetry",
                "telemetry.sdk.version": metadata.version("opentelemetry-sdk"),
            }
        )
        self.span_exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(resource=self.resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.span_exporter))
        self.logger_provider: Any = None
        self.log_exporter: Any = None
        if with_logs:
            self._setup_logs()

    def _setup_logs(self) -> None:
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

        try:
            from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter as MemoryLogs
        except ImportError:  # older SDK name
            from opentelemetry.sdk._logs.export import (  # type: ignore[attr-defined,no-redef]
                InMemoryLogExporter as MemoryLogs,
            )
        self.log_exporter = MemoryLogs()
        self.logger_provider = LoggerProvider(resource=self.resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.log_exporter))

    def install_global(self) -> None:
        from opentelemetry import trace

        trace.set_tracer_provider(self.tracer_provider)
        if self.logger_provider is not None:
            from opentelemetry import _logs

            _logs.set_logger_provider(self.logger_provider)

    def take(self) -> tuple[list[Any], list[Any]]:
        self.tracer_provider.force_flush()
        spans = list(self.span_exporter.get_finished_spans())
        self.span_exporter.clear()
        logs: list[Any] = []
        if self.log_exporter is not None:
            self.logger_provider.force_flush()
            logs = list(self.log_exporter.get_finished_logs())
            self.log_exporter.clear()
        return spans, logs


_ID_KEYS = {"traceId", "spanId", "parentSpanId"}


def _hex_ids(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {
            k: (base64.b64decode(v).hex() if k in _ID_KEYS and isinstance(v, str) else _hex_ids(v))
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_hex_ids(x) for x in obj]
    return obj


def _to_json_line(message: Any) -> str:
    from google.protobuf.json_format import MessageToDict

    as_dict = _hex_ids(MessageToDict(message, use_integers_for_enums=True))
    return json.dumps(as_dict, separators=(",", ":"), ensure_ascii=False) + "\n"


def write_otlp_json(
    out_dir: Path, stem: str, spans: Sequence[Any], logs: Sequence[Any]
) -> list[str]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    trace_file = out_dir / f"{stem}.otlp.json"
    trace_file.write_text(_to_json_line(encode_spans(list(spans))), encoding="utf-8")
    written.append(trace_file.name)
    if logs:
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

        log_file = out_dir / f"{stem}.logs.otlp.json"
        log_file.write_text(_to_json_line(encode_logs(list(logs))), encoding="utf-8")
        written.append(log_file.name)
    return written


# --- the scenario tools ----------------------------------------------------------------------


@dataclass
class ToolLog:
    """What the real tool functions received and returned, in start order."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # what a failing tool raises; a driver may set its framework's own tool exception
    error_type: type[Exception] = ToolFailure

    def start(self, name: str, arguments: dict[str, Any], kind: str = "function") -> int:
        with self.lock:
            self.calls.append({"name": name, "arguments": arguments, "result": None, "kind": kind})
            return len(self.calls) - 1

    def finish(self, index: int, result: Any) -> Any:
        with self.lock:
            self.calls[index]["result"] = result
        return result

    def call(self, name: str, **arguments: Any) -> Any:
        index = self.start(name, arguments)
        error = tool_error(name, **arguments)
        if error is not None:
            with self.lock:
                self.calls[index].update(result=error, error=True)
            raise self.error_type(error)
        return self.finish(index, tool_result(name, **arguments))

    def take(self) -> list[dict[str, Any]]:
        with self.lock:
            calls, self.calls = self.calls, []
        return calls


TOOL_LOG = ToolLog()


def get_order_status(order_id: str) -> str:
    """Look up the current status of a customer order.

    Args:
        order_id: The order identifier, for example A-1042.
    """
    return TOOL_LOG.call("get_order_status", order_id=order_id)


def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, for example Oslo.
    """
    return TOOL_LOG.call("get_weather", city=city)


def get_exchange_rate(base: str, quote: str) -> str:
    """Get the exchange rate between two currencies.

    Args:
        base: The currency to convert from, for example NOK.
        quote: The currency to convert to, for example EUR.
    """
    return TOOL_LOG.call("get_exchange_rate", base=base, quote=quote)


def lookup_fact(topic: str) -> str:
    """Look up a fact about a topic in the research database.

    Args:
        topic: The topic to look up, for example aurora.
    """
    return TOOL_LOG.call("lookup_fact", topic=topic)


def find_flights(origin: str, max_stops: int, carriers: list[str]) -> str:
    """Find the cheapest flight from an airport.

    Args:
        origin: The departure city, for example Bodø.
        max_stops: The largest number of stops allowed.
        carriers: The airline codes allowed, for example ["WF", "SK"].
    """
    return str(TOOL_LOG.call("find_flights", origin=origin, max_stops=max_stops, carriers=carriers))


def get_hotel_quote(city: str, nights: int, guests: dict) -> str:  # type: ignore[type-arg]
    """Get a hotel price quote.

    Args:
        city: The city, for example Tromsø.
        nights: The number of nights.
        guests: The guests, as an object {"adults": int, "children": int}.
    """
    return str(TOOL_LOG.call("get_hotel_quote", city=city, nights=nights, guests=guests))


def get_invoice(invoice_id: str) -> str:
    """Fetch an invoice by its id.

    Args:
        invoice_id: The invoice id, upper case, for example INV-77.
    """
    return str(TOOL_LOG.call("get_invoice", invoice_id=invoice_id))


def get_account(account_id: str) -> dict:  # type: ignore[type-arg]
    """Fetch a customer account record.

    Args:
        account_id: The account id, for example AC-5521.
    """
    result: dict[str, Any] = TOOL_LOG.call("get_account", account_id=account_id)
    return result


def get_server_time() -> str:
    """Get the booking server's current time and region (takes no arguments)."""
    return str(TOOL_LOG.call("get_server_time"))


TOOL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    f.__name__: f
    for f in (
        get_order_status,
        get_weather,
        get_exchange_rate,
        lookup_fact,
        find_flights,
        get_hotel_quote,
        get_invoice,
        get_account,
        get_server_time,
    )
}
# tools whose argument schema is not a closed object (a free-form `dict` argument)
OPEN_SCHEMA_TOOLS = frozenset({"get_hotel_quote"})


def tools_for(scenario: Scenario, agent_name: str | None = None) -> list[Callable[..., Any]]:
    agent = scenario.agent(agent_name) if agent_name else scenario.main
    return [TOOL_FUNCTIONS[name] for name in agent.tools]


# --- driver command line and results ---------------------------------------------------------


@dataclass
class DriverArgs:
    out_dir: Path
    results: Path
    stem: str  # e.g. "strands_latest"; files are <stem>_<scenario>.otlp.json
    scenarios: list[Scenario]


def parse_args(supported: Sequence[str]) -> DriverArgs:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--stem", required=True)
    parser.add_argument("--scenarios", default=",".join(supported))
    ns = parser.parse_args()
    names = [n for n in ns.scenarios.split(",") if n]
    unknown = [n for n in names if n not in supported]
    if unknown:
        parser.error(f"unsupported scenarios {unknown}; this driver has {list(supported)}")
    return DriverArgs(ns.out_dir, ns.results, ns.stem, [SCENARIOS[n] for n in names])


def installed_versions() -> dict[str, str]:
    """Every distribution installed in this venv, name -> version."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found[name.lower()] = dist.version
    return dict(sorted(found.items()))


@dataclass
class Result:
    scenario: str
    files: list[str]
    tool_calls: list[dict[str, Any]]
    final_answer: str
    extra: dict[str, Any] = field(default_factory=dict)


def finish(args: DriverArgs, results: list[Result]) -> None:
    payload = {
        "versions": installed_versions(),
        "semconv_opt_in": os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN"),
        "captures": [r.__dict__ for r in results],
    }
    args.results.write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")


def run_scenarios(
    args: DriverArgs,
    capture: Capture,
    run_one: Callable[[Scenario, str], tuple[str, dict[str, Any]]],
) -> None:
    """For each scenario: start the fake model, run it, write its capture, record the truth.

    `run_one(scenario, base_url)` returns (the final answer the framework gave, extras).
    """
    from fake_llm import FakeLLM

    results = []
    for scenario in args.scenarios:
        capture.take()
        TOOL_LOG.take()
        scripts = scenario.scripts()
        with FakeLLM(scripts[0], *scripts[1:], deadline_s=240) as llm:
            final, extra = run_one(scenario, llm.base_url)
        extra.setdefault("model_requests", len(llm.requests))
        for turn in scenario.main.script.turns:  # how this framework calls a sub-agent tool
            for call in turn.tool_calls:
                if call.name in scenario.main.sub_agents:
                    extra["agent_call_arguments"] = call.arguments
        spans, logs = capture.take()
        files = write_otlp_json(args.out_dir, f"{args.stem}_{scenario.name}", spans, logs)
        results.append(Result(scenario.name, files, TOOL_LOG.take(), str(final), extra))
        print(
            f"{args.stem}_{scenario.name}: {len(spans)} spans, {len(logs)} log records, "
            f"{len(llm.requests)} model requests",
            flush=True,
        )
    finish(args, results)
