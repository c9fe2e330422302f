"""Why the design is what it is: today's LangGraph / LangChain behaviour, pinned per version.

Each test asserts something the routers rely on (or work around). When an upgrade changes one,
the test fails with a sentence saying what changed and what to re-check; docs/upgrading.md says
what each failure means for a user.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool

from toolstop import signal
from toolstop.testing import ScriptedChatModel, call, turn

pytestmark = pytest.mark.contract

VERSIONS = ", ".join(
    f"{name} {importlib.metadata.version(name)}" for name in ("langgraph", "langchain-core")
)


def _changed(what: str, recheck: str) -> str:
    return f"on {VERSIONS}: {what}. Re-check: {recheck}"


@tool(response_format="content_and_artifact")
def lookup(query: str = "") -> tuple[str, dict[str, Any]]:
    """Look something up (always a stopping success)."""
    return "the page", signal("completed")


@tool(return_direct=True)
def static(query: str = "") -> str:
    """A tool with the static stop flag."""
    return "static page"


@tool
def plain(query: str = "") -> str:
    """A tool without the static stop flag."""
    return "plain page"


def _messages(result: dict[str, Any]) -> list[Any]:
    return list(result["messages"])


# -- legacy create_react_agent -------------------------------------------------------------
def _legacy_agent(model: Any, tools: list[Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated in langgraph 1.x, still shipped
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, tools)


def test_legacy_return_direct_ends_on_a_tool_message() -> None:
    model = ScriptedChatModel([call("static")])
    result = _legacy_agent(model, [static]).invoke({"messages": [HumanMessage("q")]})
    last = _messages(result)[-1]
    assert isinstance(last, ToolMessage), _changed(
        f"legacy create_react_agent with return_direct now ends on {type(last).__name__}",
        "docs/routers.md (the legacy drop-in); toolstop.legacy may no longer need to differ here",
    )
    model.assert_complete()


def test_legacy_return_direct_ends_if_any_call_of_the_turn_has_it() -> None:
    model = ScriptedChatModel([turn(call("plain"), call("static"))])
    result = _legacy_agent(model, [plain, static]).invoke({"messages": [HumanMessage("q")]})
    assert len(model.calls) == 1, _changed(
        "legacy return_direct no longer ends the run when only one call of the turn has it",
        "the legacy agent ends if any call has return_direct; the bench's static row",
    )
    assert isinstance(_messages(result)[-1], ToolMessage)


# -- create_agent ------------------------------------------------------------------------------


def _create_agent(model: Any, tools: list[Any], middleware: Sequence[Any] = ()) -> Any:
    pytest.importorskip("langchain.agents", reason="create_agent needs langchain>=1.0")
    from langchain.agents import create_agent

    return create_agent(model, tools, middleware=list(middleware))


def test_create_agent_return_direct_ends_only_if_all_calls_have_it() -> None:
    model = ScriptedChatModel([turn(call("plain"), call("static")), "paraphrase"])
    _create_agent(model, [plain, static]).invoke({"messages": [HumanMessage("q")]})
    assert len(model.calls) == 2, _changed(
        "create_agent now ends on return_direct when only some calls of the turn have it",
        "create_agent ends only if all calls have return_direct; the bench's static row",
    )
    model2 = ScriptedChatModel([call("static")])
    result = _create_agent(model2, [static]).invoke({"messages": [HumanMessage("q")]})
    assert isinstance(_messages(result)[-1], ToolMessage), _changed(
        "create_agent with return_direct no longer ends on the ToolMessage",
        "the router table in README.md and docs/routers.md",
    )


def test_command_goto_end_from_wrap_tool_call_does_not_stop() -> None:
    pytest.importorskip("langchain.agents", reason="create_agent needs langchain>=1.0")
    from langchain.agents.middleware import AgentMiddleware
    from langgraph.graph import END
    from langgraph.types import Command

    class GotoEnd(AgentMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            result = handler(request)
            return Command(goto=END, update={"messages": [result]})

    model = ScriptedChatModel([call("lookup"), "paraphrase"])
    _create_agent(model, [lookup], [GotoEnd()]).invoke({"messages": [HumanMessage("q")]})
    assert len(model.calls) == 2, _changed(
        "Command(goto=END) returned from wrap_tool_call now ends the run",
        "StopOnArtifact could end from the tool side instead of answering in wrap_model_call",
    )


def test_jump_to_without_hook_config_is_ignored() -> None:
    pytest.importorskip("langchain.agents", reason="create_agent needs langchain>=1.0")
    from langchain.agents.middleware import AgentMiddleware

    class JumpWithoutConfig(AgentMiddleware):
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            last = state["messages"][-1]
            if isinstance(last, ToolMessage):
                return {"jump_to": "end", "messages": [AIMessage(content=str(last.content))]}
            return None

    model = ScriptedChatModel([call("lookup"), "paraphrase"])
    _create_agent(model, [lookup], [JumpWithoutConfig()]).invoke({"messages": [HumanMessage("q")]})
    assert len(model.calls) == 2, _changed(
        "a before_model jump_to without @hook_config(can_jump_to=...) is now honoured",
        "the before_model pattern in docs/routers.md's middleware notes",
    )


def test_jump_to_with_hook_config_ends_the_run() -> None:
    pytest.importorskip("langchain.agents", reason="create_agent needs langchain>=1.0")
    from langchain.agents.middleware import AgentMiddleware, hook_config

    class JumpWithConfig(AgentMiddleware):
        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            last = state["messages"][-1]
            if isinstance(last, ToolMessage):
                return {"jump_to": "end", "messages": [AIMessage(content=str(last.content))]}
            return None

    model = ScriptedChatModel([call("lookup")])
    result = _create_agent(model, [lookup], [JumpWithConfig()]).invoke(
        {"messages": [HumanMessage("q")]}
    )
    assert len(model.calls) == 1, _changed(
        "a before_model jump with hook_config no longer ends the run",
        "the alternative StopOnArtifact was measured against",
    )
    assert _messages(result)[-1].content == "the page"


def test_langgraphs_private_runnable_callable_is_where_the_graph_imports_it() -> None:
    """toolstop.graph builds its nodes with `langgraph._internal._runnable.RunnableCallable`
    (private; it measured faster than RunnableLambda) and falls back to RunnableLambda without
    it (`test_graph.py::test_the_graph_runs_without_langgraphs_private_runnable_callable`)."""
    import inspect

    import toolstop.graph

    recheck = (
        "toolstop/graph.py imports it and now falls back to RunnableLambda (slower under "
        "concurrency); import it from its new place or drop it"
    )
    try:
        from langgraph._internal._runnable import RunnableCallable
    except ImportError as error:
        pytest.fail(_changed(f"langgraph moved RunnableCallable ({error})", recheck))
    assert toolstop.graph._RunnableCallable is RunnableCallable
    parameters = inspect.signature(RunnableCallable).parameters
    assert {"func", "afunc", "name", "trace"} <= set(parameters), _changed(
        f"RunnableCallable's parameters are now {list(parameters)}", recheck
    )


def _tool_returning(command: Any) -> Any:
    """A tool whose result is the `Command` built by `command(tool_call_id)`."""

    @tool
    def ender(tool_call_id: Annotated[str, InjectedToolCallId], query: str = "") -> Any:
        """A tool that tries to end the run itself."""
        return command(tool_call_id)

    return ender


def _ended_by_the_tool(command: Any) -> tuple[int, list[Any]]:
    """Model calls and messages of a create_agent run whose one tool returns `command`."""
    model = ScriptedChatModel([call("ender"), "paraphrase"])
    agent = _create_agent(model, [_tool_returning(command)])
    result = agent.invoke({"messages": [HumanMessage("q")]})
    return len(model.calls), _messages(result)


def test_a_tool_returning_command_goto_end_does_not_end_a_create_agent_run() -> None:
    # langchain PRs #34890 and #35709 (closed, not merged) would let a tool end the run itself.
    pytest.importorskip("langchain.agents", reason="create_agent needs langchain>=1.0")
    from langgraph.graph import END
    from langgraph.types import Command

    def goto_end(call_id: str) -> Any:
        message = ToolMessage("the page", tool_call_id=call_id, artifact=signal("completed"))
        return Command(goto=END, update={"messages": [message]})

    calls, messages = _ended_by_the_tool(goto_end)
    assert (calls, messages[-1].content) == (2, "paraphrase"), _changed(
        "a tool returning Command(goto=END) now ends a create_agent run (langchain #34890 / "
        "#35709 or a successor was merged)",
        "whether StopOnArtifact should let such a tool end the run, its record and relay, and "
        "the README's 'why not Command(goto=END)'",
    )


def test_a_tool_setting_jump_to_does_not_end_a_create_agent_run() -> None:
    pytest.importorskip("langchain.agents", reason="create_agent needs langchain>=1.0")
    from langgraph.types import Command

    def jump_to_end(call_id: str) -> Any:
        message = ToolMessage("the page", tool_call_id=call_id, artifact=signal("completed"))
        return Command(update={"messages": [message], "jump_to": "end"})

    calls, messages = _ended_by_the_tool(jump_to_end)
    assert (calls, messages[-1].content) == (2, "paraphrase"), _changed(
        "a tool setting jump_to='end' now ends a create_agent run (langchain #34890 / #35709 "
        "or a successor was merged)",
        "whether StopOnArtifact should honour a tool's own jump, its record and relay",
    )
