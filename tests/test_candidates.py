"""Savings before a line changes: on an unchanged agent (plain tools) in shadow mode, the report
ranks the tools worth converting; its page leads with the answer and lays out at desktop and
phone sizes. On SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from helpers import CHROMIUM, layout
from routers import ROUTERS
from toolstop import StopPolicy
from toolstop.cli import main
from toolstop.report.candidates import Candidates, verdict, writes
from toolstop.testing import ScriptedChatModel, call

TOKENS = ("input_tokens", "output_tokens")
ORDER = "Order {id} ships Monday from the Berlin warehouse by express courier, tracking {id}-DE."
FIGURES = "Order {id}: price 120 EUR, restocking fee 35 EUR, return shipping 12 EUR."


@tool
def lookup_order(order_id: str) -> str:
    """Where an order is. A plain tool: no artifact, no signal."""
    return ORDER.format(id=order_id)


@tool
def refund_figures(order_id: str) -> str:
    """The figures of a refund. A plain tool."""
    return FIGURES.format(id=order_id)


# The model repeats lookup_order's result, and reasons about refund_figures'.
REPEATS = [
    "Order {id} ships Monday from the Berlin warehouse by express courier, tracking {id}-DE.",
    "Your order {id} ships Monday by express courier from the Berlin warehouse.",
    "Order {id} ships Monday; tracking {id}-DE.",
]
REASONS = [
    "I would keep it: after the fees you would get back far less than you paid.",
    "Keeping it is cheaper for you than sending it back, so I suggest you do not return it.",
    "A return is hardly worth it here; most of what you paid would be lost to charges.",
]


@dataclass
class Plan:
    """One run: its script (the model's answers) and the thread it runs on."""

    thread: str
    script: list[Any]


def plans() -> list[Plan]:
    out = []
    for i in range(10):  # 10 runs end right after lookup_order
        order = str(4700 + i)
        answer = REPEATS[i % 3].format(id=order)
        out.append(Plan(f"t{i % 3}", [call("lookup_order", order_id=order), answer]))
    for i in range(5):  # 5 end after refund_figures, one of them after lookup_order first
        order = str(4800 + i)
        script: list[Any] = [call("refund_figures", order_id=order), REASONS[i % 3]]
        if i == 0:
            script = [call("lookup_order", order_id=order), *script]
        out.append(Plan(f"t{i % 3}", script))
    out.append(Plan("t1", ["Hello! How can I help?"]))  # no tool: ends after none
    return out


@dataclass
class Seen:
    """What the test saw of the runs, from the messages alone (not from the records)."""

    runs_with: Counter[str]
    ended_after: Counter[str]
    final_tokens: dict[str, Counter[str]]
    threads: set[str]
    hard: dict[str, Counter[str]]
    """Per tool: model calls and tokens after its first successful result, and the runs where
    later tools were called (cut short)."""


def drive(checkpointer: Any) -> Seen:
    seen = Seen(Counter(), Counter(), {}, set(), {})
    for n, plan in enumerate(plans()):
        router = ROUTERS[n % len(ROUTERS)]  # every router records it the same way
        model = ScriptedChatModel(plan.script)
        agent = router.build(  # the unchanged agent, with toolstop in shadow mode
            model,
            [lookup_order, refund_figures],
            policy=StopPolicy(mode="never"),
            checkpointer=checkpointer,
        )
        config = {"configurable": {"thread_id": f"{router.name}-{plan.thread}"}}
        seen.threads.add(config["configurable"]["thread_id"])
        before = len(agent.get_state(config).values.get("messages", []))
        state = agent.invoke({"messages": [HumanMessage("Where is my order?")]}, config)
        model.assert_complete()
        new = state["messages"][before + 1 :]
        for name in {m.name for m in new if isinstance(m, ToolMessage)}:
            seen.runs_with[str(name)] += 1
        firsts: set[str] = set()
        for at, message in enumerate(new):
            if not isinstance(message, ToolMessage) or message.name in firsts:
                continue
            firsts.add(str(message.name))
            hard = seen.hard.setdefault(str(message.name), Counter())
            later = [m for m in new[at + 1 :] if isinstance(m, AIMessage)]
            hard["model_calls"] += len(later)
            hard["input_tokens"] += sum(
                (m.usage_metadata or {}).get("input_tokens", 0) for m in later
            )
            hard["output_tokens"] += sum(
                (m.usage_metadata or {}).get("output_tokens", 0) for m in later
            )
            hard["cut_short_runs"] += any(m.tool_calls for m in later)
        final = new[-1]
        assert isinstance(final, AIMessage)
        assert not final.tool_calls
        if len(new) >= 2 and isinstance(new[-2], ToolMessage):
            name = str(new[-2].name)
            seen.ended_after[name] += 1
            usage = final.usage_metadata or {}
            tokens = seen.final_tokens.setdefault(name, Counter())
            tokens["input_tokens"] += usage.get("input_tokens", 0)
            tokens["output_tokens"] += usage.get("output_tokens", 0)
    return seen


def report(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["report", *argv], out=out), out.getvalue()


def check_ranking(document: dict[str, Any], seen: Seen) -> None:
    first, second = document["candidates"]
    assert first["tool"] == "lookup_order"
    assert first["verdict"] == "candidate"
    assert second["tool"] == "refund_figures"
    assert second["verdict"] == "keep"
    for entry in (first, second):
        tool = entry["tool"]
        assert entry["runs"] == seen.runs_with[tool]
        assert entry["ended_runs"] == seen.ended_after[tool]
        hard = seen.hard[tool]
        assert entry["would_save"] == {k: hard[k] for k in ("model_calls", *TOKENS)}
        assert entry["cut_short_runs"] == hard["cut_short_runs"]
    assert (first["ended_runs"], first["runs"]) == (10, 11)
    # one run called refund_figures after lookup_order: a stop there would have skipped it
    assert first["would_save"]["model_calls"] == 10 + 2
    assert first["cut_short"]["runs"] == 1
    assert first["cut_short"]["model_calls"] == 2
    assert first["gain"]["model_calls"] == 10  # the cut-short run's calls are not a gain
    # 1 of 11 runs cut short: under 1 in 10, so the relayed answers decide
    assert (first["advice"], second["advice"]) == ("convert", "keep")
    assert first["judged"]["actions"] == {"relayed": 10}
    assert first["judged"]["shapes"] == {"prose": 10}
    assert second["judged"]["actions"] == {"own": 5}
    assert first["cut_short"]["skipped_tools"] == [
        {"tool": "refund_figures", "runs": 1, "writes": True}  # "refund" names a write
    ]
    assert second["cut_short_runs"] == 0
    assert (second["ended_runs"], second["runs"]) == (5, 5)
    assert first["answer_overlap"]["median"] >= 0.9
    assert first["answer_overlap"]["p10"] >= 0.6
    assert second["answer_overlap"]["median"] <= 0.1
    assert document["candidate_runs"] == len(plans())


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Seen]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path_factory.mktemp("unchanged") / "agent.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        seen = drive(saver)
    logging.getLogger("toolstop").setLevel(logging.NOTSET)
    return db, seen


