"""`RunRecord`: what the run history keeps of one evaluated run, and how it is made.

A record is built at finalization from a `FinalizedTrace` — the trajectory and the results of
every evaluator — by reading the results, never by evaluating again. One record per run the
drift evaluator scores (each agent run of the trace; the whole trace when it has no agent span),
keyed by (trace id, run id). The trace-level findings (loops, evidence, failure modes,
expectations, verdict) go on the record of the trace's first run (the outermost agent); the
records of nested runs carry their own drift, tools and the loops found in them.

No message content is kept unless `content=True` (`history_content`): then the run's final
answer and the drift explanation's text samples, each clipped to `CONTENT_CHARS`.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from tracehound import names
from tracehound.evaluators.base import EvaluationResult
from tracehound.evaluators.summary import LEVELS

if TYPE_CHECKING:
    from tracehound.engine import FinalizedTrace
    from tracehound.steps import Run

__all__ = [
    "CONTENT_CHARS",
    "RECORD_FORMAT",
    "SEVERITY_RANKS",
    "VERDICTS",
    "RunQuery",
    "RunRecord",
    "order_key",
    "parse_duration",
    "parse_moment",
    "record_key",
    "records_of",
    "verdict_of",
]

RECORD_FORMAT = 1
"""Version of a record's JSON shape (`RunRecord.to_dict`); a store refuses a newer one."""
CONTENT_CHARS = 500
"""Characters kept of each text when content is kept (`history_content`)."""
VERDICTS = ("pass", "warn", "fail")
"""A run's verdict: the worst of its results, as `tracehound eval` reports PASS / WARN / FAIL."""
SEVERITY_RANKS = dict(LEVELS)
"""Drift severities by rank (`none` 0 … `critical` 3)."""


