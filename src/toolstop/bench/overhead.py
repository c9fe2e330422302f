"""`toolstop bench --overhead`: what stopping costs when nothing stops, and how it scales."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import statistics
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from toolstop._compat import has_agents
from toolstop.bench.workload import SimulatedChatModel
from toolstop.decision import decide
from toolstop.graph import build_react_graph
from toolstop.outcome import Outcome, signal
from toolstop.testing.forced import forced_tool
from toolstop.testing.scripted import ScriptedChatModel, call

__all__ = [
    "decide_figures",
    "measure_overhead",
    "throughput_figures",
    "wall_figures",
    "write_overhead",
]


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


def _before_model_jump() -> Any:
    """The alternative to StopOnArtifact: a `before_model` node that jumps to the end.

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


def _floor(*, after_agent: bool) -> Any:
    """An empty middleware: `wrap_model_call` only calls the model, `wrap_tool_call` only runs
    the tool (the empty-hook floor: the hooks StopOnArtifact has).

    With `after_agent`, also an empty `after_agent` hook (one more graph node per run, the node
    StopOnArtifact ends its runs with).
    """
    from langchain.agents.middleware import AgentMiddleware

    class EmptyWrap(AgentMiddleware):  # type: ignore[type-arg]
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    if not after_agent:
        return EmptyWrap()

    class EmptyWrapAndEnd(EmptyWrap):
        def after_agent(self, state: Any, runtime: Any) -> None:
            return None

        async def aafter_agent(self, state: Any, runtime: Any) -> None:
            return None

    return EmptyWrapAndEnd()


def _state_floor() -> Any:
    """The floor of the design plus the state StopOnArtifact keeps, written as it writes it.

    Empty hooks, but the agent declares `StopOnArtifactState` (the public `stop_record`, the
    private run channel); every model call writes the run channel with the model's answer (one
    `Command`), and the run's end writes both keys. Nothing is read, decided or published:
    against `FLOOR` it is what the state costs LangGraph, against `CHOSEN` what toolstop's
    own work costs.
    """
    from langchain.agents.middleware import AgentMiddleware
    from langchain.agents.middleware.types import ExtendedModelResponse
    from langgraph.types import Command

    from toolstop._lifecycle import RUN_KEY
    from toolstop.middleware import StopOnArtifactState
    from toolstop.policy import StopPolicy
    from toolstop.record import new_record

    record = new_record(StopPolicy())

    class StateOnly(AgentMiddleware):  # type: ignore[type-arg]
        state_schema = StopOnArtifactState

        @staticmethod
        def _written(request: Any, response: Any) -> Any:
            run = request.state.get(RUN_KEY) or {"open": True, "record": record, "turn": None}
            update = {RUN_KEY: {**run, "remaining": None}}
            return ExtendedModelResponse(model_response=response, command=Command(update=update))

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return self._written(request, handler(request))

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return self._written(request, await handler(request))

        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

        def after_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
            run = state.get(RUN_KEY) or {"record": record}
            return {"stop_record": run["record"], RUN_KEY: {**run, "open": False}}

        async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
            return self.after_agent(state, runtime)

    return StateOnly()


BARE = "create_agent"
"""The baseline every ratio is taken against (the hand-built graph when langchain is missing)."""

FLOOR = "create_agent+empty wrap_model_call+after_agent"
"""The floor of StopOnArtifact's design: the hooks it has (`wrap_model_call`, `wrap_tool_call`,
`after_agent`), doing nothing (its `vs_floor`). The label, a key of the stored runs
(`docs/bench/overhead-runs`), is the one it had before 739bd8c gave the floor the tool hook."""

FLOOR_WITH_STATE = "create_agent+empty hooks+toolstop's state"
"""`FLOOR` plus the state StopOnArtifact keeps, written as it writes it (see `_state_floor`)."""

CHOSEN = "create_agent+StopOnArtifact"
"""The configuration measured against `FLOOR`."""

