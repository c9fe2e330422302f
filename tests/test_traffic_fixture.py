"""The recorded-traffic fixture: it parses, it replays exactly, and its labels name real calls.

tests/fixtures/traffic/<set>/conversations.jsonl is real recorded tool-calling traffic (see the
set's README.md); scripts/replay_traffic.py replays it through an unchanged `create_agent` in
shadow mode. The counts these tests compare against are taken from the JSONL here, not from the
replay script."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "traffic"
SETS = sorted(p for p in FIXTURES.iterdir() if (p / "conversations.jsonl").exists())
LABELS = ("convert", "convert_with_answer", "keep", "cut_short")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _count(conversation: dict[str, Any]) -> dict[str, int]:
    """Runs (user turns), model calls (assistant messages), tool calls: from the JSONL alone."""
    roles = Counter(m["role"] for m in conversation["messages"])
    calls = sum(len(m.get("tool_calls") or ()) for m in conversation["messages"])
    return {"runs": roles["user"], "model_calls": roles["assistant"], "tool_calls": calls}


def test_there_is_a_set_with_its_licence_and_readme() -> None:
    assert SETS
    for folder in SETS:
        assert (folder / "README.md").exists()
        assert "MIT License" in (folder / "LICENSE.md").read_text()


@pytest.mark.parametrize("folder", SETS, ids=[p.name for p in SETS])
def test_the_conversations_parse_as_openai_chat(folder: Path) -> None:
    conversations = _lines(folder / "conversations.jsonl")
    assert len(conversations) >= 60
    assert len({c["id"] for c in conversations}) == len(conversations)
    assert (folder / "conversations.jsonl").stat().st_size < 500_000
    for conversation in conversations:
        messages = conversation["messages"]
        assert messages[0]["role"] == "user"
        assert messages[-1]["role"] == "assistant"
        assert not messages[-1].get("tool_calls")
        open_calls: set[str] = set()
        for message in messages:
            assert message["role"] in ("user", "assistant", "tool")
            if message["role"] == "user":
                assert not open_calls  # every call was answered before the user spoke again
            for call in message.get("tool_calls") or ():
                assert call["type"] == "function"
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
                open_calls.add(call["id"])
            if message["role"] == "tool":
                open_calls.remove(message["tool_call_id"])
        assert not open_calls


@pytest.mark.parametrize("folder", SETS, ids=[p.name for p in SETS])
def test_the_labels_refer_to_real_calls(folder: Path) -> None:
    conversations = {c["id"]: c for c in _lines(folder / "conversations.jsonl")}
    labels = _lines(folder / "labels.jsonl")
    assert len(labels) >= 50
    assert len({(x["conversation"], x["call_id"]) for x in labels}) == len(labels)
    for label in labels:
        assert label["label"] in LABELS
        assert label["reason"].strip()
        messages = conversations[label["conversation"]]["messages"]
        # the run the call belongs to: from the user message before it to the next one
        position = next(
            i
            for i, m in enumerate(messages)
            for c in m.get("tool_calls") or ()
            if c["id"] == label["call_id"]
        )
        call = next(c for c in messages[position]["tool_calls"] if c["id"] == label["call_id"])
        assert call["function"]["name"] == label["tool"]
        end = next(
            (i for i in range(position, len(messages)) if messages[i]["role"] == "user"),
            len(messages),
        )
        same_turn = [c["id"] for c in messages[position]["tool_calls"]]
        later = [
            c for m in messages[position + 1 : end] for c in m.get("tool_calls") or ()
        ] + same_turn[same_turn.index(label["call_id"]) + 1 :]
        # cut_short says: more tool calls followed in the same run
        assert (label["label"] == "cut_short") == bool(later), label


def _replay_and_compare(conversations: list[dict[str, Any]], tmp_path: Path) -> None:
    from replay_traffic import recorded_counts, replay

    summary = replay(conversations, tmp_path / "traffic.sqlite")
    assert summary["differences"] == []
    recorded = recorded_counts(str(tmp_path / "traffic.sqlite"))
    assert set(recorded) == {c["id"] for c in conversations}
    for conversation in conversations:
        assert recorded[conversation["id"]] == _count(conversation), conversation["id"]


@pytest.mark.parametrize("folder", SETS, ids=[p.name for p in SETS])
def test_a_replay_records_what_the_jsonl_holds(folder: Path, tmp_path: Path) -> None:
    conversations = _lines(folder / "conversations.jsonl")
    # a few of each domain: reads, writes, errors, several runs a thread
    subset = {c.get("domain"): c for c in conversations}
    _replay_and_compare(list(subset.values()), tmp_path)


def test_the_replay_keeps_the_recorded_usage(tmp_path: Path) -> None:
    from replay_traffic import replay
    from toolstop.report.reader import open_database

    conversation = {
        "id": "one",
        "messages": [
            {"role": "user", "content": "Where is order 7?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "order", "arguments": '{"id": 7}'},
                    }
                ],
                "usage": {"prompt_tokens": 1234, "completion_tokens": 5, "total_tokens": 1239},
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
            {
                "role": "assistant",
                "content": "Order 7 has shipped.",
                "usage": {"prompt_tokens": 2000, "completion_tokens": 7, "total_tokens": 2007},
            },
        ],
    }
    assert replay([conversation], tmp_path / "one.sqlite")["differences"] == []
    with open_database(str(tmp_path / "one.sqlite")) as database:
        (ends, _) = database.run_ends("one", "")
    record = ends[0].record
    # the recorded figures, not langchain-core's approximation of a few dozen tokens
    assert (record["input_tokens"], record["output_tokens"]) == (3234, 12)
    assert record["ended_after"]["input_tokens"] == 2000


def test_a_conversation_that_cannot_be_replayed_is_refused() -> None:
    from replay_traffic import runs_of

    with pytest.raises(ValueError, match="does not end with an answer"):
        runs_of([{"role": "user", "content": "hi"}])
    with pytest.raises(ValueError, match="before the first user message"):
        runs_of([{"role": "assistant", "content": "hello"}])


@pytest.mark.slow
@pytest.mark.parametrize("folder", SETS, ids=[p.name for p in SETS])
def test_the_whole_set_replays_exactly(folder: Path, tmp_path: Path) -> None:
    _replay_and_compare(_lines(folder / "conversations.jsonl"), tmp_path)


def test_the_script_replays_then_reports(tmp_path: Path) -> None:
    from replay_traffic import main

    path = SETS[0] / "conversations.jsonl"
    out = tmp_path / "report"
    db = tmp_path / "t.sqlite"
    assert main([str(path), "--db", str(db), "--limit", "3", "--report", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    counts = [_count(c) for c in _lines(path)[:3]]
    assert report["threads"] == 3
    assert report["runs"] == sum(c["runs"] for c in counts)
    assert report["model_calls"] == sum(c["model_calls"] for c in counts)


def _docs_rows() -> list[list[str]]:
    """The per-tool table's rows: tool, pairs, 4 label counts, judged advice, today, after."""
    page = (Path(__file__).parent.parent / "docs" / "advisor-validation.md").read_text()
    rows = []
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[1].isdigit():
            rows.append(cells)
    return rows


