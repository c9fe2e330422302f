"""A thread's runs at every level of a multi-level agent, each counted once.

A toolstop agent compiled into a parent graph (a subgraph node, a swarm's or a supervisor's
agent) checkpoints in namespaces of its own, `node:task_id`, one per invocation of its node,
nested with `|` (`outer:id|inner:id`). `report` and `explain` read a thread as one thing:

- **one thread**, however many namespaces it has (`grouped`);
- **each record once, where it was written**: a parent whose state has a `stop_record` key
  copies the child's record into its own checkpoints (and into the next child's input), so the
  same record shows up at several levels. A record equal, field for field, to one already seen
  at another level of the thread earlier is a copy and is not counted (`ThreadRuns.copies`).
  Records carry call ids and token counts, so two different runs are rarely equal; two equal
  records in one namespace are still two runs (the reader tells them apart by version);
- **runs in the order they ended**, across levels, each with its level (`level_of`);
- **a run its parent left open is closed**: a namespace's run still open at its newest
  checkpoint, while the parent level has checkpoints after it, will never continue (the
  parent's next step gets a new namespace). With calls pending (`asked`: a hand-off to another
  agent answered by the parent, `Command(graph=Command.PARENT)`), it is closed as
  `handed_off`; without, as `interrupted`. A child that crashed during a tool call and a parent
  invoked again afterwards looks the same as a hand-off: deliberately not told apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from toolstop.report.reader import RunEnd, database_error
from toolstop.report.records import cut

__all__ = ["HANDED_OFF", "ThreadRuns", "grouped", "level_of", "thread_runs"]

HANDED_OFF = "handed_off"
"""The rule of a run its parent graph left open on calls (a hand-off to another agent)."""


@dataclass(frozen=True, kw_only=True)
class ThreadRuns:
    """One thread's runs, every level, each once.

    Attributes:
        thread_id: The thread.
        ends: Its finished runs, in the order they ended (a run whose time is unknown stays
            right after the run before it at its level).
        in_progress: `(namespace, record so far)` of each run still open (and not left by its
            parent).
        copies: Records left out as copies of a record written at another level.
        unreadable: Namespaces whose checkpoints could not be read (their runs read before the
            fault are kept).
    """

    thread_id: str
    ends: list[RunEnd] = field(default_factory=list)
    in_progress: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    copies: int = 0
    unreadable: list[str] = field(default_factory=list)


def level_of(namespace: str) -> str:
    """The level a checkpoint namespace is, by its node names.

    `""` for the top level, `billing` for `billing:1f5b…`, `team/billing` for
    `team:…|billing:…`; cut to `NAME_LIMIT` characters (a namespace is read from the
    database)."""
    if not namespace:
        return ""
    return cut("/".join(part.partition(":")[0] for part in namespace.split("|")))


def grouped(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, list[str]]]:
    """Each thread with its namespaces, one thread at a time.

    `pairs` are `(thread_id, checkpoint_ns)` ordered by thread, as `Database.threads` yields
    them."""
    current: str | None = None
    namespaces: list[str] = []
    for thread_id, namespace in pairs:
        if thread_id != current:
            if current is not None:
                yield current, namespaces
            current, namespaces = thread_id, []
        namespaces.append(namespace)
    if current is not None:
        yield current, namespaces


def _key(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, default=repr)


def _latest(database: Any, thread_id: str, namespace: str) -> tuple[datetime | None, Any]:
    """The time and id of the namespace's newest checkpoint (`(None, None)` when unknown)."""
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}}
    try:
        found = database.records.get_tuple(config)
    except Exception as error:  # what the thread holds, not the database: unknown
        if database_error(error):
            raise
        return None, None
    if found is None or not isinstance(getattr(found, "checkpoint", None), dict):
        return None, None
    moment = found.checkpoint.get("ts")
    try:
        at = datetime.fromisoformat(moment) if isinstance(moment, str) else None
    except ValueError:
        at = None
    return at, found.config["configurable"].get("checkpoint_id")


def _left(
    database: Any,
    thread_id: str,
    namespace: str,
    record: dict[str, Any],
    parents: dict[str, datetime | None],
) -> RunEnd | None:
    """The open run of a child namespace closed, when its parent level went on without it.

    `parents`: the newest checkpoint time of each namespace of the thread read so far (`None`
    before it is read), so a parent of many children is read once."""
    parent = namespace.rpartition("|")[0]
    if not namespace or parent not in parents:
        return None
    child_at, checkpoint_id = _latest(database, thread_id, namespace)
    if parents[parent] is None:
        parents[parent] = _latest(database, thread_id, parent)[0]
    parent_at = parents[parent]
    if child_at is None or parent_at is None or parent_at <= child_at:
        return None  # the parent waits on it (an interrupt inside it): still in progress
    asked = record.get("asked")
    pending = [str(name) for name in asked] if isinstance(asked, list) else []
    closed = {
        **record,
        "rule": HANDED_OFF if pending else "interrupted",
        "stopped": False,
        "tools": pending,
        "tool_call_ids": [],
    }
    return RunEnd(
        thread_id=thread_id,
        checkpoint_ns=namespace,
        ended_at=child_at,
        record=closed,
        checkpoint_id=checkpoint_id,
    )


def thread_runs(
    database: Any, thread_id: str, namespaces: list[str], *, since: datetime | None = None
) -> ThreadRuns:
    """Read every namespace of `thread_id` (see the module) through `database.run_ends`."""
    keyed: list[tuple[datetime | None, int, RunEnd]] = []
    in_progress: list[tuple[str, dict[str, Any]]] = []
    unreadable: list[str] = []
    parents: dict[str, datetime | None] = dict.fromkeys(namespaces)
    for namespace in namespaces:
        before = database.unreadable
        if since is None:
            ends, current = database.run_ends(thread_id, namespace)
        else:
            ends, current = database.run_ends(thread_id, namespace, since=since)
        if database.unreadable > before:
            unreadable.append(namespace)
        if current is not None:
            closed = _left(database, thread_id, namespace, current, parents)
            if closed is None:
                in_progress.append((namespace, current))
            elif since is None or closed.ended_at is None or closed.ended_at >= since:
                ends = [*ends, closed]
        known: datetime | None = None
        for end in ends:  # a run of unknown time stays behind the run before it
            known = end.ended_at or known
            keyed.append((known, len(keyed), end))
    keyed.sort(key=lambda item: (item[0] is None, item[0] or datetime.min, item[1]))
    seen: set[str] = set()
    written_at: dict[str, str] = {}
    kept: list[RunEnd] = []
    copies = 0
    for _, _, end in keyed:
        key = _key(end.record)
        if key in seen and written_at[key] != end.checkpoint_ns:
            copies += 1
            continue
        seen.add(key)
        written_at.setdefault(key, end.checkpoint_ns)
        kept.append(end)
    return ThreadRuns(
        thread_id=thread_id,
        ends=kept,
        in_progress=in_progress,
        copies=copies,
        unreadable=unreadable,
    )
