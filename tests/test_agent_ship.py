"""`toolstop check --agent` on the agent teams ship: their own review, limits, summarisation,
async tools and an async-only middleware (issue 26)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE
from shipped_agent import SHIPPED_AGENT, broken, variant
from toolstop._check.agent import check_agent
from toolstop._check.factory import load_factory, load_tools
from toolstop._check.harness import CheckResult
from toolstop.cli import main
from user_agent import in_folder, write_module

__all__ = ["in_folder"]  # the fixture, imported for pytest

pytestmark = [
    pytest.mark.contract,
    pytest.mark.skipif(
        MIDDLEWARE_UNAVAILABLE is not None, reason=f"the agent: {MIDDLEWARE_UNAVAILABLE}"
    ),
]

AGENT = ("--agent", "shipped:make_agent", "--tools", "shipped:TOOLS")


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["check", *argv], out=out), out.getvalue()


@pytest.fixture
def shipped(in_folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("COLUMNS", raising=False)  # a CI log
    write_module(in_folder, "shipped", SHIPPED_AGENT)
    return in_folder


def check(*scenarios: str, module: str = "shipped") -> dict[str, CheckResult]:
    """The check's runs by key, on `module`'s agent."""
    factory = load_factory(f"{module}:make_agent")
    result = check_agent(factory, load_tools(f"{module}:TOOLS"), scenarios=list(scenarios))
    return {r.scenario.key: r for r in result.results}


def test_the_checks_limit_and_review_run_next_to_the_agents_own(shipped: Path) -> None:
    # item 1: the agent has its own ModelCallLimitMiddleware and HumanInTheLoopMiddleware
    runs = check("limit-run", "limit-after-retry", "review-approve", "review-edit", "review-reject")
    names = ("limit-run", "limit-after-retry", "review-approve", "review-edit", "review-reject")
    assert sorted(runs) == sorted(
        f"{name}@{tool}.hard" for name in names for tool in ("order_status", "pay")
    )
    assert {key: r.breaches for key, r in runs.items()} == {key: [] for key in runs}
    # the check's limit of 2 is reached at the second call, not at the first: it does not count
    # each call twice next to the agent's own limit
    after_retry = runs["limit-after-retry@order_status.hard"].actual
    assert len(after_retry["model_calls"]) == 2
    assert after_retry["stop_record"]["rule"] == "completed"
    # the check's review is answered with the scenario's decision; the agent's own approved
    edited = runs["review-edit@pay.hard"].actual
    assert edited["interrupts"] == ["HumanInTheLoopMiddleware"]
    assert "ToolstopCheckHumanInTheLoopMiddleware.after_model" in edited["path"]


def test_the_agents_own_review_is_approved_as_a_reviewer_would(shipped: Path) -> None:
    # item 2: every run on the reviewed tool pauses; the check resumes it
    runs = check("success@pay", "retryable-then-success@pay", "fatal@pay", "success@order_status")
    for key, r in runs.items():
        assert r.breaches == [], key
    assert runs["success@pay.hard"].actual["interrupts"] == ["HumanInTheLoopMiddleware"]
    assert (
        runs["retryable-then-success@pay.polish"].actual["interrupts"]
        == ["HumanInTheLoopMiddleware"] * 2
    )
    assert "interrupts" not in runs["success@order_status.hard"].actual


def test_a_breach_in_a_run_the_review_paused_says_so(shipped: Path) -> None:
    write_module(shipped, "nopolicy", broken("nopolicy"))
    runs = check("success@pay", module="nopolicy")
    breaches = runs["success@pay.polish"].breaches
    assert breaches[0].endswith(
        "(this run was paused by your own review, HumanInTheLoopMiddleware, and approved by "
        "the check)"
    )
    assert breaches[0].startswith("your factory ignores the policy it is given")


def test_the_step_budget_limit_is_found_on_the_agents_graph(shipped: Path) -> None:
    # item 3: with limit, review and summarisation in the loop, 12 steps hold no tool turn
    runs = check("step-budget")
    assert sorted(runs) == ["step-budget@order_status.hard"]
    for key, r in runs.items():
        assert r.breaches == [], key
        actual = r.actual
        assert actual["stop_record"]["rule"] == "step_budget"
        assert actual["stop_record"]["tool_turns"] == 1
    # five nodes a turn on this stack (limit, summarisation, model, review, limit) and tools
    assert runs["step-budget@order_status.hard"].scenario.recursion_limit == 13


@pytest.mark.parametrize("module", ["shipped", "review_first"])
def test_the_step_budget_is_skipped_on_a_tool_the_agents_review_pauses(
    shipped: Path, module: str
) -> None:
    # every resume after the agent's own review starts LangGraph's step count again: no limit
    # exercises the step budget there, and a correct agent must not fail for it
    write_module(shipped, "review_first", variant("review-first"))
    code, text = run(
        "--agent", f"{module}:make_agent", "--tools", f"{module}:TOOLS",
        "--scenario", "step-budget",
    )  # fmt: skip
    assert code == 0, text
    assert (
        "skipped step-budget@pay: your own human review pauses this tool, and every resume "
        "starts LangGraph's step count again: no recursion limit reaches the step budget after "
        "the tool ran"
    ) in text.splitlines()
    assert "1 passed, 0 failed" in text.splitlines()


def test_a_run_cut_before_its_tool_ran_says_the_model_called_it() -> None:
    from toolstop._check.harness import _no_tool_ran

    cut = {
        "model_calls": [{"saw": ["system", "human"], "tools": ["pay"], "answer": "ai[pay]"}],
        "stop_record": {"rule": "step_budget"},
    }
    assert _no_tool_ran(cut) == (
        "the model called pay, but the run ended with rule 'step_budget' before any tool ran, "
        "so the stop after a tool could not be checked"
    )
    assert _no_tool_ran({"model_calls": [{"answer": "ai"}]}).startswith(
        "the model never called a tool"
    )


def test_an_async_only_agent_passes_the_whole_check_in_one_line_a_scenario(
    shipped: Path,
) -> None:
    # items 4 and 6: async tools and an awrap_model_call-only middleware; a CI log
    code, text = run(*AGENT)
    assert code == 0, text
    lines = text.splitlines()
    # the summary, then which tools were stand-ins (two lines: all of them signal)
    summary = re.fullmatch(r"(\d+) passed, 0 failed", lines[-3])
    assert summary is not None, lines[-3]
    rows = [line for line in lines if ".hard " in line or ".polish " in line or ".never " in line]
    # every scenario this stack's matrix has (53 on the newest; older langchain has fewer)
    assert len(rows) == int(summary.group(1)) >= 45
    skips = [line for line in lines if line.startswith("skipped ")]
    assert len(skips) >= 1  # at least the step budget on the reviewed tool, with its reason
    # title, the skipped lines, table header, one row per scenario, the summary, the stand-ins
    assert len(lines) == 1 + len(skips) + 1 + len(rows) + 1 + 2
    assert "breaches" not in text
    # the path's middle nodes are elided: no row runs to hundreds of characters in a CI log
    assert max(len(row) for row in rows) <= 165
    elided = "ModelCallLimit.before_model>...10 nodes...>StopOnArtifact.after_agent"
    assert rows[0].endswith(f"  {elided}")
    code, text = run(*AGENT, "--scenario", "success@order_status.hard", "--json")
    (whole,) = json.loads(text)["results"]
    assert len(whole["actual_path"]) == 12  # --json keeps the whole path


@pytest.mark.parametrize(
    ("kind", "scenario", "cause"),
    [
        ("nostop", "success", "(add StopOnArtifact(policy) to your create_agent middleware"),
        ("nopolicy", "success", "your factory ignores the policy it is given"),
        ("direct", "success", "tools ['pay'] have return_direct=True"),
    ],
)
def test_the_shipped_agent_broken_names_the_cause(
    shipped: Path, kind: str, scenario: str, cause: str
) -> None:
    write_module(shipped, kind, broken(kind))
    code, text = run(
        "--agent", f"{kind}:make_agent", "--tools", f"{kind}:TOOLS", "--scenario", scenario
    )
    assert code == 1
    assert cause in text
    assert "breaches, by cause" in text


def test_breaches_are_grouped_by_cause_in_a_ci_log(shipped: Path) -> None:
    write_module(shipped, "nopolicy", broken("nopolicy"))
    code, text = run(
        "--agent", "nopolicy:make_agent", "--tools", "nopolicy:TOOLS", "--scenario", "success"
    )
    assert code == 1
    causes = text.split("breaches, by cause (2):\n", 1)[1].splitlines()[:-2]  # - stand-ins
    ignored = (
        "- 2 runs: your factory ignores the policy it is given: the record says mode 'hard', "
        "parallel 'all'; the check passed mode '{}', parallel 'all' (pass `policy` on: "
        "StopOnArtifact(policy) or build_react_graph(model, tools, policy=policy))"
    )
    assert causes == [
        ignored.format("polish"),
        "  in success@order_status.polish, success@pay.polish (paused by HumanInTheLoopMiddleware)",
        ignored.format("never"),
        "  in success@order_status.never, success@pay.never (paused by HumanInTheLoopMiddleware)",
        "(6 more breaches follow from these causes; --json lists them)",
        "2 passed, 4 failed",
    ]


def test_one_cause_is_one_group_whichever_call_ran_past_the_script(shipped: Path) -> None:
    # without StopOnArtifact the model is called once more than scripted: call #2 of 1, #3 of
    # 2, #5 of 4, after different messages; one cause, not one group per error text
    write_module(shipped, "nostop", broken("nostop"))
    code, text = run(
        "--agent", "nostop:make_agent", "--tools", "nostop:TOOLS",
        "--scenario", "success@order_status.hard", "--scenario", "transient-forever@pay.hard",
        "--scenario", "retryable-then-success@order_status.hard",
        "--scenario", "parallel-any-stop-first.hard",
    )  # fmt: skip
    assert code == 1
    causes = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(causes) == 1, causes
    assert causes[0].startswith(
        "- 4 runs: the model was called more often than a correct router calls it: the run did "
        "not stop where it should have (ScriptExhaustedError: a model call after the scripted "
        "ones)"
    )


def test_the_missing_stop_hint_only_when_stoponartifact_is_missing(shipped: Path) -> None:
    missing = "is StopOnArtifact(policy) in your create_agent middleware?"
    for kind, hint in [
        (
            "nopolicy",
            "your StopOnArtifact was built without it: pass it on, StopOnArtifact(policy)",
        ),
        ("nostop", missing),
    ]:
        write_module(shipped, kind, broken(kind))
        runs = check("parallel-any-stop-first", module=kind)
        (breaches,) = [r.breaches for r in runs.values()]
        assert hint in breaches[0], kind
        assert kind == "nostop" or missing not in " ".join(breaches)


# -- toolstop bench --agent ----------------------------------------------------------------------
def bench(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["bench", *argv], out=out), out.getvalue()


def test_bench_runs_the_async_agent_over_a_real_client(
    shipped: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # item 4 (bench): async tools, an async-only middleware, the agent's own review on `pay`
    pytest.importorskip("langchain_openai", reason="needs the `openai` extra")
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    from toolstop.testing.loopback import LoopbackProvider, reply

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    questions = shipped / "questions.txt"
    questions.write_text("Where is order o-1?\nPay 20 on order o-3\n")
    status = reply(None, ("order_status", {"order_id": "o-1"}))
    pay = reply(None, ("pay", {"request": {"order_id": "o-3", "amount": 20}}))
    script = [
        *(status, "answer", status, status, "narration"),  # the warm-up: never, hard, polish
        *(status, "answer", status, status, "narration"),  # question 1: never, hard, polish
        *(pay, pay, "narration", pay, "answer"),  # question 2: hard, polish, never
    ]
    out = shipped / "bench-out"
    with LoopbackProvider(script) as provider:
        code, text = bench(
            *AGENT,
            "--questions", str(questions),
            "--model", "openai:gpt-loopback",
            "--base-url", provider.base_url,
            "--out", str(out),
        )  # fmt: skip
    assert code == 0, text
    assert provider.remaining == 0
    assert provider.rejected == []
    document = json.loads((out / "bench.json").read_text())
    modes = {c["behaviour"]: c for c in document["configs"]}
    assert {m: c["model_calls"] for m, c in modes.items()} == {"never": 4, "hard": 2, "polish": 4}
    assert {m: c["tool_calls"] for m, c in modes.items()} == {"never": 2, "hard": 2, "polish": 2}
    assert {m: c["tool_errors"] for m, c in modes.items()} == {"never": 0, "hard": 0, "polish": 0}
    assert {m: c["reviews"] for m, c in modes.items()} == {"never": 1, "hard": 1, "polish": 1}
    assert modes["hard"]["rules"] == {"completed": 2}
    assert document["headline"]["agent"]["model_calls_hard_vs_never"] == 0.5
    header = text.splitlines()[1].split()
    assert header[-3:] == ["tool", "errors", "reviews"]  # the agent's own review paused runs


FAILING_TOOL = '''
from langchain.agents import create_agent
from langchain.agents.middleware import ToolRetryMiddleware
from langchain_core.tools import tool

from toolstop import StopOnArtifact


@tool(response_format="content_and_artifact")
def order_status(order_id: str):
    """Look up an order's status by its id."""
    raise ConnectionError("the order service is down")


