"""Per-trace reports for `tracehound eval`: status, JSON lines, gate rules.

A `TraceReport` gathers what the engine produced for one trace: the per-span results computed as
its spans arrived and the trace results computed at finalization, with the `tracehound.*`
attributes each result puts on its span — exactly the names the processor and the sidecar emit.
"""

from __future__ import annotations

import fnmatch
import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tracehound import names
from tracehound.engine import FinalizedTrace
from tracehound.evaluators.base import EvaluationResult
from tracehound.evaluators.summary import LEVELS, derived_attributes

__all__ = [
    "FailRule",
    "Status",
    "TraceReport",
    "derived_attributes",
    "parse_fail_rule",
    "result_status",
]

Status = Literal["PASS", "WARN", "FAIL"]
_ORDER: dict[Status, int] = {"PASS": 0, "WARN": 1, "FAIL": 2}

# Labels are low-cardinality by contract; these decide the verdict printed for a result.
FAIL_LABELS = frozenset(("fail", "ungrounded", "loop", "alert", "critical", "regressed"))
WARN_LABELS = frozenset(
    (
        "warn",
        "warning",
        "unused",
        "drifted",
        "no_evidence_reuse",
        # per-span loop and failure-mode results are labelled with the loop kind / the mode
        *names.LOOP_KINDS,
        *names.FAILURE_MODES,
    )
)


def result_status(result: EvaluationResult) -> Status:
    if result.error_type:
        return "WARN"
    label = (result.score_label or "").lower()
    if label in FAIL_LABELS:
        return "FAIL"
    if label in WARN_LABELS:
        return "WARN"
    return "PASS"


EVALUATOR_COLUMN = len("expectations")
"""Width of the evaluator column in `eval`'s text lines: the longest built-in evaluator name."""


def result_prefix(result: EvaluationResult) -> str:
    """The indented status and evaluator columns that start each result line of `eval`."""
    return f"      {result_status(result):<4} {result.evaluator:<{EVALUATOR_COLUMN}} "


@dataclass(frozen=True, slots=True)
class TraceReport:
    trace: FinalizedTrace
    span_results: tuple[EvaluationResult, ...]

    @property
    def trace_id(self) -> str:
        return self.trace.trace_id

    @property
    def trace_results(self) -> tuple[EvaluationResult, ...]:
        return self.trace.results

    @property
    def status(self) -> Status:
        statuses = [result_status(r) for r in self.trace.results]
        return max(statuses, key=_ORDER.__getitem__, default="PASS")

    @property
    def attributes(self) -> dict[str, Any]:
        """The root span's `tracehound.*` attributes, including the trace-level summaries of
        per-run results (`derived_attributes`) that the gate rules read."""
        return dict(self.trace.attributes)

    def all_results(self) -> list[EvaluationResult]:
        return [*self.span_results, *self.trace.results]

    def to_json(self) -> dict[str, Any]:
        """The stable JSON-lines shape of `eval --format json`."""
        return {
            "trace_id": self.trace_id,
            "status": self.status,
            "attributes": _jsonable(self.attributes),
            "results": [_result_json(r) for r in self.all_results()],
        }


def _result_json(result: EvaluationResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "evaluator": result.evaluator,
        "name": result.name,
        "span_id": result.span_id,
        "score": result.score_value,
        "label": result.score_label,
        "explanation": result.explanation,
        "attributes": _jsonable(result.attributes),
    }
    if result.error_type:
        out["error_type"] = result.error_type
    return out


def _jsonable(attributes: Any) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dict(attributes).items()}


# --- gate rules ---------------------------------------------------------------------------------

# Short names for the attributes users gate on most.
ALIASES = {
    "evidence": "tracehound.evidence.final_survival_ratio",
    "final_survival": "tracehound.evidence.final_survival_ratio",
    "survival": "tracehound.evidence.survival_ratio",
    "loops": names.ATTR_LOOPS_COUNT,
    "wasted_steps": names.ATTR_LOOPS_WASTED_STEPS,
    # drift: the worst run of the trace (nested agents included), see `derived_attributes`
    "drift": names.ATTR_DRIFT_MAX_SCORE,
    "drift_severity": names.ATTR_DRIFT_MAX_SEVERITY,
}
# A rule comparing a name with a level (drift>=alert) reads this attribute instead.
LEVEL_ALIASES = {"drift": names.ATTR_DRIFT_MAX_SEVERITY}
# Golden-trace verdict words (`--fail-on regressed`): the worst verdict they trip at.
GOLDEN_RULES = {"regressed": "regressed", "drifted": "drifted"}
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "==": operator.eq,
    "!=": operator.ne,
}
_RULE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$")
# Named levels compare by rank (drift severity): `LEVELS`, from tracehound.evaluators.summary.


@dataclass(frozen=True, slots=True)
class FailRule:
    text: str
    check: Callable[[TraceReport], bool]

    def tripped_by(self, reports: Iterable[TraceReport]) -> list[TraceReport]:
        return [r for r in reports if self.check(r)]


