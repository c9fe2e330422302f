"""`toolstop report`'s figures (`toolstop.report.summary`) and its terminal summary, from records
written by hand: every figure below is summed by hand from the six runs, not by toolstop.

tests/test_report.py checks the same figures end to end on real traffic; here each branch of the
fold (a missing key, a value of the wrong type, a nested namespace, a day boundary in another
time zone, a rule toolstop does not know) is pinned, key order included (report.json's order).
"""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from report_runs import RUNS, end, summary
from toolstop.report.records import out_of_range
from toolstop.report.render import render_chart, render_summary, write_json
from toolstop.report.summary import with_prices

FEW = "only 1 run(s) ended after it: too few to tell"
EXPECTED: dict[str, Any] = {
    "runs": 6,
    "first_run_ended": "2026-11-30T10:00:00+00:00",
    "last_run_ended": "2026-12-01T23:30:00+00:00",
    "rules": {"completed": 1, "fatal": 1, "step_budget": 1, "none": 2, "old_rule": 1},
    "ended_by": {"LimitMW": 1},
    "stopped": 3,
    "modes": {"hard": 2, "never": 3, "polish": 1},
    "hard_share": 0.3333,
    "model_calls": 11,
    "input_tokens": 720,
    "output_tokens": 90,
    "narrator": {"calls": 0, "input_tokens": 0, "output_tokens": 0},
    "by_mode": {
        "hard": {
            "runs": 2, "model_calls": 4, "input_tokens": 200, "output_tokens": 15,
            "model_calls_per_run": 2.0,
        },
        "never": {
            "runs": 3, "model_calls": 7, "input_tokens": 520, "output_tokens": 72,
            "model_calls_per_run": 2.3333,
        },
        "polish": {
            "runs": 1, "model_calls": 0, "input_tokens": 0, "output_tokens": 3,
            "model_calls_per_run": 0.0,
        },
    },
    "model_calls_per_run": {"0": 1, "1": 2, "2": 1, "3": 1, "4": 1},
    "stops_by_tool": {"charge": {"fatal": 1}, "pay": {"completed": 1}},
    "would_stop_by_tool": {"lookup": {"retry_budget": 1}, "pay": {"completed": 1}},
    "tool_calls": {"completed": 2, "fatal": 1, "invalid": 1, "transient": 1, "unsignalled": 2},
    "invalid": 1,
    "unsignalled": 2,
    "invalid_by_problem": {"stop_not_bool": 2},
    "invalid_by_tool": {"None": {"stop_not_bool": 1}, "lookup": {"stop_not_bool": 1}},
    "answer_failed_by_tool": {},
    "would_save": {
        "runs": 2, "model_calls": 3, "input_tokens": 160, "output_tokens": 20,
        "share_of_shadow_model_calls": 0.4286, "share_of_shadow_input_tokens": 0.3077,
        "cut_short": {
            "runs": 0, "model_calls": 0, "input_tokens": 0, "output_tokens": 0,
            "writes_runs": 0, "skipped_tools": [],
        },
        "gain": {
            "model_calls": 3, "input_tokens": 160, "output_tokens": 20,
            "share_of_shadow_model_calls": 0.4286,
        },
    },
    "schema_versions": {"1": 1, "4": 1, "5": 4},
    "namespaces": {"nested": 1, "root": 5},
    "would_stop_rules": {"completed": 1, "retry_budget": 1, "none": 1},
    "runs_by_outcome": {
        "completed": 1, "fatal": 1, "step_budget": 1, "old_rule": 1,
        "would stop: completed": 1, "would stop: retry_budget": 1,
    },
    "hard_mode": {
        "runs": 2, "stopped": 1, "model_calls_saved": 1,
        "input_tokens_saved_estimate": 53,  # 1 stop x 160 tokens / 3 calls
        "output_tokens_saved_estimate": 7,  # 1 stop x 20 tokens / 3 calls
    },
    "by_day": [
        {
            "day": "2026-11-30", "runs": 3, "stopped": 1, "model_calls": 4,
            "input_tokens": 470, "output_tokens": 52, "would_save_model_calls": 1,
            "would_save_input_tokens": 100, "would_save_output_tokens": 20,
        },
        {
            "day": "2026-12-01", "runs": 2, "stopped": 1, "model_calls": 4,
            "input_tokens": 200, "output_tokens": 33, "would_save_model_calls": 2,
            "would_save_input_tokens": 60, "would_save_output_tokens": 0,
        },
    ],
    "candidates": [
        {
            "tool": "search", "runs": 1, "stoppable_runs": 1, "ended_runs": 1,
            "would_save": {"model_calls": 1, "input_tokens": 15, "output_tokens": 1},
            "cut_short_runs": 0,
            "cut_short": {
                "runs": 0, "model_calls": 0, "input_tokens": 0, "output_tokens": 0,
                "writes_runs": 0, "skipped_tools": [],
            },
            "skips_writes": [],
            "gain": {"model_calls": 1, "input_tokens": 15, "output_tokens": 1},
            "ended_on_it": 0,
            "answer_overlap": {"median": 0.1, "p10": 0.1},
            "verdict": "few", "why": FEW, "advice": "too_few",
            "advice_why": "only 1 run(s) ended after it: too few to tell",
            "convert_line": None,
            "judged": {"runs": 0, "actions": {}, "shapes": {}, "fields": [], "earlier": []},
            "threads": ["c"],
            "signals": False,
        },
        {
            "tool": "pay", "runs": 1, "stoppable_runs": 1, "ended_runs": 1,
            "would_save": {"model_calls": 1, "input_tokens": 100, "output_tokens": 20},
            "cut_short_runs": 0,
            "cut_short": {
                "runs": 0, "model_calls": 0, "input_tokens": 0, "output_tokens": 0,
                "writes_runs": 0, "skipped_tools": [],
            },
            "skips_writes": [],
            "gain": {"model_calls": 1, "input_tokens": 100, "output_tokens": 20},
            "ended_on_it": 0,
            "answer_overlap": {"median": 0.9, "p10": 0.9},
            "verdict": "few", "why": FEW, "advice": "too_few",
            "advice_why": "only 1 run(s) ended after it: too few to tell",
            "convert_line": None,
            "judged": {"runs": 0, "actions": {}, "shapes": {}, "fields": [], "earlier": []},
            "threads": ["a"],
            "signals": True,
        },
    ],
    "candidate_runs": 2,
    "runs_by_advice": {"too_few": 1, "none": 0},  # search; pay signals already
    "folded": {},
}  # fmt: skip


