"""How `toolstop report` reads finished runs (`toolstop.report.reader`): from a SQLite checkpoint
database whose checkpoints the test writes one by one with LangGraph's own saver (so each time,
version and open run is chosen here), from JSON log lines, and `--since`.

tests/test_report.py reads real traffic end to end, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import io
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from toolstop.errors import ToolstopConfigError
from toolstop.report import reader
from toolstop.report.reader import RunEnd, log_run_ends, open_database, parse_time

pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")


def at(minute: int) -> str:
    return f"2026-12-01T10:{minute:02d}:00+00:00"


class Writer:
    """Writes checkpoints straight through `SqliteSaver.put`, oldest first."""

    def __init__(self, path: Path, serde: Any = None) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.conn = sqlite3.connect(str(path), check_same_thread=False)
        self.saver = (
            SqliteSaver(self.conn) if serde is None else SqliteSaver(self.conn, serde=serde)
        )
        self.saver.setup()
        self.count = 0

    def put(self, thread: str, minute: int | None, ns: str = "", **values: Any) -> str:
        self.count += 1
        checkpoint_id = f"cp-{self.count:04d}"
        versions = {key: f"v-{id(value)}" for key, value in values.items()}
        if "version" in values:
            versions = {"stop_record": values.pop("version")}
        checkpoint = {
            "v": 1,
            "id": checkpoint_id,
            "ts": "" if minute is None else at(minute),  # "": a time it cannot read
            "channel_values": values,
            "channel_versions": versions,
            "versions_seen": {},
            "pending_sends": [],
        }
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
        self.saver.put(config, checkpoint, {"source": "loop", "step": self.count}, {})  # type: ignore[arg-type]
        return checkpoint_id

    def close(self) -> None:
        self.conn.close()


R1 = {"run": 1, "rule": "completed", "stopped": True}
R3 = {"run": 3, "rule": "fatal", "stopped": True}
OPEN = {"open": True}


def write_thread(writer: Writer, thread: str = "t", ns: str = "") -> dict[str, str]:
    """Run 1 ends; run 2 is cut off (open, never ended); run 3 ends; run 4 is in progress (two
    checkpoints: an open run in an older checkpoint is not always an interrupted one)."""
    ids = {}
    ids["run 1 open"] = writer.put(thread, 0, ns, toolstop_run={**OPEN, "record": {"run": 1}})
    ids["run 1 end"] = writer.put(
        thread, 1, ns, stop_record=R1, version="1", toolstop_run={"open": False}
    )
    ids["a later step"] = writer.put(thread, 2, ns, stop_record=R1, version="1")
    ids["run 2 open"] = writer.put(
        thread,
        5,
        ns,
        stop_record=R1,
        version="1",
        toolstop_run={**OPEN, "record": {"run": 2, "tool_turns": 1}},
    )
    ids["run 3 end"] = writer.put(
        thread, 7, ns, stop_record=R3, version="3", toolstop_run={"open": False}
    )
    ids["run 4 step"] = writer.put(
        thread, 9, ns, stop_record=R3, version="3", toolstop_run={**OPEN, "record": {"run": 4}}
    )
    ids["run 4 open"] = writer.put(
        thread,
        10,
        ns,
        stop_record=R3,
        version="3",
        toolstop_run={**OPEN, "record": {"run": 4, "model_calls": 1}},
    )
    return ids


@pytest.fixture
def db(tmp_path: Path) -> tuple[str, dict[str, str]]:
    path = tmp_path / "threads.sqlite"
    writer = Writer(path)
    ids = write_thread(writer)
    writer.close()
    return str(path), ids


def moment(minute: int) -> datetime:
    return datetime.fromisoformat(at(minute))


def test_each_new_version_of_the_record_is_one_finished_run(db: tuple[str, dict[str, str]]) -> None:
    path, ids = db
    with open_database(path) as database:
        ends, current = database.run_ends("t", "")
    assert ends == [
        RunEnd(
            thread_id="t",
            checkpoint_ns="",
            ended_at=moment(1),
            record=R1,
            checkpoint_id=ids["run 1 end"],
        ),
        RunEnd(
            thread_id="t",
            checkpoint_ns="",
            ended_at=moment(5),
            record={"run": 2, "tool_turns": 1, "rule": "interrupted", "stopped": False},
            checkpoint_id=ids["run 2 open"],
        ),
        RunEnd(
            thread_id="t",
            checkpoint_ns="",
            ended_at=moment(7),
            record=R3,
            checkpoint_id=ids["run 3 end"],
        ),
    ]
    assert current == {"run": 4, "model_calls": 1}


def test_explain_reads_a_checkpoints_messages_with_the_full_saver(
    db: tuple[str, dict[str, str]],
) -> None:
    from langchain_core.messages import HumanMessage

    path, _ = db
    writer = Writer(Path(path))
    message = HumanMessage("q", id="h1")
    checkpoint_id = writer.put("m", 0, messages=[message])
    writer.close()
    with open_database(path) as database:
        config = {
            "configurable": {"thread_id": "m", "checkpoint_ns": "", "checkpoint_id": checkpoint_id}
        }
        found = database.full.get_tuple(config)
        assert found.checkpoint["channel_values"]["messages"] == [message]
        # the records-only reader skips messages without building them
        [item] = list(database.checkpoints("m", ""))
        assert item.checkpoint["channel_values"]["messages"] == [None]


def test_since_stops_reading_at_the_first_older_run(db: tuple[str, dict[str, str]]) -> None:
    path, _ = db
    with open_database(path) as database:
        ends, _ = database.run_ends("t", "", since=moment(4))
        assert [e.record["run"] for e in ends] == [2, 3]
        ends, _ = database.run_ends("t", "", since=moment(5))
        assert [e.record["run"] for e in ends] == [2, 3]  # run 2 was last seen open at 5
        ends, _ = database.run_ends("t", "", since=moment(7))
        assert [e.record["run"] for e in ends] == [3]  # run 3 ended at 7: not before it
        ends, _ = database.run_ends("t", "", since=moment(8))
        assert [e.record["run"] for e in ends] == []
        ends, _ = database.run_ends("t", "", since=moment(1))
        assert [e.record["run"] for e in ends] == [1, 2, 3]


def test_pages_of_checkpoints_and_of_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "threads.sqlite"
    writer = Writer(path)
    for thread in ("b", "c"):
        write_thread(writer, thread)
    ids = {"": write_thread(writer, "a", ns=""), "sub": write_thread(writer, "a", ns="sub")}
    writer.put("d", 0, toolstop_run={"open": False})
    writer.close()
    monkeypatch.setattr(reader, "PAGE", 2)
    monkeypatch.setattr(reader, "THREAD_PAGE", 2)
    with open_database(str(path)) as database:
        assert list(database.threads()) == [
            ("a", ""),
            ("a", "sub"),
            ("b", ""),
            ("c", ""),
            ("d", ""),
        ]
        assert database.namespaces("a") == ["", "sub"]
        assert database.namespaces("nobody") == []
        assert len(list(database.checkpoints("a", "sub"))) == 7
        for ns in ("", "sub"):  # each namespace read on its own
            ends = database.run_ends("a", ns)[0]
            assert [e.checkpoint_id for e in ends] == [
                ids[ns][step] for step in ("run 1 end", "run 2 open", "run 3 end")
            ]
        ends, current = database.run_ends("c", "")
        assert [e.record["run"] for e in ends] == [1, 2, 3]
        assert current == {"run": 4, "model_calls": 1}
        assert database.run_ends("d", "") == ([], None)
        assert database.unreadable == 0
    monkeypatch.setattr(reader, "THREAD_PAGE", 5)  # exactly one full page, then an empty one
    with open_database(str(path)) as database:
        assert len(list(database.threads())) == 5


def test_a_record_in_the_oldest_checkpoint_is_a_run_too(tmp_path: Path) -> None:
    path = tmp_path / "threads.sqlite"
    writer = Writer(path)
    first = writer.put("t", 3, ns="sub", stop_record=R1, version="1")
    writer.close()
    with open_database(str(path)) as database:
        assert database.run_ends("t", "sub") == (
            [
                RunEnd(
                    thread_id="t",
                    checkpoint_ns="sub",
                    ended_at=moment(3),
                    record=R1,
                    checkpoint_id=first,
                )
            ],
            None,
        )


def test_a_run_of_unknown_time_comes_last_and_odd_keys_are_read(tmp_path: Path) -> None:
    path = tmp_path / "threads.sqlite"
    writer = Writer(path)
    odd = {"run": 1, "by_number": {1: "int keys, as msgpack allows"}}
    writer.put("t", None, stop_record=odd, version="1")
    writer.put("t", 3, stop_record=R3, version="3")
    writer.close()
    with open_database(str(path)) as database:
        ends, _ = database.run_ends("t", "")
        assert [(e.record["run"], e.ended_at) for e in ends] == [(3, moment(3)), (1, None)]
        assert ends[1].record == odd
        assert database.unreadable == 0


def test_an_open_run_without_a_record_and_odd_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "threads.sqlite"
    writer = Writer(path)
    writer.put("t", 0, toolstop_run={"open": True, "record": {"run": "one"}})  # no run number
    writer.put("t", 1, toolstop_run={"open": True, "record": None})
    writer.put("t", 2, stop_record="not a record", version="9")
    writer.put("t", 3, toolstop_run={"open": True})
    writer.close()
    with open_database(str(path)) as database:
        assert database.run_ends("t", "") == ([], {})


def test_a_checkpoint_it_cannot_decode_counts_the_thread_unreadable(tmp_path: Path) -> None:
    class Custom:
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            return "custom", b"\x00"

        def loads_typed(self, data: Any) -> Any:
            raise AssertionError

    path = tmp_path / "threads.sqlite"
    writer = Writer(path)
    writer.put("ok", 0, stop_record=R1, version="1")
    writer.close()
    writer = Writer(path, serde=Custom())
    writer.put("bad", 0, stop_record=R1, version="1")
    writer.put("worse", 0, stop_record=R1, version="1")
    writer.close()
    with open_database(str(path)) as database:
        assert database.run_ends("bad", "") == ([], None)
        assert database.unreadable == 1
        assert [e.record for e in database.run_ends("ok", "")[0]] == [R1]
        assert database.unreadable == 1
        assert database.run_ends("worse", "") == ([], None)
        assert database.unreadable == 2
        assert database.location == str(path)


def test_a_database_that_is_not_there_or_not_a_checkpoint_database(tmp_path: Path) -> None:
    missing = str(tmp_path / "none.sqlite")
    with pytest.raises(ToolstopConfigError) as error, open_database(missing):
        pass
    assert (
        str(error.value) == f"no database at {missing} (a SQLite file path or a postgresql:// URL)"
    )
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database, not even close" * 100)
    with pytest.raises(ToolstopConfigError) as error, open_database(str(garbage)):
        pass
    assert str(error.value).startswith(f"{garbage} is not a readable SQLite database: ")
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(str(empty)).execute("CREATE TABLE other (x)").connection.close()
    with pytest.raises(ToolstopConfigError) as error, open_database(str(empty)):
        pass
    assert str(error.value) == f"{empty} holds no LangGraph checkpoints (no `checkpoints` table)"


def test_the_database_is_opened_read_only(db: tuple[str, dict[str, str]]) -> None:
    path, _ = db
    with open_database(path) as database, pytest.raises(sqlite3.OperationalError, match="readonly"):
        database.records.conn.execute("DELETE FROM checkpoints")


LINES = [
    json.dumps(
        {"event": "run_end", "time": at(1), "thread_id": "t", "checkpoint_ns": "sub", "record": R1}
    ),
    "not json",
    "",
    json.dumps({"event": "run_start", "record": R1}),
    json.dumps({"event": "run_end", "record": "no"}),
    json.dumps(["run_end"]),
    json.dumps({"event": "run_end", "time": "2026-12-01T10:03:00", "thread_id": 7, "record": R3}),
    json.dumps({"event": "run_end", "time": "yesterday", "record": {"run": 5}}),
    json.dumps({"event": "run_end", "time": 12, "record": {"run": 6}}),
]


def test_json_log_lines() -> None:
    skipped = [0]
    ends = list(log_run_ends(io.StringIO("\n".join(LINES) + "\n"), skipped=skipped))
    assert ends == [
        RunEnd(thread_id="t", checkpoint_ns="sub", ended_at=moment(1), record=R1),
        RunEnd(thread_id="7", checkpoint_ns="", ended_at=moment(3), record=R3),  # naive: UTC
        RunEnd(thread_id=None, checkpoint_ns="", ended_at=None, record={"run": 5}),
        RunEnd(thread_id=None, checkpoint_ns="", ended_at=None, record={"run": 6}),
    ]
    assert skipped == [4]  # not JSON, not a run end, no record, not an object; blank not counted
    later = list(log_run_ends(io.StringIO("\n".join(LINES)), since=moment(2)))
    assert [e.record.get("run") for e in later] == [3, 5, 6]  # a run of unknown time is kept
    assert [e.record["run"] for e in log_run_ends(io.StringIO(LINES[0]), since=moment(1))] == [1]
    offset = json.dumps({"event": "run_end", "time": "2026-12-01T12:05:00+02:00", "record": R1})
    [with_offset] = log_run_ends(io.StringIO(offset))
    assert with_offset.ended_at == moment(5)  # 12:05 at +02:00 is 10:05 UTC
    assert with_offset.ended_at.utcoffset() == timedelta(hours=2)


def test_since_takes_a_date_a_time_or_an_age() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert parse_time(" 30m ", now=now) == now - timedelta(minutes=30)
    assert parse_time("12h", now=now) == now - timedelta(hours=12)
    assert parse_time("7d", now=now) == now - timedelta(days=7)
    assert parse_time("2w", now=now) == now - timedelta(weeks=2)
    assert parse_time("2026-05-01") == datetime(2026, 5, 1, tzinfo=UTC)
    assert parse_time("2026-05-01T12:00+02:00") == datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
    assert parse_time("2026-05-01T12:00+02:00").utcoffset() == timedelta(hours=2)
    before = datetime.now(UTC)
    assert (
        before - timedelta(hours=1, seconds=1)
        <= parse_time("1h")
        <= datetime.now(UTC) - timedelta(hours=1)
    )
    for wrong in ("3x", "m", "h2", "-5d", "1.5h", "soon"):
        with pytest.raises(ToolstopConfigError) as error:
            parse_time(wrong)
        assert str(error.value) == (
            "--since takes an ISO date or date-time (2025-05-01, 2025-05-01T12:00+02:00) "
            f"or an age (30m, 12h, 7d, 2w), got {wrong!r}"
        )


def test_reading_writes_no_file_beside_the_database(db: tuple[str, dict[str, str]]) -> None:
    """SqliteSaver's databases are in WAL mode: read-only, SQLite still made -wal and -shm."""
    path, _ = db
    folder = Path(path).parent
    before = sorted(p.name for p in folder.iterdir())
    with open_database(path) as database:
        assert [e.record["run"] for e in database.run_ends("t", "")[0]] == [1, 2, 3]
    assert sorted(p.name for p in folder.iterdir()) == before
