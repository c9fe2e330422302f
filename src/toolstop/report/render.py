"""`toolstop report`'s outputs: report.json, chart.png, report.html and a summary.

report.html is built by `toolstop.report.page`; the summary is a few lines for the terminal."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TextIO

from toolstop._page import cell
from toolstop._printable import printable_data
from toolstop.report.advice import served_not_advised
from toolstop.report.advice import signalling as signalling_tools
from toolstop.report.arms import arms_lines
from toolstop.report.chart import render_chart
from toolstop.report.model_judge import judge_lines
from toolstop.report.page import render_html
from toolstop.report.reask_judge import reask_judge_lines

__all__ = ["render_chart", "render_html", "render_summary", "write_json"]


def _finite(value: Any) -> Any:
    """`value` with every NaN or infinite float in it (at any depth) as `None`."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def write_json(document: dict[str, Any], path: Path) -> None:
    """report.json, indented; strict JSON: a figure that is NaN or infinite is `null`."""
    path.write_text(json.dumps(_finite(document), indent=2, allow_nan=False) + "\n", "utf-8")


_ADVICE_SHOWN = 8
"""At most this many tools' advice on the summary's advice line (the rest: report.json)."""


def render_summary(document: dict[str, Any], out: TextIO) -> None:
    """A few lines for the terminal (every string from the runs escaped)."""
    document = printable_data(document)
    for line in arms_lines(document.get("arms")):  # the canary first: did people ask again?
        print(line, file=out)
    for line in reask_judge_lines(document.get("arms")):
        print(line, file=out)
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
    narrator = document.get("narrator") or {}
    if narrator.get("calls"):
        print(
            f"narrator calls: {narrator['calls']}; tokens: {narrator['input_tokens']} in, "
            f"{narrator['output_tokens']} out (apart from the agent's model)",
            file=out,
        )
    spent = document.get("spent")
    if spent:
        on_narrator = (  # said only when a narrator ran (or it was priced)
            f", {spent['narrator']:.6f} on the narrator"
            if narrator.get("calls") or spent.get("narrator")
            else ""
        )
        print(
            f"spent at your prices: {spent['model']:.6f} on the agent's model{on_narrator}",
            file=out,
        )
    outcomes = document.get("tool_calls") or {}
    signalled = ", ".join(  # what the signalled results said, report.json's tool_calls
        f"{name} {count}"
        for name, count in outcomes.items()
        if count and name not in ("invalid", "unsignalled")
    )
    print(
        f"tool calls: {signalled + '; ' if signalled else ''}{document['invalid']} invalid, "
        f"{document['unsignalled']} unsignalled",
        file=out,
    )
    failed = document.get("answer_failed_by_tool") or {}
    if failed:
        said = "; ".join(
            f"{tool} ({', '.join(f'{why} {n}' for why, n in whys.items())})"
            for tool, whys in failed.items()
        )
        print(
            f"answer templates that did not render (the stop showed the content): {said}",
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
    signalling = signalling_tools(document)
    unconverted = [e for e in document["candidates"] if e["tool"] not in signalling]
    advised = [e for e in unconverted if e.get("advice")]
    if len(advised) > 1:  # the last line names one tool: here every one, keep and cut_short too
        shown = ", ".join(f"{e['tool']} {e['advice']}" for e in advised[:_ADVICE_SHOWN])
        more = len(advised) - _ADVICE_SHOWN
        print(
            f"advice per tool: {shown}"
            + (f"; {more} more in report.json's candidates" if more > 0 else ""),
            file=out,
        )
    converts = [e for e in unconverted if e.get("advice") in ("convert", "convert_with_answer")]
    cut = None if converts else served_not_advised(unconverted)
    if cut is not None:  # its result served, but its stops cut runs short, or too few ran
        entry, served, judged = cut
        yet = "yet" if entry["advice"] == "too_few" else "as it is"
        print(
            f"nothing to convert {yet}: {entry['tool']}'s result would have served as the "
            f"answer in {served} of {judged} judged runs, but {entry['advice_why']}",
            file=out,
        )
        return
    if not converts and any((e.get("judged") or {}).get("runs") for e in unconverted):
        if signalling:  # the converted tools' saving is above: the rest have little
            print(
                "the remaining (unconverted) tools have little to save on this traffic: no tool's "
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
        if top.get("convert_line"):
            print(f"  {top['convert_line']}", file=out)
    for entry in converts:
        if entry is not top and entry.get("skips_writes"):
            print(
                f"also advised {entry['advice']}: {entry['tool']}, but a stop on it would have "
                f"skipped a write ({', '.join(entry['skips_writes'])}) in "
                f"{entry['cut_short']['writes_runs']} of the {entry['stoppable_runs']} runs it "
                "would end",
                file=out,
            )
