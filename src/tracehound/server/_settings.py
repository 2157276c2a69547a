"""`tracehound serve` settings: one precedence, written down once.

    command-line flags  >  environment variables  >  TOML file (`[serve]` table)  >  defaults

Every setting has a flag, a `TRACEHOUND_*` variable (or the standard `OTEL_EXPORTER_OTLP_*` one for
the forwarder, read as the OTel SDK exporters read them) and a TOML key; `SETTINGS` is the table,
and `ServeSettings.resolve` applies it. Unlike the in-process processor (which logs a bad
environment value and falls back, as the OTel SDK does), the sidecar is a program started on
purpose: any value that does not parse or is not allowed fails at start-up with `ConfigError`
naming where it came from. `--check-config` prints the resolved settings with their sources.

The forwarder is configured like the OTel SDK exporters: `OTEL_EXPORTER_OTLP_ENDPOINT` (the
default target when set), `…_PROTOCOL`, `…_HEADERS`, `…_COMPRESSION`, `…_TIMEOUT` (seconds, as
the Python SDK reads it), `…_INSECURE`, `…_CERTIFICATE`, `…_CLIENT_KEY`, `…_CLIENT_CERTIFICATE`,
each also per signal (`OTEL_EXPORTER_OTLP_TRACES_*`, `…_LOGS_*`, `…_METRICS_*`), which wins.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from opentelemetry.util.re import parse_env_headers

from tracehound.config import TRACEHOUND_CONFIG, ConfigError
from tracehound.engine import EngineConfig
from tracehound.history import HistorySettings, Retention

__all__ = [
    "SETTINGS",
    "TRACEHOUND_CONFIG",
    "TRACEHOUND_FORWARD",
    "TRACEHOUND_OTLP_GRPC",
    "TRACEHOUND_OTLP_HTTP",
    "TRACEHOUND_PROMETHEUS",
    "TRACEHOUND_RECEIVER_TOKEN",
    "TRACEHOUND_REDIS_URL",
    "TRACEHOUND_TLS_CERT",
    "TRACEHOUND_TLS_KEY",
    "Address",
    "ForwardTarget",
    "ServeSettings",
    "SettingSpec",
    "SignalTarget",
]

Mode = Literal["stream", "hold"]
Protocol = Literal["grpc", "http/protobuf", "http/json"]

# --- environment variables (TRACEHOUND_* beyond those of `tracehound.config`) --------------------

TRACEHOUND_OTLP_GRPC = "TRACEHOUND_OTLP_GRPC"
"""`HOST:PORT` of the OTLP/gRPC receiver (`none` disables it). Default `localhost:4317`."""
TRACEHOUND_OTLP_HTTP = "TRACEHOUND_OTLP_HTTP"
"""`HOST:PORT` of the OTLP/HTTP receiver and `/healthz` `/readyz` (`none` disables it).
Default `localhost:4318`."""
TRACEHOUND_FORWARD = "TRACEHOUND_FORWARD"
"""Where enriched telemetry goes: an OTLP URL, `none`, or `file:PATH` (OTLP/JSON lines: traces
and logs in PATH, metrics beside it in PATH-stem`.metrics`.suffix). Default:
`OTEL_EXPORTER_OTLP_ENDPOINT` when set, else `none`."""
TRACEHOUND_PROMETHEUS = "TRACEHOUND_PROMETHEUS"
"""`HOST:PORT` serving self-metrics at `/metrics` (Prometheus text format). Default: off."""
TRACEHOUND_REDIS_URL = "TRACEHOUND_REDIS_URL"
"""A `redis://`, `rediss://` or `unix://` URL: the baselines shared by replicas, used when
`--baselines` and `TRACEHOUND_BASELINES` are not given (it beats the TOML `baselines`)."""
TRACEHOUND_MAX_REQUEST_BYTES = "TRACEHOUND_MAX_REQUEST_BYTES"
"""Largest accepted request, after decompression (413 / RESOURCE_EXHAUSTED). Default 16 MiB."""
TRACEHOUND_MAX_QUEUE_BYTES = "TRACEHOUND_MAX_QUEUE_BYTES"
"""Bytes accepted but not yet forwarded, per signal, before the receivers push back (503 /
UNAVAILABLE). Default 64 MiB."""
TRACEHOUND_TLS_CERT = "TRACEHOUND_TLS_CERT"
"""PEM certificate (chain) served by both OTLP receivers; with `TRACEHOUND_TLS_KEY`. Default: off
(plaintext)."""
TRACEHOUND_TLS_KEY = "TRACEHOUND_TLS_KEY"
"""PEM private key of `TRACEHOUND_TLS_CERT`."""
TRACEHOUND_RECEIVER_TOKEN = "TRACEHOUND_RECEIVER_TOKEN"
"""When set, both OTLP receivers accept exports only with `Authorization: Bearer <token>` (HTTP
header, gRPC metadata): 401 / UNAUTHENTICATED otherwise. Health endpoints stay open. No flag (a
flag would show in the process list). Default: off."""
TRACEHOUND_SHUTDOWN_TIMEOUT = "TRACEHOUND_SHUTDOWN_TIMEOUT"
"""Seconds allowed, on SIGTERM, to finalize and forward what is buffered. Default 20."""
TRACEHOUND_FORWARD_RETRY_INITIAL = "TRACEHOUND_FORWARD_RETRY_INITIAL"
"""Seconds before the first retry of a failed forward (doubled each time). Default 1."""
TRACEHOUND_FORWARD_RETRY_MAX_INTERVAL = "TRACEHOUND_FORWARD_RETRY_MAX_INTERVAL"
"""Longest wait between two retries of one forward. Default 30."""
TRACEHOUND_FORWARD_RETRY_MAX_ELAPSED = "TRACEHOUND_FORWARD_RETRY_MAX_ELAPSED"
"""Seconds after which a forward that keeps failing is dropped (counted). Default 300."""
TRACEHOUND_LOG_FORMAT = "TRACEHOUND_LOG_FORMAT"
"""`json` (default: one JSON object per line on stderr) or `text`."""
TRACEHOUND_LOG_LEVEL = "TRACEHOUND_LOG_LEVEL"
"""`debug`, `info` (default), `warning` or `error`."""

_SIGNALS = ("traces", "logs", "metrics")

# --- value parsers -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str) -> Address | None:
    """`HOST:PORT` (`[::1]:PORT` for IPv6) → Address; `none`/`off` → None."""
    text = text.strip()
    if text.lower() in ("none", "off", ""):
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{text!r} is not HOST:PORT")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"{text!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"{text!r}: port out of range")
    return Address(host, number)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{value!r} is not a boolean (true/false)")


def _positive_float(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number < 0:
        raise ValueError(f"expected a number of seconds >= 0, got {value!r}")
    return number


def _positive_int(value: Any) -> int:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
    if number is None or number < 1:
        raise ValueError(f"expected a whole number >= 1, got {value!r}")
    return number


_SIZE_UNITS = (("kib", 1024), ("mib", 1024**2), ("gib", 1024**3), ("b", 1))


def _size(value: Any) -> int:
    """Bytes, with an optional KiB/MiB/GiB suffix (`16MiB`)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    text = str(value).strip().lower()
    factor = 1
    for suffix, unit in _SIZE_UNITS:
        if text.endswith(suffix):
            text, factor = text[: -len(suffix)].strip(), unit
            break
    try:
        number = float(text) * factor if text.replace(".", "", 1).isdigit() else math.nan
    except ValueError:
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number < 1:
        raise ValueError(f"expected a size like 4MiB, got {value!r}")
    return int(number)


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise ValueError(f"{value!r}: expected one of {', '.join(choices)}")
        return text

    return parse


