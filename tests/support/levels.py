"""A toolstop agent compiled into a parent graph, shared by the check and bench tests of
parent graphs (tests/test_check_levels.py, tests/test_bench_levels.py)."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

from toolstop import Outcome, build_react_graph, signal


@tool(response_format="content_and_artifact")
def fetch(n: int) -> tuple[str, dict[str, Any]]:
    """Fetch a numbered page."""
    return "page", signal(Outcome.COMPLETED)


@tool(response_format="content_and_artifact")
def lookup(q: str) -> tuple[str, dict[str, Any]]:
    """Look a word up."""
    return "word", signal(Outcome.COMPLETED)


def parent_of(agent: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("support", agent)
    builder.add_edge(START, "support")
    builder.add_edge("support", END)
    return builder.compile()


def hand_built(model: Any, tools: list[Any], policy: Any) -> Any:
    return build_react_graph(model, tools, policy=policy)


def hand_built_in_a_parent(model: Any, tools: list[Any], policy: Any) -> Any:
    return parent_of(build_react_graph(model, tools, policy=policy))


TOOLS = [fetch, lookup]


def supervisor_of_workers(model: Any, tools: list[Any], policy: Any) -> Any:
    """A supervisor whose one tool is a worker (`subagent_tool`) built from `tools`: the
    supervisor's own model never sees `tools`."""
    from toolstop import subagent_tool

    worker = build_react_graph(model, tools, policy=policy)
    helper = subagent_tool(worker, name="worker", description="Fetches pages, looks words up.")
    return build_react_graph(model, [helper], policy=policy)
