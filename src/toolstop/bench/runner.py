"""Run the query set through each configuration side by side and count what each one cost."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from toolstop._compat import has_agents
from toolstop.bench.workload import (
    NARRATOR_TAG,
    CallCounter,
    Query,
    RunTotals,
    SimulatedChatModel,
    make_tools,
)
from toolstop.graph import build_react_graph
from toolstop.policy import StopPolicy

__all__ = ["CONFIGS", "Config", "Totals", "available_configs", "rotated", "run_bench"]

_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class Config:
    """One way to run the agent: a router and a stop behaviour."""

    name: str
    router: str
    behaviour: str
    """`never`, `return_direct`, `hard` or `polish`."""
    narrator: bool = False
    """`polish` with a narrator (`StopPolicy(narrator=...)`): a second simulated model, its
    calls tagged `NARRATOR_TAG` so they are counted apart."""

    def build(self, model: SimulatedChatModel, tools: list[Any]) -> Any:
        """The compiled agent of this configuration (tools get `return_direct` for that one)."""
        if self.behaviour == "return_direct":
            for tool in tools:
                tool.return_direct = True
            return _static(self.router, model, tools)
        narrator = None
        if self.narrator:
            latency = model.latency_s if isinstance(model, SimulatedChatModel) else 0.0
            narrator = SimulatedChatModel(latency_s=latency).with_config(tags=[NARRATOR_TAG])
        policy = StopPolicy(mode=self.behaviour, narrator=narrator)  # type: ignore[arg-type]
        if self.router == "graph":
            return build_react_graph(model, tools, policy=policy)
        if self.router == "pydantic_ai":
            from toolstop._check.pydantic_ai_router import build

            return build(model, tools, policy=policy)
        from langchain.agents import create_agent

        from toolstop.middleware import StopOnArtifact

        return create_agent(model, tools, middleware=[StopOnArtifact(policy)])


def _static(router: str, model: SimulatedChatModel, tools: list[Any]) -> Any:
    """The static flag as users have it today: legacy create_react_agent, or create_agent."""
    if router == "graph":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # create_react_agent is deprecated in langgraph 1.x
            from langgraph.prebuilt import create_react_agent

            return create_react_agent(model, tools)
    from langchain.agents import create_agent

    return create_agent(model, tools)


CONFIGS = [
    Config(
        name=f"{router}-{behaviour}",
        router=router,
        behaviour=behaviour.removesuffix("+narrator"),
        narrator=behaviour.endswith("+narrator"),
    )
    for router in ("graph", "middleware")
    for behaviour in ("never", "return_direct", "hard", "polish", "polish+narrator")
] + [
    Config(name=f"pydantic_ai-{behaviour}", router="pydantic_ai", behaviour=behaviour)
    for behaviour in ("never", "hard", "polish")
]
"""Every configuration; `graph-return_direct` is legacy `create_react_agent` (stops if *any*
call of the turn has the flag), `middleware-return_direct` is `create_agent` (only if *all* do).
Pydantic AI has no per-tool static stop to compare with (its output tools end a run, not a
function tool's result). `*-polish+narrator` narrates each stop with a second simulated
model (a cheaper one, priced apart), its calls and tokens counted apart; it runs on the
simulated model only."""


def available_configs() -> list[Config]:
    """The configurations the installed versions can run."""
    from toolstop._check.pydantic_ai_router import pydantic_ai_unavailable

    runs = {"graph": True, "middleware": has_agents(), "pydantic_ai": not pydantic_ai_unavailable()}
    return [c for c in CONFIGS if runs[c.router]]


@dataclass(kw_only=True)
class Totals(RunTotals):
    """What one configuration cost over the query set."""

    config: Config
    min_model_calls: int = 0
    wrong_stops: int = 0
    missed_stops: int = 0
    at_minimum: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON for bench.json."""
        return {
            "name": self.config.name,
            "router": self.config.router,
            "behaviour": self.config.behaviour,
            "queries": self.queries,
            "model_calls": self.model_calls,
            "narration_calls": self.narration_calls,
            "narrator_calls": self.narrator_calls,
            "narrator_input_tokens": self.narrator_input_tokens,
            "narrator_output_tokens": self.narrator_output_tokens,
            "min_model_calls": self.min_model_calls,
            "ratio_to_min": round(self.model_calls / self.min_model_calls, 4)
            if self.min_model_calls
            else None,
            "queries_at_minimum": self.at_minimum,
            **self.costs(self.queries),
            "wrong_stops": self.wrong_stops,
            "missed_stops": self.missed_stops,
            "rules": dict(sorted(self.rules.items())),
        }


def _tool_turns(messages: Sequence[Any]) -> int:
    return sum(1 for m in messages if isinstance(m, AIMessage) and m.tool_calls)


def _run_one(
    config: Config,
    query: Query,
    page: str,
    latency_s: float,
    totals: Totals,
    model: Any,
    repeat: int = 0,
) -> None:
    model = model or SimulatedChatModel(latency_s=latency_s, tool_names=tuple(query.plans))
    counter = CallCounter()
    agent = config.build(model, make_tools(query, page))
    start = time.perf_counter()
    question = HumanMessage(content=f"query {query.index}: use the tools {sorted(query.plans)}")
    state = agent.invoke({"messages": [question]}, {"callbacks": [counter]})
    totals.add_wall(time.perf_counter() - start, repeat)
    messages = state["messages"]
    turns = _tool_turns(messages)
    totals.queries += 1
    calls = totals.add_calls(counter)
    totals.min_model_calls += query.min_turns
    if calls == query.min_turns:
        totals.at_minimum += 1
    # A wrong stop ends the run before the plan's final outcomes (it stopped on a transient).
    if turns < query.min_turns:
        totals.wrong_stops += 1
    # A missed stop: the loop went back to the model (tools offered) after the final outcomes.
    if counter.calls_with_tools > query.min_turns:
        totals.missed_stops += 1
    record = state.get("stop_record")
    if isinstance(record, dict):
        totals.rules[str(record.get("rule"))] += 1
    elif isinstance(messages[-1], ToolMessage):
        totals.rules["return_direct"] += 1
    else:
        totals.rules["none"] += 1


def run_bench(
    queries: Sequence[Query],
    configs: Sequence[Config],
    *,
    page: str,
    latency_s: float,
    model: Any = None,
    repeat: int = 1,
    on_query: Callable[[], None] | None = None,
) -> list[Totals]:
    """Run every query through every configuration, interleaved query by query, `repeat` times.

    First the first query once through every configuration, not counted (a warm-up: the first
    run of a process pays for imports, caches and connections, which would count against
    whichever configuration runs first). Then each query through every configuration, the
    order rotating by one configuration per query and per repeat (`rotated`), so no
    configuration always runs first. `model=None` uses the simulated model (with `latency_s`);
    a real chat model is measured the same way, through a callback that counts its calls and
    provider-reported tokens.
    """
    totals = {c.name: Totals(config=c) for c in configs}
    if queries:
        for config in configs:
            _run_one(config, queries[0], page, latency_s, Totals(config=config), model)
    for round_ in range(repeat):
        for index, query in enumerate(queries):
            for config in rotated(configs, index + round_):
                _run_one(config, query, page, latency_s, totals[config.name], model, round_)
            if on_query is not None:
                on_query()
    return list(totals.values())


def rotated(items: Sequence[_T], by: int) -> list[_T]:
    """`items` starting at `by` (modulo their number): `rotated([a, b, c], 1) == [b, c, a]`."""
    if not items:
        return []
    start = by % len(items)
    return [*items[start:], *items[:start]]
