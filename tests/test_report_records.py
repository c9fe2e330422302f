"""Which stop records `report` and `explain` count (`toolstop.report.records`), and what they do
with the others: a number out of range leaves the record out, counted as unreadable; a thread whose
checkpoints are of the wrong shape is unreadable, and neither aborts a report."""

from __future__ import annotations

import io
import json
import math
import sqlite3
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import ormsgpack
import pytest

from toolstop.cli import main
from toolstop.report.reader import log_run_ends, open_database
from toolstop.report.records import LIMIT, out_of_range

GOOD = {
    "schema_version": 5, "run": 1, "rule": "none", "stopped": False, "mode": "never",
    "would_stop": "completed", "tools": ["pay"], "tool_call_ids": ["p1"],
    "would_save": {"model_calls": 1, "input_tokens": 100, "output_tokens": 5},
    "outcomes": {"completed": 1}, "model_calls": 2, "input_tokens": 300, "output_tokens": 9,
    "calls_by_tool": {"pay": 1},
    "ended_after": {"tools": {"pay": 0.5}, "input_tokens": 100, "output_tokens": 5},
}  # fmt: skip

BAD = [
    ("input_tokens", {"input_tokens": -1}),
    ("model_calls", {"model_calls": math.nan}),
    ("output_tokens", {"output_tokens": math.inf}),
    ("output_tokens", {"output_tokens": LIMIT + 1}),
    ("model_calls", {"model_calls": True}),
    ("input_tokens", {"input_tokens": "7"}),
    ("run", {"run": -3}),
    ("would_save.model_calls", {"would_save": {"model_calls": -100}}),
    ("would_save", {"would_save": [1, 2]}),
    ("outcomes", {"outcomes": {"completed": -1}}),
    ("calls_by_tool", {"calls_by_tool": {"pay": 1.5}}),
    ("ended_after.tools", {"ended_after": {"tools": {"pay": 2.0}}}),
    ("ended_after.tools", {"ended_after": {"tools": {"pay": math.nan}}}),
    ("ended_after.input_tokens", {"ended_after": {"tools": {}, "input_tokens": -5}}),
    ("tools", {"tools": "pay"}),
    ("tools", {"tools": [["pay"]]}),
    ("invalid_signals", {"invalid_signals": 5}),
]


def test_a_record_in_range_is_counted_and_missing_numbers_are_fine() -> None:
    assert out_of_range(GOOD) is None
    assert out_of_range({"run": 1, "would_save": None, "ended_after": None}) is None
    assert out_of_range({**GOOD, "input_tokens": LIMIT, "ended_after": {"tools": {"a": 1}}}) is None


@pytest.mark.parametrize(("field", "change"), BAD, ids=[repr(c) for _, c in BAD])
def test_a_number_out_of_range_names_its_field(field: str, change: dict[str, Any]) -> None:
    assert out_of_range({**GOOD, **change}) == field


def test_log_lines_out_of_range_are_left_out_and_counted() -> None:
    lines = [{"event": "run_end", "record": GOOD}] + [
        {"event": "run_end", "record": {**GOOD, **change}} for _, change in BAD
    ]
    stream = io.StringIO("".join(json.dumps(line) + "\n" for line in lines))
    rejected = [0]
    assert [end.record for end in log_run_ends(stream, rejected=rejected)] == [GOOD]
    assert rejected == [len(BAD)]


class Raw:
    """Writes one checkpoint per thread with values packed as given (msgpack, no extensions)."""

    def __init__(self, path: Path) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.conn = sqlite3.connect(str(path), check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        self.count = 0

    def good(self, thread: str, record: dict[str, Any]) -> None:
        self.count += 1
        checkpoint = {
            "v": 1, "id": f"cp-{self.count:04d}", "ts": "2026-12-01T10:00:00+00:00",
            "channel_values": {"stop_record": record}, "channel_versions": {"stop_record": "1"},
            "versions_seen": {}, "pending_sends": [],
        }  # fmt: skip
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        self.saver.put(config, checkpoint, {"source": "loop", "step": 1}, {})  # type: ignore[arg-type]

    def raw(self, thread: str, value: Any) -> None:
        """A checkpoint row whose blob is `value`, valid msgpack of any shape."""
        self.count += 1
        self.conn.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, "
            "metadata) VALUES (?, '', ?, 'msgpack', ?, '{}')",
            (thread, f"cp-{self.count:04d}", ormsgpack.packb(value)),
        )
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()


WRONG_SHAPES = [
    [1, 2, 3],
    "a checkpoint",
    {"channel_values": [1], "ts": "x"},
    {"channel_values": {"stop_record": GOOD}, "channel_versions": ["stop_record"]},
]
ODD_VERSION = {"channel_values": {"stop_record": GOOD}, "channel_versions": {"stop_record": [1]}}
"""A version that is a list: unhashable, yet the record is read (a run)."""


def report(db: str, out: Path) -> tuple[int, dict[str, Any], str]:
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["report", "--db", db, "--out", str(out)], out=io.StringIO())
    document = json.loads((out / "report.json").read_text()) if code == 0 else {}
    return code, document, err.getvalue()


