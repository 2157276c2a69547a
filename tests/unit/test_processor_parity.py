"""Same spans → same results, whichever shape evaluates them.

The in-process processor (wrap/stream, wrap/hold, observe) is fed the spans and GenAI log records
of every fixture (real captures) and every synthetic scenario the way the SDK feeds it (log
records through a LoggerProvider carrying the companion, spans through `on_end`). Its results —
read back from the `gen_ai.evaluation.result` log records it emitted — must equal those of the
`Engine` fed directly and, for fixtures, those of `tracehound eval --format json` on the files.
The exported root span copies carry exactly the trace attributes `eval` reports.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _processor_rig import (
    Rig,
    make_rig,
    plain,
    replay_logs,
    replay_records,
    replay_spans,
    results_from_engine,
    results_from_events,
    results_from_json,
    sampled,
)
from _scenarios import SCENARIOS
from _sdk import capture

from helpers import (
    FIXTURE_NAMES,
    feed_engine,
    fixture_logs_request,
    fixture_path,
    fixture_request,
    has_logs,
    load_fixture,
    readable_spans_from_request,
)
from tracehound.cli import main as cli_main
from tracehound.cli import select_evaluators
from tracehound.engine import Engine, EngineConfig
from tracehound.spans import LogView, SpanView

MODES = [("wrap", "stream"), ("wrap", "hold"), ("observe", "stream")]
CONFIG = EngineConfig(quiet_period=60.0, trace_timeout=120.0)  # only force_flush finalizes


def run_processor(mode: str, forwarding: str, feed: Any) -> Rig:
    rig = make_rig(
        "memory" if mode == "wrap" else None, forwarding=forwarding, engine_config=CONFIG
    )
    feed(rig)
    assert rig.processor.force_flush(10_000)
    return rig


def engine_results(views: list[SpanView], logs: list[LogView]) -> list[Any]:
    engine = Engine(select_evaluators(None), CONFIG)
    results = []
    for log in logs:
        engine.add_log(log)
    outcomes, finalized = feed_engine(engine, views)
    for outcome in outcomes:
        results.extend(outcome.results)
    for trace in finalized:
        results.extend(trace.results)
    return results_from_engine(results)


def eval_json(name: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    paths = [str(fixture_path(name, "pb"))]
    if has_logs(name):
        paths.append(str(fixture_path(name, "pb", logs=True)))
    capsys.readouterr()
    assert cli_main(["eval", "--format", "json", *paths]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def check_root_copy(rig: Rig, attributes: dict[str, Any]) -> None:
    roots = [s for s in rig.exported() if s.parent is None]
    assert len(roots) == 1
    exported = roots[0].attributes or {}
    assert attributes, "expected trace attributes"
    for key, value in attributes.items():
        assert plain(exported.get(key)) == plain(value), key


@pytest.mark.parametrize("name", FIXTURE_NAMES)
@pytest.mark.parametrize(("mode", "forwarding"), MODES)
def test_fixture_processor_equals_eval(
    name: str, mode: str, forwarding: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = [sampled(s) for s in readable_spans_from_request(fixture_request(name))]

    def feed(rig: Rig) -> None:
        if has_logs(name):
            assert replay_logs(rig, fixture_logs_request(name)) > 0
        replay_spans(rig, spans)

    rig = run_processor(mode, forwarding, feed)
    try:
        reports = eval_json(name, capsys)
        expected = results_from_json(reports)
        assert expected, "eval produced no result"
        assert rig.results() == expected
        views, logs = load_fixture(name, "pb")
        assert engine_results(views, logs) == expected
        if mode == "wrap":
            assert len(rig.exported()) == len(spans)
            (report,) = reports
            check_root_copy(rig, report["attributes"])
        else:
            assert rig.processor.stats.spans_exported == 0
    finally:
        rig.close()


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize(("mode", "forwarding"), MODES)
def test_scenario_processor_equals_engine(scenario: str, mode: str, forwarding: str) -> None:
    captured = capture(SCENARIOS[scenario])

    def feed(rig: Rig) -> None:
        replay_records(rig, captured.logs)
        replay_spans(rig, captured.spans)

    rig = run_processor(mode, forwarding, feed)
    try:
        expected = engine_results(captured.span_views(), captured.log_views())
        got = rig.results()
        assert got == expected
        assert got, "expected results"
        if mode == "wrap":
            assert {s.context.span_id for s in rig.exported()} == {
                s.context.span_id for s in captured.spans
            }
        assert rig.processor.stats.internal_errors == 0
    finally:
        rig.close()


def test_results_do_not_depend_on_the_mode() -> None:
    """Results, exported span ids and root attributes agree across the three modes."""
    captured = capture(SCENARIOS["genai_agent"])
    outcomes = []
    for mode, forwarding in MODES:
        rig = run_processor(
            mode,
            forwarding,
            lambda rig: (replay_records(rig, captured.logs), replay_spans(rig, captured.spans)),
        )
        try:
            roots = [s for s in rig.exported() if s.parent is None] if mode == "wrap" else []
            root_attrs = {
                k: plain(v)
                for s in roots
                for k, v in (s.attributes or {}).items()
                if k.startswith("tracehound.")
            }
            outcomes.append((mode, results_from_events(rig.events()), root_attrs))
        finally:
            rig.close()
    (_, stream, stream_root), (_, hold, hold_root), (_, observe, _) = outcomes
    assert stream == hold == observe
    assert stream_root == hold_root
    assert stream_root["tracehound.evidence.final_survival_ratio"] is not None
