"""What every log reader shares: the normalized conversation, the problem tally, bounded lines.

Every string in a log is hostile: it is kept as data in the messages built here, and only
escaped (`printable`) and masked (`mask_secrets`) when a problem is put into words.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, AnyStr, BinaryIO, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata

from toolstop._printable import printable
from toolstop._secrets import mask_secrets

__all__ = [
    "BAD_INPUT",
    "MAX_LINE_BYTES",
    "Conversation",
    "NotARegularFileError",
    "ReadProblems",
    "Tokens",
    "Unreadable",
    "bounded_lines",
    "conversation",
    "json_records",
    "non_negative_int",
    "open_regular",
    "tokens_of",
    "tool_definitions",
    "usage",
]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A line longer than this (64 MiB) is skipped and counted, read in pieces, never held whole."""

_PIECE = 1024 * 1024

Tokens = Literal["recorded", "estimated", "partly"]
"""Where a conversation's token counts come from.

- `"recorded"`: every assistant message carries the usage the log recorded.
- `"estimated"`: none does: the counts must be estimated (`count_tokens_approximately`).
- `"partly"`: some do; the others must be estimated.
"""


class Unreadable(ValueError):
    """A line, a record or a conversation that cannot be read; its text says why."""


BAD_INPUT = (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError)
"""What building messages from a hostile record may raise: `Unreadable`, pydantic's
`ValidationError` (a `ValueError`), and the lookups of a shape that is not the documented one.
Caught per line or per trace, counted, never shown as a traceback."""


@dataclass(frozen=True, kw_only=True)
class Conversation:
    """One recorded conversation, normalized.

    Attributes:
        id: The conversation's id from the log (its `id`, trace id or thread id), else
            `line-N` for the line it starts on.
        messages: LangChain messages built from plain fields (never deserialized objects):
            `SystemMessage`, `HumanMessage`, `AIMessage` (with `tool_calls`, and the recorded
            usage as `usage_metadata` where the log has it), `ToolMessage`.
        tokens: Whether the token counts were recorded or must be estimated (`Tokens`).
        line: The line of the file the conversation starts on (1-based).
        thread: For a trace, the thread (conversation) the log says it belongs to, when it
            says: LangSmith's `extra.metadata.thread_id` (or `session_id`,
            `conversation_id`), OpenTelemetry's `gen_ai.conversation.id`. Several traces (runs)
            of one thread are separate conversations with the same `thread`. None otherwise.
        tools: The tool definitions the model was offered, where the log records them (an
            OpenAI chat line's `tools`, a LangSmith model run's `extra.invocation_params.tools`),
            as plain JSON objects: counted in the token estimate of each model call without
            recorded usage. Empty otherwise.
    """

    id: str
    messages: tuple[BaseMessage, ...]
    tokens: Tokens
    line: int
    thread: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()


