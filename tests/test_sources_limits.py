"""What the trace readers keep per open trace: only what the conversation needs, within limits.

Asserted by the records and characters a trace held (`TraceLimits.peak_*`), never by time or
the process's memory: a 40 MB trace of 46,170 spans, 20 of them chat spans, once held all of
them (104 MB traced); it now holds the 20 chat spans' GenAI fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from toolstop.report.sources import ReadProblems
from toolstop.report.sources._traces import TraceLimits, group_by_trace, kept_size, text_size
from toolstop.report.sources.langfuse import read_langfuse
from toolstop.report.sources.langsmith import MAX_TOOLS, compact_run, read_langsmith
from toolstop.report.sources.otel import compact_span, read_otel


def _attribute(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _chat(trace: str, start: int, history: list[Any], answer: Any) -> dict[str, Any]:
    return {
        "traceId": trace,
        "startTimeUnixNano": str(start),
        "name": "chat gpt",
        "attributes": [
            _attribute("gen_ai.operation.name", "chat"),
            _attribute("gen_ai.input.messages", json.dumps(history)),
            _attribute("gen_ai.output.messages", json.dumps([answer])),
            _attribute("http.request.body", "b" * 500),  # not GenAI: let go
        ],
        "events": [{"name": "http.retry", "attributes": [_attribute("body", "e" * 500)]}],
    }


def _http(trace: str, start: int, **extra: str) -> dict[str, Any]:
    attributes = [_attribute("http.url", "https://example.com/" + "p" * 300)]
    attributes += [_attribute(k, v) for k, v in extra.items()]
    return {"traceId": trace, "startTimeUnixNano": str(start), "attributes": attributes}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def _said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}]}


def _write(path: Path, *lines: list[dict[str, Any]]) -> Path:
    path.write_text(
        "".join(
            json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n"
            for spans in lines
        )
    )
    return path


def _turns(trace: str, count: int) -> list[dict[str, Any]]:
    history: list[Any] = [_user("hi")]
    spans = []
    for n in range(count):
        answer = _said(f"answer {n}")
        spans.append(_chat(trace, 1000 + n, history, answer))
        history = [*history, answer, _user(f"more {n}")]
    return spans


def test_otel_keeps_only_the_chat_spans_genai_fields(tmp_path: Path) -> None:
    noise = [[_http("t", n, **{"gen_ai.system": "x"})] * 50 for n in range(40)]  # 2,000 spans
    turns = _turns("t", 3)
    path = _write(tmp_path / "otel.jsonl", turns[:1], *noise, turns[1:])
    clean = _write(tmp_path / "clean.jsonl", turns)
    limits = TraceLimits()
    problems = ReadProblems()
    [read] = read_otel(path, problems, limits=limits)
    [expected] = read_otel(clean, ReadProblems())
    assert [m.content for m in read.messages] == [m.content for m in expected.messages]
    assert [m.content for m in read.messages][-1] == "answer 2"
    assert limits.peak_records == 3  # the 2,000 HTTP spans were let go on reading
    # the kept text is the GenAI attributes' alone (not the HTTP body, not the event)
    genai = sum(
        len("key")
        + len(item["key"])
        + len("value")
        + len("stringValue")
        + len(item["value"]["stringValue"])
        for span in turns
        for item in span["attributes"]
        if item["key"].startswith("gen_ai.")
    )
    # every kept item weighs (`kept_size`): the GenAI text, and 2 for each non-text item
    kept = [compact_span(span) for span in turns]
    assert limits.peak_bytes == sum(
        kept_size([span.get("attributes"), span.get("events")]) for span in kept
    )
    assert limits.peak_bytes > genai
    assert problems.skipped_conversations == 0


def test_a_trace_of_only_other_spans_is_ignored_not_held(tmp_path: Path) -> None:
    path = _write(tmp_path / "otel.jsonl", [_http("t", n) for n in range(500)])
    limits = TraceLimits()
    problems = ReadProblems()
    assert list(read_otel(path, problems, limits=limits)) == []
    assert (limits.peak_records, problems.ignored_traces) == (0, 1)


def test_the_thread_named_only_by_another_span_is_kept_once(tmp_path: Path) -> None:
    named = [_http("t", n, **{"gen_ai.conversation.id": "thread-7"}) for n in range(300)]
    path = _write(tmp_path / "otel.jsonl", named, _turns("t", 1))
    limits = TraceLimits()
    [read] = read_otel(path, ReadProblems(), limits=limits)
    assert read.thread == "thread-7"
    assert limits.peak_records == 2  # one span naming the thread, one chat span


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        (TraceLimits(records=4), "more than 4 model calls and tool results"),
        (TraceLimits(bytes=2_000), "more than 2,000 characters of messages"),
    ],
)
def test_a_trace_over_a_limit_is_an_unreadable_conversation(
    tmp_path: Path, limits: TraceLimits, reason: str
) -> None:
    path = _write(tmp_path / "otel.jsonl", _turns("big", 12), _turns("small", 2))
    problems = ReadProblems()
    [read] = read_otel(path, problems, limits=limits)
    assert read.id == "small"
    assert problems.skipped_conversations == 1
    assert problems.first == f"line 1: trace 'big' is too large to read: {reason}"
    # the big trace let go of its records at the limit: it never held more
    assert limits.peak_records <= limits.records
    assert limits.peak_bytes <= limits.bytes


def test_grouping_lets_go_of_an_over_limit_trace_at_once() -> None:
    records = [(n, {"t": "a", "n": n}) for n in range(1, 100)] + [(100, {"t": "b", "n": 0})]
    problems = ReadProblems()
    limits = TraceLimits(records=10)
    groups = list(
        group_by_trace(records, lambda r: r["t"], problems, weigh=lambda r: 1, limits=limits)
    )
    assert [(trace, len(kept)) for trace, _, kept in groups] == [("b", 1)]
    assert (problems.skipped_conversations, limits.peak_records) == (1, 10)


def test_text_size_counts_every_string_without_recursion() -> None:
    deep: Any = "abc"
    for _ in range(5_000):
        deep = {"k": [deep]}
    assert text_size(deep) == 3 + 5_000
    assert text_size({"ab": ["cd", 1, None, {"e": "fgh"}]}) == 2 + 2 + 1 + 3


def _run(trace: str, kind: str, order: int, **fields: Any) -> dict[str, Any]:
    return {"id": f"{trace}-{order}", "trace_id": trace, "run_type": kind,
            "dotted_order": f"2026{order:04d}", **fields}  # fmt: skip


def test_langsmith_keeps_only_the_model_and_tool_runs(tmp_path: Path) -> None:
    root = _run("t", "chain", 0, extra={"metadata": {"thread_id": "thread-3"}},
                inputs={"state": "s" * 5_000})  # fmt: skip
    chains = [_run("t", "chain", n, inputs={"state": "s" * 1_000}) for n in range(1, 400)]
    question = [{"role": "user", "content": "hi"}]
    llm = _run("t", "llm", 500, inputs={"messages": question, "state": "x" * 5_000},
               outputs={"choices": [{"message": {"role": "assistant", "content": "hello"}}],
                        "debug": "d" * 5_000},
               prompt_tokens=3, completion_tokens=2)  # fmt: skip
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [root, *chains, llm]))
    limits = TraceLimits()
    [read] = read_langsmith(path, ReadProblems(), limits=limits)
    assert read.thread == "thread-3"
    assert [m.content for m in read.messages] == ["hi", "hello"]
    assert read.messages[-1].usage_metadata["total_tokens"] == 5  # type: ignore[attr-defined]
    assert limits.peak_records == 2  # the root naming the thread, and the llm run
    kept = sum(kept_size(compact_run(run)) for run in (root, llm))  # every field it keeps
    assert limits.peak_bytes == kept
    assert kept < 1_000  # not the state, not the debug output


def test_langfuse_keeps_only_the_generation_and_tool_rows(tmp_path: Path) -> None:
    def row(kind: str, n: int, **fields: Any) -> dict[str, Any]:
        start = f"2026-11-02 10:{n // 60:02d}:{n % 60:02d}.000000"
        return {"id": f"o{n}", "trace_id": "t", "type": kind, "start_time": start, **fields}

    agent = row("AGENT", 0, session_id="thread-5", input="s" * 5_000)
    spans = [row("SPAN", n, input="s" * 1_000, output="o" * 1_000) for n in range(1, 400)]
    question = json.dumps([{"role": "user", "content": "hi"}])
    answer = json.dumps({"role": "assistant", "content": "hello"})
    usage = {"input": 3, "output": 2}
    generation = row("GENERATION", 500, input=question, output=answer,
                     metadata={"state": "x" * 5_000}, usage_details=usage)  # fmt: skip
    path = tmp_path / "observations.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [agent, *spans, generation]))
    limits = TraceLimits()
    [read] = read_langfuse(path, ReadProblems(), limits=limits)
    assert read.thread == "thread-5"  # named by the agent row alone, which was let go
    assert [m.content for m in read.messages] == ["hi", "hello"]
    assert limits.peak_records == 1  # the generation
    # the generation's input and output (every kept item weighs), not the spans, not the metadata
    assert limits.peak_bytes == kept_size([question, answer, None])
    # over a limit: the trace is counted, not read
    problems = ReadProblems()
    assert list(read_langfuse(path, problems, limits=TraceLimits(bytes=10))) == []
    assert problems.first is not None
    assert "too large to read: more than 10 characters of messages" in problems.first


def test_langsmith_counts_tool_definitions_and_keeps_one_list_per_trace(tmp_path: Path) -> None:
    question = [{"role": "user", "content": "hi"}]
    answer = {"choices": [{"message": {"role": "assistant", "content": "hello"}}]}
    tools = [{}] * (MAX_TOOLS + 500)  # no string at all: once counted as nothing
    runs = [
        _run(
            "t",
            "llm",
            n,
            inputs={"messages": question},
            outputs=answer,
            extra={"invocation_params": {"tools": tools}},
        )
        for n in range(10)
    ]
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    limits = TraceLimits()
    [read] = read_langsmith(path, ReadProblems(), limits=limits)
    assert len(read.tools) == MAX_TOOLS  # the first run's, cut
    one = kept_size(compact_run(runs[0]))
    rest = kept_size(compact_run({**runs[1], "extra": {}}))
    assert one >= 2 * MAX_TOOLS  # each {} counted
    assert limits.peak_bytes == one + 9 * rest  # the other runs' lists let go
    # a trace whose tool definitions pass the limit is counted, not held
    problems = ReadProblems()
    assert list(read_langsmith(path, problems, limits=TraceLimits(bytes=MAX_TOOLS))) == []
    assert problems.skipped_conversations == 1
    assert problems.first is not None
    assert "too large to read" in problems.first


def test_a_thread_over_its_limits_is_counted_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    import toolstop.report.from_logs as from_logs
    from toolstop.report.sources._base import conversation

    def trace(n: int, thread: str) -> Any:
        messages = [HumanMessage(f"question {n} " + "w" * 100), AIMessage("answer")]
        return conversation(f"T{n}", messages, line=n + 1, thread=thread)

    monkeypatch.setattr(from_logs, "THREAD_LIMITS", (1_000, 5_000))
    held: list[int] = []
    _add = from_logs._add

    def watched(thread: Any, item: Any) -> None:
        _add(thread, item)
        held.append(thread.size)

    monkeypatch.setattr(from_logs, "_add", watched)
    items = [trace(n, "TH") for n in range(300)] + [trace(300, "small")]
    problems = ReadProblems()
    joined = list(from_logs.join_threads(items, problems=problems))
    assert [item.thread for item in joined] == ["small"]
    assert max(held) <= 5_000 + 200  # let go as soon as it passed the limit
    assert problems.skipped_conversations == 1
    assert problems.first is not None
    assert "thread 'TH' is too large to read: more than 5,000 characters" in problems.first
    monkeypatch.setattr(from_logs, "THREAD_LIMITS", (100, 10**9))
    problems = ReadProblems()
    assert len(list(from_logs.join_threads(items, problems=problems))) == 1
    assert problems.first is not None
    assert "more than 100 messages" in problems.first


def test_otel_and_langfuse_weigh_every_item_they_keep() -> None:
    """A second review: OTel GenAI attributes holding arrays of empty key-value lists weighed 0
    (only strings were counted), so 151 MB of them peaked at 1.78 GB before a trace's cap let
    go. Every item kept now weighs, as in the LangSmith reader."""
    from toolstop.report.sources import langfuse, otel

    empties = [[] for _ in range(1000)]
    span = {"attributes": [{"key": "gen_ai.x", "value": {"arrayValue": {"values": empties}}}]}
    assert otel._weigh(span) >= 2 * 1000
    row = {"type": "GENERATION", "input": empties, "output": None, "tool_calls": None}
    assert langfuse._weigh(row) >= 2 * 1000
