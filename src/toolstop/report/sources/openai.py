"""OpenAI chat logs: JSONL, one conversation a line, `{"messages": [...]}` or a bare list.

Or one JSON document over many lines: an array of conversations, `{"conversations": [...]}`,
or one conversation (see `_document`).

Each message is a chat-completions message: `role` (`system`, `developer`, `user`,
`assistant`, `tool`), `content` (a str, null, or a list of parts whose `text` parts are kept),
`tool_calls` on assistant messages (`{"id", "type": "function", "function": {"name",
"arguments"}}`, the arguments a JSON string) and `tool_call_id` on tool messages. An assistant
message's `usage` (`prompt_tokens` / `completion_tokens`, as the response that produced it
reported) becomes its `usage_metadata`; a `usage` beside the line's `messages` is the usage of
its one assistant message without usage of its own (a logged request and its response). A
line's `tools` (the tool definitions the model was offered, as a chat-completions request sends
them) are counted in the token estimate of each model call without usage.

The legacy function calling is read too: an assistant message's `function_call` (`{"name",
"arguments"}`) is a tool call with the id `message N-function_call`, and a `function` message
(`{"role": "function", "name", "content"}`) answers the run's last unanswered call of that name.

Deliberately not handled: images and audio (non-text parts are dropped), and a line's `usage`
when several of its assistant messages have none (it is their total, not each one's: they are
estimated). Arguments that are not a JSON object become an `invalid_tool_calls` entry, as
LangChain records them.
"""

from __future__ import annotations

import json
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

from toolstop.report.sources._base import (
    BAD_INPUT,
    Conversation,
    ReadProblems,
    Unreadable,
    conversation,
    usage,
)
from toolstop.report.sources._document import json_values

__all__ = ["is_openai", "message", "messages", "read_openai", "text", "tool_calls"]


def _conversation_list(value: Any) -> Any:
    if isinstance(value, Mapping):
        return value.get("messages")
    return value


def is_openai(value: Any) -> bool:
    """Whether a decoded line looks like an OpenAI chat conversation."""
    found = _conversation_list(value)
    return (
        isinstance(found, list)
        and bool(found)
        and all(isinstance(m, Mapping) and isinstance(m.get("role"), str) for m in found[:5])
    )


