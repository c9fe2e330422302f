"""The scripted model streams like a provider and records what each call was bound with."""

from __future__ import annotations

import asyncio
import json
from datetime import date
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    message_chunk_to_message,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableBinding
from pydantic import BaseModel, ValidationError

from toolstop import Outcome, build_react_graph, signal
from toolstop.testing import (
    ScriptedChatModel,
    ScriptMismatchError,
    ScriptStep,
    call,
    forced_tool,
    turn,
)
from toolstop.testing._chunks import HAS_CHUNK_POSITION
from toolstop.testing.scripted import approximate_usage

TEXT = "Paid order o-1. Receipt r-1."
WORDS = ["Paid ", "order ", "o-1. ", "Receipt ", "r-1."]  # how a provider streams it, by hand
LONG_QUERY = "refund policy for orders paid by card"


def _merge(chunks: list[AIMessageChunk]) -> BaseMessage:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return message_chunk_to_message(total)


def _same_but_id(left: BaseMessage, right: BaseMessage) -> None:
    """Equal as messages; the id differs per run (langchain-core gives each run its own)."""
    assert left.model_dump(exclude={"id"}) == right.model_dump(exclude={"id"})


def _invoked(step: ScriptStep, id_prefix: str | None = None) -> AIMessage:
    return ScriptedChatModel([step], id_prefix=id_prefix).invoke([HumanMessage("q")])


def test_text_streams_a_word_at_a_time_with_usage_on_the_last_chunk() -> None:
    model = ScriptedChatModel([TEXT])
    chunks = list(model.stream([HumanMessage("q")]))
    assert [c.content for c in chunks] == WORDS
    assert all(c.usage_metadata is None for c in chunks[:-1])
    usage = chunks[-1].usage_metadata
    assert usage is not None
    assert usage["input_tokens"] == count_tokens_approximately([HumanMessage("q")])
    assert usage["output_tokens"] == count_tokens_approximately([AIMessage(TEXT)])
    if HAS_CHUNK_POSITION:
        assert [c.chunk_position for c in chunks] == [None] * 4 + ["last"]
    assert len({c.id for c in chunks}) == 1  # one message, one id on every chunk
    _same_but_id(_merge(chunks), _invoked(TEXT))
    assert model.calls[0].streamed
    model.assert_complete()


def test_tool_calls_stream_as_pieces_of_their_json_arguments() -> None:
    step = turn(call("search", query=LONG_QUERY), call("pay", order_id="o-1"))
    model = ScriptedChatModel([step], id_prefix="streamed")
    chunks = list(model.stream("q"))
    pieces = [tc for c in chunks for tc in c.tool_call_chunks]
    first_call = [p for p in pieces if p["index"] == 0]
    assert len(first_call) > 1  # the long arguments arrive in several pieces
    assert (first_call[0]["name"], first_call[0]["id"]) == ("search", model.call_id(0, 0))
    assert all(p["name"] is None and p["id"] is None for p in first_call[1:])
    assert "".join(p["args"] or "" for p in first_call) == json.dumps({"query": LONG_QUERY})
    assert [p["name"] for p in pieces if p["index"] == 1][:1] == ["pay"]
    merged = _merge(chunks)
    assert isinstance(merged, AIMessage)
    assert [(c["name"], c["args"], c["id"]) for c in merged.tool_calls] == [
        ("search", {"query": LONG_QUERY}, model.call_id(0, 0)),
        ("pay", {"order_id": "o-1"}, model.call_id(0, 1)),
    ]
    _same_but_id(merged, _invoked(step, "streamed"))


def test_astream_gives_the_same_chunks() -> None:
    async def collect() -> list[AIMessageChunk]:
        model = ScriptedChatModel([TEXT, call("search", id="c1", query=LONG_QUERY)])
        texts = [c async for c in model.astream("q")]
        calls = [c async for c in model.astream("q")]
        assert [c.streamed for c in model.calls] == [True, True]
        return texts + calls

    chunks = asyncio.run(collect())
    assert [c.content for c in chunks[: len(WORDS)]] == WORDS
    _same_but_id(_merge(chunks[len(WORDS) :]), _invoked(call("search", id="c1", query=LONG_QUERY)))


def test_astream_events_report_each_token_as_on_chat_model_stream() -> None:
    async def collect() -> list[dict[str, Any]]:
        model = ScriptedChatModel([TEXT])
        return [e async for e in model.astream_events("q", version="v2")]

    events = asyncio.run(collect())
    tokens = [e["data"]["chunk"] for e in events if e["event"] == "on_chat_model_stream"]
    assert [t.content for t in tokens] == WORDS
    assert tokens[-1].usage_metadata is not None
    [end] = [e for e in events if e["event"] == "on_chat_model_end"]
    assert end["data"]["output"].content == TEXT


