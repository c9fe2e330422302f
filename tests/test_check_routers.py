"""The check engine's routers (`toolstop._check.routers`): what each builds, the node path of a
run, resuming an interrupted run, and running async code from sync code.

tests/test_check.py and tests/test_routers.py run whole scenarios on every router; here each
piece is pinned on small graphs and on an agent of our own.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphInterrupt
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from routers import HAS_AGENTS
from toolstop._check import routers
from toolstop._check.routers import (
    GRAPH,
    LEGACY,
    MIDDLEWARE,
    ROUTERS,
    Router,
    arun_agent,
    available_routers,
    in_new_loop,
    resumable,
    run_agent,
)
from toolstop.policy import StopPolicy
from toolstop.testing.forced import forced_tool
from toolstop.testing.scripted import ScriptedChatModel, call

needs_agents = pytest.mark.skipif(not HAS_AGENTS, reason="needs langchain's create_agent")


def test_the_three_routers_and_their_nodes() -> None:
    assert list(ROUTERS) == ["graph", "middleware", "legacy"]
    assert ROUTERS == {"graph": GRAPH, "middleware": MIDDLEWARE, "legacy": LEGACY}
    assert GRAPH.path("model", "tools", "stop") == ["agent", "tools", "finalize"]
    assert LEGACY.path("model", "tools", "model", "polish") == ["agent", "tools", "agent", "polish"]
    assert MIDDLEWARE.path("model", "tools", "stop") == [
        "model", "tools", "model", "StopOnArtifact.after_agent",
    ]  # fmt: skip
    assert MIDDLEWARE.path("polish", "__interrupt__") == [
        "model", "__interrupt__", "StopOnArtifact.after_agent",
    ]  # fmt: skip
    assert GRAPH.path() == []
    assert MIDDLEWARE.path() == ["StopOnArtifact.after_agent"]
    assert (GRAPH.takes_middleware, LEGACY.takes_middleware, MIDDLEWARE.takes_middleware) == (
        False, False, True,
    )  # fmt: skip
    assert GRAPH.skips == LEGACY.skips == MIDDLEWARE.skips == ()
    own = Router(name="own", build=dict, model_node="m", stop_node="s", polish_node="p",
                 end_nodes=("e1", "e2"))  # fmt: skip
    assert own.path("stop", "model", "x") == ["s", "m", "x", "e1", "e2"]


def test_the_middleware_router_is_offered_only_where_create_agent_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(routers, "has_agents", lambda: False)
    assert available_routers() == [GRAPH, LEGACY]
    monkeypatch.setattr(routers, "has_agents", lambda: True)
    assert available_routers() == [GRAPH, MIDDLEWARE, LEGACY]


# -- what each router builds -------------------------------------------------------------------
TOOL = forced_tool("lookup", ("page", {"stop": True, "reason": "completed"}))


@pytest.mark.parametrize("router", [GRAPH, LEGACY], ids=["graph", "legacy"])
def test_the_graph_routers_build_with_the_policy_and_checkpointer(router: Router) -> None:
    saver = InMemorySaver()
    model = ScriptedChatModel([call("lookup"), "paraphrased"])
    agent = router.build(model, (TOOL,), policy=StopPolicy(mode="never"), checkpointer=saver)
    assert agent.checkpointer is saver
    config: Any = {"configurable": {"thread_id": "t"}}
    path, state = run_agent(agent, "q", config)
    assert path[:2] == ["agent", "tools"]
    assert state["stop_record"]["mode"] == "never"  # the policy given
    built = router.build(ScriptedChatModel([]), [TOOL], policy=None, checkpointer=None)
    assert built.checkpointer is None


@needs_agents
def test_the_middleware_router_runs_langchains_middleware_before_toolstops() -> None:
    from langchain.agents.middleware import AgentMiddleware

    class Mine(AgentMiddleware):
        name = "Mine"

        def before_model(self, state: Any, runtime: Any) -> None:
            seen.append(len(state["messages"]))

    seen: list[int] = []
    saver = InMemorySaver()
    model = ScriptedChatModel([call("lookup"), "paraphrased"])
    agent = MIDDLEWARE.build(
        model, (TOOL,), policy=StopPolicy(mode="never"), checkpointer=saver, middleware=[Mine()]
    )
    assert agent.checkpointer is saver
    path, state = run_agent(agent, "q", {"configurable": {"thread_id": "t"}})
    assert path == [
        "Mine.before_model", "model", "tools", "Mine.before_model", "model",
        "StopOnArtifact.after_agent",
    ]  # fmt: skip
    assert seen == [1, 3]
    assert state["stop_record"]["mode"] == "never"
    plain = MIDDLEWARE.build(ScriptedChatModel([]), [TOOL], policy=None, checkpointer=None)
    assert plain.checkpointer is None


@needs_agents
def test_a_tools_exception_goes_back_to_the_model_as_toolstops_error_text() -> None:
    from langchain.agents.middleware import ToolErrorMiddleware

    middleware = routers._tool_errors_to_model()
    assert isinstance(middleware, ToolErrorMiddleware)
    assert middleware.on_error(ValueError("no"), None) == "Error: ValueError: no"
    with pytest.raises(GraphInterrupt):
        middleware.on_error(GraphInterrupt(()), None)
    model = ScriptedChatModel([call("lookup"), "sorry"])
    broken = forced_tool("lookup", RuntimeError("backend exploded"))
    agent = MIDDLEWARE.build(model, [broken], policy=None, checkpointer=None)
    _, state = run_agent(agent)
    error = state["messages"][2]
    assert (error.status, error.content) == ("error", "Error: RuntimeError: backend exploded")


@needs_agents
def test_before_langchain_1_3_14_a_retry_middleware_without_retries_does_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import langchain.agents.middleware as middleware
    from langchain.agents.middleware import ToolRetryMiddleware

    monkeypatch.delattr(middleware, "ToolErrorMiddleware")
    retry = routers._tool_errors_to_model()
    assert isinstance(retry, ToolRetryMiddleware)
    assert retry.max_retries == 0
    assert retry.on_failure(ValueError("no")) == "Error: ValueError: no"
    with pytest.raises(GraphInterrupt):
        retry.on_failure(GraphInterrupt(()))


# -- running -----------------------------------------------------------------------------------
class State(TypedDict):
    messages: list[Any]
    n: int


def graph(checkpointer: Any = None) -> Any:
    """a > b > b2 (b2 a second update of the same node name's step is not possible: two nodes)."""

    def a(state: State) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1}

    def b(state: State) -> dict[str, Any]:
        return {"n": state["n"] * 10}

    builder = StateGraph(State)
    builder.add_node("a", a)
    builder.add_node("b", b)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    return builder.compile(checkpointer=checkpointer)


