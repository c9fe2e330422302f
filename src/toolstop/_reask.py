"""Whether a user's next message asks again (placeholder; replaced by the validated reader)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

__all__ = ["asked_again", "call_key"]

_WORD = re.compile(r"\w{3,}")


def asked_again(request: str, answer: str | None, message: str) -> str | None:
    """`restated`, `complaint` or `None` for the user's next `message`."""
    text = message[:4000].casefold()
    if any(p in text for p in ("not what i asked", "didn't help", "did not help", "try again")):
        return "complaint"
    said = set(_WORD.findall(text))
    asked = set(_WORD.findall(request[:4000].casefold()))
    if len(said) >= 3 and len(said & asked) / len(said | asked) >= 0.6:
        return "restated"
    return None


def call_key(name: str, args: Any) -> str:
    """A short digest of a tool call: its name and its arguments as canonical JSON."""
    try:
        text = json.dumps(args, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(type(args))
    return hashlib.sha256(f"{name}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()[:16]
