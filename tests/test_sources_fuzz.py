"""Hostile logs: random and mutated lines never raise; every line is read or counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="needs hypothesis (dev extra)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from toolstop.report.sources import FORMATS, ReadProblems, read_conversations  # noqa: E402
from toolstop.report.sources._document import is_document  # noqa: E402

LOGS = Path(__file__).parent / "fixtures" / "logs"
DOCUMENTS = ("openai", "langchain", "langfuse")
"""The formats also read from one JSON document over many lines."""
EXTRA = {
    "openai": ["openai_legacy.jsonl"],
    "otel": ["otel_semconv.jsonl", "otel_logs.jsonl"],
    "langfuse": ["langfuse_legacy.jsonl"],
}
"""More fixtures of a format, whose lines are mutated too."""
LINES = {
    f: [
        line
        for name in (f"{f}.jsonl", *EXTRA.get(f, ()))
        for line in (LOGS / name).read_text().splitlines()
    ]
    for f in FORMATS
}

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
    | st.sampled_from(["", "user", "assistant", "tool", "ai", "chat", "llm", "{}", "[1]", "7"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replace(value[head], rest, new)
    return copy


@st.composite
def mutated_line(draw: st.DrawFn, log_format: str) -> str:
    """A line of the format's fixture with a few subtrees replaced by random JSON."""
    value = json.loads(draw(st.sampled_from(LINES[log_format])))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(value)))
        value = _replace(value, path, draw(JSON))
    return json.dumps(value)


def _lines_of(log_format: str) -> st.SearchStrategy[list[str]]:
    line = (
        mutated_line(log_format)
        | st.sampled_from(LINES[log_format])
        | JSON.map(json.dumps)
        | st.text(max_size=40).filter(lambda t: "\n" not in t and "\r" not in t)
    )
    return st.lists(line, min_size=1, max_size=6)


@pytest.mark.parametrize("log_format", FORMATS)
def test_random_and_mutated_lines_never_raise(log_format: str, tmp_path_factory: Any) -> None:
    folder = tmp_path_factory.mktemp(log_format)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(lines=_lines_of(log_format))
    def check(lines: list[str]) -> None:
        path = folder / "log.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        problems = ReadProblems()
        read = list(read_conversations(path, format=log_format, problems=problems))  # type: ignore[arg-type]
        # blank as the reader sees it: ASCII white space only (str.strip() would drop \x1f too)
        first = next((line.encode() for line in lines if line.encode().strip()), b"")
        if log_format in DOCUMENTS and is_document(first):
            pass  # one JSON document: its records are counted, not its lines
        else:
            assert problems.lines == sum(1 for line in lines if line.encode().strip())
        if log_format in ("openai", "langchain"):  # one conversation a line: each is accounted for
            assert len(read) + problems.skipped_lines == problems.lines
        summary = problems.summary()
        assert (summary is None) == (problems.first is None)
        if summary is not None:
            assert "\n" not in summary
            assert "\x1b" not in summary

    check()


def _message(kind: str, ids: list[str], text: str) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    if kind == "user":
        return HumanMessage(text)
    if kind == "system":
        return SystemMessage(text)
    if kind == "tool":
        return ToolMessage(text, tool_call_id=ids[0] if ids else "none")
    calls = [{"name": f"t{ord(i) % 2}", "args": {}, "id": i} for i in ids]
    return AIMessage(text, tool_calls=calls)


MESSAGES = st.lists(
    st.builds(
        _message,
        st.sampled_from(["user", "assistant", "assistant", "tool", "tool", "system"]),
        st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=2, unique=True),
        st.sampled_from(["", "ok", "Error: no", '{"done": true}']),
    ),
    max_size=14,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=MESSAGES)
