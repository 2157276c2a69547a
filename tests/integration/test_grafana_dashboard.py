"""The Grafana dashboard under deploy/: valid JSON, provisioned in compose, and querying only
metrics (and labels) that tracehound emits.

Metric names are checked twice: against the instruments tracehound declares
(`emit.INSTRUMENTS`, translated by the sidecar's own `prometheus_name`: dots to underscores, a
unit suffix, `_total` for counters), and against the `/metrics` of a real `tracehound serve`
that has evaluated a looping, a failing and a clean trace (which also gives the sidecar's own
metrics and every label the metrics carry).
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tracehound import names
from tracehound.emit import INSTRUMENTS
from tracehound.server._telemetry import prometheus_name

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _serve import Serve

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "tracehound.json"
FIXTURES = ROOT / "tests" / "fixtures"
TRAFFIC = (
    FIXTURES / "frameworks" / "strands_default_loop.otlp.json",  # loops, unused evidence
    FIXTURES / "pydantic_ai_v6.otlp.json",  # clean: research_agent's first run
    FIXTURES / "pydantic_ai_error.otlp.json",  # a failing tool; drift against the run before
    FIXTURES / "frameworks" / "crewai_nested.otlp.json",  # clean, nested agents
)
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
PROMETHEUS_LABELS = {"le", "instance", "job"}  # added by Prometheus, or the histogram's bound
METRIC = re.compile(r"\btracehound_[a-zA-Z0-9_:]*")
BY = re.compile(r"\bby\s*\(([^)]*)\)")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"")
SELECTOR = re.compile(r"\{[^}]*\}")
LABEL_VALUES = re.compile(r"label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*(\w+)\s*\)")


def metric_names(expr: str) -> list[str]:
    """The metric names an expression reads (label names in selectors and `by` left out)."""
    bare = SELECTOR.sub("", BY.sub("", LABEL_VALUES.sub(r"\1", expr)))
    return METRIC.findall(bare)


def label_names(expr: str) -> set[str]:
    """The label names an expression groups or filters by."""
    out = {n.strip() for group in BY.findall(expr) for n in group.split(",") if n.strip()}
    for selector in SELECTOR.findall(expr):
        out |= set(MATCHER.findall(selector))
    out |= {label for _, label in LABEL_VALUES.findall(expr)}
    return out


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def queries() -> list[str]:
    exprs = [t["expr"] for p in panels() for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard()["templating"]["list"] if "definition" in v]
    return exprs


# The sidecar's own instruments that a run may leave without a point: the accelerator's refusals
# are observed only with the accelerator in use (not in the suite's pure-Python run).
SIDECAR_ONLY = {
    prometheus_name(names.SERVE_METRIC_ACCELERATOR_FALLBACKS, "{input}", True): "counter",
}


def declared_names() -> dict[str, str]:
    """Prometheus name → kind, for every instrument the engine and the processor declare, and
    the sidecar's that may have no point yet."""
    return {
        **{
            prometheus_name(name, spec.unit, spec.kind == "counter"): spec.kind
            for name, spec in INSTRUMENTS.items()
        },
        **SIDECAR_ONLY,
    }


