"""What only the hand-built graph and the legacy drop-in have: prompt, build-time guards."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolNode

from helpers import run
from toolstop import StopPolicy, ToolstopConfigError, build_react_graph, signal
from toolstop.graph import route_after_agent
from toolstop.legacy import create_react_agent
from toolstop.testing import ScriptedChatModel, call, forced_tool
from toolstop.tools import _returns_a_pair

pytestmark = pytest.mark.contract


@tool(return_direct=True)
def static(query: str) -> str:
    """Always ends the loop."""
    return query


def test_prompt_is_sent_but_not_stored() -> None:
    model = ScriptedChatModel([call("lookup")])
    graph = build_react_graph(
        model, [forced_tool("lookup", ("x", signal("completed")))], prompt="Be brief."
    )
    _, state = run(graph)
    assert model.calls[0].message_types == ("system", "human")
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]


def test_return_direct_tools_are_refused_at_build_time() -> None:
    with pytest.raises(ToolstopConfigError, match=r"^build_react_graph: .*return_direct"):
        build_react_graph(ScriptedChatModel([]), [static])
    # the error names the function the user called
    with pytest.raises(ToolstopConfigError, match=r"^create_react_agent: .*return_direct"):
        create_react_agent(ScriptedChatModel([]), [static])


@tool
def forgot_the_format(flight: str) -> tuple[str, dict[str, object]]:
    """Books a flight, but is declared without response_format="content_and_artifact"."""
    return f"Booked {flight}.", signal("completed")


@tool(response_format="content_and_artifact")
def declared(flight: str) -> tuple[str, dict[str, object]]:
    """Books a flight, declared right."""
    return f"Booked {flight}.", signal("completed")


def test_a_pair_returned_as_plain_content_is_warned_about_at_build_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="toolstop"):
        build_react_graph(ScriptedChatModel([]), [forgot_the_format, declared, static_free])
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        "toolstop: build_react_graph: tool 'forgot_the_format' returns a tuple but is not "
        "declared with response_format='content_and_artifact'; its artifact goes to the model "
        "as text and never reaches toolstop"
    ]


@tool
def static_free(query: str) -> str:
    """A plain tool: no tuple, no warning."""
    return query


def test_bad_prompt_type_is_refused() -> None:
    with pytest.raises(ToolstopConfigError, match="prompt"):
        build_react_graph(ScriptedChatModel([]), [], prompt=42)  # type: ignore[arg-type]


def test_legacy_accepts_a_tool_node_and_plain_callables() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = ScriptedChatModel([call("add", a=1, b=2), "3"])
    agent = create_react_agent(model, ToolNode([add]), prompt="Use tools.", version="v1")
    path, state = run(agent)
    assert path == ["agent", "tools", "agent"]  # a plain tool has no artifact: back to the model
    assert state["messages"][-1].content == "3"
    assert state["stop_record"]["invalid_signals"] == []  # not a signal bug: a plain tool
    assert state["stop_record"]["outcomes"]["unsignalled"] == 1
    model.assert_complete()


def test_legacy_refuses_what_it_does_not_support() -> None:
    with pytest.raises(ToolstopConfigError, match="pre_model_hook"):
        create_react_agent(ScriptedChatModel([]), [], pre_model_hook=lambda s: s)
    with pytest.raises(TypeError, match="unexpected keyword"):
        create_react_agent(ScriptedChatModel([]), [], bogus=1)
    with pytest.raises(ToolstopConfigError, match="version"):
        create_react_agent(ScriptedChatModel([]), [], version="v3")
    # None for an unsupported argument is langgraph's default: accepted
    create_react_agent(ScriptedChatModel([]), [], response_format=None, policy=StopPolicy())


def test_without_langchain_import_works_and_the_error_names_the_extra() -> None:
    import toolstop
    from routers import HAS_AGENTS

    if HAS_AGENTS:
        pytest.skip("langchain is installed here; the legacy environment of the matrix runs this")
    with pytest.raises(ImportError, match=r"toolstop\[agents\]"):
        _ = toolstop.StopOnArtifact


HIDE_RUNNABLE_CALLABLE = """
import importlib
import sys

import langgraph._internal._runnable as private  # langgraph itself keeps using it
import toolstop.graph  # everything it imports is loaded; then it is imported again below

class Without:  # the module as a future langgraph might have it: no RunnableCallable
    def __getattr__(self, name):
        if name == "RunnableCallable":
            raise AttributeError(name)
        return getattr(private, name)

sys.modules["langgraph._internal._runnable"] = Without()
del sys.modules["toolstop.graph"]
fallback = importlib.import_module("toolstop.graph")
sys.modules["langgraph._internal._runnable"] = private

