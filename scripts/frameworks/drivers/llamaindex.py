"""LlamaIndex FunctionAgent (llama-index-llms-openai) and a RAG query engine, traced by
openinference-instrumentation-llama-index.

`nested`: the coordinator's tool ``research_agent`` is an async function that runs a second
FunctionAgent (LlamaIndex's agents-as-tools pattern). `rag`: a VectorStoreIndex over three
in-memory documents with a local hashed bag-of-words embedding (no embedding server), queried
through ``as_query_engine`` (retrieve, then one LLM call with the context).
"""

from __future__ import annotations

import asyncio
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

from fake_llm import EMBEDDING_DIM, embed_text  # noqa: E402
from llama_index.core import Document, Settings, VectorStoreIndex  # noqa: E402
from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.embeddings import BaseEmbedding  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from llama_index.llms.openai import OpenAI  # noqa: E402
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor  # noqa: E402
from scenarios import NEW_SCENARIOS, RAG_DOCUMENTS, Scenario  # noqa: E402

MODEL_ID = "gpt-4o-mini"
# one loop for every scenario: clients made in a run are closed on the loop they were made on
LOOP = asyncio.new_event_loop()


class HashedBagOfWordsEmbedding(BaseEmbedding):
    """Deterministic local embedding: texts sharing words land near each other."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return embed_text(query, EMBEDDING_DIM)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return embed_text(query, EMBEDDING_DIM)

    def _get_text_embedding(self, text: str) -> list[float]:
        return embed_text(text, EMBEDDING_DIM)


def llm(base_url: str) -> OpenAI:
    return OpenAI(
        model=MODEL_ID,
        api_base=base_url,
        api_key="sk-fake-capture-key",
        temperature=0.0,
        max_retries=0,
        timeout=30,
    )


def make_agent(scenario: Scenario, name: str, base_url: str, extra: list[Any]) -> FunctionAgent:
    spec = scenario.agent(name)
    return FunctionAgent(
        name=spec.name,
        description=f"The {spec.name} agent.",
        system_prompt=spec.instructions,
        tools=[FunctionTool.from_defaults(fn=f) for f in tools_for(scenario, name)] + extra,
        llm=llm(base_url),
    )


def agent_tool(scenario: Scenario, name: str, base_url: str) -> FunctionTool:
    inner = make_agent(scenario, name, base_url, [])

    async def research_agent(query: str) -> str:
        """Ask the research agent a question; it looks facts up and reports briefly.

        Args:
            query: The question for the research agent.
        """
        index = TOOL_LOG.start(name, {"query": query}, kind="agent")
        result = await inner.run(user_msg=query)
        return TOOL_LOG.finish(index, str(result.response.content or ""))

    return FunctionTool.from_defaults(async_fn=research_agent, name=name)


async def run_agent(scenario: Scenario, base_url: str) -> str:
    extra = [agent_tool(scenario, sub, base_url) for sub in scenario.main.sub_agents]
    agent = make_agent(scenario, scenario.main.name, base_url, extra)
    result = await agent.run(user_msg=scenario.user_prompt)
    return str(result.response.content or "")


INDEXES: list[VectorStoreIndex] = []


def build_index() -> VectorStoreIndex:
    documents = [Document(text=text, id_=doc_id) for doc_id, text in RAG_DOCUMENTS.items()]
    return VectorStoreIndex.from_documents(documents, embed_model=Settings.embed_model)


def run_rag(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    engine = INDEXES[0].as_query_engine(llm=llm(base_url), similarity_top_k=1)
    response = engine.query(scenario.user_prompt)
    retrieved = [
        {
            "document": node.node.ref_doc_id,
            "text": node.node.get_content(),
            "score": round(float(node.score or 0.0), 6),
        }
        for node in response.source_nodes
    ]
    return str(response), {
        "retrievals": [{"query": scenario.user_prompt, "documents": retrieved}],
        "agents": [],
    }


def run_one(scenario: Scenario, base_url: str) -> tuple[str, dict[str, Any]]:
    if scenario.name == "rag":
        return run_rag(scenario, base_url)
    return LOOP.run_until_complete(run_agent(scenario, base_url)), {}


def main() -> None:
    args = parse_args(["loop", "clean", "nested", "rag", *NEW_SCENARIOS])
    Settings.embed_model = HashedBagOfWordsEmbedding(model_name="hashed-bag-of-words")
    capture = Capture("capture-llamaindex")
    LlamaIndexInstrumentor().instrument(tracer_provider=capture.tracer_provider)
    # indexing is set-up, not the query: its spans (their own traces) are dropped before the
    # rag scenario starts, so its capture is the query's one trace
    INDEXES.append(build_index())
    run_scenarios(args, capture, run_one)


if __name__ == "__main__":
    main()
