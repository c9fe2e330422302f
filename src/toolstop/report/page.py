"""report.html: a page a manager reads.

It opens with the canary's arms compared, when the runs had a canary (`toolstop.report.arms_page`),
then the answer (what hard mode saves or saved, in model calls, tokens and money), then
the evidence: the tools worth converting, runs and savings per day, rules, tools, invalid
signals, threads and open runs.

Every figure carries `data-metric="<path>"`, its dotted path in report.json (`runs`,
`would_save.model_calls`, `candidates.0.ended_runs`), so a test can read the page back and
compare it with the JSON. No JavaScript; the chart is inlined, so it reads offline. Wide tables
turn into one card per row on a narrow screen, so nothing scrolls sideways on a phone.
"""

from __future__ import annotations

import html
from datetime import datetime
from pathlib import Path
from typing import Any

from toolstop._page import inline_png, page
from toolstop._printable import printable_data
from toolstop._redact import is_postgres
from toolstop.report.advice import signalling as signalling_tools
from toolstop.report.arms_page import arms_html
from toolstop.report.candidates import REASONS, REPEATS
from toolstop.report.evidence import render_evidence
from toolstop.report.lead import answer, money
from toolstop.report.lead import number as _n
from toolstop.report.lead import tagged as _b
from toolstop.report.model_judge import judge_note
from toolstop.report.tally import SHOWN
from toolstop.report.what_if import what_if_html

__all__ = ["money", "render_html", "when"]

_STYLE = """
body { margin: 0 auto; padding: 1rem 1.2rem; max-width: 68rem; line-height: 1.45; }
h1 { font-size: 1.6rem; margin: .2rem 0; } h2 { font-size: 1.2rem; margin-top: 1.8rem; }
p, li, code { overflow-wrap: anywhere; } td:first-child { overflow-wrap: break-word; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f5f5f5; padding: .4rem; }
.meta { color: #555; } .lead { font-size: 1.12rem; }
.answer { background: #f1f8e9; border-left: 5px solid #43a047; padding: .6rem 1rem; }
.note { background: #fff8e1; border-left: 5px solid #f9a825; padding: .5rem 1rem; }
.worse { background: #ffebee; border-left: 5px solid #c62828; padding: .5rem 1rem; }
td.why { text-align: left; overflow-wrap: anywhere; } td.first { font-weight: 600; }
img { height: auto; }
@media (max-width: 44rem) {
  body { padding: .6rem; } .lead { font-size: 1rem; }
  table.wide thead { display: none; }
  table.wide, table.wide tbody, table.wide tr, table.wide td { display: block; }
  table.wide tr { border-bottom: 2px solid #bbb; padding: .3rem 0; }
  table.wide td { border: 0; padding: .1rem .3rem; text-align: right; }
  table.wide td::before { content: attr(data-label); float: left; color: #555;
    padding-right: .6rem; }
  table.wide td:first-child { text-align: left; }
  table.wide td.why { text-align: left; }
  table.wide td.why::before { float: none; display: block; }
}
"""


_AT_PRICES = "money (at your prices)"

_MODES = """<ul class="meta">
<li><b>hard</b>: a tool's stop ends the run with its result; no further model call.</li>
<li><b>shadow</b> (mode <code>never</code>): nothing stops; each run records what a stop would
have saved.</li>
<li><b>polish</b>: a stop makes one more model call, with no tools, to word the answer.</li>
</ul>"""


def when(stamp: str | None) -> str:
    """An ISO time as people write it: `1 Dec 2026, 21:09 UTC` (`-` when unknown)."""
    if not stamp:
        return "-"
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    zone = moment.strftime("%Z") or "UTC"
    return f"{moment.day} {moment.strftime('%b %Y, %H:%M')} {zone}"


def _ended(document: dict[str, Any]) -> str:
    """When the runs ended, or that no run's end time is known (a log without times)."""
    first, last = document.get("first_run_ended"), document.get("last_run_ended")
    if not first or not last:
        return "no run's end time recorded"
    return f"ended {when(first)} to {when(last)}"


def _source(source: dict[str, Any]) -> str:
    if "db" in source:
        db = str(source["db"])
        kind = "PostgreSQL" if is_postgres(db) else "SQLite"
        return f"the {kind} checkpoint database {db}"
    if "from" in source:
        return f"the recorded conversations ({source.get('format')}) of {source['from']}"
    log = str(source.get("log"))
    return "JSON log lines read from standard input" if log == "-" else f"the log file {log}"


