"""The evidence behind a candidate, one option away: `toolstop report --examples K` pairs and
threads, and `toolstop explain THREAD` showing the tool, the overlap and the final answer."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from routers import ROUTERS
from toolstop import StopPolicy
from toolstop.cli import main
from toolstop.report.examples import EXAMPLE_CHARS, clean, mask_secrets
from toolstop.testing import ScriptedChatModel, call

SECRET = "sk-live0123456789abcdefXYZ"
LONG = "word " * 1000


@tool
def lookup_order(order_id: str) -> str:
    """Where an order is (its text carries a key and is long)."""
    return f"Order {order_id} ships Monday. api_key={SECRET} " + LONG


def drive(db: Path, router: Any, runs: int = 12) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(str(db)) as saver:
        for n in range(runs):
            model = ScriptedChatModel(
                [call("lookup_order", order_id=str(n)), f"Order {n} ships Monday. \x1b[0m"]
            )
            agent = router.build(
                model, [lookup_order], policy=StopPolicy(mode="never"), checkpointer=saver
            )
            agent.invoke(
                {"messages": [HumanMessage("Where is it?")]},
                {"configurable": {"thread_id": f"thread-{n}"}},
            )
            model.assert_complete()
    logging.getLogger("toolstop").setLevel(logging.NOTSET)


@pytest.fixture(scope="module", params=ROUTERS, ids=lambda r: r.name)
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("evidence") / "agent.sqlite"
    drive(db, request.param)
    return db


def report(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["report", *argv], out=out), out.getvalue()


def test_examples_are_one_option_away_masked_and_cut(database: Path, tmp_path: Path) -> None:
    code, text = report("--db", str(database), "--out", str(tmp_path), "--examples", "3")
    assert code == 0, text
    [entry] = json.loads((tmp_path / "report.json").read_text())["candidates"]
    assert entry["tool"] == "lookup_order"
    assert len(entry["threads"]) == 10  # at most 10 of the 12
    assert set(entry["threads"]) < {f"thread-{n}" for n in range(12)}
    assert len(entry["examples"]) == 3
    first = entry["examples"][0]
    n = first["thread_id"].removeprefix("thread-")
    assert first["run"] == 1
    assert first["tool_result"].startswith(f"Order {n} ships Monday. api_key=*** word word")
    assert len(first["tool_result"]) == EXAMPLE_CHARS + 1  # cut, marked with …
    assert first["tool_result"].endswith("…")
    assert first["final_answer"] == f"Order {n} ships Monday. [0m"  # no control character
    page = (tmp_path / "report.html").read_text()
    assert "<h2>The runs behind each tool</h2>" in page
    assert f"Order {n} ships Monday. api_key=*** word" in page
    assert SECRET not in page
    assert SECRET not in (tmp_path / "report.json").read_text()


def test_without_the_option_the_page_holds_no_message_content(
    database: Path, tmp_path: Path
) -> None:
    code, _ = report("--db", str(database), "--out", str(tmp_path))
    assert code == 0
    page = (tmp_path / "report.html").read_text()
    document = (tmp_path / "report.json").read_text()
    for written in (page, document):
        assert "ships Monday" not in written
        assert "word word" not in written
    assert "thread-3" in page  # the threads behind the tool are listed
    assert "toolstop report --examples K" in page
    assert "examples" not in json.loads(document)["candidates"][0]


def test_explain_shows_the_tool_the_overlap_and_the_final_answer(database: Path) -> None:
    out = io.StringIO()
    assert main(["explain", "--db", str(database), "thread-2"], out=out) == 0
    lines = out.getvalue().splitlines()
    assert any(
        line.startswith("  the model answered right after: lookup_order (answer overlap ")
        and line.endswith(", relayed its prose result)")
        for line in lines
    ), lines
    assert "  final answer: Order 2 ships Monday. [0m" in lines
    out = io.StringIO()
    assert main(["explain", "--db", str(database), "thread-2", "--json"], out=out) == 0
    [run] = json.loads(out.getvalue())["runs"]
    assert run["ended_after"]["final_answer"] == "Order 2 ships Monday. [0m"
    assert set(run["ended_after"]["tools"]) == {"lookup_order"}
    assert run["ended_after"]["judged"]["lookup_order"]["action"] == "relayed"


def test_examples_need_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "runs.jsonl"
    log.write_text("")
    assert main(["report", "--log", str(log), "--out", str(tmp_path / "o"), "--examples", "2"]) == 0
    assert "--examples needs --db" in capsys.readouterr().err


@pytest.mark.parametrize("count", ["-1", "101", "two"])
def test_a_bad_examples_count_is_one_clear_line(
    count: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--log", "-", "--out", str(tmp_path), "--examples", count])
    assert "--examples is a whole number from 0 to 100" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Authorization: Bearer abcdefghijklmnop123", "Authorization: ***"),
        ("sent with bearer abcdefghijklmnop123", "sent with bearer ***"),
        (f"key {SECRET} here", "key *** here"),
        ('{"password": "hunter22", "mode": "x"}', '{"password": ***, "mode": "x"}'),
        ("db postgresql://u:pw%40rd@h/db", "db postgresql://***"),
        ("token=abc123 next=1", "token=*** next=1"),
        ("sha 0123456789abcdef0123456789abcdef01", "sha ***"),
        ("Order 4711 for Mia ships Monday.", "Order 4711 for Mia ships Monday."),  # kept
        ("departure_time_estimated_for_the_flight_in_local_time", "departure_time_estimated_for_the_flight_in_local_time"),  # noqa: E501
    ],
)  # fmt: skip
def test_secrets_are_masked(text: str, masked: str) -> None:
    assert mask_secrets(text) == masked


def test_clean_cuts_and_strips_control_characters() -> None:
    assert clean("a\x1b[2Jb\u202ec", limit=10) == "a[2Jbc"
    assert clean("x" * 30, limit=10) == "x" * 10 + "…"
