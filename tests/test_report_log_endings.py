"""`toolstop report --from` on logs as they really end: no finished run lost, counts exact.

A hand-off called last (its result recorded or not), a step limit (results no model call read), a
user message nobody answered, a part a replay cannot reproduce; in a log and in the checkpoints
of an agent without toolstop. The expected figures are counted by hand from the messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:  # these build a real create_agent
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)
from langchain_core.messages import AIMessage, HumanMessage

from toolstop.cli import main

pytest.importorskip("langgraph.checkpoint.sqlite")


def _call(call_id: str, name: str, usage: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
        ],
        "usage": {"prompt_tokens": usage, "completion_tokens": 10},
    }


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _answer(text: str, usage: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "usage": {"prompt_tokens": usage, "completion_tokens": 5},
    }


FIRST = [
    {"role": "user", "content": "Where is order 7?"},
    _call("a1", "lookup", 100),
    _result("a1", '{"order": 7, "status": "shipped"}'),
    _answer("Order 7 has shipped.", 150),
]
HAND_OFF = [
    *FIRST,
    {"role": "user", "content": "I want to talk to a person."},
    _call("a2", "lookup", 200),
    _result("a2", '{"customer": 12, "tier": "gold"}'),
    _call("a3", "transfer_to_human_agents", 250),
]


def _log(path: Path, conversations: list[list[dict[str, Any]]]) -> Path:
    path.write_text("".join(json.dumps({"messages": c}) + "\n" for c in conversations))
    return path


def _report(tmp_path: Path, *argv: str) -> dict[str, Any]:
    out = tmp_path / "out"
    assert main(["report", *argv, "--out", str(out)]) == 0
    document: dict[str, Any] = json.loads((out / "report.json").read_text())
    return document


def _candidate(document: dict[str, Any], tool: str) -> dict[str, Any]:
    return next(c for c in document["candidates"] if c["tool"] == tool)


def test_a_second_run_ending_on_a_tool_call_keeps_both_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path / "hand_off.jsonl", [HAND_OFF])
    document = _report(tmp_path, "--from", str(log))
    err = capsys.readouterr().err
    assert "could not be read" not in err
    assert "does not end with an answer" not in err
    # by hand: 2 user messages, 4 assistant messages, 2 lookups answered, 1 hand-off open
    assert (document["runs"], document["model_calls"]) == (2, 4)
    assert document["input_tokens"] == 100 + 150 + 200 + 250
    assert document["rules"] == {"none": 1, "interrupted": 1}
    transfer = _candidate(document, "transfer_to_human_agents")
    assert (transfer["runs"], transfer["ended_on_it"]) == (1, 1)
    assert transfer["would_save"]["model_calls"] == 0
    lookup = _candidate(document, "lookup")
    assert lookup["runs"] == 2  # the run left open is not one run short
    assert document["open_runs"] == 0


def test_a_step_limit_after_a_result_counts_the_tool_as_ending_the_run(tmp_path: Path) -> None:
    limited = [*HAND_OFF, _result("a3", "Transfer successful")]
    document = _report(tmp_path, "--from", str(_log(tmp_path / "limit.jsonl", [limited])))
    assert (document["runs"], document["model_calls"]) == (2, 4)
    transfer = _candidate(document, "transfer_to_human_agents")
    assert (transfer["runs"], transfer["ended_on_it"]) == (1, 1)
    assert document["tool_calls"]["unsignalled"] == 3  # both lookups and the hand-off


def test_conversations_closing_with_an_unanswered_message_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    closing = {"role": "user", "content": "###STOP###"}
    log = _log(tmp_path / "closing.jsonl", [[*FIRST, closing] for _ in range(200)])
    document = _report(tmp_path, "--from", str(log))
    err = capsys.readouterr().err
    assert "could not be read" not in err
    assert "no conversation found" not in err
    assert (document["runs"], document["model_calls"], document["open_runs"]) == (200, 400, 200)
    assert document["conversations"] == 200
    assert document["unreadable"]["conversations"] == 0


def test_a_part_that_cannot_be_replayed_is_counted_the_runs_before_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = [
        *FIRST,
        {"role": "user", "content": "And order 8?"},
        _call("b1", "lookup", 300),
        _answer("Checking.", 310),  # b1 never answered, yet the model is called again
        {"role": "user", "content": "Well?"},
        _answer("Sorry.", 320),
    ]
    document = _report(tmp_path, "--from", str(_log(tmp_path / "broken.jsonl", [broken])))
    err = capsys.readouterr().err
    assert (document["runs"], document["model_calls"]) == (1, 2)
    assert document["unreadable"]["partly_read"] == 1
    assert document["unreadable"]["runs"] == 2
    assert "1 conversation read in part (2 runs a replay cannot reproduce left out" in err
    assert "run 2: a tool call has no result before the model is called again" in err


def test_convert_a_hand_off_called_only_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    on_result = [*HAND_OFF, _result("a3", "Transfer successful")]
    log = _log(tmp_path / "hand_offs.jsonl", [HAND_OFF, on_result])
    document = _report(tmp_path, "--from", str(log), "--convert", "transfer_to_human_agents")
    assert "a typo?" not in capsys.readouterr().out
    what_if = document["what_if"]
    assert what_if["unseen"] == []
    # 4 runs; hard mode stops only the one whose hand-off result is recorded, saving nothing
    assert (what_if["runs"], what_if["stopped_runs"], what_if["cut_short_runs"]) == (4, 1, 0)
    assert what_if["saved"]["model_calls"] == 0
    assert what_if["before"]["model_calls"] == what_if["after"]["model_calls"] == 8


def test_checkpoints_of_an_agent_without_toolstop_keep_runs_ended_on_a_tool(
    tmp_path: Path,
) -> None:
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.types import interrupt

    from toolstop.testing import ScriptedChatModel

    @tool
    def lookup(order: int = 0) -> str:
        """Look an order up."""
        return "order 7: shipped"

    @tool
    def transfer_to_human_agents(summary: str = "") -> str:
        """Hand the conversation to a person."""
        interrupt("waiting for a person")
        return "Transfer successful"

    def asks(call_id: str, name: str) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": {}, "id": call_id}])

    db = tmp_path / "threads.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        for thread in ("t1", "t2", "t3"):
            model = ScriptedChatModel(
                [
                    asks(f"{thread}-1", "lookup"),
                    AIMessage("It shipped."),
                    asks(f"{thread}-2", "lookup"),
                    asks(f"{thread}-3", "transfer_to_human_agents"),
                ]
            )
            agent = create_agent(model, [lookup, transfer_to_human_agents], checkpointer=saver)
            config: Any = {"configurable": {"thread_id": thread}}
            agent.invoke({"messages": [HumanMessage("Where is order 7?")]}, config)
            agent.invoke({"messages": [HumanMessage("A person, please.")]}, config)
            model.assert_complete()
    document = _report(tmp_path, "--from", str(db))
    # by hand: per thread 2 runs, 4 model calls, 2 lookups, 1 hand-off left open
    assert (document["runs"], document["model_calls"], document["threads"]) == (6, 12, 3)
    transfer = _candidate(document, "transfer_to_human_agents")
    assert (transfer["runs"], transfer["ended_on_it"]) == (3, 3)
    assert _candidate(document, "lookup")["runs"] == 6
    assert document["open_runs"] == 0


# the same conversations written as each other format writes them


def _parts(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat message as an OpenTelemetry GenAI message (`role`, `parts`)."""
    parts: list[dict[str, Any]] = []
    if message.get("content"):
        parts.append({"type": "text", "content": message["content"]})
    for call in message.get("tool_calls") or ():
        parts.append({"type": "tool_call", "id": call["id"], "name": call["function"]["name"]})
    if message["role"] == "tool":
        parts = [{"type": "tool_call_response", "id": message["tool_call_id"]}]
        parts[0]["response"] = message["content"]
    return {"role": message["role"], "parts": parts}


