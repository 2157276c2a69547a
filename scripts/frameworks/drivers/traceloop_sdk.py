"""traceloop-sdk decorators (@workflow, @agent, @tool) around a plain openai-client tool loop.

Traceloop.init gets our in-memory exporter (simple processor, no batching), telemetry off, and
only the OpenAI instrumentation. `nested`: the coordinator's ``research_agent`` tool runs a
second decorated agent loop.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from _common import (
    TOOL_FUNCTIONS,
    TOOL_LOG,
    Capture,
    guard_network,
    parse_args,
    quiet_env,
    run_scenarios,
)

guard_network()
quiet_env()

from openai import OpenAI  # noqa: E402
from scenarios import NEW_SCENARIOS, Scenario  # noqa: E402
from traceloop.sdk import Traceloop  # noqa: E402
from traceloop.sdk.decorators import agent, tool, workflow  # noqa: E402
from traceloop.sdk.instruments import Instruments  # noqa: E402

MODEL_ID = "gpt-4o-mini"
MAX_TURNS = 10


_JSON_TYPES = {int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def _json_type(annotation: Any) -> str:
    return _JSON_TYPES.get(getattr(annotation, "__origin__", annotation), "string")


def tool_schema(name: str, function: Callable[..., Any]) -> dict[str, Any]:
    signature = inspect.signature(function, eval_str=True)
    parameters = list(signature.parameters)
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": (function.__doc__ or "").strip().splitlines()[0],
            "parameters": {
                "type": "object",
                "properties": {
                    p: {"type": _json_type(signature.parameters[p].annotation)} for p in parameters
                },
                "required": parameters,
            },
        },
    }


def agent_loop(
    client: OpenAI, instructions: str, user_text: str, tools: dict[str, Callable[..., Any]]
) -> str:
    """Call the model, run the tools it asks for, repeat until it answers in text."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": instructions},
        {"role": "user", "content": user_text},
    ]
    schemas = [tool_schema(n, f) for n, f in tools.items()]
    for _ in range(MAX_TURNS):
        response = client.chat.completions.create(
            model=MODEL_ID,
            messages=messages,
            tools=schemas,
            temperature=0.0,  # type: ignore
        )
        message = response.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in message.tool_calls
                ],
            }
        )
        for call in message.tool_calls:
            try:
                result = tools[call.function.name](**json.loads(call.function.arguments))
            except Exception as error:  # the model is told, and may retry
                result = f"Error: {error}"
            if not isinstance(result, str):
                result = json.dumps(result, ensure_ascii=False)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise RuntimeError("no final answer")


def make_agent(scenario: Scenario, name: str, client: OpenAI) -> Callable[[str], str]:
    spec = scenario.agent(name)
    tools: dict[str, Callable[..., Any]] = {n: tool(name=n)(TOOL_FUNCTIONS[n]) for n in spec.tools}
    for sub in spec.sub_agents:
        inner = make_agent(scenario, sub, client)

        def research_agent(
            query: str, _inner: Callable[[str], str] = inner, _name: str = sub
        ) -> str:
            """Ask the research agent a question; it looks facts up and reports briefly."""
            index = TOOL_LOG.start(_name, {"query": query}, kind="agent")
            return TOOL_LOG.finish(index, _inner(query))

        tools[sub] = tool(name=sub)(research_agent)

    def run(user_text: str) -> str:
        return agent_loop(client, spec.instructions, user_text, tools)

    return agent(name=spec.name)(run)


def run_one(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    client = OpenAI(base_url=base_url, api_key="sk-fake-capture-key", max_retries=0, timeout=30)
    main_agent = make_agent(scenario, scenario.main.name, client)

    @workflow(name=f"{scenario.name}_workflow")
    def run_workflow(user_text: str) -> str:
        return main_agent(user_text)

    return run_workflow(scenario.user_prompt), {}


def main() -> None:
    args = parse_args(["loop", "clean", "nested", *NEW_SCENARIOS])
    capture = Capture("capture-traceloop-sdk")
    Traceloop.init(
        app_name="capture-traceloop-sdk",
        exporter=capture.span_exporter,
        disable_batch=True,
        telemetry_enabled=False,
        instruments={Instruments.OPENAI},
        api_key="",
    )
    run_scenarios(args, capture, run_one)


if __name__ == "__main__":
    main()