def test_every_figure_of_six_runs_in_report_jsons_order() -> None:
    document = summary([RUNS[5], RUNS[0], RUNS[2], RUNS[3], RUNS[1], RUNS[4]])
    assert json.dumps(document) == json.dumps(EXPECTED)  # values and key order


def test_no_runs() -> None:
    document = summary([])
    assert (document["runs"], document["first_run_ended"], document["last_run_ended"]) == (
        0,
        None,
        None,
    )
    assert document["hard_share"] is None
    assert document["rules"] == document["runs_by_outcome"] == {}
    assert document["would_save"]["share_of_shadow_model_calls"] is None
    assert document["hard_mode"] == {
        "runs": 0,
        "stopped": 0,
        "model_calls_saved": 0,
        "input_tokens_saved_estimate": None,
        "output_tokens_saved_estimate": None,
    }
    assert (document["by_day"], document["candidates"], document["candidate_runs"]) == ([], [], 0)


def test_prices_put_money_beside_each_saving() -> None:
    priced = with_prices(summary(RUNS), 3.0, 15.0)
    assert priced["prices"] == {
        "input_per_million": 3.0,
        "output_per_million": 15.0,
        "narrator_input_per_million": 3.0,  # no narrator prices: the agent model's
        "narrator_output_per_million": 15.0,
    }
    assert priced["spent"] == {"model": round((720 * 3 + 90 * 15) / 1e6, 6), "narrator": 0.0}
    assert priced["would_save"] == {
        **EXPECTED["would_save"],
        "cost": round((160 * 3 + 20 * 15) / 1_000_000, 4),
    }
    assert priced["hard_mode"] == {
        **EXPECTED["hard_mode"],
        "cost_saved_estimate": round((53 * 3 + 7 * 15) / 1_000_000, 4),
    }
    costs = [entry["would_save"]["cost"] for entry in priced["candidates"]]
    assert costs == [round((15 * 3 + 1 * 15) / 1e6, 4), round((100 * 3 + 20 * 15) / 1e6, 4)]
    assert {
        k: v
        for k, v in priced.items()
        if k not in ("prices", "spent", "would_save", "hard_mode", "candidates")
    } == {k: v for k, v in EXPECTED.items() if k not in ("would_save", "hard_mode", "candidates")}
    # without shadow-mode savings there is no estimate, and so no cost
    assert with_prices(summary([]), 3.0, 15.0)["hard_mode"]["cost_saved_estimate"] is None


