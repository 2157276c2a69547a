"""The `evidence` evaluator: which tool results and retrieved documents reach the outputs.

Evidence sources are tool results (one per call id, however many times the history resends it;
not a failed call's error message) and retrieved documents (one per document). Reuse targets
are assistant text and reasoning. A unit (sentence or paragraph) of evidence is reused by a
later output under the shared match rule of `tracehound.text`; the final answer is the top-level
run's declared output, or else its last assistant text.

Per span (as spans arrive): on each LLM span whose outputs reuse evidence, the number of units
reused and the tools/sources they came from. Per trace (at finalization, from the canonical
trajectory, so independent of arrival order): overall and final-answer survival, per tool and
per source, unused sources, repeated-evidence groups, steps until last reuse.

The rules here (which steps are evidence or outputs, the final answer, the totals and the
results) have this one implementation; the index under them (`_evidence_index`) may keep its
state in the C accelerator's `EvidenceCore`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracehound import names
from tracehound.conventions import NormalizedSpan
from tracehound.conventions.base import fields_maker
from tracehound.evaluators._evidence_index import EvidenceIndex, Item, analyze_items, summarize
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
    if step.kind == "tool_result" and step.text and not step.error:
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


_quote = json.encoder.encode_basestring_ascii  # (C) a str as `json.dumps` writes it


def _totals_json(totals: dict[str, dict[str, Any]]) -> str:
    """`json.dumps(totals, sort_keys=True)` for `_compact_totals` entries (ints, and finite
    floats, which `json` writes as `repr` does), without the encoder's machinery per call."""
    return "{" + ", ".join(_entry_json(name, t) for name, t in sorted(totals.items())) + "}"


# Formatting a float costs more than the rest of a trace's totals: the few values traces give
# (small counts, ratios of them) are kept, formatted, in small tables (emptied when full).
_MEMO_SIZE = 4096
_ENTRIES: dict[tuple[int, int, int, int], str] = {}
_ROUNDED: dict[tuple[int, int], float] = {}
_PERCENT: dict[float, str] = {}


def _entry_json(name: str, t: dict[str, Any]) -> str:
    return (
        f"{_quote(name)}: {_entry_text(t['sources'], t['units'], t['reused'], t['final_reused'])}"
    )


def _entry_text(sources: int, units: int, reused: int, final_reused: int) -> str:
    """The JSON of `_compact_totals(sources, units, reused, final_reused)`, keys sorted."""
    key = (sources, units, reused, final_reused)
    text = _ENTRIES.get(key)
    if text is None:
        if len(_ENTRIES) >= _MEMO_SIZE:
            _ENTRIES.clear()
        t = _compact_totals(*key)
        text = _ENTRIES[key] = (
            f'{{"final_reused": {final_reused!r}, "final_survival": {t["final_survival"]!r}, '
            f'"reused": {reused!r}, "sources": {sources!r}, "survival": {t["survival"]!r}, '
            f'"units": {units!r}}}'
        )
    return text


def _rounded_ratio(part: int, whole: int) -> float:
    """`round(part / whole if whole else 0.0, 4)`."""
    key = (part, whole)
    value = _ROUNDED.get(key)
    if value is None:
        if len(_ROUNDED) >= _MEMO_SIZE:
            _ROUNDED.clear()
        value = _ROUNDED[key] = round(part / whole if whole else 0.0, 4)
    return value


def _percent(ratio: float) -> str:
    """`f"{ratio:.0%}"`."""
    text = _PERCENT.get(ratio)
    if text is None:
        if len(_PERCENT) >= _MEMO_SIZE:
            _PERCENT.clear()
        text = _PERCENT[ratio] = f"{ratio:.0%}"
    return text


# Results are made for most spans
_new_result = fields_maker(EvaluationResult)

# Steps `_step_items` makes evidence or targets of, when they have text (retrieval: documents).
_ITEM_KINDS = frozenset(("tool_result", "assistant", "reasoning"))
_TARGET_KINDS = frozenset(("assistant", "reasoning"))


