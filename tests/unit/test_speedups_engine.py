"""`encode_result_records` / `encode_result_attributes`: the sidecar's per-span writing of results
in one C call each, against the Python functions they stand for (`framed_log_records`, whose
records are upb's serialization, and `encoded_attributes` of `span_attributes`)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from _leaks import assert_leak_free
from _native import pure_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound import _wire
from tracehound.emit import span_attributes
from tracehound.evaluators.base import EvaluationResult
from tracehound.server import _otlp
from tracehound.server._otlp import (
    RESULT_RECORD_KEYS,
    RESULT_RECORD_PARTS,
    SPAN_ATTRIBUTES_TAG,
    encoded_attributes,
    encoded_result_attributes,
    framed_log_records,
    framed_result_records,
)

native = _wire._native
needs_native = pytest.mark.skipif(native is None, reason="the C accelerator is off or not built")

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_texts = st.text(max_size=30)
_odd = st.one_of(st.integers(-3, 3), st.booleans(), st.just(b"x"), st.just(["a"]))
_values = st.one_of(
    st.none(),
    _texts,
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.booleans(),
    st.lists(st.one_of(st.integers(), _texts), max_size=3),
)
_attributes = st.dictionaries(
    st.sampled_from(["tracehound.a", "tracehound.b", "tracehound.c", "", "é"]), _values, max_size=3
)
_span_ids = st.one_of(
    st.none(), st.just(""), st.binary(min_size=8, max_size=8).map(bytes.hex), st.just("zz" * 8)
)
_results = st.builds(
    EvaluationResult,
    name=st.one_of(st.sampled_from(["tracehound.drift", "é", ""]), _odd),
    evaluator=_texts,
    evaluator_version=st.one_of(_texts, _odd),
    span_id=_span_ids,
    score_value=st.one_of(
        st.none(),
        st.floats(allow_nan=True),
        st.integers(-(2**1030), 2**1030),
        st.booleans(),
    ),
    score_label=st.one_of(st.none(), _texts, _odd),
    explanation=st.one_of(st.none(), st.text(max_size=300), st.just("\ud800")),
    error_type=st.one_of(st.none(), st.just(""), st.sampled_from(["ValueError", "Boom"])),
    attributes=_attributes,
)
_ids = st.one_of(
    st.tuples(st.binary(min_size=16, max_size=16), st.binary(min_size=8, max_size=8)).map(
        lambda ids: (ids[0].hex(), ids[1].hex())
    ),
    st.just(("AB" * 16, "CD" * 8)),
    st.just(("ab" * 8, "cd" * 8)),
)
_times = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**64 - 1, -1, 2**64]))


def _outcome(call: Any) -> Any:
    """The answer of `call()`, or Exception when it raised (which error comes first, the bad
    id's or the bad value's, differs between the message and the bytes paths)."""
    try:
        return call()
    except Exception:
        return Exception


@SETTINGS
@given(
    results=st.lists(_results, max_size=4),
    as_tuple=st.booleans(),
    ids=_ids,
    time_ns=_times,
)
def test_result_records_are_the_framed_log_records(
    results: list[EvaluationResult], as_tuple: bool, ids: tuple[str, str], time_ns: int
) -> None:
    trace_id, span_id = ids
    given_results: Any = tuple(results) if as_tuple else results
    with pure_python():  # upb's serialization of each record
        expected = _outcome(
            lambda: b"".join(framed_log_records(given_results, trace_id, span_id, time_ns))
        )
    assert _outcome(lambda: framed_result_records(given_results, trace_id, span_id, time_ns)) == (
        expected
    )


_presents = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["tracehound.a", "x", "é"]), st.just(1), max_size=2),
    st.frozensets(st.sampled_from(["tracehound.b", "y"]), max_size=2),
    st.sets(st.sampled_from(["tracehound.c", "z"]), max_size=2),
    st.just(("tracehound.a",)),
    st.just(()),
)


@SETTINGS
@given(results=st.lists(_results, max_size=4), as_tuple=st.booleans(), present=_presents)
def test_result_attributes_are_the_encoded_span_attributes(
    results: list[EvaluationResult], as_tuple: bool, present: Any
) -> None:
    given_results: Any = tuple(results) if as_tuple else results
    expected = _outcome(
        lambda: encoded_attributes(SPAN_ATTRIBUTES_TAG, span_attributes(given_results), present)
    )
    assert _outcome(lambda: encoded_result_attributes(given_results, present)) == expected


class _Subclass(EvaluationResult):
    pass


def test_other_result_types_and_containers_take_the_python_path() -> None:
    result = _Subclass(
        name="n", evaluator="e", evaluator_version="1", attributes={"tracehound.k": 1}
    )
    records = framed_result_records([result], "01" * 16, "02" * 8, 5)
    with pure_python():
        assert records == b"".join(framed_log_records([result], "01" * 16, "02" * 8, 5))
    assert encoded_result_attributes(iter([result]), {}) == encoded_attributes(  # type: ignore[arg-type]
        SPAN_ATTRIBUTES_TAG, {"tracehound.k": 1}, {}
    )


@needs_native
def test_the_calls_answer_without_the_python_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("the one-call path should not need the Python functions")

    monkeypatch.setattr(_otlp, "framed_log_records", refuse)
    monkeypatch.setattr(_otlp, "encoded_attributes", refuse)
    monkeypatch.setattr(_otlp, "span_attributes", refuse)
    results = [
        EvaluationResult(
            name="n",
            evaluator="e",
            evaluator_version="1",
            score_value=0.5,
            attributes={"tracehound.a": 1},
        ),
        EvaluationResult(
            name="m", evaluator="e", evaluator_version="1", attributes={"tracehound.b": "x"}
        ),
    ]
    assert framed_result_records(results, "01" * 16, "02" * 8, 7)
    assert encoded_result_attributes(results, {"other": 1})
    assert encoded_result_attributes(results, frozenset(("other",)))


@needs_native
def test_bad_arguments_raise_type_errors() -> None:
    assert native is not None
    with pytest.raises(TypeError):
        native.encode_result_records([], "01" * 16, "02" * 8, 0, RESULT_RECORD_KEYS[:6], ())
    with pytest.raises(TypeError):
        native.encode_result_records([], "01" * 16, "02" * 8, 0, RESULT_RECORD_KEYS, ((),))
    with pytest.raises(TypeError):
        native.encode_result_records([], "01" * 16, "02" * 8, 0)
    with pytest.raises(TypeError):
        native.encode_result_attributes([], None)
    with pytest.raises(AttributeError):
        native.encode_result_records(
            [object()], "01" * 16, "02" * 8, 0, RESULT_RECORD_KEYS, RESULT_RECORD_PARTS
        )
    with pytest.raises(AttributeError):
        native.encode_result_attributes([object()], {}, SPAN_ATTRIBUTES_TAG)


@needs_native
def test_no_leaks() -> None:
    assert native is not None
    results = (
        EvaluationResult(
            name="n",
            evaluator="e",
            evaluator_version="1",
            score_value=2,
            score_label="ok",
            explanation="why",
            attributes={"tracehound.a": 1, "tracehound.b": [1, "x"]},
        ),
        EvaluationResult(
            name="m",
            evaluator="e",
            evaluator_version="1",
            span_id="03" * 8,
            error_type="Boom",
            attributes={"tracehound.c": 1.5},
        ),
    )
    unhandled = (EvaluationResult(name="n", evaluator="e", evaluator_version="1", span_id="zz"),)
    present = {"x": 1}
    watched: list[object] = [*results, present, RESULT_RECORD_KEYS, RESULT_RECORD_PARTS]

    def call() -> None:
        native.encode_result_records(
            results, "01" * 16, "02" * 8, 9, RESULT_RECORD_KEYS, RESULT_RECORD_PARTS
        )
        native.encode_result_records(
            unhandled, "01" * 16, "02" * 8, 9, RESULT_RECORD_KEYS, RESULT_RECORD_PARTS
        )
        native.encode_result_attributes(results, present, SPAN_ATTRIBUTES_TAG)
        native.encode_result_attributes(results[:1], present, SPAN_ATTRIBUTES_TAG)
        native.encode_result_attributes(results, {"tracehound.c": 0}, SPAN_ATTRIBUTES_TAG)
        with contextlib.suppress(AttributeError):
            native.encode_result_attributes([object()], present, SPAN_ATTRIBUTES_TAG)

    assert_leak_free(call, watched, n=20_000)


def _hook(name: str) -> Any:
    def on_span(state: Any, span: Any, steps: Any, trace: Any) -> Any:
        if state == "raise":
            raise KeyError(name)
        if state == "interrupt":
            raise KeyboardInterrupt
        if state == "generator":
            return (x for x in (name, name))
        if state == "bad":
            return 5  # not iterable: `results += 5` fails
        return [name]

    return on_span


@needs_native
def test_call_span_hooks_is_the_engines_loop() -> None:
    assert native is not None
    call = native.call_span_hooks
    assert call([], "span", (), "trace") == ()
    assert call([(0, _hook("a"), "ok"), (2, _hook("b"), "generator")], "s", (), "t") == (
        "a",
        "b",
        "b",
    )
    done, position, error = call(
        [(0, _hook("a"), "ok"), (3, _hook("b"), "raise"), (4, _hook("c"), "ok")], "s", (), "t"
    )
    assert (done, position) == (["a"], 3)  # the hooks after the failing one are not called
    assert isinstance(error, KeyError) and error.__traceback__ is not None
    done, position, error = call([(1, _hook("a"), "bad")], "s", (), "t")
    assert (done, position, type(error)) == ([], 1, TypeError)
    with pytest.raises(KeyboardInterrupt):
        call([(0, _hook("a"), "interrupt")], "s", (), "t")
    with pytest.raises(TypeError):
        call(((0, _hook("a"), "ok"),), "s", (), "t")
    with pytest.raises(TypeError):
        call([(0, _hook("a"))], "s", (), "t")
    # one hook's results taken as they are when they are the only ones: a list still copied
    # when it is returned (`results +=`), before the hooks after it run
    kept: list[str] = []

    def keeps(state: Any, span: Any, steps: Any, trace: Any) -> Any:
        kept.append(state)
        return kept

    assert call([(0, keeps, "k"), (1, keeps, "l")], "s", (), "t") == ("k", "k", "l")
    kept.clear()
    assert call([(0, keeps, "k"), (1, _hook("b"), "generator"), (2, keeps, "m")], "s", (), "t") == (
        "k",
        "b",
        "b",
        "k",
        "m",
    )
    kept.clear()
    assert call([(0, keeps, "k"), (1, lambda *a: kept.append("x") or (), None)], "s", (), "t") == (
        "k",
    )
    assert call([(0, _hook("a"), "bad")], "s", (), "t")[:2] == [[], 0]
    done, position, _ = call([(0, keeps, "z"), (1, _hook("b"), "raise")], "s", (), "t")
    assert (done, position) == (["k", "x", "z"], 1)


@needs_native
def test_call_span_hooks_leaks_nothing() -> None:
    assert native is not None
    hooks = [(0, _hook("a"), "ok"), (1, _hook("b"), "generator")]
    failing = [(0, _hook("a"), "ok"), (1, _hook("b"), "raise")]

    def call() -> None:
        native.call_span_hooks(hooks, "s", (), "t")
        native.call_span_hooks(failing, "s", (), "t")

    assert_leak_free(call, [hooks, failing], n=20_000)


def _json_view(keys: list[str]) -> Any:
    from tracehound.spans import SpanView

    return SpanView.from_json(
        {
            "traceId": "ab" * 16,
            "spanId": "cd" * 8,
            "name": "s",
            "attributes": [{"key": k, "value": {"stringValue": "v"}} for k in keys],
        }
    )


@needs_native
@SETTINGS
@given(keys=st.lists(st.text(max_size=8), max_size=6), decoded=st.booleans())
def test_present_keys_are_the_views_keys(keys: list[str], decoded: bool) -> None:
    """`present_keys` holds the keys `_present_keys` does: the view's attributes dict when it
    holds them decoded, else the keys as a frozenset."""
    from tracehound.server._pipeline import _present_keys

    assert native is not None
    view = _json_view(keys)
    if decoded:
        attributes = view.attributes
        present = native.present_keys(view)
        assert present is attributes
    else:
        present = native.present_keys(view)
        assert type(present) is frozenset
    assert set(present) == set(_present_keys(view)) == set(keys)


@needs_native
def test_present_keys_of_other_objects_and_leaks() -> None:
    assert native is not None

    class Keys:
        attribute_keys = ("a", "b")

    assert native.present_keys(Keys()) == frozenset({"a", "b"})
    with pytest.raises(AttributeError):
        native.present_keys(object())
    view, decoded = _json_view(["a"]), _json_view(["b"])
    assert decoded.attributes

    def call() -> None:
        native.present_keys(view)
        native.present_keys(decoded)

    assert_leak_free(call, [view, decoded], n=20_000)
