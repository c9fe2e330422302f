"""Traces into conversations: bounded grouping of records by trace, and the model calls merged.

A trace export (LangSmith runs, OpenTelemetry spans) records each model call with the whole
history it was given and the answer it gave, and each tool execution on its own. Its records
arrive in export order, not trace by trace, so they are grouped with a bound: at most
`max_open` traces are held open; when one more starts, the trace seen least recently is
closed and made into a conversation. A record of a trace that was already closed is counted as
a problem ("raise max_open, or sort the export by trace"); a file sorted by trace needs only
one open trace. Memory is bounded by `max_open` traces (and a bounded memory of closed ids).

Each open trace holds only what its conversation needs: a reader passes a `weigh` that gives a
record's kept size, or `None` for a record the conversation does not need (an HTTP span, a
chain run), which only keeps its trace open. A trace whose kept records pass `TraceLimits`
(records or bytes) lets go of them at once and, when it closes, is counted as a conversation
that could not be read, with the reason; it never grows further.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
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
    "TraceLimits",
    "TraceParts",
    "conversations",
    "decoded",
    "group_by_trace",
    "in_time_order",
    "instant",
    "kept_size",
    "merge",
    "text_size",
]

MAX_OPEN_TRACES = 1000
"""Traces held open at once while grouping an export by trace."""

_CLOSED_MEMORY = 100_000

T = TypeVar("T")


@dataclass
class TraceLimits:
    """How much one open trace may hold, and the most any trace held (for tests and tuning).

    Attributes:
        records: The records a trace may keep (model calls and tool results).
        bytes: The text a trace's kept records may hold (their `weigh`).
        peak_records: The most records one open trace held.
        peak_bytes: The most text one open trace held.
    """

    records: int = 10_000
    bytes: int = 64 * 1024 * 1024
    peak_records: int = 0
    peak_bytes: int = 0


@dataclass
class _Open(Generic[T]):
    first_line: int
    records: list[tuple[int, T]] = field(default_factory=list)
    size: int = 0
    over: str | None = None
    """Why the trace let go of its records (over a limit), or None."""


def _hold(group: _Open[T], line: int, record: T, size: int, limits: TraceLimits) -> None:
    """Keep `record` in `group`, unless that passes a limit: then let go of every record."""
    if group.over is not None:
        return
    group.records.append((line, record))
    group.size += size
    if len(group.records) > limits.records:
        group.over = f"more than {limits.records:,} model calls and tool results"
    elif group.size > limits.bytes:
        group.over = f"more than {limits.bytes:,} characters of messages"
    if group.over is not None:
        group.records = []
        group.size = 0
        return
    limits.peak_records = max(limits.peak_records, len(group.records))
    limits.peak_bytes = max(limits.peak_bytes, group.size)


def group_by_trace(
    records: Iterable[tuple[int, T]],
    trace_of: Callable[[T], str | None],
    problems: ReadProblems,
    *,
    max_open: int = MAX_OPEN_TRACES,
    weigh: Callable[[T], int | None] = lambda record: 0,
    limits: TraceLimits | None = None,
) -> Iterator[tuple[str, int, list[tuple[int, T]]]]:
    """(trace id, first line, records) per trace, with at most `max_open` traces held open.

    A record without a trace id, or of a trace already closed, is skipped; its line is
    counted once, however many such records it holds. A record `weigh` gives `None` is not
    kept (it only keeps its trace open); a trace over `limits` is counted as a conversation
    that could not be read, and not yielded.
    """
    limits = limits or TraceLimits()
    open_traces: OrderedDict[str, _Open[T]] = OrderedDict()
    closed: OrderedDict[str, None] = OrderedDict()
    counted = 0  # the last line counted as a problem: a line of several records counts once

    def close(trace: str, group: _Open[T]) -> Iterator[tuple[str, int, list[tuple[int, T]]]]:
        if group.over is None:
            yield trace, group.first_line, group.records
        else:
            reason = f"trace {trace[:64]!r} is too large to read: {group.over}"
            problems.conversation_problem(group.first_line, reason)

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
                yield from close(oldest, group)
            found = open_traces[trace] = _Open(first_line=line)
        else:
            open_traces.move_to_end(trace)
        size = weigh(record)
        if size is not None:
            _hold(found, line, record, size, limits)
    for trace, group in open_traces.items():
        yield from close(trace, group)


_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"\s*(?:([Zz])|([+-])(\d{2}):?(\d{2})?)?"
)


def instant(value: Any) -> int | None:
    """An ISO 8601 date and time as nanoseconds since the epoch; `None` when it is not one.

    Any form an export writes: `T` or a space between date and time, any number of fraction
    digits (or none: Python's `isoformat` drops zero microseconds), `Z` or an offset
    (`+00:00`, `+0000`, `+02`); a time without one is UTC. Digits past the nanosecond are
    cut. Deliberately not handled: week and ordinal dates, a date alone, leap seconds."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    found = _ISO.fullmatch(value.strip())
    if found is None:
        return None
    year, month, day, hour, minute, second, fraction, _, sign, off_h, off_m = found.groups()
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second or 0), tzinfo=UTC
        )
        offset = timedelta(hours=int(off_h or 0), minutes=int(off_m or 0))
    except ValueError:
        return None
    if offset >= timedelta(hours=24):
        return None
    moment -= offset if sign == "+" else -offset
    whole = moment - datetime(1970, 1, 1, tzinfo=UTC)
    nanos = int((fraction or "")[:9].ljust(9, "0"))
    return (whole.days * 86_400 + whole.seconds) * 1_000_000_000 + nanos