class _State:
    """A trace's evidence so far: the index, and what it was fed (for `_streamed_survival`)."""

    __slots__ = ("cache", "index", "position", "seen")

    def __init__(self, cache: TextCache | None = None) -> None:
        self.cache = cache if cache is not None else TextCache()
        self.index = EvidenceIndex(self.cache)
        self.position = 0
        # What the index was fed, in order: (position, role, text) of each evidence and target
        # item; lets the trace result reuse the index.
        self.seen: list[tuple[int, str, str]] = []


@dataclass(slots=True)
class _Survival:
    """What the trace results say of a trajectory's evidence (a part of `summarize`'s report)."""

    sources: int
    units: int
    reused: int
    final_reused: int
    unused: list[str]  # evidence ids of the sources with no unit reused, in order
    repeated_groups: int
    max_steps_until_last_reuse: int | None  # None: no source reused after its own step
    tools: dict[str, dict[str, Any]]  # `_compact` totals per tool
    per_source: dict[str, dict[str, Any]]  # and per retrieval source

    @classmethod
    def of_report(cls, report: dict[str, Any]) -> _Survival:
        records = report["evidence"]
        last_reuse = [r["steps_until_last_reuse"] for r in records if r["steps_until_last_reuse"]]
        return cls(
            sources=len(records),
            units=report["evidence_units"],
            reused=report["reused_units"],
            final_reused=report["final_reused_units"],
            unused=[u["evidence_id"] for u in report["unused_evidence"]],
            repeated_groups=len(report["repeated_evidence_groups"]),
            max_steps_until_last_reuse=max(last_reuse) if last_reuse else None,
            tools=_compact(report["tools"]),
            per_source=_compact(report["sources"]),
        )


def _survival(state: _State, trajectory: Trajectory) -> _Survival:
    streamed = _streamed_survival(state, trajectory)
    if streamed is not None:
        return streamed
    return _fresh_survival(state.cache, trajectory)


def _fresh_survival(cache: TextCache, trajectory: Trajectory) -> _Survival:
    """`_Survival` of a fresh analysis of the trajectory."""
    items, keys, final = trajectory_items(trajectory)
    return _Survival.of_report(summarize(analyze_items(items, final, cache), keys))


def _streamed_survival(state: _State, trajectory: Trajectory) -> _Survival | None:
    """`_Survival` of the trajectory from the index built as spans arrived, if that index was fed
    the same evidence and targets in the same order as `trajectory_items` gives them (the usual
    case: spans arrive in the order of the canonical trajectory, up to steps that are neither);
    None otherwise.

    Matching depends only on that sequence, so the index's decisions are the ones a fresh
    analysis would make; only positions and each source's identity (its evidence id, tool and
    retrieval source) are the canonical trajectory's (positions are mapped, in the same order,
    from those the items had as they arrived; two results of the same text from different tools
    may have arrived in either order).
    """
    seen = state.seen
    count = len(seen)
    canonical: dict[int, int] = {}  # position as fed -> position in `trajectory_items`
    labels: list[tuple[str, str | None, str | None]] = []  # (evidence id, tool, source), in order
    answer = trajectory.final_answer()
    final: int | None = None  # as fed: the last target whose text is the answer
    k = position = 0
    for step_index, step in enumerate(trajectory.steps):
        kind = step.kind
        text = step.text
        if kind == "retrieval":
            for number, doc in enumerate(step.documents):
                content = doc.content
                if content:
                    if k == count:
                        return None
                    fed, role, fed_text = seen[k]
                    if role != "evidence" or fed_text != content:
                        return None
                    canonical[fed] = position
                    labels.append(
                        (doc.id or f"{step.span_id}#{step_index}.{number}", None, step.source)
                    )
                    k += 1
                    position += 1
            continue
        if text and kind in _ITEM_KINDS and not (kind == "tool_result" and step.error):
            if k == count:
                return None
            fed, role, fed_text = seen[k]
            if fed_text != text or role != ("evidence" if kind == "tool_result" else "target"):
                return None
            canonical[fed] = position
            if role == "evidence":
                labels.append((step.call_id or f"{step.span_id}#{step_index}", step.tool, None))
            elif text == answer:  # (compared, not hashed: outputs are long)
                final = fed
            k += 1
        position += 1
    if k != count:
        return None
    index = state.index
    if answer is not None and final is None:
        # the declared output, not a step: matched after everything else
        final = state.position  # after every position fed
        canonical[final] = position
        index.match_output(answer, final)
    return _summary(index, labels, canonical, final)


