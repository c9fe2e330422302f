"""Finished runs, read back from a LangGraph checkpoint database or from JSON log lines.

Checkpoints are read through LangGraph's own savers (`SqliteSaver`, `PostgresSaver`), thread by
thread, newest checkpoint first, a page at a time, so memory stays flat however large the
database. A thread's `stop_record` is written once per run, when the run ends, so each new
version of that channel is one finished run; the run ended at the oldest checkpoint that holds
the version (its `ts`). Every namespace of a thread counts (a toolstop agent used as a subgraph
keeps its runs in its own namespace).

Every value is decoded by `toolstop.report.decode.SafeDecoder`, never by LangGraph's default
serializer (which builds whatever class a blob names): the records saver skips LangChain objects
such as messages without parsing them (the record is plain data); `explain` reads the few
checkpoints it needs with messages built by toolstop from their plain fields.

The database is opened read-only: SQLite with `mode=ro`, PostgreSQL with
`default_transaction_read_only`; neither saver's `setup()` writes anything here.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast
from urllib.parse import quote

from toolstop._redact import connection_string, driver_error, is_postgres, redact
from toolstop.errors import ToolstopConfigError
from toolstop.levels import SUBAGENT_KEY
from toolstop.report.decode import SafeDecoder, install
from toolstop.report.records import capped, cut, out_of_range
from toolstop.report.sources._base import bounded_lines

__all__ = [
    "Database",
    "RunEnd",
    "database_error",
    "is_postgres",
    "log_run_ends",
    "open_database",
    "parse_time",
    "redact",
]

PAGE = 100
"""Checkpoints per read (PostgresSaver loads a whole result set into memory)."""
THREAD_PAGE = 500
"""Threads per read of the thread list."""


@dataclass(frozen=True, kw_only=True)
class RunEnd:
    """One finished run: where it lives and its stop record.

    Attributes:
        thread_id: The thread (`None` in a log line from a run without a checkpointer).
        checkpoint_ns: The checkpoint namespace (`""` for the top-level graph).
        ended_at: When the run ended (the checkpoint's or the log line's time), if known.
        record: The run's stop record as stored (any schema version).
        checkpoint_id: The checkpoint that first holds the record (databases only).
    """

    thread_id: str | None
    checkpoint_ns: str
    ended_at: datetime | None
    record: dict[str, Any]
    checkpoint_id: str | None = None
    subagent: str | None = None
    """The `subagent_tool` the run was called as (`toolstop.levels.SUBAGENT_KEY` in its
    checkpoint's metadata), if any (databases only)."""

    def checkpoint_config(self) -> dict[str, Any]:
        """The config that reads the checkpoint holding the record (`get_tuple`)."""
        return {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": self.checkpoint_ns,
                "checkpoint_id": self.checkpoint_id,
            }
        }


