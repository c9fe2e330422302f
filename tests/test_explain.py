"""`toolstop explain` (`toolstop.report.explain`) on a checkpoint database written by hand.

tests/test_report.py explains real traffic end to end in SQLite and PostgreSQL; here a stand-in
for the database hands `explain_thread` runs and checkpointed messages the test wrote itself, so
each line of the text and each field of the JSON is pinned against values chosen here.
"""

from __future__ import annotations

import io
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from toolstop import Outcome, signal
from toolstop._printable import printable
from toolstop.report.explain import explain_thread, print_explanation, turns_of
from toolstop.report.reader import RunEnd
from toolstop.report.records import NAME_LIMIT, cut


def asks(message_id: str, *calls: tuple[str, str]) -> AIMessage:
    tool_calls = [{"name": name, "args": {"q": "secret"}, "id": i} for name, i in calls]
    return AIMessage(content="", id=message_id, tool_calls=tool_calls)


def result(name: str, call_id: str, artifact: Any = None) -> ToolMessage:
    return ToolMessage(content="content", name=name, tool_call_id=call_id, artifact=artifact)


DONE = signal(Outcome.COMPLETED)
RETRY = signal(Outcome.TRANSIENT)

# One thread: run 1 (hard, stopped after a retry), run 2 (shadow, would stop), then run 3 was
# cut off with a call left open; a nested namespace holds one run of a subgraph.
RUN_1 = [
    HumanMessage("q1"),
    asks("m1", ("lookup", "l1")),
    result("lookup", "l1", RETRY),
    asks("m2", ("lookup", "l2"), ("pay", "p1")),
    result("lookup", "l2", {"stop": "yes"}),
    result("pay", "p1", DONE),
]
RUN_2 = [*RUN_1, HumanMessage("q2"), asks("m3", ("plain", "u1")), result("plain", "u1")]
RUN_2 += [AIMessage("answer", id="m4")]
RUN_3 = [*RUN_2, HumanMessage("q3"), asks("m5", ("pay", "p2"), ("lookup", "l3"))]
RUN_3 += [result("lookup", "l3", DONE)]
NESTED = [HumanMessage("q"), asks("n1", ("pay", "p9")), result("pay", "p9", DONE)]

T1, T2, T3 = (datetime.fromisoformat(f"2026-12-01T0{h}:00+00:00") for h in (1, 2, 3))
RECORD_1 = {
    "run": 1, "schema_version": 5, "mode": "hard", "rule": "completed", "stopped": True,
    "tools": ["pay"], "tool_call_ids": ["p1"], "relayed": ["p1"], "tool_turns": 2,
    "transient_retries": 1, "outcomes": {"transient": 1, "completed": 1, "invalid": 1},
    "model_calls": 2, "input_tokens": 30, "output_tokens": 4,
}  # fmt: skip
RECORD_2 = {
    "run": 2, "mode": "never", "rule": "none", "stopped": False, "would_stop": "completed",
    "tools": ["plain"], "tool_call_ids": ["u1"], "relayed": ["x9", "u1"], "tool_turns": 1,
    "transient_retries": 0, "model_calls": 2, "input_tokens": 50, "output_tokens": 9,
    "would_save": {"model_calls": 1, "input_tokens": 25, "output_tokens": 5},
}  # fmt: skip
RECORD_3 = {
    "run": 3, "schema_version": 5, "mode": "hard", "rule": "interrupted", "stopped": False,
    "tool_turns": 1, "transient_retries": 0, "model_calls": 1, "input_tokens": 7,
    "output_tokens": 1,
}  # fmt: skip
RECORD_N = {
    "run": 1, "schema_version": 5, "mode": "polish", "rule": "fatal", "stopped": False,
    "ended_by": "ModelCallLimitMiddleware", "ended_by_message": "limit of 3 reached",
    "tools": ["pay"], "tool_call_ids": ["p9"], "tool_turns": 1, "transient_retries": 0,
    "model_calls": 1, "input_tokens": 3, "output_tokens": 2,
}  # fmt: skip