def test_any_order_of_messages_gives_a_record_per_replayable_run(messages: list[Any]) -> None:
    """However a log ends or breaks, the replay and the what-if never raise, and each gives one
    record per run `segment` keeps (the what-if zips the two)."""
    from toolstop.report.sources._runs import segment
    from toolstop.report.sources.shadow import shadow_records
    from toolstop.report.what_if import converted_records

    found = segment(messages)
    users = sum(1 for m in messages if m.type == "human")
    assert len(found.runs) + found.unanswered <= users
    trailing = 0  # user messages after the conversation's last other message
    for message in reversed(messages):
        if message.type == "human":
            trailing += 1
        elif message.type != "system":
            break
    if not found.dropped:  # a dropped part takes an unanswered end with it
        assert found.unanswered == (trailing > 0)
    if found.problem is None:  # every user message is in a run or in the open one at the end
        kept = sum(1 for run in found.runs for m in run if m.type == "human")
        assert kept + trailing * found.unanswered == users
    records = shadow_records(messages)
    assert len(records) == len(found.runs)
    assert [r["run"] for r in records] == list(range(1, len(records) + 1))
    converted = converted_records(messages, {"t0"})
    assert len(converted.records) == len(converted.relays) == len(found.runs)


@st.composite
def document(draw: st.DrawFn, log_format: str) -> str:
    """Records of the format (mutated or not, or random JSON) as one pretty-printed document,
    an array or `{"conversations": [...]}`, sometimes cut short or followed by junk."""
    records = draw(
        st.lists(
            mutated_line(log_format).map(json.loads)
            | st.sampled_from(LINES[log_format]).map(json.loads)
            | JSON,
            min_size=1,
            max_size=5,
        )
    )
    value: Any = {"conversations": records} if draw(st.booleans()) else records
    text = json.dumps(value, indent=draw(st.sampled_from([1, 2, 4])))
    if draw(st.booleans()):
        text = text[: draw(st.integers(1, len(text)))] + draw(st.sampled_from(["", "\n}", ",]"]))
    return text


@pytest.mark.parametrize("log_format", DOCUMENTS)
def test_random_and_mutated_documents_never_raise(log_format: str, tmp_path_factory: Any) -> None:
    folder = tmp_path_factory.mktemp(f"{log_format}-document")

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text=document(log_format))
    def check(text: str) -> None:
        path = folder / "log.json"
        path.write_text(text + "\n", encoding="utf-8")
        problems = ReadProblems()
        read = list(read_conversations(path, format=log_format, problems=problems))  # type: ignore[arg-type]
        if log_format != "langfuse":  # a record a conversation: each is accounted for
            assert len(read) + problems.skipped_lines == problems.lines
        summary = problems.summary()
        assert (summary is None) == (problems.first is None)
        if summary is not None:
            assert "\n" not in summary

    check()


@pytest.mark.parametrize("log_format", ["langsmith", "langfuse"])
def test_random_and_mutated_parquet_rows_never_raise(
    log_format: str, tmp_path_factory: Any
) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="needs pyarrow (the parquet extra)")
    import pyarrow as pa

    folder = tmp_path_factory.mktemp(f"{log_format}-parquet")

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        rows=st.lists(
            mutated_line(log_format).map(json.loads)
            | st.sampled_from(LINES[log_format]).map(json.loads)
            | st.dictionaries(st.sampled_from(["id", "trace_id", "type", "run_type"]), JSON),
            min_size=1,
            max_size=5,
        ),
        junk=st.binary(max_size=64),
    )
    def check(rows: list[Any], junk: bytes) -> None:
        rows = [r if isinstance(r, dict) else {"value": r} for r in rows]
        columns = sorted({key for row in rows for key in row})
        as_text = {  # each cell as the export stores it: text, objects as JSON strings
            c: [
                None if c not in row else row[c] if isinstance(row[c], str) else json.dumps(row[c])
                for row in rows
            ]
            for c in columns
        }
        path = folder / "log.parquet"
        pq.write_table(
            pa.table(as_text, schema=pa.schema([(c, pa.string()) for c in columns])), path
        )
        problems = ReadProblems()
        list(read_conversations(path, format=log_format, problems=problems))  # type: ignore[arg-type]
        assert problems.lines == pq.ParquetFile(path).metadata.num_rows  # a row, a line
        # a file that starts as Parquet and is cut or broken: counted, never raised
        path.write_bytes(path.read_bytes()[: len(junk) * 8] + junk)
        problems = ReadProblems()
        list(read_conversations(path, format=log_format, problems=problems))  # type: ignore[arg-type]
        summary = problems.summary()
        assert (summary is None) == (problems.first is None)

    check()