def _td(path: str | None, value: Any, label: str, css: str = "", text: str | None = None) -> str:
    metric = f' data-metric="{html.escape(path)}"' if path else ""
    klass = f' class="{css}"' if css else ""
    shown = _n(value) if text is None else text
    return f'<td data-label="{html.escape(label)}"{klass}{metric}>{html.escape(shown)}</td>'


def _table(title: str, columns: list[str], rows: list[str], *, wide: bool = False) -> str:
    if not rows:
        return f"<h2>{html.escape(title)}</h2><p>None.</p>"
    head = "".join(f"<th>{html.escape(c.replace('_', ' '))}</th>" for c in columns)
    klass = ' class="wide"' if wide else ""
    return (
        f"<h2>{html.escape(title)}</h2><table{klass}><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _counts(title: str, prefix: str, counts: dict[str, Any], what: str = "runs") -> str:
    rows = [
        f"<tr><td>{html.escape(key)}</td>{_td(f'{prefix}.{key}', value, what)}</tr>"
        for key, value in counts.items()
    ]
    return _table(title, ["", what], rows)


def _by_key(title: str, prefix: str, table: dict[str, dict[str, Any]]) -> str:
    columns = list(dict.fromkeys(inner for counts in table.values() for inner in counts))
    rows = []
    for key, counts in table.items():
        cells = "".join(
            _td(f"{prefix}.{key}.{c}", counts[c], c.replace("_", " "))
            if c in counts
            else _td(None, "", c.replace("_", " "))
            for c in columns
        )
        rows.append(f'<tr><td class="first">{html.escape(key)}</td>{cells}</tr>')
    return _table(title, ["", *columns], rows, wide=True)


def _candidates(document: dict[str, Any]) -> str:
    entries = document["candidates"]
    signalling = signalling_tools(document)
    priced = "prices" in document
    # the advice says what the verdict said, in the same sentence for a judged tool: one column
    # (the verdict's alone only for a report written before the advice)
    advised = all("advice" in e for e in entries)
    columns = ["tool", "runs", "ended after it", "cut short", "calls saved", "input tokens",
               "output tokens"]  # fmt: skip
    columns += [_AT_PRICES] if priced else []
    columns += ["overlap median", "overlap p10", "advice" if advised else "verdict"]
    judged = "model_judge" in document
    columns += [f"model judge ({document['model_judge']['model']})"] if judged else []
    rows = []
    for i, e in enumerate(entries):
        p, overlap = f"candidates.{i}", e["answer_overlap"]
        # the gain: the cut-short runs' calls are work a stop would skip, never a saving
        key = "gain" if "gain" in e else "would_save"
        ws = e[key]
        cells = [
            f'<td class="first">{i + 1}. {html.escape(e["tool"])}'
            + (" (signals already)" if e["tool"] in signalling else "")
            + "</td>",
            _td(f"{p}.runs", e["runs"], "runs"),
            _td(f"{p}.ended_runs", e["ended_runs"], "ended after it"),
            _td(f"{p}.cut_short_runs", e.get("cut_short_runs", 0), "cut short"),
            _td(f"{p}.{key}.model_calls", ws["model_calls"], "calls saved"),
            _td(f"{p}.{key}.input_tokens", ws["input_tokens"], "input tokens"),
            _td(f"{p}.{key}.output_tokens", ws["output_tokens"], "output tokens"),
        ]
        if priced:
            cost = ws.get("cost")
            cells.append(_td(f"{p}.{key}.cost", cost, _AT_PRICES, text=money(cost)))
        cells += [
            _td(f"{p}.answer_overlap.median", overlap["median"], "overlap median"),
            _td(f"{p}.answer_overlap.p10", overlap["p10"], "overlap p10"),
            _td(
                None,
                f"{e['advice']}: {e['advice_why']}"
                + (f" — {e['convert_line']}" if e.get("convert_line") else ""),
                "advice",
                "why",
            )
            if advised
            else _td(None, e["why"], "verdict", "why"),
        ]
        if judged:
            mj = e.get("model_judge")
            cells.append(_td(None, "", "model judge", "why", judge_note(e) if mj else "-"))
        rows.append(f"<tr>{''.join(cells)}</tr>")
    explained = (
        "<p>Tools that do not signal yet come first: stop candidates, then mixed, too few runs "
        "to tell, keep the model, cut short (a stop would skip later calls), nothing to save; "
        "within each, by the model calls converting "
        "would save, then by input tokens. Tools that already signal a stop come last, in the "
        "same order: there is nothing to convert. <i>Ended after it</i>: runs "
        f"whose final answer the model wrote right after this tool's result; a stop there "
        f"would have relayed the result instead, saving that call. <i>Overlap</i>: the share "
        f"of the answer's words found in the result (1 = the answer repeats it). A median of "
        f"{REPEATS} or more reads as a stop candidate, below {REASONS} as the model's own "
        f"reasoning. A heuristic: words are not meaning, and a run ending after parallel calls "
        f"counts for each of their tools. <i>Calls saved</i>: every model call after the "
        f"tool's first successful call, as hard mode would stop there, except in the "
        f"<i>cut short</i> runs: runs that called more tools after it, which a stop would never "
        f"have run; their calls are work a stop would skip, not a gain, and are left out of "
        f"<i>calls saved</i>, the tokens and the money (report.json's <code>gain</code>; its "
        f"<code>would_save</code> includes them). Measured on "
        f"{_b('candidate_runs', document['candidate_runs'])} runs whose records carry it.</p>"
    )
    return _table("Tools worth converting", columns, rows, wide=True) + explained


def _days(document: dict[str, Any]) -> str:
    days = document["by_day"]
    if len(days) < 2:
        return ""
    keys = [
        ("runs", "runs"), ("stopped", "stopped"), ("model_calls", "model calls"),
        ("input_tokens", "input tokens"),
        ("would_save_model_calls", "calls a stop would save (signalling tools)"),
        ("would_save_input_tokens", "input tokens a stop would save (same)"),
    ]  # fmt: skip
    note = ""
    if not any(day["would_save_model_calls"] for day in days):
        keys = keys[:4]
        note = (
            "<p>What a stop would save is left out: no shadow-mode run would have stopped on "
            "any day, since only tools that already signal can stop a run. What converting "
            "the others would save is in the table above.</p>"
        )
    rows = [
        f'<tr><td class="first">{html.escape(day["day"])}</td>'
        + "".join(_td(f"by_day.{i}.{key}", day[key], label) for key, label in keys)
        + "</tr>"
        for i, day in enumerate(days)
    ]
    columns = ["day", *(k[1] for k in keys)]
    return _table("Runs and savings per day", columns, rows, wide=True) + note


def _modes_note(document: dict[str, Any]) -> str:
    if len(document["by_mode"]) < 2:
        return ""
    return (
        '<p class="note">Do not compare the modes\' averages: each mode served other '
        "questions at other times (after a switch, the later mode's runs may be longer or "
        "shorter for reasons of their own). What a stop saves is measured within shadow-mode "
        "runs, above.</p>"
    )


def _threads(document: dict[str, Any]) -> str:
    open_runs: Any = document.get("open_runs")
    if open_runs is None and "log" in document["source"]:
        open_runs = "not known from a log"
    rows: list[tuple[str, str | None, Any]] = [
        (
            "threads with finished runs"
            + (" (at least)" if document.get("threads_at_least") else ""),
            "threads",
            document.get("threads"),
        ),
        ("runs still open (in progress or abandoned)", "open_runs", open_runs),
    ]
    if "nested" in document["namespaces"]:
        nested = document["namespaces"]["nested"]
        rows.append(("runs of nested agents (subgraphs)", "namespaces.nested", nested))
    if "unreadable_threads" in document:
        rows.append(("unreadable threads", "unreadable_threads", document["unreadable_threads"]))
    if "unreadable_runs" in document:  # a record with a number out of range
        rows.append(("unreadable run records", "unreadable_runs", document["unreadable_runs"]))
    body = [
        f"<tr><td>{html.escape(label)}</td>"
        f"{_td(path if isinstance(value, int) and path else None, value, '')}</tr>"
        for label, path, value in rows
    ]
    return _table("Threads and open runs", ["", ""], body)


def _folded(document: dict[str, Any]) -> str:
    """The long tail each table folded into "other N" (report.json's `folded`)."""
    folded = document.get("folded") or {}
    if not folded:
        return ""
    items = "".join(
        f'<li data-folded="{html.escape(key)}"><code>{html.escape(key)}</code>: other '
        f"{_n(entry['names'])}{'+' if entry.get('at_least') else ''} "
        f"{'tools' if 'tool' in key or key == 'candidates' else 'names'}</li>"
        for key, entry in folded.items()
    )
    return (
        f"<h2>Long tail</h2><p>Each table shows its {SHOWN} largest entries; the rest are "
        "counted together (report.json's <code>folded</code> has their sums):</p>"
        f'<ul id="folded">{items}</ul>'
    )


def render_html(document: dict[str, Any], chart: Path | None, path: Path) -> None:
    """report.html: the answer first, then the evidence (see the module's docstring).

    Every string from the runs is escaped as on a terminal (controls, ESC, bidi overrides shown
    as `\\x1b`, `\\u202e`; newlines kept), then HTML-escaped."""
    document = printable_data(document, keep_newlines=True)
    headline = [
        ("runs", "runs", document["runs"]),
        ("runs toolstop stopped", "stopped", document["stopped"]),
        ("hard-mode share of runs", "hard_share", document["hard_share"]),
        ("model calls", "model_calls", document["model_calls"]),
        ("input tokens", "input_tokens", document["input_tokens"]),
        ("output tokens", "output_tokens", document["output_tokens"]),
        ("model calls a stop would save (shadow, tools that signal today)",
         "would_save.model_calls",
         document["would_save"]["model_calls"]),
        ("invalid signals (tool calls)", "invalid", document["invalid"]),
        ("unsignalled tool calls", "unsignalled", document["unsignalled"]),
    ]  # fmt: skip
    figures = "".join(
        f"<tr><td>{html.escape(label)}</td>{_td(key, value, '')}</tr>"
        for label, key, value in headline
    )
    made = f"{when(document['generated_at'])} by toolstop {document['toolstop_version']}"
    since = f" since {when(document['since'])}" if document.get("since") else ""
    prices = document.get("prices")
    if prices:
        made += (
            f". Money at your prices: {_n(prices['input_per_million'])} per million input "
            f"tokens, {_n(prices['output_per_million'])} per million output tokens"
        )
    body = f"""<h1>toolstop report: what stops save</h1>
<p class="meta">{_b("runs", document["runs"])} runs{since} from
{html.escape(_source(document["source"]))}, {html.escape(_ended(document))}.
Generated {html.escape(made)}.</p>
{arms_html(document.get("arms"))}
<div class="answer">{answer(document)}</div>
{_MODES}
{_candidates(document)}{render_evidence(document)}{what_if_html(document.get("what_if"))}
{_days(document)}
{inline_png(chart, "runs by rule or by the advice on the tool before the answer, model "
            "calls per run, what a stop would save or the tools advised for conversion")}
<h2>In figures</h2><table id="headline">{figures}</table>
{_folded(document)}
{_counts("Runs by outcome (shadow runs: the rule that would have stopped them)",
         "runs_by_outcome", document["runs_by_outcome"])}
{_counts("Runs another middleware ended (rule none, not the model's answer)", "ended_by",
         document.get("ended_by") or {})}
{_by_key("Stops by deciding tool (hard and polish mode)", "stops_by_tool",
         document["stops_by_tool"])}
{_by_key("Would-be stops by deciding tool (shadow mode)", "would_stop_by_tool",
         document["would_stop_by_tool"])}
{_by_key("Per mode", "by_mode", document["by_mode"])}
{_modes_note(document)}
{_counts("Tool calls by signal", "tool_calls", document["tool_calls"], "tool calls")}
{_by_key("Invalid signals by tool", "invalid_by_tool", document["invalid_by_tool"])}
{_threads(document)}
{_counts("Model calls per run", "model_calls_per_run", document["model_calls_per_run"])}
<p>A shadow run (mode <code>never</code>) that would have stopped spent the model calls and
tokens after the tool turn that would have stopped it: hard mode would not have spent them.
<i>Unsignalled</i> tool calls carried no signal (plain tools); <i>invalid</i> ones a malformed
signal, a tool error or an untrusted one.</p>"""  # fmt: skip
    path.write_text(page("toolstop report", body, style=_STYLE), encoding="utf-8")
