"""The queries over a store's run history, shared by `tracehound runs` and the MCP server.

Each function takes a store and plain parameters (strings, numbers) and returns a JSON-ready
dict with stable keys (docs/history.md lists them). Bad parameters raise `ValueError` with a
one-line message naming the parameter; an unknown run raises `RunNotFoundError`; a store that
fails raises `BaselineStoreError`; a store without run history raises `ValueError`.

Time filters (`since`, `until`) take an ISO date or date-time (UTC unless it says) or a time
ago (`7d`, `24h`, `30m`); they apply to the run's end time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracehound import names
from tracehound.history._record import (
    SEVERITY_RANKS,
    RunQuery,
    RunRecord,
    parse_moment,
)
from tracehound.history._store import RunHistoryStore

__all__ = [
    "ROW_KEYS",
    "RunNotFoundError",
    "delete_runs",
    "explain_run",
    "get_run",
    "history_info",
    "history_of",
    "list_runs",
    "make_query",
    "recent_findings",
    "row_of",
    "search_runs",
]

ROW_KEYS = (
    "trace_id",
    "run_id",
    "agent",
    "end",
    "verdict",
    "drift_score",
    "drift_severity",
    "primary_driver",
    "loop_kinds",
    "tools",
    "expectations_failed",
    "errors",
)
"""The keys of one row of `list_runs` / `search_runs`, in order."""

_UNDONE = (
    "Deleted runs leave the run history and the recent-runs ring of their agent's baseline "
    "(and drift episode); what they added to the baseline's sums (centroid, complexity "
    "statistics, tool counts, run count) stays: those are merged, not kept per run. "
    "`tracehound baseline reset AGENT` rebuilds a baseline from the next runs."
)


class RunNotFoundError(LookupError):
    """No record of this trace (or run) in the store's history."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "run not found"


def history_of(store: Any) -> RunHistoryStore:
    """`store` as a run-history store; `ValueError` when it keeps no run history."""
    if not isinstance(store, RunHistoryStore):
        raise ValueError(f"the baseline store {type(store).__name__} keeps no run history")
    return store


def history_info(store: Any) -> dict[str, Any]:
    """`{"location", "count"}`: where the history lives and how many runs it holds."""
    return {"location": str(store.location), "count": history_of(store).count_runs()}


def make_query(
    *,
    agent: str | None = None,
    severity: str | None = None,
    min_drift: float | None = None,
    max_drift: float | None = None,
    tool: str | None = None,
    loop_kind: str | None = None,
    since: str | None = None,
    until: str | None = None,
    verdict: str | None = None,
    keyword: str | None = None,
    trace_id: str | None = None,
    limit: int | None = 50,
    now: float | None = None,
) -> RunQuery:
    """A `RunQuery` from the parameters as a user gives them; `ValueError` naming the bad one."""
    try:
        since_ns = None if since is None else parse_moment(since, now)
    except ValueError as exc:
        raise ValueError(f"since: {exc}") from None
    try:
        until_ns = None if until is None else parse_moment(until, now)
    except ValueError as exc:
        raise ValueError(f"until: {exc}") from None
    return RunQuery(
        agent=agent or None,
        min_severity=severity.lower() if severity else None,
        min_drift=min_drift,
        max_drift=max_drift,
        tool=tool or None,
        loop_kind=loop_kind or None,
        since_ns=since_ns,
        until_ns=until_ns,
        verdict=verdict.lower() if verdict else None,
        keyword=keyword or None,
        trace_id=trace_id or None,
        limit=limit,
    )


def row_of(record: RunRecord) -> dict[str, Any]:
    """One line of a listing (`ROW_KEYS`)."""
    full = record.to_dict()
    return {
        "trace_id": record.trace_id,
        "run_id": record.run_id,
        "agent": record.agent,
        "end": full["end"],
        "verdict": record.verdict,
        "drift_score": record.drift_score,
        "drift_severity": record.drift_severity,
        "primary_driver": record.drift_primary_driver,
        "loop_kinds": list(record.loop_kinds),
        "tools": dict(record.tool_calls),
        "expectations_failed": list(record.expectations_failed),
        "errors": record.errors,
    }


