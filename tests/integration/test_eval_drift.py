"""`tracehound eval --baselines` end to end: baselines built from the control scenario's traces
written to OTLP files, then the drift scenarios gated with `--fail-on drift>=alert`; `--no-update`,
`pin`, export / import, agent runs below the root and nested agents, a real subprocess.

(The restart test — an eval process killed mid-run — is in `test_sqlite_store.py`.)
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

UNIT_TESTS = Path(__file__).resolve().parents[1] / "unit"
if str(UNIT_TESTS) not in sys.path:
    sys.path.insert(0, str(UNIT_TESTS))

from _drift_scenarios import SCENARIOS, scenario_documents  # noqa: E402

from tracehound import names as N  # noqa: E402
from tracehound.baselines import SQLiteStore  # noqa: E402
from tracehound.cli import main  # noqa: E402
from tracehound.drift import Baseline, HashingEmbedder, RunFeatures, embed_run  # noqa: E402

KEY = "research-service/planner"
Transform = Callable[[dict[str, Any]], dict[str, Any]]


# --- the traces -----------------------------------------------------------------------------------


def _spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return spans


def _http_span(agent_span: dict[str, Any], span_id: str) -> dict[str, Any]:
    return {
        **{k: agent_span[k] for k in ("traceId", "startTimeUnixNano", "endTimeUnixNano")},
        "spanId": span_id,
        "parentSpanId": "",
        "name": "POST /brief",
        "kind": 2,
        "attributes": [{"key": "http.request.method", "value": {"stringValue": "POST"}}],
    }


def as_plain(document: dict[str, Any]) -> dict[str, Any]:
    """No agent span: the root is an HTTP span, the whole trace is one implicit run."""
    out = copy.deepcopy(document)
    spans = _spans(out)
    spans[0] = _http_span(spans[0], spans[0]["spanId"])
    return out


def under_http(document: dict[str, Any]) -> dict[str, Any]:
    """The agent span below an HTTP root span: its results are not on the root."""
    out = copy.deepcopy(document)
    spans = _spans(out)
    agent = spans[0]
    root_id = agent["spanId"][:8] + "ffff0001"
    agent["parentSpanId"] = root_id
    spans.insert(0, _http_span(agent, root_id))
    return out


def nested(document: dict[str, Any]) -> dict[str, Any]:
    """HTTP root → `orchestrator` agent → the planner agent."""
    out = under_http(document)
    spans = _spans(out)
    root, planner = spans[0], spans[1]
    orchestrator_id = planner["spanId"][:8] + "ffff0002"
    orchestrator = {
        **planner,
        "spanId": orchestrator_id,
        "parentSpanId": root["spanId"],
        "name": "invoke_agent orchestrator",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
            {"key": "gen_ai.agent.name", "value": {"stringValue": "orchestrator"}},
        ],
    }
    planner["parentSpanId"] = orchestrator_id
    spans.insert(1, orchestrator)
    return out


def write_set(folder: Path, documents: list[dict[str, Any]], transform: Transform | None) -> Path:
    folder.mkdir(parents=True)
    for i, document in enumerate(documents):
        doc = transform(document) if transform else document
        (folder / f"{i:02d}.otlp.json").write_text(json.dumps(doc), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Control runs 0–9 (`*base`) and 10–14 (`*control`); tool drift's drifted runs (`*tool`);
    each as written by the scenario generator, with the agent below an HTTP root (`http_`),
    nested in an orchestrator (`nested_`), and without agent span (`plain_`)."""
    root = tmp_path_factory.mktemp("traces")
    control = scenario_documents(SCENARIOS["control"]())
    tool = SCENARIOS["tool_drift"]()
    drifted = scenario_documents(tool)[tool.baseline_runs :]
    out: dict[str, Path] = {}
    for prefix, transform in (
        ("", None),
        ("http_", under_http),
        ("nested_", nested),
        ("plain_", as_plain),
    ):
        out[f"{prefix}base"] = write_set(root / f"{prefix}base", control[:10], transform)
        out[f"{prefix}control"] = write_set(root / f"{prefix}control", control[10:], transform)
        out[f"{prefix}tool"] = write_set(root / f"{prefix}tool", drifted, transform)
    for name in ("semantic_drift", "complexity_drift", "combined_drift"):
        scenario = SCENARIOS[name]()
        runs = scenario_documents(scenario)[scenario.baseline_runs :]
        out[name] = write_set(root / name, runs, None)
    return out


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def snapshot(path: Path) -> dict[str, Any]:
    with SQLiteStore(path) as store:
        return store.export_baselines()


