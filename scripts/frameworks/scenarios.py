"""The scripted scenarios every framework driver runs, and their ground truth.

Stdlib only: imported by `capture.py` and by the drivers inside each framework's venv. Tool
results are distinctive (odd codes and numbers), so a later answer that reuses one can be told
from one that does not. The drivers' tools are real Python functions that return
`tool_result(...)`; the scripts below are what the fake model asks for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from fake_llm import Script, ToolCall, Turn

# --- tool results (what the real tool functions return) -------------------------------------

ORDER_STATUS = "Order A-1042: status PENDING_REVIEW at warehouse Tromsø-7, ticket ZX-5519"
WEATHER_OSLO = "Oslo: 7°C, light rain, wind 4 m/s"
WEATHER_BERGEN = "Bergen: 11°C, heavy rain, wind 9 m/s"
RATE_NOK_EUR = "1 NOK = 0.0853 EUR"
AURORA_FACT = "Aurora forecast: Kp index 6 over Skibotn station SKB-88, peak at 22:40 local"
FLIGHT_OFFER = "Flight WF-823 Bodø → Tromsø departs 07:15 with 1 stop, fare 1 489 NOK"
HOTEL_QUOTE = "Hotel Ishavet quote Q-3317: 3 nights for 2 adults and 1 child, 4 260 NOK in total"
INVOICE = "Invoice INV-77: 3 items, total 912.40 EUR, due 2026-01-15, status UNPAID"
INVOICE_ERROR = "invoice id must be upper case like INV-77, got 'inv-77'"
SERVER_TIME = "Server time 2026-03-14T09:26:53Z, region eu-north-7, clock source NTP-3"
ACCOUNT: dict[str, Any] = {
    "account_id": "AC-5521",
    "owner": "Ingrid Bakke",
    "balance": {"amount": 1234.5, "currency": "NOK"},
    "flags": ["vip", "paperless"],
    "tier": "gold",
}

FLIGHT_ARGUMENTS: dict[str, Any] = {"origin": "Bodø", "max_stops": 1, "carriers": ["WF", "SK"]}
HOTEL_ARGUMENTS: dict[str, Any] = {
    "city": "Tromsø",
    "nights": 3,
    "guests": {"adults": 2, "children": 1},
}

_RESULTS: dict[tuple[str, str], Any] = {
    ("get_order_status", json.dumps({"order_id": "A-1042"})): ORDER_STATUS,
    ("get_weather", json.dumps({"city": "Oslo"})): WEATHER_OSLO,
    ("get_weather", json.dumps({"city": "Bergen"})): WEATHER_BERGEN,
    (
        "get_exchange_rate",
        json.dumps({"base": "NOK", "quote": "EUR"}, sort_keys=True),
    ): RATE_NOK_EUR,
    ("lookup_fact", json.dumps({"topic": "aurora"})): AURORA_FACT,
    ("find_flights", json.dumps(FLIGHT_ARGUMENTS, sort_keys=True)): FLIGHT_OFFER,
    ("get_hotel_quote", json.dumps(HOTEL_ARGUMENTS, sort_keys=True)): HOTEL_QUOTE,
    ("get_invoice", json.dumps({"invoice_id": "INV-77"})): INVOICE,
    ("get_account", json.dumps({"account_id": "AC-5521"})): ACCOUNT,
    ("get_server_time", json.dumps({})): SERVER_TIME,
}

# calls whose real tool function raises: (name, canonical arguments) -> the exception's message
_ERRORS: dict[tuple[str, str], str] = {
    ("get_invoice", json.dumps({"invoice_id": "inv-77"})): INVOICE_ERROR,
}


class ToolFailure(ValueError):
    """What a scenario tool raises for the arguments the script marks as failing."""


def tool_error(name: str, **arguments: Any) -> str | None:
    """The message the real tool `name` raises with for these arguments, or None."""
    return _ERRORS.get((name, json.dumps(arguments, sort_keys=True)))


def tool_result(name: str, **arguments: Any) -> Any:
    """What the real tool `name` returns for these arguments (a str, or a dict for JSON tools)."""
    key = (name, json.dumps(arguments, sort_keys=True))
    if key not in _RESULTS:
        return f"no data for {name}({json.dumps(arguments, sort_keys=True)})"
    return _RESULTS[key]


# --- RAG corpus --------------------------------------------------------------------------------

RAG_DOCUMENTS: dict[str, str] = {
    "doc-kettle": (
        "The Fjordline X3 kettle carries a 27-month warranty; register it with code FJ-X3-7781."
    ),
    "doc-toaster": "The Fjordline T9 toaster has six browning levels and a crumb tray of 14 cm.",
    "doc-blender": (
        "The Nordvik B2 blender ships with a 1.8 litre jar and a 5-year motor guarantee."
    ),
}
RAG_QUESTION = "How long is the warranty on the Fjordline X3 kettle?"
RAG_ANSWER = "The Fjordline X3 kettle has a 27-month warranty; register it with code FJ-X3-7781."

# --- scripts -----------------------------------------------------------------------------------

LOOP_FINAL = (
    "I could not get a definitive answer about that order after several attempts; "
    "please contact customer support."
)
CLEAN_FINAL = f"Weather now: {WEATHER_OSLO}. Exchange rate: {RATE_NOK_EUR}."
NESTED_INNER_FINAL = "Kp index 6 over Skibotn station SKB-88, peaking at 22:40 local."
NESTED_OUTER_FINAL = (
    "The research agent reports a Kp index 6 over Skibotn station SKB-88, peaking at 22:40 local."
)

_ORDER_CALL = ToolCall("get_order_status", {"order_id": "A-1042"})


@dataclass(frozen=True)
class AgentSpec:
    """One agent as a user would see it."""

    name: str
    instructions: str
    script: Script
    tools: tuple[str, ...]
    # agents this agent calls as tools, by name
    sub_agents: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str
    user_prompt: str
    agents: tuple[AgentSpec, ...]  # the first is the agent the user runs
    is_loop: bool
    final_answer: str
    # which tool results the final answer reuses (ground truth for "final survival")
    final_reuses: tuple[str, ...]
    # parts of tool results the final answer quotes without reusing a whole result
    final_quotes: tuple[str, ...] = ()
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def main(self) -> AgentSpec:
        return self.agents[0]

    def agent(self, name: str) -> AgentSpec:
        return next(a for a in self.agents if a.name == name)

    def scripts(self) -> list[Script]:
        return [a.script for a in self.agents]


def _instructions(text: str, script: str) -> str:
    # the marker lets the fake model tell the agents of one conversation apart
    return f"{text} [[script:{script}]]"


LOOP = Scenario(
    name="loop",
    user_prompt="What is the status of order A-1042?",
    agents=(
        AgentSpec(
            name="order_agent",
            instructions=_instructions(
                "You are a support agent. Use get_order_status to answer.", "loop"
            ),
            script=Script(
                "loop",
                (
                    Turn((_ORDER_CALL,)),
                    Turn((_ORDER_CALL,)),
                    Turn((_ORDER_CALL,)),
                    Turn((_ORDER_CALL,)),
                    Turn(text=LOOP_FINAL),
                ),
            ),
            tools=("get_order_status",),
        ),
    ),
    is_loop=True,
    final_answer=LOOP_FINAL,
    final_reuses=(),
    notes="the same call 4 times with the same result; the final answer reuses none of it",
)

CLEAN = Scenario(
    name="clean",
    user_prompt="What is the weather in Oslo, and how many euros is one Norwegian krone?",
    agents=(
        AgentSpec(
            name="travel_agent",
            instructions=_instructions(
                "You are a travel assistant. Use the tools, then answer.", "clean"
            ),
            script=Script(
                "clean",
                (
                    Turn((ToolCall("get_weather", {"city": "Oslo"}),)),
                    Turn((ToolCall("get_exchange_rate", {"base": "NOK", "quote": "EUR"}),)),
                    Turn(text=CLEAN_FINAL),
                ),
            ),
            tools=("get_weather", "get_exchange_rate"),
        ),
    ),
    is_loop=False,
    final_answer=CLEAN_FINAL,
    final_reuses=(WEATHER_OSLO, RATE_NOK_EUR),
    notes="two different tools once each; the final answer quotes both results",
)

NESTED = Scenario(
    name="nested",
    user_prompt="Ask the research agent about tonight's aurora and tell me what it found.",
    agents=(
        AgentSpec(
            name="coordinator",
            instructions=_instructions(
                "You coordinate. Delegate research to research_agent, then answer.", "nested_outer"
            ),
            script=Script(
                "nested_outer",
                (
                    Turn((ToolCall("research_agent", {"query": "aurora tonight"}),)),
                    Turn(text=NESTED_OUTER_FINAL),
                ),
            ),
            tools=(),
            sub_agents=("research_agent",),
        ),
        AgentSpec(
            name="research_agent",
            instructions=_instructions(
                "You research facts with lookup_fact and report them briefly.", "nested_inner"
            ),
            script=Script(
                "nested_inner",
                (
                    Turn((ToolCall("lookup_fact", {"topic": "aurora"}),)),
                    Turn(text=NESTED_INNER_FINAL),
                ),
            ),
            tools=("lookup_fact",),
        ),
    ),
    is_loop=False,
    final_answer=NESTED_OUTER_FINAL,
    final_reuses=(NESTED_INNER_FINAL,),
    notes="an agent used as a tool by another agent; the inner agent calls lookup_fact once",
)

RAG = Scenario(
    name="rag",
    user_prompt=RAG_QUESTION,
    agents=(
        AgentSpec(
            name="rag_query",
            instructions=_instructions("Answer from the given context only.", "rag"),
            script=Script("rag", (Turn(text=RAG_ANSWER),)),
            tools=(),
        ),
    ),
    is_loop=False,
    final_answer=RAG_ANSWER,
    final_reuses=(RAG_DOCUMENTS["doc-kettle"],),
    notes="a retriever over three in-memory documents, then one LLM call with the context",
    extra={"documents": RAG_DOCUMENTS, "relevant_document": "doc-kettle"},
)

PARALLEL_FINAL = f"Best option for the stay: {HOTEL_QUOTE}."
PARALLEL = Scenario(
    name="parallel",
    user_prompt="Find me a flight from Bodø and a hotel quote in Tromsø for three nights.",
    agents=(
        AgentSpec(
            name="trip_planner",
            instructions=_instructions(
                "You plan trips. Call the tools you need in parallel, then answer.", "parallel"
            ),
            script=Script(
                "parallel",
                (
                    Turn(
                        (
                            ToolCall("find_flights", FLIGHT_ARGUMENTS),
                            ToolCall("get_hotel_quote", HOTEL_ARGUMENTS),
                        )
                    ),
                    Turn(text=PARALLEL_FINAL),
                ),
            ),
            tools=("find_flights", "get_hotel_quote"),
        ),
    ),
    is_loop=False,
    final_answer=PARALLEL_FINAL,
    final_reuses=(HOTEL_QUOTE,),
    notes="two different tools called in one model response (typed arguments: int, list, "
    "object, non-ASCII text); the final answer reuses one of the two results",
)

TOOL_ERROR_FINAL = f"{INVOICE}; please pay it before the due date."
TOOL_ERROR = Scenario(
    name="tool_error",
    user_prompt="Show me invoice inv-77.",
    agents=(
        AgentSpec(
            name="billing_agent",
            instructions=_instructions(
                "You answer billing questions with get_invoice; fix your input on errors.",
                "tool_error",
            ),
            script=Script(
                "tool_error",
                (
                    Turn((ToolCall("get_invoice", {"invoice_id": "inv-77"}),)),
                    Turn((ToolCall("get_invoice", {"invoice_id": "INV-77"}),)),
                    Turn(text=TOOL_ERROR_FINAL),
                ),
            ),
            tools=("get_invoice",),
        ),
    ),
    is_loop=False,
    final_answer=TOOL_ERROR_FINAL,
    final_reuses=(INVOICE,),
    notes="the tool raises on its first call; the model retries with corrected arguments and "
    "the final answer reuses the successful result",
)

JSON_RESULT_FINAL = "Account AC-5521 belongs to Ingrid Bakke."
JSON_RESULT = Scenario(
    name="json_result",
    user_prompt="Who owns account AC-5521?",
    agents=(
        AgentSpec(
            name="account_agent",
            instructions=_instructions(
                "You answer account questions with get_account.", "json_result"
            ),
            script=Script(
                "json_result",
                (
                    Turn((ToolCall("get_account", {"account_id": "AC-5521"}),)),
                    Turn(text=JSON_RESULT_FINAL),
                ),
            ),
            tools=("get_account",),
        ),
    ),
    is_loop=False,
    final_answer=JSON_RESULT_FINAL,
    final_reuses=(),
    final_quotes=("AC-5521", "Ingrid Bakke"),
    notes="the tool returns a dict (each framework serializes it its own way); the final "
    "answer quotes one field of it",
)

FANOUT_FINAL = f"Oslo now: {WEATHER_OSLO}. Bergen now: {WEATHER_BERGEN}."
FANOUT = Scenario(
    name="fanout",
    user_prompt="Compare the weather in Oslo and Bergen right now.",
    agents=(
        AgentSpec(
            name="weather_agent",
            instructions=_instructions(
                "You report weather with get_weather, one call per city, in parallel.", "fanout"
            ),
            script=Script(
                "fanout",
                (
                    Turn(
                        (
                            ToolCall("get_weather", {"city": "Oslo"}),
                            ToolCall("get_weather", {"city": "Bergen"}),
                        )
                    ),
                    Turn(text=FANOUT_FINAL),
                ),
            ),
            tools=("get_weather",),
        ),
    ),
    is_loop=False,
    final_answer=FANOUT_FINAL,
    final_reuses=(WEATHER_OSLO, WEATHER_BERGEN),
    notes="the same one-argument tool twice in one model response with different arguments; "
    "the final answer quotes both results",
)

PREAMBLE_FIRST = "Let me check the weather in Bergen first."
PREAMBLE_SECOND = "Now I will look up tonight's aurora forecast."
PREAMBLE_FINAL = f"Yes, it is raining: {WEATHER_BERGEN}. And the sky: {AURORA_FACT}."
PREAMBLE = Scenario(
    name="preamble",
    user_prompt="Is it raining in Bergen, and will there be an aurora tonight?",
    agents=(
        AgentSpec(
            name="sky_agent",
            instructions=_instructions(
                "You answer weather and sky questions; say what you do before each tool.",
                "preamble",
            ),
            script=Script(
                "preamble",
                (
                    Turn((ToolCall("get_weather", {"city": "Bergen"}),), preamble=PREAMBLE_FIRST),
                    Turn((ToolCall("lookup_fact", {"topic": "aurora"}),), preamble=PREAMBLE_SECOND),
                    Turn(text=PREAMBLE_FINAL),
                ),
            ),
            tools=("get_weather", "lookup_fact"),
        ),
    ),
    is_loop=False,
    final_answer=PREAMBLE_FINAL,
    final_reuses=(WEATHER_BERGEN, AURORA_FACT),
    notes="each tool call comes with text in the same model response (\"Let me check...\"); "
    "the final answer is the last response's text and quotes both results",
)

NO_ARGS_FINAL = f"The booking server reports: {SERVER_TIME}."
NO_ARGS = Scenario(
    name="no_args",
    user_prompt="What time does the booking server have right now?",
    agents=(
        AgentSpec(
            name="ops_agent",
            instructions=_instructions("You answer with get_server_time.", "no_args"),
            script=Script(
                "no_args",
                (Turn((ToolCall("get_server_time", {}),)), Turn(text=NO_ARGS_FINAL)),
            ),
            tools=("get_server_time",),
        ),
    ),
    is_loop=False,
    final_answer=NO_ARGS_FINAL,
    final_reuses=(SERVER_TIME,),
    notes="a tool that takes no arguments, called once (arguments {}); the answer quotes it",
)

SEQUENTIAL_FINAL = f"Oslo first: {WEATHER_OSLO}. Then Bergen: {WEATHER_BERGEN}."
SEQUENTIAL = Scenario(
    name="sequential",
    user_prompt="Check the weather in Oslo, then in Bergen, one after the other.",
    agents=(
        AgentSpec(
            name="route_agent",
            instructions=_instructions(
                "You check the weather along a route with get_weather, one city per step.",
                "sequential",
            ),
            script=Script(
                "sequential",
                (
                    Turn((ToolCall("get_weather", {"city": "Oslo"}),)),
                    Turn((ToolCall("get_weather", {"city": "Bergen"}),)),
                    Turn(text=SEQUENTIAL_FINAL),
                ),
            ),
            tools=("get_weather",),
        ),
    ),
    is_loop=False,
    final_answer=SEQUENTIAL_FINAL,
    final_reuses=(WEATHER_OSLO, WEATHER_BERGEN),
    notes="the same tool in two consecutive model responses with different arguments (not a "
    "loop); the answer quotes both results",
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        LOOP,
        CLEAN,
        NESTED,
        RAG,
        PARALLEL,
        TOOL_ERROR,
        JSON_RESULT,
        FANOUT,
        PREAMBLE,
        NO_ARGS,
        SEQUENTIAL,
    )
}
# the scenarios added after the first captures (their drivers and capture.py list them)
NEW_SCENARIOS = (
    "parallel",
    "tool_error",
    "json_result",
    "fanout",
    "preamble",
    "no_args",
    "sequential",
)


def with_agent_call_arguments(scenario: Scenario, arguments: dict[str, Any]) -> Scenario:
    """The scenario with the sub-agent tool called with `arguments` instead.

    Frameworks give an agent used as a tool their own input schema (``input``, ``task``, ...).
    """
    agents = []
    for agent in scenario.agents:
        turns = tuple(
            Turn(
                tuple(
                    ToolCall(c.name, arguments) if c.name in agent.sub_agents else c
                    for c in t.tool_calls
                )
            )
            if t.tool_calls
            else t
            for t in agent.script.turns
        )
        agents.append(replace(agent, script=replace(agent.script, turns=turns)))
    return replace(scenario, agents=tuple(agents))


def expected_tool_calls(scenario: Scenario) -> list[dict[str, Any]]:
    """The tool calls the scripts ask for, in execution (start) order, with their results.

    A sub-agent used as a tool appears where it is called, followed by its own calls.
    """
    calls: list[dict[str, Any]] = []

    def walk(agent: AgentSpec) -> None:
        for turn in agent.script.turns:
            for call in turn.tool_calls:
                if call.name in agent.sub_agents:
                    sub = scenario.agent(call.name)
                    final = next(t.text for t in sub.script.turns if t.text is not None)
                    calls.append(
                        {
                            "agent": agent.name,
                            "name": call.name,
                            "arguments": call.arguments,
                            "result": final,
                            "kind": "agent",
                        }
                    )
                    walk(sub)
                else:
                    error = tool_error(call.name, **call.arguments)
                    entry = {
                        "agent": agent.name,
                        "name": call.name,
                        "arguments": call.arguments,
                        "result": error or tool_result(call.name, **call.arguments),
                        "kind": "function",
                    }
                    if error is not None:
                        entry["error"] = True
                    calls.append(entry)

    walk(scenario.main)
    return calls
