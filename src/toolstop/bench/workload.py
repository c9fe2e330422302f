"""The bench's query set and its simulated model.

A query is a plan: for each tool the model calls, the outcomes of its successive calls (drawn
from the outcome mix, ending at the first success or fatal failure). The simulated model behaves
like a diligent real one: it calls the tools, retries what failed transiently, and answers (a
paraphrase) once every call has a final result. It costs simulated latency and reports tokens from
langchain-core's approximate counter, so savings in calls, tokens and time show as they would with
a provider.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from toolstop.examples.simulated import LatencyChatModel
from toolstop.outcome import Outcome, signal
from toolstop.testing.scripted import approximate_usage

__all__ = [
    "MAX_TRANSIENT",
    "NARRATOR_TAG",
    "CallCounter",
    "Query",
    "RunTotals",
    "SimulatedChatModel",
    "make_queries",
    "make_tools",
]

MAX_TRANSIENT = 3
"""At most this many transient failures in a row per tool: the next outcome is final, so no plan
runs into the retry budget (a budget stop would blur the wrong/missed-stop counts)."""

NARRATOR_TAG = "toolstop-bench-narrator"
"""The tag a narrator's calls carry (`StopPolicy(narrator=...)` in the bench), so `CallCounter`
counts them apart from the agent model's."""

TOOLS = ("search", "lookup")
TRANSIENT_TEXT = "The service timed out (503). Try again."
FATAL_TEXT = "The index rejected this query permanently; retrying will not help."
ANSWER = (
    "Based on the tool result: the request is answered above. In short, the policy applies as "
    "stated, with the conditions and time limits the document lists."
)


@dataclass(frozen=True, kw_only=True)
class Query:
    """One planned question: per tool, the outcomes of its successive calls."""

    index: int
    plans: Mapping[str, tuple[str, ...]]

    @property
    def parallel(self) -> bool:
        """True when the model calls two tools in one turn."""
        return len(self.plans) > 1

    @property
    def min_turns(self) -> int:
        """Tool turns a perfect router needs: one per call until each tool's final outcome."""
        return max(len(p) for p in self.plans.values())


def _plan(rng: random.Random, mix: Mapping[str, float]) -> tuple[str, ...]:
    names = list(mix)
    weights = [mix[n] for n in names]
    outcomes: list[str] = []
    while True:
        outcome = rng.choices(names, weights=weights)[0]
        if outcome == "retryable" and outcomes.count("retryable") >= MAX_TRANSIENT:
            final = [n for n in names if n != "retryable"]
            outcome = rng.choices(final, weights=[mix[n] for n in final])[0]
        outcomes.append(outcome)
        if outcome != "retryable":
            return tuple(outcomes)


def make_queries(
    count: int, *, mix: Mapping[str, float], parallel_share: float, seed: int
) -> list[Query]:
    """A deterministic query set for `seed`."""
    rng = random.Random(seed)
    queries = []
    for index in range(count):
        parallel = rng.random() < parallel_share
        tools = TOOLS if parallel else TOOLS[:1]
        queries.append(Query(index=index, plans={tool: _plan(rng, mix) for tool in tools}))
    return queries


def payload(kilobytes: float, seed: int) -> str:
    """A JSON search page of about `kilobytes` KB (what a successful call returns verbatim)."""
    rng = random.Random(seed)
    words = ["refund", "order", "shipping", "invoice", "customer", "policy", "days", "account"]
    hits: list[dict[str, Any]] = []
    while len(json.dumps(hits)) < kilobytes * 1024:
        text = " ".join(rng.choice(words) for _ in range(24))
        hits.append({"id": f"doc-{len(hits)}", "score": round(rng.random(), 3), "snippet": text})
    return json.dumps({"query": "refund policy", "hits": hits})


def make_tools(query: Query, page: str) -> list[BaseTool]:
    """Fresh tools for one query, each following its plan (the last outcome repeats)."""
    tools = []
    for name, plan in query.plans.items():
        tools.append(_planned_tool(name, plan, page))
    return tools


def _planned_tool(name: str, plan: tuple[str, ...], page: str) -> BaseTool:
    lock = threading.Lock()
    used = [0]

    def run(query: str = "") -> tuple[str, dict[str, Any]]:
        with lock:
            outcome = plan[min(used[0], len(plan) - 1)]
            used[0] += 1
        if outcome == "retryable":
            return TRANSIENT_TEXT, signal(Outcome.TRANSIENT)
        if outcome == "fatal":
            return FATAL_TEXT, signal(Outcome.FATAL)
        return page, signal(Outcome.COMPLETED)

    return StructuredTool.from_function(
        run,
        name=name,
        description=f"The {name} tool: finds documents for a query.",
        response_format="content_and_artifact",
    )


