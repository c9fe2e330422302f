"""A step-budget stop shows the run's completed results no text answered, as every stop does
(DESIGN.md §11), also when the model is out of steps while asking for more tools and when an
empty answer (the customer-support tutorial's "Respond with a real output." re-prompt) stands
between the results and the stop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from routers import MIDDLEWARE_UNAVAILABLE
from toolstop import Outcome, StopPolicy, signal
from toolstop.decision import content_text
from toolstop.testing import ScriptedChatModel, call, forced_tool, turn

pytestmark = pytest.mark.skipif(
    MIDDLEWARE_UNAVAILABLE is not None, reason=f"create_agent: {MIDDLEWARE_UNAVAILABLE}"
)

STEP_TEXT = StopPolicy().step_budget_message


def agent(model: ScriptedChatModel) -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware, hook_config

    from toolstop import StopOnArtifact

    class Reprompt(AgentMiddleware):
        """The tutorial's Assistant: an empty answer is asked again."""

        @hook_config(can_jump_to=["model"])
        def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            last = state["messages"][-1]
            if isinstance(last, AIMessage) and not last.tool_calls and not last.content:
                return {
                    "messages": [HumanMessage("Respond with a real output.")],
                    "jump_to": "model",
                }
            return None

    found = forced_tool("found", ("Flight LX0112 departs 10:05.", signal(Outcome.COMPLETED)))
    plain = forced_tool("plain", ("A note.", None))
    # parallel="all": a turn stops only when every call asks to, so the found result goes on
    policy = StopPolicy(parallel="all")
    return create_agent(model, [found, plain], middleware=[Reprompt(), StopOnArtifact(policy)])


def run(limit: int, mode: str) -> tuple[dict[str, Any], ScriptedChatModel]:
    model = ScriptedChatModel(
        [turn(call("found"), call("plain")), "", turn(call("plain", query="more")), "done"]
    )
    graph = agent(model)
    inputs = {"messages": [HumanMessage("When does my flight leave?")]}
    config = {"recursion_limit": limit}
    if mode == "async":
        return asyncio.run(graph.ainvoke(inputs, config)), model
    return graph.invoke(inputs, config), model


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_budget_stop_after_an_empty_answer_shows_the_earlier_result(mode: str) -> None:
    replaced = decided = 0
    for limit in range(5, 14):
        state, model = run(limit, mode)
        record = state["stop_record"]
        assert record["rule"] == "step_budget", limit
        ran = [m for m in state["messages"] if m.type == "tool" and m.name == "found"]
        final = content_text(state["messages"][-1].content)
        if not ran:  # the first answer was already out of steps: nothing to show
            assert final == STEP_TEXT
            continue
        assert final == f"Flight LX0112 departs 10:05.\n\n{STEP_TEXT}", limit
        assert record["relayed"] == [ran[0].tool_call_id]
        if len(model.calls) == 3:  # the re-prompted model asked for more tools
            asked_more = any(m.type == "tool" and m.name == "plain" for m in state["messages"][6:])
            decided += asked_more  # the tools ran, then the budget stopped the run
            replaced += not asked_more  # its answer was replaced by the budget's relay
    # both ways a step budget ends this run were seen
    assert replaced
    assert decided