@pytest.fixture(scope="module")
def scraped() -> dict[str, tuple[str, set[str]]]:
    """Prometheus name → (type, label names seen), from a live sidecar after real traffic."""
    serve = Serve.start(
        [
            "--forward",
            "none",
            "--prometheus",
            "127.0.0.1:0",
            "--quiet-period",
            "0.2",
            "--baselines",
            "memory",
        ]
    )
    try:
        for path in TRAFFIC:
            request = urllib.request.Request(
                serve.http + "/v1/traces",
                data=path.read_bytes(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status == 200
        url = "http://" + str(serve.listening["prometheus"]) + "/metrics"
        deadline = time.monotonic() + 20
        while True:
            with urllib.request.urlopen(url, timeout=10) as response:
                text = response.read().decode()
            if "tracehound_loops_wasted_seconds_total{" in text and "drift_runs_total{" in text:
                break
            assert time.monotonic() < deadline, "the traces were not finalized within 20 s"
            time.sleep(0.2)
    finally:
        assert serve.stop() == 0
    out: dict[str, tuple[str, set[str]]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            out[name] = (kind, set())
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        sample = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ", line)
        assert sample is not None, line
        name = sample[1]
        base = next(
            (name.removesuffix(s) for s in HISTOGRAM_SUFFIXES if name.removesuffix(s) in out),
            name,
        )
        out[base][1].update(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', sample[2] or ""))
    return out


def base_name(name: str, kinds: dict[str, str]) -> str:
    for suffix in HISTOGRAM_SUFFIXES:
        stem = name.removesuffix(suffix)
        if stem != name and kinds.get(stem) == "histogram":
            return stem
    return name


# --- the JSON -------------------------------------------------------------------------------------


def test_the_dashboard_is_valid_grafana_json() -> None:
    board = dashboard()
    assert board["uid"] == "tracehound" and board["title"] and board["schemaVersion"] >= 36
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                for y in range(grid["y"], grid["y"] + grid["h"])}  # fmt: skip
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"] and panel["description"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        for target in panel["targets"]:
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
    # what the issue asks the dashboard to show
    titles = " / ".join(p["title"].lower() for p in panels())
    for words in (
        "loops by kind and agent",
        "wasted tokens",
        "wasted seconds",
        "evidence survival",
        "drift severity per agent",
        "received",
        "forwarded and dropped",
        "queue",
        "held spans",
        "finalized early",
    ):
        assert words in titles, words


def test_the_agent_panels_follow_the_agent_variable() -> None:
    agent_panels = [p for p in panels() if "agent" in p["title"].lower()]
    assert agent_panels
    for panel in agent_panels:
        for target in panel["targets"]:
            assert 'gen_ai_agent_name=~"$agent"' in target["expr"], panel["title"]


# --- what it queries -----------------------------------------------------------------------------


def test_every_queried_metric_is_one_tracehound_emits(
    scraped: dict[str, tuple[str, set[str]]],
) -> None:
    declared = declared_names()
    kinds = {**declared, **{name: kind for name, (kind, _) in scraped.items()}}
    used = {base_name(m, kinds) for expr in queries() for m in metric_names(expr)}
    assert len(used) >= 14
    unknown = sorted(used - set(kinds))
    assert unknown == [], f"not emitted by tracehound: {unknown}"
    # the instruments declared and the names the live sidecar writes agree where both exist
    for name in set(declared) & set(scraped):
        assert scraped[name][0] == ("counter" if declared[name] == "counter" else declared[name])
    # histogram series are queried as histograms, and only those
    for expr in queries():
        for metric in metric_names(expr):
            stem = base_name(metric, kinds)
            if stem != metric:
                assert kinds[stem] == "histogram", metric
            else:
                assert kinds[stem] != "histogram", f"{metric}: query its _bucket/_sum/_count"


def test_every_label_it_uses_is_one_those_metrics_carry(
    scraped: dict[str, tuple[str, set[str]]],
) -> None:
    kinds = {**declared_names(), **{name: kind for name, (kind, _) in scraped.items()}}
    checked = 0
    for expr in queries():
        metrics = {base_name(m, kinds) for m in metric_names(expr)}
        if not metrics <= set(scraped):
            continue  # a counter not incremented by this traffic (early finalization, errors)
        carried = set().union(*(scraped[m][1] for m in metrics)) | PROMETHEUS_LABELS
        labels = label_names(expr)
        assert labels <= carried, (expr, sorted(labels - carried))
        checked += 1
    assert checked >= 12
    # the metrics only a rarer event makes appear are still declared ones
    rare = {base_name(m, kinds) for e in queries() for m in metric_names(e)} - set(scraped)
    assert rare <= set(declared_names()), rare


def test_a_wrong_metric_name_would_be_caught(scraped: dict[str, tuple[str, set[str]]]) -> None:
    kinds = {**declared_names(), **{name: kind for name, (kind, _) in scraped.items()}}
    for wrong in ("tracehound_loops", "tracehound_loops_wasted_tokens", "tracehound_drift_runs"):
        assert wrong not in kinds  # counters are exposed with _total
    assert "tracehound_server_queue_size_bytes" in kinds  # a unit suffix


# --- provisioning ---------------------------------------------------------------------------------


def test_compose_provisions_prometheus_and_grafana() -> None:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    replicas = sorted(n for n in services if n.startswith("tracehound-"))
    # Prometheus scrapes every replica on its --prometheus port
    prometheus = services["prometheus"]
    [mount] = prometheus["volumes"]
    source, target, mode = mount.split(":")
    assert mode == "ro" and f"--config.file={target}" in prometheus["command"]
    scrape = yaml.safe_load((DEPLOY / source).read_text())
    [job] = scrape["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    targets = [t for config in job["static_configs"] for t in config["targets"]]
    for name in replicas:
        command = services[name].get("command") or services["tracehound-1"]["command"]
        port = command[command.index("--prometheus") + 1].rsplit(":", 1)[1]
        assert f"{name}:{port}" in targets
    assert len(targets) == len(replicas)
    # Grafana reads the provisioning and the dashboards where the files say
    grafana = services["grafana"]
    mounts = {m.split(":")[1]: DEPLOY / m.split(":")[0] for m in grafana["volumes"]}
    provisioning = mounts["/etc/grafana/provisioning"]
    [datasource] = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())[
        "datasources"
    ]
    assert datasource["type"] == "prometheus" and datasource["url"] == "http://prometheus:9090"
    assert datasource["uid"] == dashboard()["templating"]["list"][0]["current"]["value"]
    [provider] = yaml.safe_load((provisioning / "dashboards" / "tracehound.yaml").read_text())[
        "providers"
    ]
    folder = mounts[provider["options"]["path"]]
    assert (folder / DASHBOARD.name).resolve() == DASHBOARD.resolve()
    assert grafana["depends_on"] == ["prometheus"]


def test_the_deploy_readme_names_the_new_files() -> None:
    text = (DEPLOY / "README.md").read_text()
    for path in (
        "prometheus/prometheus.yaml",
        "grafana/provisioning/datasources/prometheus.yaml",
        "grafana/provisioning/dashboards/tracehound.yaml",
        "grafana/dashboards/tracehound.json",
    ):
        assert f"`{path}`" in text and (DEPLOY / path).is_file(), path
