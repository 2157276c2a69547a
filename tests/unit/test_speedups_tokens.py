"""`tracehound._speedups.ascii_tokens` (C) against `tracehound.text._normalized_tokens`.

`ascii_tokens(text)` answers for exactly the texts the Python code's ASCII path takes: every
character ASCII or one of the typographic characters `_TYPOGRAPHIC` (replaced by spaces there).
Its answer must then be `_normalized_tokens(text)`: the same strings in the same order. For any
other text (a non-ASCII character other than those, which sends the Python code to NFKC) the
answer is None, never a wrong list.
"""

from __future__ import annotations

import inspect
import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from _leaks import assert_leak_free, expecting
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import _speedups
from tracehound.text import _TYPOGRAPHIC, _normalized_tokens, _segments

ascii_tokens = _speedups.ascii_tokens

SETTINGS = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TYPOGRAPHIC = "".join(_TYPOGRAPHIC)
assert len(TYPOGRAPHIC) == 8
# Non-ASCII characters that send the Python code to NFKC (so the answer must be None). Of the
# 1-byte kind: é, ß, U+0080, ÿ, and those whose low 7 bits are '-', '.', 'a', '0', 'A' (U+00AD
# soft hyphen, ®, á, °, Á); of the 2-byte kind: İ, Σ, σ, ﬁ, Ａ, a combining accent, other dashes
# and spaces, a lone surrogate, and those whose low byte is '-', '.', 'a', '0' (U+202D, U+202E,
# U+2061, ‰) or that are 0x100, 0x8000, 0xffff; of the 4-byte kind: emoji, mathematical bold A.
OTHER_NON_ASCII = (
    "\u00e9\u00df\u0080\u00ff\u00ad\u00ae\u00e1\u00b0\u00c1"
    "\u0130\u03a3\u03c3\ufb01\uff21\u0301\u2012\u2015\u2028\u2009\u3000\ud800"
    "\u202d\u202e\u2061\u2030\u0100\u8000\uffff"
    "\U0001f600\U0001d400\U00010061"
)


def takes_ascii_path(text: str) -> bool:
    """Does `_normalized_tokens` take its ASCII path for `text`?"""
    return all(c.isascii() or c in TYPOGRAPHIC for c in text)


def check(text: str) -> list[str] | None:
    """ascii_tokens(text) is None exactly when the Python code takes its NFKC path, else the
    Python code's tokens, as exact ASCII strs."""
    got = ascii_tokens(text)
    if not takes_ascii_path(text):
        assert got is None, f"{text!r}: {got!r}"
        return None
    assert got is not None, f"no answer for {text!r}"
    assert type(got) is list
    assert got == _normalized_tokens(text), repr(text)
    assert all(type(t) is str and t.isascii() and t for t in got)
    return got


# --- hypothesis ----------------------------------------------------------------------------------

# Weighted towards what the rules are about: letters of both cases and digits, the joiners next
# to them, separators of every sort, the typographic characters.
_WEIGHTED = (
    "aAzZmMeE" * 3
    + "0159" * 2
    + ".-" * 6
    + "_ \t\n\r" * 2
    + "!?,;:'\"()[]{}/\\@`~#$%^&*+=<>|\x00\x7f"
    + TYPOGRAPHIC * 2
)
ASCII_PATH_CHAR = st.one_of(
    st.sampled_from(_WEIGHTED),
    st.sampled_from(_WEIGHTED),
    st.sampled_from(_WEIGHTED),
    st.characters(max_codepoint=0x7F),
)
ANY_CHAR = st.one_of(ASCII_PATH_CHAR, ASCII_PATH_CHAR, st.sampled_from(OTHER_NON_ASCII))
ASCII_PATH_TEXT = st.text(ASCII_PATH_CHAR, max_size=80)
ANY_TEXT = st.text(ANY_CHAR, max_size=80)
# The C code reads 64 characters at a time: texts of a few such words, where a rare character
# lands anywhere in a word.
LONG_ASCII_PATH_TEXT = st.text(ASCII_PATH_CHAR, min_size=60, max_size=300)
LONG_TEXT = st.builds(
    lambda text, i, char: text[:i] + char + text[i:],
    LONG_ASCII_PATH_TEXT,
    st.integers(0, 300),
    st.sampled_from(OTHER_NON_ASCII + TYPOGRAPHIC),
)


@SETTINGS
@given(ANY_TEXT)
def test_any_text(text: str) -> None:
    check(text)


@SETTINGS
@given(ASCII_PATH_TEXT)
def test_ascii_path_texts_are_answered(text: str) -> None:
    assert check(text) is not None


@SETTINGS
@given(LONG_ASCII_PATH_TEXT)
def test_long_ascii_path_texts(text: str) -> None:
    assert check(text) is not None


@SETTINGS
@given(LONG_TEXT)
def test_long_texts_with_a_rare_character(text: str) -> None:
    check(text)


@SETTINGS
@given(st.lists(ASCII_PATH_TEXT, max_size=40), st.sampled_from(OTHER_NON_ASCII))
def test_many_tokens(parts: list[str], other: str) -> None:
    """Texts of more tokens than the C code keeps on its stack (256), then with a character of
    the NFKC path at the end, after all tokens were made."""
    text = " ".join(parts) * 8
    check(text)
    assert check(text + other) is None


