"""The UI recipes: a relay (no model ran, so no tokens) reaches a UI in every streaming mode."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage

from routers import ROUTERS, Router
from toolstop import Outcome, StopPolicy, signal
from toolstop.streaming import is_relay, relays
from toolstop.testing import ScriptedChatModel, call, forced_tool

pytestmark = pytest.mark.contract

PAID = "Paid order o-1. Receipt r-1."


@pytest.fixture(params=ROUTERS, ids=lambda r: r.name)
def router(request: pytest.FixtureRequest) -> Router:
    return request.param  # type: ignore[no-any-return]


def paying_agent(router: Router, mode: str = "hard") -> Any:
    script: list[Any] = [call("pay")] + (["Your order is paid."] if mode == "polish" else [])
    policy = StopPolicy(mode=mode)  # type: ignore[arg-type]
    tools = [forced_tool("pay", (PAID, signal(Outcome.COMPLETED)))]
    return router.build(ScriptedChatModel(script), tools, policy=policy, checkpointer=None)


def shown_in_messages_mode(agent: Any) -> list[str]:
    """The documented recipe for `stream_mode="messages"`: what a chat UI would show."""
    shown: list[str] = []
    inputs = {"messages": [HumanMessage("Pay order o-1")]}
    for message, _metadata in agent.stream(inputs, stream_mode="messages"):
        # the model's tokens come as chunks (a tool call's chunks carry no text); a relay as
        # one whole message (no model ran)
        if (isinstance(message, AIMessageChunk) and message.content) or is_relay(message):
            shown.append(str(message.content))
    return shown


async def shown_in_events(agent: Any) -> list[str]:
    """The documented recipe for `astream_events(version="v2")`."""
    shown: list[str] = []
    inputs = {"messages": [HumanMessage("Pay order o-1")]}
    async for event in agent.astream_events(inputs, version="v2"):
        if event["event"] == "on_chat_model_stream" and event["data"]["chunk"].content:
            shown.append(str(event["data"]["chunk"].content))
        shown += [str(message.content) for message in relays(event)]
    return shown


def test_a_relay_arrives_whole_in_messages_mode(router: Router) -> None:
    assert shown_in_messages_mode(paying_agent(router)) == [PAID]


def test_a_relay_arrives_once_in_astream_events(router: Router) -> None:
    assert asyncio.run(shown_in_events(paying_agent(router))) == [PAID]


def test_run_end_comes_before_the_answer_on_the_graphs_and_after_it_on_the_middleware(
    router: Router,
) -> None:
    """What docs/observability.md tells a UI: `run_end` is not the stream's last item (a UI
    finishes when the stream ends). If an upgrade changes the order, this says so."""
    order: list[str] = []
    inputs = {"messages": [HumanMessage("Pay order o-1")]}
    for mode, chunk in paying_agent(router).stream(inputs, stream_mode=["custom", "messages"]):
        if mode == "custom":
            order.append(chunk["toolstop"])
        elif is_relay(chunk[0]):
            order.append("answer")
    if router.name == "middleware":  # from its after_agent node, after the model node's answer
        assert order == ["turn", "answer", "run_end"]
    else:  # from the node that writes the answer, while it runs
        assert order == ["turn", "run_end", "answer"]


def test_is_relay_and_relays_ignore_everything_else() -> None:
    assert not is_relay(AIMessage("hi"))
    assert not is_relay(AIMessage("hi", response_metadata={"toolstop": "x"}))
    assert not is_relay("hi")
    relay = AIMessage(PAID, response_metadata={"toolstop": {"relay": True, "rule": "completed"}})
    assert is_relay(relay)
    stream = {"event": "on_chain_stream", "parent_ids": [], "data": {"chunk": {"x": {}}}}
    assert relays(stream) == []
    nested = {**stream, "parent_ids": ["root"], "data": {"chunk": {"n": {"messages": [relay]}}}}
    assert relays(nested) == []  # a nested run's own event: found at the root, once
    root = {**stream, "data": {"chunk": {"finalize": {"messages": [relay]}}}}
    assert relays(root) == [relay]
    assert relays({"event": "on_chain_end", "data": {"output": {"messages": [relay]}}}) == []