from langchain_core.runnables import RunnableLambda
from toolstop import signal
from toolstop.testing import ScriptedChatModel, call, forced_tool

assert fallback._RunnableCallable is None
model = ScriptedChatModel([call("lookup")])
lookup = forced_tool("lookup", ("the page", signal("completed")))
graph = fallback.build_react_graph(model, [lookup])
assert isinstance(graph.nodes["agent"].bound, RunnableLambda), graph.nodes["agent"].bound
state = graph.invoke({"messages": [("user", "q")]})
assert state["stop_record"]["rule"] == "completed", state["stop_record"]
assert state["messages"][-1].content == "the page"
print("fallback ok")
"""


def test_the_graph_runs_without_langgraphs_private_runnable_callable() -> None:
    """The fallback of toolstop.graph's one private import (RunnableLambda), run for real."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", HIDE_RUNNABLE_CALLABLE],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "fallback ok"


# -- what the hand-built graph's shell does (each pinned against a mutant that once survived) --


class _AsyncOnly(ScriptedChatModel):
    """A scripted model whose sync API fails: an async run must never reach it."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an async run called the model's sync API")

    def _stream(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an async run called the model's sync API")

    async def _agenerate(
        self,
        messages: list[Any],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        answer = self._answer(messages, stop, kwargs, streamed=False)
        return ChatResult(generations=[ChatGeneration(message=answer)])


@pytest.mark.parametrize(("mode", "final"), [("hard", "booked"), ("polish", "Booked, narrated.")])
def test_an_async_run_calls_the_models_async_api(mode: str, final: str) -> None:
    model = _AsyncOnly([call("book"), "Booked, narrated."])
    booking = forced_tool("book", ("booked", signal("completed")))
    graph = build_react_graph(model, [booking], policy=StopPolicy(mode=mode))
    state = asyncio.run(graph.ainvoke({"messages": [HumanMessage("q")]}))
    assert state["messages"][-1].content == final
    assert state["stop_record"]["rule"] == "completed"


def test_the_graph_and_every_answer_it_adds_carry_the_agents_name() -> None:
    assert build_react_graph(ScriptedChatModel([]), []).name == "toolstop"
    booking = forced_tool("book", ("booked", signal("completed")))
    for mode, script in (("hard", [call("book")]), ("polish", [call("book"), "narrated"])):
        model = ScriptedChatModel(script)
        graph = build_react_graph(model, [booking], policy=StopPolicy(mode=mode), name="booker")
        assert graph.name == "booker"
        _, state = run(graph)
        assert [m.name for m in state["messages"] if m.type == "ai"] == ["booker", "booker"]
        # The async stop nodes name it too.
        async_graph = build_react_graph(
            ScriptedChatModel(script), [booking], policy=StopPolicy(mode=mode), name="booker"
        )
        state = asyncio.run(async_graph.ainvoke({"messages": [HumanMessage("q")]}))
        assert [m.name for m in state["messages"] if m.type == "ai"] == ["booker", "booker"]
    # The step budget's answer: in place of the model's tool call (limit 2), or after a turn (4).
    for limit, types in ((2, ["human", "ai"]), (4, ["human", "ai", "tool", "ai"])):
        looking = forced_tool("look", ("seen", None))  # no signal: never stops
        graph = build_react_graph(ScriptedChatModel([call("look")] * 5), [looking], name="booker")
        state = graph.invoke({"messages": [HumanMessage("q")]}, {"recursion_limit": limit})
        assert [m.type for m in state["messages"]] == types
        assert state["stop_record"]["rule"] == "step_budget"
        assert state["messages"][-1].name == "booker"
    # Without a name, the model's own name on its answer is left alone.
    graph = build_react_graph(ScriptedChatModel([AIMessage("hi", name="gpt")]), [])
    assert graph.invoke({"messages": [HumanMessage("q")]})["messages"][-1].name == "gpt"


def test_the_graph_takes_and_returns_only_messages_and_the_record() -> None:
    booking = forced_tool("book", ("booked", signal("completed")))
    graph = build_react_graph(ScriptedChatModel([call("book")]), [booking])
    assert set(graph.get_input_jsonschema()["properties"]) == {"messages", "stop_record"}
    assert set(graph.get_output_jsonschema()["properties"]) == {"messages", "stop_record"}
    assert set(graph.invoke({"messages": [HumanMessage("q")]})) == {"messages", "stop_record"}


@pytest.mark.parametrize("mode", ["hard", "polish"])
def test_the_drawn_graph_shows_every_route(mode: str) -> None:
    graph = build_react_graph(ScriptedChatModel([]), [], policy=StopPolicy(mode=mode))
    edges = {(e.source, e.target) for e in graph.get_graph().edges}
    expected = {
        ("__start__", "agent"),
        ("agent", "tools"),
        ("agent", "__end__"),
        ("tools", "agent"),
        ("tools", "finalize"),
        ("finalize", "__end__"),
    }
    if mode == "polish":
        expected |= {("tools", "polish"), ("polish", "__end__")}
    assert edges == expected


def test_each_node_is_one_run_for_callbacks() -> None:
    """A node is traced once (by LangGraph), not again by toolstop's own wrapper."""

    class Starts(BaseCallbackHandler):
        def __init__(self) -> None:
            self.names: list[str] = []

        def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
            self.names.append(kwargs.get("name") or "")

    booking = forced_tool("book", ("booked", signal("completed")))
    graph = build_react_graph(ScriptedChatModel([call("book")]), [booking])
    starts = Starts()
    graph.invoke({"messages": [HumanMessage("q")]}, {"callbacks": [starts]})
    assert starts.names.count("agent") == 1
    assert starts.names.count("finalize") == 1


