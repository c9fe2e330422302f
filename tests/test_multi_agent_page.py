"""docs/multi-agent.md: each pattern's model calls per level, as the scripted models count them."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deepagents", reason="needs the `deepagents` extra (multi-agent stack)")
pytest.importorskip("langgraph_supervisor", reason="needs the `langgraph-supervisor` extra")
pytest.importorskip("langgraph_swarm", reason="needs the `swarm` extra (langgraph-swarm)")

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from toolstop import StopOnArtifact, StopPolicy, signal, subagent_tool
from toolstop.testing import ScriptedChatModel, call, forced_tool, turn

pytestmark = pytest.mark.multiagent

PAGE = Path(__file__).parent.parent / "docs" / "multi-agent.md"
ROW = re.compile(r"^\| (.+?) \| (\d+) \(([\d + ]+)\) \| (\d+) \(([\d + ]+)\) \|$", flags=re.M)
QUESTION = {"messages": [HumanMessage("When is my refund due?")]}


def _search(name: str = "search") -> Any:
    return forced_tool(name, ("Refunds take 5 days.", signal("completed")))


def _script(first: Any, hard: bool, answer: str = "5 days.") -> ScriptedChatModel:
    """A level's model: its tool call, then (never mode) the answer that restates the result."""
    return ScriptedChatModel([first] if hard else [first, answer])


def _worker(hard: bool, name: str = "worker") -> tuple[Any, ScriptedChatModel]:
    model = _script(call(f"{name}_search"), hard)
    policy = StopPolicy(mode="hard" if hard else "never")
    agent = create_agent(model, [_search(f"{name}_search")], middleware=[StopOnArtifact(policy)])
    return agent, model


def _top(
    tools: list[Any], first: Any, hard: bool, *, restates: bool = False, **kwargs: Any
) -> tuple[Any, Any]:
    model = _script(first, hard and not restates)
    policy = StopPolicy(mode="hard" if hard else "never")
    return create_agent(model, tools, middleware=[StopOnArtifact(policy)], **kwargs), model


def plain_tool(hard: bool) -> list[ScriptedChatModel]:
    worker, inner = _worker(hard)

    @tool
    def ask_worker(request: str) -> str:
        """Ask the refunds worker."""
        return str(worker.invoke({"messages": [HumanMessage(request)]})["messages"][-1].content)

    # a plain tool forwards nothing: the parent restates in any mode
    parent, top = _top([ask_worker], call("ask_worker", request="q"), hard, restates=True)
    parent.invoke(QUESTION)
    return [top, inner]


def as_subagent_tool(hard: bool) -> list[ScriptedChatModel]:
    worker, inner = _worker(hard)
    tool_ = subagent_tool(worker, name="worker", description="Refund questions.")
    parent, top = _top([tool_], call("worker", request="q"), hard)
    parent.invoke(QUESTION)
    return [top, inner]


def deep_agents(hard: bool) -> list[ScriptedChatModel]:
    from deepagents import create_deep_agent

    policy = StopPolicy(mode="hard" if hard else "never")
    top = _script(call("task", description="refund time?", subagent_type="worker"), hard)
    inner = _script(call("search"), hard)
    spec = {
        "name": "worker",
        "description": "Refund questions.",
        "system_prompt": "Use search.",
        "tools": [_search()],
        "model": inner,
        "middleware": [StopOnArtifact(policy)],
    }
    agent = create_deep_agent(
        model=top,
        tools=[],
        middleware=[StopOnArtifact(policy)],
        subagents=[spec],  # type: ignore[list-item]
    )
    agent.invoke(QUESTION)
    return [top, inner]


def create_supervisor(hard: bool) -> list[ScriptedChatModel]:
    from langgraph_supervisor import create_supervisor as build

    worker, inner = _worker(hard)
    worker.name = "worker"
    top = ScriptedChatModel([call("transfer_to_worker"), "5 days."])  # restates in any mode
    build([worker], model=top).compile().invoke(QUESTION)
    return [top, inner]


def supervisor_of_tools(hard: bool) -> list[ScriptedChatModel]:
    worker, inner = _worker(hard)
    tool_ = subagent_tool(worker, name="worker", description="Refund questions.")
    parent, top = _top([tool_], call("worker", request="q"), hard, name="supervisor")
    parent.invoke(QUESTION)
    return [top, inner]


def two_workers(hard: bool) -> list[ScriptedChatModel]:
    (first, one), (second, two) = _worker(hard, "refunds"), _worker(hard, "billing")
    tools = [
        subagent_tool(first, name="refunds", description="Refund questions."),
        subagent_tool(second, name="billing", description="Invoice questions."),
    ]
    both = turn(call("refunds", request="r"), call("billing", request="b"))
    parent, top = _top(tools, both, hard)
    parent.invoke(QUESTION)
    return [top, one, two]


def swarm(hard: bool) -> list[ScriptedChatModel]:
    from langgraph_swarm import create_handoff_tool, create_swarm

    policy = StopPolicy(mode="hard" if hard else "never", parallel="any")
    alice = ScriptedChatModel([turn(call("transfer_to_bob"), call("search"))])
    bob = ScriptedChatModel([] if hard else ["Bob here."])
    tools = [_search(), create_handoff_tool(agent_name="bob")]
    first = create_agent(alice, tools, middleware=[StopOnArtifact(policy)], name="alice")
    second = create_agent(bob, [], middleware=[StopOnArtifact(policy)], name="bob")
    create_swarm([first, second], default_active_agent="alice").compile().invoke(QUESTION)
    return [alice, bob]


PATTERNS: dict[str, Callable[[bool], list[ScriptedChatModel]]] = {
    "sub-agent as a plain tool of a `create_agent` parent (before)": plain_tool,
    "`subagent_tool` in a `create_agent` parent": as_subagent_tool,
    "Deep Agents `task` subagent": deep_agents,
    "`create_supervisor` (langgraph-supervisor)": create_supervisor,
    "`create_agent` supervisor, workers as `subagent_tool`": supervisor_of_tools,
    "the same, two workers called in one turn": two_workers,
    'swarm: a hand-off and a stopping call in one turn (`parallel="any"`)': swarm,
}


def _rows() -> dict[str, tuple[list[int], list[int]]]:
    rows = {}
    for name, hard, hard_levels, never, never_levels in ROW.findall(PAGE.read_text("utf-8")):
        per_hard = [int(n) for n in hard_levels.split("+")]
        per_never = [int(n) for n in never_levels.split("+")]
        assert (sum(per_hard), sum(per_never)) == (int(hard), int(never)), name
        rows[name] = (per_hard, per_never)
    return rows


def test_the_page_has_a_row_for_each_pattern() -> None:
    assert sorted(_rows()) == sorted(PATTERNS)


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
@pytest.mark.parametrize("name", list(PATTERNS))
def test_each_rows_figures_are_the_measured_model_calls(name: str) -> None:
    hard, never = _rows()[name]
    for mode, expected in ((True, hard), (False, never)):
        models = PATTERNS[name](mode)
        assert [len(m.calls) for m in models] == expected, (name, "hard" if mode else "never")
        for model in models:
            model.assert_complete()
