"""What only the hand-built graph and the legacy drop-in have: prompt, build-time guards."""

from __future__ import annotations

import pytest
from langchain_core.tools import tool
from langgraph.prebuilt import ToolNode

from helpers import run
from toolstop import StopPolicy, ToolstopConfigError, build_react_graph, signal
from toolstop.legacy import create_react_agent
from toolstop.testing import ScriptedChatModel, call, forced_tool

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
        build_react_graph(ScriptedChatModel([]), [], prompt=lambda state: [])  # type: ignore[arg-type]


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
