"""`tracehound serve`: the OTLP sidecar — receive, evaluate in flight, forward.

OTLP/gRPC and OTLP/HTTP in (protobuf and JSON, gzip; conformance as the OTLP specification asks),
the `Engine` in the loop with the spans annotated in place in the protobuf (`stream` or `hold`
forwarding), `gen_ai.evaluation.result` log records and metrics out, and a forwarder that passes
protobuf through to a downstream OTLP endpoint with retries, a bounded queue and backpressure.

Modules (private; the names below are the public surface):

- `_settings`: flags > env > TOML > defaults, the forwarder target (OTEL_EXPORTER_OTLP_*);
- `_otlp`: decoding, status mapping, JSON with hex ids, in-place span edits;
- `_pipeline`: admission, the evaluation worker, hold/stream, dedupe;
- `_forward`: lanes, senders (gRPC, HTTP, file, none), retries;
- `_grpc`, `_http`: the receivers, health and Prometheus endpoints;
- `_telemetry`: self-metrics (OTLP, Prometheus text format) and JSON logs;
- `_app`: `Sidecar`, the lifecycle; `cli`: the `serve` sub-command.
"""

from __future__ import annotations

from tracehound.server._app import DEFAULT_EVALUATORS, Sidecar, build_serve_evaluators
from tracehound.server._settings import SETTINGS, ForwardTarget, ServeSettings, SignalTarget

__all__ = [
    "DEFAULT_EVALUATORS",
    "SETTINGS",
    "ForwardTarget",
    "ServeSettings",
    "Sidecar",
    "SignalTarget",
    "build_serve_evaluators",
]
