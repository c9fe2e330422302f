"""The tools worth converting, ranked from records of an unchanged agent.

report.json's `candidates`.

A run's record (schema version 4 and later) says which tools' results preceded the model's final
answer (`ended_after`), what that final call cost, and how much of the answer repeats each
tool's result (`answer_overlap`). Had such a tool signalled a stop, hard mode would have relayed
its result and saved that call. The overlap tells whether the relay would have been the answer:
an answer that repeats the result's words is one a stop could give; an answer whose words are
the model's own is reasoning a stop would lose.

Folded one run at a time in constant memory: per tool, counts and a histogram of overlaps in
steps of 0.01, so the median and the 10th percentile are exact to 0.01.

Deliberately a heuristic, with limits the docs spell out: word overlap does not read meaning
(an answer may repeat a result's words and still reason, or paraphrase it in other words); it
sees only the final call (a relay also drops any later turns the model would have taken, and a
converted tool may signal `continue` on some calls); a run ending after a parallel turn counts
for each tool of that turn.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping
from typing import Any

from toolstop.report.tally import Table, Tally

__all__ = ["MIN_ENDED_RUNS", "REASONS", "REPEATS", "Candidates", "verdict"]

REPEATS = 0.6
"""A median overlap at or above this: the answer repeats the tool's result (a stop candidate)."""
REASONS = 0.3
"""A median overlap below this: the model adds its own reasoning (keep the model)."""
MIN_ENDED_RUNS = 5
"""Fewer runs ending after a tool than this: too few to tell."""

_RANK = {"candidate": 0, "mixed": 1, "few": 2, "keep": 3, "none": 4}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def verdict(ended_runs: int, median: float | None) -> tuple[str, str]:
    """`(kind, sentence)`: the one-line verdict on a tool.

    From the runs that ended after it and their median overlap. Kinds: `candidate`, `mixed`,
    `keep`, `few`, `none`."""
    if ended_runs == 0 or median is None:
        return "none", "no run ended right after it: converting saves nothing here"
    if ended_runs < MIN_ENDED_RUNS:
        return "few", f"only {ended_runs} run(s) ended after it: too few to tell"
    if median >= REPEATS:
        return "candidate", "the answer repeats its result: a stop candidate"
    if median < REASONS:
        return "keep", "the model adds its own reasoning: keep the model"
    return "mixed", "the answer partly repeats its result: convert only if that part suffices"


def _percentile(histogram: Counter[int], share: float) -> float | None:
    """The nearest-rank percentile of a histogram of hundredths."""
    total = sum(histogram.values())
    if not total:
        return None
    wanted = max(1, math.ceil(round(share * total, 6)))
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= wanted:
            return bucket / 100
    return None  # pragma: no cover - the loop always reaches `total`


class Candidates:
    """Per-tool figures folded from records. `add` each record, then read `document()`."""

    def __init__(self) -> None:
        """No runs yet."""
        self.runs: Tally = Tally()  # bounded: tool names are the model's choice
        self.ended: Table = Table()
        self.overlaps: dict[str, Counter[int]] = Table()
        self.measured = 0

    def add(self, record: Mapping[str, Any]) -> None:
        """Fold one run's record in (records before schema version 4 add nothing)."""
        if "ended_after" not in record:
            return
        self.measured += 1
        calls = record.get("calls_by_tool")
        if isinstance(calls, Mapping):
            for tool, count in calls.items():
                if _int(count) > 0:
                    self.runs[str(tool)] += 1
        after = record.get("ended_after")
        if not isinstance(after, Mapping) or not isinstance(after.get("tools"), Mapping):
            return
        for tool, overlap in after["tools"].items():
            if not isinstance(overlap, (int, float)) or isinstance(overlap, bool):
                continue
            name = str(tool)
            counts = self.ended.setdefault(name, Counter())
            counts["runs"] += 1
            counts["input_tokens"] += _int(after.get("input_tokens"))
            counts["output_tokens"] += _int(after.get("output_tokens"))
            bucket = round(min(max(float(overlap), 0.0), 1.0) * 100)
            self.overlaps.setdefault(name, Counter())[bucket] += 1

    def document(self, signalling: Collection[str] = ()) -> list[dict[str, Any]]:
        """One entry per tool, the ones worth converting first.

        Order: stop candidates, then mixed, too-few, keep-the-model and nothing-to-save tools;
        within each, by model calls converting would save, then by input tokens. Tools in
        `signalling` (they already signal a stop: nothing to convert) come last, in the same
        order, marked `signals`.
        """
        entries: list[dict[str, Any]] = []
        for tool in sorted(set(self.runs) | set(self.ended)):
            ended = self.ended.get(tool, Counter())
            histogram = self.overlaps.get(tool, Counter())
            median = _percentile(histogram, 0.5)
            kind, sentence = verdict(ended["runs"], median)
            entries.append(
                {
                    "tool": tool,
                    "runs": max(self.runs[tool], ended["runs"]),
                    "ended_runs": ended["runs"],
                    "would_save": {
                        "model_calls": ended["runs"],
                        "input_tokens": ended["input_tokens"],
                        "output_tokens": ended["output_tokens"],
                    },
                    "answer_overlap": {"median": median, "p10": _percentile(histogram, 0.1)},
                    "verdict": kind,
                    "why": sentence,
                    "signals": tool in signalling,
                }
            )
        entries.sort(
            key=lambda e: (
                e["signals"],
                _RANK[e["verdict"]],
                -e["would_save"]["model_calls"],
                -e["would_save"]["input_tokens"],
                e["tool"],
            )
        )
        return entries