# --- each rule -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        # empty and whitespace
        ("", []),
        (" ", []),
        (" \t\n\r\x0b\x0c ", []),
        # token characters, lower-cased
        ("a", ["a"]),
        ("Z", ["z"]),
        ("Hello World", ["hello", "world"]),
        ("MiXeD 2026 CaSe42", ["mixed", "2026", "case42"]),
        # every other ASCII character separates, the bytes next to the ranges included
        ("a/b:c@d[e`f{g", ["a", "b", "c", "d", "e", "f", "g"]),
        ("snake_case", ["snake", "case"]),
        ("x\x00y\x7fz", ["x", "y", "z"]),
        ('it\'s (quoted) "text"!', ["it", "s", "quoted", "text"]),
        # joiners between two token characters stay
        ("GPT-5", ["gpt-5"]),
        ("v1.2", ["v1.2"]),
        ("3.14", ["3.14"]),
        ("1.2.3-rc.1", ["1.2.3-rc.1"]),
        ("e.g.", ["e.g"]),
        ("A.B.C", ["a.b.c"]),
        # other joiners separate
        ("a..b", ["a", "b"]),
        ("a--b", ["a", "b"]),
        ("a.-b", ["a", "b"]),
        ("a-.b", ["a", "b"]),
        ("-x-", ["x"]),
        (".5", ["5"]),
        ("end.", ["end"]),
        ("a_.b", ["a", "b"]),
        ("a._b", ["a", "b"]),
        ("a. b", ["a", "b"]),
        ("a -b", ["a", "b"]),
        (".", []),
        ("-", []),
        ("..--..", []),
        # the typographic characters separate as spaces do
        ("it\u2019s \u201cquoted\u201d \u2018x\u2019", ["it", "s", "quoted", "x"]),
        ("a\u2013b\u2014c\u2026d\u00a0e", ["a", "b", "c", "d", "e"]),
        ("v1.\u2019 x-\u2014", ["v1", "x"]),
        ("\u201c-x.\u201d", ["x"]),
    ],
)
def test_rules(text: str, tokens: list[str]) -> None:
    assert _normalized_tokens(text) == tokens  # the reference agrees with the rule
    assert check(text) == tokens


@pytest.mark.parametrize("char", list(TYPOGRAPHIC))
def test_each_typographic_character(char: str) -> None:
    assert check(f"It{char}s{char}OK") == ["it", "s", "ok"]
    assert check(f"a.{char}b {char}-c d-{char}") == ["a", "b", "c", "d"]
    assert check(char * 3) == []
    assert check(f"{char}x") == ["x"]


@pytest.mark.parametrize("char", list(OTHER_NON_ASCII))
def test_other_non_ascii_is_none(char: str) -> None:
    for text in (char, f"a{char}", f"{char}a", f"a.{char}b", f"A-B \u2019{char}", f"x {char} y"):
        assert ascii_tokens(text) is None, repr(text)


def test_each_kind() -> None:
    # 1-byte kind: ASCII; Latin-1 with U+00A0 (answered) or é (None)
    assert check("Plain ASCII, v1.2!") == ["plain", "ascii", "v1.2"]
    assert max(map(ord, "No\u00a0break")) <= 0xFF
    assert check("No\u00a0break") == ["no", "break"]
    assert check("caf\u00e9") is None
    # 2-byte kind: a typographic quote (answered), or İ (None)
    assert check("It\u2019s GPT-5\u2019s") == ["it", "s", "gpt-5", "s"]
    assert check("\u0130stanbul") is None
    # 4-byte kind: always a character above U+FFFF, so None
    assert check("OK \U0001f600") is None
    assert check("\U0001f600 it\u2019s") is None


@pytest.mark.parametrize(
    "filler",
    ["x" * 260, " " * 260, "ab.cd-ef " * 29, "Ab1 " * 65, "\u2019a" * 130, "a\u00a0" * 130],
)
def test_every_position(filler: str) -> None:
    """Each piece at each position of a long text: at the edges of the 64-character words the C
    code reads (where joiners look at the words next to theirs), in runs that span words."""
    pieces = ["a.b", "a-", ".b", "-", ".", "Z", "x.y-z", "\u2019", "\u00a0", "a\u2014.b", "_"]
    pieces += list(OTHER_NON_ASCII)
    for piece in pieces:
        for i in range(len(filler) + 1):
            check(filler[:i] + piece + filler[i:])


