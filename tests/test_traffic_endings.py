"""Real recorded conversations as they end: every run counted, equal to an independent count.

The fixture (tests/fixtures/traffic/tau2_student_domains_as_recorded/) holds public τ²-bench
recordings nobody here wrote, each ending with a user message nobody answered. The same
conversations cut where a step limit or a hand-off would have ended them (on a tool call, on its
result) are real traffic ending on a tool. The counter here reads the JSON on its own, from the
roles alone: a run is a user message (or several in a row) that an assistant message follows."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:  # the reference replays through a real create_agent
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)

from ended_replay import ended_replay
from toolstop.cli import main
from toolstop.report.sources import read_conversations
from toolstop.report.sources._base import conversation
from toolstop.report.sources.openai import messages as openai_messages
from toolstop.report.sources.shadow import shadow_records

pytest.importorskip("langgraph.checkpoint.sqlite")

TRAFFIC = (
    Path(__file__).parent
    / "fixtures"
    / "traffic"
    / "tau2_student_domains_as_recorded"
    / "as_recorded.jsonl"
)


def count(messages: list[dict[str, Any]]) -> Counter[str]:
    """Runs, model calls, tool calls and unanswered endings of one conversation, by role."""
    found: Counter[str] = Counter()
    waiting = False  # a user message no assistant message has followed yet
    for message in messages:
        if message["role"] == "user":
            waiting = True
        elif message["role"] == "assistant":
            found["runs"] += waiting
            waiting = False
            found["model_calls"] += 1
            found["tool_calls"] += len(message.get("tool_calls") or ())
    found["open"] += waiting
    return found


def lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in TRAFFIC.read_text().splitlines()]


def test_the_counter_counts_what_it_is_shown() -> None:
    messages = [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "tool_calls": [{"id": "1"}, {"id": "2"}]},
        {"role": "tool"},
        {"role": "tool"},
        {"role": "assistant", "content": "x"},
        {"role": "user", "content": "###STOP###"},
    ]
    assert count(messages) == Counter(runs=1, model_calls=2, tool_calls=2, open=1)


def test_every_run_of_real_logs_is_counted(tmp_path: Path) -> None:
    expected: Counter[str] = Counter()
    for item in lines():
        expected += count(item["messages"])
    assert expected["open"] == 140  # each ends with a message nobody answered
    out = tmp_path / "out"
    assert main(["report", "--from", str(TRAFFIC), "--out", str(out)]) == 0
    document = json.loads((out / "report.json").read_text())
    assert document["conversations"] == document["threads"] == 140
    assert document["runs"] == expected["runs"]
    assert document["model_calls"] == expected["model_calls"]
    assert sum(document["tool_calls"].values()) == expected["tool_calls"]
    assert document["open_runs"] == expected["open"]
    assert document["unreadable"]["conversations"] == document["unreadable"]["runs"] == 0


def _cuts(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The conversation as a step limit or a hand-off would have left it: cut right after its
    first tool call, and right after that call's results."""
    at = next((i for i, m in enumerate(messages) if m.get("tool_calls")), None)
    if at is None:
        return []
    end = at + 1
    while end < len(messages) and messages[end]["role"] == "tool":
        end += 1
    return [messages[: at + 1], messages[:end]]


def test_real_logs_cut_on_a_tool_are_counted_per_conversation() -> None:
    cut = 0
    for item in lines():
        for messages in _cuts(item["messages"]):
            built = conversation(item["id"], openai_messages(messages), line=1)
            records = shadow_records(built.messages)
            expected = count(messages)
            assert len(records) == expected["runs"]
            assert sum(r["model_calls"] for r in records) == expected["model_calls"]
            calls = sum(sum(r["outcomes"].values()) + len(r["tools"]) for r in records)
            assert calls == expected["tool_calls"]
            assert records[-1]["rule"] == "interrupted"  # the run left open on the tool
            cut += 1
    assert cut == 2 * 123  # 123 conversations call a tool


def test_real_logs_cut_on_a_tool_give_the_records_of_a_real_replay(tmp_path: Path) -> None:
    seen: set[str] = set()
    for conversation_read, item in zip(read_conversations(TRAFFIC), lines(), strict=True):
        if item["domain"] in seen or not _cuts(item["messages"]):
            continue
        seen.add(item["domain"])  # one conversation per domain
        for number, messages in enumerate(_cuts(item["messages"])):
            built = conversation(item["id"], openai_messages(messages), line=1).messages
            records, _ = ended_replay(built, tmp_path / f"{len(seen)}-{number}.sqlite")
            assert shadow_records(built) == records, conversation_read.id
    assert len(seen) >= 12