def test_the_report_ranks_the_tool_whose_result_is_the_answer_first(
    sqlite_db: tuple[Path, Seen], tmp_path: Path
) -> None:
    db, seen = sqlite_db
    code, text = report("--db", str(db), "--out", str(tmp_path))
    assert code == 0, text
    document = json.loads((tmp_path / "report.json").read_text())
    check_ranking(document, seen)
    assert "convert first: lookup_order (10 of 11 runs" in text
    assert f"threads: {len(seen.threads)}; open runs: 0" in text


def test_prices_turn_the_savings_into_money(sqlite_db: tuple[Path, Seen], tmp_path: Path) -> None:
    db, seen = sqlite_db
    code, _ = report(
        "--db", str(db), "--out", str(tmp_path), "--price-in", "3", "--price-out", "15"
    )
    assert code == 0
    document = json.loads((tmp_path / "report.json").read_text())
    tokens = seen.hard["lookup_order"]
    expected = (tokens["input_tokens"] * 3 + tokens["output_tokens"] * 15) / 1_000_000
    assert document["candidates"][0]["would_save"]["cost"] == round(expected, 4)
    assert document["prices"] == {
        "input_per_million": 3.0,
        "output_per_million": 15.0,
        "narrator_input_per_million": 3.0,  # no narrator prices given: the agent model's
        "narrator_output_per_million": 15.0,
    }
    gain = document["candidates"][0]["gain"]
    assert gain["cost"] == _cost(gain["input_tokens"], gain["output_tokens"])
    page = (tmp_path / "report.html").read_text()
    # the page shows the gain: the cut-short runs' calls are never a saving
    assert 'data-metric="candidates.0.gain.cost"' in page
    assert 'data-metric="candidates.0.would_save.cost"' not in page


