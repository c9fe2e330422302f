"""The hand-built graph takes a graph's own parts as LangGraph's tutorials write them: a tools
node wrapped in `with_fallbacks` (the customer-support tutorial's
`create_tool_node_with_fallback`), and a prompt that is a `ChatPromptTemplate` filled from the
config, or a function of the state, sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import tool
from langgraph.prebuilt import ToolNode

from toolstop import Outcome, StopPolicy, ToolstopConfigError, build_react_graph, signal
from toolstop.testing import ScriptedChatModel, call, turn

pytestmark = pytest.mark.contract

MODES = ["sync", "async"]


@tool(response_format="content_and_artifact")
def lookup_policy(query: str) -> tuple[str, dict[str, Any]]:
    """Consult the company policies."""
    return f"Policy on {query}: changes allowed.", signal(Outcome.COMPLETED)


@tool
def search_flights(airport: str) -> str:
    """Search flights (raises: the tutorial's fallback answers the model)."""
    msg = f"no database for {airport}"
    raise RuntimeError(msg)


def handle_tool_error(state: dict[str, Any]) -> dict[str, Any]:
    """The tutorial's fallback: each call of the last turn answered with the error."""
    error = state.get("error")
    calls = state["messages"][-1].tool_calls
    return {
        "messages": [
            ToolMessage(f"Error: {error!r}\n please fix your mistakes.", tool_call_id=c["id"])
            for c in calls
        ]
    }


def with_fallback(tools: list[Any]) -> Any:
    return ToolNode(tools).with_fallbacks(
        [RunnableLambda(handle_tool_error)], exception_key="error"
    )


def invoke(graph: Any, mode: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    inputs = {"messages": [("user", "can I change my flight?")]}
    if mode == "async":
        result: dict[str, Any] = asyncio.run(graph.ainvoke(inputs, config))
        return result
    return dict(graph.invoke(inputs, config))


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_node_with_fallbacks_is_the_graphs_tools_node(mode: str) -> None:
    model = ScriptedChatModel(
        [turn(call("search_flights", airport="BSL")), turn(call("lookup_policy", query="x"))]
    )
    graph = build_react_graph(model, with_fallback([lookup_policy, search_flights]))
    state = invoke(graph, mode)
    model.assert_complete()
    assert model.calls[0].tools == ("lookup_policy", "search_flights")
    error = state["messages"][2]
    assert isinstance(error, ToolMessage)
    assert error.content.startswith("Error: RuntimeError('no database for BSL')")
    assert state["stop_record"]["rule"] == "completed"  # the stopping tool still stops
    assert state["messages"][-1].content == "Policy on x: changes allowed."


def test_a_tool_node_in_any_of_langchains_wrappers_is_found() -> None:
    from toolstop.tools import find_tool_node

    node = ToolNode([lookup_policy])
    for wrapped in (
        node,
        node.with_config(run_name="tools"),
        node.with_retry(stop_after_attempt=2),
        node.with_fallbacks([RunnableLambda(handle_tool_error)], exception_key="error"),
        node.with_config(tags=["x"]).with_fallbacks([RunnableLambda(handle_tool_error)]),
    ):
        assert find_tool_node(wrapped) is node
        graph = build_react_graph(ScriptedChatModel([]), wrapped)
        assert find_tool_node(graph.nodes["tools"].bound) is node
    assert find_tool_node(RunnableLambda(handle_tool_error)) is None
    assert find_tool_node(lookup_policy) is None


@pytest.mark.parametrize("mode", MODES)
def test_a_fallbacks_errors_spend_the_retry_budget(mode: str) -> None:
    """The tutorial's fallback builds ToolMessages without `status="error"`: they are a raised
    tool's answer all the same, so a tool that always raises ends on the retry budget."""
    model = ScriptedChatModel([call("search_flights", airport="BSL")] * 5 + ["gave up"])
    graph = build_react_graph(
        model, with_fallback([search_flights]), policy=StopPolicy(max_transient_retries=2)
    )
    state = invoke(graph, mode)
    record = state["stop_record"]
    assert (record["rule"], record["model_calls"], record["transient_retries"]) == (
        "retry_budget",
        3,
        2,
    )
    assert [s["problem"] for s in record["invalid_signals"]] == ["tool_error"] * 3
    errors = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in errors] == ["error"] * 3
    assert errors[0].content.startswith("Error: RuntimeError('no database for BSL')")


@pytest.mark.parametrize("mode", MODES)
def test_a_fallbacks_result_with_an_artifact_is_not_marked(mode: str) -> None:
    """A fallback that is a backup ToolNode whose tools signal speaks for itself."""

    @tool("search_flights", response_format="content_and_artifact")
    def backup_search(airport: str) -> tuple[str, dict[str, Any]]:
        """Search flights on the backup system."""
        return f"Backup: flight LX1 from {airport}.", signal(Outcome.COMPLETED)

    # handle_tool_errors=False: langgraph-prebuilt 0.6 answers the error itself by default
    node = ToolNode([search_flights], handle_tool_errors=False).with_fallbacks(
        [ToolNode([backup_search])], exception_key="error"
    )
    model = ScriptedChatModel([call("search_flights", airport="BSL")])
    state = invoke(build_react_graph(model, node), mode)
    assert state["stop_record"]["rule"] == "completed"
    assert state["messages"][-1].content == "Backup: flight LX1 from BSL."


def test_a_fallbacks_messages_are_marked_in_every_shape() -> None:
    from toolstop.tools import _fallback_errors

    plain = ToolMessage("oops", tool_call_id="1")
    signalled = ToolMessage("ok", tool_call_id="2", artifact=signal(Outcome.COMPLETED))
    for shape in ({"messages": [plain, signalled]}, [plain, signalled]):
        out = _fallback_errors(shape)
        messages = out["messages"] if isinstance(out, dict) else out
        assert [m.status for m in messages] == ["error", "success"]
    assert plain.status == "success"  # a copy is marked, the fallback's own is left alone
    assert _fallback_errors(plain).status == "error"
    assert _fallback_errors("not a message") == "not a message"


def test_a_node_function_is_refused_in_one_sentence() -> None:
    with pytest.raises(ToolstopConfigError) as error:
        build_react_graph(ScriptedChatModel([]), RunnableLambda(handle_tool_error))
    assert str(error.value) == (
        "build_react_graph takes a list of tools or a ToolNode (also wrapped: with_fallbacks, "
        "with_config, with_retry); got RunnableLambda, with no ToolNode inside, so the tools to "
        "bind to the model cannot be seen: pass the tools list"
    )
    with pytest.raises(ToolstopConfigError, match="put a single tool in a list"):
        build_react_graph(ScriptedChatModel([]), lookup_policy)  # type: ignore[arg-type]


TUTORIAL_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "You are a helpful customer support assistant for Swiss Airlines."
            "\n\nCurrent user:\n<User>\n{user_info}\n</User>\nCurrent time: {time}.",
        ),
        ("placeholder", "{messages}"),
    ]
).partial(time="2026-01-01 12:00")

