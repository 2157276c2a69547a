"""`tracehound serve` settings: precedence, the forwarder target (OTEL_EXPORTER_OTLP_*), errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tracehound.config import ConfigError
from tracehound.server import ServeSettings
from tracehound.server._settings import Address, parse_address

NO_LOOP = {"otlp_grpc": "127.0.0.1:0", "otlp_http": "127.0.0.1:0"}


def resolve(
    flags: dict[str, object] | None = None,
    env: dict[str, str] | None = None,
    toml: Path | None = None,
) -> ServeSettings:
    return ServeSettings.resolve(
        flags or {}, environ=env or {}, config_file=str(toml) if toml else None
    )


def test_defaults() -> None:
    settings = resolve()
    assert settings.otlp_grpc == Address("localhost", 4317)
    assert settings.otlp_http == Address("localhost", 4318)
    assert settings.forward.kind == "none"
    assert settings.mode == "stream"
    assert settings.engine.quiet_period == 2.0
    assert settings.prometheus is None
    assert set(settings.sources.values()) == {"default"}


def test_precedence_flag_over_env_over_toml_over_default(tmp_path: Path) -> None:
    toml = tmp_path / "th.toml"
    toml.write_text('[serve]\nquiet_period = 5\nmax_traces = 7\nmode = "hold"\nredact = true\n')
    settings = resolve(
        {"quiet_period": "1.5"},
        {"TRACEHOUND_QUIET_PERIOD": "3", "TRACEHOUND_MAX_TRACES": "9"},
        toml,
    )
    assert settings.engine.quiet_period == 1.5
    assert settings.sources["quiet_period"] == "flag --quiet-period"
    assert settings.engine.max_traces == 9
    assert settings.sources["max_traces"] == "env TRACEHOUND_MAX_TRACES"
    assert settings.mode == "hold"
    assert settings.sources["mode"] == f"toml {toml}"
    assert settings.redact is True
    assert settings.engine.trace_timeout == 30.0


def test_config_file_from_env(tmp_path: Path) -> None:
    toml = tmp_path / "th.toml"
    toml.write_text('[serve]\nprometheus = "127.0.0.1:9464"\n')
    settings = resolve(env={"TRACEHOUND_CONFIG": str(toml)})
    assert settings.prometheus == Address("127.0.0.1", 9464)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[serve]\nquiet = 1\n", "unknown [serve] key(s): quiet"),
        ("[serve\n", "invalid TOML"),
        ("serve = 3\n", "[serve] must be a table"),
        ('[serve]\nmode = "fast"\n', "mode (from toml"),
    ],
)
def test_bad_toml(tmp_path: Path, content: str, message: str) -> None:
    toml = tmp_path / "th.toml"
    toml.write_text(content)
    with pytest.raises(ConfigError) as caught:
        resolve(toml=toml)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        ({"quiet_period": "-1"}, {}, "quiet_period (from flag"),
        ({}, {"TRACEHOUND_REDACT": "maybe"}, "redact (from env TRACEHOUND_REDACT)"),
        ({"otlp_grpc": "localhost"}, {}, "is not HOST:PORT"),
        ({"otlp_grpc": "none", "otlp_http": "none"}, {}, "nothing to receive"),
        (
            {"quiet_period": "40", "trace_timeout": "30"},
            {},
            "trace_timeout must be >= quiet_period",
        ),
        ({"forward": "ftp://x"}, {}, "is not an http(s)://"),
        ({"forward": "file:"}, {}, "file: needs a path"),
        ({"max_queue_bytes": "0"}, {}, "expected a size like 4MiB, got '0'"),
        (
            {"max_request_bytes": "lots"},
            {},
            "max_request_bytes (from flag --max-request-bytes): expected a size like 4MiB, "
            "got 'lots'",
        ),
        ({"max_request_bytes": "-4MiB"}, {}, "expected a size like 4MiB, got '-4MiB'"),
        ({"max_request_bytes": "1e999"}, {}, "expected a size like 4MiB"),
        (
            {"max_traces": "many"},
            {},
            "max_traces (from flag --max-traces): expected a whole number >= 1, got 'many'",
        ),
        (
            {},
            {"TRACEHOUND_SHUTDOWN_TIMEOUT": "nan"},
            "shutdown_timeout (from env TRACEHOUND_SHUTDOWN_TIMEOUT): expected a number of "
            "seconds >= 0, got 'nan'",
        ),
        (
            {"quiet_period": "40", "trace_timeout": "30"},
            {},
            "quiet_period from flag --quiet-period, trace_timeout from flag --trace-timeout",
        ),
        ({"reorder_delay": "-0.5"}, {}, "reorder_delay (from flag --reorder-delay)"),
        ({}, {"TRACEHOUND_REORDER_DELAY": "soon"}, "reorder_delay (from env TRACEHOUND_REORDER"),
        (
            {"trace_timeout": "5"},
            {"TRACEHOUND_REORDER_DELAY": "6"},
            "reorder_delay (from env TRACEHOUND_REORDER_DELAY): 6.0 s is longer than "
            "trace_timeout (5.0 s)",
        ),
    ],
)
def test_bad_values_name_their_source(
    flags: dict[str, object], env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve(flags, env)
    assert message in str(caught.value)


def test_reorder_delay_from_flag_env_toml_and_default(tmp_path: Path) -> None:
    assert resolve().engine.reorder_delay == 1.0
    toml = tmp_path / "th.toml"
    toml.write_text("[serve]\nreorder_delay = 0.25\n")
    settings = resolve(toml=toml)
    assert settings.engine.reorder_delay == 0.25
    assert settings.sources["reorder_delay"] == f"toml {toml}"
    settings = resolve(env={"TRACEHOUND_REORDER_DELAY": "0"}, toml=toml)
    assert settings.engine.reorder_delay == 0.0  # 0: every span evaluated on arrival
    settings = resolve({"reorder_delay": "0.5"}, {"TRACEHOUND_REORDER_DELAY": "0"}, toml)
    assert settings.engine.reorder_delay == 0.5
    assert ("reorder_delay", "0.5", "flag --reorder-delay") in settings.describe()
    # polled often enough for the delay to be kept
    assert settings.engine.poll_interval == 0.125
    with pytest.raises(ConfigError) as caught:
        toml.write_text('[serve]\nreorder_delay = "later"\n')
        resolve(toml=toml)
    assert str(caught.value).startswith(f"reorder_delay (from toml {toml}):")
    assert "\n" not in str(caught.value)


def test_sizes_accept_suffixes() -> None:
    settings = resolve({"max_request_bytes": "4MiB", "max_queue_bytes": "512KiB"})
    assert settings.max_request_bytes == 4 * 1024 * 1024
    assert settings.max_queue_bytes == 512 * 1024


def test_parse_address_forms() -> None:
    assert parse_address("[::1]:4317") == Address("::1", 4317)
    assert str(Address("::1", 4317)) == "[::1]:4317"
    assert parse_address("none") is None
    with pytest.raises(ValueError, match="out of range"):
        parse_address("x:70000")


# --- forwarder target ---------------------------------------------------------------------------


def test_forward_defaults_to_otel_exporter_otlp_endpoint_with_per_signal_overrides() -> None:
    settings = resolve(
        NO_LOOP,
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://logs-collector:5317",
            "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s3cr%20t,x-team=ai",
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "4",
        },
    )
    assert settings.sources["forward"] == "env OTEL_EXPORTER_OTLP_ENDPOINT"
    traces = settings.forward.signals["traces"]
    assert (traces.protocol, traces.endpoint, traces.insecure) == ("grpc", "collector:4317", True)
    assert dict(traces.headers) == {"api-key": "s3cr t", "x-team": "ai"}
    assert traces.compression == "gzip"
    assert traces.timeout == 4.0
    assert settings.forward.signals["metrics"].compression == "none"
    assert settings.forward.signals["logs"].endpoint == "logs-collector:5317"


def test_explicit_forward_url_is_not_redirected_by_per_signal_env() -> None:
    settings = resolve(
        {**NO_LOOP, "forward": "https://backend.example:4317"},
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://elsewhere:4317"},
    )
    traces = settings.forward.signals["traces"]
    assert (traces.endpoint, traces.insecure) == ("backend.example:4317", False)


@pytest.mark.parametrize(
    ("url", "env", "protocol", "endpoint"),
    [
        ("http://c:4318", {}, "http/protobuf", "http://c:4318/v1/traces"),
        ("http://c:9000/otlp", {}, "http/protobuf", "http://c:9000/otlp/v1/traces"),
        ("http://c:9000", {}, "grpc", "c:9000"),
        ("c:4317", {}, "grpc", "c:4317"),
        (
            "http://c:4317",
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            "http/protobuf",
            "http://c:4317/v1/traces",
        ),
        ("http://c:4318", {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "grpc", "c:4318"),
    ],
)
def test_protocol_inference(url: str, env: dict[str, str], protocol: str, endpoint: str) -> None:
    settings = resolve({**NO_LOOP, "forward": url}, env)
    traces = settings.forward.signals["traces"]
    assert (traces.protocol, traces.endpoint) == (protocol, endpoint)


def test_file_and_none_targets(tmp_path: Path) -> None:
    settings = resolve(
        {"forward": f"file:{tmp_path}/out.jsonl"}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}
    )
    assert settings.forward.kind == "file"
    assert settings.forward.path == tmp_path / "out.jsonl"
    assert (
        resolve({"forward": "none"}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}).forward.kind
        == "none"
    )


def test_forwarding_to_itself_is_refused() -> None:
    with pytest.raises(ConfigError, match="tracehound's own receiver"):
        resolve({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"})
    with pytest.raises(ConfigError, match="tracehound's own receiver"):
        resolve({"forward": "http://localhost:4318"})


def test_bad_compression_for_grpc() -> None:
    with pytest.raises(ConfigError, match="compression 'deflate'"):
        resolve(
            {**NO_LOOP, "forward": "http://c:4317"}, {"OTEL_EXPORTER_OTLP_COMPRESSION": "deflate"}
        )


def test_describe_rows_cover_every_setting() -> None:
    rows = resolve({**NO_LOOP, "forward": "http://c:4317"}).describe()
    names = [name for name, _, _ in rows]
    assert "forward" in names and "mode" in names and "quiet_period" in names
    forward = next(value for name, value, _ in rows if name == "forward")
    assert "traces=grpc c:4317" in forward


def test_the_sidecar_process_tunes_its_garbage_collector_and_the_library_does_not() -> None:
    """`tracehound serve` freezes start-up objects and spaces out collections in its own process;
    importing or embedding the server code leaves the host's collector alone."""
    probe = (
        "import gc, tracehound.server._app as app\n"
        "before = gc.get_threshold()\n"
        "assert before != app.GC_THRESHOLDS and gc.get_freeze_count() == 0\n"
        "app.tune_gc()\n"
        "assert gc.get_threshold() == app.GC_THRESHOLDS and gc.get_freeze_count() > 1000\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)
