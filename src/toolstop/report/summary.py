"""The figures of `toolstop report`, folded one run at a time (constant memory).

Every figure is a sum over runs; maps are keyed by rules, modes, tools and problems, whose number
does not grow with the number of runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from toolstop.decision import Rule
from toolstop.metrics import deciding_tools
from toolstop.report.arms import Arms, priced_arms
from toolstop.report.candidates import Candidates, cut_short_counts, writes
from toolstop.report.reader import RunEnd
from toolstop.report.records import capped
from toolstop.report.tally import LABELS, SHOWN, Table, Tally, top

__all__ = ["REPORT_VERSION", "Summary", "with_prices"]

REPORT_VERSION = 3
"""The shape of report.json (2 added `candidates`, `would_stop_rules`, `by_day`, `hard_mode`;
3 added cut-short runs: `would_save.cut_short`, each candidate's `cut_short_runs`,
`cut_short` and `ended_on_it`, and counted its `would_save` from the tool's first successful
call; later, without a new version: each candidate's `stoppable_runs`, the runs a stop would
end, and `skips_writes`, the writes a stop would have skipped; `runs_by_advice`; `arms`, the
canary's arms compared, present when a record names an arm or a tool sent back)."""

_TOKENS = ("model_calls", "input_tokens", "output_tokens")
_NARRATOR = ("narrator_calls", "narrator_input_tokens", "narrator_output_tokens")
"""A narrator's calls and tokens (`StopPolicy(narrator=...)`), apart from the agent model's."""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


class Summary:
    """Runs folded into the report's figures. `add` each run, then read `document()`."""

    def __init__(
        self,
        writes: frozenset[str] = frozenset(),
        *,
        examples: int = 0,
        sample: int = 0,
        reask_margin: float = 0.0,
    ) -> None:
        """An empty summary.

        Args:
            writes: The tools the user says write (`--writes`).
            examples: Runs to keep per candidate for their example pairs (`--examples`).
            sample: Runs to sample per candidate for the model judge (`--judge-samples`).
            reask_margin: How much higher (a fraction: 0.01 is one point) the canary's re-ask
                rate may be before its verdict is `worse` (`--reask-margin`, see
                `toolstop.report.arms`).
        """
        self.writes = writes
        self.runs = 0
        self.rules: Counter[str] = Tally(LABELS)
        self.ended_by: Counter[str] = Tally(LABELS)
        self.modes: Counter[str] = Tally(LABELS)
        self.stopped = 0
        self.hard_stops = 0
        self.totals: Counter[str] = Counter()
        self.by_mode: dict[str, Counter[str]] = Table(LABELS)
        self.calls_per_run: Counter[int] = Tally()
        self.stops: dict[str, Counter[str]] = Table()
        self.would_stops: dict[str, Counter[str]] = Table()
        self.tool_calls: Counter[str] = Tally(LABELS)
        self.invalid_by_problem: Counter[str] = Tally(LABELS)
        self.invalid_by_tool: dict[str, Counter[str]] = Table()
        self.answer_failed: dict[str, Counter[str]] = Table()
        self.saved: Counter[str] = Counter()
        self.saving_runs = 0
        self.schema_versions: Counter[str] = Tally(LABELS)
        self.namespaces: Counter[str] = Counter()
        self.subagents: dict[str, Counter[str]] = Table()
        """The `subagent_tool`s nested runs were called as (their parents' tools), each with
        the tools its runs called."""
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.candidates = Candidates(writes, keep=examples, sample=sample)
        self.cut_short: Counter[str] = Counter()
        self.skipped: Counter[str] = Tally()
        self.would_stop_rules: Counter[str] = Tally(LABELS)
        self.outcomes: Counter[str] = Tally(LABELS)
        self.days = Table()
        self.arms = Arms(reask_margin)

    def add(self, end: RunEnd) -> None:
        """Fold one finished run in (its names cut, `records.capped`, whichever reader made it)."""
        record: Mapping[str, Any] = capped(end.record)
        self.runs += 1
        rule = str(record.get("rule", "none"))
        mode = str(record.get("mode", "?"))
        # a canary's shadow arm is the shadow baseline, even when only some tools are shadowed
        # (`canary_tools`: its other tools still stop in the run's mode)
        shadowing = mode == "never" or record.get("arm") == "shadow"
        mode = "never" if shadowing else mode
        self.rules[rule] += 1
        if record.get("ended_by"):  # not the model's answer: another middleware ended it
            self.ended_by[str(record["ended_by"])] += 1
        self.modes[mode] += 1
        self.stopped += bool(record.get("stopped"))
        self.hard_stops += (
            record.get("mode") == "hard" and bool(record.get("stopped")) and rule != "step_budget"
        )
        self.schema_versions[str(record.get("schema_version", 1))] += 1
        self.namespaces["nested" if end.checkpoint_ns else "root"] += 1
        if end.subagent:
            called = self.subagents.setdefault(end.subagent, Counter())
            for tool in record.get("calls_by_tool") or ():
                called[str(tool)] += 1
        per_mode = self.by_mode.setdefault(mode, Counter())
        per_mode["runs"] += 1
        for key in _TOKENS:
            value = _int(record.get(key))
            self.totals[key] += value
            per_mode[key] += value
        for key in _NARRATOR:
            self.totals[key] += _int(record.get(key))
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
        for item in record.get("answer_failed") or []:
            if isinstance(item, Mapping):
                failed = self.answer_failed.setdefault(str(item.get("tool")), Counter())
                failed[str(item.get("why"))] += 1
        saved = record.get("would_save")
        if record.get("would_stop") is not None and isinstance(saved, Mapping):
            self.saving_runs += 1
            for key in _TOKENS:
                self.saved[key] += _int(saved.get(key))
            skipped = record.get("would_skip")
            if isinstance(skipped, list) and skipped:
                cut_short_counts(self.cut_short, self.skipped, skipped, self.writes)
                for key in _TOKENS:
                    self.cut_short[key] += _int(saved.get(key))
        self.candidates.add(record, end)
        self.arms.add(record, end.ended_at)
        would = record.get("would_stop")
        if mode == "never":
            self.would_stop_rules[str(would or "none")] += 1
        self.outcomes[f"would stop: {would}" if mode == "never" and would else rule] += 1
        if end.ended_at is not None:
            day = self.days.setdefault(end.ended_at.astimezone(UTC).date().isoformat(), Counter())
            day["runs"] += 1
            day["stopped"] += bool(record.get("stopped"))
            for key in _TOKENS:
                day[key] += _int(record.get(key))
            if record.get("would_stop") is not None and isinstance(saved, Mapping):
                for key in _TOKENS:
                    day[f"would_save_{key}"] += _int(saved.get(key))
            if self.first is None or end.ended_at < self.first:
                self.first = end.ended_at
            if self.last is None or end.ended_at > self.last:
                self.last = end.ended_at

    def document(self) -> dict[str, Any]:
        """The figures as report.json's body: runs, model calls, tools, by rule and mode.

        Each table keyed by names shows its `SHOWN` largest entries; the rest are folded
        into `folded` (see `toolstop.report.tally`)."""
        folded: dict[str, Any] = {}
        body = self._figures()
        for key, source in self._tables():
            body[key] = top(body[key], source, folded, key)
        body["candidates"], cut = _cut_candidates(body["candidates"], self.candidates)
        if cut:
            folded["candidates"] = cut
        if self.days.folded:  # days are not ranked: the first ones are shown
            folded["by_day"] = {
                "names": len(self.days.folded),
                "at_least": self.days.folded.more,
                "counts": dict(sorted(self.days.other.items())),
            }
        arms = self.arms.document()
        return {**body, "folded": folded, **({"arms": arms} if arms is not None else {})}

    def _tables(self) -> list[tuple[str, Any]]:
        return [
            ("rules", self.rules),
            ("ended_by", self.ended_by),
            ("modes", self.modes),
            ("by_mode", self.by_mode),
            ("model_calls_per_run", self.calls_per_run),
            ("stops_by_tool", self.stops),
            ("would_stop_by_tool", self.would_stops),
            ("tool_calls", self.tool_calls),
            ("invalid_by_problem", self.invalid_by_problem),
            ("invalid_by_tool", self.invalid_by_tool),
            ("answer_failed_by_tool", self.answer_failed),
            ("schema_versions", self.schema_versions),
            ("would_stop_rules", self.would_stop_rules),
            ("runs_by_outcome", self.outcomes),
        ]

    def _figures(self) -> dict[str, Any]:
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
            "narrator": {
                "calls": self.totals["narrator_calls"],
                "input_tokens": self.totals["narrator_input_tokens"],
                "output_tokens": self.totals["narrator_output_tokens"],
            },
            "by_mode": by_mode,
            "model_calls_per_run": {str(k): n for k, n in sorted(self.calls_per_run.items())},
            "stops_by_tool": _nested(self.stops),
            "would_stop_by_tool": _nested(self.would_stops),
            "tool_calls": dict(sorted(self.tool_calls.items())),
            "invalid": self.tool_calls["invalid"],
            "unsignalled": self.tool_calls["unsignalled"],
            "invalid_by_problem": dict(sorted(self.invalid_by_problem.items())),
            "invalid_by_tool": _nested(self.invalid_by_tool),
            "answer_failed_by_tool": _nested(self.answer_failed),
            "would_save": {
                "runs": self.saving_runs,
                **{key: self.saved[key] for key in _TOKENS},
                "share_of_shadow_model_calls": _share(
                    self.saved["model_calls"], never["model_calls"]
                ),
                "share_of_shadow_input_tokens": _share(
                    self.saved["input_tokens"], never["input_tokens"]
                ),
                "cut_short": self._cut_short(),
                "gain": {
                    **{key: self.saved[key] - self.cut_short[key] for key in _TOKENS},
                    "share_of_shadow_model_calls": _share(
                        self.saved["model_calls"] - self.cut_short["model_calls"],
                        never["model_calls"],
                    ),
                },
            },
            "schema_versions": dict(sorted(self.schema_versions.items())),
            "namespaces": dict(sorted(self.namespaces.items())),
            "would_stop_rules": _ordered(self.would_stop_rules, order),
            "runs_by_outcome": _ordered(self.outcomes, order),
            "hard_mode": self._hard_mode(),
            "by_day": [
                {"day": day, **{key: counts[key] for key in _DAY}}
                for day, counts in sorted(self.days.items())
            ],
            "candidates": (
                entries := self.candidates.document(
                    set(self.stops) | set(self.would_stops),
                    subagents={name: list(tools) for name, tools in self.subagents.items()},
                )
            ),
            "candidate_runs": self.candidates.measured,
            "runs_by_advice": self.candidates.ended_by_advice(entries),
        }

    def _cut_short(self) -> dict[str, Any]:
        """The part of `would_save` from cut-short runs: a stop there would have skipped the
        later tools (`would_skip`), so that part is not a saving."""
        counts = self.cut_short
        return {
            "runs": counts["runs"],
            **{key: counts[key] for key in _TOKENS},
            "writes_runs": counts["writes"],
            "skipped_tools": [
                {"tool": name, "runs": runs, "writes": writes(name, self.writes)}
                for name, runs in sorted(self.skipped.items(), key=lambda i: (-i[1], i[0]))[:10]
            ],
        }

    def _hard_mode(self) -> dict[str, Any]:
        """What hard mode saved: each run it stopped skipped at least the final model call.

        The tokens of those calls were never spent, so they are estimated from shadow mode's
        observed savings per call; `None` without shadow-mode savings to estimate from.
        """
        hard = self.by_mode.get("hard", Counter())
        stops = self.hard_stops
        per_call = self.saved["model_calls"]
        return {
            "runs": hard["runs"],
            "stopped": stops,
            "model_calls_saved": stops,
            "input_tokens_saved_estimate": (
                round(stops * self.saved["input_tokens"] / per_call) if per_call else None
            ),
            "output_tokens_saved_estimate": (
                round(stops * self.saved["output_tokens"] / per_call) if per_call else None
            ),
        }