def record_key(trace_id: str, run_id: str) -> str:
    """The identity of a record in a store: `trace id/run id`."""
    return f"{trace_id}/{run_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """One evaluated run, compact (see the module docstring). JSON shape: `to_dict`."""

    trace_id: str
    run_id: str
    agent: str
    """Baseline key of the run (`service.name/agent name`), as `tracehound baseline` shows it."""
    agent_name: str
    service_name: str = ""
    start_ns: int = 0
    end_ns: int = 0
    recorded_at: float = 0.0
    """Wall-clock seconds when the record was written (retention counts from it)."""
    verdict: str = "pass"
    drift_score: float | None = None
    drift_severity: str | None = None
    """`none` / `warning` / `alert` / `critical`; None when the run was not scored."""
    drift_confidence: str | None = None
    drift_primary_driver: str | None = None
    drift_components: Mapping[str, float] = field(default_factory=dict)
    drift_baseline_runs: int = 0
    drift_learned: bool = False
    """Whether the run was merged into its baseline."""
    drifting_runs: int = 0
    """Runs in the agent's open drift episode (0: none)."""
    drift_detail: Mapping[str, Any] = field(default_factory=dict)
    """The drift explanation (`DriftExplanation.to_dict`; samples only with content kept)."""
    drift_error: str | None = None
    loop_kinds: tuple[str, ...] = ()
    loop_counts: Mapping[str, int] = field(default_factory=dict)
    loop_tools: tuple[str, ...] = ()
    """Tools that looped."""
    wasted_steps: int = 0
    failure_modes: tuple[str, ...] = ()
    evidence: Mapping[str, float] = field(default_factory=dict)
    """`survival_ratio`, `final_survival_ratio` (the trace's, on its first run)."""
    expectations_checked: int = 0
    expectations_failed: tuple[str, ...] = ()
    tool_calls: Mapping[str, int] = field(default_factory=dict)
    steps: int = 0
    errors: int = 0
    models: tuple[str, ...] = ()
    truncated: bool = False
    content: str | None = None
    """The run's final answer, clipped; only when content is kept."""

    @property
    def key(self) -> str:
        return record_key(self.trace_id, self.run_id)

    @property
    def severity_rank(self) -> int:
        """-1 for an unscored run."""
        return SEVERITY_RANKS.get(self.drift_severity or "", -1)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape (also how stores keep a record)."""
        return {
            "format": RECORD_FORMAT,
            "trace_id": self.trace_id,
            "run_id": self.run_id,
            "agent": self.agent,
            "agent_name": self.agent_name,
            "service_name": self.service_name,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "start": _iso(self.start_ns / 1e9),
            "end": _iso(self.end_ns / 1e9),
            "recorded_at": self.recorded_at,
            "verdict": self.verdict,
            "drift": {
                "score": self.drift_score,
                "severity": self.drift_severity,
                "confidence": self.drift_confidence,
                "primary_driver": self.drift_primary_driver,
                "components": dict(self.drift_components),
                "baseline_runs": self.drift_baseline_runs,
                "learned": self.drift_learned,
                "drifting_runs": self.drifting_runs,
                "detail": dict(self.drift_detail),
                "error": self.drift_error,
            },
            "loops": {
                "kinds": list(self.loop_kinds),
                "counts": dict(self.loop_counts),
                "tools": list(self.loop_tools),
                "wasted_steps": self.wasted_steps,
            },
            "failure_modes": list(self.failure_modes),
            "evidence": dict(self.evidence),
            "expectations": {
                "checked": self.expectations_checked,
                "failed": list(self.expectations_failed),
            },
            "tool_calls": dict(self.tool_calls),
            "steps": self.steps,
            "errors": self.errors,
            "models": list(self.models),
            "truncated": self.truncated,
            "content": self.content,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """The record of `to_dict`'s shape; `ValueError` naming what is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError("a run record must be a JSON object")
        version = data.get("format")
        if not isinstance(version, int) or version < 1:
            raise ValueError(f"bad run record format {version!r}")
        if version > RECORD_FORMAT:
            raise ValueError(
                f"run record format {version} is newer than this tracehound reads "
                f"({RECORD_FORMAT}): upgrade tracehound"
            )
        try:
            drift = data["drift"]
            loops = data["loops"]
            expectations = data["expectations"]
            return cls(
                trace_id=str(data["trace_id"]),
                run_id=str(data["run_id"]),
                agent=str(data["agent"]),
                agent_name=str(data["agent_name"]),
                service_name=str(data.get("service_name", "")),
                start_ns=int(data["start_ns"]),
                end_ns=int(data["end_ns"]),
                recorded_at=float(data["recorded_at"]),
                verdict=str(data["verdict"]),
                drift_score=None if drift["score"] is None else float(drift["score"]),
                drift_severity=drift["severity"],
                drift_confidence=drift["confidence"],
                drift_primary_driver=drift["primary_driver"],
                drift_components={str(k): float(v) for k, v in drift["components"].items()},
                drift_baseline_runs=int(drift["baseline_runs"]),
                drift_learned=bool(drift["learned"]),
                drifting_runs=int(drift["drifting_runs"]),
                drift_detail=dict(drift["detail"]),
                drift_error=drift["error"],
                loop_kinds=tuple(loops["kinds"]),
                loop_counts={str(k): int(v) for k, v in loops["counts"].items()},
                loop_tools=tuple(loops["tools"]),
                wasted_steps=int(loops["wasted_steps"]),
                failure_modes=tuple(data["failure_modes"]),
                evidence={str(k): float(v) for k, v in data["evidence"].items()},
                expectations_checked=int(expectations["checked"]),
                expectations_failed=tuple(expectations["failed"]),
                tool_calls={str(k): int(v) for k, v in data["tool_calls"].items()},
                steps=int(data["steps"]),
                errors=int(data["errors"]),
                models=tuple(data["models"]),
                truncated=bool(data["truncated"]),
                content=data.get("content"),
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"bad run record: {exc!r}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> RunRecord:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"bad run record: {exc}") from None
        return cls.from_dict(data)

    def search_text(self) -> str:
        """What a keyword search looks in (lower case): ids, agent, tools, findings, content."""
        parts = [
            self.trace_id,
            self.run_id,
            self.agent,
            self.verdict,
            self.drift_severity or "",
            self.drift_primary_driver or "",
            str(self.drift_detail.get("recommendation", "")),
            *self.tool_calls,
            *self.loop_kinds,
            *self.loop_tools,
            *self.failure_modes,
            *self.expectations_failed,
            *self.models,
            self.content or "",
        ]
        return "\n".join(parts).lower()


# --- queries -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """A filter over records; every given field must match. Results: newest first (by run end,
    then trace id, run id, descending), at most `limit` (None: all)."""

    agent: str | None = None
    """The agent key or bare agent name; a glob (`support_*`, `svc/*`)."""
    min_severity: str | None = None
    """Drift severity at least this (`warning`, …); unscored runs do not match."""
    min_drift: float | None = None
    max_drift: float | None = None
    tool: str | None = None
    """Runs that called this tool (a glob)."""
    loop_kind: str | None = None
    """Runs with a loop of this kind (`repeat`, `consecutive`, …; `any` for any loop)."""
    since_ns: int | None = None
    """Runs that ended at or after this time (ns since the epoch)."""
    until_ns: int | None = None
    """Runs that ended before this time."""
    verdict: str | None = None
    keyword: str | None = None
    """Case-insensitive substring of `RunRecord.search_text`."""
    trace_id: str | None = None
    limit: int | None = 50

    def __post_init__(self) -> None:
        if self.min_severity is not None and self.min_severity not in SEVERITY_RANKS:
            raise ValueError(
                f"severity must be one of {', '.join(SEVERITY_RANKS)}, not {self.min_severity!r}"
            )
        if self.verdict is not None and self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, not {self.verdict!r}")
        for name in ("min_drift", "max_drift"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise ValueError(f"{name} must be a number within [0, 1], not {value!r}")
        if self.limit is not None and self.limit < 0:
            raise ValueError("limit must be >= 0")
        if self.loop_kind is not None and self.loop_kind not in (*names.LOOP_KINDS, "any"):
            raise ValueError(
                f"loop kind must be one of {', '.join(names.LOOP_KINDS)} or any, "
                f"not {self.loop_kind!r}"
            )

    def matches(self, record: RunRecord) -> bool:
        """Whether `record` passes every filter (the rule every store applies)."""
        if self.trace_id is not None and record.trace_id != self.trace_id:
            return False
        if self.agent is not None and not (
            fnmatchcase(record.agent, self.agent) or fnmatchcase(record.agent_name, self.agent)
        ):
            return False
        if self.since_ns is not None and record.end_ns < self.since_ns:
            return False
        if self.until_ns is not None and record.end_ns >= self.until_ns:
            return False
        if (
            self.min_severity is not None
            and record.severity_rank < SEVERITY_RANKS[self.min_severity]
        ):
            return False
        score = record.drift_score
        if self.min_drift is not None and (score is None or score < self.min_drift):
            return False
        if self.max_drift is not None and (score is None or score > self.max_drift):
            return False
        if self.tool is not None and not any(fnmatchcase(t, self.tool) for t in record.tool_calls):
            return False
        if self.loop_kind is not None and not (
            record.loop_kinds if self.loop_kind == "any" else self.loop_kind in record.loop_kinds
        ):
            return False
        if self.verdict is not None and record.verdict != self.verdict:
            return False
        return self.keyword is None or self.keyword.lower() in record.search_text()

    def select(self, records: Iterable[RunRecord]) -> list[RunRecord]:
        """The matching records of `records`, ordered and limited as a store answers."""
        found = sorted((r for r in records if self.matches(r)), key=order_key, reverse=True)
        return found if self.limit is None else found[: self.limit]


def order_key(record: RunRecord) -> tuple[int, str, str]:
    """Records sort by this, newest last (queries answer in reverse)."""
    return (record.end_ns, record.trace_id, record.run_id)


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds of `30d`, `24h`, `90m`, `45s`, `2w`; `ValueError` otherwise."""
    match = _RELATIVE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration (give e.g. 30d, 24h, 90m)")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def parse_moment(text: str, now: float | None = None) -> int:
    """ns since the epoch of an ISO date / date-time (UTC unless it says) or of a time ago
    (`7d`, `24h`); `ValueError` otherwise."""
    if _RELATIVE.match(text):
        at = (time.time() if now is None else now) - parse_duration(text)
        return int(at * 1e9)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an ISO date/time (2026-01-31, 2026-01-31T12:00) nor a time "
            "ago (7d, 24h)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1e9)


