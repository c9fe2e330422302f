"""report.html (`toolstop.report.page`) read back as text, from the hand-summed figures of
tests/test_report_summary.py: the opening sentences, every tagged figure against report.json,
the sections and their columns. No browser (tests/test_report.py and test_candidates.py lay the
page out in Chromium where it is installed)."""

from __future__ import annotations

import html
import io
import re
from pathlib import Path
from typing import Any

from report_runs import RUNS, end, summary
from toolstop.report.page import money, render_html, when
from toolstop.report.render import render_summary
from toolstop.report.summary import with_prices


def text(fragment: str, between: str = "") -> str:
    """What a reader sees of some HTML: tags dropped (`between` in their place: a space between
    table cells), entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", between, fragment)).split())


def cells(fragment: str) -> str:
    return text(fragment, " ")


def rendered(document: dict[str, Any], tmp_path: Path) -> str:
    path = tmp_path / "report.html"
    render_html(document, None, path)
    return path.read_text(encoding="utf-8")


def full(**extra: Any) -> dict[str, Any]:
    document = with_prices(summary(RUNS), 3.0, 15.0)
    return {
        **document,
        "generated_at": "2026-12-02T01:00:00+00:00",
        "toolstop_version": "9.9",
        "source": {"db": "postgresql://u@h/db"},
        "since": "2026-11-29T00:00:00+00:00",
        "threads": 3,
        "open_runs": 0,
        "unreadable_threads": 1,
        **extra,
    }


def shown(value: Any, path: str) -> str:
    """How the page writes a figure of report.json (written here, not taken from the page)."""
    if path.endswith("cost") or path.endswith("cost_saved_estimate"):
        return f"{value:.4f}" if abs(value) < 1 and value != 0 else f"{value:,.2f}"
    if isinstance(value, float):
        return f"{value:.2f}"
    if value is None:
        return "-"
    return f"{value:,}"


def at(document: Any, path: str) -> Any:
    for part in path.split("."):
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document


def test_every_tagged_figure_is_the_one_in_report_json(tmp_path: Path) -> None:
    document = full()
    page = rendered(document, tmp_path)
    figures = re.findall(r'data-metric="([^"]+)">([^<]*)<', page)
    for path, figure in figures:
        value = at(document, path)
        if path == "would_save.share_of_shadow_model_calls":
            assert figure == f"{value:.0%}"
        else:
            assert html.unescape(figure) == shown(value, path), path
    paths = {path for path, _ in figures}
    for key in ("runs", "stopped", "hard_share", "model_calls", "input_tokens", "output_tokens"):
        assert key in paths
    wanted = {
        "would_save.model_calls", "would_save.cost", "hard_mode.cost_saved_estimate",
        "candidates.0.gain.cost", "candidates.1.answer_overlap.p10", "by_day.1.stopped",
        "by_day.0.would_save_input_tokens", "runs_by_outcome.would stop: completed",
        "ended_by.LimitMW", "stops_by_tool.charge.fatal",
        "would_stop_by_tool.lookup.retry_budget", "by_mode.never.model_calls_per_run",
        "tool_calls.unsignalled", "invalid_by_tool.None.stop_not_bool", "threads", "open_runs",
        "namespaces.nested", "unreadable_threads", "model_calls_per_run.4", "candidate_runs",
        "invalid", "unsignalled", "hard_mode.input_tokens_saved_estimate",
    }  # fmt: skip
    assert wanted <= paths, wanted - paths
    # every figure of these tables, listed from report.json itself
    tables = ("runs_by_outcome", "ended_by", "tool_calls", "model_calls_per_run")
    expected = {f"{name}.{key}" for name in tables for key in document[name]}
    for name in ("stops_by_tool", "would_stop_by_tool", "by_mode", "invalid_by_tool"):
        expected |= {f"{name}.{k}.{c}" for k, inner in document[name].items() for c in inner}
    for i, day in enumerate(document["by_day"]):
        expected |= {f"by_day.{i}.{key}" for key in day if key not in ("day", "output_tokens")}
        expected -= {f"by_day.{i}.would_save_output_tokens"}
    for i, entry in enumerate(document["candidates"]):
        expected |= {f"candidates.{i}.{k}" for k in ("runs", "ended_runs")}
        key = "gain" if "gain" in entry else "would_save"  # the cut-short part is no gain
        expected |= {f"candidates.{i}.{key}.{k}" for k in entry[key]}
        expected |= {f"candidates.{i}.answer_overlap.{k}" for k in ("median", "p10")}
    assert expected <= paths, expected - paths


def test_the_page_opens_with_what_stops_save(tmp_path: Path) -> None:
    page = rendered(full(), tmp_path)
    assert text(re.search(r'<p class="meta">(.*?)</p>', page, re.S)[1]) == (  # type: ignore[index]
        "6 runs since 29 Nov 2026, 00:00 UTC from the PostgreSQL checkpoint database "
        "postgresql://u@h/db, ended 30 Nov 2026, 10:00 UTC to 1 Dec 2026, 23:30 UTC. Generated "
        "2 Dec 2026, 01:00 UTC by toolstop 9.9. Money at your prices: 3.00 per million input "
        "tokens, 15.00 per million output tokens."
    )
    leads = [text(p) for p in re.findall(r'<p class="lead">(.*?)</p>', page, re.S)]
    assert leads == [
        "In shadow mode, hard mode would have saved 3 model calls (43% of the shadow-mode "
        "calls), 160 input tokens and 20 output tokens, worth 0.0008 at your prices, in 2 runs "
        "whose tools signalled a stop.",
        "Hard mode saved at least 1 model calls (about 53 input and 7 output tokens, estimated "
        "from shadow mode's savings per call, worth 0.0003 at your prices): it stopped 1 of its "
        "2 runs without calling the model again.",
    ]
    assert page.startswith("<!doctype html>")
    assert "<title>toolstop report</title>" in page
    assert "<script" not in page


def test_the_sections_and_their_columns(tmp_path: Path) -> None:
    page = rendered(full(), tmp_path)
    assert [text(h) for h in re.findall(r"<h2>(.*?)</h2>", page)] == [
        "Tools worth converting",
        "The runs behind each tool",
        "Runs and savings per day",
        "In figures",
        "Runs by outcome (shadow runs: the rule that would have stopped them)",
        "Runs another middleware ended (rule none, not the model's answer)",
        "Stops by deciding tool (hard and polish mode)",
        "Would-be stops by deciding tool (shadow mode)",
        "Per mode",
        "Tool calls by signal",
        "Invalid signals by tool",
        "Threads and open runs",
        "Model calls per run",
    ]
    heads = [
        [text(th) for th in re.findall(r"<th>(.*?)</th>", t)]
        for t in re.findall(r"<thead>(.*?)</thead>", page)
    ]
    assert heads[0] == [
        "tool", "runs", "ended after it", "cut short", "calls saved", "input tokens",
        "output tokens", "money (at your prices)", "overlap median", "overlap p10", "advice",
    ]  # fmt: skip
    assert heads[1] == [
        "day", "runs", "stopped", "model calls", "input tokens",
        "calls a stop would save (signalling tools)", "input tokens a stop would save (same)",
    ]  # fmt: skip
    per_mode = ["", "runs", "model calls", "input tokens", "output tokens", "model calls per run"]
    assert per_mode in heads
    rows = re.findall(r'<td class="first">(.*?)</td>', page)
    assert rows[:2] == ["1. search", "2. pay (signals already)"]
    assert 'data-label="money (at your prices)"' in page
    assert 'class="wide"' in page
    assert "Measured on 2 runs whose records carry it." in text(page)
    assert "A median of 0.6 or more reads as a stop candidate, below 0.3 as" in text(page)
    assert "Do not compare the modes' averages" in text(page)
    threads = cells(page[page.index("<h2>Threads and open runs</h2>") :].split("</table>")[0])
    assert threads == (
        "Threads and open runs threads with finished runs 3 runs still open (in progress or "
        "abandoned) 0 runs of nested agents (subgraphs) 1 unreadable threads 1"
    )


def test_a_log_without_prices_and_a_tool_to_convert(tmp_path: Path) -> None:
    five = [
        end("t", f"2026-12-01T0{i}:00+00:00", mode="never", rule="none", model_calls=1,
            input_tokens=10, output_tokens=2, calls_by_tool={"find": 1},
            ended_after={"tools": {"find": 1.0}, "input_tokens": 10, "output_tokens": 2})
        for i in range(5)
    ]  # fmt: skip
    document = {
        **summary(five),
        "generated_at": None,
        "toolstop_version": "9.9",
        "source": {"log": "-"},
    }
    page = rendered(document, tmp_path)
    leads = [text(p) for p in re.findall(r'<p class="lead">(.*?)</p>', page, re.S)]
    assert leads == [
        "Convert find first: 5 of its 5 runs ended right after it, with an answer that repeats "
        "its result (median overlap 1.00). A stop there would save 5 model calls (100% of all 5 "
        "model calls), 50 input and 10 output tokens."
    ]
    meta = text(re.search(r'<p class="meta">(.*?)</p>', page, re.S)[1])  # type: ignore[index]
    assert meta == (
        "5 runs from JSON log lines read from standard input, ended 1 Dec 2026, 00:00 UTC to "
        "1 Dec 2026, 04:00 UTC. Generated - by toolstop 9.9."
    )
    assert "Runs and savings per day" not in page  # one day: no table
    assert "Do not compare the modes" not in page  # one mode
    assert "money (at your prices)" not in page
    threads = cells(page[page.index("<h2>Threads and open runs</h2>") :].split("</table>")[0])
    assert threads == (
        "Threads and open runs threads with finished runs - runs still open (in progress or "
        "abandoned) not known from a log"
    )
    document["source"] = {"log": "runs.jsonl"}
    assert "from the log file runs.jsonl," in text(rendered(document, tmp_path))
    document["source"] = {"db": "agent.sqlite"}
    assert "from the SQLite checkpoint database agent.sqlite," in text(rendered(document, tmp_path))


def test_what_the_page_says_when_there_is_nothing_to_convert(tmp_path: Path) -> None:
    base = {"generated_at": None, "toolstop_version": "9.9", "source": {"db": "x"}}
    empty = rendered({**summary([]), **base}, tmp_path)
    assert [text(p) for p in re.findall(r'<p class="lead">(.*?)</p>', empty, re.S)] == [
        "Nothing to save yet: no run would have stopped, none was stopped, and no run recorded "
        "which tool preceded its answer (records before schema version 4)."
    ]
    assert "<h2>Tools worth converting</h2><p>None.</p>" in empty
    keep = [
        end("t", None, mode="never", rule="none", model_calls=0, calls_by_tool={"think": 1},
            ended_after={"tools": {"think": 0.0}})
        for _ in range(5)
    ]  # fmt: skip
    page = rendered({**summary(keep), **base}, tmp_path)
    assert [text(p) for p in re.findall(r'<p class="lead">(.*?)</p>', page, re.S)] == [
        "No tool's result is repeated as the final answer often enough to convert it yet: see "
        "the verdicts below."
    ]


def test_days_without_savings_leave_the_savings_columns_out(tmp_path: Path) -> None:
    runs = [
        end("t", f"2026-12-0{day}T10:00+00:00", mode="hard", rule="none", model_calls=1)
        for day in (1, 2)
    ]
    page = rendered({**summary(runs), "generated_at": None, "toolstop_version": "1",
                     "source": {"db": "x"}}, tmp_path)  # fmt: skip
    days = page[page.index("<h2>Runs and savings per day</h2>") :].split("</table>")
    assert cells(days[0].split("<tbody>")[0]) == (
        "Runs and savings per day day runs stopped model calls input tokens"
    )
    assert text(days[1]).startswith("What a stop would save is left out")


def test_times_and_money_as_people_write_them() -> None:
    assert when("2026-12-01T21:09:59+00:00") == "1 Dec 2026, 21:09 UTC"
    assert when("2026-12-01T21:09:00+01:00") == "1 Dec 2026, 21:09 UTC+01:00"
    assert when("2026-12-01T21:09:00") == "1 Dec 2026, 21:09 UTC"
    assert when(None) == when("") == "-"
    assert when("yesterday") == "yesterday"
    assert money(None) == "-"
    assert money(0) == "0.00"
    assert money(12345.678) == "12,345.68"
    assert money(1) == "1.00"
    assert money(0.0042) == "0.0042"
    assert money(-2.5) == "-2.50"


def test_a_tool_that_already_signals_is_not_suggested(tmp_path: Path) -> None:
    polish = [
        end("t", None, mode="polish", rule="completed", stopped=True, tools=["charge"],
            model_calls=2, calls_by_tool={"charge": 1}, ended_after={"tools": {"charge": 1.0}})
        for _ in range(5)
    ]  # fmt: skip
    document = {**summary(polish), "generated_at": None, "toolstop_version": "1"}
    document["source"] = {"db": "x"}
    assert [(e["tool"], e["verdict"], e["signals"]) for e in document["candidates"]] == [
        ("charge", "candidate", True)
    ]
    page = rendered(document, tmp_path)
    assert [text(p) for p in re.findall(r'<p class="lead">(.*?)</p>', page, re.S)] == [
        "No tool's result is repeated as the final answer often enough to convert it yet: see "
        "the verdicts below."
    ]


def test_the_tool_to_convert_first_with_prices_and_the_per_tool_tables(tmp_path: Path) -> None:
    five = [
        end("t", f"2026-12-01T0{i}:00+00:00", mode="never", rule="none", model_calls=1,
            input_tokens=10, output_tokens=2, calls_by_tool={"find": 1},
            ended_after={"tools": {"find": 1.0}, "input_tokens": 1_000_000, "output_tokens": 0})
        for i in range(5)
    ]  # fmt: skip
    stops = [
        end("t", None, mode="hard", rule=rule, stopped=True, tools=[tool], model_calls=1)
        for rule, tool in (("completed", "pay"), ("fatal", "pay"), ("fatal", "charge"))
    ]
    document = {
        **with_prices(summary(five + stops), 3.0, 15.0),
        "generated_at": None,
        "toolstop_version": "1",
        "source": {"db": "x"},
    }
    page = rendered(document, tmp_path)
    leads = [text(p) for p in re.findall(r'<p class="lead">(.*?)</p>', page, re.S)]
    # the line that converts it follows, as code
    assert re.findall(r'<p class="lead convert">(.*?)</p>', page) == [
        "In one line: <code>toolstop.convert(find)</code>"
    ]
    assert leads[-1] == (
        "Convert find first: 5 of its 5 runs ended right after it, with an answer that repeats "
        "its result (median overlap 1.00). A stop there would save 5 model calls (62% of all 8 "
        "model calls), 5,000,000 input and 0 output tokens, worth 15.00 at your prices."
    )
    assert 'data-metric="candidates.0.gain.cost">15.00<' in page  # the gain: none cut short
    stops_table = page[page.index("<h2>Stops by deciding tool") :].split("</table>")[0]
    assert '<table class="wide">' in stops_table  # one card per row on a phone
    assert re.findall(r"<tr>(.*?)</tr>", stops_table) == [
        "<th></th><th>fatal</th><th>completed</th>",
        '<td class="first">charge</td>'
        '<td data-label="fatal" data-metric="stops_by_tool.charge.fatal">1</td>'
        '<td data-label="completed"></td>',
        '<td class="first">pay</td>'
        '<td data-label="fatal" data-metric="stops_by_tool.pay.fatal">1</td>'
        '<td data-label="completed" data-metric="stops_by_tool.pay.completed">1</td>',
    ]
    per_mode = page[page.index("<h2>Per mode</h2>") :].split("</table>")[0]
    assert (
        '<td data-label="model calls per run" data-metric="by_mode.hard.model_calls_per_run">'
        in per_mode
    )


# A report.json written by hand, section by section, and the page's markup checked line by line:
# each section of the page is one line of its body, and its markup (the `data-label` and classes
# that lay a wide table out as one card per row on a phone, `data-metric` on every figure) is what
# a reader's browser shows.


def report(**extra: Any) -> dict[str, Any]:
    """The smallest report.json the page renders: no savings, no candidates, one mode."""
    return {
        "runs": 1234,
        "first_run_ended": "2026-11-30T10:00:00+00:00",
        "last_run_ended": "2026-12-01T23:30:00+00:00",
        "stopped": 2,
        "hard_share": 0.25,
        "model_calls": 2000,
        "input_tokens": 30000,
        "output_tokens": 4000,
        "invalid": 1,
        "unsignalled": 1500,
        "would_save": {
            "runs": 0, "model_calls": 0, "input_tokens": 0, "output_tokens": 0,
            "share_of_shadow_model_calls": None,
        },
        "hard_mode": {
            "runs": 0, "stopped": 0, "model_calls_saved": 0,
            "input_tokens_saved_estimate": None, "output_tokens_saved_estimate": None,
        },
        "stops_by_tool": {},
        "would_stop_by_tool": {},
        "candidates": [],
        "candidate_runs": 0,
        "by_day": [],
        "runs_by_outcome": {},
        "by_mode": {"hard": {"runs": 1234, "model_calls_per_run": 1.5}},
        "tool_calls": {},
        "invalid_by_tool": {},
        "namespaces": {"root": 1234},
        "model_calls_per_run": {},
        "generated_at": None,
        "toolstop_version": "1",
        "source": {"db": "x"},
        "threads": 1200,
        "open_runs": 0,
        **extra,
    }  # fmt: skip


def line(page: str, start: str) -> str:
    """The one line of the page's body that starts with `start` (a section is one line)."""
    found = [row for row in page.splitlines() if row.startswith(start)]
    assert len(found) == 1, (start, found)
    return found[0]


def leads(page: str) -> list[str]:
    return [text(p) for p in re.findall(r'<p class="lead">(.*?)</p>', page, re.S)]


def candidate(tool: str, **extra: Any) -> dict[str, Any]:
    return {
        "tool": tool, "runs": 6, "ended_runs": 5, "cut_short_runs": 0,
        "would_save": {"model_calls": 5, "input_tokens": 1500, "output_tokens": 20},
        "answer_overlap": {"median": 1.0, "p10": 0.9},
        "verdict": "candidate", "why": "the answer repeats its result: a stop candidate",
        "signals": False, **extra,
    }  # fmt: skip


def test_the_threads_table_cell_by_cell(tmp_path: Path) -> None:
    document = report(namespaces={"nested": 3, "root": 5}, unreadable_threads=2)
    assert line(rendered(document, tmp_path), "<h2>Threads and open runs</h2>") == (
        "<h2>Threads and open runs</h2><table><thead><tr><th></th><th></th></tr></thead><tbody>"
        '<tr><td>threads with finished runs</td><td data-label="" data-metric="threads">1,200'
        "</td></tr>"
        "<tr><td>runs still open (in progress or abandoned)</td>"
        '<td data-label="" data-metric="open_runs">0</td></tr>'
        "<tr><td>runs of nested agents (subgraphs)</td>"
        '<td data-label="" data-metric="namespaces.nested">3</td></tr>'
        '<tr><td>unreadable threads</td><td data-label="" data-metric="unreadable_threads">2'
        "</td></tr></tbody></table>"
    )
    # a log: its runs still open are not known, and a sentence carries no data-metric
    log = report(source={"log": "runs.jsonl"}, threads=7, open_runs=None)
    assert line(rendered(log, tmp_path), "<h2>Threads and open runs</h2>").endswith(
        '<tr><td>threads with finished runs</td><td data-label="" data-metric="threads">7</td>'
        "</tr><tr><td>runs still open (in progress or abandoned)</td>"
        '<td data-label="">not known from a log</td></tr></tbody></table>'
    )
    # a database whose figures are missing: dashes, untagged, never "not known from a log"
    bare = report()
    del bare["threads"], bare["open_runs"]
    assert line(rendered(bare, tmp_path), "<h2>Threads and open runs</h2>").endswith(
        '<tr><td>threads with finished runs</td><td data-label="">-</td></tr>'
        '<tr><td>runs still open (in progress or abandoned)</td><td data-label="">-</td></tr>'
        "</tbody></table>"
    )


def test_the_headline_figures_cell_by_cell(tmp_path: Path) -> None:
    figures = line(rendered(report(), tmp_path), '<h2>In figures</h2><table id="headline">')
    rows = [
        ("runs", "runs", "1,234"),
        ("runs toolstop stopped", "stopped", "2"),
        ("hard-mode share of runs", "hard_share", "0.25"),
        ("model calls", "model_calls", "2,000"),
        ("input tokens", "input_tokens", "30,000"),
        ("output tokens", "output_tokens", "4,000"),
        ("model calls a stop would save (shadow, tools that signal today)",
         "would_save.model_calls", "0"),
        ("invalid signals (tool calls)", "invalid", "1"),
        ("unsignalled tool calls", "unsignalled", "1,500"),
    ]  # fmt: skip
    expected = "".join(
        f'<tr><td>{label}</td><td data-label="" data-metric="{path}">{value}</td></tr>'
        for label, path, value in rows
    )
    assert figures == f'<h2>In figures</h2><table id="headline">{expected}</table>'


def test_the_count_tables_cell_by_cell(tmp_path: Path) -> None:
    document = report(
        model_calls_per_run={"1": 1000, "12": 3},
        tool_calls={"unsignalled": 1500, "valid": 2},
        runs_by_outcome={"completed": 4},
    )
    page = rendered(document, tmp_path)
    assert line(page, "<h2>Model calls per run</h2>") == (
        "<h2>Model calls per run</h2><table><thead><tr><th></th><th>runs</th></tr></thead><tbody>"
        '<tr><td>1</td><td data-label="runs" data-metric="model_calls_per_run.1">1,000</td></tr>'
        '<tr><td>12</td><td data-label="runs" data-metric="model_calls_per_run.12">3</td></tr>'
        "</tbody></table>"
    )
    assert line(page, "<h2>Tool calls by signal</h2>") == (
        "<h2>Tool calls by signal</h2><table><thead><tr><th></th><th>tool calls</th></tr>"
        "</thead><tbody><tr><td>unsignalled</td>"
        '<td data-label="tool calls" data-metric="tool_calls.unsignalled">1,500</td></tr>'
        '<tr><td>valid</td><td data-label="tool calls" data-metric="tool_calls.valid">2</td></tr>'
        "</tbody></table>"
    )
    assert line(page, "<h2>Runs by outcome").endswith(
        '<tr><td>completed</td><td data-label="runs" data-metric="runs_by_outcome.completed">4'
        "</td></tr></tbody></table>"
    )
    # no other middleware ended a run (report.json has no `ended_by` then)
    assert line(page, "<h2>Runs another middleware") == (
        "<h2>Runs another middleware ended (rule none, not the model&#x27;s answer)</h2>"
        "<p>None.</p>"
    )
    assert line(page, "<h2>Invalid signals by tool</h2>") == (
        "<h2>Invalid signals by tool</h2><p>None.</p>"
    )


