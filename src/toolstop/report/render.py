"""`toolstop report`'s outputs: report.json, chart.png, report.html and a summary.

report.html is built by `toolstop.report.page`; the summary is a few lines for the terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from toolstop._page import cell
from toolstop._printable import printable_data
from toolstop.report.model_judge import judge_lines
from toolstop.report.page import render_html
from toolstop.report.records import cut

__all__ = ["render_chart", "render_html", "render_summary", "write_json"]

_RULE_COLOURS = {
    "completed": "#43a047",
    "fatal": "#e53935",
    "policy_block": "#8e24aa",
    "retry_budget": "#fb8c00",
    "step_budget": "#6d4c41",
    "none": "#9e9e9e",
    "interrupted": "#212121",
}


def write_json(document: dict[str, Any], path: Path) -> None:
    """report.json, indented."""
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def render_chart(document: dict[str, Any], path: Path) -> None:
    """A PNG: runs by rule, model calls per run by mode, and what shadow mode would save.

    Every string from the runs is drawn escaped (a control character has no glyph). Labels are
    names a run produced (tools the model chose, rules, modes): they are drawn as plain text,
    never parsed as mathtext (`$\\frac{$` is a tool name, not a formula), and cut to
    `CHART_LABEL` characters."""
    document = printable_data(document)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context({"text.parse_math": False, "text.usetex": False}):
        _draw(document, path)


CHART_LABEL = 40
"""The longest label the chart draws, in characters (a longer name is cut with `…`)."""


def _labels(names: Any) -> list[str]:
    return [cut(str(name), CHART_LABEL) for name in names]


def _draw(document: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    rules = document["runs_by_outcome"]
    bars = axes[0].bar(
        range(len(rules)),
        list(rules.values()),
        color=[_RULE_COLOURS.get(r.removeprefix("would stop: "), "#777777") for r in rules],
        hatch=["//" if r.startswith("would stop: ") else "" for r in rules],
    )
    axes[0].set_xticks(range(len(rules)), _labels(rules), rotation=30, ha="right", fontsize=8)
    axes[0].bar_label(bars, labels=[f"{v:,}" for v in rules.values()], fontsize=7)
    axes[0].set_title("Runs by rule (shadow: would stop)")
    modes = document["by_mode"]
    per_run = [modes[m]["model_calls_per_run"] or 0 for m in modes]
    bars = axes[1].bar(range(len(modes)), per_run, color="#1e88e5")
    axes[1].set_xticks(range(len(modes)), _labels(modes), fontsize=8)
    axes[1].bar_label(bars, labels=[f"{v:.2f}" for v in per_run], fontsize=7)
    axes[1].set_title("Model calls per run, by mode")
    never = modes.get("never", {})
    saved = document["would_save"]
    if not saved["runs"] and document["candidates"]:
        _candidate_panel(axes[2], document["candidates"])
        _finish(figure, axes, document, path)
        return
    labels = ["model calls", "input tokens", "output tokens"]
    keys = ["model_calls", "input_tokens", "output_tokens"]
    spent = [never.get(k, 0) for k in keys]
    kept = [(saved.get("gain") or saved)[k] for k in keys]  # cut-short runs: never a gain
    shares = [kept[i] / spent[i] if spent[i] else 0.0 for i in range(3)]
    bars = axes[2].bar(range(3), [100 * s for s in shares], color="#43a047")
    axes[2].set_xticks(range(3), labels, fontsize=8)
    axes[2].bar_label(bars, labels=[f"{kept[i]:,} of {spent[i]:,}" for i in range(3)], fontsize=7)
    axes[2].set_ylim(0, 100)
    axes[2].set_ylabel("% of shadow-mode spend")
    axes[2].set_title("Shadow mode: what a stop would save")
    _finish(figure, axes, document, path)


def _candidate_panel(axis: Any, candidates: list[dict[str, Any]]) -> None:
    """Model calls converting each tool would save (top 6), coloured by verdict.

    The gain: the calls of runs a stop would have cut short are left out (never a saving)."""
    shown = candidates[:6]
    colours = {"candidate": "#43a047", "mixed": "#fb8c00", "keep": "#9e9e9e"}
    calls = [(e.get("gain") or e["would_save"])["model_calls"] for e in shown]
    bars = axis.barh(
        range(len(shown)), calls, color=[colours.get(e["verdict"], "#bdbdbd") for e in shown]
    )
    axis.set_yticks(range(len(shown)), _labels(e["tool"] for e in shown), fontsize=8)
    axis.invert_yaxis()
    axis.bar_label(
        bars,
        labels=[f"{n:,} ({e['verdict']})" for n, e in zip(calls, shown, strict=True)],
        fontsize=7,
    )
    axis.set_xlabel("model calls a stop would save (cut-short runs left out)")
    axis.set_title("Tools worth converting")


def _finish(figure: Any, axes: Any, document: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    for axis in axes:
        axis.spines[["top", "right"]].set_visible(False)
    figure.suptitle(f"toolstop report: {document['runs']:,} runs")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def render_summary(document: dict[str, Any], out: TextIO) -> None:
    """A few lines for the terminal (every string from the runs escaped)."""
    document = printable_data(document)
    runs = document["runs"]
    rules = ", ".join(f"{rule} {count}" for rule, count in document["rules"].items()) or "-"
    modes = ", ".join(f"{mode} {count}" for mode, count in document["modes"].items()) or "-"
    print(f"runs: {runs} ({rules})", file=out)
    ended = document.get("ended_by") or {}
    if ended:
        names = ", ".join(f"{name} {count}" for name, count in ended.items())
        print(
            f"ended by another middleware, not the model's answer: {sum(ended.values())} ({names})",
            file=out,
        )
    print(f"modes: {modes}; hard-mode share {cell(document['hard_share'])}", file=out)
    print(
        f"model calls: {document['model_calls']}; tokens: {document['input_tokens']} in, "
        f"{document['output_tokens']} out",
        file=out,
    )
    print(
        f"tool calls: {document['invalid']} invalid, {document['unsignalled']} unsignalled",
        file=out,
    )
    threads, open_runs = document.get("threads"), document.get("open_runs")
    if open_runs is None and "log" in document["source"]:
        open_runs = "not known from a log"
    print(f"threads: {cell(threads)}; open runs: {cell(open_runs)}", file=out)
    saved = document["would_save"]
    if saved["runs"]:
        print(
            f"shadow mode: {saved['runs']} runs would have stopped; hard mode would save "
            f"{saved['model_calls']} model calls ({cell(saved['share_of_shadow_model_calls'])} "
            f"of shadow-mode calls), {saved['input_tokens']} input and "
            f"{saved['output_tokens']} output tokens",
            file=out,
        )
        cut = saved.get("cut_short") or {}
        if cut.get("runs"):
            skipped = ", ".join(
                t["tool"] + (" (writes)" if t["writes"] else "") for t in cut["skipped_tools"]
            )
            print(
                f"cut short: in {cut['runs']} of those runs a stop would have skipped later "
                f"tools ({skipped}); their {cut['model_calls']} model calls are not a saving",
                file=out,
            )
    hard = document["hard_mode"]
    if hard["stopped"]:
        print(
            f"hard mode: stopped {hard['stopped']} of {hard['runs']} runs, saving at least "
            f"{hard['model_calls_saved']} model calls",
            file=out,
        )
    folded = document.get("folded") or {}
    if folded:
        tools = max((entry["names"] for entry in folded.values()), default=0)
        print(
            f"long tail: tables show their largest entries; up to {tools} other names were "
            "counted together (report.json's folded)",
            file=out,
        )
    for line in judge_lines(document):
        print(line, file=out)
    signalling = set(document["stops_by_tool"]) | set(document["would_stop_by_tool"])
    unconverted = [e for e in document["candidates"] if e["tool"] not in signalling]
    converts = [e for e in unconverted if e.get("advice") in ("convert", "convert_with_answer")]
    if not converts and any((e.get("judged") or {}).get("runs") for e in unconverted):
        if signalling:  # the converted tools' saving is above: the rest have little
            print(
                "the remaining (unconverted) tools have little to save on this traffic: none's "
                "result would have served as the answer (as it is or with a tool-written "
                "answer); keep the model for them",
                file=out,
            )
            return
        print(
            "little to save on this traffic: no tool's result would have served as the answer "
            "(as it is or with a tool-written answer); keep the model",
            file=out,
        )
        return
    top = converts[0] if converts else (unconverted[0] if unconverted else None)
    if top is not None:
        convert = top.get("advice", "convert" if top["verdict"] == "candidate" else "keep")
        lead = {"convert": "convert first", "convert_with_answer": "convert first, with an answer"}
        print(
            f"{lead.get(convert, 'next tool to look at')}: {top['tool']} ({top['ended_runs']} "
            f"of {top['runs']} runs ended after it, median answer overlap "
            f"{cell(top['answer_overlap']['median'])}): {top.get('advice_why') or top['why']}",
            file=out,
        )
    for entry in converts:
        if entry is not top and entry.get("skips_writes"):
            print(
                f"also advised {entry['advice']}: {entry['tool']}, but a stop on it would have "
                f"skipped a write ({', '.join(entry['skips_writes'])}) in "
                f"{entry['cut_short']['writes_runs']} of the {entry['stoppable_runs']} runs it "
                "would end",
                file=out,
            )
