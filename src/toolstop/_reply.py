"""What the judging models are sent and what they reply: a fence tag, a reply's text.

Shared by the advice's judge (`toolstop.report.model_judge`), the template's drafter
(`toolstop.report.template`) and the re-ask judge (`toolstop._reask`)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["fence_tag", "reply_text"]

_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.DOTALL)


def fence_tag(texts: Iterable[str], draw: Callable[[], str] | None = None) -> str:
    """A random tag for one call's fences, absent from every text of `texts`.

    Drawn by `draw` (default: 12 random hex digits) until no text holds it, so no text can
    write the closing marker of its own fence."""
    draw = draw or (lambda: secrets.token_hex(6))
    texts = list(texts)
    while True:
        tag = draw()
        if tag and not any(tag in text for text in texts):
            return tag


def reply_text(reply: Any, limit: int) -> str:
    """The text of a model's reply (a message, its content or a str), ready to parse.

    Cut at `limit` characters, stripped, out of a code fence when the whole reply is one."""
    content = getattr(reply, "content", reply)
    if isinstance(content, list):
        content = "".join(
            b if isinstance(b, str) else str(b.get("text", ""))
            for b in content
            if isinstance(b, str) or (isinstance(b, dict) and b.get("type", "text") == "text")
        )
    text = content[:limit].strip() if isinstance(content, str) else ""
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text