def _summary(
    index: EvidenceIndex,
    labels: list[tuple[str, str | None, str | None]],
    canonical: dict[int, int],
    final: int | None,
) -> _Survival:
    """`_Survival.of_report(summarize(...))` of the index's sources, relabeled (see above)."""
    units = reused = final_reused = 0
    unused: list[str] = []
    last_reuse: int | None = None
    tools: dict[str, list[int]] = {}
    per_source: dict[str, list[int]] = {}
    for (label, tool, source), src in zip(labels, index.sources, strict=True):
        positions_of = src.reuse_positions
        unit_count = len(src.unit_ids)
        # most units are reused by nothing: counted at C speed, the others looked at
        src_reused = sum(map(bool, positions_of))
        src_final = 0
        if src_reused:
            reusing = [positions for positions in positions_of if positions]
            last = max([positions[-1] for positions in reusing])  # each ascending
            steps = canonical[last] - canonical[src.position]
            if steps and (last_reuse is None or steps > last_reuse):
                last_reuse = steps
            if final is not None and final > src.position:
                src_final = sum([final in positions for positions in reusing])
        else:
            unused.append(label)
        units += unit_count
        reused += src_reused
        final_reused += src_final
        for name, totals in ((tool, tools), (source, per_source)):
            if name is not None:
                entry = totals.get(name)
                if entry is None:
                    entry = totals[name] = [0, 0, 0, 0]
                entry[0] += 1
                entry[1] += unit_count
                entry[2] += src_reused
                entry[3] += src_final
    return _Survival(
        sources=len(labels),
        units=units,
        reused=reused,
        final_reused=final_reused,
        unused=unused,
        repeated_groups=len(index.repeated_groups()),
        max_steps_until_last_reuse=last_reuse,
        tools={name: _compact_totals(*entry) for name, entry in tools.items()},
        per_source={name: _compact_totals(*entry) for name, entry in per_source.items()},
    )


def _compact_totals(sources: int, units: int, reused: int, final_reused: int) -> dict[str, Any]:
    """An entry of `_compact` from the sums `_totals` makes."""
    return {
        "sources": sources,
        "units": units,
        "reused": reused,
        "final_reused": final_reused,
        "survival": _rounded_ratio(reused, units),
        "final_survival": _rounded_ratio(final_reused, units),
    }


