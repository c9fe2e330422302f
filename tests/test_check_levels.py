"""`check_agent` (`toolstop check --agent`) on a parent graph whose node is the toolstop agent:
a compiled `build_react_graph` or `create_agent` + StopOnArtifact, added to a plain LangGraph
`StateGraph` as a subgraph node.

Before the check looked inside subgraph nodes, every run of such a parent broke ("no stop_record
in the final state: the router is not toolstop's", 0 of 56 passed), and the check's own review
interrupt, raised inside the node, was approved as the user's own review. Here each run of the
parent is held to the same results as the same agent checked on its own, and the model calls
each run makes are the scenario's scripted answers (what a correct router spends).
"""

from __future__ import annotations

from typing import Any

import pytest

from levels import fetch, hand_built, hand_built_in_a_parent, lookup, parent_of
from toolstop import build_react_graph
from toolstop._check import preflight
from toolstop._check.factory import as_factory
from toolstop.testing import check_agent

SCENARIOS = [
    "success",
    "retryable-then-success",
    "fatal",
    "transient-forever",
    "parallel-any-stop-first",
    "parallel-all-stop-last",
]


def calls_by_run(check: Any) -> dict[str, int]:
    return {r.scenario.key: len(r.actual.get("model_calls") or []) for r in check.results}


def test_a_hand_built_agent_in_a_parent_graph_is_checked_where_its_router_is() -> None:
    alone = check_agent(hand_built, [fetch, lookup], scenarios=SCENARIOS)
    nested = check_agent(hand_built_in_a_parent, [fetch, lookup], scenarios=SCENARIOS)
    assert alone.passed, alone.breaches
    assert nested.passed, nested.breaches
    # 3 one-tool scenarios in 3 modes and 1 in hard mode, each on both tools; 2 parallel ones
    assert len(nested.results) == len(alone.results) == (3 * 3 + 1) * 2 + 2
    scripted = {r.scenario.key: len(r.scenario.script) for r in nested.results}
    assert calls_by_run(nested) == calls_by_run(alone) == scripted
    records = [r.actual["stop_record"]["rule"] for r in nested.results]
    assert records == [r.actual["stop_record"]["rule"] for r in alone.results]


def test_the_check_reads_the_graph_inside_a_subgraph_node() -> None:
    pytest.importorskip("langchain.agents", reason="needs langchain's create_agent")
    from langchain.agents import create_agent

    def without_stop(model: Any, tools: list[Any], policy: Any) -> Any:
        return parent_of(create_agent(model, tools))

    def with_own_tools(model: Any, tools: list[Any], policy: Any) -> Any:
        return parent_of(build_react_graph(model, [fetch], policy=policy))

    assert preflight._preflight(as_factory(without_stop), [fetch])[1] == "missing"
    assert preflight._preflight(as_factory(hand_built_in_a_parent), [fetch])[1] == ""
    with pytest.raises(Exception, match="builds with its own tools \\(fetch\\)"):
        preflight._preflight(as_factory(with_own_tools), [fetch])


def test_the_checks_review_inside_a_parent_graph_is_the_checks_not_yours() -> None:
    pytest.importorskip("langchain.agents", reason="needs langchain's create_agent")
    from langchain.agents import create_agent

    from toolstop import StopOnArtifact

    def agent(model: Any, tools: list[Any], policy: Any, middleware: Any = ()) -> Any:
        return create_agent(model, tools, middleware=[*middleware, StopOnArtifact(policy)])

    def in_a_parent(model: Any, tools: list[Any], policy: Any, middleware: Any = ()) -> Any:
        return parent_of(agent(model, tools, policy, middleware))

    reviews = ["review-approve", "review-edit", "review-reject", "review-respond"]
    alone = check_agent(agent, [fetch], scenarios=reviews)
    nested = check_agent(in_a_parent, [fetch], scenarios=reviews)
    assert len(nested.results) == 4
    assert nested.passed, nested.breaches
    assert alone.passed, alone.breaches
    # the scenario's decisions answered the check's own review: no run was paused by "yours"
    assert [r.actual.get("interrupts") for r in nested.results] == [None] * 4
    assert calls_by_run(nested) == calls_by_run(alone)
    assert calls_by_run(nested) == {r.scenario.key: len(r.scenario.script) for r in nested.results}


def test_a_supervisor_of_sub_agent_tools_is_refused_with_the_per_level_fix() -> None:
    # Before: the scripted model called fetch and lookup at the top, where only `worker`
    # exists; hard and polish runs breached against the router, never-mode runs passed.
    import io

    from toolstop.cli import main

    out = io.StringIO()
    argv = ["check", "--agent", "levels:supervisor_of_workers", "--tools", "levels:TOOLS"]
    assert main(argv, out=out) == 2, out.getvalue()
    # its own level checked with its own factory passes (the fix the refusal names)
    assert main(["check", "--agent", "levels:hand_built", "--tools", "levels:TOOLS"]) == 0


def test_the_refusal_names_the_missing_tools_and_the_per_level_fix() -> None:
    from levels import supervisor_of_workers
    from toolstop.errors import ToolstopConfigError
    from toolstop.testing import check_agent

    with pytest.raises(ToolstopConfigError) as raised:
        check_agent(supervisor_of_workers, [fetch, lookup], scenarios=["success"])
    text = str(raised.value)
    assert "does not offer fetch, lookup to its model (its tools: worker)" in text
    assert "a factory per level" in text
