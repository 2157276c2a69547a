"""`tracehound.compat.evidenceflow.analyze` gives exactly `evidenceflow.analyze`'s result."""

from __future__ import annotations

from typing import Any

import evidenceflow
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracehound.compat.evidenceflow import analyze

# A small vocabulary makes overlaps, containment and repeated groups frequent; the punctuation,
# casing, numbers and Unicode variants exercise normalization and unit splitting.
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "GPT-5",
    "3.14",
    "2026",
    "v1.2",
    "Straße",
    "ﬁle",
    "the",
    "of",
    "and",
    "is",
    "to",
    "data",
    "data",
    "café",
    "CAFÉ",
    "x_y",
    "e-mail",
    "①",
]
PUNCT = [" ", " ", " ", ". ", "! ", "? ", "\n\n", ", ", " - ", "...", "\r\n\r\n"]


@st.composite
def texts(draw: st.DrawFn) -> str:
    n = draw(st.integers(0, 14))
    parts = []
    for _ in range(n):
        parts.append(draw(st.sampled_from(WORDS)))
        parts.append(draw(st.sampled_from(PUNCT)))
    return "".join(parts)


@st.composite
def traces(draw: st.DrawFn) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    pool: list[str] = []
    for i in range(draw(st.integers(0, 12))):
        kind = draw(
            st.sampled_from(
                [
                    "tool_result",
                    "retrieval",
                    "assistant",
                    "reasoning",
                    "user",
                    "tool_call",
                    "system",
                ]
            )
        )
        if kind == "tool_call":
            steps.append({"type": kind, "tool": draw(st.sampled_from(["search", "fetch"]))})
            continue
        if kind in ("assistant", "reasoning") and pool and draw(st.booleans()):
            text = " ".join(draw(st.lists(st.sampled_from(pool), max_size=3)))
            text += draw(texts())
        else:
            text = draw(texts())
        step: dict[str, Any] = {"type": kind, "content": text, "id": f"s{i}"}
        if kind == "tool_result":
            step["tool"] = draw(st.sampled_from(["search", "fetch", "lookup"]))
            pool.append(text)
        if kind == "retrieval":
            step["source"] = draw(st.sampled_from(["kb", "web"]))
            pool.append(text)
        steps.append(step)
    return steps


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_same_result_as_evidenceflow(trace: list[dict[str, Any]]) -> None:
    assert analyze(trace) == evidenceflow.analyze(trace)


def test_known_trace() -> None:
    trace = [
        {"type": "user", "content": "What changed in GPT-5?"},
        {"type": "tool_call", "tool": "search"},
        {
            "type": "tool_result",
            "tool": "search",
            "content": "GPT-5 shipped in 2026 with a 3.14x speedup. Pricing stayed flat.",
        },
        {
            "type": "retrieval",
            "source": "kb",
            "content": (
                "Pricing stayed flat for enterprise plans.\n\nUnrelated paragraph about cats."
            ),
        },
        {
            "type": "reasoning",
            "content": "The search says gpt-5 shipped in 2026 with a 3.14x speedup.",
        },
        {
            "type": "assistant",
            "content": "GPT-5 shipped in 2026 with a 3.14x speedup; pricing stayed flat.",
        },
    ]
    ours = analyze(trace)
    assert ours == evidenceflow.analyze(trace)
    assert ours["evidence_units"] == 4
    assert ours["reused_units"] == 3
    assert ours["final_reused_units"] == 3
    # "Pricing stayed flat for enterprise plans." shares 3 of its 5 informative words with the
    # answer (≥ half): reused; the paragraph about cats is not.
    assert ours["unused_evidence"] == []
    assert [e["reused_units"] for e in ours["evidence"]] == [2, 1]
    assert ours["repeated_evidence_groups"] == [["evidence-0", "evidence-1"]]
    assert ours["evidence"][0]["reused_at"] == ["step-4", "step-5"]


@pytest.mark.parametrize(
    ("trace", "error"),
    [
        ("not a list", TypeError),
        ([1], TypeError),
        ([{"type": "weird", "content": "x"}], ValueError),
        ([{"type": "assistant", "content": 3}], TypeError),
        (
            [
                {"type": "assistant", "content": "a", "id": "x"},
                {"type": "user", "content": "b", "id": "x"},
            ],
            ValueError,
        ),
        ([{"type": "tool_result", "content": "a", "tool": ""}], ValueError),
        (
            [
                {"type": "tool_result", "content": "a", "evidence_id": "e"},
                {"type": "retrieval", "content": "b", "evidence_id": "e"},
            ],
            ValueError,
        ),
    ],
)
def test_invalid_input_raises_like_evidenceflow(trace: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        evidenceflow.analyze(trace)
    with pytest.raises(error):
        analyze(trace)