def _docs_table() -> dict[str, tuple[int, int, int, int, int, str]]:
    rows = {}
    for cells in _docs_rows():
        pairs, *counts = (int(c) for c in cells[1:6])
        rows[cells[0]] = (pairs, *counts, cells[6].split()[0])
    return rows


def test_the_docs_table_is_what_the_labels_say() -> None:
    from replay_traffic import judged_advice

    folder = FIXTURES / "tau2_student_domains"
    judged = judged_advice(_lines(folder / "labels.jsonl"))
    expected = {
        tool: (
            row["pairs"],
            *(row["labels"].get(label, 0) for label in LABELS),
            row["judged"],
        )
        for tool, row in judged.items()
    }
    assert _docs_table() == expected


def test_judged_advice_follows_the_rules() -> None:
    from replay_traffic import judged_advice

    def pairs(**labels: int) -> list[dict[str, str]]:
        return [{"tool": "t", "label": k} for k, n in labels.items() for _ in range(n)]

    def advice(**labels: int) -> str:
        return str(judged_advice(pairs(**labels))["t"]["judged"])

    assert advice(convert=4) == "too_few"
    assert advice(convert=9, cut_short=1) == "cut_short"  # 1 in 10 is enough
    assert advice(convert=10, cut_short=1) == "convert"  # under 1 in 10
    assert advice(convert=3, convert_with_answer=3, keep=4) == "convert_with_answer"
    assert advice(convert_with_answer=5, keep=5) == "keep"  # a tie is not most
    assert advice(convert=6, keep=4) == "convert"