def _listing(store: Any, query: RunQuery) -> dict[str, Any]:
    records = history_of(store).query_runs(query)
    return {
        "count": len(records),
        "limit": query.limit,
        "runs": [row_of(r) for r in records],
    }


def list_runs(
    store: Any,
    *,
    agent: str | None = None,
    severity: str | None = None,
    min_drift: float | None = None,
    max_drift: float | None = None,
    tool: str | None = None,
    loop_kind: str | None = None,
    since: str | None = None,
    until: str | None = None,
    verdict: str | None = None,
    limit: int | None = 50,
) -> dict[str, Any]:
    """Runs matching every filter given, newest first: `{"count", "limit", "runs": [row]}`."""
    return _listing(
        store,
        make_query(
            agent=agent,
            severity=severity,
            min_drift=min_drift,
            max_drift=max_drift,
            tool=tool,
            loop_kind=loop_kind,
            since=since,
            until=until,
            verdict=verdict,
            limit=limit,
        ),
    )


def search_runs(
    store: Any,
    keyword: str,
    *,
    agent: str | None = None,
    severity: str | None = None,
    min_drift: float | None = None,
    max_drift: float | None = None,
    tool: str | None = None,
    loop_kind: str | None = None,
    since: str | None = None,
    until: str | None = None,
    verdict: str | None = None,
    limit: int | None = 50,
) -> dict[str, Any]:
    """`list_runs` of the runs whose ids, agent, tools, findings (loop kinds and tools,
    failure modes, failed expectations, drift driver and recommendation), models or kept
    content contain `keyword` (case-insensitive): the same shape, plus `"keyword"`."""
    if not keyword or not keyword.strip():
        raise ValueError("keyword: give a word to search for")
    out = _listing(
        store,
        make_query(
            keyword=keyword.strip(),
            agent=agent,
            severity=severity,
            min_drift=min_drift,
            max_drift=max_drift,
            tool=tool,
            loop_kind=loop_kind,
            since=since,
            until=until,
            verdict=verdict,
            limit=limit,
        ),
    )
    out["keyword"] = keyword.strip()
    return out


def _runs_of(store: Any, trace_id: str, run_id: str | None) -> list[RunRecord]:
    if not trace_id or not trace_id.strip():
        raise ValueError("trace_id: give the trace id of a recorded run")
    trace_id = trace_id.strip().lower()
    if run_id is None and "/" in trace_id:
        trace_id, _, run_id = trace_id.partition("/")
    records = history_of(store).query_runs(RunQuery(trace_id=trace_id, limit=None))
    if run_id:
        records = [r for r in records if r.run_id == run_id]
    if not records:
        what = f"run {trace_id}/{run_id}" if run_id else f"trace {trace_id}"
        raise RunNotFoundError(f"no {what} in the run history")
    # the trace's runs in trajectory order: outermost (earliest start) first
    return sorted(records, key=lambda r: (r.start_ns, r.run_id))


def get_run(store: Any, trace_id: str, run_id: str | None = None) -> dict[str, Any]:
    """The full records of a trace's runs (or of one run): `{"trace_id", "runs": [record]}`
    (`RunRecord.to_dict`). `trace_id` may also be `TRACE/RUN`."""
    records = _runs_of(store, trace_id, run_id)
    return {"trace_id": records[0].trace_id, "runs": [r.to_dict() for r in records]}


