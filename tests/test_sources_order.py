"""The records of a trace are read in the order they started: by instant, never by text.

Exports write the same kind of time in several forms (Python's `isoformat` drops zero
microseconds: `...:45Z` next to `...:45.100000Z`; offsets; a space for the `T`); each trace here
is written to the file out of order, and its times, compared as text, give a wrong order too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop.report.from_logs import join_threads, read_from
from toolstop.report.sources import Conversation, ReadProblems, read_conversations
from toolstop.report.sources._runs import segment
from toolstop.report.sources._traces import instant
from toolstop.report.summary import Summary

EPOCH_2026_11_02 = 1_793_577_600  # 2026-11-02T00:00:00Z, in seconds
TEN = EPOCH_2026_11_02 + 10 * 3600  # 10:00:00Z
NS = 1_000_000_000


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("2026-11-02T10:00:45Z", (TEN + 45) * NS),
        ("2026-11-02T10:00:45.100000Z", (TEN + 45) * NS + 100_000_000),
        ("2026-11-02T10:00:45.1+00:00", (TEN + 45) * NS + 100_000_000),
        ("2026-11-02T12:00:45.25+02:00", (TEN + 45) * NS + 250_000_000),
        ("2026-11-02T08:30:45-0130", (TEN + 45) * NS),
        ("2026-11-02 10:00:45.123456789", (TEN + 45) * NS + 123_456_789),  # naive: UTC
        ("2026-11-02t10:00:45.0000000001z", (TEN + 45) * NS),  # past the nanosecond: cut
        ("2026-11-02T10:00", TEN * NS),
        ("2026-11-03T01:00:00+15:00", TEN * NS),
    ],
)
def test_an_iso_time_is_its_instant(text: str, nanos: int) -> None:
    assert instant(text) == nanos


@pytest.mark.parametrize(
    "value",
    ["soon", "", "2026-11-02", "2026-13-02T10:00:00Z", "2026-11-02T10:00:61Z", 1.5, None],
)
def test_what_is_not_a_time_has_no_instant(value: Any) -> None:
    assert instant(value) is None


def _read(tmp_path: Path, log_format: str, *records: Any) -> tuple[Conversation, ReadProblems]:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    problems = ReadProblems()
    [read] = read_conversations(path, format=log_format, problems=problems)  # type: ignore[arg-type]
    return read, problems


def _shape(messages: tuple[BaseMessage, ...]) -> list[tuple[str, Any]]:
    shape: list[tuple[str, Any]] = []
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            shape.append(("ai", [c["id"] for c in message.tool_calls]))
        elif isinstance(message, ToolMessage):
            shape.append(("tool", message.tool_call_id))
        else:
            shape.append((message.type, message.content))
    return shape


IN_ORDER = [
    ("human", "go"),
    ("ai", ["c1"]),
    ("tool", "c1"),
    ("ai", ["c2"]),
    ("tool", "c2"),
    ("ai", "done"),
]
"""The one conversation every trace below records."""

USER = {"role": "user", "content": "go"}


def _asks(call: str) -> dict[str, Any]:
    function = {"name": "f", "arguments": "{}"}
    calls = [{"id": call, "type": "function", "function": function}]
    return {"role": "assistant", "tool_calls": calls}


def _result(call: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call, "content": f"result {call}"}


HISTORIES = [[USER], [USER, _asks("c1"), _result("c1")]]
HISTORIES.append([*HISTORIES[1], _asks("c2"), _result("c2")])
ANSWERS = [_asks("c1"), _asks("c2"), {"role": "assistant", "content": "done"}]


# Langfuse


def _observation(kind: str, start: Any, **fields: Any) -> dict[str, Any]:
    row = {"id": f"o-{start}", "trace_id": "t", "type": kind, **fields}
    if start is not None:
        row["start_time"] = start
    return row


def _langfuse(starts: list[Any]) -> list[dict[str, Any]]:
    """The trace's rows (model call, tool, model call, tool, model call) at `starts`."""
    g1, t1, g2, t2, g3 = starts
    return [
        _observation("GENERATION", g1, input=HISTORIES[0], output=ANSWERS[0]),
        _observation("TOOL", t1, output="result c1", metadata={"tool_call_id": "c1"}),
        _observation("GENERATION", g2, input=HISTORIES[1], output=ANSWERS[1]),
        _observation("TOOL", t2, output="result c2", metadata={"tool_call_id": "c2"}),
        _observation("GENERATION", g3, input=HISTORIES[2], output=ANSWERS[2]),
    ]