def _iso(seconds: float) -> str:
    """ISO-8601 UTC with milliseconds (`2026-01-31T12:00:00.250Z`); empty for no time."""
    if seconds <= 0:
        return ""
    whole = math.floor(seconds)
    millis = min(999, int((seconds - whole) * 1000))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{millis:03d}Z"


# --- building records ----------------------------------------------------------------------------


def verdict_of(results: Iterable[EvaluationResult]) -> str:
    """`pass` / `warn` / `fail`: the worst of the results, as `tracehound eval` rates a trace
    (`tracehound.report.result_status`)."""
    from tracehound.report import result_status  # the one rule (imported late: no cycle)

    statuses = {result_status(r) for r in results}
    return "fail" if "FAIL" in statuses else "warn" if "WARN" in statuses else "pass"


def records_of(
    trace: FinalizedTrace, *, content: bool = False, now: float | None = None
) -> list[RunRecord]:
    """The records of a finalized trace (none for a trace without GenAI steps)."""
    trajectory = trace.trajectory
    if not trajectory.steps:
        return []
    agent_runs = [r for r in trajectory.runs if not r.implicit]
    runs = agent_runs or list(trajectory.runs)
    if not runs:
        return []
    recorded_at = time.time() if now is None else now
    drift_by_span: dict[str | None, EvaluationResult] = {}
    for result in trace.results:
        if result.name == names.EVAL_DRIFT:
            drift_by_span.setdefault(result.span_id, result)
    loops_detail: list[Mapping[str, Any]] = []
    for result in trace.results:
        if result.name == names.EVAL_LOOPS:
            loops_detail = list(getattr(result, "detail", {}).get("loops", ()))
    attrs = trace.attributes
    out: list[RunRecord] = []
    for index, run in enumerate(runs):
        drift = drift_by_span.get(run.span_id)
        if drift is None and run.implicit:
            drift = drift_by_span.get(trace.root_span_id)
        first = index == 0
        nested_ids = _nested_ids(trace, run)
        # the first run's record holds the trace's loops; a nested run's, those inside it
        loops = (
            loops_detail if first else [d for d in loops_detail if d.get("run_id") in nested_ids]
        )
        out.append(
            _record(
                trace,
                run,
                drift,
                loops,
                first=first,
                attrs=attrs,
                content=content,
                recorded_at=recorded_at,
            )
        )
    return out


