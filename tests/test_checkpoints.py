"""Threads persist in SQLite and PostgreSQL: records and artifacts survive a new process."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from pydantic import BaseModel

from toolstop import build_react_graph, signal
from toolstop.cli.checkpoints import open_checkpointer
from toolstop.errors import ToolstopConfigError
from toolstop.testing import ScriptedChatModel, assert_valid_history, call, forced_tool

pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "threads.sqlite")
    return str(request.getfixturevalue("postgres_url"))


def demo(*argv: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "toolstop", "demo", *argv],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_thread_continues_after_a_stop_across_processes(db: str) -> None:
    thread = f"t-{uuid.uuid4().hex[:8]}"
    first = demo("--thread", thread, "--db", db, "--outcome", "fatal")
    assert "4 messages" in first
    second = demo("And shipping?", "--thread", thread, "--db", db, "--outcome", "success")
    assert "8 messages" in second
    assert "saw [system, human, ai, tool, ai, human]" in second  # the history came back
    with open_checkpointer(db) as saver:
        graph = build_react_graph(
            ScriptedChatModel([]), [forced_tool("search", ("x", None))], checkpointer=saver
        )
        state = graph.get_state({"configurable": {"thread_id": thread}}).values
    assert state["stop_record"]["rule"] == "completed"  # the latest run's record
    tools = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.artifact["reason"] for m in tools] == ["fatal", "completed"]
    assert_valid_history(state["messages"])


class Receipt(BaseModel):
    id: str
    amount: float


def test_which_artifact_types_round_trip(db: str) -> None:
    artifact = signal("completed", pair=(1, 2), receipt=Receipt(id="r1", amount=2.5), n=None)
    thread = f"types-{uuid.uuid4().hex[:8]}"
    config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    with open_checkpointer(db) as saver:
        graph = build_react_graph(
            ScriptedChatModel([call("lookup")]),
            [forced_tool("lookup", ("page", artifact))],
            checkpointer=saver,
        )
        graph.invoke({"messages": [("user", "q")]}, config)
    with open_checkpointer(db) as saver:  # a fresh connection, as a new process would have
        graph = build_react_graph(
            ScriptedChatModel([]), [forced_tool("lookup", ("x", None))], checkpointer=saver
        )
        state = graph.get_state(config).values
    stored = next(m for m in state["messages"] if isinstance(m, ToolMessage)).artifact
    assert stored["pair"] == [1, 2]  # tuples come back as lists
    assert stored["receipt"] == {"id": "r1", "amount": 2.5}  # pydantic models as dicts
    assert stored["stop"] is True
    assert stored["n"] is None
    assert state["stop_record"]["rule"] == "completed"


def test_unreachable_postgres_is_one_sentence() -> None:
    pytest.importorskip("langgraph.checkpoint.postgres", reason="needs the `postgres` extra")
    with (
        pytest.raises(ToolstopConfigError, match="cannot connect"),
        open_checkpointer("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"),
    ):
        pass  # pragma: no cover


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://alice:s3cret-pw@127.0.0.1:1/none?connect_timeout=2",
        # psycopg quotes a malformed connection string back in its error
        "postgresql://alice:s3cret-pw@127.0.0.1:1/none?nosuchoption=1",
    ],
)
def test_a_connection_error_never_shows_the_password(url: str) -> None:
    pytest.importorskip("langgraph.checkpoint.postgres", reason="needs the `postgres` extra")
    with pytest.raises(ToolstopConfigError) as error, open_checkpointer(url):
        pass  # pragma: no cover
    message = str(error.value)
    assert "s3cret-pw" not in message
    assert message.startswith("cannot connect to postgresql://alice:***@127.0.0.1:1/none")


def test_an_explicit_sqlite_path_in_a_missing_folder_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
    db = tmp_path / "typo" / "threads.sqlite"
    with (
        pytest.raises(ToolstopConfigError, match=r"the folder .*typo does not exist"),
        open_checkpointer(str(db)),
    ):
        pass  # pragma: no cover
    assert not db.parent.exists()


def test_without_db_a_thread_lives_in_the_user_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from toolstop.cli import main

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    expected = tmp_path / "data" / "toolstop" / "threads.sqlite"
    for question in ("Refunds?", "And shipping?"):
        out = io.StringIO()
        assert main(["demo", question, "--thread", "t-1", "--outcome", "success"], out=out) == 0
    assert f"in {expected})" in out.getvalue()
    assert expected.is_file()
    with open_checkpointer(str(expected)) as saver:
        graph = build_react_graph(ScriptedChatModel([]), [], checkpointer=saver)
        state = graph.get_state({"configurable": {"thread_id": "t-1"}}).values
    assert [m.content for m in state["messages"] if m.type == "human"] == [
        "Refunds?",
        "And shipping?",
    ]
    assert state["stop_record"]["run"] == 2
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    out = io.StringIO()
    assert main(["demo", "--thread", "t-2", "--outcome", "success"], out=out) == 0
    assert (tmp_path / "home" / ".local" / "share" / "toolstop" / "threads.sqlite").is_file()
