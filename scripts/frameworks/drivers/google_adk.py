"""Google ADK LlmAgent with an OpenAI-compatible model through LiteLLM (``LiteLlm``).

ADK's own telemetry uses the global tracer and logger providers, so both are installed. The
content mode comes from the environment capture.py sets per variant
(``ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS``, ``OTEL_SEMCONV_STABILITY_OPT_IN``,
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``). `nested` uses ``AgentTool`` (its tool
takes a ``request`` argument).
"""

from __future__ import annotations

import asyncio
from typing import Any

from _common import Capture, guard_network, parse_args, quiet_env, run_scenarios, tools_for

guard_network()
quiet_env()

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models.lite_llm import LiteLlm  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.adk.tools.agent_tool import AgentTool  # noqa: E402
from google.genai import types  # noqa: E402
from scenarios import NEW_SCENARIOS, Scenario, with_agent_call_arguments  # noqa: E402

MODEL = "openai/gpt-4o-mini"
APP = "capture_adk"
LOOP = asyncio.new_event_loop()


def tool_error_response(
    tool: Any, args: dict[str, Any], tool_context: Any, error: Exception
) -> dict[str, Any]:
    """ADK lets a tool's exception end the run; this callback hands it to the model instead."""
    return {"error": str(error)}


def make_agent(scenario: Scenario, name: str, base_url: str) -> LlmAgent:
    spec = scenario.agent(name)
    tools: list[Any] = list(tools_for(scenario, name))
    tools += [AgentTool(agent=make_agent(scenario, sub, base_url)) for sub in spec.sub_agents]
    return LlmAgent(
        name=spec.name,
        description=f"The {spec.name} agent: researches a question and reports briefly.",
        instruction=spec.instructions,
        model=LiteLlm(
            model=MODEL, api_base=base_url, api_key="sk-fake-capture-key", timeout=30, num_retries=0
        ),
        tools=tools,
        on_tool_error_callback=tool_error_response,
    )


async def run_agent(scenario: Scenario, base_url: str) -> str:
    runner = InMemoryRunner(agent=make_agent(scenario, scenario.main.name, base_url), app_name=APP)
    session = await runner.session_service.create_session(app_name=APP, user_id="user")
    message = types.Content(role="user", parts=[types.Part(text=scenario.user_prompt)])
    final = ""
    async for event in runner.run_async(user_id="user", session_id=session.id, new_message=message):
        if event.is_final_response() and event.content and event.content.parts:
            final = "".join(p.text or "" for p in event.content.parts)
    return final


def run_one(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    return LOOP.run_until_complete(run_agent(scenario, base_url)), {}


def main() -> None:
    args = parse_args(["loop", "clean", "nested", *NEW_SCENARIOS])
    args.scenarios = [
        with_agent_call_arguments(s, {"request": "aurora tonight"}) if s.main.sub_agents else s
        for s in args.scenarios
    ]
    capture = Capture("capture-google-adk", with_logs=True)
    capture.install_global()
    run_scenarios(args, capture, run_one)


if __name__ == "__main__":
    main()
