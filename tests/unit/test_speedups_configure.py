"""`tracehound._speedups.configure`: the C takes its constants from Python.

The typographic separators of the tokenizer's ASCII path (`tracehound.text._TYPOGRAPHIC`) and the
strings `json_loads` interns (`tracehound.conventions.base.INTERNED_JSON_STRINGS`) are Python's;
`tracehound._accel` gives them to the C at first use. Here the C is given other tables (then
Python's again) and must follow them exactly as the Python reference does with the same table;
tables the C cannot hold are refused with a clear error, changing nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _leaks import assert_leak_free, expecting
from _native import native_module, pure_python
from hypothesis import given, settings
from hypothesis import strategies as st

from tracehound import _accel, _speedups, text
from tracehound.conventions.base import INTERNED_JSON_STRINGS
from tracehound.evaluators._evidence_index import EvidenceIndex, Item
from tracehound.text import STOP_WORDS, TextCache, Unit

SRC = Path(__file__).resolve().parents[2] / "src"


def configure_python_tables() -> None:
    _speedups.configure("".join(text._TYPOGRAPHIC), INTERNED_JSON_STRINGS)


Tables = Callable[..., None]


@pytest.fixture
def tables() -> Iterator[Tables]:
    """Sets a test table on both sides: `tables(chars, strings)` configures the C and makes
    `text._TYPOGRAPHIC` the same characters; Python's tables are given back afterwards."""
    saved = text._TYPOGRAPHIC

    def use(chars: str, strings: tuple[str, ...] = INTERNED_JSON_STRINGS) -> None:
        _speedups.configure(chars, strings)
        text._TYPOGRAPHIC = tuple(chars)

    _accel.loaded()
    try:
        yield use
    finally:
        text._TYPOGRAPHIC = saved
        configure_python_tables()


def python_tokens(value: str) -> list[str]:
    with pure_python():
        return text._normalized_tokens(value)


def python_units(value: str) -> list[Unit]:
    with pure_python():
        return TextCache().units(value)


def python_text_tokens(value: str) -> tuple[str, tuple[str, ...]]:
    with pure_python():
        return TextCache().normalized_informative(value)


# --- the facade configures the module ---------------------------------------------------------


