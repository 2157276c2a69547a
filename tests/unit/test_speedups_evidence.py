"""`tracehound._speedups.EvidenceCore` (C) behind `EvidenceIndex` against the pure-Python index.

An `EvidenceIndex` made while the accelerator is in use keeps its state in an `EvidenceCore`;
made without it, in Python. Fed the same evidence and targets in the same order, both must give
the same `match_output` answers, the same `EvidenceSource` fields (unit ids, reuse positions),
`owner` / `unit` answers, repeated-evidence groups and `summarize` report. The texts come from a
small vocabulary so that what the index's shortcuts are about happens often: shared tokens,
one-token units (matched by containment), identical units (classes), long units with high
thresholds, repeated groups; then real prose. Both sides run with the accelerator switched on or
off as a whole (`_accel._in_use`), whatever TRACEHOUND_PURE_PYTHON says.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _leaks import assert_leak_free, expecting
from _native import native_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from helpers import feed_engine
from tracehound import _accel, _speedups
from tracehound.cli import select_evaluators
from tracehound.engine import Engine, EngineConfig
from tracehound.evaluators._evidence_index import (
    EvidenceIndex,
    EvidenceSource,
    Item,
    analyze_items,
    summarize,
)
from tracehound.spans import iter_proto_spans
from tracehound.text import STOP_WORDS, TextCache, Unit

EvidenceCore = _speedups.EvidenceCore

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@contextmanager
def accelerator(on: bool) -> Iterator[None]:
    with native_module(_speedups if on else None):
        yield


# --- running both ------------------------------------------------------------------------------

Step = tuple[str, str]  # (role, text): "evidence" | "target" | "other"


def astuple(source: EvidenceSource) -> tuple[Any, ...]:
    """Every field that compares, lists copied (`dataclasses.astuple` would turn the units into
    tuples too), and the units (made by the C core when first asked for)."""
    values = [getattr(source, f.name) for f in fields(source) if f.compare]
    values.insert(6, source.units)  # where they were a field, as the tests below read them
    return tuple(list(v) if isinstance(v, list) else v for v in values)


def run(steps: list[Step], *, native: bool) -> dict[str, Any]:
    """Everything observable of an index fed `steps`, with the accelerator on or off."""
    with accelerator(native):
        index = EvidenceIndex(TextCache())
        assert (index._core is not None) is native
        answers: list[Any] = []  # after each step: its answer, and every source as it is then
        for position, (role, text) in enumerate(steps):
            if role == "evidence":
                item = Item(key=f"k{position}", role=role, text=text, tool=f"t{position % 3}")
                answers.append(astuple(index.add_evidence(item, position, f"e{position}")))
            elif role == "target":
                answers.append(index.match_output(text, position))
            answers.append([astuple(s) for s in index.sources])
        n_units = sum(len(s.units) for s in index.sources)
        ids = [*range(n_units), *range(-n_units, 0)]
        return {
            "answers": answers,
            "sources": [astuple(s) for s in index.sources],
            "owners": [astuple(index.owner(u)) for u in ids],
            "units": [index.unit(u) for u in ids],
            "groups": index.repeated_groups(),
        }


def analysis(steps: list[Step], *, native: bool) -> tuple[dict[int, list[int]], dict[str, Any]]:
    """`analyze_items` and `summarize` over `steps`, the last target being the final answer."""
    with accelerator(native):
        items = [
            Item(key=f"s{p}", role=role, text=text, source=f"src{p % 2}", source_type="retrieval")
            for p, (role, text) in enumerate(steps)
        ]
        targets = [p for p, (role, _) in enumerate(steps) if role == "target"]
        result = analyze_items(items, targets[-1] if targets else None, TextCache())
        assert (result.index._core is not None) is native
        return result.reusing_positions, summarize(result, [item.key for item in items])


def check(steps: list[Step]) -> dict[str, Any]:
    python = run(steps, native=False)
    assert run(steps, native=True) == python
    assert analysis(steps, native=True) == analysis(steps, native=False)
    return python


# --- hypothesis --------------------------------------------------------------------------------

# Informative words, a few frequent; stop words (not tokens of a unit's set); separators that
# cut units or not.
WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "GPT-5", "3.14"]
COMMON = ["alpha", "beta", "alpha"]
STOP = ["the", "of", "and", "is", "a", "to"]
UNIT_BREAKS = [". ", "! ", "? ", "\n\n"]
IN_UNIT = [" ", ", ", " - ", "; "]


@st.composite
def sentences(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:  # one unique informative token, repeated: a one-token unit
        word = draw(st.sampled_from(WORDS))
        n = draw(st.integers(2, 3))
        fill = draw(st.lists(st.sampled_from(STOP), min_size=n - 1, max_size=n - 1))
        return " ".join(x for pair in zip([word] * n, [*fill, ""], strict=True) for x in pair)
    if kind == 1:  # long: up to every word, a high threshold
        return " ".join(draw(st.lists(st.sampled_from(WORDS + STOP), min_size=8, max_size=24)))
    words = draw(st.lists(st.sampled_from(WORDS + COMMON + STOP), min_size=1, max_size=7))
    seps = draw(st.lists(st.sampled_from(IN_UNIT), min_size=len(words), max_size=len(words)))
    return "".join(w + s for w, s in zip(words, seps, strict=True)).strip(" ,-;")


@st.composite
def step_lists(draw: st.DrawFn) -> list[Step]:
    steps: list[Step] = []
    pool: list[str] = []  # sentences seen so far, to repeat (identical units, reuse)
    for _ in range(draw(st.integers(1, 16))):
        role = draw(st.sampled_from(["evidence", "evidence", "target", "target", "other"]))
        parts = []
        for _ in range(draw(st.integers(0, 5))):
            if pool and draw(st.integers(0, 2)) == 0:
                parts.append(draw(st.sampled_from(pool)))
            else:
                parts.append(draw(sentences()))
                pool.append(parts[-1])
        if role == "target" and draw(st.booleans()):  # words of a sentence, with others around
            parts.append(" ".join(draw(st.lists(st.sampled_from(WORDS + STOP), max_size=6))))
        breaks = draw(st.lists(st.sampled_from(UNIT_BREAKS), min_size=len(parts)))
        steps.append((role, "".join(p + b for p, b in zip(parts, breaks, strict=False))))
    return steps


@SETTINGS
@given(step_lists())
def test_same_as_the_python_index(steps: list[Step]) -> None:
    check(steps)


@SETTINGS
@given(st.data())
def test_same_groups_of_few_sources(data: st.DataObject) -> None:
    """Few one-sentence sources, often made of a few words of an earlier one (a smaller unit
    that a larger one holds half of, or more): each link between two decides the groups (with
    many sources, the small vocabulary joins nearly everything)."""
    texts = [data.draw(sentences())]
    for _ in range(data.draw(st.integers(1, 3))):
        if data.draw(st.booleans()):
            words = data.draw(st.sampled_from(texts)).split() or ["alpha"]
            texts.append(" ".join(data.draw(st.lists(st.sampled_from(words), max_size=4))))
        else:
            texts.append(data.draw(sentences()))
    check([("evidence", text) for text in texts])


# Words off the tokenizer's ASCII path: texts holding one take the Python code's tokens (NFKC),
# which the core interns with the others ("ＧＰＴ-5" is "gpt-5" there, as "GPT-5" is here).
NON_ASCII = ["café", "Straße", "ＧＰＴ-5", "naïve", "Σigma", "ﬁle", "😀"]


@SETTINGS
@given(
    step_lists(),
    st.lists(st.tuples(st.integers(0, 15), st.sampled_from(NON_ASCII)), max_size=4),
)
def test_same_with_texts_off_the_ascii_path(
    steps: list[Step], changes: list[tuple[int, str]]
) -> None:
    steps = list(steps)
    for index, word in changes:
        if index < len(steps):
            role, text = steps[index]
            steps[index] = (role, f"{text} {word} alpha. {word} beta gamma")
    check(steps)


def test_the_generated_cases_cover_the_rules() -> None:
    """The strategy makes what the shortcuts are about (else the parity test proves little)."""
    seen = {"one-token unit": 0, "containment": 0, "class": 0, "group": 0, "threshold>=4": 0}

    @settings(max_examples=200, deadline=None, database=None, derandomize=True)
    @given(step_lists())
    def count(steps: list[Step]) -> None:
        result = check(steps)
        units = [u for s in result["sources"] for u in s[6]]
        seen["one-token unit"] += any(len(u.token_set) == 1 for u in units)
        seen["class"] += len({u.normalized for u in units}) < len(units)
        seen["group"] += bool(result["groups"])
        seen["threshold>=4"] += any(len(u.token_set) >= 7 for u in units)
        seen["containment"] += any(
            len(unit.token_set) == 1 and positions
            for source in result["sources"]
            for unit, positions in zip(source[6], source[8], strict=True)
        )

    count()
    assert all(n >= 10 for n in seen.values()), seen


# --- particular cases --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "steps",
    [
        # one-token units: matched by containment only
        [("evidence", "Alpha the alpha."), ("target", "so alpha the alpha it is")],
        [("evidence", "Alpha the alpha."), ("target", "alpha and alpha")],
        [("evidence", "Alpha the alpha."), ("target", "alphas the alpha")],
        [("evidence", "alpha alpha"), ("target", "alpha alpha")],
        [("evidence", "alpha alpha"), ("target", "beta alpha alpha")],
        [("evidence", "alpha alpha"), ("target", "alpha alpha gamma")],
        [("evidence", "alpha alpha"), ("target", "alpha")],
        # one-token units in groups, either way round
        [("evidence", "alpha alpha"), ("evidence", "beta alpha alpha gamma")],
        [("evidence", "beta alpha alpha gamma"), ("evidence", "alpha alpha")],
        [("evidence", "alpha alpha"), ("evidence", "alpha of alpha")],
        [("evidence", "alpha alpha"), ("evidence", "alpha alpha")],
        # identical units (one class), in one source and in several
        [("evidence", "alpha beta. alpha beta."), ("target", "alpha beta")],
        [("evidence", "alpha beta"), ("evidence", "x. alpha beta"), ("target", "alpha beta")],
        # a larger unit holding half of a smaller one, not under its indexed tokens (the n - t + 1
        # first ones here, all being as rare): found in the full index
        [("evidence", "alpha beta gamma delta eps zeta eta theta"), ("evidence", "eta theta")],
        [("evidence", "alpha beta gamma delta eps zeta eta theta"), ("target", "eta theta")],
        [
            ("evidence", "alpha beta gamma delta eps zeta eta theta"),
            ("evidence", "alpha beta x"),
            ("evidence", "gamma delta"),
            ("target", "alpha beta gamma delta"),
        ],
        # chains joining groups
        [
            ("evidence", "alpha beta"),
            ("evidence", "gamma delta"),
            ("evidence", "alpha beta gamma delta"),
            ("evidence", "eps zeta"),
            ("evidence", "zeta eps eta"),
        ],
        # nothing to match
        [("target", "alpha beta"), ("evidence", ""), ("target", ""), ("target", "the of")],
    ],
)
def test_cases(steps: list[Step]) -> None:
    check(steps)


def test_known_answers() -> None:
    """A few answers spelled out (both sides), so that a shared mistake shows too."""
    result = check(
        [
            ("evidence", "Alpha the alpha. Beta gamma delta."),  # units 0, 1
            ("evidence", "beta gamma! Alpha beta."),  # units 2, 3
            ("target", "so alpha the alpha, beta"),
            ("target", "gamma delta eps"),
            ("evidence", "Alpha the alpha."),  # unit 4, a class with unit 0
            ("target", "alpha the alpha"),
        ]
    )
    # "alpha the alpha" is in the first text (containment), "alpha beta" shares 2 of 2 tokens;
    # "beta gamma delta" 2 of 3 with the second, "beta gamma" only 1 of 2
    answers = result["answers"][::2]  # without the sources after each step
    assert answers[2:4] == [[0, 3], [1]]
    assert answers[5] == [0, 4]
    # "beta gamma" matches "beta gamma delta"; the third source repeats a unit of the first
    assert result["groups"] == [[0, 1, 2]]
    assert [s[8] for s in result["sources"]] == [[(2, 5), (3,)], [(), (2,)], [(5,)]]


def test_many_sources() -> None:
    """Past every initial size of the C arrays (tokens, classes, units, sources, postings)."""
    rng = random.Random(3)
    words = [f"w{i}" for i in range(400)]
    steps: list[Step] = []
    for _ in range(300):
        text = ". ".join(
            " ".join(rng.choice(words[: rng.choice((20, 400))]) for _ in range(rng.randint(1, 12)))
            for _ in range(rng.randint(1, 4))
        )
        steps.append((rng.choice(("evidence", "evidence", "target")), text))
    result = check(steps)
    answers = result["answers"][::2]
    assert result["groups"] and any(answers[p] for p, s in enumerate(steps) if s[0] == "target")


def test_prose() -> None:
    """Real text: the benchmarks' prose, targets quoting and paraphrasing earlier evidence."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from _workload import Prose

    rng = random.Random(5)
    prose = Prose(random.Random(2))
    for _ in range(20):
        steps: list[Step] = []
        evidence: list[str] = []
        for _ in range(rng.randint(2, 12)):
            text = prose.text(rng.choice((200, 600, 1500)))
            evidence.append(text)
            steps.append(("evidence", text))
            sentences = [s for e in evidence for s in e.split(". ")]
            quoted = rng.sample(sentences, min(len(sentences), rng.randint(0, 3)))
            words = " ".join(rng.choice(sentences).split()[::2])  # every other word
            steps.append(("target", " ".join([*quoted, words, prose.text(200)])))
        if rng.random() < 0.5:
            steps.append(("evidence", rng.choice(evidence)))  # the same document again
        check(steps)


