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
within `GRACE_S` (a run cancelled to make room for it may still be unwinding). Whether it waited
or found the thread free, a run is refused as well when it read the thread before another run's
last write there: each released run leaves the id of the last checkpoint its loop wrote, and a
run whose loop started from an older checkpoint (its own steps before toolstop first ran in it,
a slow hook of other middleware, outlasted that run) would overwrite that run's result. That run's
write is confirmed with one read of the checkpointer, the only read; a run whose loop started
from the last run's checkpoint reads nothing. The refused run's own checkpoints may then be the
thread's newest: a later run that starts from them is refused too, naming the checkpoint to
continue from, until the thread is continued from that checkpoint (`checkpoint_id`) or its state
is updated. A run addressed to a checkpoint of its own choosing (time travel) is not checked.
A claim is released when its loop unwinds, whichever way it ends (finished, failed, cancelled,
paused for a review), so an aborted run never blocks the next one. Runs in other processes are
not seen, nor runs through another checkpointer object on the same database (two `SqliteSaver`s
on one file): a thread is claimed per checkpointer object. Serialise a thread's runs there
(LangGraph Server's multitask strategies do), and use one checkpointer per database in a process.

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
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, NamedTuple

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


class _Left(NamedTuple):
    """What the last run released on a thread left there."""

    head: str
    """The last checkpoint its loop wrote."""
    resume_from: str
    """The checkpoint the thread's next run should start from: `head`, unless that run was
    refused for having read the thread before another run's last write."""


_left: OrderedDict[tuple[int, str, str], _Left] = OrderedDict()
_LEFT_KEPT = 10_000
"""Threads whose last run is remembered; the oldest are forgotten first (a run whose start
outlasts this many other threads' runs is not checked)."""

_SHOWN = 200  # characters of a thread id an error message shows


class _Suspect(NamedTuple):
    """Why a run may have read its thread before another run's last write."""

    resume_from: str
    """The checkpoint holding that run's result."""
    from_refused: bool
    """The run started from checkpoints a refused run wrote (else: from one older than the last
    run's last write, which is confirmed with the checkpointer)."""


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


def _started_from(loop: Any, *, waited: bool) -> str | None:
    """The checkpoint the loop read when it started (the thread's newest then, or a new empty
    one); `None` when it cannot be told, or when the run was addressed to a checkpoint (time
    travel, a resume naming the paused checkpoint) and did not have to wait for another run: an
    addressed run that waited overlapped that run whatever it addressed."""
    try:
        configurable = loop.config["configurable"]
        addressed = getattr(loop, "_addressed", None)  # langgraph >= 1.2
        if not isinstance(addressed, bool):
            namespace = configurable.get("checkpoint_ns") or ""
            addressed = bool(
                configurable.get("checkpoint_id")
                or configurable.get("__pregel_replay_state")
                or namespace in (configurable.get("checkpoint_map") or {})
            )
        started = loop.checkpoint_id_saved
    except Exception:
        return None
    return started if isinstance(started, str) and (waited or not addressed) else None


def _head(loop: Any) -> str | None:
    """The last checkpoint the loop wrote (the one it started from when it wrote none)."""
    try:
        head = loop.checkpoint_config["configurable"].get("checkpoint_id")
    except Exception:
        return None
    return head if isinstance(head, str) and head else None


def _remember(thread: tuple[int, str, str], left: _Left | None) -> None:
    """Keep what a run left on `thread` (the caller holds `_lock`)."""
    if left is None:
        _left.pop(thread, None)
        return
    _left[thread] = left
    _left.move_to_end(thread)
    while len(_left) > _LEFT_KEPT:
        _left.popitem(last=False)


def _suspect(loop: Any, thread: tuple[int, str, str], *, waited: bool) -> _Suspect | None:
    """Whether the loop started before the last run on its thread wrote its result there."""
    left, started = _left.get(thread), _started_from(loop, waited=waited)
    if left is None or started is None:
        return None
    if started == left.head and left.head != left.resume_from:
        return _Suspect(left.resume_from, from_refused=True)
    # LangGraph's checkpoint ids sort by time: the last run wrote after this loop read the thread.
    if left.resume_from > started:
        return _Suspect(left.resume_from, from_refused=False)
    return None


def _release(thread: tuple[int, str, str], name: str, loop: Any) -> None:
    with _released:
        if _running.get(thread) == name:
            del _running[thread]
            head = _head(loop)
            _remember(thread, _Left(head, head) if head else None)
            _released.notify_all()


def _release_refused(thread: tuple[int, str, str], suspect: _Suspect, loop: Any) -> None:
    """A refused run's own checkpoints, if they are the thread's newest, must not be continued
    from (unless another run has run there since it was refused)."""
    with _released:
        left, head = _left.get(thread), _head(loop)
        if thread in _running or left is None or left.resume_from != suspect.resume_from:
            return
        if head is not None and head > suspect.resume_from:
            _remember(thread, _Left(head, suspect.resume_from))


def _in_event_loop() -> bool:
    """Whether this thread runs an event loop (blocking it would block the run being waited for)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _refusal(
    thread: tuple[int, str, str],
    suspect: _Suspect | None = None,
    *,
    waited: bool = False,
    wrote_after: bool = True,
) -> ToolstopConcurrentRunError:
    """The error refusing a run; `wrote_after`: the refused run has written a checkpoint after
    the one holding the other run's result (the thread's newest is then the refused run's)."""
    shown = thread[1] if len(thread[1]) <= _SHOWN else thread[1][:_SHOWN] + "..."
    where = f" (namespace {thread[2]!r})" if thread[2] else ""
    if suspect is None:
        state = (
            "is still running in this process (a stream not read to its end holds its run until "
            "it is closed)"
        )
    elif suspect.from_refused:
        state = (
            "was refused after reading the thread before another run's last write, and its own "
            "checkpoints, which this run started from, lack that run's result"
        )
    elif waited:
        state = "ended while this run waited for it, after this run had read the thread's state"
    else:
        state = (
            "wrote to it and ended after this run had read the thread's state, before toolstop "
            "first ran in this run (this run's own steps before, such as another middleware's "
            "hook, outlasted it, or that run was a stream closed only now)"
        )
    if suspect is None:
        remedy = "Wait for that run to end, use another thread"
    elif wrote_after:
        remedy = (
            f"Continue the thread from checkpoint {suspect.resume_from!r}, which holds that "
            'run\'s result (pass it as "checkpoint_id" in the config\'s "configurable"), use '
            "another thread"
        )
    else:
        remedy = (
            "Send this run's input again if it is still wanted (the thread goes on from that "
            "run's result; a second approval of one review can be dropped), use another thread"
        )
    msg = (
        f"another run of thread {shown!r}{where} {state}: a thread takes one run at a time (two "
        f"at once corrupt its checkpoints and records). {remedy}, or let LangGraph Server queue "
        "or reject runs (its multitask strategies). This run was refused before its first model "
        "call."
    )
    checkpoint_id = suspect.resume_from if suspect is not None and wrote_after else None
    return ToolstopConcurrentRunError(msg, thread_id=thread[1], checkpoint_id=checkpoint_id)


def _key(loop: Any, checkpoint_id: str) -> dict[str, Any]:
    configurable = loop.config["configurable"]
    return {
        "configurable": {
            "thread_id": configurable.get("thread_id"),
            "checkpoint_ns": configurable.get("checkpoint_ns") or "",
            "checkpoint_id": checkpoint_id,
        }
    }


def _written(loop: Any, checkpoint_id: str) -> bool:
    """Whether the checkpointer holds the checkpoint (one that cannot be read counts as held)."""
    try:
        return loop.checkpointer.get_tuple(_key(loop, checkpoint_id)) is not None
    except Exception:
        return True


async def _awritten(loop: Any, checkpoint_id: str) -> bool:
    try:
        return await loop.checkpointer.aget_tuple(_key(loop, checkpoint_id)) is not None
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
            (same checkpointer, thread id and namespace), or wrote there after this one read the
            thread (see the module docstring).
    """
    try:  # the loop of a named invocation is looked up only (it was checked when named)
        name = _names.get(config["configurable"][_CALL].keywords["schedule_task"].__self__)
    except Exception:
        name = None
    if name is not None:  # named (and its thread claimed) already: no lock to take
        return name
    loop = _loop(config)
    if loop is None:
        return None
    return _claim(loop, _written, waited=False)


async def aclaim(config: Any) -> None:
    """`current` for async code: waits for the thread without blocking the event loop.

    The run waited for (up to `GRACE_S`) may be unwinding on this very event loop. The
    checkpointer is read with `aget_tuple` (where `current` uses `get_tuple`).

    Raises:
        ToolstopConcurrentRunError: as `current`.
    """
    loop = _loop(config)
    if loop is None or loop in _names:  # named (and its thread claimed) already
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
    with _lock:
        suspect = (
            None if loop in _names or thread is None else _suspect(loop, thread, waited=waited)
        )
    held = None  # the checkpoint read here and found held
    if (
        suspect is not None
        and not suspect.from_refused
        and await _awritten(loop, suspect.resume_from)
    ):
        held = suspect.resume_from
    # Only the checkpoint read here is known; one another run left meanwhile is not refused.
    _claim(loop, lambda _loop, checkpoint_id: checkpoint_id == held, waited=waited)


def _claim(loop: Any, written: Callable[[Any, str], bool], *, waited: bool) -> str:
    """Name the loop's invocation and claim its thread; the checkpointer is read outside the
    lock, and only when the loop may have started before another run's last write."""
    with _released:
        name = _names.get(loop)
        if name is not None:
            return name
        thread = _thread(loop)
        if thread is not None and thread in _running and not _in_event_loop():
            waited = True
            _released.wait_for(lambda: thread not in _running, timeout=GRACE_S)
        if thread is not None and thread in _running:
            raise _refusal(thread)
        suspect = None if thread is None else _suspect(loop, thread, waited=waited)
        if suspect is None:
            return _named(loop, thread)
    assert thread is not None
    if suspect.from_refused or written(loop, suspect.resume_from):
        # Now (a run may start from the checkpoints written so far) and when its loop ends.
        _release_refused(thread, suspect, loop)
        _on_exit(loop.stack, _release_refused, thread, suspect, loop)
        head = _head(loop)
        wrote_after = (
            suspect.from_refused
            or (head is not None and head > suspect.resume_from)
            or getattr(loop, "durability", None) == "exit"  # it writes its checkpoint on exit
        )
        raise _refusal(thread, suspect, waited=waited, wrote_after=wrote_after)
    with _released:
        name = _names.get(loop)
        if name is not None:
            return name
        if thread in _running:
            raise _refusal(thread)
        return _named(loop, thread)


def _named(loop: Any, thread: tuple[int, str, str] | None) -> str:
    """Name the loop's invocation and claim its thread (the caller holds `_lock`)."""
    name = str(loop.checkpoint.get("id") or uuid.uuid4())
    _names[loop] = name
    if thread is not None:
        _running[thread] = name
        _on_exit(loop.stack, _release, thread, name, loop)
    return name


def _on_exit(stack: Any, callback: Callable[..., None], *args: Any) -> None:
    """Call `callback` when the loop's exit stack unwinds, last: after LangGraph has waited for
    its checkpoint writes (entered before), so the next run reads the finished run's state."""
    stack.callback(callback, *args)
    callbacks = getattr(stack, "_exit_callbacks", None)
    if isinstance(callbacks, deque):  # contextlib's, unwound from its right end
        callbacks.rotate(1)


def running() -> list[str]:
    """The ids of the threads that have a run in progress in this process (for diagnostics)."""
    with _lock:
        return [thread for _, thread, _ in _running]
