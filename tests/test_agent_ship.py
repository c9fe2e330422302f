"""`toolstop check --agent` on the agent teams ship: their own review, limits, summarisation,
async tools and an async-only middleware (issue 26)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from routers import MIDDLEWARE_UNAVAILABLE
from shipped_agent import SHIPPED_AGENT, broken
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
    for key, r in runs.items():
        assert r.breaches == [], key
        actual = r.actual
        assert actual["stop_record"]["rule"] == "step_budget"
        assert actual["stop_record"]["tool_turns"] == 1
    # five nodes a turn on this stack (limit, summarisation, model, review, limit) and tools
    assert runs["step-budget@order_status.hard"].scenario.recursion_limit == 13


def test_an_async_only_agent_passes_the_whole_check_in_one_line_a_scenario(
    shipped: Path,
) -> None:
    # items 4 and 6: async tools and an awrap_model_call-only middleware; a CI log
    code, text = run(*AGENT)
    assert code == 0, text
    lines = text.splitlines()
    assert lines[-1] == "49 passed, 0 failed"
    rows = [line for line in lines if ".hard " in line or ".polish " in line or ".never " in line]
    assert len(rows) == 49
    # title, skipped line, table header, one row per scenario, the summary
    assert len(lines) == 3 + 49 + 1
    assert "breaches" not in text


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
    causes = text.split("breaches, by cause (2):\n", 1)[1].splitlines()
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
