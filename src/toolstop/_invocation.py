"""Which invocation of a graph a node runs in, and one invocation per thread at a time.

An invocation is one call of `invoke` / `ainvoke` / `stream` / `astream` on a compiled graph:
new input, a `Command(resume=...)`, or `invoke(None)` (a retry of a failed step). LangGraph runs
each in its own Pregel loop, which every node of the invocation reaches through its config.
toolstop names an invocation by the id of the checkpoint its loop held when toolstop first ran in
it (a checkpoint LangGraph wrote for this invocation: its input checkpoint, or a later one), so
the name is the same for every node of one invocation, differs for the next one whatever its
recursion limit, and is kept in the run's state across processes.

Two invocations of one thread at once corrupt it (each writes checkpoints from the state it read;
the later write wins), so the second one this process starts on a thread while another runs there
is refused with `ToolstopConcurrentRunError` before it calls the model. The first is released when
its loop unwinds, whichever way it ends (finished, failed, cancelled, paused for a review), so an
aborted run never blocks the next one. Runs in other processes are not seen: serialise a
thread's runs there (LangGraph Server's multitask strategies do).

The loop is reached through LangGraph's private config keys (stable from langgraph 0.6.6 to 1.2).
When it cannot be, `current` returns `None` and the caller falls back to LangGraph's step plus its
remaining steps (`toolstop._lifecycle.invocation_of`), with no overlap check.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections import deque
from typing import Any

from toolstop.errors import ToolstopConcurrentRunError

__all__ = ["current", "running"]

_CALL = "__pregel_call"  # langgraph's CONFIG_KEY_CALL: a partial that holds the loop

_lock = threading.Lock()
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
    with _lock:
        if _running.get(thread) == name:
            del _running[thread]


def _refusal(thread: tuple[int, str, str]) -> ToolstopConcurrentRunError:
    shown = thread[1] if len(thread[1]) <= _SHOWN else thread[1][:_SHOWN] + "..."
    where = f" (namespace {thread[2]!r})" if thread[2] else ""
    msg = (
        f"another run of thread {shown!r}{where} is still running in this process: a thread "
        "takes one run at a time (two at once corrupt its checkpoints and records). Wait for "
        "that run to end, use another thread, or let LangGraph Server queue or reject runs "
        "(its multitask strategies). This run was refused before its first model call."
    )
    return ToolstopConcurrentRunError(msg)


def current(config: Any) -> str | None:
    """The name of the invocation running the node whose config this is.

    The first call in an invocation names it and, when the graph has a checkpointer and a thread,
    claims the thread for it until its loop ends.

    Returns:
        The invocation's name; `None` outside a graph run, or when LangGraph's loop is out of
        reach (see the module docstring).

    Raises:
        ToolstopConcurrentRunError: another invocation of this process runs on the same thread
            (same checkpointer, thread id and namespace).
    """
    loop = _loop(config)
    if loop is None:
        return None
    with _lock:
        name = _names.get(loop)
        if name is not None:
            return name
        thread = _thread(loop)
        if thread is not None and thread in _running:
            raise _refusal(thread)
        name = str(loop.checkpoint.get("id") or uuid.uuid4())
        _names[loop] = name
        if thread is not None:
            _running[thread] = name
            _on_exit(loop.stack, thread, name)
    return name


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