_DAY = (
    "runs",
    "stopped",
    *_TOKENS,
    *(f"would_save_{key}" for key in _TOKENS),
)


def _cut_candidates(
    entries: list[dict[str, Any]], candidates: Candidates
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The first `SHOWN` candidates (they are ranked), and what the rest would save."""
    cut = entries[SHOWN:]
    names = len(cut) + max(len(candidates.runs.folded), len(candidates.ended.folded))
    if not names:
        return entries, None
    saved = Counter[str]()
    for entry in cut:
        saved.update(entry["would_save"])
    other = candidates.ended.other
    saved.update({k: other[k] for k in ("input_tokens", "output_tokens")})
    saved["model_calls"] += other["runs"]
    return entries[:SHOWN], {
        "names": names,
        "at_least": candidates.runs.folded.more or candidates.ended.folded.more,
        "would_save": {k: saved[k] for k in ("model_calls", "input_tokens", "output_tokens")},
    }


def _ordered(counts: Counter[str], order: list[str]) -> dict[str, int]:
    first = {r: counts[r] for r in order if counts[r]}
    return first | {r: n for r, n in sorted(counts.items()) if r not in first}


def _nested(table: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
    return {key: dict(sorted(counts.items())) for key, counts in sorted(table.items())}


def _cost(
    input_tokens: Any, output_tokens: Any, prices: tuple[float, float], digits: int = 4
) -> float | None:
    if not isinstance(input_tokens, int) or not isinstance(output_tokens, int):
        return None
    return round((input_tokens * prices[0] + output_tokens * prices[1]) / 1_000_000, digits)


def with_prices(
    document: dict[str, Any],
    price_in: float,
    price_out: float,
    narrator: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """`document` with money added: `prices` and a `cost` beside each saving.

    Prices are per million tokens, in the currency they are given in; the costs are
    `would_save.cost`, `hard_mode.cost_saved_estimate` and each candidate's
    `would_save.cost` and `gain.cost` (what the page shows: the cut-short runs left out), and
    each canary arm's `cost` and `cost_per_run` (`arms.by_arm`).
    `spent` prices what the runs spent: the agent's model at these prices, a narrator at
    `narrator`'s (its input and output price; the agent model's when not given)."""
    prices = (price_in, price_out)
    if "arms" in document:
        document = {**document, "arms": priced_arms(document["arms"], prices, narrator or prices)}
    saved = document["would_save"]
    hard = document["hard_mode"]
    narrated = document.get("narrator") or {"calls": 0, "input_tokens": 0, "output_tokens": 0}
    narrator_prices = narrator or prices
    return {
        **document,
        "prices": {
            "input_per_million": price_in,
            "output_per_million": price_out,
            "narrator_input_per_million": narrator_prices[0],
            "narrator_output_per_million": narrator_prices[1],
        },
        "spent": {  # to the millionth: a narrator's spend is often below a ten-thousandth
            "model": _cost(document["input_tokens"], document["output_tokens"], prices, 6),
            "narrator": _cost(
                narrated["input_tokens"], narrated["output_tokens"], narrator_prices, 6
            ),
        },
        "would_save": {
            **saved,
            "cost": _cost(saved["input_tokens"], saved["output_tokens"], prices),
        },
        "hard_mode": {
            **hard,
            "cost_saved_estimate": _cost(
                hard["input_tokens_saved_estimate"], hard["output_tokens_saved_estimate"], prices
            ),
        },
        "candidates": [
            {
                **entry,
                **{
                    key: {
                        **entry[key],
                        "cost": _cost(
                            entry[key]["input_tokens"], entry[key]["output_tokens"], prices
                        ),
                    }
                    for key in ("would_save", "gain")
                    if key in entry
                },
            }
            for entry in document["candidates"]
        ],
    }