class Database:
    """What `explain_thread` reads of a checkpoint database."""

    def __init__(self, threads: dict[str, dict[str, Any]], checkpoints: dict[str, Any]) -> None:
        self.threads = threads
        self.checkpoints = checkpoints
        self.full = SimpleNamespace(get_tuple=self.get_tuple)
        self.asked: list[str] = []
        self.unreadable = self.rejected = 0

    def namespaces(self, thread_id: str) -> list[str]:
        return list(self.threads.get(thread_id, {}))

    def run_ends(self, thread_id: str, namespace: str) -> tuple[list[RunEnd], Any]:
        return self.threads[thread_id][namespace]  # type: ignore[no-any-return]

    def get_tuple(self, config: dict[str, Any]) -> Any:
        wanted = config["configurable"]
        self.asked.append(
            f"{wanted['thread_id']}/{wanted['checkpoint_ns']}/{wanted['checkpoint_id']}"
        )
        found = self.checkpoints.get(wanted["checkpoint_id"])
        if found is None:
            return None
        return SimpleNamespace(checkpoint={"channel_values": found})


def run_end(ns: str, at: datetime | None, record: dict[str, Any], checkpoint: str) -> RunEnd:
    return RunEnd(
        thread_id="t", checkpoint_ns=ns, ended_at=at, record=record, checkpoint_id=checkpoint
    )


def database(*, in_progress: Any = None) -> Database:
    ends = [
        run_end("", T1, RECORD_1, "c1"),
        run_end("", T2, RECORD_2, "c2"),
        run_end("", None, RECORD_3, "c3"),
    ]
    nested = [run_end("sub", T3, RECORD_N, "cn")]
    checkpoints = {"c1": {"messages": RUN_1}, "c2": {"messages": RUN_2}, "c3": {"messages": RUN_3}}
    checkpoints["cn"] = {"messages": NESTED}
    return Database({"t": {"": (ends, in_progress), "sub": (nested, None)}}, checkpoints)


def explained_run_1() -> dict[str, Any]:
    return {
        "run": 1, "record_run": 1, "level": "", "checkpoint_ns": "",
        "ended_at": "2026-12-01T01:00:00+00:00",
        "schema_version": 5, "mode": "hard", "rule": "completed", "stopped": True,
        "ended_by": None, "ended_by_message": None, "would_stop": None,
        "deciding": [{"tool": "pay", "tool_call_id": "p1"}], "shown": ["p1"],
        "turns": [
            [{"tool": "lookup", "tool_call_id": "l1", "signal": "transient", "stop": False}],
            [
                {
                    "tool": "lookup",
                    "tool_call_id": "l2",
                    "signal": "invalid: stop_not_bool",
                    "stop": False,
                },
                {"tool": "pay", "tool_call_id": "p1", "signal": "completed", "stop": True},
            ],
        ],
        "tool_turns": 2, "transient_retries": 1,
        "outcomes": {"transient": 1, "completed": 1, "invalid": 1},
        "model_calls": 2, "input_tokens": 30, "output_tokens": 4, "would_save": None,
        "would_skip": [], "if_signalled": {}, "ended_after": None, "answer_failed": [],
    }  # fmt: skip