def text(content: Any, where: str) -> str:
    """A message's text: a str as it is, the `text` of a list's text parts joined, null as "".

    Raises:
        Unreadable: content of another kind.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "".join(texts)
    msg = f"{where}: content is a {type(content).__name__}, not text"
    raise Unreadable(msg)


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        msg = f"{where}: a tool call without a name"
        raise Unreadable(msg)
    return value


def tool_calls(raw: Any, where: str) -> tuple[list[ToolCall], list[InvalidToolCall]]:
    """An assistant message's `tool_calls` (OpenAI shape) as LangChain's valid / invalid calls.

    Raises:
        Unreadable: `tool_calls` is not a list of calls with a name.
    """
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        msg = f"{where}: tool_calls is a {type(raw).__name__}, not a list"
        raise Unreadable(msg)
    valid: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for position, call in enumerate(raw):
        if not isinstance(call, Mapping):
            msg = f"{where}: tool call {position} is not an object"
            raise Unreadable(msg)
        function = call.get("function")
        function = function if isinstance(function, Mapping) else call
        name = _name(function.get("name"), where)
        call_id = call.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else f"{where}-call-{position}"
        arguments = function.get("arguments")
        if arguments is None:  # LangChain's and OpenTelemetry's shape: already an object
            arguments = function.get("args", {})
        args: Any = arguments
        if isinstance(arguments, str):
            try:
                args = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):
                args = None
        if isinstance(args, dict):
            valid.append(ToolCall(name=name, args=args, id=call_id, type="tool_call"))
        else:
            shown = arguments if isinstance(arguments, str) else None
            invalid.append(
                InvalidToolCall(
                    name=name,
                    args=shown,
                    id=call_id,
                    error="the arguments are not a JSON object",
                    type="invalid_tool_call",
                )
            )
    return valid, invalid


def message(raw: Any, where: str) -> BaseMessage:
    """One OpenAI chat message as a LangChain message, built from its plain fields.

    Raises:
        Unreadable: not a message toolstop can read (see the module docstring).
    """
    if not isinstance(raw, Mapping):
        msg = f"{where}: not an object"
        raise Unreadable(msg)
    role = raw.get("role")
    content = text(raw.get("content"), where)
    if role in ("system", "developer"):
        return SystemMessage(content=content)
    if role == "user":
        return HumanMessage(content=content)
    if role == "assistant":
        valid, invalid = tool_calls(raw.get("tool_calls"), where)
        if raw.get("function_call") is not None and not valid and not invalid:  # legacy
            legacy = {"id": f"{where}-function_call", "function": raw["function_call"]}
            valid, invalid = tool_calls([legacy], where)
        return AIMessage(
            content=content,
            tool_calls=valid,
            invalid_tool_calls=invalid,
            usage_metadata=usage(raw.get("usage")),
        )
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            msg = f"{where}: a tool message without a tool_call_id"
            raise Unreadable(msg)
        status = "error" if raw.get("status") == "error" else "success"
        return ToolMessage(content=content, tool_call_id=call_id, status=status)
    shown = role if isinstance(role, str) else type(role).__name__
    msg = f"{where}: role {shown[:40]!r} is not system, user, assistant or tool"
    raise Unreadable(msg)


class _Calls:
    """The run's calls so far, for the legacy `function` messages: per name, a stack of the
    calls no result answered yet (the last call on top), each pushed and popped once."""

    def __init__(self) -> None:
        self.answered: set[str] = set()
        self.pending: dict[str, list[str]] = {}

    def add(self, message: BaseMessage) -> None:
        """Take in a message just built: a user message starts a run, a call is pending, a
        result answers its call."""
        if isinstance(message, HumanMessage):  # only the calls of the run so far
            self.pending.clear()
        elif isinstance(message, AIMessage):
            for call in reversed(message.tool_calls):  # a message's first call on top
                self.pending.setdefault(call["name"], []).append(call["id"] or "")
        elif isinstance(message, ToolMessage):
            self.answered.add(message.tool_call_id)

    def result(self, raw: Mapping[str, Any], where: str) -> ToolMessage:
        """A legacy `function` message: the answer to the run's last unanswered call of its
        name."""
        name = _name(raw.get("name"), where)
        stack = self.pending.get(name, [])
        while stack and stack[-1] in self.answered:  # answered since: each popped once
            stack.pop()
        if not stack:
            msg = f"{where}: a function result with no function_call of its name before it"
            raise Unreadable(msg)
        content = text(raw.get("content"), where)
        return ToolMessage(content=content, tool_call_id=stack[-1], name=name)


def messages(raw: Any) -> list[BaseMessage]:
    """A conversation's messages (`{"messages": [...]}` or a bare list) as LangChain messages.

    Linear in the messages: a legacy `function` message finds its call on a stack per name.

    Raises:
        Unreadable: not a list of messages, or a message that cannot be read.
    """
    found = _conversation_list(raw)
    if not isinstance(found, list):
        msg = 'not a conversation ({"messages": [...]} or a list of messages)'
        raise Unreadable(msg)
    built: list[BaseMessage] = []
    calls = _Calls()
    for i, item in enumerate(found):
        where = f"message {i + 1}"
        if isinstance(item, Mapping) and item.get("role") == "function":
            built.append(calls.result(item, where))
        else:
            built.append(message(item, where))
        calls.add(built[-1])
    if isinstance(raw, Mapping) and raw.get("usage") is not None:
        missing = [m for m in built if isinstance(m, AIMessage) and m.usage_metadata is None]
        if len(missing) == 1:
            missing[0].usage_metadata = usage(raw["usage"])
    return built


def read_openai(path: Path, problems: ReadProblems) -> Iterator[Conversation]:
    """The conversations of an OpenAI chat JSONL file, one a line, streamed.

    A line that is not a conversation is counted in `problems` and skipped. The id is the
    line's `id` (or `conversation_id`) when it is a str or an int, else `line-N`.

    Raises:
        OSError: the file cannot be opened.
    """
    for number, value in json_values(path, problems):
        try:
            built = messages(value)
        except BAD_INPUT as error:
            problems.line_problem(number, str(error))
            continue
        tools = value.get("tools") if isinstance(value, Mapping) else None
        yield conversation(_id(value, number), built, line=number, tools=tools)


def _id(value: Any, number: int) -> str:
    if isinstance(value, Mapping):
        for key in ("id", "conversation_id", "thread_id"):
            found = value.get(key)
            if isinstance(found, str | int) and not isinstance(found, bool):
                return str(found)
    return f"line-{number}"
