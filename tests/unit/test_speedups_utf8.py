"""The C accelerator's UTF-8 decoding of strings read off the wire, against `bytes.decode`.

Every string an attribute value or a message document carries is decoded by the accelerator's own
two-pass decoder rather than `PyUnicode_DecodeUTF8`: the same str (value and storage kind) for
valid UTF-8, and for invalid UTF-8 the same refusal as before (the value is not decoded by the C
path). Exercised through `decode_key_values` (a string attribute).
"""

from __future__ import annotations

import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import _speedups

SETTINGS = settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def decoded(raw: bytes) -> object:
    """The string attribute `k` whose value is `raw`, as decode_key_values reads it (None: not
    decoded by the C path)."""
    span = _ld(9, _ld(1, b"k") + _ld(2, _ld(1, raw)))
    got = _speedups.decode_key_values(span, 0, len(span), 9)
    return None if got is None else got["k"]


def check(raw: bytes) -> None:
    got = decoded(raw)
    try:
        want = raw.decode("utf-8")
    except UnicodeDecodeError:
        assert got is None
        return
    assert type(got) is str
    assert got == want
    # the same storage kind (the narrowest): the str is canonical, as the decoder's would be
    assert sys.getsizeof(got) == sys.getsizeof(want)


# characters of each width in UTF-8 (1 to 4 bytes) and each storage kind (1, 2, 4 bytes)
_CHARS = st.one_of(
    st.characters(max_codepoint=0x7F),
    st.characters(min_codepoint=0x80, max_codepoint=0xFF),
    st.characters(min_codepoint=0x100, max_codepoint=0x7FF),
    st.characters(min_codepoint=0x800, max_codepoint=0xFFFF, blacklist_categories=("Cs",)),
    st.characters(min_codepoint=0x10000),
)
# text as it comes: long ASCII runs with a few other characters among them
_TEXTS = st.lists(
    st.one_of(st.text(alphabet=_CHARS, max_size=6), st.text(st.characters(max_codepoint=0x7F))),
    max_size=12,
).map("".join)


@SETTINGS
@given(_TEXTS)
def test_valid_text_decodes_as_python_does(text: str) -> None:
    check(text.encode("utf-8"))


@SETTINGS
@given(_TEXTS, st.data())
def test_invalid_utf8_is_refused_as_before(text: str, data: st.DataObject) -> None:
    """A byte changed, dropped or added anywhere: decoded exactly, or refused when invalid."""
    raw = bytearray(text.encode("utf-8"))
    at = data.draw(st.integers(0, len(raw)))
    byte = data.draw(st.integers(0, 255))
    change = data.draw(st.sampled_from(["set", "insert", "delete"]))
    if change == "set" and at < len(raw):
        raw[at] = byte
    elif change == "insert":
        raw.insert(at, byte)
    elif at < len(raw):
        del raw[at]
    check(bytes(raw))


@SETTINGS
@given(st.binary(max_size=80))
def test_arbitrary_bytes(raw: bytes) -> None:
    check(raw)


def test_edges() -> None:
    cases = [
        b"",
        b"a",
        b"\xc3\xa9",  # one Latin-1 character
        b"ab",
        "’".encode(),
        "😀".encode(),
        b"x" * 15 + "é".encode(),
        b"x" * 16 + "’".encode() + b"y" * 40,
        ("’" * 40).encode(),
        ("a’" * 40).encode(),
        ("é" * 33).encode(),
        ("😀a" * 20).encode(),
        b"\xe0\x80\x80",  # overlong
        b"\xed\xa0\x80",  # a surrogate
        b"\xf4\x90\x80\x80",  # above U+10FFFF
        b"\xc0\xaf",
        b"abc\xe2\x80",  # truncated at the end
        b"x" * 20 + b"\x80",
        b"\xf5\x80\x80\x80",
        # past the decoder's stack buffer (2 KiB): a heap buffer, or the two passes
        ("’a" * 1500).encode(),
        ("é" * 3000).encode(),
        ("’a" * 1500 + "😀").encode(),
        ("’a" * 1500).encode() + b"\xff",
        ("’a" * 600 + "😀").encode(),  # a character above U+FFFF after many below
    ]
    for raw in cases:
        check(raw)