def test_each_run_is_explained_with_only_its_own_turns() -> None:
    explanation = explain_thread(database(), "t")
    assert explanation is not None
    runs = explanation["runs"]
    # numbered by when they ended, across levels; each keeps its own record's number
    assert [(r["checkpoint_ns"], r["run"], r["record_run"]) for r in runs] == [
        ("", 1, 1), ("", 2, 2), ("", 3, 3), ("sub", 4, 1)
    ]  # fmt: skip
    assert [r["level"] for r in runs] == ["", "", "", "sub"]
    assert runs[0] == explained_run_1()
    assert runs[1]["schema_version"] == 1  # a record without a version is schema 1
    assert runs[1]["turns"] == [
        [{"tool": "plain", "tool_call_id": "u1", "signal": "unsignalled", "stop": False}]
    ]
    assert runs[1]["would_save"] == {"model_calls": 1, "input_tokens": 25, "output_tokens": 5}
    # the interrupted run: its record names no calls, its checkpoint does (the open one)
    assert runs[2]["deciding"] == [{"tool": "pay", "tool_call_id": "p2"}]
    assert runs[2]["ended_at"] is None
    assert runs[2]["turns"] == [
        [
            {"tool": "pay", "tool_call_id": "p2", "signal": "invalid: no_result", "stop": False},
            {"tool": "lookup", "tool_call_id": "l3", "signal": "completed", "stop": True},
        ]
    ]
    assert runs[3]["ended_by"] == "ModelCallLimitMiddleware"
    assert runs[3]["ended_by_message"] == "limit of 3 reached"
    assert explanation["in_progress"] == []
    assert explanation["thread_id"] == "t"


def test_one_run_is_explained_with_the_run_before_it_read_for_its_turns() -> None:
    db = database()
    explanation = explain_thread(db, "t", run=2)
    assert explanation is not None
    assert [(r["checkpoint_ns"], r["run"]) for r in explanation["runs"]] == [("", 2)]
    assert len(explanation["runs"][0]["turns"]) == 1  # run 1's turns are not run 2's
    assert db.asked == ["t//c1", "t//c2"]  # run 3's and the subgraph's messages are not read


def test_an_unreadable_checkpoint_leaves_the_turns_unknown() -> None:
    db = database()
    del db.checkpoints["c1"]
    db.checkpoints["c2"] = {"messages": "not a list"}
    explanation = explain_thread(db, "t")
    assert explanation is not None
    assert [r["turns"] for r in explanation["runs"][:2]] == [None, None]
    # run 3 cannot tell which turns are its own without run 2's
    assert explanation["runs"][2]["turns"] is None
    assert explanation["runs"][3]["turns"] is not None  # another namespace starts afresh
    db.checkpoints["c3"] = {}
    assert explain_thread(db, "t")["runs"][2]["deciding"] == []  # type: ignore[index]


def test_an_unknown_thread_and_a_run_in_progress() -> None:
    assert explain_thread(database(), "nobody") is None
    current = {"run": 4, "tool_turns": 1, "model_calls": 3, "rule": "none"}
    explanation = explain_thread(database(in_progress=current), "t")
    assert explanation is not None
    assert explanation["in_progress"] == [
        {"checkpoint_ns": "", "level": "", "run": 4, "tool_turns": 1, "model_calls": 3}
        | {"pending": []}
    ]