def explain_run(store: Any, trace_id: str, run_id: str | None = None) -> dict[str, Any]:
    """Why a run scored as it did (see docs/history.md for the shape). Without `run_id`, the
    trace's run with the highest drift score (its first run when none was scored)."""
    records = _runs_of(store, trace_id, run_id)
    # the first of the highest scores: the outermost run when none was scored
    record = max(records, key=lambda r: -1.0 if r.drift_score is None else r.drift_score)
    detail = record.drift_detail
    components: list[dict[str, Any]] = []
    if record.drift_score is not None:
        components = [
            {
                "name": "tool_mix",
                "value": record.drift_components.get("tool_mix", 0.0),
                "tools_appeared": list(detail.get("tools_appeared", ())),
                "tools_disappeared": list(detail.get("tools_disappeared", ())),
                "tools_shifted": list(detail.get("tools_shifted", ())),
            },
            {
                "name": "semantic",
                "value": record.drift_components.get("semantic", 0.0),
                "distance": detail.get("semantic_distance"),
                "typical": detail.get("semantic_typical"),
                "sample": detail.get("sample", ""),
            },
            {
                "name": "complexity",
                "value": record.drift_components.get("complexity", 0.0),
                "moved": list(detail.get("complexity_moved", ())),
            },
        ]
    diverged: list[dict[str, Any]] = []
    history = history_of(store)
    for entry in detail.get("diverged_from", ()):
        other_trace = str(entry.get("trace_id", ""))
        other_run = str(entry.get("run_id", ""))
        known = [
            r
            for r in history.query_runs(RunQuery(trace_id=other_trace, limit=None))
            if r.run_id == other_run
        ]
        item: dict[str, Any] = {
            "trace_id": other_trace,
            "run_id": other_run,
            "divergence": entry.get("divergence"),
            "in_history": bool(known),
        }
        if known:
            item.update(
                end=known[0].to_dict()["end"],
                verdict=known[0].verdict,
                tools=dict(known[0].tool_calls),
            )
        diverged.append(item)
    recommendations = _recommendations(record)
    full = record.to_dict()
    return {
        "trace_id": record.trace_id,
        "run_id": record.run_id,
        "agent": record.agent,
        "end": full["end"],
        "verdict": record.verdict,
        "drift": {
            "score": record.drift_score,
            "severity": record.drift_severity,
            "confidence": record.drift_confidence,
            "baseline_runs": record.drift_baseline_runs,
            "learned": record.drift_learned,
            "drifting_runs": record.drifting_runs,
            "error": record.drift_error,
        },
        "primary_driver": record.drift_primary_driver,
        "components": components,
        "diverged_from": diverged,
        "findings": {
            "loops": full["loops"],
            "failure_modes": list(record.failure_modes),
            "expectations_failed": list(record.expectations_failed),
            "evidence": dict(record.evidence),
            "errors": record.errors,
        },
        "recommendation": " ".join(recommendations),
        "recommendations": recommendations,
    }


def _recommendations(record: RunRecord) -> list[str]:
    out: list[str] = []
    if record.drift_error:
        out.append(f"Drift was not evaluated: {record.drift_error}")
    elif record.drift_score is None:
        out.append(
            f"No drift score: {record.agent} had no baseline yet; this run started it."
            if record.drift_learned
            else f"No drift score: {record.agent} had no baseline to compare with."
        )
    else:
        drift_advice = str(record.drift_detail.get("recommendation", "")).strip()
        if drift_advice:
            out.append(drift_advice)
        if record.severity_rank >= SEVERITY_RANKS["warning"]:
            out.append(
                "If the new behaviour is intended, make it the baseline with "
                f"`tracehound baseline accept {record.agent}`."
            )
    if record.loop_kinds:
        tools = ", ".join(record.loop_tools) or "the looping calls"
        out.append(f"Inspect {tools}: the run looped ({', '.join(record.loop_kinds)}).")
    if record.expectations_failed:
        out.append("Failed expectations: " + ", ".join(record.expectations_failed) + ".")
    if record.failure_modes:
        out.append("Failure modes: " + ", ".join(record.failure_modes) + ".")
    return out


