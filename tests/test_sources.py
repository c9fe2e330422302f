"""`toolstop.report.sources`: every log format reads into the same messages; bad lines are counted.

The expected conversations are written out here by hand from tests/fixtures/logs/README.md (the
same two conversations in each format), not taken from the readers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop.report.sources import (
    FORMATS,
    ReadProblems,
    UnknownFormatError,
    detect_format,
    read_conversations,
)

LOGS = Path(__file__).parent / "fixtures" / "logs"

SYSTEM = "You are the order desk."
ORDER = [
    ("system", SYSTEM, [], None),
    ("human", "Where is order 7?", [], None),
    ("ai", "", [("order", {"id": 7}, "c1")], (120, 10)),
    ("tool", '{"status": "shipped"}', "c1", None),
    ("ai", "Order 7 has shipped.", [], (160, 8)),
]
REFUND = [
    ("human", "Refund order 3", [], None),
    ("ai", "", [("refund", {"order": 3}, "c2"), ("notify", {"order": 3}, "c3")], None),
    ("tool", "Refund r-9 issued.", "c2", None),
    ("tool", "Customer notified.", "c3", None),
    ("ai", "Refund r-9 is issued.", [], None),
]


def shape(messages: tuple[BaseMessage, ...]) -> list[tuple[str, Any, Any, Any]]:
    """Each message as (type, text, tool calls or the answered call id, recorded usage)."""
    shaped = []
    for m in messages:
        if isinstance(m, AIMessage):
            calls: Any = [(c["name"], c["args"], c["id"]) for c in m.tool_calls]
            usage = m.usage_metadata
            figures = None if usage is None else (usage["input_tokens"], usage["output_tokens"])
            shaped.append((m.type, m.content, calls, figures))
        elif isinstance(m, ToolMessage):
            shaped.append((m.type, m.content, m.tool_call_id, None))
        else:
            shaped.append((m.type, m.content, [], None))
    return shaped


@pytest.mark.parametrize("log_format", FORMATS)
def test_every_format_reads_into_the_same_conversations(log_format: str) -> None:
    path = LOGS / f"{log_format}.jsonl"
    problems = ReadProblems()
    conversations = list(read_conversations(path, problems=problems))
    assert [shape(c.messages) for c in conversations] == [ORDER, REFUND]
    assert [c.tokens for c in conversations] == ["recorded", "estimated"]
    assert (problems.skipped_lines, problems.skipped_conversations) == (0, 0)
    assert problems.summary() is None
    # the same with the format given rather than detected
    given = list(read_conversations(path, format=log_format))  # type: ignore[arg-type]
    assert [shape(c.messages) for c in given] == [ORDER, REFUND]


DOCUMENTS = {"openai.json": "openai", "langchain.json": "langchain", "langfuse.json": "langfuse"}
"""The JSON lines fixtures of three formats as one pretty-printed JSON document each: an array
of conversations, `{"conversations": [...]}`, an array of observations."""


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_one_json_document_over_many_lines_reads_the_same(name: str) -> None:
    problems = ReadProblems()
    conversations = list(read_conversations(LOGS / name, problems=problems))
    assert [shape(c.messages) for c in conversations] == [ORDER, REFUND]
    assert problems.summary() is None
    assert detect_format(LOGS / name) == DOCUMENTS[name]
    # each record starts on its own line of the document, as a text editor shows it
    text = (LOGS / name).read_text().splitlines()
    assert all(text[c.line - 1].strip() in ("{", "[") for c in conversations)
    assert conversations[0].line < conversations[1].line


def test_the_format_is_detected_from_the_content(tmp_path: Path) -> None:
    for log_format in FORMATS:
        copy = tmp_path / "log.txt"  # the name says nothing
        copy.write_bytes((LOGS / f"{log_format}.jsonl").read_bytes())
        assert detect_format(copy) == log_format
    # a first line that cannot be read does not decide
    copy.write_text("not json\n" + (LOGS / "langchain.jsonl").read_text())
    assert detect_format(copy) == "langchain"


def test_ids_and_lines() -> None:
    openai = list(read_conversations(LOGS / "openai.jsonl"))
    assert [(c.id, c.line) for c in openai] == [("order-7", 1), ("line-2", 2)]
    langsmith = list(read_conversations(LOGS / "langsmith.jsonl"))
    assert [c.id[-1] for c in langsmith] == ["a", "b"]  # the trace ids
    assert [c.line for c in langsmith] == [1, 3]  # each trace's first run
    assert [c.thread for c in langsmith] == ["t-a", "t-b"]  # extra.metadata.thread_id
    otel = list(read_conversations(LOGS / "otel.jsonl"))
    assert [c.thread for c in otel] == ["thread-7", None]  # gen_ai.conversation.id
    assert all(c.thread is None for c in openai)


def test_an_unknown_format_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "numbers.jsonl"
    path.write_text("1\n2\n")
    with pytest.raises(UnknownFormatError, match=r"cannot be told.*give it"):
        read_conversations(path)
    with pytest.raises(UnknownFormatError, match="unknown log format 'csv'"):
        read_conversations(path, format="csv")  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        read_conversations(tmp_path / "missing.jsonl", format="openai")
    with pytest.raises(ValueError, match="max_open"):
        read_conversations(LOGS / "otel.jsonl", max_open=0)


def _conversation(text: str) -> str:
    return json.dumps({"messages": [{"role": "user", "content": text}, {"role": "assistant"}]})


def test_bad_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    lines = [
        _conversation("one"),
        '{"messages": [{"role": "user", "content": "cut',  # not JSON
        "",  # blank: not a line of the log
        json.dumps({"messages": [{"role": "function", "content": "x"}]}),
        "[[[[" * 10_000 + "]]]]" * 10_000,  # too deep for the decoder
        _conversation("two"),
    ]
    path.write_bytes("\n".join(lines).encode() + b"\n\xff\xfe not utf-8\n")
    problems = ReadProblems()
    read = list(read_conversations(path, format="openai", problems=problems))
    assert [c.messages[0].content for c in read] == ["one", "two"]
    assert (problems.lines, problems.skipped_lines) == (6, 4)
    summary = problems.summary()
    assert summary is not None
    assert summary.startswith("4 of 6 lines could not be read; first: line 2: not JSON")


def test_the_summary_is_escaped_and_masked(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    hostile = "\x1b]0;owned\x07sk-proj-" + "A" * 24
    path.write_text(json.dumps({"messages": [{"role": hostile, "content": "x"}]}) + "\n")
    problems = ReadProblems()
    assert list(read_conversations(path, format="openai", problems=problems)) == []
    summary = problems.summary()
    assert summary is not None
    assert "1 of 1 lines could not be read; first: line 1: message 1: role" in summary
    assert "\x1b" not in summary
    assert "\x07" not in summary
    assert "A" * 24 not in summary


def test_a_line_too_long_is_skipped_without_holding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolstop.report.sources._base as base

    monkeypatch.setattr(base, "MAX_LINE_BYTES", 100)
    monkeypatch.setattr(base, "_PIECE", 7)
    path = tmp_path / "chat.jsonl"
    path.write_text(_conversation("x" * 500) + "\n" + _conversation("short") + "\n")
    problems = ReadProblems()
    read = list(read_conversations(path, format="openai", problems=problems))
    assert [c.messages[0].content for c in read] == ["short"]
    assert problems.first == "line 1: longer than 100 bytes"


def test_conversations_are_streamed(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(_conversation(str(n)) for n in range(1000)) + "\n")
    problems = ReadProblems()
    conversations = read_conversations(path, problems=problems)
    assert next(conversations).messages[0].content == "0"
    assert problems.lines == 1  # one line read for one conversation, not the file


def test_tokens_say_where_the_counts_come_from(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    usage = {"prompt_tokens": 5, "completion_tokens": 1}
    answers = [
        [{"role": "assistant", "content": "a", "usage": usage}],
        [{"role": "assistant", "content": "a", "usage": usage}, {"role": "assistant"}],
        [{"role": "assistant", "content": "a", "usage": {"prompt_tokens": "5"}}],
    ]
    lines = [json.dumps([{"role": "user", "content": "q"}, *a]) for a in answers]
    path.write_text("\n".join(lines) + "\n")
    read = list(read_conversations(path, format="openai"))
    assert [c.tokens for c in read] == ["recorded", "partly", "estimated"]


def test_the_bench_script_reads_what_it_wrote(tmp_path: Path) -> None:
    from sources_bench import (
        MESSAGES_PER_CONVERSATION,
        RUNS_PER_CONVERSATION,
        conversation,
        read,
        write,
    )

    messages = conversation(7)["messages"]
    assert len(messages) == MESSAGES_PER_CONVERSATION
    assert sum(m["role"] == "user" for m in messages) == RUNS_PER_CONVERSATION
    path = tmp_path / "log.jsonl"
    write(path, 30)
    result = read(path)
    assert (result["conversations"], result["messages"]) == (30, 30 * MESSAGES_PER_CONVERSATION)
    assert (result["recorded_tokens"], result["records"], result["skipped_lines"]) == (30, 0, 0)
    assert read(path, limit=3)["conversations"] == 3
    assert read(path, limit=3, records=True)["records"] == 3 * RUNS_PER_CONVERSATION


def test_the_docs_quote_the_stored_log_reading_run() -> None:
    import re

    root = Path(__file__).parent.parent
    stored = json.loads((root / "docs" / "bench" / "sources.json").read_text())
    tenth, whole, with_records = stored["runs"]
    assert all(run["counts_match"] for run in stored["runs"])
    page = (root / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = " ".join(page[page.index("## Reading recorded logs") :].split())
    found = re.search(
        r"a ([\d.]+) MB file.*It read ([\d,]+) conversations \(([\d,]+) messages\) in "
        r"([\d.]+) s, with a peak RSS of ([\d.]+) MB, the same as at ([\d,]+) conversations "
        r"\(([\d.]+) MB\)\. Reading them and making their ([\d,]+) shadow-mode records took "
        r"([\d.]+) s \(peak RSS ([\d.]+) MB\)",
        section,
    )
    assert found is not None
    quoted = [float(x.replace(",", "")) for x in found.groups()]
    assert quoted == [
        stored["file_mb"],
        whole["conversations"],
        whole["messages"],
        whole["seconds"],
        whole["peak_rss_mb"],
        tenth["conversations"],
        tenth["peak_rss_mb"],
        with_records["records"],
        with_records["seconds"],
        with_records["peak_rss_mb"],
    ]


def test_a_document_of_one_conversation_and_its_bad_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolstop.report.sources._base as base

    question = {"role": "user", "content": "q"}
    answer = {"role": "assistant", "content": "a"}
    path = tmp_path / "log.json"
    # an array of messages is one conversation; so is an object with messages
    path.write_text(json.dumps([question, answer], indent=2))
    [read] = read_conversations(path, format="openai")
    assert [m.content for m in read.messages] == ["q", "a"]
    path.write_text(json.dumps({"id": "x", "messages": [question, answer]}, indent=1))
    [read] = read_conversations(path, format="openai")
    assert (read.id, read.line) == ("x", 1)
    # an element too long is passed over without being held; one that is no conversation is
    # counted; a syntax error ends the reading, what came before is kept
    monkeypatch.setattr(base, "MAX_LINE_BYTES", 200)
    long = {"messages": [question, {"role": "assistant", "content": 'x"]}' * 100}]}
    good = {"messages": [question, answer]}
    path.write_text(json.dumps([long, good, {"messages": 3}, good], indent=2)[:-2] + "\n  {,]\n")
    problems = ReadProblems()
    read_all = list(read_conversations(path, format="openai", problems=problems))
    assert [c.line for c in read_all] == [14, 29]
    assert (problems.lines, problems.skipped_lines) == (5, 3)
    assert problems.first == "line 2: longer than 200 bytes"
    summary = problems.summary()
    assert summary is not None
    assert summary.startswith("3 of 5 lines could not be read")
