"""Shadow mode at several levels: the `never`-mode report's `would_save` is what hard mode saves.

Before, a sub-agent in `never` mode forwarded `stop: false` (its model answered), so its parent
recorded no would-stop and its restating calls were never counted: the report said 1 model call
saved where hard mode saves 2 (`subagent_tool`, Deep Agents' `task`). Expected figures come from
the scripted models' call logs, never from the records.

Also `explain` on these runs: a `subagent_tool` worker's level is its name (before: `tools`, the
parent's node that runs it), and a Deep Agents main agent, whose `messages` are a delta channel,
says why its turns are not shown (before: "not readable from the checkpoint", no reason).
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:  # a create_agent parent and StopOnArtifact at each level
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage

from toolstop import StopOnArtifact, StopPolicy, signal, subagent_tool
from toolstop.cli import main
from toolstop.testing import ScriptedChatModel, call, forced_tool

sqlite_saver = pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
pytest.importorskip("matplotlib", reason="the report chart needs the `bench` extra")

pytestmark = pytest.mark.multiagent

QUESTION = {"messages": [HumanMessage("When is my refund due?")]}


def _search() -> Any:
    return forced_tool("search", ("Refunds take 5 days.", signal("completed")))


def _model(first: Any, hard: bool, answer: str) -> ScriptedChatModel:
    return ScriptedChatModel([first] if hard else [first, answer])


def as_subagent_tool(hard: bool, saver: Any) -> tuple[Any, list[ScriptedChatModel]]:
    policy = StopPolicy(mode="hard" if hard else "never")
    inner = _model(call("search"), hard, "It takes 5 days.")
    worker = create_agent(inner, [_search()], middleware=[StopOnArtifact(policy)])
    top = _model(call("worker", request="q"), hard, "Five days.")
    tool_ = subagent_tool(worker, name="worker", description="Refund questions.")
    agent = create_agent(top, [tool_], middleware=[StopOnArtifact(policy)], checkpointer=saver)
    return agent, [top, inner]


def deep_agents(hard: bool, saver: Any) -> tuple[Any, list[ScriptedChatModel]]:
    from deepagents import create_deep_agent

    policy = StopPolicy(mode="hard" if hard else "never")
    top = _model(call("task", description="refund?", subagent_type="worker"), hard, "Five days.")
    inner = _model(call("search"), hard, "It takes 5 days.")
    spec = {
        "name": "worker",
        "description": "Refund questions.",
        "system_prompt": "Use search.",
        "tools": [_search()],
        "model": inner,
        "middleware": [StopOnArtifact(policy)],
    }
    agent = create_deep_agent(
        model=top,
        tools=[],
        middleware=[StopOnArtifact(policy)],
        subagents=[spec],  # type: ignore[list-item]
        checkpointer=saver,
    )
    return agent, [top, inner]


PATTERNS: dict[str, Callable[[bool, Any], tuple[Any, list[ScriptedChatModel]]]] = {
    "subagent_tool": as_subagent_tool,
    "deep_agents": deep_agents,
}


def _run(pattern: str, hard: bool, tmp_path: Path) -> tuple[int, dict[str, Any], Any]:
    """Model calls made (every level), the report of the run, and the top level's state."""
    path = str(tmp_path / f"{pattern}-{hard}.db")
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        agent, models = PATTERNS[pattern](hard, sqlite_saver.SqliteSaver(conn))
        state = agent.invoke(QUESTION, {"configurable": {"thread_id": "t"}})
    finally:
        conn.close()
    for model in models:
        model.assert_complete()
    out = io.StringIO()
    out_dir = tmp_path / f"rep-{pattern}-{hard}"
    assert main(["report", "--db", path, "--out", str(out_dir)], out=out) == 0, out.getvalue()
    document = json.loads((out_dir / "report.json").read_text())
    return sum(len(m.calls) for m in models), document, state


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_the_never_mode_report_counts_what_hard_mode_saves(pattern: str, tmp_path: Path) -> None:
    hard_calls, _, _ = _run(pattern, True, tmp_path)
    never_calls, document, state = _run(pattern, False, tmp_path)
    assert never_calls - hard_calls == 2  # one restating call per level
    assert document["would_save"]["model_calls"] == never_calls - hard_calls
    assert document["would_save"]["runs"] == 2
    # the top level's own record: a would-stop on the sub-agent, its one restating call
    record = state["stop_record"]
    assert (record["would_stop"], record["stopped"]) == ("completed", False)
    assert record["would_save"]["model_calls"] == 1
    # the user's answer is the top model's, as in any never-mode run
    assert state["messages"][-1].content == "Five days."
    [result] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert result.artifact["stop"] is False
    assert result.artifact["subagent_would_stop"] is True


def test_explain_says_why_a_deep_agents_main_agent_has_no_turns(tmp_path: Path) -> None:
    _run("deep_agents", False, tmp_path)
    out = io.StringIO()
    path = str(tmp_path / "deep_agents-False.db")
    assert main(["explain", "t", "--db", path], out=out) == 0
    text = out.getvalue()
    top = text.split("\nrun 2 ")[1]  # the main agent's run ends after its subagent's
    assert "turns: not readable from the checkpoint (its messages are kept as deltas" in top
    worker = text.split("\nrun 1 ")[1].split("\nrun 2 ")[0]
    assert "turn 1: search" in worker
    assert "not readable" not in worker


def test_explain_labels_a_subagent_tool_worker_with_its_name(tmp_path: Path) -> None:
    _run("subagent_tool", False, tmp_path)
    out = io.StringIO()
    path = str(tmp_path / "subagent_tool-False.db")
    assert main(["explain", "t", "--db", path], out=out) == 0
    heads = [line for line in out.getvalue().splitlines() if line.startswith("run ")]
    assert len(heads) == 2
    assert heads[0].startswith("run 1 (level worker; namespace 'tools:")
    assert heads[1].startswith("run 2 (its run 1)")  # the top level: no level label
