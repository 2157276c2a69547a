"""OTLP files in: OTLP/JSON documents, JSON lines (the collector file exporter), protobuf.

Traces and logs are told apart by content, so `tracehound inspect traces.json logs.json` works
whatever the files are called. A file that cannot be read raises `InputError` naming the file and
the reason; one bad line or span in an otherwise good file is skipped and reported in
`Telemetry.problems`, never hiding the good data beside it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracehound.spans import (
    LogView,
    SpanView,
    iter_json_logs,
    iter_json_spans,
    iter_proto_logs,
    iter_proto_spans,
)

__all__ = ["InputError", "Telemetry", "expand_paths", "read_bytes", "read_paths"]

# A larger file is refused rather than read into memory whole.
MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024
_SUFFIXES = (".json", ".jsonl", ".ndjson", ".pb", ".bin", ".otlp", ".protobuf")


class InputError(Exception):
    """A file that cannot be read at all (missing, unreadable, not OTLP)."""


@dataclass(slots=True)
class Telemetry:
    spans: list[SpanView] = field(default_factory=list)
    logs: list[LogView] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    other_documents: list[tuple[str, Any]] = field(default_factory=list)

    def extend(self, other: Telemetry) -> None:
        self.spans.extend(other.spans)
        self.logs.extend(other.logs)
        self.problems.extend(other.problems)
        self.other_documents.extend(other.other_documents)


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given, and the OTLP-looking files inside folders (sorted, recursive)."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out.extend(
                sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(_SUFFIXES))
            )
        else:
            out.append(path)
    return out


def read_paths(paths: Iterable[str | Path]) -> Telemetry:
    telemetry = Telemetry()
    for path in expand_paths(paths):
        telemetry.extend(read_file(path))
    return telemetry


def read_file(path: Path) -> Telemetry:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(f"{path}: {size} bytes, over the {MAX_FILE_BYTES} byte limit")
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    return read_bytes(data, str(path))


def read_stream(stream: BinaryIO, name: str = "<stdin>") -> Telemetry:
    return read_bytes(stream.read(), name)


def read_stdin() -> Telemetry:
    return read_stream(sys.stdin.buffer)


def read_bytes(data: bytes, name: str) -> Telemetry:
    """Read one file's content: JSON (document or lines) if it looks like JSON, else protobuf."""
    stripped = data.lstrip()
    if not stripped:
        return Telemetry()
    if stripped[:1] in (b"{", b"["):
        return _read_json(data, name)
    return _read_protobuf(data, name)


def _read_json(data: bytes, name: str) -> Telemetry:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    telemetry = Telemetry()
    try:
        documents: list[tuple[str, Any]] = [(name, json.loads(text))]
    except (ValueError, RecursionError):
        documents = list(_json_lines(text, name, telemetry))
        if not documents:
            raise InputError(f"{name}: not valid JSON or JSON lines") from None
    for where, doc in documents:
        if isinstance(doc, list) and doc and all(_is_otlp(item) for item in doc):
            for item in doc:  # an array of OTLP requests
                _add_json_document(item, where, telemetry)
        else:
            _add_json_document(doc, where, telemetry)
    return telemetry


def _is_otlp(doc: Any) -> bool:
    return isinstance(doc, dict) and ("resourceSpans" in doc or "resourceLogs" in doc)


def _json_lines(text: str, name: str, telemetry: Telemetry) -> Iterator[tuple[str, Any]]:
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            yield f"{name}:{number}", json.loads(line)
        except (ValueError, RecursionError):
            telemetry.problems.append(f"{name}:{number}: not valid JSON, line skipped")


def _add_json_document(doc: Any, where: str, telemetry: Telemetry) -> None:
    if isinstance(doc, dict) and "resourceSpans" in doc:
        errors: list[str] = []
        telemetry.spans.extend(iter_json_spans(doc, errors))
        telemetry.problems.extend(f"{where}: {e}" for e in errors)
    elif isinstance(doc, dict) and "resourceLogs" in doc:
        errors = []
        telemetry.logs.extend(iter_json_logs(doc, errors))
        telemetry.problems.extend(f"{where}: {e}" for e in errors)
    else:
        # Not OTLP: kept for importers of other tools' formats (evidenceflow, tracecheck).
        telemetry.other_documents.append((where, doc))


def _read_protobuf(data: bytes, name: str) -> Telemetry:
    telemetry = Telemetry()
    traces: ExportTraceServiceRequest | None = ExportTraceServiceRequest()
    try:
        traces.ParseFromString(data)  # type: ignore[union-attr]
    except DecodeError:
        traces = None
    # A logs request parses as a traces request too (same field numbers at the top), but its
    # "spans" then have no 8-byte span id: that tells the two apart.
    if traces is not None and _looks_like_traces(traces):
        errors: list[str] = []
        telemetry.spans.extend(iter_proto_spans(traces, errors, raw=data))
        telemetry.problems.extend(f"{name}: {e}" for e in errors)
        return telemetry
    logs = ExportLogsServiceRequest()
    try:
        logs.ParseFromString(data)
    except DecodeError:
        raise InputError(f"{name}: neither OTLP JSON nor OTLP protobuf") from None
    if not _looks_like_logs(logs):
        if traces is not None and not traces.resource_spans:
            return telemetry  # an empty request
        raise InputError(f"{name}: protobuf that is not an OTLP traces or logs request")
    telemetry.logs.extend(iter_proto_logs(logs))
    return telemetry


def _looks_like_traces(request: ExportTraceServiceRequest) -> bool:
    # A logs request read as traces never has a span with both ids of the right size; one such
    # span is enough (spans with bad ids are skipped and reported, not allowed to hide the rest).
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if len(span.span_id) == 8 and len(span.trace_id) == 16:
                    return True
    return False


def _looks_like_logs(request: ExportLogsServiceRequest) -> bool:
    any_record = False
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                if record.trace_id and len(record.trace_id) != 16:
                    return False
                any_record = True
    return any_record
