"""Where `toolstop demo --thread` keeps conversations: SQLite by default, PostgreSQL by URL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolstop._redact import (
    connection_string,
    driver_error,
    is_postgres,
    mask_sources,
    redact,
)
from toolstop.errors import ToolstopConfigError

__all__ = ["default_db_path", "open_checkpointer"]


def default_db_path() -> Path:
    """`$XDG_DATA_HOME/toolstop/threads.sqlite` (default `~/.local/share/toolstop/...`)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "toolstop" / "threads.sqlite"


@contextmanager
def open_checkpointer(db: str | None) -> Iterator[Any]:
    """A LangGraph checkpointer for `db`: a PostgreSQL URL or keyword string, or a SQLite path.

    Uses LangGraph's own savers (`langgraph-checkpoint-postgres`, `langgraph-checkpoint-sqlite`;
    extras `postgres` and `sqlite`). PostgreSQL tables are created on first use (`setup()`).

    Raises:
        ToolstopConfigError: when the saver's package is missing or the database is unreachable.
    """
    if db and is_postgres(db):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            msg = "PostgreSQL checkpoints need: pip install 'toolstop[postgres]'"
            raise ToolstopConfigError(msg) from None
        try:
            manager = PostgresSaver.from_conn_string(connection_string(db))
            saver = manager.__enter__()
        except Exception as error:
            msg = f"cannot connect to {redact(db)}: {driver_error(str(error), db)}"
            raise ToolstopConfigError(msg) from None
        try:
            saver.setup()
            yield saver
        finally:
            manager.__exit__(None, None, None)
        return
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        msg = "SQLite checkpoints need: pip install 'toolstop[sqlite]'"
        raise ToolstopConfigError(msg) from None
    path = Path(db) if db else default_db_path()
    if db is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not path.parent.is_dir():
        folder = mask_sources(str(path.parent), db)
        msg = f"cannot open {redact(db)}: the folder {folder} does not exist"
        raise ToolstopConfigError(msg)
    with SqliteSaver.from_conn_string(str(path)) as sqlite:
        yield sqlite
