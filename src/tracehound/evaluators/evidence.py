"""The `evidence` evaluator: which tool results and retrieved documents reach the outputs.

Evidence sources are tool results (one per call id, however many times the history resends it)
and retrieved documents (one per document). Reuse targets are assistant text and reasoning. A unit
(sentence or paragraph) of evidence is reused by a later output under the shared match rule of
`tracehound.text`; the final answer is the top-level run's declared output, or else its last
assistant text.

Per span (as spans arrive): on each LLM span whose outputs reuse evidence, the number of units
reused and the tools/sources they came from. Per trace (at finalization, from the canonical
trajectory, so independent of arrival order): overall and final-answer survival, per tool and
per source, unused sources, repeated-evidence groups, steps until last reuse.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracehound import names
from tracehound.conventions import NormalizedSpan
from tracehound.evaluators._evidence_index import (
    EvidenceAnalysis,
    EvidenceIndex,
    Item,
    analyze_items,
    summarize,
)
from tracehound.evaluators.base import EvaluationResult, Evaluator, TraceInfo
from tracehound.steps import Step, Trajectory
from tracehound.text import TextCache

__all__ = ["EvidenceConfig", "EvidenceEvaluator", "trajectory_items"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceConfig:
    min_final_survival: float = 0.2
    """Final-answer survival below this labels the trace `ungrounded` (when it had evidence)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_final_survival <= 1.0:
            raise ValueError("min_final_survival must be within [0, 1]")


def _step_key(step: Step, index: int) -> str:
    return f"{step.span_id}#{index}"


def trajectory_items(trajectory: Trajectory) -> tuple[list[Item], list[str], int | None]:
    """The trajectory as an evidence sequence: items, their keys, and the final-answer position."""
    items: list[Item] = []
    keys: list[str] = []
    for index, step in enumerate(trajectory.steps):
        items.extend(_step_items(step, index))
        keys.extend(item.key for item in items[len(keys) :])
    final = _final_position(trajectory, items)
    if final == len(items):  # the declared output is not one of the steps: add it last
        answer = trajectory.final_answer() or ""
        items.append(Item(key="final_answer", role="target", text=answer))
        keys.append("final_answer")
    return items, keys, final


def _step_items(step: Step, index: int) -> list[Item]:
    key = _step_key(step, index)
    if step.kind == "tool_result" and step.text:
        return [
            Item(
                key=key,
                role="evidence",
                text=step.text,
                source_type="tool_result",
                tool=step.tool,
                evidence_id=step.call_id or key,
            )
        ]
    if step.kind == "retrieval":
        out = []
        for k, doc in enumerate(step.documents):
            if doc.content:
                out.append(
                    Item(
                        key=f"{key}.{k}",
                        role="evidence",
                        text=doc.content,
                        source_type="retrieval",
                        source=step.source,
                        evidence_id=doc.id or f"{key}.{k}",
                    )
                )
        return out
    if step.kind in ("assistant", "reasoning") and step.text:
        return [Item(key=key, role="target", text=step.text)]
    return [Item(key=key, role="other")]


def _final_position(trajectory: Trajectory, items: list[Item]) -> int | None:
    answer = trajectory.final_answer()
    if answer is None:
        return None
    for position in range(len(items) - 1, -1, -1):
        item = items[position]
        if item.role == "target" and item.text == answer:
            return position
    return len(items)


# Steps `_step_items` makes evidence or targets of, when they have text (retrieval: documents).
_ITEM_KINDS = frozenset(("tool_result", "assistant", "reasoning"))


class _State:
    __slots__ = ("cache", "index", "position", "reusing", "seen")

    def __init__(self, cache: TextCache | None = None) -> None:
        self.cache = cache if cache is not None else TextCache()
        self.index = EvidenceIndex(self.cache)
        self.position = 0
        # What the index was fed, in order: (position, role, text) of each evidence and target
        # item, and the units each target reused; lets the trace result reuse the index.
        self.seen: list[tuple[int, str, str]] = []
        self.reusing: dict[int, list[int]] = {}