class EvidenceEvaluator(Evaluator):
    name = "evidence"
    version = "1.0.0"

    def __init__(self, config: EvidenceConfig | None = None) -> None:
        self.config = config or EvidenceConfig()
        self._threshold = f"{self.config.min_final_survival:.0%}"  # as the explanations write it

    def start_trace(self, trace: TraceInfo) -> _State:
        return _State(trace.texts)

    def on_span(
        self, state: _State, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        reused: set[int] = set()
        outputs = 0
        index, seen, position = state.index, state.seen, state.position
        # the items `_step_items` makes, fed as they come, without making them
        for step in steps:
            kind = step.kind
            text = step.text
            if kind == "tool_result" and text and not step.error:
                key = f"{step.span_id}#{position}"
                index.add_source(
                    text,
                    position,
                    evidence_id=step.call_id or key,
                    step_key=key,
                    source_type="tool_result",
                    tool=step.tool,
                    source_name=None,
                )
                seen.append((position, "evidence", text))
            elif kind == "retrieval":
                step_key = f"{step.span_id}#{position}"
                for number, doc in enumerate(step.documents):
                    content = doc.content
                    if content:
                        key = f"{step_key}.{number}"
                        index.add_source(
                            content,
                            position,
                            evidence_id=doc.id or key,
                            step_key=key,
                            source_type="retrieval",
                            tool=None,
                            source_name=step.source,
                        )
                        seen.append((position, "evidence", content))
                        position += 1
                        state.position = position
                continue
            elif text and kind in _TARGET_KINDS:
                outputs += 1
                matched = index.match_output(text, position)
                seen.append((position, "target", text))
                reused.update(matched)
            position += 1
            state.position = position  # (kept in step with `seen` should a step raise)
        if span.operation != "llm" or not outputs:
            return ()
        origins = sorted({_origin(state.index, u) for u in reused}) if reused else []
        return [self._reuse_result(span.span_id, len(reused), origins)]

    def _reuse_result(self, span_id: str, count: int, origins: list[str]) -> EvaluationResult:
        """The result of a span whose outputs reuse `count` units, from these origins."""
        if not count:
            attributes: dict[str, Any] = {names.ATTR_EVIDENCE_REUSED_UNITS: 0}
            return _new_result(
                names.EVAL_EVIDENCE_REUSE,
                self.name,
                self.version,
                span_id,
                0.0,
                "no_reuse",
                "outputs reuse no evidence seen so far",
                attributes,
                None,
            )
        attributes = {
            names.ATTR_EVIDENCE_REUSED_UNITS: count,
            names.ATTR_EVIDENCE_REUSED_FROM: origins,
        }
        return _new_result(
            names.EVAL_EVIDENCE_REUSE,
            self.name,
            self.version,
            span_id,
            float(count),
            "reuses_evidence",
            f"outputs reuse {count} evidence unit(s) from {', '.join(origins)}",
            attributes,
            None,
        )

    def finish_trace(
        self, state: _State, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        return self._trace_results(_survival(state, trajectory))

    def _trace_results(self, survival: _Survival) -> list[EvaluationResult]:
        """The trace results of a `_Survival`."""
        sources, units, reused = survival.sources, survival.units, survival.reused
        final_reused, unused = survival.final_reused, survival.unused
        if not units:
            # No evidence: survival is undefined, not zero (a gate on it must not trip). Sources
            # too short to hold a unit (`timeout`, `[]`) give nothing to reuse either.
            return [
                _new_result(
                    names.EVAL_EVIDENCE_SURVIVAL,
                    self.name,
                    self.version,
                    None,
                    None,
                    "no_evidence",
                    (
                        f"{sources} evidence source(s), none with a sentence to reuse"
                        if sources
                        else "no tool result or retrieved document with text in this trace"
                    ),
                    {names.ATTR_EVIDENCE_SOURCES: sources},
                    None,
                )
            ]
        ratio = reused / units
        final_ratio = final_reused / units
        attributes: dict[str, Any] = {
            names.ATTR_EVIDENCE_SOURCES: sources,
            names.ATTR_EVIDENCE_UNITS: units,
            names.ATTR_EVIDENCE_REUSED_UNITS: reused,
            names.ATTR_EVIDENCE_SURVIVAL_RATIO: ratio,
            names.ATTR_EVIDENCE_FINAL_SURVIVAL_RATIO: final_ratio,
            names.ATTR_EVIDENCE_UNUSED_SOURCES: len(unused),
            names.ATTR_EVIDENCE_REPEATED_GROUPS: survival.repeated_groups,
        }
        last_reuse = survival.max_steps_until_last_reuse
        if last_reuse is not None:
            attributes[names.ATTR_EVIDENCE_MAX_STEPS_UNTIL_LAST_REUSE] = last_reuse
        if survival.tools:
            attributes[names.ATTR_EVIDENCE_PER_TOOL] = _totals_json(survival.tools)
        if survival.per_source:
            attributes[names.ATTR_EVIDENCE_PER_SOURCE] = _totals_json(survival.per_source)
        final_percent = _percent(final_ratio)
        explanation = (
            f"{reused} of {units} evidence units reused ({_percent(ratio)}); "
            f"the final answer uses {final_reused} ({final_percent})"
        )
        if unused:
            explanation += f"; unused sources: {', '.join(unused[:5])}"
            if len(unused) > 5:
                explanation += f" and {len(unused) - 5} more"
        return [
            _new_result(
                names.EVAL_EVIDENCE_SURVIVAL,
                self.name,
                self.version,
                None,
                float(ratio),
                "reused" if reused else "unused",
                explanation,
                attributes,
                None,
            ),
            _new_result(
                names.EVAL_EVIDENCE_FINAL_SURVIVAL,
                self.name,
                self.version,
                None,
                float(final_ratio),
                "grounded" if final_ratio >= self.config.min_final_survival else "ungrounded",
                f"final answer reuses {final_percent} of the evidence units "
                f"(threshold {self._threshold})",
                {},
                None,
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
