"""LangGraph prebuilt agents with langchain-openai, traced by OpenInference or Traceloop.

    --agent react          langgraph.prebuilt.create_react_agent
    --agent create_agent   langchain.agents.create_agent
    --agent chain          (rag only) an LCEL chain: in-memory vector-store retriever, prompt,
                           ChatOpenAI, string parser
    --instrumentation openinference | traceloop

`nested`: the coordinator's tool ``research_agent`` is a function that invokes a second agent
graph (the agents-as-tools pattern).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from _common import (
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
warnings.simplefilter("ignore")  # create_react_agent's deprecation notice

from fake_llm import EMBEDDING_DIM, embed_text  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnablePassthrough  # noqa: E402
from langchain_core.tools import StructuredTool, ToolException  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from scenarios import NEW_SCENARIOS, RAG_DOCUMENTS, Scenario  # noqa: E402

MODEL_ID = "gpt-4o-mini"
OPTIONS: dict[str, str] = {}
STORES: list[InMemoryVectorStore] = []


class HashedBagOfWordsEmbeddings(Embeddings):
    """Deterministic local embedding: texts sharing words land near each other."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [embed_text(t, EMBEDDING_DIM) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return embed_text(text, EMBEDDING_DIM)


def chat_model(base_url: str) -> ChatOpenAI:
    return ChatOpenAI(
        model=MODEL_ID,
        base_url=base_url,
        api_key="sk-fake-capture-key",
        temperature=0.0,
        max_retries=0,
        timeout=30,
    )


def make_agent(scenario: Scenario, name: str, base_url: str, extra: list[Any]) -> Any:
    spec = scenario.agent(name)
    # a failing tool raises ToolException, which LangChain hands to the model as an error result
    tools = [
        StructuredTool.from_function(f, handle_tool_error=True) for f in tools_for(scenario, name)
    ] + extra
    if OPTIONS["agent"] == "react":
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(
            chat_model(base_url), tools, prompt=spec.instructions, name=spec.name
        )
    from langchain.agents import create_agent

    return create_agent(
        chat_model(base_url), tools, system_prompt=spec.instructions, name=spec.name
    )


def agent_tool(scenario: Scenario, name: str, base_url: str) -> StructuredTool:
    inner = make_agent(scenario, name, base_url, [])

    def research_agent(query: str) -> str:
        """Ask the research agent a question; it looks facts up and reports briefly."""
        index = TOOL_LOG.start(name, {"query": query}, kind="agent")
        state = inner.invoke({"messages": [("user", query)]})
        return TOOL_LOG.finish(index, str(state["messages"][-1].content))

    return StructuredTool.from_function(research_agent, name=name)


def run_rag(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    retrieved: list[dict[str, Any]] = []

    def format_documents(documents: list[Document]) -> str:
        retrieved.extend({"document": d.id, "text": d.page_content} for d in documents)
        return "\n\n".join(d.page_content for d in documents)

    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", scenario.main.instructions + "\n\nContext:\n{context}"),
            ("human", "{question}"),
        ]
    )
    retriever = STORES[0].as_retriever(search_kwargs={"k": 1})
    chain = (
        {"context": retriever | RunnableLambda(format_documents), "question": RunnablePassthrough()}
        | prompt
        | chat_model(base_url)
        | StrOutputParser()
    )
    answer = chain.invoke(scenario.user_prompt)
    return answer, {
        "retrievals": [{"query": scenario.user_prompt, "documents": retrieved}],
        "agents": [],
    }


def run_one(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    if scenario.name == "rag":
        return run_rag(scenario, base_url)
    extra = [agent_tool(scenario, sub, base_url) for sub in scenario.main.sub_agents]
    agent = make_agent(scenario, scenario.main.name, base_url, extra)
    state = agent.invoke({"messages": [("user", scenario.user_prompt)]})
    return str(state["messages"][-1].content), {}


def instrument(capture: Capture, which: str) -> None:
    if which == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=capture.tracer_provider)
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=capture.tracer_provider)


def main() -> None:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--agent", choices=["react", "create_agent", "chain"], required=True)
    own.add_argument("--instrumentation", choices=["openinference", "traceloop"], required=True)
    ns, rest = own.parse_known_args()
    OPTIONS.update(agent=ns.agent)
    sys.argv[1:] = rest
    args = parse_args(
        ["rag"] if ns.agent == "chain" else ["loop", "clean", "nested", *NEW_SCENARIOS]
    )
    TOOL_LOG.error_type = ToolException
    capture = Capture(f"capture-langgraph-{ns.instrumentation}")
    instrument(capture, ns.instrumentation)
    if ns.agent == "chain":
        store = InMemoryVectorStore(embedding=HashedBagOfWordsEmbeddings())
        store.add_texts(list(RAG_DOCUMENTS.values()), ids=list(RAG_DOCUMENTS))
        STORES.append(store)
    run_scenarios(args, capture, run_one)


if __name__ == "__main__":
    main()
