"""The `--agent` check engine (`toolstop._check.agent`), function by function: the matrix
retargeted onto a user's tools, the check's middleware renamed next to the agent's own, each
breach's sentence and hint, the step budget found on the agent's graph, the async rerun, the
preflight build and the goldens.

tests/test_agent_check.py and test_agent_ship.py run whole checks of users' modules through the
CLI; here each rule is pinned on small factories (a hand-built graph runs the whole matrix in
half a second) and on transcripts written by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool

from routers import MIDDLEWARE_UNAVAILABLE
from toolstop import Outcome, StopPolicy, build_react_graph, signal
from toolstop._check import agent as engine
from toolstop._check import preflight
from toolstop._check.agent import (
    PAUSED_NOTE,
    REVIEWER,
    STEP_BUDGET_REVIEWED,
    AgentCheck,
    agent_scenarios,
    check_agent,
    write_agent_goldens,
)
from toolstop._check.factory import AgentFactory, as_factory
from toolstop._check.harness import CheckResult
from toolstop._check.scenarios import DONE, RETRY, SCENARIOS, Scenario
from toolstop.errors import ToolstopConfigError
from toolstop.testing.scripted import ScriptedChatModel, call, turn

needs_middleware = pytest.mark.skipif(
    MIDDLEWARE_UNAVAILABLE is not None, reason=f"create_agent: {MIDDLEWARE_UNAVAILABLE}"
)


@tool(response_format="content_and_artifact")
def lookup(query: str) -> tuple[str, dict[str, Any]]:
    """Look something up."""
    return "found", signal(Outcome.COMPLETED)


@tool(response_format="content_and_artifact")
def fetch(n: int) -> tuple[str, dict[str, Any]]:
    """Fetch a numbered page."""
    return "page", signal(Outcome.COMPLETED)


@tool(response_format="content_and_artifact")
def third(flag: bool) -> tuple[str, dict[str, Any]]:
    """A third tool."""
    return "ok", signal(Outcome.COMPLETED)


def graph_agent(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
    return build_react_graph(model, tools, policy=policy)


def by_key(check: AgentCheck) -> dict[str, CheckResult]:
    return {r.scenario.key: r for r in check.results}


# -- small parts ------------------------------------------------------------------------------
def test_run_ends_counts_only_toolstops_run_end_events() -> None:
    ends = engine._RunEnds()
    assert ends.count == 0
    ends.on_custom_event("something_else", {})
    ends.on_custom_event("toolstop_run_end", {})
    ends.on_custom_event("toolstop_run_end", {})
    assert ends.count == 2


def result(key: str, *breaches: str) -> CheckResult:
    name, mode = key.split(".")
    scenario = Scenario(
        name=name,
        description="",
        tools=list,
        script=(),
        policy=StopPolicy(mode=mode),  # type: ignore[arg-type]
        stops=True,
    )
    return CheckResult(
        scenario=scenario, router="r", expected=None, actual={}, breaches=list(breaches)
    )


def test_an_agent_check_passes_only_when_every_run_passed_and_says_every_breach() -> None:
    clean = AgentCheck(factory="mod:make", results=[result("a.hard"), result("b.never")])
    assert clean.passed
    assert clean.breaches == []
    clean.assert_passed()  # raises nothing
    assert (clean.skipped, clean.goldens) == ({}, None)
    broken = AgentCheck(
        factory="mod:make",
        results=[result("a.hard", "one", "two"), result("b.never"), result("c.polish", "three")],
    )
    assert not broken.passed
    assert broken.breaches == ["a.hard: one", "a.hard: two", "c.polish: three"]
    with pytest.raises(AssertionError) as error:
        broken.assert_passed()
    assert str(error.value) == (
        "mod:make: 2 of 3 scenarios broke:\n- a.hard: one\n- a.hard: two\n- c.polish: three"
    )


def test_the_scripted_calls_of_a_correct_agent_are_the_scripts_length() -> None:
    assert engine._scripted_calls(SCENARIOS["retryable-then-success.polish"]) == 3
    assert engine._scripted_calls(SCENARIOS["success.hard"]) == 1
    step = SCENARIOS["step-budget.hard"]
    assert engine._scripted_calls(step) is None
    assert engine._scripted_calls(Scenario(**{**vars(step), "name": "step-budget@x"})) is None


# -- retargeting ------------------------------------------------------------------------------
ARGS = {"lookup": {"query": "q"}, "fetch": {"n": 1}}


def calls_of(step: Any) -> list[tuple[str, dict[str, Any], Any, str]]:
    return [(c["name"], c["args"], c["id"], c["type"]) for c in step.tool_calls]


def test_a_call_is_moved_onto_the_mapped_tool_with_its_generated_arguments() -> None:
    mapped = engine._remap_call(call("alpha", q=7, id="x"), {"alpha": fetch}, ARGS)
    assert mapped == {"name": "fetch", "args": {"n": 1}, "id": None, "type": "tool_call"}
    assert mapped["args"] is not ARGS["fetch"]  # a copy: a run cannot change the next one's


def test_a_script_is_retargeted_step_by_step() -> None:
    plain = AIMessage(content="no calls")
    script = (
        "text",
        plain,
        turn(call("alpha", a=1), call("beta", b=2)),
        call("beta"),
        [call("alpha"), call("beta")],
    )
    steps = engine._remap_script(script, {"alpha": lookup, "beta": fetch}, ARGS)
    assert isinstance(steps, tuple)
    assert steps[:2] == ("text", plain)
    assert steps[1] is plain
    assert len(steps) == 5
    assert calls_of(steps[2]) == [
        ("lookup", {"query": "q"}, None, "tool_call"),
        ("fetch", {"n": 1}, None, "tool_call"),
    ]
    assert calls_of(steps[3]) == [("fetch", {"n": 1}, None, "tool_call")]
    assert calls_of(steps[4]) == [
        ("lookup", {"query": "q"}, None, "tool_call"),
        ("fetch", {"n": 1}, None, "tool_call"),
    ]
    assert all(isinstance(s, AIMessage) and s.content == "" for s in steps[2:])


def test_two_calls_landing_on_one_tool_become_consecutive_turns() -> None:
    script = (turn(call("alpha"), call("beta"), call("gamma")),)
    names = {"alpha": lookup, "beta": lookup, "gamma": fetch}
    steps = engine._remap_script(script, names, ARGS)
    assert [[c["name"] for c in s.tool_calls] for s in steps] == [  # type: ignore[union-attr]
        ["lookup"],
        ["lookup", "fetch"],
    ]


def test_the_checks_middleware_is_renamed_and_leaves_counting_to_the_agents_own_limit() -> None:
    pytest.importorskip("langchain.agents")
    from langchain.agents.middleware import HumanInTheLoopMiddleware, ModelCallLimitMiddleware

    review = engine._as_checks(HumanInTheLoopMiddleware(interrupt_on={"x": True}), frozenset())
    assert type(review).__name__ == REVIEWER == "ToolstopCheckHumanInTheLoopMiddleware"
    assert review.name == REVIEWER
    assert isinstance(review, HumanInTheLoopMiddleware)

    alone = engine._as_checks(ModelCallLimitMiddleware(run_limit=1), frozenset({"Other"}))
    assert alone.name == "ToolstopCheckModelCallLimitMiddleware"
    assert type(alone).after_model is ModelCallLimitMiddleware.after_model  # it counts
    assert type(alone).aafter_model is ModelCallLimitMiddleware.aafter_model

    own = frozenset({"ModelCallLimitMiddleware"})
    beside = engine._as_checks(ModelCallLimitMiddleware(run_limit=1), own)
    assert beside.name == "ToolstopCheckModelCallLimitMiddleware"
    assert type(beside).after_model is engine._skip_hook  # the agent's own limit counts
    assert type(beside).aafter_model is engine._askip_hook
    assert type(beside).before_model is ModelCallLimitMiddleware.before_model  # still limits
    # a review next to the agent's own review is not changed
    other = engine._as_checks(
        HumanInTheLoopMiddleware(interrupt_on={"x": True}),
        frozenset({"HumanInTheLoopMiddleware"}),
    )
    assert "after_model" not in vars(type(other))


def test_the_scenarios_review_pauses_the_mapped_tool() -> None:
    pytest.importorskip("langchain.agents")
    from langchain.agents.middleware import HumanInTheLoopMiddleware, ModelCallLimitMiddleware

    def build() -> list[Any]:
        return [
            HumanInTheLoopMiddleware(interrupt_on={"alpha": True, "beta": True}),
            ModelCallLimitMiddleware(run_limit=2),
        ]

    own = frozenset({"ModelCallLimitMiddleware"})
    review, limit = engine._remap_middleware(build, {"alpha": fetch, "beta": lookup}, own)()
    assert isinstance(review, HumanInTheLoopMiddleware)
    assert set(review.interrupt_on) == {"fetch", "lookup"}
    assert review.name == REVIEWER
    assert limit.name == "ToolstopCheckModelCallLimitMiddleware"
    assert limit.run_limit == 2
    assert type(limit).after_model is engine._skip_hook  # `own` is passed on
    # by default the agent has no middleware of its own
    _, counting = engine._remap_middleware(build, {"alpha": fetch, "beta": lookup})()
    assert type(counting).after_model is ModelCallLimitMiddleware.after_model


def test_a_reviewers_edit_is_moved_onto_the_mapped_tool() -> None:
    review = (
        {"type": "edit", "edited_action": {"name": "alpha", "args": {"query": "x"}}},
        {"type": "edit", "edited_action": {"name": "elsewhere", "args": {"a": 1}}},
        {"type": "edit", "edited_action": "not a dict"},
        {"type": "approve"},
    )
    remapped = engine._remap_review(review, {"alpha": fetch}, ARGS)
    assert remapped == (
        {"type": "edit", "edited_action": {"name": "fetch", "args": {"n": 1}}},
        {"type": "edit", "edited_action": {"name": "elsewhere", "args": {"a": 1}}},
        {"type": "edit", "edited_action": "not a dict"},
        {"type": "approve"},
    )
    assert review[0]["edited_action"]["name"] == "alpha"  # the matrix's own is not changed
    assert remapped[1]["edited_action"] is not review[1]["edited_action"]  # a copy, all through
    assert remapped[0]["edited_action"]["args"] is not ARGS["fetch"]
    assert engine._remap_review((), {"alpha": fetch}, ARGS) == ()


def forced_of(scenario: Scenario) -> list[list[str]]:
    """Each stand-in's results, three calls each."""
    out = []
    for t in scenario.tools():
        calls = [
            t.invoke({"type": "tool_call", "name": t.name, "args": ARGS[t.name], "id": str(i)})
            for i in range(3)
        ]
        out.append([f"{t.name}:{m.content}" for m in calls])
    return out