def test_the_text_of_each_kind_of_run() -> None:
    explanation = explain_thread(
        database(in_progress={"run": 4, "tool_turns": 1, "model_calls": 3}), "t"
    )
    assert explanation is not None
    explanation["runs"].append(
        {**explained_run_1(), "run": 5, "record_run": 5, "rule": "fatal", "stopped": False}
    )
    explanation["runs"].append(
        {**explained_run_1(), "run": 6, "record_run": 6, "stopped": False, "rule": None}
        | {"turns": None}
    )
    out = io.StringIO()
    print_explanation(explanation, out)
    assert out.getvalue().splitlines() == [
        "thread t: 6 finished run(s)",
        "",
        "run 1, ended 2026-12-01T01:00:00+00:00, mode hard: rule completed (stopped by toolstop)",
        "  deciding: pay (p1)",
        "  turn 1: lookup l1 transient",
        "  turn 2: lookup l2 invalid: stop_not_bool; pay p1 completed (stop)",
        "  budgets: 1 transient retries spent, 2 tool turns",
        "  model calls 2, tokens 30 in / 4 out",
        "",
        "run 2, ended 2026-12-01T02:00:00+00:00, mode never: rule none (the model answered)",
        "  would have stopped (shadow mode): rule completed",
        "  deciding: plain (u1)",
        "  the answer showed the results of: x9, u1",
        "  turn 1: plain u1 unsignalled",
        "  budgets: 0 transient retries spent, 1 tool turn",
        "  model calls 2, tokens 50 in / 9 out",
        "  hard mode would have saved 1 model calls, 25 input and 5 output tokens",
        "",
        "run 3, ended ?, mode hard: rule interrupted (never finished: cancelled, failed or its "
        "worker stopped)",
        "  left open (answered as interrupted): pay (p2)",
        "  turn 1: pay p2 invalid: no_result; lookup l3 completed (stop)",
        "  budgets: 0 transient retries spent, 1 tool turn",
        "  model calls 1, tokens 7 in / 1 out",
        "",
        "run 4 (level sub, its run 1; namespace 'sub'), ended 2026-12-01T03:00:00+00:00, mode "
        "polish: rule fatal (not stopped)",
        "  deciding: pay (p9)",
        "  turn 1: pay p9 completed (stop)",
        "  budgets: 0 transient retries spent, 1 tool turn",
        "  model calls 1, tokens 3 in / 2 out",
        "",
        "run 5, ended 2026-12-01T01:00:00+00:00, mode hard: rule fatal (not stopped)",
        "  deciding: pay (p1)",
        "  turn 1: lookup l1 transient",
        "  turn 2: lookup l2 invalid: stop_not_bool; pay p1 completed (stop)",
        "  budgets: 1 transient retries spent, 2 tool turns",
        "  model calls 2, tokens 30 in / 4 out",
        "",
        "run 6, ended 2026-12-01T01:00:00+00:00, mode hard: rule None (the model answered)",
        "  deciding: pay (p1)",
        "  turns: not readable from the checkpoint",
        "  budgets: 1 transient retries spent, 2 tool turns",
        "  model calls 2, tokens 30 in / 4 out",
        "",
        "run 4 in progress: 1 tool turn, 3 model calls so far (its record is written when it "
        "ends; if it never finished, the next run closes it as interrupted)",
    ]


def test_a_run_ended_by_another_middleware_says_so() -> None:
    run = {**explained_run_1(), "stopped": False, "rule": "none", "ended_by": "Limit"}
    lines = []
    for message in (None, "3 calls"):
        out = io.StringIO()
        print_explanation(
            {"thread_id": "t", "runs": [{**run, "ended_by_message": message}], "in_progress": []},
            out,
        )
        lines.append(out.getvalue().splitlines()[2])
    assert lines == [
        "run 1, ended 2026-12-01T01:00:00+00:00, mode hard: rule none (ended by Limit, not the "
        "model's answer)",
        "run 1, ended 2026-12-01T01:00:00+00:00, mode hard: rule none (ended by Limit, not the "
        "model's answer: 3 calls)",
    ]


def test_turns_are_the_tool_calls_and_the_results_that_answer_them() -> None:
    stray = result("lookup", "l1")  # answers a call of an earlier turn: not this turn's
    messages = [
        result("x", "x0"),
        *RUN_1[:3],
        asks("m9", ("pay", "p5")),
        stray,
        result("pay", "p5"),
    ]
    turns = turns_of(messages)
    assert [(t.id, [r.tool_call_id for r in t.results]) for t in turns] == [
        ("m1", ["l1"]),
        ("m9", ["p5"]),
    ]
    assert turns_of([HumanMessage("q"), AIMessage("no calls")]) == []