WANT_SYSTEM = (
    "You are a helpful customer support assistant for Swiss Airlines."
    "\n\nCurrent user:\n<User>\n3442 587242\n</User>\nCurrent time: 2026-01-01 12:00."
)


def prompted(prompt: Any, mode: str, config: dict[str, Any]) -> ScriptedChatModel:
    model = ScriptedChatModel([turn(call("lookup_policy", query="x")), "unused"])
    graph = build_react_graph(
        model, [lookup_policy], prompt=prompt, policy=StopPolicy(mode="polish")
    )
    state = invoke(graph, mode, config)
    assert isinstance(state["messages"][-1], AIMessage)
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]  # not stored
    return model


@pytest.mark.parametrize("mode", MODES)
def test_a_chat_prompt_template_is_filled_from_the_state_and_the_config(mode: str) -> None:
    config = {"configurable": {"user_info": "3442 587242"}}
    model = prompted(TUTORIAL_PROMPT, mode, config)
    model.assert_complete()
    for seen in model.calls:  # the agent's call and the polish call
        assert isinstance(seen.messages[0], SystemMessage)
        assert seen.messages[0].content == WANT_SYSTEM
    assert model.calls[1].message_types == ("system", "human", "ai", "tool")


@pytest.mark.parametrize("mode", MODES)
def test_a_function_of_the_state_and_config_is_the_tutorials_assistant(mode: str) -> None:
    """The tutorial's `Assistant` reads `passenger_id` from the config into `user_info`."""

    def prompt(state: dict[str, Any], config: RunnableConfig) -> Any:
        passenger = config.get("configurable", {}).get("passenger_id")
        return TUTORIAL_PROMPT.invoke({**state, "user_info": passenger})

    async def aprompt(state: dict[str, Any], config: RunnableConfig) -> Any:
        return prompt(state, config)

    config = {"configurable": {"passenger_id": "3442 587242"}}
    for given in [prompt, aprompt] if mode == "async" else [prompt]:
        model = prompted(given, mode, config)
        assert model.calls[0].messages[0].content == WANT_SYSTEM
        assert "toolstop_run" not in str(model.calls[1].messages)


@pytest.mark.parametrize("mode", MODES)
def test_a_function_of_the_state_alone_gets_the_runs_messages(mode: str) -> None:
    seen: list[list[str]] = []

    def prompt(state: dict[str, Any]) -> list[Any]:
        seen.append([m.type for m in state["messages"]])
        return [SystemMessage(content="Be brief."), *state["messages"]]

    model = prompted(prompt, mode, {})
    assert seen == [["human"], ["human", "ai", "tool"]]
    assert model.calls[0].message_types == ("system", "human")


def test_a_prompt_variable_nothing_fills_is_said_and_an_async_prompt_needs_ainvoke() -> None:
    graph = build_react_graph(ScriptedChatModel(["hi"]), [lookup_policy], prompt=TUTORIAL_PROMPT)
    with pytest.raises(ToolstopConfigError, match=r"the prompt needs \['user_info'\]"):
        graph.invoke({"messages": [("user", "hi")]})

    async def aprompt(state: dict[str, Any]) -> list[Any]:
        return list(state["messages"])

    graph = build_react_graph(ScriptedChatModel(["hi"]), [lookup_policy], prompt=aprompt)
    with pytest.raises(ToolstopConfigError, match="async function: run the graph with ainvoke"):
        graph.invoke({"messages": [("user", "hi")]})
