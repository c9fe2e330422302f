"""Each log format's own cases: its variants, its bad records, and how traces are grouped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from toolstop.report.sources import Conversation, ReadProblems, detect_format, read_conversations

LOGS = Path(__file__).parent / "fixtures" / "logs"


def _read(
    tmp_path: Path, log_format: str, *records: Any
) -> tuple[list[Conversation], ReadProblems]:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    problems = ReadProblems()
    return list(read_conversations(path, format=log_format, problems=problems)), problems  # type: ignore[arg-type]


# OpenAI chat


def test_openai_variants(tmp_path: Path) -> None:
    conversation = {
        "id": 42,
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}]},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "k", "type": "function", "function": {"name": "f", "arguments": "{x"}},
                    {"type": "function", "function": {"name": "g", "arguments": ""}},
                ],
                "usage": {"input_tokens": 3, "output_tokens": 2},
            },
            {"role": "tool", "tool_call_id": "k", "content": "bad args", "status": "error"},
        ],
    }
    [read], problems = _read(tmp_path, "openai", conversation)
    assert problems.skipped_lines == 0
    assert read.id == "42"
    system, human, answer, result = read.messages
    assert (system.type, system.content, human.content) == ("system", "Be brief.", "a")
    assert isinstance(answer, AIMessage)
    # arguments that are not JSON: LangChain's invalid tool call, not a made-up {}
    assert [(c["name"], c["args"], c["id"]) for c in answer.invalid_tool_calls] == [
        ("f", "{x", "k")
    ]
    # no id: a deterministic one; empty arguments: no arguments
    assert [(c["name"], c["args"], c["id"]) for c in answer.tool_calls] == [
        ("g", {}, "message 3-call-1")
    ]
    assert answer.usage_metadata == {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
    assert isinstance(result, ToolMessage)
    assert result.status == "error"


def test_openai_records_that_are_not_conversations(tmp_path: Path) -> None:
    read, problems = _read(
        tmp_path,
        "openai",
        {"messages": "hi"},
        {"messages": [{"role": "tool", "content": "orphan"}]},
        {"messages": [{"role": "assistant", "tool_calls": {"name": "f"}}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]},
        {"messages": [{"role": "user", "content": 7}]},
        {"messages": [{"role": "function", "name": "f", "content": "legacy"}]},
    )
    assert read == []
    assert (problems.lines, problems.skipped_lines) == (6, 6)
    assert problems.first is not None
    assert problems.first.startswith("line 1: not a conversation")


def test_openai_legacy_function_calls_and_a_line_usage(tmp_path: Path) -> None:
    call = {"name": "f", "arguments": '{"x": 1}'}
    read, problems = _read(
        tmp_path,
        "openai",
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "function_call": call},
                {"role": "assistant", "function_call": {"name": "g"}},
                {"role": "function", "name": "f", "content": "one"},
                {"role": "assistant", "content": "a"},
                {"role": "assistant", "content": "b"},
            ],
            # two answers without usage: the line's is their total, given to neither
            "usage": {"prompt_tokens": 9, "completion_tokens": 2},
        },
        # a function result answers only a call of its name
        [
            {"role": "assistant", "function_call": {"name": "f"}},
            {"role": "function", "name": "g", "content": "x"},
        ],
    )
    [conversation] = read
    _, first, second, result, *answers = conversation.messages
    assert isinstance(first, AIMessage)
    assert isinstance(second, AIMessage)
    assert [(c["name"], c["args"], c["id"]) for c in first.tool_calls] == [
        ("f", {"x": 1}, "message 2-function_call")
    ]
    assert [c["args"] for c in second.tool_calls] == [{}]
    assert isinstance(result, ToolMessage)
    assert (result.tool_call_id, result.content) == ("message 2-function_call", "one")
    assert [m.usage_metadata for m in answers if isinstance(m, AIMessage)] == [None, None]
    assert problems.skipped_lines == 1
    assert problems.first is not None
    assert "no function_call of its name" in problems.first


# LangChain message dicts


def test_langchain_serialized_and_flat_forms(tmp_path: Path) -> None:
    serialized = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "AIMessageChunk"],
        "kwargs": {
            "content": "",
            "additional_kwargs": {
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ]
            },
            "usage_metadata": {"input_tokens": 4, "output_tokens": 1, "total_tokens": 5},
        },
    }
    result = {"type": "tool", "content": "r", "tool_call_id": "c", "artifact": {"k": [1]}}
    [read], problems = _read(
        tmp_path, "langchain", [{"type": "human", "content": "q"}, serialized, result]
    )
    assert problems.summary() is None
    human, answer, tool = read.messages
    assert human.content == "q"
    assert isinstance(answer, AIMessage)
    assert answer.tool_calls[0]["name"] == "f"
    assert read.tokens == "recorded"
    assert isinstance(tool, ToolMessage)
    assert tool.artifact == {"k": [1]}


def test_langchain_never_builds_a_class_the_log_names(tmp_path: Path) -> None:
    """The `id` path picks nothing: only the four message kinds are built, by toolstop."""
    hostile = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "llms", "openai", "OpenAI"],
        "kwargs": {"content": "x", "openai_api_key": {"lc": 1, "type": "secret", "id": ["K"]}},
    }
    read, problems = _read(
        tmp_path,
        "langchain",
        [hostile],
        [{"type": "function", "data": {"content": "x", "name": "f"}}],
        [{"type": "ai", "data": {"content": "", "tool_calls": [{"name": "f", "args": "{}"}]}}],
        [{"type": "tool", "data": {"content": "no call id"}}],
    )
    assert read == []
    assert problems.skipped_lines == 4


# LangSmith run export


def _run(trace: str, run_type: str, order: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"{trace}-{order}",
        "trace_id": trace,
        "run_type": run_type,
        "dotted_order": f"2026{order:04d}",
        **fields,
    }


def _lc_ai(**kwargs: Any) -> dict[str, Any]:
    return {"lc": 1, "type": "constructor", "id": ["AIMessage"], "kwargs": kwargs}


def test_langsmith_tool_runs_give_results_no_history_shows(tmp_path: Path) -> None:
    asked = _lc_ai(content="", tool_calls=[{"name": "f", "args": {}, "id": "c"}])
    tool_output = {
        "lc": 1,
        "type": "constructor",
        "id": ["ToolMessage"],
        "kwargs": {"content": "done", "tool_call_id": "c", "status": "error"},
    }
    [read], _ = _read(
        tmp_path,
        "langsmith",
        # out of order in the file: the dotted order decides
        _run("t", "tool", 2, outputs={"output": tool_output}),
        _run(
            "t",
            "llm",
            1,
            inputs={"messages": [{"role": "user", "content": "go"}]},
            outputs={
                "generations": [[{"message": asked}]],
                "llm_output": {"token_usage": {"prompt_tokens": 9, "completion_tokens": 2}},
            },
        ),
    )
    human, answer, result = read.messages
    assert human.content == "go"
    assert isinstance(answer, AIMessage)
    assert answer.usage_metadata is not None
    assert answer.usage_metadata["input_tokens"] == 9  # from llm_output.token_usage
    assert isinstance(result, ToolMessage)
    assert (result.content, result.tool_call_id, result.status) == ("done", "c", "error")


def test_langsmith_openai_wrapper_output_and_traces_without_a_model(tmp_path: Path) -> None:
    read, problems = _read(
        tmp_path,
        "langsmith",
        _run(
            "w",
            "llm",
            1,
            inputs={"messages": [{"role": "user", "content": "q"}]},
            outputs={
                "choices": [{"message": {"role": "assistant", "content": "a"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            },
        ),
        _run("c", "chain", 1, inputs={}, outputs={}),
        {"no": "run_type"},
        _run("h", "llm", 1, inputs={}, outputs={"output": {"role": "user", "content": "?"}}),
    )
    assert [m.content for m in read[0].messages] == ["q", "a"]
    assert read[0].tokens == "recorded"
    assert problems.ignored_traces == 1  # the chain without a chat model
    assert (problems.skipped_lines, problems.skipped_conversations) == (1, 1)


def test_langsmith_grouping_is_bounded(tmp_path: Path) -> None:
    """With one trace open at a time, a run of trace a after trace b began is counted."""
    problems = ReadProblems()
    read = list(read_conversations(LOGS / "langsmith.jsonl", max_open=1, problems=problems))
    # file order: a, a, b, a, b, a, b: b's first run closes a, so a's last two runs are late
    assert problems.skipped_lines == 2
    assert problems.first is not None
    assert "sort the export by trace" in problems.first
    assert [len(c.messages) for c in read] == [3, 5]  # a: its first model call only
    # sorted by trace, one open trace is enough
    lines = (LOGS / "langsmith.jsonl").read_text().splitlines()
    by_trace = sorted(lines, key=lambda line: json.loads(line)["trace_id"])
    (tmp_path / "sorted.jsonl").write_text("\n".join(by_trace) + "\n")
    problems = ReadProblems()
    read = list(read_conversations(tmp_path / "sorted.jsonl", max_open=1, problems=problems))
    assert problems.summary() is None
    assert [len(c.messages) for c in read] == [5, 5]


# OpenTelemetry GenAI spans


def _attribute(key: str, value: Any) -> dict[str, Any]:
    kind = "intValue" if isinstance(value, int) else "stringValue"
    return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}


def _span(trace: str, start: int, status: Any = None, **attributes: Any) -> dict[str, Any]:
    return {
        "traceId": trace,
        "spanId": f"{start:016x}",
        "startTimeUnixNano": str(start),
        "attributes": [_attribute(k.replace("_", "."), v) for k, v in attributes.items()],
        "status": status or {},
    }


def _export(*spans: Any) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


def test_otel_execute_tool_spans_answer_calls(tmp_path: Path) -> None:
    asked = [{"role": "assistant", "parts": [{"type": "tool_call", "name": "f", "id": "c"}]}]
    question = [{"role": "user", "parts": [{"type": "text", "content": "go"}]}]
    [read], _ = _read(
        tmp_path,
        "otel",
        _export(
            {
                **_span("t", 2, {"code": 2}, gen_ai_operation_name="execute_tool"),
                "attributes": [
                    _attribute("gen_ai.operation.name", "execute_tool"),
                    _attribute("gen_ai.tool.call.id", "c"),
                    _attribute("gen_ai.tool.call.result", "boom"),
                ],
            },
            {
                **_span("t", 1),
                "attributes": [
                    _attribute("gen_ai.operation.name", "chat"),
                    _attribute("gen_ai.input.messages", json.dumps(question)),
                    _attribute("gen_ai.output.messages", json.dumps(asked)),
                    _attribute("gen_ai.usage.input_tokens", 12),
                ],
            },
        ),
    )
    human, answer, result = read.messages
    assert human.content == "go"
    assert isinstance(answer, AIMessage)
    assert answer.tool_calls[0]["args"] == {}
    assert answer.usage_metadata is None  # input tokens alone are not a usage
    assert isinstance(result, ToolMessage)
    assert (result.content, result.status) == ("boom", "error")


def test_otel_spans_without_content_are_counted(tmp_path: Path) -> None:
    chat = _span("t", 1)
    chat["attributes"] = [_attribute("gen_ai.operation.name", "chat")]
    read, problems = _read(tmp_path, "otel", _export(chat), {"not": "otlp"})
    assert read == []
    assert (problems.skipped_lines, problems.skipped_conversations) == (1, 1)
    summary = problems.summary()
    assert summary is not None
    assert "1 conversation could not be read" in summary


def test_otel_a_line_of_bad_spans_counts_once(tmp_path: Path) -> None:
    no_trace = {"spanId": "1", "attributes": []}
    read, problems = _read(tmp_path, "otel", _export(no_trace, no_trace, no_trace))
    assert read == []
    assert (problems.lines, problems.skipped_lines) == (1, 1)
    assert problems.first == "line 1: a record without a trace id"


# Langfuse observations


def _observation(trace: str, kind: str, start: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"{trace}-{start}",
        "trace_id": trace,
        "type": kind,
        "start_time": f"2026-11-02 10:00:{start:02d}.000000",
        **fields,
    }


def test_langfuse_tool_calls_column_errors_and_tool_definitions(tmp_path: Path) -> None:
    definition = {"role": "tool", "content": {"type": "function", "function": {"name": "f"}}}
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    [read], problems = _read(
        tmp_path,
        "langfuse",
        {
            "data": [  # an API page
                _observation(
                    "t",
                    "TOOL",
                    2,
                    output="",
                    level="ERROR",
                    status_message="timed out",
                    metadata=json.dumps({"tool_call_id": "c"}),
                ),
                _observation(
                    "t",
                    "GENERATION",
                    1,
                    input="go",  # a prompt's text
                    output=json.dumps({"role": "assistant", "content": ""}),
                    tool_calls=[json.dumps(call)],
                    usage_details={"input": 7, "input_cached_tokens": 3, "output": 2, "total": 12},
                ),
                _observation("t", "SPAN", 0, input="ignored"),
            ]
        },
        _observation(
            "t",
            "GENERATION",
            3,
            # the history leaves the call's result out: the TOOL row gives it
            input=json.dumps(
                [
                    {"role": "user", "content": "go"},
                    {"role": "assistant", "tool_calls": [call]},
                    definition,
                ]
            ),
            output="sorry",
            usage={"input": 5, "output": 1, "total": 6, "inputCost": 0.5},
        ),
        {"type": "GENERATION"},  # no trace id
    )
    human, asked, result, answer = read.messages
    assert human.content == "go"
    assert isinstance(asked, AIMessage)
    assert [(c["name"], c["id"]) for c in asked.tool_calls] == [("f", "c")]  # from tool_calls
    assert asked.usage_metadata == {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
    assert isinstance(result, ToolMessage)
    assert (result.content, result.status) == ("timed out", "error")
    assert isinstance(answer, AIMessage)
    assert answer.content == "sorry"
    assert answer.usage_metadata == {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}
    assert problems.skipped_lines == 1
    assert problems.first == "line 3: not a Langfuse observation (a type, a trace id)"


def test_langfuse_output_that_is_not_an_answer_is_counted(tmp_path: Path) -> None:
    read, problems = _read(
        tmp_path,
        "langfuse",
        _observation("t", "GENERATION", 1, input="q", output={"role": "user", "content": "?"}),
        _observation("u", "TOOL", 1, output="no call id, no model call"),
    )
    assert read == []
    assert (problems.skipped_conversations, problems.ignored_traces) == (1, 1)


def test_otel_details_events_as_log_records(tmp_path: Path) -> None:
    """The logs alone: each details record a call; on a span of the file: that span's content."""
    lines = (LOGS / "otel_logs.jsonl").read_text().splitlines()
    logs_only = tmp_path / "logs.jsonl"
    logs_only.write_text(lines[1] + "\n")
    assert detect_format(logs_only) == "otel"
    problems = ReadProblems()
    read = list(read_conversations(logs_only, problems=problems))
    # without their spans, the weather calls have no usage; the last answer has no tool result
    assert [[m.type for m in c.messages] for c in read] == [
        ["human", "ai", "tool", "ai"],
        ["human", "ai"],
    ]
    assert [c.tokens for c in read] == ["estimated", "recorded"]
    assert problems.summary() is None
    both = list(read_conversations(LOGS / "otel_logs.jsonl"))
    answers = [m for m in both[0].messages if isinstance(m, AIMessage)]
    assert [a.usage_metadata and a.usage_metadata["input_tokens"] for a in answers] == [64, 90]
    assert answers[1].content == "Yes, rain is expected in Oslo."


def test_langfuse_a_page_with_a_bad_row_content_parts_and_message_usage(tmp_path: Path) -> None:
    usage = {"input_tokens": 4, "output_tokens": 2, "total_tokens": 6}
    read, problems = _read(
        tmp_path,
        "langfuse",
        {
            "data": [
                {"type": "GENERATION"},  # no trace id: counted, the page's other rows still read
                _observation(
                    "t",
                    "GENERATION",
                    1,
                    input=[{"role": "user", "content": "q"}, {"role": "tool", "content": "a tool"}],
                    output=[{"type": "text", "text": "h"}, {"type": "text", "text": "i"}],
                ),
                _observation(
                    "u",
                    "GENERATION",
                    1,
                    input="q",
                    output={"type": "ai", "content": "a", "usage_metadata": usage},
                ),
            ]
        },
    )
    assert [[(m.type, m.content) for m in c.messages] for c in read] == [
        [("human", "q"), ("ai", "hi")],
        [("human", "q"), ("ai", "a")],
    ]
    answer = read[1].messages[1]
    assert isinstance(answer, AIMessage)
    assert answer.usage_metadata == usage  # the message's own, the row having none
    assert (problems.lines, problems.skipped_lines) == (1, 1)