def _cost(input_tokens: int, output_tokens: int) -> float:
    return round((input_tokens * 3 + output_tokens * 15) / 1_000_000, 4)


@pytest.mark.parametrize("price", ["-1", "nan", "cheap", "inf", "1e308", "10000.5"])
def test_a_bad_price_is_one_clear_line(
    price: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["report", "--log", "-", "--out", str(tmp_path), "--price-in", price])
    assert exit_.value.code == 2
    assert "a price per million tokens is a number >= 0 and <= 10,000" in capsys.readouterr().err


def test_report_json_never_holds_nan_or_infinity(tmp_path: Path) -> None:
    from toolstop.report.render import write_json

    path = tmp_path / "report.json"
    write_json({"a": float("inf"), "b": [1.5, float("nan"), {"c": -float("inf")}]}, path)
    text = path.read_text(encoding="utf-8")
    assert json.loads(text, parse_constant=lambda name: pytest.fail(name)) == {
        "a": None,
        "b": [1.5, None, {"c": None}],
    }


@pytest.fixture(scope="module")
def postgres_db(postgres_url: str) -> Iterator[str]:
    import psycopg

    name = f"toolstop_candidates_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = urlunsplit(urlsplit(postgres_url)._replace(path=f"/{name}"))
    try:
        yield url
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_the_ranking_on_postgres(postgres_db: str, tmp_path: Path) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_db) as saver:
        saver.setup()
        seen = drive(saver)
    logging.getLogger("toolstop").setLevel(logging.NOTSET)
    code, text = report("--db", postgres_db, "--out", str(tmp_path))
    assert code == 0, text
    check_ranking(json.loads((tmp_path / "report.json").read_text()), seen)


# -- older records, days, verdicts --------------------------------------------------------------
OLD_RECORD = {  # a schema 2 record as toolstop 0.x wrote it: no calls_by_tool, no ended_after
    "schema_version": 2, "run": 1, "rule": "none", "stopped": False, "mode": "never",
    "parallel": "all", "would_stop": "completed",
    "would_save": {"model_calls": 1, "input_tokens": 120, "output_tokens": 30},
    "tools": ["pay"], "tool_call_ids": ["c1"], "invalid_signals": [],
    "outcomes": {"completed": 1, "transient": 0, "fatal": 0, "policy_block": 0, "invalid": 0,
                 "unsignalled": 0, "rejected": 0},
    "transient_retries": 0, "tool_turns": 1, "model_calls": 2, "input_tokens": 200,
    "output_tokens": 50,
}  # fmt: skip


def _line(record: dict[str, Any], time: str, thread: str) -> str:
    return json.dumps({"event": "run_end", "time": time, "thread_id": thread, "record": record})


def test_older_records_still_read_and_days_are_shown(tmp_path: Path) -> None:
    new = {
        **OLD_RECORD,
        "schema_version": 4,
        "would_stop": None,
        "would_save": {"model_calls": 0, "input_tokens": 0, "output_tokens": 0},
        "calls_by_tool": {"lookup": 1},
        "ended_after": {"tools": {"lookup": 0.95}, "input_tokens": 80, "output_tokens": 20},
    }
    log = tmp_path / "runs.jsonl"
    log.write_text(
        "\n".join(
            [
                _line(OLD_RECORD, "2026-11-29T10:00:00+00:00", "a"),
                _line(OLD_RECORD, "2026-11-30T10:00:00+00:00", "b"),
                _line(new, "2026-11-30T11:00:00+00:00", "c"),
            ]
        )
        + "\n"
    )
    out = tmp_path / "out"
    code, text = report("--log", str(log), "--out", str(out))
    assert code == 0, text
    document = json.loads((out / "report.json").read_text())
    assert document["schema_versions"] == {"2": 2, "4": 1}
    assert document["candidate_runs"] == 1  # the old records carry no candidate data
    assert document["candidates"][0]["tool"] == "lookup"
    assert document["would_save"]["model_calls"] == 2  # the old records' savings still count
    assert [(d["day"], d["runs"], d["would_save_model_calls"]) for d in document["by_day"]] == [
        ("2026-11-29", 1, 1),
        ("2026-11-30", 2, 1),
    ]
    assert document["would_stop_rules"] == {"completed": 2, "none": 1}
    assert document["runs_by_outcome"] == {"would stop: completed": 2, "none": 1}
    page = (out / "report.html").read_text()
    assert "Runs and savings per day" in page
    assert "calls a stop would save (signalling tools)" in page  # a shadow run would stop
    assert "What a stop would save is left out" not in page
    assert "29 Nov 2026, 10:00 UTC" in page
    assert "the log file" in page