def test_a_per_tool_table_leaves_a_rule_blank_and_labels_it(tmp_path: Path) -> None:
    document = report(
        stops_by_tool={"charge": {"fatal": 2}, "pay": {"retry_budget": 1, "fatal": 1}},
        by_mode={"hard": {"runs": 1234, "model_calls_per_run": 1.5}},
    )
    page = rendered(document, tmp_path)
    assert line(page, "<h2>Stops by deciding tool") == (
        '<h2>Stops by deciding tool (hard and polish mode)</h2><table class="wide"><thead><tr>'
        "<th></th><th>fatal</th><th>retry budget</th></tr></thead><tbody>"
        '<tr><td class="first">charge</td>'
        '<td data-label="fatal" data-metric="stops_by_tool.charge.fatal">2</td>'
        '<td data-label="retry budget"></td></tr>'
        '<tr><td class="first">pay</td>'
        '<td data-label="fatal" data-metric="stops_by_tool.pay.fatal">1</td>'
        '<td data-label="retry budget" data-metric="stops_by_tool.pay.retry_budget">1</td></tr>'
        "</tbody></table>"
    )
    assert line(page, "<h2>Per mode</h2>") == (
        '<h2>Per mode</h2><table class="wide"><thead><tr><th></th><th>runs</th>'
        "<th>model calls per run</th></tr></thead><tbody>"
        '<tr><td class="first">hard</td>'
        '<td data-label="runs" data-metric="by_mode.hard.runs">1,234</td>'
        '<td data-label="model calls per run" data-metric="by_mode.hard.model_calls_per_run">'
        "1.50</td></tr></tbody></table>"
    )
    assert line(page, "<h2>Would-be stops") == (
        "<h2>Would-be stops by deciding tool (shadow mode)</h2><p>None.</p>"
    )


