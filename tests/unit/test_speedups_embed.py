"""`tracehound._speedups.embed_hashed` (C) against `HashingEmbedder.embed_tokens`'s numpy code.

`embed_hashed(token_lists, out, lexical_dim, bigrams, stance_index)` fills `out` with the rows
the numpy code computes, to the bit: the same CRC-32 of each token's UTF-8, the same signed
buckets, the same norms and divisions. For input it does not handle (other sequence types, tokens
that are not exact strs, lone surrogates, odd stance categories) it answers None with `out` all
zeros, and `embed_tokens` runs the numpy code. The reference here is `embed_tokens` with the
accelerator switched off (`_accel._in_use = None`).

`embed_hashed_sum` is the sum of those rows (`np.add.reduce(rows, axis=0)`, which adds them in
order), to the bit, without the rows' matrix: `HashingEmbedder.embed_tokens_sum`.

`embed_texts_sum(texts, out, lexical_dim, bigrams, stance_index, stop_words)` is that sum for
the texts' informative tokens, from the texts themselves (tokenized, stop words dropped and
tokens hashed in C): the bits of `embed_tokens_sum` of `informative_tokens` of each text, which
`drift._features.embed_run` used before; None for texts off the tokenizer's ASCII path.
"""

from __future__ import annotations

import inspect
import random
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from _leaks import assert_leak_free, expecting
from _native import native_module, pure_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import _accel, _speedups
from tracehound.drift import _embed
from tracehound.drift._embed import _N_STANCE, _STANCE_INDEX, HashingEmbedder
from tracehound.drift._features import embed_run
from tracehound.text import (
    _TYPOGRAPHIC,
    STOP_WORDS,
    TextCache,
    informative_tokens,
    normalize_text,
)

embed_hashed = _speedups.embed_hashed
embed_hashed_sum = _speedups.embed_hashed_sum
crc32_utf8 = _speedups.crc32_utf8

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
STANCE_WORDS = sorted(_STANCE_INDEX)
assert len(STANCE_WORDS) > 50 and _N_STANCE == 5


@contextmanager
def stance_index(index: dict[Any, Any]) -> Iterator[None]:
    """Another stance dict for both paths (the numpy code reads the module's global)."""
    saved = _embed._STANCE_INDEX
    _embed._STANCE_INDEX = index
    try:
        yield
    finally:
        _embed._STANCE_INDEX = saved


def reference(embedder: HashingEmbedder, token_lists: Sequence[Sequence[str]]) -> np.ndarray:
    with pure_python():
        return embedder.embed_tokens(token_lists)


def native(
    embedder: HashingEmbedder, token_lists: Sequence[Sequence[str]]
) -> tuple[bool | None, np.ndarray]:
    out = np.full((len(token_lists), embedder.dim), np.nan)  # whatever it holds
    index = _embed._STANCE_INDEX if embedder._stance_weight > 0 else None
    result = embed_hashed(token_lists, out, embedder._lexical_dim, embedder._bigrams, index)
    return result, out


def check(embedder: HashingEmbedder, token_lists: Sequence[Sequence[str]]) -> np.ndarray:
    """The C answer is True and the numpy code's rows, bit for bit; and the C sum of the rows
    is numpy's sum of them, bit for bit."""
    expected = reference(embedder, token_lists)
    result, out = native(embedder, token_lists)
    assert result is True
    assert out.dtype == expected.dtype and out.shape == expected.shape
    assert np.array_equal(out, expected)
    assert out.tobytes() == expected.tobytes()
    total = np.full(embedder.dim, np.nan)  # whatever it holds
    index = _embed._STANCE_INDEX if embedder._stance_weight > 0 else None
    lexical_dim, bigrams = embedder._lexical_dim, embedder._bigrams
    assert embed_hashed_sum(token_lists, total, lexical_dim, bigrams, index) is True
    with pure_python():
        expected_total = embedder.embed_tokens_sum(token_lists)
    assert expected_total.tobytes() == np.add.reduce(expected, axis=0).tobytes()
    assert total.tobytes() == expected_total.tobytes()
    return out


def tiny(lexical_dim: int, stance_weight: float, bigrams: bool) -> HashingEmbedder:
    """An embedder with a lexical block smaller than the constructor allows (many collisions,
    rows that cancel out): both paths take any lexical_dim >= 1."""
    embedder = HashingEmbedder(2 * _N_STANCE, stance_weight=stance_weight, bigrams=bigrams)
    embedder._lexical_dim = lexical_dim
    embedder._dim = lexical_dim + (_N_STANCE if stance_weight > 0 else 0)
    return embedder


# --- CRC-32 --------------------------------------------------------------------------------------


