"""The test kit replays recordings: recorded usage is kept, results come back by call id."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.utils import count_tokens_approximately

from toolstop.testing import ScriptedChatModel, UnknownCallError, replay


def _usage(input_tokens: int, output_tokens: int) -> UsageMetadata:
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


def _ask(*calls: tuple[str, str, dict[str, Any]], usage: UsageMetadata | None = None) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for n, i, a in calls],
        usage_metadata=usage,
    )


RECORDED = [
    SystemMessage("You are the order desk."),
    HumanMessage("Where is order 7?"),
    _ask(("order", "c1", {"id": 7}), ("track", "c2", {"id": 7}), usage=_usage(1234, 5)),
    ToolMessage('{"status": "shipped"}', tool_call_id="c1", artifact={"carrier": "ups"}),
    ToolMessage("tracking is down", tool_call_id="c2", status="error"),
    AIMessage("Order 7 has shipped.", usage_metadata=_usage(2000, 7)),
    HumanMessage("Thanks, and order 8?"),
    _ask(("order", "c3", {"id": 8})),  # no usage recorded for this one
    ToolMessage('{"status": "packed"}', tool_call_id="c3"),
    AIMessage("Order 8 is packed.", usage_metadata=_usage(2500, 6)),
]


def test_a_scripted_message_keeps_its_own_usage() -> None:
    recorded = AIMessage("Shipped.", usage_metadata=_usage(1234, 5))
    model = ScriptedChatModel([recorded, recorded, "no usage here"])
    assert model.invoke("where?").usage_metadata == _usage(1234, 5)
    streamed = list(model.stream("where?"))
    assert streamed[-1].usage_metadata == _usage(1234, 5)
    # without usage of its own, the answer gets the approximation, as before
    approximate = model.invoke([HumanMessage("where?")]).usage_metadata
    assert approximate is not None
    assert approximate["input_tokens"] == count_tokens_approximately([HumanMessage("where?")])


def test_replay_gives_the_script_the_questions_and_one_tool_per_name() -> None:
    recorded = replay(RECORDED)
    assert [m.content for m in recorded.questions] == ["Where is order 7?", "Thanks, and order 8?"]
    assert [m.usage_metadata for m in recorded.script] == [
        _usage(1234, 5),
        _usage(2000, 7),
        None,
        _usage(2500, 6),
    ]
    assert [t.name for t in recorded.tools] == ["order", "track"]
    order, track = recorded.tools
    call = {"name": "order", "args": {"id": 8}, "id": "c3", "type": "tool_call"}
    result = order.invoke(call)
    assert (result.content, result.tool_call_id, result.status) == (
        '{"status": "packed"}',
        "c3",
        "success",
    )
    failed = track.invoke({"name": "track", "args": {"id": 7}, "id": "c2", "type": "tool_call"})
    assert (failed.content, failed.status) == ("tracking is down", "error")


def test_an_unknown_call_id_is_a_clear_error() -> None:
    order, track = replay(RECORDED).tools
    with pytest.raises(UnknownCallError, match="call id 'c9'") as raised:
        order.invoke({"name": "order", "args": {}, "id": "c9", "type": "tool_call"})
    assert (raised.value.tool, raised.value.call_id) == ("order", "c9")
    # the right id under the wrong name is not the recorded result either
    with pytest.raises(UnknownCallError, match="'track' was called with call id 'c1'"):
        track.invoke({"name": "track", "args": {}, "id": "c1", "type": "tool_call"})


def test_content_and_artifact_only_when_asked() -> None:
    call = {"name": "order", "args": {"id": 7}, "id": "c1", "type": "tool_call"}
    plain = replay(RECORDED).tools[0].invoke(call)
    assert plain.artifact is None
    with_artifact = replay(RECORDED, content_and_artifact=True).tools[0].invoke(call)
    assert with_artifact.content == '{"status": "shipped"}'
    assert with_artifact.artifact == {"carrier": "ups"}


def test_replay_refuses_what_is_not_a_list_of_messages() -> None:
    with pytest.raises(TypeError, match="list of LangChain messages"):
        replay("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message 1 is a dict"):
        replay([HumanMessage("q"), {"role": "user"}])  # type: ignore[list-item]


def test_a_recording_replays_through_create_agent_as_it_happened() -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    recorded = replay(RECORDED)
    model = ScriptedChatModel(recorded.script)
    agent = create_agent(model, list(recorded.tools), checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    for question in recorded.questions:
        agent.invoke({"messages": [question]}, config)
    model.assert_complete()
    messages = agent.get_state(config).values["messages"]
    replayed = [(m.type, m.content) for m in messages]
    assert replayed == [(m.type, m.content) for m in RECORDED if m.type != "system"]
    assert [m.usage_metadata for m in messages if isinstance(m, AIMessage)][:2] == [
        _usage(1234, 5),
        _usage(2000, 7),
    ]
    statuses = [m.status for m in messages if isinstance(m, ToolMessage)]
    assert statuses == ["success", "error", "success"]
