"""Which invocation of a graph a node runs in, and one invocation per thread at a time.

An invocation is one call of `invoke` / `ainvoke` / `stream` / `astream` on a compiled graph:
new input, a `Command(resume=...)`, or `invoke(None)` (a retry of a failed step). LangGraph runs
each in its own Pregel loop, which every node of the invocation reaches through its config.
toolstop names an invocation by the id of the checkpoint its loop held when toolstop first ran in
it: the checkpoint that step started from (this invocation's input checkpoint or a later one; for
a resume, possibly the one the paused run left). A step runs from a given checkpoint again only
when it is retried, so the name is the same for every node of one invocation, differs for the
next one whatever its recursion limit, and is kept in the run's state across processes.

Two invocations of one thread at once corrupt it (each writes checkpoints from the state it read;
the later write wins), so the second one this process starts on a thread while another runs there
is refused with `ToolstopConcurrentRunError` before it calls the model, unless the other one ends
within `GRACE_S` (a run cancelled to make room for it may still be unwinding) without having moved
the thread on: a run that waited continues only when the checkpointer's latest checkpoint for the
thread is not newer than the one its own loop holds (it read the thread before the other run's
last write otherwise, and would overwrite that run's result). Only a run that waited reads the
checkpointer for this; the uncontended path reads nothing. The first is
released when its loop unwinds, whichever way it ends (finished, failed, cancelled, paused for a
review), so an aborted run never blocks the next one. Runs in other processes are not seen,
nor runs through another checkpointer object on the same database (two `SqliteSaver`s on one
file): a thread is claimed per checkpointer object. Serialise a thread's runs there (LangGraph
Server's multitask strategies do), and use one checkpointer per database in a process.

The loop is reached through LangGraph's private config keys (stable from langgraph 0.6.6 to 1.2).
When it cannot be, `current` returns `None` and the caller falls back to LangGraph's step plus its
remaining steps (`toolstop._lifecycle.invocation_of`), with no overlap check.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
import weakref
from collections import deque
from typing import Any

from toolstop.errors import ToolstopConcurrentRunError

__all__ = ["GRACE_S", "aclaim", "current", "running"]

_CALL = "__pregel_call"  # langgraph's CONFIG_KEY_CALL: a partial that holds the loop

GRACE_S = 2.0
"""How long a run waits for the thread's previous run to end before it is refused: a run
cancelled to make room for the next one (LangGraph Server's `interrupt` strategy, a cancelled
task) may still be unwinding when the next one starts."""

_lock = threading.Lock()
_released = threading.Condition(_lock)
_names: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
"""Each live loop's invocation name, once toolstop ran in it."""
_running: dict[tuple[int, str, str], str] = {}
"""(checkpointer, thread id, namespace) -> the name of the invocation running on that thread."""

_SHOWN = 200  # characters of a thread id an error message shows


def _loop(config: Any) -> Any | None:
    """The Pregel loop running the node whose config this is; `None` when it cannot be found."""
    try:
        schedule = config["configurable"][_CALL].keywords["schedule_task"]
        loop = schedule.__self__
        loop.stack.callback  # noqa: B018 - the loop must be able to tell when it ends
        _ = loop.checkpoint["id"], loop.config["configurable"]
    except Exception:
        return None
    return loop


def _thread(loop: Any) -> tuple[int, str, str] | None:
    """The thread a loop runs on: `None` without a checkpointer (no thread to share)."""
    configurable = loop.config["configurable"]
    thread_id = configurable.get("thread_id")
    if loop.checkpointer is None or thread_id is None:
        return None
    # A live loop holds its checkpointer, so its id is not reused while the entry exists.
    return id(loop.checkpointer), str(thread_id), str(configurable.get("checkpoint_ns") or "")


def _release(thread: tuple[int, str, str], name: str) -> None:
    with _released:
        if _running.get(thread) == name:
            del _running[thread]
            _released.notify_all()


