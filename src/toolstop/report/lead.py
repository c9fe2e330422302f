"""The page's opening: what hard mode saves or saved, and which tool to convert first.

report.html's `<div class="answer">` (`answer`), and the tagged figures the whole page writes
(`tagged`: bold, with its report.json path in `data-metric`). Every string from the runs is
escaped here; the document is already made printable by `toolstop.report.page.render_html`.
"""

from __future__ import annotations

import html
from typing import Any

from toolstop.report.advice import served_not_advised
from toolstop.report.advice import signalling as signalling_tools

__all__ = ["answer", "money", "number", "tagged"]


def money(value: float | None) -> str:
    """An amount of money: two decimals, four below 1 (a saving of 0.0042 is not 0.00)."""
    if value is None:
        return "-"
    return f"{value:,.2f}" if abs(value) >= 1 or value == 0 else f"{value:.4f}"


def number(value: Any) -> str:
    """A figure as the page writes it: thousands separated, two decimals for a fraction."""
    if isinstance(value, float):
        return f"{value:,.2f}"
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def tagged(path: str, value: Any, text: str | None = None) -> str:
    """A figure in a sentence, bold, tagged with its report.json path."""
    shown = number(value) if text is None else text
    return f'<b data-metric="{html.escape(path)}">{html.escape(shown)}</b>'


def _money(document: dict[str, Any], path: str, value: Any) -> str:
    if "prices" not in document or value is None:
        return ""
    return f", worth {tagged(path, value, money(value))} at your prices"


def answer(document: dict[str, Any]) -> str:
    """The opening sentences: what hard mode saves, saved, and which tool to convert first."""
    lines = []
    saved, hard = document["would_save"], document["hard_mode"]
    if saved["runs"]:
        lines.append(_shadow_saving(document, saved))
    if hard["stopped"]:
        h = {key: tagged(f"hard_mode.{key}", value) for key, value in hard.items()}
        estimate = ""
        if hard["input_tokens_saved_estimate"] is not None:
            estimate = (
                f" (about {h['input_tokens_saved_estimate']} input and "
                f"{h['output_tokens_saved_estimate']} output tokens, estimated from shadow "
                "mode's savings per call"
                + _money(document, "hard_mode.cost_saved_estimate", hard.get("cost_saved_estimate"))
                + ")"
            )
        lines.append(
            f"Hard mode saved at least {h['model_calls_saved']} model calls{estimate}: it "
            f"stopped {h['stopped']} of its {h['runs']} runs without calling the model again."
        )
    lines += _to_convert(document, quiet=bool(saved["runs"] or hard["stopped"]))
    code = _convert_line(document)
    lines += _skipped_writes(document)
    if not lines:
        lines.append(
            "Nothing to save yet: no run would have stopped, none was stopped, and no run "
            "recorded which tool preceded its answer (records before schema version 4)."
        )
    return "".join(f'<p class="lead">{line}</p>' for line in lines) + "".join(
        f'<p class="lead convert">{line}</p>' for line in code
    )


_CONVERT = ("convert", "convert_with_answer")


def _convert_line(document: dict[str, Any]) -> list[str]:
    """The line that converts the top tool advised for conversion, as code."""
    signalling = signalling_tools(document)
    top = next(
        (
            e
            for e in document["candidates"]
            if e["tool"] not in signalling and _advice(e) in _CONVERT
        ),
        None,
    )
    if top is None or not top.get("convert_line"):
        return []
    return [f"In one line: <code>{html.escape(top['convert_line'])}</code>"]


def _advice(entry: dict[str, Any]) -> str:
    """The entry's advice; a report without one (older) reads it from its verdict."""
    if "advice" in entry:
        return str(entry["advice"])
    return "convert" if entry["verdict"] == "candidate" else "keep"


