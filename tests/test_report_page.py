"""report.html (`toolstop.report.page`) read back as text, from the hand-summed figures of
tests/test_report_summary.py: the opening sentences, every tagged figure against report.json,
the sections and their columns. No browser (tests/test_report.py and test_candidates.py lay the
page out in Chromium where it is installed)."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from report_runs import RUNS, end, summary
from toolstop.report.page import money, render_html, when
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
        "candidates.0.would_save.cost", "candidates.1.answer_overlap.p10", "by_day.1.stopped",
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
        expected |= {f"candidates.{i}.would_save.{k}" for k in entry["would_save"]}
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
        "tool", "runs", "ended after it", "calls saved", "input tokens", "output tokens",
        "money (at your prices)", "overlap median", "overlap p10", "verdict",
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
    assert leads[-1] == (
        "Convert find first: 5 of its 5 runs ended right after it, with an answer that repeats "
        "its result (median overlap 1.00). A stop there would save 5 model calls (62% of all 8 "
        "model calls), 5,000,000 input and 0 output tokens, worth 15.00 at your prices."
    )
    assert 'data-metric="candidates.0.would_save.cost">15.00<' in page
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
