"""The shipped test kit fails loudly: extra calls, unused steps, invalid histories."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from toolstop.testing import (
    ScriptedChatModel,
    ScriptExhaustedError,
    assert_valid_history,
    call,
    forced_tool,
    history_problems,
    turn,
)


def test_scripted_model_answers_in_order_and_records_calls() -> None:
    model = ScriptedChatModel([call("search", query="x"), "done"])
    bound = model.bind_tools([forced_tool("search", ("a", None))])
    first = bound.invoke([HumanMessage("q")])
    assert first.tool_calls == [
        {"name": "search", "args": {"query": "x"}, "id": model.call_id(0), "type": "tool_call"}
    ]
    second = model.invoke("again")
    assert second.content == "done"
    assert [c.tools for c in model.calls] == [("search",), ()]
    assert model.calls[0].message_types == ("human",)
    model.assert_complete()


def test_scripted_model_raises_on_an_extra_call() -> None:
    model = ScriptedChatModel(["only"])
    model.invoke("q")
    with pytest.raises(ScriptExhaustedError, match="unexpected model call #2"):
        model.invoke("q")


def test_assert_complete_fails_on_unused_steps() -> None:
    model = ScriptedChatModel(["one", "two"])
    model.invoke("q")
    with pytest.raises(AssertionError, match="used 1 of 2"):
        model.assert_complete()


def test_usage_metadata_from_the_approximate_counter() -> None:
    from langchain_core.messages.utils import count_tokens_approximately

    model = ScriptedChatModel(["an answer"])
    answer = model.invoke([HumanMessage("a question of some length")])
    usage = answer.usage_metadata
    assert usage is not None
    assert usage["input_tokens"] == count_tokens_approximately(
        [HumanMessage("a question of some length")]
    )
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_async_and_parallel_turns() -> None:
    model = ScriptedChatModel([[call("a"), call("b")], turn(call("c", id="mine"))])
    first = asyncio.run(model.ainvoke("q"))
    assert [c["name"] for c in first.tool_calls] == ["a", "b"]
    second = asyncio.run(model.ainvoke("q"))
    assert second.tool_calls[0]["id"] == "mine"


def test_bad_script_step_is_rejected() -> None:
    with pytest.raises(TypeError, match="script step 0"):
        ScriptedChatModel([42])  # type: ignore[list-item]


def test_history_checker() -> None:
    ask = AIMessage(content="", tool_calls=[{"name": "a", "args": {}, "id": "1"}])
    good = [HumanMessage("q"), ask, ToolMessage(content="r", tool_call_id="1"), AIMessage("ok")]
    assert history_problems(good) == []
    assert_valid_history(good)
    unanswered = [HumanMessage("q"), ask, AIMessage("ok")]
    assert any("left unanswered" in p for p in history_problems(unanswered))
    orphan = [HumanMessage("q"), ToolMessage(content="r", tool_call_id="9"), AIMessage("ok")]
    assert any("answers no open call" in p for p in history_problems(orphan))
    ends_on_tool = good[:3]
    with pytest.raises(AssertionError, match="does not end on an AIMessage"):
        assert_valid_history(ends_on_tool)


def test_forced_tool_repeats_its_last_result_and_raises_exceptions() -> None:
    tool = forced_tool("t", ("first", {"stop": False}), ("last", {"stop": True}))
    contents = [
        tool.invoke({"type": "tool_call", "name": "t", "args": {}, "id": str(i)}).content
        for i in range(3)
    ]
    assert contents == ["first", "last", "last"]
    failing = forced_tool("f", ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        failing.invoke({"query": "x"})
    with pytest.raises(ValueError, match="at least one"):
        forced_tool("empty")


def test_an_unexpected_call_names_only_the_last_messages_it_saw() -> None:
    from langchain_core.messages import HumanMessage

    from toolstop.testing import ScriptExhaustedError

    model = ScriptedChatModel([])
    with pytest.raises(ScriptExhaustedError) as long_run:
        model.invoke([HumanMessage("x")] * 500)
    assert len(str(long_run.value)) < 300  # not one word per message of a long history
    assert "500 messages, the last 12" in str(long_run.value)
    assert len(long_run.value.messages) == 500  # the whole list stays on the error
    with pytest.raises(ScriptExhaustedError, match=r"messages seen: human, human\)"):
        model.invoke([HumanMessage("x")] * 2)
