"""`tracehound._speedups.text_units` and `text_tokens` (C) against `tracehound.text` (Python).

`text_units(text, segments, Unit, STOP_WORDS)` answers for the texts of the tokenizer's ASCII
path (every character ASCII or one of the typographic characters `_TYPOGRAPHIC`) exactly what
the Python code of `TextCache.units` does for a text not yet in its `_units`: the stripped text
cut into the segments of `_segments` (a hand-written matcher of `_UNIT_BREAK` in C), each looked
up in the per-trace `segments` dict or else made as `_segment_unit` makes it and entered there,
and the list of the Units. For any other text it answers None and leaves `segments` alone.

`text_tokens(text, stop_words)` answers `(normalize_text(text), informative tokens)` for the
same texts (`TextCache.normalized_informative`), None for the others; with any set of stop
words, whose ASCII str ones it keeps in a table of its own.
"""

from __future__ import annotations

import dataclasses
import gc
import inspect
import pickle
import random
import re
import sys
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest
from _leaks import assert_leak_free, expecting
from _native import pure_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import _accel, _speedups
from tracehound.text import (
    _TYPOGRAPHIC,
    _UNIT_BOUNDARY,
    STOP_WORDS,
    TextCache,
    Unit,
    _normalized_tokens,
    _segment_unit,
    _segments,
    informative_tokens,
    normalize_text,
    split_units,
)

text_units = _speedups.text_units

SETTINGS = settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TYPOGRAPHIC = "".join(_TYPOGRAPHIC)
# (\uff27 and \u8a9e: above 0x7fff, negative as signed 16-bit lanes)
OTHER_NON_ASCII = (
    "\u00e9\u00df\u00b0\u0130\u03a3\u2009\u2028\u3000\u2012\u200b\uff27\u8a9e\U0001f600"
)


def takes_ascii_path(text: str) -> bool:
    return all(c.isascii() or c in TYPOGRAPHIC for c in text)


def python_units(text: str, segments: dict[str, Unit | None]) -> list[Unit]:
    """`TextCache.units` on the Python path, for a text not in `_units`, with `segments`."""
    cache = TextCache()
    cache._segments = segments
    with pure_python():
        return cache.units(text)


def c_segments(text: str) -> list[str]:
    """The segments the C matcher finds, read back from the `segments` dict it fills: every
    segment gets a key, in order of first appearance (a dict keeps insertion order)."""
    segments: dict[str, Unit | None] = {}
    assert text_units(text, segments, Unit, STOP_WORDS) is not None
    return list(segments)


def check(text: str, segments: dict[str, Unit | None] | None = None) -> list[Unit] | None:
    """text_units(text) is None exactly off the ASCII path, else the Python code's Units, with
    the `segments` dict left as the Python code leaves it (starting from `segments`)."""
    start = dict(segments or {})
    mine = dict(start)
    got = text_units(text, mine, Unit, STOP_WORDS)
    if not takes_ascii_path(text):
        assert got is None, f"{text!r}: {got!r}"
        assert mine == start  # untouched
        return None
    assert got is not None, f"no answer for {text!r}"
    reference = dict(start)
    expected = python_units(text, reference)
    assert type(got) is list
    assert got == expected, repr(text)
    assert mine == reference, repr(text)
    assert list(mine) == list(reference)  # the same insertion order
    for unit, other in zip(got, expected, strict=True):
        assert type(unit) is Unit
        assert hash(unit) == hash(other) and repr(unit) == repr(other)
        assert all(type(t) is str for t in unit.tokens)
        assert type(unit.text) is str and type(unit.normalized) is str
        assert type(unit.tokens) is tuple and type(unit.token_set) is frozenset
    return got


# --- segmentation ----------------------------------------------------------------------------

