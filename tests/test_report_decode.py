"""No command of toolstop builds a class a checkpoint names (`toolstop.report.decode`).

The attack: a checkpoint whose messages, artifact and record hold msgpack extensions naming
`os.system` with a command that writes a marker file. LangGraph's default serializer runs it (the
first test proves the blob is a real attack); `toolstop explain` (text and `--json`) and
`toolstop report` read the same database, on SQLite and PostgreSQL, and no marker appears, while
the runs and the turns of the messages are still read.
"""

from __future__ import annotations

import io
import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from toolstop.cli import main
from toolstop.report.decode import SafeDecoder

pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")

# LangGraph's extension codes that import and call what they name: a constructor with one
# argument, positional arguments, keyword arguments, pydantic v1 and pydantic v2.
CALLING_CODES = (0, 1, 2, 4, 5)


class Evil:
    """Packed as a msgpack extension of `code` naming `os.system`, writing `marker`."""

    def __init__(self, code: int, marker: Path) -> None:
        self.code, self.marker = code, marker

    def ext(self) -> ormsgpack.Ext:
        command = f"touch {self.marker}"
        args: Any = {
            0: command,
            1: [command],
            2: {"command": command},
            4: {"command": command},
            5: {"command": command},
        }[self.code]
        parts = ["os", "system", args] + (["model_validate_json"] if self.code == 5 else [])
        return ormsgpack.Ext(self.code, ormsgpack.packb(parts))


def evils(folder: Path, tag: str) -> list[Evil]:
    return [Evil(code, folder / f"ran-{tag}-{code}") for code in CALLING_CODES]


