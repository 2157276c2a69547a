"""The HTML report (`render_html`): self-contained, escaped, and what each section shows."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _html_check import Page, assert_self_contained
from _report_inputs import (
    BANANAS,
    EIFFEL,
    LOOKUP,
    PARIS,
    evidenceflow_steps,
    nested_otlp,
    reports_for,
    tracecheck_traces,
    write_evidenceflow,
    write_tracecheck,
)

from tracehound.conventions import NormalizedSpan
from tracehound.evaluators.base import EvaluationResult, Evaluator, TraceInfo
from tracehound.evaluators.evidence import EvidenceEvaluator
from tracehound.report import TraceReport
from tracehound.report import html as html_report
from tracehound.report.html import render_html
from tracehound.steps import Step, Trajectory


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("inputs")
    write_evidenceflow(folder / "steps.json")
    write_tracecheck(folder / "traces.jsonl")
    (folder / "nested.otlp.json").write_text(json.dumps(nested_otlp()), "utf-8")
    return folder


@pytest.fixture(scope="module")
def traces_path(inputs: Path) -> Path:
    return inputs / "traces.jsonl"


@pytest.fixture(scope="module")
def reports(inputs: Path) -> list[TraceReport]:
    return reports_for([inputs], examples=True)


@pytest.fixture(scope="module")
def page_text(reports: list[TraceReport]) -> str:
    return render_html(reports)


def section(page_text: str, report: TraceReport, reports: Sequence[TraceReport]) -> str:
    n = list(reports).index(report)
    start = page_text.index(f'<details class="trace" id="t{n}"')
    return page_text[start : page_text.index("</div></details>", start)]


def report_with(reports: Sequence[TraceReport], predicate: Any) -> TraceReport:
    [report] = [r for r in reports if predicate(r)]
    return report


def agent(report: TraceReport) -> str:
    return report.trace.trajectory.runs[0].agent_name


def test_page_is_self_contained_and_well_formed(page_text: str) -> None:
    assert_self_contained(page_text)
    assert page_text.rstrip().endswith("</html>")


def test_header_counts_and_trace_table(page_text: str, reports: list[TraceReport]) -> None:
    counts = {s: sum(1 for r in reports if r.status == s) for s in ("PASS", "WARN", "FAIL")}
    assert counts["FAIL"] >= 3 and counts["PASS"] >= 3  # inputs: loop, errors; grounded ones
    header = page_text[page_text.index("<header>") : page_text.index("</header>")]
    assert f"<b>{len(reports)}</b> trace(s)" in header
    for status, count in counts.items():
        assert f'<span class="st st-{status}">{count} {status}</span>' in header
    table = page_text[page_text.index('<table class="traces">') : page_text.index("</table>")]
    rows = table.split("<tr data-status=")[1:]
    assert len(rows) == len(reports)
    for n, (row, report) in enumerate(zip(rows, reports, strict=True)):
        t = report.trace.trajectory
        assert row.startswith(f'"{report.status}"')
        assert f'<a class="id" href="#t{n}">{report.trace_id}</a>' in row
        assert f"<td>{agent(report)}</td>" in row
        assert f"<td>{', '.join(t.conventions)}</td>" in row
        assert f'<td class="num">{len(t.steps)}</td>' in row
    grounded = report_with(reports, lambda r: agent(r) == "imported")
    row = rows[reports.index(grounded)]
    assert "evidence.final_survival <b>0.33</b> grounded" in row
    assert "evidence.survival <b>0.67</b> reused" in row
    assert "loops <b>1</b> pass" in row
    looping = rows[reports.index(report_with(reports, lambda r: agent(r) == "looper"))]
    assert '<span class="sc st-FAIL"' in looping and "loops <b>0.50</b> fail" in looping


def test_timeline_offsets_errors_and_nested_runs(
    page_text: str, reports: list[TraceReport]
) -> None:
    nested = report_with(reports, lambda r: agent(r) == "planner")
    n = reports.index(nested)
    text = section(page_text, nested, reports)
    page = Page(text + "</div></details>")
    rows = [a for t, a in page.tags if t == "tr" and (a.get("id") or "").startswith(f"t{n}-s")]
    steps = nested.trace.trajectory.steps
    assert [r["id"] for r in rows] == [f"t{n}-s{i}" for i in range(len(steps))]
    assert [r["class"].split()[0] for r in rows] == [f"k-{s.kind}" for s in steps]  # type: ignore[union-attr]
    # offsets from the first step, in seconds
    assert '<td class="off">+0.000s</td>' in text
    assert '<td class="off">+0.040s</td>' in text  # the researcher's answer, 40 ms in
    # the failed tool result is highlighted, its error shown
    failed = [i for i, s in enumerate(steps) if s.error]
    assert failed and all("err" in rows[i]["class"].split() for i in failed)  # type: ignore[union-attr]
    assert '<span class="errtext">✗ RuntimeError: lookup failed</span>' in text
    assert "<b>lookup</b>(<code>{&quot;city&quot;:&quot;Oslo&quot;}</code>)" in text
    # run headers; the nested run is indented one level deeper than its parent
    assert "└ run <b>planner</b>" in text and "└ run <b>researcher</b>" in text
    researcher_row = re.search(r'padding-left:([\d.]+)em">└ run <b>researcher', text)
    planner_row = re.search(r'padding-left:([\d.]+)em">└ run <b>planner', text)
    assert researcher_row and planner_row
    assert float(researcher_row.group(1)) > float(planner_row.group(1))
    lookup_step = next(i for i, s in enumerate(steps) if s.kind == "tool_call")
    cell = re.search(rf'id="t{n}-s{lookup_step}".*?class="d" style="padding-left:([\d.]+)em"', text)
    assert cell and float(cell.group(1)) == float(researcher_row.group(1))
    # the per-span failure-mode result sits on the tool step of its span
    assert steps[lookup_step].exec_span_id == LOOKUP or steps[lookup_step].span_id == LOOKUP
    row_html = text[text.index(f'id="t{n}-s{lookup_step}"') :].split("</tr>", 1)[0]
    assert "failure_mode 0 tool_call_error" in row_html and "r st-WARN" in row_html


def test_evidence_flow_marks_units_and_readers(page_text: str, reports: list[TraceReport]) -> None:
    report = report_with(reports, lambda r: agent(r) == "imported")
    n = reports.index(report)
    text = section(page_text, report, reports)
    flow = text[text.index("<h3>evidence flow</h3>") :]
    steps = report.trace.trajectory.steps
    result_step = next(i for i, s in enumerate(steps) if s.kind == "tool_result")
    retrieval_step = next(i for i, s in enumerate(steps) if s.kind == "retrieval")
    outputs = [i for i, s in enumerate(steps) if s.kind == "assistant"]
    first_output, final_output = outputs

    def link(step: int) -> str:
        return f'<a href="#t{n}-s{step}">#{step}</a>'

    to_first, to_final = link(first_output), link(final_output)
    # totals agree with the evaluator's own trace attributes
    attrs = report.attributes
    assert (
        attrs["tracehound.evidence.units"] == 3 and attrs["tracehound.evidence.reused_units"] == 2
    )
    assert "2 of 3 evidence unit(s) reused (67%); <b>1</b> reach the final answer (33%)" in flow
    assert "1 unused source(s) of 2" in flow
    assert f"final answer ({to_final}): {PARIS}" in flow
    # the tool result: one unit reused by the final answer, one by the intermediate answer
    search = flow[flow.index(f"{link(result_step)} <b>tool result · search</b>") :]
    search = search[: search.index("</div></div>") if "</div></div>" in search else None]
    assert "<code>ev-search</code> — 2/2 unit(s) reused, 1 by the final answer" in search
    assert f"reused by {to_first}, {to_final} (final)" in search
    assert f'<li class="u final">{PARIS} <span class="by">→ {to_final}</span></li>' in search
    assert f'<li class="u reused">{EIFFEL} <span class="by">→ {to_first}</span></li>' in search
    # the retrieved document: never reused
    assert (
        f'<div class="src unused"><div class="srchead">{link(retrieval_step)} '
        "<b>document · wiki</b> <code>doc-bananas</code>"
    ) in flow
    assert "0/1 unit(s) reused, 0 by the final answer · <b>never reused</b>" in flow
    assert f'<li class="u unused">{BANANAS}</li>' in flow
    # the same facts as marks on the timeline
    timeline = text[text.index('<table class="timeline">') : text.index("<h3>evidence flow</h3>")]
    assert '<span class="mark final">evidence 2/2 reused, 1 in final</span>' in timeline
    assert '<span class="mark unused">evidence unused (0/1)</span>' in timeline
    assert timeline.count('<span class="mark reuse">↩ reuses 1 unit(s) from search</span>') == 2
    assert timeline.count('<span class="mark final">final answer</span>') == 1


def test_trace_without_evidence_says_so(page_text: str, reports: list[TraceReport]) -> None:
    report = report_with(reports, lambda r: agent(r) == "planner")
    assert "no evidence: no tool result or retrieved document with text" in section(
        page_text, report, reports
    )


class StubLoops(Evaluator):
    """Per-span loop results shaped like the `loops` evaluator's: on the k-th (k ≥ 2) identical
    tool call, a main `repeat` result with the `tracehound.loop.*` attributes and a secondary
    `consecutive` one without attributes."""

    name = "stubloops"
    version = "1"

    def start_trace(self, trace: TraceInfo) -> dict[str, list[str]]:
        return {}

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        if span.operation != "tool":
            return ()
        seen = state.setdefault(f"{span.tool_name}{span.tool_arguments}", [])
        seen.append(span.span_id)
        if len(seen) < 2:
            return ()
        common = {"evaluator": self.name, "evaluator_version": "1", "span_id": span.span_id}
        return [
            EvaluationResult(
                name="tracehound.loop",
                score_value=0.0,
                score_label="repeat",
                explanation=f"same call {len(seen)} times",
                attributes={
                    "tracehound.loop.detected": True,
                    "tracehound.loop.kind": "repeat",
                    "tracehound.loop.kinds": ["repeat", "consecutive"],
                    "tracehound.loop.count": len(seen),
                    "tracehound.loop.period": 1,
                    "tracehound.loop.first_span_id": seen[0],
                },
                **common,
            ),
            EvaluationResult(
                name="tracehound.loop", score_value=0.0, score_label="consecutive", **common
            ),
        ]


def test_loop_highlights(traces_path: Path) -> None:
    [report] = [r for r in reports_for([traces_path], [StubLoops()]) if agent(r) == "looper"]
    text = render_html([report])
    assert_self_contained(text)
    steps = report.trace.trajectory.steps
    calls = [i for i, s in enumerate(steps) if s.kind == "tool_call"]
    assert len(calls) == 4

    def link(step: int) -> str:
        return f'<a href="#t0-s{step}">#{step}</a>'

    # one line per step where a loop completes: main kind ×count, other kinds, first occurrence,
    # the other loop attributes, the explanation
    assert "<h3>loop highlights (3 step(s))</h3>" in text
    for k, step in enumerate(calls[1:], 2):
        assert (
            f'<li>{link(step)} <span class="loopmark">⟳ repeat ×{k}</span> <b>search</b> '
            f'(also consecutive) · first at {link(calls[0])} <span class="dim">period=1</span>'
            f" — same call {k} times</li>"
        ) in text
    # the timeline marks those steps, with every loop attribute in the tooltip
    page = Page(text)
    loop_rows = [
        a["id"] for t, a in page.tags if t == "tr" and "loop" in (a.get("class") or "").split()
    ]
    assert loop_rows == [f"t0-s{i}" for i in calls[1:]]
    [title] = [
        a.get("title")
        for a in page.with_class("span", "loopmark")
        if "count=4" in (a.get("title") or "")
    ]
    assert title is not None and title.splitlines() == [
        "loop.detected=true",  # OTel's spelling, not Python's True
        "loop.kind=repeat",
        "loop.kinds=repeat, consecutive",
        "loop.count=4",
        "loop.period=1",
        f"loop.first_span_id={steps[calls[0]].span_id}",
        "same call 4 times",
    ]
    assert "⟳ repeat ×4 (+consecutive)</span>" in text
    assert "⟳ loops at 3 step(s)" in text  # in the collapsed summary line
    assert 'tr id="t0-s' in text and text.count('class="k-tool_call loop"') == 3


def test_loop_highlights_of_the_loops_evaluator(page_text: str, reports: list[TraceReport]) -> None:
    """The real evaluator's results: every step of a span with a loop result is marked, with
    the main kind and count that the span's attributes name."""
    report = report_with(reports, lambda r: agent(r) == "looper")
    n = reports.index(report)
    text = section(page_text, report, reports)
    loops = [r for r in report.span_results if r.name == "tracehound.loop"]
    main = {r.span_id: r for r in loops if "tracehound.loop.kind" in r.attributes}
    assert main  # four identical calls loop
    span_steps = {
        s.exec_span_id or s.span_id: i
        for i, s in enumerate(report.trace.trajectory.steps)
        if s.kind == "tool_call"
    }
    assert f"<h3>loop highlights ({len(main)} step(s))</h3>" in text
    for span_id, result in main.items():
        step = span_steps[span_id]
        kind = result.attributes["tracehound.loop.kind"]
        count = result.attributes["tracehound.loop.count"]
        mark = f'<span class="loopmark">⟳ {kind} ×{count}</span>'
        assert f'<li><a href="#t{n}-s{step}">#{step}</a> {mark}' in text
        row = text[text.index(f'<tr id="t{n}-s{step}"') :].split("</tr>", 1)[0]
        assert 'class="k-tool_call loop"' in row and f"⟳ {kind} ×{count}" in row
    # the trace results show the loop summary
    assert "<td>tracehound.loops</td>" in text and "<td>fail</td>" in text


