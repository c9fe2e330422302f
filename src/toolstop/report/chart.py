"""chart.png of `toolstop report`: three panels that tell what the advice tells.

1. Runs by rule (shadow runs by the rule that would have stopped them); on a log where no run
   stopped or would have (an agent in shadow mode whose tools do not signal yet), the runs by
   the advice on the tool whose result the final answer followed.
2. Model calls per run, by mode; with one mode only, how many runs made 1, 2, 3 ... calls.
3. What shadow mode says a stop would save; when no tool signals yet, one bar per tool advised
   `convert` or `convert_with_answer`, coloured by its advice: the model calls a stop would
   save, and apart (grey, hatched) the calls of the runs it would have cut short, which are no
   saving. Tools advised `keep`, `cut_short` or `too_few` are not drawn as worth converting;
   when no tool is advised, the panel says so and counts the advice.

Every string from the runs is drawn escaped (a control character has no glyph). Labels are
names a run produced (tools the model chose, rules, modes): they are drawn as plain text, never
parsed as mathtext (`$\\frac{$` is a tool name, not a formula), and cut to `CHART_LABEL`
characters.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from toolstop._printable import printable_data
from toolstop.report.records import cut

__all__ = ["ADVICE_COLOURS", "CHART_LABEL", "render_chart"]

CHART_LABEL = 40
"""The longest label the chart draws, in characters (a longer name is cut with `…`)."""

ADVICE_COLOURS = {
    "convert": "#2e7d32",
    "convert_with_answer": "#66bb6a",
    "too_few": "#bdbdbd",
    "keep": "#757575",
    "cut_short": "#e53935",
}
"""The colour of each advice, on every panel."""

_CUT_COLOUR = "#9e9e9e"
_RULE_COLOURS = {
    "completed": "#43a047",
    "fatal": "#e53935",
    "policy_block": "#8e24aa",
    "retry_budget": "#fb8c00",
    "step_budget": "#6d4c41",
    "none": "#9e9e9e",
    "interrupted": "#212121",
}
_SHOWN = 6
"""At most this many advised tools are drawn (the ones the report ranks first)."""


def render_chart(document: dict[str, Any], path: Path) -> None:
    """A PNG of the three panels (see the module's docstring)."""
    document = printable_data(document)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context({"text.parse_math": False, "text.usetex": False}):
        _draw(document, path)


def _labels(names: Any) -> list[str]:
    return [cut(str(name), CHART_LABEL) for name in names]


def _draw(document: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    candidates = document["candidates"]
    if set(document["runs_by_outcome"]) <= {"none"} and ended_by_advice(document):
        _ended_panel(axes[0], document)
    else:
        _rules_panel(axes[0], document["runs_by_outcome"])
    if len(document["by_mode"]) == 1 and document["model_calls_per_run"]:
        _calls_panel(axes[1], document)
    else:
        _modes_panel(axes[1], document["by_mode"])
    if not document["would_save"]["runs"] and candidates:
        _candidate_panel(axes[2], candidates)
    else:
        _saving_panel(axes[2], document)
    for axis in axes:
        axis.spines[["top", "right"]].set_visible(False)
    figure.suptitle(f"toolstop report: {document['runs']:,} runs")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _rules_panel(axis: Any, rules: dict[str, int]) -> None:
    bars = axis.bar(
        range(len(rules)),
        list(rules.values()),
        color=[_RULE_COLOURS.get(r.removeprefix("would stop: "), "#777777") for r in rules],
        hatch=["//" if r.startswith("would stop: ") else "" for r in rules],
    )
    axis.set_xticks(range(len(rules)), _labels(rules), rotation=30, ha="right", fontsize=8)
    axis.bar_label(bars, labels=[f"{v:,}" for v in rules.values()], fontsize=7)
    axis.set_title("Runs by rule (shadow: would stop)")


def ended_by_advice(document: dict[str, Any]) -> dict[str, int]:
    """Panel 1's bars: report.json's `runs_by_advice` (the runs by the advice on the tool
    whose result their final answer followed), `none` drawn as "no tool before the answer"."""
    counts = document.get("runs_by_advice") or {}
    return {
        ("no tool before the answer" if advice == "none" else advice): n
        for advice, n in counts.items()
        if n
    }


def _ended_panel(axis: Any, document: dict[str, Any]) -> None:
    """Panel 1 when nothing stopped or would have: where the runs ended, by advice."""
    ended = ended_by_advice(document)
    bars = axis.bar(
        range(len(ended)),
        list(ended.values()),
        color=[ADVICE_COLOURS.get(name, "#e0e0e0") for name in ended],
    )
    axis.set_xticks(range(len(ended)), list(ended), rotation=30, ha="right", fontsize=8)
    axis.bar_label(bars, labels=[f"{v:,}" for v in ended.values()], fontsize=7)
    axis.set_title("Runs by advice on the tool before the answer", fontsize=10)


def _modes_panel(axis: Any, modes: dict[str, Any]) -> None:
    per_run = [modes[m]["model_calls_per_run"] or 0 for m in modes]
    bars = axis.bar(range(len(modes)), per_run, color="#1e88e5")
    axis.set_xticks(range(len(modes)), _labels(modes), fontsize=8)
    axis.bar_label(bars, labels=[f"{v:.2f}" for v in per_run], fontsize=7)
    axis.set_title("Model calls per run, by mode")


def _calls_panel(axis: Any, document: dict[str, Any]) -> None:
    """Panel 2 with one mode: how many runs made 1, 2, 3 ... model calls."""
    per_run = document["model_calls_per_run"]
    bars = axis.bar(range(len(per_run)), list(per_run.values()), color="#1e88e5")
    axis.set_xticks(range(len(per_run)), _labels(per_run), fontsize=8)
    axis.bar_label(bars, labels=[f"{v:,}" for v in per_run.values()], fontsize=7)
    axis.set_xlabel("model calls in the run")
    (mode,) = document["by_mode"]
    axis.set_title(f"Runs by model calls (mode {cut(mode, CHART_LABEL)})")


def _saving_panel(axis: Any, document: dict[str, Any]) -> None:
    never = document["by_mode"].get("never", {})
    saved = document["would_save"]
    labels = ["model calls", "input tokens", "output tokens"]
    keys = ["model_calls", "input_tokens", "output_tokens"]
    spent = [never.get(k, 0) for k in keys]
    kept = [(saved.get("gain") or saved)[k] for k in keys]  # cut-short runs: never a gain
    shares = [kept[i] / spent[i] if spent[i] else 0.0 for i in range(3)]
    bars = axis.bar(range(3), [100 * s for s in shares], color="#43a047")
    axis.set_xticks(range(3), labels, fontsize=8)
    axis.bar_label(bars, labels=[f"{kept[i]:,} of {spent[i]:,}" for i in range(3)], fontsize=7)
    axis.set_ylim(0, 100)
    axis.set_ylabel("% of shadow-mode spend")
    axis.set_title("Shadow mode: what a stop would save")


def advised(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools worth converting: advised `convert` or `convert_with_answer` (a report before
    the advice: verdict `candidate`), not signalling already, the first `_SHOWN` as ranked."""
    return [
        e
        for e in candidates
        if not e.get("signals")
        and e.get("advice", "convert" if e.get("verdict") == "candidate" else "keep")
        in ("convert", "convert_with_answer")
    ][:_SHOWN]


def _candidate_panel(axis: Any, candidates: list[dict[str, Any]]) -> None:
    """Panel 3 when no tool signals yet: the model calls a stop on each advised tool would
    save (the gain), coloured by advice, and apart the cut-short runs' calls (no saving)."""
    shown = advised(candidates)
    axis.set_title("Tools worth converting")
    if not shown:
        _no_tool_advised(axis, candidates)
        return
    gains = [(e.get("gain") or e["would_save"])["model_calls"] for e in shown]
    cuts = [(e.get("cut_short") or {}).get("model_calls", 0) for e in shown]
    advice = [str(e.get("advice", "convert")) for e in shown]
    positions = range(len(shown))
    # at least three rows' room, so one tool is a bar and not a block
    axis.set_ylim(max(len(shown), 3) - 0.5, -0.5)
    axis.barh(positions, gains, color=[ADVICE_COLOURS[a] for a in advice], height=0.6)
    ends = axis.barh(
        positions,
        cuts,
        left=gains,
        color=_CUT_COLOUR,
        hatch="//",
        height=0.6,
        label="cut short: no saving",
    )
    axis.set_yticks(positions, _labels(e["tool"] for e in shown), fontsize=8)
    # room on the right for the labels: a bar's label is drawn after its gain part
    axis.set_xlim(0, 2.1 * max(g + c for g, c in zip(gains, cuts, strict=True)) or 1)
    axis.bar_label(
        ends,  # after the cut-short part, so the label never covers it
        labels=[
            f"{n:,} ({a})" + (f"\n+ {c:,} cut short" if c else "")
            for n, a, c in zip(gains, advice, cuts, strict=True)
        ],
        fontsize=7,
    )
    if any(cuts):
        axis.legend(fontsize=7, loc="lower right", frameon=False)
    axis.set_xlabel("model calls a stop would save (grey: cut short)")


def _no_tool_advised(axis: Any, candidates: list[dict[str, Any]]) -> None:
    counts = Counter(str(e.get("advice", e.get("verdict"))) for e in candidates)
    said = ", ".join(f"{n} {advice}" for advice, n in sorted(counts.items(), key=lambda i: -i[1]))
    axis.text(
        0.5,
        0.5,
        f"No tool advised for conversion:\nkeep the model.\n\n{len(candidates)} tools: {said}",
        ha="center",
        va="center",
        fontsize=9,
        wrap=True,
        transform=axis.transAxes,
    )
    axis.set_axis_off()
