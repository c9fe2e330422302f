"""A simulated population for canary tests: threads of scripted users who ask again at set
rates per arm, run through a real agent with a real checkpointer."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage

from toolstop import Outcome, StopPolicy, build_react_graph, signal
from toolstop.testing import ScriptedChatModel, call, forced_tool

RECEIPT = "Exchanged order 42: 1 item, refund 12.00 EUR to the card on file."
REQUESTS = [
    "Please exchange the blue shirt in order {n} for a red one",
    "Could you swap the shoes of my order {n} for size 42",
    "I want to exchange the lamp from order {n}",
]
REASKED = "That did not help. {request}"
MOVED_ON = "Thanks. What are your opening hours on Sunday?"


def population(
    policy: StopPolicy,
    checkpointer: Any,
    threads: range,
    reask: dict[str, float],
    *,
    seed: int = 7,
    build: Callable[..., Any] | None = None,
) -> list[dict[str, Any]]:
    """Run two turns of each thread: a request the `exchange` tool answers (a stop in the
    canary arm, a would-stop in the shadow arm), then the user's next message, which asks
    again with probability `reask[arm]` (the arm from the first run's record).

    Returns every run's stop record, in order."""
    tools = [forced_tool("exchange", (RECEIPT, signal(Outcome.COMPLETED)))]
    build = build or (lambda model, tools, **kw: build_react_graph(model, tools, **kw))
    chance = random.Random(seed)
    records: list[dict[str, Any]] = []
    for n in threads:
        # a stop ends the run on the tool; a shadow run's model answers after it, and the
        # second run's model answers the next message without a tool
        script = [call("exchange", order=str(n)), "Your exchange is done."]
        agent = build(ScriptedChatModel(script), tools, policy=policy, checkpointer=checkpointer)
        config = {"configurable": {"thread_id": f"thread-{n}"}}
        request = REQUESTS[n % len(REQUESTS)].format(n=n)
        first = agent.invoke({"messages": [HumanMessage(request)]}, config)["stop_record"]
        again = chance.random() < reask[first.get("arm", "canary")]
        text = REASKED.format(request=request) if again else MOVED_ON
        agent = build(
            ScriptedChatModel(["Here you go."]), tools, policy=policy, checkpointer=checkpointer
        )
        second = agent.invoke({"messages": [HumanMessage(text)]}, config)["stop_record"]
        records += [first, second]
    return records
