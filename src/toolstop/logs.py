"""The `toolstop` logger's records as JSON lines: the format `toolstop report --log` reads.

Attach the formatter to any handler of logger `toolstop` (or use `log_json_lines`), and ship the
file as you ship other logs. One object per line:

```text
{"time": "2025-05-01T12:00:00.123456+00:00", "level": "INFO", "logger": "toolstop",
 "event": "run_end", "message": "run ended: ...", "thread_id": "t-1", "checkpoint_ns": "",
 "record": {"schema_version": 4, "run": 1, "rule": "completed", ...}}
{"time": "...", "level": "WARNING", "logger": "toolstop", "event": "malformed_signal",
 "message": "...", "tool": "lookup", "problem": "stop_not_bool"}
```

(each on one line). `event` is `run_end` for a finished run (with its stop record), and
`malformed_signal` for the once-per-tool warning; other records of the logger are `log`. Like the
records themselves, the lines hold names, ids, counts and rules only, never tool content or
arguments. Non-JSON values are written as strings.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import IO, Any

from toolstop.observe import EVENT_RUN_END

__all__ = ["EVENT_MALFORMED", "EVENT_RUN_END", "JsonLines", "log_json_lines"]

EVENT_MALFORMED = "malformed_signal"


class JsonLines(logging.Formatter):
    """A `logging.Formatter` that writes each record of logger `toolstop` as one JSON line."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON (see the module docstring for the fields)."""
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "event": "log",
            "message": record.getMessage(),
        }
        stop_record = getattr(record, "toolstop", None)
        malformed = getattr(record, "toolstop_signal", None)
        if isinstance(stop_record, dict):
            thread = getattr(record, "toolstop_thread", None) or {}
            line["event"] = EVENT_RUN_END
            line["thread_id"] = thread.get("thread_id")
            line["checkpoint_ns"] = thread.get("checkpoint_ns", "")
            line["record"] = stop_record
        elif isinstance(malformed, dict):
            line["event"] = EVENT_MALFORMED
            line["tool"] = malformed.get("tool")
            line["problem"] = malformed.get("problem")
        return json.dumps(line, default=str, separators=(",", ":"))


def log_json_lines(target: str | IO[str], *, level: int = logging.INFO) -> logging.Handler:
    """Send logger `toolstop`'s records to `target` as JSON lines; return the handler.

    Args:
        target: A file path (appended to) or an open text stream.
        level: The level the logger and the handler are set to; `INFO` includes every finished
            run, `WARNING` only malformed signals.

    Returns:
        The handler, already added to the logger (remove it with `removeHandler`).
    """
    handler: logging.Handler
    if isinstance(target, str):
        handler = logging.FileHandler(target, encoding="utf-8")
    else:
        handler = logging.StreamHandler(target)
    handler.setFormatter(JsonLines())
    handler.setLevel(level)
    logger = logging.getLogger("toolstop")
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
