"""`toolstop report` compares the canary's arms (`toolstop.report.arms`), and `--check` gates on it.

Populations of thousands of simulated threads, each with a set re-ask rate per arm and tool
(seeded), are folded; the rates must be the counted ones and hold the true rate in their
interval, the verdict must come out right both ways and for no difference. The intervals are
checked against Newcombe's published values and against the score equation solved by bisection.
"""

from __future__ import annotations

import html
import io
import json
import math
import random
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from toolstop.cli import main
from toolstop.report.arms import MIN_STOPS, Arms, arms_check, arms_lines, newcombe, wilson
from toolstop.report.reader import RunEnd
from toolstop.report.records import NAME_LIMIT, capped, out_of_range
from toolstop.report.summary import Summary

TOOLS = ("lookup_order", "exchange_items")


def record(
    arm: str,
    tool: str,
    *,
    stops: bool,
    reask: dict[str, Any] | None = None,
    run: int = 1,
    **extra: Any,
) -> dict[str, Any]:
    """A run's record as a canary policy writes it: the canary arm stops in hard mode, the
    shadow arm only records the stop (the canaried tool in `never`)."""
    canary = arm == "canary"
    out: dict[str, Any] = {
        "schema_version": 5, "run": run, "mode": "hard", "arm": arm, "tools": [],
        "rule": "none", "stopped": False, "would_stop": None, "tool_call_ids": [],
        "model_calls": 2, "input_tokens": 1000, "output_tokens": 50,
    }  # fmt: skip
    if not canary:
        out["modes"] = {tool: "never"}
    if stops:
        out["tools"] = [tool]
        if canary:
            out.update(rule="completed", stopped=True, model_calls=1, input_tokens=400)
        else:
            out.update(would_stop="completed", model_calls=2, input_tokens=1000)
    if reask is not None:
        out["reask"] = reask
    return out | extra


def population(
    seed: int, threads: int, rates: dict[tuple[str, str], float], share: float = 0.5
) -> tuple[list[dict[str, Any]], Counter[tuple[str, str, str]]]:
    """Threads of two runs: run 1 stops on a tool (or would have), run 2 says whether the user
    asked again, at `rates[(arm, tool)]`. Returns the records and the counts as generated."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    counted: Counter[tuple[str, str, str]] = Counter()
    for _ in range(threads):
        arm = "canary" if rng.random() < share else "shadow"
        tool = rng.choice(TOOLS)
        again = rng.random() < rates[(arm, tool)]
        counted[(arm, tool, "stops")] += 1
        counted[(arm, tool, "asked_again")] += again
        why = rng.choice(["restated", "complaint", "same_call"]) if again else "none"
        records.append(record(arm, tool, stops=True))
        reask = {"run": 1, "asked_again": again, "why": why, "stopped": arm == "canary",
                 "arm": arm, "tools": [tool]}  # fmt: skip
        records.append(record(arm, tool, stops=False, reask=reask, run=2))
    return records, counted


def folded(records: list[dict[str, Any]], margin: float = 0.0) -> dict[str, Any]:
    summary = Summary(reask_margin=margin)
    for item in records:
        summary.add(RunEnd(thread_id="t", checkpoint_ns="", ended_at=None, record=item))
    return summary.document()


def rates(*pairs: float) -> dict[tuple[str, str], float]:
    """`rates(canary_lookup, shadow_lookup, canary_exchange, shadow_exchange)`."""
    keys = [(arm, tool) for tool in TOOLS for arm in ("canary", "shadow")]
    return dict(zip(keys, pairs, strict=True))


# -- the intervals --------------------------------------------------------------------------

# Newcombe (1998), Statistics in Medicine 17:873-890, table II, method 10 (hybrid score)
NEWCOMBE = [
    ((56, 70, 48, 80), (0.0524, 0.3339)),
    ((9, 10, 3, 10), (0.1705, 0.8090)),
    ((6, 7, 2, 7), (0.0582, 0.8062)),
    ((5, 56, 0, 29), (-0.0381, 0.1926)),
    ((0, 10, 0, 20), (-0.1611, 0.2775)),
    ((0, 10, 0, 10), (-0.2775, 0.2775)),
    ((10, 10, 0, 20), (0.6791, 1.0000)),
    ((10, 10, 0, 10), (0.6075, 1.0000)),
]
# Newcombe (1998), Statistics in Medicine 17:857-872, table I, method 3 (Wilson score)
WILSON = [((81, 263), (0.2553, 0.3662)), ((15, 148), (0.0624, 0.1605)), ((0, 20), (0.0, 0.1611))]


@pytest.mark.parametrize(("counts", "expected"), NEWCOMBE)
def test_newcombe_matches_the_published_intervals(
    counts: tuple[int, int, int, int], expected: tuple[float, float]
) -> None:
    interval = newcombe(*counts)
    assert interval is not None
    assert [round(x, 4) for x in interval] == list(expected)


@pytest.mark.parametrize(("counts", "expected"), WILSON)
def test_wilson_matches_the_published_intervals(
    counts: tuple[int, int], expected: tuple[float, float]
) -> None:
    interval = wilson(*counts)
    assert interval is not None
    assert [round(x, 4) for x in interval] == list(expected)


def _score_root(k: int, n: int, low: bool) -> float:
    """The bound of Wilson's interval as the root of |p - pi| = z sqrt(pi (1 - pi) / n)."""
    p, z = k / n, 1.959963984540054
    a, b = (0.0, p) if low else (p, 1.0)
    if (low and k == 0) or (not low and k == n):
        return p
    for _ in range(200):
        mid = (a + b) / 2
        outside = abs(p - mid) > z * math.sqrt(mid * (1 - mid) / n)
        if outside == low:
            a = mid
        else:
            b = mid
    return (a + b) / 2