class CallCounter(BaseCallbackHandler):
    """Counts chat-model calls (with and without tools offered) and their tokens, for any model.

    Tools offered are read from the call's invocation parameters (`bind_tools` puts them there),
    tokens from each answer's `usage_metadata`; so a real provider is measured like the
    simulated model. A call tagged `NARRATOR_TAG` is a narrator's: counted apart
    (`narrator_calls`, `narrator_input_tokens`, `narrator_output_tokens`).
    """

    def __init__(self) -> None:
        self.calls_with_tools = 0
        self.calls_without_tools = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.narrator_calls = 0
        self.narrator_input_tokens = 0
        self.narrator_output_tokens = 0
        self._narrating: set[Any] = set()
        self._lock = threading.Lock()

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        """Count one call, by whether tools were offered (a narrator's apart)."""
        offered = bool((kwargs.get("invocation_params") or {}).get("tools"))
        with self._lock:
            if NARRATOR_TAG in (kwargs.get("tags") or ()):
                self.narrator_calls += 1
                self._narrating.add(kwargs.get("run_id"))
            elif offered:
                self.calls_with_tools += 1
            else:
                self.calls_without_tools += 1

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        """Add the answer's provider-reported tokens (to the narrator's, for its calls)."""
        narrator = kwargs.get("run_id") in self._narrating
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
                with self._lock:
                    if narrator:
                        self.narrator_input_tokens += int(usage.get("input_tokens", 0))
                        self.narrator_output_tokens += int(usage.get("output_tokens", 0))
                    else:
                        self.input_tokens += int(usage.get("input_tokens", 0))
                        self.output_tokens += int(usage.get("output_tokens", 0))


@dataclass(kw_only=True)
class RunTotals:
    """Model calls, tokens, time and stop rules summed over a bench's runs.

    One configuration of the simulated workload, or one mode of `bench --agent`."""

    queries: int = 0
    model_calls: int = 0
    narration_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    narrator_calls: int = 0
    narrator_input_tokens: int = 0
    narrator_output_tokens: int = 0
    wall_s: float = 0.0
    wall_by_repeat: list[float] = field(default_factory=list)
    """`wall_s` per repeat of the query set (`--repeat`), for the spread of the wall-time ratios."""
    rules: Counter[str] = field(default_factory=Counter)

    def add_wall(self, seconds: float, repeat: int) -> None:
        """Add one run's wall time, spent in repeat number `repeat` (from 0)."""
        self.wall_s += seconds
        self.wall_by_repeat.extend([0.0] * (repeat + 1 - len(self.wall_by_repeat)))
        self.wall_by_repeat[repeat] += seconds

    def add_calls(self, counter: CallCounter) -> int:
        """Add one run's model calls and tokens, as `counter` saw them; return its calls."""
        calls = counter.calls_with_tools + counter.calls_without_tools
        self.model_calls += calls
        self.narration_calls += counter.calls_without_tools
        self.input_tokens += counter.input_tokens
        self.output_tokens += counter.output_tokens
        self.narrator_calls += counter.narrator_calls
        self.narrator_input_tokens += counter.narrator_input_tokens
        self.narrator_output_tokens += counter.narrator_output_tokens
        return calls

    def costs(self, runs: int) -> dict[str, Any]:
        """Tokens and time as bench.json shows them; `runs`: the runs the time was spent on."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "wall_s": round(self.wall_s, 4),
            "wall_ms_per_query": round(1000 * self.wall_s / runs, 3) if runs else None,
            "wall_s_by_repeat": [round(s, 4) for s in self.wall_by_repeat],
        }


def _call(name: str, depth: int) -> dict[str, Any]:
    return {"name": name, "args": {"query": "refund policy"}, "id": f"{name}-{depth}"}


class SimulatedChatModel(LatencyChatModel):
    """A model that reads tool results like a diligent real model and costs simulated latency.

    After the question it calls every planned tool; after a turn it retries the calls that failed
    transiently, and answers once none did. With no tools bound it narrates (polish mode).
    """

    tool_names: tuple[str, ...] = ()

    @property
    def _llm_type(self) -> str:
        return "toolstop-bench-simulated"

    def _answer(self, messages: list[BaseMessage], offered: bool) -> AIMessage:
        turn: list[ToolMessage] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            turn.append(message)
        if not offered:
            response = AIMessage(content=ANSWER)
        elif not turn:
            calls = [_call(name, 1) for name in self.tool_names]
            response = AIMessage(content="", tool_calls=calls)
        else:
            failed = sorted({m.name or "" for m in turn if m.content == TRANSIENT_TEXT})
            if failed:
                depth = sum(1 for m in messages if isinstance(m, AIMessage) and m.tool_calls) + 1
                response = AIMessage(content="", tool_calls=[_call(n, depth) for n in failed])
            else:
                response = AIMessage(content=ANSWER)
        response.usage_metadata = approximate_usage(messages, response)
        return response
