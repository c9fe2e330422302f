"""The advisor on a new user's agent (issue 39's second trial): error results are never
`convert`, cut-short calls are never shown as a saving, a hand-off that pauses the run counts
toward its tool, the wording agrees with itself, and cut-short tools come with their evidence."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:  # the trial's agent is a create_agent with StopOnArtifact
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)

from langchain.agents import create_agent
from langchain.agents.middleware import ToolRetryMiddleware
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from toolstop import Outcome, StopOnArtifact, StopPolicy, signal
from toolstop.cli import main
from toolstop.report.chart import _candidate_panel
from toolstop.testing import ScriptedChatModel, call

ERRORS = {
    "crm_colon": "Error: the CRM is unreachable right now.",
    "crm_failed": "Failed: the CRM is unreachable right now.",
    "crm_failed_to": "Failed to reach the CRM right now.",
    "crm_json": '{"error": "CRM unreachable"}',
}


def _error_tool(name: str, text: str) -> Any:
    @tool(name)
    def lookup(customer: str) -> str:
        """Look a customer up in the CRM."""
        return text

    return lookup


@tool
def billing_lookup(customer: str) -> str:
    """A billing record; the service is down: it raises."""
    raise RuntimeError("upstream 502 from the billing service")


@tool(response_format="content_and_artifact")
def get_policy(topic: str) -> tuple[str, dict[str, Any]]:
    """Policy text; converted: it signals a stop."""
    return f"Returns of {topic} are free within 30 days of delivery.", signal(Outcome.COMPLETED)


def report(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["report", *argv], out=out), out.getvalue()


def explain(db: Path, thread: str) -> str:
    out = io.StringIO()
    assert main(["explain", "--db", str(db), thread], out=out) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def errors_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five runs per error tool, each answer repeating the error; five of a converted tool."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path_factory.mktemp("errors") / "agent.sqlite"
    tools = [*(_error_tool(n, t) for n, t in ERRORS.items()), billing_lookup, get_policy]
    scripts = {
        name: [call(name, customer="ann"), "Sorry, " + text] for name, text in ERRORS.items()
    }
    # a tool that raised: the retry middleware answers with status "error" (no "Error" prefix)
    scripts["billing_lookup"] = [
        call("billing_lookup", customer="ann"),
        "Sorry, upstream said upstream 502 from the billing service",
    ]
    scripts["get_policy"] = [
        call("get_policy", topic="shoes"),
        "Returns of shoes are free within 30 days of delivery.",
    ]
    with SqliteSaver.from_conn_string(str(db)) as saver:
        for name, script in scripts.items():
            for n in range(5):
                model = ScriptedChatModel(script)
                retry = ToolRetryMiddleware(
                    max_retries=0, on_failure=lambda e: f"upstream said {e}"
                )
                agent = create_agent(
                    model,
                    tools,
                    middleware=[retry, StopOnArtifact(StopPolicy(mode="never"))],
                    checkpointer=saver,
                )
                agent.invoke(
                    {"messages": [HumanMessage("hi")]},
                    {"configurable": {"thread_id": f"{name}-{n}"}},
                )
                model.assert_complete()
    return db


def test_a_tool_whose_results_are_errors_is_never_advised_convert(
    errors_db: Path, tmp_path: Path
) -> None:
    code, text = report("--db", str(errors_db), "--out", str(tmp_path))
    assert code == 0, text
    document = json.loads((tmp_path / "report.json").read_text())
    by_tool = {e["tool"]: e for e in document["candidates"]}
    for name in [*ERRORS, "billing_lookup"]:
        entry = by_tool[name]
        assert entry["judged"]["actions"] == {"failed": 5}, name
        assert entry["advice"] == "keep", name
        assert "error" in entry["advice_why"]
        # hard mode would not have stopped on an error: nothing saved, not the final call
        assert entry["would_save"]["model_calls"] == 0, name
        assert entry["gain"]["model_calls"] == 0, name
        assert f"convert first: {name}" not in text
    # the converted tool's saving is the shadow line; the rest have little to save
    assert "shadow mode: 5 runs would have stopped" in text
    assert (
        "the remaining (unconverted) tools have little to save on this traffic: no tool's "
        "result would have served"
    ) in text
    assert "\nlittle to save on this traffic" not in text
    page = (tmp_path / "report.html").read_text()
    assert "The remaining (unconverted) tools have little to save on this traffic: no " in page


def test_verdict_why_and_advice_why_agree(errors_db: Path, tmp_path: Path) -> None:
    code, _ = report("--db", str(errors_db), "--out", str(tmp_path))
    assert code == 0
    for entry in json.loads((tmp_path / "report.json").read_text())["candidates"]:
        if entry["judged"]["runs"]:
            assert entry["why"] == entry["advice_why"], entry["tool"]
            assert entry["verdict"] == ("candidate" if "convert" in entry["advice"] else "keep")


# -- a tool whose first success is followed by a write: cut short ----------------------------
ORDER = '{{"order_id": "{id}", "status": "shipped", "total_eur": {total}, "carrier": "DHL"}}'


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order. A plain tool."""
    return ORDER.format(id=order_id, total=40 + int(order_id[2:]))