def zlib_crc(text: str) -> int | None:
    try:
        return zlib.crc32(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None


@SETTINGS
@given(st.text())
def test_crc_any_text(text: str) -> None:
    assert crc32_utf8(text) == zlib_crc(text)


@SETTINGS
@given(st.text(st.characters(max_codepoint=0x7F), min_size=0, max_size=80))
def test_crc_ascii(text: str) -> None:
    assert crc32_utf8(text) == zlib.crc32(text.encode("ascii"))


def test_crc_every_length() -> None:
    """Every length to 100 (the 8-byte, 4-byte and byte steps), of each string kind."""
    rng = random.Random(3)
    for alphabet in ("abcXYZ09.-", "ab\u00e9\u00ff", "a\u0100\u20ac\uffff", "a\U0001f600"):
        for n in range(101):
            text = "".join(rng.choice(alphabet) for _ in range(n))
            assert crc32_utf8(text) == zlib.crc32(text.encode("utf-8")), text


def test_crc_code_points() -> None:
    """Each code point alone and next to ASCII: the 1- to 4-byte encodings, surrogates None."""
    points = [*range(0x1000), *range(0x1000, 0x110000, 61), 0x7FF, 0x800, 0xFFFF, 0x10000]
    points += [*range(0xD7F0, 0xE010), 0x10FFFF]
    for cp in points:
        for text in (chr(cp), "ab" + chr(cp) + "cdefghij"):
            assert crc32_utf8(text) == zlib_crc(text), hex(cp)
    assert crc32_utf8("\ud800") is None and crc32_utf8("a\udfff\U0001f600") is None
    assert crc32_utf8("") == 0
    with pytest.raises(TypeError):
        crc32_utf8(b"x")  # type: ignore[arg-type]


# --- parity (hypothesis) -------------------------------------------------------------------------

_VOCAB = ("", "a", "the", "agent", "tool", "x", "gpt-5", "v1.2", "3.14", "caf\u00e9", "\u00e9")
TOKEN = st.one_of(
    st.sampled_from(STANCE_WORDS),
    st.sampled_from(_VOCAB),
    st.text("abcdefghijklmnopqrstuvwxyz0123456789.-", max_size=20),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),  # no lone surrogates
)
ROW = st.lists(TOKEN, max_size=40).flatmap(lambda t: st.sampled_from((t, tuple(t))))
SHORT_ROW = st.lists(st.sampled_from(("maybe", "not", "x", "agent", "error")), max_size=3)
ROWS = st.lists(st.one_of(ROW, SHORT_ROW, st.just(())), max_size=12).flatmap(
    lambda rows: st.sampled_from((rows, tuple(rows)))
)
DIM = st.one_of(st.sampled_from((10, 11, 12, 16, 64, 100, 1024, 5000)), st.integers(10, 300))
EMBEDDER = st.builds(
    HashingEmbedder,
    DIM,
    stance_weight=st.sampled_from((0.0, 0.5, 0.25, 0.9)),
    bigrams=st.booleans(),
)


@SETTINGS
@given(EMBEDDER, ROWS)
def test_parity(embedder: HashingEmbedder, token_lists: Sequence[Sequence[str]]) -> None:
    check(embedder, token_lists)


@SETTINGS
@given(
    st.integers(1, 9), st.sampled_from((0.0, 0.5)), st.booleans(), st.lists(SHORT_ROW, max_size=8)
)
def test_parity_tiny_lexical_blocks(
    lexical_dim: int, stance_weight: float, bigrams: bool, token_lists: list[list[str]]
) -> None:
    check(tiny(lexical_dim, stance_weight, bigrams), token_lists)


@SETTINGS
@given(EMBEDDER, st.lists(st.lists(st.sampled_from(STANCE_WORDS[:6]), max_size=60), max_size=6))
def test_parity_repeated_tokens(embedder: HashingEmbedder, token_lists: list[list[str]]) -> None:
    check(embedder, token_lists)


@pytest.mark.parametrize("stance_weight", [0.0, 0.5])
@pytest.mark.parametrize("bigrams", [True, False])
def test_edge_rows(stance_weight: float, bigrams: bool) -> None:
    embedder = HashingEmbedder(64, stance_weight=stance_weight, bigrams=bigrams)
    for token_lists in (
        [],
        (),
        [()],
        [[]],
        [[""]],
        [["", ""]],
        [["maybe"]],
        [(), ("maybe", "maybe"), (), ("not",), ()],
        [["x"] * 1000],
        [[w] for w in STANCE_WORDS],
        [STANCE_WORDS, STANCE_WORDS[::-1]],
        [["\U0001f600", "\u00e9t\u00e9", "\u65e5\u672c"], ["a" * 1000]],
    ):
        check(embedder, token_lists)


def test_rows_that_cancel_out() -> None:
    """A row whose lexical block sums to zero (two tokens in one bucket with opposite signs)
    has no stance block either, though its tokens are stance words."""
    embedder = tiny(1, 0.5, False)
    rows = [(a, b) for a in STANCE_WORDS for b in STANCE_WORDS]
    expected = reference(embedder, rows)
    zero = [i for i, row in enumerate(expected) if not row.any()]
    assert zero  # both signs occur among the stance words
    assert not check(embedder, rows)[zero].any()