# Weighted to what the regex is about: the sentence ends, line breaks, every kind of space
# (ASCII, \x1c-\x1f, U+00A0), word characters, '_' (\w but not [^\W_]), typographic characters.
_SEGMENT_CHARS = (
    ".!?" * 4
    + "\n" * 6
    + "\r" * 4
    + " " * 4
    + "\t\x0b\x0c\x1c\x1d\x1e\x1f"
    + "\u00a0" * 3
    + "aZx9" * 3
    + "_-,;:'\"()"
    + TYPOGRAPHIC
)
SEGMENT_CHAR = st.one_of(st.sampled_from(_SEGMENT_CHARS), st.characters(max_codepoint=0x7F))
SEGMENT_TEXT = st.text(SEGMENT_CHAR, max_size=60)
# Words and separators: sentences and paragraphs with their tokens, for whole units.
PIECE = st.one_of(
    st.sampled_from(
        ["The", "model", "GPT-5", "v1.2", "3.14", "e.g.", "it", "is", "a", "of", "the", "X", "ok"]
    ),
    st.sampled_from([". ", "! ", "? ", ".\n\n", "\n\n", "\r\n\r\n", " \n \n ", "\n", "\r\n"]),
    st.sampled_from([" ", "  ", "\u00a0", "\t", "\x1c", ".\u00a0", "\u2019", "\u201c", "\u2014"]),
    SEGMENT_CHAR,
)
PROSE_TEXT = st.lists(PIECE, max_size=60).map("".join)


def check_segments(text: str) -> None:
    stripped = text.strip()
    expected = _segments(stripped)
    assert expected == _UNIT_BOUNDARY.split(stripped)  # the reference agrees with the spec
    assert c_segments(text) == list(dict.fromkeys(expected)), repr(text)


@SETTINGS
@given(SEGMENT_TEXT)
def test_segments(text: str) -> None:
    check_segments(text)


@SETTINGS
@given(PROSE_TEXT)
def test_segments_of_prose_like_texts(text: str) -> None:
    check_segments(text)


@pytest.mark.parametrize(
    ("text", "segments"),
    [
        ("", [""]),
        ("   ", [""]),
        ("One. Two", ["One.", "Two"]),
        ("One! Two? Three", ["One!", "Two?", "Three"]),
        ("One.Two", ["One.Two"]),  # no space
        ("One. _two", ["One. _two"]),  # '_' is not [^\W_]
        ("One. \u2019two", ["One. \u2019two"]),  # nor is a typographic quote
        ("One.\u00a0Two", ["One.", "Two"]),  # U+00A0 is \s
        ("One.\x1c\x1fTwo", ["One.", "Two"]),  # so are \x1c-\x1f
        ("One. ", ["One."]),  # stripped: nothing after
        ("One.\nTwo", ["One.", "Two"]),
        ("One\nTwo", ["One\nTwo"]),  # a single line break
        ("One\n\nTwo", ["One", "Two"]),
        ("One \n \t \n  Two", ["One ", "Two"]),
        ("One\r\n\r\nTwo", ["One", "Two"]),
        ("One\r\rTwo", ["One\r\rTwo"]),  # no '\n'
        ("One\n\r\rTwo", ["One\n\r\rTwo"]),
        ("One\r\n\rTwo", ["One\r\n\rTwo"]),
        ("One\r\n \nTwo", ["One", "Two"]),
        ("One\n\u00a0\nTwo", ["One", "Two"]),
        ("One.\n\n, two", ["One.", ", two"]),  # the sentence end fails, the paragraph holds
        ("One. \n\nTwo", ["One.", "Two"]),
        ("a\n\n. b", ["a", ".", "b"]),
        ("...  Two", ["...", "Two"]),
        ("?! 1", ["?!", "1"]),
    ],
)
def test_segment_rules(text: str, segments: list[str]) -> None:
    assert _segments(text.strip()) == segments  # the reference agrees
    check_segments(text)


@pytest.mark.parametrize("char", list(TYPOGRAPHIC))
def test_each_typographic_character_against_the_regex(char: str) -> None:
    """Python's own answer: only U+00A0 is \\s (and str.isspace()); none is [^\\W_]."""
    assert bool(re.fullmatch(r"\s", char)) is char.isspace() is (char == "\u00a0")
    assert not re.fullmatch(r"[^\W_]", char)
    for text in (f"a.{char}b", f"a.{char} b", f"a. {char}b", f"a\n{char}\nb", f"{char}a. b{char}"):
        check_segments(text)
        check(text)


def test_space_characters_agree_with_python() -> None:
    spaces = [chr(c) for c in range(128) if re.fullmatch(r"\s", chr(c))] + ["\u00a0"]
    assert spaces == [chr(c) for c in range(128) if chr(c).isspace()] + ["\u00a0"]
    for space in spaces:
        for text in (f"Ab cd.{space}Ef gh", f"Ab cd\n{space}\nEf gh", f"{space}Ab cd{space}"):
            check_segments(text)
            check(text)


# --- whole units -----------------------------------------------------------------------------


@SETTINGS
@given(PROSE_TEXT)
def test_units(text: str) -> None:
    check(text)