TOOLS = [order_status]


def make_agent(model, tools, policy):
    retry = ToolRetryMiddleware(max_retries=0, on_failure=lambda e: f"Error: {e!r}")
    return create_agent(model, tools, middleware=[retry, StopOnArtifact(policy)])
'''


def test_bench_says_when_the_tools_mostly_fail(shipped: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    write_module(shipped, "failing", FAILING_TOOL)
    questions = shipped / "questions.txt"
    questions.write_text("Where is order o-1?\nWhere is order o-2?\n")
    code, text = bench(
        "--agent", "failing:make_agent", "--tools", "failing:TOOLS",
        "--questions", str(questions), "--latency-ms", "0", "--out", str(shipped / "out"),
    )  # fmt: skip
    assert code == 1
    document = json.loads((shipped / "out" / "bench.json").read_text())
    modes = {c["behaviour"]: c for c in document["configs"]}
    # the simulated model retries an error three times: four calls a question, all failing
    assert {m: (c["tool_calls"], c["tool_errors"]) for m, c in modes.items()} == dict.fromkeys(
        ("never", "hard", "polish"), (8, 8)
    )
    assert document["headline"] == {}
    assert (
        "hard: 8 of 8 tool calls failed: the tool raised (first: order_status: Error: "
        "ConnectionError('the order service is down')); the figures above measure failing "
        "tools, not savings"
    ) in text
    # the tool raised: whether it returns (content, signal(...)) is not the question
    assert "do your tools return" not in text


# -- a run another middleware ended --------------------------------------------------------------
def test_explain_and_report_name_the_middleware_that_ended_a_run(tmp_path: Path) -> None:
    # item 5: the limit ended run 1 (the user saw "Model call limits exceeded"), a guard run 2,
    # the model answered run 3
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware, ModelCallLimitMiddleware, hook_config
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver

    from toolstop import Outcome, StopOnArtifact, StopPolicy, signal
    from toolstop.testing.scripted import ScriptedChatModel, call

    @tool(response_format="content_and_artifact")
    def lookup(query: str) -> tuple[str, dict[str, object]]:
        """Look something up."""
        return "The service timed out.", signal(Outcome.TRANSIENT)

    class Guard(AgentMiddleware):  # type: ignore[type-arg]
        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            if "secret" in str(state["messages"][-1].content):
                return {"jump_to": "end", "messages": [AIMessage("I can't help with that.")]}
            return None

    script = [call("lookup", query="a"), call("lookup", query="a"), "Done."]
    db = tmp_path / "threads.sqlite"
    thread = {"configurable": {"thread_id": "t"}}
    with SqliteSaver.from_conn_string(str(db)) as saver:
        middleware = [
            Guard(),
            ModelCallLimitMiddleware(run_limit=1),
            StopOnArtifact(StopPolicy()),
        ]
        agent = create_agent(
            ScriptedChatModel(script), [lookup], middleware=middleware, checkpointer=saver
        )
        first = agent.invoke({"messages": [HumanMessage("look a up")]}, thread)
        assert first["messages"][-1].content == "Model call limits exceeded: run limit (1/1)"
        second = agent.invoke({"messages": [HumanMessage("the secret")]}, thread)
        assert second["stop_record"]["ended_by"] == "another middleware"
        assert "ended_by_message" not in second["stop_record"]  # a guard's text is not kept
    out = io.StringIO()
    assert main(["explain", "t", "--db", str(db)], out=out) == 0
    text = out.getvalue()
    assert (
        "rule none (ended by ModelCallLimitMiddleware, not the model's answer: Model call "
        "limits exceeded: run limit (1/1))"
    ) in text
    assert "rule none (ended by another middleware, not the model's answer)" in text
    report = tmp_path / "report"
    out = io.StringIO()
    assert main(["report", "--db", str(db), "--out", str(report)], out=out) == 0
    document = json.loads((report / "report.json").read_text())
    assert document["rules"] == {"none": 2}
    assert document["ended_by"] == {"ModelCallLimitMiddleware": 1, "another middleware": 1}
    assert (
        "ended by another middleware, not the model's answer: 2 (ModelCallLimitMiddleware 1, "
        "another middleware 1)"
    ) in out.getvalue()
    assert (
        'data-metric="ended_by.ModelCallLimitMiddleware">1<' in (report / "report.html").read_text()
    )


def test_a_plain_answer_has_no_ended_by() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool

    from toolstop import Outcome, StopOnArtifact, StopPolicy, signal
    from toolstop.testing.scripted import ScriptedChatModel, call

    @tool(response_format="content_and_artifact")
    def lookup(query: str) -> tuple[str, dict[str, object]]:
        """Look something up."""
        return "The service timed out.", signal(Outcome.TRANSIENT)

    model = ScriptedChatModel([call("lookup", query="a"), "Done."])
    agent = create_agent(model, [lookup], middleware=[StopOnArtifact(StopPolicy())])
    record = agent.invoke({"messages": [HumanMessage("q")]})["stop_record"]
    assert record["rule"] == "none"
    assert "ended_by" not in record