def test_the_terminal_summary() -> None:
    document = {**summary(RUNS), "source": {"db": "agent.sqlite"}, "threads": 3, "open_runs": 0}
    out = io.StringIO()
    render_summary(document, out)
    assert out.getvalue().splitlines() == [
        "runs: 6 (completed 1, fatal 1, step_budget 1, none 2, old_rule 1)",
        "ended by another middleware, not the model's answer: 1 (LimitMW 1)",
        "modes: hard 2, never 3, polish 1; hard-mode share 0.33",
        "model calls: 11; tokens: 720 in, 90 out",
        "tool calls: completed 2, fatal 1, transient 1; 1 invalid, 2 unsignalled",
        "threads: 3; open runs: 0",
        "shadow mode: 2 runs would have stopped; hard mode would save 3 model calls (0.43 of "
        "shadow-mode calls), 160 input and 20 output tokens",
        "hard mode: stopped 1 of 2 runs, saving at least 1 model calls",
        f"next tool to look at: search (1 of 1 runs ended after it, median answer overlap "
        f"0.10): {FEW}",
    ]


def test_the_terminal_summary_of_a_log_without_runs() -> None:
    document = {**summary([]), "source": {"log": "runs.jsonl"}}
    out = io.StringIO()
    render_summary(document, out)
    assert out.getvalue().splitlines() == [
        "runs: 0 (-)",
        "modes: -; hard-mode share -",
        "model calls: 0; tokens: 0 in, 0 out",
        "tool calls: 0 invalid, 0 unsignalled",
        "threads: -; open runs: not known from a log",
    ]


def test_the_terminal_summary_names_a_stop_candidate_to_convert_first() -> None:
    five = [
        end("t", None, mode="never", rule="none", calls_by_tool={"find": 1},
            ended_after={"tools": {"find": 1.0}})
        for _ in range(5)
    ]  # fmt: skip
    document = {**summary(five), "source": {"db": "x"}, "threads": 1, "open_runs": 2}
    out = io.StringIO()
    render_summary(document, out)
    lines = out.getvalue().splitlines()
    assert lines[-3:] == [
        "threads: 1; open runs: 2",
        "convert first: find (5 of 5 runs ended after it, median answer overlap 1.00): "
        "the answer repeats its result: a stop candidate",
        "  toolstop.convert(find)",  # the line that converts it
    ]


def test_report_json_is_the_document_indented(tmp_path: Path) -> None:
    document = summary(RUNS)
    write_json(document, tmp_path / "report.json")
    assert (tmp_path / "report.json").read_text(encoding="utf-8") == (
        json.dumps(EXPECTED, indent=2) + "\n"
    )


@pytest.mark.parametrize("savings", [True, False], ids=["shadow-savings", "candidates-only"])
def test_the_chart_is_drawn_for_either_kind_of_traffic(tmp_path: Path, savings: bool) -> None:
    pytest.importorskip("matplotlib", reason="the report chart needs the `bench` extra")
    runs = RUNS if savings else [r for r in RUNS if not r.record.get("would_stop")]
    document = summary(runs)
    assert bool(document["would_save"]["runs"]) is savings
    assert document["candidates"]
    chart = tmp_path / "chart.png"
    render_chart(document, chart)
    data = chart.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (14 * 110, round(4.6 * 110))  # 14 x 4.6 inches at 110 dpi


