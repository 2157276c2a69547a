"""Strands Agents with its OpenAI model provider (streaming Chat Completions).

Strands' own telemetry (`StrandsTelemetry`) is given our tracer provider; the semconv shape comes
from OTEL_SEMCONV_STABILITY_OPT_IN, which capture.py sets per variant (Strands reads it once, when
its tracer is first made, so each variant is its own process).
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

from scenarios import NEW_SCENARIOS, Scenario, with_agent_call_arguments  # noqa: E402
from strands import Agent, tool  # noqa: E402
from strands.models.openai import OpenAIModel  # noqa: E402
from strands.telemetry import StrandsTelemetry  # noqa: E402

MODEL_ID = "gpt-4o-mini"


def model(base_url: str) -> OpenAIModel:
    return OpenAIModel(
        client_args={
            "api_key": "sk-fake-capture-key",
            "base_url": base_url,
            "timeout": 30,
            "max_retries": 0,
        },
        model_id=MODEL_ID,
        params={"temperature": 0.0},
    )


def make_agent(scenario: Scenario, name: str, base_url: str, extra_tools: list[Any]) -> Agent:
    spec = scenario.agent(name)
    return Agent(
        name=spec.name,
        description=f"The {spec.name} agent.",
        system_prompt=spec.instructions,
        model=model(base_url),
        tools=[tool(f) for f in tools_for(scenario, name)] + extra_tools,
        callback_handler=None,  # no printing
    )


def run_one(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    extra_tools: list[Any] = []
    for sub in scenario.main.sub_agents:
        inner = make_agent(scenario, sub, base_url, [])
        extra_tools.append(inner.as_tool(name=sub, description="Researches a question."))
    agent = make_agent(scenario, scenario.main.name, base_url, extra_tools)
    result = agent(scenario.user_prompt)
    return str(result).strip(), {}


def main() -> None:
    args = parse_args(["loop", "clean", "nested", *NEW_SCENARIOS])
    # Strands' as_tool takes its prompt in an "input" argument
    args.scenarios = [
        with_agent_call_arguments(s, {"input": "aurora tonight"}) if s.main.sub_agents else s
        for s in args.scenarios
    ]
    capture = Capture("capture-strands")
    StrandsTelemetry(tracer_provider=capture.tracer_provider)
    capture.install_global()
    run_scenarios(args, capture, run_one)


if __name__ == "__main__":
    main()