def _reuse_index(state: _State, items: list[Item], final: int | None) -> EvidenceAnalysis | None:
    """The analysis of `items` from the index built as spans arrived, if that index was fed the
    same evidence and targets in the same order (the usual case: spans arrive in the order of
    the canonical trajectory, up to steps that are neither); None otherwise.

    Matching depends only on that sequence, so the index's decisions are the ones a fresh
    analysis would make; only positions and labels are the canonical trajectory's.
    """
    relevant = [(p, item) for p, item in enumerate(items) if item.role != "other"]
    declared = bool(relevant) and relevant[-1][1].key == "final_answer"
    if declared:  # the declared output, not a step: matched below, after everything else
        relevant.pop()
    seen = state.seen
    if len(relevant) != len(seen):
        return None
    for (_, item), (_, role, text) in zip(relevant, seen, strict=True):
        if item.role != role or item.text != text:
            return None
    position_of = {old: new for (new, _), (old, _, _) in zip(relevant, seen, strict=True)}
    index = state.index
    evidence = [item for _, item in relevant if item.role == "evidence"]
    for number, (source, item) in enumerate(zip(index.sources, evidence, strict=True)):
        source.position = position_of[source.position]
        source.step_key = item.key
        source.evidence_id = item.evidence_id or f"evidence-{number}"  # as `analyze_items`
        source.source_type = item.source_type
        source.tool = item.tool
        source.source = item.source
        source.reuse_positions = [
            tuple([position_of[p] for p in ps]) for ps in source.reuse_positions
        ]
    reusing = {position_of[p]: units for p, units in state.reusing.items()}
    if declared:
        position = len(items) - 1
        matched = index.match_output(items[position].text, position)
        if matched:
            reusing[position] = matched
    return EvidenceAnalysis(items, index, final, reusing)