def test_a_graph_streamed_in_messages_mode_shows_the_model_tokens() -> None:
    """A chat UI on `stream_mode="messages"` sees the tool-call chunk, the tool result, the
    answer a word at a time; the chunks carry the id the answer has in the graph's state."""
    lookup = forced_tool("lookup", ("The service timed out.", signal(Outcome.TRANSIENT)))
    model = ScriptedChatModel([call("lookup", query=LONG_QUERY), TEXT])
    graph = build_react_graph(model, [lookup])
    stream = list(graph.stream({"messages": [HumanMessage("q")]}, stream_mode="messages"))
    by_node = [(meta["langgraph_node"], message) for message, meta in stream]
    answer = [m for node, m in by_node if node == "agent" and m.content]
    assert [m.content for m in answer] == WORDS
    asks = [m for node, m in by_node if node == "agent" and m.tool_call_chunks]
    assert {tc["name"] for m in asks for tc in m.tool_call_chunks} == {"lookup", None}
    assert [m.content for node, m in by_node if node == "tools"] == ["The service timed out."]
    assert [c.streamed for c in model.calls] == [True, True]


def test_streamed_answers_keep_their_id_in_the_state() -> None:
    lookup = forced_tool("lookup", ("The service timed out.", signal(Outcome.TRANSIENT)))
    graph = build_react_graph(ScriptedChatModel([call("lookup"), TEXT]), [lookup])
    ids: list[str | None] = []
    final: dict[str, Any] = {}
    for mode, item in graph.stream(
        {"messages": [HumanMessage("q")]}, stream_mode=["messages", "values"]
    ):
        if mode == "messages" and item[1]["langgraph_node"] == "agent":
            ids.append(item[0].id)
        elif mode == "values":
            final = item
    state_ids = [m.id for m in final["messages"] if isinstance(m, AIMessage)]
    assert list(dict.fromkeys(ids)) == state_ids  # one id per model call, as in the state


def test_bind_tools_returns_a_binding_and_every_option_reaches_the_recorded_call() -> None:
    lookup = forced_tool("lookup", ("x", None))
    other = forced_tool("other", ("y", None))
    model = ScriptedChatModel([call("lookup"), "done"])
    bound = model.bind_tools([lookup, other], tool_choice="lookup", parallel_tool_calls=False)
    assert isinstance(bound, RunnableBinding)
    bound.invoke("q", model="other-model")
    model.bind_tools([lookup]).invoke("q", stop=["never"])
    first, second = model.calls
    assert (first.tools, first.tool_choice) == (("lookup", "other"), "lookup")
    assert first.options == {"parallel_tool_calls": False, "model": "other-model"}
    assert first.response.response_metadata["model_name"] == "other-model"
    assert (second.tools, second.tool_choice, second.options) == (
        ("lookup",),
        None,
        {"stop": ["never"]},
    )
    assert second.response.response_metadata["model_name"] == "scripted"


def test_structured_output_metadata_reaches_the_callbacks() -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    class Joke(BaseModel):
        """A joke."""

        setup: str

    seen: list[Any] = []

    class Options(BaseCallbackHandler):
        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            seen.append(kwargs.get("options"))

    model = ScriptedChatModel([call("Joke", setup="s")])
    joke = model.with_structured_output(Joke).invoke("q", config={"callbacks": [Options()]})
    assert joke == Joke(setup="s")
    assert seen[0]["ls_structured_output_format"]["schema"]["title"] == "Joke"
    assert model.calls[0].tool_choice == "any"
    assert "ls_structured_output_format" not in model.calls[0].options


def test_tool_choice_is_checked_against_the_tools_and_the_script() -> None:
    lookup = forced_tool("lookup", ("x", None))
    other = forced_tool("other", ("y", None))
    model = ScriptedChatModel(["plain text", call("other")])
    with pytest.raises(ValueError, match="tool_choice names 'missing'"):
        model.bind_tools([lookup], tool_choice="missing")
    with pytest.raises(ValueError, match="exactly one tool"):
        model.bind_tools([lookup, other], tool_choice=True)
    with pytest.raises(ScriptMismatchError, match="forced one"):
        model.bind_tools([lookup], tool_choice="any").invoke("q")
    assert model.remaining == 2  # a contradiction consumes nothing
    model.bind_tools([lookup], tool_choice="none").invoke("q")  # text under 'none': fine
    with pytest.raises(ScriptMismatchError, match="forced tool 'lookup'"):
        model.bind_tools([lookup, other], tool_choice="lookup").invoke("q")
    with pytest.raises(ScriptMismatchError, match="allowed no tool"):
        model.bind_tools([lookup, other], tool_choice="none").invoke("q")
    choice = {"type": "function", "function": {"name": "other"}}
    assert model.bind_tools([lookup, other], tool_choice=choice).invoke("q").tool_calls
    model.assert_complete()