def test_a_large_saving_is_priced_to_the_cent() -> None:
    # 100 million input tokens at 3 per million and 2 million output tokens at 15 per million
    big = [
        end("t", None, mode="never", rule="none", would_stop="completed", tools=["pay"],
            model_calls=1, would_save={"model_calls": 1, "input_tokens": 100_000_000,
                                       "output_tokens": 2_000_000})
    ]  # fmt: skip
    priced = with_prices(summary(big), 3.0, 15.0)
    assert priced["would_save"]["cost"] == 300.0 + 30.0


def test_a_record_without_a_rule_or_a_mode_counts_as_none() -> None:
    document = summary([end("t", None, model_calls=1)])
    assert (document["rules"], document["modes"]) == ({"none": 1}, {"?": 1})
    assert document["runs_by_outcome"] == {"none": 1}


def test_counts_add_up_when_the_same_runs_come_twice() -> None:
    twice = summary(RUNS + RUNS)

    def doubled(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: doubled(inner) for key, inner in value.items()}
        return 2 * value

    for key in ("ended_by", "stops_by_tool", "would_stop_by_tool", "invalid_by_tool"):
        assert twice[key] == doubled(EXPECTED[key]), key
    for key in ("would_stop_rules", "runs_by_outcome", "tool_calls", "rules", "modes"):
        assert twice[key] == doubled(EXPECTED[key]), key
    assert twice["by_day"] == [
        {key: value if key == "day" else 2 * value for key, value in day.items()}
        for day in EXPECTED["by_day"]
    ]
    # hard mode stopped two runs (run 2, twice): not the step budget's, not polish mode's
    assert twice["hard_mode"]["stopped"] == 2


def test_days_are_utc_days_whatever_the_machines_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "JST-9")  # a POSIX zone: no tz database needed
    time.tzset()
    try:
        assert [d["day"] for d in summary(RUNS)["by_day"]] == ["2026-11-30", "2026-12-01"]
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_terminal_summary_suggests_no_tool_that_already_signals() -> None:
    stopped = [
        end("t", None, mode="hard", rule="fatal", stopped=True, tools=["charge"],
            calls_by_tool={"charge": 1}, ended_after={"tools": {"charge": 1.0}})
        for _ in range(5)
    ]  # fmt: skip
    document = {**summary(stopped), "source": {"db": "x"}, "threads": 1, "open_runs": 0}
    assert [e["tool"] for e in document["candidates"]] == ["charge"]
    out = io.StringIO()
    render_summary(document, out)
    assert out.getvalue().splitlines()[-1] == (
        "hard mode: stopped 5 of 5 runs, saving at least 5 model calls"
    )


def test_the_terminal_summary_names_every_middleware_that_ended_runs() -> None:
    runs = [
        end("t", None, mode="hard", rule="none", ended_by=name)
        for name in ("LimitA", "LimitB", "LimitB")
    ]
    document = {**summary(runs), "source": {"db": "x"}}  # threads and open runs not counted
    out = io.StringIO()
    render_summary(document, out)
    lines = out.getvalue().splitlines()
    assert lines[1] == (
        "ended by another middleware, not the model's answer: 3 (LimitA 1, LimitB 2)"
    )
    assert "threads: -; open runs: -" in lines


