"""The canary's arms side by side: runs, model calls, tokens, money and the re-ask rate.

A policy with a canary (`StopPolicy(mode="hard", canary=0.1)`) writes each run's arm in its
record (`arm`: `canary` or `shadow`), and each run that follows a stop (or, in the shadow arm, a
would-be stop) says whether the user asked again (`reask`, about the thread's previous run).
`Arms` folds those records one at a time; `document()` is report.json's `arms`.

The re-ask rate of an arm is `asked_again / stops`: the `reask` entries naming a run of that arm
(`reask.arm`) whose verdict is `asked_again`, over all `reask` entries naming a run of that arm.
Its 95% interval is Wilson's score interval; the difference canary - shadow gets Newcombe's
hybrid score interval (his method 10, built from the two Wilson intervals).

The verdict (`verdict`), for the arms and for each tool (`reask.tools`, run n's deciding tools):

- `too_few`: fewer than `MIN_STOPS` stops read in either arm: nothing is claimed.
- `worse`: the whole interval of the difference lies above the margin (`--reask-margin`, in
  percentage points, default 0): the canary's users ask again more often, beyond the margin.
- `within_margin`: the whole interval lies above 0, not wholly above the margin: higher, by
  less than the margin allows (only with a margin).
- `better`: the whole interval lies below 0.
- `no_difference`: otherwise (the interval holds 0).

Deliberately not handled: each tool is tested on its own at 95%, with no correction for the
number of tools compared (with twenty tools and no real difference, one "worse" in a report is
to be expected about half the time); records without an arm are counted (`runs_without_arm`)
and otherwise left out; arms other than `canary` and `shadow` get their figures, no verdict.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from toolstop.report.tally import LABELS, SHOWN, TRACKED, Labels, Table, Tally

__all__ = [
    "MIN_STOPS",
    "Z95",
    "Arms",
    "arms_check",
    "arms_lines",
    "newcombe",
    "priced_arms",
    "wilson",
]

Z95 = 1.959963984540054
"""The standard normal quantile of 0.975: a two-sided 95% interval."""
MIN_STOPS = 30
"""Stops read per arm (entries with a `reask`) below which no verdict is given."""
CANARY, SHADOW = "canary", "shadow"
_TOKENS = ("model_calls", "input_tokens", "output_tokens")
_NARRATOR = ("narrator_calls", "narrator_input_tokens", "narrator_output_tokens")
_ORDER = {"worse": 0, "within_margin": 1, "better": 2, "no_difference": 3, "too_few": 4}


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson's score interval for `k` successes in `n` trials; `None` when `n` is 0."""
    if n <= 0:
        return None
    p = k / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(k1: int, n1: int, k2: int, n2: int, z: float = Z95) -> tuple[float, float] | None:
    """Newcombe's hybrid score interval for `k1/n1 - k2/n2`; `None` when either `n` is 0."""
    first, second = wilson(k1, n1, z), wilson(k2, n2, z)
    if first is None or second is None:
        return None
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = first, second
    d = p1 - p2
    return d - math.hypot(p1 - l1, u2 - p2), d + math.hypot(u1 - p1, p2 - l2)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _per(total: int, runs: int) -> float | None:
    return round(total / runs, 2) if runs else None


def _rate(counts: Mapping[str, int]) -> dict[str, Any]:
    n, k = counts.get("stops", 0), counts.get("asked_again", 0)
    interval = wilson(k, n)
    return {
        "stops": n,
        "asked_again": k,
        "rate": round(k / n, 4) if n else None,
        "interval": [round(x, 4) for x in interval] if interval else None,
    }


def compare(canary: Mapping[str, int], shadow: Mapping[str, int], margin: float) -> dict[str, Any]:
    """The difference canary - shadow in re-ask rate, its 95% interval and the verdict."""
    k1, n1 = canary.get("asked_again", 0), canary.get("stops", 0)
    k2, n2 = shadow.get("asked_again", 0), shadow.get("stops", 0)
    interval = newcombe(k1, n1, k2, n2)
    difference = round(k1 / n1 - k2 / n2, 4) if interval else None
    if n1 < MIN_STOPS or n2 < MIN_STOPS or interval is None:
        verdict = "too_few"
    elif interval[0] > margin:
        verdict = "worse"
    elif interval[0] > 0:
        verdict = "within_margin"
    elif interval[1] < 0:
        verdict = "better"
    else:
        verdict = "no_difference"
    return {
        "difference": difference,
        "interval": [round(x, 4) for x in interval] if interval else None,
        "margin": margin,
        "verdict": verdict,
    }


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def _points(value: float) -> str:
    return f"{value * 100:+.1f}"