def parse_time(text: str, *, now: datetime | None = None) -> datetime:
    """Parse a `--since` value.

    An ISO date or date-time (UTC unless it says otherwise), or an age like `30m`, `12h`, `7d`, `2w`
    before `now`.

    Raises:
        ToolstopConfigError: for anything else.
    """
    text = text.strip()
    units = {"m": 60, "h": 3600, "d": 86400, "w": 604800}
    if text[-1:] in units and text[:-1].isdigit():
        from datetime import timedelta

        base = now or datetime.now(UTC)
        return base - timedelta(seconds=int(text[:-1]) * units[text[-1]])
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        msg = (
            f"--since takes an ISO date or date-time (2025-05-01, 2025-05-01T12:00+02:00) "
            f"or an age (30m, 12h, 7d, 2w), got {text!r}"
        )
        raise ToolstopConfigError(msg) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class Database:
    """A checkpoint database opened for reading (see `open_database`).

    Attributes:
        location: The database, without a password.
        records: A saver that reads records only (messages are skipped).
        full: A saver that also reads messages (built by toolstop from plain fields).
        rejected: Runs left out because their record holds a number out of range (see
            `toolstop.report.records`).
        unreadable: Threads whose checkpoints could not be read (written with a custom or
            encrypting serializer, undecodable bytes, a checkpoint of the wrong shape); counted
            and reported, their runs are not guessed at.
    """

    def __init__(self, location: str, records: Any, full: Any, query: Any, marker: str) -> None:
        self.location = location
        self.records = records
        self.full = full
        self._query = query
        self._marker = marker
        self.unreadable = 0
        self.rejected = 0

    def threads(self) -> Iterator[tuple[str, str]]:
        """Every `(thread_id, checkpoint_ns)` with checkpoints, in order, a page at a time."""
        m = self._marker
        first = (
            f"SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints "
            f"ORDER BY thread_id, checkpoint_ns LIMIT {THREAD_PAGE}"
        )
        after = (
            f"SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints "
            f"WHERE thread_id > {m} OR (thread_id = {m} AND checkpoint_ns > {m}) "
            f"ORDER BY thread_id, checkpoint_ns LIMIT {THREAD_PAGE}"
        )
        last: tuple[str, str] | None = None
        while True:
            rows = (
                self._query(first, ()) if last is None else self._query(after, (*last[:1], *last))
            )
            yield from rows
            if len(rows) < THREAD_PAGE:
                return
            last = rows[-1]

    def namespaces(self, thread_id: str) -> list[str]:
        """The checkpoint namespaces of `thread_id` (none when the thread is unknown)."""
        m = self._marker
        rows = self._query(
            f"SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints WHERE thread_id = {m} "
            f"ORDER BY checkpoint_ns",
            (thread_id,),
        )
        return [row[1] for row in rows]

    def checkpoints(self, thread_id: str, checkpoint_ns: str) -> Iterator[Any]:
        """The thread's checkpoint tuples, newest first, values decoded for records only."""
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}}
        before = None
        while True:
            page = self.records.list(config, before=before, limit=PAGE)
            count = 0
            with closing(page):
                for item in page:
                    count += 1
                    before = {
                        "configurable": {
                            "checkpoint_id": item.config["configurable"]["checkpoint_id"]
                        }
                    }
                    yield item
            if count < PAGE:
                return

    def run_ends(
        self, thread_id: str, checkpoint_ns: str, *, since: datetime | None = None
    ) -> tuple[list[RunEnd], dict[str, Any] | None]:
        """The thread's finished runs, oldest first, and the record so far of a run in progress.

        The second is `None` when no run is in progress.

        Memory is one page of checkpoints plus the thread's runs; a thread's runs are few
        compared with its checkpoints. With `since`, older checkpoints are not read.

        Never raises for what a thread holds: a thread that cannot be read counts in
        `unreadable` (its runs read before the fault are kept), a record with a number out of
        range counts in `rejected` and is left out. Errors of the database itself (gone,
        corrupt) are raised.
        """
        try:
            ends, in_progress = self._run_ends(thread_id, checkpoint_ns, since)
        except Exception as error:
            if database_error(error):
                raise
            self.unreadable += 1
            return [], None
        kept = [
            replace(end, record=capped(end.record))
            for end in ends
            if out_of_range(end.record) is None
        ]
        self.rejected += len(ends) - len(kept)
        if in_progress is not None:
            in_progress = {} if out_of_range(in_progress) is not None else capped(in_progress)
        return kept, in_progress

    def _run_ends(
        self, thread_id: str, checkpoint_ns: str, since: datetime | None
    ) -> tuple[list[RunEnd], dict[str, Any] | None]:
        ends: list[RunEnd] = []
        seen: set[Any] = set()
        held: dict[str, Any] | None = None
        in_progress: dict[str, Any] | None = None
        newest = True
        opened: dict[int, dict[str, Any]] = {}  # run number -> its newest open state
        for item in self._readable(thread_id, checkpoint_ns):
            checkpoint = item.checkpoint
            values = checkpoint.get("channel_values") or {}
            run = values.get("toolstop_run")
            moment = _moment(checkpoint.get("ts"))
            checkpoint_id = item.config["configurable"]["checkpoint_id"]
            if newest:
                if isinstance(run, dict) and run.get("open") is True:
                    in_progress = run.get("record") if isinstance(run.get("record"), dict) else {}
                newest = False
            elif isinstance(run, dict) and run.get("open") is True:
                _remember_open(opened, run, moment, checkpoint_id)
            record = values.get("stop_record")
            version = _hashable((checkpoint.get("channel_versions") or {}).get("stop_record"))
            if held is not None and version == held["version"]:
                held["ended_at"], held["checkpoint_id"] = moment, checkpoint_id
                if since is not None and moment is not None and moment < since:
                    held = None  # ended before `since`, and so did everything older
                    break
                continue
            if held is not None:
                ends.append(self._end(thread_id, checkpoint_ns, held))
                held = None
            if since is not None and moment is not None and moment < since:
                break
            if isinstance(record, dict) and version not in seen:
                seen.add(version)
                metadata = getattr(item, "metadata", None)
                worker = metadata.get(SUBAGENT_KEY) if isinstance(metadata, dict) else None
                held = {
                    "version": version,
                    "record": record,
                    "ended_at": moment,
                    "checkpoint_id": checkpoint_id,
                    "subagent": cut(worker) if isinstance(worker, str) and worker else None,
                }
        if held is not None:
            ends.append(self._end(thread_id, checkpoint_ns, held))
        for end in _interrupted(thread_id, checkpoint_ns, opened, ends, in_progress):
            # a run last seen open before `since` ended before it, like a record older than it
            if since is None or end.ended_at is None or end.ended_at >= since:
                ends.append(end)
        ends.sort(key=lambda end: (end.ended_at is None, end.ended_at or datetime.min))
        return ends, in_progress

    @staticmethod
    def _end(thread_id: str, checkpoint_ns: str, held: dict[str, Any]) -> RunEnd:
        return RunEnd(
            thread_id=thread_id,
            checkpoint_ns=checkpoint_ns,
            ended_at=held["ended_at"],
            record=held["record"],
            checkpoint_id=held["checkpoint_id"],
            subagent=held["subagent"] if checkpoint_ns else None,
        )

    def _readable(self, thread_id: str, checkpoint_ns: str) -> Iterator[Any]:
        """The thread's checkpoints; one that cannot be decoded (an unknown serialization type,
        undecodable bytes) or is not of a checkpoint's shape (valid msgpack holding a list)
        ends the thread's reading and counts it in `unreadable`."""
        try:
            for item in self.checkpoints(thread_id, checkpoint_ns):
                if not _well_formed(item):
                    self.unreadable += 1
                    return
                yield item
        except Exception as error:
            if database_error(error):
                raise
            self.unreadable += 1