def parse_fail_rule(text: str) -> FailRule:
    """`loop`, `fail`, `warn`, `error`, or `NAME OP VALUE` (e.g. `evidence<0.2`, `drift>=alert`).

    NAME is an alias (evidence, final_survival, survival, loops, wasted_steps, drift,
    drift_severity) or a trace attribute (`tracehound.…`, dotted); VALUE is a number, true/false,
    or a drift level (none < warning < alert < critical, compared by rank; `drift` compared with
    a level reads the worst severity over the trace's runs, with a number the highest score). A
    rule on an attribute the trace does not have never trips. `regressed` / `drifted` trip on a
    golden-trace verdict (`eval --against`) that bad or worse. `expectations` trips on any
    failed expectation rule, `expectations:RULE` on that rule (`BLOCK.CHECK`, or a whole
    block; globs allowed). Raises ValueError with the
    accepted forms on anything else.
    """
    word = text.strip().lower()
    if word in ("loop", "loops"):
        return FailRule(text, lambda r: bool(r.attributes.get(names.ATTR_LOOPS_DETECTED)))
    if word == "fail":
        return FailRule(text, lambda r: r.status == "FAIL")
    if word == "warn":
        return FailRule(text, lambda r: r.status in ("WARN", "FAIL"))
    if word == "error":
        return FailRule(text, lambda r: any(x.error_type for x in r.all_results()))
    if word in GOLDEN_RULES:
        return FailRule(text, _golden_check(GOLDEN_RULES[word]))
    if word == "expectations" or word.startswith("expectations:"):
        return FailRule(text, _expectations_check(text.strip()[len("expectations:") :]))
    match = _RULE.match(text)
    if not match:
        raise ValueError(
            f"invalid --fail-on rule {text!r}: use loop, fail, warn, error, or NAME OP VALUE "
            "such as evidence<0.2 or drift>=alert (or expectations, expectations:RULE)"
        )
    name, op, raw = match.groups()
    if name not in ALIASES and "." not in name:
        raise ValueError(
            f"invalid --fail-on rule {text!r}: unknown name {name!r}; use one of "
            f"{', '.join(ALIASES)} or a full attribute name such as "
            f"{names.ATTR_EVIDENCE_FINAL_SURVIVAL_RATIO}"
        )
    compare = _OPS[op]
    value = _rule_value(raw, text)
    key = ALIASES.get(name, name)
    if isinstance(value, str):
        key = LEVEL_ALIASES.get(name, key)

    def check(report: TraceReport) -> bool:
        actual = report.attributes.get(key)
        if actual is None:
            return False  # a rule on something the trace does not have never trips
        if isinstance(value, str):
            actual = LEVELS.get(str(actual).lower())
            if actual is None:
                return False
            return compare(actual, LEVELS[value])
        if isinstance(actual, bool) or isinstance(value, bool):
            return compare(bool(actual), bool(value))
        if not isinstance(actual, (int, float)):
            return False
        return compare(actual, value)

    return FailRule(text, check)


def _expectations_check(pattern: str) -> Callable[[TraceReport], bool]:
    """`expectations`: any failed expectation rule; `expectations:RULE`: a failed rule named
    `RULE` (`BLOCK.CHECK`), or any failed check of block `RULE`; `*` globs."""
    pattern = pattern.strip()
    if not pattern:
        return lambda r: bool(r.attributes.get(names.ATTR_EXPECTATIONS_FAILED_COUNT))

    def check(report: TraceReport) -> bool:
        failed = report.attributes.get(names.ATTR_EXPECTATIONS_FAILED) or ()
        return any(
            fnmatch.fnmatchcase(rule, pattern)
            or fnmatch.fnmatchcase(rule.partition(".")[0], pattern)
            for rule in failed
        )

    return check


def _golden_check(floor: str) -> Callable[[TraceReport], bool]:
    rank = names.GOLDEN_VERDICTS.index(floor)

    def check(report: TraceReport) -> bool:
        verdict = report.attributes.get(names.ATTR_GOLDEN_WORST_VERDICT)
        return verdict in names.GOLDEN_VERDICTS and names.GOLDEN_VERDICTS.index(verdict) >= rank

    return check


def _rule_value(raw: str, text: str) -> float | bool | str:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in LEVELS:
        return low
    try:
        number = float(raw)
        if math.isnan(number):  # nan compares false with everything: the rule could never trip
            raise ValueError(raw)
        return number
    except ValueError:
        raise ValueError(
            f"invalid --fail-on rule {text!r}: {raw!r} is not a number, true/false, or one of "
            f"{', '.join(LEVELS)}"
        ) from None


def worst(reports: Sequence[TraceReport]) -> Status:
    return max((r.status for r in reports), key=_ORDER.__getitem__, default="PASS")