def in_time_order(
    records: Sequence[tuple[int, T]],
    start_of: Callable[[T], Any],
    problems: ReadProblems,
    parse: Callable[[Any], int | None] = instant,
) -> list[tuple[int, T]]:
    """One trace's (line, record) pairs by the instant they started, then by line.

    The start is `parse(start_of(record))` (an ISO 8601 time, by default), compared as an
    instant, never as text. When a record's start cannot be read (missing, or not a time),
    the trace keeps the order of the file and is counted (`ReadProblems.unordered`)."""
    keyed = [(parse(start_of(record)), line, record) for line, record in records]
    starts = [start for start, _, _ in keyed]
    if all(start is not None for start in starts):
        return [(line, record) for _, line, record in sorted(keyed, key=lambda k: k[:2])]
    bad, raw = next((line, start_of(r)) for start, line, r in keyed if start is None)
    why = "no start time" if raw is None else "a start time that is not an ISO 8601 time"
    problems.unordered_problem(bad, f"{why}: its trace is read in the order of the file")
    return sorted(records, key=lambda item: item[0])


@dataclass(frozen=True)
class ModelCall:
    """One recorded model call: the history it was given and the answer (with its usage)."""

    inputs: Sequence[BaseMessage]
    output: AIMessage | None


def _types(messages: Sequence[BaseMessage]) -> list[str]:
    return [m.type for m in messages]


def _call_ids(message: AIMessage | None) -> set[str]:
    return {str(c["id"]) for c in message.tool_calls} if message is not None else set()


def _answered(messages: Sequence[BaseMessage]) -> set[str]:
    return {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}


def merge(calls: Sequence[ModelCall], results: dict[str, ToolMessage]) -> list[BaseMessage]:
    """One conversation from a trace's model calls (in order) and its tool results by call id.

    Each call's history is taken as the conversation so far plus what is new: when it starts
    with the messages gathered so far (by kind), the rest is new; otherwise (a history that
    was cut, summarized or restarted) what follows its last assistant message is new, less
    tool results already there. Then the answer. Tool calls the histories never answered get
    the result recorded by the tool's own run or span, after the other answers of their turn.

    Raises:
        Unreadable: a call's answer asks for a tool call id the conversation so far holds
            (an earlier answer, or a later call's history read first): the records are out
            of order or repeated, and a conversation made of them would use the id twice
            where the agent did not.
    """
    messages: list[BaseMessage] = []
    answered: set[str] = set()  # kept as messages are added: linear in the calls
    asked: set[str] = set()  # the tool call ids of the assistant messages so far
    for call in calls:
        seen = len(messages)
        inputs = list(call.inputs)
        new: list[BaseMessage] = []
        if len(inputs) >= len(messages) and _types(inputs[: len(messages)]) == _types(messages):
            new = inputs[len(messages) :]
        elif inputs:
            last_ai = max((i for i, m in enumerate(inputs) if isinstance(m, AIMessage)), default=-1)
            new = [
                m
                for m in inputs[last_ai + 1 :]
                if not (isinstance(m, ToolMessage) and m.tool_call_id in answered)
            ]
        messages.extend(new)
        answered.update(m.tool_call_id for m in new if isinstance(m, ToolMessage))
        for message in messages[seen:]:
            asked.update(_call_ids(message) if isinstance(message, AIMessage) else ())
        again = sorted(asked.intersection(_call_ids(call.output)))
        if again:
            msg = (
                f"a model call asks again for tool call {again[0][:64]!r}, asked before it: "
                "the records are out of order (see their start times) or repeated"
            )
            raise Unreadable(msg)
        if call.output is not None:
            messages.append(call.output)
            asked.update(_call_ids(call.output))
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


def first_seen(seen: OrderedDict[str, None], trace: Any) -> bool:
    """True the first time `trace` is seen (the memory bounded like the closed traces')."""
    if not isinstance(trace, str) or trace in seen:
        return False
    seen[trace] = None
    if len(seen) > _CLOSED_MEMORY:
        seen.popitem(last=False)
    return True


def kept_size(value: Any) -> int:
    """`text_size` of `value`, and 2 for every item that is not a str.

    A number, `{}`, `[]`: holding one costs memory too. Walked without recursion."""
    items, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            continue
        items += 1
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return text_size(value) + 2 * items


def text_size(value: Any) -> int:
    """The characters of every str in `value` (keys included), walked without recursion."""
    size, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return size


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
    tools: Any = None
    """The first list of tool definitions a model call records (see `tool_definitions`)."""

    def add_result(self, result: ToolMessage | None) -> None:
        """Keep a tool's recorded result, unless one was kept for its call id already."""
        if result is not None:
            self.results.setdefault(result.tool_call_id, result)

    def conversation(self, trace: str, first_line: int, *, missing: str) -> Conversation | None:
        """The trace's conversation; `None` without a model call.

        Raises:
            Unreadable: the model calls give no messages (`missing` says what was looked for),
                or are out of order (see `merge`).
        """
        if not self.calls:
            return None
        try:
            messages = merge(self.calls, self.results)
        except Unreadable as error:
            msg = f"trace {trace[:64]!r}: {error}"
            raise Unreadable(msg) from error
        if not messages:
            msg = f"trace {trace[:64]!r} has no {missing}"
            raise Unreadable(msg)
        return conversation(trace, messages, line=first_line, thread=self.thread, tools=self.tools)


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
