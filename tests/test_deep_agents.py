"""Deep Agents' `task` subagents with toolstop at both levels: the stop travels up, records stay."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("deepagents", reason="needs the `deepagents` extra (multi-agent stack)")
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from toolstop import StopOnArtifact, StopPolicy, signal
from toolstop.testing import ScriptedChatModel, call, forced_tool, history_problems

pytestmark = pytest.mark.multiagent

ANSWER = "Refunds take 5 days."


def _task(n: int) -> Any:
    return call("task", description=f"How long do refunds take? ({n})", subagent_type="worker")


def _deep_agent(main: ScriptedChatModel, sub: ScriptedChatModel, mode: str) -> tuple[Any, Any]:
    from deepagents import create_deep_agent

    policy = StopPolicy(mode=mode)  # type: ignore[arg-type]
    search = forced_tool("search", (ANSWER, signal("completed")))
    saver = InMemorySaver()
    worker = {
        "name": "worker",
        "description": "Answers questions on refunds.",
        "system_prompt": "Answer with the search tool.",
        "tools": [search],
        "model": sub,
        "middleware": [StopOnArtifact(policy)],
    }
    agent = create_deep_agent(
        model=main,
        tools=[],
        middleware=[StopOnArtifact(policy)],
        subagents=[worker],  # type: ignore[list-item]
        checkpointer=saver,
    )
    return agent, saver


def _records(saver: InMemorySaver, thread: str) -> dict[str, list[dict[str, Any]]]:
    """Every record in the thread's checkpoints: the main agent's (namespace "") and the
    subagents' (namespaces of the `task` calls)."""
    found: dict[str, list[dict[str, Any]]] = {"main": [], "sub": []}
    for checkpoint in saver.list({"configurable": {"thread_id": thread}}):
        record = checkpoint.checkpoint["channel_values"].get("stop_record")
        if record is not None:
            level = "main" if not checkpoint.config["configurable"]["checkpoint_ns"] else "sub"
            found[level].append(record)
    return found


def test_the_main_agent_ends_on_a_subagents_stop_and_each_level_keeps_its_record() -> None:
    main = ScriptedChatModel([_task(1), _task(2)])
    sub = ScriptedChatModel([call("search"), call("search")])
    agent, saver = _deep_agent(main, sub, "hard")
    config = {"configurable": {"thread_id": "deep"}}
    for turn in (1, 2):
        state = agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config)
        # one model call per level and turn: the main agent does not restate the task result
        assert (len(main.calls), len(sub.calls)) == (turn, turn)
        assert state["messages"][-1].content == ANSWER
        assert history_problems(state["messages"], "all") == []
        record = state["stop_record"]
        assert (record["run"], record["rule"], record["tools"]) == (turn, "completed", ["task"])
        assert record["tool_call_ids"] == [main.call_id(turn - 1)]
        assert record["model_calls"] == 1
    records = _records(saver, "deep")
    # no subagent record in the main agent's checkpoints (mid-run included), and none of the
    # main agent's in the subagents': each subagent run is its level's run 1
    assert {tuple(r["tools"]) for r in records["main"]} == {("task",)}
    assert {(r["run"], tuple(r["tools"]), r["rule"]) for r in records["sub"]} == {
        (1, ("search",), "completed")
    }
    # the subagent saw only its task, never the main agent's messages
    assert [[m.type for m in c.messages if m.type != "system"] for c in sub.calls] == [
        ["human"],
        ["human"],
    ]
    main.assert_complete()
    sub.assert_complete()


def test_in_never_mode_both_levels_call_their_model_again() -> None:
    main = ScriptedChatModel([_task(1), "It takes 5 days."])
    sub = ScriptedChatModel([call("search"), "5 days."])
    agent, saver = _deep_agent(main, sub, "never")
    state = agent.invoke({"messages": [HumanMessage("q")]}, {"configurable": {"thread_id": "n"}})
    assert (len(main.calls), len(sub.calls)) == (2, 2)
    assert state["messages"][-1].content == "It takes 5 days."
    assert state["stop_record"]["model_calls"] == 2
    records = _records(saver, "n")
    assert [r["would_stop"] for r in records["sub"]] == ["completed"] * len(records["sub"])
    # the main agent records the sub-agent's would-stop as its own (its restating call saved)
    final = records["main"][-1]
    assert (final["would_stop"], final["tools"], final["stopped"]) == ("completed", ["task"], False)
    assert final["would_save"]["model_calls"] == 1


def test_an_async_main_agent_ends_on_the_subagents_stop() -> None:
    main = ScriptedChatModel([_task(1)])
    sub = ScriptedChatModel([call("search")])
    agent, _ = _deep_agent(main, sub, "hard")
    state = asyncio.run(
        agent.ainvoke({"messages": [HumanMessage("q")]}, {"configurable": {"thread_id": "a"}})
    )
    assert (len(main.calls), len(sub.calls)) == (1, 1)
    assert state["messages"][-1].content == ANSWER
    assert state["stop_record"]["tools"] == ["task"]