class Agent:
    """An agent of one's own: not a LangGraph graph, only `invoke` and `ainvoke`."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, Any]] = []

    def invoke(self, inputs: Any, config: Any) -> Any:
        self.seen.append((inputs, config))
        return [("answer", 42)]

    async def ainvoke(self, inputs: Any, config: Any) -> Any:
        return self.invoke(inputs, config)


def _run(asynchronous: bool, agent: Any, *args: Any, **kwargs: Any) -> Any:
    """`run_agent`, or `arun_agent` on a fresh event loop."""
    if asynchronous:
        return asyncio.run(arun_agent(agent, *args, **kwargs))
    return run_agent(agent, *args, **kwargs)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_run_is_its_node_path_and_its_last_values(asynchronous: bool) -> None:
    path, state = _run(asynchronous, graph(), "hello")
    assert path == ["a", "b"]
    assert [m.content for m in state["messages"]] == ["hello"]
    assert isinstance(state["messages"][0], HumanMessage)
    assert state["n"] == 10
    assert type(state) is dict
    path, state = _run(asynchronous, graph())
    assert state["messages"][0].content == "q"
    # an agent of one's own is invoked with the same input and config; no path
    own, config = Agent(), {"configurable": {"thread_id": "x"}}
    assert _run(asynchronous, own, "hi", config) == ([], {"answer": 42})
    assert _run(asynchronous, own) == ([], {"answer": 42})
    (first, first_config), (second, second_config) = own.seen
    assert [m.content for m in first["messages"]] == ["hi"]
    assert first_config is config
    assert second["messages"][0].content == "q"
    assert second_config is None
    assert _run(asynchronous, own, config=config, resume={"ok": 1}) == ([], {"answer": 42})
    resumed = own.seen[-1][0]
    assert isinstance(resumed, Command)
    assert resumed.resume == {"ok": 1}


def interrupting(checkpointer: Any) -> Any:
    from langgraph.types import interrupt

    def ask(state: State) -> dict[str, Any]:
        answer = interrupt({"question": "ok?"})
        return {"messages": [AIMessage(str(answer))]}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_interrupted_run_is_resumed_with_the_answer(asynchronous: bool) -> None:
    agent, config = interrupting(InMemorySaver()), {"configurable": {"thread_id": "t"}}
    path, state = _run(asynchronous, agent, "start", config)
    assert path == ["__interrupt__"]
    assert [m.content for m in state["messages"]] == ["start"]
    path, state = _run(asynchronous, agent, config=config, resume="yes")
    assert path == ["ask"]
    assert [m.content for m in state["messages"]] == ["yes"]  # no reducer: replaced


def test_a_step_shows_once_in_the_path_whatever_its_number_of_updates() -> None:
    levels = routers._Levels()
    levels.collect((), "updates", {"a": 1})
    assert levels.router_level() == (["a"], {})
    levels.collect((), "updates", {"a": 2})
    levels.collect((), "updates", {"b": 1, "c": 1})
    levels.collect((), "updates", {"b": 1})
    levels.collect((), "updates", {"a": 3})
    levels.collect((), "values", [("y", 2)])
    levels.collect((), "updates", {"d": 1})
    assert levels.router_level() == (["a", "b", "c", "b", "a", "d"], {"y": 2})


def test_the_level_of_a_subgraphs_router_is_taken_when_the_graph_has_no_record() -> None:
    levels = routers._Levels()
    levels.collect((), "updates", {"support": 1})
    levels.collect((), "values", {"messages": ["parent"]})
    levels.collect(("support:1",), "updates", {"agent": 1})
    levels.collect(("support:1",), "updates", {"finalize": 1})
    levels.collect(("support:1",), "values", {"messages": ["inner"], "stop_record": {"run": 1}})
    levels.collect(("other:2",), "values", {"messages": ["no router"]})
    assert levels.router_level() == (
        ["agent", "finalize"],
        {"messages": ["inner"], "stop_record": {"run": 1}},
    )
    levels.collect((), "values", {"messages": ["parent"], "stop_record": {"run": 7}})
    assert levels.router_level() == (
        ["support"],
        {"messages": ["parent"], "stop_record": {"run": 7}},
    )


def test_only_an_agent_with_a_checkpointer_and_state_is_resumable() -> None:
    assert resumable(graph(InMemorySaver()))
    assert not resumable(graph())

    class Saved:
        checkpointer = "saver"

    class WithState(Saved):
        def get_state(self) -> None: ...

    class NoSaver(WithState):
        checkpointer = None

    assert not resumable(Saved())
    assert resumable(WithState())
    assert not resumable(NoSaver())
    assert not resumable(object())


def test_async_code_runs_to_completion_from_sync_code_and_from_a_running_loop() -> None:
    async def where() -> tuple[str, bool]:
        await asyncio.sleep(0)
        return threading.current_thread().name, threading.current_thread() is main

    main = threading.current_thread()
    name, same = in_new_loop(where())
    assert same
    assert name == main.name

    async def inside() -> tuple[str, bool]:
        return in_new_loop(where())

    name, same = asyncio.run(inside())
    assert not same
    assert name != main.name
