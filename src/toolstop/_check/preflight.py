"""Before any scenario: build the agent once and read its graph (`_preflight`).

What the graph shows of StopOnArtifact (`_stop_status`), the middleware it already has, what the
check cannot see in it (a tools node that is a function), and which of your tools the check
stands in for (`stand_in_summary`). The graph is read through each object's own attributes,
never a `__getattr__` (`RunnableWithFallbacks` forwards one to the runnable it wraps, and that
can raise).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.pregel import Pregel

from toolstop._check.factory import AgentFactory
from toolstop.errors import ToolstopConfigError
from toolstop.policy import StopPolicy
from toolstop.testing.scripted import ScriptedChatModel
from toolstop.testing.stand_ins import stand_in
from toolstop.tools import find_tool_node

__all__ = ["refuse_tools_not_offered", "stand_in_summary"]

_CALLED_AGAIN_HINT = (
    " (the model was called again where the scenario's tool result stops the run: is "
    "StopOnArtifact(policy) in your create_agent middleware?)"
)

_POLICY_DROPPED_HINT = (
    " (the model was called again where the scenario's tool result stops the run under the "
    "policy the check passed; your StopOnArtifact was built without it: pass it on, "
    "StopOnArtifact(policy))"
)


_PREFLIGHT_POLICY = StopPolicy(mode="polish", parallel="any")
"""The policy of the first build: not the default, so a StopOnArtifact built without the
policy it is given shows (`_stop_status`)."""


def _levels(nodes: dict[str, Any], depth: int = 3) -> list[dict[str, Any]]:
    """`nodes`, then the nodes of each subgraph node (`depth` levels down): a parent graph whose
    node is the toolstop agent (compiled create_agent or build_react_graph)."""
    found = [nodes]
    for node in nodes.values():
        bound = _own(node, "bound")
        inner = getattr(bound, "nodes", None) if isinstance(bound, Pregel) else None
        if depth > 0 and isinstance(inner, dict):
            found += _levels(inner, depth - 1)
    return found


def _stop_status(nodes: dict[str, Any]) -> str:
    """`_level_status` of the graph, or of the first subgraph node that tells something."""
    for level in _levels(nodes):
        status = _level_status(level)
        if status:
            return status
    return ""


def _level_status(nodes: dict[str, Any]) -> str:
    """What the graph's nodes show of StopOnArtifact: `missing` (a create_agent graph without
    it), `policy-dropped` (built with another policy than `_PREFLIGHT_POLICY`), `present`, or
    `no-router` (a hand-built graph with a tools node and no toolstop router) or `""` (nothing
    to tell)."""
    found: list[Any] = []
    try:
        from toolstop.middleware import StopOnArtifact
    except ImportError:  # langchain missing or before 1.2.9: no create_agent graph to read
        create_agent_graph = False
    else:
        create_agent_graph = "model" in nodes and "tools" in nodes
        for node in nodes.values():
            bound = _own(node, "bound")
            for func in (_own(bound, "func"), _own(bound, "afunc")):
                owner = getattr(func, "__self__", None)
                if isinstance(owner, StopOnArtifact):
                    found.append(owner)
    if found:
        same = all(m.policy == _PREFLIGHT_POLICY for m in found)
        return "present" if same else "policy-dropped"
    if create_agent_graph:
        return "missing"
    if "model" in nodes and "tools" in nodes:
        return ""  # create_agent's shape, but no StopOnArtifact here to tell it by
    holds_tools = any(find_tool_node(_own(node, "bound")) is not None for node in nodes.values())
    return "no-router" if holds_tools and "finalize" not in nodes else ""


def _own(thing: Any, name: str) -> Any:
    """`thing`'s own attribute `name`, or None: never through a `__getattr__`
    (`RunnableWithFallbacks` forwards it to the runnable it wraps, and that can raise)."""
    try:
        return inspect.getattr_static(thing, name, None)
    except Exception:  # an object whose attribute lookup raises: nothing to tell
        return None


_NO_ROUTER_HINT = (
    " (the model was called again where the scenario's tool result stops the run: your graph "
    "runs a tools node without a toolstop router; build it with build_react_graph(model, "
    "tools_node, policy=policy, prompt=...), which takes your ToolNode as it is)"
)

_STOP_HINTS = {
    "missing": _CALLED_AGAIN_HINT,
    "policy-dropped": _POLICY_DROPPED_HINT,
    "no-router": _NO_ROUTER_HINT,
}
"""The hint after a model call past the script, by `_stop_status`."""


def _preflight(
    factory: AgentFactory, tools: Sequence[BaseTool]
) -> tuple[frozenset[str], str, list[str]]:
    """Build the agent once before any scenario: a factory that cannot build, or that ignores the
    tools it is given, is one sentence instead of a breach in every row. Returns the names of
    the middleware the agent has (from its graph's `Name.hook` nodes), what its graph shows
    of StopOnArtifact (`_stop_status`) and what the check cannot see in it (`AgentCheck.notes`)."""
    stand_ins = []
    for tool in tools:
        copy = stand_in(tool, ("", None))
        copy.return_direct = False  # a return_direct tool is a breach of its own, per scenario
        stand_ins.append(copy)
    agent = factory.build_or_refuse(ScriptedChatModel([]), stand_ins, _PREFLIGHT_POLICY)
    yours = {id(t) for t in tools}
    nodes = getattr(agent, "nodes", None) if isinstance(agent, Pregel) else None
    for node in (n for level in _levels(dict(nodes or {})) for n in level.values()):
        tool_node = find_tool_node(_own(node, "bound"))
        held = tool_node.tools_by_name if tool_node is not None else {}
        own = [name for name, t in held.items() if id(t) in yours]
        if own:
            msg = (
                f"--agent {factory.name} builds with its own tools ({', '.join(own)}) instead of "
                "the `tools` it is given: the check would run your real tools; build the agent "
                "from the `tools` argument"
            )
            raise ToolstopConfigError(msg)
    refuse_tools_not_offered(agent, tools, factory.name, "check")
    names = frozenset(
        name.split(".", 1)[0]
        for level in _levels(dict(nodes or {}))
        for name in level
        if "." in name
    )
    return names, _stop_status(dict(nodes or {})), _unseen(agent, dict(nodes or {}))


def refuse_tools_not_offered(
    agent: Any, tools: Sequence[BaseTool], name: str, command: str
) -> None:
    """Refuse an agent whose tool nodes do not offer the tools the command's model calls.

    `check` and `bench` call the tools they are given from the model of the agent the factory
    builds: an agent that hands them to sub-agents instead (a supervisor whose tools are
    `subagent_tool`s, Deep Agents' subagents) answers each call with "not a valid tool", and
    every breach or failed run would blame the router. An agent with no ToolNode to read is
    let through (`_unseen` says what the check cannot see).

    Raises:
        ToolstopConfigError: A ToolNode was found and some given tool is in none of them.
    """
    nodes = getattr(agent, "nodes", None) if isinstance(agent, Pregel) else None
    offered: set[str] = set()
    seen = False
    for node in (n for level in _levels(dict(nodes or {})) for n in level.values()):
        tool_node = find_tool_node(_own(node, "bound"))
        if tool_node is not None:
            seen = True
            offered.update(tool_node.tools_by_name)
    missing = [t.name for t in tools if t.name not in offered]
    if not seen or not missing:
        return
    msg = (
        f"--agent {name} does not offer {', '.join(missing)} to its model (its tools: "
        f"{', '.join(sorted(offered)) or 'none'}): toolstop {command} has the model of the agent "
        "the factory builds call the tools it is given, so every run would fail on a tool that "
        "does not exist there. An agent whose tools are sub-agents (subagent_tool, Deep Agents' "
        "subagents) is checked one level at a time: give --agent a factory per level, each "
        "building its level from the `tools` it is given (docs/cli.md, Parent graphs)"
    )
    raise ToolstopConfigError(msg)


def _holds_a_tool_node(nodes: dict[str, Any]) -> bool:
    """True when a node, or a node of a subgraph node (`_levels`), is a ToolNode."""
    return any(
        find_tool_node(_own(node, "bound")) is not None
        for level in _levels(nodes)
        for node in level.values()
    )


def _unseen(agent: Any, nodes: dict[str, Any]) -> list[str]:
    """What the check cannot see in the agent, a sentence each (`AgentCheck.notes`)."""
    if not nodes:
        return [
            f"your agent is a {type(agent).__name__}, not a compiled LangGraph graph: the check "
            "cannot see its nodes, so it cannot tell whether it runs the tools it is given"
        ]
    if _holds_a_tool_node(nodes):
        return []
    return [
        "no node of your graph is a ToolNode (or one wrapped by with_fallbacks, with_config or "
        "with_retry): the check cannot see which tools your graph runs; the stand-ins are "
        "called only if it runs the `tools` your factory is given"
    ]


def stand_in_summary(tools: Sequence[BaseTool]) -> dict[str, list[str]]:
    """Which of your tools the check stood in for, and what their declaration tells.

    Returns `{"stand_ins": [...], "signal": [...], "plain": [...]}`: every tool (the check ran a
    stand-in of each, never the tool); those declared `response_format="content_and_artifact"`,
    which can signal in their own code (whether they do, only their code tells); and the others,
    whose results go back to the model as text and never stop a run.
    """
    signal_ = [t.name for t in tools if t.response_format == "content_and_artifact"]
    return {
        "stand_ins": [t.name for t in tools],
        "signal": signal_,
        "plain": [t.name for t in tools if t.name not in signal_],
    }
