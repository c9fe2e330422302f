"""`toolstop bench --agent` (`run_agent_bench`) on a parent graph whose node is the toolstop agent.

Before the bench looked into the parent's subgraphs, a parent whose node is the hand-built
agent measured "no toolstop router" (every run `unrouted`), and a parent that keeps only its
worker's last message (a supervisor's way) saw no tool result at all ("no tool result
signalled a stop"). The simulated model calls the tool closest to each question once; each
stand-in completes, so the expected calls per question are counted by hand.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import MessagesState

from levels import fetch, hand_built, hand_built_in_a_parent, lookup, parent_of
from toolstop import build_react_graph
from toolstop._check.factory import as_factory


def test_bench_measures_a_parent_graph_through_the_agent_inside_it() -> None:
    from toolstop.bench.agent import ToolPickingModel, run_agent_bench

    questions = ["Fetch page 2", "Look up a word"]

    def bench(factory: Any) -> dict[str, Any]:
        model = ToolPickingModel(tools=[fetch, lookup], latency_s=0)
        totals, errors = run_agent_bench(
            as_factory(factory), [fetch, lookup], questions, model=model
        )
        assert errors == []
        return {t.behaviour: t.as_dict() for t in totals}

    alone, nested = bench(hand_built), bench(hand_built_in_a_parent)
    # per question the simulated model calls the closest tool once, and it completes: the plain
    # loop answers after it (2 calls), hard relays it (1), polish narrates it (2)
    per_question = {"never": 2, "hard": 1, "polish": 2}
    for mode, calls in per_question.items():
        assert nested[mode]["model_calls"] == alone[mode]["model_calls"] == calls * len(questions)
        assert nested[mode]["unrouted"] == 0  # the router inside the node is found
        assert nested[mode]["rules"] == alone[mode]["rules"]
    assert nested["hard"]["rules"] == {"completed": len(questions)}
    assert nested["never"]["would_stop"] == len(questions)


def test_bench_counts_the_tool_results_of_a_worker_whose_parent_keeps_its_last_message() -> None:
    from toolstop.bench.agent import ToolPickingModel, run_agent_bench

    def supervised(model: Any, tools: list[Any], policy: Any) -> Any:
        # a supervisor's way with its worker: the parent keeps only the worker's last message
        worker = build_react_graph(model, tools, policy=policy)

        def ask_worker(state: MessagesState) -> dict[str, Any]:
            answer = worker.invoke({"messages": state["messages"]})
            return {"messages": [answer["messages"][-1]]}

        return parent_of(ask_worker)

    questions = ["Fetch page 2", "Look up a word", "Fetch page 3"]
    model = ToolPickingModel(tools=[fetch, lookup], latency_s=0)
    totals, errors = run_agent_bench(
        as_factory(supervised), [fetch, lookup], questions, model=model
    )
    assert errors == []
    by_mode = {t.behaviour: t.as_dict() for t in totals}
    for mode in ("never", "hard", "polish"):
        assert by_mode[mode]["tool_calls"] == len(questions)  # one call each, counted once
        assert by_mode[mode]["unrouted"] == 0
    assert by_mode["hard"]["rules"] == {"completed": len(questions)}
    assert by_mode["hard"]["model_calls"] == len(questions)
    assert by_mode["never"]["would_stop"] == len(questions)


def test_bench_refuses_a_supervisor_whose_model_cannot_call_the_tools(tmp_path: Any) -> None:
    # Before: every run's "fetch is not a valid tool" was reported as "the tool raised".
    import io

    from toolstop.cli import main

    questions = tmp_path / "q.txt"
    questions.write_text("Fetch page 2\n")
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "bench", "--agent", "levels:supervisor_of_workers", "--tools", "levels:TOOLS",
        "--questions", str(questions), "--out", str(tmp_path / "out"),
    ]  # fmt: skip
    from contextlib import redirect_stderr

    with redirect_stderr(err):
        code = main(argv, out=out)
    assert code == 2, out.getvalue() + err.getvalue()
    assert "does not offer fetch, lookup to its model" in err.getvalue()
    assert not (tmp_path / "out" / "bench.json").exists()