def test_the_cut_keeps_a_conversation_as_it_ends() -> None:
    from cut_traffic import convert_simulation

    simulation = [
        {"role": "assistant", "content": "Hi! How can I help you today?"},  # τ²-bench's greeting
        {"role": "user", "content": "A person, please."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "t1", "name": "transfer_to_human_agents", "arguments": {}}],
        },
        {"role": "tool", "id": "t1", "content": "Transfer successful"},
        {"role": "user", "content": "###TRANSFER###"},
    ]
    kept = convert_simulation(simulation, as_recorded=True)
    assert kept is not None
    assert [m["role"] for m in kept] == ["user", "assistant", "tool", "user"]
    assert convert_simulation(simulation) is None  # the fixture's first cut: no final answer
    assert count(kept) == Counter(runs=1, model_calls=1, tool_calls=1, open=1)


HAND_OFFS = ("escalate_to_human", "transfer_to_human_agents")


def _hand_off_cut(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The conversation cut right after its first hand-off's results (None: no hand-off)."""
    names = [[c["function"]["name"] for c in m.get("tool_calls") or ()] for m in messages]
    at = next((i for i, called in enumerate(names) if set(called) & set(HAND_OFFS)), None)
    if at is None:
        return None
    end = at + 1
    while end < len(messages) and messages[end]["role"] == "tool":
        end += 1
    return messages[:end]


def test_the_docs_table_of_logs_as_they_end(tmp_path: Path) -> None:
    items = lines()
    logs = {
        "as recorded": [i["messages"] for i in items],
        "cut right after the first tool call": [c[0] for i in items if (c := _cuts(i["messages"]))],
        "cut right after that call's results": [c[1] for i in items if (c := _cuts(i["messages"]))],
        "cut after the first": [c for i in items if (c := _hand_off_cut(i["messages"]))],
    }
    page = (Path(__file__).parent.parent / "docs" / "advisor-validation.md").read_text()
    section = page[page.index("## Logs as they end") : page.index("## The judgement")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = next((key for key in logs if cells[0].startswith(key)), None)
        if name is not None and len(cells) == 7:
            rows[name] = [int(c.split()[-1].replace(",", "")) for c in cells[1:2]] + [
                int(c.split()[0].replace(",", "")) for c in cells[2:6]
            ]
    assert rows.keys() == logs.keys()
    for number, (name, conversations) in enumerate(logs.items()):
        expected: Counter[str] = Counter()
        for messages in conversations:
            expected += count(messages)
        counted = [len(conversations), *(expected[k] for k in ("runs", "model_calls"))]
        counted += [expected["tool_calls"], expected["open"]]
        assert rows[name] == counted, name
        log = tmp_path / f"{number}.jsonl"
        log.write_text("".join(json.dumps({"messages": m}) + "\n" for m in conversations))
        out = tmp_path / str(number)
        assert main(["report", "--from", str(log), "--out", str(out)]) == 0
        document = json.loads((out / "report.json").read_text())
        found = [document["conversations"], document["runs"], document["model_calls"]]
        assert found == counted[:3], name
        assert document["open_runs"] == expected["open"]


def test_the_docs_quote_the_conversion_of_the_hand_offs(tmp_path: Path) -> None:
    import re

    items = lines()
    cut = [c for i in items if (c := _hand_off_cut(i["messages"]))]
    log = tmp_path / "hand_offs.jsonl"
    log.write_text("".join(json.dumps({"messages": m}) + "\n" for m in cut))
    found = []
    for source in (log, TRAFFIC):
        out = tmp_path / source.stem
        argv = ["report", "--from", str(source), "--convert", ",".join(HAND_OFFS), "--out"]
        assert main([*argv, str(out)]) == 0
        what_if = json.loads((out / "report.json").read_text())["what_if"]
        assert what_if["unseen"] == []
        found.append(what_if)
    page = (Path(__file__).parent.parent / "docs" / "advisor-validation.md").read_text()
    text = " ".join(page[page.index("On the hand-off log") :].split())
    quoted = re.search(
        r"now (\d+) of (\d+) runs stop .*? stops (\d+) of (\d+) runs and saves (\d+) model calls "
        r"\(([\d,]+) input tokens\)",
        text,
    )
    assert quoted is not None
    hand_offs, whole = found
    assert [int(x.replace(",", "")) for x in quoted.groups()] == [
        hand_offs["stopped_runs"],
        hand_offs["runs"],
        whole["stopped_runs"],
        whole["runs"],
        whole["saved"]["model_calls"],
        whole["saved"]["input_tokens"],
    ]
    assert hand_offs["saved"]["model_calls"] == 0  # nothing followed a hand-off in the log
    # each conversation's first hand-off is its last call: one stop per conversation
    assert hand_offs["stopped_runs"] == len(cut)
