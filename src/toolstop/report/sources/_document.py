"""One JSON document over many lines, read a record at a time: a pretty-printed array or object.

`json_values(path, problems)` gives what `json_records` gives for a JSON lines file, and for a
file that is one JSON document (its first non-blank line is not JSON by itself and opens an
array or an object), the document's records, each with the line it starts on:

- an array: each element (a conversation, an observation), or, when its first element is a
  message (an object with a `role`, or a LangChain message), the whole array as one conversation;
- an object: the elements of its `conversations` or `data` array (an API page), else the
  object itself (one conversation, `{"messages": [...]}`).

The document is never held whole: elements are decoded one at a time, each held at most
`MAX_LINE_BYTES` long (a longer one is skipped without being held, and counted); the members an
object keeps beside its arrays, and a conversation that is the whole array, are bounded the same.
Each record counts as a line in `ReadProblems`. A syntax error ends the reading there (counted);
what came before it is kept.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from toolstop.report.sources import _base
from toolstop.report.sources._base import ReadProblems, json_records

__all__ = ["is_document", "json_values"]

_CONTAINERS = ("conversations", "data")
_KINDS = ("human", "ai", "tool", "system")
_DECODER = json.JSONDecoder()
_WHITE = " \t\r\n"


class _Stop(Exception):
    """The document cannot be read further; its text says why."""


class _TooLong(Exception):
    """A value longer than `MAX_LINE_BYTES`; `passed`: already read past (else still ahead)."""

    def __init__(self, *, passed: bool) -> None:
        super().__init__()
        self.passed = passed


def is_document(first_line: bytes) -> bool:
    """Whether a file whose first non-blank line is `first_line` is one JSON document.

    It is when that line opens an array or an object and leaves it open (`[`, `{`, or e.g.
    `[{"id": 1,`), as a pretty-printer writes it: a JSON line that is cut or broken is still
    read as a line, and counted."""
    stripped = first_line.strip()
    if not stripped.startswith((b"[", b"{")) or not stripped.endswith((b"[", b"{", b",")):
        return False
    try:
        json.loads(stripped.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8 (a ValueError) or not JSON alone
        return True
    return False


def _first_line(path: Path) -> bytes:
    with _base.open_regular(path) as stream:
        while True:
            line = stream.readline(_base.MAX_LINE_BYTES + 1)
            if not line or line.strip():
                return line


def json_values(path: Path, problems: ReadProblems) -> Iterator[tuple[int, Any]]:
    """(line, value) for each record of a JSON lines file or of one JSON document.

    Raises:
        NotARegularFileError: `path` is not a regular file (see `open_regular`).
        OSError: the file cannot be opened.
    """
    if not is_document(_first_line(path)):
        yield from json_records(path, problems)
        return
    with io.TextIOWrapper(_base.open_regular(path), encoding="utf-8") as stream:
        reader = _Reader(stream)
        try:
            yield from reader.document(problems)
        except _Stop as stop:
            problems.lines += 1
            problems.line_problem(reader.line, str(stop))
        except UnicodeDecodeError:
            problems.lines += 1
            problems.line_problem(reader.line, "not UTF-8 text")


def _is_message(value: Any) -> bool:
    if not isinstance(value, Mapping) or "messages" in value:
        return False
    return "role" in value or (value.get("type") in _KINDS) or "kwargs" in value


class _Reader:
    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.buf = ""
        self.pos = 0
        self.line = 1
        self.eof = False
        self.dropped = 0  # characters dropped from the front of `buf`

    @property
    def offset(self) -> int:
        """Characters read so far, as a position in the document."""
        return self.dropped + self.pos

    def _more(self, size: int = 1 << 20) -> bool:
        if self.eof:
            return False
        if self.pos > 1 << 20:  # drop what was read
            self.dropped += self.pos
            self.buf, self.pos = self.buf[self.pos :], 0
        piece = self.stream.read(size)
        self.eof = not piece
        self.buf += piece
        return bool(piece)

    def _advance(self, end: int) -> None:
        self.line += self.buf.count("\n", self.pos, end)
        self.pos = end

    def peek(self) -> str | None:
        """The next character that is not white space (None at the end), not consumed."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WHITE:
                if self.buf[self.pos] == "\n":
                    self.line += 1
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return None

    def expect(self, char: str) -> None:
        if self.peek() != char:
            msg = f"not JSON (expecting {char!r})"
            raise _Stop(msg)
        self.pos += 1

    def value(self) -> Any:
        """The next JSON value, decoded; `_TooLong` when it is longer than the bound."""
        if self.peek() is None:
            msg = "not JSON (the document ends early)"
            raise _Stop(msg)
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except RecursionError:
                msg = "JSON nested too deeply"
                raise _Stop(msg) from None
            except ValueError as error:
                if len(self.buf) - self.pos > _base.MAX_LINE_BYTES:
                    raise _TooLong(passed=False) from None
                if not self._more(max(1 << 20, len(self.buf) - self.pos)):
                    msg = f"not JSON ({error})"
                    raise _Stop(msg) from None
                continue
            if end == len(self.buf) and not self.eof and self._more():
                continue  # a number may go on in the next piece
            too_long = end - self.pos > _base.MAX_LINE_BYTES
            self._advance(end)
            if too_long:  # read whole with its last piece: dropped all the same
                raise _TooLong(passed=True)
            return value

    def skip(self) -> None:
        """Pass over the next value without holding it (brackets counted, strings passed)."""
        depth, in_string, escaped = 0, False, False
        while True:
            while self.pos < len(self.buf):
                char = self.buf[self.pos]
                self.pos += 1
                if char == "\n":
                    self.line += 1
                if in_string:
                    if escaped:
                        escaped = False
                    elif char == "\\":
                        escaped = True
                    elif char == '"':
                        in_string = False
                elif char == '"':
                    in_string = True
                elif char in "[{":
                    depth += 1
                elif char in "]}":
                    depth -= 1
                if depth <= 0 and not in_string:  # after a string or a closing bracket
                    return
            if not self._more():
                msg = "not JSON (the document ends early)"
                raise _Stop(msg)

    def record(self, problems: ReadProblems) -> tuple[int, Any] | None:
        """The next element as a record; None when it was too long (skipped and counted)."""
        self.peek()
        line = self.line
        try:
            value = self.value()
        except _TooLong as error:
            if not error.passed:
                self.skip()
            problems.lines += 1
            problems.line_problem(line, f"longer than {_base.MAX_LINE_BYTES:,} bytes")
            return None
        problems.lines += 1
        return line, value

    def elements(self, problems: ReadProblems) -> Iterator[tuple[int, Any]]:
        """The elements of the array just opened, up to its `]`."""
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            found = self.record(problems)
            if found is not None:
                yield found
            char = self.peek()
            self.pos += 1
            if char == "]":
                return
            if char != ",":
                msg = "not JSON (expecting ',' or ']')"
                raise _Stop(msg)

    def document(self, problems: ReadProblems) -> Iterator[tuple[int, Any]]:
        start = self.line
        opening = self.peek()
        self.pos += 1
        if opening == "[":
            yield from self._array(start, problems)
        else:
            yield from self._object(start, problems)
        if self.peek() is not None:
            msg = "not JSON (more after the document)"
            raise _Stop(msg)

    def _array(self, start: int, problems: ReadProblems) -> Iterator[tuple[int, Any]]:
        records = self.elements(problems)
        first = next(records, None)
        if first is None or not _is_message(first[1]):
            if first is not None:
                yield first
            yield from records
            return
        begun = self.offset
        messages = [first[1]]  # one conversation: its messages, bounded as one line
        for _, message in records:
            problems.lines -= 1
            messages.append(message)
            if self.offset - begun > _base.MAX_LINE_BYTES:
                msg = f"a conversation longer than {_base.MAX_LINE_BYTES:,} bytes"
                raise _Stop(msg)
        yield start, messages

    def _object(self, start: int, problems: ReadProblems) -> Iterator[tuple[int, Any]]:
        kept: dict[str, Any] = {}
        streamed = False
        size = 0  # characters of the members kept
        while True:
            char = self.peek()
            if char == "}":
                self.pos += 1
                break
            if char == ",":
                self.pos += 1
                continue
            key = self.value()
            if not isinstance(key, str):
                msg = "not JSON (an object key that is not a string)"
                raise _Stop(msg)
            self.expect(":")
            if key in _CONTAINERS and self.peek() == "[":
                self.pos += 1
                streamed = True
                yield from self.elements(problems)
                continue
            begun = self.offset
            try:
                kept[key] = self.value()
            except _TooLong as error:
                if not error.passed:
                    self.skip()
            size += self.offset - begun
            if size > _base.MAX_LINE_BYTES:
                msg = f"an object longer than {_base.MAX_LINE_BYTES:,} bytes"
                raise _Stop(msg)
        if not streamed:
            problems.lines += 1
            yield start, kept