def test_prose() -> None:
    """Real agent text (the benchmarks' prose), tokenized as the engine does, by batch."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from _workload import Prose

    rng = random.Random(11)
    prose = Prose(random.Random(5))
    texts = [prose.text(rng.choice((30, 100, 300, 1000, 3000))) for _ in range(120)]
    token_lists = [informative_tokens(t) for t in texts]
    for embedder in (
        HashingEmbedder(),
        HashingEmbedder(stance_weight=0.0),
        HashingEmbedder(bigrams=False),
        HashingEmbedder(256, stance_weight=0.3),
    ):
        for start in range(0, len(token_lists), 8):
            check(embedder, token_lists[start : start + 8])
        check(embedder, token_lists)


# --- other stance dicts --------------------------------------------------------------------------


class _Key:
    """A key that equals a str (as a dict sees it): the C code must ask the dict."""

    def __init__(self, word: str, on_eq: Callable[[], None] | None = None) -> None:
        self.word = word
        self.on_eq = on_eq

    def __hash__(self) -> int:
        return hash(self.word)

    def __eq__(self, other: object) -> bool:
        if self.on_eq is not None:
            self.on_eq()
        return other == self.word


def _indexes() -> list[dict[Any, Any]]:
    big = dict(_STANCE_INDEX)
    big.update({f"w{i}": i % _N_STANCE for i in range(400)})  # beyond the C table's size
    return [
        {**_STANCE_INDEX, 1: 0},  # a key that is not a str
        {**_STANCE_INDEX, _Key("agent"): 3},  # one that equals a token
        big,
        {**_STANCE_INDEX, "\ud800": 0, "caf\u00e9": 4},  # a key with a lone surrogate
        {},
        {"x": 0},
    ]


@pytest.mark.parametrize(
    "index", _indexes(), ids=["int-key", "eq-key", "big", "odd-keys", "empty", "one"]
)
def test_other_stance_dicts(index: dict[Any, Any]) -> None:
    rng = random.Random(2)
    words = [*STANCE_WORDS, "agent", "x", "caf\u00e9", "w1", "w399", "tool", ""]
    rows = [[rng.choice(words) for _ in range(rng.randrange(30))] for _ in range(40)]
    with stance_index(index):
        for dim in (10, 64, 1024):
            check(HashingEmbedder(dim), rows)


@pytest.mark.parametrize("category", [True, 1.0, -1, _N_STANCE, 2**70, "0", None], ids=repr)
def test_odd_categories_are_left_to_python(category: object) -> None:
    """Categories that are not ints in [0, 5): None (numpy then indexes from the end, or
    raises); not asked when no token has them."""
    embedder = HashingEmbedder(64)
    out = np.full((2, 64), np.nan)
    index = {**_STANCE_INDEX, "odd": category}
    assert embed_hashed([["a"], ["b", "odd"]], out, 59, True, index) is None
    assert not out.any()
    assert embed_hashed([["a"], ["b", "maybe"]], out, 59, True, index) is True
    with stance_index(index):
        check(embedder, [["a"], ["b", "maybe"]])
        try:
            expected = reference(embedder, [["odd", "x"]])
        except (IndexError, TypeError, ValueError):
            return
        assert np.array_equal(embedder.embed_tokens([["odd", "x"]]), expected)


def test_a_dict_that_mutates_the_input() -> None:
    """A key whose __eq__ empties the rows while the C code reads them: no crash, and an answer
    (True or None, out zeros then)."""
    rows: list[list[str]] = []

    def mutate() -> None:
        for row in rows:
            row.clear()
        rows.clear()

    index = {**_STANCE_INDEX, _Key("agent", mutate): 0}
    for _ in range(3):
        rows[:] = [["agent", *STANCE_WORDS] for _ in range(4)]
        out = np.full((4, 64), np.nan)
        result = embed_hashed(rows, out, 59, True, index)
        assert result is None or result is True
        assert not np.isnan(out).any()
        if result is None:
            assert not out.any()


# --- left to Python ------------------------------------------------------------------------------


class _Str(str):
    pass


class _List(list):  # type: ignore[type-arg]
    pass


def _unhandled() -> list[Any]:
    return [
        iter([["a"]]),
        [["a"], ["b", _Str("c")]],
        [["a"], _List(["b"])],
        [["a"], "abc"],  # a str is a sequence of tokens to the numpy code
        [["a", b"b"]],
        [["a", None]],
        [["a", 1]],
        [["a"], ["b", "x\ud800y"]],  # a lone surrogate: encode("utf-8") raises
        [["\udfff"]],
    ]


@pytest.mark.parametrize("token_lists", _unhandled(), ids=repr)
@pytest.mark.parametrize("stance", [True, False])
def test_unhandled_input_is_none(token_lists: Any, stance: bool) -> None:
    out = np.full((1 if isinstance(token_lists, Iterator) else len(token_lists), 64), np.nan)
    index = _STANCE_INDEX if stance else None
    assert embed_hashed(token_lists, out, 59 if stance else 64, True, index) is None
    assert not out.any()
    total = np.full(64, np.nan)
    assert embed_hashed_sum(token_lists, total, 59 if stance else 64, True, index) is None
    assert not total.any()


@pytest.mark.parametrize("token_lists", _unhandled()[1:], ids=repr)
def test_embed_tokens_falls_back(token_lists: Any) -> None:
    """The numpy code's answer, or its exception, with the accelerator on."""
    embedder = HashingEmbedder()
    try:
        expected = reference(embedder, token_lists)
    except (AttributeError, TypeError, UnicodeEncodeError) as exc:
        with pytest.raises(type(exc)):
            embedder.embed_tokens(token_lists)
        return
    got = embedder.embed_tokens(token_lists)
    assert got.tobytes() == expected.tobytes()
    assert embedder.embed_tokens_sum(token_lists).tobytes() == (
        np.add.reduce(expected, axis=0).tobytes()
    )


