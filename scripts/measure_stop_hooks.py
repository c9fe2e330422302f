"""Wall time per run: bare create_agent vs the two known ways to stop from middleware.

A 3-turn workload where nothing stops (every tool call says `stop: false`), so the figure is the
cost the stop machinery adds to every loop. Runs are interleaved and the median is reported.
Usage: python scripts/measure_stop_hooks.py [RUNS]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from toolstop import StopOnArtifact, build_react_graph, decide, signal
from toolstop.testing import ScriptedChatModel, call, forced_tool


class BeforeModelStop(AgentMiddleware):
    """The article's variant: a before_model node that jumps to the end (shares `decide`)."""

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if isinstance(state["messages"][-1], ToolMessage):
            decision = decide(state["messages"])
            if decision.stop:
                return {"jump_to": "end", "messages": [AIMessage(content=decision.relay or "")]}
        return None


def workload() -> tuple[ScriptedChatModel, list[Any]]:
    model = ScriptedChatModel([call("lookup"), call("lookup"), call("lookup"), "answer"])
    return model, [forced_tool("lookup", ("partial", signal("completed", stop=False)))]


def builders() -> dict[str, Callable[[ScriptedChatModel, list[Any]], Any]]:
    return {
        "create_agent (bare)": lambda m, t: create_agent(m, t),
        "+ StopOnArtifact (wrap_model_call)": lambda m, t: create_agent(
            m, t, middleware=[StopOnArtifact()]
        ),
        "+ before_model jump (article)": lambda m, t: create_agent(
            m, t, middleware=[BeforeModelStop()]
        ),
        "hand-built graph": lambda m, t: build_react_graph(m, t),
    }


def main(runs: int) -> None:
    times: dict[str, list[float]] = {name: [] for name in builders()}
    for _ in range(runs):
        for name, build in builders().items():
            model, tools = workload()
            agent = build(model, tools)
            start = time.perf_counter()
            agent.invoke({"messages": [HumanMessage("q")]})
            times[name].append(time.perf_counter() - start)
            model.assert_complete()
    base = statistics.median(times["create_agent (bare)"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:38s} {median * 1000:7.2f} ms  {median / base:5.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