def test_wilson_solves_the_score_equation() -> None:
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 5000)
        k = rng.randint(0, n)
        interval = wilson(k, n)
        assert interval is not None
        assert interval[0] == pytest.approx(_score_root(k, n, low=True), abs=1e-9)
        assert interval[1] == pytest.approx(_score_root(k, n, low=False), abs=1e-9)
    assert wilson(0, 0) is None
    assert newcombe(1, 0, 1, 5) is None


# -- simulated populations ------------------------------------------------------------------


def _check_rates(arms: dict[str, Any], counted: Counter[Any], truth: dict[Any, float]) -> None:
    """Each arm's and tool's rate is the counted one, and its interval holds the true rate."""
    for arm in ("canary", "shadow"):
        stops = sum(counted[(arm, t, "stops")] for t in TOOLS)
        again = sum(counted[(arm, t, "asked_again")] for t in TOOLS)
        reask = arms["by_arm"][arm]["reask"]
        assert (reask["stops"], reask["asked_again"]) == (stops, again)
        assert reask["rate"] == round(again / stops, 4)
        true_rate = sum(truth[(arm, t)] * counted[(arm, t, "stops")] for t in TOOLS) / stops
        assert reask["interval"][0] <= true_rate <= reask["interval"][1]
    for entry in arms["by_tool"]:
        for arm in ("canary", "shadow"):
            tool = entry["tool"]
            stops, again = counted[(arm, tool, "stops")], counted[(arm, tool, "asked_again")]
            assert (entry[arm]["stops"], entry[arm]["asked_again"]) == (stops, again)
            lo, hi = entry[arm]["interval"]
            assert lo <= truth[(arm, tool)] <= hi
        difference = truth[("canary", tool)] - truth[("shadow", tool)]
        assert entry["interval"][0] <= difference <= entry["interval"][1]


def test_no_difference_in_thousands_of_threads() -> None:
    truth = rates(0.05, 0.05, 0.08, 0.08)
    records, counted = population(11, 4000, truth)
    arms = folded(records)["arms"]
    _check_rates(arms, counted, truth)
    assert arms["label"] == "hard"
    assert arms["comparison"]["verdict"] == "no_difference"
    assert {e["tool"]: e["verdict"] for e in arms["by_tool"]} == dict.fromkeys(
        TOOLS, "no_difference"
    )
    sentence = arms["comparison"]["sentence"]
    assert re.fullmatch(
        r"hard: \d+\.\d% asked again, shadow \d+\.\d% \(difference [+-]\d+\.\d points, 95% "
        r"interval -\d+\.\d to \+\d+\.\d\): no difference detected in 4,000 stops "
        r"\(\d,\d{3} hard, \d,\d{3} shadow\)",
        sentence,
    ), sentence
    assert arms["check"] == {"passed": True, "worse_tools": [], "why": sentence}


