"""Load: 1,000 concurrent runs on one compiled agent; every record matches its own plan."""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool

from routers import ROUTERS, Router
from toolstop import Outcome, StopPolicy, signal

# Seconds of CPU each (the 10,000-case fuzz over a minute): on a busy shared machine the
# default 60 s hang guard fired; the guard stays, wide enough for load.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

RUNS = 1000
BUDGET = 2
PLANS = [["success"], ["retry", "success"], ["fatal"], ["retry"] * (BUDGET + 1), ["retry", "fatal"]]


class PlanModel(BaseChatModel):
    """Stateless: reads its run number from the question and counts its own tool turns."""

    @property
    def _llm_type(self) -> str:
        return "plan-model"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _answer(self, messages: list[BaseMessage]) -> AIMessage:
        question = next(m for m in messages if isinstance(m, HumanMessage))
        run = int(re.findall(r"\d+", str(question.content))[0])
        attempt = sum(1 for m in messages if isinstance(m, ToolMessage))
        call = {
            "name": "lookup",
            "args": {"run": run, "attempt": attempt},
            "id": f"r{run}a{attempt}",
        }
        return AIMessage(
            content="",
            tool_calls=[call],
            usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        )

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages))])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        await asyncio.sleep(0)  # let other runs interleave
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages))])


def lookup_for(plans: dict[int, list[str]]) -> Any:
    async def lookup(run: int, attempt: int) -> tuple[str, dict[str, Any]]:
        await asyncio.sleep(0)
        outcome = plans[run][attempt]
        if outcome == "retry":
            return f"run {run}: timeout {attempt}", signal(Outcome.TRANSIENT)
        if outcome == "fatal":
            return f"run {run}: declined", signal(Outcome.FATAL)
        return f"run {run}: the answer", signal(Outcome.COMPLETED)

    def sync(run: int, attempt: int) -> tuple[str, dict[str, Any]]:
        return asyncio.run(lookup(run, attempt))

    return StructuredTool.from_function(
        sync,
        coroutine=lookup,
        name="lookup",
        description="Look up.",
        response_format="content_and_artifact",
    )


def expected(run: int, plan: list[str]) -> dict[str, Any]:
    retries = plan.count("retry")
    if retries > BUDGET:
        return {
            "rule": "retry_budget",
            "model_calls": BUDGET + 1,
            "transient_retries": BUDGET,
            "final": StopPolicy().retry_budget_message,
        }
    final = plan[-1]
    text = f"run {run}: the answer" if final == "success" else f"run {run}: declined"
    return {
        "rule": "completed" if final == "success" else "fatal",
        "model_calls": len(plan),
        "transient_retries": retries,
        "final": text,
    }


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_thousand_concurrent_runs_keep_their_own_records(router: Router) -> None:
    rng = random.Random(7)
    plans = {run: rng.choice(PLANS) for run in range(RUNS)}
    agent = router.build(
        PlanModel(),
        [lookup_for(plans)],
        policy=StopPolicy(max_transient_retries=BUDGET),
        checkpointer=None,
    )

    async def all_runs() -> list[dict[str, Any]]:
        return await asyncio.gather(
            *(agent.ainvoke({"messages": [HumanMessage(f"run {run}")]}) for run in range(RUNS))
        )

    states = asyncio.run(all_runs())
    mismatches = []
    for run, state in enumerate(states):
        record, want = state["stop_record"], expected(run, plans[run])
        got = {
            "rule": record["rule"],
            "model_calls": record["model_calls"],
            "transient_retries": record["transient_retries"],
            "final": state["messages"][-1].content,
        }
        if got != want:
            mismatches.append((run, want, got))
    assert mismatches == [], mismatches[:3]
    assert {s["stop_record"]["rule"] for s in states} == {"completed", "fatal", "retry_budget"}
