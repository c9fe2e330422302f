"""`toolstop.report.sources.parquet`: LangSmith and Langfuse Parquet exports read as their JSONL.

The fixtures hold the runs of `langsmith.jsonl` and the observations of `langfuse.jsonl`, as
LangSmith's bulk export (the run data format's columns, the objects as JSON strings, timestamps)
and Langfuse's blob export (`usage_details` a map column, `tool_calls` a list column) write them;
they must read into the conversations written out by hand in `test_sources.py`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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


def test_a_decompression_bomb_is_decoded_a_bounded_slice_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolstop.report.sources._base as base
    import toolstop.report.sources.parquet as parquet

    monkeypatch.setattr(base, "MAX_LINE_BYTES", 3000)
    monkeypatch.setattr(parquet, "_DECODED_BYTES", 3000)
    monkeypatch.setattr(parquet, "_ROW_GROUP_BYTES", 100_000)
    big = '{"messages": [{"role": "user", "content": "' + "A" * 1000 + '"}]}'
    huge = '{"messages": [{"role": "user", "content": "' + "A" * 5000 + '"}]}'
    rows = 1000  # one value repeated: a few KB on disk, a MB decoded
    values = pa.DictionaryArray.from_arrays(
        pa.array([0] * rows + [1], pa.int32()), pa.array([big, huge])
    )
    table = pa.table(
        {
            "id": [f"r{i}" for i in range(rows + 1)],
            "trace_id": [f"t{i}" for i in range(rows + 1)],
            "run_type": ["llm"] * (rows + 1),
            "inputs": values,
        }
    )
    bomb = tmp_path / "bomb.parquet"
    pq.write_table(table, bomb, compression="zstd", use_dictionary=True)
    assert bomb.stat().st_size < 20_000
    decoded: list[int] = []
    decode = parquet._decode

    def measured(batch: Any) -> list[dict[str, Any]]:
        found = decode(batch)
        decoded.append(sum(len(str(v)) for row in found for v in row.values()))
        return found

    monkeypatch.setattr(parquet, "_decode", measured)
    problems = ReadProblems()
    read = list(parquet.parquet_records(bomb, problems))
    assert max(decoded) <= 3000  # never more than the cap decoded at once
    assert sum(decoded) <= 100_000 + 3000  # the group read no further past its cap
    assert problems.lines == rows + 1
    assert len(read) + problems.skipped_lines == rows + 1
    assert problems.first is not None
    assert "a row group of rows decoding to" in problems.first
    # a row group the metadata says is over the cap is not read at all
    monkeypatch.setattr(parquet, "_ROW_GROUP_BYTES", 1000)
    decoded.clear()
    problems = ReadProblems()
    assert list(parquet.parquet_records(bomb, problems)) == []
    assert decoded == []
    assert problems.skipped_lines == problems.lines == rows + 1
    assert problems.first is not None
    assert "bytes uncompressed, more than 1,000" in problems.first


def test_a_value_over_the_cap_is_skipped_before_it_is_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolstop.report.sources._base as base
    import toolstop.report.sources.parquet as parquet

    monkeypatch.setattr(base, "MAX_LINE_BYTES", 100)
    path = tmp_path / "runs.parquet"
    inputs = pa.array(["x" * 50, "y" * 500, "z" * 50]).dictionary_encode()
    table = pa.table({"id": ["a", "b", "c"], "run_type": ["llm"] * 3, "inputs": inputs})
    pq.write_table(table, path)
    seen: list[Any] = []
    decode = parquet._decode
    monkeypatch.setattr(parquet, "_decode", lambda b: seen.extend(decode(b)) or decode(b))
    problems = ReadProblems()
    assert [row for row, _ in parquet.parquet_records(path, problems)] == [1, 3]
    assert problems.first == "line 2: a value of inputs longer than 100 bytes"
    assert all(len(str(v)) <= 100 for row in seen for v in row.values())