def _evaluators(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    names = tuple(str(n).strip() for n in items if str(n).strip())
    if not names:
        raise ValueError("no evaluator named")
    return names


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a string")
    return value


def _duration(value: Any) -> float:
    """Seconds of a duration (`30d`, `12h`, `90m`, `45s`) or of a number of seconds."""
    from tracehound.history import parse_duration

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip()
        seconds = float(text) if text.replace(".", "", 1).isdigit() else parse_duration(text)
    if isinstance(value, bool) or not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"expected a duration like 30d or 12h, got {value!r}")
    return seconds


# --- the table ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SettingSpec:
    """One setting: its flag, environment variable, TOML key, parser and default."""

    name: str
    flag: str | None
    env: str | None
    parse: Callable[[Any], Any]
    default: Any
    help: str
    fallback_env: tuple[str, ...] = ()
    """Variables read, in order, when `env` is not set (still above the TOML file)."""


def _spec(
    name: str,
    env: str | None,
    parse: Callable[[Any], Any],
    default: Any,
    help: str,
    *,
    flag: bool = True,
    fallback_env: tuple[str, ...] = (),
) -> SettingSpec:
    return SettingSpec(
        name,
        "--" + name.replace("_", "-") if flag else None,
        env,
        parse,
        default,
        help,
        fallback_env,
    )


