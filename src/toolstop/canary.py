"""The way back of a canary: tools whose canary arm is asked again more often than the shadow arm.

`WayBack` reads the re-ask entries of the stop records in the application's checkpointer (every
thread, so every replica writing to the same database counts), and names the tools whose canary
arm (hard) was asked again more often than the shadow arm (`never`) by more than a margin. The
policy runs those tools in `never` mode for new runs (`StopPolicy(way_back=WayBack())`).

A run's record is the `stop_record` channel of its thread's checkpoints; run n+1's record holds
a `reask` entry about run n (did the user ask again after run n stopped, or would have stopped?).
An entry counts for each of run n's deciding tools, in run n's arm; entries are deduplicated by
(thread, checkpoint namespace, run n's number), since a record stays in every later checkpoint of
its thread until the next run ends.

What one read costs: the newest `window` checkpoints of the whole checkpointer, never its whole
history: `window` defaults to `last * CHECKPOINTS_PER_ENTRY`. A run writes about six checkpoints
(a model call, a tool turn, the stop), and with a 10% canary one run in ten is in the canary arm:
the default window holds about `last` canary stops across all tools when a tool decides most
runs; a smaller canary, or a tool that decides few runs, needs a larger `window` to reach `last`
entries (until then its counts are smaller, and `min_stops` keeps it from tripping too early).
LangGraph's SQLite and PostgreSQL savers list newest first across threads (`ORDER BY
checkpoint_id DESC LIMIT window`); `InMemorySaver` does not, so its newest checkpoint ids are
picked from its storage first. Other savers are read with `list(None, limit=window)` and trusted
to list newest first.

The rule is recomputed at each read, never sticky: a tool is sent back while the newest entries
support it, and comes back when they no longer do (after a read). New runs of a tool sent back
run in `never` mode, so its canary arm stops gathering stops; the entries it had age out of the
window as other runs are written, and then `min_stops` holds it back from hard mode, not the
old verdict.

Values are decoded by toolstop's own decoder (`toolstop._decode.SafeDecoder`, messages skipped
unparsed: a record is plain data), on a shallow copy of LangGraph's own savers (in memory,
SQLite, PostgreSQL, sync and async) that shares their connection and lock; the application's
saver is never changed. A checkpoint that decoder cannot read (an encrypting serializer) makes
that read, and later ones, use the saver's own serializer; other savers are read with their own.
"""

from __future__ import annotations

import asyncio
import copy
import heapq
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from toolstop._decode import SafeDecoder, install
from toolstop._printable import printable
from toolstop.errors import ToolstopConfigError
from toolstop.metrics import record_sent_back

__all__ = ["CHECKPOINTS_PER_ENTRY", "NAME_LIMIT", "TOOLS_PER_ENTRY", "WayBack"]

CHECKPOINTS_PER_ENTRY = 50
"""Checkpoints read per re-ask entry wanted: `window = last * CHECKPOINTS_PER_ENTRY`."""
NAME_LIMIT = 200
"""A tool name longer than this (in characters) is no tool's: an entry's such names are ignored."""
TOOLS_PER_ENTRY = 64
"""An entry's first this many tool names are counted; the rest are ignored."""
ARMS = ("canary", "shadow")

logger = logging.getLogger("toolstop")


@dataclass(frozen=True)
class _Entry:
    run: int
    arm: str
    asked_again: bool
    tools: tuple[str, ...]


def _entry(record: Any) -> _Entry | None:
    """The re-ask entry of a stored record, or `None` when it has none or one of a wrong shape."""
    if not isinstance(record, Mapping):
        return None
    reask = record.get("reask")
    if not isinstance(reask, Mapping):
        return None
    run, asked, arm, tools = (reask.get(k) for k in ("run", "asked_again", "arm", "tools"))
    if isinstance(run, bool) or not isinstance(run, int) or run < 0:
        return None
    if not isinstance(asked, bool) or not isinstance(arm, str) or arm not in ARMS:
        return None
    if reask.get("stopped") is not (arm == "canary"):
        # a canary run whose tool ran in `never` (sent back), or a shadow run stopped by a
        # tool the canary does not switch: not the canaried stop, so not evidence about it
        return None
    if not isinstance(tools, list):
        return None
    names = tuple(
        dict.fromkeys(
            name
            for name in tools[:TOOLS_PER_ENTRY]
            if isinstance(name, str) and 0 < len(name) <= NAME_LIMIT
        )
    )
    return _Entry(run, arm, asked, names) if names else None


