"""One escaper for every string a run produced before it reaches a terminal or a log line.

Tool names are chosen by the model, thread ids and rule texts come from databases and logs, and
error texts from tools: any of them may hold control characters. Printed raw, an escape sequence
(`ESC ]0;...BEL`, `ESC [2J`) sets a terminal's title or clears it, a newline forges a whole log
line, and a bidi override (U+202E) shows text in another order than it is stored. `printable`
writes each such character as a Python-style escape (`\\x1b`, `\\n`, `\\u202e`); everything
else, non-ASCII letters included, is kept.

Deliberately not handled: a backslash is kept as it is, so a name holding the four characters
`\\x1b` reads like an escaped ESC; the escape is for safety, not for a reversible encoding.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["printable", "printable_data"]

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]"
)
"""C0 controls (newline and tab included), DEL, C1 controls, the bidi marks, embeddings,
overrides and isolates, the line and paragraph separators, and the byte-order mark."""


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(found: re.Match[str]) -> str:
    character = found.group()
    if character in _SHORT:
        return _SHORT[character]
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every control, bidi and line-separator character escaped (see the module).

    With `keep_newlines`, `\n` is kept (a multi-line answer shown as it reads); every other
    control is escaped still. Never for a log line or a name: a newline there forges a line."""
    if keep_newlines:
        return "\n".join(_UNSAFE.sub(_escape, line) for line in text.split("\n"))
    return _UNSAFE.sub(_escape, text)


def printable_data(value: Any, *, keep_newlines: bool = False) -> Any:
    """`value` with `printable` applied to every string in it (dict keys too), at any depth.

    Dicts, lists and tuples are copied; other values are returned as they are. `keep_newlines`
    as for `printable` (for a page, where a newline forges nothing)."""
    if isinstance(value, str):
        return printable(value, keep_newlines=keep_newlines)
    if isinstance(value, dict):
        return {
            printable_data(key): printable_data(item, keep_newlines=keep_newlines)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [printable_data(item, keep_newlines=keep_newlines) for item in value]
    if isinstance(value, tuple):
        return tuple(printable_data(item, keep_newlines=keep_newlines) for item in value)
    return value