def sentence(label: str, canary: dict[str, Any], shadow: dict[str, Any], c: dict[str, Any]) -> str:
    """The verdict in plain words, e.g. `hard: 2.1% asked again, shadow 1.9% (...)`."""
    n1, n2 = canary["stops"], shadow["stops"]
    if c["verdict"] == "too_few":
        return (
            f"{label}: too few stops to tell (n < {MIN_STOPS} per arm: "
            f"{n1:,} {label}, {n2:,} shadow)"
        )
    lo, hi = c["interval"]
    interval = f"{_points(lo)} to {_points(hi)}"
    detail = f"difference {_points(c['difference'])} points, 95% interval {interval}"
    stops = f"{n1 + n2:,} stops ({n1:,} {label}, {n2:,} shadow)"
    if c["verdict"] == "no_difference":
        return (
            f"{label}: {_pct(canary['rate'])} asked again, shadow {_pct(shadow['rate'])} "
            f"({detail}): no difference detected in {stops}"
        )
    if c["verdict"] == "within_margin":
        return (
            f"{label}: higher, within the margin: {_pct(canary['rate'])} asked again vs "
            f"{_pct(shadow['rate'])} in shadow ({detail}, margin {_points(c['margin'])} points) "
            f"in {stops}"
        )
    if c["verdict"] == "worse" and c["margin"]:
        detail += f", margin {_points(c['margin'])} points"
    return (
        f"{label}: {c['verdict']}: {_pct(canary['rate'])} asked again vs "
        f"{_pct(shadow['rate'])} in shadow ({detail}) in {stops}"
    )


def _treatment(arm: str, stopped: Any) -> bool | None:
    """Whether a re-ask entry got its arm's treatment: a stop in the canary arm, none in the
    shadow arm (`None` for another arm). A canary run whose tool ran in `never` (sent back by
    the way back) or a shadow run stopped by a tool the canary does not switch is left out of
    the comparison: it says nothing about the canaried stop."""
    if arm == CANARY:
        return stopped is True
    if arm == SHADOW:
        return stopped is False
    return None