def database_error(error: BaseException) -> bool:
    """An error of the database itself (gone, locked, corrupt), not of what a thread holds."""
    return type(error).__module__.split(".")[0] in ("sqlite3", "psycopg")


def _well_formed(item: Any) -> bool:
    checkpoint = getattr(item, "checkpoint", None)
    return (
        isinstance(checkpoint, dict)
        and isinstance(checkpoint.get("channel_values") or {}, dict)
        and isinstance(checkpoint.get("channel_versions") or {}, dict)
    )


def _hashable(version: Any) -> Any:
    return version if isinstance(version, (str, int, float, type(None))) else repr(version)


def _remember_open(
    opened: dict[int, dict[str, Any]], run: dict[str, Any], moment: Any, checkpoint_id: Any
) -> None:
    """Keep a run's newest open state (checkpoints are read newest first). The calls it left
    open are not known here (messages are not decoded); `toolstop explain` reads them."""
    record = run.get("record")
    number = record.get("run") if isinstance(record, dict) else None
    if isinstance(number, int) and number not in opened and isinstance(record, dict):
        opened[number] = {
            "record": {**record, "rule": "interrupted", "stopped": False},
            "ended_at": moment,
            "checkpoint_id": checkpoint_id,
        }


def _interrupted(
    thread_id: str,
    checkpoint_ns: str,
    opened: dict[int, dict[str, Any]],
    ends: list[RunEnd],
    in_progress: dict[str, Any] | None,
) -> list[RunEnd]:
    """Runs that were open in some checkpoint and never ended, and are not the run in
    progress: runs that never finished. Their record is usually written by the next run (rule
    `interrupted`); when that run ended in the same step, only its own record reached a
    checkpoint, so the aborted run's is rebuilt here from its last open state."""
    ended = {end.record.get("run") for end in ends}
    current = in_progress.get("run") if in_progress else None
    return [
        RunEnd(
            thread_id=thread_id,
            checkpoint_ns=checkpoint_ns,
            ended_at=held["ended_at"],
            record=held["record"],
            checkpoint_id=held["checkpoint_id"],
        )
        for number, held in sorted(opened.items())
        if number not in ended and number != current
    ]


def _savers(saver: Any, conn: Any) -> tuple[Any, Any]:
    """A saver for records (messages skipped) and one for messages, both on the safe decoder."""
    records, full = SafeDecoder(messages=False), SafeDecoder()
    return install(saver(conn, serde=records), records), install(saver(conn, serde=full), full)


@contextmanager
def open_database(db: str) -> Iterator[Database]:
    """Open `db` read-only through LangGraph's savers.

    `db` is a SQLite file path or a `postgresql://` URL.

    Raises:
        ToolstopConfigError: one clear sentence when the database does not exist, cannot be
            reached, or holds no LangGraph checkpoints; or when the saver's package is missing.
    """
    if is_postgres(db):
        with _postgres(db) as database:
            yield database
        return
    with _sqlite(db) as database:
        yield database


