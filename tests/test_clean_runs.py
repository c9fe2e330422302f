"""A run after a failed or cancelled one starts clean (issue 31).

An aborted run leaves its run open in the last checkpoint and a tool call nothing answered. The
thread's next run must close that run as `interrupted` (and publish its record), answer the open
call before the model is called, and number and count itself afresh.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from routers import HAS_AGENTS, ROUTERS, Router
from toolstop import StopPolicy
from toolstop._lifecycle import INTERRUPTED_TEXT
from toolstop.testing import ScriptedChatModel, assert_valid_history, call, turn

THREAD = {"configurable": {"thread_id": "t"}}


class _Crash(BaseException):
    """What a worker's death looks like to the graph: nothing catches it."""


@tool
def crashes(q: str) -> str:
    """A tool whose run never comes back (the worker dies)."""
    raise _Crash


@tool
async def hangs(q: str) -> str:
    """A tool that runs until it is cancelled."""
    await asyncio.Event().wait()
    return "never"


@contextmanager
def saver(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        pytest.importorskip("langgraph.checkpoint.sqlite")
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as checkpointer:
            yield checkpointer
    else:
        url = request.getfixturevalue("postgres_url")
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(url) as checkpointer:
            checkpointer.setup()
            yield checkpointer


def _records(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.toolstop for r in caplog.records if hasattr(r, "toolstop")]


def _script() -> ScriptedChatModel:
    return ScriptedChatModel([turn(call("crashes", q="x", id="c1")), AIMessage("fine")])


def _check_fresh_run(
    model: ScriptedChatModel, result: dict[str, Any], records: list[dict[str, Any]], tool: str
) -> None:
    """The second run: its own record, a valid history sent to the model and kept."""
    second = model.calls[-1].messages
    assert_valid_history(second, "all", finished=False)
    answer = next(m for m in second if isinstance(m, ToolMessage))
    assert (answer.tool_call_id, answer.status, answer.content) == ("c1", "error", INTERRUPTED_TEXT)
    assert [type(m).__name__ for m in second if m.type != "system"] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
    ]
    assert_valid_history(result["messages"], "all")
    record = result["stop_record"]
    assert (record["run"], record["model_calls"], record["rule"]) == (2, 1, "none")
    assert record["tool_turns"] == 0
    interrupted = [r for r in records if r["rule"] == "interrupted"]
    assert len(interrupted) == 1
    assert interrupted[0]["run"] == 1
    assert interrupted[0]["model_calls"] == 1
    assert (interrupted[0]["tools"], interrupted[0]["tool_call_ids"]) == ([tool], ["c1"])
    assert [r["run"] for r in records] == [1, 2]
    model.assert_complete()


def _agent(router: Router, model: Any, tools: list[Any], checkpointer: Any) -> Any:
    return router.build(model, tools, policy=StopPolicy(), checkpointer=checkpointer)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_run_after_a_crashed_tool_starts_clean(
    router: Router,
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolstop")
    config = {"configurable": {"thread_id": f"crash-{router.name}-{kind}-{uuid.uuid4()}"}}
    model = _script()
    with saver(kind, tmp_path, request) as checkpointer:
        agent = _agent(router, model, [crashes], checkpointer)
        with pytest.raises(_Crash):
            agent.invoke({"messages": [HumanMessage("first")]}, config)
        result = agent.invoke({"messages": [HumanMessage("second")]}, config)
    _check_fresh_run(model, result, _records(caplog), "crashes")


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_run_after_a_cancelled_one_starts_clean(
    router: Router,
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolstop")
    if kind == "postgres":
        url = request.getfixturevalue("postgres_url")
    config = {"configurable": {"thread_id": f"cancel-{router.name}-{kind}-{uuid.uuid4()}"}}
    model = ScriptedChatModel([turn(call("hangs", q="x", id="c1")), AIMessage("fine")])

    async def scenario(checkpointer: Any) -> dict[str, Any]:
        agent = _agent(router, model, [hangs], checkpointer)
        task = asyncio.ensure_future(agent.ainvoke({"messages": [HumanMessage("first")]}, config))
        while len(model.calls) < 1:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # the tool is running now
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        result: dict[str, Any] = await agent.ainvoke({"messages": [HumanMessage("second")]}, config)
        return result

    async def main() -> dict[str, Any]:
        if kind == "memory":
            return await scenario(InMemorySaver())
        if kind == "sqlite":
            pytest.importorskip("langgraph.checkpoint.sqlite.aio")
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "t.db")) as checkpointer:
                return await scenario(checkpointer)
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(url) as checkpointer:
            await checkpointer.setup()
            return await scenario(checkpointer)

    result = asyncio.run(main())
    _check_fresh_run(model, result, _records(caplog), "hangs")