def test_langfuse_rows_in_order_of_their_instants(tmp_path: Path) -> None:
    g1, t1, g2, t2, g3 = _langfuse(
        [
            "2026-11-02T10:00:44.5Z",
            "2026-11-02T10:00:44.750+00:00",
            "2026-11-02T10:00:45Z",  # as text, after 45.100000Z
            "2026-11-02T12:00:45.100000+02:00",
            "2026-11-02 10:00:45.2",  # as text, before every T
        ]
    )
    read, problems = _read(tmp_path, "langfuse", t2, g3, g2, g1, t1)
    assert _shape(read.messages) == IN_ORDER
    assert problems.summary() is None
    assert problems.unordered_traces == 0


def test_langfuse_same_instant_keeps_the_file_order(tmp_path: Path) -> None:
    rows = _langfuse(["2026-11-02T10:00:45Z", *["2026-11-02T10:00:45.000+00:00"] * 4])
    read, problems = _read(tmp_path, "langfuse", *rows)
    assert _shape(read.messages) == IN_ORDER
    assert problems.summary() is None


@pytest.mark.parametrize(
    ("start", "why"),
    [("soon", "a start time that is not an ISO 8601 time"), (None, "no start time")],
)
def test_langfuse_a_time_that_cannot_be_read_keeps_the_file_order(
    tmp_path: Path, start: Any, why: str
) -> None:
    times = ["2026-11-02T10:00:45.3Z", start, *(f"2026-11-02T10:00:45.{n}Z" for n in (1, 2, 0))]
    read, problems = _read(tmp_path, "langfuse", *_langfuse(times))
    assert _shape(read.messages) == IN_ORDER  # by the times read, the last answer would be first
    assert problems.unordered_traces == 1
    assert problems.first == f"line 2: {why}: its trace is read in the order of the file"
    summary = problems.summary()
    assert summary is not None
    assert "1 trace read in the order of the file (a start time missing or not a time)" in summary


def test_langfuse_camel_case_start_times_are_instants_too(tmp_path: Path) -> None:
    times = ["2026-11-02T10:00:45Z", *(f"2026-11-02T10:00:45.{n}Z" for n in (25, 5, 75))]
    rows = _langfuse([*times, "2026-11-02T10:00:46Z"])  # as text, 45Z after 45.75Z
    for row in rows:
        row["startTime"] = row.pop("start_time")
    read, _ = _read(tmp_path, "langfuse", *reversed(rows))
    assert _shape(read.messages) == IN_ORDER


# LangSmith (runs without a dotted order)


def _lc(kind: str, **kwargs: Any) -> dict[str, Any]:
    return {"lc": 1, "type": "constructor", "id": [kind], "kwargs": kwargs}


def _lc_asks(call: str) -> dict[str, Any]:
    return _lc("AIMessage", content="", tool_calls=[{"name": "f", "args": {}, "id": call}])


def _langsmith_run(kind: str, start: str, **fields: Any) -> dict[str, Any]:
    return {"id": f"r-{start}", "trace_id": "t", "run_type": kind, "start_time": start, **fields}


def test_langsmith_start_times_are_instants(tmp_path: Path) -> None:
    def llm(start: str, history: list[Any], answer: Any) -> dict[str, Any]:
        outputs = {"generations": [[{"message": answer}]]}
        return _langsmith_run("llm", start, inputs={"messages": history}, outputs=outputs)

    def result(call: str) -> dict[str, Any]:
        return _lc("ToolMessage", content=f"result {call}", tool_call_id=call)

    def tool(start: str, call: str) -> dict[str, Any]:
        return _langsmith_run("tool", start, outputs={"output": result(call)})

    user = _lc("HumanMessage", content="go")
    whole = [user, _lc_asks("c1"), result("c1"), _lc_asks("c2"), result("c2")]
    runs = [
        llm("2026-11-02T10:00:45Z", [user], _lc_asks("c1")),  # as text, after 45.2Z
        tool("2026-11-02T10:00:45.100000+00:00", "c1"),
        llm("2026-11-02T10:00:45.2Z", [user, _lc_asks("c1")], _lc_asks("c2")),
        tool("2026-11-02T12:00:45.3+02:00", "c2"),
        llm("2026-11-02 10:00:45.4", whole, _lc("AIMessage", content="done")),
    ]
    read, problems = _read(tmp_path, "langsmith", *reversed(runs))
    assert _shape(read.messages) == IN_ORDER
    assert problems.summary() is None


# OpenTelemetry (OTLP JSON writes a fixed64 time as a string of 19 digits)


