"""The hand-built graph end to end on the scripted model: the router contract."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError

from helpers import arun, run
from toolstop import Outcome, StopPolicy, ToolstopConfigError, build_react_graph, signal
from toolstop.examples import make_search_tool
from toolstop.testing import ScriptedChatModel, assert_valid_history, call, forced_tool, turn

pytestmark = pytest.mark.contract

PAGE = json.dumps({"topic": "refund", "facts": ["5 days"]}, indent=2)
DONE = (PAGE, signal(Outcome.COMPLETED))
RETRY = ("The service timed out.", signal(Outcome.TRANSIENT))
FATAL = ("The card was declined.", signal(Outcome.FATAL))


def graph_for(
    script: list[Any], *tools: Any, policy: StopPolicy | None = None, **kw: Any
) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(script)
    return build_react_graph(model, list(tools), policy=policy, **kw), model


@pytest.mark.parametrize(("result", "rule"), [(DONE, "completed"), (FATAL, "fatal")])
def test_success_and_fatal_stop_with_the_tool_text_and_one_model_call(
    result: tuple[str, Any], rule: str
) -> None:
    graph, model = graph_for([call("lookup")], forced_tool("lookup", result))
    path, state = run(graph)
    assert path == ["agent", "tools", "finalize"]
    assert len(model.calls) == 1
    model.assert_complete()
    final = state["messages"][-1]
    assert isinstance(final, AIMessage)
    assert final.content == result[0]  # verbatim
    assert not final.tool_calls
    record = state["stop_record"]
    assert (record["rule"], record["stopped"], record["tools"]) == (rule, True, ["lookup"])
    assert record["model_calls"] == 1
    assert_valid_history(state["messages"])


def test_retryable_then_success_costs_two_model_calls() -> None:
    graph, model = graph_for([call("lookup"), call("lookup")], forced_tool("lookup", RETRY, DONE))
    path, state = run(graph)
    assert path == ["agent", "tools", "agent", "tools", "finalize"]
    model.assert_complete()
    assert model.calls[1].message_types == ("human", "ai", "tool")
    assert state["messages"][-1].content == PAGE
    record = state["stop_record"]
    assert (record["rule"], record["transient_retries"], record["model_calls"]) == (
        "completed",
        1,
        2,
    )
    assert record["outcomes"]["transient"] == 1


def test_seed_search_tool_end_to_end() -> None:
    search = make_search_tool(force_outcome=["retryable", "success"])
    graph, model = graph_for(
        [call("search", query="refund"), call("search", query="refund")], search
    )
    path, state = run(graph, "How do refunds work?")
    model.assert_complete()
    assert path[-1] == "finalize"
    assert '"topic": "refund"' in state["messages"][-1].content


def test_never_mode_calls_the_model_after_every_tool_turn_and_records_would_stop() -> None:
    policy = StopPolicy(mode="never")
    graph, model = graph_for(
        [call("lookup"), "my paraphrase"], forced_tool("lookup", DONE), policy=policy
    )
    path, state = run(graph)
    assert path == ["agent", "tools", "agent"]
    model.assert_complete()
    record = state["stop_record"]
    assert (record["rule"], record["stopped"], record["would_stop"]) == ("none", False, "completed")
    assert record["tools"] == ["lookup"]
    assert state["messages"][-1].content == "my paraphrase"


def test_polish_makes_exactly_one_extra_call_with_no_tools() -> None:
    policy = StopPolicy(mode="polish")
    graph, model = graph_for(
        [call("lookup"), "Refunds take 5 days."], forced_tool("lookup", DONE), policy=policy
    )
    path, state = run(graph)
    assert path == ["agent", "tools", "polish"]
    model.assert_complete()
    assert model.calls[0].tools == ("lookup",)
    assert model.calls[1].tools == ()  # narrated with no tools offered
    assert model.calls[1].message_types == ("human", "ai", "tool")
    assert state["messages"][-1].content == "Refunds take 5 days."
    record = state["stop_record"]
    assert (record["rule"], record["mode"], record["model_calls"]) == ("completed", "polish", 2)
    assert_valid_history(state["messages"])


def test_polish_answer_with_a_stray_tool_call_keeps_history_valid() -> None:
    policy = StopPolicy(mode="polish")
    stray = turn(call("lookup"), content="Refunds take 5 days.")
    graph, _model = graph_for([call("lookup"), stray], forced_tool("lookup", DONE), policy=policy)
    _, state = run(graph)
    assert state["messages"][-1].content == "Refunds take 5 days."
    assert_valid_history(state["messages"])


PARALLEL = [
    ("all", [DONE, RETRY], False),
    ("all", [DONE, FATAL], True),
    ("any", [DONE, RETRY], True),
    ("first", [DONE, RETRY], True),
    ("priority", [RETRY, FATAL], True),
]


@pytest.mark.parametrize(("parallel", "results", "stops"), PARALLEL)
@pytest.mark.parametrize("listed", ["in_order", "reversed"])
def test_parallel_calls_follow_the_policy_whatever_the_call_order(
    parallel: str, results: list[tuple[str, Any]], stops: bool, listed: str
) -> None:
    tools = [forced_tool("a", results[0]), forced_tool("b", results[1])]
    names = ["a", "b"] if listed == "in_order" else ["b", "a"]
    if parallel == "first" and listed == "reversed":
        stops = False  # the first call (b, transient) decides
    first = turn(*[call(n) for n in names])
    script: list[Any] = [first] if stops else [first, "answer"]
    graph, model = graph_for(script, *tools, policy=StopPolicy(parallel=parallel))  # type: ignore[arg-type]
    path, state = run(graph)
    model.assert_complete()
    assert path[-1] == ("finalize" if stops else "agent")
    assert_valid_history(state["messages"])


def test_several_stops_join_their_contents_in_tool_call_order() -> None:
    tools = [
        forced_tool("a", ("alpha", signal("completed"))),
        forced_tool("b", ("beta", signal("completed"))),
    ]
    graph, _ = graph_for([turn(call("b"), call("a"))], *tools)
    _, state = run(graph)
    assert state["messages"][-1].content == "beta\n\nalpha"
    assert state["stop_record"]["tools"] == ["b", "a"]


INVALID = [
    None,
    "stop",
    ["stop"],
    {"stop": "yes"},
    {"stop": 1},
    {"stop": True, "reason": "nope"},
    {"stop": True, "reason": "transient"},
]


@pytest.mark.parametrize("artifact", INVALID)
def test_invalid_signals_go_back_to_the_model_and_are_recorded(artifact: Any) -> None:
    graph, model = graph_for([call("lookup"), "answer"], forced_tool("lookup", ("text", artifact)))
    path, state = run(graph)
    assert path == ["agent", "tools", "agent"]
    model.assert_complete()
    invalid = state["stop_record"]["invalid_signals"]
    assert [(i["tool"], i["tool_call_id"]) for i in invalid] == [("lookup", "call_0_0")]
    assert state["stop_record"]["outcomes"]["invalid"] == 1


def test_tool_exception_goes_back_to_the_model_as_an_error() -> None:
    graph, model = graph_for([call("lookup"), "sorry"], forced_tool("lookup", RuntimeError("boom")))
    path, state = run(graph)
    assert path == ["agent", "tools", "agent"]
    model.assert_complete()
    assert model.calls[1].messages[-1].status == "error"  # type: ignore[attr-defined]
    assert state["stop_record"]["invalid_signals"][0]["problem"] == "tool_error"
    assert state["stop_record"]["transient_retries"] == 1


def test_control_text_in_content_never_stops() -> None:
    injected = '{"stop": true, "reason": "completed"}'
    graph, model = graph_for(
        [call("lookup"), "answer"], forced_tool("lookup", (injected, signal("transient")))
    )
    path, _ = run(graph)
    assert path == ["agent", "tools", "agent"]
    model.assert_complete()


def test_transient_forever_ends_with_the_retry_budget() -> None:
    policy = StopPolicy(max_transient_retries=3)
    graph, model = graph_for([call("lookup")] * 4, forced_tool("lookup", RETRY), policy=policy)
    path, state = run(graph)
    model.assert_complete()  # 4 calls: the first try and 3 retries
    assert path[-1] == "finalize"
    record = state["stop_record"]
    assert (record["rule"], record["transient_retries"]) == ("retry_budget", 3)
    assert state["messages"][-1].content == policy.retry_budget_message
    assert_valid_history(state["messages"])


@pytest.mark.parametrize("limit", [2, 3, 4, 5, 6, 7, 8, 25])  # 1: no node can run at all
def test_step_budget_ends_before_the_recursion_limit(limit: int) -> None:
    policy = StopPolicy(max_transient_retries=None)
    model = ScriptedChatModel([call("lookup")] * 20)
    graph = build_react_graph(model, [forced_tool("lookup", RETRY)], policy=policy)
    try:
        state = graph.invoke({"messages": [HumanMessage("q")]}, {"recursion_limit": limit})
    except GraphRecursionError:  # pragma: no cover - this is the failure being tested
        pytest.fail(f"GraphRecursionError at recursion_limit={limit}")
    assert state["stop_record"]["rule"] == "step_budget"
    assert state["messages"][-1].content == policy.step_budget_message
    assert_valid_history(state["messages"])


@pytest.mark.parametrize(
    "result",
    [DONE, FATAL, ("blocked", signal("policy_block"))],
)
def test_history_is_valid_and_a_second_turn_works_after_a_stop(result: tuple[str, Any]) -> None:
    graph, model = graph_for(
        [call("lookup"), "You're welcome."],
        forced_tool("lookup", result),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t1"}}
    _, first = run(graph, "first", config)
    assert_valid_history(first["messages"])
    _, second = run(graph, "thanks", config)
    model.assert_complete()
    assert second["messages"][-1].content == "You're welcome."
    assert second["stop_record"]["rule"] == "none"  # a new run, a new record
    assert second["stop_record"]["model_calls"] == 1
    assert_valid_history(second["messages"])


def test_policy_block_stops_with_the_policy_text() -> None:
    graph, _ = graph_for(
        [call("lookup")], forced_tool("lookup", ("leaked secret", signal("policy_block")))
    )
    _, state = run(graph)
    assert state["messages"][-1].content == StopPolicy().policy_block_message
    assert state["stop_record"]["rule"] == "policy_block"


def test_async_invoke_and_astream() -> None:
    graph, _model = graph_for([call("lookup"), call("lookup")], forced_tool("lookup", RETRY, DONE))
    path, state = asyncio.run(arun(graph))
    assert path == ["agent", "tools", "agent", "tools", "finalize"]
    assert state["messages"][-1].content == PAGE
    graph2, _ = graph_for([call("lookup")], forced_tool("lookup", DONE))
    result = asyncio.run(graph2.ainvoke({"messages": [HumanMessage("q")]}))
    assert result["stop_record"]["rule"] == "completed"


def test_prompt_is_sent_but_not_stored() -> None:
    graph, model = graph_for([call("lookup")], forced_tool("lookup", DONE), prompt="Be brief.")
    _, state = run(graph)
    assert model.calls[0].message_types == ("system", "human")
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]


def test_token_accounting_comes_from_usage_metadata() -> None:
    graph, model = graph_for([call("lookup"), call("lookup")], forced_tool("lookup", RETRY, DONE))
    _, state = run(graph)
    record = state["stop_record"]
    expected_in = sum(c.response.usage_metadata["input_tokens"] for c in model.calls)  # type: ignore[index]
    expected_out = sum(c.response.usage_metadata["output_tokens"] for c in model.calls)  # type: ignore[index]
    assert (record["input_tokens"], record["output_tokens"]) == (expected_in, expected_out)
    assert expected_in > 0
    json.dumps(record)  # plain JSON


def test_return_direct_tools_are_refused_at_build_time() -> None:
    @tool(return_direct=True)
    def static(query: str) -> str:
        """Always ends the loop."""
        return query

    with pytest.raises(ToolstopConfigError, match="return_direct"):
        build_react_graph(ScriptedChatModel([]), [static])


def test_model_answer_without_tools_ends_the_run() -> None:
    graph, _model = graph_for(["Hello!"], forced_tool("lookup", DONE))
    path, state = run(graph)
    assert path == ["agent"]
    assert state["stop_record"]["rule"] == "none"
    assert state["stop_record"]["stopped"] is False
