"""`tracehound._speedups.configure`: the C takes its constant from Python.

The typographic separators of the tokenizer's ASCII path (`tracehound.text._TYPOGRAPHIC`) are
Python's; `tracehound._accel` gives them to the C at first use. The kernels that tokenize texts
themselves (`EvidenceCore`, which also cuts them into units, and `embed_texts_sum`) read them.
Here the C is given other tables (then Python's again) and must follow them exactly as the
Python reference does with the same table; tables the C cannot hold are refused with a clear
error, changing nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from _leaks import assert_leak_free, expecting
from _native import native_module, pure_python
from hypothesis import given, settings
from hypothesis import strategies as st

from tracehound import _accel, _speedups, text
from tracehound.evaluators._evidence_index import EvidenceIndex, Item
from tracehound.text import STOP_WORDS, TextCache, Unit

SRC = Path(__file__).resolve().parents[2] / "src"


def configure_python_table() -> None:
    _speedups.configure("".join(text._TYPOGRAPHIC))


Tables = Callable[[str], None]


@pytest.fixture
def tables() -> Iterator[Tables]:
    """Sets a test table on both sides: `tables(chars)` configures the C and makes
    `text._TYPOGRAPHIC` the same characters; Python's table is given back afterwards."""
    saved = text._TYPOGRAPHIC

    def use(chars: str) -> None:
        _speedups.configure(chars)
        text._TYPOGRAPHIC = tuple(chars)

    _accel.loaded()
    try:
        yield use
    finally:
        text._TYPOGRAPHIC = saved
        configure_python_table()


def python_units(value: str) -> list[tuple[str, str, tuple[str, ...]]]:
    with pure_python():
        return [(u.text, u.normalized, u.tokens) for u in TextCache().units(value)]


def core_units(value: str) -> list[tuple[str, str, tuple[str, ...]]] | None:
    """The units EvidenceCore cuts `value` into, or None (off the ASCII path)."""
    core = _speedups.EvidenceCore(STOP_WORDS)
    n = core.add_text(0, value)
    return None if n is None else core.units(0, n)


def embedded(value: str) -> bool:
    """Does embed_texts_sum take `value` (on the ASCII path)?"""
    out = np.zeros(64)
    return _speedups.embed_texts_sum([value], out, 48, False, None, STOP_WORDS) is True


# --- the facade configures the module ---------------------------------------------------------


def test_the_facade_gives_the_constant_at_first_use() -> None:
    # a fresh interpreter: before the first kernel call the table is empty (the text kernels
    # decline every non-ASCII text, ASCII ones are answered)
    script = """
from tracehound import _speedups, _accel, text
core = _speedups.EvidenceCore(text.STOP_WORDS)
assert core.add_text(0, "It\u2019s alpha beta.") is None
assert core.add_text(0, "Plain alpha beta.") == 1
assert _accel.kernel("EvidenceCore") is _speedups.EvidenceCore
assert _speedups.EvidenceCore(text.STOP_WORDS).add_text(0, "It\u2019s alpha beta.") == 1
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop(_accel.PURE_PYTHON_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_table_is_python_s() -> None:
    _accel.loaded()
    for char in text._TYPOGRAPHIC:
        value = f"Alpha{char}beta gamma."
        assert core_units(value) == python_units(value)
        assert embedded(value)


# --- the typographic table ----------------------------------------------------------------------


def test_the_kernels_separate_on_a_character_they_are_given(tables: Tables) -> None:
    value = "GPT-5\u2022scored 3.14\u2022today."
    assert core_units(value) is None and not embedded(value)  # not in Python's table
    tables("\u2022")
    assert core_units(value) == python_units(value)
    assert python_units(value)[0][2] == ("gpt-5", "scored", "3.14", "today")
    assert embedded(value)


def test_a_character_taken_out_of_the_table_is_declined(tables: Tables) -> None:
    value = "it\u2019s the model\u2014again"
    assert core_units(value) == python_units(value) and embedded(value)
    tables("\u2014")
    assert core_units(value) is None and not embedded(value)
    assert core_units("the model\u2014again") == python_units("the model\u2014again")


def test_a_space_in_the_table_is_a_space_to_the_units(tables: Tables) -> None:
    # U+2009 (thin space) is \s to `_UNIT_BREAK` and str.strip(): a sentence ends before it
    value = "\u2009Alpha beta gamma.\u2009Delta epsilon zeta.\u2009\u2009"
    tables("\u2009\u2022")
    units = core_units(value)
    assert units is not None and units == python_units(value)
    assert [u[0] for u in units] == ["Alpha beta gamma.", "Delta epsilon zeta."]
    # a separator that is no space does not end a sentence
    value = "Alpha beta gamma.\u2022Delta epsilon zeta."
    units = core_units(value)
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
        _speedups.configure(chars)
        text._TYPOGRAPHIC = tuple(chars)
        on_path = all(c < "\x80" or c in chars for c in value)
        units = core_units(value)
        if on_path:
            assert units == python_units(value)
            assert embedded(value)
        else:
            assert units is None and not embedded(value)
    finally:
        text._TYPOGRAPHIC = saved
        configure_python_table()


# --- tables the C cannot hold ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chars", "error", "says"),
    [
        pytest.param("x", ValueError, r"U\+0078 is ASCII", id="ascii"),
        pytest.param("\U0001f600", ValueError, "outside the BMP", id="non-bmp"),
        pytest.param("\u00e9", ValueError, "letter or digit", id="letter"),
        pytest.param("\u0660", ValueError, "letter or digit", id="digit"),
        pytest.param("\u2022" * 33, ValueError, "at most 32", id="too-many-chars"),
        pytest.param(["\u2022"], TypeError, "must be a str", id="chars-not-str"),
    ],
)
def test_a_table_that_does_not_fit_is_refused_changing_nothing(
    chars: object, error: type[Exception], says: str
) -> None:
    _accel.loaded()
    with pytest.raises(error, match=says):
        _speedups.configure(chars)  # type: ignore[arg-type]
    assert core_units("It\u2019s alpha beta.") == python_units("It\u2019s alpha beta.")


def test_the_largest_table_fits() -> None:
    chars = "".join(chr(0x2190 + i) for i in range(32))  # arrows
    try:
        _speedups.configure(chars)
        assert core_units("Alpha\u219fbeta\u2190gamma.") == [
            ("Alpha\u219fbeta\u2190gamma.", "alpha beta gamma", ("alpha", "beta", "gamma"))
        ]
    finally:
        configure_python_table()


def test_configure_takes_one_argument() -> None:
    with pytest.raises(TypeError, match="1 argument"):
        _speedups.configure()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="1 argument"):
        _speedups.configure("", ())  # type: ignore[call-arg]


def test_configure_again_and_again_no_leaks() -> None:
    chars = "".join(text._TYPOGRAPHIC)
    try:
        assert_leak_free(lambda: _speedups.configure(chars), [chars], n=20_000)
        assert_leak_free(
            expecting(lambda: _speedups.configure(chars + "\u00e9"), ValueError),
            [chars],
            n=20_000,
        )
    finally:
        configure_python_table()
