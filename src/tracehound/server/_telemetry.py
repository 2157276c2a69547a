"""The sidecar's own telemetry: metrics (OTLP and/or Prometheus) and structured logs.

Metrics go through one OTel SDK `MeterProvider` (scope `tracehound`) with up to two readers:

- a periodic reader whose exporter encodes each collection as an OTLP
  `ExportMetricsServiceRequest` (the SDK's protobuf encoder) and puts it on the forwarder's
  metrics lane, so self-metrics reach the same downstream (or file) as everything else;
- a pull reader rendered in the Prometheus text exposition format (0.0.4) by `render_prometheus`
  on `GET /metrics` — written here, so no Prometheus client library is needed.

Evaluation metrics (`tracehound.evaluation.score`, `tracehound.loops`, …) come from
`tracehound.emit.MetricsRecorder` on the same provider; `ServerMetrics` adds the sidecar's own
instruments (`tracehound.server.*`, `tracehound.forward.*`).

Logs: `setup_logging` writes one JSON object per line on stderr (`ts`, `level`, `logger`,
`message`, plus any `extra` fields) or plain text.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from opentelemetry import metrics
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
    Sum,
)
from opentelemetry.sdk.resources import Resource

from tracehound import _accel, names
from tracehound.server._forward import Lane

__all__ = [
    "JsonFormatter",
    "LaneMetricExporter",
    "ServerMetrics",
    "make_meter_provider",
    "render_prometheus",
    "setup_logging",
]


# --- structured logs ----------------------------------------------------------------------------

_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: `ts` (RFC 3339, UTC), `level`, `logger`, `message`, extras."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def setup_logging(log_format: str, level: str, stream: Any = None) -> None:
    """Configure the `tracehound` loggers (and grpc's) to write to stderr."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("tracehound").setLevel(level.upper())


# --- metrics ------------------------------------------------------------------------------------


class LaneMetricExporter(MetricExporter):
    """Encodes each collection as OTLP protobuf and queues it on the metrics lane."""

    def __init__(self, lane: Lane) -> None:
        super().__init__()
        self._lane = lane

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        request = encode_metrics(metrics_data)
        count = sum(len(sm.metrics) for rm in request.resource_metrics for sm in rm.scope_metrics)
        if not count:
            return MetricExportResult.SUCCESS
        ok = self._lane.offer(request.SerializeToString(), count)
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def make_meter_provider(
    lane: Lane | None, prometheus: bool
) -> tuple[MeterProvider, InMemoryMetricReader | None]:
    """The provider tracehound's metrics are recorded on; the pull reader when Prometheus is on.

    The resource is the SDK default (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), with
    `service.name` = `tracehound` unless set.
    """
    readers: list[MetricReader] = []
    if lane is not None:
        readers.append(PeriodicExportingMetricReader(LaneMetricExporter(lane)))
    pull = InMemoryMetricReader() if prometheus else None
    if pull is not None:
        readers.append(pull)
    resource = Resource.create()
    service = resource.attributes.get("service.name")
    if not isinstance(service, str) or service.startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "tracehound"}))
    return MeterProvider(metric_readers=readers, resource=resource), pull