def _otel_attribute(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _parts(message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] == "tool":
        response = {"type": "tool_call_response", "id": message["tool_call_id"]}
        return {"role": "tool", "parts": [{**response, "response": message["content"]}]}
    if "tool_calls" in message:
        calls = [{"type": "tool_call", "id": c["id"], "name": "f"} for c in message["tool_calls"]]
        return {"role": "assistant", "parts": calls}
    return {"role": message["role"], "parts": [{"type": "text", "content": message["content"]}]}


def _chat(start: Any, history: list[Any], answer: Any) -> dict[str, Any]:
    attributes = [
        _otel_attribute("gen_ai.operation.name", "chat"),
        _otel_attribute("gen_ai.input.messages", json.dumps([_parts(m) for m in history])),
        _otel_attribute("gen_ai.output.messages", json.dumps([_parts(answer)])),
    ]
    span = {"traceId": "t", "spanId": f"s{start}", "startTimeUnixNano": start}
    return {**span, "attributes": attributes}


def _tool_span(start: Any, call: str) -> dict[str, Any]:
    attributes = [
        _otel_attribute("gen_ai.operation.name", "execute_tool"),
        _otel_attribute("gen_ai.tool.call.id", call),
        _otel_attribute("gen_ai.tool.call.result", f"result {call}"),
    ]
    span = {"traceId": "t", "spanId": f"s{start}", "startTimeUnixNano": start}
    return {**span, "attributes": attributes}


def test_otel_spans_in_order_of_their_nanosecond_starts(tmp_path: Path) -> None:
    base = 1_793_613_645_000_000_000  # 19 digits: 2026-11-02T10:00:45Z
    spans = [
        _chat(str(base), HISTORIES[0], ANSWERS[0]),
        _tool_span(str(base + 1), "c1"),
        _chat(base + 2, HISTORIES[1][:2], ANSWERS[1]),  # a JSON number, as some exporters write
        _tool_span(str(base + 3), "c2"),
        _chat(str(base + 4), HISTORIES[2], ANSWERS[2]),
    ]
    export = {"resourceSpans": [{"scopeSpans": [{"spans": list(reversed(spans))}]}]}
    read, problems = _read(tmp_path, "otel", export)
    assert _shape(read.messages) == IN_ORDER
    assert problems.summary() is None


def test_otel_a_span_without_a_start_keeps_the_file_order(tmp_path: Path) -> None:
    base = 1_793_613_645_000_000_000
    spans = [
        _chat(str(base + 9), HISTORIES[0], ANSWERS[0]),
        _tool_span("not a time", "c1"),
        _chat(str(base), HISTORIES[1], ANSWERS[1]),
        _tool_span(str(base), "c2"),
        _chat(str(base), HISTORIES[2], ANSWERS[2]),
    ]
    export = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    read, problems = _read(tmp_path, "otel", export)
    assert _shape(read.messages) == IN_ORDER
    assert problems.unordered_traces == 1


# Records out of order that no time can put right


def test_model_calls_out_of_order_are_named_as_such(tmp_path: Path) -> None:
    times = [f"2026-11-02T10:00:44.{n}Z" for n in range(5)]
    times[2] = "2026-11-02T10:00:46Z"  # a clock that was off: the second call reads last
    _, problems = _read_all(tmp_path, *_langfuse(times))
    assert problems.skipped_conversations == 1
    assert problems.first == (
        "line 1: trace 't': a model call asks again for tool call 'c2', asked before it: the "
        "records are out of order (see their start times) or repeated"
    )
    assert (problems.partly_read, problems.dropped_runs) == (0, 0)  # not "used twice"


def _read_all(tmp_path: Path, *records: Any) -> tuple[list[Conversation], ReadProblems]:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    problems = ReadProblems()
    return list(read_conversations(path, format="langfuse", problems=problems)), problems


def test_a_thread_keeps_its_runs_when_one_trace_is_out_of_order(tmp_path: Path) -> None:
    """The trace after the one out of order replays the thread so far: no run is counted
    twice, none is dropped for an id the agent never used twice."""
    first = _langfuse(["x"] * 5)
    first[2], first[4] = first[4], first[2]  # its last model call written before the second
    question = {"role": "user", "content": "and now?"}
    second = _observation(
        "GENERATION",
        "2026-11-02T10:01:00Z",
        input=[*HISTORIES[2], ANSWERS[2], question],
        output={"role": "assistant", "content": "now this"},
    )
    second["trace_id"] = "u"
    for row in [*first, second]:
        row["session_id"] = "thread-1"
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*first, second]))
    found = read_from(str(path), Summary(), format="langfuse")
    assert found.problems.skipped_conversations == 1  # the trace out of order, named
    assert (found.problems.partly_read, found.problems.dropped_runs) == (0, 0)
    assert (found.conversations, found.threads) == (1, 1)
    [joined] = join_threads(read_conversations(path, format="langfuse"))
    assert _shape(joined.messages) == [*IN_ORDER, ("human", "and now?"), ("ai", "now this")]
    assert len(segment(joined.messages).runs) == 2