def test_a_one_tool_scenario_forces_its_results_on_the_mapped_tool_and_idles_the_rest() -> None:
    base = SCENARIOS["retryable-then-success.polish"]
    forced = {"lookup": (RETRY, DONE)}
    made = engine._retarget(base, {"lookup": fetch}, [lookup, fetch], ARGS, forced, "x@fetch")
    assert made.name == "x@fetch"
    assert made.description == f"{base.description} (your tools: fetch)"
    assert [t.name for t in made.tools()] == ["lookup", "fetch"]
    idle = "(not called in this scenario)"
    assert forced_of(made) == [
        [f"lookup:{idle}"] * 3,
        [f"fetch:{RETRY[0]}", f"fetch:{DONE[0]}", f"fetch:{DONE[0]}"],
    ]
    assert made.tools()[0].invoke(
        {"type": "tool_call", "name": "lookup", "args": {"query": "q"}, "id": "1"}
    ).artifact == signal(Outcome.COMPLETED)
    assert [calls_of(s) for s in made.script[:2]] == [[("fetch", {"n": 1}, None, "tool_call")]] * 2
    assert made.script[2] == base.script[2]
    assert (made.policy, made.stops, made.recursion_limit) == (base.policy, True, None)
    assert made.middleware is None
    assert made.review == ()


def test_two_roles_on_one_tool_get_both_roles_results_in_order() -> None:
    base = SCENARIOS["parallel-any-stop-first.hard"]
    forced = {"alpha": (DONE,), "beta": (RETRY,)}
    names = {"alpha": fetch, "beta": fetch}
    made = engine._retarget(base, names, [fetch], ARGS, forced, base.name)
    assert made.description.endswith("(your tools: fetch)")
    assert forced_of(made) == [[f"fetch:{DONE[0]}", f"fetch:{RETRY[0]}", f"fetch:{RETRY[0]}"]]
    two = engine._retarget(
        base, {"alpha": lookup, "beta": fetch}, [lookup, fetch], ARGS, forced, "p"
    )
    assert two.description.endswith("(your tools: lookup, fetch)")


def test_the_step_budget_scenario_leaves_its_limit_to_the_agents_graph() -> None:
    base = SCENARIOS["step-budget.hard"]
    made = engine._retarget(
        base, {"lookup": fetch}, [fetch], ARGS, {"lookup": (RETRY,)}, "step-budget@fetch"
    )
    assert made.recursion_limit is None
    assert len(made.script) == engine._STEP_BUDGET_CALLS == 60
    assert all(calls_of(s) == [("fetch", {"n": 1}, None, "tool_call")] for s in made.script)
    kept = engine._retarget(
        SCENARIOS["transient-forever.hard"],
        {"lookup": fetch},
        [fetch],
        ARGS,
        {"lookup": (RETRY,)},
        "t",
    )
    assert len(kept.script) == 4
    assert kept.policy.max_transient_retries == 3