def _env_name(spec: SettingSpec, env: Mapping[str, str]) -> str | None:
    """The first of the setting's variables that is set (non-blank), if any."""
    for name in (spec.env, *spec.fallback_env):
        if name and env.get(name, "").strip():
            return name
    return None


SETTINGS: tuple[SettingSpec, ...] = (
    _spec(
        "otlp_grpc",
        TRACEHOUND_OTLP_GRPC,
        _text,
        "localhost:4317",
        "OTLP/gRPC listen address (or none)",
    ),
    _spec(
        "otlp_http",
        TRACEHOUND_OTLP_HTTP,
        _text,
        "localhost:4318",
        "OTLP/HTTP listen address, with /healthz and /readyz (or none)",
    ),
    _spec(
        "forward",
        TRACEHOUND_FORWARD,
        _text,
        None,
        "OTLP URL, none, or file:PATH; default $OTEL_EXPORTER_OTLP_ENDPOINT, else none",
    ),
    _spec(
        "forward_protocol",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        _choice("grpc", "http/protobuf", "http/json"),
        None,
        "grpc, http/protobuf or http/json; default: http/protobuf for a URL with a path or "
        "port 4318, else grpc",
    ),
    _spec(
        "baselines",
        "TRACEHOUND_BASELINES",
        _text,
        None,
        "drift baselines: a SQLite file, memory, or redis://… (shared by replicas); default: "
        f"${TRACEHOUND_REDIS_URL}, else a SQLite file in the user's state directory",
        fallback_env=(TRACEHOUND_REDIS_URL,),
    ),
    _spec(
        "history",
        "TRACEHOUND_HISTORY",
        _bool,
        True,
        "record each evaluated run in the baseline store's run history (tracehound runs)",
    ),
    _spec(
        "history_max_runs",
        "TRACEHOUND_HISTORY_MAX_RUNS",
        _positive_int,
        10_000,
        "run records kept at most, over all agents (the oldest go first)",
    ),
    _spec(
        "history_max_age",
        "TRACEHOUND_HISTORY_MAX_AGE",
        _duration,
        30 * 86400.0,
        "how long run records are kept (30d, 12h, or seconds)",
    ),
    _spec(
        "history_content",
        "TRACEHOUND_HISTORY_CONTENT",
        _bool,
        False,
        "also keep message content (final answer, text samples) in run records",
    ),
    _spec(
        "prometheus",
        TRACEHOUND_PROMETHEUS,
        _text,
        "none",
        "serve self-metrics at http://HOST:PORT/metrics (Prometheus text format)",
    ),
    _spec(
        "mode",
        "TRACEHOUND_FORWARDING",
        _choice("stream", "hold"),
        "stream",
        "stream: forward spans once evaluated, hold roots; hold: hold whole traces until finalized",
    ),
    _spec(
        "quiet_period",
        "TRACEHOUND_QUIET_PERIOD",
        _positive_float,
        2.0,
        "seconds after a trace's root ended before it is finalized",
    ),
    _spec(
        "trace_timeout",
        "TRACEHOUND_TRACE_TIMEOUT",
        _positive_float,
        30.0,
        "seconds of idleness before a trace is finalized anyway",
    ),
    _spec(
        "reorder_delay",
        "TRACEHOUND_REORDER_DELAY",
        _positive_float,
        1.0,
        "longest wait of a GenAI span that arrived before its parent for its ancestors before it "
        "is evaluated (and, in stream mode, forwarded) as it is; 0: evaluate on arrival",
    ),
    _spec(
        "max_traces",
        "TRACEHOUND_MAX_TRACES",
        _positive_int,
        10_000,
        "traces held at once; past it the oldest is finalized early",
    ),
    _spec(
        "max_spans_per_trace",
        "TRACEHOUND_MAX_SPANS_PER_TRACE",
        _positive_int,
        10_000,
        "spans evaluated per trace",
        flag=False,
    ),
    _spec(
        "max_text_bytes_per_trace",
        "TRACEHOUND_MAX_TEXT_BYTES_PER_TRACE",
        _size,
        16 * 1024**2,
        "text indexed per trace, in bytes",
        flag=False,
    ),
    _spec(
        "evaluators",
        "TRACEHOUND_EVALUATORS",
        _evaluators,
        None,
        "comma-separated evaluators; default: evidence, loops and drift",
    ),
    _spec(
        "redact",
        "TRACEHOUND_REDACT",
        _bool,
        False,
        "strip message content, tool arguments/results and documents from forwarded spans",
    ),
    _spec(
        "span_events",
        "TRACEHOUND_SPAN_EVENTS",
        _bool,
        False,
        "also add results as gen_ai.evaluation.result span events",
        flag=False,
    ),
    _spec(
        "events",
        "TRACEHOUND_EVENTS",
        _bool,
        True,
        "forward gen_ai.evaluation.result log records",
        flag=False,
    ),
    _spec(
        "metrics",
        "TRACEHOUND_METRICS",
        _bool,
        True,
        "forward tracehound's metrics over OTLP (every OTEL_METRIC_EXPORT_INTERVAL ms)",
        flag=False,
    ),
    _spec(
        "max_request_bytes",
        TRACEHOUND_MAX_REQUEST_BYTES,
        _size,
        16 * 1024**2,
        "largest request accepted, after decompression (KiB/MiB suffixes)",
    ),
    _spec(
        "max_queue_bytes",
        TRACEHOUND_MAX_QUEUE_BYTES,
        _size,
        64 * 1024**2,
        "bytes per signal accepted but not forwarded yet, before pushing back",
    ),
    _spec(
        "tls_cert",
        TRACEHOUND_TLS_CERT,
        _text,
        None,
        "PEM certificate for TLS on both OTLP receivers (with --tls-key); default: plaintext",
    ),
    _spec(
        "tls_key",
        TRACEHOUND_TLS_KEY,
        _text,
        None,
        "PEM private key of --tls-cert",
    ),
    _spec(
        "receiver_token",
        TRACEHOUND_RECEIVER_TOKEN,
        _text,
        None,
        "bearer token the OTLP receivers require (Authorization header / gRPC metadata)",
        flag=False,
    ),
    _spec(
        "shutdown_timeout",
        TRACEHOUND_SHUTDOWN_TIMEOUT,
        _positive_float,
        20.0,
        "seconds allowed on SIGTERM to finalize and forward what is buffered",
    ),
    _spec(
        "forward_retry_initial",
        TRACEHOUND_FORWARD_RETRY_INITIAL,
        _positive_float,
        1.0,
        "first retry delay of a failed forward",
        flag=False,
    ),
    _spec(
        "forward_retry_max_interval",
        TRACEHOUND_FORWARD_RETRY_MAX_INTERVAL,
        _positive_float,
        30.0,
        "longest retry delay",
        flag=False,
    ),
    _spec(
        "forward_retry_max_elapsed",
        TRACEHOUND_FORWARD_RETRY_MAX_ELAPSED,
        _positive_float,
        300.0,
        "give up (drop, counted) after retrying this long",
        flag=False,
    ),
    _spec(
        "log_format",
        TRACEHOUND_LOG_FORMAT,
        _choice("json", "text"),
        "json",
        "structured JSON lines (default) or text, on stderr",
    ),
    _spec(
        "log_level",
        TRACEHOUND_LOG_LEVEL,
        _choice("debug", "info", "warning", "error"),
        "info",
        "log level",
    ),
)
"""Every `tracehound serve` setting. TOML keys are the names, under `[serve]`; forwarder TLS,
headers, compression and timeout also have TOML keys (`forward_headers` (a table),
`forward_compression`, `forward_timeout`, `forward_insecure`, `forward_certificate`,
`forward_client_key`, `forward_client_certificate`) below their `OTEL_EXPORTER_OTLP_*` variables."""

