"""The pictures of the HTML report: the waterfall and the agent graphs, on real captures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _html_check import Page, assert_self_contained
from _report_inputs import reports_for

from tracehound.report import TraceReport
from tracehound.report.html import render_html

FRAMEWORKS = Path(__file__).parent.parent / "fixtures" / "frameworks"
LOOP = FRAMEWORKS / "strands_default_loop.otlp.json"  # one agent, the same tool called 4 times
NESTED = FRAMEWORKS / "crewai_nested.otlp.json"  # crew → coordinator → research_agent (as a tool)


def svg(page_text: str, cls: str, n: int = 0) -> Page:
    """The n-th `<svg class=cls>` of the page, parsed."""
    found = re.findall(rf'<svg class="{cls}".*?</svg>', page_text, flags=re.S)
    return Page(found[n])


def bar_classes(picture: Page) -> list[list[str]]:
    return [(a.get("class") or "").split() for t, a in picture.tags if t == "g"]


@pytest.fixture(scope="module")
def loop_page() -> str:
    return render_html(reports_for([LOOP]))


def test_waterfall_of_a_looping_trace(loop_page: str) -> None:
    assert_self_contained(loop_page)
    picture = svg(loop_page, "waterfall")
    assert picture.errors == []
    bars = bar_classes(picture)
    kinds = [next(c for c in b if c.startswith("b-")) for b in bars]
    # the run, then its five LLM calls and four tool calls in time order
    assert kinds == ["b-run"] + ["b-llm", "b-tool"] * 4 + ["b-llm"]
    looped = [i for i, b in enumerate(bars) if "loop" in b]
    assert looped == [4, 6, 8]  # the 2nd, 3rd and 4th call of the same tool: not the first
    assert all(kinds[i] == "b-tool" for i in looped)
    assert "⟳ consecutive ×2" in loop_page and "⟳ no_progress ×4" in loop_page
    # evidence: the four tool results never reached the answer; the last LLM call gave it
    assert len(picture.with_class("circle", "ev-unused")) == 4
    assert not picture.with_class("circle", "ev-final")
    assert len(picture.with_class("path", "final")) == 1
    # every bar links to its timeline row
    links = [a["href"] for t, a in picture.tags if t == "a"]
    assert len(links) == len(bars) and all(re.fullmatch(r"#t0-s\d+", h or "") for h in links)


def test_agent_graph_of_a_looping_trace(loop_page: str) -> None:
    picture = svg(loop_page, "graph", 1)  # 0: all traces, 1: this trace
    nodes = [a for t, a in picture.tags if t == "g" and "node" in (a.get("class") or "")]
    edges = [a for t, a in picture.tags if t == "g" and "edge" in (a.get("class") or "")]
    assert len(nodes) == 2 and len(edges) == 1
    assert (edges[0]["class"] or "").split() == ["edge", "f0", "loop"]  # no failure, loops
    assert "×4 ⟳3" in "".join(picture.text)
    assert all("loop" in (n.get("class") or "") for n in nodes)


def test_failing_trace_opens_and_draws_its_errors() -> None:
    reports = reports_for([], examples=True)
    page_text = render_html(reports)
    failing = next(n for n, r in enumerate(reports) if r.status == "FAIL")
    assert f'<details class="trace" id="t{failing}" data-status="FAIL" open>' in page_text
    assert sum(1 for r in reports if r.status != "FAIL") == 2
    assert page_text.count('data-status="PASS" open>') == 0
    picture = svg(page_text, "waterfall", failing)
    bars = bar_classes(picture)
    assert ["bar", "b-run", "err"] in bars and ["bar", "b-tool", "err"] in bars
    assert "✗ error" in "".join(picture.text)
    # across the three traces, research_agent → search failed once in three calls
    overall = svg(page_text, "graph", 0)
    titles = [t for t in overall.text if "research_agent → search" in t]
    assert titles == ["research_agent → search: 3 call(s), 1 failed (33%), 0 flagged as loops"]
    classes = [(a.get("class") or "") for t, a in overall.tags if t == "g"]
    assert "edge f2" in classes  # > 25 %, ≤ 50 %: the colour of that edge


def test_nested_agents_in_the_waterfall_and_the_graph() -> None:
    page_text = render_html(reports_for([NESTED]))
    picture = svg(page_text, "waterfall")
    labels = [t for t in picture.text if t.strip()]
    runs = [a for t, a in picture.tags if t == "g" and "b-run" in (a.get("class") or "")]
    assert len(runs) == 3
    assert labels.index("coordinator") < labels.index("research_agent")
    # the agent used as a tool: an edge to the tool and one to the nested agent
    graph = "".join(svg(page_text, "graph", 1).text)
    assert "coordinator → research_agent: 1 call(s)" in graph  # twice: tool and agent
    assert graph.count("coordinator → research_agent") == 2
    assert "research_agent → lookup_fact: 1 call(s), 0 failed (0%)" in graph
    # the evidence reached the final answer: green dots, and the final answer marked
    assert len(svg(page_text, "waterfall").with_class("circle", "ev-final")) == 2


def test_booleans_are_written_as_otel_writes_them(loop_page: str) -> None:
    cells = re.findall(
        r"<tr><td><code>tracehound\.loops\.detected</code></td><td>(\w+)</td>", loop_page
    )
    assert cells == ["true"]
    assert ">True<" not in loop_page and ">False<" not in loop_page


def test_a_report_without_genai_steps_draws_nothing() -> None:
    empty: list[TraceReport] = []
    page_text = render_html(empty)
    assert "<svg" not in page_text
