"""Issue 46 item 3: the cut-short share is taken over the runs a stop would end (a call of the
tool succeeded), and an advised tool whose stop would skip a write says so in report.json, the
summary and the page."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from helpers import CHROMIUM, layout
from report_runs import end
from toolstop.report.page import render_html
from toolstop.report.render import render_summary
from toolstop.report.summary import Summary

EXCHANGE = "exchange_delivered_order_items"
CANCEL = "cancel_pending_order"


def _ended(tool: str, action: str) -> dict[str, Any]:
    shape = "error" if action == "failed" else "object"
    return {
        "tools": {tool: 0.2},
        "input_tokens": 100,
        "output_tokens": 10,
        "judged": {tool: {"shape": shape, "action": action, "fields": ["order_id"]}},
    }


def _first(calls: int, skipped: list[str]) -> dict[str, Any]:
    tokens = {"input_tokens": 100 * calls, "output_tokens": 10}
    return {"model_calls": calls, **tokens, "skipped": skipped}


def _records(served: int, errors: int, cut: int) -> list[dict[str, Any]]:
    """`served` runs whose answer restated the exchange's result, `errors` runs whose only call
    of it failed (no `after_first` entry: no stop would fire), `cut` runs where a stop on its
    first success would have skipped a second exchange and a cancellation."""
    base = {"schema_version": 5, "mode": "never", "rule": "none", "model_calls": 2}
    records = [
        {**base, "calls_by_tool": {EXCHANGE: 1}, "after_first": {EXCHANGE: _first(1, [])},
         "ended_after": _ended(EXCHANGE, "restated")}
        for _ in range(served)
    ]  # fmt: skip
    records += [
        {**base, "calls_by_tool": {EXCHANGE: 1}, "after_first": {},
         "ended_after": _ended(EXCHANGE, "failed")}
        for _ in range(errors)
    ]  # fmt: skip
    records += [
        {**base, "model_calls": 3, "calls_by_tool": {EXCHANGE: 2, CANCEL: 1},
         "after_first": {EXCHANGE: _first(2, [EXCHANGE, CANCEL]), CANCEL: _first(1, [])},
         "ended_after": _ended(CANCEL, "restated")}
        for _ in range(cut)
    ]  # fmt: skip
    return records


def _document(records: list[dict[str, Any]]) -> dict[str, Any]:
    folded = Summary()
    for number, record in enumerate(records):
        folded.add(end(f"t{number}", "2026-12-01T10:00+00:00", **record))
    return {
        **folded.document(),
        "generated_at": None,
        "toolstop_version": "9",
        "source": {"log": "-"},
    }


def _entry(document: dict[str, Any], tool: str = EXCHANGE) -> dict[str, Any]:
    return next(e for e in document["candidates"] if e["tool"] == tool)


def test_the_cut_short_share_counts_only_the_runs_a_stop_would_end() -> None:
    # 3 of 40 runs (7.5%) call it and go on; but 10 of the 40 only failed, where no stop fires:
    # 3 of the 30 runs a stop would end (10%) is the rule's share
    entry = _entry(_document(_records(served=27, errors=10, cut=3)))
    assert (entry["runs"], entry["stoppable_runs"], entry["cut_short_runs"]) == (40, 30, 3)
    assert entry["advice"] == "cut_short"
    assert "in 3 of the 30 runs it would end" in entry["advice_why"]
    assert f"a write ({CANCEL}, {EXCHANGE}) in 3 of them" in entry["advice_why"]


def test_a_tool_advised_convert_says_which_writes_its_stop_would_skip(tmp_path: Path) -> None:
    document = _document(_records(served=28, errors=10, cut=2))  # 2 of 30: under the share
    entry = _entry(document)
    assert entry["advice"] == "convert_with_answer"
    assert entry["skips_writes"] == [CANCEL, EXCHANGE]  # both run twice; by name then
    assert entry["cut_short"]["writes_runs"] == 2
    warning = f"skipped a write ({CANCEL}, {EXCHANGE}) in 2 of the 30 runs it would end"
    assert warning in entry["advice_why"]
    out = io.StringIO()
    render_summary(document, out)
    [lead] = [line for line in out.getvalue().splitlines() if line.startswith("convert first")]
    assert EXCHANGE in lead
    assert warning in lead
    page = tmp_path / "report.html"
    render_html(document, None, page)
    answer = page.read_text().split('<div class="answer">')[1].split("</div>")[0]
    assert f"Careful with {EXCHANGE}</b>: a stop on it would have skipped a write" in answer
    at = document["candidates"].index(entry)
    assert f'data-metric="candidates.{at}.cut_short.writes_runs">2<' in answer
    assert f'data-metric="candidates.{at}.stoppable_runs">30<' in answer


def test_no_write_skipped_no_warning(tmp_path: Path) -> None:
    document = _document(_records(served=30, errors=10, cut=0))
    entry = _entry(document)
    assert entry["advice"] == "convert_with_answer"
    assert entry["skips_writes"] == []
    assert "skipped a write" not in entry["advice_why"]
    out = io.StringIO()
    render_summary(document, out)
    assert "skipped a write" not in out.getvalue()


def test_older_records_take_every_calling_run_as_stoppable() -> None:
    # schema 4: no after_first, so which calls succeeded is unknown
    records = [
        {"schema_version": 4, "mode": "never", "rule": "none", "calls_by_tool": {EXCHANGE: 1},
         "ended_after": {"tools": {EXCHANGE: 0.9}, "input_tokens": 1, "output_tokens": 1}}
        for _ in range(6)
    ]  # fmt: skip
    entry = _entry(_document(records))
    assert entry["stoppable_runs"] == entry["runs"] == 6
    assert entry["skips_writes"] == []


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed")
def test_the_page_with_a_write_warning_lays_out_without_sideways_scrolling(
    tmp_path: Path,
) -> None:
    """The advice cell names long tool names; a cell that cannot wrap them widened the table
    past the window."""
    page = tmp_path / "report.html"
    render_html(_document(_records(served=28, errors=10, cut=2)), None, page)
    for size in ((1280, 800), (390, 844)):
        found = layout(page, tmp_path / "profile", size, tmp_path / f"shot-{size[0]}.png")
        assert found["scroll"] <= found["inner"], (size, found["problems"])
        assert found["problems"] == [], size


def test_the_page_says_which_earlier_results_a_template_needs(tmp_path: Path) -> None:
    """Issue 46 item 5: a restated answer that took facts from earlier results says so."""
    records = _records(served=10, errors=0, cut=0)
    for record in records[:6]:
        record["ended_after"]["judged"][EXCHANGE]["earlier"] = ["get_user_details"]
    document = _document(records)
    entry = _entry(document)
    assert entry["judged"]["earlier"] == ["get_user_details"]
    assert entry["advice_why"].endswith(
        "(its template needs fields of earlier results: get_user_details)"
    )
    page = tmp_path / "report.html"
    render_html(document, None, page)
    answer = page.read_text().split('<div class="answer">')[1].split("</div>")[0]
    assert (
        "The answers also restated facts from earlier results of <b>get_user_details</b>: the "
        "tool's template needs those fields too." in answer
    )