@pytest.mark.skipif(not HAS_AGENTS, reason="needs langchain>=1.2.9")
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_tool_that_raises_on_create_agent_then_a_new_turn(
    use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Without error middleware `create_agent` fails the run on a tool exception."""
    from langchain.agents import create_agent

    from toolstop.middleware import StopOnArtifact

    caplog.set_level(logging.INFO, logger="toolstop")

    @tool
    def broken(q: str) -> str:
        """Always raises."""
        msg = "boom"
        raise RuntimeError(msg)

    model = ScriptedChatModel([turn(call("broken", q="x", id="c1")), AIMessage("fine")])
    agent = create_agent(
        model, [broken], middleware=[StopOnArtifact()], checkpointer=InMemorySaver()
    )
    if use_async:

        async def main() -> dict[str, Any]:
            with pytest.raises(RuntimeError):
                await agent.ainvoke({"messages": [HumanMessage("first")]}, THREAD)
            result: dict[str, Any] = await agent.ainvoke(
                {"messages": [HumanMessage("second")]}, THREAD
            )
            return result

        result = asyncio.run(main())
    else:
        with pytest.raises(RuntimeError):
            agent.invoke({"messages": [HumanMessage("first")]}, THREAD)
        result = agent.invoke({"messages": [HumanMessage("second")]}, THREAD)
    _check_fresh_run(model, result, _records(caplog), "broken")


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_run_that_failed_in_the_model_call_is_closed_too(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    """No call left open (the model failed after a tool turn): the next run is still its own."""
    caplog.set_level(logging.INFO, logger="toolstop")

    @tool
    def lookup(q: str) -> str:
        """Plain tool."""
        return "data"

    model = ScriptedChatModel([turn(call("lookup", q="x", id="c1"))])
    agent = _agent(router, model, [lookup], InMemorySaver())
    with pytest.raises(Exception, match="unexpected model call"):  # the script ran out
        agent.invoke({"messages": [HumanMessage("first")]}, THREAD)
    model2 = ScriptedChatModel([AIMessage("fine")])
    agent = _agent(router, model2, [lookup], agent.checkpointer)
    result = agent.invoke({"messages": [HumanMessage("second")]}, THREAD)
    assert_valid_history(model2.calls[0].messages, "all", finished=False)
    record = result["stop_record"]
    assert (record["run"], record["model_calls"], record["tool_turns"]) == (2, 1, 0)
    interrupted = [r for r in _records(caplog) if r["rule"] == "interrupted"]
    assert [(r["run"], r["model_calls"], r["tool_call_ids"]) for r in interrupted] == [(1, 1, [])]
    assert interrupted[0]["tool_turns"] == 1  # its answered turn is accounted for
    assert interrupted[0]["outcomes"]["unsignalled"] == 1


@pytest.mark.skipif(not HAS_AGENTS, reason="needs langchain>=1.2.9")
@pytest.mark.parametrize("resume", [True, False], ids=["resumed", "abandoned"])
def test_a_review_resumed_is_one_run_and_a_review_abandoned_is_interrupted(
    resume: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A HITL interrupt resumed with `Command(resume=...)` continues its run; new input instead
    of a resume ends the paused run as `interrupted` and answers its call."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.types import Command

    from toolstop.middleware import StopOnArtifact

    caplog.set_level(logging.INFO, logger="toolstop")

    @tool
    def lookup(q: str) -> str:
        """Plain tool."""
        return "data"

    model = ScriptedChatModel(
        [turn(call("lookup", q="x", id="c1")), AIMessage("first answer"), AIMessage("second")]
    )
    agent = create_agent(
        model,
        [lookup],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"lookup": True}), StopOnArtifact()],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("first")]}, THREAD)
    assert agent.get_state(THREAD).interrupts
    if resume:
        state = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), THREAD)
        assert (state["stop_record"]["run"], state["stop_record"]["model_calls"]) == (1, 2)
        assert state["stop_record"]["tool_turns"] == 1
    state = agent.invoke({"messages": [HumanMessage("next")]}, THREAD)
    assert_valid_history(state["messages"], "all")
    assert_valid_history(model.calls[-1].messages, "all", finished=False)
    records = _records(caplog)
    rules = [r["rule"] for r in records]
    assert rules == (["none", "none"] if resume else ["interrupted", "none"])
    assert [r["run"] for r in records] == [1, 2]
    assert state["stop_record"]["model_calls"] == 1
    if not resume:
        assert records[0]["tool_call_ids"] == ["c1"]
        assert model.remaining == 1  # two calls in all: the abandoned run's and the new one
    else:
        model.assert_complete()


def test_interrupt_before_tools_resumed_is_one_run() -> None:
    from toolstop.graph import build_react_graph

    @tool
    def lookup(q: str) -> str:
        """Plain tool."""
        return "data"

    model = ScriptedChatModel([turn(call("lookup", q="x", id="c1")), AIMessage("done")])
    agent = build_react_graph(
        model, [lookup], checkpointer=InMemorySaver(), interrupt_before=["tools"]
    )
    agent.invoke({"messages": [HumanMessage("first")]}, THREAD)
    state = agent.invoke(None, THREAD)
    record = state["stop_record"]
    assert (record["run"], record["model_calls"], record["rule"]) == (1, 2, "none")
    assert not any(m.content == INTERRUPTED_TEXT for m in state["messages"])
    model.assert_complete()


class OperationalError(Exception):
    """Stands for a database driver's error with connection details in its message."""


SECRETS = ("s3cret", "hunter2", "db.internal", "10.0.0.5", "alice")


@pytest.mark.parametrize(
    "message",
    [
        "consuming input failed: postgresql://alice:s3cret@db.internal:5432/app?sslmode=require",
        'connection to server at "10.0.0.5", port 5432 failed: password failed for user "alice"',
        "bad dsn: host=db.internal user=alice password=hunter2 dbname=app",
    ],
)
@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_tool_exception_looks_the_same_everywhere_and_leaks_no_connection_detail(
    router: Router, message: str
) -> None:
    @tool
    def query(q: str) -> str:
        """A tool whose database connection fails."""
        raise OperationalError(message)

    model = ScriptedChatModel([turn(call("query", q="x", id="c1")), AIMessage("sorry")])
    _agent(router, model, [query], None).invoke({"messages": [HumanMessage("go")]})
    seen = model.calls[-1].messages
    error = next(m for m in seen if isinstance(m, ToolMessage))
    assert error.status == "error"
    assert str(error.content).startswith("Error: OperationalError: ")
    for secret in SECRETS:
        assert all(secret not in str(m.content) for m in seen), secret


def test_report_and_explain_show_an_interrupted_run(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite")
    import io
    import json

    from langgraph.checkpoint.sqlite import SqliteSaver

    from toolstop.cli import main
    from toolstop.graph import build_react_graph

    db = tmp_path / "threads.db"
    model = _script()
    with SqliteSaver.from_conn_string(str(db)) as checkpointer:
        agent = build_react_graph(model, [crashes], checkpointer=checkpointer)
        with pytest.raises(_Crash):
            agent.invoke({"messages": [HumanMessage("first")]}, THREAD)
        agent.invoke({"messages": [HumanMessage("second")]}, THREAD)
    out = io.StringIO()
    assert main(["explain", "t", "--db", str(db)], out=out) == 0
    text = out.getvalue()
    assert "rule interrupted (never finished" in text
    assert text.index("run 1,") < text.index("run 2,")
    assert "left open (answered as interrupted): crashes (c1)" in text
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "r")], out=io.StringIO()) == 0
    document = json.loads((tmp_path / "r" / "report.json").read_text())
    assert document["runs"] == 2
    assert document["rules"] == {"none": 1, "interrupted": 1}


def test_make_serve_sets_a_heartbeat_unless_the_user_does() -> None:
    from serve import DEFAULT_HEARTBEAT_S, _server_env

    assert _server_env({})["LG_BG_JOB_HEARTBEAT"] == str(DEFAULT_HEARTBEAT_S) == "10"
    assert _server_env({"LG_BG_JOB_HEARTBEAT": "60"})["LG_BG_JOB_HEARTBEAT"] == "60"