class Crafting:
    """A serializer that writes like LangGraph's, with every `Evil` packed as its extension."""

    def __init__(self) -> None:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        self.plain = JsonPlusSerializer()

    def _default(self, obj: Any) -> Any:
        if isinstance(obj, Evil):
            return obj.ext()
        # a message, as LangGraph packs one (pydantic v2), its fields packed by this hook too
        parts = [type(obj).__module__, type(obj).__name__, obj.model_dump(), "model_validate_json"]
        return ormsgpack.Ext(5, self._pack(parts))

    def _pack(self, obj: Any) -> bytes:
        return ormsgpack.packb(obj, default=self._default, option=ormsgpack.OPT_NON_STR_KEYS)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is None:
            return "null", b""
        return "msgpack", self._pack(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.plain.loads_typed(data)


RECORD = {
    "schema_version": 5, "run": 1, "rule": "completed", "stopped": True, "mode": "hard",
    "would_stop": None, "tools": ["pay"], "tool_call_ids": ["p1"], "relayed": ["p1"],
    "outcomes": {"completed": 1}, "transient_retries": 0, "tool_turns": 1, "model_calls": 1,
    "input_tokens": 10, "output_tokens": 2,
}  # fmt: skip


def hostile_values(marks: list[Evil]) -> dict[str, Any]:
    """One finished run whose messages and record carry the extensions."""
    return {
        "messages": [
            HumanMessage("Pay.", id="h1"),
            AIMessage("", id="a1", tool_calls=[{"name": "pay", "args": {}, "id": "p1"}]),
            ToolMessage(
                "Paid.",
                tool_call_id="p1",
                name="pay",
                id="t1",
                artifact={"stop": True, "reason": "completed", "evil": marks[0]},
            ),
            *marks[1:],
        ],
        "stop_record": {**RECORD, "ended_by_message": marks[1]},
        "toolstop_run": {"open": False, "evil": marks[2]},
    }


def put(saver: Any, values: dict[str, Any], thread: str = "t") -> None:
    checkpoint = {
        "v": 1,
        "id": "cp-0001",
        "ts": "2026-12-01T10:00:00+00:00",
        "channel_values": values,
        "channel_versions": dict.fromkeys(values, "1"),
        "versions_seen": {},
        "pending_sends": [],
    }
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    saver.put(config, checkpoint, {"source": "loop", "step": 1}, checkpoint["channel_versions"])


def sqlite_db(path: Path, values: dict[str, Any]) -> str:
    from langgraph.checkpoint.sqlite import SqliteSaver

    with sqlite3.connect(str(path), check_same_thread=False) as conn:
        saver = SqliteSaver(conn, serde=Crafting())
        saver.setup()
        put(saver, values)
    return str(path)


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stderr(err):
        code = main(list(argv), out=out)
    return code, out.getvalue(), err.getvalue()


def test_the_blob_is_an_attack_on_langgraphs_default_serializer(tmp_path: Path) -> None:
    """The check below is worth something only if the blob runs code where it is not refused."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    marks = evils(tmp_path, "default")
    blob = Crafting().dumps_typed(hostile_values(marks))
    try:
        JsonPlusSerializer().loads_typed(blob)
    except Exception:  # pragma: no cover - a LangGraph that refuses the types altogether
        pytest.skip("this LangGraph refuses unregistered types")
    ran = [m.code for m in marks if m.marker.exists()]
    if not ran:  # pragma: no cover - LANGGRAPH_STRICT_MSGPACK=true
        pytest.skip("this LangGraph runs in strict msgpack mode")
    assert ran == list(CALLING_CODES)


def test_the_decoder_builds_messages_and_nothing_a_blob_names(tmp_path: Path) -> None:
    marks = evils(tmp_path, "decoder")
    values = SafeDecoder().loads_typed(Crafting().dumps_typed(hostile_values(marks)))
    assert not [m for m in marks if m.marker.exists()]
    human, asking, result, *rest = values["messages"]
    assert [type(m) for m in (human, asking, result)] == [HumanMessage, AIMessage, ToolMessage]
    assert (human.content, asking.tool_calls[0]["id"], result.tool_call_id) == ("Pay.", "p1", "p1")
    # what a blob names becomes its plain arguments: text and data, never a call
    assert result.artifact["evil"] == f"touch {marks[0].marker}"
    assert rest == [
        [f"touch {marks[1].marker}"],
        *({"command": f"touch {m.marker}"} for m in marks[2:]),
    ]
    # records only: extensions are skipped unparsed
    plain = SafeDecoder(messages=False).loads_typed(Crafting().dumps_typed(hostile_values(marks)))
    assert plain["messages"] == [None] * 7
    assert plain["stop_record"]["ended_by_message"] is None
    assert not [m for m in marks if m.marker.exists()]


def test_the_decoder_reads_json_constructors_as_data_and_refuses_other_formats(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran-json"
    lc = {
        "messages": [
            {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
             "kwargs": {"content": "Hi.", "id": "a1"}},
            {"lc": 2, "type": "constructor", "id": ["os", "system"],
             "kwargs": {"command": f"touch {marker}"}},
        ]
    }  # fmt: skip
    values = SafeDecoder().loads_typed(("json", json.dumps(lc).encode()))
    assert not marker.exists()
    assert type(values["messages"][0]) is AIMessage
    assert values["messages"][1] == {"command": f"touch {marker}"}
    assert SafeDecoder(messages=False).loads_typed(("json", json.dumps(lc).encode())) == {
        "messages": [None, None]
    }
    for data in [("pickle", b"cos\nsystem\n."), ("msgpack", b"\xc1"), ("json", b"{"), ("x", b"")]:
        with pytest.raises(ValueError, match=r"undecodable|are not read"):
            SafeDecoder().loads_typed(data)
    nested = b"\x91" * 100_000 + b"\xc0"  # deeper than any parser's stack
    with pytest.raises(ValueError, match="undecodable msgpack"):
        SafeDecoder().loads_typed(("msgpack", nested))
    assert SafeDecoder().loads_typed(("null", b"")) is None
    with pytest.raises(NotImplementedError):
        SafeDecoder().dumps_typed({})


def check_commands(db: str, out: Path, marks: list[Evil]) -> None:
    code, text, err = run_cli("explain", "t", "--db", db)
    assert code == 0, err
    assert "rule completed" in text
    assert "turn 1: pay p1 completed (stop)" in text  # the messages were read, as data
    code, text, err = run_cli("explain", "t", "--db", db, "--json")
    assert code == 0, err
    explanation = json.loads(text)
    assert explanation["runs"][0]["turns"] == [
        [{"tool": "pay", "tool_call_id": "p1", "signal": "completed", "stop": True}]
    ]
    code, text, err = run_cli("report", "--db", db, "--out", str(out))
    assert code == 0, err
    assert json.loads((out / "report.json").read_text())["runs"] == 1
    assert "Traceback" not in err
    assert not [m.code for m in marks if m.marker.exists()]


def test_explain_and_report_never_run_what_a_sqlite_checkpoint_names(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the report chart needs the `bench` extra")
    marks = evils(tmp_path, "sqlite")
    db = sqlite_db(tmp_path / "crafted.sqlite", hostile_values(marks))
    check_commands(db, tmp_path / "out", marks)


@pytest.fixture
def postgres_db(postgres_url: str) -> Iterator[str]:
    """A database of the test's own (the report reads every thread in it)."""
    import psycopg

    name = f"toolstop_decode_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = urlunsplit(urlsplit(postgres_url)._replace(path=f"/{name}"))
    try:
        yield url
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_explain_and_report_never_run_what_a_postgres_checkpoint_names(
    postgres_db: str, tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib", reason="the report chart needs the `bench` extra")
    from langgraph.checkpoint.postgres import PostgresSaver

    marks = evils(tmp_path, "postgres")
    with PostgresSaver.from_conn_string(postgres_db) as saver:
        saver.setup()
        saver.serde = Crafting()
        put(saver, hostile_values(marks))
    check_commands(postgres_db, tmp_path / "out", marks)


def test_demo_resuming_a_crafted_conversation_runs_nothing_it_names(tmp_path: Path) -> None:
    marks = evils(tmp_path, "demo")
    db = sqlite_db(tmp_path / "crafted.sqlite", hostile_values(marks))
    code, _, err = run_cli("demo", "--thread", "t", "--db", db, "--outcome", "success")
    assert code in (0, 1), err  # the conversation goes on, or one sentence says why not
    assert "Traceback" not in err
    assert not [m.code for m in marks if m.marker.exists()]
