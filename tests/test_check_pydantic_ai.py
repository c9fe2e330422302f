"""Pydantic AI as a router of the scenario matrix (`toolstop._check.pydantic_ai_router`), part by
part: the history read back as LangChain messages, the chat model behind a `FunctionModel`, a
LangChain tool as a Pydantic AI tool, and the agent behind `invoke`.

tests/test_pydantic_ai.py runs the whole matrix on this router and compares it with the hand-built
graph's goldens; here each conversion is pinned on messages and tools written by hand.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from toolstop import StopPolicy, signal
from toolstop._check.scenarios import DONE, RETRY
from toolstop.testing.forced import forced_tool
from toolstop.testing.scripted import ScriptedChatModel, call

pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")

from pydantic_ai import ModelRetry, ToolReturn
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from toolstop._check import pydantic_ai_router as router


def test_pydantic_ai_is_available_here_and_said_how_to_install_where_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert router.pydantic_ai_unavailable() is None
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    assert router.pydantic_ai_unavailable() == (
        "Pydantic AI is not installed (import of pydantic_ai halted; None in sys.modules): "
        "pip install 'toolstop[pydantic-ai]'"
    )


def test_a_pydantic_ai_history_reads_back_as_langchain_messages() -> None:
    history = [
        ModelRequest(
            parts=[SystemPromptPart(content="Be brief."), UserPromptPart(content="Refunds?")]
        ),
        ModelResponse(
            parts=[
                TextPart(content="Let me "),
                TextPart(content="look."),
                ToolCallPart("lookup", {"query": "refunds"}, tool_call_id="c1"),
                ToolCallPart("other", '{"n": 2}', tool_call_id="c2"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("lookup", "Paid in 5 days.", tool_call_id="c1", metadata=DONE[1]),
                UserPromptPart(content=["not", "text"]),
            ]
        ),
        ModelResponse(
            parts=[TextPart(content="Paid in 5 days.")],
            metadata={"toolstop": {"relay": True, "rule": "completed"}, "other": 1},
        ),
        ModelResponse(parts=[TextPart(content="plain")], metadata={"toolstop": None}),
    ]
    messages = router.to_langchain(history)
    assert [type(m) for m in messages] == [
        SystemMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
        HumanMessage,
        AIMessage,
        AIMessage,
    ]
    system, human, asked, result, odd, relay, plain = messages
    assert (system.content, human.content, odd.content) == ("Be brief.", "Refunds?", "")
    assert asked.content == "Let me look."
    assert asked.tool_calls == [
        {"name": "lookup", "args": {"query": "refunds"}, "id": "c1", "type": "tool_call"},
        {"name": "other", "args": {"n": 2}, "id": "c2", "type": "tool_call"},
    ]
    assert asked.response_metadata == {}
    assert isinstance(result, ToolMessage)
    assert (result.content, result.name, result.tool_call_id) == ("Paid in 5 days.", "lookup", "c1")
    assert result.artifact == DONE[1]
    assert relay.response_metadata == {"toolstop": {"relay": True, "rule": "completed"}}
    assert (relay.content, relay.tool_calls) == ("Paid in 5 days.", [])
    assert plain.response_metadata == {}
    assert router.to_langchain([]) == []


class Chat:
    """A chat model stand-in: records what it is bound to and asked, answers `answer`."""

    def __init__(self, answer: AIMessage) -> None:
        self.answer = answer
        self.bound: list[list[Any]] = []
        self.asked: list[tuple[Any, Any]] = []

    def bind_tools(self, tools: list[Any]) -> Chat:
        self.bound.append(list(tools))
        return self

    def invoke(self, messages: Any, config: Any = None) -> AIMessage:
        self.asked.append((messages, config))
        return self.answer


def info(*names: str) -> Any:
    return SimpleNamespace(function_tools=[SimpleNamespace(name=n) for n in names])


def test_the_chat_model_answers_with_the_tools_pydantic_ai_offers() -> None:
    lookup = forced_tool("lookup", DONE)
    answer = AIMessage(
        content="Checking.",
        tool_calls=[{"name": "lookup", "args": {"query": "q"}, "id": "c9", "type": "tool_call"}],
        usage_metadata={"input_tokens": 12, "output_tokens": 3, "total_tokens": 15},
    )
    chat = Chat(answer)
    config: dict[str, Any] = {"run": {"callbacks": ["handler"]}}
    model = router._function_model(chat, {"lookup": lookup}, config)
    assert model.model_name == "toolstop-check"
    asked = [ModelRequest(parts=[UserPromptPart(content="Refunds?")])]
    response = model.function(asked, info("lookup", "final_result"))
    assert chat.bound == [[lookup]]  # Pydantic AI's own output tool is not the chat model's
    [(messages, run)] = chat.asked
    assert [(type(m), m.content) for m in messages] == [(HumanMessage, "Refunds?")]
    assert run == {"callbacks": ["handler"]}
    text, tool_call = response.parts
    assert isinstance(text, TextPart)
    assert text.content == "Checking."
    assert isinstance(tool_call, ToolCallPart)
    assert (tool_call.tool_name, tool_call.args, tool_call.tool_call_id) == (
        "lookup",
        {"query": "q"},
        "c9",
    )
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)


def test_a_chat_model_offered_no_tools_is_asked_unbound_and_an_empty_answer_is_one_text() -> None:
    chat = Chat(AIMessage(content=""))
    model = router._function_model(chat, {}, {})
    response = model.function([], info("final_result"))
    assert chat.bound == []
    assert chat.asked == [([], None)]
    assert len(response.parts) == 1
    assert isinstance(response.parts[0], TextPart)
    assert response.parts[0].content == ""
    assert (response.usage.input_tokens, response.usage.output_tokens) == (0, 0)
    calls_only = Chat(AIMessage(content="", tool_calls=[call("x", id="c1")]))
    [part] = router._function_model(calls_only, {}, {}).function([], info()).parts
    assert isinstance(part, ToolCallPart)
    partial = Chat(SimpleNamespace(content="hi", usage_metadata={"input_tokens": 4}))  # type: ignore[arg-type]
    response = router._function_model(partial, {}, {}).function([], info())
    assert (response.usage.input_tokens, response.usage.output_tokens) == (4, 0)
    bare = Chat(SimpleNamespace(content="hi"))  # type: ignore[arg-type]  # no usage at all
    response = router._function_model(bare, {}, {}).function([], info())
    assert (response.usage.input_tokens, response.usage.output_tokens) == (0, 0)
    no_input = Chat(SimpleNamespace(content="hi", usage_metadata={"output_tokens": 6}))  # type: ignore[arg-type]
    response = router._function_model(no_input, {}, {}).function([], info())
    assert (response.usage.input_tokens, response.usage.output_tokens) == (0, 6)


def ctx(call_id: str = "c1") -> Any:
    return SimpleNamespace(tool_call_id=call_id)


def test_a_langchain_tool_becomes_a_pydantic_ai_tool_returning_its_artifact_as_metadata() -> None:
    seen: list[Any] = []

    @tool(response_format="content_and_artifact")
    def lookup(query: str, page: int = 1) -> tuple[str, dict[str, Any]]:
        """Look something up."""
        seen.append((query, page))
        return f"Found {query}.", signal("completed")

    made = router._tool(lookup)
    assert (made.name, made.description) == ("lookup", "Look something up.")
    assert made.takes_ctx is True
    schema = made.function_schema.json_schema
    assert schema["required"] == ["query"]
    assert set(schema["properties"]) == {"query", "page"}
    returned = made.function(ctx(), query="refunds", page=2)
    assert isinstance(returned, ToolReturn)
    assert (returned.return_value, returned.metadata) == ("Found refunds.", signal("completed"))
    assert seen == [("refunds", 2)]


def test_a_tool_without_arguments_gets_an_empty_object_schema() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    made = router._tool(ping)
    assert made.function_schema.json_schema == {"type": "object", "properties": {}}
    returned = made.function(ctx())
    assert (returned.return_value, returned.metadata) == ("pong", None)


def test_a_tools_exception_or_error_goes_back_to_the_model_as_a_retry() -> None:
    boom = router._tool(forced_tool("boom", RuntimeError("backend exploded")))
    with pytest.raises(ModelRetry) as raised:
        boom.function(ctx(), query="x")
    assert raised.value.message == "Error: RuntimeError('backend exploded')"
    assert isinstance(raised.value.__cause__, RuntimeError)

    @tool
    def failing(query: str) -> str:
        """Fails as a ToolMessage with status error."""
        return "unused"

    erroring = failing.model_copy(
        update={"func": None, "handle_tool_error": True, "handle_validation_error": True}
    )
    with pytest.raises(ModelRetry) as invalid:
        router._tool(erroring).function(ctx(), wrong=1)  # a validation error, as the model's
    assert invalid.value.message
    assert "Error: " not in invalid.value.message  # the tool's own error text, as it said it


def test_the_agent_runs_on_the_last_messages_text_with_the_runs_callbacks() -> None:
    class Calls(BaseCallbackHandler):
        def __init__(self) -> None:
            self.starts = 0

        def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
            self.starts += 1

    lookup = forced_tool("lookup", RETRY, DONE)
    scripted = ScriptedChatModel([call("lookup", query="a"), call("lookup", query="b")])
    agent = router.build(scripted, [lookup], policy=StopPolicy(mode="hard"))
    assert agent.agent._max_tool_retries == router._TOOL_RETRIES == 100
    handler = Calls()
    question = [HumanMessage(content="ignored"), HumanMessage(content="How do refunds work?")]
    out = agent.invoke({"messages": question}, {"callbacks": [handler], "other": 1})
    assert agent.config["run"] == {"callbacks": [handler]}
    assert handler.starts == 2
    assert [m.content for m in scripted.calls[0].messages] == ["How do refunds work?"]
    assert scripted.calls[0].tools == ("lookup",)
    record = out["stop_record"]
    assert (record["rule"], record["mode"], record["model_calls"]) == ("completed", "hard", 2)
    assert [type(m).__name__ for m in out["messages"]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert out["messages"][-1].response_metadata["toolstop"]["relay"] is True
    for config in ({"other": 1}, None):
        again = router.build(
            ScriptedChatModel([call("lookup")]), [forced_tool("lookup", DONE)], policy=StopPolicy()
        )
        assert again.invoke({"messages": question}, config)["stop_record"]["rule"] == "completed"
        assert again.config["run"] is None


def test_the_agent_is_built_with_the_policy_it_is_given() -> None:
    lookup = forced_tool("lookup", DONE)
    scripted = ScriptedChatModel([call("lookup"), "Here is what I found."])
    agent = router.build(scripted, [lookup], policy=StopPolicy(mode="never"), checkpointer=None)
    out = agent.invoke({"messages": [HumanMessage(content="q")]})
    assert (out["stop_record"]["mode"], out["stop_record"]["rule"]) == ("never", "none")
    assert out["messages"][-1].content == "Here is what I found."
