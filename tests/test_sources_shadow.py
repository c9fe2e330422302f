"""`shadow_records`: the records of a recorded conversation equal a real shadow-mode replay's.

The reference is the conversation replayed through an unchanged `create_agent` with
`StopOnArtifact(StopPolicy(mode="never"))`, the scripted model and `toolstop.testing.replay`'s
stand-ins: the records it writes are compared with `shadow_records`' field for field."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:  # these compare with a real create_agent + StopOnArtifact
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from toolstop import Outcome, StopOnArtifact, StopPolicy, signal
from toolstop.record import StopRecord
from toolstop.report.sources import FORMATS, read_conversations
from toolstop.report.sources._base import Unreadable
from toolstop.report.sources.shadow import runs_of, shadow_records
from toolstop.testing import ScriptedChatModel, replay

pytest.importorskip("langchain.agents")

ROOT = Path(__file__).parent / "fixtures"
TRAFFIC = ROOT / "traffic" / "tau2_student_domains" / "conversations.jsonl"


def replayed(
    messages: Sequence[BaseMessage], *, artifacts: bool = False, policy: StopPolicy | None = None
) -> list[StopRecord]:
    """The records a real shadow-mode replay writes, one per user message."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    recording = replay(messages, content_and_artifact=artifacts)
    model = ScriptedChatModel(recording.script)
    agent = create_agent(
        model,
        list(recording.tools),
        middleware=[StopOnArtifact(policy or StopPolicy(mode="never"))],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    records = [agent.invoke({"messages": [q]}, config)["stop_record"] for q in recording.questions]
    model.assert_complete()
    return records


@pytest.mark.parametrize("log_format", FORMATS)
def test_each_format_gives_the_records_of_a_real_replay(log_format: str) -> None:
    for conversation in read_conversations(ROOT / "logs" / f"{log_format}.jsonl"):
        assert shadow_records(conversation.messages) == replayed(conversation.messages)


def _traffic(every_domain: bool) -> list[Any]:
    conversations = list(read_conversations(TRAFFIC))
    if not every_domain:
        return conversations
    # one of each domain: reads, writes, errors, several runs a thread
    lines = TRAFFIC.read_text().splitlines()
    domains = {json.loads(line)["domain"]: n for n, line in enumerate(lines, 1)}
    return [c for c in conversations if c.line in set(domains.values())]


def test_real_traffic_gives_the_records_of_a_real_replay() -> None:
    for conversation in _traffic(every_domain=True):
        assert shadow_records(conversation.messages) == replayed(conversation.messages)


@pytest.mark.slow
def test_the_whole_traffic_set_gives_the_records_of_a_real_replay() -> None:
    for conversation in _traffic(every_domain=False):
        assert shadow_records(conversation.messages) == replayed(conversation.messages)


def test_the_bench_conversation_gives_the_records_of_a_real_replay(tmp_path: Path) -> None:
    from sources_bench import write

    write(tmp_path / "bench.jsonl", 2)
    for conversation in read_conversations(tmp_path / "bench.jsonl"):
        assert shadow_records(conversation.messages) == replayed(conversation.messages)


def _asks(call_id: str, name: str = "pay") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": {}, "id": call_id}])


SIGNALLED = [
    HumanMessage("Pay order 1"),
    _asks("c1"),
    ToolMessage("Paid.", tool_call_id="c1", artifact=signal(Outcome.COMPLETED)),
    AIMessage("Your order is paid."),
    HumanMessage("And order 2?"),
    _asks("c2"),
    ToolMessage("Declined.", tool_call_id="c2", status="error"),
    _asks("c3"),
    ToolMessage("Paid.", tool_call_id="c3", artifact=signal(Outcome.COMPLETED)),
    AIMessage("Order 2 is paid too."),
]


def test_recorded_signals_are_read_only_when_asked() -> None:
    plain = shadow_records(SIGNALLED)
    assert plain == replayed(SIGNALLED)
    assert [r["would_stop"] for r in plain] == [None, None]
    signalled = shadow_records(SIGNALLED, artifacts=True)
    assert signalled == replayed(SIGNALLED, artifacts=True)
    assert [r["would_stop"] for r in signalled] == ["completed", "completed"]
    assert [r["run"] for r in signalled] == [1, 2]
    assert signalled[1]["would_save"]["model_calls"] == 1


def test_shapes_a_replay_cannot_reproduce_are_refused() -> None:
    with pytest.raises(Unreadable, match="before the first user message"):
        runs_of([AIMessage("Hello!"), HumanMessage("hi"), AIMessage("hi")])
    with pytest.raises(Unreadable, match="run 1 does not end with an answer"):
        shadow_records([HumanMessage("q"), _asks("c1"), ToolMessage("r", tool_call_id="c1")])
    with pytest.raises(Unreadable, match="one to one"):
        shadow_records([HumanMessage("q"), _asks("c1"), AIMessage("done")])