TARGET_VS_FLOOR = 1.03
"""The most time per run `CHOSEN` may take, as a ratio to `FLOOR`'s."""

TARGET_THROUGHPUT_VS_FLOOR = 0.95
"""The fewest runs per second `CHOSEN` may serve under concurrency, as a ratio to `FLOOR`'s."""


def _builders(
    *, floors: bool = False, design_floor: bool = False
) -> dict[str, Callable[[Any, list[Any]], Any]]:
    """The configurations: bare, StopOnArtifact and the hand-built graph; `floors` adds the
    empty-hook floors and the `before_model` jump, `design_floor` only `FLOOR` and
    `FLOOR_WITH_STATE`."""
    builders: dict[str, Callable[[Any, list[Any]], Any]] = {}
    if has_agents():
        from langchain.agents import create_agent

        from toolstop.middleware import StopOnArtifact

        builders[BARE] = lambda m, t: create_agent(m, t)
        if floors:
            builders["create_agent+empty wrap_model_call"] = lambda m, t: create_agent(
                m, t, middleware=[_floor(after_agent=False)]
            )
        if floors or design_floor:
            builders[FLOOR] = lambda m, t: create_agent(m, t, middleware=[_floor(after_agent=True)])
            builders[FLOOR_WITH_STATE] = lambda m, t: create_agent(
                m, t, middleware=[_state_floor()]
            )
        builders[CHOSEN] = lambda m, t: create_agent(m, t, middleware=[StopOnArtifact()])
        if floors:
            builders["create_agent+before_model jump"] = lambda m, t: create_agent(
                m, t, middleware=[_before_model_jump()]
            )
    builders["hand-built graph"] = lambda m, t: build_react_graph(m, t)
    return builders


def _baseline(names: Any) -> str:
    return BARE if BARE in names else "hand-built graph"


def wall_figures(samples_ms: dict[str, list[float]]) -> dict[str, Any]:
    """Median per configuration and its ratio to the baseline's median, from the samples.

    StopOnArtifact's is also taken to the floor of its design (`vs_floor`) and to that floor
    with toolstop's state (`vs_floor_with_state`), when they ran."""
    medians = {name: statistics.median(values) for name, values in samples_ms.items()}
    base = medians[_baseline(medians)]
    figures: dict[str, Any] = {
        name: {"median_ms": round(m, 4), "vs_create_agent": round(m / base, 4)}
        for name, m in medians.items()
    }
    _to_floors(figures, medians)
    return figures


def _to_floors(figures: dict[str, Any], values: dict[str, float]) -> None:
    """Add the ratios to the floor of the design (`vs_floor`: StopOnArtifact's and the state's)
    and StopOnArtifact's to that floor with toolstop's state (`vs_floor_with_state`), from
    `values` (median times, or rates), for the configurations that ran."""
    if FLOOR in values:
        for name in (CHOSEN, FLOOR_WITH_STATE):
            if name in values:
                figures[name]["vs_floor"] = round(values[name] / values[FLOOR], 4)
    if FLOOR_WITH_STATE in values and CHOSEN in values:
        figures[CHOSEN]["vs_floor_with_state"] = round(values[CHOSEN] / values[FLOOR_WITH_STATE], 4)


def wall_per_run(
    runs: int, builders: dict[str, Callable[[Any, list[Any]], Any]] | None = None
) -> dict[str, Any]:
    """Wall time of a 3-turn run where nothing stops, per configuration, interleaved.

    Each round runs every configuration once, in an order rotated by one each round (so no
    configuration always follows the same one); `samples_ms` keeps every run's time and the
    figures are the medians of those samples and their ratios to bare `create_agent`.
    Garbage is collected before each timed run and the collector paused during it, so no run
    pays for the garbage another configuration left (`gc_fair` in the result says so).
    `builders` (name -> `(model, tools) -> agent`) replaces the bench's configurations.
    """
    builders = builders if builders is not None else _builders(floors=True)
    names = list(builders)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(runs):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            model = ScriptedChatModel([call("search"), call("search"), call("search"), "answer"])
            agent = builders[name](model, _no_stop_tools())
            samples[name].append(_timed_ms(agent))
            model.assert_complete()
    return {
        "runs": runs,
        "gc_fair": True,
        "baseline": _baseline(names),
        "samples_ms": samples,
        "figures": wall_figures(samples),
    }


