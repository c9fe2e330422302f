"""A run's identity comes from LangGraph's invocation, not from arithmetic on its steps (issue 41).

Two runs overlapping on one thread: the second is refused with an error naming the thread (after
`toolstop._invocation.GRACE_S`, in case the first is only unwinding), and the first is recorded
once, as it ended. A changed `recursion_limit` never hides an aborted run;
a resume and a retry of a failed step continue their run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from routers import MIDDLEWARE_UNAVAILABLE, ROUTERS, Router
from toolstop import StopPolicy, ToolstopConcurrentRunError, ToolstopError
from toolstop._lifecycle import INTERRUPTED_TEXT
from toolstop.testing import ScriptedChatModel, assert_valid_history, call, turn

KINDS = ["memory", "sqlite", "postgres"]
HANG_GUARD_S = 60  # a hang guard only: the tests wait on events, never on time


def _records(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.toolstop for r in caplog.records if hasattr(r, "toolstop")]


def _agent(router: Router, model: Any, tools: list[Any], checkpointer: Any) -> Any:
    return router.build(model, tools, policy=StopPolicy(), checkpointer=checkpointer)


def _thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"{name}-{uuid.uuid4()}"}}


@contextmanager
def _saver(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
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


@asynccontextmanager
async def _asaver(kind: str, tmp_path: Path, url: str | None) -> AsyncIterator[Any]:
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "t.db")) as checkpointer:
            yield checkpointer
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        assert url is not None
        async with AsyncPostgresSaver.from_conn_string(url) as checkpointer:
            await checkpointer.setup()
            yield checkpointer


def _url(kind: str, request: pytest.FixtureRequest) -> str | None:
    if kind == "sqlite":
        pytest.importorskip("langgraph.checkpoint.sqlite.aio")
    url: str | None = request.getfixturevalue("postgres_url") if kind == "postgres" else None
    return url


# -- 9: two runs overlapping on one thread -------------------------------------------------------


def _overlap_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        [turn(call("slow", q="a", id="c1")), AIMessage("first done"), AIMessage("third done")]
    )


def _check_overlap(
    error: BaseException,
    first: dict[str, Any],
    third: dict[str, Any],
    thread_id: str,
    model: ScriptedChatModel,
    records: list[dict[str, Any]],
) -> None:
    """The second run was refused by name; the first is one run, recorded once as it ended."""
    assert isinstance(error, ToolstopError)
    assert repr(thread_id) in str(error)
    assert "another run" in str(error)
    assert (first["stop_record"]["run"], first["stop_record"]["rule"]) == (1, "none")
    assert first["stop_record"]["model_calls"] == 2
    assert first["messages"][-1].content == "first done"
    assert (third["stop_record"]["run"], third["stop_record"]["model_calls"]) == (2, 1)
    assert [(r["run"], r["rule"]) for r in records] == [(1, "none"), (2, "none")]
    assert not any(m.content == INTERRUPTED_TEXT for m in third["messages"])
    assert [m.content for m in third["messages"] if isinstance(m, HumanMessage)] == [
        "first",
        "third",
    ]  # the refused run's input is not in the thread's state
    assert_valid_history(third["messages"], "all")
    model.assert_complete()  # the refused run never reached the model


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_run_started_while_another_runs_on_its_thread_is_refused(
    router: Router,
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolstop")
    started, release = threading.Event(), threading.Event()

    @tool
    def slow(q: str) -> str:
        """A tool that runs until the test releases it."""
        started.set()
        release.wait(HANG_GUARD_S)
        return "slow result"

    model = _overlap_model()
    config = _thread(f"overlap-{router.name}-{kind}")
    with _saver(kind, tmp_path, request) as checkpointer:
        agent = _agent(router, model, [slow], checkpointer)
        results: dict[str, Any] = {}

        def first_run() -> None:
            results["first"] = agent.invoke({"messages": [HumanMessage("first")]}, config)

        worker = threading.Thread(target=first_run)
        worker.start()
        assert started.wait(HANG_GUARD_S)
        try:
            with pytest.raises(ToolstopError) as refused:
                agent.invoke({"messages": [HumanMessage("second")]}, config)
        finally:
            release.set()
            worker.join(HANG_GUARD_S)
        third = agent.invoke({"messages": [HumanMessage("third")]}, config)
    _check_overlap(
        refused.value,
        results["first"],
        third,
        config["configurable"]["thread_id"],
        model,
        _records(caplog),
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_an_async_run_started_while_another_runs_on_its_thread_is_refused(
    router: Router,
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolstop")
    url = _url(kind, request)
    model = _overlap_model()
    config = _thread(f"aoverlap-{router.name}-{kind}")

    async def main() -> tuple[BaseException, dict[str, Any], dict[str, Any]]:
        started, release = asyncio.Event(), asyncio.Event()

        @tool
        async def slow(q: str) -> str:
            """A tool that runs until the test releases it."""
            started.set()
            await release.wait()
            return "slow result"

        async with _asaver(kind, tmp_path, url) as checkpointer:
            agent = _agent(router, model, [slow], checkpointer)
            task = asyncio.ensure_future(
                agent.ainvoke({"messages": [HumanMessage("first")]}, config)
            )
            await asyncio.wait_for(started.wait(), HANG_GUARD_S)
            try:
                with pytest.raises(ToolstopError) as refused:
                    await agent.ainvoke({"messages": [HumanMessage("second")]}, config)
            finally:
                release.set()
            first = await asyncio.wait_for(task, HANG_GUARD_S)
            third = await agent.ainvoke({"messages": [HumanMessage("third")]}, config)
        return refused.value, first, third

    error, first, third = asyncio.run(main())
    _check_overlap(
        error, first, third, config["configurable"]["thread_id"], model, _records(caplog)
    )


def _check_waited_and_refused(
    error: BaseException,
    first: dict[str, Any],
    after: dict[str, Any],
    thread_id: str,
    records: list[dict[str, Any]],
) -> None:
    """The run that waited for the first one and found the thread moved on was refused: the
    first is one completed run with its own tool result, recorded once; no run counted twice."""
    assert isinstance(error, ToolstopError)
    assert repr(thread_id) in str(error)
    assert "ended while this run waited for it" in str(error)
    assert first["stop_record"]["rule"] == "none"
    assert first["messages"][-1].content == "first done"
    answers = [m.content for m in after["messages"] if isinstance(m, ToolMessage)]
    assert answers == ["slow result"]  # never overwritten with the interrupted text
    assert not any(m.content == INTERRUPTED_TEXT for m in after["messages"])
    assert [(r["run"], r["rule"]) for r in records] == [(1, "none"), (2, "none")]
    assert_valid_history(after["messages"], "all")


def _release_on_poll(monkeypatch: pytest.MonkeyPatch, event: asyncio.Event) -> None:
    """The async claim's poll sets `event` when a run starts to wait (the run waited for then
    ends: its tool was waiting for the event)."""
    from toolstop import _invocation

    poll = _invocation._poll

    async def releasing_poll() -> None:
        event.set()
        await poll()

    monkeypatch.setattr(_invocation, "_poll", releasing_poll)


class _Releasing:
    """The claim's condition, setting `event` when a run starts to wait on it (the run waited
    for then ends: its tool was waiting for the event)."""

    def __init__(self, condition: Any, event: threading.Event) -> None:
        self.condition, self.event = condition, event

    def __enter__(self) -> Any:
        return self.condition.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.condition.__exit__(*exc)

    def wait_for(self, predicate: Any, timeout: float | None = None) -> Any:
        self.event.set()
        return self.condition.wait_for(predicate, timeout)

    def notify_all(self) -> None:
        self.condition.notify_all()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_run_that_waited_while_the_first_finished_is_refused(
    router: Router,
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run B starts during run A's tool and waits for A (within the grace); A's tool ends while
    B waits. B's loop read the thread before A's last write, so B is refused, not continued."""
    from toolstop import _invocation

    caplog.set_level(logging.INFO, logger="toolstop")
    started, release = threading.Event(), threading.Event()
    monkeypatch.setattr(_invocation, "GRACE_S", HANG_GUARD_S)
    condition = _invocation._released

    monkeypatch.setattr(_invocation, "_released", _Releasing(condition, release))

    @tool
    def slow(q: str) -> str:
        """A tool that runs until the second run waits."""
        started.set()
        release.wait(HANG_GUARD_S)
        return "slow result"

    model = ScriptedChatModel(
        [turn(call("slow", q="a", id="c1")), AIMessage("first done"), AIMessage("third done")]
    )
    config = _thread(f"waited-{router.name}-{kind}")
    with _saver(kind, tmp_path, request) as checkpointer:
        agent = _agent(router, model, [slow], checkpointer)
        results: dict[str, Any] = {}
        worker = threading.Thread(
            target=lambda: results.update(
                first=agent.invoke({"messages": [HumanMessage("first")]}, config)
            )
        )
        worker.start()
        assert started.wait(HANG_GUARD_S)
        try:
            with pytest.raises(ToolstopError) as refused:
                agent.invoke({"messages": [HumanMessage("second")]}, config)
        finally:
            release.set()
            worker.join(HANG_GUARD_S)
        third = agent.invoke({"messages": [HumanMessage("third")]}, config)
    _check_waited_and_refused(
        refused.value,
        results["first"],
        third,
        config["configurable"]["thread_id"],
        _records(caplog),
    )
    model.assert_complete()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_an_async_run_that_waited_while_the_first_finished_is_refused(
    router: Router,
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolstop import _invocation

    caplog.set_level(logging.INFO, logger="toolstop")
    url = _url(kind, request)
    monkeypatch.setattr(_invocation, "GRACE_S", HANG_GUARD_S)
    model = ScriptedChatModel(
        [turn(call("slow", q="a", id="c1")), AIMessage("first done"), AIMessage("third done")]
    )
    config = _thread(f"awaited-{router.name}-{kind}")

    async def main() -> tuple[BaseException, dict[str, Any], dict[str, Any]]:
        started, release = asyncio.Event(), asyncio.Event()
        _release_on_poll(monkeypatch, release)

        @tool
        async def slow(q: str) -> str:
            """A tool that runs until the second run waits."""
            started.set()
            await release.wait()
            return "slow result"

        async with _asaver(kind, tmp_path, url) as checkpointer:
            agent = _agent(router, model, [slow], checkpointer)
            task = asyncio.ensure_future(
                agent.ainvoke({"messages": [HumanMessage("first")]}, config)
            )
            await asyncio.wait_for(started.wait(), HANG_GUARD_S)
            try:
                with pytest.raises(ToolstopError) as refused:
                    await agent.ainvoke({"messages": [HumanMessage("second")]}, config)
            finally:
                release.set()
            first = await asyncio.wait_for(task, HANG_GUARD_S)
            third = await agent.ainvoke({"messages": [HumanMessage("third")]}, config)
        return refused.value, first, third

    error, first, third = asyncio.run(main())
    _check_waited_and_refused(
        error, first, third, config["configurable"]["thread_id"], _records(caplog)
    )
    model.assert_complete()


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_runs_on_different_threads_may_overlap(router: Router) -> None:
    """Only one thread's runs are serialised: another thread runs meanwhile."""
    started, release = threading.Event(), threading.Event()

    @tool
    def slow(q: str) -> str:
        """A tool that runs until the test releases it."""
        if q == "a":
            started.set()
            release.wait(HANG_GUARD_S)
        return "slow result"

    first_model = ScriptedChatModel([turn(call("slow", q="a", id="c1")), AIMessage("one")])
    other_model = ScriptedChatModel([turn(call("slow", q="b", id="c2")), AIMessage("two")])
    checkpointer = InMemorySaver()
    first = _agent(router, first_model, [slow], checkpointer)
    other = _agent(router, other_model, [slow], checkpointer)
    results: dict[str, Any] = {}
    worker = threading.Thread(
        target=lambda: results.update(
            one=first.invoke({"messages": [HumanMessage("1")]}, _thread("one"))
        )
    )
    worker.start()
    assert started.wait(HANG_GUARD_S)
    try:
        two = other.invoke({"messages": [HumanMessage("2")]}, _thread("two"))
    finally:
        release.set()
        worker.join(HANG_GUARD_S)
    assert two["stop_record"]["run"] == results["one"]["stop_record"]["run"] == 1
    assert two["messages"][-1].content == "two"


# -- 10: a changed recursion limit ---------------------------------------------------------------


class _Crash(BaseException):
    """What a worker's death looks like to the graph: nothing catches it."""


@tool
def crashes(q: str) -> str:
    """A tool whose run never comes back (the worker dies)."""
    raise _Crash


def _check_closed(
    model: ScriptedChatModel, result: dict[str, Any], records: list[dict[str, Any]]
) -> None:
    assert_valid_history(model.calls[-1].messages, "all", finished=False)
    answer = next(m for m in model.calls[-1].messages if isinstance(m, ToolMessage))
    assert (answer.tool_call_id, answer.content) == ("c1", INTERRUPTED_TEXT)
    record = result["stop_record"]
    assert (record["run"], record["model_calls"], record["rule"]) == (2, 1, "none")
    assert [(r["run"], r["rule"]) for r in records] == [(1, "interrupted"), (2, "none")]


LIMITS = range(18, 31)
"""Run 2's limits: each router's step count makes one of them collide with run 1's (limit 25)
under the old arithmetic, step + remaining steps."""


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_changed_recursion_limit_never_hides_an_aborted_run(
    router: Router,
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolstop")
    with _saver(kind, tmp_path, request) as checkpointer:
        for limit in LIMITS:
            caplog.clear()
            config = _thread(f"limit-{router.name}-{kind}-{limit}")
            model = ScriptedChatModel([turn(call("crashes", q="x", id="c1")), AIMessage("fine")])
            agent = _agent(router, model, [crashes], checkpointer)
            with pytest.raises(_Crash):
                agent.invoke(
                    {"messages": [HumanMessage("first")]}, {**config, "recursion_limit": 25}
                )
            result = agent.invoke(
                {"messages": [HumanMessage("second")]}, {**config, "recursion_limit": limit}
            )
            _check_closed(model, result, _records(caplog))


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_changed_recursion_limit_never_hides_an_aborted_async_run(
    router: Router,
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolstop")
    url = _url(kind, request)

    async def main() -> None:
        async with _asaver(kind, tmp_path, url) as checkpointer:
            for limit in LIMITS:
                caplog.clear()
                config = _thread(f"alimit-{router.name}-{kind}-{limit}")
                model = ScriptedChatModel(
                    [turn(call("crashes", q="x", id="c1")), AIMessage("fine")]
                )
                agent = _agent(router, model, [crashes], checkpointer)
                with pytest.raises(_Crash):
                    await agent.ainvoke(
                        {"messages": [HumanMessage("first")]}, {**config, "recursion_limit": 25}
                    )
                result = await agent.ainvoke(
                    {"messages": [HumanMessage("second")]}, {**config, "recursion_limit": limit}
                )
                _check_closed(model, result, _records(caplog))

    asyncio.run(main())


# -- a retry and a resume continue their run -----------------------------------------------------


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_failed_step_retried_with_invoke_none_continues_its_run(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    """LangGraph's retry of a failed run (`invoke(None)` reruns the failed step) is one run,
    whatever recursion limit the retry uses."""
    caplog.set_level(logging.INFO, logger="toolstop")
    failures = [_Crash()]

    @tool
    def flaky(q: str) -> str:
        """Fails once, then works."""
        if failures:
            raise failures.pop()
        return "data"

    model = ScriptedChatModel([turn(call("flaky", q="x", id="c1")), AIMessage("done")])
    agent = _agent(router, model, [flaky], InMemorySaver())
    config = _thread(f"retry-{router.name}")
    with pytest.raises(_Crash):
        agent.invoke({"messages": [HumanMessage("first")]}, {**config, "recursion_limit": 25})
    result = agent.invoke(None, {**config, "recursion_limit": 23})
    record = result["stop_record"]
    assert (record["run"], record["model_calls"], record["rule"]) == (1, 2, "none")
    assert [(r["run"], r["rule"]) for r in _records(caplog)] == [(1, "none")]
    assert not any(m.content == INTERRUPTED_TEXT for m in result["messages"])
    model.assert_complete()


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_review_resumed_with_another_recursion_limit_is_one_run(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    """A paused run resumed (`Command(resume=...)` after `HumanInTheLoopMiddleware`, or
    `invoke(None)` after `interrupt_before`) continues its run, whatever limit the resume uses."""
    from langgraph.types import Command

    caplog.set_level(logging.INFO, logger="toolstop")

    @tool
    def lookup(q: str) -> str:
        """Plain tool."""
        return "data"

    model = ScriptedChatModel([turn(call("lookup", q="x", id="c1")), AIMessage("done")])
    config = _thread(f"review-{router.name}")
    if router.takes_middleware:
        from langchain.agents.middleware import HumanInTheLoopMiddleware

        agent = router.build(
            model,
            [lookup],
            policy=StopPolicy(),
            checkpointer=InMemorySaver(),
            middleware=[HumanInTheLoopMiddleware(interrupt_on={"lookup": True})],
        )
        resume: Any = Command(resume={"decisions": [{"type": "approve"}]})
    else:
        from toolstop.graph import build_react_graph

        agent = build_react_graph(
            model, [lookup], checkpointer=InMemorySaver(), interrupt_before=["tools"]
        )
        resume = None
    agent.invoke({"messages": [HumanMessage("first")]}, {**config, "recursion_limit": 25})
    assert agent.get_state(config).next
    result = agent.invoke(resume, {**config, "recursion_limit": 22})
    record = result["stop_record"]
    assert (record["run"], record["model_calls"], record["rule"]) == (1, 2, "none")
    assert [(r["run"], r["rule"]) for r in _records(caplog)] == [(1, "none")]
    assert not any(m.content == INTERRUPTED_TEXT for m in result["messages"])
    model.assert_complete()


# -- the invocation's name and the thread's claim ------------------------------------------------


def test_an_invocation_is_named_only_inside_a_graph_run() -> None:
    from toolstop import _invocation

    assert _invocation.current(None) is None
    assert _invocation.current({}) is None
    assert _invocation.current({"configurable": {"__pregel_call": object()}}) is None


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_run_that_failed_or_was_abandoned_releases_its_thread(router: Router) -> None:
    """Whichever way a run ends, its thread takes the next run: a tool that killed the run, a
    stream the caller stopped reading, a run paused for review."""
    from toolstop import _invocation

    config = _thread(f"release-{router.name}")
    thread_id = config["configurable"]["thread_id"]
    model = ScriptedChatModel(
        [
            turn(call("crashes", q="x", id="c1")),
            turn(call("crashes", q="y", id="c2")),
            AIMessage("fine"),
        ]
    )
    agent = _agent(router, model, [crashes], InMemorySaver())
    with pytest.raises(_Crash):
        agent.invoke({"messages": [HumanMessage("first")]}, config)
    assert thread_id not in _invocation.running()
    for _ in agent.stream({"messages": [HumanMessage("second")]}, config, stream_mode="updates"):
        break  # the model has been called: the run claimed the thread, and is dropped here
    assert thread_id not in _invocation.running()
    result = agent.invoke({"messages": [HumanMessage("third")]}, config)
    assert (result["stop_record"]["run"], result["stop_record"]["model_calls"]) == (3, 1)
    assert thread_id not in _invocation.running()


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_without_langgraphs_loop_the_invocation_is_its_step_limit(
    router: Router, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The fallback, should a LangGraph release move its loop: step + remaining steps names the
    invocation (an aborted run is still closed when the limit is unchanged)."""
    from toolstop import _invocation

    caplog.set_level(logging.INFO, logger="toolstop")
    monkeypatch.setattr(_invocation, "_CALL", "__no_such_key")
    config = _thread(f"fallback-{router.name}")
    model = ScriptedChatModel([turn(call("crashes", q="x", id="c1")), AIMessage("fine")])
    agent = _agent(router, model, [crashes], InMemorySaver())
    with pytest.raises(_Crash):
        agent.invoke({"messages": [HumanMessage("first")]}, {**config, "recursion_limit": 25})
    assert isinstance(agent.get_state(config).values["toolstop_run"]["invocation"], int)
    result = agent.invoke({"messages": [HumanMessage("second")]}, {**config, "recursion_limit": 25})
    _check_closed(model, result, _records(caplog))


class _Saver:
    """A checkpointer whose thread has no checkpoint yet (nothing moved it on)."""

    def get_tuple(self, config: Any) -> None:
        return None

    async def aget_tuple(self, config: Any) -> None:
        return None


class _Loop:
    """Stands for LangGraph's Pregel loop, as a node's config reaches it."""

    def __init__(self, checkpoint_id: str, thread_id: str, checkpointer: Any) -> None:
        import contextlib

        self.stack = contextlib.ExitStack()
        self.checkpoint = {"id": checkpoint_id}
        self.config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.checkpointer = checkpointer

    def accept_push(self) -> None:
        """LangGraph's `schedule_task`, bound to its loop."""

    def node_config(self) -> dict[str, Any]:
        import functools

        return {
            "configurable": {
                "__pregel_call": functools.partial(print, schedule_task=self.accept_push)
            }
        }


def test_a_run_waits_for_the_previous_run_of_its_thread_to_finish_unwinding() -> None:
    """A run cancelled to make room for the next (LangGraph Server's `interrupt` strategy) may
    still be unwinding when the next one starts: the next one waits for it, then runs."""
    from toolstop import _invocation

    checkpointer = _Saver()
    first = _Loop("ckpt-1", "grace", checkpointer)
    second = _Loop("ckpt-2", "grace", checkpointer)
    assert _invocation.current(first.node_config()) == "ckpt-1"
    assert _invocation.current(first.node_config()) == "ckpt-1"  # the same invocation
    named: list[str | None] = []
    waiting = threading.Thread(
        target=lambda: named.append(_invocation.current(second.node_config()))
    )
    waiting.start()
    first.stack.close()  # the first run's loop ends
    waiting.join(HANG_GUARD_S)
    assert named == ["ckpt-2"]
    assert "grace" in _invocation.running()
    second.stack.close()
    assert "grace" not in _invocation.running()


def test_an_async_run_waits_for_the_previous_run_without_blocking_the_event_loop() -> None:
    from toolstop import _invocation

    async def main() -> str | None:
        checkpointer = _Saver()
        first = _Loop("ckpt-1", "agrace", checkpointer)
        second = _Loop("ckpt-2", "agrace", checkpointer)
        assert _invocation.current(first.node_config()) == "ckpt-1"

        async def unwind() -> None:  # runs on the loop the waiting run must not block
            first.stack.close()

        closing = asyncio.ensure_future(unwind())
        await _invocation.aclaim(second.node_config())
        await closing
        name = _invocation.current(second.node_config())
        second.stack.close()
        return name

    assert asyncio.run(main()) == "ckpt-2"


def test_a_run_still_running_after_the_grace_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolstop import _invocation

    monkeypatch.setattr(_invocation, "GRACE_S", 0.0)
    checkpointer = _Saver()
    first = _Loop("ckpt-1", "busy\x1b[2J" + "x" * 500, checkpointer)
    second = _Loop("ckpt-2", first.config["configurable"]["thread_id"], checkpointer)
    other = _Loop("ckpt-3", "elsewhere", checkpointer)
    _invocation.current(first.node_config())
    try:
        with pytest.raises(ToolstopError, match="another run of thread 'busy") as refused:
            _invocation.current(second.node_config())
        assert "\x1b" not in str(refused.value)  # the thread id is shown escaped, and cut
        assert len(str(refused.value)) < 600
        with pytest.raises(ToolstopError):
            asyncio.run(_invocation.aclaim(second.node_config()))
        assert _invocation.current(other.node_config()) == "ckpt-3"  # another thread runs
    finally:
        first.stack.close()
        other.stack.close()
    assert _invocation.current(second.node_config()) == "ckpt-2"
    second.stack.close()


def test_report_counts_each_run_once_after_an_overlap(tmp_path: Path) -> None:
    """`toolstop report` on the thread's database: the run that went on and the next one, no
    run counted twice, none `interrupted`."""
    pytest.importorskip("langgraph.checkpoint.sqlite")
    import io
    import json

    from langgraph.checkpoint.sqlite import SqliteSaver

    from toolstop import _invocation
    from toolstop.cli import main
    from toolstop.graph import build_react_graph

    started, release = threading.Event(), threading.Event()

    @tool
    def slow(q: str) -> str:
        """A tool that runs until the test releases it."""
        started.set()
        release.wait(HANG_GUARD_S)
        return "slow result"

    db = tmp_path / "threads.db"
    config = _thread("report")
    with SqliteSaver.from_conn_string(str(db)) as checkpointer:
        agent = build_react_graph(_overlap_model(), [slow], checkpointer=checkpointer)
        worker = threading.Thread(
            target=lambda: agent.invoke({"messages": [HumanMessage("first")]}, config)
        )
        worker.start()
        assert started.wait(HANG_GUARD_S)
        try:
            with pytest.raises(ToolstopError):
                agent.invoke({"messages": [HumanMessage("second")]}, config)
        finally:
            release.set()
            worker.join(HANG_GUARD_S)
        agent.invoke({"messages": [HumanMessage("third")]}, config)
    assert config["configurable"]["thread_id"] not in _invocation.running()
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "r")], out=io.StringIO()) == 0
    document = json.loads((tmp_path / "r" / "report.json").read_text())
    assert document["runs"] == 2
    assert document["rules"] == {"none": 2}


# -- 9, composed: the second run's own middleware outlasts the first run -------------------------


def _slow_hook_agent(
    model: ScriptedChatModel, tools: list[Any], checkpointer: Any, hook: Any
) -> Any:
    """A `create_agent` agent whose own middleware (listed before toolstop's) runs `hook` in
    `before_agent`: the run's first step, before toolstop first runs in it."""
    if MIDDLEWARE_UNAVAILABLE:
        pytest.skip(MIDDLEWARE_UNAVAILABLE)
    from langchain.agents.middleware import AgentMiddleware

    slow = next(r for r in ROUTERS if r.name == "middleware")

    class SlowStart(AgentMiddleware):  # type: ignore[type-arg]
        """Another middleware's hook: a review, a lookup, a rate limiter that waits."""

        def before_agent(self, state: Any, runtime: Any) -> None:
            hook()

        async def abefore_agent(self, state: Any, runtime: Any) -> None:
            await asyncio.to_thread(hook)

    return slow.build(
        model, tools, policy=StopPolicy(), checkpointer=checkpointer, middleware=[SlowStart()]
    )


def _check_outlasted(
    error: BaseException,
    again: BaseException,
    first: dict[str, Any],
    after: dict[str, Any],
    thread_id: str,
    records: list[dict[str, Any]],
) -> None:
    """The run whose hook outlasted the first run is refused, and so is a run continuing from its
    checkpoints; continued from the checkpoint the error names, the thread holds the first run's
    result, recorded once, never `interrupted`."""
    assert isinstance(error, ToolstopError)
    assert repr(thread_id) in str(error)
    assert "outlasted it" in str(error)
    assert isinstance(again, ToolstopError)
    assert "lack that run's result" in str(again)
    assert first["stop_record"]["rule"] == "none"
    assert first["messages"][-1].content == "first done"
    assert [m.content for m in after["messages"] if isinstance(m, ToolMessage)] == ["slow result"]
    assert not any(m.content == INTERRUPTED_TEXT for m in after["messages"])
    assert [m.content for m in after["messages"] if isinstance(m, HumanMessage)] == [
        "first",
        "third",
    ]
    assert [(r["run"], r["rule"]) for r in records] == [(1, "none"), (2, "none")]
    assert_valid_history(after["messages"], "all")


def _resume_from(error: BaseException) -> str:
    """The checkpoint a refusal names to continue from."""
    import re

    found = re.search(r"from checkpoint '([^']+)'", str(error))
    assert found, str(error)
    return found.group(1)


class _Outlasting:
    """An overlap in which the second run's own hook lasts until the first run has ended."""

    def __init__(self) -> None:
        self.started, self.hooked = threading.Event(), threading.Event()
        self.first_done = threading.Event()
        self.calls = 0

    def hook(self) -> None:
        """The hook of each run (in a worker thread in async runs); the second one waits."""
        self.calls += 1
        if self.calls == 2:
            self.hooked.set()
            assert self.first_done.wait(HANG_GUARD_S)


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_whose_own_middleware_outlasts_the_first_run_is_refused(
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Run B starts during run A's tool; B's own `before_agent` hook lasts until A has ended, so
    toolstop finds the thread free when it first runs in B. B read the thread before A's last
    write: it is refused (it would overwrite A's result and publish A again as `interrupted`)."""
    caplog.set_level(logging.INFO, logger="toolstop")
    events = _Outlasting()
    started, hooked, first_done = events.started, events.hooked, events.first_done

    @tool
    def slow(q: str) -> str:
        """A tool that runs until the second run's hook has started."""
        started.set()
        assert hooked.wait(HANG_GUARD_S)
        return "slow result"

    model = _overlap_model()
    config = _thread(f"outlasted-{kind}")
    with _saver(kind, tmp_path, request) as checkpointer:
        agent = _slow_hook_agent(model, [slow], checkpointer, events.hook)
        results: dict[str, Any] = {}
        first = threading.Thread(
            target=lambda: results.update(
                first=agent.invoke({"messages": [HumanMessage("first")]}, config)
            )
        )

        def second() -> None:
            try:
                agent.invoke({"messages": [HumanMessage("second")]}, config)
            except BaseException as error:
                results["error"] = error

        worker = threading.Thread(target=second)
        first.start()
        assert started.wait(HANG_GUARD_S)
        worker.start()
        first.join(HANG_GUARD_S)
        first_done.set()
        worker.join(HANG_GUARD_S)
        with pytest.raises(ToolstopError) as again:
            agent.invoke({"messages": [HumanMessage("third")]}, config)
        assert isinstance(again.value, ToolstopConcurrentRunError)
        assert again.value.checkpoint_id == _resume_from(again.value)
        resume = {  # the recipe of docs/deployment-faults.md
            "configurable": {**config["configurable"], "checkpoint_id": again.value.checkpoint_id}
        }
        after = agent.invoke({"messages": [HumanMessage("third")]}, resume)
        assert _resume_from(results["error"]) == _resume_from(again.value)
    _check_outlasted(
        results["error"],
        again.value,
        results["first"],
        after,
        config["configurable"]["thread_id"],
        _records(caplog),
    )
    model.assert_complete()


@pytest.mark.parametrize("kind", KINDS)
def test_an_async_run_whose_own_middleware_outlasts_the_first_run_is_refused(
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolstop")
    url = _url(kind, request)
    events = _Outlasting()
    started, hooked, first_done = events.started, events.hooked, events.first_done

    @tool
    async def slow(q: str) -> str:
        """A tool that runs until the second run's hook has started."""
        started.set()
        assert await asyncio.to_thread(hooked.wait, HANG_GUARD_S)
        return "slow result"

    model = _overlap_model()
    config = _thread(f"aoutlasted-{kind}")

    async def main() -> tuple[BaseException, BaseException, dict[str, Any], dict[str, Any]]:
        async with _asaver(kind, tmp_path, url) as checkpointer:
            agent = _slow_hook_agent(model, [slow], checkpointer, events.hook)
            first = asyncio.ensure_future(
                agent.ainvoke({"messages": [HumanMessage("first")]}, config)
            )
            assert await asyncio.to_thread(started.wait, HANG_GUARD_S)
            second = asyncio.ensure_future(
                agent.ainvoke({"messages": [HumanMessage("second")]}, config)
            )
            done = await asyncio.wait_for(first, HANG_GUARD_S)
            first_done.set()
            with pytest.raises(ToolstopError) as refused:
                await asyncio.wait_for(second, HANG_GUARD_S)
            with pytest.raises(ToolstopError) as again:
                await agent.ainvoke({"messages": [HumanMessage("third")]}, config)
            checkpoint_id = _resume_from(again.value)
            resume = {"configurable": {**config["configurable"], "checkpoint_id": checkpoint_id}}
            after = await agent.ainvoke({"messages": [HumanMessage("third")]}, resume)
        return refused.value, again.value, done, after

    error, again, first, after = asyncio.run(main())
    _check_outlasted(
        error, again, first, after, config["configurable"]["thread_id"], _records(caplog)
    )
    model.assert_complete()


class _Held:
    """A checkpointer that holds the checkpoints named (`get_tuple` by id)."""

    def __init__(self, *held: str) -> None:
        self.held, self.read = set(held), 0

    def get_tuple(self, config: Any) -> object | None:
        self.read += 1
        return object() if config["configurable"]["checkpoint_id"] in self.held else None

    async def aget_tuple(self, config: Any) -> object | None:
        return self.get_tuple(config)


def _run(
    thread_id: str,
    checkpointer: Any,
    *,
    read: str,
    wrote: str,
    config: dict[str, Any] | None = None,
) -> _Loop:
    """A loop that started from checkpoint `read` and has written up to `wrote`."""
    loop = _Loop(wrote, thread_id, checkpointer)
    loop.checkpoint_id_saved = read  # type: ignore[attr-defined]
    loop.checkpoint_config = {"configurable": {"checkpoint_id": wrote}}  # type: ignore[attr-defined]
    loop.config["configurable"].update(config or {})
    return loop


def test_a_run_is_checked_against_what_the_last_run_left_only_when_it_is_held() -> None:
    """A run that started from an older checkpoint than the last run's last write is refused
    only when the checkpointer still holds that write (LangGraph Server's `rollback` deletes
    it), is never checked when addressed to a checkpoint (time travel), and a run that started
    from the last run's checkpoint reads nothing."""
    from toolstop import _invocation

    thread_id = f"held-{uuid.uuid4()}"
    held = _Held("c-5")
    first = _run(thread_id, held, read="c-1", wrote="c-5")
    _invocation.current(first.node_config())
    first.stack.close()
    after = _run(thread_id, held, read="c-5", wrote="c-6")
    assert _invocation.current(after.node_config()) == "c-6"  # started from it: nothing read
    assert held.read == 0
    after.stack.close()  # left c-6, which the checkpointer does not hold (rolled back)
    rolled_back = _run(thread_id, held, read="c-5", wrote="c-7")
    assert _invocation.current(rolled_back.node_config()) == "c-7"
    assert held.read == 1
    rolled_back.stack.close()  # left c-7 (now held)
    held.held.add("c-7")
    forked = _run(thread_id, held, read="c-2", wrote="c-8", config={"checkpoint_id": "c-2"})
    assert _invocation.current(forked.node_config()) == "c-8"  # time travel: its own choice
    assert held.read == 1
    forked.stack.close()  # left c-8
    held.held.add("c-8")
    late = _run(thread_id, held, read="c-7", wrote="c-9")
    with pytest.raises(ToolstopError, match="from checkpoint 'c-8'"):
        asyncio.run(_invocation.aclaim(late.node_config()))
    late.stack.close()


def test_what_runs_left_is_kept_for_a_bounded_number_of_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolstop import _invocation

    monkeypatch.setattr(_invocation, "_LEFT_KEPT", 3)
    held = _Held(*(f"c-{i}" for i in range(10)))
    threads = [f"kept-{i}-{uuid.uuid4()}" for i in range(5)]
    for thread_id in threads:
        loop = _run(thread_id, held, read="c-0", wrote="c-5")
        _invocation.current(loop.node_config())
        loop.stack.close()
    assert len(_invocation._left) <= 3
    forgotten = _run(threads[0], held, read="c-1", wrote="c-6")
    assert _invocation.current(forgotten.node_config()) == "c-6"  # its last run is forgotten
    forgotten.stack.close()
    remembered = _run(threads[-1], held, read="c-1", wrote="c-6")
    with pytest.raises(ToolstopError, match="outlasted it"):
        _invocation.current(remembered.node_config())
    remembered.stack.close()


def test_runs_from_a_refused_runs_checkpoints_are_refused_until_the_thread_is_continued() -> None:
    """A refused run's own checkpoints lack the other run's result: a run starting from them is
    refused, naming the checkpoint to continue from; one continued from it (`checkpoint_id`) or
    from an updated state (`update_state` writes a newer checkpoint) runs."""
    from toolstop import _invocation

    thread_id = f"refused-{uuid.uuid4()}"
    held = _Held("c-5")
    first = _run(thread_id, held, read="c-1", wrote="c-5")
    _invocation.current(first.node_config())
    first.stack.close()
    outlasted = _run(thread_id, held, read="c-1", wrote="c-6")
    with pytest.raises(ToolstopError, match="outlasted it"):
        _invocation.current(outlasted.node_config())
    early = _run(thread_id, held, read="c-6", wrote="c-6")  # its hook's step wrote c-6
    with pytest.raises(ToolstopError, match="lack that run's result"):  # before its loop ends
        _invocation.current(early.node_config())
    early.stack.close()
    outlasted.stack.close()
    for head in ("c-7", "c-8"):  # each refused in turn, each leaving a newer head
        started = "c-6" if head == "c-7" else "c-7"
        following = _run(thread_id, held, read=started, wrote=head)
        with pytest.raises(ToolstopError, match="from checkpoint 'c-5'") as refused:
            _invocation.current(following.node_config())
        assert "lack that run's result" in str(refused.value)
        following.stack.close()
    updated = _run(thread_id, held, read="c-9", wrote="c-10")
    assert _invocation.current(updated.node_config()) == "c-10"
    updated.stack.close()
    continued = _run(thread_id, held, read="c-5", wrote="c-11", config={"checkpoint_id": "c-5"})
    assert _invocation.current(continued.node_config()) == "c-11"
    continued.stack.close()


# -- 9, composed: a review approved twice (a resume starts at the tools) -------------------------


def _reviewed_agent(router: Router, model: Any, pay: Any, checkpointer: Any) -> tuple[Any, Any]:
    """An agent that pauses for a review before `pay` runs, and the resume that approves it."""
    from langgraph.types import Command

    if router.takes_middleware:
        from langchain.agents.middleware import HumanInTheLoopMiddleware

        review = HumanInTheLoopMiddleware(interrupt_on={"pay": True})
        agent = router.build(
            model, [pay], policy=StopPolicy(), checkpointer=checkpointer, middleware=[review]
        )
        return agent, Command(resume={"decisions": [{"type": "approve"}]})
    from toolstop.graph import build_react_graph

    agent = build_react_graph(model, [pay], checkpointer=checkpointer, interrupt_before=["tools"])
    return agent, None


@pytest.mark.parametrize("addressed", [False, True], ids=["latest", "checkpoint_id"])
@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_review_approved_twice_runs_its_tool_once(
    router: Router,
    addressed: bool,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user double-clicks "approve": the second resume starts at the tools (no model call
    before them) while the first one's tool runs. It is refused before the tool runs again,
    also when both name the paused checkpoint (`checkpoint_id`, as LangGraph Studio sends)."""
    from toolstop import _invocation

    caplog.set_level(logging.INFO, logger="toolstop")
    monkeypatch.setattr(_invocation, "GRACE_S", HANG_GUARD_S)
    charging, proceed = threading.Event(), threading.Event()
    charges: list[str] = []
    condition = _invocation._released

    monkeypatch.setattr(_invocation, "_released", _Releasing(condition, proceed))

    @tool
    def pay(order: str) -> str:
        """Charge the card for an order."""
        charges.append(order)
        charging.set()
        proceed.wait(HANG_GUARD_S)
        return f"charged {order}"

    model = ScriptedChatModel([turn(call("pay", order="o-1", id="c1")), AIMessage("paid")])
    config = _thread(f"approved-twice-{router.name}")
    agent, approve = _reviewed_agent(router, model, pay, InMemorySaver())
    agent.invoke({"messages": [HumanMessage("pay o-1")]}, config)
    paused = agent.get_state(config)
    assert paused.next  # paused for the review
    resume = paused.config if addressed else config
    results: dict[str, Any] = {}
    first = threading.Thread(target=lambda: results.update(first=agent.invoke(approve, resume)))
    first.start()
    try:
        assert charging.wait(HANG_GUARD_S)
        with pytest.raises(ToolstopError, match="ended while this run waited for it"):
            agent.invoke(approve, resume)
    finally:
        proceed.set()
        first.join(HANG_GUARD_S)
    assert charges == ["o-1"]  # charged once
    assert results["first"]["messages"][-1].content == "paid"
    assert [(r["run"], r["rule"]) for r in _records(caplog)] == [(1, "none")]
    model.assert_complete()


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_an_async_review_approved_twice_runs_its_tool_once(
    router: Router, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolstop import _invocation

    caplog.set_level(logging.INFO, logger="toolstop")
    monkeypatch.setattr(_invocation, "GRACE_S", HANG_GUARD_S)
    charges: list[str] = []
    model = ScriptedChatModel([turn(call("pay", order="o-1", id="c1")), AIMessage("paid")])
    config = _thread(f"aapproved-twice-{router.name}")

    async def main() -> dict[str, Any]:
        charging, proceed = asyncio.Event(), asyncio.Event()
        _release_on_poll(monkeypatch, proceed)

        @tool
        async def pay(order: str) -> str:
            """Charge the card for an order."""
            charges.append(order)
            charging.set()
            await proceed.wait()
            return f"charged {order}"

        agent, approve = _reviewed_agent(router, model, pay, InMemorySaver())
        await agent.ainvoke({"messages": [HumanMessage("pay o-1")]}, config)
        first = asyncio.ensure_future(agent.ainvoke(approve, config))
        await asyncio.wait_for(charging.wait(), HANG_GUARD_S)
        try:
            with pytest.raises(ToolstopError, match="ended while this run waited for it"):
                await agent.ainvoke(approve, config)
        finally:
            proceed.set()
        return await asyncio.wait_for(first, HANG_GUARD_S)

    first = asyncio.run(main())
    assert charges == ["o-1"]
    assert first["messages"][-1].content == "paid"
    assert [(r["run"], r["rule"]) for r in _records(caplog)] == [(1, "none")]
    model.assert_complete()


def test_a_refusal_names_a_checkpoint_only_when_a_plain_resend_would_not_do() -> None:
    """The refused run wrote nothing after the other run's result: sending its input again
    continues from that result, and the error says so; once it has, the error names the
    checkpoint to continue from."""
    from toolstop import _invocation

    thread_id = f"advice-{uuid.uuid4()}"
    held = _Held("c-5")
    first = _run(thread_id, held, read="c-1", wrote="c-5")
    _invocation.current(first.node_config())
    first.stack.close()
    behind = _run(thread_id, held, read="c-1", wrote="c-2")  # its input checkpoint only
    with pytest.raises(ToolstopError) as refused:
        _invocation.current(behind.node_config())
    assert "Send this run's input again" in str(refused.value)
    assert "checkpoint_id" not in str(refused.value)
    assert isinstance(refused.value, _invocation.ToolstopConcurrentRunError)
    assert (refused.value.thread_id, refused.value.checkpoint_id) == (thread_id, None)
    behind.stack.close()
    exiting = _run(thread_id, held, read="c-1", wrote="c-2")
    exiting.durability = "exit"  # type: ignore[attr-defined] # it writes its checkpoint on exit
    with pytest.raises(ToolstopError, match="from checkpoint 'c-5'"):
        _invocation.current(exiting.node_config())
    exiting.stack.close()
    ahead = _run(thread_id, held, read="c-1", wrote="c-6")  # its hook's step came after c-5
    with pytest.raises(ToolstopError, match="from checkpoint 'c-5'") as refused:
        _invocation.current(ahead.node_config())
    assert "Send this run's input again" not in str(refused.value)
    assert isinstance(refused.value, _invocation.ToolstopConcurrentRunError)
    assert refused.value.checkpoint_id == "c-5"
    ahead.stack.close()


def test_a_refusal_passes_through_error_handling_middleware(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Retry and fallback middleware around the model call let the refusal through, as they let
    an interrupt through: it is neither retried, nor answered with another model, nor written to
    the thread as an error."""
    if MIDDLEWARE_UNAVAILABLE:
        pytest.skip(MIDDLEWARE_UNAVAILABLE)
    try:
        from langchain.agents.middleware import ModelFallbackMiddleware, ModelRetryMiddleware
    except ImportError:
        pytest.skip("this langchain has no ModelRetryMiddleware")
    from toolstop import _invocation

    caplog.set_level(logging.INFO, logger="toolstop")
    monkeypatch.setattr(_invocation, "GRACE_S", 0.0)
    started, release = threading.Event(), threading.Event()

    @tool
    def slow(q: str) -> str:
        """A tool that runs until the test releases it."""
        started.set()
        release.wait(HANG_GUARD_S)
        return "slow result"

    model = _overlap_model()
    fallback = ScriptedChatModel([AIMessage("the fallback model answered")])
    middleware = next(r for r in ROUTERS if r.name == "middleware")
    agent = middleware.build(
        model,
        [slow],
        policy=StopPolicy(),
        checkpointer=InMemorySaver(),
        middleware=[
            ModelFallbackMiddleware(fallback),
            ModelRetryMiddleware(max_retries=1, retry_on=(Exception,), initial_delay=0.0),
        ],
    )
    config = _thread("handlers")
    results: dict[str, Any] = {}
    worker = threading.Thread(
        target=lambda: results.update(
            first=agent.invoke({"messages": [HumanMessage("first")]}, config)
        )
    )
    worker.start()
    assert started.wait(HANG_GUARD_S)
    try:
        with pytest.raises(ToolstopError, match="is still running in this process"):
            agent.invoke({"messages": [HumanMessage("second")]}, config)
    finally:
        release.set()
        worker.join(HANG_GUARD_S)
    for state in agent.get_state_history(config):  # the refused run's model step wrote nothing
        contents = [m.content for m in state.values.get("messages", [])]
        if "second" in contents:
            assert contents[contents.index("second") :] == ["second"], contents
    third = agent.invoke({"messages": [HumanMessage("third")]}, config)
    assert fallback.calls == []  # never answered by the fallback model
    _check_overlap_after(results["first"], third, model, _records(caplog))


def _check_overlap_after(
    first: dict[str, Any], third: dict[str, Any], model: ScriptedChatModel, records: list[Any]
) -> None:
    """The first run and the next one recorded once each, as they ended; the refused one left
    nothing in the thread."""
    assert first["messages"][-1].content == "first done"
    assert [(r["run"], r["rule"]) for r in records] == [(1, "none"), (2, "none")]
    assert [m.content for m in third["messages"] if isinstance(m, HumanMessage)] == [
        "first",
        "third",
    ]
    assert_valid_history(third["messages"], "all")
    model.assert_complete()


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_a_stream_closed_after_a_break_frees_its_thread(router: Router) -> None:
    """A stream left after `break` holds its run until it is closed; closed (`close()`,
    `aclosing`), the thread's next run is not refused: it closes the abandoned run and is run 2."""
    from contextlib import aclosing

    @tool
    def lookup(q: str) -> str:
        """Plain tool."""
        return "data"

    once = [turn(call("lookup", q="x", id="c1")), AIMessage("done")]
    model = ScriptedChatModel([*once, *once])  # each thread: a call, then the next run's answer
    agent = _agent(router, model, [lookup], InMemorySaver())
    config = _thread(f"closed-{router.name}")
    stream = agent.stream({"messages": [HumanMessage("first")]}, config)
    for _ in stream:
        break  # the caller stops reading, and keeps the stream
    stream.close()
    after = agent.invoke({"messages": [HumanMessage("second")]}, config)
    assert (after["stop_record"]["run"], after["messages"][-1].content) == (2, "done")

    async def main() -> dict[str, Any]:
        aconfig = _thread(f"aclosed-{router.name}")
        async with aclosing(agent.astream({"messages": [HumanMessage("first")]}, aconfig)) as s:
            async for _ in s:
                break
        return dict(await agent.ainvoke({"messages": [HumanMessage("second")]}, aconfig))

    after = asyncio.run(main())
    assert (after["stop_record"]["run"], after["messages"][-1].content) == (2, "done")
    model.assert_complete()
