"""Both ports of `reasontrace`'s drift scenarios through the engine and the drift evaluator.

`port_rows(port, name, store=..., embedder=...)` feeds one scenario's runs, in order, to one
`Engine([DriftEvaluator(store)])` (the evaluator's defaults: only runs below `warning` are learned,
drifted runs go to the agent's drift episode) and returns one `Row` per scored run. `verdict(rows,
scenario)` checks the acceptance rule: every drifted run at `warning` or worse with the expected
primary driver (any driver for the combined scenario), no baseline run of the control at
`warning` or worse. Used by `tests/unit/test_drift_ports.py` and `benchmarks/drift_scenarios.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import _drift_scenarios as port_a
import _drift_scenarios_sdk as port_b

from tracehound import Engine
from tracehound import names as N
from tracehound.baselines import BaselineStore, MemoryStore
from tracehound.drift import Embedder, severity_rank
from tracehound.evaluators.drift import DriftEvaluator
from tracehound.spans import SpanView

PORTS = ("otlp-json", "sdk")
"""`otlp-json`: `_drift_scenarios` (OTLP/JSON documents); `sdk`: `_drift_scenarios_sdk`."""
SCENARIO_NAMES = ("control", "tool_drift", "semantic_drift", "complexity_drift", "combined_drift")


@dataclass(frozen=True)
class Row:
    index: int
    drifted: bool
    score: float
    severity: str
    driver: str
    tool_mix: float
    semantic: float
    complexity: float
    updated: bool
    drifting_runs: int
    drifting_since: str | None
    explanation: str = ""


@dataclass(frozen=True)
class Case:
    port: str
    name: str
    driver: str | None
    baseline_runs: int
    traces: list[list[SpanView]]
    drifted: list[bool]


def case(port: str, name: str) -> Case:
    if port == "otlp-json":
        a = port_a.SCENARIOS[name]()
        traces = [port_a.span_views(d) for d in port_a.scenario_documents(a)]
        return Case(
            port, name, a.expected_driver, a.baseline_runs, traces, [r.drifted for r in a.runs]
        )
    if port == "sdk":
        b = port_b.SCENARIOS[name]()
        traces = port_b.record(b.runs, b.seed)
        return Case(port, name, b.driver, b.baseline_runs, traces, [r.drifted for r in b.runs])
    raise ValueError(f"unknown port {port!r} (one of {', '.join(PORTS)})")


def port_rows(
    scenario: Case,
    *,
    store: BaselineStore | None = None,
    embedder: Embedder | None = None,
    on_run: Callable[[int, BaselineStore], Any] | None = None,
) -> list[Row]:
    """One row per scored run (the first run starts the baseline and is not scored)."""
    store = store if store is not None else MemoryStore()
    engine = Engine([DriftEvaluator(store, embedder=embedder)])
    rows: list[Row] = []
    for index, views in enumerate(scenario.traces):
        if on_run is not None:
            on_run(index, store)
        for view in views:
            engine.add_span(view)
        (finalized,) = engine.flush()
        (result,) = [r for r in finalized.results if r.name == N.EVAL_DRIFT]
        assert result.error_type is None, result.explanation
        attrs = result.attributes
        if N.ATTR_DRIFT_SCORE not in attrs:
            continue
        since = attrs.get(N.ATTR_DRIFT_DRIFTING_SINCE)
        rows.append(
            Row(
                index=index,
                drifted=scenario.drifted[index],
                score=float(attrs[N.ATTR_DRIFT_SCORE]),  # type: ignore[arg-type]
                severity=str(attrs[N.ATTR_DRIFT_SEVERITY]),
                driver=str(attrs[N.ATTR_DRIFT_PRIMARY_DRIVER]),
                tool_mix=float(attrs[N.ATTR_DRIFT_TOOL_MIX]),  # type: ignore[arg-type]
                semantic=float(attrs[N.ATTR_DRIFT_SEMANTIC]),  # type: ignore[arg-type]
                complexity=float(attrs[N.ATTR_DRIFT_COMPLEXITY]),  # type: ignore[arg-type]
                updated=bool(attrs[N.ATTR_DRIFT_BASELINE_UPDATED]),
                drifting_runs=int(attrs[N.ATTR_DRIFT_DRIFTING_RUNS]),  # type: ignore[call-overload]
                drifting_since=None if since is None else str(since),
                explanation=result.explanation or "",
            )
        )
    return rows


def flagged(row: Row) -> bool:
    return severity_rank(row.severity) >= severity_rank("warning")


def verdict(rows: list[Row], scenario: Case) -> dict[str, Any]:
    """Detections, misses, false positives and wrong drivers of one scenario's rows."""
    drifted = [r for r in rows if r.drifted]
    steady = [r for r in rows if not r.drifted]
    right = [
        r
        for r in drifted
        if flagged(r) and (scenario.driver is None or r.driver == scenario.driver)
    ]
    return {
        "port": scenario.port,
        "scenario": scenario.name,
        "drifted_runs": len(drifted),
        "flagged_right_driver": len(right),
        "missed": [r.index for r in drifted if not flagged(r)],
        "wrong_driver": [r.index for r in drifted if flagged(r) and r not in right],
        "false_positives": [r.index for r in steady if flagged(r)],
        "max_steady_score": max((r.score for r in steady), default=0.0),
        "drifted_scores": [round(r.score, 3) for r in drifted],
        "drifted_drivers": sorted({r.driver for r in drifted}),
        "learned_drifted_runs": sum(r.updated for r in drifted),
        "last_drifting_runs": drifted[-1].drifting_runs if drifted else 0,
    }


def passed(result: dict[str, Any]) -> bool:
    if result["scenario"] == "control":
        return not result["false_positives"]
    return (
        result["flagged_right_driver"] == result["drifted_runs"]
        and not result["learned_drifted_runs"]
    )
