"""`toolstop check --agent`: the matrix through a user's own factory and stand-ins of its tools."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel, Field

from routers import MIDDLEWARE_UNAVAILABLE
from toolstop import Outcome, StopPolicy, build_react_graph, signal
from toolstop._check.agent import agent_scenarios, check_agent
from toolstop._check.factory import load_tools
from toolstop.cli import main
from toolstop.errors import ToolstopConfigError
from toolstop.testing.stand_ins import example_args, stand_in
from user_agent import SUPPORT_AGENT, in_folder, write_module

__all__ = ["in_folder"]  # the fixture, imported for pytest

pytestmark = pytest.mark.contract  # the check runs a user's agent on every stack of the matrix

needs_middleware = pytest.mark.skipif(
    MIDDLEWARE_UNAVAILABLE is not None, reason=f"the user's agent: {MIDDLEWARE_UNAVAILABLE}"
)


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["check", *argv], out=out), out.getvalue()


# -- arguments from a schema -------------------------------------------------------------------
class Address(BaseModel):
    city: str
    zip_code: str = Field(min_length=5, max_length=5)
    contact: str = Field(json_schema_extra={"format": "email"})


class Order(BaseModel):
    id: str = Field(examples=["o-77"])
    address: Address
    tags: list[Literal["gift", "fragile"]] = Field(min_length=2)


@tool
def everything(
    order: Order,
    speed: Literal["standard", "express"],
    copies: int = 1,
    weight: float = Field(gt=2.5, le=10),
    count: int = Field(ge=3),
    when: str | None = None,
    note: str | None = Field(default=None),
    flag: bool = False,
) -> str:
    """A tool with every common kind of argument."""
    return "ok"


def test_arguments_are_generated_from_every_common_schema_type() -> None:
    args = example_args(everything)
    assert args["order"] == {
        "id": "o-77",  # examples come first
        # maxLength, format
        "address": {"city": "example", "zip_code": "examp", "contact": "user@example.com"},
        "tags": ["gift", "gift"],  # minItems, enum
    }
    assert args["speed"] == "standard"
    assert "copies" not in args
    assert "when" not in args
    assert args["weight"] == 3.0
    assert args["count"] == 3
    everything.tool_call_schema.model_validate(args)  # type: ignore[union-attr]


def test_a_json_schema_tool_gets_arguments_too() -> None:
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 12},
            "depth": {"type": ["integer", "null"], "minimum": 2},
            "mode": {"enum": ["r", "w"]},
            "ids": {"type": "array", "items": {"$ref": "#/$defs/Id"}},
        },
        "required": ["path", "depth", "mode", "ids"],
        "$defs": {"Id": {"type": "integer", "exclusiveMinimum": 5}},
    }
    from langchain_core.tools import StructuredTool

    mcp_like = StructuredTool(
        name="read", description="Read a file.", args_schema=schema, func=lambda **kw: "x"
    )
    assert example_args(mcp_like) == {
        "path": "examplexxxxx",
        "depth": 2,
        "mode": "r",
        "ids": [6],
    }


def test_a_pattern_without_an_example_is_one_clear_error() -> None:
    @tool
    def by_sku(sku: str = Field(pattern=r"^SKU-\d{4}$")) -> str:
        """Find a product by SKU."""
        return sku

    with pytest.raises(ToolstopConfigError, match=r"tool 'by_sku': sku: .*examples="):
        example_args(by_sku)


def test_an_example_on_a_top_level_argument_is_used() -> None:
    """langchain's tool-call schema drops `examples`; the declared ones are found anyway."""

    class Booking(BaseModel):
        flight_id: str = Field(pattern=r"^FL-\d{3}$", examples=["FL-123"])

    @tool(args_schema=Booking)
    def book(flight_id: str) -> str:
        """Book a flight."""
        return flight_id

    @tool
    def by_default(flight_id: str = Field(pattern=r"^FL-\d{3}$", examples=["FL-124"])) -> str:
        """Book a flight."""
        return flight_id

    @tool
    def annotated(
        flight_id: Annotated[str, Field(pattern=r"^FL-\d{3}$", examples=["FL-125"])],
    ) -> str:
        """Book a flight."""
        return flight_id

    assert example_args(book) == {"flight_id": "FL-123"}
    assert example_args(by_default) == {"flight_id": "FL-124"}
    assert example_args(annotated) == {"flight_id": "FL-125"}


