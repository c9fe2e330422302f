"""Supervisors: langgraph-supervisor always restates; a create_agent supervisor need not."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langgraph_supervisor", reason="needs the `langgraph-supervisor` extra")
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from toolstop import StopOnArtifact, StopPolicy, signal, subagent_tool
from toolstop.testing import ScriptedChatModel, call, forced_tool, history_problems, turn

pytestmark = pytest.mark.multiagent

REFUND = "Refunds take 5 days."
INVOICE = "Invoice 42 is paid."


def _worker(name: str, text: str, script: list[Any], mode: str = "hard") -> tuple[Any, Any]:
    model = ScriptedChatModel(script)
    tool = forced_tool(f"{name}_lookup", (text, signal("completed")))
    policy = StopPolicy(mode=mode)  # type: ignore[arg-type]
    return create_agent(model, [tool], middleware=[StopOnArtifact(policy)], name=name), model


def _ask(agent: Any) -> dict[str, Any]:
    return agent.invoke({"messages": [HumanMessage("When is my refund due?")]})


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_create_supervisor_restates_its_worker_whatever_the_worker_does() -> None:
    # The supervisor is langgraph's prebuilt create_react_agent, with a fixed edge from each
    # worker back to it: no hook can end the run on a worker's stop without its model call.
    from langgraph_supervisor import create_supervisor

    worker, inner = _worker("refunds", REFUND, [call("refunds_lookup")])
    top = ScriptedChatModel([call("transfer_to_refunds"), "Your refund takes 5 days."])
    supervisor = create_supervisor([worker], model=top).compile()
    state = _ask(supervisor)
    assert (len(top.calls), len(inner.calls)) == (2, 1)  # 3 model calls where 2 would do
    assert state["messages"][-1].content == "Your refund takes 5 days."
    with pytest.raises(TypeError):  # the hook is a node, and StopOnArtifact is middleware
        create_supervisor([worker], model=top, post_model_hook=StopOnArtifact()).compile()


@pytest.mark.parametrize(("mode", "calls"), [("hard", (1, 1)), ("never", (2, 2))])
def test_a_create_agent_supervisor_ends_on_its_workers_stop(mode: str, calls: Any) -> None:
    worker, inner = _worker(
        "refunds", REFUND, [call("refunds_lookup"), *(["5 days."] if mode == "never" else [])], mode
    )
    top = ScriptedChatModel(
        [call("refunds", request="refund due?"), *(["It takes 5 days."] if mode == "never" else [])]
    )
    supervisor = create_agent(
        top,
        [subagent_tool(worker, name="refunds", description="Refund questions.")],
        middleware=[StopOnArtifact(StopPolicy(mode=mode))],  # type: ignore[arg-type]
        name="supervisor",
    )
    state = _ask(supervisor)
    assert (len(top.calls), len(inner.calls)) == calls
    final = state["messages"][-1]
    assert isinstance(final, AIMessage)
    assert final.content == (REFUND if mode == "hard" else "It takes 5 days.")
    assert final.name == "supervisor"  # attributed like the supervisor's own answers
    assert history_problems(state["messages"], "all") == []
    # in never mode the worker's would-stop is forwarded: the supervisor records it as its own
    assert state["stop_record"]["tools"] == ["refunds"]
    assert state["stop_record"]["would_stop"] == (None if mode == "hard" else "completed")


def test_two_workers_in_one_turn_end_the_supervisor_on_both_texts() -> None:
    refunds, first = _worker("refunds", REFUND, [call("refunds_lookup")])
    billing, second = _worker("billing", INVOICE, [call("billing_lookup")])
    top = ScriptedChatModel([turn(call("refunds", request="r?"), call("billing", request="b?"))])
    supervisor = create_agent(
        top,
        [
            subagent_tool(refunds, name="refunds", description="Refund questions."),
            subagent_tool(billing, name="billing", description="Invoice questions."),
        ],
        middleware=[StopOnArtifact()],
    )
    state = _ask(supervisor)
    assert (len(top.calls), len(first.calls), len(second.calls)) == (1, 1, 1)
    assert state["messages"][-1].content == f"{REFUND}\n\n{INVOICE}"
    assert state["stop_record"]["tools"] == ["refunds", "billing"]
    assert history_problems(state["messages"], "all") == []