def test_deciding_calls_pair_tools_with_the_ids_there_are() -> None:
    record = {**RECORD_1, "tools": ["pay", "lookup"], "tool_call_ids": ["p1"]}
    db = Database({"t": {"": ([run_end("", T1, record, "c1")], None)}}, {"c1": {"messages": RUN_1}})
    explanation = explain_thread(db, "t")
    assert explanation is not None
    assert explanation["runs"][0]["deciding"] == [{"tool": "pay", "tool_call_id": "p1"}]


def test_the_last_run_alone_reads_the_run_before_it() -> None:
    db = database()
    explanation = explain_thread(db, "t", run=3)
    assert explanation is not None
    [only] = explanation["runs"]
    assert only["run"] == 3
    assert len(only["turns"]) == 1  # its own turn: runs 1 and 2's are not shown as its
    assert db.asked == ["t//c2", "t//c3"]


def test_an_interrupted_record_that_names_its_calls_is_kept() -> None:
    named = {**RECORD_3, "tools": ["lookup"], "tool_call_ids": ["l9"]}
    plain = {"run": 1, "rule": "step_budget", "stopped": True, "tool_turns": 1}
    ends = [run_end("", T1, plain, "c0"), run_end("", T2, named, "c3")]
    open_call = [HumanMessage("q"), asks("m0", ("pay", "p0"))]
    db = Database(
        {"t": {"": (ends, None)}}, {"c0": {"messages": open_call}, "c3": {"messages": RUN_3}}
    )
    explanation = explain_thread(db, "t")
    assert explanation is not None
    first, second = explanation["runs"]
    assert first["deciding"] == []  # not interrupted: its open call is not read as deciding
    assert second["deciding"] == [{"tool": "lookup", "tool_call_id": "l9"}]


def test_savings_are_told_only_for_a_run_that_would_have_stopped() -> None:
    saved = {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}
    run = {**explained_run_1(), "mode": "never", "stopped": False, "rule": "none"}
    out = io.StringIO()
    print_explanation(
        {"thread_id": "t", "runs": [{**run, "would_save": saved}], "in_progress": []}, out
    )
    assert "would have saved" not in out.getvalue()
    assert out.getvalue().splitlines()[-1] == "  model calls 2, tokens 30 in / 4 out"


def test_several_deciding_calls_are_listed_in_one_line() -> None:
    deciding = [{"tool": "pay", "tool_call_id": "p1"}, {"tool": "lookup", "tool_call_id": "l7"}]
    run = {**explained_run_1(), "deciding": deciding, "shown": ["p1", "l7"]}
    out = io.StringIO()
    print_explanation({"thread_id": "t", "runs": [run], "in_progress": []}, out)
    assert "  deciding: pay (p1), lookup (l7)" in out.getvalue().splitlines()
    assert "showed the results of" not in out.getvalue()  # the deciding calls' own results


def test_a_cut_short_run_names_the_tools_hard_mode_would_not_have_run() -> None:
    record = {**RECORD_2, "schema_version": 5, "would_skip": ["initiate_return", "email"]}
    ends = [run_end("", T2, record, "c2")]
    explained = explain_thread(
        Database({"t": {"": (ends, None)}}, {"c2": {"messages": RUN_2}}), "t"
    )
    assert explained is not None
    assert explained["runs"][0]["would_skip"] == ["initiate_return", "email"]
    out = io.StringIO()
    print_explanation(explained, out)
    assert (
        "  cut short: in hard mode, initiate_return, email would not have run "
        "(a stop there skips later work: not a saving)"
    ) in out.getvalue().splitlines()
    out = io.StringIO()
    print_explanation({**explained, "runs": [{**explained["runs"][0], "would_skip": []}]}, out)
    assert "cut short" not in out.getvalue()


def test_a_later_call_of_the_same_tool_is_named_as_one() -> None:
    """A trial's run called search twice (a call limit then ended it): "if search signalled a
    stop, search would not have run" read as a contradiction."""
    later = {"search": ["search", "email"]}
    run = {**explained_run_1(), "mode": "never", "stopped": False, "if_signalled": later}
    out = io.StringIO()
    print_explanation({"thread_id": "t", "runs": [run], "in_progress": []}, out)
    assert (
        "  if search signalled a stop, a later search call, email would not have run "
        "(converting it would cut this run short)"
    ) in out.getvalue().splitlines()