class Arms:
    """Records folded into the comparison of the canary's arms (constant memory)."""

    def __init__(self, margin: float = 0.0) -> None:
        """None yet; `margin` is `--reask-margin` as a fraction (1 point is 0.01)."""
        self.margin = margin
        self.by_arm: Table = Table(LABELS)
        self.reask: Table = Table(LABELS)
        self.labels: Counter[str] = Labels(LABELS)
        self.tool_labels: Table = Table()
        self.by_tool: Table = Table()
        self.sent_back: Counter[str] = Tally(TRACKED)
        self.sent_since: dict[str, datetime] = {}
        self.without_arm = 0

    def add(self, record: Mapping[str, Any], ended_at: datetime | None = None) -> None:
        """Fold one finished run's record in; fields of a wrong type are ignored."""
        arm = record.get("arm")
        sent = record.get("sent_back")
        if isinstance(sent, list):
            for tool in dict.fromkeys(t for t in sent if isinstance(t, str)):
                self.sent_back[tool] += 1
                if ended_at is not None and tool in self.sent_back:
                    first = self.sent_since.get(tool)
                    if first is None or ended_at < first:
                        self.sent_since[tool] = ended_at
        if isinstance(arm, str):
            self._add_run(arm, record)
        else:
            self.without_arm += 1
        reask = record.get("reask")
        if not isinstance(reask, Mapping):
            return
        of, again = reask.get("arm"), reask.get("asked_again")
        if not isinstance(of, str) or not isinstance(again, bool):
            return
        if _treatment(of, reask.get("stopped")) is False:
            return
        counts = self.reask.setdefault(of, Counter())
        counts["stops"] += 1
        counts["asked_again"] += again
        why = reask.get("why")
        if again and isinstance(why, str):
            counts[f"why:{why}"] += 1
        tools = reask.get("tools")
        if of in (CANARY, SHADOW) and isinstance(tools, list):
            for tool in dict.fromkeys(t for t in tools if isinstance(t, str)):
                per_tool = self.by_tool.setdefault(tool, Counter())
                per_tool[f"{of}.stops"] += 1
                per_tool[f"{of}.asked_again"] += again

    def _add_run(self, arm: str, record: Mapping[str, Any]) -> None:
        counts = self.by_arm.setdefault(arm, Counter())
        counts["runs"] += 1
        for key in (*_TOKENS, *_NARRATOR):
            counts[key] += _int(record.get(key))
        stopped = bool(record.get("stopped")) and record.get("rule") != "step_budget"
        counts["stopped"] += stopped
        counts["would_stop"] += not stopped and record.get("would_stop") is not None
        if arm != CANARY:
            return
        mode = record.get("mode")
        self.labels[mode if isinstance(mode, str) else "?"] += 1
        modes = record.get("modes")
        if isinstance(modes, Mapping):
            for tool, value in modes.items():
                if isinstance(tool, str) and isinstance(value, str):
                    self.tool_labels.setdefault(tool, Counter())[value] += 1

    def label(self) -> str:
        """The canary arm's name on the page: its runs' mode (`hard`), or `canary`."""
        common = self.labels.most_common(1)
        return common[0][0] if common else CANARY

    def document(self) -> dict[str, Any] | None:
        """report.json's `arms`; `None` when no record had an arm or a tool sent back."""
        if not self.by_arm and not self.sent_back:
            return None
        label = self.label()
        by_arm: dict[str, dict[str, Any]] = {}
        for arm in sorted(set(self.by_arm) | set(self.reask), key=lambda a: (a != CANARY, a)):
            counts = self.by_arm.get(arm, Counter())
            runs = counts["runs"]
            reask = self.reask.get(arm, Counter())
            by_arm[arm] = {
                "label": label if arm == CANARY else arm,
                "runs": runs,
                "stopped": counts["stopped"],
                "would_stop": counts["would_stop"],
                **{key: counts[key] for key in (*_TOKENS, *_NARRATOR)},
                **{f"{key}_per_run": _per(counts[key], runs) for key in _TOKENS},
                "reask": {
                    **_rate(reask),
                    "why": {
                        key.removeprefix("why:"): n
                        for key, n in sorted(reask.items())
                        if key.startswith("why:")
                    },
                },
            }
        empty: dict[str, Any] = {"stops": 0, "asked_again": 0, "rate": None, "interval": None}
        canary = by_arm.get(CANARY, {}).get("reask", empty)
        shadow = by_arm.get(SHADOW, {}).get("reask", empty)
        comparison = compare(canary, shadow, self.margin)
        comparison["sentence"] = sentence(label, canary, shadow, comparison)
        tools = [self._tool(tool, counts, label) for tool, counts in self.by_tool.items()]
        tools.sort(key=lambda t: (_ORDER[t["verdict"]], -t["stops"], t["tool"]))
        sent = [
            {
                "tool": tool,
                "runs": runs,
                "since": self.sent_since[tool].isoformat() if tool in self.sent_since else None,
            }
            for tool, runs in sorted(self.sent_back.items(), key=lambda i: (-i[1], i[0]))
        ]
        document = {
            "label": label,
            "margin": self.margin,
            "min_stops": MIN_STOPS,
            "runs_without_arm": self.without_arm,
            "by_arm": by_arm,
            "comparison": comparison,
            "by_tool": tools[:SHOWN],
            "by_tool_folded": {
                "names": len(tools[SHOWN:]) + len(self.by_tool.folded),
                "at_least": self.by_tool.folded.more,
            },
            "sent_back": sent[:SHOWN],
        }
        document["check"] = _check(comparison, tools, sent)
        return document

    def _tool(self, tool: str, counts: Counter[str], label: str) -> dict[str, Any]:
        modes = self.tool_labels.get(tool)
        name = modes.most_common(1)[0][0] if modes else label
        canary, shadow = (
            _rate({k: counts[f"{arm}.{k}"] for k in ("stops", "asked_again")})
            for arm in (CANARY, SHADOW)
        )
        comparison = compare(canary, shadow, self.margin)
        return {
            "tool": tool,
            "label": name,
            "stops": canary["stops"] + shadow["stops"],
            CANARY: canary,
            SHADOW: shadow,
            **comparison,
            "sentence": f"{tool}, {sentence(name, canary, shadow, comparison)}",
        }


