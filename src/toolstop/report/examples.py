"""The evidence behind a candidate: a tool's result and the final answer that followed it.

`toolstop report --examples K` reads, for each candidate, up to K runs that ended right after it
back from their checkpoints and puts the pairs in report.json and on the page; `toolstop explain`
shows the same pair for one thread's runs. The record never holds content: only these two
commands, on the user's request, read it from the checkpoints.

Each text is masked (`mask_secrets`), stripped of control characters and cut at
`EXAMPLE_CHARS` characters. The masking is `toolstop._secrets`' (credentials, URLs, e-mail and
IP addresses) plus long hex or base64 runs; it does not hide names or order numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop._judge import judge, judge_turn, text_of
from toolstop._secrets import mask_secrets as _mask_secrets
from toolstop.record import reads_as_error
from toolstop.report.records import cut

__all__ = [
    "EXAMPLE_CHARS",
    "SKIPPED_SHOWN",
    "THREADS_MAX",
    "clean",
    "collect_examples",
    "cut_short_pair",
    "ended_after_pair",
    "mask_secrets",
    "messages_at",
    "read_examples",
]

EXAMPLE_CHARS = 2000
"""A tool result or a final answer is cut at this many characters."""
THREADS_MAX = 10
"""At most this many threads are listed per candidate."""

_LONG_RUNS = [
    (re.compile(r"\b[A-Fa-f0-9]{32,}\b"), "***"),
    (
        re.compile(
            r"\b(?=[A-Za-z0-9+/_-]*\d)(?=[A-Za-z0-9+/_-]*[A-Za-z])[A-Za-z0-9+/_-]{40,}={0,2}"
        ),
        "***",
    ),
]
"""Long hex or base64 runs: keys with no recognisable prefix, shown in a pair as `***`."""
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def mask_secrets(text: str) -> str:
    """`text` with what looks like a credential replaced by `***`.

    What `toolstop._secrets` masks in exception texts, and long hex or base64 runs."""
    text = _mask_secrets(text)
    for pattern, replacement in _LONG_RUNS:
        text = pattern.sub(replacement, text)
    return text


def clean(text: str, limit: int = EXAMPLE_CHARS) -> str:
    """`text` masked, without control characters, cut at `limit` characters (marked `…`)."""
    shown = _CONTROL.sub("", mask_secrets(text[: limit * 4]))
    return shown if len(shown) <= limit else shown[:limit] + "…"


def ended_after_pair(
    messages: Sequence[BaseMessage], tool: str | None = None
) -> dict[str, Any] | None:
    """The last run's final answer and the tool results right before it, cleaned.

    `{"tools": [names], "tool_result": text, "final_answer": text}`; only `tool`'s results when
    it is given. `None` when the messages do not end with a model answer right after a tool turn.
    """
    if not messages or not isinstance(messages[-1], AIMessage) or messages[-1].tool_calls:
        return None
    results: list[ToolMessage] = []
    for message in reversed(messages[:-1]):
        if isinstance(message, ToolMessage):
            results.append(message)
        elif isinstance(message, AIMessage):
            break
    results.reverse()
    if tool is not None:
        results = [r for r in results if r.name == tool]
    if not results:
        return None
    return {
        "tools": list(dict.fromkeys(str(r.name) for r in results)),
        "tool_result": clean(" ".join(text_of(r.content) for r in results)),
        "final_answer": clean(text_of(messages[-1].content)),
    }


def messages_at(database: Any, end: Any) -> list[BaseMessage] | None:
    """The thread's messages at the checkpoint of `end` (a `RunEnd`), or `None` when unreadable."""
    if end.checkpoint_id is None:
        return None
    try:
        found = database.full.get_tuple(end.checkpoint_config())
    except Exception:  # a checkpoint toolstop cannot decode: no example from it
        return None
    if found is None:
        return None
    messages = (found.checkpoint.get("channel_values") or {}).get("messages")
    return list(messages) if isinstance(messages, list) else None


