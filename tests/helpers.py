"""Shared helpers for router tests: run a graph and collect its node path and final state.

create_agent runs each tool call of a turn as its own task (`Send`), so one tools step reports
one update per call; the path shows a step once, whatever number of tasks it ran.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage


def run(
    graph: Any, question: str = "q", config: dict[str, Any] | None = None
) -> tuple[list[str], dict[str, Any]]:
    """Stream one run; return the node path and the final state values."""
    path: list[str] = []
    final: dict[str, Any] = {}
    inputs = {"messages": [HumanMessage(content=question)]}
    for mode, chunk in graph.stream(inputs, config, stream_mode=["updates", "values"]):
        if mode == "updates":
            path.extend(n for n in chunk if not path or path[-1] != n)
        else:
            final = chunk
    return path, final


async def arun(
    graph: Any, question: str = "q", config: dict[str, Any] | None = None
) -> tuple[list[str], dict[str, Any]]:
    """`run`, through `astream`."""
    path: list[str] = []
    final: dict[str, Any] = {}
    inputs = {"messages": [HumanMessage(content=question)]}
    async for mode, chunk in graph.astream(inputs, config, stream_mode=["updates", "values"]):
        if mode == "updates":
            path.extend(n for n in chunk if not path or path[-1] != n)
        else:
            final = chunk
    return path, final
