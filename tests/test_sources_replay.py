"""A conversation read from any log format replays through `create_agent` in shadow mode.

The reader's output feeds `toolstop.testing.replay` as it is; the records shadow mode writes are
checked against counts taken from the log's shape written out by hand (tests/test_sources.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:  # these compare with a real create_agent + StopOnArtifact
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)

from toolstop import StopOnArtifact, StopPolicy
from toolstop.report.sources import FORMATS, read_conversations
from toolstop.testing import ScriptedChatModel, replay

pytest.importorskip("langchain.agents")

LOGS = Path(__file__).parent / "fixtures" / "logs"

# per conversation of the fixtures: (model calls, calls by tool, recorded input / output tokens)
EXPECTED = [
    (2, {"order": 1}, (120 + 160, 10 + 8)),
    (2, {"refund": 1, "notify": 1}, None),  # no usage recorded: estimated
]


@pytest.mark.parametrize("log_format", FORMATS)
def test_each_format_replays_in_shadow_mode(log_format: str) -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    conversations = list(read_conversations(LOGS / f"{log_format}.jsonl"))
    assert len(conversations) == len(EXPECTED)
    for conversation, (calls, by_tool, tokens) in zip(conversations, EXPECTED, strict=True):
        recording = replay(conversation.messages)
        model = ScriptedChatModel(recording.script)
        agent = create_agent(
            model,
            list(recording.tools),
            middleware=[StopOnArtifact(StopPolicy(mode="never"))],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": conversation.id}}
        [question] = recording.questions
        record = agent.invoke({"messages": [question]}, config)["stop_record"]
        model.assert_complete()
        assert (record["model_calls"], record["calls_by_tool"]) == (calls, by_tool)
        assert record["rule"] == "none"  # plain tools: nothing would have stopped
        if tokens is not None:
            assert (record["input_tokens"], record["output_tokens"]) == tokens
            assert record["ended_after"]["input_tokens"] == 160  # the final answer's own
        else:
            assert record["input_tokens"] > 0  # langchain-core's estimate