class ServerMetrics:
    """The sidecar's instruments (names in `tracehound.names`, `SERVE_METRIC_*`/`FORWARD_*`)."""

    def __init__(self, provider: metrics.MeterProvider, version: str) -> None:
        meter = provider.get_meter(names.SCOPE_NAME, version)
        self._requests = meter.create_counter(
            names.SERVE_METRIC_REQUESTS, unit="{request}", description="OTLP export requests"
        )
        self._items = meter.create_counter(
            names.SERVE_METRIC_ITEMS, unit="{item}", description="Items received, by outcome"
        )
        self._duplicates = meter.create_counter(
            names.SERVE_METRIC_SPANS_DUPLICATE,
            unit="{span}",
            description="Duplicate spans dropped",
        )
        self._forward = meter.create_counter(
            names.SERVE_METRIC_FORWARD_ITEMS,
            unit="{item}",
            description="Items forwarded downstream",
        )
        self._retries = meter.create_counter(
            names.SERVE_METRIC_FORWARD_RETRIES,
            unit="{retry}",
            description="Forward attempts retried",
        )
        meter.create_observable_counter(
            names.SERVE_METRIC_ACCELERATOR_FALLBACKS,
            callbacks=[_fallback_observations],
            unit="{input}",
            description="Inputs a C kernel left to its Python reference",
        )
        self._meter = meter

    def request(self, signal: str, transport: str, outcome: str) -> None:
        self._requests.add(
            1,
            {
                names.METRIC_ATTR_SIGNAL: signal,
                names.METRIC_ATTR_TRANSPORT: transport,
                names.METRIC_ATTR_OUTCOME: outcome,
            },
        )

    def items(self, signal: str, outcome: str, count: int) -> None:
        if count:
            self._items.add(
                count, {names.METRIC_ATTR_SIGNAL: signal, names.METRIC_ATTR_OUTCOME: outcome}
            )

    def duplicates(self, count: int) -> None:
        if count:
            self._duplicates.add(count)

    def forwarded(self, signal: str, outcome: str, reason: str, count: int) -> None:
        attributes = {names.METRIC_ATTR_SIGNAL: signal, names.METRIC_ATTR_EXPORT_OUTCOME: outcome}
        if reason:
            attributes[names.METRIC_ATTR_DROP_REASON] = reason
        self._forward.add(count, attributes)

    def retry(self, signal: str) -> None:
        self._retries.add(1, {names.METRIC_ATTR_SIGNAL: signal})

    def gauge(
        self,
        name: str,
        unit: str,
        description: str,
        read: Callable[[], Iterable[tuple[float, Mapping[str, str]]]],
    ) -> None:
        def callback(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            return [metrics.Observation(value, dict(attrs)) for value, attrs in read()]

        self._meter.create_observable_gauge(
            name, callbacks=[callback], unit=unit, description=description
        )


def _fallback_observations(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
    return [
        metrics.Observation(count, {names.METRIC_ATTR_KERNEL: kernel})
        for kernel, count in sorted(_accel.fallbacks().items())
    ]


# --- Prometheus text exposition -----------------------------------------------------------------

_INVALID = re.compile(r"[^a-zA-Z0-9_:]")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]")
_UNIT_SUFFIX = {"s": "seconds", "ms": "milliseconds", "By": "bytes", "1": ""}


def prometheus_name(name: str, unit: str, counter: bool) -> str:
    """OTel → Prometheus name: invalid characters to `_`, unit suffix, `_total` for counters."""
    out = _INVALID.sub("_", name)
    if out and out[0].isdigit():
        out = "_" + out
    suffix = _UNIT_SUFFIX.get(unit, "") if not unit.startswith("{") else ""
    if suffix and not out.endswith("_" + suffix):
        out += "_" + suffix
    if counter and not out.endswith("_total"):
        out += "_total"
    return out


def _label_name(key: str) -> str:
    out = _INVALID_LABEL.sub("_", key)
    return "_" + out if out[:1].isdigit() else out


def _escape(value: Any) -> str:
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value)
        if isinstance(value, (list, tuple))
        else str(value)
    )
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(attributes: Mapping[str, Any], extra: Sequence[tuple[str, str]] = ()) -> str:
    pairs = [f'{_label_name(k)}="{_escape(v)}"' for k, v in sorted(attributes.items())]
    pairs.extend(f'{k}="{v}"' for k, v in extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _number(value: float) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return repr(value)
    return str(value)


def render_prometheus(data: MetricsData | None) -> str:
    """The text exposition format (version 0.0.4) of one collection."""
    lines: list[str] = []
    if data is None:
        return ""
    seen: set[str] = set()
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                points = metric.data
                if isinstance(points, Sum):
                    counter = points.is_monotonic
                    kind = "counter" if counter else "gauge"
                elif isinstance(points, Gauge):
                    counter, kind = False, "gauge"
                elif isinstance(points, Histogram):
                    counter, kind = False, "histogram"
                else:
                    continue
                name = prometheus_name(metric.name, metric.unit or "", counter)
                if name not in seen:
                    seen.add(name)
                    lines.append(f"# HELP {name} {_escape(metric.description or metric.name)}")
                    lines.append(f"# TYPE {name} {kind}")
                if isinstance(points, Histogram):
                    for point in points.data_points:
                        attrs = dict(point.attributes or {})
                        cumulative = 0
                        for bound, count in zip(
                            point.explicit_bounds, point.bucket_counts, strict=False
                        ):
                            cumulative += count
                            le = _labels(attrs, [("le", _number(float(bound)))])
                            lines.append(f"{name}_bucket{le} {cumulative}")
                        lines.append(
                            f"{name}_bucket{_labels(attrs, [('le', '+Inf')])} {point.count}"
                        )
                        lines.append(f"{name}_sum{_labels(attrs)} {_number(point.sum)}")
                        lines.append(f"{name}_count{_labels(attrs)} {point.count}")
                else:
                    for number in points.data_points:
                        labels = _labels(dict(number.attributes or {}))
                        lines.append(f"{name}{labels} {_number(number.value)}")
    return "\n".join(lines) + "\n" if lines else ""