def test_tools_that_signal_come_last_and_the_page_says_the_order(tmp_path: Path) -> None:
    """A converted tool with the biggest saving ranks below the plain tools, on both outputs."""
    plain = {
        **OLD_RECORD, "schema_version": 4, "would_stop": None, "tools": [],
        "would_save": {"model_calls": 0, "input_tokens": 0, "output_tokens": 0},
    }  # fmt: skip
    stopped = {**plain, "mode": "hard", "stopped": True, "rule": "completed", "tools": ["pay"]}
    lines = []
    for n in range(6):
        day = f"2026-11-{29 + n % 2}T10:0{n}:00+00:00"
        ended = {"input_tokens": 900, "output_tokens": 90}
        for name, overlap, record in (("pay", 1.0, stopped), ("lookup", 0.95, plain),
                                      ("plan", 0.05, plain)):  # fmt: skip
            measured = {"tools": {name: overlap}, **ended}
            run = {**record, "calls_by_tool": {name: 1}, "ended_after": measured}
            lines.append(_line(run, day, f"{name}{n}"))
            ended = {"input_tokens": 100, "output_tokens": 10}
    log = tmp_path / "runs.jsonl"
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    code, text = report("--log", str(log), "--out", str(out), "--price-in", "1", "--price-out", "1")
    assert code == 0, text
    document = json.loads((out / "report.json").read_text())
    ranked = [(c["tool"], c["verdict"], c["signals"]) for c in document["candidates"]]
    assert ranked == [
        ("lookup", "candidate", False),
        ("plan", "keep", False),
        ("pay", "candidate", True),  # saves the most, but already signals: nothing to convert
    ]
    assert document["candidates"][2]["would_save"]["model_calls"] == 6
    page = (out / "report.html").read_text()
    rows = re.findall(r'<td class="first">(\d+\. [^<]+)</td>', page)
    assert rows[:3] == ["1. lookup", "2. plan", "3. pay (signals already)"]
    assert "Tools that do not signal yet come first: stop candidates, then mixed" in page
    assert "Tools that already signal a stop come last" in page
    # no shadow run would stop: the all-zero per-day columns give way to a note
    assert [d["would_save_model_calls"] for d in document["by_day"]] == [0, 0]
    assert "calls a stop would save (signalling tools)" not in page
    assert "What a stop would save is left out" in page
    assert "model calls a stop would save (shadow, tools that signal today)" in page
    assert "money (at your prices)" in page
    assert "at your prices.</p>" in page  # the opening sentence's amount names its unit
    assert "<b>polish</b>: a stop makes one more model call" in page


@pytest.mark.parametrize(
    ("ended", "median", "kind"),
    [(0, None, "none"), (4, 1.0, "few"), (5, 0.6, "candidate"), (5, 0.59, "mixed"),
     (5, 0.3, "mixed"), (5, 0.29, "keep")],
)  # fmt: skip
def test_verdict_bands(ended: int, median: float | None, kind: str) -> None:
    assert verdict(ended, median)[0] == kind