def conversation(
    id: str,  # noqa: A002
    messages: Sequence[BaseMessage],
    *,
    line: int,
    thread: str | None = None,
    tools: Any = None,
) -> Conversation:
    """A `Conversation` of `messages`, each tool result named after the call it answers.

    LangChain's tool node names each result after its tool, so an estimate of the tokens a
    model saw counts the names too. `tools` is the log's list of tool definitions (see
    `tool_definitions`)."""
    names = {c["id"]: c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    for message in messages:
        if isinstance(message, ToolMessage) and message.name is None:
            message.name = names.get(message.tool_call_id)
    return Conversation(
        id=id,
        messages=tuple(messages),
        tokens=tokens_of(messages),
        line=line,
        thread=thread,
        tools=tool_definitions(tools),
    )


def tool_definitions(raw: Any) -> tuple[Mapping[str, Any], ...]:
    """The tool definitions of a log's `tools` list: its JSON objects.

    Anything else in the list is left out; a value that is not a list gives none."""
    if not isinstance(raw, list):
        return ()
    return tuple(tool for tool in raw if isinstance(tool, Mapping))


def tokens_of(messages: Sequence[BaseMessage]) -> Tokens:
    """`"recorded"`, `"estimated"` or `"partly"`: how many assistant messages carry usage."""
    answers = [m for m in messages if isinstance(m, AIMessage)]
    recorded = sum(1 for m in answers if m.usage_metadata is not None)
    if answers and recorded == len(answers):
        return "recorded"
    return "partly" if recorded else "estimated"


@dataclass
class ReadProblems:
    """The tally of what could not be read: lines, and conversations assembled from them.

    Attributes:
        lines: Lines read (blank lines not counted).
        skipped_lines: Lines that could not be read, skipped.
        skipped_conversations: Conversations (a line's, or a trace's) that could not be
            made into messages, skipped.
        ignored_traces: Traces of a trace export with no model call at all (not a
            conversation: an HTTP request's spans, a chain without a chat model), left out.
        partly_read: Conversations read in part: a part a replay cannot reproduce was left out
            (see `toolstop.report.sources._runs`), the runs before it kept.
        dropped_runs: The runs left out of those conversations.
        unordered_traces: Traces read in the order of the file, not by start time: a record's
            start time is missing or cannot be read.
        first: The first problem, as `line N: why` (raw: escape and mask it to show it, as
            `summary()` does).
    """

    lines: int = 0
    skipped_lines: int = 0
    skipped_conversations: int = 0
    ignored_traces: int = 0
    partly_read: int = 0
    dropped_runs: int = 0
    unordered_traces: int = 0
    first: str | None = None
    _reasons: list[str] = field(default_factory=list, repr=False)

    def line_problem(self, line: int, reason: str) -> None:
        """Count a line that could not be read."""
        self.skipped_lines += 1
        self._note(line, reason)

    def conversation_problem(self, line: int, reason: str) -> None:
        """Count a conversation that could not be made into messages."""
        self.skipped_conversations += 1
        self._note(line, reason)

    def part_problem(self, line: int, runs: int, reason: str) -> None:
        """Count a conversation read in part.

        `runs` runs of it (or messages before its first run) could not be replayed and were
        left out."""
        self.partly_read += 1
        self.dropped_runs += runs
        self._note(line, reason)

    def unordered_problem(self, line: int, reason: str) -> None:
        """Count a trace read in file order: the record of `line` has no start time to sort by."""
        self.unordered_traces += 1
        self._note(line, reason)

    def _note(self, line: int, reason: str) -> None:
        if self.first is None:
            self.first = f"line {line}: {reason[:500]}"

    def summary(self) -> str | None:
        """E.g. `12 of 10,000 lines could not be read; first: line 3: ...` (None: no problem).

        The reason is escaped (control characters shown as escapes) and masked (what looks like
        a secret shown as `***`): it quotes the log."""
        if self.first is None:
            return None
        parts = []
        if self.skipped_lines:
            parts.append(f"{self.skipped_lines:,} of {self.lines:,} lines could not be read")
        if self.skipped_conversations:
            count = self.skipped_conversations
            parts.append(f"{count:,} conversation{'' if count == 1 else 's'} could not be read")
        if self.partly_read:
            count, runs = self.partly_read, self.dropped_runs
            parts.append(
                f"{count:,} conversation{'' if count == 1 else 's'} read in part "
                f"({runs:,} run{'' if runs == 1 else 's'} a replay cannot reproduce left out, "
                "the runs before them counted)"
            )
        if self.unordered_traces:
            count = self.unordered_traces
            parts.append(
                f"{count:,} trace{'' if count == 1 else 's'} read in the order of the file "
                "(a start time missing or not a time)"
            )
        return f"{'; '.join(parts)}; first: {printable(mask_secrets(self.first))}"


def bounded_lines(stream: IO[AnyStr]) -> Iterator[tuple[int, AnyStr | None]]:
    """(number, line) for each line of `stream`; `None` for a line over `MAX_LINE_BYTES`.

    A line is read up to the cap and no further: the rest of a longer one is drained in pieces
    of `_PIECE`, never held whole (on a text stream the cap counts characters)."""
    number = 0
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        end = b"\n" if isinstance(line, bytes) else "\n"
        if len(line) > MAX_LINE_BYTES and not line.endswith(end):  # type: ignore[arg-type]
            while True:  # drain the rest of the line in pieces
                piece = stream.readline(_PIECE)
                if not piece or piece.endswith(end):  # type: ignore[arg-type]
                    break
            yield number, None
            continue
        yield number, line


class NotARegularFileError(OSError):
    """A path to read that is not a regular file: a FIFO, a device, a socket or a folder."""


def open_regular(path: Path | str) -> BinaryIO:
    """`path` opened to read bytes, when it is a regular file (a symlink to one is followed).

    It is opened without blocking (a FIFO without a writer would hang the open) and checked on
    the open file, so nothing is read from a FIFO or a device (`/dev/zero` never ends).

    Raises:
        NotARegularFileError: not a regular file.
        OSError: it cannot be opened.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            msg = "not a regular file (a FIFO, a device or a folder is not read)"
            raise NotARegularFileError(errno.EINVAL, msg, str(path))
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def json_records(path: Path, problems: ReadProblems) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) for each readable non-blank line of a JSONL file.

    A line that is too long, not UTF-8 or not JSON is counted in `problems` and skipped.

    Raises:
        NotARegularFileError: `path` is not a regular file (see `open_regular`).
        OSError: the file cannot be opened.
    """
    with open_regular(path) as stream:
        for number, raw in bounded_lines(stream):
            if raw is None:
                problems.lines += 1
                problems.line_problem(number, f"longer than {MAX_LINE_BYTES:,} bytes")
                continue
            if not raw.strip():
                continue
            problems.lines += 1
            try:
                value = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                problems.line_problem(number, "not UTF-8 text")
                continue
            except RecursionError:
                problems.line_problem(number, "JSON nested too deeply")
                continue
            except ValueError as error:
                problems.line_problem(number, f"not JSON ({error})")
                continue
            yield number, value


def non_negative_int(value: Any) -> int | None:
    """`value` when it is an int >= 0 (a bool is not; an integral float is taken), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer() and 0 <= value < 2**63:
        return int(value)
    if isinstance(value, int) and 0 <= value < 2**63:
        return value
    if isinstance(value, str) and value.isdigit() and len(value) < 19:  # OTLP JSON's int64
        return int(value)
    return None


_INPUT_KEYS = ("input_tokens", "prompt_tokens")
_OUTPUT_KEYS = ("output_tokens", "completion_tokens")


def usage(raw: Any) -> UsageMetadata | None:
    """`usage_metadata` from a recorded usage; None unless both of its counts are there.

    OpenAI's `prompt_tokens` / `completion_tokens` or LangChain's `input_tokens` /
    `output_tokens`."""
    if not isinstance(raw, Mapping):
        return None
    found = [
        next((n for n in (non_negative_int(raw.get(k)) for k in keys) if n is not None), None)
        for keys in (_INPUT_KEYS, _OUTPUT_KEYS)
    ]
    input_tokens, output_tokens = found
    if input_tokens is None or output_tokens is None:
        return None
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )
