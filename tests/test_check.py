"""`toolstop check`: the goldens match a fresh run, and broken routers are caught and explained."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from routers import CHECK_ROUTERS
from toolstop._check import harness
from toolstop._check.harness import check, load_golden, run_scenario
from toolstop._check.routers import GRAPH, Router, available_routers
from toolstop._check.scenarios import SCENARIOS, scenario_matrix
from toolstop.cli import main

pytestmark = pytest.mark.contract


def test_committed_goldens_match_a_fresh_run_on_this_stack() -> None:
    results = check(scenario_matrix(), available_routers())
    breaches = [f"{r.scenario.key} on {r.router}: {b}" for r in results for b in r.breaches]
    assert breaches == []
    routers = available_routers()
    everywhere = [s for s in scenario_matrix() if s.middleware is None]
    with_middleware = [s for s in scenario_matrix() if s.middleware is not None]
    takes = [r for r in routers if r.takes_middleware]
    assert with_middleware  # the limit and human-review scenarios
    assert len(results) == len(everywhere) * len(routers) + len(with_middleware) * len(takes)


def test_the_matrix_covers_what_the_issue_asks_for() -> None:
    names = {s.name for s in scenario_matrix()}
    for wanted in [
        "success", "retryable-then-success", "fatal", "policy-block", "nothing-found",
        "transient-forever", "step-budget", "invalid-signals", "injected-control-text",
        "tool-exception",
    ]:  # fmt: skip
        assert wanted in names
    for parallel in ("all", "any", "first", "priority"):
        assert {f"parallel-{parallel}-stop-first", f"parallel-{parallel}-stop-last"} <= names
    assert {s.mode for s in scenario_matrix()} == {"hard", "polish", "never"}
    # langchain's own middleware next to StopOnArtifact: call limits, each human decision
    assert {"limit-run", "limit-after-retry"} <= names
    assert {f"review-{d}" for d in ("approve", "edit", "reject")} <= names
    from toolstop._check.scenarios import _review_decisions

    assert ("review-respond" in names) == ("respond" in _review_decisions())  # langchain 1.2.18


def test_goldens_are_readable_json_with_the_run_in_them() -> None:
    golden = load_golden(SCENARIOS["retryable-then-success.hard"], "graph")
    assert golden is not None
    assert golden["path"] == ["agent", "tools", "agent", "tools", "finalize"]
    assert golden["stop_record"]["rule"] == "completed"
    assert golden["model_calls"][1]["saw"] == ["human", "ai[lookup]", "tool[lookup]"]


# -- deliberately broken routers -------------------------------------------------------------
def _static_return_direct(model: Any, tools: Any, *, policy: Any, checkpointer: Any) -> Any:
    """The regression a refactor might bring back: langgraph's agent with return_direct tools."""
    for tool in tools:
        tool.return_direct = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, tools)


STATIC = Router(
    name="static-return-direct",
    build=_static_return_direct,
    model_node="agent",
    stop_node="tools",
    polish_node="agent",
)


def _relay_in_update(model: Any, tools: Any, *, policy: Any, checkpointer: Any) -> Any:
    """A broken router: the relay added in the same update as the tool result."""
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.types import Command

    class RelayInUpdate(AgentMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            result = handler(request)
            artifact = getattr(result, "artifact", None)
            if (
                isinstance(result, ToolMessage)
                and isinstance(artifact, dict)
                and artifact.get("stop")
            ):
                relay = AIMessage(content=str(result.content))
                return Command(update={"messages": [result, relay]})
            return result

    return create_agent(model, tools, middleware=[RelayInUpdate()])


RELAY_IN_UPDATE = Router(
    name="relay-in-update",
    build=_relay_in_update,
    model_node="model",
    stop_node="model",
    polish_node="model",
)


def test_harness_catches_a_reintroduced_return_direct() -> None:
    scenarios = [SCENARIOS["success.hard"], SCENARIOS["retryable-then-success.hard"]]
    results = check(scenarios, [STATIC], golden_for={STATIC.name: "legacy"})
    assert not any(r.passed for r in results)
    text = " ".join(b for r in results for b in r.breaches)
    assert "the stop came from return_direct, not from the artifact" in text
    # a transient failure ended the run: fewer model calls than a correct router
    assert "stopped where it should have gone back to the model" in text


def test_harness_catches_a_relay_that_hides_the_tool_calling_message() -> None:
    pytest.importorskip("langchain.agents")
    results = check(
        [SCENARIOS["success.hard"]],
        [RELAY_IN_UPDATE],
        golden_for={RELAY_IN_UPDATE.name: "middleware"},
    )
    assert not results[0].passed
    text = " ".join(results[0].breaches)
    assert "hides the tool-calling AIMessage from the stop check" in text
    assert "called more often than a correct router" in text


def test_a_changed_golden_is_reported_as_a_breach(tmp_path: Path) -> None:
    scenario = SCENARIOS["fatal.hard"]
    transcript = run_scenario(scenario, GRAPH)
    transcript["path"] = ["agent", "tools", "agent"]
    transcript["stop_record"]["rule"] = "completed"
    harness.write_golden(transcript, scenario, "graph", tmp_path)
    results = check([scenario], [GRAPH], directory=tmp_path)
    text = " ".join(results[0].breaches)
    assert "expected path agent > tools > agent, got agent > tools > finalize" in text
    assert "rule 'completed' expected, 'fatal' recorded" in text


# -- the command line ------------------------------------------------------------------------
def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["check", *argv], out=out), out.getvalue()


def test_cli_table_and_summary() -> None:
    code, text = cli("--scenario", "success", "--router", "graph")
    assert code == 0
    lines = text.splitlines()
    # found by its content: stacks without the middleware router print a "skipped" line above it
    header = next(line for line in lines if line.startswith("scenario"))
    assert header.split() == ["scenario", "router", "calls", "result", "path"]
    assert "success.hard" in text
    assert "agent>tools>finalize" in text
    assert "3 passed, 0 failed" in lines  # then: none of your tools was called


# the longest paths of each router (hooks of several middleware, a run of retries)
LONG = ["review-edit", "limit-after-retry", "transient-forever", "success"]


@pytest.mark.parametrize("columns", [100, 80])
def test_cli_table_fits_the_terminal(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, text = cli(*(arg for name in LONG for arg in ("--scenario", name)))
    assert code == 0, text
    too_wide = [line for line in text.splitlines() if len(line) > columns]
    assert too_wide == []
    # a wrapped path continues under the path column and loses no step
    runs = {r.scenario.key: r for r in check([SCENARIOS["transient-forever.hard"]], [GRAPH])}
    path = ">".join(runs["transient-forever.hard"].actual["path"])
    at = text.index("transient-forever.hard")
    block = text[at : text.index("\n", text.index("finalize", at))]
    steps = "".join(line.split("  ")[-1].strip() for line in block.splitlines())
    assert steps == path


def test_a_long_step_breaks_after_its_dot_not_mid_word() -> None:
    from toolstop.cli.check import _wrap_path

    assert _wrap_path("model>tools>model>StopOnArtifact.after_agent", 24) == [
        "model>tools>model>",
        "StopOnArtifact.",
        "after_agent",
    ]
    assert _wrap_path("model>CountCallsMiddleware.before_model", 24) == [
        "model>",
        "CountCalls.before_model",
    ]


def test_cli_table_shows_both_paths_on_a_breach(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    scenario = SCENARIOS["fatal.hard"]
    transcript = run_scenario(scenario, GRAPH)
    transcript["path"] = ["agent", "tools", "agent"]
    harness.write_golden(transcript, scenario, "graph", tmp_path)
    monkeypatch.setattr(harness, "goldens_dir", lambda: tmp_path)
    monkeypatch.setenv("COLUMNS", "100")  # a terminal: the paths on lines of their own
    code, text = cli("--scenario", "fatal.hard", "--router", "graph")
    assert code == 1
    row = next(i for i, line in enumerate(text.splitlines()) if line.startswith("fatal.hard"))
    first, second = text.splitlines()[row : row + 2]
    assert first.split()[-3:] == ["FAIL", "expected", "agent>tools>agent"]
    assert second.split() == ["actual", "agent>tools>finalize"]
    monkeypatch.delenv("COLUMNS")  # a CI log: one line per scenario
    code, text = cli("--scenario", "fatal.hard", "--router", "graph")
    (row,) = [line for line in text.splitlines() if line.startswith("fatal.hard")]
    assert row.split()[-4:] == ["expected", "agent>tools>agent;", "actual", "agent>tools>finalize"]


def test_cli_json() -> None:
    code, text = cli("--scenario", "fatal.hard", "--json")
    document = json.loads(text)
    assert code == 0
    assert document["failed"] == 0
    assert {r["router"] for r in document["results"]} == set(CHECK_ROUTERS)
    assert document["versions"]["langgraph"]


def test_cli_exits_non_zero_and_explains_a_breach(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    scenario = SCENARIOS["success.hard"]
    transcript = run_scenario(scenario, GRAPH)
    transcript["model_calls"] = transcript["model_calls"] * 2
    harness.write_golden(transcript, scenario, "graph", tmp_path)
    monkeypatch.setattr(harness, "goldens_dir", lambda: tmp_path)
    code, text = cli("--scenario", "success.hard", "--router", "graph")
    assert code == 1
    assert "expected 2 model calls, got 1 (a missing model call: the run stopped too early)" in text
    assert "0 passed, 1 failed" in text.splitlines()


def test_cli_update_goldens_writes_then_matches(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(harness, "goldens_dir", lambda: tmp_path)
    code, text = cli("--scenario", "success", "--router", "graph")
    assert code == 1  # no goldens there yet
    assert "no golden transcript" in text
    code, text = cli("--scenario", "success", "--router", "graph", "--update-goldens")
    assert code == 0
    assert sorted(p.name for p in (tmp_path / "graph").iterdir()) == [
        "success.hard.json", "success.never.json", "success.polish.json",
    ]  # fmt: skip
    assert cli("--scenario", "success", "--router", "graph")[0] == 0


def test_cli_update_goldens_refuses_a_run_that_breaks_an_invariant(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from toolstop._check.routers import ROUTERS

    monkeypatch.setattr(harness, "goldens_dir", lambda: tmp_path)
    broken = Router(
        name="graph",
        build=_static_return_direct,
        model_node="agent",
        stop_node="tools",
        polish_node="agent",
    )
    monkeypatch.setitem(ROUTERS, "graph", broken)  # a regression in the graph router
    code, text = cli("--scenario", "success.hard", "--router", "graph", "--update-goldens")
    assert code == 1
    assert "the stop came from return_direct, not from the artifact" in text
    assert text.splitlines()[-1] == "refused: 1 runs break an invariant; no golden was written"
    assert list(tmp_path.iterdir()) == []


def test_cli_rejects_unknown_scenarios_and_missing_keys(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("--scenario", "nope")[0] == 2
    assert "unknown scenario" in capsys.readouterr().err
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    assert cli("--model", "groq:llama-3.3-70b-versatile")[0] == 2
    err = capsys.readouterr().err
    assert "GROQ_API_KEY is not set" in err
    assert "Traceback" not in err


def test_update_goldens_into_a_folder_that_cannot_be_written_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(harness, "goldens_dir", lambda: Path("/proc/toolstop-goldens"))
    code, _ = cli("--scenario", "success.hard", "--router", "graph", "--update-goldens")
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("toolstop check: cannot write /proc/toolstop-goldens")
    assert len(err.splitlines()) == 1


def test_without_pydantic_ai_check_skips_its_router_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import toolstop.cli.check

    why = "Pydantic AI is not installed (simulated): pip install 'toolstop[pydantic-ai]'"
    monkeypatch.setattr(toolstop.cli.check, "pydantic_ai_unavailable", lambda: why)
    code, text = cli("--scenario", "success.hard")
    assert code == 0, text
    assert f"skipped the pydantic_ai router: {why}" in " ".join(text.split())
    assert " pydantic_ai " not in text.replace("the pydantic_ai router", "")
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    assert main(["check", "--router", "pydantic_ai"], out=out) == 2
    assert err.getvalue().strip() == f"toolstop check --router pydantic_ai: {why}"


def test_a_ci_log_elides_the_middle_of_a_long_path() -> None:
    from toolstop.cli.check import _elide

    steps = [f"Step{i}Middleware.before_model" for i in range(10)]
    short = _elide(">".join(steps), 60)
    assert short == "Step0.before_model>...8 nodes...>Step9.before_model"
    assert _elide(">".join(steps), 90) == (  # the last nodes first: where the run ended
        "Step0.before_model>Step1.before_model>...6 nodes...>Step8.before_model>Step9.before_model"
    )
    assert _elide("agent>tools>finalize", 60) == "agent>tools>finalize"