# -- the page, in Chromium at a desktop's and a phone's size -----------------------------------
@pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (.ci/run installs it)"
)
@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_the_page_lays_out_without_sideways_scrolling(
    sqlite_db: tuple[Path, Seen], tmp_path: Path, size: tuple[int, int]
) -> None:
    db, _ = sqlite_db
    code, _ = report(
        "--db", str(db), "--out", str(tmp_path), "--price-in", "3", "--price-out", "15"
    )
    assert code == 0
    shot = tmp_path / f"shot-{size[0]}.png"
    seen = layout(tmp_path / "report.html", tmp_path / "profile", size, shot)
    assert seen["inner"] == size[0]
    assert seen["scroll"] <= seen["inner"], seen  # type: ignore[operator]
    assert seen["problems"] == [], seen
    assert seen["images"] == [True]
    assert seen["scripts"] == 0
    assert shot.stat().st_size > 10_000
    page = (tmp_path / "report.html").read_text()
    assert "<script" not in page
    answer = page.index('class="answer"')
    assert answer < page.index("Tools worth converting") < page.index('id="headline"')
    assert "Convert <b>lookup_order</b> first" in page
    document = json.loads((tmp_path / "report.json").read_text())
    figures = re.findall(r'data-metric="([^"]+)">([^<]*)<', page)
    assert len(figures) > 30
    for path, text in figures:
        value: Any = document
        for part in path.split("."):
            value = value[int(part)] if isinstance(value, list) else value[part]
        if isinstance(value, float):
            assert text in (f"{value:.2f}", f"{value:.0%}", f"{value:.4f}"), path
        else:
            assert text == f"{value:,}", path


# -- the ranking's arithmetic, on records written by hand ---------------------------------------
def ended(
    tools: dict[str, Any], calls: dict[str, Any] | None = None, **tokens: Any
) -> dict[str, Any]:
    """A schema-4 record of a run that ended right after `tools` (tool -> answer overlap)."""
    return {
        "calls_by_tool": calls or dict.fromkeys(tools, 1),
        "ended_after": {"tools": tools, **tokens},
    }


def test_the_verdicts_sentences() -> None:
    assert verdict(0, 0.9) == ("none", "no run ended right after it: converting saves nothing here")
    assert verdict(5, None)[0] == "none"
    assert verdict(1, 0.9) == ("few", "only 1 run(s) ended after it: too few to tell")
    assert verdict(5, 0.9) == ("candidate", "the answer repeats its result: a stop candidate")
    assert verdict(5, 0.1) == ("keep", "the model adds its own reasoning: keep the model")
    assert verdict(5, 0.5) == (
        "mixed",
        "the answer partly repeats its result: convert only if that part suffices",
    )


def test_the_median_and_10th_percentile_are_nearest_rank_in_hundredths() -> None:
    candidates = Candidates()
    overlaps = [0.7, 0.1, 1.0, 0.4, 0.2, 0.9, 0.3, 0.6, 0.5, 0.8]  # ten runs, shuffled
    for overlap in overlaps:
        candidates.add(ended({"t": overlap}))
    [entry] = candidates.document()
    # nearest rank: the 5th and the 1st of the ten, in order
    assert entry["answer_overlap"] == {"median": 0.5, "p10": 0.1}
    five = Candidates()
    for overlap in (0.2, 0.4, 0.6, 0.8, 1.0):  # the median of five is the 3rd
        five.add(ended({"t": overlap}))
    assert five.document()[0]["answer_overlap"] == {"median": 0.6, "p10": 0.2}
    same = Candidates()
    for _ in range(3):  # three runs in one bucket; overlaps outside 0..1 are clamped
        same.add(ended({"t": 0.333}))
    same.add(ended({"u": 7}))
    same.add(ended({"v": -2}))
    [t, u, v] = sorted(same.document(), key=lambda e: e["tool"])
    assert t["answer_overlap"] == {"median": 0.33, "p10": 0.33}
    assert u["answer_overlap"] == {"median": 1.0, "p10": 1.0}
    assert v["answer_overlap"] == {"median": 0.0, "p10": 0.0}
    weighted = Candidates()
    for overlap in (0.2, 0.9, 0.9, 0.9):  # each run counts: the median is 0.9, not 0.2
        weighted.add(ended({"t": overlap}))
    assert weighted.document()[0]["answer_overlap"] == {"median": 0.9, "p10": 0.2}


