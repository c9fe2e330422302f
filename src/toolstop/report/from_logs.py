"""`toolstop report --from`: the advisor on the conversations users already recorded.

A log (OpenAI chat JSONL, LangChain message dicts, a LangSmith run export, OTLP JSON GenAI
spans, a Langfuse export of observations) or the checkpoint database of an agent that never ran
toolstop is read a conversation at a time (`toolstop.report.sources`), each conversation is made
into the stop records shadow mode would have written for it (`shadow_records`), and those
records are folded into the same `Summary` as `--db`'s: candidates, advice, the page and
`--writes` work the same. The example pairs (`--examples`) and the judge's pairs (`--judge`)
come from the recorded messages of the few runs kept for them (at most K per tool), so memory
stays flat in the number of conversations.

The traces of one thread (LangSmith's `thread_id`, OpenTelemetry's `gen_ai.conversation.id`)
are joined, in the order they were read, before their records are made, so a thread's second
question is its second run, as in a checkpointed agent. At most `MAX_OPEN_THREADS` threads are
held open while joining; a thread closed to keep that bound and seen again starts anew.

Conversations end as logs end (`toolstop.report.sources._runs`): a run left open on a tool call
or on tool results (a hand-off, a step limit) is counted as shadow mode counts it once closed
(rule `interrupted`; its tools `ended_on_it`); user messages at the end nobody answered are an
open run (`open_runs`, no model call); a run a replay cannot reproduce is dropped with the runs
after it (counted, with the first reason), never the runs before it.

Deliberately not handled: subgraph namespaces of a checkpoint database (only the top-level
graph's messages are read). A run still in progress at a checkpoint database's latest
checkpoint reads as one that ended there.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop._printable import printable
from toolstop._redact import is_postgres
from toolstop.report.examples import collect_examples, mask_secrets
from toolstop.report.reader import RunEnd, open_database
from toolstop.report.records import cut, out_of_range
from toolstop.report.sources import (
    FORMATS,
    ReadProblems,
    UnknownFormatError,
    check_source,
    detect_format,
    read_conversations,
)
from toolstop.report.sources._base import Conversation, conversation, open_regular
from toolstop.report.sources._runs import segment
from toolstop.report.sources._traces import text_size
from toolstop.report.sources.shadow import replay_records
from toolstop.report.summary import Summary
from toolstop.report.what_if import WhatIf

__all__ = [
    "MAX_OPEN_THREADS",
    "SOURCE_FORMATS",
    "THREAD_LIMITS",
    "FromLogs",
    "checkpoint_conversations",
    "is_checkpoints",
    "join_threads",
    "read_from",
]

SOURCE_FORMATS = (*FORMATS, "checkpoints")
"""What `--format` accepts: the log formats and a LangGraph checkpoint database."""

MAX_OPEN_THREADS = 1000
"""Threads held open at once while joining a trace export's traces by thread."""

THREAD_LIMITS = (100_000, 64 * 1024 * 1024)
"""The messages and the characters the traces of one open thread may hold; a thread over
either is counted as a conversation that could not be read."""

_PRUNE_EVERY = 1000
"""Conversations between two prunes of the runs kept for example pairs."""

_SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass
class FromLogs:
    """What reading recorded conversations found, beside the records folded in the summary.

    Attributes:
        format: The format read (given or detected).
        problems: Lines and conversations that could not be read.
        tokens: Conversations by where their token counts come from (`recorded`,
            `estimated`, `partly`).
        conversations: Conversations whose records were made.
        threads: Threads read with at least one run (a trace without a thread is its own; a
            thread closed to keep `MAX_OPEN_THREADS` open and seen again counts twice).
        open_runs: Conversations that end with user messages no model call answered (an open
            run with no model call: not in the runs).
        rejected: Runs whose record holds a number out of range (absurd recorded usage).
        unreadable_threads: Threads of a checkpoint database that could not be decoded.
    """

    format: str
    problems: ReadProblems = field(default_factory=ReadProblems)
    tokens: Counter[str] = field(default_factory=Counter)
    conversations: int = 0
    threads: int = 0
    open_runs: int = 0
    rejected: int = 0
    unreadable_threads: int = 0
    held: dict[int, tuple[RunEnd, list[BaseMessage]]] = field(default_factory=dict, repr=False)

    def pairs(
        self,
        chosen: Mapping[str, list[Any]],
        cut_short: Mapping[str, list[Any]] | None = None,
        limit: int | None = None,
    ) -> dict[str, list[dict[str, Any]]]:
        """Per tool, the example pairs of the runs `chosen` for it, as `read_examples` gives."""

        def messages_of(end: Any) -> list[BaseMessage] | None:
            held = self.held.get(id(end))
            return held[1] if held is not None else None

        return collect_examples(messages_of, chosen, cut_short, limit)

    def document(self) -> dict[str, Any]:
        """The reading's figures for report.json (`threads` and `open_runs` are set apart)."""
        first = self.problems.first
        return {
            "conversations": self.conversations,
            "tokens": {key: self.tokens[key] for key in ("recorded", "estimated", "partly")},
            "unreadable": {
                "lines": self.problems.skipped_lines,
                "of_lines": self.problems.lines,
                "conversations": self.problems.skipped_conversations,
                "partly_read": self.problems.partly_read,
                "runs": self.problems.dropped_runs,
                "threads": self.unreadable_threads,
                "first": printable(mask_secrets(first)) if first else None,
            },
        }

    def messages(self) -> list[str]:
        """The lines `toolstop report` prints on stderr about the reading."""
        lines = []
        summary = self.problems.summary()
        if summary:
            lines.append(summary)
        if self.unreadable_threads:
            lines.append(
                f"{self.unreadable_threads} thread(s) could not be decoded; their runs are "
                "not counted"
            )
        if self.rejected:
            lines.append(f"{self.rejected} run(s) recorded a token count out of range; not counted")
        recorded, estimated, partly = (self.tokens[k] for k in ("recorded", "estimated", "partly"))
        lines.append(
            f"tokens: recorded in {recorded:,} conversation(s), estimated "
            f"(count_tokens_approximately) in {estimated:,}, partly recorded in {partly:,}"
        )
        if not self.conversations:
            lines.append(_NOTHING_FOUND.get(self.format, _NOTHING_FOUND[""]))
        return lines


_NOTHING_FOUND = {
    "langsmith": "no conversation found: a LangSmith export needs the chat-model runs "
    "(run_type llm, with inputs.messages and outputs.generations) and the tool runs of each "
    "trace, not only the root chain run",
    "otel": "no conversation found: OpenTelemetry needs the GenAI chat spans "
    "(gen_ai.operation.name chat) with their messages as events or gen_ai.*.messages attributes",
    "langfuse": "no conversation found: a Langfuse export needs the GENERATION observations "
    "with their input and output (the export's io fields), and the TOOL observations",
    "checkpoints": "no conversation found: the database holds no thread with messages",
    "": "no conversation found: is --format right for this file? (docs/rollout.md shows each)",
}
"""What `report --from` says when it read lines but found no conversation in them."""


def is_checkpoints(source: str) -> bool:
    """Whether `source` is a checkpoint database: a PostgreSQL DSN or a SQLite file."""
    if is_postgres(source):
        return True
    try:
        with open_regular(source) as stream:
            return stream.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def checkpoint_conversations(db: str, found: FromLogs) -> Iterator[Conversation]:
    """Each thread's messages at its latest checkpoint, decoded by toolstop's safe decoder.

    Raises:
        ToolstopConfigError: the database does not exist, cannot be reached or holds no
            checkpoints (see `open_database`); the database's own failures are raised too.
    """
    with open_database(db) as database:
        for number, (thread_id, namespace) in enumerate(database.threads(), 1):
            if namespace:
                continue
            config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}}
            try:
                latest = database.full.get_tuple(config)
                values = latest.checkpoint.get("channel_values") or {} if latest else {}
                messages = values.get("messages")
                if not isinstance(messages, list) or not all(
                    isinstance(m, BaseMessage) for m in messages
                ):
                    messages = None
            except Exception:  # a serializer toolstop cannot decode, a checkpoint of no shape
                messages = None
            if messages is None:
                found.unreadable_threads += 1
                continue
            if messages:
                yield conversation(str(thread_id), messages, line=number, thread=str(thread_id))