@contextmanager
def _sqlite(db: str) -> Iterator[Database]:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        msg = "reading SQLite checkpoints needs: pip install 'toolstop[sqlite]'"
        raise ToolstopConfigError(msg) from None
    path = Path(db).expanduser()
    if not path.is_file():
        msg = f"no database at {redact(db)} (a SQLite file path or a postgresql:// URL)"
        raise ToolstopConfigError(msg)
    # A WAL database opened read-only makes SQLite create its -wal and -shm files beside it;
    # with no -wal file there is nothing but the file to read, so it is opened immutable and
    # nothing is written. A live writer's -wal (and -shm) are read as they are.
    wal = path.with_name(path.name + "-wal").exists()
    uri = f"file:{quote(str(path.resolve()))}?mode=ro" + ("" if wal else "&immutable=1")
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    except sqlite3.Error as error:
        msg = f"{db} is not a readable SQLite database: {error}"
        raise ToolstopConfigError(msg) from None
    with closing(conn):
        if "checkpoints" not in tables:
            msg = f"{db} holds no LangGraph checkpoints (no `checkpoints` table)"
            raise ToolstopConfigError(msg)
        records, full = _savers(SqliteSaver, conn)
        records.setup()  # on an existing database: reads its layout, writes nothing
        full.setup()

        def query(sql: str, params: tuple[Any, ...]) -> list[tuple[str, str]]:
            return [(row[0], row[1]) for row in conn.execute(sql, params)]

        yield Database(db, records, full, query, "?")


@contextmanager
def _postgres(db: str) -> Iterator[Database]:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row
    except ImportError:
        msg = "reading PostgreSQL checkpoints needs: pip install 'toolstop[postgres]'"
        raise ToolstopConfigError(msg) from None
    shown = redact(db)
    try:
        conn = Connection.connect(
            connection_string(db),
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            options="-c default_transaction_read_only=on",
            connect_timeout=10,
        )
    except Exception as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        msg = f"cannot connect to {shown}: {driver_error(reason, db)}"
        raise ToolstopConfigError(msg) from None
    with conn:
        row = conn.execute("SELECT to_regclass('checkpoints') AS found").fetchone()
        if row is None or row["found"] is None:
            msg = f"{shown} holds no LangGraph checkpoints (no `checkpoints` table)"
            raise ToolstopConfigError(msg)

        def query(sql: str, params: tuple[Any, ...]) -> list[tuple[str, str]]:
            rows = conn.execute(sql, params).fetchall()
            return [tuple(r.values()) for r in rows]

        records, full = _savers(PostgresSaver, conn)
        yield Database(shown, records, full, query, "%s")


def log_run_ends(
    stream: IO[bytes] | IO[str],
    *,
    since: datetime | None = None,
    skipped: list[int] | None = None,
    rejected: list[int] | None = None,
) -> Iterator[RunEnd]:
    """Finished runs from JSON lines written by `toolstop.logs.JsonLines`, one line at a time.

    Lines that are not JSON objects, or not a `run_end` event with a record, are skipped and
    counted in `skipped[0]` when a list is given (other loggers' lines may share the file), and
    so are lines as `--from` skips them: longer than `MAX_LINE_BYTES` (never held whole), JSON
    nested too deeply to read. Bytes that are not UTF-8 are read as U+FFFD. A record holding a
    number out of range is left out and counted in `rejected[0]`.
    """
    lines: Iterator[tuple[int, Any]] = bounded_lines(cast("IO[Any]", stream))
    for _, line in lines:
        entry: Any = None
        if line is not None:
            text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
            if not text.strip():
                continue
            try:
                entry = json.loads(text)
            except (ValueError, RecursionError):
                entry = None
        record = entry.get("record") if isinstance(entry, dict) else None
        if (
            not isinstance(entry, dict)
            or entry.get("event") != "run_end"
            or not isinstance(record, dict)
        ):
            if skipped is not None:
                skipped[0] += 1
            continue
        if out_of_range(record) is not None:
            if rejected is not None:
                rejected[0] += 1
            continue
        moment = _moment(entry.get("time"))
        if since is not None and moment is not None and moment < since:
            continue
        thread = entry.get("thread_id")
        yield RunEnd(
            thread_id=None if thread is None else cut(str(thread)),
            checkpoint_ns=cut(str(entry.get("checkpoint_ns") or "")),
            ended_at=moment,
            record=capped(record),
        )
