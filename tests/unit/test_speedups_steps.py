"""`tracehound._speedups.step_from_fields` (C) against `steps._step_from_fields`, the reference:
the same Step, field by field and in its instance dict's order, and a frozen Step still."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest
from _leaks import assert_leak_free, expecting
from hypothesis import given, settings
from hypothesis import strategies as st

from tracehound import _speedups, steps
from tracehound.steps import Step

step_from_fields = _speedups.step_from_fields

OPTIONAL = ["text", "tool", "call_id", "arguments", "exec_span_id", "source", "model", "agent"]
field_values = st.fixed_dictionaries(
    {"kind": st.sampled_from(["user", "llm", "tool_call"]), "start_ns": st.integers()},
    optional={
        "end_ns": st.integers(),
        "input_tokens": st.none() | st.integers(),
        "documents": st.just(()),
        **{name: st.none() | st.text() for name in OPTIONAL},
    },
)


@settings(max_examples=300, deadline=None)
@given(field_values, st.text(), st.text())
def test_parity(fields: dict[str, Any], span_id: str, run_id: str) -> None:
    fields.setdefault("end_ns", fields["start_ns"])
    before = dict(fields)
    got = step_from_fields(Step, fields, span_id, run_id)
    want = steps._step_from_fields(Step, fields, span_id, run_id)
    assert type(got) is Step
    assert got == want
    assert list(vars(got).items()) == list(vars(want).items())
    assert dataclasses.asdict(got) == dataclasses.asdict(want)
    assert got.to_dict() == want.to_dict()
    assert hash(got) == hash(want)
    assert fields == before  # copied, not changed
    fields["text"] = "changed later"
    assert got.text == want.text != "changed later"


def test_still_frozen() -> None:
    step = step_from_fields(Step, {"kind": "user", "start_ns": 1, "end_ns": 2}, "s", "r")
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.text = "x"  # type: ignore[misc]
    assert step.text is None and step.documents == ()  # unset fields: the class defaults
    assert repr(step).startswith("Step(kind='user', span_id='s', start_ns=1, end_ns=2, run_id='r'")


@pytest.mark.parametrize(
    "args",
    [
        (Step, [("kind", "user")], "s", "r"),  # not a dict
        (int, {}, "s", "r"),  # not made by object.__new__
        ("Step", {}, "s", "r"),
        (Step, {}, "s"),
    ],
)
def test_type_errors(args: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError):
        step_from_fields(*args)


def test_no_leaks() -> None:
    fields = {"kind": "assistant", "text": "t" * 50, "start_ns": 1, "end_ns": 2}
    span_id, run_id = "ab" * 8, "cd" * 8

    def call() -> None:
        step_from_fields(Step, fields, span_id, run_id)
        expecting(lambda: step_from_fields(int, fields, span_id, run_id), TypeError)()

    assert_leak_free(call, [Step, fields, span_id, run_id], 50_000)


@pytest.mark.skipif(
    bool(os.environ.get("TRACEHOUND_PURE_PYTHON")),
    reason="TRACEHOUND_PURE_PYTHON=1: the C path is off",
)
def test_steps_are_made_in_c() -> None:
    assert steps._make_step is step_from_fields