def test_a_worse_tool_is_worse_and_the_other_is_not() -> None:
    truth = rates(0.04, 0.04, 0.15, 0.04)  # exchange_items: people ask again in hard mode
    records, counted = population(12, 4000, truth)
    arms = folded(records)["arms"]
    _check_rates(arms, counted, truth)
    verdicts = {e["tool"]: e["verdict"] for e in arms["by_tool"]}
    assert verdicts == {"exchange_items": "worse", "lookup_order": "no_difference"}
    assert arms["by_tool"][0]["tool"] == "exchange_items"  # the worse first
    assert arms["by_tool"][0]["sentence"].startswith("exchange_items, hard: worse: ")
    assert arms["comparison"]["verdict"] == "worse"  # the arm too, with half its stops worse
    assert arms["check"]["passed"] is False
    assert arms["check"]["worse_tools"] == ["exchange_items"]


def test_a_better_canary_is_better() -> None:
    truth = rates(0.02, 0.09, 0.03, 0.10)
    records, counted = population(13, 4000, truth)
    arms = folded(records)["arms"]
    _check_rates(arms, counted, truth)
    assert arms["comparison"]["verdict"] == "better"
    assert arms["comparison"]["sentence"].startswith("hard: better: ")
    assert {e["verdict"] for e in arms["by_tool"]} == {"better"}
    assert arms["check"]["passed"] is True


def test_the_margin_tolerates_a_difference_below_it() -> None:
    truth = rates(0.09, 0.05, 0.09, 0.05)
    records, _ = population(14, 6000, truth)
    assert folded(records)["arms"]["comparison"]["verdict"] == "worse"
    beyond = folded(records, margin=0.005)["arms"]["comparison"]
    assert beyond["verdict"] == "worse"
    assert "margin +0.5 points) in 6,000 stops" in beyond["sentence"]
    lenient = folded(records, margin=0.10)["arms"]
    assert lenient["comparison"]["verdict"] == "within_margin"
    assert lenient["comparison"]["sentence"].startswith("hard: higher, within the margin: ")
    assert lenient["comparison"]["sentence"].count("margin +10.0 points") == 1
    assert lenient["check"]["passed"] is True
    assert lenient["margin"] == 0.10
    lo, hi = lenient["comparison"]["interval"]
    assert 0 < lo < hi < 0.10  # above 0, not above the margin


def test_an_uneven_canary_share_still_lands_within_its_intervals() -> None:
    truth = rates(0.06, 0.03, 0.06, 0.03)
    records, counted = population(15, 8000, truth, share=0.1)
    arms = folded(records)["arms"]
    _check_rates(arms, counted, truth)
    share = arms["by_arm"]["canary"]["runs"] / (2 * 8000)
    assert abs(share - 0.1) < 0.01
    assert arms["comparison"]["verdict"] == "worse"


def test_too_few_stops_gives_no_verdict() -> None:
    truth = rates(0.9, 0.0, 0.9, 0.0)
    records, _ = population(16, 2 * MIN_STOPS, truth)  # about MIN_STOPS per arm: some below
    arms = folded(records[: 2 * 40])["arms"]
    assert arms["comparison"]["verdict"] == "too_few"
    assert arms["comparison"]["sentence"].startswith(
        f"hard: too few stops to tell (n < {MIN_STOPS} per arm: "
    )
    assert arms["check"]["passed"] is True


def test_each_arms_runs_calls_tokens_and_money_per_run() -> None:
    records, counted = population(17, 1000, rates(0.1, 0.1, 0.1, 0.1))
    document = folded(records)
    from toolstop.report.summary import with_prices

    priced = with_prices(document, 2.0, 10.0)["arms"]["by_arm"]
    for arm, stop_calls, stop_input in (("canary", 1, 400), ("shadow", 2, 1000)):
        threads = sum(counted[(arm, t, "stops")] for t in TOOLS)
        entry = priced[arm]
        assert entry["runs"] == 2 * threads
        assert entry["stopped" if arm == "canary" else "would_stop"] == threads
        assert entry["model_calls_per_run"] == round((stop_calls + 2) / 2, 2)
        assert entry["input_tokens_per_run"] == round((stop_input + 1000) / 2, 2)
        cost = threads * ((stop_input + 1000) * 2.0 + 100 * 10.0) / 1e6
        assert entry["cost"] == pytest.approx(cost, abs=1e-6)
        assert entry["cost_per_run"] == pytest.approx(cost / (2 * threads), abs=1e-6)
    assert priced["canary"]["label"] == "hard"
    assert priced["shadow"]["label"] == "shadow"


