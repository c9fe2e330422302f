"""`toolstop report` and `toolstop explain` on multi-level agents checkpointed in SQLite: a
toolstop agent compiled into a parent graph as a node, a parent that copies `stop_record`, two
agents handing off to each other (`Command(graph=Command.PARENT)`), an interrupt inside a child.

Expected figures come from the scripted models' call logs and the plan written here, never from
the records. Before `toolstop.report.levels`, each namespace was a thread ("threads: 2" for 1),
a parent's copies were counted as runs (5 for 2), every hand-off run stayed open (2 model calls
shown for 4 made) and `explain` called every run "run 1", listed by namespace.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from toolstop import Outcome, build_react_graph, signal
from toolstop.cli import main
from toolstop.report.levels import grouped, level_of, thread_runs
from toolstop.report.reader import RunEnd
from toolstop.report.records import NAME_LIMIT
from toolstop.testing import ScriptedChatModel, call, forced_tool

sqlite_saver = pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
pytest.importorskip("matplotlib", reason="the report chart needs the `bench` extra")

DONE = ("Paid. Receipt r-1.", signal(Outcome.COMPLETED))
REFUNDED = ("Refund issued. r-9.", signal(Outcome.COMPLETED))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    path = str(tmp_path / "levels.db")
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        yield path, sqlite_saver.SqliteSaver(conn)
    finally:
        conn.close()


def report(path: str, out_dir: Path) -> dict[str, Any]:
    out = io.StringIO()
    assert main(["report", "--db", path, "--out", str(out_dir)], out=out) == 0, out.getvalue()
    return json.loads((out_dir / "report.json").read_text())  # type: ignore[no-any-return]


def explain(path: str, thread: str, *more: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["explain", thread, "--db", path, *more], out=out), out.getvalue()


class WithRecord(MessagesState):
    stop_record: Any


def worker_parent(saver: Any, *, copies: bool) -> tuple[Any, ScriptedChatModel]:
    """A parent whose one node is a toolstop agent (the hand-built graph), compiled as a
    subgraph; with `copies`, the parent's state has a `stop_record` key too."""
    model = ScriptedChatModel([call("pay", id="p1"), call("pay", id="p2")])
    worker = build_react_graph(model, [forced_tool("pay", DONE, DONE)])
    graph = StateGraph(WithRecord if copies else MessagesState)
    graph.add_node("worker", worker)
    graph.add_edge(START, "worker")
    graph.add_edge("worker", END)
    return graph.compile(checkpointer=saver), model


@pytest.mark.parametrize("copies", [False, True])
def test_a_subgraph_agent_counts_one_thread_and_each_run_once(
    db: tuple[str, Any], tmp_path: Path, copies: bool
) -> None:
    path, saver = db
    parent, model = worker_parent(saver, copies=copies)
    config = {"configurable": {"thread_id": "t1"}}
    for question in ("pay", "pay again"):
        answer = parent.invoke({"messages": [HumanMessage(question)]}, config)
        assert answer["messages"][-1].content == DONE[0]
    assert len(model.calls) == 2  # one call per run: each stopped on the tool's result

    document = report(path, tmp_path / "out")
    assert document["threads"] == 1  # two namespaces (one per invocation) and the top level
    assert document["runs"] == 2
    assert document["model_calls"] == len(model.calls)
    assert document["rules"] == {"completed": 2}
    # the parent copied run 1's and run 2's records, and handed run 1's to the second worker
    assert document.get("copied_records", 0) == (3 if copies else 0)

    code, text = explain(path, "t1", "--json")
    assert code == 0, text
    runs = json.loads(text)["runs"]
    assert [(r["run"], r["level"]) for r in runs] == [(1, "worker"), (2, "worker")]
    if not copies:  # a new namespace each invocation: its own record says run 1 (with copies,
        # the worker numbers from the record its parent handed it: the library's side of it)
        assert [r["record_run"] for r in runs] == [1, 1]
    assert [r["deciding"][0]["tool_call_id"] for r in runs] == ["p1", "p2"]
    assert [[c["tool_call_id"] for t in r["turns"] for c in t] for r in runs] == [["p1"], ["p2"]]
    assert runs[0]["ended_at"] < runs[1]["ended_at"]
    code, text = explain(path, "t1", "--run", "2")
    assert code == 0, text
    assert text.startswith("thread t1: 2 finished run(s) (shown: 1)\n\nrun 2 (level worker")
    copied = "copy(ies) of a record written at another level"
    assert (f"\n3 {copied}" in text) is copies
    assert "deciding: pay (p2)" in text