def test_trace_results_table(page_text: str, reports: list[TraceReport]) -> None:
    report = report_with(reports, lambda r: agent(r) == "imported")
    text = section(page_text, report, reports)
    results = text[text.index('<table class="results">') : text.index("</table>")]
    for result in report.trace_results:
        assert f"<td>{result.name}</td>" in results
        assert f"<td>{result.explanation}</td>" in results
    assert (
        '<td><span class="st st-PASS">PASS</span></td><td>evidence</td>'
        '<td>tracehound.evidence.final_survival</td><td class="num">0.33</td><td>grounded</td>'
    ) in results
    assert "per-span results (" in text and "trace attributes (" in text
    assert "<code>tracehound.evidence.final_survival_ratio</code>" in text


class HostileEvaluator(Evaluator):
    """Echoes trace content into its results, and tags one span with a loop of a hostile kind."""

    name = "hostile"
    version = "1"

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        texts = [s.text for s in steps if s.text and "<" in s.text]
        if not texts:
            return ()
        return [
            EvaluationResult(
                name="x<script>alert('n')</script>",
                evaluator=self.name,
                evaluator_version=self.version,
                span_id=span.span_id,
                score_value=1.0,
                score_label="<img src=x onerror=alert('l')>",
                explanation=texts[0],
                attributes={
                    "tracehound.loop.kind": "<script>alert('k')</script>",
                    "tracehound.loop.count": 2,
                    "tracehound.loop.first_span_id": '"><script>alert(1)</script>',
                },
            )
        ]

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        answer = trajectory.final_answer() or ""
        return [
            EvaluationResult(
                name="hostile.trace",
                evaluator=self.name,
                evaluator_version=self.version,
                score_value=0.5,
                score_label="fail",
                explanation=answer,
                attributes={"tracehound.hostile</td><script>": answer},
            )
        ]


