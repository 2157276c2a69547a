"""The self-contained HTML report of `tracehound eval --html FILE`.

One page with no external resource: inline CSS, inline SVG, and a few lines of inline JS (a
status filter, and opening a collapsed section when a link points into it). Every text that comes
from a trace is escaped — traces carry hostile content (tool results, web pages, user input).

The page has a header with the PASS/WARN/FAIL counts, a table of the traces, an agent graph of
all traces (edges coloured by the share of their calls that failed), and one section per trace —
open when the trace failed, collapsed otherwise — with:

- the trace results and the loop highlights, if any;
- a waterfall (`_svg.waterfall`): agent runs, LLM calls, tool calls and retrievals as bars on one
  time axis, nested by agent, with loops, errors, the evidence each tool returned (reached the
  final answer / reused by another output / unused) and the final answer drawn on the bars; each
  bar links to its timeline row;
- the trace's agent graph (`_svg.agent_graph`): agents and tools as nodes, calls as edges with
  their counts, calls flagged as loops dashed;
- the timeline of its steps (offset from the first step, nested runs indented, errors
  highlighted), each step carrying the per-span results of its span — loop results (attributes
  `tracehound.loop.*`) shown with their kind and count, any other result generically;
- the evidence flow: each tool result and retrieved document with its units marked reused by the
  final answer / reused by another output / unused, and the outputs that reused it (recomputed
  from the trajectory with the evidence evaluator's own analysis — cheap);
- the per-span results and the trace's `tracehound.*` attributes (booleans as OTel writes them,
  `true` / `false`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracehound import __version__, names
from tracehound.evaluators._evidence_index import EvidenceAnalysis, EvidenceSource, analyze_items
from tracehound.evaluators._evidence_index import summarize as summarize_evidence
from tracehound.evaluators.base import EvaluationResult
from tracehound.evaluators.evidence import trajectory_items
from tracehound.report import TraceReport, result_status
from tracehound.report._svg import Bar, Edge, Node, agent_graph, waterfall
from tracehound.steps import Run, Step, Trajectory

__all__ = ["render_html"]

# Bounds that keep a page with hundreds of long traces readable and reasonably small.
MAX_STEPS = 1000
"""Timeline rows shown per trace (the rest are counted)."""
MAX_SOURCES = 200
"""Evidence sources shown per trace."""
MAX_UNITS = 40
"""Units shown per evidence source."""
TEXT_WIDTH = 240
ARGS_WIDTH = 160
UNIT_WIDTH = 200
TOOLTIP_CHARS = 2000

LOOP_PREFIX = "tracehound.loop."
"""Per-span loop attributes (`tracehound.loop.kind`, `.count`, `.period`, `.first_span_id`, ...);
trace-level ones are `tracehound.loops.*`."""


def render_html(reports: Sequence[TraceReport], *, title: str = "tracehound report") -> str:
    """One self-contained HTML page for the reports of a `tracehound eval` run."""
    counts = {s: sum(1 for r in reports if r.status == s) for s in ("PASS", "WARN", "FAIL")}
    parts: list[str] = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n",
        "<header>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="counts"><b>{len(reports)}</b> trace(s): '
        + " ".join(f'<span class="st st-{s}">{counts[s]} {s}</span>' for s in counts)
        + f' <span class="dim">· tracehound {_e(__version__)}</span></p>',
        '<nav class="filter">show: <button type="button" data-show="">all</button>'
        + "".join(f'<button type="button" data-show="{s}">{s}</button>' for s in counts)
        + "</nav>",
        "</header>\n<main>\n",
    ]
    if not reports:
        parts.append('<p class="dim">no traces</p>\n')
    else:
        parts.append(_overview(reports))
        parts.append(_all_traces_graph(reports))
        single = len(reports) == 1
        for n, report in enumerate(reports):
            parts.append(_trace_section(n, report, open_=single or report.status == "FAIL"))
    parts.append(f"</main>\n<script>{_JS}</script>\n</body>\n</html>\n")
    return "".join(parts)


# --- small helpers --------------------------------------------------------------------------------


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, width: int) -> str:
    flat = _flat(text)
    return flat if len(flat) <= width else flat[: max(width - 1, 1)] + "…"


def _text(text: str | None, width: int) -> str:
    """Escaped, clipped to `width`; the start of the full text as a tooltip when clipped."""
    if not text:
        return ""
    short = _clip(text, width)
    if short == _flat(text):
        return _e(short)
    full = text if len(text) <= TOOLTIP_CHARS else text[:TOOLTIP_CHARS] + "…"
    return f'<span title="{_e(full)}">{_e(short)}</span>'


def _score(value: float | None) -> str:
    if value is None:
        return "–"
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.2f}"


def _short(name: str) -> str:
    return name.removeprefix("tracehound.")


def _offset(ns: int, start: int) -> str:
    seconds = (ns - start) / 1e9
    return f"{seconds:+.3f}s" if abs(seconds) < 1000 else f"{seconds:+.0f}s"


def _status_badge(status: str) -> str:
    return f'<span class="st st-{_e(status)}">{_e(status)}</span>'


def _is_loop(result: EvaluationResult) -> bool:
    """A per-span loop result: named `tracehound.loop`, or carrying `tracehound.loop.*`."""
    return result.name == names.EVAL_LOOP or any(
        k.startswith(LOOP_PREFIX) for k in result.attributes
    )


def _loop_kind_count(result: EvaluationResult) -> tuple[str, str | None]:
    """The loop kind (attribute, else the label) and its count (attribute only)."""
    kind = result.attributes.get(names.ATTR_LOOP_KIND) or result.score_label or "loop"
    count = result.attributes.get(names.ATTR_LOOP_COUNT)
    return str(kind), None if count is None else str(count)


def _main_loop(loops: Sequence[EvaluationResult]) -> EvaluationResult:
    """Of a span's loop results, the one that carries the span's attributes (the main kind)."""
    return next((r for r in loops if names.ATTR_LOOP_KIND in r.attributes), loops[0])


def _attr_value(value: Any) -> str:
    """An attribute value as OTel writes it: `true` / `false`, lists comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ", ".join(_attr_value(v) for v in value)
    return str(value)


