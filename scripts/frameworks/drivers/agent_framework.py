"""Microsoft Agent Framework (agent-framework-core) with its OpenAI Chat Completions client.

Its OTel instrumentation is switched on with sensitive data (message content) on; it uses the
global tracer provider. `nested` uses ``Agent.as_tool`` (its tool takes a ``task`` argument).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

# this file is named like the framework's package: look it up after site-packages
_HERE = os.path.dirname(os.path.realpath(__file__))
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != _HERE] + [_HERE]

from _common import (  # noqa: E402
    Capture,
    guard_network,
    parse_args,
    quiet_env,
    run_scenarios,
    tools_for,
)

guard_network()
quiet_env()

from agent_framework import Agent  # noqa: E402
from agent_framework.observability import enable_instrumentation  # noqa: E402
from agent_framework.openai import OpenAIChatCompletionClient  # noqa: E402
from scenarios import NEW_SCENARIOS, Scenario, with_agent_call_arguments  # noqa: E402

MODEL_ID = "gpt-4o-mini"
LOOP = asyncio.new_event_loop()


def make_agent(scenario: Scenario, name: str, base_url: str) -> Agent:
    spec = scenario.agent(name)
    tools: list[Any] = list(tools_for(scenario, name))
    tools += [make_agent(scenario, sub, base_url).as_tool(name=sub) for sub in spec.sub_agents]
    client = OpenAIChatCompletionClient(
        model=MODEL_ID, base_url=base_url, api_key="sk-fake-capture-key"
    )
    return Agent(
        client=client,
        name=spec.name,
        instructions=spec.instructions,
        tools=tools,
        description=f"The {spec.name} agent: researches a question and reports.",
    )


async def run_agent(scenario: Scenario, base_url: str) -> str:
    result = await make_agent(scenario, scenario.main.name, base_url).run(scenario.user_prompt)
    # `result.text` joins every message's text (preambles too): the answer is the last message's
    said = [m.text for m in result.messages if m.text]
    return str(said[-1] if said else result.text)


def run_one(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    return LOOP.run_until_complete(run_agent(scenario, base_url)), {}


def main() -> None:
    args = parse_args(["loop", "clean", "nested", *NEW_SCENARIOS])
    args.scenarios = [
        with_agent_call_arguments(s, {"task": "aurora tonight"}) if s.main.sub_agents else s
        for s in args.scenarios
    ]
    capture = Capture("capture-agent-framework", with_logs=True)
    capture.install_global()
    enable_instrumentation(enable_sensitive_data=True)
    run_scenarios(args, capture, run_one)


if __name__ == "__main__":
    main()
