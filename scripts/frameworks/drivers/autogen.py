"""AutoGen AgentChat `AssistantAgent` with autogen-ext's `OpenAIChatCompletionClient`.

`--instrumentation builtin`: autogen-core's own GenAI telemetry (create_agent / invoke_agent /
execute_tool spans), which uses the global tracer provider. `--instrumentation openinference`:
openinference-instrumentation-autogen-agentchat alone (no global provider, so autogen-core's
spans are no-ops). `max_tool_iterations` lets one run go on calling tools until the model
answers in text. `nested` uses `AgentTool` (its tool takes a ``task`` argument; the last message
of the inner run is the tool's result).
"""

from __future__ import annotations

import argparse
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

from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_agentchat.tools import AgentTool  # noqa: E402
from autogen_ext.models.openai import OpenAIChatCompletionClient  # noqa: E402
from scenarios import NEW_SCENARIOS, Scenario, with_agent_call_arguments  # noqa: E402

MODEL_ID = "gpt-4o-mini"


def make_agent(scenario: Scenario, name: str, base_url: str) -> AssistantAgent:
    spec = scenario.agent(name)
    tools: list[Any] = list(tools_for(scenario, name))
    tools += [
        AgentTool(make_agent(scenario, sub, base_url), return_value_as_last_message=True)
        for sub in spec.sub_agents
    ]
    client = OpenAIChatCompletionClient(
        model=MODEL_ID, base_url=base_url, api_key="sk-fake-capture-key", max_retries=0
    )
    return AssistantAgent(
        name=spec.name,
        model_client=client,
        tools=tools,
        system_message=spec.instructions,
        description=f"The {spec.name} agent: researches a question and reports.",
        max_tool_iterations=8,
    )


async def run_agent(scenario: Scenario, base_url: str) -> str:
    result = await make_agent(scenario, scenario.main.name, base_url).run(task=scenario.user_prompt)
    return str(result.messages[-1].content)


def run_one(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    # a loop per scenario: asyncio.run closes the agents' unfinished async generators (and so
    # ends the spans they hold open) before the scenario's capture is taken
    return asyncio.run(run_agent(scenario, base_url)), {}


def main() -> None:
    own = argparse.ArgumentParser()
    own.add_argument("--instrumentation", choices=("builtin", "openinference"), default="builtin")
    ns, rest = own.parse_known_args()
    sys.argv[1:] = rest
    args = parse_args(["loop", "clean", "nested", *NEW_SCENARIOS])
    args.scenarios = [
        with_agent_call_arguments(s, {"task": "aurora tonight"}) if s.main.sub_agents else s
        for s in args.scenarios
    ]
    capture = Capture("capture-autogen")
    if ns.instrumentation == "builtin":
        capture.install_global()
    else:
        from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

        AutogenAgentChatInstrumentor().instrument(tracer_provider=capture.tracer_provider)
    run_scenarios(args, capture, run_one)


if __name__ == "__main__":
    main()