def test_huge_lexical_block_is_none() -> None:
    assert embed_hashed([], np.empty((0, 2**32)), 2**32, True, None) is None
    assert embed_hashed([], np.empty((0, 2**32 - 1)), 2**32 - 1, True, None) is True


def test_bad_arguments() -> None:
    rows = [["a"]]
    with pytest.raises(TypeError):
        embed_hashed(rows, np.zeros((1, 10)), 5, True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        embed_hashed(rows, [0.0] * 10, 5, True, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        embed_hashed(rows, np.zeros((1, 10), np.float32), 5, True, None)
    with pytest.raises(TypeError):
        embed_hashed(rows, np.zeros(10), 5, True, None)
    with pytest.raises((TypeError, ValueError, BufferError)):
        embed_hashed(rows, np.zeros((3, 20))[:, ::2], 5, True, None)
    read_only = np.zeros((1, 10))
    read_only.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        embed_hashed(rows, read_only, 5, True, None)
    with pytest.raises(ValueError):
        embed_hashed(rows, np.zeros((2, 10)), 5, True, None)
    for lexical_dim in (0, -1, 11):
        with pytest.raises(ValueError):
            embed_hashed(rows, np.zeros((1, 10)), lexical_dim, True, None)
    with pytest.raises(TypeError):
        embed_hashed(rows, np.zeros((1, 10)), "5", True, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        embed_hashed(rows, np.zeros((1, 10)), 5, True, [])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        embed_hashed(rows, np.zeros((1, 10)), 5, True, SimpleNamespace())  # type: ignore[arg-type]


def test_bad_arguments_of_the_sum() -> None:
    rows = [["a"]]
    with pytest.raises(TypeError):
        embed_hashed_sum(rows, np.zeros(10), 5, True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        embed_hashed_sum(rows, np.zeros((1, 10)), 5, True, None)
    with pytest.raises(TypeError):
        embed_hashed_sum(rows, np.zeros(10, np.float32), 5, True, None)
    for lexical_dim in (0, 11):
        with pytest.raises(ValueError):
            embed_hashed_sum(rows, np.zeros(10), lexical_dim, True, None)
    with pytest.raises(TypeError):
        embed_hashed_sum(rows, np.zeros(10), 5, True, [])  # type: ignore[arg-type]
    # any number of rows: one vector (the numpy sum of no rows is zeros)
    out = np.full(10, np.nan)
    assert embed_hashed_sum([], out, 5, True, None) is True and not out.any()
    assert embed_hashed_sum([["a"], ["b"], []], out, 5, True, None) is True


def test_documented() -> None:
    assert str(inspect.signature(embed_hashed)) == (
        "(token_lists, out, lexical_dim, bigrams, stance_index, /)"
    )
    assert "embed_tokens" in (embed_hashed.__doc__ or "")
    assert "None" in (embed_hashed.__doc__ or "")
    assert str(inspect.signature(crc32_utf8)) == "(text, /)"


# --- the embedder uses it ------------------------------------------------------------------------


def test_embed_tokens_uses_the_c_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """`embed_tokens` (and so `embed`) calls `embed_hashed` when `_accel._in_use` has it (set
    here, so that this holds with TRACEHOUND_PURE_PYTHON=1 too), and the numpy code without."""
    calls: list[bool | None] = []

    def counting(*args: Any) -> bool | None:
        result = embed_hashed(*args)
        calls.append(result)
        return result

    sums: list[bool | None] = []

    def summing(*args: Any) -> bool | None:
        result = embed_hashed_sum(*args)
        sums.append(result)
        return result

    monkeypatch.setattr(_speedups, "embed_hashed", counting)
    monkeypatch.setattr(_speedups, "embed_hashed_sum", summing)
    text = "Maybe the tool failed; not sure, retrying the search again."
    rows = [informative_tokens(text), ()]
    for embedder in (HashingEmbedder(), HashingEmbedder(stance_weight=0.0, bigrams=False)):
        expected = reference(embedder, rows)
        monkeypatch.setattr(_accel, "_in_use", _speedups)
        assert embedder.embed_tokens(rows).tobytes() == expected.tobytes()
        assert calls == [True]
        assert embedder.embed([text, ""]).tobytes() == expected.tobytes()
        assert calls == [True, True]
        calls.clear()
        sums.clear()
        total = embedder.embed_tokens_sum(rows)
        assert total.tobytes() == np.add.reduce(expected, axis=0).tobytes()
        assert sums == [True] and calls == []  # one call, no rows made
        # the numpy code when the accelerator is off, or built without embed_hashed
        for off in (None, SimpleNamespace()):
            monkeypatch.setattr(_accel, "_in_use", off)
            assert embedder.embed_tokens(rows).tobytes() == expected.tobytes()
        assert calls == []
    monkeypatch.setattr(_accel, "_in_use", _speedups)
    assert (
        HashingEmbedder().embed_tokens(rows).tobytes()
        == reference(HashingEmbedder(), rows).tobytes()
    )


def test_embed_tokens_after_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """None from the C code (which leaves `out` zeros): the numpy rows."""
    seen: list[object] = []

    def declining(token_lists: object, out: np.ndarray, *args: object) -> None:
        seen.append(token_lists)
        out.fill(0.0)

    monkeypatch.setattr(_accel, "_in_use", SimpleNamespace(embed_hashed=declining))
    rows = [("maybe", "the", "agent"), (), ("not", "again")]
    embedder = HashingEmbedder()
    got = embedder.embed_tokens(rows)
    assert seen == [rows]
    assert got.tobytes() == reference(embedder, rows).tobytes()


# --- no leaks ------------------------------------------------------------------------------------

_ROWS = [
    informative_tokens(
        "Maybe the tool failed: I'm not sure the search returned the right rows, retrying."
    )
    * 4,
    (),
    ("caf\u00e9", "\U0001f600", "gpt-5", "maybe", "maybe"),
    list(STANCE_WORDS),
]
_OUT = np.zeros((len(_ROWS), 1024))
_TOTAL = np.zeros(1024)
_WIDE_TOTAL = np.zeros(5005)  # its scratch row on the heap
_BAD_TOKEN = [["a", "b"], ["c", None]]
_SURROGATE = [["a", "b"], ["c", "\ud800"]]
_GENERIC = {**_STANCE_INDEX, 1: 0}
_ODD = {**_STANCE_INDEX, "maybe": -1}


def test_leak_inputs_take_the_intended_paths() -> None:
    assert embed_hashed(_ROWS, _OUT, 1019, True, _STANCE_INDEX) is True
    assert embed_hashed(_ROWS, _OUT, 1019, True, _GENERIC) is True
    assert embed_hashed(_ROWS, _OUT, 1019, True, _ODD) is None
    assert embed_hashed(_BAD_TOKEN, _OUT[:2], 1019, True, _STANCE_INDEX) is None
    assert embed_hashed(_SURROGATE, _OUT[:2], 1019, True, _STANCE_INDEX) is None


@pytest.mark.parametrize(
    ("call", "n"),
    [
        pytest.param(
            lambda: embed_hashed(_ROWS, _OUT, 1019, True, _STANCE_INDEX), 20_000, id="rows"
        ),
        pytest.param(lambda: embed_hashed(_ROWS, _OUT, 1024, False, None), 20_000, id="plain"),
        pytest.param(lambda: embed_hashed(_ROWS, _OUT, 1019, True, _GENERIC), 10_000, id="generic"),
        pytest.param(lambda: embed_hashed(_ROWS, _OUT, 1019, True, _ODD), 20_000, id="odd"),
        pytest.param(
            lambda: embed_hashed(_BAD_TOKEN, _OUT[:2], 1019, True, _STANCE_INDEX), 50_000, id="bad"
        ),
        pytest.param(
            lambda: embed_hashed(_SURROGATE, _OUT[:2], 1019, True, None), 50_000, id="surrogate"
        ),
        pytest.param(
            lambda: embed_hashed([], np.empty((0, 8192)), 8000, True, None), 50_000, id="wide"
        ),
        pytest.param(
            expecting(lambda: embed_hashed(_ROWS, _OUT[:2], 1019, True, None), ValueError),
            50_000,
            id="value-error",
        ),
        pytest.param(
            lambda: embed_hashed_sum(_ROWS, _TOTAL, 1019, True, _STANCE_INDEX), 20_000, id="sum"
        ),
        pytest.param(
            lambda: embed_hashed_sum(_ROWS, _WIDE_TOTAL, 5000, True, _STANCE_INDEX),
            5_000,
            id="sum-wide",
        ),
        pytest.param(
            lambda: embed_hashed_sum(_BAD_TOKEN, _TOTAL, 1019, True, _STANCE_INDEX),
            50_000,
            id="sum-bad",
        ),
        pytest.param(lambda: crc32_utf8("caf\u00e9 \U0001f600"), 100_000, id="crc"),
        pytest.param(lambda: crc32_utf8("a\ud800"), 100_000, id="crc-none"),
    ],
)
def test_no_leaks(call: Callable[[], object], n: int) -> None:
    tokens = [t for row in _ROWS for t in row]
    watched = [_ROWS, _OUT, _TOTAL, _WIDE_TOTAL, _STANCE_INDEX, _GENERIC, _ODD, *_ROWS, *tokens]
    assert_leak_free(call, watched, n)


# --- embed_texts_sum: straight from the texts ----------------------------------------------------

embed_texts_sum = _speedups.embed_texts_sum


def informative_rows(texts: Sequence[str]) -> list[tuple[str, ...]]:
    """The token lists `embed_run` hands to `embed_tokens_sum` (its TextCache path)."""
    return [informative_tokens(t) if t else () for t in texts]


def on_ascii_path(texts: Sequence[str]) -> bool:
    """Is every text on the tokenizer's ASCII path (ASCII or typographic characters only)?"""
    return all(c.isascii() or c in _TYPOGRAPHIC for t in texts for c in t)


def check_texts(
    embedder: HashingEmbedder, texts: Sequence[str], stop_words: AbstractSet[str] = STOP_WORDS
) -> bool | None:
    """`embed_texts_sum` gives the bits of `embed_tokens_sum` of the texts' informative tokens
    (with the accelerator, as `embed_run` did before, and without it) when every text is on
    the tokenizer's ASCII path; None with `out` all zeros otherwise."""
    if stop_words is STOP_WORDS:
        rows = informative_rows(texts)
    else:  # all the tokens but those of `stop_words`
        rows = [tuple(t for t in normalize_text(t).split() if t not in stop_words) for t in texts]
    with pure_python():
        expected = embedder.embed_tokens_sum(rows)
    with native_module(_speedups):
        assert embedder.embed_tokens_sum(rows).tobytes() == expected.tobytes()
    out = np.full(embedder.dim, np.nan)  # whatever it holds
    index = _embed._STANCE_INDEX if embedder._stance_weight > 0 else None
    lexical_dim, bigrams = embedder._lexical_dim, embedder._bigrams
    result = embed_texts_sum(texts, out, lexical_dim, bigrams, index, stop_words)
    if on_ascii_path(texts):
        assert result is True
        assert np.array_equal(out, expected)
        assert out.tobytes() == expected.tobytes()
    else:
        assert result is None
        assert not out.any()
    return result


def _cased(word: str) -> st.SearchStrategy[str]:
    return st.sampled_from((word, word.upper(), word.capitalize()))


_WORDS = sorted(STOP_WORDS) + STANCE_WORDS + ["agent", "gpt-5", "v1.2", "3.14", "x"]
PIECE = st.one_of(
    st.sampled_from(_WORDS).flatmap(_cased),
    st.text("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789.-", min_size=1, max_size=30),
    st.text("aB3", min_size=9, max_size=200),  # long tokens: the CRC's 8-byte steps and chunks
    st.sampled_from(("\u2019", "\u2018", "\u201c", "\u201d", "\u2013", "\u2014", "\u2026")),
    st.text(st.characters(max_codepoint=0x7F), max_size=10),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=3),  # off the path, mostly
)
SEPARATOR = st.sampled_from((" ", " ", ", ", ". ", "\n", "-", ".", "\u00a0", "\u2014", ""))
TEXT = st.lists(st.tuples(PIECE, SEPARATOR), max_size=40).map(
    lambda parts: "".join(p + s for p, s in parts)
)
ASCII_TEXT = st.lists(
    st.tuples(st.one_of(PIECE.filter(str.isascii), st.sampled_from(_WORDS)), SEPARATOR), max_size=40
).map(lambda parts: "".join(p + s for p, s in parts if s.isascii()))
TEXTS = st.lists(
    st.one_of(ASCII_TEXT, ASCII_TEXT, TEXT, st.just(""), st.just("the a an of")), max_size=8
).flatmap(lambda texts: st.sampled_from((texts, tuple(texts))))


@SETTINGS
@given(EMBEDDER, TEXTS)
def test_texts_parity(embedder: HashingEmbedder, texts: Sequence[str]) -> None:
    check_texts(embedder, texts)


@SETTINGS
@given(EMBEDDER, st.lists(ASCII_TEXT, max_size=6))
def test_texts_parity_ascii(embedder: HashingEmbedder, texts: list[str]) -> None:
    assert check_texts(embedder, texts) is True


@SETTINGS
@given(
    st.integers(1, 40),
    st.sampled_from((0.0, 0.5)),
    st.booleans(),
    st.lists(ASCII_TEXT, max_size=5),
)
def test_texts_parity_tiny_lexical_blocks(
    lexical_dim: int, stance_weight: float, bigrams: bool, texts: list[str]
) -> None:
    assert check_texts(tiny(lexical_dim, stance_weight, bigrams), texts) is True


@SETTINGS
@given(
    EMBEDDER,
    st.lists(ASCII_TEXT, max_size=4),
    st.frozensets(st.one_of(st.sampled_from(_WORDS), st.text(max_size=4)), max_size=40),
)
def test_texts_parity_other_stop_words(
    embedder: HashingEmbedder, texts: list[str], stop_words: frozenset[str]
) -> None:
    assert check_texts(embedder, texts, stop_words) is True
    assert check_texts(embedder, texts, set(stop_words)) is True


@pytest.mark.parametrize("stance_weight", [0.0, 0.5])
@pytest.mark.parametrize("bigrams", [True, False])
def test_texts_edge_cases(stance_weight: float, bigrams: bool) -> None:
    embedder = HashingEmbedder(stance_weight=stance_weight, bigrams=bigrams)
    rng = random.Random(5)
    long_text = " ".join(rng.choice(_WORDS) for _ in range(20_000))
    for texts in (
        [],
        [""],
        ["", "", ""],
        ["the a an and of", "THE. A, An!"],  # stop words only: zero rows
        ["maybe maybe maybe not not error", "x x x x"],  # repeated tokens
        ["Maybe the tool failed \u2014 I\u2019m not sure\u2026 retrying", "\u00a0\u2019"],
        ["supercalifragilistic-expialidocious v1.2.3-rc.4 " * 3, "a" * 1000, "A" * 63 + "."],
        ["..--..", "-a-", ".a.", "a..b", "a--b", "a.-b", "3.14.15", "-.-"],
        [long_text, long_text.upper()],
        ["x" * n for n in range(1, 140)],  # every token length: the CRC's steps
        ["caf\u00e9 maybe", "plain"],  # off the path: None
        ["plain", "\U0001f600"],
    ):
        check_texts(embedder, texts)


@SETTINGS
@given(st.binary(max_size=300))
def test_texts_crc_of_random_bytes(data: bytes) -> None:
    """The token CRC (on the lower-cased characters) is zlib's: one token of the bytes'
    letters and digits, in a lexical block so large that its bucket shows the CRC mod a prime."""
    token = bytes(b for b in data if chr(b).isascii() and chr(b).isalnum()).decode("ascii")
    assert crc32_utf8(data.decode("latin-1")) == zlib.crc32(data.decode("latin-1").encode())
    if not token:
        return
    prime = 1_000_003
    out = np.zeros(prime)
    assert embed_texts_sum([token], out, prime, False, None, frozenset()) is True
    (bucket,) = np.flatnonzero(out)
    assert bucket == zlib.crc32(token.lower().encode()) % prime


def test_texts_stance_dicts_and_stop_sets() -> None:
    """Stance dicts and stop-word sets the tables do not take: None (Python then runs)."""
    texts = ["Maybe the agent is not sure", "again"]
    out = np.full(1024, np.nan)
    for index in ({**_STANCE_INDEX, 1: 0}, {**_STANCE_INDEX, "maybe": 5}, {"x": True}):
        assert embed_texts_sum(texts, out, 1019, True, index, STOP_WORDS) is None
        assert not out.any()
    big_index = {f"w{i}": 0 for i in range(300)}
    assert embed_texts_sum(texts, out, 1019, True, big_index, STOP_WORDS) is None
    for stop in (frozenset({"the", 1}), frozenset(f"w{i}" for i in range(300)), _FrozenSet()):
        assert embed_texts_sum(texts, out, 1019, True, _STANCE_INDEX, stop) is None
        assert not out.any()
    # non-ASCII and empty words never equal a token: left out, not declined
    odd = {**_STANCE_INDEX, "caf\u00e9": 1, "": 2}
    with stance_index(odd):
        assert check_texts(HashingEmbedder(), texts, frozenset({"the", "caf\u00e9", ""})) is True


class _FrozenSet(frozenset):  # type: ignore[type-arg]
    pass


def test_texts_unhandled_input_is_none() -> None:
    out = np.full(1024, np.nan)
    for texts in (iter(["a"]), _List(["a"]), ["a", _Str("b")], ["a", None], ["a", b"b"], "ab"):
        assert embed_texts_sum(texts, out, 1019, True, _STANCE_INDEX, STOP_WORDS) is None
        assert not out.any()


def test_texts_bad_arguments() -> None:
    texts = ["a b"]
    with pytest.raises(TypeError):
        embed_texts_sum(texts, np.zeros(10), 5, True, None)  # type: ignore[call-arg]
    for stop in ([], ["the"], None, {"the": 1}, "the"):
        with pytest.raises(TypeError):
            embed_texts_sum(texts, np.zeros(10), 5, True, None, stop)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        embed_texts_sum(texts, np.zeros((1, 10)), 5, True, None, STOP_WORDS)
    with pytest.raises(TypeError):
        embed_texts_sum(texts, np.zeros(10, np.float32), 5, True, None, STOP_WORDS)
    for lexical_dim in (0, 11):
        with pytest.raises(ValueError):
            embed_texts_sum(texts, np.zeros(10), lexical_dim, True, None, STOP_WORDS)
    with pytest.raises(TypeError):
        embed_texts_sum(texts, np.zeros(10), 5, True, [], STOP_WORDS)  # type: ignore[arg-type]
    read_only = np.zeros(10)
    read_only.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        embed_texts_sum(texts, read_only, 5, True, None, STOP_WORDS)
    out = np.full(10, np.nan)
    assert embed_texts_sum([], out, 5, True, None, STOP_WORDS) is True and not out.any()
    assert str(inspect.signature(embed_texts_sum)) == (
        "(texts, out, lexical_dim, bigrams, stance_index, stop_words, /)"
    )


def test_embed_run_takes_the_c_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """`embed_run` with the HashingEmbedder calls `embed_texts_sum` (set on `_accel._in_use`
    here, so that this holds with TRACEHOUND_PURE_PYTHON=1 too) and leaves the text cache
    alone on the ASCII path; off it, the cache's tokens give the same bits."""
    calls: list[bool | None] = []

    def counting(*args: Any) -> bool | None:
        result = embed_texts_sum(*args)
        calls.append(result)
        return result

    monkeypatch.setattr(_speedups, "embed_texts_sum", counting)
    monkeypatch.setattr(_accel, "_in_use", _speedups)
    embedder = HashingEmbedder()
    for texts, taken in (
        (["Maybe the tool failed \u2014 not sure, retrying.", "", "Done."], True),
        (["Caf\u00e9 maybe", "Done."], None),
    ):
        calls.clear()
        cache = TextCache()
        with pure_python():
            expected = embed_run(texts, embedder)
        got = embed_run(texts, embedder, cache)
        assert calls == [taken]
        assert got.tobytes() == expected.tobytes()
        assert bool(cache._informative) is (taken is None)
        assert embed_run(texts, embedder).tobytes() == expected.tobytes()  # no cache
    # without the accelerator: the cache's tokens
    monkeypatch.setattr(_accel, "_in_use", None)
    cache = TextCache()
    texts = ["Maybe the tool failed."]
    with pure_python():
        expected = embed_run(texts, embedder)
    assert embed_run(texts, embedder, cache).tobytes() == expected.tobytes()
    assert cache._informative


_TEXTS = [
    "Maybe the tool failed: I\u2019m not sure the search returned the right rows, retrying. " * 4,
    "",
    "the a an",
    " ".join(STANCE_WORDS),
    "x" * 300,
]
_OFF_PATH = ["Maybe the tool failed", "caf\u00e9"]


def test_texts_leak_inputs_take_the_intended_paths() -> None:
    assert embed_texts_sum(_TEXTS, _TOTAL, 1019, True, _STANCE_INDEX, STOP_WORDS) is True
    assert embed_texts_sum(_TEXTS, _WIDE_TOTAL, 5000, True, _STANCE_INDEX, STOP_WORDS) is True
    assert embed_texts_sum(_OFF_PATH, _TOTAL, 1019, True, _STANCE_INDEX, STOP_WORDS) is None
    assert embed_texts_sum(_TEXTS, _TOTAL, 1019, True, _GENERIC, STOP_WORDS) is None


@pytest.mark.parametrize(
    ("call", "n"),
    [
        pytest.param(
            lambda: embed_texts_sum(_TEXTS, _TOTAL, 1019, True, _STANCE_INDEX, STOP_WORDS),
            20_000,
            id="texts",
        ),
        pytest.param(
            lambda: embed_texts_sum(_TEXTS, _TOTAL, 1024, False, None, STOP_WORDS),
            20_000,
            id="texts-plain",
        ),
        pytest.param(
            lambda: embed_texts_sum(_TEXTS, _WIDE_TOTAL, 5000, True, _STANCE_INDEX, STOP_WORDS),
            5_000,
            id="texts-wide",
        ),
        pytest.param(
            lambda: embed_texts_sum(_OFF_PATH, _TOTAL, 1019, True, _STANCE_INDEX, STOP_WORDS),
            50_000,
            id="texts-off-path",
        ),
        pytest.param(
            lambda: embed_texts_sum(_TEXTS, _TOTAL, 1019, True, _GENERIC, STOP_WORDS),
            50_000,
            id="texts-generic",
        ),
        pytest.param(
            expecting(lambda: embed_texts_sum(_TEXTS, _TOTAL, 1019, True, None, []), TypeError),
            50_000,
            id="texts-type-error",
        ),
    ],
)
def test_texts_no_leaks(call: Callable[[], object], n: int) -> None:
    watched = [_TEXTS, _TOTAL, _WIDE_TOTAL, _STANCE_INDEX, _GENERIC, STOP_WORDS, *_TEXTS]
    assert_leak_free(call, watched, n)


def test_texts_keep_their_word_tables_while_the_words_stay_the_same() -> None:
    """The stop-word and stance tables are kept from call to call for the same frozenset and
    dict; a dict changed in place, another dict or frozenset, or a set gets tables of its own
    words (the bits of the Python code each time)."""
    texts = ["Maybe the agent is not sure: it failed again, clearly", "x of y"]
    embedder = HashingEmbedder()
    assert check_texts(embedder, texts) is True
    assert check_texts(embedder, texts) is True
    index = dict(_STANCE_INDEX)
    with stance_index(index):
        assert check_texts(embedder, texts) is True
        index["agent"] = 0  # in place: a new word
        assert check_texts(embedder, texts) is True
        index["maybe"] = 4  # in place: another category
        assert check_texts(embedder, texts) is True
        del index["clearly"]
        assert check_texts(embedder, texts) is True
    for stop in (frozenset({"agent", "the"}), {"agent", "is"}, frozenset({"agent", "the"})):
        assert check_texts(embedder, texts, stop) is True
    assert check_texts(embedder, texts) is True
    assert check_texts(HashingEmbedder(64, stance_weight=0.0), texts) is True


def test_texts_tell_short_words_by_their_crc() -> None:
    """Up to 4 characters, the tables tell a word by its CRC and length alone: every token of
    1 or 2 characters, and many of 3 and 4, against stop words of those lengths."""
    chars = "abcdefghijklmnopqrstuvwxyz0123456789"
    rng = random.Random(4)
    tokens = list(chars) + [a + b for a in chars for b in chars]
    tokens += ["".join(rng.choice(chars) for _ in range(rng.randint(3, 4))) for _ in range(3000)]
    stop = frozenset(("a", "of", "is", "the", "and", "x9", "with", "ab.c"))
    texts = [" ".join(tokens[i : i + 500]) for i in range(0, len(tokens), 500)]
    assert check_texts(HashingEmbedder(), texts, stop) is True
    assert check_texts(HashingEmbedder(), [t.upper() for t in texts], stop) is True
