"""The page's evidence section: the threads behind each candidate, and example pairs.

With `--examples`, the pairs of the tool's result and the final answer that followed.

Every string here came from a run (thread ids, tool names, message content): each is escaped.
Without `--examples` the section holds thread ids only, never message content.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["render_evidence"]


def _pair(example: dict[str, Any]) -> str:
    where = f"thread {example.get('thread_id')}, run {example.get('run')}"
    if example.get("cut_short"):
        later = ", ".join(str(t) for t in example.get("later_tools") or []) or "later tools"
        where += f" (cut short: had it signalled a stop, {later} would not have run)"
    return (
        f"<details><summary>{html.escape(where)}</summary>"
        f"<p><b>tool result</b></p><pre>{html.escape(str(example.get('tool_result', '')))}</pre>"
        f"<p><b>final answer</b></p><pre>{html.escape(str(example.get('final_answer', '')))}"
        "</pre></details>"
    )


def render_evidence(document: dict[str, Any]) -> str:
    """One line: per candidate with threads, its threads and its example pairs (if any)."""
    parts = []
    for entry in document["candidates"]:
        threads = entry.get("threads") or []
        examples = entry.get("examples") or []
        if not threads and not examples:
            continue
        names = ", ".join(f"<code>{html.escape(str(t))}</code>" for t in threads)
        parts.append(
            f"<h3>{html.escape(str(entry['tool']))}</h3>"
            + (f"<p>threads: {names}</p>" if names else "")
            + "".join(_pair(e) for e in examples if isinstance(e, dict))
        )
    if not parts:
        return ""
    note = (
        "<p>Read a thread with <code>toolstop explain THREAD</code>: it shows the tool, the "
        "overlap and the final answer of each run that ended after a tool."
        + (
            ""
            if any(e.get("examples") for e in document["candidates"])
            else " <code>toolstop report --examples K</code> puts K pairs of a tool's result "
            "and the final answer here (cut at 2,000 characters, secrets masked)."
        )
        + "</p>"
    )
    return "<h2>The runs behind each tool</h2>" + note + "".join(parts)