def test_a_huge_tool_name_and_call_id_are_cut_as_the_report_cuts_them() -> None:
    """A name of megabytes (the model chose it) is shown cut to `NAME_LIMIT`, escaped."""
    name = "\x1b[2J" + "x" * 3_000_000
    call_id = "c" * 100_000
    shown = printable(cut(name))
    open_call = [HumanMessage("q"), asks("m0", (name, call_id))]
    messages = [HumanMessage("q"), asks("m1", (name, call_id)), result(name, call_id, DONE)]
    record = {
        **RECORD_1, "tools": [cut(name)], "tool_call_ids": [call_id], "relayed": [call_id, "p1"],
        "would_stop": "completed", "would_skip": [name],
        "after_first": {"lookup": {"skipped": [name]}},
    }  # fmt: skip
    ends = [run_end("", T1, record, "c1"), run_end("", T2, RECORD_3, "c3")]
    db = Database(
        {"t": {"": (ends, None)}}, {"c1": {"messages": messages}, "c3": {"messages": open_call}}
    )
    explanation = explain_thread(db, "t")
    assert explanation is not None
    stopped, interrupted = explanation["runs"]
    assert stopped["turns"][0] == [
        {"tool": cut(name), "tool_call_id": cut(call_id), "signal": "completed", "stop": True}
    ]
    assert stopped["deciding"] == [{"tool": cut(name), "tool_call_id": cut(call_id)}]
    assert stopped["shown"] == [cut(call_id), "p1"]
    assert stopped["would_skip"] == [cut(name)]
    assert stopped["if_signalled"] == {"lookup": [cut(name)]}
    assert interrupted["deciding"] == [{"tool": cut(name), "tool_call_id": cut(call_id)}]
    out = io.StringIO()
    print_explanation(explanation, out)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) < 2 * NAME_LIMIT + 100
    assert f"  turn 1: {shown} {cut(call_id)} completed (stop)" in text.splitlines()
    assert f"  left open (answered as interrupted): {shown} ({cut(call_id)})" in text
    assert "\x1b" not in text


def test_explain_names_the_earlier_results_an_answer_restated() -> None:
    """Issue 46 item 5: the judgement says where the answer's other facts came from."""
    from toolstop.report.explain import _print_ended_after

    out = io.StringIO()
    judged = {"action": "restated", "shape": "object", "fields": ["order_id"],
              "earlier": ["get_user_details", "get_order_details"]}  # fmt: skip
    _print_ended_after({"tools": {"exchange": 0.2}, "judged": {"exchange": judged}}, out)
    assert out.getvalue() == (
        "  the model answered right after: exchange (answer overlap 0.2, restated its object "
        "result with facts from earlier results of get_user_details, get_order_details)\n"
    )


def test_a_template_that_did_not_render_is_told_per_run() -> None:
    failed = [{"tool": "pay", "why": "KeyError"}, "not an entry", {"tool": "\x1b[2Jpay"}]
    record = {**RECORD_1, "answer_failed": failed}
    ends = [run_end("", T1, record, "c1")]
    db = Database({"t": {"": (ends, None)}}, {"c1": {"messages": RUN_1}})
    explained = explain_thread(db, "t")
    assert explained is not None
    assert explained["runs"][0]["answer_failed"] == [
        {"tool": "pay", "why": "KeyError"},
        {"tool": "\x1b[2Jpay", "why": "None"},
    ]
    out = io.StringIO()
    print_explanation(explained, out)
    lines = out.getvalue().splitlines()
    assert "  the answer of pay did not render (KeyError): the stop showed its content" in lines
    assert "\x1b" not in out.getvalue()