def delete_runs(
    store: Any,
    *,
    runs: Sequence[str] = (),
    agent: str | None = None,
    severity: str | None = None,
    min_drift: float | None = None,
    max_drift: float | None = None,
    tool: str | None = None,
    loop_kind: str | None = None,
    since: str | None = None,
    until: str | None = None,
    verdict: str | None = None,
    forget_baseline: bool = True,
) -> dict[str, Any]:
    """Delete runs named by id (`TRACE` or `TRACE/RUN`) and/or matching filters (at least one
    of the two: never everything by accident). With `forget_baseline`, each also leaves its
    agent's recent-runs ring. `{"count", "deleted": [{"trace_id", "run_id", "agent"}],
    "ring_entries_removed", "not_undone"}`."""
    filters: Mapping[str, Any] = {
        "agent": agent,
        "severity": severity,
        "min_drift": min_drift,
        "max_drift": max_drift,
        "tool": tool,
        "loop_kind": loop_kind,
        "since": since,
        "until": until,
        "verdict": verdict,
    }
    given = {k: v for k, v in filters.items() if v is not None and v != ""}
    if not runs and not given:
        raise ValueError("delete: name runs (TRACE or TRACE/RUN) or give a filter")
    history = history_of(store)
    chosen: dict[str, RunRecord] = {}
    for ident in runs:
        for record in _runs_of(store, ident, None):
            chosen[record.key] = record
    if given:
        query = make_query(limit=None, **given)
        if runs:  # ids and filters: the named runs that match the filters
            chosen = {k: r for k, r in chosen.items() if query.matches(r)}
        else:
            chosen = {r.key: r for r in history.query_runs(query)}
    records = sorted(chosen.values(), key=lambda r: (r.end_ns, r.trace_id, r.run_id))
    ring = 0
    if forget_baseline:
        by_agent: dict[str, list[tuple[str, str]]] = {}
        for record in records:
            by_agent.setdefault(record.agent, []).append((record.trace_id, record.run_id))
        for agent_key, keys in sorted(by_agent.items()):
            ring += history.forget_recent(agent_key, keys)
    count = history.delete_runs([(r.trace_id, r.run_id) for r in records])
    return {
        "count": count,
        "deleted": [
            {"trace_id": r.trace_id, "run_id": r.run_id, "agent": r.agent} for r in records
        ],
        "ring_entries_removed": ring,
        "not_undone": _UNDONE,
    }


def recent_findings(
    store: Any, agent: str | None = None, *, since: str = "7d", limit: int = 10
) -> dict[str, Any]:
    """What went wrong lately (for `agent`, a glob, or every agent): drifted runs, loops by
    tool, failed expectations, failure modes and verdict counts since `since`.
    `{"agent", "since", "runs", "verdicts", "drifted": [row], "loops": [{"tool", "kinds",
    "runs", "last_trace_id"}], "expectations_failed": [{"name", "runs"}], "failure_modes":
    [{"name", "runs"}]}` — lists sorted by how many runs, then name; `drifted` newest first,
    at most `limit` of each list."""
    if limit < 1:
        raise ValueError("limit must be >= 1")
    query = make_query(agent=agent, since=since, limit=None)
    records = history_of(store).query_runs(query)
    verdicts = {"pass": 0, "warn": 0, "fail": 0}
    loops: dict[str, dict[str, Any]] = {}
    expectations: dict[str, int] = {}
    modes: dict[str, int] = {}
    drifted: list[RunRecord] = []
    for record in records:  # newest first
        verdicts[record.verdict] = verdicts.get(record.verdict, 0) + 1
        if record.severity_rank >= SEVERITY_RANKS["warning"]:
            drifted.append(record)
        for tool in record.loop_tools or (("",) if record.loop_kinds else ()):
            entry = loops.setdefault(
                tool, {"tool": tool or None, "kinds": set(), "runs": 0, "last_trace_id": None}
            )
            entry["kinds"].update(record.loop_kinds)
            entry["runs"] += 1
            entry["last_trace_id"] = entry["last_trace_id"] or record.trace_id
        for name in record.expectations_failed:
            expectations[name] = expectations.get(name, 0) + 1
        for name in record.failure_modes:
            modes[name] = modes.get(name, 0) + 1
    loop_list = sorted(loops.values(), key=lambda e: (-e["runs"], e["tool"] or ""))[:limit]
    for entry in loop_list:
        entry["kinds"] = [k for k in names.LOOP_KINDS if k in entry["kinds"]]
    return {
        "agent": agent,
        "since": since,
        "runs": len(records),
        "verdicts": verdicts,
        "drifted": [row_of(r) for r in drifted[:limit]],
        "loops": loop_list,
        "expectations_failed": [
            {"name": n, "runs": c} for n, c in sorted(expectations.items(), key=_by_count)
        ][:limit],
        "failure_modes": [{"name": n, "runs": c} for n, c in sorted(modes.items(), key=_by_count)][
            :limit
        ],
    }


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])