def test_a_stand_in_keeps_name_description_schema_and_forces_results() -> None:
    class Query(BaseModel):
        text: str

    @tool(args_schema=Query, return_direct=True)
    def lookup(text: str) -> str:
        """Look something up."""
        return "real"

    copy = stand_in(lookup, ("first", signal(Outcome.TRANSIENT)), ("then", signal("completed")))
    assert (copy.name, copy.description, copy.args_schema) == (
        "lookup",
        "Look something up.",
        Query,
    )
    assert copy.return_direct is True  # a static stop is kept, so the check catches it
    calls = [
        {"type": "tool_call", "name": "lookup", "args": {"text": "x"}, "id": str(i)}
        for i in range(3)
    ]
    assert [copy.invoke(c).content for c in calls] == ["first", "then", "then"]
    with pytest.raises(Exception, match="text"):  # the schema still validates
        copy.invoke({"type": "tool_call", "name": "lookup", "args": {}, "id": "4"})


# -- the check through a user's factory ---------------------------------------------------------
@tool(response_format="content_and_artifact")
def lookup(query: str) -> tuple[str, dict[str, Any]]:
    """Look something up."""
    return "found", signal(Outcome.COMPLETED)


def graph_agent(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
    return build_react_graph(model, tools, policy=policy, prompt="Be brief.")


def test_a_hand_built_graph_factory_with_one_tool_passes() -> None:
    result = check_agent(graph_agent, [lookup])
    result.assert_passed()
    names = {r.scenario.name for r in result.results}
    assert {"success@lookup", "invalid-signals", "step-budget@lookup"} <= names
    assert "parallel-any-stop-first" in result.skipped  # one tool: no parallel pair
    assert "review-approve" in result.skipped  # no middleware keyword
    assert "middleware" in result.skipped["review-approve"]
    # four invalid signals on one tool: split into consecutive turns, each back to the model
    invalid = next(r for r in result.results if r.scenario.name == "invalid-signals")
    assert [t["signal"] for t in invalid.actual["tool_results"]] == [
        "invalid:unsignalled",
        "invalid:stop_not_bool",
        "invalid:transient_with_stop",
        "invalid:near_miss_key",
    ]


def ignores_the_policy(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
    return build_react_graph(model, tools)  # always StopPolicy(): never and polish are lost


def test_a_factory_that_drops_the_policy_is_caught() -> None:
    result = check_agent(ignores_the_policy, [lookup], scenarios=["success"])
    failed = {r.scenario.key for r in result.results if not r.passed}
    assert failed == {"success@lookup.polish", "success@lookup.never"}
    with pytest.raises(AssertionError, match=r"success@lookup.never: .*rule is 'completed'"):
        result.assert_passed()
    never = next(r for r in result.results if r.scenario.key == "success@lookup.never")
    assert never.breaches[0].startswith(  # said first, in so many words
        "your factory ignores the policy it is given: the record says mode 'hard', parallel "
        "'all'; the check passed mode 'never', parallel 'all' (pass `policy` on"
    )


def test_unknown_scenarios_are_named() -> None:
    with pytest.raises(ToolstopConfigError, match="unknown scenario"):
        check_agent(graph_agent, [lookup], scenarios=["sucess"])


@needs_middleware
def test_check_agent_on_a_user_module(in_folder: Path) -> None:
    write_module(in_folder, "support", SUPPORT_AGENT)
    code, text = run("--agent", "support:make_agent", "--tools", "support:TOOLS")
    assert code == 0, text
    assert text.startswith(
        "toolstop check --agent support:make_agent (tools: order_status, refund)"
    )
    assert "skipped nothing-found: it runs toolstop's own example search tool" in text
    for row in (
        "success@order_status",
        "success@refund",
        "parallel-any-stop-first",
        "review-edit@refund",
        "limit-after-retry@order_status",
        "tool-exception@refund",
    ):
        assert f"\n{row}." in text  # the key: name.mode
    summary = next(line for line in text.splitlines() if line.endswith(" failed"))
    passed = int(summary.split()[0])
    assert summary == f"{passed} passed, 0 failed"
    assert passed >= 45


@needs_middleware
def test_breaches_of_a_user_agent_are_explained(in_folder: Path) -> None:
    write_module(in_folder, "support", SUPPORT_AGENT)
    write_module(
        in_folder,
        "broken",
        "from langchain.agents import create_agent\n"
        "from support import TOOLS, QuestionGuard\n"
        "from toolstop import StopOnArtifact\n"
        "def no_errors(model, tools, policy):\n"
        "    guard = QuestionGuard()\n"
        "    return create_agent(model, tools, middleware=[guard, StopOnArtifact(policy)])\n"
        "def plain(model, tools, policy):\n"
        "    return create_agent(model, tools)\n",
    )
    code, text = run(
        "--agent", "broken:no_errors", "--tools", "support:TOOLS", "--scenario", "tool-exception"
    )
    assert code == 1
    assert "backend exploded; a router must end every run cleanly (create_agent re-raises" in text
    assert "0 passed, 2 failed" in text.splitlines()
    code, text = run("--agent", "broken:plain", "--tools", "support:TOOLS", "--scenario", "success")
    assert code == 1
    assert (
        "no stop_record in the final state: the router is not toolstop's (add StopOnArtifact"
        in text
    )
    code, text = run("--agent", "broken:plain", "--tools", "support:TOOLS", "--scenario", "fatal")
    assert code == 1
    assert "ScriptExhaustedError" in text  # the model ran again after the fatal result
    assert "is StopOnArtifact(policy) in your create_agent middleware?" in text


@needs_middleware
def test_goldens_of_a_user_agent(in_folder: Path) -> None:
    write_module(in_folder, "support", SUPPORT_AGENT)
    agent = ["--agent", "support:make_agent", "--tools", "support:TOOLS"]
    goldens = in_folder / "goldens"
    code, text = run(*agent, "--goldens", str(goldens))  # none yet: each run says so
    assert code == 1
    assert "no golden transcript" in text
    code, text = run(*agent, "--goldens", str(goldens), "--update-goldens")
    assert code == 0, text
    written = sorted(p.name for p in goldens.iterdir())
    assert "success@order_status.hard.json" in written
    assert "invalid-signals.hard.json" in written
    golden = json.loads((goldens / "success@refund.polish.json").read_text())
    assert golden["router"] == "support:make_agent"
    assert golden["stop_record"]["rule"] == "completed"
    assert run(*agent, "--goldens", str(goldens))[0] == 0
    # the team adds a middleware: the paths change, and their CI says where
    source = SUPPORT_AGENT.replace(
        "QuestionGuard(),", "QuestionGuard(), ModelCallLimitMiddleware(run_limit=9),"
    )
    source = source.replace(
        "ToolRetryMiddleware\n", "ToolRetryMiddleware, ModelCallLimitMiddleware\n"
    )
    write_module(in_folder, "changed", source)
    changed = ["--agent", "changed:make_agent", "--tools", "changed:TOOLS"]
    code, text = run(*changed, "--goldens", str(goldens), "--scenario", "success")
    assert code == 1
    assert "expected path QuestionGuard.before_agent > model" in text
    assert "ModelCallLimitMiddleware.before_model" in text


@needs_middleware
def test_update_goldens_refuses_a_run_that_breaks_an_invariant(in_folder: Path) -> None:
    write_module(in_folder, "support", SUPPORT_AGENT)
    write_module(
        in_folder,
        "drops",
        "from langchain.agents import create_agent\n"
        "from toolstop import StopOnArtifact\n"
        "from support import ToolRetryMiddleware, error_text\n"
        "def make_agent(model, tools, policy):\n"
        "    retry = ToolRetryMiddleware(max_retries=0, on_failure=error_text)\n"
        "    return create_agent(model, tools, middleware=[retry, StopOnArtifact()])\n",
    )
    goldens = in_folder / "goldens"
    code, text = run(
        "--agent",
        "drops:make_agent",
        "--tools",
        "support:TOOLS",
        "--goldens",
        str(goldens),
        "--update-goldens",
    )
    assert code == 1
    assert "refused:" in text
    assert "no golden was written" in text
    assert not goldens.exists()


# -- usage and loading errors: one line, exit 2 -------------------------------------------------
BROKEN = {
    "factories": (
        "from toolstop import build_react_graph\n"
        "def two(model, tools):\n    return None\n"
        "def none(model, tools, policy):\n    return None\n"
        "def boom(model, tools, policy):\n    raise RuntimeError('no API key in the environment')\n"
        "NOT_A_FUNCTION = 3\n"
        "def ok(model, tools, policy):\n    return build_react_graph(model, tools, policy=policy)\n"
        "from tools_mod import TOOLS\n"
        "def own(model, tools, policy):\n"
        "    return build_react_graph(model, TOOLS, policy=policy)\n"
    ),
    "tools_mod": (
        "from langchain_core.tools import tool\n"
        "@tool\ndef one(query: str) -> str:\n    '''One.'''\n    return query\n"
        "def plain(query: str) -> str:\n    return query\n"
        "TOOLS = [one]\nMIXED = [one, plain]\nEMPTY = []\nTEXT = 'one'\nTWICE = [one, one]\n"
        "def get_tools():\n    return TOOLS\n"
    ),
    "syntax": "def make(:\n",
    "imports": "import not_installed_package_xyz\n",
}

CASES = [
    (["--agent", "nowhere:make", "--tools", "tools_mod:TOOLS"], "no module named 'nowhere'"),
    (["--agent", "factories", "--tools", "tools_mod:TOOLS"], "--agent takes MODULE:ATTR"),
    (
        ["--agent", "factories:missing", "--tools", "tools_mod:TOOLS"],
        "factories has no attribute 'missing'",
    ),
    (
        ["--agent", "factories:two", "--tools", "tools_mod:TOOLS"],
        "must take (model, tools, policy); its signature is (model, tools)",
    ),
    (
        ["--agent", "factories:NOT_A_FUNCTION", "--tools", "tools_mod:TOOLS"],
        "is a int, not a function",
    ),
    (
        ["--agent", "factories:none", "--tools", "tools_mod:TOOLS"],
        "returned NoneType, which has no invoke()",
    ),
    (
        ["--agent", "factories:boom", "--tools", "tools_mod:TOOLS"],
        "raised RuntimeError: no API key",
    ),
    (
        ["--agent", "syntax:make", "--tools", "tools_mod:TOOLS"],
        "importing syntax raised SyntaxError",
    ),
    (
        ["--agent", "imports:make", "--tools", "tools_mod:TOOLS"],
        "importing imports failed: No module named 'not_installed_package_xyz'",
    ),
    (
        ["--agent", "factories:ok", "--tools", "tools_mod:MIXED"],
        "item 1 (plain) is a function, not a LangChain tool (decorate it with @tool)",
    ),
    (["--agent", "factories:ok", "--tools", "tools_mod:EMPTY"], "is an empty list"),
    (
        ["--agent", "factories:ok", "--tools", "tools_mod:TEXT"],
        "is a str, not a list of LangChain tools",
    ),
    (["--agent", "factories:ok", "--tools", "tools_mod:TWICE"], "two tools share the name one"),
    (["--agent", "factories:ok"], "--agent MODULE:FACTORY and --tools MODULE:ATTR go together"),
    (
        ["--agent", "factories:own", "--tools", "tools_mod:TOOLS"],
        "builds with its own tools (one) instead of the `tools` it is given",
    ),
    (
        ["--agent", "factories.py:ok", "--tools", "tools_mod:TOOLS"],
        "takes a module name, not a file path: factories:ok",
    ),
    (
        ["--agent", "./factories.py:ok", "--tools", "tools_mod:TOOLS"],
        "takes a module name, not a file path: factories:ok, not ./factories.py:ok",
    ),
    (
        ["--agent", "/elsewhere/agents/factories.py:ok", "--tools", "tools_mod:TOOLS"],
        "not a file path (/elsewhere/agents/factories.py:ok); run toolstop from the folder",
    ),
    (
        ["--agent", "factories:ok", "--tools", "tools_mod:get_tools"],
        "is a function, not a list of LangChain tools (name a list in your module",
    ),
    (
        ["--agent", "factories:ok", "--tools", "tools_mod:TOOLS", "--model", "openai:x"],
        "--model does not apply to --agent",
    ),
    (
        ["--agent", "factories:ok", "--tools", "tools_mod:TOOLS", "--router", "graph"],
        "--router does not apply to --agent",
    ),
    (
        ["--agent", "factories:ok", "--tools", "tools_mod:TOOLS", "--update-goldens"],
        "needs --goldens DIR",
    ),
    (
        ["--agent", "factories:ok", "--tools", "tools_mod:TOOLS", "--scenario", "nope"],
        "unknown scenario ['nope']",
    ),
]


@pytest.mark.parametrize(("argv", "expected"), CASES, ids=[c[1][:40] for c in CASES])
def test_loading_errors_are_one_line_and_exit_2(
    in_folder: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    for name, source in BROKEN.items():
        write_module(in_folder, name, source)
    code, text = run(*argv)
    err = capsys.readouterr().err
    assert code == 2, text
    assert text == ""
    assert err.startswith("toolstop check: "), err
    assert err.count("\n") == 1, err
    assert expected in err
    assert "Traceback" not in err
    assert err.count(", line ") <= 1  # a syntax error's place, once


PYDANTIC_AI_TOOLS = (
    "from pydantic_ai import Agent, RunContext, Tool, ToolReturn\n"
    "from toolstop import signal\n"
    "def weather(city: str) -> ToolReturn:\n"
    "    return ToolReturn(return_value='Sunny.', metadata=signal('completed'))\n"
    "def forecast(ctx: RunContext[None], city: str) -> str:\n    return 'Rain.'\n"
    "def plain(city: str) -> str:\n    return 'Fog.'\n"
    "from langchain_core.tools import StructuredTool\n"
    "LANGCHAIN = [StructuredTool.from_function(plain, name='fog', description='Fog.')]\n"
    "TOOLS = [weather]\nCONTEXT = [forecast]\nWRAPPED = [Tool(weather)]\nPLAIN = [plain]\n"
    "def make_agent(model, tools, policy):\n    return Agent(model, tools=tools)\n"
)


@pytest.mark.parametrize("attr", ["TOOLS", "CONTEXT", "WRAPPED", "PLAIN", "LANGCHAIN"])
def test_pydantic_ai_tools_are_pointed_at_the_pydantic_ai_router(
    in_folder: Path, capsys: pytest.CaptureFixture[str], attr: str
) -> None:
    """`--agent` takes LangChain/LangGraph factories: the error does not tell a Pydantic AI user
    to decorate the tool with LangChain's @tool, it names the router that checks Pydantic AI
    (LANGCHAIN: the tools load, and building the Pydantic AI agent fails)."""
    pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")
    write_module(in_folder, "pai_agent", PYDANTIC_AI_TOOLS)
    code, _ = run("--agent", "pai_agent:make_agent", "--tools", f"pai_agent:{attr}")
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert "@tool" not in err
    assert "LangChain/LangGraph" in err
    assert "--router pydantic_ai" in err


def test_the_tools_loader_accepts_a_single_tool(in_folder: Path) -> None:
    write_module(in_folder, "tools_mod", BROKEN["tools_mod"])
    assert [t.name for t in load_tools("tools_mod:one")] == ["one"]


def test_scenarios_are_retargeted_onto_every_tool() -> None:
    @tool
    def second(n: int) -> str:
        """Second."""
        return str(n)

    scenarios, skipped = agent_scenarios([lookup, second], middleware=False)
    by_name = {s.key: s for s, _ in scenarios}
    success = by_name["success@second.hard"]
    assert [t.name for t in success.tools()] == ["lookup", "second"]  # every tool, as in production
    assert success.script[0].tool_calls[0]["args"] == {"n": 1}  # type: ignore[union-attr]
    pair = by_name["parallel-any-stop-last.hard"]
    assert [c["name"] for c in pair.script[0].tool_calls] == ["second", "lookup"]  # type: ignore[union-attr]
    assert "nothing-found" in skipped
    assert "limit-run" in skipped


def test_a_run_that_publishes_two_records_is_caught() -> None:
    from langchain_core.runnables import RunnableLambda

    from toolstop.observe import publish_run_end

    def republishes(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
        graph = build_react_graph(model, tools, policy=policy)

        def run(inputs: Any, config: Any) -> Any:
            state = graph.invoke(inputs, config)
            publish_run_end(state["stop_record"], config)  # a second record for the same run
            return state

        return RunnableLambda(run)  # an agent that is not a graph: invoked, no node path

    result = check_agent(republishes, [lookup], scenarios=["success@lookup.hard"])
    [only] = result.results
    assert only.actual["path"] == []
    assert only.breaches == [
        "the run published 2 run-end records; a run publishes exactly one (is StopOnArtifact "
        "listed twice, or the graph wrapped in another toolstop graph?)"
    ]


@tool(return_direct=True)
def static_lookup(query: str) -> str:
    """Looks a thing up, and always ends the loop (a static stop)."""
    return f"Found {query}."


def plain_create_agent(model: Any, tools: list[BaseTool], policy: StopPolicy) -> Any:
    from langchain.agents import create_agent

    return create_agent(model, tools)  # no toolstop: its return_direct tool ends every run


@pytest.mark.skipif(MIDDLEWARE_UNAVAILABLE is not None, reason=f"{MIDDLEWARE_UNAVAILABLE}")
def test_a_run_that_ends_on_a_static_return_direct_stop_is_a_breach() -> None:
    result = check_agent(plain_create_agent, [static_lookup], scenarios=["success"])
    hard = next(r for r in result.results if r.scenario.key == "success@static_lookup.hard")
    assert any(
        "the run ended on a ToolMessage, not an AIMessage: the stop came from return_direct" in b
        for b in hard.breaches
    ), hard.breaches
