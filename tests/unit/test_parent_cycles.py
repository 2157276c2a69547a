"""`steps._break_parent_cycles` (with its shortcut for chains of at most two links) against the
full walk over every chain of parent links."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tracehound import steps


def reference(parent_of: dict[str, str], rank: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    done: set[str] = set()
    for start in list(parent_of):
        path: list[str] = []
        on_path: set[str] = set()
        current = start
        while current and current not in done and current not in on_path:
            path.append(current)
            on_path.add(current)
            current = parent_of.get(current, "")
        if current in on_path:
            cycle = path[path.index(current) :]
            cut = min(cycle, key=lambda sid: rank.get(sid, (1, 0, sid)))
            parent_of[cut] = ""
            at = cycle.index(cut)
            cycle = cycle[at:] + cycle[:at]
            problems.append(
                f"parent ids form a cycle ({' -> '.join(cycle)}); span {cut} taken as a root"
            )
        done.update(path)
    return sorted(problems)


IDS = [f"s{i}" for i in range(7)]


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.sampled_from(IDS), st.sampled_from(["", "x", *IDS]), min_size=1))
def test_same_cuts_and_problems(parents: dict[str, str]) -> None:
    got_parents, want_parents = dict(parents), dict(parents)
    got = steps._break_parent_cycles(got_parents, [])
    want = reference(want_parents, {})
    assert got == want
    assert got_parents == want_parents
