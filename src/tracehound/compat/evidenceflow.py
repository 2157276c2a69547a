"""`analyze(steps)` with the same input and the same result dict as `evidenceflow.analyze`.

For users of the `evidenceflow` package: the same normalized step list gives the same dict (every
unit-level decision identical), computed with tracehound's indexed matcher, which is linear in
trace length where the original re-tokenizes every text for every unit.

Input: an iterable of mappings with `type` (user, assistant, tool_call, tool_result, retrieval,
system, reasoning), `content` (a string for every type but tool_call), optional `id`, and for
evidence steps optional `tool`, `source`, `evidence_id`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tracehound.evaluators._evidence_index import (
    EvidenceAnalysis,
    Item,
    analyze_items,
    summarize,
)

__all__ = ["analyze"]

_TYPES = frozenset(
    ("user", "assistant", "tool_call", "tool_result", "retrieval", "system", "reasoning")
)
_EVIDENCE = frozenset(("tool_result", "retrieval"))
_TARGETS = frozenset(("assistant", "reasoning"))


def _checked_steps(trace: Any) -> list[dict[str, Any]]:
    if isinstance(trace, (str, bytes)) or not isinstance(trace, Iterable):
        raise TypeError("trace must be an iterable of step mappings, not a string")
    steps: list[dict[str, Any]] = []
    ids: set[str] = set()
    for index, raw in enumerate(trace):
        if not isinstance(raw, Mapping):
            raise TypeError(f"step {index}: expected a mapping, got {type(raw).__name__}")
        step = dict(raw)
        kind = step.get("type")
        if not isinstance(kind, str) or kind not in _TYPES:
            raise ValueError(f"step {index}: unknown type {kind!r}")
        step_id = step.get("id", f"step-{index}")
        if not isinstance(step_id, str) or not step_id:
            raise ValueError(f"step {index}: id must be a non-empty string")
        if step_id in ids:
            raise ValueError(f"step {index}: id {step_id!r} used twice")
        ids.add(step_id)
        if kind != "tool_call" and not isinstance(step.get("content"), str):
            raise TypeError(f"step {index}: content must be a string")
        if kind == "tool_call" and "tool" in step and not isinstance(step["tool"], str):
            raise TypeError(f"step {index}: tool must be a string")
        if kind in _EVIDENCE:
            for key in ("tool", "source", "evidence_id"):
                if key in step and (not isinstance(step[key], str) or not step[key]):
                    raise ValueError(f"step {index}: {key} must be a non-empty string")
        step["id"] = step_id
        steps.append(step)
    return steps


def analyze(trace: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Evidence survival for a normalized step list; same result as `evidenceflow.analyze`."""
    steps = _checked_steps(trace)
    items: list[Item] = []
    evidence_ids: set[str] = set()
    for step in steps:
        kind = step["type"]
        if kind in _EVIDENCE:
            evidence_id = step.get("evidence_id", f"evidence-{len(evidence_ids)}")
            if evidence_id in evidence_ids:
                raise ValueError(f"evidence id {evidence_id!r} used twice")
            evidence_ids.add(evidence_id)
            items.append(
                Item(
                    key=step["id"],
                    role="evidence",
                    text=step["content"],
                    source_type=kind,
                    tool=step.get("tool"),
                    source=step.get("source"),
                    evidence_id=evidence_id,
                )
            )
        elif kind in _TARGETS:
            items.append(Item(key=step["id"], role="target", text=step["content"]))
        else:
            items.append(Item(key=step["id"], role="other"))
    final = next(
        (i for i in range(len(steps) - 1, -1, -1) if steps[i]["type"] == "assistant"), None
    )
    return _report(steps, analyze_items(items, final))


def _report(steps: list[dict[str, Any]], analysis: EvidenceAnalysis) -> dict[str, Any]:
    summary = summarize(analysis, [s["id"] for s in steps])
    return {
        "steps": len(steps),
        "evidence_sources": len(summary["evidence"]),
        "tool_results": sum(s["type"] == "tool_result" for s in steps),
        "retrieval_steps": sum(s["type"] == "retrieval" for s in steps),
        **summary,
    }