_FORWARD_TOML_KEYS = (
    "forward_headers",
    "forward_compression",
    "forward_timeout",
    "forward_insecure",
    "forward_certificate",
    "forward_client_key",
    "forward_client_certificate",
)
_BY_NAME = {s.name: s for s in SETTINGS}
_ENGINE_SETTINGS = (
    "quiet_period",
    "trace_timeout",
    "reorder_delay",
    "max_traces",
    "max_spans_per_trace",
    "max_text_bytes_per_trace",
)


# --- forwarder target ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SignalTarget:
    """Where and how one signal is forwarded to an OTLP endpoint."""

    protocol: Protocol
    endpoint: str
    """gRPC: `host:port`; HTTP: the full URL (`…/v1/traces`)."""
    insecure: bool
    headers: tuple[tuple[str, str], ...] = ()
    compression: str = "none"
    timeout: float = 10.0
    certificate: str | None = None
    client_key: str | None = None
    client_certificate: str | None = None


@dataclass(frozen=True, slots=True)
class ForwardTarget:
    """`none`, a `file:` sink, or an OTLP endpoint per signal."""

    kind: Literal["none", "file", "otlp"]
    path: Path | None = None
    signals: Mapping[str, SignalTarget] = field(default_factory=dict)

    def describe(self) -> str:
        if self.kind == "none":
            return "none"
        if self.kind == "file":
            return f"file:{self.path}"
        return ", ".join(f"{s}={t.protocol} {t.endpoint}" for s, t in self.signals.items())


