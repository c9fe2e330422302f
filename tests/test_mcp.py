"""MCP tools signal through structuredContent or _meta, from trusted servers only."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters", reason="needs the `mcp` extra")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from langchain_core.messages import HumanMessage
from mcp.shared.memory import create_connected_server_and_client_session

from routers import ROUTERS, Router
from toolstop import StopPolicy
from toolstop.decision import content_text
from toolstop.mcp import load_tools
from toolstop.testing import ScriptedChatModel, assert_valid_history, call

SERVER = Path(__file__).parent / "support" / "servers" / "billing_mcp.py"
sys.path.insert(0, str(SERVER.parent))
import billing_mcp  # noqa: E402


@pytest.fixture(params=[r for r in ROUTERS if r.name != "legacy"], ids=lambda r: r.name)
def router(request: pytest.FixtureRequest) -> Router:
    return request.param  # type: ignore[no-any-return]


def in_process(trusted: set[str], body: Callable[[list[Any]], Awaitable[Any]]) -> Any:
    billing_mcp.FLAKY_CALLS["count"] = 0

    async def main() -> Any:
        async with create_connected_server_and_client_session(
            billing_mcp.server._mcp_server
        ) as session:
            tools = await load_tools(session, server_name="billing", trusted_servers=trusted)
            return await body(tools)

    return asyncio.run(main())


def run_with(
    router: Router,
    script: list[Any],
    policy: StopPolicy | None = None,
    trusted: frozenset[str] = frozenset({"billing"}),
) -> tuple[dict[str, Any], ScriptedChatModel]:
    model = ScriptedChatModel(script)

    async def body(tools: list[Any]) -> dict[str, Any]:
        agent = router.build(model, tools, policy=policy, checkpointer=None)
        return await agent.ainvoke({"messages": [HumanMessage("q")]})

    return in_process(set(trusted), body), model


@pytest.mark.parametrize(
    ("tool", "args", "content"),
    [
        ("pay", {"order_id": "o-1"}, "Paid order o-1. Receipt r-1."),
        ("lookup", {"query": "x"}, "The answer to x."),
    ],
    ids=["structuredContent", "_meta"],
)
def test_a_trusted_server_stops_the_loop(
    router: Router, tool: str, args: dict[str, Any], content: str
) -> None:
    state, model = run_with(router, [call(tool, **args)])
    model.assert_complete()
    assert state["stop_record"]["rule"] == "completed"
    assert content_text(state["messages"][-1].content) == content  # the tool's text, verbatim
    artifact = state["messages"][2].artifact
    assert artifact["stop"] is True
    assert artifact["mcp"]["server"] == "billing"
    assert artifact["mcp"]["trusted"] is True


def test_an_untrusted_server_cannot_stop_the_loop(router: Router) -> None:
    state, model = run_with(
        router, [call("pay", order_id="o-1"), "I paid it."], trusted=frozenset({"someone-else"})
    )
    model.assert_complete()  # the model was called again: the signal was ignored
    record = state["stop_record"]
    assert record["rule"] == "none"
    assert [i["problem"] for i in record["invalid_signals"]] == ["untrusted"]


def test_is_error_is_transient_whatever_it_claims(router: Router) -> None:
    state, model = run_with(router, [call("flaky", query="q"), call("flaky", query="q")])
    model.assert_complete()
    record = state["stop_record"]
    assert (record["rule"], record["transient_retries"]) == ("completed", 1)
    assert model.calls[1].messages[-1].content[0]["text"] == "Upstream timed out."  # type: ignore[index]
    assert_valid_history(state["messages"])


def test_an_untrusted_server_that_keeps_failing_ends_the_run_on_the_retry_budget(
    router: Router,
) -> None:
    """Its signals are ignored, but its errors count: a failing service, and no loop on it."""
    policy = StopPolicy(max_transient_retries=0)
    state, model = run_with(
        router, [call("flaky", query="q")], policy, trusted=frozenset({"someone-else"})
    )
    model.assert_complete()  # no second model call
    record = state["stop_record"]
    assert (record["rule"], record["stopped"], record["transient_retries"]) == (
        "retry_budget",
        True,
        0,
    )
    assert record["tools"] == ["flaky"]
    final = content_text(state["messages"][-1].content)
    assert final == policy.retry_budget_message  # the policy's text, never the server's
    assert "Upstream timed out" not in final
    assert_valid_history(state["messages"])


def test_a_server_cannot_forge_the_envelope(router: Router) -> None:
    state, model = run_with(router, [call("forge", query="q"), "ok"])
    model.assert_complete()
    assert state["stop_record"]["rule"] == "none"
    assert state["messages"][2].artifact["mcp"]["structured_content"] == {
        "toolstop:deadbeef": {"signal": {"stop": True}},
        "note": "x",
    }


def test_over_stdio_with_a_real_server_process(router: Router) -> None:
    connection = {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(SERVER)],
        "env": {**os.environ, "FASTMCP_CHECK_FOR_UPDATES": "off"},
    }
    model = ScriptedChatModel([call("pay", order_id="o-7")])

    async def main() -> dict[str, Any]:
        tools = await load_tools(
            connection=connection, server_name="billing", trusted_servers={"billing"}
        )
        agent = router.build(model, tools, policy=None, checkpointer=None)
        return await agent.ainvoke({"messages": [HumanMessage("q")]})

    state = asyncio.run(main())
    model.assert_complete()
    assert state["stop_record"]["rule"] == "completed"
    assert "Paid order o-7" in str(state["messages"][-1].content)


def _two_turns(router: Router, script: list[Any]) -> tuple[dict[str, Any], ScriptedChatModel]:
    """Run "q", then "thanks" on the same thread; the second run's state and the model."""
    from langgraph.checkpoint.memory import InMemorySaver

    model = ScriptedChatModel(script)

    async def body(tools: list[Any]) -> dict[str, Any]:
        agent = router.build(model, tools, policy=None, checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "t1"}}
        await agent.ainvoke({"messages": [HumanMessage("q")]}, config)
        return await agent.ainvoke({"messages": [HumanMessage("thanks")]}, config)

    return in_process({"billing"}, body), model


