"""Hand-offs (langgraph-swarm) in a turn with other calls: the history stays valid."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langgraph_swarm", reason="needs the `swarm` extra (langgraph-swarm)")

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from toolstop import StopOnArtifact, StopPolicy, signal
from toolstop.testing import ScriptedChatModel, call, forced_tool, history_problems, turn

pytestmark = pytest.mark.multiagent

ANSWER = "Refunds take 5 days."
ORDERS = {
    "hand-off first": ("transfer_to_bob", "search"),
    "stop first": ("search", "transfer_to_bob"),
}


def _swarm(
    calls: tuple[str, ...], result: Any, parallel: str = "any", then: tuple[Any, ...] = ()
) -> tuple[Any, Any, Any]:
    from langgraph_swarm import create_handoff_tool, create_swarm

    policy = StopPolicy(parallel=parallel)  # type: ignore[arg-type]
    alice_model = ScriptedChatModel([turn(*(call(name) for name in calls)), *then])
    bob_model = ScriptedChatModel(["Bob here: how can I help?"])
    tools = [forced_tool("search", result), create_handoff_tool(agent_name="bob")]
    alice = create_agent(alice_model, tools, middleware=[StopOnArtifact(policy)], name="alice")
    bob = create_agent(bob_model, [], middleware=[StopOnArtifact(policy)], name="bob")
    swarm = create_swarm([alice, bob], default_active_agent="alice")
    return swarm.compile(checkpointer=InMemorySaver()), alice_model, bob_model


def _run(
    app: Any, *, run_async: bool = False, ends: dict[str, list[Any]] | None = None
) -> tuple[list[Any], dict[str, list[Any]]]:
    """The thread's messages and the records each agent published (its run_end events)."""
    config = {"configurable": {"thread_id": "swarm"}}
    ends = {} if ends is None else ends
    question = {"messages": [HumanMessage("When is my refund due?")]}

    def seen(namespace: tuple[str, ...], chunk: Any) -> None:
        if isinstance(chunk, dict) and chunk.get("toolstop") == "run_end":
            agent = namespace[0].split(":")[0] if namespace else ""
            ends.setdefault(agent, []).append(chunk["record"])

    if run_async:

        async def stream() -> None:
            async for ns, chunk in app.astream(
                question, config, stream_mode="custom", subgraphs=True
            ):
                seen(ns, chunk)

        asyncio.run(stream())
    else:
        for ns, chunk in app.stream(question, config, stream_mode="custom", subgraphs=True):
            seen(ns, chunk)
    return app.get_state(config).values["messages"], ends


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("order", list(ORDERS))
def test_a_stop_beside_a_hand_off_is_honoured_and_the_hand_off_recorded_as_overridden(
    order: str, run_async: bool
) -> None:
    app, alice, bob = _swarm(ORDERS[order], (ANSWER, signal("completed")))
    messages, ends = _run(app, run_async=run_async)
    assert history_problems(messages, "all") == []  # every call answered, ends on an answer
    assert messages[-1].content == ANSWER
    assert (len(alice.calls), len(bob.calls)) == (1, 0)  # bob never got the conversation
    handoff = next(m for m in messages if isinstance(m, ToolMessage) and m.name != "search")
    assert str(handoff.content).startswith("Not transferred to bob")
    [record] = ends["alice"]
    assert (record["rule"], record["tools"]) == ("completed", ["search"])
    assert record["handoff_overridden"] == "bob"
    assert "handed_off_to" not in record
    assert "bob" not in ends


@pytest.mark.parametrize("order", list(ORDERS))
def test_a_hand_off_beside_a_call_that_does_not_stop_hands_over_the_whole_turn(
    order: str,
) -> None:
    # parallel="all": the hand-off signals nothing, so the turn does not stop; the hand-off is
    # carried out with the other call's result in the history bob gets.
    app, alice, bob = _swarm(ORDERS[order], (ANSWER, signal("completed")), parallel="all")
    messages, ends = _run(app)
    assert history_problems(messages, "all") == []
    assert (len(alice.calls), len(bob.calls)) == (1, 1)
    assert messages[-1].content == "Bob here: how can I help?"
    assert [m.content for m in messages if isinstance(m, ToolMessage) and m.name == "search"] == [
        ANSWER
    ]
    assert [t.type for t in bob.calls[0].messages if t.type == "tool"] == ["tool", "tool"]
    [record] = ends["alice"]  # the agent that handed off leaves its record
    assert (record["handed_off_to"], record["rule"], record["model_calls"]) == ("bob", "none", 1)
    assert [r["run"] for r in ends["bob"]] == [1]


def test_a_hand_off_alone_in_its_turn_leaves_a_record() -> None:
    app, alice, bob = _swarm(("transfer_to_bob",), (ANSWER, signal("completed")))
    messages, ends = _run(app)
    assert history_problems(messages, "all") == []
    assert (len(alice.calls), len(bob.calls)) == (1, 1)
    [record] = ends["alice"]
    assert record["handed_off_to"] == "bob"


def test_a_hand_off_overridden_by_a_stop_is_cleared_from_the_run() -> None:
    # The hand-off is held in the run's private state (no state key of its own); the model
    # call that honours the stop instead writes the run without it, so no later model call
    # carries it out.
    from toolstop._lifecycle import Begun, open_run
    from toolstop.decision import Decision, Rule
    from toolstop.levels import HANDOFF_KEY

    held = {"goto": "bob", "update": {}, "tool_call_id": "h1"}
    answer = ToolMessage("Successfully transferred to bob", tool_call_id="h1", id="m1")
    run = {**open_run(None, None, StopPolicy(), None), HANDOFF_KEY: held}
    begun = Begun(Decision(stop=True, rule=Rule.COMPLETED), run, None, None, [answer], 2, False)  # type: ignore[arg-type]
    settled, update, ended = StopOnArtifact._settle(held, begun, begun.decision)
    assert ended is None
    assert HANDOFF_KEY not in settled.run
    assert settled.run["record"]["handoff_overridden"] == "bob"
    assert update is not None
    assert str(update["messages"][0].content).startswith("Not transferred to bob")