def _otel_attribute(key: str, value: Any) -> dict[str, Any]:
    kind = "intValue" if isinstance(value, int) else "stringValue"
    return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}


def _langsmith_and_otel(
    trace: str, messages: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A LangSmith run per model call and tool result, and the OpenTelemetry spans of the same.

    Each model call is given the history before it; the last tool results, which no later
    history shows, come from their tool runs; a last user message nobody answered is a model
    call that failed (no output)."""
    runs: list[dict[str, Any]] = []
    spans: list[dict[str, Any]] = []
    ends_unanswered = messages[-1]["role"] == "user"
    for index, message in enumerate([*messages, None] if ends_unanswered else messages):
        order = len(runs) + 1
        base = {"id": f"{trace}-{order}", "trace_id": trace, "dotted_order": f"2026{order:04d}"}
        attributes = {"gen_ai.operation.name": "chat"}
        if message is None or message["role"] == "assistant":
            history = messages[:index]
            run = {**base, "run_type": "llm", "inputs": {"messages": history}, "outputs": {}}
            attributes["gen_ai.input.messages"] = json.dumps([_parts(m) for m in history])
            if message is not None:
                run["outputs"] = {"generations": [[{"message": message}]]}
                attributes["gen_ai.output.messages"] = json.dumps([_parts(message)])
                attributes["gen_ai.usage.input_tokens"] = message["usage"]["prompt_tokens"]
                attributes["gen_ai.usage.output_tokens"] = message["usage"]["completion_tokens"]
        elif message["role"] == "tool":
            output = {"type": "tool", "data": {k: message[k] for k in ("content", "tool_call_id")}}
            run = {**base, "run_type": "tool", "outputs": {"output": output}}
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.call.id": message["tool_call_id"],
                "gen_ai.tool.call.result": message["content"],
            }
        else:
            continue
        runs.append(run)
        spans.append(
            {
                "traceId": trace,
                "spanId": f"{order:016x}",
                "startTimeUnixNano": str(order),
                "attributes": [_otel_attribute(k, v) for k, v in attributes.items()],
            }
        )
    return runs, {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def _langchain(message: dict[str, Any]) -> dict[str, Any]:
    kind = {"user": "human", "assistant": "ai", "tool": "tool"}[message["role"]]
    data: dict[str, Any] = {"content": message.get("content") or ""}
    if message.get("tool_calls"):
        data["tool_calls"] = [
            {"name": c["function"]["name"], "args": {}, "id": c["id"]}
            for c in message["tool_calls"]
        ]
    if message.get("usage"):
        usage = message["usage"]
        data["usage_metadata"] = {
            "input_tokens": usage["prompt_tokens"],
            "output_tokens": usage["completion_tokens"],
            "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
        }
    if kind == "tool":
        data["tool_call_id"] = message["tool_call_id"]
    return {"type": kind, "data": data}


ENDINGS = {
    "hand-off call": HAND_OFF,
    "hand-off result": [*HAND_OFF, _result("a3", "Transfer successful")],
    "unanswered": [*FIRST, {"role": "user", "content": "###STOP###"}],
    "call, then unanswered": [*HAND_OFF, {"role": "user", "content": "Hello?"}],
}


@pytest.mark.parametrize("log_format", ["langchain", "langsmith", "otel"])
def test_every_format_counts_the_endings_as_openai_does(tmp_path: Path, log_format: str) -> None:
    conversations = list(ENDINGS.values())
    expected = _report(
        tmp_path / "openai", "--from", str(_log(tmp_path / "o.jsonl", conversations))
    )
    log = tmp_path / f"{log_format}.jsonl"
    lines: list[Any] = []
    for number, messages in enumerate(conversations):
        if log_format == "langchain":
            lines.append([_langchain(m) for m in messages])
            continue
        runs, export = _langsmith_and_otel(f"trace-{number}", messages)
        lines.extend(runs if log_format == "langsmith" else [export])
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    found = _report(tmp_path / log_format, "--from", str(log), "--format", log_format)
    apart = {"source", "generated_at"}

    def same(document: dict[str, Any]) -> dict[str, Any]:  # thread ids: line-N or trace-N
        for candidate in document["candidates"]:
            candidate["threads"] = len(candidate["threads"])
        document["unreadable"].pop("of_lines")  # a run a line in LangSmith's export
        return {k: v for k, v in document.items() if k not in apart}

    assert same(found) == same(expected)
    # by hand: runs 2 + 2 + 1 + 2, model calls 4 + 4 + 2 + 4, 2 unanswered messages
    assert (found["runs"], found["model_calls"], found["open_runs"]) == (7, 14, 2)
    assert _candidate(found, "transfer_to_human_agents")["ended_on_it"] == 3
