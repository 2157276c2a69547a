"""CrewAI (one agent, one task, a sequential crew) with its native OpenAI provider.

Traced by OpenInference (crewai) in its event-listener mode, which adds LLM spans to the crew,
task, agent and tool spans. CrewAI's own telemetry and tracing stay off (`quiet_env`). The
agent's instructions (with the fake model's script marker) are its backstory. `nested`: the
coordinator's tool ``research_agent(query)`` kicks off a second crew with the research agent.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# this file is named like the framework's package: look it up after site-packages
_HERE = os.path.dirname(os.path.realpath(__file__))
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != _HERE] + [_HERE]

from _common import (  # noqa: E402
    TOOL_LOG,
    Capture,
    guard_network,
    parse_args,
    quiet_env,
    run_scenarios,
    tools_for,
)

guard_network()
quiet_env()
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

from crewai import LLM, Agent, Crew, Process, Task  # noqa: E402
from crewai.tools import tool  # noqa: E402
from openinference.instrumentation.crewai import CrewAIInstrumentor  # noqa: E402
from scenarios import NEW_SCENARIOS, Scenario  # noqa: E402

MODEL_ID = "openai/gpt-4o-mini"


def make_crew(scenario: Scenario, name: str, prompt: str, base_url: str) -> Crew:
    spec = scenario.agent(name)
    tools: list[Any] = [tool(f) for f in tools_for(scenario, name)]
    for sub in spec.sub_agents:
        tools.append(agent_tool(scenario, sub, base_url))
    agent = Agent(
        role=spec.name,
        goal="Answer the user's question with the tools.",
        backstory=spec.instructions,
        llm=LLM(model=MODEL_ID, base_url=base_url, api_key="sk-fake-capture-key", temperature=0),
        tools=tools,
        allow_delegation=False,
        max_iter=8,
        verbose=False,
    )
    task = Task(description=prompt, expected_output="A short answer.", agent=agent)
    return Crew(agents=[agent], tasks=[task], process=Process.sequential, verbose=False)


def agent_tool(scenario: Scenario, name: str, base_url: str) -> Any:
    def research_agent(query: str) -> str:
        """Researches a question with the research agent and returns its report.

        Args:
            query: The question to research.
        """
        index = TOOL_LOG.start(name, {"query": query}, kind="agent")
        result = make_crew(scenario, name, query, base_url).kickoff()
        return TOOL_LOG.finish(index, str(result.raw))

    research_agent.__name__ = name
    return tool(research_agent)


def run_one(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    crew = make_crew(scenario, scenario.main.name, scenario.user_prompt, base_url)
    result = crew.kickoff()
    return str(result.raw).strip(), {}


def main() -> None:
    args = parse_args(["loop", "clean", "nested", *NEW_SCENARIOS])
    capture = Capture("capture-crewai")
    capture.install_global()
    CrewAIInstrumentor().instrument(
        tracer_provider=capture.tracer_provider, use_event_listener=True
    )
    run_scenarios(args, capture, run_one)


if __name__ == "__main__":
    main()
