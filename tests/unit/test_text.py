"""`tracehound.text`: the tokenizer, the unit segmenter and the per-trace cache.

The tokenizer has two paths with one answer: the ASCII path (every character ASCII or one of
the typographic characters `_TYPOGRAPHIC`, replaced by spaces) and the NFKC path with the token
regex, which is the rule. The segmenter finds `_UNIT_BOUNDARY`'s splits with `_UNIT_BREAK`.
`TextCache` gives what the module functions give, each text and segment made once.
"""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound.text import (
    _TOKEN,
    _TYPOGRAPHIC,
    _UNIT_BOUNDARY,
    TextCache,
    Unit,
    _normalized_tokens,
    _segment_unit,
    _segments,
    informative_tokens,
    normalize_text,
    split_units,
)

SETTINGS = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TYPOGRAPHIC = "".join(_TYPOGRAPHIC)
assert len(TYPOGRAPHIC) == 8
# Non-ASCII characters that send the tokenizer to NFKC: of the 1-byte kind (é, ß, U+0080, ÿ, the
# soft hyphen, ®, á, °, Á), of the 2-byte kind (İ, Σ, σ, ﬁ, Ａ, a combining accent, other dashes
# and spaces, a lone surrogate, ‰), of the 4-byte kind (emoji, mathematical bold A).
OTHER_NON_ASCII = (
    "\u00e9\u00df\u0080\u00ff\u00ad\u00ae\u00e1\u00b0\u00c1"
    "\u0130\u03a3\u03c3\ufb01\uff21\u0301\u2012\u2015\u2028\u2009\u3000\ud800"
    "\u202d\u202e\u2061\u2030\u0100\u8000\uffff"
    "\U0001f600\U0001d400\U00010061"
)