class _Entries:
    """Re-ask entries gathered from checkpoints read newest first, each entry once."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str, int], tuple[_Entry, int]] = {}
        self.read = 0

    def add(self, item: Any) -> None:
        """Take the entry of one checkpoint tuple, if it holds one."""
        position = self.read
        self.read += 1
        checkpoint = getattr(item, "checkpoint", None)
        if not isinstance(checkpoint, Mapping):
            return
        values = checkpoint.get("channel_values")
        entry = _entry(values.get("stop_record")) if isinstance(values, Mapping) else None
        if entry is None:
            return
        configurable = (getattr(item, "config", None) or {}).get("configurable") or {}
        key = (
            str(configurable.get("thread_id")),
            str(configurable.get("checkpoint_ns") or ""),
            entry.run,
        )
        known = self.found.get(key)
        # a record stays in its thread's later checkpoints: it was written at its oldest one
        self.found[key] = (known[0] if known else entry, position)

    def clear(self) -> None:
        """Forget what was gathered (the read starts again)."""
        self.found.clear()
        self.read = 0

    def newest_first(self) -> list[_Entry]:
        """The entries, the most recently written first."""
        return [entry for entry, _ in sorted(self.found.values(), key=lambda pair: pair[1])]


def _tally(entries: Iterable[_Entry], last: int) -> dict[str, dict[str, list[int]]]:
    """Per tool and arm, `[entries, asked again]` over the tool's `last` newest entries."""
    counts: dict[str, dict[str, list[int]]] = {}
    for entry in entries:
        for tool in entry.tools:
            arms = counts.setdefault(tool, {arm: [0, 0] for arm in ARMS})
            pair = arms[entry.arm]
            if pair[0] < last:
                pair[0] += 1
                pair[1] += entry.asked_again
    return counts


def _memory_storage(saver: Any) -> Mapping[Any, Any] | None:
    """`InMemorySaver`'s storage (thread -> namespace -> checkpoint id -> ...), else `None`."""
    try:
        from langgraph.checkpoint.memory import InMemorySaver
    except ImportError:  # pragma: no cover - langgraph is a dependency
        return None
    storage = getattr(saver, "storage", None) if isinstance(saver, InMemorySaver) else None
    return storage if isinstance(storage, Mapping) else None


def _newest_in_memory(storage: Mapping[Any, Any], window: int) -> list[dict[str, Any]]:
    """The configs of the newest `window` checkpoints of an `InMemorySaver` (ids sort by time)."""
    keys = (
        (checkpoint_id, thread_id, namespace)
        for thread_id, namespaces in list(storage.items())
        for namespace, checkpoints in list(namespaces.items())
        for checkpoint_id in list(checkpoints)
    )
    return [
        {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
            }
        }
        for checkpoint_id, thread_id, namespace in heapq.nlargest(window, keys)
    ]


def _has_own_alist(saver: Any) -> bool:
    """True when the saver implements `alist` itself (an async saver, or a sync one whose `alist`
    raises `NotImplementedError`), not the base's stub."""
    try:
        from langgraph.checkpoint.base import BaseCheckpointSaver
    except ImportError:  # pragma: no cover - langgraph is a dependency
        return False
    own = getattr(type(saver), "alist", None)
    return own is not None and own is not BaseCheckpointSaver.alist


_OWN_SAVERS = (
    "langgraph.checkpoint.memory",
    "langgraph.checkpoint.sqlite",
    "langgraph.checkpoint.postgres",
)


