"""Read a capture's OTLP/JSON and reduce it to its structure, or print it as a tree.

Structure = per span, in file order: scope, name, kind, parent's name and depth, attribute keys,
event names (and per log record: event name, attribute keys, body kind). Ids, timestamps,
latencies and values are left out, so two captures of the same run compare equal.

    python otlp_shape.py FILE.otlp.json [--tree]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def spans_of(path: Path) -> list[dict[str, Any]]:
    """All spans in file order, each with its scope name under "_scope"."""
    spans = []
    for request in _records(path):
        for resource in request.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    spans.append(dict(span, _scope=scope.get("scope", {}).get("name", "")))
    return spans


def logs_of(path: Path) -> list[dict[str, Any]]:
    logs = []
    for request in _records(path):
        for resource in request.get("resourceLogs", []):
            for scope in resource.get("scopeLogs", []):
                for record in scope.get("logRecords", []):
                    logs.append(dict(record, _scope=scope.get("scope", {}).get("name", "")))
    return logs


def _depths(spans: list[dict[str, Any]]) -> dict[str, tuple[int, str]]:
    by_id = {s["spanId"]: s for s in spans}
    out: dict[str, tuple[int, str]] = {}
    for span in spans:
        depth, parent_name, cursor = 0, "-", span.get("parentSpanId")
        if cursor in by_id:
            parent_name = by_id[cursor]["name"]
        while cursor in by_id and depth < 100:
            depth += 1
            cursor = by_id[cursor].get("parentSpanId")
        out[span["spanId"]] = (depth, parent_name)
    return out


def structure(path: Path) -> list[str]:
    if path.name.endswith(".logs.otlp.json"):
        return [
            f"log scope={r['_scope']} event={r.get('eventName', '')} "
            f"attrs={','.join(sorted(a['key'] for a in r.get('attributes', [])))} "
            f"body={','.join(sorted((r.get('body') or {}).keys()))}"
            for r in logs_of(path)
        ]
    spans = spans_of(path)
    depths = _depths(spans)
    lines = []
    for span in spans:
        depth, parent = depths[span["spanId"]]
        keys = ",".join(sorted(a["key"] for a in span.get("attributes", [])))
        events = ",".join(e.get("name", "") for e in span.get("events", []))
        lines.append(
            f"span scope={span['_scope']} name={span['name']} kind={span.get('kind', 0)} "
            f"depth={depth} parent={parent} attrs={keys} events={events}"
        )
    return lines


def diff_summary(expected: list[str], actual: list[str]) -> str | None:
    """One line saying how `actual` differs from `expected`, or None when they are equal."""
    if expected == actual:
        return None
    if len(expected) != len(actual):
        head = f"{len(expected)} -> {len(actual)} items"
    else:
        head = "same count"
    for index, (old, new) in enumerate(zip(expected, actual, strict=False)):
        if old != new:
            return f"{head}; first change at #{index}: {old!r} -> {new!r}"
    index = min(len(expected), len(actual))
    extra = (actual or expected)[index] if index < max(len(expected), len(actual)) else ""
    return f"{head}; from #{index}: {extra!r}"


def _value(value: dict[str, Any]) -> Any:
    for kind, inner in value.items():
        if kind == "arrayValue":
            return [_value(v) for v in inner.get("values", [])]
        if kind == "kvlistValue":
            return {kv["key"]: _value(kv["value"]) for kv in inner.get("values", [])}
        return inner
    return None


def tree(path: Path, width: int = 160) -> str:
    def short(value: Any) -> str:
        text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
        return text if len(text) <= width else text[:width] + f"...({len(text)} chars)"

    lines = []
    if path.name.endswith(".logs.otlp.json"):
        for r in logs_of(path):
            attrs = {a["key"]: _value(a["value"]) for a in r.get("attributes", [])}
            lines.append(
                f"LOG {r.get('eventName', '')} span={r.get('spanId', '')} "
                f"attrs={short(attrs)} body={short(_value(r.get('body') or {}))}"
            )
        return "\n".join(lines)
    spans = spans_of(path)
    depths = _depths(spans)
    for order, span in enumerate(spans):
        depth, _ = depths[span["spanId"]]
        pad = "  " * depth
        lines.append(
            f"{pad}#{order} {span['name']!r} kind={span.get('kind')} "
            f"scope={span['_scope']} id={span['spanId'][:6]} "
            f"parent={span.get('parentSpanId', '')[:6]}"
        )
        for attr in span.get("attributes", []):
            lines.append(f"{pad}    {attr['key']} = {short(_value(attr['value']))}")
        for event in span.get("events", []):
            attrs = {a["key"]: _value(a["value"]) for a in event.get("attributes", [])}
            lines.append(f"{pad}    EVENT {event.get('name')} {short(attrs)}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file", type=Path)
    parser.add_argument("--tree", action="store_true", help="print spans with values")
    ns = parser.parse_args()
    print(tree(ns.file) if ns.tree else "\n".join(structure(ns.file)))


if __name__ == "__main__":
    main()