# --- resolution ---------------------------------------------------------------------------------


def load_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The `[serve]` table of a TOML file (a file without one gives {})."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    table = document.get("serve", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [serve] must be a table")
    unknown = sorted(set(table) - set(_BY_NAME) - set(_FORWARD_TOML_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown [serve] key(s): {', '.join(unknown)}")
    return table


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSettings:
    """Resolved settings of `tracehound serve` (see `SETTINGS`); `sources` says where each
    value came from (`flag`, `env NAME`, `toml PATH`, `default`)."""

    otlp_grpc: Address | None
    otlp_http: Address | None
    forward: ForwardTarget
    baselines: str | None
    history: HistorySettings
    prometheus: Address | None
    mode: Mode
    engine: EngineConfig
    evaluators: tuple[str, ...] | None
    redact: bool
    span_events: bool
    events: bool
    metrics: bool
    max_request_bytes: int
    max_queue_bytes: int
    tls_cert: str | None
    tls_key: str | None
    receiver_token: str | None = field(repr=False)
    shutdown_timeout: float
    forward_retry_initial: float
    forward_retry_max_interval: float
    forward_retry_max_elapsed: float
    log_format: str
    log_level: str
    config_file: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def resolve(
        cls,
        flags: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        config_file: str | None = None,
    ) -> ServeSettings:
        """Apply the precedence; `flags` maps setting names to values given on the command line
        (None: not given). Raises `ConfigError` on the first bad value, naming its source."""
        env = dict(os.environ if environ is None else environ)
        flags = {k: v for k, v in (flags or {}).items() if v is not None}
        path = config_file or env.get(TRACEHOUND_CONFIG) or None
        toml = load_toml(path) if path else {}
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for spec in SETTINGS:
            raw: Any = None
            env_name = _env_name(spec, env)
            if spec.name in flags:
                raw, source = flags[spec.name], f"flag {spec.flag}"
            elif env_name is not None:
                raw, source = env[env_name].strip(), f"env {env_name}"
            elif spec.name in toml:
                raw, source = toml[spec.name], f"toml {path}"
            if raw is None:
                values[spec.name], sources[spec.name] = spec.default, "default"
                continue
            try:
                values[spec.name] = spec.parse(raw)
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"{spec.name} (from {source}): {exc}") from None
            sources[spec.name] = source
        if sources["baselines"] == f"env {TRACEHOUND_REDIS_URL}":
            from tracehound.baselines._redis import is_redis_url

            if not is_redis_url(values["baselines"]):
                raise ConfigError(
                    f"baselines (from env {TRACEHOUND_REDIS_URL}): expected a redis://, "
                    "rediss:// or unix:// URL"
                )
        if values["reorder_delay"] > values["trace_timeout"]:
            raise ConfigError(
                f"reorder_delay (from {sources['reorder_delay']}): "
                f"{values['reorder_delay']} s is longer than trace_timeout "
                f"({values['trace_timeout']} s)"
            )
        try:
            engine = EngineConfig(
                quiet_period=values["quiet_period"],
                trace_timeout=values["trace_timeout"],
                reorder_delay=values["reorder_delay"],
                max_traces=values["max_traces"],
                max_spans_per_trace=values["max_spans_per_trace"],
                max_text_bytes_per_trace=values["max_text_bytes_per_trace"],
            )
        except ValueError as exc:
            named = [n for n in _ENGINE_SETTINGS if n in str(exc)]
            where = ", ".join(f"{n} from {sources[n]}" for n in named)
            raise ConfigError(f"{exc} ({where})" if where else str(exc)) from None
        addresses: dict[str, Address | None] = {}
        for name in ("otlp_grpc", "otlp_http", "prometheus"):
            try:
                addresses[name] = parse_address(values[name])
            except ValueError as exc:
                raise ConfigError(f"{name} (from {sources[name]}): {exc}") from None
        if addresses["otlp_grpc"] is None and addresses["otlp_http"] is None:
            raise ConfigError("otlp_grpc and otlp_http are both disabled: nothing to receive")
        forward, forward_source = _forward_target(values, sources, toml, env)
        sources["forward"] = forward_source
        _check_no_loop(forward, addresses)
        if (values["tls_cert"] is None) != (values["tls_key"] is None):
            given = "tls_cert" if values["tls_key"] is None else "tls_key"
            missing = "tls_key" if given == "tls_cert" else "tls_cert"
            raise ConfigError(f"{given} (from {sources[given]}) needs {missing} as well")
        token = values["receiver_token"]
        if token is not None and (not token.strip() or not token.isprintable()):
            raise ConfigError(
                f"receiver_token (from {sources['receiver_token']}): expected printable text"
            )
        if values["forward_retry_max_interval"] < values["forward_retry_initial"]:
            raise ConfigError(
                "forward_retry_max_interval (from "
                f"{sources['forward_retry_max_interval']}) must be >= forward_retry_initial "
                f"(from {sources['forward_retry_initial']})"
            )
        history = HistorySettings(
            enabled=values["history"],
            retention=Retention(
                max_runs=values["history_max_runs"], max_age=values["history_max_age"]
            ),
            content=values["history_content"],
        )
        return cls(
            otlp_grpc=addresses["otlp_grpc"],
            otlp_http=addresses["otlp_http"],
            forward=forward,
            baselines=values["baselines"],
            history=history,
            prometheus=addresses["prometheus"],
            mode=values["mode"],
            engine=engine,
            evaluators=values["evaluators"],
            redact=values["redact"],
            span_events=values["span_events"],
            events=values["events"],
            metrics=values["metrics"],
            max_request_bytes=values["max_request_bytes"],
            max_queue_bytes=values["max_queue_bytes"],
            tls_cert=values["tls_cert"],
            tls_key=values["tls_key"],
            receiver_token=values["receiver_token"],
            shutdown_timeout=values["shutdown_timeout"],
            forward_retry_initial=values["forward_retry_initial"],
            forward_retry_max_interval=values["forward_retry_max_interval"],
            forward_retry_max_elapsed=values["forward_retry_max_elapsed"],
            log_format=values["log_format"],
            log_level=values["log_level"],
            config_file=path,
            sources=sources,
        )

    def describe(self) -> list[tuple[str, str, str]]:
        """(setting, value, source) rows, for `--check-config` and the start-up log."""
        from tracehound.baselines import shown_location

        shown = {
            "otlp_grpc": str(self.otlp_grpc or "none"),
            "otlp_http": str(self.otlp_http or "none"),
            "forward": self.forward.describe(),
            "forward_protocol": ", ".join(
                sorted({t.protocol for t in self.forward.signals.values()})
            )
            or "-",
            "baselines": (
                shown_location(self.baselines) if self.baselines else "(default SQLite file)"
            ),
            "history": "on" if self.history.enabled else "off",
            "history_max_runs": str(self.history.retention.max_runs),
            "history_max_age": f"{self.history.retention.max_age / 86400:g}d",
            "history_content": "on" if self.history.content else "off (no message content)",
            "prometheus": str(self.prometheus or "none"),
            "mode": self.mode,
            "quiet_period": str(self.engine.quiet_period),
            "trace_timeout": str(self.engine.trace_timeout),
            "reorder_delay": str(self.engine.reorder_delay),
            "max_traces": str(self.engine.max_traces),
            "max_spans_per_trace": str(self.engine.max_spans_per_trace),
            "max_text_bytes_per_trace": str(self.engine.max_text_bytes_per_trace),
            "evaluators": ",".join(self.evaluators) if self.evaluators else "(default)",
            "tls_cert": self.tls_cert or "none (plaintext)",
            "tls_key": self.tls_key or "none",
            "receiver_token": "*** (required)" if self.receiver_token else "none (not required)",
        }
        rows = []
        for spec in SETTINGS:
            value = shown.get(spec.name)
            if value is None:
                value = str(getattr(self, spec.name))
            rows.append((spec.name, value, self.sources.get(spec.name, "default")))
        return rows


def _forward_target(
    values: Mapping[str, Any],
    sources: Mapping[str, str],
    toml: Mapping[str, Any],
    env: Mapping[str, str],
) -> tuple[ForwardTarget, str]:
    raw: str | None = values["forward"]
    source = sources["forward"]
    from_otel_env = False
    if raw is None:
        endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        if endpoint:
            raw, source, from_otel_env = endpoint, "env OTEL_EXPORTER_OTLP_ENDPOINT", True
        else:
            return ForwardTarget("none"), "default"
    text = raw.strip()
    if text.lower() == "none":
        return ForwardTarget("none"), source
    if text.startswith("file:"):
        path = text[5:]
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise ConfigError(f"forward (from {source}): file: needs a path")
        return ForwardTarget("file", path=Path(path).expanduser()), source
    signals: dict[str, SignalTarget] = {}
    for signal in _SIGNALS:
        try:
            signals[signal] = _signal_target(
                signal,
                text,
                values=values,
                sources=sources,
                toml=toml,
                env=env,
                per_signal_env=from_otel_env,
            )
        except ValueError as exc:
            raise ConfigError(f"forward (from {source}): {exc}") from None
    return ForwardTarget("otlp", signals=signals), source


def _signal_target(
    signal: str,
    base: str,
    *,
    values: Mapping[str, Any],
    sources: Mapping[str, str],
    toml: Mapping[str, Any],
    env: Mapping[str, str],
    per_signal_env: bool,
) -> SignalTarget:
    sig = signal.upper()

    def option(name: str, toml_key: str) -> Any:
        for key in (f"OTEL_EXPORTER_OTLP_{sig}_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
            value = env.get(key, "").strip()
            if value:
                return value
        return toml.get(toml_key)

    url = base
    explicit_signal_url = False
    if per_signal_env:
        own = env.get(f"OTEL_EXPORTER_OTLP_{sig}_ENDPOINT", "").strip()
        if own:
            url, explicit_signal_url = own, True
    if "://" not in url:
        url = "http://" + url  # a bare host:port is a plaintext endpoint
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s):// URL, none, or file:PATH")
    protocol: str | None = None
    if sources.get("forward_protocol", "default") != "default":
        protocol = values["forward_protocol"]
    else:
        own_protocol = env.get(f"OTEL_EXPORTER_OTLP_{sig}_PROTOCOL", "").strip().lower()
        if own_protocol:
            protocol = _choice("grpc", "http/protobuf", "http/json")(own_protocol)
        else:
            path = parts.path.rstrip("/")
            protocol = "http/protobuf" if path or parts.port == 4318 else "grpc"
    timeout_raw = option("TIMEOUT", "forward_timeout")
    compression = str(option("COMPRESSION", "forward_compression") or "none").strip().lower()
    allowed = ("none", "gzip") if protocol == "grpc" else ("none", "gzip", "deflate")
    if compression not in allowed:
        raise ValueError(f"compression {compression!r}: expected one of {', '.join(allowed)}")
    headers_raw = option("HEADERS", "forward_headers")
    if isinstance(headers_raw, Mapping):
        headers = tuple((str(k).lower(), str(v)) for k, v in headers_raw.items())
    elif headers_raw:
        headers = tuple(parse_env_headers(str(headers_raw), liberal=True).items())
    else:
        headers = ()
    insecure_raw = option("INSECURE", "forward_insecure")
    insecure = parts.scheme == "http"
    if parts.scheme != "https" and insecure_raw is not None:
        insecure = _bool(insecure_raw)
    if protocol == "grpc":
        endpoint = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 4317)}"
        if ":" in (parts.hostname or ""):
            endpoint = f"[{parts.hostname}]:{parts.port or 4317}"
    elif explicit_signal_url:
        endpoint = url
    else:
        endpoint = url.rstrip("/") + f"/v1/{signal}"
    return SignalTarget(
        protocol=protocol,  # type: ignore[arg-type]  # checked above
        endpoint=endpoint,
        insecure=insecure,
        headers=headers,
        compression=compression,
        timeout=_positive_float(timeout_raw) if timeout_raw is not None else 10.0,
        certificate=option("CERTIFICATE", "forward_certificate"),
        client_key=option("CLIENT_KEY", "forward_client_key"),
        client_certificate=option("CLIENT_CERTIFICATE", "forward_client_certificate"),
    )


