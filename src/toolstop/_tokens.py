"""The token estimate of a model call that recorded no usage, counted once per message.

Built on langchain-core's `count_tokens_approximately`, which counts each message on its own
(its characters over four, rounded up, plus three) and sums them: so a model call's input is
the running sum of its messages' counts, and a replay that adds one message at a time counts
each message once (`RunningCount`), in time linear in the conversation's length. The tools
offered to the model are counted as `count_tokens_approximately(..., tools=...)` counts tool
schemas given as dicts: their JSON's characters over four, rounded up, once per call.

Deliberately not handled: the counter's `use_usage_metadata_scaling` (a replay estimates only
where nothing was recorded, so there is nothing to scale by).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.utils import count_tokens_approximately

from toolstop._relay import to_model

__all__ = [
    "RunningCount",
    "approximate_usage",
    "countable",
    "malformed",
    "message_tokens",
    "tools_tokens",
]

_EMPTY_TEXT = {"type": "text", "text": ""}


def malformed(block: Any) -> bool:
    """Whether `block` is a content block no provider sends.

    That is a `type` that is not a string, or a text block whose `text` is not a string (a
    text block without `text` is read as empty)."""
    if not isinstance(block, dict):
        return False
    kind = block.get("type", "")
    return not isinstance(kind, str) or (
        kind == "text" and not isinstance(block.get("text", ""), str)
    )


def countable(message: BaseMessage) -> BaseMessage:
    """`message` with each malformed content block (`malformed`) as an empty text block.

    The counter would raise on them: the message may be a tool's result or a recorded thread."""
    content = message.content
    if not isinstance(content, list) or not any(malformed(b) for b in content):
        return message
    blocks = [dict(_EMPTY_TEXT) if malformed(b) else b for b in content]
    return message.model_copy(update={"content": blocks})


def message_tokens(message: BaseMessage) -> int:
    """The approximate tokens of one message, as the counter counts it in a list."""
    return count_tokens_approximately([countable(message)])


def tools_tokens(tools: Sequence[Mapping[str, Any]]) -> int:
    """The approximate tokens of the tool definitions a model call was sent (0 for none).

    Each definition counts as its JSON (`json.dumps`); one that cannot be written as JSON
    (nested too deeply, a value of no JSON type) counts as the JSON of its text."""
    chars = 0
    for tool in tools:
        try:
            chars += len(json.dumps(tool))
        except (TypeError, ValueError, RecursionError):
            chars += len(json.dumps(str(tool)[:1_000_000]))
    return math.ceil(chars / 4)


def approximate_usage(
    messages: Sequence[BaseMessage],
    response: BaseMessage,
    *,
    tools: Sequence[Mapping[str, Any]] = (),
) -> UsageMetadata:
    """`usage_metadata` for a simulated answer, from langchain-core's approximate counter.

    The input is counted from `messages` (and `tools`), the output from `response`. A malformed
    content block is counted as empty text (see `countable`)."""
    input_tokens = sum(message_tokens(m) for m in messages) + tools_tokens(tools)
    output_tokens = message_tokens(response)
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


class RunningCount:
    """The input tokens of each model call of a replay, each message counted once.

    A replay's history grows by appending: `usage` counts only the messages added since its
    last call (as the model is sent them, `toolstop._relay.to_model`), so the work over a
    conversation is linear in its length. A history that is not the last one extended (its
    last counted message replaced) is counted again from its start.
    """

    def __init__(self, tools: Sequence[Mapping[str, Any]] = ()) -> None:
        """A count for a conversation whose model calls were each sent `tools`."""
        self._tools = tools_tokens(tools)
        self._counted = 0
        self._last: BaseMessage | None = None
        self._sum = 0

    def input_tokens(self, messages: Sequence[BaseMessage]) -> int:
        """The input tokens of a model call sent `messages` (and the tools)."""
        counted = self._counted
        if counted > len(messages) or (counted and messages[counted - 1] is not self._last):
            counted, self._sum = 0, 0
        for message in to_model(messages[counted:]):
            self._sum += message_tokens(message)
        self._counted = len(messages)
        self._last = messages[-1] if messages else None
        return self._sum + self._tools

    def usage(self, messages: Sequence[BaseMessage], response: BaseMessage) -> UsageMetadata:
        """`usage_metadata` for `response`, the answer of a model call sent `messages`."""
        input_tokens = self.input_tokens(messages)
        output_tokens = message_tokens(response)
        return UsageMetadata(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )
