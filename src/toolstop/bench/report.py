"""The bench's outputs: a terminal table, bench.json, a PNG chart, a self-contained report.html."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from toolstop._page import cell as _cell
from toolstop._page import inline_png, page

__all__ = [
    "AGENT_COLUMNS",
    "PRICES",
    "cost_lines",
    "headline",
    "priced",
    "ratio_text",
    "render_chart",
    "render_html",
    "render_table",
    "write_json",
]

COLUMNS = [
    ("name", "configuration"),
    ("model_calls", "model calls"),
    ("ratio_to_min", "vs minimum"),
    ("input_tokens", "input tokens"),
    ("output_tokens", "output tokens"),
    ("wall_ms_per_query", "ms / query"),
    ("wrong_stops", "wrong stops"),
    ("missed_stops", "missed stops"),
]


TERMINAL_TITLES = {
    "name": "configuration",
    "model_calls": "calls",
    "ratio_to_min": "vs min",
    "input_tokens": "tokens in",
    "output_tokens": "tokens out",
    "wall_ms_per_query": "ms/query",
    "wrong_stops": "wrong",
    "missed_stops": "missed",
}
"""`COLUMNS`' titles as the terminal table shows them, short enough for 100 columns (report.html
shows the full titles)."""


AGENT_COLUMNS = [
    ("behaviour", "mode"),
    ("queries", "questions"),
    ("model_calls", "model calls"),
    ("input_tokens", "input tokens"),
    ("output_tokens", "output tokens"),
    ("wall_ms_per_query", "ms / question"),
    ("errors", "errors"),
    ("tool_errors", "tool errors"),
]
"""The columns of `toolstop bench --agent` (your agent, your questions: no planned minimum)."""


PRICES = {"model": (3.0, 15.0), "narrator": (0.10, 0.40)}
"""The bench's default prices per million tokens, input and output: the agent's model and a
cheaper narrator (illustrative: set yours with `--price-in/--price-out` and
`--narrator-price-in/--narrator-price-out`)."""


def _money(input_tokens: int, output_tokens: int, prices: tuple[float, float]) -> float:
    return round((input_tokens * prices[0] + output_tokens * prices[1]) / 1_000_000, 6)


def priced(
    configs: Sequence[dict[str, Any]], prices: dict[str, tuple[float, float]]
) -> list[dict[str, Any]]:
    """Each configuration with `cost`: what both models' tokens cost.

    The agent model's tokens at `prices["model"]`, the narrator's at `prices["narrator"]`, and
    their sum (prices per million tokens, in and out)."""
    out = []
    for c in configs:
        model = _money(c["input_tokens"], c["output_tokens"], prices["model"])
        narrator = _money(
            c.get("narrator_input_tokens", 0),
            c.get("narrator_output_tokens", 0),
            prices["narrator"],
        )
        cost = {"model": model, "narrator": narrator, "total": round(model + narrator, 6)}
        out.append({**c, "cost": cost})
    return out


def cost_lines(
    configs: Sequence[dict[str, Any]], prices: dict[str, tuple[float, float]]
) -> list[str]:
    """The cost of each configuration as the terminal shows it, under a line with the prices.

    Each line: calls, input and output tokens (the agent model's + the narrator's) and the
    money both cost; bench.json and report.html split the money by model."""
    (mi, mo), (ni, no) = prices["model"], prices["narrator"]
    lines = [f"cost at {mi:g}/{mo:g} (model) + {ni:g}/{no:g} (narrator) per million tokens in/out:"]
    width = max((len(c["name"]) for c in configs), default=0)
    for c in configs:
        lines.append(
            f"  {c['name']:{width}}  calls {c['model_calls']} + {c['narrator_calls']}  "
            f"in {c['input_tokens']} + {c['narrator_input_tokens']}  "
            f"out {c['output_tokens']} + {c['narrator_output_tokens']}  "
            f"money {c['cost']['total']:.4f}"
        )
    return lines


def _ratio(part: Any, whole: Any) -> float | None:
    return round(part / whole, 4) if whole else None


def headline(configs: Sequence[dict[str, Any]], modes: Sequence[str] = ("hard",)) -> dict[str, Any]:
    """Each of `modes` vs never, per router: the savings the bench exists to prove.

    Per router and mode, `model_calls_{mode}_vs_never`, `input_tokens_{mode}_vs_never`,
    `wall_time_{mode}_vs_never` (over every repeat) and `wall_time_{mode}_vs_never_spread`,
    `[min, max]` of the repeats' own wall-time ratios (`wall_s_by_repeat`)."""
    by_name = {c["name"]: c for c in configs}
    ratios: dict[str, Any] = {}
    for router in dict.fromkeys(c["router"] for c in configs):
        never = by_name.get(f"{router}-never")
        figures: dict[str, Any] = {}
        for mode in modes:
            run = by_name.get(f"{router}-{mode}")
            if not run or not never:
                continue
            figures[f"model_calls_{mode}_vs_never"] = _ratio(
                run["model_calls"], never["model_calls"]
            )
            figures[f"input_tokens_{mode}_vs_never"] = _ratio(
                run["input_tokens"], never["input_tokens"]
            )
            figures[f"wall_time_{mode}_vs_never"] = _ratio(run["wall_s"], never["wall_s"])
            each = [
                round(part / whole, 4)
                for part, whole in zip(
                    run.get("wall_s_by_repeat", ()), never.get("wall_s_by_repeat", ()), strict=False
                )
                if whole
            ]
            figures[f"wall_time_{mode}_vs_never_spread"] = [min(each), max(each)] if each else None
        if figures:
            ratios[router] = figures
    return ratios


def _over(repeats: int) -> str:
    return f"over {repeats} repeat{'s' if repeats != 1 else ''}"


def ratio_text(ratios: dict[str, Any], mode: str = "hard", repeats: int = 1) -> str:
    """One router's ratios of `mode` vs never as the terminal shows them.

    The wall time is on a line of its own with its spread: `model calls 0.5, input tokens 0.21`
    and `  wall time 0.51 (0.48-0.55 over 3 repeats)`; `""` when `ratios` has none of `mode`."""
    suffix = f"_{mode}_vs_never"
    pairs = [
        f"{key.removesuffix(suffix).replace('_', ' ')} {value}"
        for key, value in ratios.items()
        if key.endswith(suffix) and not key.startswith("wall_time")
    ]
    wall = ratios.get(f"wall_time{suffix}", "missing")
    if wall == "missing":
        return ", ".join(pairs)
    spread = ratios.get(f"wall_time{suffix}_spread")
    beside = f" ({spread[0]}-{spread[1]} {_over(repeats)})" if spread else ""
    return ", ".join(pairs) + f"\n  wall time {wall}{beside}"


def render_table(
    configs: Sequence[dict[str, Any]], out: TextIO, columns: Sequence[tuple[str, str]] = COLUMNS
) -> None:
    """The per-configuration table, aligned, for a terminal (about 90 columns wide)."""
    rows = [[TERMINAL_TITLES[key] if columns is COLUMNS else title for key, title in columns]]
    rows += [[_cell(c[key]) for key, _ in columns] for c in configs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        print("  ".join(cells), file=out)


def write_json(document: dict[str, Any], path: Path) -> None:
    """bench.json: settings, versions, per-configuration figures, headline ratios."""
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def render_chart(configs: Sequence[dict[str, Any]], path: Path) -> None:
    """A PNG comparing model calls and input tokens per configuration (matplotlib, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [c["name"] for c in configs]
    colours = {
        "never": "#9e9e9e",
        "return_direct": "#e57373",
        "hard": "#43a047",
        "polish": "#1e88e5",
    }
    colour = [colours.get(c["behaviour"], "#777777") for c in configs]
    panels: list[tuple[str, str, Any]] = [
        ("model_calls", "Model calls (+ narrator calls)", lambda c: c["model_calls"]),
        ("input_tokens", "Input tokens (+ narrator's)", lambda c: c["input_tokens"]),
    ]
    if configs and all("cost" in c for c in configs):
        panels.append(("cost", "Money, both models", lambda c: c["cost"]["total"]))
    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.8))
    for axis, (key, title, value) in zip(axes, panels, strict=True):
        values = [value(c) for c in configs]
        bars = axis.bar(range(len(names)), values, color=colour)
        narrated = {
            "model_calls": [c.get("narrator_calls", 0) for c in configs],
            "input_tokens": [c.get("narrator_input_tokens", 0) for c in configs],
        }.get(key)
        if narrated and any(narrated):
            axis.bar(range(len(names)), narrated, bottom=values, color="#90caf9")
        axis.set_title(title)
        axis.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
        labels = [f"{v:.4f}" if key == "cost" else f"{v:,}" for v in values]
        axis.bar_label(bars, labels=labels, fontsize=7)
        axis.spines[["top", "right"]].set_visible(False)
    queries = configs[0]["queries"] if configs else 0
    figure.suptitle(f"toolstop bench: {queries} queries per configuration")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


_NOTES = """<p>A <i>wrong stop</i> ends a run on a transient failure; a <i>missed stop</i> goes
back to the model (tools offered) after the final result. The minimum is one model call per tool
turn a perfect router needs.</p>"""


def render_html(
    document: dict[str, Any],
    chart: Path | None,
    path: Path,
    columns: Sequence[tuple[str, str]] = COLUMNS,
    notes: str = _NOTES,
) -> None:
    """report.html: one file with the chart inlined, the table and the rules fired (no CDN).

    `columns` are `(key, title)` pairs of the table; `notes` is HTML shown under it.
    """
    configs = document["configs"]
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in columns)
    rows = []
    for c in configs:
        name = html.escape(c["name"])
        cells = "".join(
            f'<td data-config="{name}" data-metric="{key}">{html.escape(_cell(c[key]))}</td>'
            for key, _ in columns
        )
        rows.append(f"<tr>{cells}</tr>")
    rules = []
    for c in configs:
        fired = ", ".join(
            f'<span data-config="{html.escape(c["name"])}" data-rule="{html.escape(rule)}">'
            f"{html.escape(rule)}: {count}</span>"
            for rule, count in c["rules"].items()
        )
        rules.append(f"<li><b>{html.escape(c['name'])}</b>: {fired}</li>")
    ratios = []
    repeats = int(document["settings"].get("repeat", 1))
    for router, figures in document.get("headline", {}).items():
        for key, value in figures.items():
            if key.endswith("_spread"):
                continue
            spread = figures.get(f"{key}_spread")
            beside = (
                f' <span data-spread="{key}">({_cell(spread[0])}-{_cell(spread[1])} '
                f"{_over(repeats)})</span>"
                if spread
                else ""
            )
            ratios.append(
                f'<li data-router="{router}" data-ratio="{key}">{router} {key.replace("_", " ")}: '
                f"<b>{_cell(value)}</b>{beside}</li>"
            )
    for mode, reason in document.get("withheld", {}).items():
        ratios.append(
            f'<li data-withheld="{html.escape(mode)}">{html.escape(mode)} vs never: withheld, '
            f"{html.escape(reason)}</li>"
        )
    costs = ""
    if configs and all("cost" in c for c in configs):
        costs = _cost_table(configs, document["settings"].get("prices") or {})
    image = inline_png(chart, "model calls and tokens per configuration")
    settings = html.escape(json.dumps(document["settings"]))
    versions = html.escape(", ".join(f"{k} {v}" for k, v in document["versions"].items()))
    body = f"""<h1>toolstop bench: the savings of stopping per call</h1>
<p>Settings <code>{settings}</code>; {versions}.</p>
<h2>Headline</h2><ul id="headline">{"".join(ratios)}</ul>
{image}
<h2>Per configuration</h2>
<table id="figures"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>
{notes}
{costs}
<h2>Stop rules that fired</h2><ul id="rules">{"".join(rules)}</ul>"""
    path.write_text(page("toolstop bench", body), encoding="utf-8")


_COST_COLUMNS = [
    ("model_calls", "model calls"),
    ("narrator_calls", "narrator calls"),
    ("input_tokens", "model tokens in"),
    ("output_tokens", "model tokens out"),
    ("narrator_input_tokens", "narrator tokens in"),
    ("narrator_output_tokens", "narrator tokens out"),
]


def _cost_table(configs: Sequence[dict[str, Any]], prices: dict[str, Any]) -> str:
    """The cost table of report.html: both models' calls and tokens, and their money."""
    said = ", ".join(
        f"{html.escape(name)} {_cell(pair[0])}/{_cell(pair[1])}"
        for name, pair in prices.items()
        if isinstance(pair, (list, tuple)) and len(pair) == 2
    )
    head = "".join(
        f"<th>{html.escape(t)}</th>"
        for t in ["configuration", *(t for _, t in _COST_COLUMNS), "model", "narrator", "total"]
    )
    rows = []
    for c in configs:
        name = html.escape(c["name"])
        cells = [f"<td>{name}</td>"]
        cells += [
            f'<td data-cost-config="{name}" data-cost="{key}">{html.escape(_cell(c[key]))}</td>'
            for key, _ in _COST_COLUMNS
        ]
        cells += [
            f'<td data-cost-config="{name}" data-cost="cost.{part}">{c["cost"][part]:.4f}</td>'
            for part in ("model", "narrator", "total")
        ]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f"<h2>Cost: both models</h2><p>Per million tokens in/out: {said}.</p>"
        f'<table id="costs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )
