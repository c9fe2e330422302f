"""Parquet exports, read a batch of rows at a time: LangSmith's bulk export and Langfuse's.

LangSmith's bulk export writes the runs of a project as Parquet files whose columns are the
fields of its run data format (`id`, `trace_id`, `run_type`, `inputs`, `outputs`, `extra`,
`start_time`, `dotted_order`, `prompt_tokens`, ...); Langfuse's blob storage export may write
its observation rows as Parquet too. Each row becomes the plain record the format's reader
takes from a JSON line (`langsmith.read_langsmith`, `langfuse.read_langfuse`): the object
columns, stored as JSON strings, are decoded; timestamps become ISO strings, 16-byte UUIDs
their text, map columns dicts. The row number stands for the line in what is counted.

pyarrow is needed (the `parquet` extra: `pip install 'toolstop[parquet]'`); it is imported
only when a Parquet file is read. A row with a value longer than `MAX_LINE_BYTES` is skipped
and counted; a file pyarrow cannot read is counted once, with what was read before kept.

A folder is read as the Parquet files below it, in the order of their paths, as one export
(LangSmith's bulk export writes a folder per partition): a trace whose runs fall in two files is
still one conversation (within `max_open`), and rows are numbered across the files.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from toolstop.errors import ToolstopConfigError
from toolstop.report.sources import _base
from toolstop.report.sources._base import ReadProblems
from toolstop.report.sources._traces import decoded

__all__ = ["is_parquet", "parquet_folder", "parquet_format", "parquet_records"]

_MAGIC = b"PAR1"
_BATCH_ROWS = 256
_JSON_COLUMNS = frozenset({"inputs", "outputs", "extra", "events", "input", "output", "metadata"})
_JSON_COLUMNS |= {"usage_details", "cost_details", "usage", "usageDetails"}


def _files(path: Path) -> list[Path]:
    """The Parquet files of `path`: itself, or those below a folder in the order of their paths."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*.parquet") if p.is_file())
    return [path]


def parquet_folder(path: Path) -> bool:
    """Whether `path` is a folder holding `*.parquet` files (a Parquet export)."""
    return path.is_dir() and bool(_files(path))


def is_parquet(path: Path) -> bool:
    """Whether `path` starts as a Parquet file does, or is a folder holding `*.parquet` files."""
    if path.is_dir():
        return bool(_files(path))
    try:
        with _base.open_regular(path) as stream:
            return stream.read(4) == _MAGIC
    except OSError:
        return False


def _pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]
    except ImportError:
        msg = (
            "reading a Parquet export needs pyarrow: pip install 'toolstop[parquet]' "
            "(or give the export as JSON lines)"
        )
        raise ToolstopConfigError(msg) from None
    return pq


def parquet_format(path: Path) -> Literal["langsmith", "langfuse"] | None:
    """The export a Parquet file holds, told from its columns (None: neither).

    Raises:
        ToolstopConfigError: pyarrow is not installed.
    """
    pq = _pyarrow_parquet()
    try:
        names = set(pq.read_schema(_files(path)[0]).names)
    except Exception:  # pyarrow's errors vary (OSError, ArrowInvalid, ...)
        return None
    if "run_type" in names:
        return "langsmith"
    if "type" in names and ({"trace_id", "traceId"} & names):
        return "langfuse"
    return None


def _plain(value: Any, column: str | None = None, depth: int = 0) -> Any:
    """A cell as JSON-like data: what a JSON line of the same export would hold."""
    if depth > 64:
        return None
    if isinstance(value, str):
        if len(value) > _base.MAX_LINE_BYTES:
            msg = f"a value of {column or 'a column'} longer than {_base.MAX_LINE_BYTES:,} bytes"
            raise _base.Unreadable(msg)
        return decoded(value) if column in _JSON_COLUMNS else value
    if isinstance(value, bytes):
        if len(value) == 16:
            return str(uuid.UUID(bytes=value))
        return value.decode("utf-8", errors="replace")
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v, None, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(i, tuple) and len(i) == 2 for i in value):  # a map column
            return {str(k): _plain(v, None, depth + 1) for k, v in value}
        return [_plain(v, None, depth + 1) for v in value]
    return value


def parquet_records(path: Path, problems: ReadProblems) -> Iterator[tuple[int, Any]]:
    """(row number, record) for each row of a Parquet file or folder, a batch at a time.

    Raises:
        ToolstopConfigError: pyarrow is not installed.
    """
    pq = _pyarrow_parquet()
    row = 0
    for file in _files(path):
        try:
            batches = pq.ParquetFile(file).iter_batches(batch_size=_BATCH_ROWS)
            for batch in batches:
                for values in batch.to_pylist():
                    row += 1
                    problems.lines += 1
                    try:
                        record = {str(k): _plain(v, str(k)) for k, v in values.items()}
                    except _base.Unreadable as error:
                        problems.line_problem(row, str(error))
                        continue
                    yield row, record
        except Exception as error:  # a file pyarrow cannot read (its errors vary): counted
            problems.lines += 1
            problems.line_problem(row + 1, f"not a readable Parquet file ({type(error).__name__})")