# --- overview -------------------------------------------------------------------------------------


def _top_agent(trajectory: Trajectory) -> str:
    return trajectory.runs[0].agent_name if trajectory.runs else "-"


def _key_scores(report: TraceReport) -> str:
    out = []
    for result in report.trace_results:
        if result.score_value is None and not result.score_label and not result.error_type:
            continue
        label = result.score_label or result.error_type or ""
        out.append(
            f'<span class="sc st-{result_status(result)}" title="{_e(result.explanation or "")}">'
            f"{_e(_short(result.name))} <b>{_e(_score(result.score_value))}</b>"
            f"{' ' + _e(label) if label else ''}</span>"
        )
    return " ".join(out)


def _overview(reports: Sequence[TraceReport]) -> str:
    rows = []
    for n, report in enumerate(reports):
        t = report.trace.trajectory
        rows.append(
            f'<tr data-status="{_e(report.status)}"><td>{_status_badge(report.status)}</td>'
            f'<td><a class="id" href="#t{n}">{_e(report.trace_id)}</a></td>'
            f"<td>{_e(_top_agent(t))}</td><td>{_e(', '.join(t.conventions) or '-')}</td>"
            f'<td class="num">{len(t.steps)}</td><td>{_key_scores(report)}</td></tr>'
        )
    return (
        '<table class="traces"><thead><tr><th>status</th><th>trace</th><th>agent</th>'
        "<th>conventions</th><th>steps</th><th>key scores</th></tr></thead><tbody>\n"
        + "\n".join(rows)
        + "\n</tbody></table>\n"
    )


# --- evidence flow ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Flow:
    """The evidence analysis of one trajectory, with item positions mapped back to steps."""

    analysis: EvidenceAnalysis
    summary: dict[str, Any]
    final: int | None
    step_of: list[int | None]  # item position -> step index (None: the declared final answer)
    sources_at: dict[int, list[EvidenceSource]] = field(default_factory=dict)
    reused_by_output: dict[int, list[int]] = field(default_factory=dict)  # step -> unit ids

    def final_step(self) -> int | None:
        return None if self.final is None else self.step_of[self.final]

    def unit_states(self, source: EvidenceSource) -> list[str]:
        """Per unit: `final` (reused by the final answer), `reused` (by another output) or
        `unused`."""
        out = []
        for positions in source.reuse_positions:
            if self.final is not None and self.final > source.position and self.final in positions:
                out.append("final")
            elif positions:
                out.append("reused")
            else:
                out.append("unused")
        return out


def _step_index(key: str, steps: Sequence[Step]) -> int | None:
    """The step an evidence item key (`SPAN#INDEX`, `SPAN#INDEX.DOC`) belongs to."""
    span_id, sep, rest = key.rpartition("#")
    number = rest.split(".", 1)[0]
    if not sep or not number.isdigit():
        return None
    index = int(number)
    if index < len(steps) and steps[index].span_id == span_id:
        return index
    return None


def _evidence_flow(trajectory: Trajectory) -> _Flow:
    items, keys, final = trajectory_items(trajectory)
    analysis = analyze_items(items, final)
    summary = summarize_evidence(analysis, keys)
    step_of = [_step_index(key, trajectory.steps) for key in keys]
    flow = _Flow(analysis, summary, final, step_of)
    for source in analysis.sources:
        step = step_of[source.position]
        if step is not None:
            flow.sources_at.setdefault(step, []).append(source)
    for position, unit_ids in analysis.reusing_positions.items():
        step = step_of[position]
        if step is not None:
            flow.reused_by_output[step] = unit_ids
    return flow


def _step_link(n: int, step: int | None) -> str:
    """A link to a step of trace `n` (plain text past the steps the timeline shows)."""
    if step is None:
        return "final answer"
    if step >= MAX_STEPS:
        return f"#{step}"
    return f'<a href="#t{n}-s{step}">#{step}</a>'


def _source_name(source: EvidenceSource) -> str:
    if source.source_type == "retrieval":
        return f"document · {source.source or 'retrieval'}"
    return f"tool result · {source.tool or '?'}"


def _evidence_section(n: int, flow: _Flow, trajectory: Trajectory) -> str:
    summary = flow.summary
    sources = flow.analysis.sources
    if not sources:
        return (
            '<p class="dim">no evidence: no tool result or retrieved document with text in this '
            "trace</p>"
        )
    final_step = flow.final_step()
    answer = trajectory.final_answer()
    out = [
        f"<p>{summary['reused_units']} of {summary['evidence_units']} evidence unit(s) reused "
        f"({summary['overall_survival_ratio']:.0%}); <b>{summary['final_reused_units']}</b> "
        f"reach the final answer ({summary['final_answer_survival_ratio']:.0%}) · "
        f"{summary['apparently_unused_sources']} unused source(s) of {len(sources)}</p>",
    ]
    if answer is not None:
        where = _step_link(n, final_step) if final_step is not None else "declared output"
        out.append(f'<p class="answer">final answer ({where}): {_text(answer, TEXT_WIDTH)}</p>')
    else:
        out.append('<p class="dim">no final answer</p>')
    groups = summary["repeated_evidence_groups"]
    if groups:
        listed = "; ".join(", ".join(_e(g) for g in group) for group in groups[:20])
        out.append(f'<p class="dim">sources repeating each other: {listed}</p>')
    out.append(
        '<p class="legend"><span class="u final">reused by the final answer</span> '
        '<span class="u reused">reused by another output</span> '
        '<span class="u unused">unused</span></p>'
    )
    for source in sources[:MAX_SOURCES]:
        out.append(_source_block(n, flow, source))
    if len(sources) > MAX_SOURCES:
        out.append(f'<p class="dim">… {len(sources) - MAX_SOURCES} more source(s)</p>')
    return "\n".join(out)


