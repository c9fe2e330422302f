"""What later model calls see of a relay: never a tool's `answer`, always the tools' content.

A hard stop ends the run on a relay: an AIMessage that shows the user each result's `answer`
when its artifact has one. The relay stays in the thread, so every later model call would send
the `answer` again. The routers call `to_model` on the messages they send instead: a relay that
showed an `answer` is sent with the text the model would have been shown without one (kept in
the relay's `response_metadata`, which no provider is sent). The thread itself is unchanged.

Most threads hold no such relay, so the routers do not scan the history on every model call:
the run remembers whether the thread holds one and the last message it has looked at
(`holds_relay`), and a model call looks only at the messages after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop.decision import is_answer

__all__ = ["holds_relay", "model_text", "to_model"]

_M = TypeVar("_M", bound=BaseMessage)


def model_text(metadata: Any) -> Any:
    """The text a relay's mark keeps for the model, or `None` (not a relay, or none kept).

    The mark is read as data from a checkpoint, which may be hostile: only a valid answer shape
    (a string, or text blocks) is taken.
    """
    mark = metadata.get("toolstop") if isinstance(metadata, dict) else None
    if not isinstance(mark, dict) or mark.get("relay") is not True:
        return None
    text = mark.get("for_model")
    return text if text is not None and is_answer(text) else None


def to_model(messages: Sequence[_M]) -> list[_M]:
    """`messages` as a model call is sent them, with the tools' content in each `answer`'s place.

    A relay that showed an `answer` is copied with its kept `for_model` text as content; every
    other message is passed as it is (a new list of the same messages when nothing changed).
    """
    out: list[_M] | None = None
    for index, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        text = model_text(message.response_metadata)
        if text is None:
            continue
        if out is None:
            out = list(messages)
        out[index] = message.model_copy(update={"content": text})
    return list(messages) if out is None else out


def holds_relay(messages: Sequence[BaseMessage], seen: str | None) -> bool:
    """Whether the messages after the one whose id is `seen` hold a relay that showed an `answer`.

    Read from the end back to that message: O(messages added since), usually a tool turn. When
    `seen` is `None` or no longer in the messages (the history was rewritten), all are read.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if seen is not None and message.id == seen:
            return False
        kind = type(message)
        if kind is not AIMessage and (kind is ToolMessage or not isinstance(message, AIMessage)):
            continue  # a tool's result (the usual message here) is no relay
        metadata = message.response_metadata
        if type(metadata) is dict and "toolstop" not in metadata:
            continue  # no mark at all (the model's own answers): nothing to read
        if model_text(metadata) is not None:
            return True
    return False
