"""The what-if of a conversion equals a real hard-mode replay with the converted tools."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:  # these compare with a real create_agent + StopOnArtifact
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ended_replay import ended_replay
from log_endings import ENDINGS, HAND_OFF, TRANSFERRED, asks
from toolstop import StopOnArtifact, StopPolicy
from toolstop.cli import main
from toolstop.record import StopRecord
from toolstop.report.sources import read_conversations
from toolstop.report.what_if import converted_records, is_success, signalled
from toolstop.testing import ScriptedChatModel, replay

ROOT = Path(__file__).parent / "fixtures"
LOGS = ROOT / "logs"
TRAFFIC = ROOT / "traffic" / "tau2_student_domains" / "conversations.jsonl"


def real_hard_mode(
    messages: Sequence[BaseMessage], tools: set[str]
) -> tuple[list[StopRecord], list[int]]:
    """Each run through a real `create_agent` in hard mode, the stand-ins of `tools` returning
    `signal(...)`; a new scripted model per run holds that run's recorded answers, so the run
    takes only what the agent asks for (the script is cut wherever the agent stopped).

    Returns the records and the model calls each run made."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    prepared = signalled(messages, tools)
    recording = replay(prepared, content_and_artifact=True)
    saver = InMemorySaver()
    config: Any = {"configurable": {"thread_id": "t"}}
    runs: list[list[AIMessage]] = []
    for message in prepared:
        if isinstance(message, HumanMessage):
            runs.append([])
        elif isinstance(message, AIMessage):
            runs[-1].append(message)
    records, calls = [], []
    for question, answers in zip(recording.questions, runs, strict=True):
        model = ScriptedChatModel(answers)
        agent = create_agent(
            model,
            list(recording.tools),
            middleware=[StopOnArtifact(StopPolicy(mode="hard"))],
            checkpointer=saver,
        )
        records.append(agent.invoke({"messages": [question]}, config)["stop_record"])
        calls.append(len(model.calls))
    return records, calls


def tools_of(messages: Sequence[BaseMessage]) -> set[str]:
    return {c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}


@pytest.mark.parametrize("log_format", ["openai", "langchain", "langsmith", "otel", "langfuse"])
def test_the_what_if_equals_a_real_hard_mode_replay(log_format: str) -> None:
    for conversation in read_conversations(LOGS / f"{log_format}.jsonl"):
        for tool in sorted(tools_of(conversation.messages)):
            found = converted_records(conversation.messages, {tool})
            records, calls = real_hard_mode(conversation.messages, {tool})
            assert found.records == records
            assert [r["model_calls"] for r in found.records] == calls


def test_the_what_if_equals_a_real_replay_on_real_traffic() -> None:
    lines = TRAFFIC.read_text().splitlines()[::10]
    log_items = [json.loads(line) for line in lines]
    assert log_items
    stopped = 0
    for conversation in read_conversations(TRAFFIC):
        if conversation.id not in {item["id"] for item in log_items}:
            continue
        tools = sorted(tools_of(conversation.messages))
        for chosen in [*({t} for t in tools[:2]), set(tools)]:  # one, and all at once
            found = converted_records(conversation.messages, chosen)
            records, calls = real_hard_mode(conversation.messages, chosen)
            assert found.records == records, (conversation.id, chosen)
            assert [r["model_calls"] for r in found.records] == calls
            stopped += sum(relay is not None for relay in found.relays)
    assert stopped > 0  # some runs stopped: the cut is exercised


def test_an_error_result_is_transient_and_does_not_stop() -> None:
    messages = [
        HumanMessage("pay"),
        AIMessage("", tool_calls=[{"name": "pay", "args": {}, "id": "c1"}]),
        ToolMessage("Error: card declined", tool_call_id="c1", name="pay"),
        AIMessage("", tool_calls=[{"name": "pay", "args": {}, "id": "c2"}]),
        ToolMessage('{"paid": true}', tool_call_id="c2", name="pay"),
        AIMessage("", tool_calls=[{"name": "send_receipt", "args": {}, "id": "c3"}]),
        ToolMessage("sent", tool_call_id="c3", name="send_receipt"),
        AIMessage("Paid, receipt sent."),
    ]
    assert not is_success(messages[2])  # type: ignore[arg-type]
    assert is_success(messages[4])  # type: ignore[arg-type]
    assert not is_success(messages[4], re.compile("receipt"))  # type: ignore[arg-type]
    found = converted_records(messages, {"pay"})
    assert found.relays == ['```json\n{"paid": true}\n```']  # the relay shows the result
    assert found.skipped_tools == [["send_receipt"]]
    assert found.records[0]["model_calls"] == 2
    records, calls = real_hard_mode(messages, {"pay"})
    assert (found.records, calls) == (records, [2])


