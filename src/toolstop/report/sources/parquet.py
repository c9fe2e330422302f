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
_ROW_GROUP_BYTES = 1024 * 1024 * 1024
"""A row group larger than this (1 GiB) uncompressed by the file's metadata is not read, and
one whose rows decode to more (a dictionary's value repeated) is read no further."""
_DECODED_BYTES = 64 * 1024 * 1024
"""A row decoding to more than this (64 MiB, as a line) is skipped, and at most this much of
values is decoded at once."""
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


def _sizes(batch: Any) -> tuple[list[int], dict[str, list[int]]]:
    """Each row's decoded size in bytes, and each text column's value sizes, from the Arrow
    batch, before any value is decoded: a dictionary-encoded column is measured by its
    dictionary's lengths taken per row (one 4 MB value repeated costs 4 MB a row, not once)."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    rows = batch.num_rows
    totals = [0] * rows
    texts: dict[str, list[int]] = {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        lengths: Any = None
        if pa.types.is_dictionary(column.type) and _is_text(column.type.value_type):
            lengths = pc.take(pc.binary_length(column.dictionary), column.indices)
        elif _is_text(column.type):
            lengths = pc.binary_length(column)
        if lengths is not None:
            found = [n or 0 for n in lengths.to_pylist()]
            texts[str(name)] = found
        else:  # other columns: their Arrow size, shared by the rows
            found = [column.nbytes // max(rows, 1) + 1] * rows
        totals = [a + b for a, b in zip(totals, found, strict=True)]
    return totals, texts


def _is_text(kind: Any) -> bool:
    import pyarrow as pa

    return bool(
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


def _decode(batch: Any) -> list[dict[str, Any]]:
    """The rows of an Arrow batch as Python values (its decoded size checked before)."""
    return batch.to_pylist()  # type: ignore[no-any-return]


def _too_long(size: int, texts: dict[str, list[int]], index: int) -> str | None:
    """Why row `index` is not decoded (a value or the row too long), or None."""
    limit = _base.MAX_LINE_BYTES
    for column, sizes in texts.items():
        if sizes[index] > limit:
            return f"a value of {column} longer than {limit:,} bytes"
    if size > _DECODED_BYTES:
        return f"a row of {size:,} bytes decoded, longer than {_DECODED_BYTES:,} bytes"
    return None


def parquet_records(path: Path, problems: ReadProblems) -> Iterator[tuple[int, Any]]:
    """(row number, record) for each row of a Parquet file or folder, a batch at a time.

    Bounded however well the file compresses: text columns are read dictionary-encoded and
    each row's decoded size is measured before it is decoded (`_sizes`). A row group whose
    uncompressed size (the file's metadata) passes `_ROW_GROUP_BYTES` is counted as unreadable,
    not read, and one whose rows decode to more is read no further (its other rows counted); a
    row over `_DECODED_BYTES`, or with a value over `MAX_LINE_BYTES`, is skipped and counted,
    and at most `_DECODED_BYTES` of values are decoded at once (`_decode`).

    Raises:
        ToolstopConfigError: pyarrow is not installed.
    """
    pq = _pyarrow_parquet()
    row = 0
    for file in _files(path):
        try:
            schema = pq.read_schema(file)
            texts = [
                n for n, kind in zip(schema.names, schema.types, strict=True) if _is_text(kind)
            ]
            parquet = pq.ParquetFile(file, read_dictionary=texts)
            for group in range(parquet.num_row_groups):
                meta = parquet.metadata.row_group(group)
                rows, size = meta.num_rows, meta.total_byte_size
                if size > _ROW_GROUP_BYTES:
                    _skip(problems, row, rows, f"{size:,} bytes uncompressed")
                    row += rows
                    continue
                decoded = [0, 0]  # bytes decoded in the group, rows of the batch taken
                end = row + rows
                for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, row_groups=[group]):
                    yield from _rows(batch, row, problems, decoded)
                    row += decoded[1]
                    if decoded[0] > _ROW_GROUP_BYTES and row < end:
                        _skip(problems, row, end - row, f"rows decoding to {decoded[0]:,} bytes")
                        row = end
                        break
        except Exception as error:  # a file pyarrow cannot read (its errors vary): counted
            problems.lines += 1
            problems.line_problem(row + 1, f"not a readable Parquet file ({type(error).__name__})")


def _skip(problems: ReadProblems, row: int, rows: int, why: str) -> None:
    """Count `rows` rows after `row` of a row group over `_ROW_GROUP_BYTES` as unreadable."""
    problems.lines += rows
    problems.skipped_lines += max(rows - 1, 0)
    reason = f"a row group of {why}, more than {_ROW_GROUP_BYTES:,}: {rows:,} rows not read"
    problems.line_problem(row + 1, reason)


def _rows(
    batch: Any, row: int, problems: ReadProblems, decoded: list[int]
) -> Iterator[tuple[int, Any]]:
    """The records of one batch, numbered after `row`, decoded a slice of at most
    `_DECODED_BYTES` at a time; a row over it skipped and counted, never decoded."""
    totals, texts = _sizes(batch)
    start, held = 0, 0

    def flush(end: int) -> Iterator[tuple[int, Any]]:
        for offset, values in enumerate(_decode(batch.slice(start, end - start))):
            number = row + start + offset + 1
            problems.lines += 1
            try:
                record = {str(k): _plain(v, str(k)) for k, v in values.items()}
            except _base.Unreadable as error:
                problems.line_problem(number, str(error))
                continue
            yield number, record

    for index, size in enumerate(totals):
        if decoded[0] > _ROW_GROUP_BYTES:  # the rest of the group is not decoded
            yield from flush(index)
            decoded[1] = index
            return
        reason = _too_long(size, texts, index)
        if reason is not None:
            yield from flush(index)
            problems.lines += 1
            problems.line_problem(row + index + 1, reason)
            start, held = index + 1, 0
            continue
        if held + size > _DECODED_BYTES and index > start:
            yield from flush(index)
            start, held = index, 0
        held += size
        decoded[0] += size
    yield from flush(len(totals))
    decoded[1] = len(totals)