def test_odd_values_in_a_record_count_as_nothing() -> None:
    candidates = Candidates()
    candidates.add({"rule": "none"})  # a record before schema 4: not measured
    candidates.add(
        ended(
            {"flag": True, "text": "0.9", "t": 0.9},
            calls={"t": 1, "u": True, "v": "3", "w": 0},
            input_tokens="120",
            output_tokens=None,
        )
    )
    candidates.add({"ended_after": None, "calls_by_tool": {"t": 2}})  # ended after no tool
    candidates.add(ended({"t": 0.8}, input_tokens=100, output_tokens=False))
    assert candidates.measured == 3
    [entry] = candidates.document()
    assert entry == {
        "tool": "t",
        "runs": 3,
        "stoppable_runs": 3,
        "ended_runs": 2,
        "would_save": {"model_calls": 2, "input_tokens": 100, "output_tokens": 0},
        "cut_short_runs": 0,
        "cut_short": {
            "runs": 0,
            "model_calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "writes_runs": 0,
            "skipped_tools": [],
        },
        "skips_writes": [],
        "gain": {"model_calls": 2, "input_tokens": 100, "output_tokens": 0},
        "ended_on_it": 0,
        "answer_overlap": {"median": 0.8, "p10": 0.8},
        "verdict": "few",
        "why": "only 2 run(s) ended after it: too few to tell",
        "advice": "too_few",
        "advice_why": "only 2 run(s) ended after it: too few to tell",
        "convert_line": None,
        "judged": {"runs": 0, "actions": {}, "shapes": {}, "fields": [], "earlier": []},
        "threads": [],
        "signals": False,
    }


def test_odd_after_first_entries_count_as_nothing() -> None:
    candidates = Candidates(writes={"notify"})
    odd = {"t": "x", "u": {"model_calls": "3", "skipped": "a"}, 7: {"skipped": [1, None]}}
    candidates.add({"ended_after": None, "calls_by_tool": {}, "after_first": odd})
    candidates.add({"ended_after": None, "after_first": {"u": {"skipped": ["notify"]}}})
    by_tool = {e["tool"]: e for e in candidates.document()}
    assert by_tool["u"]["would_save"] == {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}
    assert by_tool["u"]["ended_on_it"] == 2
    assert by_tool["u"]["cut_short"]["skipped_tools"] == [
        {"tool": "notify", "runs": 1, "writes": True}
    ]
    assert by_tool["7"]["cut_short"]["skipped_tools"] == [
        {"tool": "1", "runs": 1, "writes": False},
        {"tool": "None", "runs": 1, "writes": False},
    ]
    assert "t" not in by_tool


@pytest.mark.parametrize(
    ("tool", "declared", "expected"),
    [
        ("initiate_return", (), True),
        ("bookReservation", (), True),
        ("send-email", (), True),
        ("cancelled_orders_cleanup", (), True),
        ("get_order_status", (), False),  # a read verb first: a read, whatever follows
        ("order_status", (), False),  # a read noun last
        ("place_order", (), True),
        ("search_direct_flight", (), False),
        ("company_policies", (), False),
        ("postal_code", (), False),  # "post" only as a word of its own
        ("company_policies", ("company_policies",), True),
        ("", (), False),
    ],
)
def test_which_tools_write(tool: str, declared: tuple[str, ...], expected: bool) -> None:
    assert writes(tool, declared) is expected


def test_the_order_of_the_candidates() -> None:
    candidates = Candidates()
    plan = {
        "keep": (5, 0.1),
        "mixed": (6, 0.4),
        "few": (2, 0.9),
        "cand_a": (5, 0.9),
        "cand_b": (7, 0.7),
    }
    for name, (runs, overlap) in plan.items():
        for _ in range(runs):
            candidates.add(ended({name: overlap}, input_tokens=10, output_tokens=1))
    candidates.add({"ended_after": {"tools": {}}, "calls_by_tool": {"idle": 1}})
    for _ in range(5):  # as many runs as cand_a, more input tokens
        candidates.add(ended({"cand_c": 0.95}, input_tokens=11, output_tokens=1))
    for _ in range(6):  # more runs than cand_c; their records count no calls of it
        candidates.add(ended({"cand_d": 0.8}, calls={"other": 0}))
    document = candidates.document(signalling={"cand_b"})
    assert [(e["tool"], e["verdict"], e["signals"]) for e in document] == [
        ("cand_d", "candidate", False),
        ("cand_c", "candidate", False),
        ("cand_a", "candidate", False),
        ("mixed", "mixed", False),
        ("few", "few", False),
        ("keep", "keep", False),
        ("idle", "none", False),
        ("cand_b", "candidate", True),
    ]
    assert (document[0]["runs"], document[0]["ended_runs"]) == (6, 6)
    assert document[1]["would_save"] == {"model_calls": 5, "input_tokens": 55, "output_tokens": 5}
    assert document[6]["answer_overlap"] == {"median": None, "p10": None}


