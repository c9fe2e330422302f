"""The three routers behind one interface, so one scenario table runs on each of them."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolstop import StopPolicy, build_react_graph
from toolstop.legacy import create_react_agent

try:
    HAS_AGENTS = importlib.util.find_spec("langchain.agents") is not None
except ModuleNotFoundError:  # no langchain at all (the legacy environment)
    HAS_AGENTS = False


@dataclass(frozen=True)
class Router:
    """How to build one router and what its node names are."""

    name: str
    model_node: str
    stop_node: str
    polish_node: str

    def build(
        self,
        model: Any,
        tools: Sequence[Any],
        *,
        policy: StopPolicy | None = None,
        checkpointer: Any = None,
    ) -> Any:
        if self.name == "graph":
            return build_react_graph(model, tools, policy=policy, checkpointer=checkpointer)
        if self.name == "legacy":
            return create_react_agent(model, tools, policy=policy, checkpointer=checkpointer)
        from langchain.agents import create_agent
        from langchain.agents.middleware import ToolErrorMiddleware

        from toolstop import StopOnArtifact

        # the documented recipe: langchain's own middleware returns tool exceptions to the model
        errors = ToolErrorMiddleware(on_error=lambda error, request: f"Error: {error!r}")
        middleware = [errors, StopOnArtifact(policy)]
        return create_agent(model, list(tools), middleware=middleware, checkpointer=checkpointer)

    def path(self, *steps: str) -> list[str]:
        """Node names for abstract steps: `model`, `tools`, `stop` (the relay), `polish`."""
        names = {"model": self.model_node, "stop": self.stop_node, "polish": self.polish_node}
        return [names.get(step, step) for step in steps]


GRAPH = Router("graph", "agent", "finalize", "polish")
LEGACY = Router("legacy", "agent", "finalize", "polish")
MIDDLEWARE = Router("middleware", "model", "model", "model")
ROUTERS = [GRAPH, LEGACY, *([MIDDLEWARE] if HAS_AGENTS else [])]
