"""The HTML report in a real browser: headless Chromium loads it, runs its script, and reports.

A copy of the page gets two harness scripts (the report itself is not changed): one first in
`<head>` that records every error and `console.error`, one last in `<body>` that measures the
pictures, clicks a link and writes what it found into the DOM, which `--dump-dom` prints. A page
with a deliberate error checks that the harness does catch errors.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tracehound.report.html import render_html

UNIT_TESTS = Path(__file__).resolve().parents[1] / "unit"
if str(UNIT_TESTS) not in sys.path:
    sys.path.insert(0, str(UNIT_TESTS))
from _report_inputs import reports_for  # noqa: E402

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)",
)
FRAMEWORKS = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"

FIRST = """<script>window.__errors=[];
addEventListener('error',function(e){__errors.push(String(e.message));});
var __ce=console.error;console.error=function(){
  __errors.push(Array.prototype.join.call(arguments,' '));__ce.apply(console,arguments);};
</script>"""
LAST = """<script>(function(){
function widths(sel){return Array.prototype.map.call(document.querySelectorAll(sel),
  function(e){return e instanceof SVGGraphicsElement ? e.getBBox().width : -1;});}
var fails=document.querySelectorAll('details.trace[data-status=FAIL]');
var shut=document.querySelector('details.trace:not([open])');
var link=shut && document.querySelector('a[href="#'+shut.id+'"]');
if(link){link.click();}
var first=document.querySelector('svg.waterfall');
var r={errors:__errors,
  waterfalls:document.querySelectorAll('svg.waterfall').length,
  graphs:document.querySelectorAll('svg.graph').length,
  bars:widths('svg.waterfall rect.span'), nodes:widths('svg.graph g.node rect'),
  edges:widths('svg.graph g.edge path'),
  failsOpen:Array.prototype.every.call(fails,function(d){return d.open;}), fails:fails.length,
  linkOpened:shut ? shut.open : null,
  shownWidth:first ? first.getBoundingClientRect().width : 0};
var pre=document.createElement('pre');pre.id='__result';pre.textContent=JSON.stringify(r);
document.body.appendChild(pre);})();
</script>"""


def in_browser(page_text: str, tmp_path: Path) -> tuple[dict[str, Any], str]:
    harnessed = page_text.replace("<head>", "<head>" + FIRST, 1).replace(
        "</body>", LAST + "</body>", 1
    )
    page = tmp_path / "page.html"
    page.write_text(harnessed, encoding="utf-8")
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1280,2000",
            "--enable-logging=stderr",
            "--virtual-time-budget=3000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    found = re.search(r'<pre id="__result">(.*?)</pre>', done.stdout, flags=re.S)
    assert found is not None, done.stderr[-3000:]
    return json.loads(html.unescape(found[1])), done.stderr


def test_the_report_renders_without_errors_and_draws(tmp_path: Path) -> None:
    reports = reports_for(
        [FRAMEWORKS / "strands_default_loop.otlp.json", FRAMEWORKS / "crewai_nested.otlp.json"],
        examples=True,
    )
    result, stderr = in_browser(render_html(reports), tmp_path)
    assert result["errors"] == []
    assert not re.search(r"CONSOLE.*(Uncaught|Error)", stderr)
    assert result["waterfalls"] == len(reports) == 5
    assert result["graphs"] == len(reports) + 1  # one per trace, one across them
    # every bar, node and edge is a laid-out SVG element with a width
    assert len(result["bars"]) >= 30 and min(result["bars"]) > 0
    assert len(result["nodes"]) >= 10 and min(result["nodes"]) > 0
    assert len(result["edges"]) >= 6 and min(result["edges"]) > 0
    assert result["fails"] == 2 and result["failsOpen"] is True
    assert result["linkOpened"] is True  # the page's script opens a trace a link points into
    assert result["shownWidth"] > 600


def test_the_harness_catches_errors(tmp_path: Path) -> None:
    broken = render_html([]).replace("</main>", "<script>noSuchFunction();</script></main>")
    result, _ = in_browser(broken, tmp_path)
    assert len(result["errors"]) == 1 and "noSuchFunction" in result["errors"][0]
