"""`toolstop bench --overhead`: what stopping costs when nothing stops, and how it scales."""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import time
import timeit
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from toolstop.bench.workload import SimulatedChatModel
from toolstop.decision import decide
from toolstop.graph import build_react_graph
from toolstop.outcome import Outcome, signal
from toolstop.testing.forced import forced_tool
from toolstop.testing.routers import has_agents
from toolstop.testing.scripted import ScriptedChatModel, call

__all__ = ["measure_overhead"]


def _no_stop_tools() -> list[Any]:
    """One stateless tool that never asks to stop, with a coroutine so async runs stay on the loop.

    (A sync-only tool would run in the default thread pool, and the bench would measure thread
    hand-offs and lock contention in the test doubles rather than the routers.)
    """

    def search(query: str = "") -> tuple[str, dict[str, Any]]:
        return "partial result", signal(Outcome.COMPLETED, stop=False)

    async def asearch(query: str = "") -> tuple[str, dict[str, Any]]:
        return search(query)

    tool = StructuredTool.from_function(
        search,
        coroutine=asearch,
        name="search",
        description="Search (never asks to stop).",
        response_format="content_and_artifact",
    )
    return [tool]


def _article_hook() -> Any:
    """The article's alternative to StopOnArtifact: a `before_model` node that jumps to the end.

    Kept here only to measure it against the `wrap_model_call` design; it shares `decide`.
    """
    from langchain.agents.middleware import AgentMiddleware, hook_config

    class BeforeModelStop(AgentMiddleware):  # type: ignore[type-arg]
        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            if isinstance(state["messages"][-1], ToolMessage):
                decision = decide(state["messages"])
                if decision.stop:
                    relay = AIMessage(content=decision.relay or "")
                    return {"jump_to": "end", "messages": [relay]}
            return None

    return BeforeModelStop()


def _builders(*, with_article: bool = False) -> dict[str, Callable[[Any, list[Any]], Any]]:
    builders: dict[str, Callable[[Any, list[Any]], Any]] = {}
    if has_agents():
        from langchain.agents import create_agent

        from toolstop.middleware import StopOnArtifact

        builders["create_agent"] = lambda m, t: create_agent(m, t)
        builders["create_agent+StopOnArtifact"] = lambda m, t: create_agent(
            m, t, middleware=[StopOnArtifact()]
        )
        if with_article:
            builders["create_agent+before_model jump"] = lambda m, t: create_agent(
                m, t, middleware=[_article_hook()]
            )
    builders["hand-built graph"] = lambda m, t: build_react_graph(m, t)
    return builders


def wall_per_run(runs: int) -> dict[str, Any]:
    """Median wall time of a 3-turn run where nothing stops, interleaved across builders."""
    builders = _builders(with_article=True)
    times: dict[str, list[float]] = {name: [] for name in builders}
    for _ in range(runs):
        for name, build in builders.items():
            model = ScriptedChatModel([call("search"), call("search"), call("search"), "answer"])
            agent = build(model, _no_stop_tools())
            start = time.perf_counter()
            agent.invoke({"messages": [HumanMessage("q")]})
            times[name].append(time.perf_counter() - start)
            model.assert_complete()
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians.get("create_agent", medians["hand-built graph"])
    return {
        name: {"median_ms": round(1000 * m, 3), "vs_create_agent": round(m / base, 4)}
        for name, m in medians.items()
    }


def decide_scaling(repeat: int = 2000) -> dict[str, Any]:
    """Time of one `decide` with 10 and with 10,000 messages of history before the turn."""

    def history(length: int) -> list[BaseMessage]:
        old: list[BaseMessage] = []
        while len(old) < length:
            old += [HumanMessage("q"), AIMessage("a")]
        calls = [
            {"name": "search", "args": {}, "id": "c1"},
            {"name": "search", "args": {}, "id": "c2"},
        ]
        turn: list[BaseMessage] = [
            AIMessage("", tool_calls=calls),
            ToolMessage("x", tool_call_id="c1", name="search", artifact=signal(Outcome.COMPLETED)),
            ToolMessage("y", tool_call_id="c2", name="search", artifact=signal(Outcome.TRANSIENT)),
        ]
        return old[:length] + turn

    figures = {}
    for length in (10, 10_000):
        messages = history(length)
        best = min(timeit.repeat(lambda m=messages: decide(m), number=repeat, repeat=5))  # type: ignore[misc]
        figures[f"{length}_messages_us"] = round(1e6 * best / repeat, 3)
    figures["ratio_10000_vs_10"] = round(
        figures["10000_messages_us"] / figures["10_messages_us"], 4
    )
    return figures


def throughput(concurrent: int, rounds: int = 3) -> dict[str, Any]:
    """Runs per second of `concurrent` simultaneous `ainvoke` calls on one compiled agent each.

    The agents take turns for `rounds` rounds (collecting garbage before each burst, so no agent
    pays for another's) and the best round counts.
    """
    agents = {
        name: build(SimulatedChatModel(tool_names=("search",)), _no_stop_tools())
        for name, build in _builders().items()
    }

    async def burst(agent: Any) -> float:
        start = time.perf_counter()
        await asyncio.gather(
            *(agent.ainvoke({"messages": [HumanMessage(f"q{i}")]}) for i in range(concurrent))
        )
        return time.perf_counter() - start

    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, agent in agents.items():
            gc.collect()
            elapsed = asyncio.run(burst(agent))
            best[name] = min(best.get(name, elapsed), elapsed)
    results: dict[str, Any] = {
        name: {"runs_per_s": round(concurrent / elapsed, 1), "seconds": round(elapsed, 3)}
        for name, elapsed in best.items()
    }
    base = results.get("create_agent")
    if base:
        for figures in results.values():
            figures["vs_create_agent"] = round(figures["runs_per_s"] / base["runs_per_s"], 4)
    return results


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_growth(runs: int) -> dict[str, Any]:
    """Resident memory before and after `runs` sequential runs on one compiled graph."""
    model = SimulatedChatModel(tool_names=("search",))
    graph = build_react_graph(model, [forced_tool("search", ("page", signal(Outcome.COMPLETED)))])
    for _ in range(50):  # warm up caches before the first reading
        graph.invoke({"messages": [HumanMessage("q")]})
    gc.collect()
    before = _rss_mb()
    for i in range(runs):
        graph.invoke({"messages": [HumanMessage(f"q{i}")]})
    gc.collect()
    after = _rss_mb()
    return {
        "runs": runs,
        "rss_before_mb": round(before, 1),
        "rss_after_mb": round(after, 1),
        "growth_mb": round(after - before, 2),
    }


def measure_overhead(
    *, runs: int = 200, concurrent: int = 1000, rss_runs: int = 10_000
) -> dict[str, Any]:
    """All overhead and scaling figures, in one process."""
    return {
        "wall_per_run_no_stop": wall_per_run(runs),
        "decide_scaling": decide_scaling(),
        "concurrent_throughput": {"concurrent": concurrent, **throughput(concurrent)},
        "rss": rss_growth(rss_runs),
    }