# -- cut-short runs and runs left on a tool result, end to end ----------------------------------
@tool(response_format="content_and_artifact")
def get_order_status(order_id: str) -> tuple[str, dict[str, Any]]:
    """An order's status; converted: it signals a stop."""
    from toolstop import Outcome, signal

    return f"Order {order_id}: delivered.", signal(Outcome.COMPLETED)


@tool
def initiate_return(order_id: str) -> str:
    """Start a return (a write). A plain tool."""
    return f"Return for {order_id} started."


@tool
def transfer_to_human(reason: str) -> str:
    """Hand the conversation to a person. A plain tool."""
    return "Transferred."


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_cut_short_runs_and_a_run_left_on_a_tool_are_counted(router: Any, tmp_path: Path) -> None:
    """Verify the status first, then return: hard mode would have stopped after the status and
    never run the return. A hand-off left open on its result counts toward its tool."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path / "agent.sqlite"
    tools = [get_order_status, initiate_return, transfer_to_human]
    with SqliteSaver.from_conn_string(str(db)) as saver:
        for n in range(3):
            model = ScriptedChatModel(
                [
                    call("get_order_status", order_id=str(n)),
                    call("initiate_return", order_id=str(n)),
                    "Your return is started.",
                ]
            )
            agent = router.build(model, tools, policy=StopPolicy(mode="never"), checkpointer=saver)
            agent.invoke(
                {"messages": [HumanMessage("Return my order")]},
                {"configurable": {"thread_id": f"cut{n}"}},
            )
            model.assert_complete()
        # a hand-off: the run ends on the tool result (the process ended), the next run closes it
        model = ScriptedChatModel([call("transfer_to_human", reason="angry"), "Hello again."])
        agent = router.build(model, tools, policy=StopPolicy(mode="never"), checkpointer=saver)
        config = {"configurable": {"thread_id": "handoff"}}
        agent.invoke(
            {"messages": [HumanMessage("A person, please")]}, config, interrupt_after=["tools"]
        )
        agent.invoke({"messages": [HumanMessage("Hi")]}, config)
        model.assert_complete()
    logging.getLogger("toolstop").setLevel(logging.NOTSET)
    code, text = report("--db", str(db), "--out", str(tmp_path / "out"))
    assert code == 0, text
    document = json.loads((tmp_path / "out" / "report.json").read_text())
    assert (
        "cut short: in 3 of those runs a stop would have skipped later tools "
        "(initiate_return (writes)); their 6 model calls are not a saving"
    ) in text
    cut = document["would_save"]["cut_short"]
    assert (cut["runs"], cut["model_calls"], cut["writes_runs"]) == (3, 6, 3)
    assert cut["skipped_tools"] == [{"tool": "initiate_return", "runs": 3, "writes": True}]
    assert document["would_save"]["model_calls"] == 6
    assert document["would_save"]["gain"]["model_calls"] == 0  # all of it is cut short
    by_tool = {e["tool"]: e for e in document["candidates"]}
    assert by_tool["transfer_to_human"]["runs"] == 1
    assert by_tool["transfer_to_human"]["ended_on_it"] == 1
    assert by_tool["transfer_to_human"]["would_save"]["model_calls"] == 0
    assert by_tool["get_order_status"]["cut_short_runs"] == 3
    assert by_tool["initiate_return"]["cut_short_runs"] == 0
    assert by_tool["initiate_return"]["would_save"]["model_calls"] == 3
    out = io.StringIO()
    assert main(["explain", "--db", str(db), "cut0"], out=out) == 0
    assert "cut short: in hard mode, initiate_return would not have run" in out.getvalue()


# -- predictions that come true: would_save before the conversion == shadow mode's after -------
@tool
def order_status(order_id: str) -> str:
    """An order's status: a plain tool, before the conversion."""
    return f"Order {order_id}: delivered on Monday."


