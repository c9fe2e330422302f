"""`toolstop._tokens`: the estimate of a model call without usage, linear in a conversation.

Each message is counted once (a model call's input is the running sum), so replaying a
conversation of n tool turns counts O(n) messages, not O(n^2): the tests count the messages the
counter is given for n and 4n turns. Tool definitions a log gives are counted in each call, as
langchain-core's `count_tokens_approximately(..., tools=...)` counts them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

import toolstop._tokens as tokens
from toolstop._tokens import RunningCount, approximate_usage
from toolstop.report.sources import read_conversations
from toolstop.report.sources.shadow import shadow_records
from toolstop.report.what_if import converted_records

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the knowledge index for a query and return the best hit.",
            "parameters": {
                "type": "object",
                "properties": {"q": {"type": "string", "description": "the query"}},
                "required": ["q"],
            },
        },
    }
]


def conversation(turns: int) -> list[BaseMessage]:
    """One run of `turns` tool turns, then an answer."""
    messages: list[BaseMessage] = [HumanMessage("find it")]
    for i in range(turns):
        messages.append(
            AIMessage("", tool_calls=[{"name": "search", "args": {"q": f"q{i}"}, "id": f"c{i}"}])
        )
        messages.append(ToolMessage(f"hit {i}", tool_call_id=f"c{i}", name="search"))
    messages.append(AIMessage("found"))
    return messages


def openai_line(turns: int, *, tools: list[Any] | None = None) -> dict[str, Any]:
    """The same conversation as an OpenAI chat JSONL line."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "find it"}]
    for i in range(turns):
        call = {"id": f"c{i}", "type": "function"}
        call["function"] = {"name": "search", "arguments": json.dumps({"q": f"q{i}"})}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"hit {i}"})
    messages.append({"role": "assistant", "content": "found"})
    line: dict[str, Any] = {"messages": messages}
    if tools is not None:
        line["tools"] = tools
    return line


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of messages given to the counter, and to `to_model`, as they are counted."""
    seen = [0, 0]
    count, to_model = tokens.count_tokens_approximately, tokens.to_model

    def counting(messages: Any, **kwargs: Any) -> int:
        messages = list(messages)
        seen[0] += len(messages)
        return count(messages, **kwargs)

    def converting(messages: Any) -> Any:
        seen[1] += len(messages)
        return to_model(messages)

    monkeypatch.setattr(tokens, "count_tokens_approximately", counting)
    monkeypatch.setattr(tokens, "to_model", converting)
    return seen


def _work(counted: list[int], run: Any, turns: int) -> tuple[int, int]:
    counted[:] = [0, 0]
    run(turns)
    return counted[0], counted[1]


@pytest.mark.parametrize(
    "replay",
    [
        pytest.param(lambda n: shadow_records(conversation(n)), id="shadow_records"),
        pytest.param(lambda n: converted_records(conversation(n), ["other"]), id="what-if"),
    ],
)
def test_a_replay_counts_each_message_once(counted: list[int], replay: Any) -> None:
    small = _work(counted, replay, 50)
    large = _work(counted, replay, 200)
    # 2n + 2 messages, each counted once (plus each answer once as an output): linear
    assert small[0] <= 2 * (2 * 50 + 2)
    for before, after in zip(small, large, strict=True):
        assert before > 0
        assert after <= 4.5 * before  # quadratic growth would be 16 times


def test_the_openai_reader_and_the_report_are_linear(tmp_path: Path, counted: list[int]) -> None:
    from toolstop.report.from_logs import read_from
    from toolstop.report.summary import Summary

    def report(turns: int) -> None:
        path = tmp_path / f"log{turns}.jsonl"
        path.write_text(json.dumps(openai_line(turns)) + "\n")
        found = read_from(str(path), Summary(), format="openai")
        assert found.conversations == 1

    small = _work(counted, report, 50)
    large = _work(counted, report, 200)
    assert 0 < large[0] <= 4.5 * small[0]


def test_the_running_sum_equals_counting_the_whole_history_each_time() -> None:
    messages = conversation(6)
    count = RunningCount()
    for end in range(len(messages)):
        seen = messages[:end]
        assert count.input_tokens(seen) == count_tokens_approximately(seen)
    again = [HumanMessage("a different history")]  # not an extension: counted from its start
    assert count.input_tokens(again) == count_tokens_approximately(again)


def test_the_estimate_is_todays_without_tools() -> None:
    messages = conversation(3)
    usage = approximate_usage(messages[:-1], messages[-1])
    assert usage["input_tokens"] == count_tokens_approximately(messages[:-1])
    assert usage["output_tokens"] == count_tokens_approximately(messages[-1:])


def test_tool_definitions_are_counted_in_each_estimated_call(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(
        json.dumps(openai_line(2, tools=TOOLS)) + "\n" + json.dumps(openai_line(2)) + "\n"
    )
    with_tools, without = read_conversations(path, format="openai")
    assert with_tools.tools == tuple(TOOLS)
    assert without.tools == ()
    messages = list(with_tools.messages)
    # the model was called with the user message, then after each tool turn
    seen = [messages[: 1 + 2 * turn] for turn in range(3)]
    expected = sum(count_tokens_approximately(s, tools=TOOLS) for s in seen)
    plain = sum(count_tokens_approximately(s) for s in seen)
    assert expected > plain + 3 * 40  # the definition is worth about 70 tokens a call
    (record,) = shadow_records(with_tools.messages, tools=with_tools.tools)
    assert record["input_tokens"] == expected
    (record,) = shadow_records(without.messages, tools=without.tools)
    assert record["input_tokens"] == plain
    hard = converted_records(with_tools.messages, ["other"], definitions=with_tools.tools)
    assert hard.records[0]["input_tokens"] == expected


def test_a_langsmith_runs_invocation_tools_are_counted(tmp_path: Path) -> None:
    def llm(number: int, history: list[dict[str, Any]], answer: dict[str, Any]) -> str:
        return json.dumps(
            {
                "id": f"r{number}",
                "trace_id": "t1",
                "run_type": "llm",
                "dotted_order": f"{number}",
                "inputs": {"messages": history},
                "outputs": {"generations": [[{"message": answer}]]},
                "extra": {"invocation_params": {"tools": TOOLS}},
            }
        )

    user = {"role": "user", "content": "find it"}
    asks = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "search", "args": {"q": "x"}}],
    }
    result = {"role": "tool", "tool_call_id": "c1", "content": "hit"}
    answer = {"role": "assistant", "content": "found"}
    path = tmp_path / "runs.jsonl"
    path.write_text(llm(1, [user], asks) + "\n" + llm(2, [user, asks, result], answer) + "\n")
    (found,) = read_conversations(path, format="langsmith")
    assert found.tools == tuple(TOOLS)
    messages = list(found.messages)
    expected = sum(count_tokens_approximately(s, tools=TOOLS) for s in (messages[:1], messages[:3]))
    (record,) = shadow_records(found.messages, tools=found.tools)
    assert record["input_tokens"] == expected


def test_tool_definitions_that_are_not_objects_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    line = openai_line(1, tools=["search", 3, None, *TOOLS])
    path.write_text(json.dumps(line) + "\n" + json.dumps(openai_line(1, tools="all")) + "\n")  # type: ignore[arg-type]
    listed, named = read_conversations(path, format="openai")
    assert listed.tools == tuple(TOOLS)
    assert named.tools == ()


def legacy_line(turns: int, *, answered_at_once: bool = False) -> dict[str, Any]:
    """A run of `turns` legacy `function_call`s, each answered by a `function` message (or all
    the calls first, then all the results: each answers the last call still unanswered)."""
    call = {"role": "assistant", "content": "", "function_call": {"name": "search"}}
    call["function_call"]["arguments"] = json.dumps({"q": "x"})
    result = {"role": "function", "name": "search", "content": "hit"}
    turn = [call, result] * turns if not answered_at_once else [call] * turns + [result] * turns
    return {"messages": [{"role": "user", "content": "find it"}, *turn, {"role": "assistant"}]}


def _calls_made(run: Any) -> int:
    """The function calls (Python's and builtins') `run()` makes: work counted, not timed."""
    made = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            made[0] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return made[0]


@pytest.mark.parametrize("answered_at_once", [False, True], ids=["in-turn", "at-once"])
def test_legacy_function_messages_are_read_in_linear_time(answered_at_once: bool) -> None:
    from toolstop.report.sources.openai import messages

    def work(turns: int) -> int:
        return _calls_made(lambda: messages(legacy_line(turns, answered_at_once=answered_at_once)))

    small, large = work(100), work(400)
    assert 0 < large <= 4.5 * small  # rebuilding what was answered per message: 16 times


def test_each_legacy_function_message_answers_the_last_unanswered_call() -> None:
    from toolstop.report.sources.openai import messages

    built = messages(legacy_line(3, answered_at_once=True))
    calls = [m.tool_calls[0]["id"] for m in built if isinstance(m, AIMessage) and m.tool_calls]
    answers = [m.tool_call_id for m in built if isinstance(m, ToolMessage)]
    assert answers == calls[::-1]
    in_turn = messages(legacy_line(3))
    pairs = list(zip(in_turn[1:-1:2], in_turn[2:-1:2], strict=True))
    assert all(
        isinstance(r, ToolMessage) and r.tool_call_id == c.tool_calls[0]["id"] for c, r in pairs
    )


def test_merging_a_traces_model_calls_is_linear() -> None:
    """Model calls whose histories do not extend the conversation (a history cut to the last
    question) once rebuilt the set of answered calls from the whole conversation each time."""
    from toolstop.report.sources._traces import ModelCall, merge

    def calls(n: int) -> list[ModelCall]:
        return [ModelCall([HumanMessage(f"q{i}")], AIMessage(f"a{i}")) for i in range(n)]

    def work(n: int) -> int:
        found = calls(n)
        return _calls_made(lambda: merge(found, {}))

    small, large = work(200), work(800)
    assert 0 < large <= 4.5 * small
    assert len(merge(calls(3), {})) == 6
