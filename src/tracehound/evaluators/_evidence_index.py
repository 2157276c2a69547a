"""Incremental evidence matching with an inverted index.

Evidence units (sentences of tool results and retrieved documents) are indexed by token; each
later output (assistant text, reasoning) is tokenized once and looked up in the index, so the cost
of a step depends on its own size and on how many units share its rarer tokens — not on the
length of the trace.

Exactness comes from prefix filtering: a unit with n unique informative tokens can only match a
text sharing at least t of them (`Unit.threshold`), so indexing any n - t + 1 of its tokens
guarantees that every text it can match shares at least one indexed token. The tokens indexed are
the rarest at insertion time (fewest units so far), which keeps posting lists short for common
words. Every candidate is then checked with the exact match rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracehound.text import TextCache, Tokenized, Unit

__all__ = [
    "EvidenceAnalysis",
    "EvidenceIndex",
    "EvidenceSource",
    "Item",
    "analyze_items",
    "summarize",
]


@dataclass(slots=True)
class EvidenceSource:
    """One evidence source (a tool result, a retrieved document) and its reuse."""

    evidence_id: str
    position: int  # index of the step in the analyzed sequence
    step_key: str
    source_type: str  # "tool_result" | "retrieval"
    tool: str | None
    source: str | None
    units: list[Unit]
    unit_ids: list[int] = field(default_factory=list)
    # for each unit, the positions of the later outputs that reuse it (ascending)
    reuse_positions: list[list[int]] = field(default_factory=list)


@dataclass(slots=True)
class Item:
    """One step of the sequence to analyze."""

    key: str
    role: str  # "evidence" | "target" | "other"
    text: str = ""
    source_type: str = ""
    tool: str | None = None
    source: str | None = None
    evidence_id: str | None = None


class EvidenceIndex:
    """Evidence units indexed by token; outputs matched as they come, in sequence order."""

    __slots__ = (
        "_cache",
        "_df",
        "_full",
        "_parent",
        "_prefix",
        "_unit_owner",
        "_unit_slot",
        "_units",
        "sources",
    )

    def __init__(self, cache: TextCache | None = None) -> None:
        self._cache = cache or TextCache()
        self.sources: list[EvidenceSource] = []
        self._units: list[Unit] = []
        self._unit_owner: list[int] = []  # unit id -> source index
        self._unit_slot: list[int] = []  # unit id -> its index within the source
        self._prefix: dict[str, list[int]] = {}  # token -> unit ids indexed under it
        self._full: dict[str, list[int]] = {}  # token -> every unit id containing it
        self._df: dict[str, int] = {}
        self._parent: list[int] = []  # union-find over sources, for repeated-evidence groups

    @property
    def cache(self) -> TextCache:
        return self._cache

    def add_evidence(self, item: Item, position: int, evidence_id: str) -> EvidenceSource:
        units = self._cache.units(item.text)
        source_index = len(self.sources)
        source = EvidenceSource(
            evidence_id=evidence_id,
            position=position,
            step_key=item.key,
            source_type=item.source_type,
            tool=item.tool,
            source=item.source,
            units=units,
        )
        self.sources.append(source)
        self._parent.append(source_index)
        for unit in units:
            self._link_repeats(unit, source_index)
            unit_id = len(self._units)
            self._units.append(unit)
            self._unit_owner.append(source_index)
            self._unit_slot.append(len(source.unit_ids))
            source.unit_ids.append(unit_id)
            source.reuse_positions.append([])
            self._index(unit, unit_id)
        return source

    def match_output(self, text: str, position: int) -> list[int]:
        """Record which indexed units this output reuses; returns their unit ids (ascending)."""
        target = self._cache.tokenized(text)
        if not target.normalized:
            return []
        candidates: set[int] = set()
        prefix = self._prefix
        for token in target.token_set:
            postings = prefix.get(token)
            if postings:
                candidates.update(postings)
        matched: list[int] = []
        units = self._units
        target_set = target.token_set
        for unit_id in candidates:
            unit = units[unit_id]
            if unit.matches(target, len(unit.token_set & target_set)):
                matched.append(unit_id)
                owner = self.sources[self._unit_owner[unit_id]]
                owner.reuse_positions[self._unit_slot[unit_id]].append(position)
        matched.sort()
        return matched

    def owner(self, unit_id: int) -> EvidenceSource:
        return self.sources[self._unit_owner[unit_id]]

    def unit(self, unit_id: int) -> Unit:
        return self._units[unit_id]

    def repeated_groups(self) -> list[list[int]]:
        """Groups (≥ 2) of sources sharing a matching unit, by first member; members in order."""
        groups: dict[int, list[int]] = {}
        for index in range(len(self.sources)):
            groups.setdefault(self._find(index), []).append(index)
        return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: g[0])

    # --- internals --------------------------------------------------------------------------

    def _index(self, unit: Unit, unit_id: int) -> None:
        df = self._df
        keep = len(unit.token_set) - unit.threshold + 1
        rarest = sorted(unit.token_set, key=lambda t: (df.get(t, 0), -len(t), t))[:keep]
        for token in rarest:
            self._prefix.setdefault(token, []).append(unit_id)
        for token in unit.token_set:
            self._full.setdefault(token, []).append(unit_id)
            df[token] = df.get(token, 0) + 1

    def _link_repeats(self, unit: Unit, source_index: int) -> None:
        """Union this source with earlier sources that have a unit matching `unit` either way."""
        candidates: set[int] = set()
        # earlier units that `unit` can match: they contain one of its n - t + 1 rarest tokens
        keep = len(unit.token_set) - unit.threshold + 1
        df = self._df
        for token in sorted(unit.token_set, key=lambda t: (df.get(t, 0), -len(t), t))[:keep]:
            candidates.update(self._full.get(token, ()))
        # earlier units that can match `unit`: one of their indexed tokens is in it
        for token in unit.token_set:
            candidates.update(self._prefix.get(token, ()))
        as_text = Tokenized(unit.normalized, unit.token_set)
        owner_of = self._unit_owner
        root = self._find(source_index)
        settled: set[int] = set()  # sources already in this source's group
        for unit_id in candidates:  # group membership does not depend on the order
            other_source = owner_of[unit_id]
            if other_source in settled:
                continue
            if self._find(other_source) == root:
                settled.add(other_source)
                continue
            other = self._units[unit_id]
            overlap = len(other.token_set & unit.token_set)
            if other.matches(as_text, overlap) or unit.matches(
                Tokenized(other.normalized, other.token_set), overlap
            ):
                self._union(other_source, source_index)
                root = self._find(source_index)
                settled.add(other_source)

    def _find(self, index: int) -> int:
        parent = self._parent
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    def _union(self, a: int, b: int) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self._parent[max(ra, rb)] = min(ra, rb)


@dataclass(slots=True)
class EvidenceAnalysis:
    items: Sequence[Item]
    index: EvidenceIndex
    final_position: int | None
    reusing_positions: dict[int, list[int]]  # output position -> unit ids it reuses

    @property
    def sources(self) -> list[EvidenceSource]:
        return self.index.sources


def analyze_items(
    items: Sequence[Item], final_position: int | None, cache: TextCache | None = None
) -> EvidenceAnalysis:
    """Match every output against the evidence before it, in sequence order."""
    index = EvidenceIndex(cache)
    reusing: dict[int, list[int]] = {}
    for position, item in enumerate(items):
        if item.role == "evidence":
            evidence_id = item.evidence_id or f"evidence-{len(index.sources)}"
            index.add_evidence(item, position, evidence_id)
        elif item.role == "target":
            matched = index.match_output(item.text, position)
            if matched:
                reusing[position] = matched
    return EvidenceAnalysis(items, index, final_position, reusing)


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _totals(records: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        name = record[key]
        if name is None:
            continue
        entry = out.get(name)
        if entry is None:
            entry = out[name] = {
                "evidence_sources": 0,
                "evidence_units": 0,
                "reused_units": 0,
                "final_reused_units": 0,
            }
        entry["evidence_sources"] += 1
        for field_name in ("evidence_units", "reused_units", "final_reused_units"):
            entry[field_name] += record[field_name]
    for entry in out.values():
        entry["survival_ratio"] = _ratio(entry["reused_units"], entry["evidence_units"])
        entry["final_answer_survival_ratio"] = _ratio(
            entry["final_reused_units"], entry["evidence_units"]
        )
    return out


def summarize(analysis: EvidenceAnalysis, step_ids: Sequence[str]) -> dict[str, Any]:
    """Per-source records and totals (the `evidenceflow` result shape, minus step counters)."""
    final = analysis.final_position
    records: list[dict[str, Any]] = []
    for src in analysis.sources:
        unit_count = len(src.units)
        reused = sum(1 for positions in src.reuse_positions if positions)
        final_reused = 0
        if final is not None and final > src.position:
            final_reused = sum(1 for positions in src.reuse_positions if final in positions)
        reused_at = sorted({p for positions in src.reuse_positions for p in positions})
        last = reused_at[-1] if reused_at else None
        records.append(
            {
                "evidence_id": src.evidence_id,
                "step_id": src.step_key,
                "source_type": src.source_type,
                "tool": src.tool,
                "source": src.source,
                "evidence_units": unit_count,
                "reused_units": reused,
                "final_reused_units": final_reused,
                "survival_ratio": _ratio(reused, unit_count),
                "final_answer_survival_ratio": _ratio(final_reused, unit_count),
                "reused_at": [step_ids[p] for p in reused_at],
                "reuse_count": len(reused_at),
                "last_reuse_step": step_ids[last] if last is not None else None,
                "steps_until_last_reuse": last - src.position if last is not None else None,
            }
        )
    units = sum(r["evidence_units"] for r in records)
    reused_units = sum(r["reused_units"] for r in records)
    final_units = sum(r["final_reused_units"] for r in records)
    unused = [
        {
            "evidence_id": r["evidence_id"],
            "step_id": r["step_id"],
            "tool": r["tool"],
            "source": r["source"],
            "evidence_units": r["evidence_units"],
        }
        for r in records
        if r["reused_units"] == 0
    ]
    groups = [[analysis.sources[i].evidence_id for i in g] for g in analysis.index.repeated_groups()]
    return {
        "evidence_units": units,
        "reused_units": reused_units,
        "final_reused_units": final_units,
        "overall_survival_ratio": _ratio(reused_units, units),
        "final_answer_survival_ratio": _ratio(final_units, units),
        "apparently_unused_sources": len(unused),
        "evidence": records,
        "tools": _totals(records, "tool"),
        "sources": _totals(records, "source"),
        "unused_evidence": unused,
        "repeated_evidence_groups": groups,
    }
