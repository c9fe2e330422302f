"""The figures of `toolstop report`, folded one run at a time (constant memory).

Every figure is a sum over runs; maps are keyed by rules, modes, tools and problems, whose number
does not grow with the number of runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from toolstop.decision import Rule
from toolstop.metrics import deciding_tools
from toolstop.report.reader import RunEnd

__all__ = ["REPORT_VERSION", "Summary"]

REPORT_VERSION = 1
"""The shape of report.json."""

_TOKENS = ("model_calls", "input_tokens", "output_tokens")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


class Summary:
    """Runs folded into the report's figures. `add` each run, then read `document()`."""

    def __init__(self) -> None:
        """An empty summary."""
        self.runs = 0
        self.rules: Counter[str] = Counter()
        self.ended_by: Counter[str] = Counter()
        self.modes: Counter[str] = Counter()
        self.stopped = 0
        self.totals: Counter[str] = Counter()
        self.by_mode: dict[str, Counter[str]] = {}
        self.calls_per_run: Counter[int] = Counter()
        self.stops: dict[str, Counter[str]] = {}
        self.would_stops: dict[str, Counter[str]] = {}
        self.tool_calls: Counter[str] = Counter()
        self.invalid_by_problem: Counter[str] = Counter()
        self.invalid_by_tool: dict[str, Counter[str]] = {}
        self.saved: Counter[str] = Counter()
        self.saving_runs = 0
        self.schema_versions: Counter[str] = Counter()
        self.namespaces: Counter[str] = Counter()
        self.first: datetime | None = None
        self.last: datetime | None = None

    def add(self, end: RunEnd) -> None:
        """Fold one finished run in."""
        record: Mapping[str, Any] = end.record
        self.runs += 1
        rule = str(record.get("rule", "none"))
        mode = str(record.get("mode", "?"))
        self.rules[rule] += 1
        if record.get("ended_by"):  # not the model's answer: another middleware ended it
            self.ended_by[str(record["ended_by"])] += 1
        self.modes[mode] += 1
        self.stopped += bool(record.get("stopped"))
        self.schema_versions[str(record.get("schema_version", 1))] += 1
        self.namespaces["nested" if end.checkpoint_ns else "root"] += 1
        per_mode = self.by_mode.setdefault(mode, Counter())
        per_mode["runs"] += 1
        for key in _TOKENS:
            value = _int(record.get(key))
            self.totals[key] += value
            per_mode[key] += value
        self.calls_per_run[_int(record.get("model_calls"))] += 1
        stop_rule, tools, shadow = deciding_tools(record)
        table = self.would_stops if shadow else self.stops
        for tool in tools:
            table.setdefault(tool, Counter())[str(stop_rule)] += 1
        outcomes = record.get("outcomes")
        if isinstance(outcomes, Mapping):
            for key, value in outcomes.items():
                self.tool_calls[str(key)] += _int(value)
        for item in record.get("invalid_signals") or []:
            if isinstance(item, Mapping):
                problem = str(item.get("problem"))
                self.invalid_by_problem[problem] += 1
                self.invalid_by_tool.setdefault(str(item.get("tool")), Counter())[problem] += 1
        saved = record.get("would_save")
        if record.get("would_stop") is not None and isinstance(saved, Mapping):
            self.saving_runs += 1
            for key in _TOKENS:
                self.saved[key] += _int(saved.get(key))
        if end.ended_at is not None:
            if self.first is None or end.ended_at < self.first:
                self.first = end.ended_at
            if self.last is None or end.ended_at > self.last:
                self.last = end.ended_at

    def document(self) -> dict[str, Any]:
        """The figures as report.json's body: runs, model calls, tools, by rule and mode."""
        order = [r.value for r in Rule]
        rules = {r: self.rules[r] for r in order if self.rules[r]}
        rules |= {r: n for r, n in sorted(self.rules.items()) if r not in rules}
        never = self.by_mode.get("never", Counter())
        by_mode = {
            mode: {
                **{key: counts[key] for key in ("runs", *_TOKENS)},
                "model_calls_per_run": _share(counts["model_calls"], counts["runs"]),
            }
            for mode, counts in sorted(self.by_mode.items())
        }
        return {
            "runs": self.runs,
            "first_run_ended": self.first.isoformat() if self.first else None,
            "last_run_ended": self.last.isoformat() if self.last else None,
            "rules": rules,
            "ended_by": dict(sorted(self.ended_by.items())),
            "stopped": self.stopped,
            "modes": dict(sorted(self.modes.items())),
            "hard_share": _share(self.modes["hard"], self.runs),
            **{key: self.totals[key] for key in _TOKENS},
            "by_mode": by_mode,
            "model_calls_per_run": {str(k): n for k, n in sorted(self.calls_per_run.items())},
            "stops_by_tool": _nested(self.stops),
            "would_stop_by_tool": _nested(self.would_stops),
            "tool_calls": dict(sorted(self.tool_calls.items())),
            "invalid": self.tool_calls["invalid"],
            "unsignalled": self.tool_calls["unsignalled"],
            "invalid_by_problem": dict(sorted(self.invalid_by_problem.items())),
            "invalid_by_tool": _nested(self.invalid_by_tool),
            "would_save": {
                "runs": self.saving_runs,
                **{key: self.saved[key] for key in _TOKENS},
                "share_of_shadow_model_calls": _share(
                    self.saved["model_calls"], never["model_calls"]
                ),
                "share_of_shadow_input_tokens": _share(
                    self.saved["input_tokens"], never["input_tokens"]
                ),
            },
            "schema_versions": dict(sorted(self.schema_versions.items())),
            "namespaces": dict(sorted(self.namespaces.items())),
        }


def _nested(table: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
    return {key: dict(sorted(counts.items())) for key, counts in sorted(table.items())}