HOSTILE = "<script>alert('pwned')</script>"
BREAKOUT = (
    "\"'><img src=x onerror=alert(2)> </textarea></style></script><a href=https://evil.example/x>"
)


def test_hostile_content_is_escaped(tmp_path: Path) -> None:
    steps = [
        {"type": "user", "content": f"Please summarize {HOSTILE}"},
        {"type": "tool_call", "tool": f"web{HOSTILE}", "arguments": {"url": BREAKOUT}},
        {
            "type": "tool_result",
            "tool": f"web{HOSTILE}",
            "content": f"The page says {HOSTILE} loudly. Another sentence {BREAKOUT} here.",
            "evidence_id": f"ev{HOSTILE}",
        },
        {
            "type": "retrieval",
            "source": BREAKOUT,
            "content": f"Stored document text {HOSTILE} in full.",
        },
        {"type": "assistant", "content": f"The page says {HOSTILE} loudly. {BREAKOUT}"},
    ]
    reports = reports_for(
        [write_evidenceflow(tmp_path / "hostile.json", steps)],
        [EvidenceEvaluator(), HostileEvaluator()],
    )
    page_text = render_html(reports)
    page = assert_self_contained(page_text, allow_urls_in_text=True)
    # the only script element is the report's own; no injected element or attribute
    assert page_text.count("<script") == 1
    assert "<img" not in page_text and "<a href=https" not in page_text
    assert {t for t, _ in page.tags} <= {
        "html", "head", "meta", "title", "style", "body", "header", "h1", "p", "span", "b", "nav",
        "button", "main", "table", "thead", "tbody", "tr", "th", "td", "a", "details", "summary",
        "div", "h2", "h3", "code", "ol", "ul", "li", "script",
        "svg", "g", "rect", "path", "circle", "line", "text",  # the waterfall and the graph
    }  # fmt: skip
    # the hostile texts are all there, as text
    text = "".join(page.text)
    assert HOSTILE in text and "<img src=x onerror=alert(2)>" in text
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in page_text
    assert "x&lt;script&gt;alert(&#x27;n&#x27;)&lt;/script&gt;" in page_text  # result name
    assert "⟳ &lt;script&gt;alert(&#x27;k&#x27;)&lt;/script&gt; ×2" in page_text  # loop kind
    assert "tracehound.hostile&lt;/td&gt;&lt;script&gt;" in page_text  # attribute key
    # in attributes (tooltips), quotes are escaped too
    titles = [a["title"] for _, a in page.tags if a.get("title")]
    assert any(BREAKOUT.strip() in (t or "") for t in titles)