_LOOPBACK = frozenset(("localhost", "127.0.0.1", "::1", "0.0.0.0", "::", "ip6-localhost"))


def _same_host(a: str, b: str) -> bool:
    a, b = a.lower().strip("[]"), b.lower().strip("[]")
    return a == b or (a in _LOOPBACK and b in _LOOPBACK)


def _check_no_loop(forward: ForwardTarget, addresses: Mapping[str, Address | None]) -> None:
    """Refuse to forward to our own receivers (e.g. OTEL_EXPORTER_OTLP_ENDPOINT shared with
    the app the sidecar serves): every request would come back forever."""
    listening = [a for k, a in addresses.items() if a is not None and k != "prometheus"]
    for signal, target in forward.signals.items():
        hostport = target.endpoint
        if "://" in hostport:
            parts = urlsplit(hostport)
            host, port = (
                parts.hostname or "",
                parts.port or (443 if parts.scheme == "https" else 80),
            )
        else:
            address = parse_address(hostport)
            if address is None:
                continue
            host, port = address.host, address.port
        for own in listening:
            if own.port == port and own.port != 0 and _same_host(own.host, host):
                raise ConfigError(
                    f"forward target for {signal} ({target.endpoint}) is tracehound's own "
                    f"receiver {own}: set --forward (or TRACEHOUND_FORWARD) to the backend, or none"
                )