def test_engine_results() -> None:
    """The engine on the benchmarks' agent traces: the same per-span and per-trace results with
    the core as with every other C path but the core."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import sidecar_throughput

    batches = sidecar_throughput.workload("genai", 1024, 11)
    others = SimpleNamespace(**{k: v for k, v in vars(_speedups).items() if k != "EvidenceCore"})

    def results(native: Any) -> list[str]:
        saved = _accel._in_use
        _accel._in_use = native
        try:
            engine = Engine(select_evaluators(None), EngineConfig())
            out: list[str] = []
            for raw in batches:
                outcomes, finalized = feed_engine(
                    engine,
                    iter_proto_spans(ExportTraceServiceRequest.FromString(raw), [], raw=raw),
                )
                for outcome in outcomes:
                    out.extend(repr(r) for r in outcome.results)
                for trace in finalized:
                    out.extend(repr(r) for r in trace.results)
            return out
        finally:
            _accel._in_use = saved

    with_core = results(_speedups)
    assert with_core == results(others)
    assert sum("evidence.reuse" in r and "reuses_evidence" in r for r in with_core) > 100
    assert sum("repeated_groups" in r for r in with_core) > 10


# --- the C path is taken, and its own rules ----------------------------------------------------


def test_the_c_path_is_used_when_the_accelerator_is() -> None:
    with accelerator(True):
        assert type(EvidenceIndex()._core) is EvidenceCore
    with accelerator(False):
        assert EvidenceIndex()._core is None
    # the engine's evaluator: whatever the environment chose
    index = EvidenceIndex()
    assert (type(index._core) is EvidenceCore) is (_accel._in_use is not None)


def test_the_implementation_is_chosen_when_the_index_is_made() -> None:
    steps: list[Step] = [("evidence", "alpha beta"), ("target", "alpha beta gamma")]
    with accelerator(True):
        index = EvidenceIndex()
    with accelerator(False):
        source = index.add_evidence(Item("k", "evidence", steps[0][1]), 0, "e")
        assert index.match_output(steps[1][1], 1) == [0]
    assert type(index._core) is EvidenceCore
    assert source.reuse_positions == [(1,)]


def test_reuse_positions_are_read_from_the_source_at_each_match() -> None:
    """The evaluator replaces the lists (`_reuse_index`), then matches the declared answer."""
    for native in (True, False):
        with accelerator(native):
            index = EvidenceIndex()
            source = index.add_evidence(Item("k", "evidence", "alpha beta. gamma delta"), 0, "e")
            assert index.match_output("alpha beta", 1) == [0]
            source.reuse_positions = [(7,), ()]
            assert index.match_output("alpha beta gamma delta", 2) == [0, 1]
            assert source.reuse_positions == [(7, 2), (2,)]

            class Positions(list):  # type: ignore[type-arg]
                """Not a list of tuples: updated through its own methods."""

            source.reuse_positions = Positions([[9], ()])
            index.match_output("gamma delta alpha beta", 3)
            assert source.reuse_positions == [[9, 3], (3,)]
            assert type(source.reuse_positions) is Positions


def test_the_core_reads_the_texts_of_the_ascii_path_itself() -> None:
    """Sources and outputs of the ASCII path never reach the cache; a source's units are made
    when asked for, equal to the cache's; texts off the path take the cache's."""
    with accelerator(True):
        cache = TextCache()
        index = EvidenceIndex(cache)
        source = index.add_evidence(
            Item("k", "evidence", "Alpha beta. Gamma – delta “eps”."), 0, "e"
        )
        assert source._units is None and source.unit_ids == range(2)
        assert index.match_output("alpha beta gamma delta eps", 1) == [0, 1]
        assert not cache._units and not cache._normalized and not cache._segments
        assert source.units == TextCache().units("Alpha beta. Gamma – delta “eps”.")
        assert source.units is source.units and index.unit(1) is source.units[1]
        other = index.add_evidence(Item("k", "evidence", "Café beta. Alpha beta!"), 2, "f")
        assert other._units is not None and other.unit_ids == range(2, 4)
        assert list(cache._units) == ["Café beta. Alpha beta!"]
        assert index.match_output("café beta, naïve", 3) == [2]
        assert list(cache._normalized) == ["café beta, naïve"]
        assert index.repeated_groups() == [[0, 1]]


def fields_of(units: list[Unit]) -> list[tuple[str, str, tuple[str, ...]]]:
    """What `EvidenceCore.units` gives of these units (their token sets: `frozenset(tokens)`)."""
    assert all(unit.token_set == frozenset(unit.tokens) for unit in units)
    return [(unit.text, unit.normalized, unit.tokens) for unit in units]


def test_fresh_cores_copy_the_stop_words() -> None:
    """`fresh` cores take their stop words from the core they come from (interned there once),
    or, if that one holds units, intern them themselves: the same units either way."""
    template = EvidenceCore(STOP_WORDS)
    used = EvidenceCore(STOP_WORDS)
    used.add_text(0, "Alpha and beta.")
    expected = TextCache().units("The alpha of the beta. Is it the gamma delta? A the.")
    for core in (template.fresh(), template.fresh(), used.fresh(), used.fresh().fresh()):
        assert core.add_text(0, "The alpha of the beta. Is it the gamma delta? A the.") == 2
        assert core.units(0, 2) == fields_of(expected)
        assert core.match_text("the beta, the alpha") == [0]
    assert template.units(0, 0) == [] and used.units(0, 1)[0][2] == ("alpha", "beta")


def test_a_core_without_units_matches_nothing() -> None:
    core = EvidenceCore(STOP_WORDS)
    assert core.match_text("alpha beta") == []
    assert core.match_text("café beta") == []
    assert core.add_text(0, "alpha") == 0  # a source without units
    assert core.match_text("alpha alpha") == []
    assert core.units(0, 0) == []


def test_arguments_are_checked() -> None:
    core = EvidenceCore(STOP_WORDS)
    assert core.add_text(0, "naïve text here") is None  # off the path: nothing changed
    assert core.add_text(0, "alpha beta") == 1
    with pytest.raises(ValueError, match="goes back"):
        core.add_text(0, "gamma delta")
    with pytest.raises(TypeError, match="str"):
        core.add_text(1, b"alpha beta")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str"):
        core.match_text(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        core.match_text()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="str"):
        core.match((1,), "alpha")  # type: ignore[arg-type]
    for start, stop in ((1, 0), (-1, 1), (0, 2)):
        with pytest.raises(IndexError):
            core.units(start, stop)
    for args in ((), (set(STOP_WORDS),), (frozenset({1}),), (STOP_WORDS, Unit)):
        with pytest.raises(TypeError):
            EvidenceCore(*args)  # type: ignore[arg-type]


def pairs(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """What `EvidenceIndex` gives `add_units` of a text's units."""
    return [(unit.normalized, unit.tokens) for unit in TextCache().units(text)]