def test_clipping_and_tooltips(tmp_path: Path) -> None:
    long_text = " ".join(f"word{i}" for i in range(200))
    huge_text = " ".join(f"term{i}" for i in range(1000))
    steps = evidenceflow_steps(final=long_text)
    steps.insert(1, {"type": "user", "content": huge_text})
    page_text = render_html(reports_for([write_evidenceflow(tmp_path / "long.json", steps)]))
    clipped = re.findall(r'<span title="(word0 word1[^"]*)">(word0 word1[^<]*…)</span>', page_text)
    assert clipped  # in the timeline and as the final answer of the evidence flow
    for tooltip, shown in clipped:
        assert len(shown) <= html_report.TEXT_WIDTH
        assert tooltip == long_text  # under the tooltip limit: the whole text
    [(tooltip, shown)] = re.findall(r'<span title="(term0 [^"]*)">(term0 [^<]*…)</span>', page_text)
    assert len(shown) == html_report.TEXT_WIDTH
    assert tooltip == huge_text[: html_report.TOOLTIP_CHARS] + "…"


def test_many_traces_stay_collapsed_and_fast(reports: list[TraceReport]) -> None:
    many = reports * 50  # hundreds of traces
    started = time.perf_counter()
    page_text = render_html(many)
    elapsed = time.perf_counter() - started
    assert elapsed < 10
    sections = re.findall(
        r'<details class="trace" id="t(\d+)" data-status="\w+"( open)?>', page_text
    )
    assert len(sections) == len(many)
    statuses = re.findall(r'<details class="trace" id="t\d+" data-status="(\w+)"', page_text)
    # failing traces open by default, the others stay collapsed
    assert [bool(opened) for _, opened in sections] == [s == "FAIL" for s in statuses]
    assert "FAIL" in statuses and "PASS" in statuses
    assert [int(i) for i, _ in sections] == list(range(len(many)))  # unique anchors
    assert len(page_text) < 12_000 * len(many)
    # a single trace is shown open
    assert '<details class="trace" id="t0" data-status="PASS" open>' in render_html(
        [r for r in reports if r.status == "PASS"][:1]
    )