def test_a_middleware_scenario_is_retargeted_with_its_middleware_and_review() -> None:
    pytest.importorskip("langchain.agents")
    base = SCENARIOS["review-edit.hard"]
    own = frozenset({"HumanInTheLoopMiddleware"})
    made = engine._retarget(base, {"lookup": fetch}, [fetch], ARGS, {"lookup": (DONE,)}, "e", own)
    assert made.middleware is not None
    [review] = made.middleware()
    assert set(review.interrupt_on) == {"fetch"}
    assert made.review == ({"type": "edit", "edited_action": {"name": "fetch", "args": {"n": 1}}},)
    limit = SCENARIOS["limit-run.hard"]
    own = frozenset({"ModelCallLimitMiddleware"})
    made = engine._retarget(limit, {"lookup": fetch}, [fetch], ARGS, {"lookup": (DONE,)}, "l", own)
    [counted] = made.middleware()  # type: ignore[misc]
    assert type(counted).after_model is engine._skip_hook


ONE_TOOL_SKIPS = {
    "nothing-found": "it runs toolstop's own example search tool",
    **dict.fromkeys(
        [
            f"parallel-{p}-stop-{w}"
            for p in ("all", "any", "first", "priority")
            for w in ("first", "last")
        ],
        "the parallel scenarios need two tools; you have one",
    ),
}
NO_MIDDLEWARE = (
    "your factory takes no `middleware` keyword (the model-call-limit and human-review "
    "scenarios add langchain middleware to your agent)"
)


def test_the_matrix_on_one_tool_without_middleware() -> None:
    found, skipped = agent_scenarios([fetch], middleware=False)
    middleware = {s.name for s in SCENARIOS.values() if s.middleware is not None}
    assert skipped == {
        **ONE_TOOL_SKIPS,
        "parallel-across-turns": "the parallel scenarios need two tools; you have one",
        **dict.fromkeys(middleware, NO_MIDDLEWARE),
    }
    keys = [s.key for s, _ in found]
    assert keys[:3] == [
        "success@fetch.hard",
        "retryable-then-success@fetch.hard",
        "fatal@fetch.hard",
    ]
    assert "invalid-signals.hard" in keys
    assert "step-budget@fetch.hard" in keys
    assert len(keys) == len(set(keys)) == 18
    for scenario, base in found:
        assert scenario.policy == base.policy
        assert scenario.name.split("@")[0] == base.name


def test_the_four_tools_of_invalid_signals_land_on_one_tool_in_consecutive_turns() -> None:
    found, _ = agent_scenarios([fetch], middleware=False)
    invalid = next(s for s, b in found if b.name == "invalid-signals")
    assert invalid.name == "invalid-signals"
    assert [t.name for t in invalid.tools()] == ["fetch"]
    assert [
        [c["name"] for c in s.tool_calls] if isinstance(s, AIMessage) else s for s in invalid.script
    ] == [["fetch"], ["fetch"], ["fetch"], ["fetch"], "Here is what I found."]


def test_the_matrix_on_three_tools_with_middleware() -> None:
    pytest.importorskip("langchain.agents")
    tools = [lookup, fetch, third]
    found, skipped = agent_scenarios(tools, middleware=True)
    assert skipped == {"nothing-found": "it runs toolstop's own example search tool"}
    names = [s.name for s, _ in found]
    assert names[:3] == ["success@lookup", "success@fetch", "success@third"]
    assert "review-edit@third" in names
    assert "limit-run@fetch" in names
    pair = next(s for s, b in found if s.key == "parallel-any-stop-last.hard")
    assert [c["name"] for c in pair.script[0].tool_calls] == ["fetch", "lookup"]  # type: ignore[union-attr]
    assert pair.description.endswith("(your tools: lookup, fetch)")
    invalid = next(s for s, b in found if s.name == "invalid-signals")
    assert [c["name"] for c in invalid.script[0].tool_calls] == ["lookup", "fetch", "third"]  # type: ignore[union-attr]
    assert [c["name"] for c in invalid.script[1].tool_calls] == ["lookup"]  # type: ignore[union-attr]
    assert all(b is SCENARIOS[b.key] or b.key == SCENARIOS[b.key].key for _, b in found)
    default, _ = agent_scenarios(tools)  # middleware=True by default
    assert [s.key for s, _ in default] == [s.key for s, _ in found]


def test_generated_arguments_are_refused_for_a_tool_without_valid_ones() -> None:
    from pydantic import Field

    @tool
    def by_sku(sku: str = Field(pattern=r"^SKU-\d{4}$")) -> str:
        """Find a product by SKU."""
        return sku

    with pytest.raises(ToolstopConfigError, match="tool 'by_sku'"):
        agent_scenarios([by_sku])