@tool
def refund_order(order_id: str) -> str:
    """Refund an order (a write). A plain tool."""
    total = 40 + int(order_id[2:])
    refund = {"refund_id": f"rf-{order_id[2:]}01", "order_id": order_id, "amount_eur": total}
    return json.dumps(refund)


@pytest.fixture(scope="module")
def cut_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five lookups the answer restates, then five lookups followed by a refund."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path_factory.mktemp("cut") / "agent.sqlite"
    plans: list[tuple[str, list[Any]]] = []
    for n in range(10, 15):
        order = f"o-{n}"
        plans.append(
            (
                f"a-lookup-{n}",
                [call("lookup_order", order_id=order), f"Your order {order} is shipped with DHL."],
            )
        )
    for n in range(20, 25):
        order = f"o-{n}"
        plans.append(
            (
                f"z-refund-{n}",
                [
                    call("lookup_order", order_id=order),
                    call("refund_order", order_id=order),
                    f"Done: refund rf-{n}01 of {40 + n} EUR for order {order} is issued.",
                ],
            )
        )
    with SqliteSaver.from_conn_string(str(db)) as saver:
        for thread, script in plans:
            model = ScriptedChatModel(script)
            agent = create_agent(
                model,
                [lookup_order, refund_order],
                middleware=[StopOnArtifact(StopPolicy(mode="never"))],
                checkpointer=saver,
            )
            agent.invoke(
                {"messages": [HumanMessage("My order")]}, {"configurable": {"thread_id": thread}}
            )
            model.assert_complete()
    return db


def _cell(page: str, metric: str) -> str | None:
    found = re.search(rf'data-metric="{re.escape(metric)}"[^>]*>([^<]*)<', page)
    return found.group(1) if found else None


def test_the_page_shows_the_gain_never_the_cut_short_calls(cut_db: Path, tmp_path: Path) -> None:
    code, text = report(
        "--db", str(cut_db), "--out", str(tmp_path), "--price-in", "3", "--price-out", "15"
    )
    assert code == 0, text
    document = json.loads((tmp_path / "report.json").read_text())
    at, entry = next(
        (i, e) for i, e in enumerate(document["candidates"]) if e["tool"] == "lookup_order"
    )
    assert entry["advice"] == "cut_short"
    assert entry["would_save"]["model_calls"] == 15  # 5 + 5 * 2, hard mode's
    assert entry["gain"]["model_calls"] == 5  # the cut-short runs' 10 calls are no saving
    page = (tmp_path / "report.html").read_text()
    assert _cell(page, f"candidates.{at}.gain.model_calls") == "5"
    assert f'data-metric="candidates.{at}.would_save.model_calls"' not in page
    assert _cell(page, f"candidates.{at}.gain.cost") is not None
    assert f'data-metric="candidates.{at}.would_save.cost"' not in page
    assert "are left out of <i>calls saved</i>" in page


class _Axis:
    """Records what the chart's candidate panel draws."""

    def __init__(self) -> None:
        self.bars: list[list[int]] = []
        self.ticks: list[str] = []
        self.xlabel = ""

    def barh(self, positions: Any, values: list[int], **_: Any) -> str:
        self.bars.append(list(values))
        return "bars"

    def set_yticks(self, _positions: Any, labels: list[str], **__: Any) -> None:
        self.ticks = labels

    def set_xlabel(self, text: str) -> None:
        self.xlabel = text

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def test_the_chart_shows_the_gain(cut_db: Path, tmp_path: Path) -> None:
    code, _ = report("--db", str(cut_db), "--out", str(tmp_path))
    assert code == 0
    candidates = json.loads((tmp_path / "report.json").read_text())["candidates"]
    axis = _Axis()
    _candidate_panel(axis, candidates)
    # lookup_order is advised cut_short: not drawn as worth converting (issue 46)
    assert axis.ticks == ["refund_order"]
    gains, cuts = axis.bars
    refund = next(e for e in candidates if e["tool"] == "refund_order")
    assert gains == [refund["gain"]["model_calls"]] == [5]
    assert cuts == [0]
    assert "grey: cut short" in axis.xlabel