def _timed_ms(agent: Any) -> float:
    """Milliseconds of one run, garbage collected before and the collector paused during it."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        agent.invoke({"messages": [HumanMessage("q")]})
        return round(1000 * (time.perf_counter() - start), 4)
    finally:
        if enabled:
            gc.enable()


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

    samples: dict[str, list[float]] = {}
    for length in (10, 10_000):
        messages = history(length)
        times = timeit.repeat(lambda m=messages: decide(m), number=repeat, repeat=5)  # type: ignore[misc]
        samples[str(length)] = [round(1e6 * t / repeat, 4) for t in times]
    return {"repeat": repeat, "samples_us": samples, "figures": decide_figures(samples)}


def decide_figures(samples_us: dict[str, list[float]]) -> dict[str, Any]:
    """The best time per `decide` at each history length, and the ratio 10,000 vs 10."""
    best = {length: min(values) for length, values in samples_us.items()}
    return {
        "10_messages_us": best["10"],
        "10000_messages_us": best["10000"],
        "ratio_10000_vs_10": round(best["10000"] / best["10"], 4),
    }


def throughput_figures(concurrent: int, seconds: dict[str, list[float]]) -> dict[str, Any]:
    """Runs per second from the median round of each configuration, and its ratio to bare.

    StopOnArtifact's is also taken to the floor of its design (`vs_floor`) and to that floor
    with toolstop's state (`vs_floor_with_state`), when they ran."""
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    rates = {name: concurrent / elapsed for name, elapsed in medians.items()}
    base = rates[_baseline(rates)]
    figures: dict[str, Any] = {
        name: {
            "runs_per_s": round(rate, 1),
            "median_seconds": round(medians[name], 4),
            "vs_create_agent": round(rate / base, 4),
        }
        for name, rate in rates.items()
    }
    _to_floors(figures, rates)
    return figures


def throughput(
    concurrent: int, rounds: int = 5, *, floors: bool = False, design_floor: bool = True
) -> dict[str, Any]:
    """`concurrent` simultaneous `ainvoke` calls on one compiled agent per configuration.

    The configurations take turns for `rounds` rounds (order rotated each round, garbage
    collected before each burst, so no agent pays for another's; the collector stays on during
    the bursts); `seconds` keeps every burst's time, the figures are from each configuration's
    median burst. `design_floor` measures the floor of StopOnArtifact's design (with and
    without toolstop's state) beside it,
    `floors` all the configurations of the wall-time table.
    """
    agents = {
        name: build(SimulatedChatModel(tool_names=("search",)), _no_stop_tools())
        for name, build in _builders(floors=floors, design_floor=design_floor).items()
    }
    names = list(agents)

    async def burst(agent: Any) -> float:
        start = time.perf_counter()
        await asyncio.gather(
            *(agent.ainvoke({"messages": [HumanMessage(f"q{i}")]}) for i in range(concurrent))
        )
        return time.perf_counter() - start

    seconds: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            seconds[name].append(round(asyncio.run(burst(agents[name])), 4))
    return {
        "concurrent": concurrent,
        "rounds": rounds,
        "baseline": _baseline(names),
        "seconds": seconds,
        "figures": throughput_figures(concurrent, seconds),
    }


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
    before = round(_rss_mb(), 3)
    for i in range(runs):
        graph.invoke({"messages": [HumanMessage(f"q{i}")]})
    gc.collect()
    after = round(_rss_mb(), 3)
    return {
        "runs": runs,
        "rss_before_mb": before,
        "rss_after_mb": after,
        "growth_mb": round(after - before, 3),
    }


