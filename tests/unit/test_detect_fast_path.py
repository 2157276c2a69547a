"""`detect_convention`'s shortcut for spans named like OTel GenAI operations gives the answer of
the full detection: the gate, then the first family of `CONVENTIONS` that claims the span."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracehound import conventions
from tracehound.conventions import CONVENTIONS, detect_convention, genai, traceloop
from tracehound.spans import SpanView

KEYS = sorted(
    {
        *conventions._CLAIMED_BEFORE_GENAI,
        *genai.DETECT_KEYS,
        "gen_ai.usage.input_tokens",
        "gen_ai.conversation.id",
        "http.route",
        "db.system.name",
        "llm.other",
        "tool_x",
    }
)
NAMES = [
    "chat gpt-4o",
    "execute_tool search",
    "invoke_agent a",
    "embeddings x",
    "agent run",
    "running tool",
    "running tools",
    "ai.generateText",
    "GET /x",
    "chat",
]


def reference(view: SpanView) -> Any:
    """The detection without the shortcut."""
    name = view.name
    hinted = name.partition(" ")[0] in genai.OPERATION_MAP
    by_name = name in ("agent run", "running tool") or name.startswith("ai.")
    if not hinted and not by_name and view.scope_name != "pydantic-ai" and not view.may_be_genai():
        return None
    keys = list(view.attributes)
    if (
        not (by_name or view.scope_name == "pydantic-ai")
        and not any(k.startswith(conventions._ANY_GENAI_PREFIXES) for k in keys)
        and not any(e.name == traceloop.DB_QUERY_RESULT for e in view.events)
    ):
        return None
    keyset = frozenset(keys)
    for convention in CONVENTIONS:
        if convention.detect(view, keyset):
            return convention
    return None


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(NAMES),
    st.sets(st.sampled_from(KEYS), max_size=5),
    st.sampled_from(["", "pydantic-ai", "opentelemetry.instrumentation.openai_v2"]),
    st.lists(st.sampled_from([traceloop.DB_QUERY_RESULT, "exception", "x"]), max_size=2),
    st.booleans(),
)
def test_same_answer_as_the_full_detection(
    name: str, keys: set[str], scope: str, events: list[str], as_json: bool
) -> None:
    def make() -> SpanView:
        if as_json:
            doc = {
                "traceId": "0" * 31 + "1",
                "spanId": "0" * 15 + "2",
                "name": name,
                "attributes": [{"key": k, "value": {"stringValue": "v"}} for k in sorted(keys)],
                "events": [{"name": e} for e in events],
            }
            return SpanView.from_json(doc, None, {"name": scope})
        span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name=name)
        span.attributes.extend(
            KeyValue(key=k, value=AnyValue(string_value="v")) for k in sorted(keys)
        )
        for e in events:
            span.events.add(name=e)
        return SpanView.from_proto(span, None, InstrumentationScope(name=scope))

    assert detect_convention(make()) is reference(make())
