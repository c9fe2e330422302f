"""Recorded conversations read from the logs users already have, in one normalized shape.

`read_conversations(path)` streams `Conversation`s (LangChain messages built from plain fields,
recorded usage as `usage_metadata`, and whether the tokens were recorded or must be estimated)
from an OpenAI chat JSONL file, LangChain message dicts, a LangSmith run export, OTLP JSON
GenAI spans or a Langfuse export of observations, the format detected from the content when
not given. A line that cannot be read is skipped and counted in a `ReadProblems`, whose
`summary()` says so in one escaped, masked line.
`shadow_records(conversation.messages)` gives the stop records shadow mode would have written
for it, its runs cut by the rule every reader's conversations share (`_runs.segment`: runs left
open on a tool call or its results, an unanswered last message, a part a replay cannot
reproduce, counted rather than raised).

Memory stays flat in the number of conversations: the line formats are read a line at a time;
the trace formats are grouped by trace with at most `max_open` traces held open (see
`toolstop.report.sources._traces`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any, Literal, get_args

from toolstop.report.sources._base import (
    MAX_LINE_BYTES,
    Conversation,
    NotARegularFileError,
    ReadProblems,
    Tokens,
    Unreadable,
)
from toolstop.report.sources._document import json_values
from toolstop.report.sources._traces import MAX_OPEN_TRACES
from toolstop.report.sources.langchain import is_langchain, read_langchain
from toolstop.report.sources.langfuse import is_langfuse, read_langfuse
from toolstop.report.sources.langsmith import is_langsmith, read_langsmith
from toolstop.report.sources.openai import is_openai, read_openai
from toolstop.report.sources.otel import is_otel, read_otel
from toolstop.report.sources.otel_logs import is_otel_logs
from toolstop.report.sources.parquet import (
    is_parquet,
    parquet_folder,
    parquet_format,
    parquet_records,
)
from toolstop.report.sources.shadow import shadow_records

__all__ = [
    "FORMATS",
    "MAX_LINE_BYTES",
    "MAX_OPEN_TRACES",
    "Conversation",
    "Format",
    "ReadProblems",
    "Tokens",
    "UnknownFormatError",
    "Unreadable",
    "check_source",
    "detect_format",
    "read_conversations",
    "shadow_records",
]

Format = Literal["openai", "langchain", "langsmith", "otel", "langfuse"]
"""A log format toolstop reads.

- `"openai"`: OpenAI chat JSONL, one conversation a line (`{"messages": [...]}` or a list), or
  one JSON document over many lines (an array of conversations).
- `"langchain"`: LangChain message dicts (`messages_to_dict`), one conversation a line, or one
  JSON document over many lines.
- `"langsmith"`: a LangSmith run export, JSONL of runs or a Parquet bulk export; a trace is a
  conversation.
- `"otel"`: OTLP JSON trace exports with OpenTelemetry GenAI spans; a trace is a conversation.
- `"langfuse"`: a Langfuse export of observations (JSONL or one JSON document); a trace is a
  conversation.
"""

FORMATS: tuple[Format, ...] = get_args(Format)

_DETECT_LINES = 50
"""How many readable lines `detect_format` looks at."""

# the most specific shape first: a LangChain message dict may also carry a `role`
_DETECTORS: tuple[tuple[Format, Callable[[Any], bool]], ...] = (
    ("otel", is_otel),
    ("otel", is_otel_logs),
    ("langfuse", is_langfuse),
    ("langsmith", is_langsmith),
    ("langchain", is_langchain),
    ("openai", is_openai),
)


class UnknownFormatError(ValueError):
    """The format of a log could not be told from its content, or is not one toolstop reads."""


def check_source(path: Path | str) -> None:
    """Refuse a log that is not a regular file (a symlink to one is followed).

    Before anything opens it: a FIFO without a writer would hang the open, a device
    (`/dev/zero`) never ends.

    A folder holding Parquet files is a Parquet export (see `parquet`), not refused.

    Raises:
        NotARegularFileError: a FIFO, a device, a socket, or a folder without Parquet files.
        OSError: the path cannot be looked up (missing, no permission).
    """
    mode = os.stat(path).st_mode
    if stat.S_ISREG(mode) or (stat.S_ISDIR(mode) and parquet_folder(Path(path))):
        return
    msg = "not a regular file (a FIFO, a device or a folder is not read)"
    raise NotARegularFileError(errno.EINVAL, msg, str(path))


def detect_format(path: Path) -> Format | None:
    """The format of the first of the first readable lines that has a known shape (None: none).

    A Parquet file is told from its columns (a LangSmith bulk export, a Langfuse export).

    Raises:
        NotARegularFileError: `path` is not a regular file (see `check_source`).
        OSError: the file cannot be opened.
        ToolstopConfigError: a Parquet file, and pyarrow is not installed.
    """
    check_source(path)
    if is_parquet(path):
        return parquet_format(path)
    for _, value in islice(json_values(path, ReadProblems()), _DETECT_LINES):
        for name, looks_like in _DETECTORS:
            if looks_like(value):
                return name
    return None


def read_conversations(
    path: Path | str,
    *,
    format: Format | None = None,  # noqa: A002
    problems: ReadProblems | None = None,
    max_open: int = MAX_OPEN_TRACES,
) -> Iterator[Conversation]:
    """The recorded conversations of `path`, streamed, in one normalized shape.

    Args:
        path: The log file.
        format: Its format (`Format`); detected from the content when None.
        problems: Where lines and conversations that cannot be read are counted (pass one to
            read the tally once the iterator is exhausted).
        max_open: For the trace formats, how many traces are held open at once while grouping
            records by trace (see the module docstring).

    Returns:
        An iterator of `Conversation`s; the file is read as it is consumed.

    Raises:
        UnknownFormatError: `format` is not a known format, or none was given and the content
            matches none.
        NotARegularFileError: `path` is not a regular file (see `check_source`).
        OSError: the file cannot be opened.
    """
    path = Path(path)
    check_source(path)  # before anything opens it; a missing file is an OSError now
    tally = problems if problems is not None else ReadProblems()
    if format is None:
        format = detect_format(path)  # noqa: A001
        if format is None:
            msg = (
                f"the format of {path.name!r} cannot be told from its first {_DETECT_LINES} "
                f"readable lines; give it ({', '.join(FORMATS)})"
            )
            raise UnknownFormatError(msg)
    if format not in FORMATS:
        msg = f"unknown log format {format!r}: toolstop reads {', '.join(FORMATS)}"
        raise UnknownFormatError(msg)
    if max_open < 1:
        msg = f"max_open must be at least 1, got {max_open}"
        raise ValueError(msg)
    if format in ("langsmith", "langfuse") and is_parquet(path):
        rows = parquet_records(path, tally)
        if format == "langsmith":
            return read_langsmith(path, tally, max_open=max_open, records=rows)
        return read_langfuse(path, tally, max_open=max_open, records=rows)
    if format == "openai":
        return read_openai(path, tally)
    if format == "langchain":
        return read_langchain(path, tally)
    if format == "langsmith":
        return read_langsmith(path, tally, max_open=max_open)
    if format == "langfuse":
        return read_langfuse(path, tally, max_open=max_open)
    return read_otel(path, tally, max_open=max_open)
