"""The three routers behind one interface, so one scenario runs on each; and `run_agent`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.errors import GraphBubbleUp
from langgraph.pregel import Pregel

from toolstop._compat import has_agents
from toolstop.graph import build_react_graph
from toolstop.legacy import create_react_agent
from toolstop.policy import StopPolicy
from toolstop.tools import tool_error_text

__all__ = [
    "ROUTERS",
    "Router",
    "arun_agent",
    "available_routers",
    "has_agents",
    "in_new_loop",
    "resumable",
    "run_agent",
]

Builder = Callable[..., Any]
"""`build(model, tools, *, policy, checkpointer) -> compiled graph`."""


def _tool_errors_to_model() -> Any:
    """langchain's own middleware that returns a tool's exception to the model as an error.

    `ToolErrorMiddleware` exists from langchain 1.3.14. Before it, `ToolRetryMiddleware` with
    no retries and an `on_failure` formatter does the same (present since langchain 1.0); the
    content is the same text either way, so the goldens hold on every version. Below langchain
    1.3.12 `ToolRetryMiddleware` also catches LangGraph's interrupts (`GraphBubbleUp`) raised in
    a tool and would answer a human-in-the-loop `interrupt()` with an error message;
    `_error_text` raises them again.
    """
    try:
        from langchain.agents.middleware import ToolErrorMiddleware
    except ImportError:  # langchain < 1.3.14
        from langchain.agents.middleware import ToolRetryMiddleware

        return ToolRetryMiddleware(max_retries=0, on_failure=_error_text)
    return ToolErrorMiddleware(on_error=lambda error, request: _error_text(error))


def _error_text(error: Exception) -> str:
    """The error ToolMessage's content for a tool's exception (as on the hand-built graph:
    `toolstop.tools.tool_error_text`); interrupts propagate."""
    if isinstance(error, GraphBubbleUp):
        raise error
    return tool_error_text(error)


def _graph(
    model: Any, tools: Sequence[Any], *, policy: StopPolicy | None, checkpointer: Any
) -> Any:
    return build_react_graph(model, list(tools), policy=policy, checkpointer=checkpointer)


def _legacy(
    model: Any, tools: Sequence[Any], *, policy: StopPolicy | None, checkpointer: Any
) -> Any:
    return create_react_agent(model, list(tools), policy=policy, checkpointer=checkpointer)


def _middleware(
    model: Any,
    tools: Sequence[Any],
    *,
    policy: StopPolicy | None,
    checkpointer: Any,
    middleware: Sequence[Any] = (),
) -> Any:
    from langchain.agents import create_agent

    from toolstop.middleware import StopOnArtifact

    # The documented recipe: langchain's own middleware returns tool exceptions to the model.
    stack: list[Any] = [*middleware, _tool_errors_to_model(), StopOnArtifact(policy)]
    return create_agent(model, list(tools), middleware=stack, checkpointer=checkpointer)


@dataclass(frozen=True, kw_only=True)
class Router:
    """One way to build an agent, and the names its nodes have.

    Attributes:
        name: `graph`, `middleware`, `legacy`, or a name of your own.
        build: `build(model, tools, *, policy, checkpointer)` returning a compiled graph.
        model_node: The node that calls the model.
        stop_node: The node that relays a stop.
        polish_node: The node that narrates a stop in polish mode.
        end_nodes: Nodes that end every run, after its final answer (the middleware's
            `after_agent` hook).
        takes_middleware: Whether `build` takes `middleware=[...]` (`create_agent` middleware
            to run next to toolstop's); scenarios with middleware run only on such routers.
        skips: Names of scenarios that do not apply to this router (it has no such budget).
    """

    name: str
    build: Builder
    model_node: str
    stop_node: str
    polish_node: str
    end_nodes: tuple[str, ...] = ()
    takes_middleware: bool = False
    skips: tuple[str, ...] = ()

    def path(self, *steps: str) -> list[str]:
        """Node names of a whole run from abstract steps.

        The steps are `model`, `tools`, `stop` (the relay) and `polish`; the router's `end_nodes`
        follow."""
        names = {"model": self.model_node, "stop": self.stop_node, "polish": self.polish_node}
        return [names.get(step, step) for step in steps] + list(self.end_nodes)


GRAPH = Router(
    name="graph", build=_graph, model_node="agent", stop_node="finalize", polish_node="polish"
)
LEGACY = Router(
    name="legacy", build=_legacy, model_node="agent", stop_node="finalize", polish_node="polish"
)
MIDDLEWARE = Router(
    name="middleware",
    build=_middleware,
    model_node="model",
    stop_node="model",
    polish_node="model",
    end_nodes=("StopOnArtifact.after_agent",),
    takes_middleware=True,
)
ROUTERS = {router.name: router for router in (GRAPH, MIDDLEWARE, LEGACY)}
"""toolstop's routers by name (`graph`, `middleware`, `legacy`)."""


def available_routers() -> list[Router]:
    """The routers the installed versions can run (`middleware` needs langchain>=1.2.9)."""
    return [r for r in ROUTERS.values() if r is not MIDDLEWARE or has_agents()]


def run_agent(
    agent: Any,
    question: str = "q",
    config: dict[str, Any] | None = None,
    *,
    resume: Any = None,
) -> tuple[list[str], dict[str, Any]]:
    """Stream one run; return the node path and the final state values.

    create_agent runs each tool call of a turn as its own task (`Send`), so one tools step
    reports one update per call; the path shows a step once, whatever number of tasks it ran.
    With `resume`, the thread's interrupted run is resumed with `Command(resume=resume)`
    instead of asking `question` (an interrupt shows as `__interrupt__` in the path). An agent
    that is not a LangGraph graph (anything else with `invoke`) is invoked; its path is empty.
    """
    path: list[str] = []
    inputs: Any = {"messages": [HumanMessage(content=question)]}
    if resume is not None:
        from langgraph.types import Command

        inputs = Command(resume=resume)
    if not isinstance(agent, Pregel):  # an agent of your own with invoke(): no node path
        return path, dict(agent.invoke(inputs, config))
    graph: Any = agent
    levels = _Levels()
    for namespace, mode, chunk in graph.stream(
        inputs, config, stream_mode=["updates", "values"], subgraphs=True
    ):
        levels.collect(namespace, mode, chunk)
    return levels.router_level()


async def arun_agent(
    agent: Any,
    question: str = "q",
    config: dict[str, Any] | None = None,
    *,
    resume: Any = None,
) -> tuple[list[str], dict[str, Any]]:
    """`run_agent`, through `astream` (or `ainvoke` for an agent that is not a LangGraph graph)."""
    path: list[str] = []
    inputs: Any = {"messages": [HumanMessage(content=question)]}
    if resume is not None:
        from langgraph.types import Command

        inputs = Command(resume=resume)
    if not isinstance(agent, Pregel):
        return path, dict(await agent.ainvoke(inputs, config))
    graph: Any = agent
    levels = _Levels()
    async for namespace, mode, chunk in graph.astream(
        inputs, config, stream_mode=["updates", "values"], subgraphs=True
    ):
        levels.collect(namespace, mode, chunk)
    return levels.router_level()


class _Levels:
    """The node path and latest values of each level of a run: the graph's own, and each
    subgraph's (a toolstop agent compiled into a parent graph as a node, by namespace)."""

    def __init__(self) -> None:
        self.paths: dict[tuple[str, ...], list[str]] = {(): []}
        self.values: dict[tuple[str, ...], dict[str, Any]] = {(): {}}
        self.router: tuple[str, ...] | None = None  # the last subgraph that held a record

    def collect(self, namespace: tuple[str, ...], mode: str, chunk: Any) -> None:
        """Extend the level's path with an update's nodes (a step once), or keep its values."""
        path = self.paths.setdefault(namespace, [])
        if mode == "updates":
            path.extend(node for node in chunk if not path or path[-1] != node)
            return
        self.values[namespace] = dict(chunk)
        if namespace and "stop_record" in chunk:
            self.router = namespace

    def router_level(self) -> tuple[list[str], dict[str, Any]]:
        """The path and final values of the graph; of the subgraph whose router left a
        `stop_record` when the graph's own state has none (a parent graph whose node is the
        toolstop agent: its record is checked where it was written)."""
        if "stop_record" in self.values[()] or self.router is None:
            return self.paths[()], self.values[()]
        return self.paths[self.router], self.values[self.router]


def resumable(agent: Any) -> bool:
    """True when `agent` keeps state a run can be resumed from (a checkpointer and `get_state`)."""
    return getattr(agent, "checkpointer", None) is not None and hasattr(agent, "get_state")


def in_new_loop(coroutine: Any) -> Any:
    """Run `coroutine` to completion, in a thread of its own when an event loop is running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