def test_report_from_convert_writes_the_what_if(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "pay.jsonl"
    secret = "sk-" + "a1B2" * 12
    conversation = [
        {"role": "user", "content": "pay"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "pay", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": f"paid <b>\x1b[31m {secret}"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c2", "type": "function",
                         "function": {"name": "send_email", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "sent"},
        {"role": "assistant", "content": "Paid and mailed."},
    ]  # fmt: skip
    log.write_text(json.dumps({"id": "p1", "messages": conversation}) + "\n")
    out = tmp_path / "out"
    code = main(["report", "--from", str(log), "--convert", "pay", "--examples", "1",
                 "--price-in", "2", "--price-out", "10", "--out", str(out)])  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    what_if = json.loads((out / "report.json").read_text())["what_if"]
    assert what_if["tools"] == ["pay"]
    assert (what_if["runs"], what_if["stopped_runs"], what_if["cut_short_runs"]) == (1, 1, 1)
    assert what_if["saved"]["model_calls"] == 2  # send_email's call and the answer
    assert what_if["saved"]["input_tokens"] > 0
    assert what_if["not_run"] == [{"tool": "send_email", "calls": 1, "writes": True}]
    [example] = what_if["examples"]
    assert example["recorded_answer"] == "Paid and mailed."
    assert secret[:12] not in json.dumps(what_if)
    assert "\x1b" not in example["relay"]
    assert "1 of 1 runs stopped, 1 cut short; saved 2 model calls" in printed.out
    assert "writes that would not have run: send_email 1" in printed.out
    # the only run was cut short: its saving is counted apart, none of it a gain
    assert what_if["cut_short_saved"]["model_calls"] == 2
    assert what_if["gain"]["model_calls"] == 0
    assert "of which 2 model calls in cut-short runs" in printed.out
    assert what_if["unseen"] == []
    page = (out / "report.html").read_text()
    assert "What if pay signalled" in page
    assert "<b>" not in page.split("What if", 1)[1]


def test_a_tool_never_called_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = str(LOGS / "openai.jsonl")
    out = tmp_path / "out"
    assert main(["report", "--from", log, "--convert", "no_such_tool", "--out", str(out)]) == 0
    assert json.loads((out / "report.json").read_text())["what_if"]["unseen"] == ["no_such_tool"]
    assert "never called in these conversations (a typo?): no_such_tool" in (
        capsys.readouterr().out
    )


def test_a_bad_success_pattern_or_convert_without_from_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = str(LOGS / "openai.jsonl")
    assert main(["report", "--from", log, "--convert", "x", "--success", "(", "--out",
                 str(tmp_path)]) == 2  # fmt: skip
    assert "--success" in capsys.readouterr().err
    assert main(["report", "--log", log, "--convert", "x", "--out", str(tmp_path)]) == 2
    assert "--convert needs --from" in capsys.readouterr().err


def test_the_reported_what_if_equals_the_real_replays_figures(tmp_path: Path) -> None:
    from test_sources_shadow import replayed

    log = tmp_path / "slice.jsonl"
    log.write_text("\n".join(TRAFFIC.read_text().splitlines()[::12]) + "\n")
    items = list(read_conversations(log))
    called = Counter(t for item in items for t in tools_of(item.messages))
    tool = called.most_common(1)[0][0]
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    for item in items:
        for record in replayed(item.messages):
            before.update({k: record[k] for k in ("model_calls", "input_tokens", "output_tokens")})
        for record in real_hard_mode(item.messages, {tool})[0]:
            after.update({k: record[k] for k in ("model_calls", "input_tokens", "output_tokens")})
    out = tmp_path / "out"
    assert main(["report", "--from", str(log), "--convert", tool, "--out", str(out)]) == 0
    what_if = json.loads((out / "report.json").read_text())["what_if"]
    assert what_if["before"] == dict(before)
    assert what_if["after"] == dict(after)
    assert what_if["saved"]["model_calls"] == before["model_calls"] - after["model_calls"] > 0


@pytest.mark.parametrize("name", ENDINGS)
def test_the_what_if_of_a_log_as_it_ends_equals_a_real_hard_mode_replay(
    name: str, tmp_path: Path
) -> None:
    messages = ENDINGS[name]
    choices = [*({t} for t in sorted(tools_of(messages))), tools_of(messages)]
    for number, tools in enumerate(choices):
        found = converted_records(messages, tools)
        records, _ = ended_replay(
            messages,
            tmp_path / f"{number}.sqlite",
            policy=StopPolicy(mode="hard"),
            artifacts=True,
            prepare=lambda m, chosen=tools: signalled(m, chosen),  # type: ignore[misc]
        )
        assert found.records == records, tools


def test_a_hand_off_called_last_is_stopped_with_nothing_saved() -> None:
    on_result = [*HAND_OFF, TRANSFERRED]
    found = converted_records(on_result, {"transfer_to_human_agents"})
    # hard mode relays the hand-off's result where the model was next due: a stop, no saving
    assert found.relays == [None, "Transfer successful"]
    assert [r["rule"] for r in found.records] == ["none", "completed"]
    assert [r["model_calls"] for r in found.records] == [2, 2]
    assert found.skipped_tools == [[], []]
    # called but never answered: nothing to decide on, left open as recorded
    on_call = converted_records(HAND_OFF, {"transfer_to_human_agents"})
    assert on_call.relays == [None, None]
    assert on_call.records[1]["rule"] == "interrupted"
    # a stop on lookup in run 2 would have left the hand-off uncalled
    on_lookup = converted_records(on_result, {"lookup"})
    assert on_lookup.skipped_tools[1] == ["transfer_to_human_agents"]
    assert [r["model_calls"] for r in on_lookup.records] == [1, 1]


def _limited(
    policy: StopPolicy, db: Path, messages: Sequence[BaseMessage] | None = None
) -> tuple[list[Any], list[BaseMessage]]:
    """Two runs of a real agent whose `ModelCallLimitMiddleware(run_limit=2,
    exit_behavior="end")` ends the second after the hand-off's result: its records (read as
    `report --db` reads them) and its messages (what a log written from its state holds).
    With `messages`, the tools return their recorded results and artifacts."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelCallLimitMiddleware
    from langgraph.checkpoint.sqlite import SqliteSaver

    from toolstop.report.reader import open_database

    script = [asks("c1", "lookup"), AIMessage("It shipped."), *HAND_OFF[5::2]]
    recorded = messages or [*HAND_OFF, TRANSFERRED]
    tools = replay(recorded, content_and_artifact=messages is not None).tools
    config: Any = {"configurable": {"thread_id": "t"}}
    with SqliteSaver.from_conn_string(str(db)) as saver:
        for question, answers in ((HAND_OFF[0], script[:2]), (HAND_OFF[4], script[2:])):
            agent = create_agent(
                ScriptedChatModel(answers),
                list(tools),
                middleware=[
                    StopOnArtifact(policy),
                    ModelCallLimitMiddleware(run_limit=2, exit_behavior="end"),
                ],
                checkpointer=saver,
            )
            state = agent.invoke({"messages": [question]}, config)
    with open_database(str(db)) as database:
        ends, _ = database.run_ends("t", "")
    return [dict(end.record) for end in ends], list(state["messages"])


def test_a_run_a_call_limit_ended_is_read_as_shadow_mode_records_it(tmp_path: Path) -> None:
    from toolstop.report.sources.shadow import shadow_records

    records, messages = _limited(StopPolicy(mode="never"), tmp_path / "never.sqlite")
    assert records[1]["ended_by"] == "ModelCallLimitMiddleware"  # the agent's own record
    assert shadow_records(messages) == records
    # what hard mode would have done: the hand-off's stop delivered in the limit's place
    converted = converted_records(messages, {"transfer_to_human_agents"})
    prepared = signalled(messages, {"transfer_to_human_agents"})
    hard, _ = _limited(StopPolicy(mode="hard"), tmp_path / "hard.sqlite", prepared)
    assert converted.records == hard
    assert converted.records[1]["rule"] == "completed"
    assert converted.relays == [None, "Transfer successful"]