@tool("transfer_to_billing")
def transfer(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:  # type: ignore[type-arg]
    """Hand the conversation to billing."""
    answer = ToolMessage(
        "Transferred to billing", name="transfer_to_billing", tool_call_id=tool_call_id
    )
    return Command(goto="billing", graph=Command.PARENT, update={"messages": [answer]})


def test_hand_off_runs_are_closed_and_listed_in_the_order_they_ended(
    db: tuple[str, Any], tmp_path: Path
) -> None:
    path, saver = db
    front_model = ScriptedChatModel(
        [call("transfer_to_billing", id="h1"), call("transfer_to_billing", id="h2")]
    )
    billing_model = ScriptedChatModel([call("refund", id="r1"), call("refund", id="r2")])
    graph = StateGraph(MessagesState)
    graph.add_node("front", build_react_graph(front_model, [transfer]), destinations=("billing",))
    refund = forced_tool("refund", REFUNDED, REFUNDED)
    graph.add_node("billing", build_react_graph(billing_model, [refund]))
    graph.add_edge(START, "front")
    graph.add_edge("billing", END)
    parent = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t1"}}
    for question in ("refund please", "and another"):
        answer = parent.invoke({"messages": [HumanMessage(question)]}, config)
        assert answer["messages"][-1].content == REFUNDED[0]
    made = len(front_model.calls) + len(billing_model.calls)
    assert made == 4

    document = report(path, tmp_path / "out")
    assert document["threads"] == 1
    assert document["open_runs"] == 0  # front's runs ended on the hand-off: none left open
    assert document["runs"] == 4
    assert document["rules"] == {"completed": 2, "handed_off": 2}
    assert document["model_calls"] == made
    # a closed hand-off run does not count as a run that ended on its hand-off call (an open
    # run did: "next tool to look at: transfer_to_billing")
    handing = [c for c in document["candidates"] if c["tool"] == "transfer_to_billing"]
    assert [c["ended_on_it"] for c in handing] in ([], [0])

    code, text = explain(path, "t1", "--json")
    assert code == 0, text
    runs = json.loads(text)["runs"]
    assert [(r["run"], r["level"], r["rule"]) for r in runs] == [
        (1, "front", "handed_off"),
        (2, "billing", "completed"),
        (3, "front", "handed_off"),
        (4, "billing", "completed"),
    ]
    assert [r["deciding"] for r in runs] == [
        [{"tool": "transfer_to_billing", "tool_call_id": "h1"}],
        [{"tool": "refund", "tool_call_id": "r1"}],
        [{"tool": "transfer_to_billing", "tool_call_id": "h2"}],
        [{"tool": "refund", "tool_call_id": "r2"}],
    ]
    # each run's own turns only: billing's messages also hold front's hand-off call
    assert [[c["tool_call_id"] for t in r["turns"] for c in t] for r in runs] == [
        ["h1"], ["r1"], ["h2"], ["r2"]
    ]  # fmt: skip
    assert json.loads(explain(path, "t1", "--json", "--run", "4")[1])["runs"] == [runs[3]]
    code, text = explain(path, "t1")
    assert code == 0, text
    assert "run 3 (level front, its run 1; namespace 'front:" in text
    assert "rule handed_off (handed off: left open on a call its parent graph answered)" in text
    assert "  turn 1: transfer_to_billing h2 handed off: answered by the parent graph" in text
    assert "in progress" not in text


@tool("ask_human")
def ask_human() -> str:
    """Ask a person."""
    said: str = interrupt("approve?")
    return said


def test_a_child_waiting_on_an_interrupt_stays_in_progress(
    db: tuple[str, Any], tmp_path: Path
) -> None:
    path, saver = db
    model = ScriptedChatModel([call("ask_human", id="a1"), "Approved, done."])
    graph = StateGraph(MessagesState)
    graph.add_node("worker", build_react_graph(model, [ask_human]))
    graph.add_edge(START, "worker")
    graph.add_edge("worker", END)
    parent = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t1"}}
    parent.invoke({"messages": [HumanMessage("go")]}, config)
    waiting = report(path, tmp_path / "before")
    assert (waiting["runs"], waiting["open_runs"], waiting["threads"]) == (0, 1, 0)
    parent.invoke(Command(resume="yes"), config)
    done = report(path, tmp_path / "after")
    assert (done["runs"], done["open_runs"], done["threads"]) == (1, 0, 1)
    assert done["model_calls"] == len(model.calls) == 2


def test_levels_of_namespaces_and_threads_grouped() -> None:
    assert level_of("") == ""
    assert level_of("billing:1f5b-99") == "billing"
    assert level_of("team:ab|billing:cd") == "team/billing"
    assert level_of("n" * 10_000 + ":1") == "n" * (NAME_LIMIT - 1) + "…"  # read from a database
    pairs = [("a", ""), ("a", "x:1"), ("b", ""), ("c", "y:2"), ("c", "y:3")]
    assert list(grouped(pairs)) == [("a", ["", "x:1"]), ("b", [""]), ("c", ["y:2", "y:3"])]
    assert list(grouped([])) == []


class Stored:
    """What `thread_runs` reads of a database: runs per namespace."""

    def __init__(self, by_namespace: dict[str, list[RunEnd]]) -> None:
        self.by_namespace = by_namespace
        self.unreadable = 0

    def run_ends(self, thread_id: str, namespace: str) -> tuple[list[RunEnd], Any]:
        return self.by_namespace[namespace], None


def test_equal_records_are_copies_only_across_levels() -> None:
    from datetime import datetime

    def at(minute: int) -> datetime:
        return datetime.fromisoformat(f"2026-12-01T10:{minute:02d}+00:00")

    def end(ns: str, minute: int | None, run: int) -> RunEnd:
        moment = None if minute is None else at(minute)
        return RunEnd(thread_id="t", checkpoint_ns=ns, ended_at=moment, record={"run": run})

    stored = Stored(
        {
            # the same record twice in one namespace, seen nowhere else: two runs (the reader
            # told them apart by version); the worker's record copied twice: no run
            "": [end("", 2, 1), end("", 4, 1), end("", 6, 9), end("", 7, 9), end("", None, 7)],
            "w:1": [end("w:1", 1, 1), end("w:1", 3, 5)],
            "w:2": [end("w:2", 5, 5)],  # a copy of w:1's run 5, handed in as input
        }
    )
    read = thread_runs(stored, "t", ["", "w:1", "w:2"])
    assert [(e.checkpoint_ns, e.record["run"]) for e in read.ends] == [
        ("w:1", 1),  # written first at the worker's level; the top level's are copies
        ("w:1", 5),
        ("", 9),
        ("", 9),
        ("", 7),  # its time unknown: right behind the run before it at its level
    ]
    assert read.copies == 3


def test_a_thread_unreadable_at_two_levels_is_one_unreadable_thread(tmp_path: Path) -> None:
    class Custom:  # a serializer toolstop does not read
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            return "custom", b"\x00"

        def loads_typed(self, data: Any) -> Any:
            raise AssertionError

    path = tmp_path / "bad.db"
    conn = sqlite3.connect(str(path), check_same_thread=False)
    saver = sqlite_saver.SqliteSaver(conn, serde=Custom())
    saver.setup()
    for number, namespace in enumerate(["", "worker:1", "worker:2"]):
        checkpoint = {
            "v": 1, "id": f"cp-{number}", "ts": "2026-12-01T10:00:00+00:00",
            "channel_values": {"stop_record": {"run": 1}},
            "channel_versions": {"stop_record": "1"}, "versions_seen": {}, "pending_sends": [],
        }  # fmt: skip
        config = {"configurable": {"thread_id": "t1", "checkpoint_ns": namespace}}
        saver.put(config, checkpoint, {"source": "loop", "step": number}, {})  # type: ignore[arg-type]
    conn.close()
    document = report(str(path), tmp_path / "out")
    assert document["unreadable_threads"] == 1  # one thread, three namespaces
    assert (document["threads"], document["runs"]) == (0, 0)


def test_deep_agents_records_copied_between_levels_are_counted_once(
    db: tuple[str, Any], tmp_path: Path
) -> None:
    deepagents = pytest.importorskip("deepagents", reason="needs the `deepagents` package")
    from toolstop import StopOnArtifact

    path, saver = db
    # the main agent asks its subagent (Deep Agents' `task` tool), which stops on its tool's
    # result; the main agent ends on that forwarded stop, with no answer of its own; twice
    main_model = ScriptedChatModel(
        [
            call("task", id="t1", description="pay it", subagent_type="payer"),
            call("task", id="t2", description="pay again", subagent_type="payer"),
        ]
    )
    sub_model = ScriptedChatModel([call("pay", id="p1"), call("pay", id="p2")])
    payer = {
        "name": "payer", "description": "pays", "system_prompt": "pay", "model": sub_model,
        "tools": [forced_tool("pay", DONE, DONE)], "middleware": [StopOnArtifact()],
    }  # fmt: skip
    agent = deepagents.create_deep_agent(
        model=main_model,
        tools=[],
        middleware=[StopOnArtifact()],
        subagents=[payer],
        checkpointer=saver,
    )
    config = {"configurable": {"thread_id": "d1"}}
    for question in ("pay", "pay again"):
        agent.invoke({"messages": [HumanMessage(question)]}, config)
    made = len(main_model.calls) + len(sub_model.calls)
    assert (len(main_model.calls), len(sub_model.calls)) == (2, 2)

    document = report(path, tmp_path / "out")
    # Deep Agents copies `stop_record` both ways (into the subagent's input, back into the
    # main agent's state): before, 3 threads, 7 runs and 10 model calls were counted
    assert document["threads"] == 1
    assert document["runs"] == 4  # two main-agent runs, two subagent runs
    assert document["model_calls"] == made
    code, text = explain(path, "d1", "--json")
    assert code == 0, text
    runs = json.loads(text)["runs"]
    assert [(r["run"], r["level"], r["rule"]) for r in runs] == [
        (1, "tools", "completed"),  # the subagent stopped on its tool's result
        (2, "", "completed"),  # the main agent ended on the subagent's forwarded stop
        (3, "tools", "completed"),
        (4, "", "completed"),
    ]


def test_a_langgraph_swarm_hand_off_is_a_closed_run(db: tuple[str, Any], tmp_path: Path) -> None:
    swarm = pytest.importorskip("langgraph_swarm", reason="needs the `langgraph-swarm` package")
    agents = pytest.importorskip("langchain.agents", reason="needs langchain's create_agent")
    from toolstop import StopOnArtifact

    path, saver = db
    hand_offs = [call("transfer_to_billing", id=f"h{i}") for i in (1, 2, 3)]
    front_model = ScriptedChatModel(hand_offs)
    billing_model = ScriptedChatModel([call("refund", id=f"r{i}") for i in (1, 2, 3)])
    handoff = swarm.create_handoff_tool(agent_name="billing")
    front = agents.create_agent(front_model, [handoff], middleware=[StopOnArtifact()], name="front")
    refund = forced_tool("refund", REFUNDED, REFUNDED, REFUNDED)
    billing = agents.create_agent(
        billing_model, [refund], middleware=[StopOnArtifact()], name="billing"
    )
    app = swarm.create_swarm([front, billing], default_active_agent="front")
    app = app.compile(checkpointer=saver)
    for thread, questions in (("s1", 2), ("s2", 1)):
        for index in range(questions):
            message = {"messages": [HumanMessage(f"refund {index}")], "active_agent": "front"}
            app.invoke(message, {"configurable": {"thread_id": thread}})
    made = len(front_model.calls) + len(billing_model.calls)
    assert made == 6  # each question: one hand-off call, one refund call (a hard stop)

    document = report(path, tmp_path / "out")
    # before: threads 3, runs 3, model calls 3, open runs 3 (every hand-off left open)
    assert (document["threads"], document["open_runs"]) == (2, 0)
    assert document["runs"] == 6
    assert document["rules"] == {"completed": 3, "handed_off": 3}
    assert document["model_calls"] == made
    code, text = explain(path, "s1", "--run", "2")
    assert code == 0, text
    assert "run 2 (level billing, its run 1; namespace 'billing:" in text