def _runs(count: int) -> str:
    return f"{count:,} run" + ("" if count == 1 else "s")


def _named(names: list[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most:,} more" if len(names) > most else "")


def _check(
    comparison: dict[str, Any], tools: list[dict[str, Any]], sent: list[dict[str, Any]]
) -> dict[str, Any]:
    """What `--check` says: passed, or which arm or tools were worse and which sent back."""
    worse = [t["tool"] for t in tools if t["verdict"] == "worse"]
    reasons = []
    if comparison["verdict"] == "worse":
        reasons.append(comparison["sentence"])
    if worse:
        reasons.append(f"worse for {len(worse):,} tool(s): {_named(worse)}")
    if sent:
        named = [f"{s['tool']} ({_runs(s['runs'])} since)" for s in sent]
        reasons.append(f"sent back to never: {_named(named)}")
    if reasons:
        return {"passed": False, "worse_tools": worse, "why": "; ".join(reasons)}
    return {"passed": True, "worse_tools": [], "why": comparison["sentence"]}


def arms_check(document: Mapping[str, Any]) -> tuple[bool, str]:
    """`--check`'s answer from report.json: whether it passed, and one line why."""
    arms = document.get("arms")
    if not isinstance(arms, Mapping):
        return True, "no run record names a canary arm or a tool sent back: nothing to check"
    check = arms["check"]
    return bool(check["passed"]), str(check["why"])


def _cost(
    entry: Mapping[str, Any], prices: tuple[float, float], narrator: tuple[float, float]
) -> float:
    spent: float = entry["input_tokens"] * prices[0] + entry["output_tokens"] * prices[1]
    spent += entry["narrator_input_tokens"] * narrator[0]
    spent += entry["narrator_output_tokens"] * narrator[1]
    return spent / 1_000_000


def priced_arms(
    arms: dict[str, Any], prices: tuple[float, float], narrator: tuple[float, float]
) -> dict[str, Any]:
    """`arms` with `cost` and `cost_per_run` in each arm: the model's and the narrator's tokens."""
    by_arm = {}
    for name, entry in arms["by_arm"].items():
        cost = _cost(entry, prices, narrator)
        runs = entry["runs"]
        by_arm[name] = {
            **entry,
            "cost": round(cost, 6),
            "cost_per_run": round(cost / runs, 6) if runs else None,
        }
    return {**arms, "by_arm": by_arm}


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}".rstrip("0").rstrip(".")


def arms_lines(arms: Mapping[str, Any] | None, tools: int = 10) -> list[str]:
    """The summary's first lines: the arms' figures, the verdict, per tool, the tools sent back.

    Strings come from the runs: the caller makes them printable."""
    if not arms:
        return []
    lines = []
    by_arm = arms["by_arm"]
    parts = []
    for entry in by_arm.values():
        money = ""
        if entry.get("cost_per_run") is not None:
            money = f", {entry['cost_per_run']:.6f} per run at your prices"
        figures = [_figure(entry[f"{key}_per_run"]) for key in _TOKENS]
        parts.append(
            f"{entry['label']} {entry['runs']:,} runs ({figures[0]} model calls, {figures[1]} "
            f"input and {figures[2]} output tokens per run{money})"
        )
    if parts:
        lines.append("canary arms: " + "; ".join(parts))
    lines.append(arms["comparison"]["sentence"])
    decided = [t for t in arms["by_tool"] if t["verdict"] != "too_few"]
    for entry in decided[:tools]:
        lines.append(f"  {entry['sentence']}")
    rest = len(arms["by_tool"]) - len(decided[:tools]) + arms["by_tool_folded"]["names"]
    if rest:
        lines.append(f"  {rest:,} more tool(s): report.json's arms.by_tool")
    if arms["sent_back"]:
        named = [
            f"{s['tool']} ({_runs(s['runs'])} since" + (f" {s['since']})" if s["since"] else ")")
            for s in arms["sent_back"]
        ]
        lines.append("sent back to never by the way back: " + ", ".join(named))
    return lines
