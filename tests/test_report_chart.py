"""Issue 46 item 7: the chart tells what the advice tells. One bar per tool advised `convert`
or `convert_with_answer`, coloured by advice, the cut-short part apart; tools advised `keep` or
`cut_short` are not drawn as worth converting; on a shadow-only log every panel says something
(not a single bar "none")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from report_runs import end
from toolstop.report import chart
from toolstop.report.chart import ADVICE_COLOURS, _candidate_panel, ended_by_advice
from toolstop.report.summary import Summary


class Axis:
    """Records every call a panel makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> str:
            self.calls.append((name, args, kwargs))
            return name

        return record

    @property
    def spines(self) -> Any:
        return {("top", "right"): Axis()}.get(("top", "right"))

    def __getitem__(self, _key: Any) -> Any:
        return self

    def all(self, name: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [(a, k) for n, a, k in self.calls if n == name]


def entry(tool: str, advice: str, gain: int, cut: int = 0, **extra: Any) -> dict[str, Any]:
    calls = {"model_calls": gain, "input_tokens": 0, "output_tokens": 0}
    return {
        "tool": tool, "advice": advice, "verdict": "keep", "signals": False, "ended_runs": 5,
        "gain": calls, "would_save": {**calls, "model_calls": gain + cut},
        "cut_short": {"model_calls": cut}, **extra,
    }  # fmt: skip


def test_only_advised_tools_are_drawn_coloured_by_advice_the_cut_short_part_apart() -> None:
    candidates = [
        entry("get_reservation_details", "cut_short", gain=40, cut=30),  # the old longest bar
        entry("search_flights", "keep", gain=25),
        entry("book_reservation", "convert_with_answer", gain=12, cut=3),
        entry("cancel_reservation", "convert", gain=7),
        entry("rare", "too_few", gain=2),
        entry("signalled", "convert", gain=50, signals=True),
    ]
    axis = Axis()
    _candidate_panel(axis, candidates)
    (gains, kw_gain), (cuts, kw_cut) = axis.all("barh")
    assert list(gains[1]) == [12, 7]
    assert kw_gain["color"] == [ADVICE_COLOURS["convert_with_answer"], ADVICE_COLOURS["convert"]]
    assert list(cuts[1]) == [3, 0]
    assert kw_cut["left"] == [12, 7]
    assert kw_cut["hatch"] == "//"
    [(ticks, _)] = axis.all("set_yticks")
    assert ticks[1] == ["book_reservation", "cancel_reservation"]
    [(_, labels)] = axis.all("bar_label")
    assert labels["labels"] == ["12 (convert_with_answer)\n+ 3 cut short", "7 (convert)"]


def test_with_no_tool_advised_the_panel_says_so() -> None:
    axis = Axis()
    _candidate_panel(
        axis, [entry("a", "keep", 9), entry("b", "keep", 4), entry("c", "cut_short", 9)]
    )
    assert axis.all("barh") == []
    [(args, _)] = axis.all("text")
    assert "No tool advised for conversion" in args[2]
    assert "3 tools: 2 keep, 1 cut_short" in args[2]


def shadow_only() -> dict[str, Any]:
    """A log of an agent in shadow mode whose tools do not signal: nothing would stop."""
    folded = Summary()
    plans = [("lookup", 0.9, 2)] * 6 + [("search", 0.1, 3)] * 3 + [(None, 0.0, 1)] * 2
    for number, (tool, overlap, calls) in enumerate(plans):
        record: dict[str, Any] = {
            "schema_version": 5, "mode": "never", "rule": "none", "model_calls": calls,
        }  # fmt: skip
        record["ended_after"] = None  # an answer without a tool call
        if tool is not None:
            record["calls_by_tool"] = {tool: 1}
            record["ended_after"] = {"tools": {tool: overlap}, "input_tokens": 5,
                                     "output_tokens": 1}  # fmt: skip
        folded.add(end(f"t{number}", None, **record))
    return folded.document()


def test_a_shadow_only_log_gets_three_panels_that_say_something(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    document = shadow_only()
    assert document["runs_by_outcome"] == {"none": 11}  # the old first panel: one bar "none"
    by_tool = {e["tool"]: e["advice"] for e in document["candidates"]}
    assert by_tool == {"lookup": "convert", "search": "too_few"}
    assert document["runs_by_advice"] == {"convert": 6, "too_few": 3, "none": 2}
    assert ended_by_advice(document) == {
        "convert": 6, "too_few": 3, "no tool before the answer": 2,
    }  # fmt: skip
    axes = [Axis(), Axis(), Axis()]

    class Figure:
        def __getattr__(self, name: str) -> Any:
            return lambda *a, **k: None

    import matplotlib.pyplot as plt

    monkeypatch.setattr(plt, "subplots", lambda *a, **k: (Figure(), axes))
    monkeypatch.setattr(plt, "close", lambda *a: None)
    chart._draw(document, tmp_path / "chart.png")
    [(first, kw)] = axes[0].all("bar")
    assert list(first[1]) == [6, 3, 2]
    assert kw["color"][:2] == [ADVICE_COLOURS["convert"], ADVICE_COLOURS["too_few"]]
    [(second, _)] = axes[1].all("bar")
    assert list(second[1]) == [2, 6, 3]  # runs with 1, 2 and 3 model calls
    [(ticks, _)] = axes[1].all("set_xticks")
    assert ticks[1] == ["1", "2", "3"]
    [(third, _), _cut] = axes[2].all("barh")
    assert list(third[1]) == [6]  # lookup: one model call saved in each of its 6 runs


def test_the_chart_is_a_png_on_a_shadow_only_log(tmp_path: Path) -> None:
    path = tmp_path / "chart.png"
    chart.render_chart(shadow_only(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_runs_by_advice_count_the_tools_the_candidates_list_folds_away() -> None:
    """report.json lists 50 candidates; `keep` ranks after `too_few`, so with 55 rare tools the
    one `keep` tool is folded away, and panel 1 drew its runs as "no tool before the answer"."""
    folded = Summary()
    base = {"schema_version": 4, "mode": "never", "rule": "none", "model_calls": 2}
    plans = [(f"rare{i}", 0.9) for i in range(55)] + [("reasoned", 0.05)] * 5
    for number, (tool, overlap) in enumerate(plans):
        after = {"tools": {tool: overlap}, "input_tokens": 1, "output_tokens": 1}
        folded.add(end(f"t{number}", None, **base, calls_by_tool={tool: 1}, ended_after=after))
    document = folded.document()
    assert "reasoned" not in {e["tool"] for e in document["candidates"]}
    assert document["runs_by_advice"] == {"too_few": 55, "keep": 5, "none": 0}
    assert ended_by_advice(document) == {"too_few": 55, "keep": 5}
