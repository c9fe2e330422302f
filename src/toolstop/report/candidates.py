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
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from toolstop.report.advice import (
    ADVICE,
    CUT_SHORT_SHARE,
    Judgements,
    advise,
    convert_line,
    verdict_of,
)
from toolstop.report.model_judge import Sample
from toolstop.report.records import cut
from toolstop.report.tally import LABELS, TRACKED, Table, Tally

__all__ = [
    "MIN_ENDED_RUNS",
    "READ_ENDINGS",
    "READ_WORDS",
    "REASONS",
    "REPEATS",
    "WRITE_WORDS",
    "Candidates",
    "cut_short_counts",
    "verdict",
    "writes",
]

WRITE_WORDS = frozenset(
    {
        "add", "apply", "approve", "assign", "book", "buy", "cancel", "change", "charge",
        "checkout", "close", "confirm", "create", "delete", "deposit", "edit", "email", "exchange",
        "execute", "grant", "initiate", "insert", "invite", "issue", "merge", "modify", "notify",
        "order", "pay", "place", "post", "publish", "purchase", "refund", "register", "reject",
        "remove", "rename", "reserve", "reset", "revoke", "run", "save", "schedule", "send",
        "set", "ship", "sign", "submit", "subscribe", "transfer", "unsubscribe", "update",
        "upload", "upsert", "withdraw", "write",
    }
)  # fmt: skip
"""Words that make a tool a write when its name has one as a word (`book_reservation`,
`initiateReturn`, `send-email`); `--writes a,b` names more. A heuristic on names only."""

READ_WORDS = frozenset(
    {"check", "fetch", "find", "get", "list", "lookup", "query", "read", "search", "show", "view"}
)
"""A name that starts with one of these reads, whatever follows (`get_order_status`,
`search_direct_flight`), unless `--writes` names it."""

READ_ENDINGS = frozenset(
    {"details", "history", "info", "policies", "policy", "status", "summary", "count", "list"}
)
"""A name that ends with one of these reads too (`order_status`, `refund_policy`)."""

_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_ENDINGS = ("", "s", "es", "ed", "d", "ing", "ion", "ment")


def _words(tool: str) -> list[str]:
    return [w.casefold() for w in _NAME_WORD.findall(tool)]


def writes(tool: str, declared: Collection[str] = ()) -> bool:
    """Whether `tool` writes, by the user's word or by its name.

    `declared` names it, or a word of its name is a `WRITE_WORDS` verb (or that verb with -s,
    -ed, -ing, -ion, -ment), its first word is not a `READ_WORDS` verb and its last not a
    `READ_ENDINGS` noun. A name says nothing sure: `--writes` overrides it only by adding
    tools."""
    if tool in declared:
        return True
    words = _words(tool)
    if not words or words[0] in READ_WORDS or words[-1] in READ_ENDINGS:
        return False
    return any(w.removesuffix(e) in WRITE_WORDS for w in words for e in _ENDINGS if w.endswith(e))


REPEATS = 0.6
"""A median overlap at or above this: the answer repeats the tool's result (a stop candidate)."""
REASONS = 0.3
"""A median overlap below this: the model adds its own reasoning (keep the model)."""
MIN_ENDED_RUNS = 5
"""Fewer runs ending after a tool than this: too few to tell."""

_SUBAGENT = (
    "; but it is a subagent_tool: it forwards its sub-agent's signal already, so convert the "
    "sub-agent's own tools ({tools}), whose stops travel up"
)
"""Added to a `subagent_tool`'s `advice_why` (see `Candidates.document`)."""
_SUBAGENT_TOOLS = 8
"""At most this many of a sub-agent's tools are named."""

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


def cut_short_counts(
    counts: Counter[str], skipped: Counter[str], names: Any, declared: Collection[str]
) -> None:
    """Count one cut-short run whose later tools were `names` into `counts` and `skipped`."""
    later = [str(n) for n in names] if isinstance(names, list) else []
    counts["runs"] += 1
    counts["writes"] += any(writes(n, declared) for n in later)
    for name in dict.fromkeys(later):
        skipped[name] += 1


_THREADS_MAX = 10
"""At most this many threads are listed per candidate (see `examples.THREADS_MAX`)."""


def _remember(threads: dict[str, dict[str, None]], tool: str, thread: Any) -> None:
    """Remember `thread` behind `tool` (the first `_THREADS_MAX` distinct ones, cut at
    `NAME_LIMIT`)."""
    if not isinstance(thread, str) or (tool not in threads and len(threads) >= TRACKED):
        return
    seen = threads.setdefault(tool, {})
    if len(seen) < _THREADS_MAX:
        seen[cut(thread)] = None