def _nested_ids(trace: FinalizedTrace, run: Run) -> set[str]:
    ids = {run.run_id}
    for other in trace.trajectory.runs:  # sorted parents first
        if other.parent_run_id in ids:
            ids.add(other.run_id)
    return ids


def _record(
    trace: FinalizedTrace,
    run: Run,
    drift: EvaluationResult | None,
    loops: Sequence[Mapping[str, Any]],
    *,
    first: bool,
    attrs: Mapping[str, Any],
    content: bool,
    recorded_at: float,
) -> RunRecord:
    trajectory = trace.trajectory
    steps = trajectory.run_steps(run.run_id, nested=True) if not run.implicit else trajectory.steps
    tools: dict[str, int] = {}
    models: set[str] = set()
    errors = 0
    for step in steps:
        if step.kind == "tool_call" and step.tool:
            tools[step.tool] = tools.get(step.tool, 0) + 1
        if step.model:
            models.add(step.model)
        if step.error or step.kind == "error":
            errors += 1
    counts: dict[str, int] = {}
    loop_tools: set[str] = set()
    for loop in loops:
        kind = str(loop.get("kind", ""))
        counts[kind] = counts.get(kind, 0) + 1
        if loop.get("tool"):
            loop_tools.add(str(loop["tool"]))
    kinds = tuple(k for k in names.LOOP_KINDS if k in counts)
    drift_attrs: Mapping[str, Any] = drift.attributes if drift is not None else {}
    score = drift_attrs.get(names.ATTR_DRIFT_SCORE)
    detail: dict[str, Any] = dict(getattr(drift, "detail", {}) or {}) if drift else {}
    if detail and not content:
        detail["sample"] = ""
        detail["diverged_from"] = [{**d, "sample": ""} for d in detail.get("diverged_from", ())]
    elif detail:
        detail["sample"] = str(detail.get("sample", ""))[:CONTENT_CHARS]
        detail["diverged_from"] = [
            {**d, "sample": str(d.get("sample", ""))[:CONTENT_CHARS]}
            for d in detail.get("diverged_from", ())
        ]
    components = (
        {
            "tool_mix": float(drift_attrs.get(names.ATTR_DRIFT_TOOL_MIX, 0.0)),
            "semantic": float(drift_attrs.get(names.ATTR_DRIFT_SEMANTIC, 0.0)),
            "complexity": float(drift_attrs.get(names.ATTR_DRIFT_COMPLEXITY, 0.0)),
        }
        if score is not None
        else {}
    )
    run_results = [drift] if drift is not None else []
    if first:  # the trace-level results are the trace's first run's
        run_results = [r for r in trace.results if r.name != names.EVAL_DRIFT or r is drift]
    evidence: dict[str, float] = {}
    failed: tuple[str, ...] = ()
    checked = 0
    modes: tuple[str, ...] = ()
    wasted = 0
    if first:
        for name, attr in (
            ("survival_ratio", names.ATTR_EVIDENCE_SURVIVAL_RATIO),
            ("final_survival_ratio", names.ATTR_EVIDENCE_FINAL_SURVIVAL_RATIO),
        ):
            value = attrs.get(attr)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                evidence[name] = float(value)
        failed = tuple(str(x) for x in attrs.get(names.ATTR_EXPECTATIONS_FAILED, ()))
        checked = int(attrs.get(names.ATTR_EXPECTATIONS_CHECKED, 0) or 0)
        modes = tuple(str(x) for x in attrs.get(names.ATTR_FAILURE_MODES, ()) or ())
        wasted = int(attrs.get(names.ATTR_LOOPS_WASTED_STEPS, 0) or 0)
    answer: str | None = None
    if content:
        text = trajectory.final_answer(None if run.implicit else run.run_id)
        answer = None if text is None else text[:CONTENT_CHARS]
    return RunRecord(
        trace_id=trace.trace_id,
        run_id=run.run_id,
        agent=str(drift_attrs.get(names.ATTR_DRIFT_AGENT) or _default_key(run)),
        agent_name=run.agent_name,
        service_name=run.service_name,
        start_ns=run.start_ns,
        end_ns=run.end_ns,
        recorded_at=recorded_at,
        verdict=verdict_of(run_results),
        drift_score=None if score is None else float(score),
        drift_severity=drift_attrs.get(names.ATTR_DRIFT_SEVERITY) if score is not None else None,
        drift_confidence=drift_attrs.get(names.ATTR_DRIFT_CONFIDENCE),
        drift_primary_driver=drift_attrs.get(names.ATTR_DRIFT_PRIMARY_DRIVER),
        drift_components=components,
        drift_baseline_runs=int(drift_attrs.get(names.ATTR_DRIFT_BASELINE_RUNS, 0) or 0),
        drift_learned=bool(drift_attrs.get(names.ATTR_DRIFT_BASELINE_UPDATED, False)),
        drifting_runs=int(drift_attrs.get(names.ATTR_DRIFT_DRIFTING_RUNS, 0) or 0),
        drift_detail=detail,
        drift_error=(drift.explanation if drift is not None and drift.error_type else None),
        loop_kinds=kinds,
        loop_counts=counts,
        loop_tools=tuple(sorted(loop_tools)),
        wasted_steps=wasted,
        failure_modes=modes,
        evidence=evidence,
        expectations_checked=checked,
        expectations_failed=failed,
        tool_calls=dict(sorted(tools.items())),
        steps=len(steps),
        errors=errors,
        models=tuple(sorted(models)),
        truncated=trace.truncated,
        content=answer,
    )


def _default_key(run: Run) -> str:
    """The drift evaluator's default key (`service.name/agent name`), for a run drift did not
    score (no drift evaluator, or a store that failed)."""
    return f"{run.service_name}/{run.agent_name}"
