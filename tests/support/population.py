"""A simulated population for canary tests: threads of scripted users who ask again at set
rates per arm, run through a real agent with a real checkpointer."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from toolstop import Outcome, StopPolicy, build_react_graph, signal
from toolstop.testing import forced_tool

RECEIPT = "Exchanged order 42: 1 item, refund 12.00 EUR to the card on file."
REQUESTS = [
    "Please exchange the blue shirt in order {n} for a red one",
    "Could you swap the shoes of my order {n} for size 42",
    "I want to exchange the lamp from order {n}",
]
REASKED = "That did not help. {request}"
MOVED_ON = "Thanks. What are your opening hours on Sunday?"
_ASKS = tuple(r.split("{n}")[0] for r in REQUESTS)
_IDS = itertools.count()


class Clerk(BaseChatModel):
    """A model that answers from the last message, so one compiled agent serves every thread:
    a request calls `exchange`, a tool result is narrated, anything else is answered."""

    @property
    def _llm_type(self) -> str:
        return "clerk"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, HumanMessage) and str(last.content).startswith(_ASKS):
            call = {"name": "exchange", "args": {"order": "42"}, "id": f"c{next(_IDS)}"}
            answer = AIMessage("", tool_calls=[call])
        elif isinstance(last, ToolMessage):
            answer = AIMessage("Your exchange is done.")
        else:
            answer = AIMessage("Here you go.")
        return ChatResult(generations=[ChatGeneration(message=answer)])


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
    tools = [forced_tool("exchange", (RECEIPT, signal(Outcome.COMPLETED)))]  # it repeats
    build = build or (lambda model, tools, **kw: build_react_graph(model, tools, **kw))
    agent = build(Clerk(), tools, policy=policy, checkpointer=checkpointer)
    chance = random.Random(seed)
    records: list[dict[str, Any]] = []
    for n in threads:
        config = {"configurable": {"thread_id": f"thread-{n}"}}
        request = REQUESTS[n % len(REQUESTS)].format(n=n)
        first = agent.invoke({"messages": [HumanMessage(request)]}, config)["stop_record"]
        again = chance.random() < reask[first.get("arm", "canary")]
        text = REASKED.format(request=request) if again else MOVED_ON
        second = agent.invoke({"messages": [HumanMessage(text)]}, config)["stop_record"]
        records += [first, second]
    return records


def main() -> None:
    """Run a population into a database from another process (the way-back test's writer):
    `population.py DB SCHEMA THREADS CANARY_RATE SHADOW_RATE SHARE`."""
    import sys

    from way_back_records import postgres_saver, sqlite_saver

    db, schema, threads, canary_rate, shadow_rate, share = sys.argv[1:7]
    saver = postgres_saver(db, schema) if db.startswith("postgresql") else sqlite_saver(db)
    with saver as checkpointer:
        population(
            StopPolicy(mode="hard", canary=float(share)),
            checkpointer,
            range(int(threads)),
            {"canary": float(canary_rate), "shadow": float(shadow_rate)},
        )
    print("DONE")


if __name__ == "__main__":
    main()
