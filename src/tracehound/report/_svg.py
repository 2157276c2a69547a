"""The pictures of the HTML report, as inline SVG: a waterfall per trace and agent graphs.

Pure drawing: `html.py` decides what each bar and edge means (loops, errors, evidence) and
hands plain records over; everything here is geometry and escaping. No script, no external
resource: each picture is one `<svg>` element with `<title>` tooltips, and bars that link to
their timeline row.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Bar", "Edge", "Node", "agent_graph", "waterfall"]

MAX_BARS = 400
"""Waterfall rows drawn per trace (the rest are counted under the picture)."""
MAX_NODES = 60
"""Graph nodes drawn (the busiest first); the rest are counted."""

# Waterfall geometry (user units; the SVG scales to the page width).
_WIDTH = 1100
_LABEL = 260  # the label column
_ROW = 18
_BAR = 12
_AXIS = 22  # the time axis band at the top
_INDENT = 12  # per nesting level, in the label column
_NOTES = 190  # right of the plot: the marks and notes drawn after a bar that ends last

# Graph geometry.
_NODE_W = 170
_NODE_H = 26
_LAYER_GAP = 250
_NODE_GAP = 40


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _clip(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 1)] + "…"


# --- waterfall ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """One row of the waterfall: a run, an LLM call, a tool call or a retrieval."""

    kind: str  # "run" | "llm" | "tool" | "retrieval"
    label: str
    start_ns: int
    end_ns: int
    depth: int  # nesting: runs at their run depth, calls one deeper
    href: str | None = None  # the timeline row it stands for
    error: bool = False
    loop: str | None = None  # "repeat ×3", drawn on the bar
    evidence: str | None = None  # "final" (reached the answer) | "reused" | "unused"
    final: bool = False  # produced the final answer
    title: str = ""  # the tooltip


def _ticks(span_ns: int) -> list[int]:
    """Round tick positions (ns) for an axis of `span_ns`: about five of them."""
    if span_ns <= 0:
        return [0]
    raw = span_ns / 5
    step = 1
    while step * 10 <= raw:
        step *= 10
    for factor in (1, 2, 5, 10):
        if step * factor >= raw:
            step *= factor
            break
    return list(range(0, span_ns + 1, step))


def _duration(ns: int) -> str:
    seconds = ns / 1e9
    if seconds == 0:
        return "0"
    if abs(seconds) < 1:
        return f"{seconds * 1000:.0f} ms" if abs(seconds) >= 0.001 else f"{seconds * 1e6:.0f} µs"
    return f"{seconds:.1f} s" if abs(seconds) < 100 else f"{seconds:.0f} s"


def waterfall(bars: Sequence[Bar], *, label: str = "waterfall") -> str:
    """Bars on one time axis, one row each, nested by depth; findings drawn on the bars."""
    if not bars:
        return ""
    shown = list(bars[:MAX_BARS])
    start = min(b.start_ns for b in shown)
    end = max(max(b.end_ns, b.start_ns) for b in shown)
    span = max(end - start, 1)
    plot = _WIDTH - _LABEL - _NOTES
    height = _AXIS + _ROW * len(shown) + 6

    def x(ns: int) -> float:
        return _LABEL + plot * (ns - start) / span

    out = [
        f'<svg class="waterfall" role="img" aria-label="{_e(label)}" '
        f'viewBox="0 0 {_WIDTH} {height}" width="100%" preserveAspectRatio="xMinYMin meet">'
    ]
    for tick in _ticks(span):
        tx = x(start + tick)
        out.append(
            f'<line class="tick" x1="{tx:.1f}" y1="{_AXIS - 4}" x2="{tx:.1f}" y2="{height}"/>'
            f'<text class="axis" x="{tx:.1f}" y="{_AXIS - 8}">{_e(_duration(tick))}</text>'
        )
    for row, bar in enumerate(shown):
        y = _AXIS + row * _ROW
        x0 = x(bar.start_ns)
        w = max(x(max(bar.end_ns, bar.start_ns)) - x0, 2.0)
        classes = ["bar", f"b-{bar.kind}"]
        if bar.error:
            classes.append("err")
        if bar.loop:
            classes.append("loop")
        text_x = 4 + _INDENT * bar.depth
        title = bar.title or bar.label
        duration = _duration(max(bar.end_ns - bar.start_ns, 0))
        parts = [
            f'<g class="{" ".join(classes)}">',
            f"<title>{_e(title)} · {_e(duration)}</title>",
            f'<rect class="row" x="0" y="{y}" width="{_WIDTH}" height="{_ROW}"/>',
            f'<text class="lbl" x="{text_x}" y="{y + 13}">{_e(_clip(bar.label, 40 - bar.depth))}'
            "</text>",
            f'<rect class="span" x="{x0:.1f}" y="{y + 3}" width="{w:.1f}" height="{_BAR}" rx="2"/>',
        ]
        after = x0 + w + 4
        if bar.evidence is not None:
            parts.append(
                f'<circle class="ev ev-{bar.evidence}" cx="{after + 5:.1f}" cy="{y + 9}" r="4.5"/>'
            )
            after += 13
        if bar.final:
            parts.append(
                f'<path class="final" d="M{after + 5:.1f} {y + 3}l5 6l-5 6l-5 -6z"/>'
                f'<text class="note final" x="{after + 13:.1f}" y="{y + 13}">final answer</text>'
            )
            after += 84
        if bar.loop:
            parts.append(
                f'<text class="note loop" x="{after:.1f}" y="{y + 13}">⟳ {_e(bar.loop)}</text>'
            )
        elif bar.error:
            parts.append(f'<text class="note err" x="{after:.1f}" y="{y + 13}">✗ error</text>')
        parts.append("</g>")
        if bar.href:
            parts = [f'<a href="{_e(bar.href)}">', *parts, "</a>"]
        out.append("".join(parts))
    out.append("</svg>")
    more = len(bars) - len(shown)
    if more > 0:
        out.append(f'<p class="dim">… {more} more bar(s) not drawn</p>')
    return "".join(out)


# --- agent graph ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    key: str  # unique: "agent:NAME" or "tool:NAME"
    kind: str  # "agent" | "tool"
    name: str
    layer: int


@dataclass(slots=True, kw_only=True)
class Edge:
    source: str  # Node.key
    target: str
    calls: int = 0
    failed: int = 0  # calls that failed (a tool error, a nested run that errored)
    loops: int = 0  # calls flagged by the loops evaluator

    @property
    def failure_rate(self) -> float:
        return self.failed / self.calls if self.calls else 0.0


def _rate_class(rate: float) -> str:
    if rate <= 0:
        return "f0"
    if rate <= 0.25:
        return "f1"
    if rate <= 0.5:
        return "f2"
    return "f3"


def agent_graph(nodes: Sequence[Node], edges: Sequence[Edge], *, label: str = "agent graph") -> str:
    """Agents and tools as nodes in layers (by nesting), calls as edges with their counts.

    An edge's colour is its failure rate, a dashed wide stroke marks calls flagged as loops.
    """
    if not edges and not nodes:
        return ""
    busy: dict[str, int] = {}
    for edge in edges:
        busy[edge.source] = busy.get(edge.source, 0) + edge.calls
        busy[edge.target] = busy.get(edge.target, 0) + edge.calls
    kept = list(nodes)
    if len(kept) > MAX_NODES:
        kept = sorted(kept, key=lambda n: -busy.get(n.key, 0))[:MAX_NODES]
        order = {n.key: i for i, n in enumerate(nodes)}
        kept.sort(key=lambda n: order[n.key])
    keys = {n.key for n in kept}
    layers: dict[int, list[Node]] = {}
    for node in kept:
        layers.setdefault(node.layer, []).append(node)
    position: dict[str, tuple[float, float]] = {}
    for column, layer in enumerate(sorted(layers)):
        for row, node in enumerate(layers[layer]):
            position[node.key] = (10 + column * _LAYER_GAP, 10 + row * _NODE_GAP)
    width = 10 + len(layers) * _LAYER_GAP - (_LAYER_GAP - _NODE_W) + 10
    height = 10 + max(len(v) for v in layers.values()) * _NODE_GAP + 4
    looped = {e.source for e in edges if e.loops} | {e.target for e in edges if e.loops}
    out = [
        f'<svg class="graph" role="img" aria-label="{_e(label)}" viewBox="0 0 {width} {height}" '
        f'width="{min(width, 1100)}" preserveAspectRatio="xMinYMin meet">'
    ]
    for edge in edges:
        if edge.source not in keys or edge.target not in keys or edge.source == edge.target:
            continue
        (sx, sy), (tx, ty) = position[edge.source], position[edge.target]
        x1, y1 = sx + _NODE_W, sy + _NODE_H / 2
        x2, y2 = tx, ty + _NODE_H / 2
        if x2 <= x1:  # same or earlier column: leave from the bottom, arrive on top
            x1, y1 = sx + _NODE_W / 2, sy + _NODE_H
            x2, y2 = tx + _NODE_W / 2, ty
        mx = (x1 + x2) / 2
        # the count sits a third of the way along the curve: edges leave separate nodes, so
        # their labels stay apart where many edges meet one node
        t = 0.3
        lx = (1 - t) ** 3 * x1 + 3 * (1 - t) * t * mx + t**3 * x2
        ly = ((1 - t) ** 3 + 3 * (1 - t) ** 2 * t) * y1 + (3 * (1 - t) * t**2 + t**3) * y2
        classes = ["edge", _rate_class(edge.failure_rate)]
        if edge.loops:
            classes.append("loop")
        count = f"×{edge.calls}" + (f" ⟳{edge.loops}" if edge.loops else "")
        tip = (
            f"{edge.source.split(':', 1)[1]} → {edge.target.split(':', 1)[1]}: "
            f"{edge.calls} call(s), "
            f"{edge.failed} failed ({edge.failure_rate:.0%}), {edge.loops} flagged as loops"
        )
        out.append(
            f'<g class="{" ".join(classes)}"><title>{_e(tip)}</title>'
            f'<path d="M{x1:.1f} {y1:.1f}C{mx:.1f} {y1:.1f} {mx:.1f} {y2:.1f} {x2:.1f} {y2:.1f}"/>'
            f'<text x="{lx:.1f}" y="{ly - 3:.1f}">{_e(count)}</text></g>'
        )
    for node in kept:
        nx, ny = position[node.key]
        classes = ["node", f"n-{node.kind}"] + (["loop"] if node.key in looped else [])
        radius = 13 if node.kind == "tool" else 3
        out.append(
            f'<g class="{" ".join(classes)}"><title>{_e(node.kind)} {_e(node.name)}</title>'
            f'<rect x="{nx}" y="{ny}" width="{_NODE_W}" height="{_NODE_H}" rx="{radius}"/>'
            f'<text x="{nx + _NODE_W / 2}" y="{ny + 17}">{_e(_clip(node.name, 24))}</text></g>'
        )
    out.append("</svg>")
    if len(nodes) > len(kept):
        out.append(f'<p class="dim">… {len(nodes) - len(kept)} more node(s) not drawn</p>')
    return "".join(out)
