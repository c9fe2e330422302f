"""Failing tools, on every router: exceptions, timeouts and wrong return types become
model-visible errors that count against the retry budget; failing forever ends with
retry_budget, never with GraphRecursionError, never silently."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from routers import ROUTERS, Router
from toolstop import StopPolicy, ToolTimeoutError, signal, with_timeout
from toolstop.testing import ScriptedChatModel, assert_valid_history, call, forced_tool

RELEASE = threading.Event()
FINISHED: list[str] = []  # what the hanging tool did in the end: "returned" or "cancelled"


def hanging_tool() -> Any:
    """A tool that returns only when the test ends (RELEASE), so any answer before that came
    from the timeout, however slow the machine (the 600 s are a hang guard, not a speed target)."""

    def hang(query: str = "") -> tuple[str, dict[str, Any]]:
        RELEASE.wait(timeout=600)  # released at the end of the test: no thread outlives it
        FINISHED.append("returned")
        return "too late", signal("completed")

    async def ahang(query: str = "") -> tuple[str, dict[str, Any]]:
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            FINISHED.append("cancelled")
            raise
        FINISHED.append("returned")
        return "too late", signal("completed")

    return StructuredTool.from_function(
        hang,
        coroutine=ahang,
        name="lookup",
        description="Hangs.",
        response_format="content_and_artifact",
    )


def wrong_type_tool() -> Any:
    return StructuredTool.from_function(
        lambda query="": 42,
        name="lookup",
        description="Returns no tuple.",
        response_format="content_and_artifact",
    )


@pytest.fixture(params=ROUTERS, ids=lambda r: r.name)
def router(request: pytest.FixtureRequest) -> Router:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _release_hung_threads() -> Any:
    RELEASE.clear()
    yield
    RELEASE.set()


class Unprintable(Exception):
    """An exception whose text cannot be read: `str()` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text")


FAILURES = {
    "exception": lambda: forced_tool("lookup", RuntimeError("backend exploded")),
    "unprintable": lambda: forced_tool("lookup", Unprintable()),
    "timeout": lambda: with_timeout(hanging_tool(), 0.2),
    "wrong-type": wrong_type_tool,
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_failure_is_a_model_visible_error_counted_against_the_budget(
    router: Router, failure: str
) -> None:
    model = ScriptedChatModel([call("lookup"), "Sorry, the lookup failed."])
    agent = router.build(
        model, [FAILURES[failure]()], policy=StopPolicy(max_transient_retries=3), checkpointer=None
    )
    state = agent.invoke({"messages": [HumanMessage("q")]})
    model.assert_complete()
    error = model.calls[1].messages[-1]
    assert isinstance(error, ToolMessage)
    assert error.status == "error"
    record = state["stop_record"]
    assert record["transient_retries"] == 1
    assert record["invalid_signals"][0]["problem"] == "tool_error"
    assert state["messages"][-1].content == "Sorry, the lookup failed."


def test_an_exception_whose_text_cannot_be_read_is_named_by_its_type(router: Router) -> None:
    model = ScriptedChatModel([call("lookup"), "Sorry, the lookup failed."])
    agent = router.build(model, [FAILURES["unprintable"]()], policy=None, checkpointer=None)
    state = agent.invoke({"messages": [HumanMessage("q")]})
    model.assert_complete()
    assert model.calls[1].messages[-1].content == "Error: Unprintable"
    assert state["stop_record"]["invalid_signals"][0]["problem"] == "tool_error"


@pytest.mark.parametrize("failure", list(FAILURES))
def test_failing_forever_ends_with_the_retry_budget(router: Router, failure: str) -> None:
    model = ScriptedChatModel([call("lookup")] * 3)
    policy = StopPolicy(max_transient_retries=2)
    agent = router.build(model, [FAILURES[failure]()], policy=policy, checkpointer=None)
    state = agent.invoke({"messages": [HumanMessage("q")]}, {"recursion_limit": 100})
    model.assert_complete()
    assert state["stop_record"]["rule"] == "retry_budget"
    assert state["messages"][-1].content == policy.retry_budget_message
    assert_valid_history(state["messages"])


def test_a_sync_tool_that_hangs_times_out() -> None:
    # It would answer "too late" once released: the error proves the wrapper gave up first.
    FINISHED.clear()
    with pytest.raises(ToolTimeoutError, match=r"within 0\.2 s"):
        with_timeout(hanging_tool(), 0.2).invoke({"query": "x"})
    assert not RELEASE.is_set()  # the sync tool is still hanging: the timeout answered
    assert FINISHED == []


def test_an_async_tool_that_hangs_is_cancelled() -> None:
    seen: list[str] = []

    async def ahang(query: str = "") -> tuple[str, dict[str, Any]]:
        seen.append("started")
        try:
            await asyncio.Event().wait()  # never set: only a cancellation ends this
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        seen.append("answered")  # pragma: no cover - the await never returns
        return "too late", signal("completed")

    inner = StructuredTool.from_function(
        coroutine=ahang, name="lookup", description="Hangs.", response_format="content_and_artifact"
    )

    async def main() -> list[str]:
        with pytest.raises(ToolTimeoutError, match=r"within 0\.2 s"):
            await with_timeout(inner, 0.2).ainvoke({"query": "x"})
        return list(seen)  # before the event loop's own shutdown cancels what is left

    assert asyncio.run(main()) == ["started", "cancelled"]


def test_with_timeout_keeps_the_tool_and_its_artifact() -> None:
    inner = forced_tool("lookup", ("page", signal("completed", receipt="r1")))
    tool = with_timeout(inner, 5)
    assert (tool.name, tool.description) == (inner.name, inner.description)
    message = tool.invoke(
        {"type": "tool_call", "name": "lookup", "args": {"query": "q"}, "id": "1"}
    )
    assert (message.content, message.artifact) == (
        "page",
        {"stop": True, "reason": "completed", "receipt": "r1"},
    )
    with pytest.raises(ValueError, match="positive"):
        with_timeout(inner, 0)
