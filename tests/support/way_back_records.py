"""Stop records with re-ask entries, written into a checkpointer as a run writes them.

Each run is `PER_RUN` checkpoints of its thread: the first ones still hold the thread's previous
record (as the checkpoints of a run in progress do), the last one the run's own record, whose
`reask` entry is about the thread's previous run. Messages ride along so a read decodes what a
real thread holds.

Run as a script, it is the second process of the two-process tests: it writes `--runs` threads
of one tool into a SQLite file or a PostgreSQL schema, and prints `DONE`.
"""

from __future__ import annotations

import argparse
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint

PER_RUN = 6
"""Checkpoints a run writes (a model call, a tool turn, the stop: about six)."""


def record(run: int, tools: Sequence[Any], arm: Any, asked: Any, **reask: Any) -> dict[str, Any]:
    """Run `run`'s stop record, with a re-ask entry about run `run - 1`."""
    entry = {
        "run": run - 1,
        "asked_again": asked,
        "why": "restated" if asked is True else "none",
        "stopped": arm == "canary",
        "arm": arm,
        "tools": list(tools),
        **reask,
    }
    return {
        "schema_version": 5,
        "run": run,
        "rule": "completed",
        "stopped": True,
        "mode": "hard",
        "tools": [t for t in tools if isinstance(t, str)][:1],
        "arm": arm,
        "model_calls": 2,
        "reask": entry,
    }


def _messages(turn: int) -> list[Any]:
    return [
        HumanMessage(f"find the order number {turn}", id=f"h{turn}"),
        AIMessage(
            "",
            id=f"a{turn}",
            tool_calls=[{"name": "lookup", "args": {"q": str(turn)}, "id": f"c{turn}"}],
        ),
        ToolMessage(f"order {turn}: shipped", tool_call_id=f"c{turn}", artifact={"stop": True}),
    ]


def _steps(
    records: Sequence[dict[str, Any] | Any], per_run: int
) -> Iterator[tuple[Any, dict[str, Any], dict[str, Any]]]:
    """Each checkpoint of a thread's runs: `(checkpoint, metadata, new versions)`."""
    messages: list[Any] = []
    held: Any = None
    version = 0
    record_version: int | None = None
    for turn, value in enumerate(records, start=1):
        for step in range(per_run):
            version += 1
            last = step == per_run - 1
            messages = [*messages, *_messages(turn)] if step == 0 else messages
            if last:
                held, record_version = value, version
            checkpoint = empty_checkpoint()
            values: dict[str, Any] = {"messages": messages}
            versions: dict[str, Any] = {"messages": version}
            if record_version is not None:
                values["stop_record"], versions["stop_record"] = held, record_version
            checkpoint["channel_values"] = values
            checkpoint["channel_versions"] = versions
            changed = {"messages": version, **({"stop_record": version} if last else {})}
            yield checkpoint, {"source": "loop", "step": version}, changed


def write_thread(
    saver: Any,
    thread: str,
    records: Sequence[dict[str, Any] | Any],
    *,
    per_run: int = PER_RUN,
    namespace: str = "",
) -> None:
    """Write one thread: a run per record, `per_run` checkpoints each, through `saver.put`."""
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": namespace}}
    for checkpoint, metadata, changed in _steps(records, per_run):
        config = saver.put(config, checkpoint, metadata, changed)


async def awrite_thread(
    saver: Any, thread: str, records: Sequence[dict[str, Any] | Any], *, per_run: int = PER_RUN
) -> None:
    """`write_thread` through `saver.aput` (an async saver)."""
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for checkpoint, metadata, changed in _steps(records, per_run):
        config = await saver.aput(config, checkpoint, metadata, changed)


def population(
    tool: str, arm: str, threads: int, asked: int, *, prefix: str
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """`threads` threads of two runs each: run 2's entry says whether run 1 was asked again,
    `asked` of them yes."""
    for number in range(threads):
        yield (
            f"{prefix}-{arm}-{number}",
            [
                {"schema_version": 5, "run": 1, "rule": "completed", "tools": [tool], "arm": arm},
                record(2, [tool], arm, number < asked),
            ],
        )


def fresh_schema(url: str, prefix: str) -> Iterator[str]:
    """The name of a schema of its own in the test database (other tests' records are not
    read), dropped afterwards: a fixture's body (`yield from fresh_schema(url, "...")`)."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _connection_options(schema: str) -> dict[str, Any]:
    """How a saver's connection is opened: as LangGraph's savers need it, in `schema`."""
    from psycopg.rows import dict_row

    return {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "options": f"-c search_path={schema}",
    }


@contextmanager
def postgres_saver(url: str, schema: str) -> Iterator[Any]:
    """A `PostgresSaver` whose tables live in `schema` (created when missing)."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    with psycopg.connect(url, **_connection_options(schema)) as conn:
        saver = PostgresSaver(conn)  # type: ignore[arg-type]
        saver.setup()
        yield saver


@asynccontextmanager
async def apostgres_saver(url: str, schema: str) -> AsyncIterator[Any]:
    """An `AsyncPostgresSaver` whose tables live in `schema` (made by `postgres_saver`)."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection

    with postgres_saver(url, schema):
        pass  # the schema and its tables
    async with await AsyncConnection.connect(url, **_connection_options(schema)) as conn:
        yield AsyncPostgresSaver(conn)  # type: ignore[arg-type]


async def awrite_arms(saver: Any, tool: str, canary_asked: int, shadow_asked: int) -> None:
    """`population` of both arms of `tool` (40 threads each, prefix `a`) through `aput`."""
    for arm, asked in (("canary", canary_asked), ("shadow", shadow_asked)):
        for thread, records in population(tool, arm, 40, asked, prefix="a"):
            await awrite_thread(saver, thread, records)


@contextmanager
def sqlite_saver(path: str) -> Iterator[Any]:
    """A `SqliteSaver` on its own connection to `path`."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        yield saver
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True, help="a SQLite path or a postgresql:// URL")
    parser.add_argument("--schema", default="", help="the PostgreSQL schema")
    parser.add_argument("--tool", required=True)
    parser.add_argument("--arm", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--asked", type=int, required=True)
    args = parser.parse_args()
    postgres = args.db.startswith("postgresql")
    opened = postgres_saver(args.db, args.schema) if postgres else sqlite_saver(args.db)
    with opened as saver:
        for thread, records in population(
            args.tool, args.arm, args.threads, args.asked, prefix="child"
        ):
            write_thread(saver, thread, records)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