def regex_tokens(text: str) -> list[str]:
    """The rule: NFKC, lower case, the token regex."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).lower())


# --- tokens ------------------------------------------------------------------------------------

_WEIGHTED = (
    "aAzZmMeE" * 3
    + "0159" * 2
    + ".-" * 6
    + "_ \t\n\r" * 2
    + "!?,;:'\"()[]{}/\\@`~#$%^&*+=<>|\x00\x7f"
    + TYPOGRAPHIC * 2
)
ASCII_PATH_CHAR = st.one_of(
    st.sampled_from(_WEIGHTED), st.sampled_from(_WEIGHTED), st.characters(max_codepoint=0x7F)
)
ASCII_PATH_TEXT = st.text(ASCII_PATH_CHAR, max_size=120)


@SETTINGS
@given(ASCII_PATH_TEXT)
def test_the_ascii_path_gives_the_rule_s_tokens(text: str) -> None:
    tokens = _normalized_tokens(text)
    assert tokens == regex_tokens(text), repr(text)
    assert all(type(t) is str and t.isascii() and t for t in tokens)


@SETTINGS
@given(st.text(max_size=80))
def test_any_text_gives_the_rule_s_tokens(text: str) -> None:
    assert _normalized_tokens(text) == regex_tokens(text), repr(text)


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
        # the NFKC path: letters of other scripts are tokens, compatibility forms fold
        ("caf\u00e9 Stra\u00dfe", ["caf\u00e9", "stra\u00dfe"]),
        ("\ufb01ne \uff21\uff22", ["fine", "ab"]),
        ("\u03a3\u0391\u03a3 it\u2019s", ["\u03c3\u03b1\u03c2", "it", "s"]),
        ("OK \U0001f600 x", ["ok", "x"]),
    ],
)
def test_rules(text: str, tokens: list[str]) -> None:
    assert _normalized_tokens(text) == tokens
    assert regex_tokens(text) == tokens
    assert normalize_text(text) == " ".join(tokens)


@pytest.mark.parametrize("char", list(TYPOGRAPHIC))
def test_each_typographic_character(char: str) -> None:
    assert _normalized_tokens(f"It{char}s{char}OK") == ["it", "s", "ok"]
    assert _normalized_tokens(f"a.{char}b {char}-c d-{char}") == ["a", "b", "c", "d"]
    assert _normalized_tokens(char * 3) == []
    assert _normalized_tokens(f"{char}x") == ["x"]


@pytest.mark.parametrize("char", list(OTHER_NON_ASCII))
def test_other_non_ascii_characters(char: str) -> None:
    for text in (char, f"a{char}", f"{char}a", f"a.{char}b", f"A-B \u2019{char}", f"x {char} y"):
        assert _normalized_tokens(text) == regex_tokens(text), repr(text)


def test_informative_tokens_drop_the_stop_words() -> None:
    text = "The model of the tool is at v1.2, and it was GPT-5."
    assert informative_tokens(text) == ("model", "tool", "v1.2", "gpt-5")
    assert informative_tokens("the of a") == ()


def test_large_text() -> None:
    text = "The quick brown fox\u2019s GPT-5 v1.2 jumps -- over e.g. 3.14 dogs... " * 5000
    tokens = _normalized_tokens(text)
    assert len(tokens) == 12 * 5000 and tokens[:5] == ["the", "quick", "brown", "fox", "s"]
    assert _normalized_tokens(text + "\u00e9") == regex_tokens(text + "\u00e9")


# --- segments ------------------------------------------------------------------------------------

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
PIECE = st.one_of(
    st.sampled_from(
        ["The", "model", "GPT-5", "v1.2", "3.14", "e.g.", "it", "is", "a", "of", "the", "X", "ok"]
    ),
    st.sampled_from([". ", "! ", "? ", ".\n\n", "\n\n", "\r\n\r\n", " \n \n ", "\n", "\r\n"]),
    st.sampled_from([" ", "  ", "\u00a0", "\t", "\x1c", ".\u00a0", "\u2019", "\u201c", "\u2014"]),
    st.sampled_from(OTHER_NON_ASCII),
    SEGMENT_CHAR,
)
PROSE_TEXT = st.lists(PIECE, max_size=60).map("".join)


@SETTINGS
@given(st.one_of(SEGMENT_TEXT, PROSE_TEXT))
def test_segments_are_the_boundary_split(text: str) -> None:
    stripped = text.strip()
    assert _segments(stripped) == _UNIT_BOUNDARY.split(stripped), repr(text)


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
        ("Caf\u00e9. \u00c9t\u00e9", ["Caf\u00e9.", "\u00c9t\u00e9"]),  # a letter of any script
    ],
)
def test_segment_rules(text: str, segments: list[str]) -> None:
    stripped = text.strip()
    assert _segments(stripped) == segments
    assert _UNIT_BOUNDARY.split(stripped) == segments


@pytest.mark.parametrize("char", list(TYPOGRAPHIC))
def test_each_typographic_character_against_the_regex(char: str) -> None:
    """Only U+00A0 is \\s (and str.isspace()); none is [^\\W_]."""
    assert bool(re.fullmatch(r"\s", char)) is char.isspace() is (char == "\u00a0")
    assert not re.fullmatch(r"[^\W_]", char)
    for text in (f"a.{char}b", f"a.{char} b", f"a. {char}b", f"a\n{char}\nb", f"{char}a. b{char}"):
        assert _segments(text.strip()) == _UNIT_BOUNDARY.split(text.strip())


# --- units ---------------------------------------------------------------------------------------


@SETTINGS
@given(PROSE_TEXT)
def test_units_are_the_segments_with_two_informative_tokens(text: str) -> None:
    units = split_units(text)
    expected = [u for u in map(_segment_unit, _segments(text.strip())) if u is not None]
    assert units == expected
    for unit in units:
        assert len(unit.tokens) >= 2 and unit.token_set == frozenset(unit.tokens)
        assert unit.normalized == normalize_text(unit.text)
        assert unit.tokens == informative_tokens(unit.text)
        assert unit.text == unit.text.strip()


def test_a_unit() -> None:
    (unit,) = split_units("  The model\u2019s GPT-5 answer, v1.2.  ")
    assert unit == Unit(
        "The model\u2019s GPT-5 answer, v1.2.",
        "the model s gpt-5 answer v1.2",
        ("model", "s", "gpt-5", "answer", "v1.2"),
        frozenset(("model", "s", "gpt-5", "answer", "v1.2")),
    )
    assert unit.threshold == 3
    assert split_units("The model. Of it.") == []  # one informative token each


@SETTINGS
@given(st.lists(PROSE_TEXT, min_size=1, max_size=5))
def test_the_cache_s_units_are_split_units(texts: list[str]) -> None:
    """Texts of one trace, sharing the cache's segments: its units are `split_units`'."""
    cache = TextCache()
    for text in texts:
        units = cache.units(text)
        assert units == split_units(text)
        assert cache.units(text) is units  # made once


def test_segments_seen_before_are_not_rebuilt() -> None:
    cache = TextCache()
    first = cache.units("Alpha beta gamma. Delta epsilon zeta.")
    again = cache.units("Delta epsilon zeta. Alpha beta gamma.")
    assert again[0] is first[1] and again[1] is first[0]  # the same objects: not rebuilt
    other = "Caf\u00e9 alpha beta. Delta epsilon zeta."
    assert cache.units(other) == split_units(other)
    assert cache.units(other)[1] is first[1]


# --- the cache's tokens --------------------------------------------------------------------------


@SETTINGS
@given(st.one_of(PROSE_TEXT, st.text(max_size=80)))
def test_the_cache_s_tokens_are_the_module_s(text: str) -> None:
    cache = TextCache()
    pair = cache.normalized_informative(text)
    assert pair == (normalize_text(text), informative_tokens(text))
    assert cache.normalized_informative(text) == pair
    assert cache.informative(text) is pair[1]
    tokenized = cache.tokenized(text)
    assert (tokenized.normalized, tokenized.token_set) == (pair[0], frozenset(pair[1]))
    fresh = TextCache()
    assert fresh.informative(text) == pair[1]  # informative first, then the pair
    assert fresh.normalized_informative(text) == pair