def test_the_facade_gives_the_constants_at_first_use() -> None:
    # a fresh interpreter: before the first kernel call the table is empty (the text kernels
    # decline every non-ASCII text, ASCII ones are answered) and nothing is interned
    script = """
import sys
from tracehound import _speedups, _accel
assert _speedups.ascii_tokens("it\\u2019s") is None
assert _speedups.ascii_tokens("plain ASCII") == ["plain", "ascii"]
(doc,) = _speedups.json_loads('{"role": 1}')
assert next(iter(doc)) is not sys.intern("role")
assert _accel.kernel("ascii_tokens")("it\\u2019s") == ["it", "s"]
(doc,) = _speedups.json_loads('{"role": 1}')
assert next(iter(doc)) is sys.intern("role")
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop(_accel.PURE_PYTHON_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_tables_are_pythons() -> None:
    _accel.loaded()
    for char in text._TYPOGRAPHIC:
        assert _speedups.ascii_tokens(f"a{char}b") == ["a", "b"] == python_tokens(f"a{char}b")
    for key in INTERNED_JSON_STRINGS:
        (doc,) = _speedups.json_loads(json.dumps({key: key}))
        assert next(iter(doc)) is key and doc[key] is key


# --- the typographic table ----------------------------------------------------------------------


def test_the_tokenizer_separates_on_a_character_it_is_given(tables: Tables) -> None:
    value = "GPT-5\u2022scored 3.14\u2022today"
    assert _speedups.ascii_tokens(value) is None  # not in Python's table
    tables("\u2022")
    assert _speedups.ascii_tokens(value) == ["gpt-5", "scored", "3.14", "today"]
    assert _speedups.ascii_tokens(value) == python_tokens(value)
    want = python_text_tokens(value)
    assert _speedups.text_tokens(value, STOP_WORDS) == want


def test_a_character_taken_out_of_the_table_is_declined(tables: Tables) -> None:
    value = "it\u2019s the model\u2014again"
    assert _speedups.ascii_tokens(value) == ["it", "s", "the", "model", "again"]
    tables("\u2014")
    assert _speedups.ascii_tokens(value) is None
    assert _speedups.text_tokens(value, STOP_WORDS) is None
    assert _speedups.text_units(value, {}, Unit, STOP_WORDS) is None
    assert _speedups.ascii_tokens("the model\u2014again") == python_tokens("the model\u2014again")


def test_a_space_in_the_table_is_a_space_to_the_units(tables: Tables) -> None:
    # U+2009 (thin space) is \s to `_UNIT_BREAK` and str.strip(): a sentence ends before it
    value = "\u2009Alpha beta gamma.\u2009Delta epsilon zeta.\u2009\u2009"
    tables("\u2009\u2022")
    units = _speedups.text_units(value, {}, Unit, STOP_WORDS)
    assert units is not None and units == python_units(value)
    assert [u.text for u in units] == ["Alpha beta gamma.", "Delta epsilon zeta."]
    # a separator that is no space does not end a sentence
    value = "Alpha beta gamma.\u2022Delta epsilon zeta."
    units = _speedups.text_units(value, {}, Unit, STOP_WORDS)
    assert units is not None and units == python_units(value)
    assert len(units) == 1


def test_the_evidence_index_reads_texts_with_the_table_it_is_given(tables: Tables) -> None:
    evidence = "Alpha beta.\u2009Gamma\u2022delta eps."
    outputs = ["alpha beta gamma", "gamma\u2022delta\u2009eps", "delta eps"]

    def matches(native: bool) -> tuple[list[list[int]], list[Unit]]:
        with native_module(_speedups if native else None):
            index = EvidenceIndex(TextCache())
            source = index.add_evidence(Item("k", "evidence", evidence), 0, "e")
            read_by_core = source._units is None
            found = [index.match_output(output, i + 1) for i, output in enumerate(outputs)]
            assert read_by_core is native  # the core read the text itself, not the cache
            return found, source.units

    tables("\u2009\u2022")
    assert matches(native=True) == matches(native=False)
    assert matches(native=False)[0] == [[0], [1], [1]]


# non-ASCII BMP characters that are no letter or digit: spaces, punctuation, symbols
_SEPARATORS = "\u00a0\u00b7\u2009\u2013\u2014\u2018\u2019\u201c\u201d\u2022\u2026\u3000\u2028\u00ab"
_OTHERS = "\u00e9\u03a3\u4e2d"  # letters: never typographic, always declined
_ALPHABET = "ab Z9.-!?\n\r\t" + _SEPARATORS + _OTHERS


@settings(max_examples=300, deadline=None)
@given(
    chars=st.text(alphabet=_SEPARATORS, max_size=8),
    value=st.text(alphabet=_ALPHABET, max_size=60),
)
def test_the_kernels_follow_any_table_as_python_does(chars: str, value: str) -> None:
    saved = text._TYPOGRAPHIC
    try:
        _speedups.configure(chars, INTERNED_JSON_STRINGS)
        text._TYPOGRAPHIC = tuple(chars)
        on_path = all(c < "\x80" or c in chars for c in value)
        tokens = _speedups.ascii_tokens(value)
        units = _speedups.text_units(value, {}, Unit, STOP_WORDS)
        made = _speedups.text_tokens(value, STOP_WORDS)
        if on_path:
            assert tokens == python_tokens(value)
            assert units == python_units(value)
            assert made == python_text_tokens(value)
        else:
            assert tokens is None and units is None and made is None
    finally:
        text._TYPOGRAPHIC = saved
        configure_python_tables()


# --- the interned strings ------------------------------------------------------------------------


def test_json_loads_interns_the_strings_it_is_given(tables: Tables) -> None:
    key = sys.intern("".join(["zq", "xv_key"]))  # as configure() interns it
    document = '{"zqxv_key": ["role", {"zqxv_key": "parts"}], "role": "zqxv_key"}'
    (before,) = _speedups.json_loads(document)
    assert next(iter(before)) is not key
    assert list(before)[1] is sys.intern("role")
    tables("".join(text._TYPOGRAPHIC), (key,))
    (after,) = _speedups.json_loads(document)
    assert after == before == json.loads(document)
    assert next(iter(after)) is key is after["zqxv_key"][1].popitem()[0] is after["role"]
    assert list(after)[1] is not sys.intern("role")  # no longer in the table
    assert after["zqxv_key"][0] is not sys.intern("role")
    tables("".join(text._TYPOGRAPHIC), ())
    (none,) = _speedups.json_loads(document)
    assert none == before and next(iter(none)) is not key


# --- tables the C cannot hold ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chars", "strings", "error", "says"),
    [
        pytest.param("x", (), ValueError, r"U\+0078 is ASCII", id="ascii"),
        pytest.param("\U0001f600", (), ValueError, "outside the BMP", id="non-bmp"),
        pytest.param("\u00e9", (), ValueError, "letter or digit", id="letter"),
        pytest.param("\u0660", (), ValueError, "letter or digit", id="digit"),
        pytest.param("\u2022" * 33, (), ValueError, "at most 32", id="too-many-chars"),
        pytest.param(["\u2022"], (), TypeError, "must be a str", id="chars-not-str"),
        pytest.param("", ["role"], TypeError, "must be a tuple", id="strings-not-tuple"),
        pytest.param("", ("role", 1), TypeError, r"message_strings\[1\] must be a str", id="item"),
        pytest.param("", ("r\u00f4le",), ValueError, "not ASCII", id="non-ascii"),
        pytest.param("", ("x" * 33,), ValueError, "at most 32 characters", id="too-long"),
        pytest.param("", tuple(f"k{i:03d}" for i in range(65)), ValueError, "at most 64", id="65"),
        pytest.param(
            "", tuple(f"k{i}" for i in range(8)), ValueError, "at most 7 of each", id="per-length"
        ),
    ],
)
def test_a_table_that_does_not_fit_is_refused_changing_nothing(
    chars: object, strings: object, error: type[Exception], says: str
) -> None:
    _accel.loaded()
    with pytest.raises(error, match=says):
        _speedups.configure(chars, strings)  # type: ignore[arg-type]
    assert _speedups.ascii_tokens("it\u2019s") == ["it", "s"]
    (doc,) = _speedups.json_loads('{"role": 1}')
    assert next(iter(doc)) is sys.intern("role")


def test_the_largest_tables_fit() -> None:
    chars = "".join(chr(0x2190 + i) for i in range(32))  # arrows
    strings = tuple(sys.intern(f"{'k' * n}{i}") for n in range(32) for i in range(2))
    try:
        _speedups.configure(chars, strings)
        assert _speedups.ascii_tokens("a\u219fb\u2190c") == ["a", "b", "c"]
        (doc,) = _speedups.json_loads(json.dumps(dict.fromkeys(strings, 0)))
        assert all(a is b for a, b in zip(doc, strings, strict=True))
    finally:
        configure_python_tables()


def test_configure_takes_two_arguments() -> None:
    with pytest.raises(TypeError, match="2 arguments"):
        _speedups.configure("")  # type: ignore[call-arg]


def test_configure_again_and_again_no_leaks() -> None:
    strings = tuple("".join([s, "_"]) for s in INTERNED_JSON_STRINGS)
    chars = "".join(text._TYPOGRAPHIC)
    try:
        assert_leak_free(lambda: _speedups.configure(chars, strings), [*strings], n=20_000)
        assert_leak_free(
            expecting(lambda: _speedups.configure(chars, (*strings, "\u00e9")), ValueError),
            [*strings],
            n=20_000,
        )
    finally:
        configure_python_tables()
