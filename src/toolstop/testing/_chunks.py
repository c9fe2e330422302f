"""How the scripted model streams an answer: the chunks a provider would send, in order.

Private helpers of `toolstop.testing.scripted`; the rules are documented on `ScriptedChatModel`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk

__all__ = ["HAS_CHUNK_POSITION", "message_chunks", "truncate_at_stop"]

HAS_CHUNK_POSITION = "chunk_position" in AIMessageChunk.model_fields
"""langchain-core >= 1.0 marks the last chunk of a stream (`chunk_position="last"`); 0.3 has no
such field."""

_WORDS = re.compile(r"\S+\s*|\s+")
_ARGS_PIECE = 16  # characters of tool-call arguments per chunk


def truncate_at_stop(message: AIMessage, stop: list[str] | None) -> AIMessage:
    """`message` with its text cut before the first stop sequence, as a provider cuts it.

    Only a plain-string content is cut; tool calls and list content are left alone.
    """
    if not stop or not isinstance(message.content, str):
        return message
    positions = [message.content.find(s) for s in stop if s]
    positions = [p for p in positions if p >= 0]
    if not positions:
        return message
    return message.model_copy(update={"content": message.content[: min(positions)]})


def _text_pieces(content: str | list[Any]) -> list[str | list[Any]]:
    if isinstance(content, str):
        return list(_WORDS.findall(content))
    return [[block] for block in content]


def _args_pieces(args: str) -> list[str]:
    return [args[i : i + _ARGS_PIECE] for i in range(0, len(args), _ARGS_PIECE)] or [""]


def message_chunks(message: AIMessage) -> list[AIMessageChunk]:
    """Split `message` into stream chunks whose sum is `message` again.

    Text goes out a word at a time (list content a block at a time), then each tool call as
    chunks of its JSON arguments (the first one carrying the call's name and id, all carrying its
    index), then invalid tool calls; `additional_kwargs` travel on the first chunk,
    `response_metadata` and `usage_metadata` on the last, which is marked
    `chunk_position="last"` where langchain-core knows the field. Every chunk carries the
    message's id (None lets langchain-core give all of them the run's id).
    """
    empty: str | list[Any] = "" if isinstance(message.content, str) else []
    specs: list[dict[str, Any]] = [{"content": piece} for piece in _text_pieces(message.content)]
    raw_calls: list[tuple[str | None, str | None, str | None]] = [
        (c["name"], json.dumps(c["args"], ensure_ascii=False), c.get("id"))
        for c in message.tool_calls
    ]
    raw_calls += [(c.get("name"), c.get("args"), c.get("id")) for c in message.invalid_tool_calls]
    for index, (name, args, call_id) in enumerate(raw_calls):
        for number, piece in enumerate(_args_pieces(args or "")):
            first = number == 0
            call = tool_call_chunk(
                name=name if first else None,
                args=piece,
                id=call_id if first else None,
                index=index,
            )
            specs.append({"content": empty, "tool_call_chunks": [call]})
    if not specs:
        specs.append({"content": empty})
    specs[0]["additional_kwargs"] = dict(message.additional_kwargs)
    specs[-1]["response_metadata"] = dict(message.response_metadata)
    specs[-1]["usage_metadata"] = message.usage_metadata
    if HAS_CHUNK_POSITION:
        specs[-1]["chunk_position"] = "last"
    return [AIMessageChunk(id=message.id, **spec) for spec in specs]