@pytest.fixture(scope="module")
def seeded(traces: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store built by `tracehound eval --baselines` from the 10 control base traces."""
    db = tmp_path_factory.mktemp("seed") / "baselines.sqlite3"
    code = main(["eval", str(traces["base"]), "--evaluators", "loops", "--baselines", str(db)])
    assert code == 0
    return db


@pytest.fixture
def db(seeded: Path, tmp_path: Path) -> Path:
    path = tmp_path / "baselines.sqlite3"
    shutil.copyfile(seeded, path)
    return path


def drift_results(out: str) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in out.splitlines()]
    return [r for rec in records for r in rec["results"] if r["name"] == N.EVAL_DRIFT]


# --- building, gating, updating -------------------------------------------------------------------


def test_the_baseline_built_by_eval(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["baseline", "list", "--baselines", str(seeded)], capsys)
    assert code == 0
    assert out.splitlines()[1].split()[:4] == [KEY, "10", "-", "no"]


def test_tool_drift_trips_the_gate_and_control_does_not(
    db: Path, traces: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(db)
    gate = ["--evaluators", "loops", "--baselines", str(db), "--no-update"]
    code, out, err = run(
        ["eval", str(traces["control"]), *gate, "--fail-on", "drift>=alert"], capsys
    )
    assert code == 0, err
    lines = [line for line in out.splitlines() if " drift " in line]
    assert len(lines) == 5
    assert all(
        f"PASS drift        {KEY}: drift 0." in line and " none · " in line for line in lines
    )
    assert all("confidence high (10 run(s))" in line and "not added" in line for line in lines)

    code, out, err = run(["eval", str(traces["tool"]), *gate, "--fail-on", "drift>=alert"], capsys)
    assert code == 1
    assert "--fail-on drift>=alert: tripped by" in err
    lines = [line for line in out.splitlines() if " drift " in line]
    assert len(lines) == 5
    assert all(
        "driver tool_mix" in line and "appeared db_query, format_report" in line for line in lines
    )
    assert any(" FAIL drift " in line and " alert · " in line for line in lines)
    # a warning gate trips on every drifted run
    code, _, err = run(["eval", str(traces["tool"]), *gate, "--fail-on", "drift>=warning"], capsys)
    assert code == 1 and "tripped by 5 trace(s)" in err
    # --no-update: the store is exactly as it was
    assert snapshot(db) == before


@pytest.mark.parametrize(
    "case",
    [
        ("tool", "tool_mix", True),
        ("semantic_drift", "semantic", False),
        ("complexity_drift", "complexity", False),
        ("combined_drift", "tool_mix", True),
    ],
)
def test_each_drift_scenario_against_the_control_baselines(
    case: tuple[str, str, bool],
    db: Path,
    traces: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The drifted runs of each scenario, against baselines of 10 control runs (scenario, the
    expected primary driver of the worst run, whether it reaches `alert`)."""
    name, driver, alert = case
    gate = ["eval", str(traces[name]), "--evaluators", "loops", "--baselines", str(db)]
    gate += ["--no-update", "--format", "json"]
    code, out, _ = run([*gate, "--fail-on", "drift>=warning"], capsys)
    assert code == 1
    results = drift_results(out)
    worst = max(results, key=lambda r: r["score"])
    assert worst["attributes"][N.ATTR_DRIFT_PRIMARY_DRIVER] == driver
    assert worst["label"] in (("alert", "critical") if alert else ("warning",))
    code, _, _ = run([*gate, "--fail-on", "drift>=alert"], capsys)
    assert code == (1 if alert else 0)


def test_updates_add_the_runs_below_alert(
    db: Path, traces: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--evaluators", "loops", "--baselines", str(db), "--format", "json"]
    code, out, _ = run(["eval", str(traces["control"]), *base], capsys)
    assert code == 0
    results = drift_results(out)
    assert all(r["attributes"][N.ATTR_DRIFT_BASELINE_UPDATED] for r in results)
    # each run is scored against the runs before it
    assert [r["attributes"][N.ATTR_DRIFT_BASELINE_RUNS] for r in results] == [10, 11, 12, 13, 14]
    code, out, _ = run(["eval", str(traces["tool"]), *base], capsys)
    results = drift_results(out)
    updated = [r for r in results if r["attributes"][N.ATTR_DRIFT_BASELINE_UPDATED]]
    assert all(r["label"] in ("none", "warning") for r in updated)
    assert all(r["label"] in ("alert", "critical") for r in results if r not in updated)
    with SQLiteStore(db) as store:
        baseline = store.get(KEY)
    assert baseline is not None and baseline.runs == 15 + len(updated)


def test_a_pinned_baseline_is_frozen(
    db: Path, traces: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run(["baseline", "pin", KEY, "--baselines", str(db)], capsys)
    assert code == 0
    before = snapshot(db)
    code, out, _ = run(
        ["eval", str(traces["control"]), "--evaluators", "loops", "--baselines", str(db)], capsys
    )
    assert code == 0
    lines = [line for line in out.splitlines() if " drift " in line]
    assert len(lines) == 5 and all("· pinned, not added" in line for line in lines)
    assert snapshot(db) == before
    code, _, _ = run(["baseline", "unpin", KEY, "--baselines", str(db)], capsys)
    run(["eval", str(traces["control"]), "--evaluators", "loops", "--baselines", str(db)], capsys)
    assert snapshot(db)["baselines"][KEY]["runs"] == 15


def test_export_import_round_trip_scores_the_same(
    db: Path, traces: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "baselines.json"
    assert run(["baseline", "export", str(exported), "--baselines", str(db)], capsys)[0] == 0
    copy_db = tmp_path / "imported.sqlite3"
    assert run(["baseline", "import", str(exported), "--baselines", str(copy_db)], capsys)[0] == 0
    assert snapshot(copy_db) == snapshot(db)
    scores = []
    for store in (db, copy_db):
        _, out, _ = run(
            ["eval", str(traces["tool"]), "--evaluators", "loops", "--baselines", str(store),
             "--no-update", "--format", "json"],
            capsys,
        )  # fmt: skip
        scores.append([(r["score"], r["label"], r["explanation"]) for r in drift_results(out)])
    assert scores[0] == scores[1] and len(scores[0]) == 5


# --- where the results sit: below the root, nested, no agent --------------------------------------


@pytest.mark.parametrize("prefix", ["http_", "nested_", "plain_"])
def test_every_run_shape_reaches_the_gate(
    prefix: str, traces: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "b.sqlite3"
    evaluate = ["eval", "--evaluators", "loops", "--baselines", str(db)]
    assert run([*evaluate, str(traces[f"{prefix}base"])], capsys)[0] == 0
    code, _, err = run(
        [*evaluate, str(traces[f"{prefix}control"]), "--no-update", "--fail-on", "drift>=alert"],
        capsys,
    )
    assert code == 0, err
    code, out, err = run(
        [*evaluate, str(traces[f"{prefix}tool"]), "--no-update", "--fail-on", "drift>=alert",
         "--format", "json"],
        capsys,
    )  # fmt: skip
    assert code == 1, err
    records = [json.loads(line) for line in out.splitlines()]
    tripped = [r for r in records if r["attributes"].get(N.ATTR_DRIFT_MAX_SEVERITY) == "alert"]
    assert tripped, records
    for record in tripped:
        attributes = record["attributes"]
        drift = [r for r in record["results"] if r["name"] == N.EVAL_DRIFT]
        keys = {r["attributes"][N.ATTR_DRIFT_AGENT] for r in drift}
        if prefix == "plain_":
            # the implicit run's result is on the root: the root attributes carry it as well
            assert keys == {"research-service/POST /brief"}
            assert attributes[N.ATTR_DRIFT_SEVERITY] == "alert"
        else:
            # agent runs: results on the agent spans, none on the root; the gate reads the
            # trace-level maximum
            assert N.ATTR_DRIFT_SEVERITY not in attributes
            expected = {KEY} if prefix == "http_" else {KEY, "research-service/orchestrator"}
            assert keys == expected
            planner = next(r for r in drift if r["attributes"][N.ATTR_DRIFT_AGENT] == KEY)
            assert planner["label"] in ("warning", "alert", "critical")
            assert planner["span_id"].endswith("00000001")  # the planner's own agent span
        assert attributes[N.ATTR_DRIFT_MAX_SCORE] == max(r["score"] for r in drift)


def test_score_only_runs_need_a_store_and_warn_about_unknown_agents(
    db: Path, traces: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo.sqlite3"
    code, _, err = run(
        ["eval", str(traces["tool"]), "--baselines", str(missing), "--no-update",
         "--fail-on", "drift>=alert"],
        capsys,
    )  # fmt: skip
    assert code == 2 and "no such store (with --no-update there is nothing to score" in err
    assert not missing.exists()
    # the planner is known, the agent below the HTTP root of `plain_` traces is not
    code, out, err = run(
        ["eval", str(traces["plain_control"]), "--evaluators", "loops", "--baselines", str(db),
         "--no-update"],
        capsys,
    )  # fmt: skip
    assert code == 0
    assert "research-service/POST /brief: initializing (no baseline yet) · not added" in out
    assert (
        "warning: no baseline for 1 agent(s), their runs were not scored: "
        "research-service/POST /brief"
    ) in err


def test_traces_without_genai_steps_make_no_baseline(
    traces: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    http = json.loads((traces["plain_base"] / "00.otlp.json").read_text("utf-8"))
    _spans(http)[1:] = []  # only the HTTP root span is left
    path = tmp_path / "http.otlp.json"
    path.write_text(json.dumps(http), encoding="utf-8")
    db = tmp_path / "b.sqlite3"
    code, out, _ = run(["eval", str(path), "--evaluators", "loops", "--baselines", str(db)], capsys)
    assert code == 0 and "no GenAI spans" in out and " drift " not in out
    assert snapshot(db)["baselines"] == {}


# --- errors, HTML, a real process -----------------------------------------------------------------


def test_a_store_of_another_embedder_is_exit_2(
    traces: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    embedder = HashingEmbedder(64)
    features = RunFeatures(
        run_id="r",
        trace_id="t",
        start_ns=1,
        end_ns=2,
        tools={"web_search": 1},
        complexity=tuple(1.0 for _ in range(10)),
        embedding=embed_run(["searched"], embedder),
        sample="searched",
    )
    db = tmp_path / "other.sqlite3"
    with SQLiteStore(db) as store:
        store.update(KEY, Baseline.from_run(features, embedder))
    code, out, err = run(
        ["eval", str(traces["control"]), "--evaluators", "loops", "--baselines", str(db)], capsys
    )
    assert code == 2
    assert "tracehound: error: 5 run(s) not drift-evaluated" in err
    assert "use the same --embedding-model" in err
    assert "not evaluated (BaselineMismatchError)" in out
    assert snapshot(db)["baselines"][KEY]["runs"] == 1


def test_html_report_shows_drift(
    db: Path, traces: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "report.html"
    code, _, _ = run(
        ["eval", str(traces["tool"]), "--evaluators", "loops", "--baselines", str(db),
         "--no-update", "--html", str(html)],
        capsys,
    )  # fmt: skip
    assert code == 0
    page = html.read_text("utf-8")
    assert N.EVAL_DRIFT in page and N.ATTR_DRIFT_MAX_SEVERITY in page
    assert "primary driver: tool mix" in page


def test_the_gate_in_a_subprocess(db: Path, traces: dict[str, Path]) -> None:
    command = [sys.executable, "-m", "tracehound.cli", "eval", "--evaluators", "loops"]
    command += ["--baselines", str(db), "--no-update", "--fail-on", "drift>=alert"]
    done = subprocess.run(
        [*command, str(traces["tool"])], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert f"drift        {KEY}: drift 0." in done.stdout
    assert "--fail-on drift>=alert: tripped by" in done.stderr
    done = subprocess.run(
        [*command, str(traces["control"])], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