def test_no_arm_no_arms_key_and_the_check_passes() -> None:
    plain = record("canary", "lookup_order", stops=True)
    del plain["arm"]
    document = folded([plain])
    assert "arms" not in document
    assert arms_check(document) == (
        True,
        "no run record names a canary arm or a tool sent back: nothing to check",
    )
    assert arms_lines(document.get("arms")) == []


def test_tools_sent_back_are_listed_with_the_runs_since_and_fail_the_check() -> None:
    from datetime import UTC, datetime

    summary = Summary()
    for day in (3, 1, 2):
        item = record("canary", "exchange_items", stops=False, sent_back=["exchange_items"])
        moment = datetime(2026, 5, day, tzinfo=UTC)
        summary.add(RunEnd(thread_id="t", checkpoint_ns="", ended_at=moment, record=item))
    arms = summary.document()["arms"]
    assert arms["sent_back"] == [
        {"tool": "exchange_items", "runs": 3, "since": "2026-05-01T00:00:00+00:00"}
    ]
    assert arms["check"]["passed"] is False
    assert "sent back to never: exchange_items (3 runs since)" in arms["check"]["why"]


# -- hostile records ------------------------------------------------------------------------

WRONG = [
    ("arm", {"arm": 5}),
    ("modes", {"modes": ["never"]}),
    ("modes", {"modes": {"t": 1}}),
    ("sent_back", {"sent_back": "exchange_items"}),
    ("sent_back", {"sent_back": [1]}),
    ("reask", {"reask": [True]}),
    ("reask.asked_again", {"reask": {"asked_again": "yes", "arm": "canary"}}),
    ("reask.asked_again", {"reask": {"arm": "canary"}}),
    ("reask.run", {"reask": {"asked_again": True, "run": -1}}),
    ("reask.arm", {"reask": {"asked_again": True, "arm": ["canary"]}}),
    ("reask.stopped", {"reask": {"asked_again": True, "stopped": "no"}}),
    ("reask.tools", {"reask": {"asked_again": True, "tools": "t"}}),
    ("reask.why", {"reask": {"asked_again": True, "why": {"a": 1}}}),
]


@pytest.mark.parametrize(("field", "change"), WRONG, ids=[repr(c) for _, c in WRONG])
def test_a_canary_field_of_a_wrong_type_names_its_field(field: str, change: dict[str, Any]) -> None:
    good = record("shadow", "t", stops=True, reask={"asked_again": False, "arm": "shadow"})
    assert out_of_range(good) is None
    assert out_of_range({**good, **change}) == field


def test_hostile_names_are_cut_and_wrong_types_never_crash_the_fold() -> None:
    huge = "x" * 100_000
    item = capped(
        record("canary", huge, stops=True, sent_back=[huge], modes={huge: huge},
               reask={"asked_again": True, "arm": huge, "why": huge, "tools": [huge]})
    )  # fmt: skip
    assert len(item["tools"][0]) == NAME_LIMIT
    assert len(item["sent_back"][0]) == NAME_LIMIT
    assert [len(x) for pair in item["modes"].items() for x in pair] == [NAME_LIMIT] * 2
    assert {len(item["reask"][k]) for k in ("arm", "why")} == {NAME_LIMIT}
    assert len(item["reask"]["tools"][0]) == NAME_LIMIT
    arms = Arms()
    for change in WRONG:  # `Arms.add` called on records no reader checked
        arms.add({**record("canary", "t", stops=True), **change[1]})
    arms.add({"arm": None, "reask": {"asked_again": 1, "arm": "canary"}, "sent_back": None})
    document = arms.document()
    assert document is not None
    assert document["by_arm"]["canary"]["runs"] == len(WRONG) - 1  # the one `arm: 5` left out
    assert document["by_arm"]["canary"]["reask"]["stops"] == 0