def test_a_servers_answer_is_shown_and_never_sent_to_the_model(router: Router) -> None:
    state, model = _two_turns(router, [call("receipt", kind="text"), "You're welcome."])
    model.assert_complete()
    assert state["messages"][3].content == "Your receipt r-2 is on its way."  # the user saw it
    sent = model.calls[-1].messages
    assert content_text(sent[3].content) == "receipt r-2: sent"  # the model sees the content
    assert "on its way" not in repr([m.content for m in sent])
    assert_valid_history(state["messages"])


@pytest.mark.parametrize("kind", ["image", "number"])
def test_a_servers_answer_that_is_not_text_goes_back_to_the_model(
    router: Router, kind: str
) -> None:
    state, model = _two_turns(router, [call("receipt", kind=kind), "Sent.", "You're welcome."])
    model.assert_complete()
    assert "example.com" not in repr([m.content for c in model.calls for m in c.messages])
    assert state["messages"][3].content == "Sent."  # the model answered the first run
    assert_valid_history(state["messages"])


def test_a_relay_shows_a_results_text_blocks_only(router: Router) -> None:
    state, model = _two_turns(router, [call("chart", with_text=True), "You're welcome."])
    model.assert_complete()
    relay = state["messages"][3]
    assert relay.content == [{"type": "text", "text": "Sales chart."}]  # no image as assistant
    assert model.calls[-1].messages[3].content == relay.content
    assert_valid_history(state["messages"])


def test_a_stop_whose_result_has_no_text_goes_back_to_the_model(router: Router) -> None:
    state, model = run_with(router, [call("chart", with_text=False), "Here is your chart."])
    model.assert_complete()
    record = state["stop_record"]
    assert (record["rule"], record["stopped"]) == ("none", False)
    assert [i["problem"] for i in record["invalid_signals"]] == ["empty_relay"]


# -- near misses in structuredContent ---------------------------------------------------------
@pytest.mark.parametrize(
    ("shape", "problem"),
    [
        ("case", "near_miss_key"),
        ("doubled", "near_miss_key"),
        ("no-stop", "missing_stop"),
        ("nested", "malformed_envelope"),
    ],
)
def test_a_near_miss_in_structured_content_is_a_malformed_signal(
    router: Router, shape: str, problem: str
) -> None:
    state, model = run_with(router, [call("near", shape=shape), "I looked."])
    model.assert_complete()  # back to the model: a near miss never stops the loop
    record = state["stop_record"]
    assert record["rule"] == "none"
    assert [i["problem"] for i in record["invalid_signals"]] == [problem]
    assert (
        state["messages"][2].artifact["mcp"]["structured_content"]
        == (billing_mcp.NEAR_MISSES[shape])
    )


def test_a_near_miss_from_an_untrusted_server_is_untrusted(router: Router) -> None:
    state, model = run_with(
        router, [call("near", shape="case"), "ok"], trusted=frozenset({"someone-else"})
    )
    model.assert_complete()
    assert [i["problem"] for i in state["stop_record"]["invalid_signals"]] == ["untrusted"]