_SKIPPED_SHOWN = 10
"""At most this many skipped tools are listed per candidate (the most often skipped)."""


class Candidates:
    """Per-tool figures folded from records. `add` each record, then read `document()`."""

    def __init__(self, writes: Collection[str] = (), *, keep: int = 0, sample: int = 0) -> None:
        """No runs yet.

        Args:
            writes: Tools the user says write (beside the names that say so).
            keep: How many runs that ended right after each tool to keep (`ended`), to read
                their example pairs back (`--examples`); none by default.
            sample: How many of those runs to sample per tool (`sampled`, a deterministic
                sample, see `model_judge.Sample`) for the model judge (`--judge-samples`).

        Every table keyed by tool names is bounded (`toolstop.report.tally`): the names are the
        model's choice.
        """
        self.declared = frozenset(writes)
        self.keep = keep
        self.kept: dict[str, list[Any]] = {}
        self.sampled = Sample(sample)
        self.threads: dict[str, dict[str, None]] = {}
        self.calling_threads: dict[str, dict[str, None]] = {}
        self.cut_threads: dict[str, dict[str, None]] = {}
        self.cut_kept: dict[str, list[Any]] = {}
        """Per tool, the first `keep` runs a stop on it would have cut short: their pairs are
        shown first (`cut_shown`, `examples.read_examples`)."""
        self.runs: Tally = Tally()
        self.ended: Table = Table()
        self.overlaps: Table = Table()
        self.hard: Table = Table()
        self.skipped: Table = Table()
        self.judgements = Judgements()
        self.measured = 0
        self.ended_after_tool = 0
        """Runs whose final answer followed a tool turn (whatever its tools)."""

    def add(self, record: Mapping[str, Any], end: Any = None) -> None:
        """Fold one run's record in (records before schema version 4 add nothing).

        `end` is where the run lives (a `RunEnd`): its thread is listed behind its tools."""
        if "ended_after" not in record:
            return
        self.measured += 1
        thread = getattr(end, "thread_id", None)
        calls = record.get("calls_by_tool")
        if isinstance(calls, Mapping):
            for tool, count in calls.items():
                if _int(count) > 0:
                    self.runs[str(tool)] += 1
                    _remember(self.calling_threads, str(tool), thread)
        firsts = record.get("after_first")
        if isinstance(firsts, Mapping):
            for tool, entry in firsts.items():
                if isinstance(entry, Mapping):
                    self._add_first(str(tool), entry, end)
            asked = record.get("asked")
            if record.get("rule") == "interrupted" and isinstance(asked, list):
                # left open on those calls, its last turn never folded: it ended on them
                for tool in dict.fromkeys(str(name) for name in asked):
                    if tool not in firsts:
                        self._add_first(tool, {"skipped": []}, unanswered=True)
                        _remember(self.calling_threads, tool, thread)
                        if not isinstance(calls, Mapping) or not _int(calls.get(tool)):
                            self.runs[tool] += 1
        after = record.get("ended_after")
        if not isinstance(after, Mapping) or not isinstance(after.get("tools"), Mapping):
            return
        self.judgements.add(after.get("judged"))
        self.ended_after_tool += bool(after["tools"])
        for tool, overlap in after["tools"].items():
            if not isinstance(overlap, (int, float)) or isinstance(overlap, bool):
                continue
            name = str(tool)
            if isinstance(firsts, Mapping) and (name in self.hard or len(self.hard) < TRACKED):
                # schema 5: no `after_first` entry means no successful call (an error result):
                # hard mode would not have stopped there, so it saves nothing (not the final call)
                self.hard.setdefault(name, Counter())
            _remember(self.threads, name, thread)
            if end is not None and (name in self.kept or len(self.kept) < TRACKED):
                kept = self.kept.setdefault(name, [])
                if len(kept) < self.keep:
                    kept.append(end)
                self.sampled.add(name, end)
            counts = self.ended.setdefault(name, Counter())
            counts["runs"] += 1
            counts["input_tokens"] += _int(after.get("input_tokens"))
            counts["output_tokens"] += _int(after.get("output_tokens"))
            bucket = round(min(max(float(overlap), 0.0), 1.0) * 100)
            self.overlaps.setdefault(name, Counter())[bucket] += 1

    def add_open(self, record: Mapping[str, Any], thread: Any = None) -> None:
        """Fold in a run still open at the newest checkpoint (`record` is its state so far).

        A run left open on tool calls (`asked`: a hand-off that paused it with `interrupt()`,
        or the process ended) ended on them for now: each counts toward its tool, as a run
        that ended on it (`ended_on_it`), saving nothing. Nothing else of it is counted."""
        asked = record.get("asked")
        if not isinstance(asked, list):
            return
        for tool in dict.fromkeys(str(name) for name in asked):
            if tool not in self.hard and len(self.hard) >= TRACKED:
                continue  # bounded: tool names are the model's choice (report.tally)
            self._add_first(tool, {"skipped": []}, unanswered=True)
            self.runs[tool] += 1
            _remember(self.calling_threads, tool, thread)

    def _add_first(
        self, tool: str, entry: Mapping[str, Any], end: Any = None, *, unanswered: bool = False
    ) -> None:
        """One run's `after_first` entry of `tool`: what hard mode would have done there.

        `unanswered`: the run ended on a call of `tool` that never got a result (no entry of its
        own): it ended on it, but no successful call of it would have stopped it."""
        hard = self.hard.setdefault(tool, Counter())
        hard["unanswered"] += unanswered
        skipped = entry.get("skipped")
        cut = isinstance(skipped, list) and bool(skipped)
        if cut and end is not None:
            _remember(self.cut_threads, tool, getattr(end, "thread_id", None))
            if self.keep and (tool in self.cut_kept or len(self.cut_kept) < TRACKED):
                kept = self.cut_kept.setdefault(tool, [])
                if len(kept) < self.keep:
                    kept.append(end)
        hard["runs"] += 1
        hard["ended_on_it"] += not _int(entry.get("model_calls"))
        for key in ("model_calls", "input_tokens", "output_tokens"):
            hard[key] += _int(entry.get(key))
            if cut:
                hard[f"cut_{key}"] += _int(entry.get(key))
        if cut:
            counts = Counter[str]()
            cut_short_counts(
                counts, self.skipped.setdefault(tool, Tally(LABELS)), skipped, self.declared
            )
            hard["cut_runs"] += 1
            hard["cut_writes"] += counts["writes"]

    def document(
        self,
        signalling: Collection[str] = (),
        *,
        subagents: Mapping[str, Sequence[str]] | None = None,
    ) -> list[dict[str, Any]]:
        """One entry per tool, the ones worth converting first.

        Order: stop candidates, then mixed, too-few, keep-the-model, cut-short and
        nothing-to-save tools;
        within each, by model calls converting would save, then by input tokens. Tools in
        `signalling` (they already signal a stop: nothing to convert) come last, in the same
        order, marked `signals`. So do `subagents`, the `subagent_tool`s nested runs were
        called as (each with the tools its runs called): they forward their sub-agent's signal;
        their advice names the sub-agent's tools to convert, and they have no `convert_line`.
        """
        subagents = subagents or {}
        entries: list[dict[str, Any]] = []
        for tool in sorted(set(self.runs) | set(self.ended) | set(self.hard)):
            ended = self.ended.get(tool, Counter())
            histogram = self.overlaps.get(tool, Counter())
            median = _percentile(histogram, 0.5)
            kind, sentence = verdict(ended["runs"], median)
            hard = self.hard.get(tool)
            runs = max(self.runs[tool], ended["runs"], hard["runs"] if hard else 0)
            cut_runs = hard["cut_runs"] if hard else 0
            # schema 5: the runs a stop would end are those with a successful call of it, not
            # a call left without a result
            stoppable = hard["runs"] - hard["unanswered"] if hard is not None else runs
            written = self._written(tool)
            judged = self.judgements.of(tool)
            advice, why = advise(
                runs=runs,
                ended_runs=ended["runs"],
                cut_short_runs=cut_runs,
                judged=judged,
                verdict=kind,
                why=sentence,
                stoppable_runs=stoppable,
                writes=(hard["cut_writes"] if hard else 0, written),
                tool=tool,
            )
            on_it = self.hard.get(tool, Counter())["ended_on_it"]
            if kind == "none" and on_it and advice != "cut_short":
                sentence = why = (
                    f"{on_it} run(s) ended on it (a hand-off, a call limit, a run left open on "
                    "its call): no model call after it to save"
                )
            if tool in subagents:  # it signals already: the sub-agent's tools are to convert
                named = ", ".join(subagents[tool][:_SUBAGENT_TOOLS]) or "not in this source"
                why += _SUBAGENT.format(tools=named)
            if judged["runs"] or advice == "cut_short":
                # the verdict and its sentence follow the advice, so the three never disagree
                kind, sentence = verdict_of(advice, ended["runs"]), why
            entries.append(
                {
                    "tool": tool,
                    "runs": runs,
                    "stoppable_runs": stoppable,
                    "ended_runs": ended["runs"],
                    "would_save": (saved := self._would_save(tool, ended)),
                    "cut_short_runs": cut_runs,
                    "cut_short": (cut := self._cut_short(tool)),
                    "skips_writes": written if hard and hard["cut_writes"] else [],
                    "gain": {key: saved[key] - cut[key] for key in saved},
                    "ended_on_it": on_it,
                    "answer_overlap": {"median": median, "p10": _percentile(histogram, 0.1)},
                    "verdict": kind,
                    "why": sentence,
                    "advice": advice,
                    "advice_why": why,
                    "convert_line": None
                    if tool in subagents
                    else convert_line(tool, advice, judged),
                    "judged": judged,
                    "threads": self._threads(tool, cut_first=advice == "cut_short"),
                    "signals": tool in signalling or tool in subagents,
                }
            )
        self._sort(entries)
        return entries

    def ended_by_advice(self, entries: list[dict[str, Any]]) -> dict[str, int]:
        """Runs by the advice on the tool whose result their final answer followed.

        From every entry of `document()` (none folded away; tools that signal already left out), in
        `ADVICE` order; `none`: runs measured here that ended after no tool (an answer without
        a tool call). A run that ended after parallel calls counts for each of their tools."""
        counts: Counter[str] = Counter()
        for entry in entries:
            if not entry["signals"]:
                counts[entry["advice"]] += entry["ended_runs"]
        shown = {advice: counts[advice] for advice in ADVICE if counts[advice]}
        return {**shown, "none": self.measured - self.ended_after_tool}

    def _would_save(self, tool: str, ended: Counter[str]) -> dict[str, int]:
        """What hard mode would save: every model call after the tool's first successful call
        (`after_first`, schema 5); from older records, the final calls right after it."""
        hard = self.hard.get(tool)
        if hard is None:
            return {
                "model_calls": ended["runs"],
                "input_tokens": ended["input_tokens"],
                "output_tokens": ended["output_tokens"],
            }
        keys = ("model_calls", "input_tokens", "output_tokens")
        return {key: hard[key] for key in keys}

    def cut_shown(self) -> dict[str, list[Any]]:
        """Per tool, the cut-short runs whose pairs come first among its examples.

        Every one kept (`keep`) for a tool a stop on which cuts short enough runs to be advised
        `cut_short`, the first one for any other."""
        shown: dict[str, list[Any]] = {}
        for tool, ends in self.cut_kept.items():
            hard = self.hard.get(tool, Counter())
            stoppable = hard["runs"] - hard["unanswered"]
            cut = hard["cut_runs"] >= CUT_SHORT_SHARE * max(stoppable, 1)
            shown[tool] = list(ends) if cut else ends[:1]
        return shown

    def _cut_short(self, tool: str) -> dict[str, Any]:
        """The cut-short part of `would_save`: runs where a stop would have skipped tools."""
        hard = self.hard.get(tool, Counter())
        skipped = self.skipped.get(tool, Counter())
        return {
            "runs": hard["cut_runs"],
            "model_calls": hard["cut_model_calls"],
            "input_tokens": hard["cut_input_tokens"],
            "output_tokens": hard["cut_output_tokens"],
            "writes_runs": hard["cut_writes"],
            "skipped_tools": [
                {"tool": name, "runs": runs, "writes": writes(name, self.declared)}
                for name, runs in sorted(skipped.items(), key=lambda i: (-i[1], i[0]))[
                    :_SKIPPED_SHOWN
                ]
            ],
        }

    def _written(self, tool: str) -> list[str]:
        """The tools that write which a stop on `tool` would have skipped, most often first."""
        skipped = self.skipped.get(tool, Counter())
        ranked = sorted(skipped.items(), key=lambda i: (-i[1], i[0]))
        return [name for name, _ in ranked if writes(name, self.declared)][:_SKIPPED_SHOWN]

    def _threads(self, tool: str, *, cut_first: bool = False) -> list[str]:
        """Up to `THREADS_MAX` threads behind `tool`: runs that ended right after it first;
        for a tool advised `cut_short` (`cut_first`), the runs a stop would have cut short."""
        first = list(self.cut_threads.get(tool, {})) if cut_first else []
        ended = [t for t in self.threads.get(tool, {}) if t not in first]
        calling = [t for t in self.calling_threads.get(tool, {}) if t not in (*first, *ended)]
        return [*first, *ended, *calling][:_THREADS_MAX]

    @staticmethod
    def _sort(entries: list[dict[str, Any]]) -> None:
        entries.sort(
            key=lambda e: (
                e["signals"],
                _RANK[e["verdict"]],
                ADVICE.index(e["advice"]),
                -e["would_save"]["model_calls"],
                -e["would_save"]["input_tokens"],
                e["tool"],
            )
        )