def test_a_table_writes_a_fraction_as_the_sentences_do(tmp_path: Path) -> None:
    # thousands separated like the counts beside it, two decimals
    modes = {"never": {"runs": 2, "model_calls_per_run": 1234.5}}
    page = rendered(report(by_mode=modes, hard_share=0.0), tmp_path)
    assert (
        '<td data-label="model calls per run" data-metric="by_mode.never.model_calls_per_run">'
        "1,234.50</td>"
    ) in line(page, "<h2>Per mode</h2>")
    assert '<td data-label="" data-metric="hard_share">0.00</td>' in page


CANDIDATES_NOTE = (
    "Tools that do not signal yet come first: stop candidates, then mixed, too few runs to tell, "
    "keep the model, cut short (a stop would skip later calls), nothing to save; within each, "
    "by the model calls converting would save, "
    "then by input tokens. Tools that already signal a stop come last, in the same order: there "
    "is nothing to convert. Ended after it: runs whose final answer the model wrote right after "
    "this tool's result; a stop there would have relayed the result instead, saving that call. "
    "Overlap: the share of the answer's words found in the result (1 = the answer repeats it). A "
    "median of 0.6 or more reads as a stop candidate, below 0.3 as the model's own reasoning. A "
    "heuristic: words are not meaning, and a run ending after parallel calls counts for each of "
    "their tools. Calls saved: every model call after the tool's first successful call, as hard "
    "mode would stop there, except in the cut short runs: runs that called more tools after it, "
    "which a stop would never have run; their calls are work a stop would skip, not a gain, and "
    "are left out of calls saved, the tokens and the money (report.json's gain; its would_save "
    "includes them). Measured on 7 runs whose records carry it."
)


def test_the_candidates_table_cell_by_cell(tmp_path: Path) -> None:
    few = candidate(
        "charge", ended_runs=1, verdict="few", answer_overlap={"median": None, "p10": None},
        why="only 1 run(s) ended after it: too few to tell",
        would_save={"model_calls": 1, "input_tokens": 10, "output_tokens": 1},
    )  # fmt: skip
    document = report(
        candidates=[candidate("find"), candidate("lookup"), few],
        candidate_runs=7,
        # each signals in one mode only: hard for charge, shadow for lookup
        stops_by_tool={"charge": {"fatal": 1}},
        would_stop_by_tool={"lookup": {"completed": 1}},
    )
    page = rendered(document, tmp_path)
    # the first tool that signals in neither mode is the one to convert
    assert line(page, '<div class="answer">') == (
        '<div class="answer"><p class="lead">Convert <b>find</b> first: '
        '<b data-metric="candidates.0.ended_runs">5</b> of its '
        '<b data-metric="candidates.0.runs">6</b> runs ended right after it, with an answer '
        "that repeats its result (median overlap "
        '<b data-metric="candidates.0.answer_overlap.median">1.00</b>). A stop there would save '
        '<b data-metric="candidates.0.would_save.model_calls">5</b> model calls (0% of all '
        '2,000 model calls), <b data-metric="candidates.0.would_save.input_tokens">1,500</b> '
        'input and <b data-metric="candidates.0.would_save.output_tokens">20</b> output '
        "tokens.</p></div>"
    )
    section = line(page, "<h2>Tools worth converting</h2>")
    table, note = section.split("</table>")
    assert table.split("<tbody>")[0] == (
        '<h2>Tools worth converting</h2><table class="wide"><thead><tr><th>tool</th>'
        "<th>runs</th><th>ended after it</th><th>cut short</th><th>calls saved</th>"
        "<th>input tokens</th>"
        "<th>output tokens</th><th>overlap median</th><th>overlap p10</th><th>verdict</th>"
        "</tr></thead>"
    )
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])
    assert rows[0] == (
        '<td class="first">1. find</td>'
        '<td data-label="runs" data-metric="candidates.0.runs">6</td>'
        '<td data-label="ended after it" data-metric="candidates.0.ended_runs">5</td>'
        '<td data-label="cut short" data-metric="candidates.0.cut_short_runs">0</td>'
        '<td data-label="calls saved" data-metric="candidates.0.would_save.model_calls">5</td>'
        '<td data-label="input tokens" data-metric="candidates.0.would_save.input_tokens">'
        "1,500</td>"
        '<td data-label="output tokens" data-metric="candidates.0.would_save.output_tokens">'
        "20</td>"
        '<td data-label="overlap median" data-metric="candidates.0.answer_overlap.median">'
        "1.00</td>"
        '<td data-label="overlap p10" data-metric="candidates.0.answer_overlap.p10">0.90</td>'
        '<td data-label="verdict" class="why">the answer repeats its result: a stop candidate'
        "</td>"  # a report before the advice: its verdict alone
    )
    firsts = [re.findall(r'<td class="first">(.*?)</td>', row) for row in rows]
    assert firsts == [
        ["1. find"], ["2. lookup (signals already)"], ["3. charge (signals already)"],
    ]  # fmt: skip
    assert cells(rows[2]) == (
        "3. charge (signals already) 6 1 0 1 10 1 - - only 1 run(s) ended after it: too few to tell"
    )
    assert note.startswith("<p>")
    assert note.endswith("</p>")
    assert text(note) == CANDIDATES_NOTE
    assert '<b data-metric="candidate_runs">7</b>' in note