SKIPPED_SHOWN = 20
"""At most this many skipped calls are named in a cut-short pair (`skipped_calls` counts all)."""


def _succeeded(message: ToolMessage) -> bool:
    """A result a converted tool would signal a stop on: no error (`record.reads_as_error`)."""
    return message.status != "error" and not reads_as_error(message.content)


def cut_short_pair(messages: Sequence[BaseMessage], tool: str) -> dict[str, Any] | None:
    """The last run's first successful result of `tool`, the calls after it and the answer.

    `{"tool_result": text, "final_answer": text, "later_tools": [names], "skipped_calls": n,
    "judged": {...}}` (cleaned): a run a stop on `tool` would have cut short. `later_tools`
    names every tool call of the later turns in call order, repeats and `tool`'s own later
    calls included (a second exchange is skipped as much as a refund), at most
    `SKIPPED_SHOWN`; `skipped_calls` counts them all. Calls of the same turn are not skipped
    (a stop ends the turn after them). `judged`: what the final answer did with that result
    (`toolstop._judge.judge`). The last run starts after the last human message. `None` when
    the messages do not end with a model answer or `tool` has no successful result in it."""
    if not messages or not isinstance(messages[-1], AIMessage) or messages[-1].tool_calls:
        return None
    start = max((i for i, m in enumerate(messages) if m.type == "human"), default=-1) + 1
    run = messages[start:]
    at = next(
        (
            i
            for i, m in enumerate(run)
            if isinstance(m, ToolMessage) and m.name == tool and _succeeded(m)
        ),
        None,
    )
    if at is None:
        return None
    turn_end = next((i for i in range(at + 1, len(run)) if isinstance(run[i], AIMessage)), len(run))
    later = [str(m.name) for m in run[turn_end:] if isinstance(m, ToolMessage)]
    result, answer = text_of(run[at].content), text_of(messages[-1].content)
    return {
        "tool_result": clean(result),
        "final_answer": clean(answer),
        "later_tools": [cut(name) for name in later[:SKIPPED_SHOWN]],
        "skipped_calls": len(later),
        "judged": judge(
            result[:_JUDGED_CHARS], answer[:_JUDGED_CHARS], _context(messages[: start + at])
        ),
    }


