"""`tracehound._speedups.json_loads` (C) against `json.loads`, the reference.

Whenever it answers (anything but None), the answer must be `(json.loads(text),)`: the same
values with the same types at every depth (a float to the bit, -0.0 included). None is always
allowed (the caller then runs `json.loads`, which decodes or raises); for the usual documents
it must answer.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from _leaks import assert_leak_free
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import _accel, _speedups
from tracehound.conventions import base

json_loads = _speedups.json_loads

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


def check(text: Any, *, require_answer: bool = False) -> tuple[Any] | None:
    answer = json_loads(text)
    if answer is None:
        assert not require_answer, f"no answer for {text!r}"
        return None
    assert type(answer) is tuple and len(answer) == 1
    assert_same(answer[0], json.loads(text))
    return answer


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


@SETTINGS
@given(json_values.filter(lambda v: "\\ud" not in json.dumps(v)), dump_options)
def test_usual_documents_are_answered(value: Any, options: dict[str, Any]) -> None:
    """Without NaN/Infinity, surrogate escapes or long numbers, every document is answered."""
    text = json.dumps(value, **options)
    if any(word in text for word in ("NaN", "Infinity")):
        return
    if any(len(token) > 20 for token in text.replace("[", " ").replace("]", " ").split()):
        return  # a long number (or a long string token: the check is coarse)
    check(text, require_answer=True)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        " [1, 2.5, -0, -0.0, 1e5, 1E-2, true, false, null] ",
        '{"a": 1, "a": 2, "b": {"a": [], "c": {}}}',
        '"x\\n\\"y\\u00e9\\u4e2d\\/\\b\\f\\r\\t\\\\"',
        '"\u201cquoted\u201d \U0001f600"',
        '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
    ],
)
def test_answered(text: str) -> None:
    check(text, require_answer=True)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "[1,]",
        "01",
        "1.",
        "1e",
        "-",
        "NaN",
        "-Infinity",
        '"\x01"',
        '{"a" 1}',
        '"abc',
        '{"a": 1} x',
        "\ufeff1",
        '"\\ud83d\\ude00"',
        '"\\ud83d"',
        '"\\x"',
        '"\\u12G4"',
        "123456789012345678901",
        "[" * 300 + "]" * 300,
        b"[]",
        1,
        None,
    ],
)
def test_left_to_json_loads(text: Any) -> None:
    assert json_loads(text) is None


def test_no_leaks() -> None:
    texts = [
        '[{"role": "user", "parts": [{"type": "text", "content": "hi \\u00e9", "n": [1, 2.5]}]}]',
        '[{"a": 1}, "\\ud83d"]',  # fails half-way, after building some objects
        '{"a": [1, 2, {"b": "\\n"}], "c": tru}',
        "[1, 2",
    ]

    def call() -> None:
        for text in texts:
            json_loads(text)

    assert_leak_free(call, texts, 20_000)


@pytest.mark.skipif(
    bool(os.environ.get("TRACEHOUND_PURE_PYTHON")),
    reason="TRACEHOUND_PURE_PYTHON=1: the C path is off",
)
def test_attribute_json_is_decoded_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """`parse_json_value` takes the C path for the usual message documents."""
    assert _accel._in_use is not None

    def no_python_decoding(*args: object, **kwargs: object) -> object:
        raise AssertionError("decoded by the json module")

    monkeypatch.setattr(base._DECODER, "raw_decode", no_python_decoding)
    monkeypatch.setattr(json, "loads", no_python_decoding)
    text = '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'
    problems: list[str] = []
    assert base.parse_json_value(text, "x", problems) == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]}
    ]
    assert problems == []