def test_the_candidates_table_with_money(tmp_path: Path) -> None:
    priced = candidate(
        "find", would_save={"model_calls": 5, "input_tokens": 1500, "output_tokens": 20,
                            "cost": 0.0048},
    )  # fmt: skip
    document = report(
        candidates=[priced],
        prices={"input_per_million": 3.0, "output_per_million": 15.0},
    )
    table = line(rendered(document, tmp_path), "<h2>Tools worth converting</h2>")
    assert "<th>output tokens</th><th>money (at your prices)</th><th>overlap median</th>" in table
    assert (
        '<td data-label="output tokens" data-metric="candidates.0.would_save.output_tokens">20'
        '</td><td data-label="money (at your prices)" data-metric="candidates.0.would_save.cost">'
        '0.0048</td><td data-label="overlap median"'
    ) in table


def test_the_days_table_cell_by_cell(tmp_path: Path) -> None:
    def day(name: str, saved: int) -> dict[str, Any]:
        return {
            "day": name, "runs": 1000, "stopped": 1, "model_calls": 2000, "input_tokens": 5,
            "output_tokens": 9, "would_save_model_calls": saved, "would_save_input_tokens": 7,
            "would_save_output_tokens": 9,
        }  # fmt: skip

    page = rendered(report(by_day=[day("2026-11-30", 0), day("2026-12-01", 2)]), tmp_path)
    days = line(page, "<h2>Runs and savings per day</h2>")
    assert days.split("<tbody>")[0] == (
        '<h2>Runs and savings per day</h2><table class="wide"><thead><tr><th>day</th>'
        "<th>runs</th><th>stopped</th><th>model calls</th><th>input tokens</th>"
        "<th>calls a stop would save (signalling tools)</th>"
        "<th>input tokens a stop would save (same)</th></tr></thead>"
    )
    expected = "".join(
        f'<tr><td class="first">{name}</td>'
        f'<td data-label="runs" data-metric="by_day.{i}.runs">1,000</td>'
        f'<td data-label="stopped" data-metric="by_day.{i}.stopped">1</td>'
        f'<td data-label="model calls" data-metric="by_day.{i}.model_calls">2,000</td>'
        f'<td data-label="input tokens" data-metric="by_day.{i}.input_tokens">5</td>'
        f'<td data-label="calls a stop would save (signalling tools)" '
        f'data-metric="by_day.{i}.would_save_model_calls">{saved}</td>'
        f'<td data-label="input tokens a stop would save (same)" '
        f'data-metric="by_day.{i}.would_save_input_tokens">7</td></tr>'
        for i, (name, saved) in enumerate([("2026-11-30", 0), ("2026-12-01", 2)])
    )
    assert days.split("<tbody>")[1] == f"{expected}</tbody></table>"
    # no day would have saved: the savings columns go, a sentence says why
    page = rendered(report(by_day=[day("2026-11-30", 0), day("2026-12-01", 0)]), tmp_path)
    table, note = line(page, "<h2>Runs and savings per day</h2>").split("</table>")
    assert re.findall(r"<tr>(.*?)</tr>", table)[1] == (
        '<td class="first">2026-11-30</td>'
        '<td data-label="runs" data-metric="by_day.0.runs">1,000</td>'
        '<td data-label="stopped" data-metric="by_day.0.stopped">1</td>'
        '<td data-label="model calls" data-metric="by_day.0.model_calls">2,000</td>'
        '<td data-label="input tokens" data-metric="by_day.0.input_tokens">5</td>'
    )
    assert note == (
        "<p>What a stop would save is left out: no shadow-mode run would have stopped on any "
        "day, since only tools that already signal can stop a run. What converting the others "
        "would save is in the table above.</p>"
    )


def test_one_day_and_one_mode_leave_no_trace(tmp_path: Path) -> None:
    page = rendered(report(by_day=[{"day": "2026-11-30"}]), tmp_path)
    body = page.split("<body>\n")[1]
    # the days (one day: no table) and the chart (none) take an empty line each
    assert "</p>\n\n\n<h2>In figures</h2>" in body
    # the note on comparing modes is not written for one mode
    per_mode = line(page, "<h2>Per mode</h2>")
    assert f"{per_mode}\n\n<h2>Tool calls by signal</h2>" in body


def test_two_modes_bring_the_note_on_comparing_them(tmp_path: Path) -> None:
    modes = {"hard": {"runs": 2}, "never": {"runs": 3}}
    note = line(rendered(report(by_mode=modes), tmp_path), '<p class="note">')
    assert note == (
        '<p class="note">Do not compare the modes\' averages: each mode served other '
        "questions at other times (after a switch, the later mode's runs may be longer or "
        "shorter for reasons of their own). What a stop saves is measured within shadow-mode "
        "runs, above.</p>"
    )


def test_the_chart_is_inlined_and_the_cards_styled(tmp_path: Path) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(b"\x89PNG")
    path = tmp_path / "report.html"
    render_html(report(), chart, path)
    page = path.read_text(encoding="utf-8")
    assert line(page, "<img") == (
        '<img id="chart" alt="runs by rule or by the advice on the tool before the answer, '
        'model calls per run, what a stop would save or the tools advised for conversion" '
        'src="data:image/png;base64,iVBORw==">'
    )
    style = page.split("<style>")[1].split("</style>")[0]
    # the page's own style follows the shared one: wide tables as cards on a narrow screen
    assert style.rstrip().endswith(
        "  table.wide td.why::before { float: none; display: block; }\n}"
    )
    assert "table.wide td::before { content: attr(data-label);" in style