def test_a_cut_short_tool_shows_its_cut_short_runs(cut_db: Path, tmp_path: Path) -> None:
    code, _ = report("--db", str(cut_db), "--out", str(tmp_path), "--examples", "1")
    assert code == 0
    document = json.loads((tmp_path / "report.json").read_text())
    entry = next(e for e in document["candidates"] if e["tool"] == "lookup_order")
    assert entry["threads"][:5] == [f"z-refund-{n}" for n in range(20, 25)]
    [example] = entry["examples"]
    assert example["cut_short"] is True
    assert example["later_tools"] == ["refund_order"]
    assert example["tool_result"].startswith('{"order_id": "o-2')
    assert example["final_answer"].startswith("Done: refund")
    page = (tmp_path / "report.html").read_text()
    assert "cut short: had it signalled a stop, refund_order would not have run" in page
    refund = next(e for e in document["candidates"] if e["tool"] == "refund_order")
    assert refund["advice"] == "convert_with_answer"
    assert refund["verdict"] == "candidate"
    assert refund["why"] == refund["advice_why"]  # never "keep the model" beside it
    said = explain(cut_db, "z-refund-20")
    assert "if lookup_order signalled a stop, refund_order would not have run" in said
    assert "if lookup_order signalled" not in explain(cut_db, "a-lookup-10")


# -- a hand-off that pauses the run with interrupt() -----------------------------------------
@tool
def handoff_to_human(summary: str) -> str:
    """Pass the conversation to a person: pauses the graph until a person answers."""
    from langgraph.types import interrupt

    return str(interrupt({"handoff": summary}))


def test_a_hand_off_that_pauses_the_run_counts_toward_its_tool(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path / "agent.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        first = ""
        for n in range(3):
            model = ScriptedChatModel([call("handoff_to_human", summary="angry")])
            first = first or model.call_id(0)
            agent = create_agent(
                model,
                [handoff_to_human],
                middleware=[StopOnArtifact(StopPolicy(mode="never"))],
                checkpointer=saver,
            )
            state = agent.invoke(
                {"messages": [HumanMessage("A person, please")]},
                {"configurable": {"thread_id": f"handoff-{n}"}},
            )
            assert "__interrupt__" in state
        # the user writes again in one thread: the paused run is closed as interrupted
        model = ScriptedChatModel(["Sorry for the wait, how can I help?"])
        agent = create_agent(
            model,
            [handoff_to_human],
            middleware=[StopOnArtifact(StopPolicy(mode="never"))],
            checkpointer=saver,
        )
        agent.invoke(
            {"messages": [HumanMessage("Hello?")]}, {"configurable": {"thread_id": "handoff-0"}}
        )
    code, text = report("--db", str(db), "--out", str(tmp_path / "out"))
    assert code == 0, text
    assert "open runs: 2" in text
    document = json.loads((tmp_path / "out" / "report.json").read_text())
    [entry] = [e for e in document["candidates"] if e["tool"] == "handoff_to_human"]
    assert (entry["runs"], entry["ended_on_it"]) == (3, 3)
    assert entry["would_save"]["model_calls"] == 0
    assert "3 run(s) ended on it" in entry["why"]
    assert sorted(entry["threads"]) == ["handoff-0", "handoff-1", "handoff-2"]
    closed = explain(db, "handoff-0")
    assert f"handoff_to_human {first} pending: left open" in closed
    assert "tool_error" not in closed
    assert "waiting on: handoff_to_human" in explain(db, "handoff-1")


def test_the_judge_is_said_not_to_override_cut_short() -> None:
    from toolstop.report.model_judge import CUT_SHORT_NOTE, judge_lines, judge_note

    judged = {"model": "m", "samples": 4, "counts": {"convert": 4}}
    document: dict[str, Any] = {
        "model_judge": {"model": "m", "calls": 8, "failed": 0, "unparseable": 0},
        "candidates": [
            {"tool": "lookup_order", "advice": "cut_short", "verdict": "keep",
             "model_judge": judged},
            {"tool": "get_policy", "advice": "convert", "verdict": "candidate",
             "model_judge": judged},
        ],
    }  # fmt: skip
    lines = judge_lines(document)
    assert lines[1].endswith(CUT_SHORT_NOTE)
    assert CUT_SHORT_NOTE not in lines[2]
    assert "does not override cut_short" in judge_note(document["candidates"][0])
    assert "override" not in judge_note(document["candidates"][1])


@pytest.mark.parametrize(
    ("actions", "advice"),
    [
        ({"failed": 4, "relayed": 6}, "convert"),  # judged on the successes: 6 of 6 relayed
        ({"failed": 5, "relayed": 5}, "keep"),  # half of them errors
        ({"failed": 1, "restated": 4}, "convert_with_answer"),
        ({"failed": 2, "relayed": 1, "selected": 2}, "keep"),
    ],
)
def test_errors_count_neither_as_relayed_nor_as_judged_runs(
    actions: dict[str, int], advice: str
) -> None:
    from toolstop.report.advice import advise

    total = sum(actions.values())
    judged = {"runs": total, "actions": actions, "fields": []}
    said, why = advise(
        runs=total, ended_runs=total, cut_short_runs=0, judged=judged, verdict="candidate"
    )
    assert said == advice, why