def _context(earlier: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """`(tool, text)` of the results among `earlier`, the messages before the judged result
    (the last `_CONTEXT` of them, at most `_JUDGED_CHARS` characters in all): where an answer's
    other facts may come from. A result after the judged one is never among them."""
    found: list[tuple[str, str]] = []
    left = _JUDGED_CHARS
    for message in reversed(earlier):
        if isinstance(message, ToolMessage) and left > 0:
            text = text_of(message.content)[:left]
            found.append((str(message.name), text))
            left -= len(text)
            if len(found) >= _CONTEXT:
                break
    return found[::-1]


_CONTEXT = 64


_JUDGED_CHARS = 200_000
"""As the records: a longer text is judged on its first characters."""


def _judged(end: Any, tool: str, raw: Sequence[BaseMessage]) -> Any:
    """The judgement the advice counted for this pair: the record's (`ended_after.judged`), or,
    for a record without one (before schema version 5), the judgement made now."""
    after = end.record.get("ended_after") if isinstance(end.record, Mapping) else None
    judged = after.get("judged") if isinstance(after, Mapping) else None
    if isinstance(judged, Mapping) and isinstance(judged.get(tool), Mapping):
        return _features(judged[tool])
    turn = _last_turn(raw)
    results = [text_of(m.content) for m in turn if isinstance(m, ToolMessage) and m.name == tool]
    answer = text_of(raw[-1].content)
    earlier = _context(raw[: len(raw) - 1 - len(turn)])
    return judge_turn(results, answer, earlier, limit=_JUDGED_CHARS)


def _features(judged: Mapping[str, Any]) -> dict[str, Any]:
    """A record's judgement, bounded: it was read from a database (strings cut, lists capped)."""
    fields, earlier = judged.get("fields"), judged.get("earlier")
    features = {
        "shape": cut(str(judged.get("shape")), 20),
        "action": cut(str(judged.get("action")), 20),
        "fields": [cut(str(f), 40) for f in fields[:8]] if isinstance(fields, list) else [],
    }
    if isinstance(earlier, list) and earlier:
        features["earlier"] = [cut(str(t), 64) for t in earlier[:8]]
    return features


def _last_turn(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    turn: list[BaseMessage] = []
    for message in reversed(messages[:-1]):
        if isinstance(message, AIMessage):
            break
        turn.append(message)
    return turn[::-1]


def read_examples(
    database: Any,
    kept: dict[str, list[Any]],
    cut_short: dict[str, list[Any]] | None = None,
    limit: int | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Per tool, the example pairs of the runs `kept` for it (`Candidates.kept`), in order.

    Each pair: `thread_id`, `run`, `tool_result`, `final_answer` (cleaned, see `clean`) and
    `judged`, what the answer did with the result as the advice counted it (the record's
    `ended_after.judged`). A run whose checkpoint cannot be read, or whose messages do not end
    after the tool, gives none. The runs in `cut_short` (`Candidates.cut_shown`) come first,
    each pair the tool's first successful result in it, the final answer, `later_tools` and
    `skipped_calls` (what a stop would have skipped, see `cut_short_pair`), marked
    `cut_short`; then the other runs; at most `limit` pairs in all, each run once. A run
    another middleware ended (its record's `ended_by`) gives none: its last message is not an
    answer.
    """
    return collect_examples(lambda end: messages_at(database, end), kept, cut_short, limit)


def _run_key(end: Any) -> Any:
    """Which run `end` is: its thread and run number, or the object itself without a thread."""
    thread = getattr(end, "thread_id", None)
    return (thread, end.record.get("run")) if thread else id(end)


def _not_answered(end: Any) -> bool:
    """A run another middleware ended (`ended_by`: a call limit's message, a guard's text): its
    last message is not a model's answer to pair with a result."""
    record = getattr(end, "record", None)
    return isinstance(record, Mapping) and bool(record.get("ended_by"))


def collect_examples(
    messages_of: Callable[[Any], list[BaseMessage] | None],
    kept: Mapping[str, list[Any]],
    cut_short: Mapping[str, list[Any]] | None = None,
    limit: int | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """`read_examples`, with each run's messages from `messages_of(end)` (`None`: unknown)."""
    found: dict[str, list[dict[str, Any]]] = {}
    cut_short = cut_short or {}
    for tool in dict.fromkeys([*cut_short, *kept]):
        shown: set[Any] = set()
        for end in cut_short.get(tool, []):
            if limit is not None and len(found.get(tool, [])) >= limit:
                break
            if _not_answered(end):
                continue
            messages = messages_of(end)
            short = cut_short_pair(messages, tool) if messages is not None else None
            if short is not None:
                shown.add(_run_key(end))
                where = {"thread_id": cut(end.thread_id or ""), "run": end.record.get("run")}
                found.setdefault(tool, []).append({**where, **short, "cut_short": True})
        for end in kept.get(tool, []):
            if limit is not None and len(found.get(tool, [])) >= limit:
                break
            if _run_key(end) in shown or _not_answered(end):  # each run once; answered ones
                continue
            messages = messages_of(end)
            pair = ended_after_pair(messages, tool) if messages is not None else None
            if pair is not None and messages is not None:
                found.setdefault(tool, []).append(
                    {
                        "thread_id": cut(end.thread_id or ""),
                        "run": end.record.get("run"),
                        "tool_result": pair["tool_result"],
                        "final_answer": pair["final_answer"],
                        "judged": _judged(end, tool, messages),
                    }
                )
    return found