def test_runs_on_a_thread_are_numbered_and_a_turn_in_the_input_is_not_decided() -> None:
    booking = forced_tool("book", ("booked", signal("completed")))
    model = ScriptedChatModel([call("book"), "the model's answer"])
    graph = build_react_graph(model, [booking], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    first = graph.invoke({"messages": [HumanMessage("q1")]}, thread)
    assert (first["stop_record"]["run"], first["messages"][-1].content) == (1, "booked")
    asked = AIMessage("", id="caller-ai", tool_calls=[call("book", id="x1")])
    result = ToolMessage("booked by the caller", tool_call_id="x1", artifact=signal("completed"))
    second = graph.invoke({"messages": [HumanMessage("q2"), asked, result]}, thread)
    assert second["stop_record"]["run"] == 2
    assert second["messages"][-1].content == "the model's answer"  # the model was asked
    assert second["stop_record"]["rule"] == "none"


def test_a_polish_call_counts_its_tokens() -> None:
    booking = forced_tool("book", ("booked", signal("completed")))
    script = [call("book"), "narrated"]
    graph = build_react_graph(
        ScriptedChatModel(script), [booking], policy=StopPolicy(mode="polish")
    )
    _, state = run(graph)
    record = state["stop_record"]
    answers = [m for m in state["messages"] if isinstance(m, AIMessage)]
    assert (record["model_calls"], len(answers), answers[-1].content) == (2, 2, "narrated")
    assert all(m.usage_metadata["input_tokens"] > 0 for m in answers)
    assert record["input_tokens"] == sum(m.usage_metadata["input_tokens"] for m in answers)
    assert record["output_tokens"] == sum(m.usage_metadata["output_tokens"] for m in answers)


def test_route_after_agent_ends_on_no_messages_and_on_a_plain_answer() -> None:
    assert route_after_agent({"messages": []}) == "__end__"  # type: ignore[typeddict-item]
    assert route_after_agent({"messages": [AIMessage("hi")]}) == "__end__"  # type: ignore[typeddict-item]
    asking = AIMessage("", tool_calls=[call("book")])
    assert route_after_agent({"messages": [asking]}) == "tools"  # type: ignore[typeddict-item]


def test_the_refusals_name_what_they_refuse() -> None:
    with pytest.raises(ToolstopConfigError) as error:
        build_react_graph(ScriptedChatModel([]), [static])
    assert str(error.value) == (
        "build_react_graph: tools ['static'] have return_direct=True. A static stop ends the loop "
        "on every call, bypassing the stop policy (a transient failure would end the run). Drop "
        "return_direct and return signal(Outcome.COMPLETED) in the tool's artifact."
    )
    with pytest.raises(ToolstopConfigError) as error:
        build_react_graph(ScriptedChatModel([]), [], prompt=42)  # type: ignore[arg-type]
    assert str(error.value) == (
        "prompt must be None, a str, a SystemMessage, a function of the state or a "
        "Runnable (a ChatPromptTemplate), got int"
    )


def _pair_sync() -> tuple[str, dict[str, object]]:
    return "x", {}


async def _pair_async() -> tuple[str, dict[str, object]]:
    return "x", {}


def _pair_spaced() -> Any:
    return "x", {}


def _pair_typing() -> Any:
    return "x", {}


def _pair_real() -> Any:
    return "x", {}


_pair_real.__annotations__["return"] = tuple[str, dict]
# Annotations as a user's module without `from __future__ import annotations` may write them.
_pair_spaced.__annotations__["return"] = "Tuple [str, dict]"
_pair_typing.__annotations__["return"] = "typing.Tuple[str, dict]"


def _text() -> str:
    return "x"


@pytest.mark.parametrize(
    ("function", "coroutine", "pair"),
    [
        (_pair_sync, None, True),
        (None, _pair_async, True),  # an async-only tool
        (_pair_spaced, None, True),  # a string annotation, spaced and capitalised
        (_pair_typing, None, True),
        (_text, None, False),
        (_pair_real, None, True),  # an evaluated annotation
        (None, None, False),  # nothing to inspect
        (len, None, False),  # a builtin: no annotation
        ("not callable", None, False),  # no signature to read
    ],
)
def test_a_tuple_return_is_read_from_the_tools_function(
    function: Any, coroutine: Any, pair: bool
) -> None:
    assert _returns_a_pair(SimpleNamespace(func=function, coroutine=coroutine)) is pair
    if function is None:  # an object without a `func` attribute at all reads the same
        assert _returns_a_pair(SimpleNamespace(coroutine=coroutine)) is pair


def test_an_async_run_publishes_its_turns_and_its_end() -> None:
    """Turn events from the async model node, the run's end from the async stop nodes.

    Async handlers get the run's end on the event loop's thread (the sync dispatch would hand
    them to langchain-core's thread pool).
    """

    class Events(AsyncCallbackHandler):
        def __init__(self) -> None:
            self.names: list[str] = []

        async def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
            on_the_loop = threading.current_thread() is threading.main_thread()
            self.names.append(name if on_the_loop else f"{name} (off the event loop)")

    for mode, script in (("hard", [call("book")] * 2), ("polish", [call("book")] * 2 + ["ok"])):
        booking = forced_tool("book", ("busy", signal("transient")), ("ok", signal("completed")))
        policy = StopPolicy(mode=mode)
        graph = build_react_graph(ScriptedChatModel(script), [booking], policy=policy)
        events = Events()

        async def stream(graph: Any = graph, events: Events = events) -> list[Any]:
            inputs = {"messages": [HumanMessage("q")]}
            config = {"callbacks": [events]}
            return [c async for c in graph.astream(inputs, config, stream_mode="custom")]

        chunks = asyncio.run(stream())
        assert [(c["toolstop"], c.get("turn")) for c in chunks] == [
            ("turn", 1),
            ("turn", 2),
            ("run_end", None),
        ]
        assert chunks[-1]["record"]["rule"] == "completed"
        assert events.names == ["toolstop_run_end"]

    # A run the model ends with its own answer publishes its end from the async model node.
    busy = forced_tool("book", ("busy", signal("transient")))
    graph = build_react_graph(ScriptedChatModel([call("book"), "done"]), [busy])
    events = Events()
    state = asyncio.run(graph.ainvoke({"messages": [HumanMessage("q")]}, {"callbacks": [events]}))
    assert (state["messages"][-1].content, state["stop_record"]["rule"]) == ("done", "none")
    assert events.names == ["toolstop_run_end"]


def test_the_graph_prints_nothing_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    """LangGraph's debug flag is off unless asked for: a run writes nothing to stdout."""
    booking = forced_tool("book", ("booked", signal("completed")))
    run(build_react_graph(ScriptedChatModel([call("book")]), [booking]))
    assert capsys.readouterr().out == ""


def test_an_async_run_routes_inline_and_untraced() -> None:
    """The routers run in the event loop (no thread-pool hop per call) and are no traced runs,
    as `create_agent`'s are; the nodes are one run each."""
    import concurrent.futures

    class Counting(concurrent.futures.ThreadPoolExecutor):
        submitted = 0

        def submit(self, *args: Any, **kwargs: Any) -> Any:
            Counting.submitted += 1
            return super().submit(*args, **kwargs)

    @tool(response_format="content_and_artifact")
    async def book(query: str = "") -> tuple[str, dict[str, object]]:
        """Books it."""
        return "busy", signal("transient")

    class Starts(BaseCallbackHandler):
        def __init__(self) -> None:
            self.names: list[str] = []

        def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
            self.names.append(kwargs.get("name") or "")

    graph = build_react_graph(_AsyncOnly([call("book"), "done"]), [book])

    async def go() -> Any:
        asyncio.get_running_loop().set_default_executor(Counting(max_workers=1))
        return await graph.ainvoke({"messages": [HumanMessage("q")]})

    state = asyncio.run(go())
    assert state["messages"][-1].content == "done"
    assert Counting.submitted == 0
    starts = Starts()
    booking = forced_tool("book", ("busy", signal("transient")))
    traced = build_react_graph(ScriptedChatModel([call("book"), "done"]), [booking])
    traced.invoke({"messages": [HumanMessage("q")]}, {"callbacks": [starts]})
    assert [name for name in starts.names if name in ("agent", "tools")] == [
        "agent",
        "tools",
        "agent",
    ]
    assert not [name for name in starts.names if name.startswith("route")], starts.names
