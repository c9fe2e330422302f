"""Replay recorded tool-calling conversations through an unchanged agent in shadow mode.

    python scripts/replay_traffic.py tests/fixtures/traffic/SET/conversations.jsonl \\
        --db /tmp/traffic.sqlite [--report DIR] [--limit N]

Each line of the JSONL file is one conversation in OpenAI chat format (`{"id", "messages"}`,
with `tool_calls` on assistant messages, `tool` messages answering them by `tool_call_id`, and
the provider's `usage` where the source has it). Each conversation is replayed on its own thread
of a SQLite checkpointer (thread id = the conversation's id) through an unchanged
`langchain.agents.create_agent` with `StopOnArtifact(StopPolicy(mode="never"))`:

- the line is read by toolstop's OpenAI-format reader (`toolstop.report.sources.openai`), and
  `toolstop.testing.replay` gives the script (the recorded assistant messages, in order, with
  the recorded `usage` as `usage_metadata`, which `ScriptedChatModel` keeps), the stand-in
  tools (each returns the recorded result for the call id it is given) and the questions;
- each user message starts one run (`agent.invoke`), which ends at the model's next answer
  without tool calls.

Then the records are checked against an independent count from the JSONL file: per
conversation, the runs (user messages) and model calls (assistant messages) must equal what the
records say. With `--report DIR`, `toolstop report --db DB --out DIR` runs on the database; with
`--labels FILE` as well (the hand-judged pairs of the set, `labels.jsonl`), the summary gets an
`agreement` table: per judged tool, the advice the labels give (`judged_advice`) beside the
report's (`candidates[].advice` where the report has it, else its `verdict`; the tools
report.json folds away are read from the records by the report's own code, `all_candidates`).
Prints a JSON summary; exits 1 when a count differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, ToolCall, UsageMetadata
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId
from pydantic import BaseModel, ConfigDict

from toolstop.report.sources.openai import messages as openai_messages
from toolstop.testing import ScriptedChatModel
from toolstop.testing import replay as replay_recording

__all__ = [
    "RecordedChatModel",
    "agreement",
    "all_candidates",
    "expected_counts",
    "judged_advice",
    "load_conversations",
    "main",
    "recorded_counts",
    "replay",
    "replay_conversation",
    "runs_of",
]


def load_conversations(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The conversations of a JSONL file (the first `limit` of them)."""
    conversations = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        conversation = json.loads(line)
        if not isinstance(conversation, dict) or not isinstance(conversation.get("messages"), list):
            msg = f"{path}:{number}: not a conversation ({{'messages': [...]}})"
            raise ValueError(msg)
        conversations.append(conversation)
        if limit is not None and len(conversations) >= limit:
            break
    return conversations


