"""`tracehound.conventions.base._loads` (attribute JSON) against `json.loads`, the reference.

`_loads` skips `json.loads`' per-call checks for a document that starts and ends with its value
and sends anything else to `json.loads` itself: its answer must be `json.loads(text)`'s, the
same values with the same types at every depth (a float to the bit, -0.0 included), and where
`json.loads` raises, it raises the same error.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound.conventions import base
from tracehound.conventions.base import _loads, parse_json_value

SETTINGS = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def assert_same(got: Any, want: Any, where: str = "$") -> None:
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, float):
        assert repr(got) == repr(want), f"{where}: {got!r} != {want!r}"
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for key in want:
            assert_same(got[key], want[key], f"{where}.{key}")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def check(text: str) -> None:
    try:
        want = json.loads(text)
    except (ValueError, RecursionError) as e:
        with pytest.raises(type(e)) as raised:
            _loads(text)
        assert str(raised.value) == str(e)
        return
    assert_same(_loads(text), want)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.floats()
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)
dump_options = st.sampled_from(
    [
        {},
        {"ensure_ascii": False},
        {"separators": (",", ":")},
        {"indent": 2},
        {"indent": "\t", "ensure_ascii": False},
        {"sort_keys": True, "separators": (", ", ": ")},
    ]
)


@SETTINGS
@given(json_values, dump_options)
def test_parity_on_dumped_values(value: Any, options: dict[str, Any]) -> None:
    check(json.dumps(value, **options))


@SETTINGS
@given(st.text())
def test_parity_on_any_text(text: str) -> None:
    check(text)


JSON_CHARACTERS = '{}[]",:0123456789-+.eE \t\n\r\\/bfnrtu"aslnull\x01\u00e9\u4e2d'
json_alphabet = st.text(alphabet=st.sampled_from(list(JSON_CHARACTERS)), max_size=40)


@SETTINGS
@given(json_alphabet)
def test_parity_on_json_like_text(text: str) -> None:
    check(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        " [1, 2.5, -0, -0.0, 1e5, 1E-2, true, false, null] ",
        '{"a": 1, "a": 2, "b": {"a": [], "c": {}}}',
        '"x\\n\\"y\\u00e9\\u4e2d\\/\\b\\f\\r\\t\\\\"',
        '"\u201cquoted\u201d \U0001f600"',
        '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
        '"\\ud83d\\ude00"',
        "NaN",
        "-Infinity",
        "123456789012345678901",
        '{"a": 1}\n',
        "\t[]",
        "",
        " ",
        "[1,]",
        "01",
        "1.",
        "-",
        '"\x01"',
        '{"a" 1}',
        '"abc',
        '{"a": 1} x',
        "\ufeff1",
        '"\\x"',
        "[" * 300 + "]" * 300,
    ],
)
def test_documents(text: str) -> None:
    check(text)


def test_parse_json_value() -> None:
    problems: list[str] = []
    doc = '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'
    assert parse_json_value(doc, "x", problems) == json.loads(doc)
    assert parse_json_value(doc.encode(), "x", problems) == json.loads(doc)
    assert parse_json_value([1], "x", problems) == [1]
    assert parse_json_value(None, "x", problems) is None
    assert problems == []
    assert parse_json_value("{", "x", problems) is None
    assert parse_json_value(b"\xff", "x", problems) is None
    assert parse_json_value("[" * 100_000 + "]" * 100_000, "x", problems) is None
    assert parse_json_value(3, "x", problems) is None
    assert parse_json_value(" " * (base.MAX_JSON_BYTES + 1), "y", problems) is None
    assert problems == [
        "x: not valid JSON",
        "x: bytes that are not UTF-8",
        "x: not valid JSON",  # too deep: json.loads' RecursionError
        "x: unexpected type int",
        f"y: {base.MAX_JSON_BYTES + 1} bytes, over the {base.MAX_JSON_BYTES} byte limit",
    ]