HOSTILE = "<script>alert(1)</script>\x1b[31m\u202eevil\nline"


def _log(path: Path, records: list[dict[str, Any]]) -> Path:
    lines = [json.dumps({"event": "run_end", "thread_id": f"t{i}", "record": r}) for i, r in
             enumerate(records)]  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def report(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["report", *argv], out=out), out.getvalue()


def test_hostile_tool_names_are_escaped_on_the_terminal_and_the_page(tmp_path: Path) -> None:
    truth = {("canary", HOSTILE): 0.5, ("shadow", HOSTILE): 0.0}
    rng = random.Random(3)
    records = []
    for i in range(200):
        arm = "canary" if i % 2 else "shadow"
        again = rng.random() < truth[(arm, HOSTILE)]
        reask = {"run": 1, "asked_again": again, "why": "complaint" if again else "none",
                 "stopped": arm == "canary", "arm": arm, "tools": [HOSTILE]}  # fmt: skip
        records.append(record(arm, HOSTILE, stops=True, reask=reask, sent_back=[HOSTILE]))
    records += [{**records[0], "reask": {"asked_again": "maybe"}}, {**records[0], "arm": []}]
    records.append({**records[0], "arm": HOSTILE, "reask": {"asked_again": True, "arm": HOSTILE}})
    code, text = report("--log", str(_log(tmp_path / "runs.jsonl", records)),
                        "--out", str(tmp_path / "out"), "--check")  # fmt: skip
    assert code == 3
    assert "\x1b" not in text
    assert "\u202e" not in text
    assert "\\x1b[31m\\u202eevil" in text
    document = json.loads((tmp_path / "out" / "report.json").read_text())
    assert document["unreadable_runs"] == 2
    assert document["arms"]["by_tool"][0]["verdict"] == "worse"
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<script>" not in page
    assert len(document["arms"]["by_arm"]) == 3  # canary, shadow and the hostile one
    assert document["arms"]["by_arm"][HOSTILE]["reask"]["asked_again"] == 1
    assert html.escape("<script>alert(1)</script>") in page
    assert "\x1b" not in page
    assert "\u202e" not in page


# -- the page and the terminal --------------------------------------------------------------


def test_the_page_opens_with_the_arms_and_tags_their_figures(tmp_path: Path) -> None:
    records, _ = population(21, 600, rates(0.2, 0.05, 0.05, 0.05))
    log = _log(tmp_path / "runs.jsonl", records)
    prices = ("--price-in", "3", "--price-out", "15")
    code, text = report("--log", str(log), "--out", str(tmp_path / "out"), *prices)
    assert code == 0
    document = json.loads((tmp_path / "out" / "report.json").read_text())
    arms = document["arms"]
    canary = arms["by_arm"]["canary"]
    assert text.splitlines()[0].startswith(
        f"canary arms: hard {canary['runs']:,} runs (1.5 model calls, 700 input and 50 output "
        f"tokens per run, {canary['cost_per_run']:.6f} per run at your prices); shadow "
    )
    assert text.splitlines()[1] == arms["comparison"]["sentence"]
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.index('id="arms"') < page.index('class="answer"') < page.index("In figures")
    assert f'data-verdict="{arms["comparison"]["verdict"]}"' in page
    tagged = dict(re.findall(r'data-metric="(arms\.[^"]+)"[^>]*>([^<]*)<', page))
    assert tagged["arms.by_arm.canary.runs"] == f"{arms['by_arm']['canary']['runs']:,}"
    assert (
        tagged["arms.by_arm.shadow.reask.stops"]
        == f"{arms['by_arm']['shadow']['reask']['stops']:,}"
    )
    rate = arms["by_arm"]["canary"]["reask"]["rate"]
    assert tagged["arms.by_arm.canary.reask.rate"] == f"{rate * 100:.1f}%"
    assert "arms.by_arm.canary.cost_per_run" in tagged
    assert tagged["arms.by_tool.0.canary.stops"] == f"{arms['by_tool'][0]['canary']['stops']:,}"


# -- --check on every source ----------------------------------------------------------------


