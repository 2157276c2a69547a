"""`--fail-on` rules (`parse_fail_rule`), result statuses and the report's JSON shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tracehound import names
from tracehound.engine import FinalizedTrace
from tracehound.evaluators.base import EvaluationResult
from tracehound.evaluators.summary import derived_attributes
from tracehound.report import (
    ALIASES,
    LEVELS,
    FailRule,
    TraceReport,
    parse_fail_rule,
    result_status,
    worst,
)
from tracehound.steps import Trajectory


def result(label: str | None = None, *, error: str | None = None, **kw: Any) -> EvaluationResult:
    return EvaluationResult(
        name=kw.pop("name", "x"),
        evaluator=kw.pop("evaluator", "e"),
        evaluator_version="1",
        score_label=label,
        error_type=error,
        **kw,
    )


def report(
    attributes: dict[str, Any] | None = None,
    results: Sequence[EvaluationResult] = (),
    span_results: Sequence[EvaluationResult] = (),
    trace_id: str = "t1",
) -> TraceReport:
    trace = FinalizedTrace(
        trace_id=trace_id,
        root_span_id="r",
        trajectory=Trajectory(trace_id, (), (), ()),
        results=tuple(results),
        reason="flush",
        span_count=1,
        truncated=False,
        # as the engine finalizes: root attributes plus the per-run summaries
        attributes={
            **(attributes or {}),
            **derived_attributes(attributes or {}, results),
        },
    )
    return TraceReport(trace, tuple(span_results))


def trips(rule: str, attributes: dict[str, Any]) -> bool:
    return parse_fail_rule(rule).check(report(attributes))


FINAL = "tracehound.evidence.final_survival_ratio"


# --- NAME OP VALUE ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "below", "equal", "above"),
    [
        ("<", True, False, False),
        ("<=", True, True, False),
        (">", False, False, True),
        (">=", False, True, True),
        ("==", False, True, False),
        ("!=", True, False, True),
    ],
)
def test_each_operator(op: str, below: bool, equal: bool, above: bool) -> None:
    rule = f"evidence{op}0.5"
    assert trips(rule, {FINAL: 0.25}) is below
    assert trips(rule, {FINAL: 0.5}) is equal
    assert trips(rule, {FINAL: 0.75}) is above
    # ints and floats compare as numbers; spaces around the parts are allowed
    assert trips(f"  {FINAL} {op} 1 ", {FINAL: 1}) is equal
    assert trips(f"{FINAL}{op}1", {FINAL: 0}) is below


@pytest.mark.parametrize(("alias", "attribute"), sorted(ALIASES.items()))
def test_aliases(alias: str, attribute: str) -> None:
    if alias == "drift_severity":
        assert trips(f"{alias}>=alert", {attribute: "critical"})
        assert not trips(f"{alias}>=alert", {attribute: "warning"})
        return
    assert trips(f"{alias}<2", {attribute: 1})
    assert not trips(f"{alias}<2", {attribute: 3})
    assert not trips(f"{alias}<2", {"tracehound.other": 1})  # the alias reads that attribute only
    assert trips(f"{attribute}<2", {attribute: 1})  # and the full name works as well


def test_alias_targets() -> None:
    assert ALIASES["evidence"] == ALIASES["final_survival"] == FINAL
    assert ALIASES["survival"] == "tracehound.evidence.survival_ratio"
    # the loop evaluator's trace attributes (on the root span) are `tracehound.loops.*`
    assert ALIASES["loops"] == names.ATTR_LOOPS_COUNT == "tracehound.loops.count"
    assert ALIASES["wasted_steps"] == names.ATTR_LOOPS_WASTED_STEPS
    # drift: the worst run of the trace (`TraceReport.attributes` derives it from every run)
    assert ALIASES["drift"] == names.ATTR_DRIFT_MAX_SCORE == "tracehound.drift.max_score"


def test_booleans() -> None:
    truncated = names.ATTR_TRUNCATED
    assert trips(f"{truncated}==true", {truncated: True})
    assert not trips(f"{truncated}==true", {truncated: False})
    assert trips(f"{truncated}!=FALSE", {truncated: True})
    assert not trips(f"{truncated}==true", {})
    # a boolean attribute against a number compares as a boolean
    assert trips(f"{truncated}>=1", {truncated: True})


def test_drift_levels_compare_by_rank() -> None:
    assert list(LEVELS) == ["none", "warning", "alert", "critical"]
    assert [LEVELS[k] for k in LEVELS] == sorted(LEVELS.values())
    severity = "tracehound.drift.severity"
    for level, rank in LEVELS.items():
        assert trips("drift>=alert", {severity: level}) is (rank >= LEVELS["alert"])
        assert trips("drift>warning", {severity: level}) is (rank > LEVELS["warning"])
        assert trips("drift<warning", {severity: level}) is (level == "none")
        assert trips("drift==critical", {severity: level}) is (level == "critical")
        assert trips("drift!=none", {severity: level}) is (level != "none")
        # by rank, not alphabetically ("alert" < "none" as strings)
        assert trips(f"{severity}<=none", {severity: level}) is (level == "none")
    # levels are case-insensitive on both sides
    assert trips("drift>=ALERT", {severity: "Critical"})
    # with a number, `drift` reads the score
    assert trips("drift>0.5", {"tracehound.drift.score": 0.7, severity: "none"})
    assert not trips("drift>0.5", {"tracehound.drift.score": 0.2, severity: "critical"})
    # a level rule on something that is not a level never trips
    assert not trips("drift>=alert", {"tracehound.drift.score": 0.9})
    assert not trips("drift>=none", {severity: "unknown"})
    assert not trips("tracehound.drift.score>=none", {"tracehound.drift.score": 3})


@pytest.mark.parametrize(
    "rule",
    [
        "evidence<0.5",
        "evidence>0.5",
        "evidence==0",
        "evidence!=0.5",
        "survival<=1",
        "loops>=0",
        "wasted_steps!=0",
        "drift>=none",
        "drift<=critical",
        "drift!=0",
        "tracehound.custom.flag==true",
        "tracehound.custom.flag!=false",
    ],
)
def test_a_missing_attribute_never_trips(rule: str) -> None:
    assert not parse_fail_rule(rule).check(report({}))
    assert not parse_fail_rule(rule).check(report({"tracehound.unrelated": 0}))
    assert not parse_fail_rule(rule).check(report({FINAL: None}))


def test_values_of_other_types_never_trip() -> None:
    assert not trips("evidence<0.5", {FINAL: "0.1"})
    assert not trips("evidence<0.5", {FINAL: [0.1]})
    assert not trips("loops>=1", {names.ATTR_LOOPS_COUNT: "3"})
    assert trips("evidence<inf", {FINAL: 1e300})
    assert trips("evidence>-1e-3", {FINAL: 0.0})


# --- words --------------------------------------------------------------------------------------


def test_loop_rule() -> None:
    detected = names.ATTR_LOOPS_DETECTED
    for text in ("loop", "loops", " LOOP "):
        rule = parse_fail_rule(text)
        assert rule.text == text
        assert rule.check(report({detected: True}))
        assert not rule.check(report({detected: False}))
        assert not rule.check(report({}))
        # per-span attributes (`tracehound.loop.*`) are not the trace's verdict
        assert not rule.check(report({"tracehound.loop.detected": True}))


def test_status_rules() -> None:
    passing = report(results=[result("pass"), result("grounded")])
    warning = report(results=[result("pass"), result("unused")])
    failing = report(results=[result("warn"), result("ungrounded")])
    errored = report(results=[result("pass")], span_results=[result(error="ValueError")])
    assert (passing.status, warning.status, failing.status) == ("PASS", "WARN", "FAIL")
    fail, warn, error = (parse_fail_rule(w) for w in ("fail", "WARN", "error"))
    assert [fail.check(r) for r in (passing, warning, failing)] == [False, False, True]
    assert [warn.check(r) for r in (passing, warning, failing)] == [False, True, True]
    assert [error.check(r) for r in (passing, warning, errored)] == [False, False, True]
    # an evaluation error in a trace result is a warning and an error
    broken = report(results=[result(error="RuntimeError")])
    assert broken.status == "WARN" and error.check(broken) and warn.check(broken)


def test_tripped_by_keeps_report_order() -> None:
    reports = [report({FINAL: v}, trace_id=f"t{i}") for i, v in enumerate((0.1, 0.9, 0.0, None))]
    rule = parse_fail_rule("evidence<0.5")
    assert isinstance(rule, FailRule)
    assert [r.trace_id for r in rule.tripped_by(reports)] == ["t0", "t2"]
    assert rule.tripped_by([]) == []


# --- bad rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "use loop, fail, warn, error, or NAME OP VALUE such as evidence<0.2 or drift>=alert"),
        ("evidence", "use loop, fail, warn, error, or NAME OP VALUE"),
        ("evidence<", "use loop, fail, warn, error, or NAME OP VALUE"),
        ("evidence=0.5", "use loop, fail, warn, error, or NAME OP VALUE"),
        ("evidence => 0.5", "use loop, fail, warn, error, or NAME OP VALUE"),
        ("evidence<0.5 and more", "use loop, fail, warn, error, or NAME OP VALUE"),
        ("1abc<2", "use loop, fail, warn, error, or NAME OP VALUE"),
        (
            "evidence<<0.5",
            "'<0.5' is not a number, true/false, or one of none, warning, alert, critical",
        ),
        ("evidence<abc", "'abc' is not a number"),
        ("evidence<nan", "'nan' is not a number"),
        (
            "drift>=high",
            "'high' is not a number, true/false, or one of none, warning, alert, critical",
        ),
        (
            "evidnce<0.5",
            "unknown name 'evidnce'; use one of evidence, final_survival, survival, loops",
        ),
        ("Evidence<0.5", "unknown name 'Evidence'"),
        ("failures", "use loop, fail, warn, error"),
    ],
)
def test_bad_rules_raise_a_helpful_value_error(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="invalid --fail-on rule") as info:
        parse_fail_rule(text)
    assert f"invalid --fail-on rule {text!r}" in str(info.value)
    assert message in str(info.value)


def test_unknown_name_message_suggests_full_attribute_names() -> None:
    with pytest.raises(ValueError) as info:
        parse_fail_rule("final<0.5")
    assert "or a full attribute name such as tracehound.evidence.final_survival_ratio" in str(
        info.value
    )


# --- statuses and JSON ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "status"),
    [
        (None, "PASS"),
        ("pass", "PASS"),
        ("grounded", "PASS"),
        ("reused", "PASS"),
        ("no_evidence", "PASS"),
        ("warn", "WARN"),
        ("Unused", "WARN"),
        ("drifted", "WARN"),
        ("fail", "FAIL"),
        ("ungrounded", "FAIL"),
        ("loop", "FAIL"),
        ("alert", "FAIL"),
        ("CRITICAL", "FAIL"),
        *((kind, "WARN") for kind in names.LOOP_KINDS),
        *((mode, "WARN") for mode in names.FAILURE_MODES),
    ],
)
def test_result_status(label: str | None, status: str) -> None:
    assert result_status(result(label)) == status
    assert result_status(result(label, error="Boom")) == "WARN"


def test_report_status_counts_trace_results_only() -> None:
    assert report(span_results=[result("fail")]).status == "PASS"
    assert report(results=[]).status == "PASS"
    assert worst([]) == "PASS"
    assert (
        worst([report(), report(results=[result("fail")]), report(results=[result("warn")])])
        == "FAIL"
    )


def test_to_json() -> None:
    span = result("repeat", name="tracehound.loop", span_id="s1", score_value=0.0,
                  attributes={"tracehound.loop.kinds": ("repeat", "cycle")})  # fmt: skip
    trace = result("fail", name="tracehound.loops", span_id="r", score_value=0.5, explanation="x")
    broken = result(error="RuntimeError", span_id="r")
    rep = report(
        {"tracehound.loops.kinds": ("repeat",), "tracehound.x": 1.5}, [trace, broken], [span]
    )
    data = rep.to_json()
    assert data == {
        "trace_id": "t1",
        "status": "FAIL",
        "attributes": {"tracehound.loops.kinds": ["repeat"], "tracehound.x": 1.5},
        "results": [
            {
                "evaluator": "e",
                "name": "tracehound.loop",
                "span_id": "s1",
                "score": 0.0,
                "label": "repeat",
                "explanation": None,
                "attributes": {"tracehound.loop.kinds": ["repeat", "cycle"]},
            },
            {
                "evaluator": "e",
                "name": "tracehound.loops",
                "span_id": "r",
                "score": 0.5,
                "label": "fail",
                "explanation": "x",
                "attributes": {},
            },
            {
                "evaluator": "e",
                "name": "x",
                "span_id": "r",
                "score": None,
                "label": None,
                "explanation": None,
                "attributes": {},
                "error_type": "RuntimeError",
            },
        ],
    }