def test_the_answer_without_a_share_an_estimate_or_a_tool_to_convert(tmp_path: Path) -> None:
    # shadow savings, but no shadow-mode call counted to share them out of; nothing stopped
    shadow = report(
        would_save={"runs": 2, "model_calls": 3, "input_tokens": 1600, "output_tokens": 20,
                    "share_of_shadow_model_calls": None},
        candidates=[candidate("think", verdict="keep")],
    )  # fmt: skip
    page = rendered(shadow, tmp_path)
    assert line(page, '<div class="answer">') == (
        '<div class="answer"><p class="lead">In shadow mode, hard mode would have saved '
        '<b data-metric="would_save.model_calls">3</b> model calls, '
        '<b data-metric="would_save.input_tokens">1,600</b> input tokens and '
        '<b data-metric="would_save.output_tokens">20</b> output tokens, in '
        '<b data-metric="would_save.runs">2</b> runs whose tools signalled a stop.</p></div>'
    )
    # hard-mode stops, no shadow-mode savings to estimate their tokens from
    hard = report(
        hard_mode={"runs": 3, "stopped": 2, "model_calls_saved": 2,
                   "input_tokens_saved_estimate": None, "output_tokens_saved_estimate": None},
        candidates=[candidate("think", verdict="keep")],
    )  # fmt: skip
    assert leads(rendered(hard, tmp_path)) == [
        "Hard mode saved at least 2 model calls: it stopped 2 of its 3 runs without calling the "
        "model again."
    ]
    both = report(would_save=shadow["would_save"], hard_mode=hard["hard_mode"], candidates=[])
    answer = line(rendered(both, tmp_path), '<div class="answer">')
    assert answer.count('</p><p class="lead">') == 1
    assert answer.startswith('<div class="answer"><p class="lead">In shadow mode')
    assert answer.endswith("without calling the model again.</p></div>")


def test_the_tool_to_convert_when_no_model_call_was_counted(tmp_path: Path) -> None:
    document = report(model_calls=0, candidates=[candidate("find")])
    assert leads(rendered(document, tmp_path)) == [
        "Convert find first: 5 of its 6 runs ended right after it, with an answer that repeats "
        "its result (median overlap 1.00). A stop there would save 5 model calls, 1,500 input "
        "and 20 output tokens."
    ]


def test_no_money_is_written_for_a_saving_without_a_cost(tmp_path: Path) -> None:
    document = report(
        prices={"input_per_million": 1500.0, "output_per_million": 0.5},
        would_save={"runs": 1, "model_calls": 1, "input_tokens": 10, "output_tokens": 1,
                    "share_of_shadow_model_calls": 0.5, "cost": None},
    )  # fmt: skip
    page = rendered(document, tmp_path)
    assert leads(page) == [
        "In shadow mode, hard mode would have saved 1 model calls (50% of the shadow-mode "
        "calls), 10 input tokens and 1 output tokens, in 1 runs whose tools signalled a stop."
    ]
    meta = text(re.search(r'<p class="meta">(.*?)</p>', page, re.S)[1])  # type: ignore[index]
    assert meta.endswith(
        "Money at your prices: 1,500.00 per million input tokens, 0.50 per million output tokens."
    )


def test_the_cut_short_part_of_a_shadow_saving_is_never_shown_as_a_gain(tmp_path: Path) -> None:
    saved = {
        "runs": 27, "model_calls": 40, "input_tokens": 9000, "output_tokens": 700,
        "share_of_shadow_model_calls": 0.4,
        "cut_short": {
            "runs": 4, "model_calls": 8, "input_tokens": 2000, "output_tokens": 100,
            "writes_runs": 4,
            "skipped_tools": [{"tool": "initiate_return", "runs": 4, "writes": True}],
        },
        "gain": {"model_calls": 32, "input_tokens": 7000, "output_tokens": 600,
                 "share_of_shadow_model_calls": 0.32},
    }  # fmt: skip
    page = rendered(report(would_save=saved), tmp_path)
    lead = text(line(page, '<div class="answer">'))
    assert lead.startswith(
        "In shadow mode, hard mode would have saved 32 model calls (32% of the shadow-mode "
        "calls), 7,000 input tokens and 600 output tokens, in the runs whose tools signalled a "
        "stop. In 4 of its 27 runs a stop would have cut the run short: initiate_return (writes) "
        "would not have run (4 of them with a tool that writes). Their 8 later model calls are "
        "work a stop would skip, not a saving."
    )
    assert "40 model calls" not in lead
    assert 'data-metric="would_save.gain.model_calls">32<' in page


def judged_candidate(tool: str, advice: str, **judged: Any) -> dict[str, Any]:
    return candidate(
        tool,
        advice=advice,
        advice_why=f"why {advice}",
        judged={"runs": 5, "shapes": {}, "fields": [], **judged},
        gain={"model_calls": 4, "input_tokens": 1200, "output_tokens": 16},
    )


def test_the_page_leads_with_the_top_tool_to_convert_by_its_advice(tmp_path: Path) -> None:
    keep = judged_candidate("search_flights", "keep", actions={"selected": 3, "asked": 2})
    receipt = judged_candidate(
        "cancel_reservation", "convert_with_answer", actions={"restated": 5},
        fields=["reservation_id", "refund<x>"],
    )  # fmt: skip
    page = rendered(report(candidates=[receipt, keep]), tmp_path)
    lead = text(line(page, '<div class="answer">'))
    assert lead == (
        "Convert cancel_reservation first, with an answer the tool writes: in most of the 5 runs "
        "that ended right after it, the model only restated its result (the answers used "
        "reservation_id, refund<x>). Have the tool write the user's text: "
        "toolstop.convert(cancel_reservation, answer=...) (the one line below) or "
        "signal(..., answer=...) in the tool; its raw result is not an answer. A stop there "
        "would save 4 "
        "model calls (0% of all 2,000 model calls), 1,200 input and 16 output tokens."
    )
    assert 'data-metric="candidates.0.gain.model_calls">4<' in page
    assert "refund&lt;x&gt;" in page
    relay = judged_candidate("certificate", "convert", actions={"relayed": 5})
    lead = text(line(rendered(report(candidates=[relay, keep]), tmp_path), '<div class="answer">'))
    assert lead.startswith(
        "Convert certificate first: in 5 of the 5 runs that ended right after it, its result as "
        "it is would have served as the answer. A stop there would save 4 model calls"
    )


