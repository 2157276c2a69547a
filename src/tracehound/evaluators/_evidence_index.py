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

from tracehound.text import TextCache, Tokenized, Unit

__all__ = ["EvidenceAnalysis", "EvidenceIndex", "EvidenceSource", "Item", "analyze_items"]


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
        for unit_id in sorted(candidates):
            unit = units[unit_id]
            if unit.matches(target, len(unit.token_set & target.token_set)):
                matched.append(unit_id)
                owner = self.sources[self._unit_owner[unit_id]]
                owner.reuse_positions[self._unit_slot[unit_id]].append(position)
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
        rarest = sorted(unit.token_set, key=lambda t: (df.get(t, 0), t))[:keep]
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
        for token in sorted(unit.token_set, key=lambda t: (self._df.get(t, 0), t))[:keep]:
            candidates.update(self._full.get(token, ()))
        # earlier units that can match `unit`: one of their indexed tokens is in it
        for token in unit.token_set:
            candidates.update(self._prefix.get(token, ()))
        as_text = Tokenized(unit.normalized, unit.token_set)
        for unit_id in sorted(candidates):
            other_source = self._unit_owner[unit_id]
            if self._find(other_source) == self._find(source_index):
                continue
            other = self._units[unit_id]
            overlap = len(other.token_set & unit.token_set)
            if other.matches(as_text, overlap) or unit.matches(
                Tokenized(other.normalized, other.token_set), overlap
            ):
                self._union(other_source, source_index)

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
