"""`toolstop report`'s outputs: report.json, chart.png, a self-contained report.html, a summary.

In report.html every figure carries `data-metric="<path>"`, its dotted path in report.json
(`runs`, `rules.completed`, `would_save.model_calls`, `stops_by_tool.pay.completed`), so a
test (or a script) can read the page back and compare it with the JSON.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, TextIO

from toolstop._page import cell, inline_png, page

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
    """A PNG: runs by rule, model calls per run by mode, and what shadow mode would save."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    rules = document["rules"]
    bars = axes[0].bar(
        range(len(rules)),
        list(rules.values()),
        color=[_RULE_COLOURS.get(r, "#777777") for r in rules],
    )
    axes[0].set_xticks(range(len(rules)), list(rules), rotation=30, ha="right", fontsize=8)
    axes[0].bar_label(bars, labels=[f"{v:,}" for v in rules.values()], fontsize=7)
    axes[0].set_title("Runs by rule")
    modes = document["by_mode"]
    per_run = [modes[m]["model_calls_per_run"] or 0 for m in modes]
    bars = axes[1].bar(range(len(modes)), per_run, color="#1e88e5")
    axes[1].set_xticks(range(len(modes)), list(modes), fontsize=8)
    axes[1].bar_label(bars, labels=[f"{v:.2f}" for v in per_run], fontsize=7)
    axes[1].set_title("Model calls per run, by mode")
    never = modes.get("never", {})
    saved = document["would_save"]
    labels = ["model calls", "input tokens", "output tokens"]
    keys = ["model_calls", "input_tokens", "output_tokens"]
    spent = [never.get(k, 0) for k in keys]
    kept = [saved[k] for k in keys]
    shares = [kept[i] / spent[i] if spent[i] else 0.0 for i in range(3)]
    bars = axes[2].bar(range(3), [100 * s for s in shares], color="#43a047")
    axes[2].set_xticks(range(3), labels, fontsize=8)
    axes[2].bar_label(bars, labels=[f"{kept[i]:,} of {spent[i]:,}" for i in range(3)], fontsize=7)
    axes[2].set_ylim(0, 100)
    axes[2].set_ylabel("% of shadow-mode spend")
    axes[2].set_title("Shadow mode: what a stop would save")
    for axis in axes:
        axis.spines[["top", "right"]].set_visible(False)
    figure.suptitle(f"toolstop report: {document['runs']:,} runs")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _figure(path: str, value: Any) -> str:
    return f'<td data-metric="{html.escape(path)}">{html.escape(cell(value))}</td>'


def _counts(title: str, prefix: str, counts: dict[str, Any]) -> str:
    if not counts:
        return f"<h2>{html.escape(title)}</h2><p>None.</p>"
    rows = "".join(
        f"<tr><td>{html.escape(key)}</td>{_figure(f'{prefix}.{key}', value)}</tr>"
        for key, value in counts.items()
    )
    return f"<h2>{html.escape(title)}</h2><table>{rows}</table>"


def _by_key(title: str, prefix: str, table: dict[str, dict[str, int]]) -> str:
    if not table:
        return f"<h2>{html.escape(title)}</h2><p>None.</p>"
    columns = list(dict.fromkeys(inner for counts in table.values() for inner in counts))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    rows = []
    for key, counts in table.items():
        cells = "".join(
            _figure(f"{prefix}.{key}.{c}", counts[c]) if c in counts else "<td></td>"
            for c in columns
        )
        rows.append(f"<tr><td>{html.escape(key)}</td>{cells}</tr>")
    return (
        f"<h2>{html.escape(title)}</h2><table><thead><tr><th></th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def render_html(document: dict[str, Any], chart: Path | None, path: Path) -> None:
    """report.html: the headline, the chart inlined, and every table of report.json."""
    saved = document["would_save"]
    headline = [
        ("runs", "runs", document["runs"]),
        ("runs toolstop stopped", "stopped", document["stopped"]),
        ("hard-mode share", "hard_share", document["hard_share"]),
        ("model calls", "model_calls", document["model_calls"]),
        ("input tokens", "input_tokens", document["input_tokens"]),
        ("output tokens", "output_tokens", document["output_tokens"]),
        ("invalid signals (tool calls)", "invalid", document["invalid"]),
        ("unsignalled tool calls", "unsignalled", document["unsignalled"]),
        ("shadow runs that would have stopped", "would_save.runs", saved["runs"]),
        ("model calls a stop would save", "would_save.model_calls", saved["model_calls"]),
        ("input tokens a stop would save", "would_save.input_tokens", saved["input_tokens"]),
        ("output tokens a stop would save", "would_save.output_tokens", saved["output_tokens"]),
        (
            "share of shadow model calls saved",
            "would_save.share_of_shadow_model_calls",
            saved["share_of_shadow_model_calls"],
        ),
        (
            "share of shadow input tokens saved",
            "would_save.share_of_shadow_input_tokens",
            saved["share_of_shadow_input_tokens"],
        ),
    ]
    top = "".join(
        f"<tr><td>{html.escape(label)}</td>{_figure(key, value)}</tr>"
        for label, key, value in headline
    )
    source = html.escape(json.dumps(document["source"]))
    window = html.escape(
        f"{document['first_run_ended'] or '-'} to {document['last_run_ended'] or '-'}"
    )
    made = html.escape(f"{document['generated_at']} by toolstop {document['toolstop_version']}")
    stops = _by_key(
        "Stops by deciding tool (hard and polish mode)", "stops_by_tool", document["stops_by_tool"]
    )
    would = _by_key(
        "Would-be stops by deciding tool (shadow mode)",
        "would_stop_by_tool",
        document["would_stop_by_tool"],
    )
    ended = _counts(
        "Runs another middleware ended (rule none, not the model's answer)",
        "ended_by",
        document.get("ended_by") or {},
    )
    body = f"""<h1>toolstop report: what stops did, and what they would save</h1>
<p>Source <code>{source}</code>; runs ended {window}; generated {made}.</p>
<table id="headline">{top}</table>
{inline_png(chart, "runs by rule, model calls per run, shadow-mode savings")}
{_counts("Runs by rule", "rules", document["rules"])}
{ended}
{_counts("Runs by mode", "modes", document["modes"])}
{_by_key("Per mode", "by_mode", document["by_mode"])}
{stops}
{would}
{_counts("Tool calls by signal", "tool_calls", document["tool_calls"])}
{_by_key("Invalid signals by tool", "invalid_by_tool", document["invalid_by_tool"])}
{_counts("Model calls per run (runs)", "model_calls_per_run", document["model_calls_per_run"])}
<p>A shadow run (mode <code>never</code>) that would have stopped spent
<i>would save</i> model calls and tokens after the tool turn that would have stopped it: hard
mode would not have spent them. <i>Unsignalled</i> tool calls carried no signal (plain tools);
<i>invalid</i> ones a malformed signal, a tool error or an untrusted one.</p>"""
    path.write_text(page("toolstop report", body), encoding="utf-8")


def render_summary(document: dict[str, Any], out: TextIO) -> None:
    """A few lines for the terminal."""
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
    saved = document["would_save"]
    if saved["runs"]:
        print(
            f"shadow mode: {saved['runs']} runs would have stopped; hard mode would save "
            f"{saved['model_calls']} model calls ({cell(saved['share_of_shadow_model_calls'])} "
            f"of shadow-mode calls), {saved['input_tokens']} input and "
            f"{saved['output_tokens']} output tokens",
            file=out,
        )
