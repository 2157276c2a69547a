"""`tracehound baseline …`, and the drift options of `tracehound eval` (validation, summaries)."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tracehound import names as N
from tracehound.baselines import ENV_BASELINES, ENV_REDIS_URL, SQLiteStore
from tracehound.cli import main
from tracehound.cli_baseline import result_line
from tracehound.drift import Baseline, HashingEmbedder, RunFeatures, embed_run
from tracehound.engine import FinalizedTrace
from tracehound.evaluators.base import EvaluationResult
from tracehound.report import TraceReport, derived_attributes, parse_fail_rule
from tracehound.steps import Trajectory

EMBEDDER = HashingEmbedder(64)
NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


def delta(index: int, embedder: HashingEmbedder = EMBEDDER, tool: str = "search") -> Baseline:
    text = f"Searched the catalogue, step {index % 3}, then summarized."
    features = RunFeatures(
        run_id=f"r{index}",
        trace_id=f"{index:032x}",
        start_ns=NS + index * 60_000_000_000,
        end_ns=NS + index * 60_000_000_000 + 5_000_000_000,
        tools={tool: 1 + index % 2, "summarize": 1},
        complexity=tuple(float(index % 4 + d) for d in range(10)),
        embedding=embed_run([text], embedder),
        sample=text,
    )
    return Baseline.from_run(features, embedder)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "baselines.sqlite3"
    with SQLiteStore(path) as store:
        for i in range(3):
            store.update("svc/planner", delta(i))
        store.update("svc/writer", delta(7, tool="draft"))
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def stored(path: Path) -> dict[str, Any]:
    with SQLiteStore(path) as store:
        return store.export_baselines()


# --- list -----------------------------------------------------------------------------------------


def test_list_is_a_table(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["baseline", "list", "--baselines", str(db)], capsys)
    assert code == 0 and err == ""
    header, planner, writer, footer = out.splitlines()
    assert header.split() == [
        "AGENT", "RUNS", "DRIFTING", "PINNED", "EMBEDDER", "DIM", "FIRST", "RUN", "LAST", "RUN",
        "UPDATED", "(UTC)",
    ]  # fmt: skip
    cells = planner.split()
    assert cells[:6] == ["svc/planner", "3", "-", "no", EMBEDDER.name, "64"]
    assert cells[6:10] == ["2026-01-01", "00:00:00", "2026-01-01", "00:02:05"]
    assert writer.split()[:4] == ["svc/writer", "1", "-", "no"]
    # columns line up: every row starts its RUNS column at the same place
    assert planner.index(" 3 ") + 1 == writer.index(" 1 ") + 1 == header.index("RUNS") + 3
    assert footer == f"2 baseline(s) in {db}"


def test_list_json_and_empty_stores(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["baseline", "list", "--baselines", str(db), "--format", "json"], capsys)
    document = json.loads(out)
    assert code == 0 and document["store"] == str(db)
    assert [(b["agent"], b["runs"], b["pinned"], b["dim"]) for b in document["baselines"]] == [
        ("svc/planner", 3, False, 64),
        ("svc/writer", 1, False, 64),
    ]
    assert document["baselines"][0]["first_ns"] == NS
    missing = tmp_path / "nowhere" / "b.sqlite3"
    code, out, _ = run(["baseline", "list", "--baselines", str(missing)], capsys)
    assert code == 0 and out == f"no baselines in {missing} (does not exist)\n"
    assert not missing.parent.exists()  # reading never creates the store
    empty = tmp_path / "empty.sqlite3"
    SQLiteStore(empty).close()
    code, out, _ = run(["baseline", "list", "--baselines", str(empty)], capsys)
    assert code == 0 and out == f"no baselines in {empty}\n"


def test_the_default_store_comes_from_the_environment(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV_BASELINES, str(db))
    monkeypatch.setenv(ENV_REDIS_URL, "redis://127.0.0.1:1/0")  # $TRACEHOUND_BASELINES wins
    code, out, _ = run(["baseline", "list"], capsys)
    assert code == 0 and out.endswith(f"2 baseline(s) in {db}\n")
    code, out, _ = run(["baseline", "pin", "svc/writer"], capsys)
    assert code == 0 and out == f"pinned svc/writer (1 run(s)) in {db}\n"
    # --baselines goes before or after the action, and beats the environment
    other = db.parent / "other.sqlite3"
    for argv in (["--baselines", str(other), "list"], ["list", "--baselines", str(other)]):
        code, out, _ = run(["baseline", *argv], capsys)
        assert code == 0 and out == f"no baselines in {other} (does not exist)\n"


def test_without_baselines_in_the_environment_the_redis_url_is_the_store(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As `serve`, `runs` and `mcp` choose it: the command reads the Redis the sidecar writes."""
    from redis_helpers import free_port

    port = free_port()
    monkeypatch.delenv(ENV_BASELINES, raising=False)
    monkeypatch.setenv(ENV_REDIS_URL, f"redis://127.0.0.1:{port}/0?socket_connect_timeout=0.5")
    code, out, err = run(["baseline", "list"], capsys)
    assert code == 2 and out == ""
    assert f"127.0.0.1:{port}" in err and err.count("\n") == 1, err


# --- show -----------------------------------------------------------------------------------------


def test_show_json(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["baseline", "show", "svc/planner", "--baselines", str(db)], capsys)
    assert code == 0
    shown = json.loads(out)
    with SQLiteStore(db) as store:
        baseline = store.get("svc/planner")
    assert baseline is not None
    assert shown == {"agent": "svc/planner", "store": str(db), **baseline.summary()}
    assert shown["runs"] == 3 and set(shown["tools"]) == {"search", "summarize"}
    assert len(shown["recent_runs"]) == 3
    assert set(shown["complexity_mean"]) >= {"llm_calls", "tool_calls", "duration_s"}


def test_show_text(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["baseline", "show", "svc/planner", "--baselines", str(db), "--format", "text"], capsys
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "agent       svc/planner"
    assert lines[2] == "runs        3 (weight 3)"
    assert lines[3] == f"embedder    {EMBEDDER.name}, 64-d"
    assert "runs from   2026-01-01 00:00:00 to 2026-01-01 00:02:05 UTC" in lines
    assert any(line.startswith("tool shares search 0.") for line in lines)
    assert "recent runs 3" in lines


def test_unknown_agents_are_usage_errors(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for action in ("show", "pin", "unpin", "reset"):
        code, out, err = run(["baseline", action, "planner", "--baselines", str(db)], capsys)
        assert code == 2 and out == "", action
        assert err.startswith(f"tracehound: error: no baseline for agent 'planner' in {db}")
        assert "did you mean 'svc/planner'?" in err
    code, _, err = run(["baseline", "show", "svc/x", "--baselines", str(db.parent / "n")], capsys)
    assert code == 2 and "(does not exist) (it is empty)" in err


# --- pin, unpin, reset ----------------------------------------------------------------------------


def test_pin_and_unpin(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["baseline", "pin", "svc/planner", "--baselines", str(db)], capsys)
    assert code == 0 and out == f"pinned svc/planner (3 run(s)) in {db}\n"
    with SQLiteStore(db) as store:
        assert store.update("svc/planner", delta(9)).outcome == "pinned"
        assert [i.pinned for i in store.list()] == [True, False]
    code, out, _ = run(["baseline", "pin", "svc/planner", "--baselines", str(db)], capsys)
    assert code == 0 and out == f"svc/planner was already pinned (3 run(s)) in {db}\n"
    code, _, _ = run(["baseline", "list", "--baselines", str(db)], capsys)
    code, out, _ = run(["baseline", "unpin", "svc/planner", "--baselines", str(db)], capsys)
    assert code == 0 and out == f"unpinned svc/planner (3 run(s)) in {db}\n"
    code, out, _ = run(["baseline", "unpin", "svc/planner", "--baselines", str(db)], capsys)
    assert out == f"svc/planner was already unpinned (3 run(s)) in {db}\n"
    with SQLiteStore(db) as store:
        assert store.update("svc/planner", delta(9)).outcome == "updated"


def test_reset_prints_what_it_removed(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(["baseline", "pin", "svc/planner", "--baselines", str(db)], capsys)
    code, out, err = run(["baseline", "reset", "svc/planner", "--baselines", str(db)], capsys)
    assert code == 0 and err == ""
    assert out == (
        f"removed baseline svc/planner from {db}: 3 run(s), pinned, embedder {EMBEDDER.name} "
        "64-d, runs from 2026-01-01 00:00:00 to 2026-01-01 00:02:05 UTC\n"
    )
    assert list(stored(db)["baselines"]) == ["svc/writer"]
    code, _, err = run(["baseline", "reset", "svc/planner", "--baselines", str(db)], capsys)
    assert code == 2 and "no baseline for agent 'svc/planner'" in err


# --- export, import -------------------------------------------------------------------------------


def test_export_import_round_trip(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["baseline", "export", "--baselines", str(db)], capsys)
    assert code == 0
    document = json.loads(out)
    assert document == stored(db)
    exported = tmp_path / "export.json"
    code, out, _ = run(["baseline", "export", str(exported), "--baselines", str(db)], capsys)
    assert code == 0 and out == f"exported 2 baseline(s) from {db} to {exported}\n"
    assert json.loads(exported.read_text("utf-8")) == document

    copy = tmp_path / "copy" / "b.sqlite3"
    code, out, _ = run(["baseline", "import", str(exported), "--baselines", str(copy)], capsys)
    assert code == 0
    assert out == f"imported 2 baseline(s) into {copy} (replace): svc/planner, svc/writer\n"
    assert stored(copy) == document
    # importing again replaces: nothing changes
    run(["baseline", "import", str(exported), "--baselines", str(copy)], capsys)
    assert stored(copy) == document
    # merging adds the runs (as replicas' partial baselines combine)
    code, out, _ = run(
        ["baseline", "import", str(exported), "--merge", "--baselines", str(copy)], capsys
    )
    assert code == 0 and "(merge)" in out
    with SQLiteStore(copy) as store:
        assert [(i.key, i.runs) for i in store.list()] == [("svc/planner", 6), ("svc/writer", 2)]


def test_import_from_stdin(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(stored(db))))
    target = tmp_path / "t.sqlite3"
    code, out, _ = run(["baseline", "import", "-", "--baselines", str(target)], capsys)
    assert code == 0 and "imported 2 baseline(s)" in out
    assert stored(target) == stored(db)


def test_bad_imports_change_nothing(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = stored(db)
    cases: list[tuple[str, str]] = [
        ("{not json", "not JSON"),
        (json.dumps({"format": "other"}), "not a tracehound baselines export"),
        (json.dumps({**before, "baselines": {"svc/x": {"format": "?"}}}), "baseline 'svc/x'"),
    ]
    for n, (text, message) in enumerate(cases):
        path = tmp_path / f"bad{n}.json"
        path.write_text(text, encoding="utf-8")
        code, out, err = run(["baseline", "import", str(path), "--baselines", str(db)], capsys)
        assert code == 2 and out == "" and message in err, (text, err)
        assert err.startswith(f"tracehound: error: {path}: ")
    code, _, err = run(["baseline", "import", str(tmp_path / "none.json")], capsys)
    assert code == 2 and "none.json: No such file or directory" in err
    assert stored(db) == before


def test_merging_another_embedder_is_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.sqlite3"
    with SQLiteStore(other) as store:
        store.update("svc/planner", delta(0, HashingEmbedder(128)))
        document = store.export_baselines()
    path = tmp_path / "other.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    before = stored(db)
    code, _, err = run(["baseline", "import", str(path), "--merge", "--baselines", str(db)], capsys)
    assert code == 2 and "mismatched embedder, nothing imported" in err
    assert stored(db) == before


def test_unusable_stores_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"this is not a database at all" * 10)
    foreign = tmp_path / "foreign.sqlite3"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE users (id INTEGER)")
    conn.commit()
    conn.close()
    for path, why in ((garbage, "not an SQLite database"), (foreign, "another application")):
        before = path.read_bytes()
        for argv in (["list"], ["show", "svc/a"], ["export"], ["reset", "svc/a"]):
            code, out, err = run(["baseline", *argv, "--baselines", str(path)], capsys)
            assert code == 2 and out == "", argv
            assert err.startswith(f"tracehound: error: {path} is not a tracehound baseline store")
            assert why in err
        assert path.read_bytes() == before  # never reinitialized


# --- eval options ---------------------------------------------------------------------------------


def test_eval_drift_options_need_baselines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.json"
    trace.write_text('{"resourceSpans": []}', encoding="utf-8")
    for extra, message in (
        (["--fail-on", "drift>=alert"], "--fail-on drift>=alert needs --baselines PATH"),
        (["--fail-on", "tracehound.drift.score>0.5"], "needs --baselines PATH"),
        (["--no-update"], "--no-update needs --baselines PATH"),
        (["--embedding-model", str(tmp_path)], "--embedding-model needs --baselines PATH"),
    ):
        code, _, err = run(["eval", str(trace), *extra], capsys)
        assert code == 2 and message in err, (extra, err)
    code, _, err = run(
        ["eval", str(trace), "--baselines", str(tmp_path / "b"), "--embedding-model", "/nope"],
        capsys,
    )
    assert code == 2 and "--embedding-model /nope: " in err
    assert not (tmp_path / "b").exists()


def test_eval_refuses_an_unusable_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.json"
    trace.write_text('{"resourceSpans": []}', encoding="utf-8")
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"x" * 200)
    code, _, err = run(["eval", str(trace), "--baselines", str(garbage)], capsys)
    assert code == 2 and "is not a tracehound baseline store" in err


# --- summary lines and trace-level drift attributes -----------------------------------------------


def drift_result(
    agent: str, score: float | None, severity: str | None, *, span_id: str | None = None
) -> EvaluationResult:
    attributes: dict[str, Any] = {
        N.ATTR_DRIFT_AGENT: agent,
        N.ATTR_DRIFT_CONFIDENCE: "high" if score is not None else "initializing",
        N.ATTR_DRIFT_BASELINE_RUNS: 12 if score is not None else 0,
        N.ATTR_DRIFT_BASELINE_UPDATED: severity in (None, "none", "warning"),
        N.ATTR_DRIFT_BASELINE_PINNED: False,
    }
    if score is not None:
        attributes |= {
            N.ATTR_DRIFT_SCORE: score,
            N.ATTR_DRIFT_SEVERITY: severity,
            N.ATTR_DRIFT_PRIMARY_DRIVER: "tool_mix",
        }
    return EvaluationResult(
        name=N.EVAL_DRIFT,
        evaluator="drift",
        evaluator_version="1.0.0",
        span_id=span_id,
        score_value=score,
        score_label=severity or "initializing",
        explanation=(
            f"drift {score:.2f} ({severity}; baseline of 12 runs, confidence high); primary "
            "driver: tool mix. Tools: appeared db_query. Complexity: within one standard deviation."
            if score is not None
            else "no baseline yet for this agent: this run starts it; no score."
        ),
        attributes=attributes,
    )


def test_drift_summary_lines() -> None:
    line = result_line(drift_result("svc/planner", 0.6543, "alert"), 200)
    assert line == (
        "      FAIL drift        svc/planner: drift 0.65 alert · confidence high (12 run(s)) · "
        "driver tool_mix · not added — Tools: appeared db_query. Complexity: within one "
        "standard deviation.\n"
    )
    line = result_line(drift_result("svc/planner", 0.1, "none"), 200)
    assert line is not None
    assert line.startswith("      PASS drift        svc/planner: drift 0.10 none")
    assert "· baseline updated —" in line
    line = result_line(drift_result("svc/new", None, None), 200)
    assert line == (
        "      PASS drift        svc/new: initializing (no baseline yet) · baseline updated\n"
    )
    failed = EvaluationResult(
        name=N.EVAL_DRIFT,
        evaluator="drift",
        evaluator_version="1.0.0",
        error_type="BaselineMismatchError",
        explanation="drift of 'svc/a' not evaluated: embedder mismatch",
        attributes={N.ATTR_DRIFT_AGENT: "svc/a"},
    )
    assert result_line(failed, 200) == (
        "      WARN drift        svc/a: not evaluated (BaselineMismatchError) — drift of 'svc/a' "
        "not evaluated: embedder mismatch\n"
    )
    other = EvaluationResult(name="x", evaluator="e", evaluator_version="1")
    assert result_line(other, 100) is None


def report_of(root: dict[str, Any], results: list[EvaluationResult]) -> TraceReport:
    trace = FinalizedTrace(
        trace_id="t",
        root_span_id="root",
        trajectory=Trajectory("t", (), (), ()),
        results=tuple(results),
        reason="flush",
        span_count=1,
        truncated=False,
        attributes={**root, **derived_attributes(root, results)},  # as the engine finalizes
    )
    return TraceReport(trace, ())


def test_the_worst_run_of_a_trace_is_a_trace_attribute() -> None:
    outer = drift_result("svc/orchestrator", 0.1, "none", span_id="a1")
    inner = drift_result("svc/planner", 0.72, "alert", span_id="a2")
    fresh = drift_result("svc/new", None, None, span_id="a3")
    report = report_of({}, [outer, inner, fresh])
    attrs = report.attributes
    assert attrs[N.ATTR_DRIFT_MAX_SEVERITY] == "alert"
    assert attrs[N.ATTR_DRIFT_MAX_SCORE] == 0.72
    assert attrs[N.ATTR_DRIFT_MAX_AGENT] == "svc/planner"
    assert report.to_json()["attributes"][N.ATTR_DRIFT_MAX_SEVERITY] == "alert"
    assert parse_fail_rule("drift>=alert").check(report)
    assert parse_fail_rule("drift>0.7").check(report)
    assert not parse_fail_rule("drift>=critical").check(report)
    assert parse_fail_rule("drift_severity>=warning").check(report)
    # only initializing runs: nothing to gate on
    assert derived_attributes({}, [fresh]) == {}
    assert not parse_fail_rule("drift>=none").check(report_of({}, [fresh]))
    # the root's own drift attributes (a trace without agent spans) count as one run
    root = {N.ATTR_DRIFT_SEVERITY: "critical", N.ATTR_DRIFT_SCORE: 0.9, N.ATTR_DRIFT_AGENT: "svc/r"}
    assert derived_attributes(root, [outer]) == {
        N.ATTR_DRIFT_MAX_SEVERITY: "critical",
        N.ATTR_DRIFT_MAX_SCORE: 0.9,
        N.ATTR_DRIFT_MAX_AGENT: "svc/r",
    }
    # failed drift evaluations are not scores
    failed = EvaluationResult(
        name=N.EVAL_DRIFT, evaluator="drift", evaluator_version="1", error_type="X"
    )
    assert derived_attributes({}, [failed]) == {}
