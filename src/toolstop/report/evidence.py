"""The page's evidence section: the threads behind each candidate, and example pairs.

With `--examples`, the pairs of the tool's result and the final answer that followed.

Every string here came from a run (thread ids, tool names, message content): each is escaped.
Without `--examples` the section holds thread ids only, never message content.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["render_evidence"]


def _skipped(example: dict[str, Any]) -> str:
    """The calls a stop would have skipped: `a, b (2 calls)`: every call, repeats included."""
    names = [str(t) for t in example.get("later_tools") or []]
    counts = {name: names.count(name) for name in dict.fromkeys(names)}
    said = ", ".join(name + (f" ({n} calls)" if n > 1 else "") for name, n in counts.items())
    calls = example.get("skipped_calls")
    if isinstance(calls, int) and calls > len(names):
        said += f" and {calls - len(names)} more call(s)"
    return said or "later tools"


def _judgement(example: dict[str, Any]) -> str:
    """`judged: restated (fields: a, b)`: what the answer did with the result, as counted."""
    judged = example.get("judged")
    if not isinstance(judged, dict):
        return ""
    fields = judged.get("fields") or []
    said = f"judged: {judged.get('action')}, result {judged.get('shape')}"
    if fields:
        said += f" (fields used: {', '.join(str(f) for f in fields)})"
    earlier = judged.get("earlier") or []
    if earlier:
        said += f"; facts from earlier results of {', '.join(str(t) for t in earlier)}"
    return said


def _pair(example: dict[str, Any]) -> str:
    where = f"thread {example.get('thread_id')}, run {example.get('run')}"
    if example.get("cut_short"):
        where += f" (cut short: had it signalled a stop, {_skipped(example)} would not have run)"
    judgement = _judgement(example)
    if judgement:
        where += f"; {judgement}"
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
    source = document.get("source")
    read = (
        "A thread here is one conversation of the log you read with <code>--from</code> "
        "(<code>line-N</code>: the one on its line N; otherwise the log's own conversation id): "
        "read it there."
        if isinstance(source, dict) and "from" in source
        else "Read a thread with <code>toolstop explain THREAD</code>: it shows the tool, the "
        "overlap and the final answer of each run that ended after a tool."
    )
    note = (
        "<p>"
        + read
        + (
            ""
            if any(e.get("examples") for e in document["candidates"])
            else " <code>toolstop report --examples K</code> puts K pairs of a tool's result "
            "and the final answer here (cut at 2,000 characters, secrets masked)."
        )
        + "</p>"
    )
    return "<h2>The runs behind each tool</h2>" + note + "".join(parts)
