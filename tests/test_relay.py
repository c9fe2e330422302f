"""`toolstop._relay`: what later model calls are sent of a relay, read from hostile threads."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from toolstop import Rule
from toolstop._lifecycle import relay_message
from toolstop._relay import holds_relay, model_text, to_model


def test_a_relay_that_showed_an_answer_is_sent_with_the_content() -> None:
    relay = relay_message("For you.", Rule.COMPLETED, name="agent", for_model="raw")
    thread = [HumanMessage("q"), relay, HumanMessage("thanks")]
    sent = to_model(thread)
    assert [m.content for m in sent] == ["q", "raw", "thanks"]
    assert (sent[1].name, sent[1].id, sent[1].response_metadata) == (
        "agent",
        relay.id,
        relay.response_metadata,
    )
    assert relay.content == "For you."  # the thread is not changed


def test_a_relay_without_an_answer_keeps_no_copy_and_is_sent_as_it_is() -> None:
    relay = relay_message("raw", Rule.COMPLETED)
    assert relay.response_metadata == {"toolstop": {"relay": True, "rule": "completed"}}
    thread = [HumanMessage("q"), relay]
    sent = to_model(thread)
    assert sent == thread
    assert sent is not thread
    assert all(a is b for a, b in zip(sent, thread, strict=True))


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"toolstop": "relay"},
        {"toolstop": {"relay": "yes", "for_model": "raw"}},  # not a relay's mark
        {"toolstop": {"relay": True, "for_model": 5}},
        {"toolstop": {"relay": True, "for_model": [{"type": "image_url", "image_url": {}}]}},
        {"toolstop": {"relay": True, "for_model": ""}},
        {"toolstop": {"relay": True}},
    ],
)
def test_a_mark_that_is_not_a_relays_text_is_ignored(metadata: dict[str, Any]) -> None:
    message = AIMessage("For you.", response_metadata=metadata)
    assert model_text(metadata) is None
    assert to_model([message])[0] is message


def test_only_ai_messages_are_read() -> None:
    mark = {"toolstop": {"relay": True, "for_model": "raw"}}
    tool = ToolMessage("x", tool_call_id="c", response_metadata=mark)
    assert to_model([tool])[0] is tool
    assert model_text(None) is None
    assert model_text(["toolstop"]) is None


def test_holds_relay_reads_back_to_the_message_seen_last() -> None:
    relay = relay_message("For you.", Rule.COMPLETED, for_model="raw")
    quiet = [HumanMessage("q", id="h1"), AIMessage("a", id="a1"), HumanMessage("q2", id="h2")]
    assert not holds_relay(quiet, None)
    assert holds_relay([*quiet[:1], relay, *quiet[1:]], None)
    # a relay before the message seen last was read then: only what follows it is read now
    assert not holds_relay([relay, *quiet], "h1")
    assert holds_relay([*quiet, relay], "h2")
    assert not holds_relay([*quiet, relay_message("x", Rule.COMPLETED)], "h2")  # no answer kept
    # the message seen last is gone (the history was rewritten): everything is read
    assert holds_relay([relay, *quiet], "gone")


def test_a_relay_another_middleware_puts_in_the_request_is_sent_with_the_content() -> None:
    """Messages a `wrap_model_call` hook outside StopOnArtifact gives the model only (never in
    the state the run looked at) are read for relays too."""
    pytest.importorskip("langchain.agents.middleware")
    from routers import MIDDLEWARE_UNAVAILABLE

    if MIDDLEWARE_UNAVAILABLE is not None:
        pytest.skip(MIDDLEWARE_UNAVAILABLE)
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware

    from toolstop import StopOnArtifact
    from toolstop.testing import ScriptedChatModel

    relay = relay_message("For you.", Rule.COMPLETED, for_model="raw")

    class Memory(AgentMiddleware):  # type: ignore[type-arg]
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request.override(messages=[relay, *request.messages]))

    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, [], middleware=[Memory(), StopOnArtifact()])
    agent.invoke({"messages": [HumanMessage("q")]})
    model.assert_complete()
    assert [m.content for m in model.calls[0].messages] == ["raw", "q"]