@SETTINGS
@given(SEGMENT_TEXT)
def test_units_of_any_ascii_path_text(text: str) -> None:
    check(text)


@SETTINGS
@given(st.lists(PROSE_TEXT, min_size=1, max_size=5))
def test_units_with_a_shared_segments_dict(texts: list[str]) -> None:
    """Texts of one trace: both paths fill a dict each, text after text."""
    mine: dict[str, Unit | None] = {}
    reference: dict[str, Unit | None] = {}
    for text in texts:
        got = text_units(text, mine, Unit, STOP_WORDS)
        assert got == python_units(text, reference)
        assert mine == reference and list(mine) == list(reference)


@SETTINGS
@given(PROSE_TEXT, st.integers(0, 60), st.sampled_from(OTHER_NON_ASCII))
def test_other_texts_are_none(text: str, i: int, char: str) -> None:
    text = text[:i] + char + text[i:]
    segments: dict[str, Unit | None] = {"x": None}
    assert text_units(text, segments, Unit, STOP_WORDS) is None
    assert segments == {"x": None}


@pytest.mark.parametrize("char", list(OTHER_NON_ASCII))
def test_each_other_character_is_none(char: str) -> None:
    for text in (
        char,
        f"One two. {char}",
        f"{char} One two.",
        f"One two.\n\n{char}\n\nx y",
        f"One “two” three four five six seven. {char} eight nine ten eleven twelve",
    ):
        segments: dict[str, Unit | None] = {}
        assert text_units(text, segments, Unit, STOP_WORDS) is None
        assert segments == {}


def test_units_are_real_units() -> None:
    (unit,) = text_units("  The model\u2019s GPT-5 answer, v1.2.  ", {}, Unit, STOP_WORDS)
    expected = Unit(
        "The model\u2019s GPT-5 answer, v1.2.",
        "the model s gpt-5 answer v1.2",
        ("model", "s", "gpt-5", "answer", "v1.2"),
        frozenset(("model", "s", "gpt-5", "answer", "v1.2")),  # as _segment_unit builds it
    )
    assert unit == expected and hash(unit) == hash(expected) and repr(unit) == repr(expected)
    assert unit.threshold == expected.threshold == 3
    assert dataclasses.replace(unit) == expected
    assert dataclasses.replace(unit, text="x") == dataclasses.replace(expected, text="x")
    assert dataclasses.astuple(unit) == dataclasses.astuple(expected)
    assert pickle.loads(pickle.dumps(unit)) == expected
    with pytest.raises(dataclasses.FrozenInstanceError):
        unit.text = "x"  # type: ignore[misc]
    assert unit.matches(expected) and expected.matches(unit)


def test_segments_seen_before_are_not_rebuilt() -> None:
    segments: dict[str, Unit | None] = {}
    first = text_units("Alpha beta gamma. Delta epsilon zeta.", segments, Unit, STOP_WORDS)
    again = text_units("Delta epsilon zeta. Alpha beta gamma.", segments, Unit, STOP_WORDS)
    assert first is not None and again is not None
    assert again[0] is first[1] and again[1] is first[0]  # the same objects: not rebuilt
    assert list(segments) == ["Alpha beta gamma.", "Delta epsilon zeta."]
    # what is in the dict is what comes back, None included (a segment of one informative token)
    marker = Unit("m", "m n", ("m", "n"), frozenset("mn"))
    segments = {"One two.": marker, "Three four.": None}
    got = text_units("One two. Three four. Five six", segments, Unit, STOP_WORDS)
    assert got is not None and got[0] is marker and len(got) == 2
    assert got[1] == _segment_unit("Five six")