def test_agreement_prefers_the_reports_advice_over_its_verdict() -> None:
    from replay_traffic import agreement

    labels = [{"tool": "a", "label": "keep"}] * 5 + [{"tool": "b", "label": "convert"}] * 5
    report = {
        "candidates": [
            {"tool": "a", "verdict": "keep"},
            {"tool": "b", "verdict": "candidate", "advice": "convert"},
        ]
    }
    result = agreement(report, labels)
    assert [result["tools"][t]["report"] for t in ("a", "b")] == ["keep", "convert"]
    assert (result["agreeing"], result["judged_tools"]) == (2, 2)
    assert agreement({"candidates": []}, labels)["agreeing"] == 0


def _call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _said(content: str, tokens: int, *calls: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    message["usage"] = {"prompt_tokens": tokens, "completion_tokens": 0, "total_tokens": tokens}
    return message


def test_a_converted_replay_stops_at_the_first_success_as_predicted(tmp_path: Path) -> None:
    """An error, a retry that succeeds, a lookup, an answer; then a second run. Converted, hard
    mode stops after the retry: the model is never asked for the lookup or the answer, and the
    next run starts at its own recorded messages."""
    from replay_conversion import compare

    conversation = {
        "id": "c",
        "messages": [
            {"role": "user", "content": "Book room 7"},
            _said("", 100, _call("a", "book")),
            {"role": "tool", "tool_call_id": "a", "content": "Error: room busy"},
            _said("", 200, _call("b", "book")),
            {"role": "tool", "tool_call_id": "b", "content": '{"booking": "B-1"}'},
            _said("", 300, _call("c", "lookup")),
            {"role": "tool", "tool_call_id": "c", "content": '{"room": 7}'},
            _said("Booked: B-1.", 400),
            {"role": "user", "content": "Thanks"},
            _said("You are welcome.", 500),
        ],
    }
    summary = compare([conversation], tmp_path, ["book"])
    (row,) = summary["tools"]
    # after the first *successful* call: the lookup call and the answer (300 + 400 tokens)
    assert row["predicted"] == {"model_calls": 2, "input_tokens": 700}
    assert row["shadow_measured"] == row["predicted"]
    assert row["hard_measured"] == {"model_calls": 2, "input_tokens": 700, "runs_stopped": 1}
    assert row["error_pct"] == {"model_calls": 0.0, "input_tokens": 0.0}


@pytest.mark.slow
@pytest.mark.parametrize("folder", SETS, ids=[p.name for p in SETS])
def test_would_save_comes_true_after_the_conversion(folder: Path, tmp_path: Path) -> None:
    """Issue 39: per tool with at least 5 runs, `would_save` within 15% of what converting it
    saves in hard mode (model calls and input tokens), and of what shadow mode measures."""
    from replay_conversion import BOUND, compare

    summary = compare(_lines(folder / "conversations.jsonl"), tmp_path, min_runs=5)
    assert len(summary["tools"]) >= 5
    for row in summary["tools"]:
        for key in ("model_calls", "input_tokens"):
            measured = row["hard_measured"][key]
            assert measured > 0, row
            assert abs(row["predicted"][key] - measured) <= BOUND * measured, row
            shadow = row["shadow_measured"][key]
            assert abs(row["predicted"][key] - shadow) <= BOUND * shadow, row


@pytest.mark.slow
def test_the_docs_after_column_is_the_reports_advice(tmp_path: Path) -> None:
    """The "after" column says what `toolstop report` advises on the whole set today, and no
    tool the labels judge `keep` is advised `convert` (issue 39's Done when)."""
    from replay_traffic import agreement, all_candidates, replay

    folder = FIXTURES / "tau2_student_domains"
    db = tmp_path / "t.sqlite"
    assert replay(_lines(folder / "conversations.jsonl"), db)["differences"] == []
    result = agreement({"candidates": all_candidates(str(db))}, _lines(folder / "labels.jsonl"))
    after = {cells[0]: cells[8].split()[0] for cells in _docs_rows()}
    assert after == {tool: row["report"] for tool, row in result["tools"].items()}
    for row in result["tools"].values():
        assert not (row["judged"] == "keep" and row["report"] == "convert"), row