def _key(message: BaseMessage) -> tuple[Any, ...]:
    calls = tuple(c.get("id") for c in message.tool_calls) if isinstance(message, AIMessage) else ()
    answered = message.tool_call_id if isinstance(message, ToolMessage) else None
    return (message.type, str(message.content), calls, answered)


def _join(parts: list[Conversation]) -> Conversation:
    if len(parts) == 1:
        return parts[0]
    messages: list[BaseMessage] = list(parts[0].messages)
    for part in parts[1:]:
        new = list(part.messages)
        # a trace often replays the thread so far to the model: keep what is new only
        if len(new) >= len(messages) and [_key(m) for m in new[: len(messages)]] == [
            _key(m) for m in messages
        ]:
            new = new[len(messages) :]
        messages.extend(new)
    first = parts[0]
    tools = next((list(part.tools) for part in parts if part.tools), None)
    return conversation(
        first.thread or first.id, messages, line=first.line, thread=first.thread, tools=tools
    )


@dataclass
class _Thread:
    """The traces of one open thread, and what they hold (messages, characters)."""

    parts: list[Conversation]
    messages: int = 0
    size: int = 0
    over: str | None = None
    """Why the thread let go of its traces (over `THREAD_LIMITS`), or None."""


def _size(item: Conversation) -> int:
    """The characters a conversation holds: its messages' texts, calls and tool definitions."""
    return text_size(
        [[m.content, m.tool_calls if isinstance(m, AIMessage) else None] for m in item.messages]
    ) + text_size(list(item.tools))


def _add(thread: _Thread, item: Conversation) -> None:
    """Hold `item` in `thread`, unless that passes `THREAD_LIMITS`: then let go of them all."""
    if thread.over is not None:
        return
    thread.parts.append(item)
    thread.messages += len(item.messages)
    thread.size += _size(item)
    messages, size = THREAD_LIMITS
    if thread.messages > messages:
        thread.over = f"more than {messages:,} messages in its traces"
    elif thread.size > size:
        thread.over = f"more than {size:,} characters in its traces"
    if thread.over is not None:
        thread.parts = []


def join_threads(
    conversations: Iterable[Conversation],
    *,
    max_open: int = MAX_OPEN_THREADS,
    problems: ReadProblems | None = None,
) -> Iterator[Conversation]:
    """The conversations with the traces of each thread joined in reading order.

    A thread whose traces pass `THREAD_LIMITS` lets go of them at once and is counted in
    `problems` as a conversation that could not be read, with the reason."""
    held: OrderedDict[str, _Thread] = OrderedDict()
    tally = problems if problems is not None else ReadProblems()

    def close(name: str, thread: _Thread, line: int) -> Iterator[Conversation]:
        if thread.over is None:
            yield _join(thread.parts)
        else:
            reason = f"thread {name[:64]!r} is too large to read: {thread.over}"
            tally.conversation_problem(line, reason)

    lines: dict[str, int] = {}
    for item in conversations:
        if item.thread is None:
            yield item
            continue
        found = held.get(item.thread)
        if found is None:
            if len(held) >= max_open:
                name, thread = held.popitem(last=False)
                yield from close(name, thread, lines.pop(name))
            found = held[item.thread] = _Thread(parts=[])
            lines[item.thread] = item.line
        else:
            held.move_to_end(item.thread)
        _add(found, item)
    for name, thread in held.items():
        yield from close(name, thread, lines[name])


