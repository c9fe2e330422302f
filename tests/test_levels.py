"""`toolstop.subagent_tool`: a sub-agent's stop travels up, its record stays at its level."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from tests.support.routers import ROUTERS, Router

from toolstop import StopPolicy, forwarded_stop, signal, subagent_tool
from toolstop.errors import ToolstopConfigError
from toolstop.testing import ScriptedChatModel, call, forced_tool, history_problems

pytestmark = pytest.mark.multiagent

ANSWER = "Refunds take 5 days."


def _worker(
    router: Router, script: list[Any], *results: Any, policy: StopPolicy | None = None
) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(script)
    tools = [forced_tool("search", *(results or ((ANSWER, signal("completed")),)))]
    return router.build(model, tools, policy=policy or StopPolicy(), checkpointer=None), model


def _parent(
    router: Router, worker: Any, script: list[Any], policy: StopPolicy | None = None, **kw: Any
) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(script)
    tool = subagent_tool(worker, name="worker", description="Answers questions on refunds.")
    kw.setdefault("checkpointer", None)
    return router.build(model, [tool], policy=policy or StopPolicy(), **kw), model


def _ask(agent: Any, question: str = "How long do refunds take?", **config: Any) -> Any:
    return agent.invoke({"messages": [HumanMessage(question)]}, config or None)


@pytest.mark.parametrize("inner", ROUTERS, ids=lambda r: r.name)
@pytest.mark.parametrize("outer", ROUTERS, ids=lambda r: r.name)
def test_a_sub_agents_stop_ends_the_parent_on_its_text(outer: Router, inner: Router) -> None:
    worker, sub = _worker(inner, [call("search", query="refunds")])
    parent, top = _parent(
        outer, worker, [call("worker", request="refund time?")], checkpointer=None
    )
    state = _ask(parent)
    # 1 call per level: neither level restates the tool's text
    assert (len(top.calls), len(sub.calls)) == (1, 1)
    final = state["messages"][-1]
    assert isinstance(final, AIMessage)
    assert not final.tool_calls
    assert final.content == ANSWER
    assert history_problems(state["messages"], "all") == []
    record = state["stop_record"]  # the parent's own: its tool, its call, its model call
    assert (record["rule"], record["stopped"], record["tools"]) == ("completed", True, ["worker"])
    assert record["tool_call_ids"] == [top.call_id(0)]
    assert (record["run"], record["model_calls"]) == (1, 1)
    [result] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert result.artifact == {
        "stop": True,
        "reason": "completed",
        "subagent_rule": "completed",
        "subagent": "worker",
    }
    top.assert_complete()
    sub.assert_complete()


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_in_never_mode_both_levels_restate(router: Router) -> None:
    never = StopPolicy(mode="never")
    worker, sub = _worker(router, [call("search"), "It takes 5 days."], policy=never)
    parent, top = _parent(
        router, worker, [call("worker", request="q"), "Five days."], never, checkpointer=None
    )
    state = _ask(parent)
    assert (len(top.calls), len(sub.calls)) == (2, 2)
    assert state["messages"][-1].content == "Five days."
    # the sub-agent would have stopped: the parent records its own would-stop on that result
    record = state["stop_record"]
    assert (record["would_stop"], record["stopped"], record["rule"]) == ("completed", False, "none")
    assert record["would_save"]["model_calls"] == 1  # "Five days.", which hard mode skips
    [result] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert (result.artifact["stop"], result.artifact["subagent_would_stop"]) == (False, True)


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_shadow_sub_agent_never_stops_a_hard_mode_parent(router: Router) -> None:
    never = StopPolicy(mode="never")
    worker, sub = _worker(router, [call("search"), "It takes 5 days."], policy=never)
    parent, top = _parent(router, worker, [call("worker", request="q"), "Five days."])
    state = _ask(parent)
    assert (len(top.calls), len(sub.calls)) == (2, 2)
    assert state["messages"][-1].content == "Five days."
    record = state["stop_record"]
    assert (record["rule"], record["stopped"], record["would_stop"]) == ("none", False, None)


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_sub_agent_that_ended_on_its_retry_budget_goes_back_to_the_parents_model(
    router: Router,
) -> None:
    # Forwarding its rule by hand (`signal("retry_budget")`) raised ValueError: unknown outcome.
    policy = StopPolicy(max_transient_retries=1)
    failing = ("Timed out.", signal("transient"))
    worker, sub = _worker(router, [call("search"), call("search")], failing, policy=policy)
    parent, top = _parent(router, worker, [call("worker", request="q"), "Try later."])
    state = _ask(parent, **{"configurable": {"thread_id": "budget"}})
    assert (len(top.calls), len(sub.calls)) == (2, 2)
    [result] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert result.content == policy.retry_budget_message
    assert result.artifact["stop"] is False
    assert result.artifact["subagent_rule"] == "retry_budget"
    assert state["messages"][-1].content == "Try later."
    assert state["stop_record"]["rule"] == "none"
    assert history_problems(state["messages"], "all") == []


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_sub_agent_whose_model_answered_forwards_no_stop(router: Router) -> None:
    go_on = ("3 hits", signal("completed", stop=False))
    worker, sub = _worker(router, [call("search"), "About 5 days."], go_on)
    parent, top = _parent(router, worker, [call("worker", request="q"), "Refunds: 5 days."])
    state = _ask(parent, **{"configurable": {"thread_id": "answered"}})
    assert (len(top.calls), len(sub.calls)) == (2, 2)
    [result] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert (result.content, result.artifact["stop"]) == ("About 5 days.", False)
    assert state["messages"][-1].content == "Refunds: 5 days."


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_async_parents_forward_the_stop_too(router: Router) -> None:
    worker, sub = _worker(router, [call("search")])
    parent, top = _parent(router, worker, [call("worker", request="q")], checkpointer=None)
    state = asyncio.run(parent.ainvoke({"messages": [HumanMessage("q")]}))
    assert (len(top.calls), len(sub.calls)) == (1, 1)
    assert state["messages"][-1].content == ANSWER


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_each_call_is_a_new_conversation_and_each_level_numbers_its_own_runs(
    router: Router,
) -> None:
    worker, sub = _worker(router, [call("search"), call("search")])
    parent, _ = _parent(
        router,
        worker,
        [call("worker", request="first"), call("worker", request="second")],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "two-turns"}}
    _ask(parent, "one", **config)
    state = _ask(parent, "two", **config)
    # the sub-agent saw only the request each time (stateless), the parent its whole thread
    assert [[m.content for m in c.messages if m.type == "human"] for c in sub.calls] == [
        ["first"],
        ["second"],
    ]
    assert state["stop_record"]["run"] == 2
    assert state["messages"][-1].content == ANSWER
    assert history_problems(state["messages"], "all") == []


def test_a_sub_agent_with_its_own_checkpointer_gets_a_thread_per_call() -> None:
    router = ROUTERS[0]
    model = ScriptedChatModel([call("search"), call("search")])
    saver = InMemorySaver()
    worker = router.build(
        model,
        [forced_tool("search", (ANSWER, signal("completed")))],
        policy=StopPolicy(),
        checkpointer=saver,
    )
    parent, top = _parent(
        router,
        worker,
        [call("worker", request="a"), call("worker", request="b")],
        checkpointer=None,
    )
    _ask(parent, **{"configurable": {"thread_id": "p"}})
    _ask(parent, **{"configurable": {"thread_id": "p"}})
    threads = {c.config["configurable"]["thread_id"] for c in saver.list(None)}
    assert threads == {f"p/worker/{top.call_id(0)}", f"p/worker/{top.call_id(1)}"}


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"rule": "completed", "stopped": True}, (True, "completed")),
        ({"rule": "fatal", "stopped": True}, (True, "fatal")),
        ({"rule": "policy_block", "stopped": True}, (True, "policy_block")),
        ({"rule": "none", "stopped": False}, (False, "completed")),
        ({"rule": "retry_budget", "stopped": True}, (False, "fatal")),
        ({"rule": "step_budget", "stopped": True}, (False, "fatal")),
        ({"rule": "none", "stopped": False, "ended_by": "x"}, (False, "fatal")),
        ({"rule": "completed", "stopped": "yes"}, (False, "fatal")),
        (None, (False, "completed")),
        ("garbage", (False, "completed")),
        ({"rule": 3, "stopped": True}, (False, "fatal")),
        ({"rule": "none", "stopped": False, "would_stop": "fatal"}, (False, "fatal")),
        ({"rule": "none", "stopped": False, "would_stop": "retry_budget"}, (False, "completed")),
        ({"rule": "none", "stopped": False, "would_stop": ["completed"]}, (False, "completed")),
    ],
)
def test_forwarded_stop_reads_any_record_safely(record: Any, expected: tuple[bool, str]) -> None:
    artifact = forwarded_stop(record)
    assert (artifact["stop"], artifact["reason"]) == expected
    would = isinstance(record, dict) and record.get("would_stop") in ("completed", "fatal")
    assert artifact.get("subagent_would_stop", False) is would


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(TypeError, match="compiled agent"):
        subagent_tool(object(), name="w", description="d")
    worker, _ = _worker(ROUTERS[0], [])
    for bad in ("", "  ", None):
        with pytest.raises(TypeError, match="name"):
            subagent_tool(worker, name=bad, description="d")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="description"):
        subagent_tool(worker, name="w", description="")


def test_a_sub_agent_without_messages_is_a_clear_error() -> None:
    from langchain_core.runnables import RunnableLambda

    tool = subagent_tool(RunnableLambda(lambda _: {"answer": 1}), name="odd", description="d")
    with pytest.raises(ToolstopConfigError, match="no `messages`"):
        tool.invoke({"type": "tool_call", "name": "odd", "args": {"request": "q"}, "id": "1"})
