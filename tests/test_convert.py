"""`toolstop.convert`: an existing tool, unchanged, signalling per call from its result."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState

from routers import ROUTERS, Router
from toolstop import StopPolicy, ToolstopConfigError, convert
from toolstop.decision import content_text
from toolstop.testing import ScriptedChatModel, assert_valid_history, call

BOOKING = '{"reservation_id": "R1", "flights": [{"flight_number": "HAT001"}], "total": -12.5}'
SHOWN = f"```json\n{BOOKING}\n```"
"""How a relay shows a JSON result: in a fence."""


@tool
def search_flights(origin: str) -> dict[str, Any]:
    """Search flights from an airport."""
    return {"flights": [{"flight_number": "HAT001", "departs": "08:00"}]}


@tool
def book(flight: str) -> str:
    """Book a flight."""
    if flight == "raise":
        msg = "payment gateway down, password=hunter2"
        raise RuntimeError(msg)
    if flight == "error-text":
        return "Error: flight not found"
    if flight == "error-json":
        return '{"error": "seat taken"}'
    return BOOKING


@pytest.fixture(params=ROUTERS, ids=lambda r: r.name)
def router(request: pytest.FixtureRequest) -> Router:
    return request.param  # type: ignore[no-any-return]


def run(
    router: Router, tools: list[Any], script: list[Any], policy: StopPolicy | None = None
) -> tuple[dict[str, Any], ScriptedChatModel]:
    model = ScriptedChatModel(script)
    agent = router.build(model, tools, policy=policy, checkpointer=None)
    state = agent.invoke({"messages": [HumanMessage("book HAT001")]})
    model.assert_complete()
    assert_valid_history(state["messages"])
    return state, model


def test_keeps_the_name_description_and_arguments_the_model_sees() -> None:
    converted = convert(book)
    assert converted.name == book.name
    assert converted.description == book.description
    schema = converted.tool_call_schema
    original = book.tool_call_schema
    assert isinstance(schema, type)
    assert isinstance(original, type)
    assert schema.model_json_schema() == original.model_json_schema()
    assert converted.response_format == "content_and_artifact"


@pytest.mark.contract
def test_a_successful_call_ends_the_run_with_the_tools_text(router: Router) -> None:
    state, model = run(router, [convert(book)], [call("book", flight="HAT001")])
    assert len(model.calls) == 1  # no restating call
    assert content_text(state["messages"][-1].content) == SHOWN
    assert state["stop_record"]["rule"] == "completed"
    assert state["messages"][2].artifact == {"stop": True, "reason": "completed"}


def test_without_convert_the_model_restates_it(router: Router) -> None:
    # the baseline the conversion saves: the same tool unconverted costs one more model call
    state, model = run(router, [book], [call("book", flight="HAT001"), AIMessage("Booked R1.")])
    assert len(model.calls) == 2
    assert state["stop_record"]["rule"] == "none"


@pytest.mark.contract
@pytest.mark.parametrize("flight", ["raise", "error-text", "error-json"])
def test_a_failure_goes_back_to_the_model_as_transient(router: Router, flight: str) -> None:
    state, model = run(
        router, [convert(book)], [call("book", flight=flight), AIMessage("It did not work.")]
    )
    assert len(model.calls) == 2
    result = state["messages"][2]
    assert isinstance(result, ToolMessage)
    assert result.artifact == {"stop": False, "reason": "transient"}
    assert state["stop_record"]["outcomes"]["transient"] == 1
    assert state["stop_record"]["invalid_signals"] == []
    if flight == "raise":  # the model-visible error text, secrets masked
        assert result.content == "Error: RuntimeError: payment gateway down, password=***"


def test_a_template_answer_is_shown_and_the_model_keeps_the_content(router: Router) -> None:
    converted = convert(book, answer="Booked {reservation_id} on {flights[0][flight_number]}.")
    state, _ = run(router, [converted], [call("book", flight="HAT001")])
    assert content_text(state["messages"][-1].content) == "Booked R1 on HAT001."
    assert state["messages"][2].content == BOOKING


@pytest.mark.contract
def test_a_template_reads_earlier_results_of_the_run(router: Router) -> None:
    converted = convert(
        book,
        answer="Booked {reservation_id}, departs {context[search_flights][flights][0][departs]}",
    )
    state, model = run(
        router,
        [search_flights, converted],
        [call("search_flights", origin="SFO"), call("book", flight="HAT001")],
    )
    assert len(model.calls) == 2
    assert content_text(state["messages"][-1].content) == "Booked R1, departs 08:00"


def test_a_function_answer_gets_the_result_and_the_context(router: Router) -> None:
    seen: list[Any] = []

    def answer(result: Any, context: Any) -> str:
        seen.append((result, dict(context)))
        refund = -result["total"]
        return f"Booked {result['reservation_id']}; {refund:.2f} refunded."

    state, _ = run(
        router,
        [search_flights, convert(book, answer=answer)],
        [call("search_flights", origin="SFO"), call("book", flight="HAT001")],
    )
    assert content_text(state["messages"][-1].content) == "Booked R1; 12.50 refunded."
    result, context = seen[0]
    assert result["reservation_id"] == "R1"
    flights = {"flights": [{"flight_number": "HAT001", "departs": "08:00"}]}
    assert context == {"search_flights": flights}


def test_context_is_this_runs_results_only() -> None:
    from toolstop.convert import _context

    earlier = [
        HumanMessage("first"),
        ToolMessage('{"a": 1}', tool_call_id="1", name="lookup"),
        HumanMessage("second"),
        ToolMessage('{"a": 2}', tool_call_id="2", name="lookup"),
        ToolMessage("Error: down", tool_call_id="3", name="other", status="error"),
        ToolMessage("plain text", tool_call_id="4", name="note"),
    ]
    assert _context(earlier) == {"lookup": {"a": 2}, "note": "plain text"}


@pytest.mark.parametrize(
    ("answer", "why", "recorded"),
    [
        ("Booked {missing}", "KeyError: 'missing'", "KeyError"),
        ("Flight {flights[3][flight_number]}", "IndexError", "IndexError"),
        ("{result.__class__}", "ValueError", "ValueError"),
        ("   {reservation_id:.0}", "the answer has no text", "blank"),
    ],
    ids=["missing-key", "bad-index", "attribute", "blank"],
)
def test_a_template_that_fails_shows_the_content_and_says_why(
    router: Router, answer: str, why: str, recorded: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="toolstop"):
        state, model = run(router, [convert(book, answer=answer)], [call("book", flight="HAT001")])
    assert len(model.calls) == 1  # the run still stops
    assert content_text(state["messages"][-1].content) == SHOWN
    artifact = state["messages"][2].artifact
    assert "answer" not in artifact
    assert why in artifact["answer_failed"]
    # the record says why too: the tool and the exception's type, never the text
    assert state["stop_record"]["answer_failed"] == [{"tool": "book", "why": recorded}]


def test_a_template_that_renders_leaves_no_answer_failed(router: Router) -> None:
    converted = convert(book, answer="Booked {reservation_id}")
    state, _ = run(router, [converted], [call("book", flight="HAT001")])
    assert state["messages"][-1].content == "Booked R1"
    assert "answer_failed" not in state["stop_record"]


def test_answer_failed_is_recorded_for_every_turn_in_never_mode(router: Router) -> None:
    converted = convert(book, answer="Booked {missing}")
    script = [call("book", flight="HAT001"), call("book", flight="HAT002"), "Booked twice."]
    state, _ = run(router, [converted], script, policy=StopPolicy(mode="never"))
    record = state["stop_record"]
    assert record["would_stop"] == "completed"
    assert record["answer_failed"] == [{"tool": "book", "why": "KeyError"}] * 2


def test_outcome_decides_instead_of_the_default_rule(router: Router) -> None:
    def outcome(result: Any) -> str:
        return "fatal" if isinstance(result, dict) and result["total"] < 0 else "completed"

    state, model = run(router, [convert(book, outcome=outcome)], [call("book", flight="HAT001")])
    assert len(model.calls) == 1
    assert state["stop_record"]["rule"] == "fatal"


def test_outcome_sees_the_exception(router: Router) -> None:
    def outcome(result: Any) -> str:
        return "fatal" if isinstance(result, RuntimeError) else "completed"

    state, model = run(router, [convert(book, outcome=outcome)], [call("book", flight="raise")])
    assert len(model.calls) == 1
    assert state["stop_record"]["rule"] == "fatal"
    shown = state["messages"][-1].content
    assert shown == "Error: RuntimeError: payment gateway down, password=***"


def test_an_outcome_that_raises_continues_with_the_model(router: Router) -> None:
    def outcome(result: Any) -> str:
        return "no such outcome"

    state, model = run(
        router, [convert(book, outcome=outcome)], [call("book", flight="HAT001"), AIMessage("ok")]
    )
    assert len(model.calls) == 2
    artifact = state["messages"][2].artifact
    assert artifact["reason"] == "transient"
    assert "ValueError" in artifact["outcome_failed"]


def test_a_plain_function_and_an_async_function(router: Router) -> None:
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return f"Order {order_id}: shipped"

    async def cancel_order(order_id: str) -> str:
        """Cancel an order."""
        await asyncio.sleep(0)
        return f"Order {order_id} cancelled"

    model = ScriptedChatModel([call("cancel_order", order_id="o1")])
    agent = router.build(
        model, [convert(lookup_order), convert(cancel_order)], policy=None, checkpointer=None
    )
    state = asyncio.run(agent.ainvoke({"messages": [HumanMessage("cancel o1")]}))
    assert content_text(state["messages"][-1].content) == "Order o1 cancelled"
    state, _ = run(router, [convert(lookup_order)], [call("lookup_order", order_id="o2")])
    assert content_text(state["messages"][-1].content) == "Order o2: shipped"


@pytest.mark.contract
def test_injected_arguments_reach_the_tool(router: Router) -> None:
    seen: dict[str, Any] = {}

    @tool
    def refund(
        order_id: str,
        messages: Annotated[list[Any], InjectedState("messages")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> str:
        """Refund an order."""
        seen["messages"] = len(messages)
        seen["id"] = tool_call_id
        return f"Refunded {order_id}"

    converted = convert(refund)
    assert set(converted.tool_call_schema.model_json_schema()["properties"]) == {"order_id"}
    state, _ = run(router, [converted], [call("refund", order_id="o1")])
    assert content_text(state["messages"][-1].content) == "Refunded o1"
    assert seen == {"messages": 2, "id": state["messages"][1].tool_calls[0]["id"]}


def test_a_tool_that_already_signals_keeps_its_signal(router: Router) -> None:
    @tool(response_format="content_and_artifact")
    def poll(job: str) -> tuple[str, dict[str, Any]]:
        """Poll a job."""
        return f"{job} is running", {"stop": False, "reason": "transient", "progress": 0.5}

    state, model = run(router, [convert(poll)], [call("poll", job="j1"), AIMessage("Still going.")])
    assert len(model.calls) == 2
    assert state["messages"][2].artifact == {"stop": False, "reason": "transient", "progress": 0.5}


def test_a_tools_own_artifact_is_kept() -> None:
    @tool(response_format="content_and_artifact")
    def chart(series: str) -> tuple[str, dict[str, Any]]:
        """Draw a chart."""
        return "chart drawn", {"points": [1, 2, 3]}

    message = convert(chart).invoke(
        {"type": "tool_call", "name": "chart", "args": {"series": "s"}, "id": "c1"}
    )
    assert message.artifact == {
        "stop": True,
        "reason": "completed",
        "tool_artifact": {"points": [1, 2, 3]},
    }
    assert convert(chart).invoke({"series": "s"}) == "chart drawn"  # plain input: the content


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"answer": 5}, "answer must be a str.format template or a function"),
        ({"answer": "Booked {}"}, "name each field"),
        ({"answer": "Booked {reservation_id"}, "not a str.format template"),
        ({"outcome": "completed"}, "outcome must be a function"),
    ],
)
def test_settings_are_checked_when_converting(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolstopConfigError, match=message):
        convert(book, **kwargs)


def test_a_subagent_tool_is_refused_naming_what_to_convert() -> None:
    """A trial's report advised `toolstop.convert(billing)` for a `subagent_tool`, which signals
    already (its stop is the sub-agent's): converting it changed nothing, silently."""
    from toolstop import build_react_graph, subagent_tool

    worker = build_react_graph(ScriptedChatModel(["done"]), [])
    billing = subagent_tool(worker, name="billing", description="Billing questions.")
    with pytest.raises(ToolstopConfigError, match="billing is a subagent_tool") as raised:
        convert(billing)
    assert "convert the sub-agent's own tools" in str(raised.value)


def test_return_direct_is_refused() -> None:
    @tool(return_direct=True)
    def direct(x: str) -> str:
        """Direct."""
        return x

    with pytest.raises(ToolstopConfigError, match="return_direct"):
        convert(direct)


def test_an_interrupt_passes_through() -> None:
    from langgraph.errors import GraphInterrupt

    @tool
    def review(x: str) -> str:
        """Ask a human."""
        raise GraphInterrupt(())

    with pytest.raises(GraphInterrupt):
        convert(review).invoke(
            {"type": "tool_call", "name": "review", "args": {"x": "1"}, "id": "c"}
        )


def test_an_mcp_tool_from_langchain_mcp_adapters(router: Router) -> None:
    pytest.importorskip("langchain_mcp_adapters", reason="needs the `mcp` extra")
    os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")
    from langchain_mcp_adapters.tools import load_mcp_tools
    from mcp.server.fastmcp import FastMCP
    from mcp.shared.memory import create_connected_server_and_client_session

    server = FastMCP("shop")

    @server.tool()
    def order_status(order_id: str) -> str:
        """The status of an order."""
        return f"Order {order_id} shipped on May 2"

    async def main() -> tuple[dict[str, Any], list[Any]]:
        async with create_connected_server_and_client_session(server._mcp_server) as session:
            tools = await load_mcp_tools(session)
            converted = [convert(t) for t in tools]
            assert all(isinstance(t, BaseTool) for t in converted)
            model = ScriptedChatModel([call("order_status", order_id="o7")])
            agent = router.build(model, converted, policy=None, checkpointer=None)
            state = await agent.ainvoke({"messages": [HumanMessage("where is o7")]})
            return state, model.calls

    state, calls = asyncio.run(main())
    assert len(calls) == 1
    assert content_text(state["messages"][-1].content) == "Order o7 shipped on May 2"
    assert state["stop_record"]["rule"] == "completed"