def test_check_exits_3_when_worse_and_0_when_not_from_a_log(tmp_path: Path) -> None:
    worse, _ = population(31, 3000, rates(0.15, 0.04, 0.15, 0.04))
    same, _ = population(33, 3000, rates(0.05, 0.05, 0.05, 0.05))
    for name, records, expected in (("worse", worse, 3), ("same", same, 0)):
        log = _log(tmp_path / f"{name}.jsonl", records)
        code, text = report("--log", str(log), "--out", str(tmp_path / name), "--check")
        assert code == expected, text
        last = text.splitlines()[-1]
        assert last.startswith(
            "check failed: hard: worse: " if expected else "check passed: hard: "
        )
    for margin in ("200", "-1", "nan", "one"):
        with pytest.raises(SystemExit) as exit_info:  # argparse: a wrong argument
            report("--log", str(log), "--out", str(tmp_path / "bad"), "--reask-margin", margin)
        assert exit_info.value.code == 2
    code, text = report("--log", str(tmp_path / "worse.jsonl"), "--out", str(tmp_path / "lenient"),
                        "--check", "--reask-margin", "20")  # fmt: skip
    assert code == 0
    assert text.splitlines()[-1].startswith("check passed: hard: higher, within the margin: ")


def test_check_without_a_canary_passes(tmp_path: Path) -> None:
    plain = {k: v for k, v in record("canary", "t", stops=True).items() if k != "arm"}
    log = _log(tmp_path / "plain.jsonl", [plain] * 5)
    code, text = report("--log", str(log), "--out", str(tmp_path / "out"), "--check")
    assert code == 0
    assert text.splitlines()[-1] == (
        "check passed: no run record names a canary arm or a tool sent back: nothing to check"
    )


def _database(path: Path, records: list[dict[str, Any]]) -> str:
    """A SQLite checkpointer holding each record as a thread's finished run."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    with sqlite3.connect(str(path), check_same_thread=False) as conn:
        saver = SqliteSaver(conn)
        saver.setup()
        for i, item in enumerate(records):
            checkpoint = {
                "v": 1, "id": f"cp-{i:06d}", "ts": "2026-12-01T10:00:00+00:00",
                "channel_values": {"stop_record": item},
                "channel_versions": {"stop_record": "1"}, "versions_seen": {},
                "pending_sends": [],
            }  # fmt: skip
            config = {"configurable": {"thread_id": f"thread-{i}", "checkpoint_ns": ""}}
            saver.put(config, checkpoint, {"source": "loop", "step": 1}, {})  # type: ignore[arg-type]
    return str(path)


def test_check_reads_a_sqlite_checkpointer_both_ways(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
    worse, _ = population(41, 300, rates(0.5, 0.05, 0.5, 0.05))
    same, _ = population(42, 300, rates(0.1, 0.1, 0.1, 0.1))
    for name, records, expected in (("worse", worse, 3), ("same", same, 0)):
        db = _database(tmp_path / f"{name}.sqlite", records)
        code, text = report("--db", db, "--out", str(tmp_path / name), "--check")
        assert code == expected, text
        document = json.loads((tmp_path / name / "report.json").read_text())
        assert document["arms"]["by_arm"]["canary"]["runs"] + document["arms"]["by_arm"]["shadow"][
            "runs"
        ] == len(records)
        assert text.splitlines()[-1].startswith("check failed" if expected else "check passed")


def test_an_entry_without_its_arms_treatment_is_left_out() -> None:
    """A canary run whose tool the way back sent to `never` (no stop), or a shadow run stopped
    by a tool the canary does not switch, says nothing about the canaried stop."""
    from toolstop.report.arms import Arms

    arms = Arms()
    for arm, stopped in [("canary", True), ("canary", False), ("shadow", False), ("shadow", True)]:
        reask = {"run": 1, "asked_again": True, "why": "complaint", "stopped": stopped,
                 "arm": arm, "tools": ["pay"]}  # fmt: skip
        arms.add({"arm": arm, "run": 2, "reask": reask})
    assert {arm: dict(counts) for arm, counts in arms.reask.items()} == {
        "canary": {"stops": 1, "asked_again": 1, "why:complaint": 1},
        "shadow": {"stops": 1, "asked_again": 1, "why:complaint": 1},
    }
