"""A cheap narrator: `StopPolicy(mode="polish", narrator=model)` on every LangChain router."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from routers import ROUTERS, Router
from toolstop import StopPolicy, ToolstopConfigError, signal
from toolstop._narrator import NARRATOR_PROMPT
from toolstop.testing import ScriptedChatModel, assert_valid_history, call

RECEIPT = "Paid order o-1. Receipt r-1."
NARRATED = "Your order o-1 is paid; the receipt is r-1."


@tool(response_format="content_and_artifact")
def lookup(order_id: str) -> tuple[str, dict[str, Any]]:
    """Look an order up (no signal)."""
    return f"Order {order_id}: 2 items, 30 EUR", {}


@tool(response_format="content_and_artifact")
def pay(order_id: str) -> tuple[str, dict[str, Any]]:
    """Pay an order."""
    return RECEIPT, signal("completed")


@pytest.fixture(params=ROUTERS, ids=lambda r: r.name)
def router(request: pytest.FixtureRequest) -> Router:
    return request.param  # type: ignore[no-any-return]


def run(
    router: Router, policy: StopPolicy, script: list[Any], *, use_async: bool = False
) -> tuple[dict[str, Any], ScriptedChatModel]:
    model = ScriptedChatModel(script)
    agent = router.build(model, [lookup, pay], policy=policy, checkpointer=None)
    question = {"messages": [HumanMessage("pay order o-1 please")]}
    state = asyncio.run(agent.ainvoke(question)) if use_async else agent.invoke(question)
    model.assert_complete()
    assert_valid_history(state["messages"])
    return state, model


SCRIPT = [call("lookup", order_id="o-1"), call("pay", order_id="o-1")]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_the_narrator_words_the_stop_and_the_agents_model_is_not_called_again(
    router: Router, use_async: bool
) -> None:
    narrator = ScriptedChatModel([NARRATED])
    policy = StopPolicy(mode="polish", narrator=narrator)
    state, model = run(router, policy, SCRIPT, use_async=use_async)
    narrator.assert_complete()
    assert len(model.calls) == 2  # the two tool turns; no third call to narrate
    assert state["messages"][-1].content == NARRATED
    record = state["stop_record"]
    assert (record["rule"], record["model_calls"], record["narrator_calls"]) == ("completed", 2, 1)
    # the narrator's tokens are its own, counted apart from the agent model's
    usage = narrator.calls[0].response.usage_metadata
    assert usage is not None
    assert record["narrator_input_tokens"] == usage["input_tokens"] > 0
    assert record["narrator_output_tokens"] == usage["output_tokens"] > 0
    assert record["input_tokens"] == sum(
        c.response.usage_metadata["input_tokens"]  # type: ignore[index]
        for c in model.calls
    )


def test_the_narrator_sees_the_request_and_the_runs_results_only(router: Router) -> None:
    narrator = ScriptedChatModel([NARRATED])
    run(router, StopPolicy(mode="polish", narrator=narrator), SCRIPT)
    seen = narrator.calls[0]
    assert seen.tools == ()  # no tools offered
    system, human = seen.messages
    assert isinstance(system, SystemMessage)
    assert system.content == NARRATOR_PROMPT
    assert isinstance(human, HumanMessage)
    assert human.content == (
        "The user asked:\npay order o-1 please\n\nThe tools returned:\n"
        "[lookup] Order o-1: 2 items, 30 EUR\n\n[pay] " + RECEIPT
    )


def test_without_a_narrator_polish_calls_the_agents_model(router: Router) -> None:
    state, model = run(router, StopPolicy(mode="polish"), [*SCRIPT, AIMessage(NARRATED)])
    assert len(model.calls) == 3
    assert state["stop_record"]["model_calls"] == 3
    assert "narrator_calls" not in state["stop_record"]


def test_a_narrators_stray_tool_call_is_dropped(router: Router) -> None:
    stray = AIMessage(NARRATED, tool_calls=[{"name": "pay", "args": {}, "id": "x1"}])
    narrator = ScriptedChatModel([stray])
    state, _ = run(router, StopPolicy(mode="polish", narrator=narrator), SCRIPT)
    assert state["messages"][-1].content == NARRATED
    assert state["messages"][-1].tool_calls == []


def test_a_narrator_needs_polish_and_a_model() -> None:
    with pytest.raises(ToolstopConfigError, match="narrates polish stops"):
        StopPolicy(mode="hard", narrator=ScriptedChatModel([]))
    with pytest.raises(ToolstopConfigError, match="must be a chat model"):
        StopPolicy(mode="polish", narrator="openai:gpt-4.1-nano")


def test_the_report_counts_and_prices_both_models(tmp_path: Any) -> None:
    import json

    from langgraph.checkpoint.sqlite import SqliteSaver

    from toolstop import build_react_graph
    from toolstop.cli import main

    db = str(tmp_path / "threads.sqlite")
    narrators: list[ScriptedChatModel] = []
    with SqliteSaver.from_conn_string(db) as saver:
        for user in ("ana", "ben"):
            narrator = ScriptedChatModel([NARRATED])
            narrators.append(narrator)
            agent = build_react_graph(
                ScriptedChatModel(SCRIPT),
                [lookup, pay],
                policy=StopPolicy(mode="polish", narrator=narrator),
                checkpointer=saver,
            )
            agent.invoke(
                {"messages": [HumanMessage("pay order o-1 please")]},
                {"configurable": {"thread_id": user}},
            )
    out = tmp_path / "out"
    argv = ["report", "--db", db, "--out", str(out), "--price-in", "3", "--price-out", "15"]
    argv += ["--narrator-price-in", "0.1", "--narrator-price-out", "0.4"]
    assert main(argv) == 0
    document = json.loads((out / "report.json").read_text(encoding="utf-8"))
    usages = [n.calls[0].response.usage_metadata for n in narrators]
    narrated_in = sum(u["input_tokens"] for u in usages)  # type: ignore[index]
    narrated_out = sum(u["output_tokens"] for u in usages)  # type: ignore[index]
    assert document["narrator"] == {
        "calls": 2,
        "input_tokens": narrated_in,
        "output_tokens": narrated_out,
    }
    assert document["model_calls"] == 4  # two tool turns per run; the narration is not one
    spent = document["spent"]
    assert spent["narrator"] == round((narrated_in * 0.1 + narrated_out * 0.4) / 1e6, 6)
    expected = (document["input_tokens"] * 3 + document["output_tokens"] * 15) / 1e6
    assert spent["model"] == round(expected, 6)
