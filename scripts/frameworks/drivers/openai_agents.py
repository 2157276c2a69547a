"""OpenAI Agents SDK, traced by openinference-instrumentation-openai-agents.

    --model chat        OpenAIChatCompletionsModel (POST /v1/chat/completions)
    --model responses   OpenAIResponsesModel (POST /v1/responses), the SDK's default
    --stream            Runner.run_streamed instead of Runner.run

The OpenInference processor is installed as the only trace processor (``exclusive_processor``),
which drops the SDK's default exporter to OpenAI. `nested` uses ``Agent.as_tool`` (its tool takes
an ``input`` argument).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from _common import (
    OPEN_SCHEMA_TOOLS,
    Capture,
    guard_network,
    parse_args,
    quiet_env,
    run_scenarios,
    tools_for,
)

guard_network()
quiet_env()

from agents import (  # noqa: E402
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
)
from openai import AsyncOpenAI  # noqa: E402
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor  # noqa: E402
from scenarios import NEW_SCENARIOS, Scenario, with_agent_call_arguments  # noqa: E402

MODEL_ID = "gpt-4o-mini"
# one loop for every scenario: clients made in a run are closed on the loop they were made on
LOOP = asyncio.new_event_loop()
OPTIONS: dict[str, Any] = {}


def model(base_url: str) -> Any:
    client = AsyncOpenAI(
        base_url=base_url, api_key="sk-fake-capture-key", max_retries=0, timeout=30
    )
    if OPTIONS["model"] == "chat":
        return OpenAIChatCompletionsModel(model=MODEL_ID, openai_client=client)
    return OpenAIResponsesModel(model=MODEL_ID, openai_client=client)


def make_agent(scenario: Scenario, name: str, base_url: str, extra: list[Any]) -> Agent:
    spec = scenario.agent(name)
    return Agent(
        name=spec.name,
        instructions=spec.instructions,
        model=model(base_url),
        # a free-form object argument needs a non-strict schema
        tools=[
            function_tool(f, strict_mode=f.__name__ not in OPEN_SCHEMA_TOOLS)
            for f in tools_for(scenario, name)
        ]
        + extra,
    )


async def run_agent(scenario: Scenario, base_url: str) -> str:
    extra = [
        make_agent(scenario, sub, base_url, []).as_tool(
            tool_name=sub, tool_description="Researches a question and reports briefly."
        )
        for sub in scenario.main.sub_agents
    ]
    agent = make_agent(scenario, scenario.main.name, base_url, extra)
    if OPTIONS["stream"]:
        streamed = Runner.run_streamed(agent, scenario.user_prompt, max_turns=10)
        async for _event in streamed.stream_events():
            pass
        return str(streamed.final_output)
    result = await Runner.run(agent, scenario.user_prompt, max_turns=10)
    return str(result.final_output)


def run_one(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    return LOOP.run_until_complete(run_agent(scenario, base_url)), {}


def main() -> None:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--model", choices=["chat", "responses"], required=True)
    own.add_argument("--stream", action="store_true")
    ns, rest = own.parse_known_args()
    OPTIONS.update(model=ns.model, stream=ns.stream)
    sys.argv[1:] = rest
    args = parse_args(["loop", "clean", "nested", *NEW_SCENARIOS])
    args.scenarios = [
        with_agent_call_arguments(s, {"input": "aurora tonight"}) if s.main.sub_agents else s
        for s in args.scenarios
    ]
    capture = Capture("capture-openai-agents")
    OpenAIAgentsInstrumentor().instrument(
        tracer_provider=capture.tracer_provider, exclusive_processor=True
    )
    run_scenarios(args, capture, run_one)


if __name__ == "__main__":
    main()
