"""`toolstop check --agent` on LangGraph's customer-support tutorial graph, as a new user adopts
it: the tutorial's own graph (a `ToolNode` wrapped in `with_fallbacks`, no toolstop router),
the same graph built with `build_react_graph`, and a graph whose tools node is a function; each
with sync and async tools. Never a traceback; what the check cannot see, said in a sentence;
and a green check says which tools were stand-ins."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from toolstop.cli import main
from user_agent import in_folder, write_module

__all__ = ["in_folder"]  # the fixture, imported for pytest

pytestmark = pytest.mark.contract

TUTORIAL = '''
from typing import Annotated, Any

from langchain_core.messages import ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import AnyMessage, add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

from toolstop import Outcome, build_react_graph, signal


@tool(response_format="content_and_artifact")
{DEF} lookup_policy(query: str) -> tuple[str, dict]:
    """Consult the company policies."""
    return f"Policy on {{query}}.", signal(Outcome.COMPLETED)


@tool
{DEF} search_flights(departure_airport: str | None = None, limit: int = 20) -> list[dict]:
    """Search for flights."""
    return [{{"flight_id": 1}}]


TOOLS = [lookup_policy, search_flights]


def handle_tool_error(state) -> dict:
    error = state.get("error")
    calls = state["messages"][-1].tool_calls
    return {{"messages": [ToolMessage(content=f"Error: {{error!r}}", tool_call_id=c["id"])
                         for c in calls]}}


def create_tool_node_with_fallback(tools):
    return ToolNode(tools).with_fallbacks(
        [RunnableLambda(handle_tool_error)], exception_key="error"
    )


PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Swiss Airlines support. Current user: {{user_info}}"),
     ("placeholder", "{{messages}}")]
)


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class Assistant:
    def __init__(self, runnable):
        self.runnable = runnable

    def __call__(self, state: State, config: RunnableConfig):
        passenger_id = config.get("configurable", {{}}).get("passenger_id")
        return {{"messages": self.runnable.invoke({{**state, "user_info": passenger_id}})}}


def make_tutorial(model, tools, policy):
    builder = StateGraph(State)
    builder.add_node("assistant", Assistant(PROMPT | model.bind_tools(tools)))
    builder.add_node("tools", create_tool_node_with_fallback(tools))
    builder.add_edge(START, "assistant")
    builder.add_conditional_edges("assistant", tools_condition)
    builder.add_edge("tools", "assistant")
    return builder.compile()


def prompt(state, config):
    passenger_id = config.get("configurable", {{}}).get("passenger_id")
    return PROMPT.invoke({{**state, "user_info": passenger_id}})


def make_agent(model, tools, policy, checkpointer=None):
    return build_react_graph(
        model, create_tool_node_with_fallback(tools), policy=policy, prompt=prompt,
        checkpointer=checkpointer,
    )


def make_own_tools_node(model, tools, policy):
    by_name = {{t.name: t for t in tools}}

    def run_tools(state: State):
        calls = state["messages"][-1].tool_calls
        return {{"messages": [by_name[c["name"]].invoke(c) for c in calls]}}

    builder = StateGraph(State)
    builder.add_node("assistant", Assistant(PROMPT | model.bind_tools(tools)))
    builder.add_node("tools", run_tools)
    builder.add_edge(START, "assistant")
    builder.add_conditional_edges("assistant", tools_condition)
    builder.add_edge("tools", "assistant")
    return builder.compile()
'''

SYNC_ASYNC = {"sync": "def", "async": "async def"}


def check(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["check", *argv], out=out), out.getvalue()


@pytest.fixture(params=list(SYNC_ASYNC))
def tutorial(request: pytest.FixtureRequest, in_folder: Path) -> str:
    write_module(in_folder, "tutorial", TUTORIAL.format(DEF=SYNC_ASYNC[request.param]))
    return "tutorial"


def test_the_tutorials_own_graph_is_checked_without_a_traceback(tutorial: str) -> None:
    code, out = check(
        "--agent", f"{tutorial}:make_tutorial", "--tools", f"{tutorial}:TOOLS",
        "--scenario", "success@lookup_policy.hard",
    )  # fmt: skip
    assert code == 1
    assert "Traceback" not in out
    assert (
        "your graph runs a tools node without a toolstop router; build it with "
        "build_react_graph(model, tools_node, policy=policy, prompt=...)" in " ".join(out.split())
    )


def test_the_tutorials_graph_on_build_react_graph_passes_and_names_its_stand_ins(
    tutorial: str,
) -> None:
    code, out = check("--agent", f"{tutorial}:make_agent", "--tools", f"{tutorial}:TOOLS")
    assert code == 0, out
    assert out.splitlines()[-3:] == [
        "stand-ins: lookup_policy, search_flights: the check forced their results; your real "
        "tools were not called (bench --agent runs them)",
        "signal in their own code (response_format='content_and_artifact'): lookup_policy",
        "no signal (plain results go back to the model, never stop a run): search_flights",
    ]
    code, out = check(
        "--agent", f"{tutorial}:make_agent", "--tools", f"{tutorial}:TOOLS", "--json",
        "--scenario", "success",
    )  # fmt: skip
    document = json.loads(out)
    assert document["your_tools_called"] is False
    assert document["stand_ins"] == ["lookup_policy", "search_flights"]
    assert document["signal"] == ["lookup_policy"]
    assert document["plain"] == ["search_flights"]
    assert document["notes"] == []


def test_a_tools_node_the_check_cannot_see_is_said_in_one_sentence(tutorial: str) -> None:
    code, out = check(
        "--agent", f"{tutorial}:make_own_tools_node", "--tools", f"{tutorial}:TOOLS",
        "--scenario", "success@lookup_policy.hard",
    )  # fmt: skip
    assert "Traceback" not in out
    assert (
        "note: no node of your graph is a ToolNode (or one wrapped by with_fallbacks, "
        "with_config or with_retry): the check cannot see which tools your graph runs; the "
        "stand-ins are called only if it runs the `tools` your factory is given"
    ) in out.splitlines()
    assert code == 1  # no toolstop router either


def test_toolstops_own_check_says_your_tools_were_not_called() -> None:
    code, out = check("--router", "graph", "--scenario", "success.hard")
    assert code == 0
    assert " ".join(out.split()).endswith(
        "the runs used toolstop's own forced tools; none of your tools was called (check your "
        "agent with --agent MODULE:FACTORY --tools MODULE:ATTR)"
    )


def test_a_factory_that_takes_a_checkpointer_gets_the_checks_own() -> None:
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from toolstop import Outcome, build_react_graph, signal
    from toolstop._check.agent import check_agent
    from toolstop._check.factory import as_factory

    @tool(response_format="content_and_artifact")
    def fetch(n: int) -> tuple[str, dict[str, object]]:
        """Fetch a numbered page."""
        return "page", signal(Outcome.COMPLETED)

    given: list[Any] = []

    def make(model: Any, tools: list[Any], policy: Any, checkpointer: Any = None) -> Any:
        given.append(checkpointer)
        return build_react_graph(model, tools, policy=policy, checkpointer=checkpointer)

    assert as_factory(make).takes_checkpointer is True
    check_agent(make, [fetch], scenarios=["success@fetch.hard"]).assert_passed()
    first, run = given  # the build before any run, then the run's
    assert first is None  # the check never hands your factory a checkpointer of yours
    assert isinstance(run, InMemorySaver)


def test_a_tool_node_inside_a_subgraph_is_seen() -> None:
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph

    from toolstop import Outcome, build_react_graph, signal
    from toolstop._check import preflight
    from toolstop._check.factory import as_factory

    @tool(response_format="content_and_artifact")
    def fetch(n: int) -> tuple[str, dict[str, object]]:
        """Fetch a numbered page."""
        return "page", signal(Outcome.COMPLETED)

    def outer(model: Any, tools: list[Any], policy: Any) -> Any:
        builder = StateGraph(MessagesState)
        builder.add_node("support", build_react_graph(model, tools, policy=policy))
        builder.add_edge(START, "support")
        return builder.compile()

    def function_node(model: Any, tools: list[Any], policy: Any) -> Any:
        builder = StateGraph(MessagesState)
        builder.add_node("support", lambda state: {"messages": []})
        builder.add_edge(START, "support")
        return builder.compile()

    assert preflight._preflight(as_factory(outer), [fetch])[2] == []
    [note] = preflight._preflight(as_factory(function_node), [fetch])[2]
    assert note.startswith("no node of your graph is a ToolNode")