def test_stop_sequences_cut_the_text_in_invoke_and_stream_alike() -> None:
    assert ScriptedChatModel([TEXT]).invoke("q", stop=["Receipt"]).content == "Paid order o-1. "
    chunks = list(ScriptedChatModel([TEXT], stop=["o-1"]).stream("q"))
    assert "".join(str(c.content) for c in chunks) == "Paid order "


def test_streaming_true_makes_invoke_stream() -> None:
    model = ScriptedChatModel([TEXT], streaming=True)
    assert model.invoke("q").content == TEXT
    assert model.calls[0].streamed


def test_tool_call_arguments_are_json_like_a_providers() -> None:
    with pytest.raises(TypeError, match="not JSON"):
        ScriptedChatModel([call("book", day=date(2025, 1, 1))])
    answer = ScriptedChatModel([call("pick", ids=(1, 2))]).invoke("q")
    assert answer.tool_calls[0]["args"] == {"ids": [1, 2]}  # as json.loads gives it back


@pytest.mark.parametrize(
    "block",
    [
        {"type": "text", "text": None},
        {"type": "text", "text": 5},
        {"type": ["text"], "text": "x"},
    ],
)
def test_a_scripted_text_block_needs_a_string_text_like_a_providers(block: Any) -> None:
    with pytest.raises(TypeError, match=r"script step 1: content block 1 is a dict: .*text"):
        ScriptedChatModel(["Hi.", AIMessage(content=[{"type": "text", "text": "a"}, block])])


def test_a_malformed_block_the_model_is_sent_counts_as_empty_text() -> None:
    """A tool's result is not the script: the model answers, its usage counts no text there."""
    blocks: list[Any] = [{"type": "text", "text": None}, {"type": "text", "text": 5}]
    assert approximate_usage([HumanMessage(content=blocks)], AIMessage("Hi.")) == (
        approximate_usage([HumanMessage(content="")], AIMessage("Hi."))
    )
    recorded = AIMessage(content=[{"type": ["text"]}, {"type": "text", "text": "Hi."}])
    assert approximate_usage([], recorded) == approximate_usage([], AIMessage("Hi."))
    pay = forced_tool("pay", (blocks, None))
    model = ScriptedChatModel([call("pay"), "Paid."])
    state = build_react_graph(model, [pay]).invoke({"messages": [HumanMessage("pay")]})
    assert state["messages"][-1].content == "Paid."
    model.assert_complete()


def test_unknown_options_are_rejected_and_tracing_params_reported() -> None:
    with pytest.raises(ValidationError, match="bound_tools"):
        ScriptedChatModel([], bound_tools=("x",))
    params = ScriptedChatModel([], model="m", temperature=0.5, max_tokens=9, stop=["s"])
    ls = params._get_ls_params()
    assert (ls["ls_provider"], ls["ls_model_name"], ls["ls_model_type"]) == (
        "toolstop",
        "m",
        "chat",
    )
    assert (ls["ls_temperature"], ls["ls_max_tokens"], ls["ls_stop"]) == (0.5, 9, ["s"])


def test_two_models_never_share_a_call_id() -> None:
    # A parent and its sub-agent in one thread: the same script position, different ids.
    parent = ScriptedChatModel([call("worker", request="q")])
    worker = ScriptedChatModel([call("search", query="q")])
    ids = [m.invoke("q").tool_calls[0]["id"] for m in (parent, worker)]
    assert ids[0] != ids[1]
    assert ids == [parent.call_id(0), worker.call_id(0)]
    assert all(i.startswith("call_m") and i.endswith("_0_0") for i in ids)
    pinned = ScriptedChatModel([turn(call("a"), call("b"))], id_prefix="call")
    assert [c["id"] for c in pinned.invoke("q").tool_calls] == ["call_0_0", "call_0_1"]


@pytest.mark.parametrize("prefix", ["", 3])
def test_a_bad_id_prefix_is_refused(prefix: Any) -> None:
    with pytest.raises(TypeError, match="id_prefix"):
        ScriptedChatModel(["hi"], id_prefix=prefix)