def _records_reader(saver: Any) -> Any:
    """A shallow copy of one of LangGraph's own savers reading with toolstop's decoder, messages
    skipped (same connection, lock and loop); `None` for any other saver."""
    module = type(saver).__module__
    if not any(module == own or module.startswith(own + ".") for own in _OWN_SAVERS):
        return None
    try:
        return install(copy.copy(saver), SafeDecoder(messages=False))
    except Exception:  # a saver that cannot be copied is read as it is
        return None


_SQLITE_NEWEST = """
SELECT thread_id, checkpoint_ns, type, checkpoint FROM checkpoints
WHERE checkpoint_id >= COALESCE(
    (SELECT checkpoint_id FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1 OFFSET ?), '')
ORDER BY checkpoint_id DESC
"""
"""The newest checkpoints of a SQLite saver: their ids are found first, so only their values are
read (`list(None, limit=n)` sorts every row with its values, and reads a pending-writes query
per checkpoint)."""


def _sqlite_newest(saver: Any, window: int, found: _Entries) -> bool:
    """Read the newest `window` checkpoints of a `SqliteSaver` through its connection, under its
    lock; False when `saver` is not one (then it is listed)."""
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        return False
    if not isinstance(saver, SqliteSaver):
        return False
    with saver.lock:
        rows = saver.conn.execute(_SQLITE_NEWEST, (window - 1,))
        try:
            for thread_id, namespace, kind, value in rows:
                config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}}
                found.add(_Read(config, saver.serde.loads_typed((kind, value))))
                if found.read >= window:
                    break
        finally:
            rows.close()
    return True


@dataclass(frozen=True)
class _Read:
    config: dict[str, Any]
    checkpoint: Any


