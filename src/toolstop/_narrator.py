"""A cheaper model that narrates a stop: `StopPolicy(mode="polish", narrator=model)`.

In `polish` mode a stop ends with one model call that words the tool's result for the user. With
a narrator that call goes to a second model, with the user's request and this run's tool results
only (no tools, no earlier conversation, no system prompt of the agent), so a cheap model can do
it. Its calls and tokens are recorded apart from the agent's model (`narrator_calls`,
`narrator_input_tokens`, `narrator_output_tokens`), so a report can price both models.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from toolstop.decision import content_text
from toolstop.record import StopRecord

__all__ = ["NARRATOR_PROMPT", "count_narrator_call", "narration"]

NARRATOR_PROMPT = (
    "You answer a user's request from the results of the tools that were run for it. Use only "
    "facts found in those results; do not invent any. Answer in the language of the request, "
    "briefly, as the final answer to the user. Do not mention tools."
)
"""The narrator's system message (the only instruction it gets)."""

RESULT_CHARS = 20_000
"""Characters of one tool result the narrator gets at most."""


def narration(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The narrator's request: the user's last message and the run's tool results, as text.

    The run starts after the last human message. Each result is given as `[tool] text` (its
    content, never an `answer`), failures included, each cut at `RESULT_CHARS` characters."""
    start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    request = content_text(messages[start].content) if start >= 0 else ""
    results = [
        f"[{m.name or 'tool'}{' (failed)' if m.status == 'error' else ''}] "
        + content_text(m.content)[:RESULT_CHARS]
        for m in messages[start + 1 :]
        if isinstance(m, ToolMessage)
    ]
    body = f"The user asked:\n{request}\n\nThe tools returned:\n" + "\n\n".join(results)
    return [SystemMessage(NARRATOR_PROMPT), HumanMessage(body)]


def answer_of(response: Any) -> AIMessage:
    """The narrator's response as a plain answer (its text; any tool call dropped)."""
    if isinstance(response, AIMessage):
        return AIMessage(
            content=response.content,
            usage_metadata=response.usage_metadata,
            response_metadata=response.response_metadata,
        )
    return AIMessage(content=content_text(getattr(response, "content", "") or ""))


def count_narrator_call(record: StopRecord, answer: AIMessage) -> StopRecord:
    """`record` with one narrator call and its `usage_metadata` tokens added (apart from the
    agent's model calls)."""
    usage = answer.usage_metadata
    updated = record.copy()
    updated["narrator_calls"] = record.get("narrator_calls", 0) + 1
    updated["narrator_input_tokens"] = record.get("narrator_input_tokens", 0) + (
        usage["input_tokens"] if usage else 0
    )
    updated["narrator_output_tokens"] = record.get("narrator_output_tokens", 0) + (
        usage["output_tokens"] if usage else 0
    )
    return updated
