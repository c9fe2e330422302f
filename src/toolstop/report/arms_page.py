"""The page's first section when the runs had a canary: the arms side by side, then the verdict.

Every figure carries its report.json path in `data-metric` (`arms.by_arm.canary.runs`,
`arms.by_tool.0.canary.rate`), as on the rest of the page. Every string from the runs (arm
names, modes, tool names) is HTML-escaped here; `toolstop.report.page.render_html` has made the
document printable first.
"""

from __future__ import annotations

import html
from typing import Any

from toolstop.report.lead import money, number
from toolstop.report.reask_judge import describe_arm

__all__ = ["arms_html"]

_CSS = {"worse": "worse", "within_margin": "note", "better": "answer", "no_difference": "answer"}


def _td(path: str | None, value: Any, label: str, text: str | None = None) -> str:
    metric = f' data-metric="{html.escape(path)}"' if path else ""
    shown = number(value) if text is None else text
    return f'<td data-label="{html.escape(label)}"{metric}>{html.escape(shown)}</td>'


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _interval(interval: Any, points: bool = False) -> str:
    if not interval:
        return "-"
    if points:
        return f"{interval[0] * 100:+.1f} to {interval[1] * 100:+.1f} points"
    return f"{interval[0] * 100:.1f}% to {interval[1] * 100:.1f}%"


def _arms_table(arms: dict[str, Any]) -> str:
    priced = any("cost_per_run" in e for e in arms["by_arm"].values())
    columns = ["arm", "runs", "stopped", "would stop", "model calls per run",
               "input tokens per run", "output tokens per run"]  # fmt: skip
    columns += ["money per run (at your prices)"] if priced else []
    columns += ["stops read", "asked again", "re-ask rate", "95% interval"]
    rows = []
    for arm, e in arms["by_arm"].items():
        p, r = f"arms.by_arm.{arm}", e["reask"]
        name = e["label"] if e["label"] == arm else f"{e['label']} ({arm})"
        cells = [
            f'<td class="first">{html.escape(name)}</td>',
            _td(f"{p}.runs", e["runs"], "runs"),
            _td(f"{p}.stopped", e["stopped"], "stopped"),
            _td(f"{p}.would_stop", e["would_stop"], "would stop"),
            _td(f"{p}.model_calls_per_run", e["model_calls_per_run"], "model calls per run"),
            _td(f"{p}.input_tokens_per_run", e["input_tokens_per_run"], "input tokens per run"),
            _td(f"{p}.output_tokens_per_run", e["output_tokens_per_run"], "output tokens per run"),
        ]
        if priced:
            cost = e.get("cost_per_run")
            cells.append(_td(f"{p}.cost_per_run", cost, "money per run", money(cost)))
        cells += [
            _td(f"{p}.reask.stops", r["stops"], "stops read"),
            _td(f"{p}.reask.asked_again", r["asked_again"], "asked again"),
            _td(f"{p}.reask.rate", r["rate"], "re-ask rate", _pct(r["rate"])),
            _td(None, None, "95% interval", _interval(r["interval"])),
        ]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return _table("The arms", columns, rows)