def drawn(document: dict[str, Any], path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The chart's matplotlib figure, kept from being closed so its bars can be read."""
    plt = pytest.importorskip(
        "matplotlib.pyplot", reason="the report chart needs the `bench` extra"
    )
    closed: list[Any] = []
    monkeypatch.setattr(plt, "close", closed.append)
    render_chart(document, path)
    [figure] = closed
    return figure


def test_the_charts_bars_are_report_jsons_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figure = drawn(summary(RUNS), tmp_path / "chart.png", monkeypatch)
    runs, per_run, saved = figure.axes
    assert [p.get_height() for p in runs.patches] == list(EXPECTED["runs_by_outcome"].values())
    assert [p.get_height() for p in per_run.patches] == [2.0, 2.3333, 0.0]  # hard, never, polish
    # what shadow mode would save, as a share of what shadow mode spent (3/7, 160/520, 20/72)
    assert [round(p.get_height(), 2) for p in saved.patches] == [42.86, 30.77, 27.78]
    assert [t.get_text() for t in saved.get_xticklabels()] == [
        "model calls",
        "input tokens",
        "output tokens",
    ]


def test_the_chart_shows_the_advised_tools_without_shadow_savings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tools 4 to 6 (5 to 7 runs, answers that repeat the result) are advised convert; tools 0
    to 3 have too few runs and are not drawn as worth converting (issue 46)."""
    runs = [
        end("t", None, mode="hard", rule="none", model_calls=1, calls_by_tool={f"tool{i}": 1},
            ended_after={"tools": {f"tool{i}": 0.9}})
        for i in range(7)
        for _ in range(i + 1)
    ]  # fmt: skip
    document = summary(runs)
    figure = drawn(document, tmp_path / "chart.png", monkeypatch)
    panel = figure.axes[2]
    assert [p.get_width() for p in panel.patches] == [7, 6, 5, 0, 0, 0]  # then no cut short
    assert [t.get_text() for t in panel.get_yticklabels()] == ["tool6", "tool5", "tool4"]
    # one mode: the runs by their model calls (all 28 made one)
    assert [p.get_height() for p in figure.axes[1].patches] == [28]


def test_the_chart_shows_no_share_of_nothing_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shadow = [
        end("t", None, mode="never", rule="none", would_stop="completed", tools=["pay"],
            model_calls=2, input_tokens=100, output_tokens=0,
            would_save={"model_calls": 1, "input_tokens": 50, "output_tokens": 0})
    ]  # fmt: skip
    figure = drawn(summary(shadow), tmp_path / "chart.png", monkeypatch)
    assert [p.get_height() for p in figure.axes[2].patches] == [50.0, 50.0, 0.0]


def test_names_a_run_produced_are_drawn_as_text_never_as_mathtext(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool the model named `$\\frac{$` once made the report fail in matplotlib's parser."""
    names = ["$\\frac{$", "$x^{$", "$$", "a $b$ c"]
    runs = [
        end(
            "t", "2026-12-01T10:00+00:00",
            schema_version=5, mode=name, rule=name, stopped=False, would_stop=None,
            model_calls=1, calls_by_tool={name: 1},
            ended_after={"tools": {name: 0.9}, "input_tokens": 1, "output_tokens": 1},
        )
        for name in names
        for _ in range(5)  # enough runs to be advised, so drawn as worth converting
    ]  # fmt: skip
    figure = drawn(summary(runs), tmp_path / "chart.png", monkeypatch)
    rules, modes, tools = figure.axes
    assert sorted(label.get_text() for label in rules.get_xticklabels()) == sorted(names)
    assert sorted(label.get_text() for label in modes.get_xticklabels()) == sorted(names)
    assert sorted(label.get_text() for label in tools.get_yticklabels()) == sorted(names)
    assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"


def test_answer_templates_that_did_not_render_are_counted_by_tool_and_why() -> None:
    failed = [{"tool": "book", "why": "KeyError"}, {"tool": "book", "why": "blank"}]
    runs = [
        end("a", None, mode="hard", rule="completed", answer_failed=failed),
        end("b", None, mode="hard", rule="completed", answer_failed=failed[:1]),
        end("c", None, mode="hard", rule="completed", answer_failed="not a list"),
        end("d", None, mode="hard", rule="completed", answer_failed=[7, {"tool": "x" * 500}]),
    ]
    document = summary(runs)
    assert document["answer_failed_by_tool"] == {
        "book": {"KeyError": 2, "blank": 1},
        "x" * 199 + "…": {"None": 1},  # a name cut, a missing reason named None
    }
    assert document["runs"] == 4  # entries that are not entries are skipped
    # where records are read, a record whose answer_failed is not a list is unreadable
    assert out_of_range({"answer_failed": "not a list"}) == "answer_failed"
    out = io.StringIO()
    render_summary({**document, "source": {"log": "runs.jsonl"}}, out)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("answer templates"))
    assert line.startswith(
        "answer templates that did not render (the stop showed the content): "
        "book (KeyError 2, blank 1); "
    )
