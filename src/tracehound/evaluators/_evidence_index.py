"""Incremental evidence matching with an inverted index.

Evidence units (sentences of tool results and retrieved documents) are indexed by token; each
later output (assistant text, reasoning) is tokenized once and looked up in the index, so the cost
of a step depends on its own size and on how many units share its rarer tokens — not on the
length of the trace.

Units with the same normalized text match exactly the same texts, so the index holds each such
text once (a *class*; agents re-read the same documents, tools return the same boilerplate) and a
match is recorded for every unit of the class seen so far.

Exactness comes from prefix filtering: a unit with n unique informative tokens can only match a
text sharing at least t of them (`Unit.threshold`), so indexing any n - t + 1 of its tokens
guarantees that every text it can match shares at least one indexed token. The rarest ones at
insertion (fewest classes so far) are chosen, to keep posting sets short for common words. Every
candidate is then checked with the exact match rule.

Repeated-evidence groups (sources with units that match each other either way) are kept as a
union-find over sources: each new class is checked against the earlier classes it can match
either way — a lookup like a text's, plus, for larger units that may hold half of it, a lookup in
a full index — skipping those already in its source's group.

With the C accelerator, the index's state and loops are an `EvidenceCore`
(`tracehound._speedups`, see `_speedups_evidence.c`): the same index with tokens interned to ints
and postings in C arrays, making every decision this code makes. It also cuts and tokenizes the
texts of the tokenizer's ASCII path itself (the others come from the `TextCache`); it answers
with unit ids, and this code records the reuse positions and makes a source's `Unit` objects
(from the fields the core gives, only when they are asked for: `EvidenceSource.units`). This
code stays the reference and the path without the accelerator; each index picks one when it is
made.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from tracehound import _accel
from tracehound.text import STOP_WORDS, TextCache, Unit

if TYPE_CHECKING:
    from tracehound._speedups import EvidenceCore

__all__ = [
    "EvidenceAnalysis",
    "EvidenceIndex",
    "EvidenceSource",
    "Item",
    "analyze_items",
    "summarize",
]


# An empty core per accelerator type, whose interned stop words each index's core copies.
_CORE_TEMPLATES: dict[type[EvidenceCore], EvidenceCore] = {}


def _new_core() -> EvidenceCore | None:
    """A core for a new index with the accelerator in use, else None."""
    core_type = cast("type[EvidenceCore] | None", _accel.kernel("EvidenceCore"))
    if core_type is None:
        return None
    template = _CORE_TEMPLATES.get(core_type)
    if template is None:
        template = _CORE_TEMPLATES[core_type] = core_type(STOP_WORDS)
    return template.fresh()


@dataclass(slots=True)
class EvidenceSource:
    """One evidence source (a tool result, a retrieved document) and its reuse."""

    evidence_id: str
    position: int  # index of the step in the analyzed sequence
    step_key: str
    source_type: str  # "tool_result" | "retrieval"
    tool: str | None
    source: str | None
    unit_ids: range  # the ids of its units (consecutive)
    # for each unit, the positions of the later outputs that reuse it (ascending; tuples, for
    # the garbage collector's sake, as the index's postings)
    reuse_positions: list[tuple[int, ...]]
    # its units: given, or made from the C core's fields when first asked for (`units`)
    _units: list[Unit] | None = field(default=None, repr=False, compare=False)
    _core: EvidenceCore | None = field(default=None, repr=False, compare=False)

    @property
    def units(self) -> list[Unit]:
        units = self._units
        if units is None:
            assert self._core is not None
            ids = self.unit_ids
            units = self._units = [
                Unit(text, normalized, tokens, frozenset(tokens))
                for text, normalized, tokens in self._core.units(ids.start, ids.stop)
            ]
        return units


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
        "_class_of",
        "_class_units",
        "_core",
        "_df",
        "_full",
        "_group",
        "_group_classes",
        "_max_threshold",
        "_members",
        "_prefix",
        "_thresholds",
        "_unit_class",
        "_unit_count",
        "_unit_owner",
        "_unit_slot",
        "_units",
        "sources",
    )

    def __init__(self, cache: TextCache | None = None) -> None:
        self._cache = cache or TextCache()
        self.sources: list[EvidenceSource] = []
        # The C core holds the state below itself; the rest of the index reads it from there.
        self._core = _new_core()
        self._unit_count = 0  # units so far (the next unit's id)
        if self._core is not None:
            return
        self._units: list[Unit] = []
        self._unit_owner: list[int] = []  # unit id -> source index
        self._unit_slot: list[int] = []  # unit id -> its index within the source
        self._unit_class: list[int] = []  # unit id -> class id
        # Classes: units with one normalized text, indexed once.
        self._class_of: dict[str, int] = {}  # normalized text -> class id
        self._class_units: list[tuple[int, ...]] = []  # class id -> its unit ids, ascending
        self._thresholds: list[int] = []  # class id -> Unit.threshold
        self._max_threshold = 0
        self._df: dict[str, int] = {}  # token -> classes containing it
        # Postings are tuples, extended by copy: a trace holds hundreds of them, and the garbage
        # collector stops tracking tuples of ints, while it scans every list and set at each
        # full collection (with many traces held, that costs more than the matching).
        self._prefix: dict[str, tuple[int, ...]] = {}  # token -> classes indexed under it
        self._full: dict[str, tuple[int, ...]] = {}  # token -> every class containing it
        # Repeated-evidence groups: a union-find over sources, with each group's classes.
        self._group: list[int] = []  # source index -> group id
        self._members: dict[int, list[int]] = {}  # group id -> source indexes
        self._group_classes: dict[int, set[int]] = {}  # group id -> classes of its units

    @property
    def cache(self) -> TextCache:
        return self._cache

    def add_evidence(self, item: Item, position: int, evidence_id: str) -> EvidenceSource:
        return self.add_source(
            item.text,
            position,
            evidence_id=evidence_id,
            step_key=item.key,
            source_type=item.source_type,
            tool=item.tool,
            source_name=item.source,
        )

    def add_source(
        self,
        text: str,
        position: int,
        *,
        evidence_id: str,
        step_key: str,
        source_type: str,
        tool: str | None,
        source_name: str | None,
    ) -> EvidenceSource:
        """`add_evidence` for an item given by its fields (the evaluator has no `Item`)."""
        sources = self.sources
        source_index = len(sources)
        first = self._unit_count
        core = self._core
        # the core cuts and tokenizes the texts of the tokenizer's ASCII path itself, making
        # their units only when asked for; the others' units come from the cache
        units: list[Unit] | None = None
        count = core.add_text(source_index, text) if core is not None else None
        if count is None:
            units = self._cache.units(text)
            count = len(units)
            if core is not None:
                core.add_units(source_index, [(unit.normalized, unit.tokens) for unit in units])
        self._unit_count = first + count
        source = EvidenceSource(
            evidence_id,
            position,
            step_key,
            source_type,
            tool,
            source_name,
            range(first, first + count),
            [()] * count,
            units,
            core,
        )
        sources.append(source)
        if core is not None:  # the core keeps the classes and groups itself
            return source
        assert units is not None  # without a core, the units come from the cache
        self._group.append(source_index)
        self._members[source_index] = [source_index]
        self._group_classes[source_index] = set()
        class_of = self._class_of
        for unit_id, unit in enumerate(units, first):
            self._units.append(unit)
            self._unit_owner.append(source_index)
            self._unit_slot.append(unit_id - first)
            class_id = class_of.get(unit.normalized)
            if class_id is None:
                class_id = class_of[unit.normalized] = len(self._class_units)
                self._class_units.append((unit_id,))
                self._add_class(unit, class_id, source_index)
            else:
                # Same text as earlier units: it matches them, and exactly what they match, whose
                # sources are already in their group.
                first_of_class = self._class_units[class_id][0]
                self._class_units[class_id] += (unit_id,)
                self._union(self._unit_owner[first_of_class], source_index)
            self._unit_class.append(class_id)
        return source

    def match_output(self, text: str, position: int) -> list[int]:
        """Record which indexed units this output reuses; returns their unit ids (ascending)."""
        core = self._core
        if core is not None:
            # the core tokenizes the texts of the tokenizer's ASCII path itself
            reused = core.match_text(text)
            if reused is None:
                # the others: from the cache's tokens (informative ones as they are, repeats and
                # all: no set needed)
                normalized, informative = self._cache.normalized_informative(text)
                if not normalized:
                    return []
                reused = core.match(informative, normalized)
            sources, owner = self.sources, core.owner
            for unit_id in reused:
                source = sources[owner(unit_id)]
                source.reuse_positions[unit_id - source.unit_ids.start] += (position,)
            return reused
        target = self._cache.tokenized(text)
        if not target.normalized:
            return []
        target_set = target.token_set
        matched: list[int] = []
        units, class_units, thresholds = self._units, self._class_units, self._thresholds
        sources, owner_of, slot_of = self.sources, self._unit_owner, self._unit_slot
        for class_id in self._candidates(target_set):
            threshold = thresholds[class_id]
            unit_ids = class_units[class_id]
            unit = units[unit_ids[0]]
            overlap = len(unit.token_set & target_set)
            # the match rule is `overlap >= threshold`, plus containment for one-token units
            if overlap >= threshold and (threshold > 1 or unit.matches(target, overlap)):
                matched.extend(unit_ids)
                for unit_id in unit_ids:
                    reuse = sources[owner_of[unit_id]].reuse_positions
                    reuse[slot_of[unit_id]] += (position,)
        matched.sort()
        return matched

    def owner(self, unit_id: int) -> EvidenceSource:
        if self._core is not None:
            return self.sources[self._core.owner(unit_id)]
        return self.sources[self._unit_owner[unit_id]]

    def unit(self, unit_id: int) -> Unit:
        if self._core is not None:
            source = self.owner(unit_id)  # (the id checked as list indexing checks it)
            return source.units[unit_id % self._unit_count - source.unit_ids.start]
        return self._units[unit_id]

    def repeated_groups(self) -> list[list[int]]:
        """Groups (≥ 2) of sources sharing a matching unit, by first member; members in order."""
        if self._core is not None:
            return self._core.repeated_groups()
        return sorted(sorted(g) for g in self._members.values() if len(g) > 1)

    # --- internals --------------------------------------------------------------------------

    def _candidates(self, tokens: AbstractSet[str]) -> set[int]:
        """Classes that a text with these tokens may match (a superset, never missing one)."""
        prefix = self._prefix
        candidates: set[int] = set()
        candidates.update(*[prefix[token] for token in tokens if token in prefix])
        return candidates

    def _rarest(self, unit: Unit, keep: int) -> list[str]:
        """The unit's `keep` rarest tokens by current frequency (ties: text order)."""
        unique = dict.fromkeys(unit.tokens)
        if keep >= len(unique):
            return list(unique)
        return sorted(unique, key=self._df.__getitem__)[:keep]

    def _add_class(self, unit: Unit, class_id: int, source: int) -> None:
        tokens = unit.token_set
        threshold = unit.threshold
        self._thresholds.append(threshold)
        df, full = self._df, self._full
        df_get, full_get = df.get, full.get
        posting = (class_id,)
        for token in tokens:
            full[token] = full_get(token, ()) + posting
            df[token] = df_get(token, 0) + 1
        # Any n - t + 1 of its tokens serve both to index it and to find the larger units it
        # can match; the rarest keep both short.
        rarest = self._rarest(unit, len(tokens) - threshold + 1)
        self._link(unit, threshold, source, rarest)
        self._group_classes[self._group[source]].add(class_id)
        prefix = self._prefix
        prefix_get = prefix.get
        for token in rarest:
            prefix[token] = prefix_get(token, ()) + posting

    def _link(self, unit: Unit, threshold: int, source: int, rarest: list[str]) -> None:
        """Join `source` with the sources of the earlier classes matching this one either way."""
        tokens = unit.token_set
        # Earlier classes that can match this unit are candidates of it as a text; so are those
        # it can match, unless their threshold is higher: a larger unit can hold half of this
        # one without its own indexed tokens. Those hold one of any n - t + 1 of this unit's
        # tokens, which `_full` (every class under each of its tokens; this one too, but not
        # of a higher threshold) finds.
        candidates = self._candidates(tokens)
        thresholds = self._thresholds
        if threshold < self._max_threshold:
            # every class under those tokens, lower thresholds too: a few more exact checks
            # below cost less than filtering the postings here
            full = self._full
            candidates.update(*[full[token] for token in rarest])
        else:
            self._max_threshold = threshold
        # Classes already in this source's group need no check (`-` walks the small candidate
        # set; `-=` would walk the whole group).
        group = self._group
        candidates = candidates - self._group_classes[group[source]]
        units, class_units, owner_of = self._units, self._class_units, self._unit_owner
        for other_class in candidates:  # group membership does not depend on the order
            first = class_units[other_class][0]
            other_source = owner_of[first]
            if group[other_source] == group[source]:  # joined during this loop
                continue
            other = units[first]
            other_threshold = thresholds[other_class]
            overlap = len(other.token_set & tokens)
            if (
                overlap >= other_threshold and (other_threshold > 1 or other.matches(unit, overlap))
            ) or (overlap >= threshold and (threshold > 1 or unit.matches(other, overlap))):
                self._union(other_source, source)

    def _union(self, a: int, b: int) -> None:
        group, members, group_classes = self._group, self._members, self._group_classes
        keep, gone = group[a], group[b]
        if keep == gone:
            return
        if len(members[keep]) < len(members[gone]):
            keep, gone = gone, keep
        moved = members.pop(gone)
        for source in moved:
            group[source] = keep
        members[keep].extend(moved)
        group_classes[keep].update(group_classes.pop(gone))


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
        unit_count = len(src.unit_ids)
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
    groups = [
        [analysis.sources[i].evidence_id for i in g] for g in analysis.index.repeated_groups()
    ]
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