class EvidenceEvaluator(Evaluator):
    name = "evidence"
    version = "1.0.0"

    def __init__(self, config: EvidenceConfig | None = None) -> None:
        self.config = config or EvidenceConfig()

    def start_trace(self, trace: TraceInfo) -> _State:
        return _State(trace.texts)

    def on_span(
        self, state: _State, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        reused: set[int] = set()
        outputs = 0
        for step in steps:
            kind = step.kind
            if kind != "retrieval" and not (step.text and kind in _ITEM_KINDS):
                state.position += 1  # one `other` item (see `_step_items`)
                continue
            for item in _step_items(step, state.position):
                position = state.position
                if item.role == "evidence":
                    state.index.add_evidence(item, position, item.evidence_id or item.key)
                    state.seen.append((position, "evidence", item.text))
                elif item.role == "target":
                    outputs += 1
                    matched = state.index.match_output(item.text, position)
                    state.seen.append((position, "target", item.text))
                    if matched:
                        state.reusing[position] = matched
                        reused.update(matched)
                state.position += 1
        if span.operation != "llm" or not outputs:
            return ()
        origins = sorted({_origin(state.index, u) for u in reused})
        attributes: dict[str, Any] = {names.ATTR_EVIDENCE_REUSED_UNITS: len(reused)}
        if origins:
            attributes[names.ATTR_EVIDENCE_REUSED_FROM] = origins
        return [
            EvaluationResult(
                name=names.EVAL_EVIDENCE_REUSE,
                evaluator=self.name,
                evaluator_version=self.version,
                span_id=span.span_id,
                score_value=float(len(reused)),
                score_label="reuses_evidence" if reused else "no_reuse",
                explanation=(
                    f"outputs reuse {len(reused)} evidence unit(s) from {', '.join(origins)}"
                    if reused
                    else "outputs reuse no evidence seen so far"
                ),
                attributes=attributes,
            )
        ]

    def finish_trace(
        self, state: _State, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        items, keys, final = trajectory_items(trajectory)
        analysis = _reuse_index(state, items, final) or analyze_items(items, final, state.cache)
        report = summarize(analysis, keys)
        sources = report["evidence"]
        attributes: dict[str, Any] = {
            names.ATTR_EVIDENCE_SOURCES: len(sources),
            names.ATTR_EVIDENCE_UNITS: report["evidence_units"],
            names.ATTR_EVIDENCE_REUSED_UNITS: report["reused_units"],
            names.ATTR_EVIDENCE_SURVIVAL_RATIO: report["overall_survival_ratio"],
            names.ATTR_EVIDENCE_FINAL_SURVIVAL_RATIO: report["final_answer_survival_ratio"],
            names.ATTR_EVIDENCE_UNUSED_SOURCES: report["apparently_unused_sources"],
            names.ATTR_EVIDENCE_REPEATED_GROUPS: len(report["repeated_evidence_groups"]),
        }
        last_reuse = [r["steps_until_last_reuse"] for r in sources if r["steps_until_last_reuse"]]
        if last_reuse:
            attributes[names.ATTR_EVIDENCE_MAX_STEPS_UNTIL_LAST_REUSE] = max(last_reuse)
        if report["tools"]:
            attributes[names.ATTR_EVIDENCE_PER_TOOL] = json.dumps(
                _compact(report["tools"]), sort_keys=True
            )
        if report["sources"]:
            attributes[names.ATTR_EVIDENCE_PER_SOURCE] = json.dumps(
                _compact(report["sources"]), sort_keys=True
            )
        if not report["evidence_units"]:
            # No evidence: survival is undefined, not zero (a gate on it must not trip). Sources
            # too short to hold a unit (`timeout`, `[]`) give nothing to reuse either.
            attributes = {names.ATTR_EVIDENCE_SOURCES: len(sources)}
            return [
                EvaluationResult(
                    name=names.EVAL_EVIDENCE_SURVIVAL,
                    evaluator=self.name,
                    evaluator_version=self.version,
                    score_label="no_evidence",
                    explanation=(
                        f"{len(sources)} evidence source(s), none with a sentence to reuse"
                        if sources
                        else "no tool result or retrieved document with text in this trace"
                    ),
                    attributes=attributes,
                )
            ]
        final_ratio = report["final_answer_survival_ratio"]
        grounded = final_ratio >= self.config.min_final_survival
        unused = [u["evidence_id"] for u in report["unused_evidence"]]
        explanation = (
            f"{report['reused_units']} of {report['evidence_units']} evidence units reused "
            f"({report['overall_survival_ratio']:.0%}); the final answer uses "
            f"{report['final_reused_units']} ({final_ratio:.0%})"
        )
        if unused:
            explanation += f"; unused sources: {', '.join(unused[:5])}"
            if len(unused) > 5:
                explanation += f" and {len(unused) - 5} more"
        return [
            EvaluationResult(
                name=names.EVAL_EVIDENCE_SURVIVAL,
                evaluator=self.name,
                evaluator_version=self.version,
                score_value=float(report["overall_survival_ratio"]),
                score_label="reused" if report["reused_units"] else "unused",
                explanation=explanation,
                attributes=attributes,
            ),
            EvaluationResult(
                name=names.EVAL_EVIDENCE_FINAL_SURVIVAL,
                evaluator=self.name,
                evaluator_version=self.version,
                score_value=float(final_ratio),
                score_label="grounded" if grounded else "ungrounded",
                explanation=(
                    f"final answer reuses {final_ratio:.0%} of the evidence units "
                    f"(threshold {self.config.min_final_survival:.0%})"
                ),
            ),
        ]


def _origin(index: EvidenceIndex, unit_id: int) -> str:
    source = index.owner(unit_id)
    return source.tool or source.source or source.source_type


def _compact(totals: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "sources": t["evidence_sources"],
            "units": t["evidence_units"],
            "reused": t["reused_units"],
            "final_reused": t["final_reused_units"],
            "survival": round(t["survival_ratio"], 4),
            "final_survival": round(t["final_answer_survival_ratio"], 4),
        }
        for name, t in totals.items()
    }
