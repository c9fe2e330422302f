"""`assert_valid_history`: the message-order rules real providers enforce, as an assertion."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

__all__ = ["assert_valid_history", "history_problems"]


def history_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """Everything a provider would reject in `messages`, as sentences (empty: valid).

    Checked: every ToolMessage answers a tool call of the AIMessage before it; every tool call is
    answered before the next non-tool message; the thread ends on an AIMessage without tool calls.
    """
    problems: list[str] = []
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                problems.append(
                    f"message {index}: ToolMessage {message.tool_call_id!r} answers no open call"
                )
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            problems.append(f"message {index}: tool calls {sorted(open_calls)} left unanswered")
            open_calls = set()
        if isinstance(message, AIMessage):
            open_calls = {c.get("id") or "" for c in message.tool_calls}
    if open_calls:
        problems.append(f"end: tool calls {sorted(open_calls)} left unanswered")
    if not messages or not isinstance(messages[-1], AIMessage) or messages[-1].tool_calls:
        problems.append("end: the thread does not end on an AIMessage without tool calls")
    return problems


def assert_valid_history(messages: Sequence[BaseMessage]) -> None:
    """Fail with every problem found when `messages` would be rejected by a provider."""
    problems = history_problems(messages)
    if problems:
        raise AssertionError("invalid message history:\n- " + "\n- ".join(problems))
