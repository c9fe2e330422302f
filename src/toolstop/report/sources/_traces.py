"""Traces into conversations: bounded grouping of records by trace, and the model calls merged.

A trace export (LangSmith runs, OpenTelemetry spans) records each model call with the whole
history it was given and the answer it gave, and each tool execution on its own. Its records
arrive in export order, not trace by trace, so they are grouped with a bound: at most
`max_open` traces are held open; when one more starts, the trace seen least recently is
closed and made into a conversation. A record of a trace that was already closed is counted as
a problem ("raise max_open, or sort the export by trace"); a file sorted by trace needs only
one open trace. Memory is bounded by `max_open` traces (and a bounded memory of closed ids).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop.report.sources._base import (
    BAD_INPUT,
    Conversation,
    ReadProblems,
    Unreadable,
    conversation,
)

__all__ = [
    "MAX_OPEN_TRACES",
    "ModelCall",
    "TraceParts",
    "conversations",
    "decoded",
    "group_by_trace",
    "merge",
]

MAX_OPEN_TRACES = 1000
"""Traces held open at once while grouping an export by trace."""

_CLOSED_MEMORY = 100_000

T = TypeVar("T")


@dataclass
class _Open(Generic[T]):
    first_line: int
    records: list[tuple[int, T]] = field(default_factory=list)


def group_by_trace(
    records: Iterable[tuple[int, T]],
    trace_of: Callable[[T], str | None],
    problems: ReadProblems,
    *,
    max_open: int = MAX_OPEN_TRACES,
) -> Iterator[tuple[str, int, list[tuple[int, T]]]]:
    """(trace id, first line, records) per trace, with at most `max_open` traces held open.

    A record without a trace id, or of a trace already closed, is skipped; its line is
    counted once, however many such records it holds.
    """
    open_traces: OrderedDict[str, _Open[T]] = OrderedDict()
    closed: OrderedDict[str, None] = OrderedDict()
    counted = 0  # the last line counted as a problem: a line of several records counts once
    for line, record in records:
        trace = trace_of(record)
        problem = None
        if trace is None:
            problem = "a record without a trace id"
        elif trace in closed:
            problem = (
                f"a record of trace {trace[:64]!r} after the trace was closed to keep at most "
                f"{max_open:,} open (sort the export by trace, or raise max_open)"
            )
        if problem is not None or trace is None:
            if line != counted:
                problems.line_problem(line, problem or "")
                counted = line
            continue
        found = open_traces.get(trace)
        if found is None:
            if len(open_traces) >= max_open:
                oldest, group = open_traces.popitem(last=False)
                closed[oldest] = None
                if len(closed) > _CLOSED_MEMORY:
                    closed.popitem(last=False)
                yield oldest, group.first_line, group.records
            found = open_traces[trace] = _Open(first_line=line)
        else:
            open_traces.move_to_end(trace)
        found.records.append((line, record))
    for trace, group in open_traces.items():
        yield trace, group.first_line, group.records


@dataclass(frozen=True)
class ModelCall:
    """One recorded model call: the history it was given and the answer (with its usage)."""

    inputs: Sequence[BaseMessage]
    output: AIMessage | None


def _types(messages: Sequence[BaseMessage]) -> list[str]:
    return [m.type for m in messages]


def _answered(messages: Sequence[BaseMessage]) -> set[str]:
    return {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}


def merge(calls: Sequence[ModelCall], results: dict[str, ToolMessage]) -> list[BaseMessage]:
    """One conversation from a trace's model calls (in order) and its tool results by call id.

    Each call's history is taken as the conversation so far plus what is new: when it starts
    with the messages gathered so far (by kind), the rest is new; otherwise (a history that
    was cut, summarized or restarted) what follows its last assistant message is new, less
    tool results already there. Then the answer. Tool calls the histories never answered get
    the result recorded by the tool's own run or span, after the other answers of their turn.
    """
    messages: list[BaseMessage] = []
    for call in calls:
        inputs = list(call.inputs)
        if len(inputs) >= len(messages) and _types(inputs[: len(messages)]) == _types(messages):
            messages.extend(inputs[len(messages) :])
        elif inputs:
            last_ai = max((i for i, m in enumerate(inputs) if isinstance(m, AIMessage)), default=-1)
            answered = _answered(messages)
            messages.extend(
                m
                for m in inputs[last_ai + 1 :]
                if not (isinstance(m, ToolMessage) and m.tool_call_id in answered)
            )
        if call.output is not None:
            messages.append(call.output)
    return _fill_results(messages, results)


def _fill_results(
    messages: list[BaseMessage], results: dict[str, ToolMessage]
) -> list[BaseMessage]:
    answered = _answered(messages)
    if not results or answered.issuperset(results):
        return messages
    filled: list[BaseMessage] = []
    missing: list[ToolMessage] = []
    for message in messages:
        if missing and not isinstance(message, ToolMessage):
            filled.extend(missing)
            missing = []
        filled.append(message)
        if isinstance(message, AIMessage):
            missing = [
                results[c["id"]]
                for c in message.tool_calls
                if c["id"] not in answered and c["id"] in results
            ]
            answered.update(m.tool_call_id for m in missing)
    filled.extend(missing)
    return filled


def decoded(value: Any) -> Any:
    """A str that holds a JSON object, array or string, decoded; anything else as it is.

    Exports keep structured fields as JSON text (Langfuse's `input`, a Parquet column); a plain
    text, even one that reads as a number, stays text."""
    if not isinstance(value, str) or value[:1] not in ("{", "[", '"'):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def first_str(*values: Any) -> str | None:
    """The first value that is a non-empty str."""
    return next((v for v in values if isinstance(v, str) and v), None)


@dataclass
class TraceParts:
    """What one trace's records give, in start order: model calls, tool results, its thread."""

    calls: list[ModelCall] = field(default_factory=list)
    results: dict[str, ToolMessage] = field(default_factory=dict)
    """The first result recorded per tool call id."""
    thread: str | None = None
    """The first thread (conversation) id a record names."""

    def add_result(self, result: ToolMessage | None) -> None:
        """Keep a tool's recorded result, unless one was kept for its call id already."""
        if result is not None:
            self.results.setdefault(result.tool_call_id, result)

    def conversation(self, trace: str, first_line: int, *, missing: str) -> Conversation | None:
        """The trace's conversation; `None` without a model call.

        Raises:
            Unreadable: the model calls give no messages (`missing` says what was looked for).
        """
        if not self.calls:
            return None
        messages = merge(self.calls, self.results)
        if not messages:
            msg = f"trace {trace[:64]!r} has no {missing}"
            raise Unreadable(msg)
        return conversation(trace, messages, line=first_line, thread=self.thread)


def conversations(
    groups: Iterable[tuple[str, int, list[tuple[int, T]]]],
    build: Callable[[str, int, list[tuple[int, T]]], Conversation | None],
    problems: ReadProblems,
) -> Iterator[Conversation]:
    """The conversation `build` makes of each trace group, skipping what it cannot make.

    A trace `build` cannot read is counted as a problem, one without a model call as ignored.
    """
    for trace, first_line, grouped in groups:
        try:
            found = build(trace, first_line, grouped)
        except BAD_INPUT as error:
            problems.conversation_problem(first_line, str(error))
            continue
        if found is None:
            problems.ignored_traces += 1
        else:
            yield found