def _source_block(n: int, flow: _Flow, source: EvidenceSource) -> str:
    states = flow.unit_states(source)
    reused = sum(1 for s in states if s != "unused")
    final = sum(1 for s in states if s == "final")
    readers = sorted({p for positions in source.reuse_positions for p in positions})
    by = ", ".join(
        _step_link(n, flow.step_of[p])
        + (" (final)" if p == flow.final and flow.step_of[p] is not None else "")
        for p in readers
    )
    cls = "src unused" if not reused else ("src final" if final else "src reused")
    head = (
        f'<div class="{cls}"><div class="srchead">{_step_link(n, flow.step_of[source.position])} '
        f"<b>{_e(_source_name(source))}</b> <code>{_e(source.evidence_id)}</code> — "
        f"{reused}/{len(states)} unit(s) reused, {final} by the final answer"
        + (f" · reused by {by}" if by else " · <b>never reused</b>")
        + "</div>"
    )
    if not source.units:
        return head + '<p class="dim">no evidence unit (too short to match)</p></div>'
    items = []
    for unit, state, positions in zip(
        source.units[:MAX_UNITS], states, source.reuse_positions, strict=False
    ):
        readers_of = ", ".join(_step_link(n, flow.step_of[p]) for p in sorted(set(positions)))
        items.append(
            f'<li class="u {state}">{_text(unit.text, UNIT_WIDTH)}'
            + (f' <span class="by">→ {readers_of}</span>' if readers_of else "")
            + "</li>"
        )
    more = len(source.units) - MAX_UNITS
    if more > 0:
        items.append(f'<li class="dim">… {more} more unit(s)</li>')
    return head + '<ol class="units">' + "".join(items) + "</ol></div>"


# --- timeline -------------------------------------------------------------------------------------


def _describe(step: Step) -> str:
    kind = step.kind
    if kind == "agent":
        return _e(step.agent or "")
    if kind == "llm":
        bits = [_e(step.model or "?")]
        if step.input_tokens is not None:
            bits.append(f"in={step.input_tokens}")
        if step.output_tokens is not None:
            bits.append(f"out={step.output_tokens}")
        if step.finish_reason:
            bits.append(f"finish={_e(step.finish_reason)}")
        return " ".join(bits)
    if kind == "tool_call":
        call = f' <span class="dim">[{_e(step.call_id)}]</span>' if step.call_id else ""
        return (
            f"<b>{_e(step.tool or '?')}</b>(<code>{_text(step.arguments, ARGS_WIDTH)}</code>){call}"
        )
    if kind == "tool_result":
        if step.error:
            error = _text(step.error, TEXT_WIDTH)
            return f'<b>{_e(step.tool or "?")}</b> <span class="errtext">✗ {error}</span>'
        if step.text is None:
            return f'<b>{_e(step.tool or "?")}</b> → <span class="dim">no content</span>'
        return (
            f'<b>{_e(step.tool or "?")}</b> → <span class="dim">{len(step.text)} chars</span> '
            f"{_text(step.text, TEXT_WIDTH)}"
        )
    if kind == "retrieval":
        return (
            f"<b>{_e(step.source or '?')}</b>: {len(step.documents)} document(s) for "
            f"“{_text(step.text, ARGS_WIDTH)}”"
        )
    if kind == "error":
        return f'<span class="errtext">{_text(step.error, TEXT_WIDTH)}</span>'
    return _text(step.text, TEXT_WIDTH)


def _result_badge(result: EvaluationResult) -> str:
    label = result.score_label or result.error_type or ""
    return (
        f'<span class="r st-{result_status(result)}" title="{_e(result.explanation or "")}">'
        f"{_e(_short(result.name))} {_e(_score(result.score_value))}"
        f"{' ' + _e(label) if label else ''}</span>"
    )


def _loop_badge(loops: Sequence[EvaluationResult]) -> str:
    """One mark for the loop results of a step: main kind ×count, the other kinds after it."""
    main = _main_loop(loops)
    kind, count = _loop_kind_count(main)
    others = [_loop_kind_count(r)[0] for r in loops if r is not main]
    details = [
        f"{_short(k)}={_attr_value(v)}"
        for k, v in main.attributes.items()
        if k.startswith(LOOP_PREFIX)
    ]
    details.extend(
        r.explanation for r in [main, *(r for r in loops if r is not main)] if r.explanation
    )
    return (
        f'<span class="loopmark" title="{_e(chr(10).join(details))}">⟳ {_e(kind)}'
        f"{' ×' + _e(count) if count is not None else ''}"
        f"{' (+' + _e(', '.join(others)) + ')' if others else ''}</span>"
    )


def _span_steps(trajectory: Trajectory) -> dict[str, int]:
    """For each span, the step that stands for it.

    That is its `llm`, `tool_call` (also through `exec_span_id`: a call seen in an LLM output and
    executed by a tool span), `retrieval` or `agent` step, else its first step.
    """
    first: dict[str, int] = {}
    preferred: dict[str, int] = {}
    for index, step in enumerate(trajectory.steps):
        first.setdefault(step.span_id, index)
        if step.kind in ("llm", "retrieval", "agent"):
            preferred.setdefault(step.span_id, index)
        if step.kind == "tool_call":
            preferred.setdefault(step.exec_span_id or step.span_id, index)
    return {**first, **preferred}


