"""Which langchain the middleware router runs on, and the clean refusal below it.

StopOnArtifact needs langchain 1.2.9 (`ExtendedModelResponse`); on 1.0.0 to 1.2.8 importing it
raises an ImportError that says so and `toolstop check` skips the middleware router with the
same sentence. The matrix runs these on langgraph 0.6 (no langchain), langchain 1.0.8 (too
old), 1.2.9 (the floor) and newer; the tests that simulate an old langchain run wherever a
new one is installed.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import sys
from typing import Any
from unittest.mock import ANY

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import interrupt

from routers import CHECK_ROUTERS, MIDDLEWARE_UNAVAILABLE
from toolstop._check.harness import check
from toolstop._check.routers import MIDDLEWARE, available_routers, has_agents
from toolstop._check.scenarios import scenario_matrix
from toolstop._compat import middleware_unavailable, prebuilt_mismatch
from toolstop.cli import main
from toolstop.testing import ScriptedChatModel, call

pytestmark = pytest.mark.contract


def _langchain() -> str | None:
    try:
        return importlib.metadata.version("langchain")
    except importlib.metadata.PackageNotFoundError:
        return None


def _run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _import_middleware_fresh(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delitem(sys.modules, "toolstop.middleware", raising=False)
    try:
        return importlib.import_module("toolstop.middleware")
    finally:  # never leave a half-imported module behind for the other tests
        monkeypatch.delitem(sys.modules, "toolstop.middleware", raising=False)


# -- on the installed stack ------------------------------------------------------------------


def test_the_installed_stack_either_runs_the_middleware_or_says_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run_cli(capsys, "check", "--scenario", "success")
    assert code == 0, out + err
    installed = _langchain()
    if MIDDLEWARE_UNAVAILABLE is None:
        assert " middleware " in out
        assert "skipped the middleware router" not in " ".join(out.split())
        return
    # refused: the sentence names the minimum and, when langchain is there, its version and why
    assert "langchain>=1.2.9" in MIDDLEWARE_UNAVAILABLE
    assert "toolstop[agents]" in MIDDLEWARE_UNAVAILABLE
    if installed is None:
        assert "not installed" in MIDDLEWARE_UNAVAILABLE
    else:
        assert f"langchain {installed} is installed" in MIDDLEWARE_UNAVAILABLE
        assert "ExtendedModelResponse" in MIDDLEWARE_UNAVAILABLE
    # the sentence is wrapped to the terminal's width
    assert f"skipped the middleware router: {MIDDLEWARE_UNAVAILABLE}" in " ".join(out.split())
    rows = [line.split()[1] for line in out.splitlines() if line.startswith("success.")]
    assert sorted(rows) == ["graph", "graph", "graph", "legacy", "legacy", "legacy"]
    with pytest.raises(ImportError) as raised:
        _import_middleware_fresh(monkeypatch)
    assert str(raised.value) == MIDDLEWARE_UNAVAILABLE


# -- an old langchain, simulated where a new one is installed -----------------------------------


@pytest.fixture
def langchain_1_2_8(monkeypatch: pytest.MonkeyPatch) -> str:
    """langchain as 1.2.8 has it: create_agent middleware without `ExtendedModelResponse`."""
    if MIDDLEWARE_UNAVAILABLE is not None:
        pytest.skip(f"simulates an old langchain on a new one; here: {MIDDLEWARE_UNAVAILABLE}")
    types = importlib.import_module("langchain.agents.middleware.types")
    monkeypatch.delattr(types, "ExtendedModelResponse")
    version = _langchain()
    assert version is not None
    return version


def test_below_1_2_9_importing_stop_on_artifact_says_the_minimum_and_why(
    langchain_1_2_8: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ImportError) as raised:
        _import_middleware_fresh(monkeypatch)
    message = str(raised.value)
    assert "StopOnArtifact needs langchain>=1.2.9" in message
    assert f"langchain {langchain_1_2_8} is installed" in message
    assert "ExtendedModelResponse" in message
    assert "pip install 'toolstop[agents]'" in message
    assert "build_react_graph" in message  # what runs instead
    assert not has_agents()
    assert MIDDLEWARE not in available_routers()


def test_below_1_2_9_check_skips_the_middleware_router_and_passes(
    langchain_1_2_8: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run_cli(capsys, "check", "--scenario", "success")
    assert code == 0, out + err
    why = middleware_unavailable()
    assert why is not None
    assert f"skipped the middleware router: {why}" in " ".join(out.split())  # wrapped to 100
    # success in three modes, on graph and legacy (and Pydantic AI where it is installed)
    langgraph_only = ["graph", "legacy"] + [r for r in CHECK_ROUTERS if r == "pydantic_ai"]
    assert f"{3 * len(langgraph_only)} passed, 0 failed" in out

    code, out, err = _run_cli(capsys, "check", "--scenario", "success.hard", "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["skipped"].pop("middleware") == why
    assert document["skipped"] == ({} if "pydantic_ai" in CHECK_ROUTERS else {"pydantic_ai": ANY})
    assert {r["router"] for r in document["results"]} == set(langgraph_only)

    code, out, err = _run_cli(capsys, "check", "--router", "middleware")
    assert code == 2
    assert err.strip() == f"toolstop check --router middleware: {why}"


# -- the test kit's fallback for ToolErrorMiddleware (langchain < 1.3.14) ---------------------


@pytest.fixture(params=["installed", "no-ToolErrorMiddleware"])
def tool_error_helper(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The kit's tool-error middleware as installed, and as langchain < 1.3.14 has it."""
    if MIDDLEWARE_UNAVAILABLE is not None:
        pytest.skip(MIDDLEWARE_UNAVAILABLE)
    middleware = importlib.import_module("langchain.agents.middleware")
    if request.param == "no-ToolErrorMiddleware":
        if hasattr(middleware, "ToolErrorMiddleware"):
            monkeypatch.delattr(middleware, "ToolErrorMiddleware")
        return "ToolRetryMiddleware"
    has_it = hasattr(middleware, "ToolErrorMiddleware")  # langchain >= 1.3.14
    return "ToolErrorMiddleware" if has_it else "ToolRetryMiddleware"


def test_a_tool_exception_goes_back_to_the_model_with_either_helper(
    tool_error_helper: str,
) -> None:
    from toolstop._check.routers import _tool_errors_to_model

    assert type(_tool_errors_to_model()).__name__ == tool_error_helper
    scenarios = [s for s in scenario_matrix() if s.key == "tool-exception.hard"]
    [result] = check(scenarios, [MIDDLEWARE])
    assert result.passed, result.breaches
    assert result.actual["tool_results"] == [{"tool": "lookup", "signal": "invalid:tool_error"}]


def test_a_tools_interrupt_is_not_turned_into_an_error_by_either_helper(
    tool_error_helper: str,
) -> None:
    # ToolRetryMiddleware below langchain 1.3.12 catches GraphInterrupt like any exception.
    @tool
    def approve(order: str = "") -> str:
        """Ask a human to approve an order."""
        return f"human said {interrupt('approve?')}"

    model = ScriptedChatModel([call("approve"), "done"])
    agent = MIDDLEWARE.build(model, [approve], policy=None, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "approve"}}
    state = agent.invoke({"messages": [HumanMessage("pay?")]}, config)
    assert "__interrupt__" in state, "the interrupt became an error message"
    assert len(model.calls) == 1  # the model has not seen an error in place of the human
    assert not any(getattr(m, "status", None) == "error" for m in state["messages"])


# -- langgraph 1.0 with langgraph-prebuilt >= 1.0.9 ---------------------------------------------


def test_the_broken_prebuilt_pair_is_named_with_its_pin() -> None:
    error = ImportError("cannot import name 'ExecutionInfo' from 'langgraph.runtime'")
    message = prebuilt_mismatch(error)
    assert f"langgraph {importlib.metadata.version('langgraph')}" in message
    assert "pip install 'langgraph-prebuilt<1.0.9'" in message
    assert "ExecutionInfo" in message
    other = prebuilt_mismatch(ImportError("no module named foo"))
    assert "no module named foo" in other
    assert "1.0.9" not in other  # no advice for a cause it does not know
