"""Shared helpers for router tests: run a graph and collect its node path and final state."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage

from toolstop.testing.routers import run_agent as run


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


__all__ = ["arun", "run"]
