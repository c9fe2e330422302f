"""The report stays bounded whatever the number of distinct names (`toolstop.report.tally`):
each table counts a bounded number of names one by one, shows its largest, and folds the rest
into "other N tools", on the page and in report.json. Every figure here is counted by the test."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any

from report_runs import end
from toolstop.report.page import render_html
from toolstop.report.render import render_summary
from toolstop.report.summary import Summary
from toolstop.report.tally import DISTINCT, SHOWN, TRACKED, Table, Tally

MANY = TRACKED + 500


def shadow_run(tool: str, minute: int) -> Any:
    return end(
        "t", f"2026-12-01T{minute // 60 % 24:02d}:{minute % 60:02d}+00:00",
        schema_version=5, mode="never", rule="none", stopped=False, would_stop="completed",
        tools=[tool], model_calls=2, input_tokens=30, output_tokens=4,
        would_save={"model_calls": 1, "input_tokens": 10, "output_tokens": 2},
        calls_by_tool={tool: 1},
        ended_after={"tools": {tool: 0.9}, "input_tokens": 10, "output_tokens": 2},
    )  # fmt: skip


def folded_summary() -> tuple[Summary, dict[str, Any]]:
    """`MANY` tools each named by one run; `busy` named by 5 runs, first."""
    runs = [shadow_run("busy", 0) for _ in range(5)]
    runs += [shadow_run(f"tool-{i:05d}", i) for i in range(MANY)]
    folded = Summary()
    for run in runs:
        folded.add(run)
    return folded, folded.document()


def test_a_long_tail_of_tools_is_folded_with_its_counts_kept() -> None:
    folded, document = folded_summary()
    table = document["would_stop_by_tool"]
    assert len(table) == SHOWN
    assert table["busy"] == {"completed": 5}  # the largest is shown
    other = document["folded"]["would_stop_by_tool"]
    assert other == {
        "names": MANY + 1 - SHOWN,
        "at_least": False,
        "counts": {"completed": MANY + 5 - sum(c["completed"] for c in table.values())},
    }
    # memory: no table holds more than TRACKED names
    assert len(folded.would_stops) == TRACKED
    assert len(folded.candidates.runs) == len(folded.candidates.ended) == TRACKED
    # candidates: the ranked first SHOWN, the rest's savings summed
    assert len(document["candidates"]) == SHOWN
    assert document["candidates"][0]["tool"] == "busy"
    shown_calls = sum(e["would_save"]["model_calls"] for e in document["candidates"])
    cut = document["folded"]["candidates"]
    assert cut["names"] == MANY + 1 - SHOWN
    assert cut["would_save"]["model_calls"] == MANY + 5 - shown_calls
    assert cut["would_save"]["input_tokens"] == 10 * (MANY + 5) - 10 * shown_calls
    # totals stay exact
    assert document["would_save"]["model_calls"] == MANY + 5
    assert document["runs"] == MANY + 5


def test_the_page_and_the_summary_say_what_was_folded(tmp_path: Path) -> None:
    _, document = folded_summary()
    document |= {
        "generated_at": "2026-12-02T01:00:00+00:00", "toolstop_version": "9.9",
        "source": {"db": "x.sqlite"}, "since": None, "threads": 1, "open_runs": 0,
    }  # fmt: skip
    path = tmp_path / "report.html"
    render_html(document, None, path)
    page = path.read_text(encoding="utf-8")
    assert f"<code>would_stop_by_tool</code>: other {MANY + 1 - SHOWN:,} tools" in page
    assert f"<code>candidates</code>: other {MANY + 1 - SHOWN:,} tools" in page
    assert len(page) < 200_000  # bounded: was one row per tool
    out = io.StringIO()
    render_summary(document, out)
    assert f"up to {MANY + 1 - SHOWN} other names were counted together" in out.getvalue()


def test_a_tally_counts_past_its_cap_in_other_and_the_folded_names_up_to_a_bound() -> None:
    tally = Tally(cap=2)
    for name in ["a", "b", "c", "a", "c", "d"]:
        tally[name] += 1
    assert dict(tally) == {"a": 2, "b": 1}
    assert (tally.other, len(tally.folded), tally.folded.more) == (3, 2, False)
    table = Table(cap=1)
    table.setdefault("a", Counter())["x"] += 1
    table.setdefault("b", Counter())["x"] += 2
    table.setdefault("c", Counter())["y"] += 1
    assert (dict(table["a"]), dict(table.other), len(table.folded)) == (
        {"x": 1},
        {"x": 2, "y": 1},
        2,
    )
    wide = Tally(cap=0)
    for i in range(DISTINCT + 5):
        wide[i] += 1
    assert (wide.other, len(wide.folded), wide.folded.more) == (DISTINCT + 5, DISTINCT, True)


def invalid_run(tool: str, problem: str, rule: str) -> Any:
    return end(
        "t", "2026-12-01T10:00+00:00", schema_version=5, mode="never", rule="none",
        stopped=False, would_stop=rule, tools=[tool], model_calls=1,
        invalid_signals=[{"tool": tool, "problem": problem}],
    )  # fmt: skip


def test_the_counts_inside_a_table_are_bounded_too() -> None:
    """Distinct `problem` and `would_stop` values, on one tool and past the table's cap: each
    inner count keeps at most `INNER` keys, the rest under "other"; totals stay exact."""
    from toolstop.report.tally import INNER

    many = 3 * INNER
    summary = Summary()
    for i in range(many):
        summary.add(invalid_run("pay", f"problem {i}", f"rule {i}"))
    for i in range(TRACKED + many):
        summary.add(invalid_run(f"tool {i}", f"other problem {i}", f"other rule {i}"))
    for table in (summary.invalid_by_tool, summary.would_stops):
        assert len(table["pay"]) <= INNER + 1
        assert len(table.other) <= INNER + 1
        assert all(len(counts) <= INNER + 1 for counts in table.values())
    assert sum(summary.invalid_by_tool["pay"].values()) == many
    assert summary.invalid_by_tool["pay"]["other"] == many - INNER
    assert sum(summary.invalid_by_tool.other.values()) == many + 1  # "pay" took one place
    document = summary.document()
    folded = document["folded"]["invalid_by_tool"]["counts"]
    shown = sum(sum(c.values()) for c in document["invalid_by_tool"].values())
    assert shown + sum(folded.values()) == 2 * many + TRACKED  # every signal counted once
    assert len(folded) <= 2 * INNER + 2


def test_a_log_counts_its_threads_in_bounded_memory(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """`--log` once kept every thread id in a set: now hashes, exact up to a cap."""
    import json

    from toolstop.cli import main
    from toolstop.cli import report as report_command

    monkeypatch.setattr(report_command, "THREADS_COUNTED", 10)
    record = {"schema_version": 5, "run": 1, "rule": "none", "mode": "never", "model_calls": 1}
    log = tmp_path / "runs.jsonl"
    log.write_text(
        "".join(
            json.dumps({"event": "run_end", "thread_id": f"t{i}", "record": record}) + "\n"
            for i in range(25)
        )
    )
    assert main(["report", "--log", str(log), "--out", str(tmp_path / "r")], out=io.StringIO()) == 0
    document = json.loads((tmp_path / "r" / "report.json").read_text())
    assert (document["threads"], document["threads_at_least"]) == (10, True)
    assert "threads with finished runs (at least)" in (tmp_path / "r" / "report.html").read_text()