def _in_event_loop() -> bool:
    """Whether this thread runs an event loop (blocking it would block the run being waited for)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _refusal(thread: tuple[int, str, str], *, moved_on: bool = False) -> ToolstopConcurrentRunError:
    shown = thread[1] if len(thread[1]) <= _SHOWN else thread[1][:_SHOWN] + "..."
    where = f" (namespace {thread[2]!r})" if thread[2] else ""
    state = (
        "ended while this run waited for it, after this run had read the thread's state"
        if moved_on
        else "is still running in this process"
    )
    msg = (
        f"another run of thread {shown!r}{where} {state}: a thread "
        "takes one run at a time (two at once corrupt its checkpoints and records). Wait for "
        "that run to end, use another thread, or let LangGraph Server queue or reject runs "
        "(its multitask strategies). This run was refused before its first model call."
    )
    return ToolstopConcurrentRunError(msg)


def _key(loop: Any) -> dict[str, Any]:
    configurable = loop.config["configurable"]
    return {
        "configurable": {
            "thread_id": configurable.get("thread_id"),
            "checkpoint_ns": configurable.get("checkpoint_ns") or "",
        }
    }


def _moved_on(loop: Any, latest: Any) -> bool:
    """Whether the thread's latest checkpoint is newer than the one the loop holds: another run
    wrote it after this run's loop read the thread (LangGraph's checkpoint ids sort by time)."""
    if latest is None:
        return False
    latest_id = str(latest.config["configurable"]["checkpoint_id"])
    return latest_id > str(loop.checkpoint["id"])


def _stale(loop: Any) -> bool:
    """`_moved_on` for the sync path; a checkpointer that cannot be read counts as moved on."""
    try:
        return _moved_on(loop, loop.checkpointer.get_tuple(_key(loop)))
    except Exception:
        return True


async def _astale(loop: Any) -> bool:
    try:
        return _moved_on(loop, await loop.checkpointer.aget_tuple(_key(loop)))
    except Exception:
        return True


async def _poll() -> None:
    await asyncio.sleep(0.01)


def current(config: Any) -> str | None:
    """The name of the invocation running the node whose config this is.

    The first call in an invocation names it and, when the graph has a checkpointer and a thread,
    claims the thread for it until its loop ends.

    Returns:
        The invocation's name; `None` outside a graph run, or when LangGraph's loop is out of
        reach (see the module docstring).

    Raises:
        ToolstopConcurrentRunError: another invocation of this process runs on the same thread
            (same checkpointer, thread id and namespace), or ran there while this one waited
            for it and moved the thread on.
    """
    loop = _loop(config)
    if loop is None:
        return None
    with _released:
        name = _names.get(loop)
        if name is not None:
            return name
        thread = _thread(loop)
        if thread is not None and thread in _running and not _in_event_loop():
            _released.wait_for(lambda: thread not in _running, timeout=GRACE_S)
            if thread not in _running and _stale(loop):
                raise _refusal(thread, moved_on=True)
        if thread is not None and thread in _running:
            raise _refusal(thread)
        name = str(loop.checkpoint.get("id") or uuid.uuid4())
        _names[loop] = name
        if thread is not None:
            _running[thread] = name
            _on_exit(loop.stack, thread, name)
    return name


async def aclaim(config: Any) -> None:
    """`current` for async code: waits for the thread without blocking the event loop.

    The run waited for (up to `GRACE_S`) may be unwinding on this very event loop. After a wait,
    the checkpointer is read with `aget_tuple` (as `current` does with `get_tuple`).

    Raises:
        ToolstopConcurrentRunError: as `current`.
    """
    loop = _loop(config)
    if loop is None:
        return
    deadline = time.monotonic() + GRACE_S
    waited, thread = False, None
    while time.monotonic() < deadline:
        with _lock:
            thread = _thread(loop)
            if loop in _names or thread is None or thread not in _running:
                break
        waited = True
        await _poll()
    contended = waited and thread is not None and loop not in _names and thread not in _running
    if contended and thread is not None and await _astale(loop):
        raise _refusal(thread, moved_on=True)
    current(config)


def _on_exit(stack: Any, thread: tuple[int, str, str], name: str) -> None:
    """Release `thread` when the loop's exit stack unwinds, last: after LangGraph has waited for
    its checkpoint writes (entered before), so the next run reads the finished run's state."""
    stack.callback(_release, thread, name)
    callbacks = getattr(stack, "_exit_callbacks", None)
    if isinstance(callbacks, deque):  # contextlib's, unwound from its right end
        callbacks.rotate(1)


def running() -> list[str]:
    """The ids of the threads that have a run in progress in this process (for diagnostics)."""
    with _lock:
        return [thread for _, thread, _ in _running]