def test_wrong_shapes_and_numbers_out_of_range_never_abort_a_report(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
    path = tmp_path / "threads.sqlite"
    writer = Raw(path)
    writer.good("a-good", GOOD)
    for index, (_, change) in enumerate(BAD):
        writer.good(f"bad-number-{index:02d}", {**GOOD, **change})
    for index, value in enumerate(WRONG_SHAPES):
        writer.raw(f"bad-shape-{index}", value)
    writer.raw("odd-version", ODD_VERSION)
    writer.good("z-good", {**GOOD, "run": 2})
    writer.close()
    with open_database(str(path)) as database:
        assert [e.record["run"] for e in database.run_ends("z-good", "")[0]] == [2]
        for index in range(len(WRONG_SHAPES)):
            assert database.run_ends(f"bad-shape-{index}", "") == ([], None)
        assert database.unreadable == len(WRONG_SHAPES)
        assert database.run_ends("bad-number-00", "") == ([], None)
        assert database.rejected == 1
    code, document, err = report(str(path), tmp_path / "out")
    assert code == 0, err
    assert document["runs"] == 3  # the good threads, before and after the bad ones
    assert document["unreadable_threads"] == len(WRONG_SHAPES)
    assert document["unreadable_runs"] == len(BAD)
    assert "Traceback" not in err
    assert f"{len(BAD)} run record(s) hold a number out of range" in err


def test_explain_leaves_out_a_record_out_of_range_and_says_so(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
    path = tmp_path / "threads.sqlite"
    writer = Raw(path)
    writer.good("t", {**GOOD, "would_save": {"model_calls": -100}})
    writer.raw("shape", [1, 2])
    writer.close()
    for thread, said in [
        ("t", "1 run record(s) left out: a number out of range"),
        ("shape", "could not be read (a checkpoint undecodable or not of a checkpoint's shape)"),
    ]:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stderr(err):
            code = main(["explain", thread, "--db", str(path)], out=out)
        assert code == 0, err.getvalue()
        assert "0 finished run(s)" in out.getvalue()
        assert said in out.getvalue()
        assert "-100" not in out.getvalue()


# -- names cut where records are read ------------------------------------------------------------
LONG = "T" * 3_000_000


def test_every_name_of_a_record_is_cut_where_it_is_read() -> None:
    from toolstop.report.records import NAME_LIMIT, capped

    record = {
        **GOOD, "rule": LONG, "mode": LONG, "would_stop": LONG, "ended_by": LONG,
        "tools": [LONG, "pay"], "asked": [LONG], "outcomes": {LONG: 1, LONG + "x": 2},
        "calls_by_tool": {LONG: 1},
        "after_first": {LONG: {"model_calls": 1}, "pay": {"model_calls": 1, "skipped": [LONG]}},
        "would_skip": [LONG], "relayed": [LONG],
        "ended_after": {"tools": {LONG: 0.5}, "input_tokens": 1, "output_tokens": 1},
        "invalid_signals": [{"tool": LONG, "problem": LONG}, 5],
    }  # fmt: skip
    shown = capped(record)
    text = json.dumps(shown)
    assert len(text) < 20 * NAME_LIMIT
    assert shown["rule"] == "T" * (NAME_LIMIT - 1) + "…"
    assert shown["tools"][1] == "pay"
    assert list(shown["outcomes"].values()) == [3]  # names cut alike: their counts added
    assert shown["invalid_signals"][1] == 5
    assert shown["after_first"]["pay"]["skipped"] == shown["would_skip"] == [shown["rule"]]
    assert record["rule"] is LONG  # the record read is not changed
    assert capped(GOOD) == GOOD
    assert capped({**GOOD, "rule": {"a": 1}})["rule"] == "<dict>"


def test_a_report_with_a_huge_tool_name_is_written_with_names_cut(tmp_path: Path) -> None:
    """A 3 MB tool name once made matplotlib fail (`FT_Render_Glyph raster overflow`)."""
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
    from toolstop.report.records import NAME_LIMIT

    name = "T" * 30_000
    path = tmp_path / "threads.sqlite"
    writer = Raw(path)
    writer.good(
        "t" * 30_000,
        {
            **GOOD, "mode": "hard", "rule": "R" * 30_000, "would_stop": None, "would_save": None,
            "tools": [name], "calls_by_tool": {name: 1}, "outcomes": {name: 1},
            "ended_after": {"tools": {name: 0.95}, "input_tokens": 1, "output_tokens": 1},
        },
    )  # fmt: skip
    writer.close()
    code, document, err = report(str(path), tmp_path / "out")
    assert code == 0, err
    assert (tmp_path / "out" / "chart.png").stat().st_size > 0
    text = json.dumps(document, ensure_ascii=False)
    assert "T" * NAME_LIMIT not in text
    assert "R" * NAME_LIMIT not in text
    assert "t" * NAME_LIMIT not in text
    assert "T" * (NAME_LIMIT - 1) + "…" in text
    assert len((tmp_path / "out" / "report.html").read_text()) < 200_000


def test_log_lines_have_their_names_and_thread_ids_cut() -> None:
    from toolstop.report.records import NAME_LIMIT

    line = {"event": "run_end", "thread_id": LONG, "record": {**GOOD, "tools": [LONG]}}
    (end,) = log_run_ends(io.StringIO(json.dumps(line) + "\n"))
    assert end.thread_id is not None
    assert len(end.thread_id) == NAME_LIMIT
    assert len(end.record["tools"][0]) == NAME_LIMIT


def test_a_summary_cuts_names_whichever_reader_made_the_run() -> None:
    """Every reader's runs go through `Summary.add`: a reader that does not cut is covered."""
    from toolstop.report.reader import RunEnd
    from toolstop.report.records import NAME_LIMIT
    from toolstop.report.summary import Summary

    summary = Summary()
    record = {**GOOD, "rule": LONG, "tools": [LONG], "calls_by_tool": {LONG: 1}}
    summary.add(RunEnd(thread_id="t", checkpoint_ns="", ended_at=None, record=record))
    text = json.dumps(summary.document(), ensure_ascii=False)
    assert "T" * NAME_LIMIT not in text
    assert "T" * (NAME_LIMIT - 1) + "…" in text