def test_prose() -> None:
    """Real agent text (the benchmarks' prose, typographic quotes and dashes, paragraphs)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from _workload import Prose

    rng = random.Random(7)
    prose = Prose(random.Random(1))
    answered = total = 0
    segments: dict[str, Unit | None] = {}
    for _ in range(200):
        text = prose.text(rng.choice((100, 300, 1000, 3000)))
        if rng.random() < 0.3:
            text = text.replace(". ", ".\n\n", 3)
        total += 1
        answered += check(text) is not None
        check(text, segments)  # with the segments of the texts before
        python_units(text, segments)
    assert answered >= 0.9 * total  # the prose is meant to take the ASCII path


def test_large_text() -> None:
    text = "The quick brown fox\u2019s GPT-5 jumps. Over e.g. 3.14 dogs!\n\n" * 3000
    units = check(text)
    assert units is not None and len(units) == 9000  # "e.g. 3.14" ends a sentence too
    assert check(text + "\u00e9") is None


def test_text_cache_takes_the_c_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    class Native:
        def __getattr__(self, name: str) -> object:
            return getattr(_speedups, name)

        @staticmethod
        def text_units(*args: object) -> list[Unit] | None:
            calls.append(args[0])  # type: ignore[arg-type]
            return _speedups.text_units(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_accel, "_in_use", Native())
    cache = TextCache()
    text = "Alpha beta gamma. Delta epsilon zeta."
    units = cache.units(text)
    assert calls == [text] and units == split_units(text)
    assert cache.units(text) is units and calls == [text]  # from _units
    other = "Caf\u00e9 alpha beta. Delta epsilon zeta."
    assert cache.units(other) == split_units(other)  # None from C: the Python path
    assert calls == [text, other]
    assert cache.units(other)[1] is units[1]  # the segment dict is shared by both paths


def test_text_cache_without_the_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "Alpha beta gamma. Delta epsilon zeta."
    native = TextCache().units(text)
    monkeypatch.setattr(_accel, "_in_use", None)
    assert TextCache().units(text) == native == split_units(text)


def test_argument_errors() -> None:
    class Str(str):
        pass

    for bad in (b"text", None, 1, Str("text")):
        with pytest.raises(TypeError, match="must be str"):
            text_units(bad, {}, Unit, STOP_WORDS)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be dict"):
        text_units("a b", [], Unit, STOP_WORDS)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="frozenset"):
        text_units("a b", {}, Unit, list(STOP_WORDS))  # type: ignore[arg-type]

    class New:
        def __new__(cls) -> New:
            return super().__new__(cls)

    for bad_type in (int, str, New, "Unit"):
        with pytest.raises(TypeError, match="unit_type"):
            text_units("a b", {}, bad_type, STOP_WORDS)  # type: ignore[arg-type]

    with pytest.raises(AttributeError):
        _no_slot_unit()
    with pytest.raises(TypeError):
        text_units("a", {}, Unit)  # type: ignore[call-arg]


@dataclasses.dataclass(frozen=True, slots=True)
class _Other:
    text: str


def _no_slot_unit() -> object:
    """A class without the four slots: the first one missing raises, nothing is entered."""
    segments: dict[str, object] = {}
    try:
        return text_units("x y", segments, _Other, STOP_WORDS)  # type: ignore[arg-type]
    finally:
        assert segments == {}


def test_documented() -> None:
    assert str(inspect.signature(text_units)) == "(text, segments, unit_type, stop_words, /)"
    assert "TextCache.units" in (text_units.__doc__ or "")
    assert "None" in (text_units.__doc__ or "")


# --- no leaks --------------------------------------------------------------------------------

_TEXT = (
    "The model\u2019s answer \u2014 \u201cGPT-5 scored 3.14 on v1.2\u201d \u2013 was checked. "
    "E.g. against the tool\u2019s output! A, b and c?\n\n  Then\u00a0a new paragraph.\r\n\r\nx"
)
_ASCII = _TEXT.translate({ord(c): " " for c in TYPOGRAPHIC})  # the 1-byte kind
_LONG = _TEXT * 40  # more segments than the C code keeps on its stack
_NONE = _TEXT + " caf\u00e9"
_WIDE = _TEXT + "\U0001f600"
_SEEN: dict[str, Unit | None] = {}
text_units(_LONG, _SEEN, Unit, STOP_WORDS)


def test_leak_inputs_take_the_intended_paths() -> None:
    assert check(_TEXT) is not None and check(_ASCII) is not None
    assert len(_SEEN) > 5 and len(_segments(_LONG)) > 64  # 64: the pairs on the stack
    assert text_units(_NONE, {}, Unit, STOP_WORDS) is None
    assert text_units(_WIDE, {}, Unit, STOP_WORDS) is None


@pytest.mark.parametrize(
    ("call", "n"),
    [
        pytest.param(lambda: text_units(_TEXT, {}, Unit, STOP_WORDS), 20_000, id="units"),
        pytest.param(lambda: text_units(_ASCII, {}, Unit, STOP_WORDS), 20_000, id="units-ascii"),
        pytest.param(lambda: text_units(_LONG, {}, Unit, STOP_WORDS), 1_000, id="units-long"),
        pytest.param(lambda: text_units(_LONG, _SEEN, Unit, STOP_WORDS), 5_000, id="seen"),
        pytest.param(lambda: text_units(_NONE, {}, Unit, STOP_WORDS), 20_000, id="none"),
        pytest.param(lambda: text_units(_WIDE, {}, Unit, STOP_WORDS), 20_000, id="none-wide"),
        pytest.param(lambda: text_units("", {}, Unit, STOP_WORDS), 20_000, id="empty"),
        pytest.param(
            expecting(lambda: text_units("x y", {}, _Other, STOP_WORDS), AttributeError),
            20_000,
            id="attribute-error",
        ),
        pytest.param(
            expecting(lambda: text_units(b"x", {}, Unit, STOP_WORDS), TypeError),  # type: ignore[arg-type]
            20_000,
            id="type-error",
        ),
    ],
)
def test_no_leaks(call: Callable[[], object], n: int) -> None:
    assert_leak_free(call, [_TEXT, _ASCII, _LONG, _NONE, _WIDE, Unit, STOP_WORDS], n)


# --- text_tokens -----------------------------------------------------------------------------

text_tokens = _speedups.text_tokens


def python_tokens(
    text: str, stop_words: AbstractSet[str] = STOP_WORDS
) -> tuple[str, tuple[str, ...]]:
    """(normalize_text(text), informative tokens) as the Python code makes them."""
    tokens = _normalized_tokens(text)
    return " ".join(tokens), tuple(t for t in tokens if t not in stop_words)


def check_tokens(text: str, stop_words: AbstractSet[str] = STOP_WORDS) -> None:
    got = text_tokens(text, stop_words)
    if not takes_ascii_path(text):
        assert got is None, f"{text!r}: {got!r}"
        return
    with pure_python():
        expected = python_tokens(text, stop_words)
    assert got == expected, repr(text)
    assert type(got) is tuple and type(got[0]) is str and type(got[1]) is tuple
    if stop_words is STOP_WORDS:
        assert got == (normalize_text(text), informative_tokens(text))


@SETTINGS
@given(PROSE_TEXT)
def test_tokens(text: str) -> None:
    check_tokens(text)


@SETTINGS
@given(SEGMENT_TEXT)
def test_tokens_of_any_ascii_path_text(text: str) -> None:
    check_tokens(text)


@SETTINGS
@given(PROSE_TEXT, st.integers(0, 60), st.sampled_from(OTHER_NON_ASCII))
def test_tokens_of_other_texts_are_none(text: str, i: int, char: str) -> None:
    check_tokens(text[:i] + char + text[i:])


class _Word(str):
    """A str subclass: equal to the str of its characters, so the set lookup must decide."""

    __slots__ = ()


# Stop-word sets of every shape: the C code keeps its own table of the ASCII str ones, unless
# the set holds another type (which might equal a token) or more words than that table holds.
STOP_SETS = [
    STOP_WORDS,
    set(STOP_WORDS),
    frozenset(),
    frozenset({"model", "gpt-5", "3.14", "x", ""}),
    frozenset({"caf\u00e9", "the", "stra\u00dfe"}),  # non-ASCII words are never tokens
    frozenset({*STOP_WORDS, _Word("model"), 7}),
    frozenset({*STOP_WORDS, 3.14}),
    frozenset(f"w{i}" for i in range(200)) | {"model", "ok", "e.g"},
    frozenset({"th", "the", "them", "t", "theta", "then"}),  # one first character, many lengths
]


@pytest.mark.parametrize("stop_words", STOP_SETS, ids=range(len(STOP_SETS)))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(PIECE, st.sampled_from(["w7", "w199", "theta", "them", "Them"])), max_size=40
    ).map("".join)
)
def test_tokens_with_other_stop_words(stop_words: AbstractSet[str], text: str) -> None:
    check_tokens(text, stop_words)


def test_tokens_of_prose_and_large_text() -> None:
    rng = random.Random(3)
    words = ["The", "model", "GPT-5", "of", "a", "is", "3.14", "e.g.", "\u2019s", "x"]
    for _ in range(200):
        check_tokens(" ".join(rng.choice(words) for _ in range(rng.randrange(400))))
    check_tokens("The quick brown fox\u2019s GPT-5 jumps. Over e.g. 3.14 dogs!\n\n" * 3000)
    assert text_tokens("", STOP_WORDS) == ("", ())
    assert text_tokens("the of a", STOP_WORDS) == ("the of a", ())


def test_text_cache_takes_the_c_tokens_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    class Native:
        def __getattr__(self, name: str) -> object:
            return getattr(_speedups, name)

        @staticmethod
        def text_tokens(*args: object) -> tuple[str, tuple[str, ...]] | None:
            calls.append(args[0])  # type: ignore[arg-type]
            return _speedups.text_tokens(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_accel, "_in_use", Native())
    cache = TextCache()
    text = "The model answered: GPT-5 is at v1.2."
    pair = cache.normalized_informative(text)
    assert calls == [text] and pair == (normalize_text(text), informative_tokens(text))
    assert cache.normalized_informative(text) == pair and calls == [text]  # cached
    assert cache.informative(text) is pair[1] and calls == [text]
    tokenized = cache.tokenized(text)
    assert (tokenized.normalized, tokenized.token_set) == (pair[0], frozenset(pair[1]))
    other = "Caf\u00e9 au lait, the model."
    assert cache.informative(other) == informative_tokens(other)  # None from C: Python path
    assert calls == [text, other]
    assert cache.normalized_informative(other) == (normalize_text(other), informative_tokens(other))


def test_text_cache_tokens_without_the_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = ["The model answered: GPT-5 is at v1.2.", "Caf\u00e9 au lait, the model.", ""]
    native = [TextCache().normalized_informative(t) for t in texts]
    monkeypatch.setattr(_accel, "_in_use", None)
    for text, pair in zip(texts, native, strict=True):
        cache = TextCache()
        assert cache.informative(text) == pair[1]  # informative first, then the pair
        assert cache.normalized_informative(text) == pair
        assert pair == (normalize_text(text), informative_tokens(text))


def test_tokens_argument_errors() -> None:
    class Str(str):
        pass

    for bad in (b"text", None, 1, Str("text")):
        with pytest.raises(TypeError, match="must be str"):
            text_tokens(bad, STOP_WORDS)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="frozenset"):
        text_tokens("a b", list(STOP_WORDS))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        text_tokens("a b")  # type: ignore[call-arg]


def test_tokens_documented() -> None:
    assert str(inspect.signature(text_tokens)) == "(text, stop_words, /)"
    assert "None" in (text_tokens.__doc__ or "")


class _Unequal(str):
    """Compares by raising: a set lookup of an equal-hash token runs this code."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        raise ValueError("no")

    __hash__ = str.__hash__