class WayBack:
    """The tools a canary sends back to `never` mode: asked again more often in the canary arm.

    A tool is sent back when its canary arm's re-ask rate over its `last` newest entries exceeds
    its shadow arm's over its `last` newest entries by more than `margin`, and both arms have at
    least `min_stops` entries. The answer is read from the checkpointer at most once per
    `refresh` seconds (the first call reads) and recomputed at each read (see the module).

    Args:
        margin: How much worse the canary arm may be, in rate points (0.05: five points).
        last: The newest entries per tool and arm that count.
        min_stops: Fewer entries than this in either arm: the tool is never sent back.
        refresh: Seconds between reads (monotonic clock); 0 reads at every call.
        checkpointer: Where to read; when `None`, the checkpointer each call is given.
        window: The newest checkpoints one read looks at (default `last *
            CHECKPOINTS_PER_ENTRY`); raise it for a small canary share.
        clock: The monotonic clock (tests give their own).

    Raises:
        ToolstopConfigError: for a margin outside [0, 1), counts below 1, `min_stops` above
            `last`, or a negative or non-finite `refresh`.
    """

    def __init__(
        self,
        margin: float = 0.05,
        last: int = 200,
        min_stops: int = 30,
        refresh: float = 60.0,
        checkpointer: Any = None,
        *,
        window: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check(margin, last, min_stops, refresh, window)
        self.margin = margin
        self.last = last
        self.min_stops = min_stops
        self.refresh = float(refresh)
        self.checkpointer = checkpointer
        self.window = window if window is not None else last * CHECKPOINTS_PER_ENTRY
        self._clock = clock
        self._threshold = Fraction(repr(float(margin)))
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._answer: frozenset[str] = frozenset()
        self._evidence: dict[str, dict[str, Any]] = {}
        self._warned: set[str] = set()
        self._own_serializer = False

    def __repr__(self) -> str:
        return (
            f"WayBack(margin={self.margin!r}, last={self.last!r}, min_stops={self.min_stops!r}, "
            f"refresh={self.refresh!r}, window={self.window!r})"
        )

    def _due(self) -> bool:
        return self._read_at is None or self._clock() - self._read_at >= self.refresh

    def sent_back(self, checkpointer: Any = None) -> frozenset[str]:
        """The tools sent back to `never` mode now (see the class).

        Reads the checkpointer when `refresh` has passed; a caller that finds another caller
        reading gets the previous answer (none before the first read ends) without waiting.
        Never raises: a read that fails keeps the previous answer and is logged. Call
        `asent_back` from a coroutine: an async saver cannot be read synchronously on its loop.
        """
        saver = self._claim(checkpointer)
        if saver is None:
            return self._answer
        found = _Entries()
        try:
            self._read(saver, found)
        except Exception as error:  # the application's run must go on
            self._failed(error)
        else:
            self._settle(found)
        finally:
            self._release()
        return self._answer

    async def asent_back(self, checkpointer: Any = None) -> frozenset[str]:
        """`sent_back` without blocking the event loop.

        An async saver (`AsyncSqliteSaver`, `AsyncPostgresSaver`) is read with its `alist`; a
        sync saver's read runs in a worker thread; an `InMemorySaver` is read in place.
        """
        saver = self._claim(checkpointer)
        if saver is None:
            return self._answer
        found = _Entries()
        try:
            await self._aread(saver, found)
        except Exception as error:  # the application's run must go on
            self._failed(error)
        else:
            self._settle(found)
        finally:
            self._release()
        return self._answer

    def _claim(self, checkpointer: Any) -> Any:
        """The saver to read when this caller is to read now (the lock then held), else `None`:
        no saver, `refresh` not passed, or another caller reading (or just done reading)."""
        saver = self.checkpointer if self.checkpointer is not None else checkpointer
        if saver is None or not self._due() or not self._lock.acquire(blocking=False):
            return None
        if not self._due():  # another caller read while this one waited for the lock
            self._lock.release()
            return None
        return saver

    def _release(self) -> None:
        """A read ended (found or failed): the next is due after `refresh`."""
        self._read_at = self._clock()
        self._lock.release()

    def evidence(self) -> dict[str, dict[str, Any]]:
        """What the last read found, per tool, and whether each tool is sent back.

        Each arm's entries, asked again and rate, e.g. `{"tool": {"canary": {"n": 40,
        "asked": 9, "rate": 0.225}, "shadow": {...}, "tripped": True}}`; a rate is `None` for an
        arm without entries. Empty before the first read."""
        return {
            tool: {**figures, "canary": dict(figures["canary"]), "shadow": dict(figures["shadow"])}
            for tool, figures in self._evidence.items()
        }

    def _reader(self, saver: Any) -> Any:
        """The saver to read with: a copy decoding records only, unless that failed before."""
        if self._own_serializer:
            return saver
        return _records_reader(saver) or saver

    def _undecodable(self, saver: Any, reader: Any, error: Exception) -> bool:
        """True when `error` is toolstop's decoder refusing a value (read again with the
        saver's own serializer, from now on)."""
        if reader is saver or not isinstance(error, ValueError):
            return False
        self._own_serializer = True
        return True

    def _read(self, saver: Any, found: _Entries) -> None:
        reader = self._reader(saver)
        try:
            self._read_with(reader, found)
        except Exception as error:
            if not self._undecodable(saver, reader, error):
                raise
            found.clear()
            self._read_with(saver, found)

    def _read_with(self, saver: Any, found: _Entries) -> None:
        if isinstance(getattr(saver, "serde", None), SafeDecoder) and _sqlite_newest(
            saver, self.window, found
        ):
            return
        storage = _memory_storage(saver)
        if storage is not None:
            for config in _newest_in_memory(storage, self.window):
                found.add(saver.get_tuple(config))
            return
        for item in saver.list(None, limit=self.window):
            found.add(item)
            if found.read >= self.window:
                break

    async def _aread(self, saver: Any, found: _Entries) -> None:
        if _memory_storage(saver) is not None:
            self._read(saver, found)  # in memory: nothing to wait for
            return
        if _has_own_alist(saver):
            reader = self._reader(saver)
            try:
                await self._aread_with(reader, found)
                return
            except NotImplementedError:  # a sync saver's `alist` (SqliteSaver's) refuses
                found.clear()
            except Exception as error:
                if not self._undecodable(saver, reader, error):
                    raise
                found.clear()
                await self._aread_with(saver, found)
                return
        await asyncio.to_thread(self._read, saver, found)

    async def _aread_with(self, saver: Any, found: _Entries) -> None:
        async for item in saver.alist(None, limit=self.window):
            found.add(item)
            if found.read >= self.window:
                break

    def _settle(self, found: _Entries) -> None:
        evidence: dict[str, dict[str, Any]] = {}
        back: set[str] = set()
        for tool, arms in _tally(found.newest_first(), self.last).items():
            (canary_n, canary_asked), (shadow_n, shadow_asked) = arms["canary"], arms["shadow"]
            tripped = (
                canary_n >= self.min_stops
                and shadow_n >= self.min_stops
                and Fraction(canary_asked, canary_n) - Fraction(shadow_asked, shadow_n)
                > self._threshold
            )
            evidence[tool] = {
                arm: {"n": n, "asked": asked, "rate": asked / n if n else None}
                for arm, (n, asked) in arms.items()
            }
            evidence[tool]["tripped"] = tripped
            if tripped:
                back.add(tool)
        for tool in sorted(back - self._answer):
            record_sent_back(tool)
            if tool not in self._warned:
                self._warned.add(tool)
                self._warn(tool, evidence[tool])
        for tool in sorted(self._answer - back):
            logger.info("toolstop: %s is no longer sent back to never mode", printable(tool))
        self._evidence = evidence
        self._answer = frozenset(back)

    def _warn(self, tool: str, figures: Mapping[str, Any]) -> None:
        canary, shadow = figures["canary"], figures["shadow"]
        logger.warning(
            "toolstop: %s sent back to never mode for new runs: canary %d of %d asked again "
            "(%.1f%%), shadow %d of %d (%.1f%%), more than %.1f points apart",
            printable(tool),
            canary["asked"],
            canary["n"],
            100 * canary["rate"],
            shadow["asked"],
            shadow["n"],
            100 * shadow["rate"],
            100 * self.margin,
        )

    @staticmethod
    def _failed(error: Exception) -> None:
        # the error's text may hold a connection string: its type only
        hint = ""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:  # the usual cause on a loop: an async saver read synchronously
            hint = " (called on an event loop: use `await way_back.asent_back(checkpointer)`)"
        logger.warning(
            "toolstop: the way back could not read the checkpointer (%s)%s; "
            "the tools sent back stay as they were until the next read",
            type(error).__name__,
            hint,
        )


def _check(margin: float, last: int, min_stops: int, refresh: float, window: int | None) -> None:
    def count(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    if isinstance(margin, bool) or not isinstance(margin, (int, float)):
        msg = f"WayBack margin takes a number of rate points in [0, 1), got {type(margin).__name__}"
        raise ToolstopConfigError(msg)
    if not (math.isfinite(margin) and 0 <= margin < 1):
        msg = f"WayBack margin takes rate points in [0, 1) (0.05 is five points), got {margin!r}"
        raise ToolstopConfigError(msg)
    for name, value in (("last", last), ("min_stops", min_stops)):
        if not count(value):
            msg = f"WayBack {name} takes a whole number of at least 1, got {value!r}"
            raise ToolstopConfigError(msg)
    if window is not None and not count(window):
        msg = f"WayBack window takes a whole number of checkpoints of at least 1, got {window!r}"
        raise ToolstopConfigError(msg)
    if min_stops > last:
        msg = f"WayBack min_stops ({min_stops}) above last ({last}) would never send a tool back"
        raise ToolstopConfigError(msg)
    if (
        isinstance(refresh, bool)
        or not isinstance(refresh, (int, float))
        or not (math.isfinite(refresh) and refresh >= 0)
    ):
        msg = f"WayBack refresh takes seconds, a finite number of at least 0, got {refresh!r}"
        raise ToolstopConfigError(msg)
