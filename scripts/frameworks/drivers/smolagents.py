"""smolagents ToolCallingAgent + OpenAIServerModel, traced by OpenInference (smolagents).

`nested` uses a managed agent (a ToolCallingAgent the coordinator calls as a tool; smolagents
gives it a ``task`` argument). smolagents ends a run with its ``final_answer`` tool, which the fake
model calls for a scripted final text.
"""

from __future__ import annotations

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

from openinference.instrumentation.smolagents import SmolagentsInstrumentor  # noqa: E402
from scenarios import NEW_SCENARIOS, Scenario, with_agent_call_arguments  # noqa: E402
from smolagents import OpenAIServerModel, ToolCallingAgent, tool  # noqa: E402

MODEL_ID = "gpt-4o-mini"


def make_agent(scenario: Scenario, name: str, base_url: str, managed: list[Any]) -> Any:
    spec = scenario.agent(name)
    model = OpenAIServerModel(
        model_id=MODEL_ID,
        api_base=base_url,
        api_key="sk-fake-capture-key",
        client_kwargs={"timeout": 30, "max_retries": 0},
    )
    return ToolCallingAgent(
        tools=[tool(f) for f in tools_for(scenario, name)],
        model=model,
        name=spec.name,
        description=f"The {spec.name} agent: researches a question and reports briefly.",
        instructions=spec.instructions,
        managed_agents=managed or None,
        max_steps=8,
        verbosity_level=0,
    )


def run_one(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    managed = [make_agent(scenario, sub, base_url, []) for sub in scenario.main.sub_agents]
    agent = make_agent(scenario, scenario.main.name, base_url, managed)
    result = agent.run(scenario.user_prompt)
    return str(result), {}


def main() -> None:
    args = parse_args(["loop", "clean", "nested", *NEW_SCENARIOS])
    args.scenarios = [
        with_agent_call_arguments(s, {"task": "aurora tonight"}) if s.main.sub_agents else s
        for s in args.scenarios
    ]
    capture = Capture("capture-smolagents")
    SmolagentsInstrumentor().instrument(tracer_provider=capture.tracer_provider)
    run_scenarios(args, capture, run_one)


if __name__ == "__main__":
    main()