def calls_per_run(runs: int) -> dict[str, Any]:
    """Python function calls per 3-turn run, per configuration, counted by cProfile.

    Unlike time, the count does not depend on the machine's load: it shows where the work is.
    `toolstop_calls` and `toolstop_seconds` are the share of toolstop's own functions (its
    test doubles and the bench's own tool and empty hooks excluded); `profiled_seconds` is the
    whole run under the profiler.
    """
    import cProfile
    import pstats

    counts: dict[str, dict[str, Any]] = {}
    for name, build in _builders(floors=True).items():
        agents = []
        for _ in range(runs):
            model = ScriptedChatModel([call("search"), call("search"), call("search"), "answer"])
            agents.append(build(model, _no_stop_tools()))
        warm = ScriptedChatModel([call("search"), call("search"), call("search"), "answer"])
        build(warm, _no_stop_tools()).invoke({"messages": [HumanMessage("q")]})
        profile = cProfile.Profile()
        profile.enable()
        for agent in agents:
            agent.invoke({"messages": [HumanMessage("q")]})
        profile.disable()
        stats = pstats.Stats(profile)
        own = [
            (calls, seconds)
            for (path, _, _), (_, calls, seconds, _, _) in stats.stats.items()  # type: ignore[attr-defined]
            if _OWN in path and not any(part in path for part in _NOT_OWN)
        ]
        counts[name] = {
            "calls": stats.total_calls,  # type: ignore[attr-defined]
            "toolstop_calls": sum(c for c, _ in own),
            "profiled_seconds": round(stats.total_tt, 4),  # type: ignore[attr-defined]
            "toolstop_seconds": round(sum(s for _, s in own), 4),
        }
    return {
        "runs": runs,
        "baseline": _baseline(counts),
        "counts": counts,
        "figures": calls_figures(runs, counts),
    }


_OWN = os.sep + "toolstop" + os.sep
_NOT_OWN = (_OWN + "testing" + os.sep, _OWN + "bench" + os.sep, _OWN + "_tokens.py")
"""The test doubles (and the token estimate their model answers with, `toolstop._tokens`: no
router calls it), and the bench's own tool and empty hooks, are not toolstop's work."""


def calls_figures(runs: int, counts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Calls per run, their ratio to the baseline's, and toolstop's share of the profiled time."""
    base = counts[_baseline(counts)]["calls"]
    return {
        name: {
            "calls_per_run": round(c["calls"] / runs),
            "vs_create_agent": round(c["calls"] / base, 4),
            "toolstop_calls_per_run": round(c["toolstop_calls"] / runs),
            "toolstop_time_share": round(c["toolstop_seconds"] / c["profiled_seconds"], 4),
        }
        for name, c in counts.items()
    }


def measure_overhead(
    *,
    runs: int = 300,
    concurrent: int = 1000,
    rounds: int = 5,
    rss_runs: int = 5000,
    decide_repeat: int = 2000,
    profile_runs: int = 20,
) -> dict[str, Any]:
    """All overhead and scaling figures, in one process.

    Every figure is computed from the raw measurements stored next to it (`samples_ms`,
    `seconds`), so a reader can recompute it.
    """
    return {
        "wall_per_run_no_stop": wall_per_run(runs),
        "decide_scaling": decide_scaling(decide_repeat),
        "concurrent_throughput": throughput(concurrent, rounds),
        "rss": rss_growth(rss_runs),
        "calls_per_run": calls_per_run(profile_runs),
    }


def write_overhead(document: dict[str, Any], folder: Path) -> Path:
    """Write `overhead.json` into `folder` (lists of numbers on one line each)."""
    text = json.dumps(document, indent=2)
    text = re.sub(
        r"\[([^\[\]{}\"]*)\]",
        lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",") if x.strip()) + "]",
        text,
    )
    path = folder / "overhead.json"
    path.write_text(text + "\n", encoding="utf-8")
    return path