def test_prose() -> None:
    """Real agent text (the benchmarks' prose, with typographic quotes and dashes): 200 texts
    of various sizes and every sentence of them."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from _workload import Prose

    rng = random.Random(7)
    prose = Prose(random.Random(1))
    answered = total = 0
    for _ in range(200):
        text = prose.text(rng.choice((100, 300, 1000, 3000)))
        for piece in [text, *_segments(text)]:
            total += 1
            answered += check(piece) is not None
    assert answered >= 0.9 * total  # the prose is meant to take the ASCII path


def test_large_text() -> None:
    text = "The quick brown fox\u2019s GPT-5 v1.2 jumps -- over e.g. 3.14 dogs... " * 5000
    tokens = check(text)
    assert tokens is not None and len(tokens) == 12 * 5000
    assert check(text + "\u00e9") is None


def test_type_errors() -> None:
    class Str(str):
        pass

    for bad in (b"text", bytearray(b"text"), None, 1, Str("text"), ["text"]):
        with pytest.raises(TypeError, match="must be str"):
            ascii_tokens(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ascii_tokens()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ascii_tokens("a", "b")  # type: ignore[call-arg]


def test_documented() -> None:
    assert str(inspect.signature(ascii_tokens)) == "(text, /)"
    assert "_normalized_tokens" in (ascii_tokens.__doc__ or "")
    assert "None" in (ascii_tokens.__doc__ or "")


# --- no leaks ------------------------------------------------------------------------------------

_TEXT = (
    "The model\u2019s answer \u2014 \u201cGPT-5 scored 3.14 on v1.2\u201d \u2013 was checked, "
    "e.g. against the tool\u2019s output... a, b and c."
)
_ASCII = _TEXT.translate({ord(c): " " for c in TYPOGRAPHIC})  # the 1-byte kind
_LONG = _TEXT * 40  # more tokens than the C code keeps on its stack
_NONE = _TEXT + " caf\u00e9"  # None after making every token
_LONG_NONE = _LONG + "\U0001f600"


def test_leak_inputs_take_the_intended_paths() -> None:
    assert check(_TEXT) is not None
    assert _ASCII.isascii() and check(_ASCII) == ascii_tokens(_TEXT)
    long = check(_LONG)
    assert long is not None and len(long) > 256
    assert ascii_tokens(_NONE) is None
    assert ascii_tokens(_LONG_NONE) is None


@pytest.mark.parametrize(
    ("call", "n"),
    [
        pytest.param(lambda: ascii_tokens(_TEXT), 100_000, id="tokens"),
        pytest.param(lambda: ascii_tokens(_ASCII), 100_000, id="tokens-ascii"),
        pytest.param(lambda: ascii_tokens(_LONG), 10_000, id="tokens-long"),
        pytest.param(lambda: ascii_tokens(_NONE), 100_000, id="none"),
        pytest.param(lambda: ascii_tokens(_LONG_NONE), 10_000, id="none-long"),
        pytest.param(lambda: ascii_tokens(""), 100_000, id="empty"),
        pytest.param(
            expecting(lambda: ascii_tokens(b"x"), TypeError),  # type: ignore[arg-type]
            100_000,
            id="type-error",
        ),
    ],
)
def test_no_leaks(call: Callable[[], object], n: int) -> None:
    singletons = [chr(c) for c in b"abcs"]  # the one-character tokens: CPython's cached strs
    assert_leak_free(call, [_TEXT, _ASCII, _LONG, _NONE, _LONG_NONE, *singletons], n)


# --- the table of tokens made before --------------------------------------------------------------


def test_a_token_made_before_is_the_same_string() -> None:
    first = ascii_tokens("Evidence survives: GPT-5 read v1.2 of the RUNBOOK.")
    again = ascii_tokens("the runbook, v1.2 - read by gpt-5; EVIDENCE survives")
    assert first is not None and again is not None
    by_text = {t: t for t in first}
    shared = [t for t in again if t in by_text]
    assert len(shared) == 7
    assert all(t is by_text[t] for t in shared)  # the same objects, not equal copies
    assert all(type(t) is str and t.isascii() for t in again)


def test_long_tokens_are_not_kept_but_still_right() -> None:
    long = "a" * 24 + "b"  # past the kept length
    kept = "k" * 24
    tokens = ascii_tokens(f"{long.upper()} {kept.upper()} {long} {kept}")
    assert tokens == [long, kept, long, kept]
    assert tokens[0] is not tokens[2] and tokens[1] is tokens[3]


def test_the_table_refills_after_it_is_emptied() -> None:
    # more distinct tokens than the table keeps (it is emptied when half of its 32,768 slots are
    # taken): every answer stays the Python code's, and tokens are shared again after a refill
    words = [f"w{i}x{i % 7}" for i in range(40_000)]
    for start in range(0, len(words), 1000):
        text = " ".join(words[start : start + 1000])
        assert ascii_tokens(text) == _normalized_tokens(text)
    text = " ".join(words[:50])
    first, again = ascii_tokens(text), ascii_tokens(text.upper())
    assert first == again == words[:50]
    assert first is not None and again is not None
    assert all(a is b for a, b in zip(first, again, strict=True))


def test_tokens_that_collide_in_the_table_stay_apart() -> None:
    # many short tokens: some share a slot's hash bits, and each must keep its own characters
    words = [f"{a}{b}{c}" for a in "abcdefgh" for b in "0123456789" for c in "xyz.-"]
    text = " ".join(words)
    expected = _normalized_tokens(text)
    assert ascii_tokens(text) == expected
    assert ascii_tokens(text.upper()) == expected