def test_units_must_be_pairs() -> None:
    core = EvidenceCore(STOP_WORDS)
    with pytest.raises(TypeError, match="tokens must be a tuple"):
        core.add_units(0, [("c d", ["c", "d"])])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="normalized must be str"):
        core.add_units(1, [(None, ("c", "d"))])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="str"):
        core.add_units(2, [("c d", ("c", 1))])  # type: ignore[list-item]
    unit = Unit("c d", "c d", ("c", "d"), frozenset("cd"))
    for source, bad in enumerate((object(), ("c d",), ("c d", ("c", "d"), 1), unit), 3):
        with pytest.raises(TypeError, match=r"\(normalized, tokens\) tuple"):
            core.add_units(source, [bad])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="list or tuple"):
        core.add_units(7, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="goes back"):
        core.add_units(0, [])
    with pytest.raises(TypeError, match="str"):
        core.match({"a"}, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        core.match({"a"})  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        EvidenceCore(1)  # type: ignore[arg-type]
    assert core.repeated_groups() == []


def test_units_are_given_for_add_texts_only() -> None:
    """The fields of add_text's units come from the core; add_units' units are the caller's."""
    core = EvidenceCore(STOP_WORDS)
    assert core.add_units(0, pairs("Alpha beta. Gamma delta.")) == 0
    assert core.add_text(1, "Eps zeta. Alpha beta.") == 2
    assert core.units(2, 4) == fields_of(TextCache().units("Eps zeta. Alpha beta."))
    for start, stop in ((0, 1), (1, 3)):
        with pytest.raises(ValueError, match="add_units"):
            core.units(start, stop)
    assert core.match_text("alpha beta") == [0, 3]
    assert [core.owner(u) for u in range(4)] == [0, 0, 1, 1]


def test_a_call_from_inside_a_call_is_refused() -> None:
    """Python code run during a call (here the iterator of a text's tokens, read as a match
    looks them up) cannot change the core under it."""
    core = EvidenceCore(STOP_WORDS)
    core.add_units(0, pairs("alpha beta"))
    inner: list[BaseException] = []

    def tokens() -> Iterator[str]:
        yield "alpha"
        try:
            core.add_units(1, pairs("gamma delta"))
        except RuntimeError as error:
            inner.append(error)
            raise
        yield "beta"

    with pytest.raises(RuntimeError, match="re-entered"):
        core.match(tokens(), "alpha beta")
    assert len(inner) == 1
    assert core.match(frozenset(("alpha", "beta")), "alpha beta") == [0]
    assert core.match_text("beta alpha") == [0]
    assert core.add_units(1, pairs("gamma delta")) == 1


def test_owner_and_unit_index_as_lists_do() -> None:
    with accelerator(True):
        index = EvidenceIndex()
    index.add_evidence(Item("k", "evidence", "alpha beta. gamma delta"), 0, "e")
    index.add_evidence(Item("k", "evidence", "eps zeta"), 1, "f")
    assert [index.owner(u).evidence_id for u in (0, 1, 2, -1, -3)] == ["e", "e", "f", "f", "e"]
    assert index.unit(-1).normalized == "eps zeta"
    for bad in (3, -4, 2**70):
        with pytest.raises(IndexError):
            index.unit(bad)
        with pytest.raises(IndexError):
            index.owner(bad)
    with pytest.raises(TypeError):
        index.unit("0")  # type: ignore[arg-type]


def test_documented() -> None:
    for name in (
        "add_text",
        "add_units",
        "match_text",
        "match",
        "owner",
        "units",
        "repeated_groups",
        "fresh",
    ):
        assert getattr(EvidenceCore, name).__doc__, name
    assert "EvidenceIndex" in (EvidenceCore.__doc__ or "")


# --- no leaks ----------------------------------------------------------------------------------

_CACHE = TextCache()
_UNITS = [
    [(unit.normalized, unit.tokens) for unit in _CACHE.units(text)]
    for text in (
        "Alpha the alpha. Beta gamma delta eps zeta eta theta.",
        "beta gamma! Alpha beta. Gamma delta eps zeta.",
        "Alpha the alpha. w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13.",
    )
]
_TARGETS = [
    _CACHE.tokenized(t) for t in ("so alpha the alpha, beta gamma", "gamma delta eps w1 w3")
]


def _whole_index() -> None:
    """A core's life: made, fed, matched, asked, dropped."""
    core = EvidenceCore(STOP_WORDS)
    for i, units in enumerate(_UNITS):
        core.add_units(2 * i, units)
    for target in _TARGETS:
        core.match(target.token_set, target.normalized)
    core.repeated_groups()
    core.owner(0)
    core.owner(-1)


_TEXTS = [
    "Alpha the alpha. Beta gamma delta eps zeta eta theta.",
    "beta gamma! Alpha beta. Gamma delta eps zeta.",
    "Alpha the alpha. w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 – “w14”.",
]


def _whole_text_index() -> None:
    """A core's life with texts of the ASCII path: made, fed, matched, asked, dropped."""
    core = EvidenceCore(STOP_WORDS)
    for i, text in enumerate(_TEXTS):
        core.add_text(2 * i, text)
    core.add_text(7, "naïve")
    core.match_text("so alpha the alpha, beta gamma")
    core.match_text("gamma delta eps w1 w3")
    core.match_text("naïve")
    core.units(0, 4)
    core.owner(-1)
    core.repeated_groups()


_CORE = EvidenceCore(STOP_WORDS)
for _i, _units in enumerate(_UNITS):
    _CORE.add_units(_i, _units)


def _match() -> None:
    _CORE.match(_TARGETS[0].token_set, _TARGETS[0].normalized)


def _match_tuple() -> None:
    """`EvidenceIndex.match_output`'s way: the informative tokens as a tuple, repeats included."""
    normalized, informative = _CACHE.normalized_informative("so alpha the alpha, beta gamma")
    _CORE.match(informative, normalized)


_TEMPLATE = EvidenceCore(STOP_WORDS)
_TEXT_CORE = _TEMPLATE.fresh()
for _i, _text in enumerate(_TEXTS):
    _TEXT_CORE.add_text(_i, _text)


def _match_text() -> None:
    _TEXT_CORE.match_text("so alpha the alpha, beta gamma")


def test_a_tuple_with_repeats_matches_as_the_set_does() -> None:
    """`match` takes the informative tokens as a tuple (`TextCache.normalized_informative`):
    repeated tokens mark what they mark once, so the answer is that of the token set."""
    matched = 0
    for target in ("so alpha the alpha, beta gamma", "gamma delta eps w1 w3", "alpha alpha"):
        normalized, informative = _CACHE.normalized_informative(target)
        answers = []
        for tokens in (informative, frozenset(informative), informative * 2, list(informative)):
            core = EvidenceCore(STOP_WORDS)
            for i, units in enumerate(_UNITS):
                core.add_units(i, units)
            answers.append(core.match(tokens, normalized))
        assert all(answer == answers[0] for answer in answers), target
        matched += bool(answers[0])
    assert matched >= 2


def test_leak_inputs_take_the_intended_paths() -> None:
    assert _CORE.match(_TARGETS[0].token_set, _TARGETS[0].normalized)
    normalized, informative = _CACHE.normalized_informative("so alpha the alpha, beta gamma")
    assert _CORE.match(informative, normalized)
    assert any(len(set(tokens)) == 1 for units in _UNITS for _, tokens in units)  # containment
    assert _CORE.repeated_groups()
    assert _TEXT_CORE.match_text("so alpha the alpha, beta gamma")
    assert _TEXT_CORE.units(0, 7) == [
        field for text in _TEXTS for field in fields_of(TextCache().units(text))
    ]


@pytest.mark.parametrize(
    ("call", "n"),
    [
        pytest.param(_whole_index, 10_000, id="whole-index"),
        pytest.param(_whole_text_index, 10_000, id="whole-text-index"),
        pytest.param(_match_text, 50_000, id="match-text"),
        pytest.param(lambda: _CORE.fresh().add_text(0, _TEXTS[1]), 10_000, id="fresh-of-used"),
        pytest.param(
            lambda: _TEMPLATE.fresh().add_text(0, _TEXTS[1]), 10_000, id="fresh-of-template"
        ),
        pytest.param(lambda: _TEXT_CORE.units(0, 5), 20_000, id="units"),
        pytest.param(_match, 50_000, id="match"),
        pytest.param(_match_tuple, 50_000, id="match-tuple"),
        pytest.param(_CORE.repeated_groups, 100_000, id="groups"),
        pytest.param(lambda: _CORE.owner(-1), 100_000, id="owner"),
        pytest.param(expecting(lambda: _CORE.owner(99), IndexError), 100_000, id="index-error"),
        pytest.param(
            expecting(lambda: _CORE.units(0, 2), ValueError), 100_000, id="units-of-add-units"
        ),
        pytest.param(
            expecting(
                lambda: EvidenceCore(STOP_WORDS).add_units(0, [_UNITS[0][0], 1]),  # type: ignore[list-item]
                TypeError,
            ),
            20_000,
            id="bad-unit",
        ),
        pytest.param(
            expecting(lambda: _CORE.match(["alpha"], 1), TypeError),  # type: ignore[arg-type]
            100_000,
            id="bad-text",
        ),
    ],
)
def test_no_leaks(call: Callable[[], object], n: int) -> None:
    assert_leak_free(call, [*_UNITS, *_TARGETS, _CORE, _TEXT_CORE, _TEMPLATE], n)
