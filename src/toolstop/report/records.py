"""Which stop records `report` and `explain` count: numbers in range, or the record is unreadable.

A record read back from a database or a log line is hostile input like any other: a record with
negative tokens once made the report say "hard mode would save -100 model calls". Every number a
record carries that the report adds up or prints is checked here, one record at a time; a record
with one number out of range (negative, NaN, infinite, absurdly large, or not a number at all)
is not counted and is reported as unreadable, and so is a record whose lists are not lists, or
whose canary fields are of the wrong type (`arm` not a string, `modes` not strings to strings,
`sent_back` not a list of strings, a `reask` without a boolean `asked_again`, ...).
Missing numbers and `None` are fine: older records do not have every field.

Every name a record carries (tool names, rules, modes, `ended_by`, `would_stop`, outcome keys,
an invalid signal's tool and problem, the canary's arm, modes, tools sent back and the re-ask's
arm, reason and tools) is cut to `NAME_LIMIT` characters by `capped`, where records
are read and again in `Summary.add` (whichever reader made the run): a name of megabytes once
made the chart fail (`FT_Render_Glyph raster overflow`). Thread ids are cut where they are
shown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["LIMIT", "NAME_LIMIT", "capped", "cut", "out_of_range"]

NAME_LIMIT = 200
"""The longest name (tool, rule, mode, outcome key, thread id) the report keeps, in characters;
a longer one is cut to this length, its last character `…`."""

LIMIT = 10**12
"""The largest count a record may hold (model calls, tokens, turns): anything above is absurd."""

_COUNTS = (
    "run",
    "schema_version",
    "model_calls",
    "input_tokens",
    "output_tokens",
    "tool_turns",
    "transient_retries",
)
_LISTS = ("tools", "tool_call_ids", "relayed", "invalid_signals", "answer_failed")
_SAVED = ("model_calls", "input_tokens", "output_tokens")


def _count(value: Any) -> bool:
    return value is None or (
        isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= LIMIT
    )


def _share(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and 0 <= value <= 1


def _counts_of(table: Any) -> bool:
    return table is None or (
        isinstance(table, Mapping) and all(_count(value) for value in table.values())
    )


def out_of_range(record: Mapping[str, Any]) -> str | None:
    """The first field of `record` out of range or of the wrong shape; `None` when all are right.

    Lists (`tools`, `invalid_signals`, ...) must be lists, and tool names strings."""
    for key in _LISTS:
        value = record.get(key)
        if value is not None and not isinstance(value, list):
            return key
    if not all(isinstance(tool, str) for tool in record.get("tools") or []):
        return "tools"
    for key in _COUNTS:
        if not _count(record.get(key)):
            return key
    saved = record.get("would_save")
    if saved is not None:
        if not isinstance(saved, Mapping):
            return "would_save"
        for key in _SAVED:
            if not _count(saved.get(key)):
                return f"would_save.{key}"
    for key in ("outcomes", "calls_by_tool"):
        if not _counts_of(record.get(key)):
            return key
    canary = _canary_fields(record)
    if canary is not None:
        return canary
    after = record.get("ended_after")
    if after is not None:
        if not isinstance(after, Mapping):
            return "ended_after"
        for key in ("input_tokens", "output_tokens"):
            if not _count(after.get(key)):
                return f"ended_after.{key}"
        tools = after.get("tools")
        if tools is not None and not (
            isinstance(tools, Mapping) and all(_share(v) for v in tools.values())
        ):
            return "ended_after.tools"
    return None


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _canary_fields(record: Mapping[str, Any]) -> str | None:
    """The first of a canary's fields (`arm`, `modes`, `sent_back`, `reask`) of a wrong type."""
    if record.get("arm") is not None and not isinstance(record["arm"], str):
        return "arm"
    modes = record.get("modes")
    if modes is not None and not (
        isinstance(modes, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in modes.items())
    ):
        return "modes"
    sent = record.get("sent_back")
    if sent is not None and not _strings(sent):
        return "sent_back"
    reask = record.get("reask")
    if reask is None:
        return None
    if not isinstance(reask, Mapping):
        return "reask"
    if not isinstance(reask.get("asked_again"), bool):
        return "reask.asked_again"
    if reask.get("run") is not None and not _count(reask["run"]):
        return "reask.run"
    for key, kind in (("why", str), ("arm", str), ("stopped", bool)):
        if reask.get(key) is not None and not isinstance(reask[key], kind):
            return f"reask.{key}"
    if reask.get("tools") is not None and not _strings(reask["tools"]):
        return "reask.tools"
    return None


def cut(text: str, limit: int = NAME_LIMIT) -> str:
    """`text` at most `limit` characters long, cut with `…`."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _name(value: Any) -> Any:
    """A name cut to `NAME_LIMIT`; a container where a name belongs is named by its type."""
    if isinstance(value, str):
        return cut(value)
    if isinstance(value, (Mapping, list, tuple, set, bytes)):
        return f"<{type(value).__name__}>"
    return value


def _keys(table: Any) -> Any:
    """`table` with its keys cut (counts of keys that become equal added up)."""
    if not isinstance(table, Mapping):
        return table
    out: dict[Any, Any] = {}
    for key, value in table.items():
        name = _name(key)
        if name in out and isinstance(out[name], int) and isinstance(value, int):
            out[name] += value
        else:
            out.setdefault(name, value)
    return out


def _names(items: Any) -> Any:
    return [_name(item) for item in items] if isinstance(items, list) else items


_SCALARS = ("rule", "mode", "ended_by", "would_stop", "arm")
_NAME_LISTS = ("tools", "asked", "would_skip", "relayed", "sent_back")
_TABLES = ("outcomes", "calls_by_tool", "after_first")


def capped(record: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `record` whose names are at most `NAME_LIMIT` characters (see the module)."""
    out = dict(record)
    for key in _SCALARS:
        if key in out:
            out[key] = _name(out[key])
    for key in _NAME_LISTS:
        if key in out:
            out[key] = _names(out[key])
    for key in _TABLES:
        if key in out:
            out[key] = _keys(out[key])
    first = out.get("after_first")
    if isinstance(first, Mapping):
        out["after_first"] = {
            tool: {**entry, "skipped": _names(entry.get("skipped"))}
            if isinstance(entry, Mapping) and "skipped" in entry
            else entry
            for tool, entry in first.items()
        }
    after = out.get("ended_after")
    if isinstance(after, Mapping) and "tools" in after:
        out["ended_after"] = {**after, "tools": _keys(after["tools"])}
    modes = out.get("modes")
    if isinstance(modes, Mapping):
        out["modes"] = {_name(tool): _name(mode) for tool, mode in modes.items()}
    reask = out.get("reask")
    if isinstance(reask, Mapping):
        out["reask"] = {
            **reask,
            **{k: _name(reask[k]) for k in ("arm", "why") if k in reask},
            **({"tools": _names(reask["tools"])} if "tools" in reask else {}),
        }
    for key, names in (
        ("invalid_signals", ("tool", "problem")),
        ("answer_failed", ("tool", "why")),
    ):
        items = out.get(key)
        if isinstance(items, list):
            out[key] = [
                {**item, **{k: _name(item[k]) for k in names if k in item}}
                if isinstance(item, Mapping)
                else item
                for item in items
            ]
    return out