def test_the_page_says_plainly_when_there_is_little_to_save(tmp_path: Path) -> None:
    keep = judged_candidate("search_flights", "keep", actions={"selected": 3, "asked": 2})
    cut = judged_candidate("get_order_status", "cut_short", actions={"relayed": 2, "computed": 3})
    page = rendered(report(candidates=[keep, cut]), tmp_path)
    assert text(line(page, '<div class="answer">')) == (
        "Little to save on this traffic: no tool's result would have served as the final "
        "answer, as it is or with a tool-written answer (see the advice below). Keep the model; "
        "that is a result too."
    )
    out = io.StringIO()
    render_summary(report(candidates=[keep, cut], rules={}, modes={}), out)
    assert out.getvalue().splitlines()[-1] == (
        "little to save on this traffic: no tool's result would have served as the answer "
        "(as it is or with a tool-written answer); keep the model"
    )


def test_a_tool_whose_result_served_but_whose_stop_cuts_runs_short_is_named(
    tmp_path: Path,
) -> None:
    """A trial's report said "no tool's result would have served" of a tool whose result served
    in most runs, advised `cut_short` because a call limit ended one of them on a repeated
    call: both the page and the terminal name it and why it is not to convert."""
    keep = judged_candidate("search_flights", "keep", actions={"selected": 3, "asked": 2})
    cut = candidate(
        "get_<order>",
        advice="cut_short",
        advice_why="a stop on it would have skipped later tool calls in 1 of the 6 runs it "
        "would end: do not convert it as it is",
        judged={"runs": 6, "shapes": {}, "fields": [], "actions": {"restated": 4, "failed": 1,
                                                                    "computed": 1}},
    )  # fmt: skip
    page = rendered(report(candidates=[keep, cut]), tmp_path)
    assert text(line(page, '<div class="answer">')) == (
        "Nothing to convert as it is: get_<order>'s result would have served as the final "
        "answer in 4 of 5 judged runs, but a stop on it would have skipped later tool calls in "
        "1 of the 6 runs it would end: do not convert it as it is (see the advice below)."
    )
    assert "<b>get_&lt;order&gt;</b>" in page
    assert "little to save" not in page.lower()
    out = io.StringIO()
    render_summary(report(candidates=[keep, cut], rules={}, modes={}), out)
    assert out.getvalue().splitlines()[-1] == (
        "nothing to convert as it is: get_<order>'s result would have served as the answer in "
        "4 of 5 judged runs, but a stop on it would have skipped later tool calls in 1 of the 6 "
        "runs it would end: do not convert it as it is"
    )
    # too few runs ended after it to advise it: named too, as not yet to convert
    few = {
        **cut,
        "advice": "too_few",
        "advice_why": "only 4 run(s) ended after it: too few to tell",
    }
    out = io.StringIO()
    render_summary(report(candidates=[keep, few], rules={}, modes={}), out)
    assert out.getvalue().splitlines()[-1] == (
        "nothing to convert yet: get_<order>'s result would have served as the answer in 4 of 5 "
        "judged runs, but only 4 run(s) ended after it: too few to tell"
    )
    page = rendered(report(candidates=[keep, few]), tmp_path)
    assert text(line(page, '<div class="answer">')).startswith(
        "Nothing to convert yet: get_<order>"
    )
    # served in under SERVED of the judged runs: nothing to name, little to save
    cut["judged"]["actions"] = {"restated": 2, "computed": 3}
    out = io.StringIO()
    render_summary(report(candidates=[keep, cut], rules={}, modes={}), out)
    assert out.getvalue().splitlines()[-1].startswith("little to save on this traffic")


def test_the_summary_says_every_unconverted_tools_advice_bounded() -> None:
    """A trial's user could not see a `keep` tool's advice in the terminal: with more than one
    advised tool, a line names each (at most 8, the rest counted); a tool that already signals
    is not advised."""
    keep = judged_candidate("search_flights", "keep", actions={"selected": 3, "asked": 2})
    cut = judged_candidate("get_order_status", "cut_short", actions={"computed": 5})
    out = io.StringIO()
    render_summary(report(candidates=[keep, cut], rules={}, modes={}), out)
    assert "advice per tool: search_flights keep, get_order_status cut_short" in (
        out.getvalue().splitlines()
    )
    many = [judged_candidate(f"tool_{n}", "keep", actions={"computed": 5}) for n in range(11)]
    out = io.StringIO()
    document = report(candidates=many, rules={}, modes={}, would_stop_by_tool={"tool_0": {}})
    render_summary(document, out)
    [advice] = [x for x in out.getvalue().splitlines() if x.startswith("advice per tool")]
    assert advice == (
        "advice per tool: " + ", ".join(f"tool_{n} keep" for n in range(1, 9))
        + "; 2 more in report.json's candidates"
    )  # fmt: skip


def test_the_summary_prices_the_narrator_only_when_one_ran() -> None:
    spent = {"model": 0.5, "narrator": 0.0}
    out = io.StringIO()
    render_summary(report(spent=spent, rules={}, modes={}), out)
    assert "spent at your prices: 0.500000 on the agent's model" in out.getvalue().splitlines()
    narrator = {"calls": 2, "input_tokens": 10, "output_tokens": 5}
    out = io.StringIO()
    render_summary(
        report(spent={**spent, "narrator": 0.25}, narrator=narrator, rules={}, modes={}), out
    )
    assert (
        "spent at your prices: 0.500000 on the agent's model, 0.250000 on the narrator"
        in out.getvalue().splitlines()
    )


def test_the_advice_and_its_sentence_are_said_once_per_tool(tmp_path: Path) -> None:
    """Issue 46 item 6: the verdict column repeated the advice's sentence (a judged tool's `why`
    is its `advice_why`)."""
    why = "in 5 of 5 runs the result as is would have served"
    entry = candidate("find", advice="convert", advice_why=why, why=why)
    page = rendered(report(candidates=[entry]), tmp_path)
    table = page.split("<h2>Tools worth converting</h2>")[1].split("</table>")[0]
    [row] = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])
    assert text(row).count(why) == 1
    assert f'<td data-label="advice" class="why">convert: {why}</td>' in row
    assert 'data-label="verdict"' not in row
