"""What only StopOnArtifact has: composition with other create_agent middleware."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelCallLimitMiddleware,
    ToolCallLimitMiddleware,
)
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from helpers import run
from toolstop import Outcome, StopOnArtifact, StopPolicy, ToolstopConfigError, signal
from toolstop.testing import ScriptedChatModel, call, forced_tool

pytestmark = pytest.mark.contract

SECRET_PAGE = "account 4711: balance 1,000 EUR"


class RefuseResults(AgentMiddleware):
    """A policy guard: blocks every tool result of `tool` and marks it `policy_block`."""

    def __init__(self, tool: str) -> None:
        super().__init__()
        self.tool = tool

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        result = handler(request)
        if isinstance(result, ToolMessage) and result.name == self.tool:
            return ToolMessage(
                content="Blocked by policy.",
                tool_call_id=result.tool_call_id,
                name=result.name,
                artifact=signal(Outcome.POLICY_BLOCK, guard="RefuseResults"),
            )
        return result


class SeenByAfterModel(AgentMiddleware):
    """Records the answers `after_model` hooks see (an output guard would act here)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def after_model(self, state: Any, runtime: Any) -> None:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and not last.tool_calls:
            self.seen.append(str(last.content))


@pytest.mark.parametrize("guard_first", [True, False], ids=["guard-before", "guard-after"])
def test_a_refusal_is_recorded_as_policy_block_never_as_completed(guard_first: bool) -> None:
    model = ScriptedChatModel([call("accounts")])
    tools = [forced_tool("accounts", (SECRET_PAGE, signal(Outcome.COMPLETED)))]
    stop, guard = StopOnArtifact(), RefuseResults("accounts")
    middleware = [guard, stop] if guard_first else [stop, guard]
    agent = create_agent(model, tools, middleware=middleware)
    path, state = run(agent)
    model.assert_complete()
    assert path == ["model", "tools", "model", "StopOnArtifact.after_agent"]
    assert state["stop_record"]["rule"] == "policy_block"
    assert state["messages"][-1].content == StopPolicy().policy_block_message
    assert all(SECRET_PAGE not in str(m.content) for m in state["messages"])


def test_composes_with_langchains_limit_middleware_and_a_tool_wrapper() -> None:
    class Passthrough(AgentMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

    model = ScriptedChatModel([call("lookup"), call("lookup")])
    tools = [forced_tool("lookup", ("timeout", signal("transient")), ("page", signal("completed")))]
    middleware = [
        ModelCallLimitMiddleware(run_limit=5),
        ToolCallLimitMiddleware(run_limit=5),
        Passthrough(),
        StopOnArtifact(),
    ]
    agent = create_agent(model, tools, middleware=middleware)
    path, state = run(agent)
    model.assert_complete()  # no extra model call
    core = [node for node in path if "." not in node]  # drop the limit middlewares' own nodes
    assert core == ["model", "tools", "model", "tools", "model"]
    assert state["messages"][-1].content == "page"
    assert state["stop_record"]["rule"] == "completed"
    assert state["stop_record"]["model_calls"] == 2


def test_after_model_hooks_see_the_relay() -> None:
    seen = SeenByAfterModel()
    model = ScriptedChatModel([call("lookup")])
    tools = [forced_tool("lookup", ("the page", signal("completed")))]
    agent = create_agent(model, tools, middleware=[seen, StopOnArtifact()])
    run(agent)
    assert seen.seen == ["the page"]


def test_return_direct_is_refused_before_any_model_call() -> None:
    @tool(return_direct=True)
    def static(query: str) -> str:
        """Always ends the loop."""
        return query

    model = ScriptedChatModel([call("static", query="x")])
    agent = create_agent(model, [static], middleware=[StopOnArtifact()])
    with pytest.raises(ToolstopConfigError, match="return_direct"):
        run(agent)
    assert model.calls == []


def test_tool_exceptions_are_left_to_create_agent_without_an_error_middleware() -> None:
    model = ScriptedChatModel([call("lookup")])
    tools = [forced_tool("lookup", RuntimeError("boom"))]
    agent = create_agent(model, tools, middleware=[StopOnArtifact()])
    with pytest.raises(RuntimeError, match="boom"):
        run(agent)
    assert len(model.calls) == 1


def test_middleware_works_without_a_checkpointer_and_keeps_records_per_run() -> None:
    model = ScriptedChatModel([call("lookup"), "hi"])
    tools = [forced_tool("lookup", ("page", signal("completed")))]
    agent = create_agent(model, tools, middleware=[StopOnArtifact()])
    _, first = run(agent)
    _, second = run(agent)
    assert first["stop_record"]["rule"] == "completed"
    assert second["stop_record"]["rule"] == "none"


def test_importing_without_langchain_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import toolstop

    monkeypatch.setitem(sys.modules, "langchain.agents.middleware", None)
    monkeypatch.delitem(sys.modules, "toolstop.middleware", raising=False)
    with pytest.raises(ImportError, match=r"toolstop\[agents\]"):
        importlib.import_module("toolstop.middleware")
    with pytest.raises(ImportError, match=r"toolstop\[agents\]"):
        _ = toolstop.StopOnArtifact
    monkeypatch.delitem(sys.modules, "toolstop.middleware", raising=False)
