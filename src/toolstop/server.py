"""The example agents exported for LangGraph Server (see `langgraph.json`).

`graph` is the hand-built graph and `agent` is `create_agent` + `StopOnArtifact`, both around
the seed article's search tool. Neither has a checkpointer: the server brings its own (in memory
under `langgraph dev`, PostgreSQL in a deployment). The model is `TOOLSTOP_MODEL`
(`PROVIDER:NAME`, with the provider's API key in the environment) or, without it, a simulated
model that calls the search tool and answers, so the server runs with no key at all.
"""

from __future__ import annotations

import os
from typing import Any

from toolstop.bench.workload import SimulatedChatModel
from toolstop.examples.search import make_search_tool
from toolstop.graph import build_react_graph
from toolstop.models import chat_model
from toolstop.testing.routers import has_agents

__all__ = ["agent", "graph"]

PROMPT = "Answer with the search tool. Call it with the user's question."


def _model() -> Any:
    spec = os.environ.get("TOOLSTOP_MODEL")
    if spec:
        return chat_model(spec, base_url=os.environ.get("TOOLSTOP_BASE_URL"))
    return SimulatedChatModel(tool_names=("search",))


def _tools() -> list[Any]:
    return [make_search_tool(force_outcome="success")]


graph = build_react_graph(_model(), _tools(), prompt=PROMPT, name="toolstop-graph")

if has_agents():
    from langchain.agents import create_agent

    from toolstop.middleware import StopOnArtifact

    agent = create_agent(
        _model(),
        _tools(),
        system_prompt=PROMPT,
        middleware=[StopOnArtifact()],
        name="toolstop-agent",
    )