def _table(title: str, columns: list[str], rows: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    return (
        f'<h3>{html.escape(title)}</h3><table class="wide"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _tools_table(arms: dict[str, Any]) -> str:
    if not arms["by_tool"]:
        return ""
    columns = ["tool", "canary mode", "canary stops", "canary re-ask rate", "shadow stops",
               "shadow re-ask rate", "difference", "95% interval", "verdict"]  # fmt: skip
    rows = []
    for i, e in enumerate(arms["by_tool"]):
        p = f"arms.by_tool.{i}"
        difference = e["difference"]
        cells = [
            f'<td class="first">{html.escape(e["tool"])}</td>',
            _td(None, None, "canary mode", e["label"]),
            _td(f"{p}.canary.stops", e["canary"]["stops"], "canary stops"),
            _td(f"{p}.canary.rate", e["canary"]["rate"], "canary", _pct(e["canary"]["rate"])),
            _td(f"{p}.shadow.stops", e["shadow"]["stops"], "shadow stops"),
            _td(f"{p}.shadow.rate", e["shadow"]["rate"], "shadow", _pct(e["shadow"]["rate"])),
            _td(
                f"{p}.difference",
                difference,
                "difference",
                "-" if difference is None else f"{difference * 100:+.1f} points",
            ),
            _td(None, None, "95% interval", _interval(e["interval"], points=True)),
            f'<td data-label="verdict" class="why" data-verdict="{html.escape(e["verdict"])}">'
            f"{html.escape(e['verdict'].replace('_', ' '))}</td>",
        ]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    folded = arms["by_tool_folded"]
    note = ""
    if folded["names"]:
        more = "+" if folded["at_least"] else ""
        note = f"<p>And {number(folded['names'])}{more} other tools, not shown.</p>"
    return _table("Re-asks per tool (the stopped run's deciding tools)", columns, rows) + note


def _sent_back(arms: dict[str, Any]) -> str:
    if not arms["sent_back"]:
        return ""
    items = "".join(
        f'<li data-sent-back="{i}"><code>{html.escape(s["tool"])}</code>: '
        f'<b data-metric="arms.sent_back.{i}.runs">{number(s["runs"])}</b> runs since'
        + (f" {html.escape(s['since'])}" if s["since"] else "")
        + "</li>"
        for i, s in enumerate(arms["sent_back"])
    )
    return (
        "<h3>Sent back to never by the way back</h3><p>New runs of these tools ran in "
        f'<code>never</code> mode: their re-ask rate was too high.</p><ul id="sent-back">{items}'
        "</ul>"
    )


def _model_judge(arms: dict[str, Any]) -> str:
    """The re-ask judge's reading, one line per arm (empty without `--judge`)."""
    judge = arms.get("model_judge")
    if not judge:
        return ""
    items = "".join(
        f'<li data-reask-judge="{html.escape(arm)}"><b>{html.escape(e["label"])}</b>: '
        f"{html.escape(describe_arm(e))}</li>"
        for arm, e in judge["by_arm"].items()
    )
    return (
        f"<h3>A second reading: {html.escape(judge['model'])}</h3><p>A chat model read a "
        "sample of the re-ask entries again (the request, the answer and the next message, "
        "rebuilt from the checkpoints, masked); the figures above stay the deterministic "
        f'reading\'s.</p><ul id="reask-judge">{items}</ul>'
    )


def arms_html(arms: dict[str, Any] | None) -> str:
    """The canary section (empty without arms): the verdict, the arms, per tool, sent back."""
    if not arms:
        return ""
    comparison = arms["comparison"]
    css = _CSS.get(comparison["verdict"], "note")
    margin = arms["margin"] * 100
    check = arms["check"]
    gate = "passes" if check["passed"] else "fails"
    return (
        '<section id="arms"><h2>Canary: did people have to ask again?</h2>'
        f'<div class="{css}" id="arms-verdict" data-verdict="{html.escape(comparison["verdict"])}">'
        f'<p class="lead">{html.escape(comparison["sentence"])}</p>'
        f"<p><code>toolstop report --check</code> {gate}: {html.escape(check['why'])}</p></div>"
        "<p>Each arm is a stable share of threads (a hash of the thread), so the arms served "
        "the same kind of questions and their figures compare. A stop is <i>asked again</i> "
        "when the thread's next message restates the request, says the answer did not help, or "
        "its run calls the same tool with the same arguments. The intervals are 95% (Wilson for "
        "a rate, Newcombe for the difference); the verdict is <i>worse</i> when the whole "
        f"interval of the difference lies above {margin:.1f} points (<i>within margin</i> when it "
        "lies above 0 and not wholly above the margin), <i>better</i> when it lies below 0, "
        "and not given below "
        f"{arms['min_stops']} stops read in either arm.</p>"
        f"{_arms_table(arms)}{_model_judge(arms)}{_tools_table(arms)}{_sent_back(arms)}"
        "</section>"
    )