def runs_of(messages: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The conversation cut into runs: a user message, then what the agent did until it answered.

    Raises:
        ValueError: the shape cannot be replayed: a message before the first user message, a
            run without an answer, a run that does not end with an answer without tool calls,
            or a tool result for a call that was not made.
    """
    runs: list[list[Mapping[str, Any]]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        if role == "user":
            runs.append([message])
            continue
        if not runs:
            msg = f"a {role} message comes before the first user message"
            raise ValueError(msg)
        runs[-1].append(message)
    for number, run in enumerate(runs):
        last = run[-1]
        if last.get("role") != "assistant" or last.get("tool_calls"):
            msg = f"run {number} does not end with an answer without tool calls"
            raise ValueError(msg)
        called = {c["id"] for m in run for c in m.get("tool_calls") or ()}
        answered = [m.get("tool_call_id") for m in run if m.get("role") == "tool"]
        if sorted(called) != sorted(answered):  # type: ignore[type-var]
            msg = f"run {number}: the tool results do not answer the calls one to one"
            raise ValueError(msg)
    return runs


def expected_counts(conversation: Mapping[str, Any]) -> dict[str, int]:
    """Runs and model calls counted from the JSONL alone (not from toolstop)."""
    messages = conversation["messages"]
    return {
        "runs": sum(1 for m in messages if m.get("role") == "user"),
        "model_calls": sum(1 for m in messages if m.get("role") == "assistant"),
        "tool_calls": sum(len(m.get("tool_calls") or ()) for m in messages),
    }


def _usage(raw: Any) -> UsageMetadata | None:
    if not isinstance(raw, Mapping):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return UsageMetadata(
        input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion
    )


def _ai_message(message: Mapping[str, Any]) -> AIMessage:
    calls = [
        ToolCall(
            name=c["function"]["name"],
            args=json.loads(c["function"].get("arguments") or "{}"),
            id=c["id"],
            type="tool_call",
        )
        for c in message.get("tool_calls") or ()
    ]
    return AIMessage(
        content=message.get("content") or "",
        tool_calls=calls,
        usage_metadata=_usage(message.get("usage")),
    )


class RecordedChatModel(ScriptedChatModel):
    """The scripted model over recorded assistant messages (their usage kept, as the kit keeps a
    scripted message's own), which a replay can move to a run's first message."""

    def __init__(self, recorded: Sequence[Mapping[str, Any]], **kwargs: Any) -> None:
        super().__init__([_ai_message(m) for m in recorded], **kwargs)

    @property
    def position(self) -> int:
        """How many recorded messages the model has answered with (or skipped)."""
        return self._script.position

    def start_run(self, position: int) -> None:
        """Answer the next call with recorded message `position` (a run's first message).

        A hard stop ends a run before its recorded answer: the messages it skipped are dropped,
        never asked for. Raises `ValueError` for a position before the current one."""
        if position < self._script.position:
            msg = f"position {position} is before {self._script.position}: already answered"
            raise ValueError(msg)
        self._script.position = position


class _AnyArguments(BaseModel):
    """Whatever arguments the recorded call had, plus the call id."""

    model_config = ConfigDict(extra="allow")
    tool_call_id: Annotated[str, InjectedToolCallId]


def replay_conversation(conversation: Mapping[str, Any], checkpointer: Any) -> None:
    """Replay one conversation on its own thread (thread id = its `id`)."""
    from langchain.agents import create_agent

    from toolstop import StopOnArtifact, StopPolicy

    runs_of(conversation["messages"])  # refuse a shape that cannot be replayed
    recorded = replay_recording(openai_messages(conversation))
    model = ScriptedChatModel(recorded.script)
    agent = create_agent(
        model,
        list(recorded.tools),
        middleware=[StopOnArtifact(StopPolicy(mode="never"))],
        checkpointer=checkpointer,
    )
    config: RunnableConfig = {"configurable": {"thread_id": str(conversation["id"])}}
    for question in recorded.questions:
        agent.invoke({"messages": [question]}, config)
    model.assert_complete()


def recorded_counts(db: str) -> dict[str, dict[str, int]]:
    """Per thread, the runs and model calls the stop records of `db` say."""
    from toolstop.report.reader import open_database

    counts: dict[str, dict[str, int]] = {}
    with open_database(db) as database:
        for thread_id, checkpoint_ns in database.threads():
            if checkpoint_ns:
                continue
            ends, _ = database.run_ends(thread_id, checkpoint_ns)
            tally = counts.setdefault(thread_id, {"runs": 0, "model_calls": 0, "tool_calls": 0})
            for end in ends:
                tally["runs"] += 1
                tally["model_calls"] += int(end.record.get("model_calls") or 0)
                calls = end.record.get("calls_by_tool") or {}
                tally["tool_calls"] += sum(int(v) for v in calls.values())
    return counts


def replay(conversations: Sequence[Mapping[str, Any]], db: Path) -> dict[str, Any]:
    """Replay `conversations` into a fresh SQLite file `db`; compare the records' counts."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    ids = [str(c["id"]) for c in conversations]
    if len(set(ids)) != len(ids):
        msg = "conversation ids repeat: each conversation needs its own thread"
        raise ValueError(msg)
    db.unlink(missing_ok=True)
    with SqliteSaver.from_conn_string(str(db)) as saver:
        for conversation in conversations:
            replay_conversation(conversation, saver)
    recorded = recorded_counts(str(db))
    differences = []
    totals = {"runs": 0, "model_calls": 0, "tool_calls": 0}
    for conversation in conversations:
        expected = expected_counts(conversation)
        got = recorded.get(str(conversation["id"]), {})
        for key, value in expected.items():
            totals[key] += value
            if got.get(key) != value:
                differences.append(
                    {"id": conversation["id"], key: {"jsonl": value, "records": got.get(key)}}
                )
    return {
        "conversations": len(conversations),
        "expected": totals,
        "threads_recorded": len(recorded),
        "differences": differences,
    }


def all_candidates(db: str) -> list[dict[str, Any]]:
    """Every tool's report entry (`candidates[]`) from the records of `db`, by the report's own
    code (`toolstop.report.candidates.Candidates`), ranked as the report ranks them.

    report.json lists the first 50 and folds the rest (a `cut_short` tool ranks last, so on a
    set of 70 tools some are folded); the agreement needs every judged tool's advice."""
    from toolstop.report.candidates import Candidates
    from toolstop.report.reader import open_database

    candidates = Candidates()
    with open_database(db) as database:
        for thread_id, namespace in database.threads():
            ends, _ = database.run_ends(thread_id, namespace)
            for end in ends:
                candidates.add(end.record, end)
    return candidates.document()


CUT_SHORT_SHARE = 0.1
"""A tool cut short in at least this share of its judged pairs is advised `cut_short`."""


def judged_advice(labels: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per tool: the counts of each label and the advice they give.

    `cut_short` when at least 1 in 10 pairs was cut short; otherwise `convert` when most pairs
    were `convert`, `convert_with_answer` when most were `convert` or `convert_with_answer`,
    else `keep`; `too_few` under 5 pairs.
    """
    counts: dict[str, Counter[str]] = {}
    for label in labels:
        counts.setdefault(str(label["tool"]), Counter())[str(label["label"])] += 1
    judged = {}
    for tool, count in sorted(counts.items()):
        pairs = sum(count.values())
        if pairs < 5:
            advice = "too_few"
        elif count["cut_short"] >= CUT_SHORT_SHARE * pairs:
            advice = "cut_short"
        elif count["convert"] * 2 > pairs:
            advice = "convert"
        elif (count["convert"] + count["convert_with_answer"]) * 2 > pairs:
            advice = "convert_with_answer"
        else:
            advice = "keep"
        judged[tool] = {"pairs": pairs, "labels": dict(count), "judged": advice}
    return judged


def agreement(report: Mapping[str, Any], labels: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The judged advice per tool beside the report's, and how many tools agree."""
    candidates = {c.get("tool"): c for c in report.get("candidates") or ()}
    tools = judged_advice(labels)
    for tool, row in tools.items():
        candidate = candidates.get(tool) or {}
        row["report"] = candidate.get("advice") or candidate.get("verdict")
    agreeing = sum(1 for row in tools.values() if row["report"] == row["judged"])
    return {"tools": tools, "agreeing": agreeing, "judged_tools": len(tools)}


def main(argv: Sequence[str] | None = None) -> int:
    """Replay, check the counts, optionally run `toolstop report`; print a JSON summary."""
    parser = argparse.ArgumentParser(prog="python scripts/replay_traffic.py")
    parser.add_argument("conversations", type=Path, help="a JSONL file, one conversation a line")
    parser.add_argument("--db", type=Path, required=True, help="the SQLite file to write (anew)")
    parser.add_argument("--report", type=Path, help="run `toolstop report` into this folder")
    parser.add_argument("--limit", type=int, help="replay only the first N conversations")
    parser.add_argument("--labels", type=Path, help="hand-judged pairs: compare with the report")
    args = parser.parse_args(argv)
    if args.labels is not None and args.report is None:
        parser.error("--labels needs --report")
    summary = replay(load_conversations(args.conversations, args.limit), args.db)
    code = 1 if summary["differences"] else 0
    if args.report is not None:
        from toolstop.cli import main as toolstop

        code = toolstop(["report", "--db", str(args.db), "--out", str(args.report)]) or code
        if args.labels is not None:
            report = json.loads((args.report / "report.json").read_text())
            listed = {c.get("tool") for c in report.get("candidates") or ()}
            report["candidates"] = [
                *(report.get("candidates") or ()),
                *(c for c in all_candidates(str(args.db)) if c["tool"] not in listed),
            ]
            labels = [json.loads(x) for x in args.labels.read_text().splitlines() if x.strip()]
            summary["agreement"] = agreement(report, labels)
    print(json.dumps(summary, indent=2))
    return code


if __name__ == "__main__":
    sys.exit(main())
