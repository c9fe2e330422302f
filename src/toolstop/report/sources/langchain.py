"""LangChain message dicts: JSONL, one conversation a line, as `messages_to_dict` writes them.

Or one JSON document over many lines (see `_document`). A line is a list of `{"type": "human" |
"ai" | "tool" | "system", "data": {...}}` (or `{"messages": [...]}` around it). The messages are
decoded by hand from the `data` fields (`content`, `tool_calls`, `usage_metadata`,
`tool_call_id`, `status`, `artifact`): nothing in the log picks a class to build, so
`messages_from_dict` (whose `type` chooses among langchain-core's message classes) is not
needed. The same decoder reads the serialized form a LangSmith trace holds (`{"lc": 1, "type":
"constructor", "id": [..., "AIMessage"], "kwargs": {...}}`) and a plain `{"role": ...,
"content": ...}` message.

Deliberately not handled: `function` and `chat` messages, and the chunk classes' merging (an
`AIMessageChunk` is read as the whole message it records); such a conversation is skipped and
counted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    InvalidToolCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

from toolstop.report.sources import openai
from toolstop.report.sources._base import (
    BAD_INPUT,
    Conversation,
    ReadProblems,
    Unreadable,
    conversation,
    usage,
)
from toolstop.report.sources._document import json_values

__all__ = ["is_langchain", "lc_message", "read_langchain"]

_KINDS = {
    "human": "human",
    "HumanMessage": "human",
    "HumanMessageChunk": "human",
    "ai": "ai",
    "AIMessage": "ai",
    "AIMessageChunk": "ai",
    "tool": "tool",
    "ToolMessage": "tool",
    "ToolMessageChunk": "tool",
    "system": "system",
    "SystemMessage": "system",
    "SystemMessageChunk": "system",
}


def _fields(raw: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]] | None:
    """(kind, fields) of a serialized message, or None when it is not one."""
    data = raw.get("data")
    if isinstance(data, Mapping) and isinstance(raw.get("type"), str):  # messages_to_dict
        return _KINDS.get(raw["type"]), data
    kwargs = raw.get("kwargs")
    path = raw.get("id")
    if isinstance(kwargs, Mapping) and isinstance(path, list) and path:  # lc serialization
        last = path[-1]
        return (_KINDS.get(last) if isinstance(last, str) else None), kwargs
    if isinstance(raw.get("type"), str) and "content" in raw:  # a flat message dict
        return _KINDS.get(raw["type"]), raw
    return None


def is_langchain(value: Any) -> bool:
    """Whether a decoded line looks like a list of LangChain message dicts."""
    found = value.get("messages") if isinstance(value, Mapping) else value
    return (
        isinstance(found, list)
        and bool(found)
        and all(isinstance(m, Mapping) and _fields(m) is not None for m in found[:5])
    )


def _calls(raw: Any, where: str) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        msg = f"{where}: tool_calls is not a list"
        raise Unreadable(msg)
    calls = []
    for position, call in enumerate(raw):
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            msg = f"{where}: tool call {position} has no name"
            raise Unreadable(msg)
        args = call.get("args")
        if not isinstance(args, dict):
            msg = f"{where}: the arguments of tool call {position} are not an object"
            raise Unreadable(msg)
        call_id = call.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else f"{where}-call-{position}"
        calls.append(ToolCall(name=call["name"], args=args, id=call_id, type="tool_call"))
    return calls


def _invalid(raw: Any) -> list[InvalidToolCall]:
    if not isinstance(raw, list):
        return []
    return [
        InvalidToolCall(
            name=c.get("name") if isinstance(c.get("name"), str) else None,
            args=c.get("args") if isinstance(c.get("args"), str) else None,
            id=c.get("id") if isinstance(c.get("id"), str) else None,
            error=c.get("error") if isinstance(c.get("error"), str) else None,
            type="invalid_tool_call",
        )
        for c in raw
        if isinstance(c, Mapping)
    ]


def lc_message(raw: Any, where: str) -> BaseMessage:
    """One serialized LangChain message (or OpenAI-style message) as a LangChain message.

    Raises:
        Unreadable: not a message toolstop can read.
    """
    if isinstance(raw, Mapping) and "role" in raw and "data" not in raw and "kwargs" not in raw:
        return openai.message(raw, where)
    found = _fields(raw) if isinstance(raw, Mapping) else None
    if found is None or found[0] is None:
        msg = f"{where}: not a human, ai, tool or system message"
        raise Unreadable(msg)
    kind, data = found
    content = openai.text(data.get("content"), where)
    if kind == "system":
        return SystemMessage(content=content)
    if kind == "human":
        return HumanMessage(content=content)
    if kind == "ai":
        calls = _calls(data.get("tool_calls"), where)
        if not calls and data.get("additional_kwargs"):  # older traces: OpenAI's shape only
            extra = data["additional_kwargs"]
            if isinstance(extra, Mapping) and extra.get("tool_calls"):
                calls, _ = openai.tool_calls(extra["tool_calls"], where)
        return AIMessage(
            content=content,
            tool_calls=calls,
            invalid_tool_calls=_invalid(data.get("invalid_tool_calls")),
            usage_metadata=usage(data.get("usage_metadata")),
        )
    call_id = data.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        msg = f"{where}: a tool message without a tool_call_id"
        raise Unreadable(msg)
    return ToolMessage(
        content=content,
        tool_call_id=call_id,
        status="error" if data.get("status") == "error" else "success",
        artifact=data.get("artifact"),
    )


def read_langchain(path: Path, problems: ReadProblems) -> Iterator[Conversation]:
    """The conversations of a JSONL file of LangChain message dicts, one a line, streamed.

    Raises:
        OSError: the file cannot be opened.
    """
    for number, value in json_values(path, problems):
        found = value.get("messages") if isinstance(value, Mapping) else value
        try:
            if not isinstance(found, list):
                msg = 'not a list of messages (or {"messages": [...]})'
                raise Unreadable(msg)
            built = [lc_message(m, f"message {i + 1}") for i, m in enumerate(found)]
        except BAD_INPUT as error:
            problems.line_problem(number, str(error))
            continue
        identity = value.get("id") if isinstance(value, Mapping) else None
        yield conversation(
            str(identity) if isinstance(identity, str | int) else f"line-{number}",
            built,
            line=number,
        )
