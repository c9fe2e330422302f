"""`toolstop.report.sources.parquet`: LangSmith and Langfuse Parquet exports read as their JSONL.

The fixtures hold the runs of `langsmith.jsonl` and the observations of `langfuse.jsonl`, as
LangSmith's bulk export (the run data format's columns, the objects as JSON strings, timestamps)
and Langfuse's blob export (`usage_details` a map column, `tool_calls` a list column) write them;
they must read into the conversations written out by hand in `test_sources.py`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("pyarrow", reason="needs pyarrow (the parquet extra)")

import pyarrow as pa
import pyarrow.parquet as pq

from test_sources import ORDER, REFUND, shape
from toolstop.errors import ToolstopConfigError
from toolstop.report.sources import ReadProblems, detect_format, read_conversations

LOGS = Path(__file__).parent / "fixtures" / "logs"
PARQUET = {"langsmith.parquet": "langsmith", "langfuse.parquet": "langfuse"}


@pytest.mark.parametrize("name", sorted(PARQUET))
def test_a_parquet_export_reads_like_its_json_lines(name: str) -> None:
    path = LOGS / name
    assert detect_format(path) == PARQUET[name]
    problems = ReadProblems()
    read = list(read_conversations(path, problems=problems))
    assert [shape(c.messages) for c in read] == [ORDER, REFUND]
    assert [c.tokens for c in read] == ["recorded", "estimated"]
    assert problems.summary() is None
    assert problems.lines == pq.ParquetFile(path).metadata.num_rows  # a row counts as a line
    jsonl = list(read_conversations(LOGS / name.replace(".parquet", ".jsonl")))
    assert [(c.id, c.thread) for c in read] == [(c.id, c.thread) for c in jsonl]


def test_rows_too_long_and_files_pyarrow_cannot_read_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolstop.report.sources._base as base

    monkeypatch.setattr(base, "MAX_LINE_BYTES", 500)
    problems = ReadProblems()
    read = list(read_conversations(LOGS / "langsmith.parquet", problems=problems))
    assert problems.skipped_lines == 1  # the one row whose inputs run over 500 bytes
    assert problems.first is not None
    assert problems.first == "line 6: a value of inputs longer than 500 bytes"
    assert len(read) == 2  # the order trace without its last model call
    # a file that starts as Parquet and is not
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1" + b"\x00" * 64)
    problems = ReadProblems()
    assert list(read_conversations(broken, format="langsmith", problems=problems)) == []
    assert problems.first == "line 1: not a readable Parquet file (ArrowInvalid)"
    # columns of neither export: the format cannot be told
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1]}), other)
    assert detect_format(other) is None


def test_without_pyarrow_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # import raises ImportError
    with pytest.raises(ToolstopConfigError, match=r"toolstop\[parquet\]"):
        detect_format(LOGS / "langsmith.parquet")
    with pytest.raises(ToolstopConfigError, match=r"toolstop\[parquet\]"):
        list(read_conversations(LOGS / "langsmith.parquet", format="langsmith"))


def test_a_folder_of_parquet_files_is_one_export(tmp_path: Path) -> None:
    """As a bulk export partitions them: a trace's runs may fall in two files."""
    table = pq.read_table(LOGS / "langsmith.parquet")
    folder = tmp_path / "export"
    (folder / "day=01").mkdir(parents=True)
    (folder / "day=02").mkdir()
    pq.write_table(table.slice(0, 4), folder / "day=01" / "part-0.parquet")
    pq.write_table(table.slice(4), folder / "day=02" / "part-0.parquet")
    (folder / "_SUCCESS").write_text("")
    assert detect_format(folder) == "langsmith"
    problems = ReadProblems()
    read = list(read_conversations(folder, problems=problems))
    assert [shape(c.messages) for c in read] == [ORDER, REFUND]
    assert (problems.lines, problems.summary()) == (table.num_rows, None)
