"""A failed tool call's error message is not evidence: survival counts only what tools returned.

Frameworks record a tool that raised as a tool span with status ERROR whose result is the error
text the model is shown (Strands: `Error: <message>`, LangChain: the message). The model's retry
succeeds, and a final answer grounded in the success is fully grounded: the error message is not
a source it failed to use. Synthetic OTel GenAI spans from the real SDK; the same on both paths
(the evidence index may be the C accelerator's), per span as spans arrive and per trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from _native import native_module
from _sdk import Recorder, capture, dumps, trajectory

from tracehound import _accel, names
from tracehound.cli import select_evaluators
from tracehound.engine import Engine, EngineConfig
from tracehound.evaluators._evidence_index import analyze_items, summarize
from tracehound.evaluators.evidence import trajectory_items
from tracehound.text import TextCache

ERROR = "Error: invoice id must be upper case, got 'inv-7'"
INVOICE = "Invoice INV-7 totals 912.40 EUR and is due on 15 January"
ANSWER = f"{INVOICE}. Please pay it before the due date."


def _chat(rec: Recorder, inputs: list[dict[str, object]], output: dict[str, object]) -> None:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": dumps(inputs),
        "gen_ai.output.messages": dumps([output]),
    }
    with rec.span("chat m", attributes):
        pass


def _call(call_id: str, invoice: str) -> dict[str, object]:
    return {
        "role": "assistant",
        "parts": [
            {
                "type": "tool_call",
                "id": call_id,
                "name": "get_invoice",
                "arguments": {"invoice_id": invoice},
            }
        ],
    }


def _result(call_id: str, text: str) -> dict[str, object]:
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": call_id, "response": text}],
    }


def failed_then_retried(rec: Recorder) -> None:
    user = {"role": "user", "parts": [{"type": "text", "content": "Show invoice inv-7."}]}
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing"}
    with rec.span("invoke_agent billing", agent):
        _chat(rec, [user], _call("c1", "inv-7"))
        for call_id, invoice, text, error in (
            ("c1", "inv-7", ERROR, "ValueError: invoice id must be upper case, got 'inv-7'"),
            ("c2", "INV-7", INVOICE, None),
        ):
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_invoice",
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.arguments": dumps({"invoice_id": invoice}),
                "gen_ai.tool.call.result": text,
            }
            with rec.span("execute_tool get_invoice", tool, error=error):
                pass
            if call_id == "c1":
                _chat(rec, [user, _call("c1", "inv-7"), _result("c1", ERROR)], _call("c2", "INV-7"))
        final = {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}
        history = [user, _call("c1", "inv-7"), _result("c1", ERROR), _call("c2", "INV-7")]
        _chat(rec, [*history, _result("c2", INVOICE)], final)


@contextmanager
def accelerator(on: bool) -> Iterator[None]:
    if on and _accel._in_use is None:
        pytest.skip("the C accelerator is off (TRACEHOUND_PURE_PYTHON=1 or not built)")
    with native_module(_accel._in_use if on else None):
        yield


def test_the_trajectory_keeps_the_failed_result_marked_as_an_error() -> None:
    steps = [s for s in trajectory(capture(failed_then_retried)).steps if s.kind == "tool_result"]
    assert [(s.call_id, s.text, bool(s.error)) for s in steps] == [
        ("c1", ERROR, True),
        ("c2", INVOICE, False),
    ]


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_an_error_message_is_not_evidence(native: bool) -> None:
    captured = capture(failed_then_retried)
    with accelerator(native):
        items, keys, final = trajectory_items(trajectory(captured))
        report = summarize(analyze_items(items, final, TextCache()), keys)
        assert [r["evidence_id"] for r in report["evidence"]] == ["c2"]
        engine = Engine(select_evaluators(None), EngineConfig())
        for view in captured.span_views():
            engine.add_span(view)
        (done,) = engine.flush()
    assert done.attributes[names.ATTR_EVIDENCE_FINAL_SURVIVAL_RATIO] == 1.0
