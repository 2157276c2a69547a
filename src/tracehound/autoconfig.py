"""Zero-code start: tracehound for `opentelemetry-instrument` users, without editing the app.

tracehound registers an OTel SDK *configurator* (entry point group `opentelemetry_configurator`,
name `tracehound`). `opentelemetry-instrument` loads it at start-up; it sets the SDK up exactly as
the standard configurator does (`OTEL_TRACES_EXPORTER`, `OTEL_LOGS_EXPORTER`,
`OTEL_METRICS_EXPORTER`, `OTEL_EXPORTER_OTLP_*`, sampler, resource…) and adds tracehound through
the hooks the SDK offers configurators for exactly this purpose:

- `TRACEHOUND_MODE=wrap` (default): every configured span exporter is exported through one
  `TracehoundSpanProcessor` instead of a `BatchSpanProcessor` (`export_span_processor` hook), so
  the exported spans carry tracehound's attributes; several exporters share one evaluation;
- `TRACEHOUND_MODE=observe`: a `TracehoundSpanProcessor` without exporter is added beside the
  standard `BatchSpanProcessor`s (`span_processors` hook); exported spans are unchanged;
- in both modes its companion log processor is added to the `LoggerProvider`
  (`log_record_processors` hook) so GenAI log events are joined to their spans, and the
  evaluation results go out through the configured logs and metrics exporters.

Usage::

    pip install tracehound
    export OTEL_PYTHON_CONFIGURATOR=tracehound   # needed only if another configurator
                                                 # (e.g. opentelemetry-distro's) is installed
    export OTEL_TRACES_EXPORTER=otlp OTEL_LOGS_EXPORTER=otlp OTEL_METRICS_EXPORTER=otlp
    opentelemetry-instrument python app.py

`TRACEHOUND_ENABLED=false` gives the plain SDK set-up. With `OTEL_CONFIG_FILE` (declarative
configuration) the SDK's own path is taken and tracehound is not added (a warning says so). Other
`TRACEHOUND_*` variables: see `tracehound.config`; e.g. `TRACEHOUND_EVALUATORS=evidence,loops,drift`
adds drift scoring against the baselines of `TRACEHOUND_BASELINES` (a SQLite file by default,
opened at start-up and closed by the exit handler). A bad tracehound setting fails at start-up
(the instrumented program does not start), as OTel's configurator does for a bad exporter name.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk._configuration import _initialize_components, _OTelSDKConfigurator
from opentelemetry.sdk.environment_variables import OTEL_CONFIG_FILE
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracehound.config import ProcessorSettings
from tracehound.processor import TracehoundSpanProcessor

__all__ = ["TracehoundConfigurator", "configure"]

_logger = logging.getLogger(__name__)


class _FanOutExporter(SpanExporter):
    """The span exporters the SDK configured, behind one exporter (one evaluation for all)."""

    def __init__(self) -> None:
        self._exporters: tuple[SpanExporter, ...] = ()
        self._lock = threading.Lock()

    @property
    def exporters(self) -> tuple[SpanExporter, ...]:
        return self._exporters

    def adopt(self, exporter: SpanExporter, *args: Any, **kwargs: Any) -> SpanProcessor:
        """The SDK's `export_span_processor` hook: take the exporter, return a no-op processor."""
        with self._lock:
            self._exporters = (*self._exporters, exporter)
        return SpanProcessor()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = SpanExportResult.SUCCESS
        for exporter in self._exporters:
            try:
                if exporter.export(spans) is not SpanExportResult.SUCCESS:
                    result = SpanExportResult.FAILURE
            except Exception:
                _logger.exception("Exception while exporting spans with %r", exporter)
                result = SpanExportResult.FAILURE
        return result

    def shutdown(self) -> None:
        for exporter in self._exporters:
            try:
                exporter.shutdown()
            except Exception:
                _logger.exception("Exception while shutting down %r", exporter)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(exporter.force_flush(timeout_millis) for exporter in self._exporters)


def configure(settings: ProcessorSettings | None = None, **kwargs: Any) -> TracehoundSpanProcessor:
    """Set the OTel SDK up as the standard configurator does, plus tracehound. Returns it.

    `kwargs` are those of the SDK's `_initialize_components` (what `opentelemetry-instrument`
    passes to a configurator); tracehound's processors are added to theirs.
    """
    settings = settings if settings is not None else ProcessorSettings.from_env()
    fan_out = _FanOutExporter() if settings.mode == "wrap" else None
    processor = TracehoundSpanProcessor(fan_out, settings=settings)
    kwargs["span_processors"] = [*(kwargs.get("span_processors") or ()), processor]
    kwargs["log_record_processors"] = [
        processor.log_processor,
        *(kwargs.get("log_record_processors") or ()),
    ]
    if fan_out is not None:
        kwargs["export_span_processor"] = fan_out.adopt
    _initialize_components(**kwargs)
    # Registered after the providers' own exit handlers, so it runs before them (LIFO): the last
    # traces are evaluated and their events emitted while the logger provider still exports.
    atexit.register(processor.shutdown)
    return processor


class TracehoundConfigurator(_OTelSDKConfigurator):
    """The `opentelemetry_configurator` entry point `tracehound` (see the module docstring)."""

    processor: TracehoundSpanProcessor | None = None

    def _configure(self, **kwargs: Any) -> None:
        settings = ProcessorSettings.from_env()
        if not settings.enabled:
            super()._configure(**kwargs)  # type: ignore[no-untyped-call]
            return
        if os.environ.get(OTEL_CONFIG_FILE):
            _logger.warning(
                "%s is set: the SDK is configured from that file and tracehound is not added",
                OTEL_CONFIG_FILE,
            )
            super()._configure(**kwargs)  # type: ignore[no-untyped-call]
            return
        TracehoundConfigurator.processor = configure(settings, **kwargs)
