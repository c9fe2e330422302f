"""How `bench --agent` runs one question: sync or async, reviews approved, one event loop.

Sync or async as the agent needs, every interrupt of your own human review approved, every
async run on the one event loop of the bench.

One loop for the whole bench, not one per run: a real async client (`ChatOpenAI` over httpx)
keeps its connection pool on the loop of its first call, and a pooled connection used from
another loop fails with `RuntimeError: Event loop is closed`. The loop runs on a thread of its
own, so the bench also works when it is called from code that has a loop running.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from toolstop._check.routers import resumable
from toolstop._check.run_config import merged_config
from toolstop.bench.workload import CallCounter

__all__ = ["Failed", "Runner", "async_only", "run_levels", "with_saver"]

_SYNC_UNSUPPORTED = ("Synchronous implementation of", "does not support sync invocation")
_MAX_REVIEWS = 20


def async_only(tool: BaseTool) -> bool:
    """A tool written with `async def` (it cannot run in `invoke()`)."""
    return getattr(tool, "func", None) is None and getattr(tool, "coroutine", None) is not None


def with_saver(agent: Any) -> Any:
    """A compiled graph with the bench's own in-memory checkpointer.

    So a human-review interrupt can be resumed, and no bench run is written to your
    database."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.pregel import Pregel

    if isinstance(agent, Pregel):
        return agent.copy(update={"checkpointer": InMemorySaver()})
    return agent


def run_levels(agent: Any, thread: str) -> tuple[dict[str, Any] | None, list[Any]]:
    """The stop record and the tool results a run left in its subgraphs.

    A parent graph whose node is the toolstop agent (a compiled create_agent with
    StopOnArtifact, build_react_graph, a supervisor's worker) keeps the agent's record and
    messages in the node's namespace of the bench's checkpointer; a parent that keeps only the
    node's last message (a supervisor) has none of its tool results. The record: of the
    namespaces holding one, the outermost decides (its router ended the whole run), and of
    several at that depth the one that checkpointed last; `None` when none holds one. The tool
    results: every namespace's newest checkpoint's ToolMessages. Nothing for an agent that
    keeps no state.
    """
    saver = getattr(agent, "checkpointer", None)
    if saver is None or not hasattr(saver, "list"):
        return None, []
    found: tuple[int, str, dict[str, Any]] | None = None
    results: list[Any] = []
    newest: set[str] = set()
    for item in saver.list({"configurable": {"thread_id": thread}}):  # newest first
        namespace = str(item.config["configurable"].get("checkpoint_ns") or "")
        values = item.checkpoint.get("channel_values") or {}
        if namespace not in newest:
            newest.add(namespace)
            messages = values.get("messages")
            results += [m for m in messages or [] if isinstance(m, ToolMessage)]
        record = values.get("stop_record")
        if not isinstance(record, dict):
            continue
        depth, moment = namespace.count("|"), str(item.checkpoint.get("ts") or "")
        if found is None or depth < found[0] or (depth == found[0] and moment > found[1]):
            found = (depth, moment, record)
    return (None if found is None else found[2]), results


class Failed(Exception):
    """One run raised: what it cost before that, and the error."""

    def __init__(self, counter: CallCounter, error: Exception) -> None:
        super().__init__(str(error))
        self.counter, self.error = counter, error


class _Loop:
    """One event loop on a thread of its own, started on first use, for every async run."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="toolstop-bench-loop", daemon=True
            )
            self._thread.start()
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        try:
            asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()


def _approve_all(state: Any) -> Any:
    """The resume value approving the first pending interrupt's every request, or None."""
    for task in getattr(state, "tasks", ()):
        for pending in task.interrupts:
            value = pending.value
            requests = value.get("action_requests") if isinstance(value, dict) else None
            return {"decisions": [{"type": "approve"}] * max(1, len(requests or ()))}
    return None


class Runner:
    """Runs one question at a time, as the agent needs; `close()` when the bench is done.

    Sync until the agent shows it runs only in async code, then on the bench's one event loop;
    every interrupt approved; `run_config` (yours: `configurable`, `tags`, `metadata`) merged
    into each run's config."""

    def __init__(self, *, run_async: bool, run_config: Mapping[str, Any] | None = None) -> None:
        self.run_async = run_async
        self.run_config = run_config
        self._loop = _Loop()

    def run(self, agent: Any, question: str, thread: str) -> tuple[CallCounter, Any, int]:
        """`(counter, final state, reviews approved)`; `Failed` when the run raised."""
        counter = CallCounter()
        config = merged_config(
            {"callbacks": [counter], "configurable": {"thread_id": thread}}, self.run_config
        )
        try:
            if self.run_async:
                return (counter, *self._loop.run(_arun(agent, question, config)))
            return (counter, *_run(agent, question, config))
        except Exception as error:
            if self.run_async or not any(t in str(error) for t in _SYNC_UNSUPPORTED):
                raise Failed(counter, error) from error
        self.run_async = True
        return self.run(agent, question, f"{thread}-async")

    def close(self) -> None:
        """Stop the event loop (if an async run started it)."""
        self._loop.close()


def _run(agent: Any, question: str, config: dict[str, Any]) -> tuple[Any, int]:
    from langgraph.types import Command

    state = agent.invoke({"messages": [HumanMessage(question)]}, config)
    for reviews in range(_MAX_REVIEWS):
        resume = _approve_all(agent.get_state(config)) if resumable(agent) else None
        if resume is None:
            return state, reviews
        state = agent.invoke(Command(resume=resume), config)
    return state, _MAX_REVIEWS


async def _arun(agent: Any, question: str, config: dict[str, Any]) -> tuple[Any, int]:
    from langgraph.types import Command

    state = await agent.ainvoke({"messages": [HumanMessage(question)]}, config)
    for reviews in range(_MAX_REVIEWS):
        resume = _approve_all(await agent.aget_state(config)) if resumable(agent) else None
        if resume is None:
            return state, reviews
        state = await agent.ainvoke(Command(resume=resume), config)
    return state, _MAX_REVIEWS