def test_long_trajectories_are_cut(
    reports: list[TraceReport], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(html_report, "MAX_STEPS", 3)
    monkeypatch.setattr(html_report, "MAX_UNITS", 1)
    report = report_with(reports, lambda r: agent(r) == "imported")
    page_text = render_html([report])
    hidden = len(report.trace.trajectory.steps) - 3
    assert f"… {hidden} more step(s) not shown" in page_text
    assert page_text.count('<tr id="t0-s') == 3
    assert '<li class="dim">… 1 more unit(s)</li>' in page_text
    assert_self_contained(page_text)


def test_empty_and_failed_analysis(
    reports: list[TraceReport], monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = render_html([])
    assert "no traces" in empty and "<b>0</b> trace(s)" in empty
    assert_self_contained(empty)

    def broken(trajectory: Trajectory) -> Any:
        raise RuntimeError("<b>boom</b>")

    monkeypatch.setattr(html_report, "_evidence_flow", broken)
    page_text = render_html(reports[:2])
    assert page_text.count("evidence analysis failed: RuntimeError: &lt;b&gt;boom&lt;/b&gt;") == 2
    assert_self_contained(page_text)


def test_tracecheck_error_trace(page_text: str, reports: list[TraceReport]) -> None:
    [failing] = [
        r
        for r in reports
        if agent(r) == "weather_bot" and any(s.error for s in r.trace.trajectory.steps)
    ]
    assert failing.status == "FAIL"
    text = section(page_text, failing, reports)
    assert "ConnectionError: upstream down" in text
    assert 'class="k-tool_result err"' in text
    assert len(tracecheck_traces()) == 3


def test_every_fixture_renders() -> None:
    """All conventions (declared outputs, retrievals, log events, no-content captures)."""
    fixtures = Path(__file__).parent.parent / "fixtures"
    reports = reports_for(sorted(fixtures.glob("*.otlp.json")))
    assert len(reports) >= 10
    page_text = render_html(reports)
    page = assert_self_contained(page_text, allow_urls_in_text=True)
    sections = page.with_class("details", "trace")
    assert len(sections) == len(reports)
    for n, report in enumerate(reports):
        text = section(page_text, report, reports)
        assert f"{len(report.trace.trajectory.steps)} step(s)" in text
        rows = re.findall(rf'<tr id="t{n}-s\d+"', text)
        assert len(rows) == len(report.trace.trajectory.steps)
        if report.attributes.get("tracehound.evidence.units"):
            assert '<div class="src ' in text


def test_declared_final_answer(tmp_path: Path) -> None:
    """An agent's declared output that no step shows is the final answer of the evidence flow."""
    doc = json.loads(
        (Path(__file__).parent.parent / "fixtures/pydantic_ai_v6.otlp.json").read_text()
    )
    declared = "In short: they are in Development status."
    for resource in doc["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for attribute in span["attributes"]:
                    if attribute["key"] == "final_result":
                        attribute["value"] = {"stringValue": declared}
    path = tmp_path / "declared.otlp.json"
    path.write_text(json.dumps(doc))
    [report] = reports_for([path])
    assert report.trace.trajectory.final_answer() == declared
    text = render_html([report])
    assert_self_contained(text)
    assert f"final answer (declared output): {declared}" in text
    assert "reach the final answer" in text and "(final)" not in text
    assert 'reused by <a href="#t0-s11">#11</a>, final answer</div>' in text
    # the unit the declared answer repeats is marked as reused by it
    assert (
        '<li class="u final">They are in Development status. <span class="by">→ final answer'
        in text
    )
    assert '<span class="mark final">final answer</span>' not in text  # no step is the answer