def _results_by_step(
    span_steps: Mapping[str, int], results: Sequence[EvaluationResult]
) -> dict[int, list[EvaluationResult]]:
    """The per-span results attached to the step of their span (spans without a step: none)."""
    attached: dict[int, list[EvaluationResult]] = {}
    for result in results:
        at = span_steps.get(result.span_id or "")
        if at is not None:
            attached.setdefault(at, []).append(result)
    return attached


def _timeline(
    n: int,
    trajectory: Trajectory,
    attached: Mapping[int, list[EvaluationResult]],
    flow: _Flow | None,
) -> str:
    steps = trajectory.steps
    if not steps:
        return '<p class="dim">no GenAI step</p>'
    runs: dict[str, Run] = {r.run_id: r for r in trajectory.runs}
    seen_runs: set[str] = set()
    start = min(s.start_ns for s in steps)
    final_step = flow.final_step() if flow is not None else None
    rows: list[str] = []
    current: str | None = None
    for index, step in enumerate(steps[:MAX_STEPS]):
        run = runs.get(step.run_id)
        depth = run.depth if run is not None else 0
        if step.run_id != current:
            current = step.run_id
            rows.append(_run_row(run, step.run_id, depth, again=step.run_id in seen_runs))
            seen_runs.add(step.run_id)
        results = attached.get(index, [])
        loops = [r for r in results if _is_loop(r)]
        marks = [_loop_badge(loops)] if loops else []
        marks.extend(_result_badge(r) for r in results if not _is_loop(r))
        if flow is not None:
            marks.extend(_evidence_marks(flow, index))
        if index == final_step:
            marks.append('<span class="mark final">final answer</span>')
        classes = [f"k-{step.kind}"]
        if step.error or step.kind == "error":
            classes.append("err")
        if loops:
            classes.append("loop")
        rows.append(
            f'<tr id="t{n}-s{index}" class="{" ".join(classes)}"><td class="num">{index}</td>'
            f'<td class="off">{_offset(step.start_ns, start)}</td>'
            f'<td><span class="kind">{_e(step.kind)}</span></td>'
            f'<td class="d" style="padding-left:{0.4 + 1.4 * depth:.1f}em">{_describe(step)}</td>'
            f'<td class="m">{" ".join(marks)}</td></tr>'
        )
    if len(steps) > MAX_STEPS:
        rows.append(
            f'<tr><td colspan="5" class="dim">… {len(steps) - MAX_STEPS} more step(s) '
            "not shown</td></tr>"
        )
    return (
        '<table class="timeline"><thead><tr><th>#</th><th>offset</th><th>kind</th><th>step</th>'
        "<th>results</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _run_row(run: Run | None, run_id: str, depth: int, *, again: bool) -> str:
    if run is None:
        label = f"run {_e(run_id or '-')}"
    else:
        kind = "trace" if run.implicit else "agent"
        label = (
            f"{'back in ' if again else ''}run <b>{_e(run.agent_name)}</b> "
            f'<span class="dim">({kind}, span {_e(run.span_id or "-")})</span>'
        )
    pad = 0.4 + 1.4 * depth
    return f'<tr class="run"><td colspan="5" style="padding-left:{pad:.1f}em">└ {label}</td></tr>'


def _evidence_marks(flow: _Flow, index: int) -> list[str]:
    marks = []
    for source in flow.sources_at.get(index, ()):
        states = flow.unit_states(source)
        reused = sum(1 for s in states if s != "unused")
        final = sum(1 for s in states if s == "final")
        cls = "unused" if not reused else ("final" if final else "reused")
        text = (
            f"evidence {reused}/{len(states)} reused, {final} in final"
            if reused
            else f"evidence unused (0/{len(states)})"
        )
        marks.append(f'<span class="mark {cls}">{_e(text)}</span>')
    unit_ids = flow.reused_by_output.get(index)
    if unit_ids:
        index_ = flow.analysis.index
        origins = sorted({_origin(index_.owner(u)) for u in unit_ids})
        marks.append(
            f'<span class="mark reuse">↩ reuses {len(unit_ids)} unit(s) from '
            f"{_e(', '.join(origins))}</span>"
        )
    return marks


def _origin(source: EvidenceSource) -> str:
    return source.tool or source.source or source.source_type


# --- pictures: waterfall and agent graph ----------------------------------------------------------


def _loop_label(loops: Sequence[EvaluationResult]) -> str | None:
    if not loops:
        return None
    kind, count = _loop_kind_count(_main_loop(loops))
    return kind + (f" ×{count}" if count is not None else "")


def _source_state(flow: _Flow | None, index: int | None) -> str | None:
    """`final` / `reused` / `unused` for the evidence a step brought, None when it brought none."""
    if flow is None or index is None or index not in flow.sources_at:
        return None
    states = {s for source in flow.sources_at[index] for s in flow.unit_states(source)}
    if "final" in states:
        return "final"
    return "reused" if "reused" in states else "unused"


def _tool_results(steps: Sequence[Step]) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """Tool results by (run, call id) and by the span that ran them."""
    by_call: dict[tuple[str, str], int] = {}
    by_span: dict[str, int] = {}
    for index, step in enumerate(steps):
        if step.kind == "tool_result":
            if step.call_id:
                by_call.setdefault((step.run_id, step.call_id), index)
            by_span.setdefault(step.span_id, index)
    return by_call, by_span


def _result_of(
    step: Step, by_call: Mapping[tuple[str, str], int], by_span: Mapping[str, int]
) -> int | None:
    found = by_call.get((step.run_id, step.call_id)) if step.call_id else None
    if found is None and step.exec_span_id:
        found = by_span.get(step.exec_span_id)
    return found


def _waterfall_bars(
    n: int,
    trajectory: Trajectory,
    attached: Mapping[int, list[EvaluationResult]],
    flow: _Flow | None,
) -> list[Bar]:
    """Runs, LLM calls, tool calls and retrievals as bars, each run followed by what it did
    (nested runs where they started), with loops, errors and evidence on them."""
    steps = trajectory.steps[:MAX_STEPS]
    final_step = flow.final_step() if flow is not None else None
    final_span = (
        steps[final_step].span_id if final_step is not None and final_step < len(steps) else None
    )
    by_call, by_span = _tool_results(steps)
    paired: set[int] = set()
    own: dict[str, list[tuple[int, int, Bar]]] = {}
    failed_runs: set[str] = set()
    runs = {r.run_id: r for r in trajectory.runs}

    def depth(step: Step) -> int:
        run = runs.get(step.run_id)
        return (run.depth if run is not None else 0) + 1

    def loops_at(*indexes: int | None) -> list[EvaluationResult]:
        return [r for i in indexes if i is not None for r in attached.get(i, ()) if _is_loop(r)]

    # Loop results of a call may sit on the LLM span that asked for it (the span that completes
    # the loop): they belong to the tool bars of that span, not to the LLM bar.
    calls_in_llm_span = {s.span_id for s in steps if s.kind == "tool_call"}
    llm_at = {s.span_id: i for i, s in enumerate(steps) if s.kind == "llm"}
    for index, step in enumerate(steps):
        if step.error or step.kind == "error":
            failed_runs.add(step.run_id)
        bar: Bar | None = None
        href = f"#t{n}-s{index}"
        if step.kind == "llm":
            tokens = " ".join(
                f"{k}={v}"
                for k, v in (("in", step.input_tokens), ("out", step.output_tokens))
                if v is not None
            )
            bar = Bar(
                kind="llm",
                label=step.model or "llm call",
                start_ns=step.start_ns,
                end_ns=step.end_ns,
                depth=depth(step),
                href=href,
                error=bool(step.error),
                loop=None if step.span_id in calls_in_llm_span else _loop_label(loops_at(index)),
                final=step.span_id == final_span,
                title=f"LLM call {step.model or ''} {tokens}".strip(),
            )
        elif step.kind == "tool_call":
            result_at = _result_of(step, by_call, by_span)
            result = steps[result_at] if result_at is not None else None
            start, end = step.start_ns, step.end_ns
            if result is not None:
                paired.add(result_at or 0)
                if result.end_ns > result.start_ns:  # the span that ran the tool
                    start, end = result.start_ns, result.end_ns
                else:  # raw client: from the call to the result's arrival
                    end = max(result.end_ns, start)
            error = result is not None and bool(result.error)
            title = f"{step.tool or '?'}({_clip(step.arguments or '', ARGS_WIDTH)})"
            if error and result is not None:
                title += f" → error: {_clip(result.error or '', TEXT_WIDTH)}"
            bar = Bar(
                kind="tool",
                label=step.tool or "tool",
                start_ns=start,
                end_ns=end,
                depth=depth(step),
                href=href,
                error=error,
                loop=_loop_label(loops_at(index, result_at, llm_at.get(step.span_id))),
                evidence=_source_state(flow, result_at),
                title=title,
            )
        elif step.kind == "tool_result" and index not in paired and step.end_ns > step.start_ns:
            bar = Bar(
                kind="tool",
                label=step.tool or "tool",
                start_ns=step.start_ns,
                end_ns=step.end_ns,
                depth=depth(step),
                href=href,
                error=bool(step.error),
                loop=_loop_label(loops_at(index)),
                evidence=_source_state(flow, index),
                title=f"{step.tool or '?'} (result)",
            )
        elif step.kind == "retrieval":
            bar = Bar(
                kind="retrieval",
                label=step.source or "retrieval",
                start_ns=step.start_ns,
                end_ns=step.end_ns,
                depth=depth(step),
                href=href,
                evidence=_source_state(flow, index),
                title=f"retrieval: {len(step.documents)} document(s) for "
                f"{_clip(step.text or '', ARGS_WIDTH)}",
            )
        if bar is not None:
            own.setdefault(step.run_id, []).append((bar.start_ns, index, bar))
    first_step: dict[str, int] = {}
    for index, step in enumerate(steps):
        first_step.setdefault(step.run_id, index)
    children: dict[str | None, list[Run]] = {}
    for run in trajectory.runs:
        parent = run.parent_run_id if run.parent_run_id in runs else None
        children.setdefault(parent, []).append(run)
    out: list[Bar] = []

    def emit(run: Run) -> None:
        mine = own.get(run.run_id, [])
        start = run.start_ns or min((b.start_ns for _, _, b in mine), default=0)
        end = max(run.end_ns, max((b.end_ns for _, _, b in mine), default=0))
        at = first_step.get(run.run_id)
        out.append(
            Bar(
                kind="run",
                label=run.agent_name,
                start_ns=start,
                end_ns=end,
                depth=run.depth,
                href=f"#t{n}-s{at}" if at is not None else None,
                error=run.run_id in failed_runs,
                title=f"{'trace' if run.implicit else 'agent'} run {run.agent_name}",
            )
        )
        items: list[tuple[int, int, Bar | Run]] = [*mine]
        items.extend((child.start_ns, -1, child) for child in children.get(run.run_id, ()))
        for _, _, item in sorted(items, key=lambda t: (t[0], t[1])):
            if isinstance(item, Bar):
                out.append(item)
            else:
                emit(item)

    for root in children.get(None, ()):
        emit(root)
    return out


class _Graph:
    """Agents and tools as nodes, calls as edges: for one trace, or summed over many."""

    def __init__(self) -> None:
        self.kinds: dict[str, str] = {}  # node key -> kind, in first-seen order
        self.depth: dict[str, int] = {}  # agent key -> smallest run depth
        self.edges: dict[tuple[str, str], Edge] = {}

    def _edge(self, source: str, target: str) -> Edge:
        edge = self.edges.get((source, target))
        if edge is None:
            edge = self.edges[(source, target)] = Edge(source=source, target=target)
        return edge

    def add(self, trajectory: Trajectory, attached: Mapping[int, list[EvaluationResult]]) -> None:
        runs = {r.run_id: r for r in trajectory.runs}
        for run in trajectory.runs:
            key = f"agent:{run.agent_name}"
            self.kinds.setdefault(key, "agent")
            self.depth[key] = min(self.depth.get(key, run.depth), run.depth)
        failed = {s.run_id for s in trajectory.steps if s.error or s.kind == "error"}
        for run in trajectory.runs:
            parent = runs.get(run.parent_run_id or "")
            if parent is not None:
                edge = self._edge(f"agent:{parent.agent_name}", f"agent:{run.agent_name}")
                edge.calls += 1
                edge.failed += run.run_id in failed
        steps = trajectory.steps
        by_call, by_span = _tool_results(steps)
        llm_at = {s.span_id: i for i, s in enumerate(steps) if s.kind == "llm"}
        for index, step in enumerate(steps):
            if step.kind != "tool_call":
                continue
            owner = runs.get(step.run_id)
            caller = f"agent:{owner.agent_name}" if owner is not None else "agent:?"
            self.kinds.setdefault(caller, "agent")
            tool = f"tool:{step.tool or '?'}"
            self.kinds.setdefault(tool, "tool")
            result_at = _result_of(step, by_call, by_span)
            edge = self._edge(caller, tool)
            edge.calls += 1
            edge.failed += result_at is not None and bool(steps[result_at].error)
            # a call's loop results may sit on the LLM span that asked for it
            at = (index, result_at, llm_at.get(step.span_id))
            looped = any(_is_loop(r) for i in at if i is not None for r in attached.get(i, ()))
            edge.loops += looped

    def render(self, label: str) -> str:
        layer = {k: self.depth.get(k, 0) for k, kind in self.kinds.items() if kind == "agent"}
        for (source, target), _ in self.edges.items():
            if self.kinds.get(target) == "tool":
                layer[target] = max(layer.get(target, 0), layer.get(source, 0) + 1)
        nodes = [
            Node(key=k, kind=kind, name=k.split(":", 1)[1], layer=layer.get(k, 0))
            for k, kind in self.kinds.items()
        ]
        return agent_graph(nodes, list(self.edges.values()), label=label)


_GRAPH_LEGEND = (
    '<p class="legend">edges: calls (×count) · colour: share of calls that failed '
    '<span class="sw f0"></span>none <span class="sw f1"></span>≤ 25 % '
    '<span class="sw f2"></span>≤ 50 % <span class="sw f3"></span>more · '
    '<span class="loopmark">⟳ dashed</span> calls flagged as loops</p>'
)
_WATERFALL_LEGEND = (
    '<p class="legend"><span class="sw b-run"></span>agent run <span class="sw b-llm"></span>LLM '
    'call <span class="sw b-tool"></span>tool call <span class="sw b-retrieval"></span>retrieval '
    '<span class="sw loop"></span>loop <span class="sw err"></span>error · evidence it returned: '
    '<span class="dot ev-final"></span>reached the final answer <span class="dot ev-reused">'
    '</span>reused by another output <span class="dot ev-unused"></span>unused · ◆ final answer'
    "</p>"
)


def _all_traces_graph(reports: Sequence[TraceReport]) -> str:
    graph = _Graph()
    for report in reports:
        t = report.trace.trajectory
        graph.add(t, _results_by_step(_span_steps(t), report.span_results))
    if not graph.edges:
        return ""
    return (
        f"<h2>agents and tools, {len(reports)} trace(s)</h2>"
        + _GRAPH_LEGEND
        + graph.render("agent graph of all traces")
    )


# --- per trace ------------------------------------------------------------------------------------


def _results_table(results: Sequence[EvaluationResult], n: int, steps: Mapping[str, int]) -> str:
    rows = []
    for result in results:
        span = result.span_id or ""
        at = f" {_step_link(n, steps[span])}" if span in steps else ""
        label = result.score_label or ""
        if result.error_type:
            label = f"{label} error: {result.error_type}".strip()
        rows.append(
            f"<tr><td>{_status_badge(result_status(result))}</td><td>{_e(result.evaluator)}</td>"
            f'<td>{_e(result.name)}</td><td class="num">{_e(_score(result.score_value))}</td>'
            f"<td>{_e(label)}</td><td>{_text(result.explanation, 1000)}</td>"
            f'<td class="dim">{_e(span)}{at}</td></tr>'
        )
    return (
        '<table class="results"><thead><tr><th>status</th><th>evaluator</th><th>name</th>'
        "<th>score</th><th>label</th><th>explanation</th><th>span</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


_LOOP_SHOWN = frozenset(
    (names.ATTR_LOOP_DETECTED, names.ATTR_LOOP_KIND, names.ATTR_LOOP_KINDS, names.ATTR_LOOP_COUNT)
)


def _loops_section(
    n: int,
    attached: Mapping[int, list[EvaluationResult]],
    steps: Sequence[Step],
    step_of_span: Mapping[str, int],
) -> str:
    """One line per step where loops complete: kind ×count, other kinds, first occurrence."""
    rows = []
    for index in sorted(attached):
        loops = [r for r in attached[index] if _is_loop(r)]
        if not loops:
            continue
        main = _main_loop(loops)
        kind, count = _loop_kind_count(main)
        others = [_loop_kind_count(r)[0] for r in loops if r is not main]
        first = main.attributes.get(names.ATTR_LOOP_FIRST_SPAN_ID)
        extra = [
            f"{k.removeprefix(LOOP_PREFIX)}={_attr_value(v)}"
            for k, v in main.attributes.items()
            if k.startswith(LOOP_PREFIX)
            and k not in _LOOP_SHOWN
            and k != names.ATTR_LOOP_FIRST_SPAN_ID
        ]
        step = steps[index]
        what = step.tool or step.model or step.kind
        first_at = ""
        if isinstance(first, str) and first:
            where = step_of_span.get(first)
            first_at = " · first at " + (_step_link(n, where) if where is not None else _e(first))
        rows.append(
            f'<li>{_step_link(n, index)} <span class="loopmark">⟳ {_e(kind)}'
            f"{' ×' + _e(count) if count is not None else ''}</span> <b>{_e(what)}</b>"
            + (f" (also {_e(', '.join(others))})" if others else "")
            + first_at
            + (f' <span class="dim">{_text(", ".join(extra), ARGS_WIDTH)}</span>' if extra else "")
            + (f" — {_text(main.explanation, TEXT_WIDTH)}" if main.explanation else "")
            + "</li>"
        )
    if not rows:
        return ""
    return (
        f'<h3>loop highlights ({len(rows)} step(s))</h3><ul class="loops">'
        + "".join(rows)
        + "</ul>"
    )


def _pictures(
    n: int,
    trajectory: Trajectory,
    attached: Mapping[int, list[EvaluationResult]],
    flow: _Flow | None,
) -> str:
    bars = _waterfall_bars(n, trajectory, attached, flow)
    if not bars:
        return ""
    graph = _Graph()
    graph.add(trajectory, attached)
    out = [
        "<h3>waterfall</h3>",
        _WATERFALL_LEGEND,
        waterfall(bars, label=f"waterfall of trace {n}"),
    ]
    if graph.edges:
        out += ["<h3>agent graph</h3>", graph.render(f"agent graph of trace {n}")]
    return "".join(out)


def _trace_section(n: int, report: TraceReport, *, open_: bool) -> str:
    trace = report.trace
    t = trace.trajectory
    step_of_span = _span_steps(t)
    attached = _results_by_step(step_of_span, report.span_results)
    flow: _Flow | None
    try:
        flow = _evidence_flow(t)
        evidence = _evidence_section(n, flow, t)
    except Exception as exc:  # a report must not fail on one odd trace
        flow = None
        evidence = (
            f'<p class="errtext">evidence analysis failed: {_e(type(exc).__name__)}: {_e(exc)}</p>'
        )
    flags = []
    if trace.truncated:
        flags.append('<span class="st st-WARN">truncated</span>')
    loop_steps = sum(1 for rs in attached.values() if any(_is_loop(r) for r in rs))
    if loop_steps:
        flags.append(f'<span class="loopmark">⟳ loops at {loop_steps} step(s)</span>')
    summary = (
        f'{_status_badge(report.status)} <span class="id">{_e(report.trace_id)}</span> · '
        f"{_e(_top_agent(t))} · {_e(', '.join(t.conventions) or 'no GenAI spans')} · "
        f"{len(t.steps)} step(s) · {trace.span_count} span(s) {' '.join(flags)}"
    )
    body = [
        f'<details class="trace" id="t{n}" data-status="{_e(report.status)}"'
        + (" open" if open_ else "")
        + f'><summary>{summary}</summary>\n<div class="body">',
        "<h3>results</h3>",
        _results_table(report.trace_results, n, step_of_span)
        if report.trace_results
        else '<p class="dim">no trace result</p>',
        _loops_section(n, attached, t.steps, step_of_span),
        _pictures(n, t, attached, flow),
        f"<h3>timeline ({len(t.steps)} step(s), {len(t.runs)} run(s))</h3>",
        _timeline(n, t, attached, flow),
        "<h3>evidence flow</h3>",
        evidence,
    ]
    if report.span_results:
        body.append(
            f"<details><summary>per-span results ({len(report.span_results)})</summary>"
            + _results_table(report.span_results, n, step_of_span)
            + "</details>"
        )
    attributes = report.attributes
    if attributes:
        rows = "".join(
            f"<tr><td><code>{_e(k)}</code></td><td>{_text(_attr_value(v), 400)}</td></tr>"
            for k, v in sorted(attributes.items())
        )
        body.append(
            f"<details><summary>trace attributes ({len(attributes)})</summary>"
            f'<table class="attrs">{rows}</table></details>'
        )
    if t.problems:
        body.append(
            "<h3>mapping problems</h3><ul>"
            + "".join(f"<li>{_text(p, 400)}</li>" for p in t.problems)
            + "</ul>"
        )
    body.append("</div></details>\n")
    return "\n".join(part for part in body if part)


# --- static assets ------------------------------------------------------------------------------

_CSS = """
:root{--pass:#1a7f37;--warn:#9a6700;--fail:#cf222e;--dim:#6e7781;--line:#d0d7de;--bg2:#f6f8fa}
body{font:13px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1400px;
padding:0 1em 3em;color:#1f2328}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid var(--line);padding:.4em 0;
z-index:1}
h1{font-size:1.3em;margin:.2em 0}h3{font-size:1em;margin:1em 0 .3em}
[id]{scroll-margin-top:5em}
table{border-collapse:collapse;width:100%;margin:.3em 0}
th,td{border-bottom:1px solid var(--line);padding:.15em .4em;text-align:left;vertical-align:top}
th{background:var(--bg2);font-weight:600}
code,.id,.off,.num{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.num,.off{text-align:right;white-space:nowrap}
.dim{color:var(--dim)}
.st{display:inline-block;padding:0 .45em;border-radius:3px;color:#fff;font-weight:600;
font-size:11px}
.st-PASS{background:var(--pass)}.st-WARN{background:var(--warn)}.st-FAIL{background:var(--fail)}
.sc,.r,.mark,.loopmark{display:inline-block;border-radius:3px;padding:0 .35em;margin:1px;
font-size:11px;border:1px solid var(--line);background:var(--bg2);white-space:nowrap}
.sc.st-PASS,.r.st-PASS{color:var(--pass);background:#dafbe1}
.sc.st-WARN,.r.st-WARN{color:var(--warn);background:#fff8c5}
.sc.st-FAIL,.r.st-FAIL{color:var(--fail);background:#ffebe9}
.filter button{font:inherit;font-size:11px;margin-left:.3em;cursor:pointer}
details.trace{border:1px solid var(--line);border-radius:4px;margin:.4em 0}
details.trace>summary{padding:.3em .5em;cursor:pointer;background:var(--bg2)}
details.trace>.body{padding:0 .8em .6em}
.timeline td.d{max-width:70ch;overflow-wrap:anywhere}
.timeline tr.run td{background:#f0f3f6;color:#24292f;font-size:12px}
.kind{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11px;color:#57606a}
tr.k-user .kind,tr.k-system .kind{color:#0550ae}tr.k-assistant .kind{color:#1a7f37;font-weight:600}
tr.k-tool_call .kind,tr.k-tool_result .kind,tr.k-retrieval .kind{color:#8250df}
tr.err td{background:#ffebe9}.errtext{color:var(--fail);font-weight:600}
tr.loop td{background:#fff1e5}
.loopmark{color:#bc4c00;background:#fff1e5;border-color:#ffb77c;font-weight:600}
.mark.final,.u.final{background:#dafbe1;border-color:#4ac26b}
.mark.reused,.u.reused{background:#ddf4ff;border-color:#54aeff}
.mark.unused,.u.unused{background:var(--bg2);color:var(--dim)}
.mark.reuse{background:#fbefff;border-color:#c297ff}
.u{padding:0 .3em;border-radius:3px;border:1px solid transparent}
ol.units{margin:.2em 0 .4em;padding-left:2.2em}ol.units li{margin:1px 0}
li.u.unused{text-decoration:line-through;text-decoration-color:#afb8c1}
.by{color:var(--dim);font-size:11px}
.src{border-left:3px solid var(--line);padding-left:.5em;margin:.5em 0}
.src.final{border-color:#4ac26b}.src.reused{border-color:#54aeff}.src.unused{border-color:var(--fail)}
.legend .u{font-size:11px;margin-right:.4em}
.answer{overflow-wrap:anywhere}
svg text{font:11px system-ui,-apple-system,"Segoe UI",sans-serif}
svg.waterfall{display:block;max-width:1100px;margin:.3em 0}
.waterfall .row{fill:transparent}.waterfall g.bar:hover .row{fill:#f6f8fa}
.waterfall .tick{stroke:#eaeef2}.waterfall .axis{fill:var(--dim);font-size:10px}
.waterfall .lbl{fill:#1f2328}.waterfall .b-run .lbl{font-weight:600}
.b-run .span,.sw.b-run{fill:#8c959f;background:#8c959f}
.b-llm .span,.sw.b-llm{fill:#54aeff;background:#54aeff}
.b-tool .span,.sw.b-tool{fill:#8250df;background:#8250df}
.b-retrieval .span,.sw.b-retrieval{fill:#4ac26b;background:#4ac26b}
.bar.loop .span,.sw.loop{fill:#fb8f44;stroke:#bc4c00;background:#fb8f44}
.bar.err .span,.sw.err{fill:#cf222e;background:#cf222e}
.ev-final{fill:#1a7f37;background:#1a7f37}.ev-reused{fill:#54aeff;background:#54aeff}
.ev-unused{fill:#fff;stroke:#8c959f;background:#fff;border:1px solid #8c959f}
.waterfall path.final{fill:#1a7f37}.note.final{fill:#1a7f37;font-weight:600}
.note.loop{fill:#bc4c00;font-weight:600}.note.err{fill:var(--fail);font-weight:600}
.sw{display:inline-block;width:1.4em;height:.7em;border-radius:2px;vertical-align:middle;
margin:0 .2em 0 .5em}
.dot{display:inline-block;width:.7em;height:.7em;border-radius:50%;vertical-align:middle;
margin:0 .2em 0 .5em}
svg.graph{display:block;max-width:100%;height:auto;margin:.3em 0}
.graph .edge path{fill:none;stroke-width:2}
.graph .edge text{fill:#57606a;text-anchor:middle;paint-order:stroke;stroke:#fff;stroke-width:3px}
.f0 path,.sw.f0{stroke:#8c959f;background:#8c959f}.f1 path,.sw.f1{stroke:#d4a72c;background:#d4a72c}
.f2 path,.sw.f2{stroke:#e16f24;background:#e16f24}.f3 path,.sw.f3{stroke:#cf222e;background:#cf222e}
.graph .edge.loop path{stroke-width:4;stroke-dasharray:7 3}
.graph .edge.loop text{fill:#bc4c00;font-weight:600}
.graph .node rect{fill:#ddf4ff;stroke:#54aeff}.graph .n-tool rect{fill:#fbefff;stroke:#c297ff}
.graph .node.loop rect{stroke:#bc4c00;stroke-width:2.5}
.graph .node text{text-anchor:middle;font-size:12px;fill:#1f2328}
h2{font-size:1.1em;margin:1em 0 .3em}
body[data-show=PASS] [data-status]:not([data-status=PASS]),
body[data-show=WARN] [data-status]:not([data-status=WARN]),
body[data-show=FAIL] [data-status]:not([data-status=FAIL]){display:none}
"""

_JS = """
document.querySelectorAll('button[data-show]').forEach(function(b){
  b.addEventListener('click',function(){document.body.dataset.show=b.dataset.show;});});
function openTo(id){var el=document.getElementById(id);
  for(var d=el&&el.closest('details');d;d=d.parentElement.closest('details')){d.open=true;}}
document.addEventListener('click',function(e){var a=e.target.closest('a[href^="#"]');
  if(a){openTo(a.getAttribute('href').slice(1));}});
if(location.hash){openTo(location.hash.slice(1));}
"""