@tool(response_format="content_and_artifact")
def order_status_converted(order_id: str) -> tuple[str, dict[str, Any]]:
    """The same tool, converted: it signals a stop on success."""
    from toolstop import Outcome, signal

    return f"Order {order_id}: delivered on Monday.", signal(Outcome.COMPLETED)


def _status_scripts() -> list[list[Any]]:
    """Runs where the status comes first, mid-run or last: a stop comes at its first success."""
    return [
        [call("order_status", order_id="1"), "Order 1: delivered on Monday."],
        [call("order_status", order_id="2"), call("order_status", order_id="2"), "Delivered."],
        [call("order_status", order_id="3"), call("initiate_return", order_id="3"), "Started."],
        [call("initiate_return", order_id="4"), call("order_status", order_id="4"), "Both done."],
        ["Hello!"],
    ]


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_would_save_before_the_conversion_is_what_shadow_mode_measures_after(
    router: Any, tmp_path: Path
) -> None:
    from langchain_core.tools import StructuredTool

    converted = StructuredTool.from_function(
        func=order_status_converted.func,
        name="order_status",
        description="An order's status.",
        response_format="content_and_artifact",
    )
    from langgraph.checkpoint.sqlite import SqliteSaver

    documents = []
    for name, status in (("before", order_status), ("after", converted)):
        db = tmp_path / f"{name}.sqlite"
        with SqliteSaver.from_conn_string(str(db)) as saver:
            for n, script in enumerate(_status_scripts()):
                # the same call ids before and after: the token estimate counts their characters,
                # and a process-wide instance number in them would differ between the two runs
                model = ScriptedChatModel(list(script), id_prefix=f"call{n}")
                agent = router.build(
                    model, [status, initiate_return], policy=StopPolicy(mode="never"),
                    checkpointer=saver,
                )  # fmt: skip
                agent.invoke(
                    {"messages": [HumanMessage(f"q{n}")]}, {"configurable": {"thread_id": f"t{n}"}}
                )
                model.assert_complete()
        logging.getLogger("toolstop").setLevel(logging.NOTSET)
        code, text = report("--db", str(db), "--out", str(tmp_path / name))
        assert code == 0, text
        documents.append(json.loads((tmp_path / name / "report.json").read_text()))
    before, after = documents
    [predicted] = [c for c in before["candidates"] if c["tool"] == "order_status"]
    measured = after["would_save"]
    assert {k: predicted["would_save"][k] for k in ("model_calls", *TOKENS)} == {
        k: measured[k] for k in ("model_calls", *TOKENS)
    }
    assert predicted["would_save"]["model_calls"] == 1 + 2 + 2 + 1
    # the status asked again, and the return after it, would not have run: cut short
    assert predicted["cut_short"]["runs"] == measured["cut_short"]["runs"] == 2
    assert predicted["cut_short"]["model_calls"] == measured["cut_short"]["model_calls"] == 4
    assert predicted["cut_short"]["writes_runs"] == measured["cut_short"]["writes_runs"] == 1


def test_writes_names_tools_the_names_miss(tmp_path: Path) -> None:
    record = {
        **OLD_RECORD, "schema_version": 5, "would_skip": ["ping_team"], "calls_by_tool": {},
        "ended_after": None, "after_first": {"pay": {"model_calls": 2, "input_tokens": 9,
                                                     "output_tokens": 1, "skipped": ["ping_team"]}},
    }  # fmt: skip
    log = tmp_path / "runs.jsonl"
    log.write_text(_line(record, "2026-11-30T10:00:00+00:00", "a") + "\n")
    for extra, writes_runs in (([], 0), (["--writes", " ping_team , other"], 1)):
        out = tmp_path / f"out{writes_runs}"
        code, text = report("--log", str(log), "--out", str(out), *extra)
        assert code == 0, text
        document = json.loads((out / "report.json").read_text())
        cut = document["would_save"]["cut_short"]
        assert (cut["runs"], cut["writes_runs"]) == (1, writes_runs)
        assert cut["skipped_tools"] == [
            {"tool": "ping_team", "runs": 1, "writes": bool(writes_runs)}
        ]
        [pay] = document["candidates"]
        assert pay["cut_short"]["writes_runs"] == writes_runs
        assert pay["advice"] == "cut_short"