def _to_convert(document: dict[str, Any], *, quiet: bool) -> list[str]:
    """The sentence on which tool to convert first, or that there is little to save."""
    signalling = signalling_tools(document)
    unconverted = [e for e in document["candidates"] if e["tool"] not in signalling]
    top = next((e for e in unconverted if _advice(e) in _CONVERT), None)
    if top is None:
        if not document["candidates"]:
            return []
        cut = served_not_advised(unconverted)
        if cut is not None:  # its result served, but its stops cut runs short, or too few ran
            entry, served, out_of = cut
            yet = "yet" if entry["advice"] == "too_few" else "as it is"
            return [
                f"Nothing to convert {yet}: <b>{html.escape(entry['tool'])}</b>'s result "
                f"would have served as the final answer in {served} of {out_of} judged runs, "
                f"but {html.escape(str(entry.get('advice_why', '')))} (see the advice below)."
            ]
        if signalling and any((e.get("judged") or {}).get("runs") for e in unconverted):
            return [
                "The remaining (unconverted) tools have little to save on this traffic: no tool's "
                "result would have served as the final answer, as it is or with a tool-written "
                "answer (see the advice below). Keep the model for them."
            ]
        if any((e.get("judged") or {}).get("runs") for e in unconverted):
            return [
                "Little to save on this traffic: no tool's result would have served as the "
                "final answer, as it is or with a tool-written answer (see the advice below). "
                "Keep the model; that is a result too."
            ]
        if quiet:
            return []
        return [
            "No tool's result is repeated as the final answer often enough to convert it yet: "
            "see the verdicts below."
        ]
    at = document["candidates"].index(top)
    saved = top.get("gain") or top["would_save"]
    key = "gain" if "gain" in top else "would_save"
    ws = {k: tagged(f"candidates.{at}.{key}.{k}", v) for k, v in saved.items() if k != "cost"}
    tail = (
        f"A stop there would save {ws['model_calls']} model calls{_of_all(document, saved)}, "
        f"{ws['input_tokens']} input and {ws['output_tokens']} output tokens"
        + _money(document, f"candidates.{at}.{key}.cost", top[key].get("cost"))
        + "."
    )
    tool = html.escape(top["tool"])
    judged = top.get("judged") or {}
    if not judged.get("runs"):
        median = tagged(f"candidates.{at}.answer_overlap.median", top["answer_overlap"]["median"])
        return [
            f"Convert <b>{tool}</b> first: "
            f"{tagged(f'candidates.{at}.ended_runs', top['ended_runs'])} of its "
            f"{tagged(f'candidates.{at}.runs', top['runs'])} runs ended right after it, with an "
            f"answer that repeats its result (median overlap {median}). " + tail
        ]
    runs = tagged(f"candidates.{at}.judged.runs", judged["runs"])
    if top["advice"] == "convert":
        relayed = tagged(f"candidates.{at}.judged.actions.relayed", judged["actions"]["relayed"])
        return [
            f"Convert <b>{tool}</b> first: in {relayed} of the {runs} runs that ended right "
            "after it, its result as it is would have served as the answer. " + tail
        ]
    fields = ", ".join(f"<code>{html.escape(f)}</code>" for f in judged["fields"])
    earlier = ", ".join(f"<b>{html.escape(str(t))}</b>" for t in judged.get("earlier") or [])
    return [
        f"Convert <b>{tool}</b> first, with an answer the tool writes: in most of the {runs} "
        "runs that ended right after it, the model only restated its result"
        + (f" (the answers used {fields})" if fields else "")
        + ". Have the tool write the user's text: <code>toolstop.convert("
        + (html.escape(top["tool"]) if top["tool"].isidentifier() else "TOOL")
        + ", answer=...)</code> (the one line below) or <code>signal(..., answer=...)</code> "
        "in the tool; its raw result is not an answer. "
        + (
            f"The answers also restated facts from earlier results of {earlier}: the tool's "
            "template needs those fields too. "
            if earlier
            else ""
        )
        + tail
    ]


def _skipped_writes(document: dict[str, Any]) -> list[str]:
    """A sentence per tool advised for conversion whose stop would have skipped a write."""
    lines = []
    for at, entry in enumerate(document["candidates"]):
        if _advice(entry) not in _CONVERT or not entry.get("skips_writes"):
            continue
        names = ", ".join(f"<b>{html.escape(str(t))}</b>" for t in entry["skips_writes"])
        lines.append(
            f"<b>Careful with {html.escape(entry['tool'])}</b>: a stop on it would have skipped "
            f"a write ({names}) in "
            + tagged(f"candidates.{at}.cut_short.writes_runs", entry["cut_short"]["writes_runs"])
            + f" of the {tagged(f'candidates.{at}.stoppable_runs', entry['stoppable_runs'])} runs "
            "it would end. Signal a stop only when nothing is left to write."
        )
    return lines


def _shadow_saving(document: dict[str, Any], saved: dict[str, Any]) -> str:
    """What shadow mode says hard mode saves; the cut-short runs' part is never a gain."""
    cut = saved.get("cut_short") or {"runs": 0}
    if not cut["runs"]:
        return (
            _saved("would_save", saved)
            + _money(document, "would_save.cost", saved.get("cost"))
            + f", in {tagged('would_save.runs', saved['runs'])} runs whose tools signalled a stop."
        )
    return (
        _saved("would_save.gain", saved["gain"])
        + ", in the "
        "runs whose tools signalled a stop. In "
        f"{tagged('would_save.cut_short.runs', cut['runs'])} of its "
        f"{tagged('would_save.runs', saved['runs'])} runs a stop would have <b>cut the run "
        f"short</b>: {_skipped(cut['skipped_tools'])} would not have run"
        + (f" ({tagged('would_save.cut_short.writes_runs', cut['writes_runs'])} of them with a "
           "tool that writes)" if cut["writes_runs"] else "")
        + f". Their {tagged('would_save.cut_short.model_calls', cut['model_calls'])} later model "
        "calls are work a stop would skip, not a saving."
    )  # fmt: skip


def _saved(key: str, figures: dict[str, Any]) -> str:
    """ "In shadow mode, hard mode would have saved N model calls (S of the shadow-mode calls),
    I input tokens and O output tokens", each figure tagged with its path under `key`."""
    share = figures["share_of_shadow_model_calls"]
    return (
        f"In shadow mode, hard mode would have saved "
        f"{tagged(f'{key}.model_calls', figures['model_calls'])} model calls"
        + (f" ({tagged(f'{key}.share_of_shadow_model_calls', share, f'{share:.0%}')} of "
           "the shadow-mode calls)" if share is not None else "")
        + f", {tagged(f'{key}.input_tokens', figures['input_tokens'])} input tokens and "
        f"{tagged(f'{key}.output_tokens', figures['output_tokens'])} output tokens"
    )  # fmt: skip


def _skipped(tools: list[dict[str, Any]]) -> str:
    names = [
        f"<b>{html.escape(t['tool'])}</b>" + (" (writes)" if t["writes"] else "") for t in tools
    ]
    return ", ".join(names) or "later tools"


def _of_all(document: dict[str, Any], saved: dict[str, Any]) -> str:
    if not document["model_calls"]:
        return ""
    share = saved["model_calls"] / document["model_calls"]
    return f" ({share:.0%} of all {number(document['model_calls'])} model calls)"
