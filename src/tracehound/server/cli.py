"""`tracehound serve`: the argparse sub-command (registered by `tracehound.cli`).

Exit codes: 0 after a clean or signalled stop (and for a valid `--check-config`), 2 when the
sidecar cannot start: a configuration error (the message says which setting, from which
source) or an address it cannot listen on (the message names it); either is one line on stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from tracehound.config import ConfigError
from tracehound.server._settings import SETTINGS, TRACEHOUND_CONFIG, ServeSettings, _bool

__all__ = ["add_serve_parser", "cmd_serve"]

EXIT_OK, EXIT_START, EXIT_CONFIG = 0, 2, 2

_EPILOG = f"""\
Precedence: flags > environment variables > TOML file ([serve] table of --config or
${TRACEHOUND_CONFIG}) > defaults. The forwarder also reads the OTel SDK exporter variables
(OTEL_EXPORTER_OTLP_ENDPOINT, _PROTOCOL, _HEADERS, _COMPRESSION, _TIMEOUT, _INSECURE,
_CERTIFICATE, _CLIENT_KEY, _CLIENT_CERTIFICATE, and their _TRACES_/_LOGS_/_METRICS_ variants).
Settings and variables: """ + ", ".join(
    f"{s.name} (${s.env}{''.join(f' or ${e}' for e in s.fallback_env)})" for s in SETTINGS if s.env
)


_METAVARS = {
    "otlp_grpc": "HOST:PORT",
    "otlp_http": "HOST:PORT",
    "prometheus": "HOST:PORT",
    "forward": "URL|none|file:PATH",
    "forward_protocol": "grpc|http/protobuf|http/json",
    "baselines": "PATH|memory|redis://…",
    "mode": "stream|hold",
    "quiet_period": "SECONDS",
    "trace_timeout": "SECONDS",
    "reorder_delay": "SECONDS",
    "shutdown_timeout": "SECONDS",
    "max_traces": "N",
    "evaluators": "NAMES",
    "max_request_bytes": "BYTES",
    "max_queue_bytes": "BYTES",
    "tls_cert": "PATH",
    "tls_key": "PATH",
    "log_format": "json|text",
    "log_level": "LEVEL",
}


def add_serve_parser(sub: Any) -> argparse.ArgumentParser:
    """Add `serve` to the `tracehound` sub-commands; returns its parser."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run the OTLP sidecar: receive, evaluate in flight, forward enriched telemetry",
        description="Receive OTLP (gRPC and HTTP, protobuf and JSON), evaluate GenAI traces in "
        "flight, and forward the spans - annotated in place - with gen_ai.evaluation.result "
        "log records and metrics to a downstream OTLP endpoint, a JSON-lines file, or nowhere.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config", metavar="PATH", help=f"TOML settings file (${TRACEHOUND_CONFIG})"
    )
    parser.add_argument(
        "--check-config",
        action="store_true",
        help="resolve and validate the settings, print them with their sources, and exit",
    )
    for spec in SETTINGS:
        if spec.flag is None:
            continue
        env = f" (${spec.env})" if spec.env else ""
        if spec.parse is _bool:
            parser.add_argument(
                spec.flag,
                dest=spec.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=f"{spec.help}{env}",
            )
        else:
            parser.add_argument(
                spec.flag,
                dest=spec.name,
                default=None,
                metavar=_METAVARS.get(spec.name, spec.name.upper()),
                help=f"{spec.help}{env}",
            )
    parser.set_defaults(handler=cmd_serve)
    return parser


def cmd_serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    flags = {spec.name: getattr(args, spec.name, None) for spec in SETTINGS if spec.flag}
    try:
        settings = ServeSettings.resolve(flags, config_file=args.config)
        if args.check_config:
            return _check(settings, out)
    except ConfigError as exc:
        print(f"tracehound serve: configuration error: {exc}", file=err)
        return EXIT_CONFIG
    from tracehound.server._app import Sidecar, tune_gc
    from tracehound.server._telemetry import setup_logging

    setup_logging(settings.log_format, settings.log_level, err)
    try:
        sidecar = Sidecar(settings)
    except ConfigError as exc:
        print(f"tracehound serve: configuration error: {exc}", file=err)
        return EXIT_CONFIG
    tune_gc()  # this process is the sidecar's own
    try:
        return sidecar.run()
    except OSError as exc:
        print(f"tracehound serve: cannot start: {exc}", file=err)
        return EXIT_START


def _check(settings: ServeSettings, out: TextIO) -> int:
    """Validate what start-up would (evaluators, baselines) without opening a port or a file."""
    from tracehound._accel import KERNELS, NATIVE, status
    from tracehound.server._app import (
        DEFAULT_EVALUATORS,
        build_serve_evaluators,
        check_file_target,
        load_tls,
    )

    # unknown names, drift availability, the [expectations] rules
    built, _ = build_serve_evaluators(settings, open_store=False)
    if settings.forward.kind == "file" and settings.forward.path is not None:
        check_file_target(settings.forward.path, settings, create=False)
    load_tls(settings)
    wanted = settings.evaluators or DEFAULT_EVALUATORS
    baselines = "not used (drift not enabled)"
    if "drift" in wanted:
        from tracehound.baselines import default_store_path, is_redis_url

        location = settings.baselines
        if location in ("memory", ":memory:"):
            baselines = "memory (not kept across restarts)"
        elif is_redis_url(location):
            from tracehound.baselines import BaselineStoreError, open_store

            try:  # a shared store is only useful if the replicas reach it: connect once
                store = open_store(location)
            except BaselineStoreError as exc:
                raise ConfigError(f"baselines: {exc}") from None
            baselines = f"{store.location} (Redis, reachable)"
            store.close()
        else:
            path = Path(location).expanduser() if location else default_store_path()
            if path.exists():
                from tracehound.baselines import BaselineStoreError, open_store

                try:
                    open_store(str(path)).close()
                except (BaselineStoreError, OSError) as exc:
                    raise ConfigError(f"baselines {path}: {exc}") from None
                baselines = f"{path} (exists, valid)"
            else:
                baselines = f"{path} (will be created)"
    width = max(len(name) for name, _, _ in settings.describe())
    for name, value, source in settings.describe():
        out.write(f"{name:<{width}}  {value}    [{source}]\n")
    out.write(f"{'evaluators (built)':<{width}}  {', '.join(wanted)}\n")
    out.write(f"{'baseline store':<{width}}  {baselines}\n")
    if "drift" in wanted:
        from tracehound.drift import embedder_setting

        out.write(f"{'drift embedder':<{width}}  {embedder_setting()}\n")
    rules = next((e for e in built if e.name == "expectations"), None)
    shown = getattr(rules, "expectations", None)
    out.write(f"{'expectations':<{width}}  {shown.describe() if shown else 'off (no rules)'}\n")
    out.write(f"{'C accelerator':<{width}}  {status()}\n")
    if NATIVE:  # each kernel's refusals are counted: tracehound.accelerator.fallbacks
        kernels = ", ".join(k.name for k in KERNELS)
        out.write(f"{'C kernels':<{width}}  {kernels}\n")
    out.write("configuration OK\n")
    return EXIT_OK