def read_from(
    source: str,
    summary: Summary,
    *,
    format: str | None = None,  # noqa: A002
    keep_messages: bool = False,
    what_if: WhatIf | None = None,
) -> FromLogs:
    """Fold the records of every conversation of `source` into `summary`.

    Args:
        source: A log file, a SQLite checkpoint file or a PostgreSQL DSN.
        summary: The report's summary, fed one run at a time.
        format: One of `SOURCE_FORMATS`; detected when None (a database by its content or
            DSN, a log by its first readable lines).
        keep_messages: Keep the messages of the runs the summary keeps for example pairs
            and the judge (`FromLogs.pairs`).
        what_if: Where each conversation is replayed with tools converted (`--convert`).

    Raises:
        UnknownFormatError: the format is unknown or cannot be detected.
        ToolstopConfigError: a database that cannot be opened.
        NotARegularFileError: a log that is not a regular file (a FIFO, a device), refused
            before anything opens it.
        OSError: a log that cannot be opened.
    """
    if not is_postgres(source) and Path(source).exists():
        check_source(source)  # a FIFO would hang the first open: refused before any
    if format is None:
        format = "checkpoints" if is_checkpoints(source) else detect_format(Path(source))  # noqa: A001
        if format is None:
            msg = (
                f"the format of {source!r} cannot be told from its content; give --format "
                f"({', '.join(SOURCE_FORMATS)})"
            )
            raise UnknownFormatError(msg)
    if format not in SOURCE_FORMATS:
        msg = f"unknown format {format!r}: toolstop reads {', '.join(SOURCE_FORMATS)}"
        raise UnknownFormatError(msg)
    found = FromLogs(format=format)
    if format == "checkpoints":
        stream: Iterable[Conversation] = checkpoint_conversations(source, found)
    else:
        stream = join_threads(
            read_conversations(source, format=format, problems=found.problems),  # type: ignore[arg-type]
            problems=found.problems,
        )
    for count, item in enumerate(stream, 1):
        try:
            segments = segment(item.messages)
            records = replay_records(segments, tools=item.tools)
            runs = segments.runs
            if what_if is not None:
                what_if.add(item.thread or item.id, item.messages, records, item.tools)
        except (ValueError, RecursionError) as error:  # Unreadable, a message of no shape,
            found.problems.conversation_problem(item.line, str(error))  # or nested too deeply
            continue
        if segments.problem is not None:
            found.problems.part_problem(item.line, segments.dropped, segments.problem)
        found.open_runs += segments.unanswered
        found.conversations += 1
        _subagent_tools(item.messages, summary)
        found.tokens[item.tokens] += 1
        found.threads += bool(records)
        thread = item.thread or item.id
        for number, record in enumerate(records):
            plain = dict(record)
            if out_of_range(plain) is not None:
                found.rejected += 1
                continue
            end = RunEnd(thread_id=thread, checkpoint_ns="", ended_at=None, record=plain)
            summary.add(end)
            if keep_messages and (plain.get("ended_after") or _cut_short(plain)):
                found.held[id(end)] = (end, runs[number])
        if keep_messages and count % _PRUNE_EVERY == 0:
            _prune(found, summary)
    if keep_messages:
        _prune(found, summary)
    return found


def _subagent_tools(messages: Sequence[BaseMessage], summary: Summary) -> None:
    """Note in `summary` each tool whose results carry a `subagent_tool`'s artifact (a
    `subagent` key beside its signal): it signals already (`Candidates.document`). Its
    sub-agent's own runs are not in a conversation, so its tools stay unnamed here."""
    for message in messages:
        artifact = getattr(message, "artifact", None)
        if (
            isinstance(message, ToolMessage)
            and isinstance(artifact, dict)
            and isinstance(artifact.get("subagent"), str)
            and "stop" in artifact
        ):
            summary.subagents.setdefault(cut(str(message.name)), Counter())


def _prune(found: FromLogs, summary: Summary) -> None:
    """Drop the messages of runs the summary no longer keeps (bounded by K per tool)."""
    wanted = {id(end) for ends in summary.candidates.kept.values() for end in ends}
    wanted.update(id(end) for ends in summary.candidates.cut_kept.values() for end in ends)
    wanted.update(id(end) for ends in summary.candidates.sampled.runs().values() for end in ends)
    for key in [k for k in found.held if k not in wanted]:
        del found.held[key]


def _cut_short(record: Mapping[str, Any]) -> bool:
    """Whether a stop on some tool of the run would have cut it short (`after_first`)."""
    after = record.get("after_first")
    return isinstance(after, Mapping) and any(
        isinstance(entry, Mapping) and entry.get("skipped") for entry in after.values()
    )