# -- the router around the factory -------------------------------------------------------------
def test_the_router_passes_middleware_only_when_given_and_swaps_in_the_checks_saver() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    seen: list[dict[str, Any]] = []

    def factory(model: Any, tools: list[BaseTool], policy: StopPolicy, **extra: Any) -> Any:
        seen.append({"tools": tools, "policy": policy, **extra})
        return build_react_graph(model, tools, policy=policy)

    made = as_factory(factory, name="mod:make")
    router = engine._router(made)
    assert (router.name, router.model_node, router.stop_node, router.polish_node) == (
        "mod:make",
        "model",
        "model",
        "model",
    )
    assert router.takes_middleware is False
    policy = StopPolicy(mode="never")
    plain = router.build(ScriptedChatModel([]), (fetch,), policy=policy)
    assert seen[-1] == {"tools": [fetch], "policy": policy}
    assert plain.checkpointer is None
    saver = InMemorySaver()
    kept = router.build(
        ScriptedChatModel([]), [fetch], policy=policy, checkpointer=saver, middleware=("m",)
    )
    assert seen[-1]["middleware"] == ["m"]
    assert isinstance(seen[-1]["middleware"], list)
    assert kept.checkpointer is saver
    none = router.build(ScriptedChatModel([]), [fetch], policy=policy, middleware=None)
    assert "middleware" not in seen[-1]
    assert none.checkpointer is None

    def lambda_agent(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        from langchain_core.runnables import RunnableLambda

        return RunnableLambda(lambda x: x)

    other = engine._router(as_factory(lambda_agent)).build(
        None, [fetch], policy=policy, checkpointer=saver
    )
    assert not hasattr(other, "checkpointer")  # not a graph: returned as built

    def takes(model: Any, tools: list[BaseTool], policy: StopPolicy, middleware: Any = ()) -> Any:
        return None

    assert engine._router(as_factory(takes)).takes_middleware is True


def test_the_expected_rule_is_toolstops_own_routers_on_the_same_scenario() -> None:
    assert engine._expected_rule(SCENARIOS["success.hard"]) == "completed"
    assert engine._expected_rule(SCENARIOS["fatal.never"]) == "none"
    assert engine._expected_rule(SCENARIOS["transient-forever.hard"]) == "retry_budget"
    assert engine._expected_rule(SCENARIOS["policy-block.hard"]) == "policy_block"
    assert engine._expected_rule(SCENARIOS["invalid-signals.hard"]) == "none"
    pytest.importorskip("langchain.agents")
    # middleware scenarios have goldens of the middleware router only
    assert engine._expected_rule(SCENARIOS["limit-run.hard"]) == "completed"
    assert engine._expected_rule(SCENARIOS["review-reject.hard"]) == "none"
    unknown = Scenario(name="no-golden", description="", tools=list, script=(), stops=True)
    assert engine._expected_rule(unknown) is None


# -- breaches ---------------------------------------------------------------------------------
def clean(**record: Any) -> dict[str, Any]:
    """The transcript of a correct hard-mode stop with `rule completed` (no invariant broken)."""
    return {
        "final": {"type": "ai", "relay": True},
        "tool_results": [{"tool": "fetch", "signal": "completed"}],
        "history_problems": [],
        "script": {"steps": 1, "unused": 0},
        "stop_record": {"rule": "completed", "mode": "hard", "parallel": "all", **record},
    }


SUCCESS = SCENARIOS["success.hard"]
IGNORED = (
    "your factory ignores the policy it is given: the record says mode 'never', parallel "
    "'any'; the check passed mode 'hard', parallel 'all' (pass `policy` on: "
    "StopOnArtifact(policy) or build_react_graph(model, tools, policy=policy))"
)
TWO_ENDS = (
    "the run published 2 run-end records; a run publishes exactly one (is StopOnArtifact "
    "listed twice, or the graph wrapped in another toolstop graph?)"
)


def test_a_correct_run_has_no_breach() -> None:
    assert engine._run_breaches(SUCCESS, SUCCESS, clean(), 1) == []
    assert engine._breaches(SUCCESS, SUCCESS, clean(), 1) == []
    assert engine._breaches(SUCCESS, SUCCESS, {**clean(), "interrupts": ["Own"]}, 1) == []


def test_a_run_under_another_policy_is_said_first() -> None:
    breaches = engine._run_breaches(SUCCESS, SUCCESS, clean(mode="never", parallel="any"), 2)
    assert breaches == [IGNORED, TWO_ENDS]
    parallel = engine._run_breaches(SUCCESS, SUCCESS, clean(parallel="any"), 1)
    assert len(parallel) == 1
    assert "parallel 'any'; the check passed mode 'hard', parallel 'all'" in parallel[0]
    mode = engine._run_breaches(SUCCESS, SUCCESS, clean(mode="never"), 1)
    assert "the record says mode 'never', parallel 'all';" in mode[0]


def test_a_rule_other_than_toolstops_own_is_a_breach() -> None:
    assert engine._run_breaches(SUCCESS, SUCCESS, clean(rule="fatal"), 1) == [
        "the stop record's rule is 'fatal'; toolstop's own router records 'completed' on this "
        "scenario"
    ]
    unknown = Scenario(name="no-golden", description="", tools=list, script=(), stops=True)
    assert engine._run_breaches(SUCCESS, unknown, clean(rule="fatal"), 1) == []  # no golden


def test_every_run_publishes_exactly_one_run_end() -> None:
    assert engine._run_breaches(SUCCESS, SUCCESS, clean(), 2) == [TWO_ENDS]
    assert engine._run_breaches(SUCCESS, SUCCESS, clean(), 0) == [
        TWO_ENDS.replace("published 2", "published 0")
    ]
    # a run without a record is the missing record, not a count of run ends
    [missing] = engine._run_breaches(SUCCESS, SUCCESS, {**clean(), "stop_record": None}, 0)
    assert missing == (
        "no stop_record in the final state: the router is not toolstop's"
        + engine._NOT_TOOLSTOP_HINT
    )


def test_a_tool_exception_the_agent_re_raised_says_how_to_send_it_back() -> None:
    base = SCENARIOS["tool-exception.hard"]
    raised = {"error": "RuntimeError: backend exploded"}
    said = "the run raised RuntimeError: backend exploded; a router must end every run cleanly"
    assert engine._run_breaches(base, base, raised, 0) == [said + engine._RAISED_HINT]
    assert engine._run_breaches(base, SUCCESS, raised, 0) == [said]  # another scenario
    other = {"error": "RuntimeError: no key"}
    assert engine._run_breaches(base, base, other, 0) == [
        "the run raised RuntimeError: no key; a router must end every run cleanly"
    ]


def test_a_model_call_past_the_script_says_what_the_graph_shows_of_stoponartifact() -> None:
    error = {"error": "ScriptExhaustedError: unexpected model call #2"}
    said = (
        "the model was called more often than a correct router calls it: the run did not stop "
        "where it should have (ScriptExhaustedError: unexpected model call #2)"
    )
    fatal = SCENARIOS["fatal.hard"]
    assert engine._run_breaches(fatal, fatal, error, 0, "missing") == [
        said + preflight._CALLED_AGAIN_HINT
    ]
    assert engine._run_breaches(fatal, fatal, error, 0, "policy-dropped") == [
        said + preflight._POLICY_DROPPED_HINT
    ]
    assert engine._run_breaches(fatal, fatal, error, 0, "present") == [said]
    assert engine._run_breaches(fatal, fatal, error, 0, "") == [said]
    assert engine._run_breaches(fatal, fatal, error, 0) == [said]
    waiting = {**error, "waiting_for": "Own"}  # the hint goes on the first breach only
    first, second = engine._run_breaches(fatal, fatal, waiting, 0, "missing")
    assert first.endswith(preflight._CALLED_AGAIN_HINT)
    assert second == said


def test_the_step_budgets_unused_answers_are_not_a_breach() -> None:
    step = SCENARIOS["step-budget.hard"]
    unused = {
        **clean(rule="step_budget"),
        "script": {"steps": 60, "unused": 55},
    }
    assert engine._run_breaches(step, step, unused, 1) == []
    [breach] = engine._run_breaches(SUCCESS, SUCCESS, {**clean(), "script": unused["script"]}, 1)
    assert "(55 scripted answers unused)" in breach


def test_each_breach_of_a_run_the_agents_own_review_paused_says_so() -> None:
    paused = {**clean(), "interrupts": ["Review", "Review", "Other"]}
    note = " (this run was paused by your own review, Review, Other, and approved by the check)"
    assert PAUSED_NOTE.format(by="Review, Other") == note
    assert engine._breaches(SUCCESS, SUCCESS, paused, 2) == [TWO_ENDS + note]
    both = engine._breaches(SUCCESS, SUCCESS, {**paused, **clean(mode="never", parallel="any")}, 2)
    assert both == [IGNORED + note, TWO_ENDS + note]
    fatal = SCENARIOS["fatal.hard"]
    error = {"error": "ScriptExhaustedError: x", "interrupts": ["Review"]}
    [breach] = engine._breaches(fatal, fatal, error, 0, "missing")
    assert breach.endswith(
        preflight._CALLED_AGAIN_HINT
        + " (this run was paused by your own review, Review, and approved by the check)"
    )


# -- the runner: async rerun, step budget -------------------------------------------------------
class Recorded:
    """Stands in for `run_scenario`: records each call, answers from `answers`."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, scenario: Scenario, router: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls.append({"scenario": scenario, "router": router, **kwargs})
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_a_run_is_driven_with_the_checks_reviewer_and_a_saver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = Recorded({"final": "x"})
    monkeypatch.setattr(engine, "run_scenario", runs)
    runner = engine._Runner("router")  # type: ignore[arg-type]
    assert (runner.router, runner.run_async) == ("router", False)
    ends = engine._RunEnds()
    assert runner.run(SUCCESS, ends) == {"final": "x"}
    assert runner.run(SUCCESS) == {"final": "x"}
    assert runs.calls == [
        {
            "scenario": SUCCESS,
            "router": "router",
            "callbacks": [ends],
            "reviewer": REVIEWER,
            "checkpointer": True,
            "run_async": False,
            "run_config": None,
        },
        {
            "scenario": SUCCESS,
            "router": "router",
            "callbacks": [],
            "reviewer": REVIEWER,
            "checkpointer": True,
            "run_async": False,
            "run_config": None,
        },
    ]
    mine = {"configurable": {"passenger_id": "p"}}
    engine._Runner("router", mine).run(SUCCESS)  # type: ignore[arg-type]
    assert runs.calls[-1]["run_config"] is mine


def test_a_run_that_needs_async_is_run_again_async_and_so_is_every_run_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sync_only = {"error": "NotImplementedError: Synchronous implementation of x is not available"}
    runs = Recorded(sync_only, {"final": "async"}, {"final": "next"})
    monkeypatch.setattr(engine, "run_scenario", runs)
    runner = engine._Runner("router")  # type: ignore[arg-type]
    ends = engine._RunEnds()
    ends.count = 3  # what the failed run counted is forgotten
    assert runner.run(SUCCESS, ends) == {"final": "async"}
    assert ends.count == 0
    assert runner.run_async is True
    assert [c["run_async"] for c in runs.calls] == [False, True]
    assert runner.run(SUCCESS) == {"final": "next"}
    assert [c["run_async"] for c in runs.calls] == [False, True, True]
    # without a counter, the rerun happens too
    runs = Recorded(sync_only, {"final": "async"})
    monkeypatch.setattr(engine, "run_scenario", runs)
    again = engine._Runner("router")  # type: ignore[arg-type]
    assert again.run(SUCCESS) == {"final": "async"}
    # an error that is not about sync code is the run's result
    runs = Recorded({"error": "RuntimeError: boom"}, {"final": "never asked"})
    monkeypatch.setattr(engine, "run_scenario", runs)
    plain = engine._Runner("router")  # type: ignore[arg-type]
    assert plain.run(SUCCESS, ends) == {"error": "RuntimeError: boom"}
    assert plain.run_async is False
    assert len(runs.calls) == 1


class Budget(engine._Runner):
    """A runner whose runs are answered by recursion limit."""

    def __init__(self, answer: Any) -> None:
        super().__init__("router")  # type: ignore[arg-type]
        self.answer = answer
        self.limits: list[int | None] = []

    def run(self, scenario: Scenario, run_ends: Any = None) -> dict[str, Any]:
        self.limits.append(scenario.recursion_limit)
        assert run_ends is None
        return self.answer(scenario.recursion_limit)


def at_budget(rule: str = "step_budget", tools: bool = True) -> dict[str, Any]:
    return {"stop_record": {"rule": rule}, "tool_results": [{}] if tools else []}


STEP = SCENARIOS["step-budget.hard"]


def test_the_step_budget_limit_is_the_first_that_stops_after_a_tool_turn() -> None:
    def answer(limit: int) -> dict[str, Any]:
        if limit < 5:
            return {"error": "GraphRecursionError: Recursion limit of 3 reached"}
        if limit < 7:
            return at_budget(tools=False)  # stopped before any tool ran
        if limit < 8:
            return {"error": "ValueError: recursion limit 7 is too low for one turn"}
        return at_budget()

    runner = Budget(answer)
    assert runner.step_budget_limit(STEP) == 8
    assert runner.limits == [3, 4, 5, 6, 7, 8]
    assert Budget(lambda limit: at_budget()).step_budget_limit(STEP) == 3


def test_the_step_budget_falls_back_when_no_limit_reaches_it() -> None:
    other = Budget(lambda limit: at_budget(rule="completed"))
    assert other.step_budget_limit(STEP) == engine._STEP_BUDGET_FALLBACK == 12
    assert other.limits == [3]  # another rule: a higher limit does not change it
    no_record = Budget(lambda limit: {"stop_record": None, "tool_results": [{}]})
    assert no_record.step_budget_limit(STEP) == 12
    assert no_record.limits == [3]
    raised = Budget(lambda limit: {"error": "RuntimeError: boom"})
    assert raised.step_budget_limit(STEP) == 12
    assert raised.limits == [3]
    too_low = Budget(lambda limit: {"error": "GraphRecursionError: x"})
    assert too_low.step_budget_limit(STEP) == 12
    assert too_low.limits == list(range(3, 60))
    early = Budget(lambda limit: at_budget(tools=False))  # always before the tool: keeps going
    assert early.step_budget_limit(STEP) == 12
    assert early.limits == list(range(3, 60))


def test_the_step_budget_is_not_measured_on_a_run_a_review_paused() -> None:
    paused = Budget(lambda limit: {**at_budget(), "interrupts": ["Own"]})
    assert paused.step_budget_limit(STEP) is None
    assert paused.limits == [3]
    waiting = Budget(lambda limit: {**at_budget(), "waiting_for": "Own"})
    assert waiting.step_budget_limit(STEP) is None


# -- the whole check, on a hand-built graph ------------------------------------------------------
def test_the_whole_matrix_passes_on_a_graph_factory() -> None:
    seen: list[CheckResult] = []
    check = check_agent(graph_agent, [fetch], on_result=seen.append)
    check.assert_passed()
    assert check.factory == "graph_agent"
    assert seen == check.results
    assert len(check.results) == 18
    assert check.goldens is None
    results = by_key(check)
    step = results["step-budget@fetch.hard"]
    assert step.scenario.recursion_limit == 4  # found on this graph
    assert step.actual["stop_record"]["rule"] == "step_budget"
    assert step.expected == {"model_calls": None}
    assert results["retryable-then-success@fetch.polish"].expected == {"model_calls": 3}
    assert all(r.router == r.actual["router"] == "graph_agent" for r in check.results)
    assert "parallel-any-stop-first" in check.skipped


def test_scenarios_are_chosen_by_name_or_key_of_either_the_run_or_the_matrix() -> None:
    def keys(*wanted: str) -> list[str]:
        return [r.scenario.key for r in check_agent(graph_agent, [fetch], scenarios=wanted).results]

    assert keys("success@fetch.hard") == ["success@fetch.hard"]
    assert keys("success.polish") == ["success@fetch.polish"]
    assert keys("fatal") == ["fatal@fetch.hard", "fatal@fetch.polish", "fatal@fetch.never"]
    assert keys("fatal@fetch", "answer.hard") == [
        "fatal@fetch.hard",
        "fatal@fetch.polish",
        "fatal@fetch.never",
        "answer@fetch.hard",
    ]
    assert len(check_agent(graph_agent, [fetch], scenarios=[]).results) == 18


def test_an_unknown_scenario_is_refused_with_the_known_names() -> None:
    with pytest.raises(ToolstopConfigError) as error:
        check_agent(graph_agent, [fetch], scenarios=["success", "zzz", "nope"])
    assert str(error.value) == (
        "unknown scenario ['nope', 'zzz']; known: answer, budget-model, fatal, "
        "injected-control-text, invalid-signals, policy-block, retryable-then-success, "
        "step-budget, success, tool-exception, tool-raises-forever, transient-forever"
    )


def test_a_loaded_factory_keeps_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    made = AgentFactory(name="acme.agents:make", build=graph_agent)
    check = check_agent(made, [fetch], scenarios=["success@fetch.hard"])
    assert check.factory == "acme.agents:make"
    assert check.results[0].actual["router"] == "acme.agents:make"
    check.assert_passed()


def test_the_step_budget_is_skipped_when_a_review_pauses_the_tool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine._Runner, "step_budget_limit", lambda self, scenario: None)
    check = check_agent(graph_agent, [fetch], scenarios=["step-budget", "success.hard"])
    assert [r.scenario.key for r in check.results] == ["success@fetch.hard"]
    assert check.skipped["step-budget@fetch"] == STEP_BUDGET_REVIEWED


def test_the_run_end_count_of_each_run_is_judged() -> None:
    from langchain_core.runnables import RunnableLambda

    from toolstop.observe import publish_run_end

    def republishes(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        graph = build_react_graph(model, tools, policy=policy)

        def run(inputs: Any, config: Any) -> Any:
            state = graph.invoke(inputs, config)
            publish_run_end(state["stop_record"], config)
            return state

        return RunnableLambda(run)

    check = check_agent(republishes, [fetch], scenarios=["success@fetch.hard", "fatal.never"])
    assert [r.breaches for r in check.results] == [[TWO_ENDS], [TWO_ENDS]]


def test_a_factory_that_drops_the_policy_is_told_so_first() -> None:
    def ignores(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        return build_react_graph(model, tools)

    check = check_agent(ignores, [fetch], scenarios=["success.never"])
    [never] = check.results
    assert never.breaches[0] == (
        "your factory ignores the policy it is given: the record says mode 'hard', parallel "
        "'all'; the check passed mode 'never', parallel 'all' (pass `policy` on: "
        "StopOnArtifact(policy) or build_react_graph(model, tools, policy=policy))"
    )
    assert not check.passed


# -- goldens ----------------------------------------------------------------------------------
def test_goldens_are_written_then_compared(tmp_path: Path) -> None:
    wanted = ["success@fetch.hard", "fatal@fetch.never"]
    check = check_agent(graph_agent, [fetch], scenarios=wanted)
    written = write_agent_goldens(check, str(tmp_path))
    assert written == [tmp_path / f"{key}.json" for key in wanted]
    assert all(p.exists() for p in written)
    again = check_agent(graph_agent, [fetch], scenarios=wanted, goldens=str(tmp_path))
    assert again.goldens == tmp_path
    again.assert_passed()
    assert again.results[0].expected is not None
    assert again.results[0].expected["stop_record"]["rule"] == "completed"
    empty = tmp_path / "none"
    missing = check_agent(graph_agent, [fetch], scenarios=wanted[:1], goldens=empty)
    assert not missing.passed
    assert any("no golden transcript" in b for b in missing.breaches)


def test_goldens_of_a_broken_run_are_refused(tmp_path: Path) -> None:
    def ignores(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        return build_react_graph(model, tools)

    check = check_agent(ignores, [fetch], scenarios=["success@fetch.hard", "success.never"])
    with pytest.raises(ToolstopConfigError) as error:
        write_agent_goldens(check, tmp_path)
    assert str(error.value) == (
        "refused: 1 runs break an invariant (success@fetch.never: your factory ignores the "
        "policy it is given: the record says mode 'hard', parallel 'all'; the check passed mode "
        "'never', parallel 'all' (pass `policy` on: StopOnArtifact(policy) or "
        "build_react_graph(model, tools, policy=policy))); no golden was written"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_differs_only_from_its_old_golden_can_be_written_again(tmp_path: Path) -> None:
    check = check_agent(graph_agent, [fetch], scenarios=["success@fetch.hard"])
    [path] = write_agent_goldens(check, tmp_path)
    golden = json.loads(path.read_text(encoding="utf-8"))
    golden["stop_record"]["rule"] = "fatal"
    path.write_text(json.dumps(golden), encoding="utf-8")
    changed = check_agent(graph_agent, [fetch], scenarios=["success@fetch.hard"], goldens=tmp_path)
    assert not changed.passed  # the golden is out of date
    assert write_agent_goldens(changed, tmp_path) == [path]  # a difference from it is no breach
    assert json.loads(path.read_text(encoding="utf-8"))["stop_record"]["rule"] == "completed"


# -- what the agent's graph shows before any run ----------------------------------------------
def nodes_with(*owners: Any, names: tuple[str, ...] = ("model", "tools")) -> dict[str, Any]:
    nodes: dict[str, Any] = {n: SimpleNamespace() for n in names}
    for i, owner in enumerate(owners):
        where = "func" if i % 2 == 0 else "afunc"
        bound = SimpleNamespace(**{where: getattr(owner, "wrap_model_call", None)})
        nodes[f"Owner{i}.hook"] = SimpleNamespace(bound=bound)
    return nodes


@needs_middleware
def test_the_graph_shows_whether_stoponartifact_is_there_and_with_which_policy() -> None:
    from toolstop import StopOnArtifact

    given = preflight._PREFLIGHT_POLICY
    assert given == StopPolicy(mode="polish", parallel="any")
    assert preflight._stop_status(nodes_with(StopOnArtifact(given))) == "present"
    assert preflight._stop_status(nodes_with(SimpleNamespace(wrap_model_call=None))) == "missing"
    assert preflight._stop_status(nodes_with(StopOnArtifact())) == "policy-dropped"
    both = nodes_with(StopOnArtifact(given), StopOnArtifact())  # the second one on afunc
    assert preflight._stop_status(both) == "policy-dropped"
    assert preflight._stop_status(nodes_with(StopOnArtifact(), StopOnArtifact(given))) == (
        "policy-dropped"
    )
    assert preflight._stop_status(nodes_with(SimpleNamespace(), StopOnArtifact(given))) == "present"
    assert preflight._stop_status(nodes_with(names=("model", "tools"))) == "missing"
    assert preflight._stop_status(nodes_with(names=("model",))) == ""
    assert preflight._stop_status(nodes_with(names=("tools",))) == ""
    assert preflight._stop_status({}) == ""


@needs_middleware
def test_the_preflight_build_reads_the_agents_middleware_and_stop() -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelCallLimitMiddleware

    from toolstop import StopOnArtifact

    built: list[dict[str, Any]] = []

    def mine(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        built.append({"model": model, "tools": tools, "policy": policy})
        limit = ModelCallLimitMiddleware(run_limit=9)
        return create_agent(model, tools, middleware=[limit, StopOnArtifact(policy)])

    static = fetch.model_copy(update={"return_direct": True})
    assert preflight._preflight(as_factory(mine), [static, lookup]) == (
        frozenset({"ModelCallLimitMiddleware", "StopOnArtifact"}),
        "present",
        [],
    )
    [seen] = built
    assert seen["policy"] == preflight._PREFLIGHT_POLICY
    assert isinstance(seen["model"], ScriptedChatModel)
    assert [t.name for t in seen["tools"]] == ["fetch", "lookup"]
    assert [t.return_direct for t in seen["tools"]] == [False, False]
    assert seen["tools"][0] is not static
    assert (
        seen["tools"][0]
        .invoke({"type": "tool_call", "name": "fetch", "args": {"n": 1}, "id": "1"})
        .content
        == ""
    )
    assert static.return_direct is True  # the user's tool is not changed

    def plain(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        return create_agent(model, tools)

    assert preflight._preflight(as_factory(plain), [fetch]) == (frozenset(), "missing", [])


def test_the_preflight_refuses_a_factory_that_builds_with_its_own_tools() -> None:
    def own(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        return build_react_graph(model, [third, fetch], policy=policy)

    with pytest.raises(ToolstopConfigError) as error:
        preflight._preflight(as_factory(own, name="acme:own"), [fetch, third])
    assert str(error.value) == (
        "--agent acme:own builds with its own tools (third, fetch) instead of the `tools` it is "
        "given: the check would run your real tools; build the agent from the `tools` argument"
    )
    with pytest.raises(ToolstopConfigError, match="builds with its own tools"):
        check_agent(as_factory(own, name="acme:own"), [fetch, third])


def test_the_preflight_of_an_agent_that_is_not_a_graph_says_it_cannot_see_its_tools() -> None:
    from langchain_core.runnables import RunnableLambda

    def runnable(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        return RunnableLambda(lambda x: x)

    assert preflight._preflight(as_factory(runnable), [fetch]) == (
        frozenset(),
        "",
        [
            "your agent is a RunnableLambda, not a compiled LangGraph graph: the check cannot "
            "see its nodes, so it cannot tell whether it runs the tools it is given"
        ],
    )
    assert preflight._preflight(as_factory(graph_agent), [fetch]) == (frozenset(), "", [])


@needs_middleware
def test_an_async_only_agent_is_checked_through_astream() -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware

    from toolstop import StopOnArtifact

    class Audit(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    def async_only(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        return create_agent(model, tools, middleware=[Audit(), StopOnArtifact(policy)])

    check = check_agent(async_only, [fetch], scenarios=["success", "step-budget"])
    check.assert_passed()
    assert [r.scenario.key for r in check.results] == [
        "success@fetch.hard",
        "success@fetch.polish",
        "success@fetch.never",
        "step-budget@fetch.hard",
    ]


@needs_middleware
def test_a_create_agent_without_stoponartifact_gets_the_hint() -> None:
    from langchain.agents import create_agent

    def plain(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        return create_agent(model, tools)

    [fatal] = check_agent(plain, [fetch], scenarios=["fatal@fetch.hard"]).results
    assert fatal.breaches[0].endswith(preflight._CALLED_AGAIN_HINT)


@needs_middleware
def test_the_checks_middleware_runs_next_to_the_agents_own() -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelCallLimitMiddleware, ToolRetryMiddleware

    from toolstop import StopOnArtifact

    def with_middleware(
        model: Any, tools: list[BaseTool], policy: StopPolicy, middleware: Any = ()
    ) -> Any:
        own = [ModelCallLimitMiddleware(run_limit=9), ToolRetryMiddleware(max_retries=0)]
        return create_agent(model, tools, middleware=[*middleware, *own, StopOnArtifact(policy)])

    check = check_agent(
        with_middleware, [fetch], scenarios=["limit-after-retry", "review-edit", "limit-run"]
    )
    check.assert_passed()
    assert [r.scenario.key for r in check.results] == [
        "limit-run@fetch.hard",
        "limit-after-retry@fetch.hard",
        "review-edit@fetch.hard",
    ]
    assert check.skipped == {
        "nothing-found": "it runs toolstop's own example search tool",
        **{k: v for k, v in check.skipped.items() if k.startswith("parallel")},
    }


# -- added for the survivors of the first mutation run ------------------------------------------
def test_a_scenarios_own_recursion_limit_is_kept() -> None:
    base = Scenario(
        name="limited",
        description="d",
        tools=list,
        script=(call("lookup"),),
        stops=True,
        recursion_limit=9,
    )
    made = engine._retarget(base, {"lookup": fetch}, [fetch], ARGS, {"lookup": (DONE,)}, "x")
    assert made.recursion_limit == 9


def test_the_agents_own_middleware_reaches_the_checks_limit() -> None:
    pytest.importorskip("langchain.agents")
    from langchain.agents.middleware import ModelCallLimitMiddleware

    own = frozenset({"ModelCallLimitMiddleware"})
    found, _ = agent_scenarios([fetch], own=own)
    limit = next(s for s, _ in found if s.name == "limit-run@fetch")
    [counted] = limit.middleware()  # type: ignore[misc]
    assert type(counted).after_model is engine._skip_hook
    found, _ = agent_scenarios([fetch])
    limit = next(s for s, _ in found if s.name == "limit-run@fetch")
    [counting] = limit.middleware()  # type: ignore[misc]
    assert type(counting).after_model is ModelCallLimitMiddleware.after_model


def test_two_tools_run_the_parallel_scenarios() -> None:
    found, skipped = agent_scenarios([lookup, fetch], middleware=False)
    assert "parallel-any-stop-first" not in skipped
    names = {s.name for s, _ in found}
    assert {"parallel-any-stop-first", "parallel-across-turns", "parallel-all-stop-last"} <= names


def test_only_the_run_raised_breach_gets_the_tool_exception_hint() -> None:
    base = SCENARIOS["tool-exception.hard"]
    raised = {"error": "RuntimeError: backend exploded", "waiting_for": "Own"}
    waiting, said = engine._run_breaches(base, base, raised, 0)
    assert not waiting.endswith(engine._RAISED_HINT)
    assert waiting.startswith("the run was still waiting at a human-review interrupt from Own")
    assert said.endswith(engine._RAISED_HINT)


def test_only_the_missing_record_gets_the_not_toolstop_hint_and_the_policy_comes_first() -> None:
    unused = {**clean(), "script": {"steps": 2, "unused": 1}, "stop_record": None}
    first, second = engine._run_breaches(SUCCESS, SUCCESS, unused, 0)
    assert first == (
        "the run made fewer model calls than a correct router (1 scripted answers unused): it "
        "stopped where it should have gone back to the model"
    )
    assert second.endswith(engine._NOT_TOOLSTOP_HINT)
    ignored = {**clean(mode="never", parallel="any"), "script": {"steps": 2, "unused": 1}}
    breaches = engine._run_breaches(SUCCESS, SUCCESS, ignored, 1)
    assert breaches == [IGNORED, first]


def test_the_step_budget_skip_goes_on_with_the_next_scenario(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine._Runner, "step_budget_limit", lambda self, scenario: None)
    check = check_agent(graph_agent, [fetch], scenarios=["step-budget", "answer.hard"])
    assert [r.scenario.key for r in check.results] == ["answer@fetch.hard"]
    assert list(check.skipped)[-1] == "step-budget@fetch"


def test_goldens_in_a_relative_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    check = check_agent(graph_agent, [fetch], scenarios=["success@fetch.hard"])
    assert write_agent_goldens(check, "goldens") == [Path("goldens/success@fetch.hard.json")]
    golden = tmp_path / "goldens" / "success@fetch.hard.json"
    assert golden.exists()
    again = check_agent(graph_agent, [fetch], scenarios=["success@fetch.hard"], goldens="goldens")
    assert again.goldens == Path("goldens")
    again.assert_passed()
    data = json.loads(golden.read_text(encoding="utf-8"))
    data["stop_record"]["rule"] = "fatal"
    golden.write_text(json.dumps(data), encoding="utf-8")
    changed = check_agent(graph_agent, [fetch], scenarios=["success@fetch.hard"], goldens="goldens")
    assert not changed.passed
    assert write_agent_goldens(changed, "goldens") == [Path("goldens/success@fetch.hard.json")]
    assert json.loads(golden.read_text(encoding="utf-8"))["stop_record"]["rule"] == "completed"


def test_without_stoponartifact_importable_the_graph_tells_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "toolstop.middleware", None)
    assert preflight._stop_status(nodes_with(names=("model", "tools"))) == ""


def test_the_nodes_of_an_agent_that_is_not_a_graph_are_not_read() -> None:
    class NotAGraph:
        def __init__(self) -> None:
            self.nodes = {"Fake.before_model": SimpleNamespace()}

        def invoke(self, inputs: Any, config: Any = None) -> Any:
            return inputs

    def factory(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        return NotAGraph()

    names, stop, [note] = preflight._preflight(as_factory(factory), [fetch])
    assert (names, stop) == (frozenset(), "")
    assert note.startswith("your agent is a NotAGraph, not a compiled LangGraph graph")


def _tutorial_fallback(tools: list[BaseTool], status: str | None) -> Any:
    """The customer-support tutorial's `create_tool_node_with_fallback`; `status` as it sets it
    (the tutorial sets none)."""
    from langchain_core.messages import ToolMessage
    from langchain_core.runnables import RunnableLambda
    from langgraph.prebuilt import ToolNode

    def handle_tool_error(state: dict[str, Any]) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls
        extra = {"status": status} if status else {}
        return {
            "messages": [
                ToolMessage(f"Error: {state.get('error')!r}", tool_call_id=c["id"], **extra)
                for c in calls
            ]
        }

    return ToolNode(tools).with_fallbacks(
        [RunnableLambda(handle_tool_error)], exception_key="error"
    )


@pytest.mark.parametrize("status", [None, "error"])
def test_a_tool_that_keeps_raising_through_the_tutorials_fallback_ends_on_the_budget(
    status: str | None,
) -> None:
    def tutorial(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        return build_react_graph(model, _tutorial_fallback(tools, status), policy=policy)

    check = check_agent(tutorial, [fetch], scenarios=["tool-raises-forever", "tool-exception"])
    check.assert_passed()
    [forever] = [r for r in check.results if r.scenario.name == "tool-raises-forever@fetch"]
    assert forever.actual["stop_record"]["rule"] == "retry_budget"


@needs_middleware
def test_an_error_handler_that_hides_the_exception_is_caught_with_a_hint() -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import ToolMessage

    from toolstop import StopOnArtifact

    class Swallow(AgentMiddleware):
        """A tool-error handler that builds a plain ToolMessage (no `status="error"`)."""

        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            try:
                return handler(request)
            except Exception as error:  # what the handler under test does
                return ToolMessage(f"Error: {error!r}", tool_call_id=request.tool_call["id"])

    def hiding(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        return create_agent(model, tools, middleware=[Swallow(), StopOnArtifact(policy)])

    [run] = check_agent(hiding, [fetch], scenarios=["tool-raises-forever"]).results
    assert not run.passed
    assert run.breaches[0].endswith(engine._HIDDEN_ERROR_HINT)
    assert "ScriptExhaustedError" in run.breaches[0]


def test_a_wrong_rule_on_a_raising_scenario_says_the_exception_was_hidden() -> None:
    from toolstop._check.harness import load_golden

    base = SCENARIOS["tool-raises-forever.hard"]
    golden = load_golden(base, "graph")
    assert golden is not None
    hidden = {
        **golden,
        "tool_results": [{"tool": "lookup", "signal": "invalid:unsignalled"}] * 4,
        "stop_record": {**golden["stop_record"], "rule": "step_budget"},
    }
    said = (
        "the stop record's rule is 'step_budget'; toolstop's own router records 'retry_budget' "
        "on this scenario"
    )
    assert said + engine._HIDDEN_ERROR_HINT in engine._run_breaches(base, base, hidden, 1)
    shown = {**hidden, "tool_results": golden["tool_results"]}
    assert said in engine._run_breaches(base, base, shown, 1)
    other = SCENARIOS["invalid-signals.hard"]  # forces a result without a signal: no hint
    assert not any(
        b.endswith(engine._HIDDEN_ERROR_HINT) for b in engine._run_breaches(other, other, hidden, 1)
    )


def test_an_async_def_tool_gets_an_async_only_stand_in() -> None:
    import asyncio

    from toolstop.testing.stand_ins import stand_in

    @tool(response_format="content_and_artifact")
    async def afetch(n: int) -> tuple[str, dict[str, Any]]:
        """Fetch a numbered page, in async code."""
        return "page", signal(Outcome.COMPLETED)

    double = stand_in(afetch, DONE)
    with pytest.raises(NotImplementedError):
        double.invoke({"n": 1})
    assert asyncio.run(double.ainvoke({"n": 1})) == DONE[0]
    assert stand_in(fetch, DONE).invoke({"n": 1}) == DONE[0]  # a sync tool stays sync


@needs_middleware
def test_an_agent_with_an_async_def_tool_is_checked_through_astream_from_the_first_run() -> None:
    """Even when its error handler turns the sync failure into a message (the docs' first
    `error_text` did): the check knows from the tools, not from the failure."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware, ToolRetryMiddleware

    from toolstop import StopOnArtifact

    @tool(response_format="content_and_artifact")
    async def afetch(n: int) -> tuple[str, dict[str, Any]]:
        """Fetch a numbered page, in async code."""
        return "page", signal(Outcome.COMPLETED)

    seen: list[str] = []

    class Seen(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            seen.append("sync")
            return handler(request)

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            seen.append("async")
            return await handler(request)

    def agent(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        swallow = ToolRetryMiddleware(max_retries=0, on_failure=lambda error: f"Error: {error!r}")
        return create_agent(model, tools, middleware=[Seen(), swallow, StopOnArtifact(policy)])

    check = check_agent(agent, [afetch], scenarios=["success@afetch.hard"])
    check.assert_passed()
    assert set(seen) == {"async"}  # every model call, none through the sync hook