_RAISING = frozenset({_Unequal("model")})


def test_tokens_lookup_errors_propagate() -> None:
    with pytest.raises(ValueError, match="no"):
        text_tokens("the model", _RAISING)


@pytest.mark.parametrize(
    ("call", "n"),
    [
        pytest.param(lambda: text_tokens(_TEXT, STOP_WORDS), 20_000, id="tokens"),
        pytest.param(lambda: text_tokens(_LONG, STOP_WORDS), 1_000, id="tokens-long"),
        pytest.param(lambda: text_tokens(_NONE, STOP_WORDS), 20_000, id="tokens-none"),
        pytest.param(lambda: text_tokens(_TEXT, STOP_SETS[5]), 20_000, id="tokens-set-lookup"),
        pytest.param(lambda: text_tokens("", STOP_WORDS), 20_000, id="tokens-empty"),
        pytest.param(
            expecting(lambda: text_tokens("the model", _RAISING), ValueError),
            20_000,
            id="tokens-lookup-error",
        ),
        pytest.param(
            expecting(lambda: text_tokens(b"x", STOP_WORDS), TypeError),  # type: ignore[arg-type]
            20_000,
            id="tokens-type-error",
        ),
    ],
)
def test_tokens_no_leaks(call: Callable[[], object], n: int) -> None:
    assert_leak_free(call, [_TEXT, _LONG, _NONE, STOP_WORDS, *STOP_SETS, _RAISING], n)


def test_unit_containers_are_not_scanned_by_the_garbage_collector() -> None:
    """A Unit's token tuple and set hold strings only: untracked, as CPython untracks such
    tuples itself (the Unit stays tracked: a dataclass instance could be given anything)."""
    (unit,) = text_units("Alpha beta gamma.", {}, Unit, STOP_WORDS) or []
    assert gc.is_tracked(unit)
    assert not gc.is_tracked(unit.tokens) and not gc.is_tracked(unit.token_set)
    assert unit == _segment_unit("Alpha beta gamma.")
    pair = text_tokens("alpha beta", STOP_WORDS)
    assert pair is not None and not gc.is_tracked(pair[1])
