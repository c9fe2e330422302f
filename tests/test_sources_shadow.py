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

from ended_replay import ended_replay
from log_endings import ENDINGS, FIRST_RUN, LATER, asks
from toolstop import Outcome, StopOnArtifact, StopPolicy, signal
from toolstop.record import StopRecord
from toolstop.report.sources import FORMATS, read_conversations
from toolstop.report.sources._runs import segment
from toolstop.report.sources.shadow import shadow_records
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


SIGNALLED = [
    HumanMessage("Pay order 1"),
    asks("c1"),
    ToolMessage("Paid.", tool_call_id="c1", artifact=signal(Outcome.COMPLETED)),
    AIMessage("Your order is paid."),
    HumanMessage("And order 2?"),
    asks("c2"),
    ToolMessage("Declined.", tool_call_id="c2", status="error"),
    asks("c3"),
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


@pytest.mark.parametrize("name", ENDINGS)
def test_a_log_as_it_ends_gives_the_records_of_a_real_replay(name: str, tmp_path: Path) -> None:
    messages = ENDINGS[name]
    records, _ = ended_replay(messages, tmp_path / "replay.sqlite")
    assert shadow_records(messages) == records


def test_a_run_left_open_is_closed_as_shadow_mode_closes_it() -> None:
    on_call, on_result, then_later = (
        shadow_records(ENDINGS[name])
        for name in (
            "on a hand-off's call",
            "on a hand-off's result",
            "on a call, then a later run",
        )
    )
    # the finished run before it is kept whole
    assert on_call[0] == on_result[0] == shadow_records(FIRST_RUN)[0]
    # left open on the call: its calls are the ones left open; the tool ended the run
    assert (on_call[1]["run"], on_call[1]["rule"]) == (2, "interrupted")
    assert on_call[1]["tools"] == on_call[1]["asked"] == ["transfer_to_human_agents"]
    assert on_call[1]["model_calls"] == 2
    assert on_call[1]["calls_by_tool"] == {"lookup": 1}
    # a stop on the lookup before it would never have asked for the call left open: cut short
    assert on_call[1]["after_first"]["lookup"]["skipped"] == ["transfer_to_human_agents"]
    # left open on the result: the turn is folded in, nothing after it to save
    assert (on_result[1]["rule"], on_result[1]["tools"]) == ("interrupted", [])
    assert on_result[1]["calls_by_tool"] == {"lookup": 1, "transfer_to_human_agents": 1}
    assert on_result[1]["after_first"]["transfer_to_human_agents"]["model_calls"] == 0
    # a later run is numbered after it
    assert [r["run"] for r in then_later] == [1, 2, 3]


def test_what_cannot_be_replayed_is_left_out_and_counted() -> None:
    assert segment([AIMessage("Hello!"), HumanMessage("hi"), AIMessage("hi")]).runs == [
        [HumanMessage("hi"), AIMessage("hi")]
    ]
    lead = segment([asks("c0"), ToolMessage("r", tool_call_id="c0"), *FIRST_RUN])
    assert (len(lead.runs), lead.left_out, lead.dropped) == (1, 2, 0)
    assert lead.problem == "2 tool message(s) before the first user message left out"
    # a call left unanswered before the model is called again: run 2 and after are dropped
    broken = [*FIRST_RUN, HumanMessage("q"), asks("c9"), AIMessage("done"), *LATER]
    found = segment(broken)
    assert (len(found.runs), found.dropped, found.unanswered) == (1, 2, 0)
    assert found.problem == "run 2: a tool call has no result before the model is called again"
    assert shadow_records(broken) == shadow_records(FIRST_RUN)
    orphan = segment([*FIRST_RUN, HumanMessage("q"), ToolMessage("r", tool_call_id="zz")])
    assert (len(orphan.runs), orphan.dropped) == (1, 1)
    assert orphan.problem == "run 2: a tool result answers no tool call of the turn before it"
    unanswered = segment([*FIRST_RUN, HumanMessage("###STOP###")])
    assert (len(unanswered.runs), unanswered.unanswered, unanswered.problem) == (1, 1, None)
