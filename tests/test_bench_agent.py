"""`toolstop bench --agent`: a user's agent, tools and questions under never / hard / polish."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE
from toolstop.cli import main
from user_agent import SUPPORT_AGENT, in_folder, write_module

__all__ = ["in_folder"]  # the fixture, imported for pytest

pytestmark = pytest.mark.skipif(
    MIDDLEWARE_UNAVAILABLE is not None, reason=f"the user's agent: {MIDDLEWARE_UNAVAILABLE}"
)

QUESTIONS = [
    "Where is order o-1?",
    "Where is my slow order?",
    "What is the admin password?",  # the agent's own guard raises: an error, recorded
    "Refund 20 on o-3, it arrived damaged",
]


def by_mode(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["behaviour"]: c for c in document["configs"]}


MODES = ("never", "hard", "polish")

ASYNC_SUPPORT_AGENT = SUPPORT_AGENT.replace("def order_status(", "async def order_status(").replace(
    "def refund(", "async def refund("
)
"""The support agent with `async def` tools: it runs only through `ainvoke`."""

AGENTS = {"sync tools": SUPPORT_AGENT, "async tools": ASYNC_SUPPORT_AGENT}


def bench_script(per_question: list[dict[str, list[Any]]], repeat: int = 1) -> list[Any]:
    """The replies in the order the bench asks for them: a warm-up (the first question under
    each mode), then question by question, the modes' order moving on by one each question and
    each repeat (question 1: never, hard, polish; question 2: hard, polish, never; ...)."""
    steps = [step for mode in MODES for step in per_question[0][mode]]
    for round_ in range(repeat):
        for index, replies in enumerate(per_question):
            start = (index + round_) % len(MODES)
            for mode in MODES[start:] + MODES[:start]:
                steps += replies[mode]
    return steps


def keep_alive(provider: Any) -> Any:
    """Serve HTTP/1.1 with keep-alive, as real providers do: the client then keeps its
    connections in its pool between requests (and between runs of the bench)."""
    provider._server.RequestHandlerClass.protocol_version = "HTTP/1.1"
    return provider


def loopback_replies() -> dict[str, Any]:
    from toolstop.testing.loopback import reply

    money = {"request": {"order_id": "o-3", "amount": 20, "reason": "damaged"}}
    return {
        "status": reply(None, ("order_status", {"order_id": "o-1"})),
        "slow": reply(None, ("order_status", {"order_id": "o-slow"})),
        "retry": reply(None, ("order_status", {"order_id": "o-2"})),
        "refund": reply(None, ("refund", money)),
    }


@pytest.mark.parametrize("kind", AGENTS)
def test_bench_agent_over_a_real_client_and_the_loopback_provider(
    in_folder: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    pytest.importorskip("langchain_openai", reason="needs the `openai` extra")
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    from toolstop.testing.loopback import LoopbackProvider

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    write_module(in_folder, "support", AGENTS[kind])
    questions = in_folder / "questions.jsonl"
    questions.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    r = loopback_replies()
    status, slow, retry, refund = r["status"], r["slow"], r["retry"], r["refund"]
    per_question = [  # never (the model paraphrases), hard (no call after the stop), polish
        {"never": [status, "answer"], "hard": [status], "polish": [status, "narration"]},
        {
            "never": [slow, retry, "answer"],
            "hard": [slow, retry],
            "polish": [slow, retry, "narration"],
        },
        {"never": [], "hard": [], "polish": []},  # the guard refuses before any model call
        {"never": [refund, "answer"], "hard": [refund], "polish": [refund, "narration"]},
    ]
    out = in_folder / "bench-out"
    text = io.StringIO()
    with keep_alive(LoopbackProvider(bench_script(per_question))) as provider:
        argv = [
            "bench",
            "--agent", "support:make_agent",
            "--tools", "support:TOOLS",
            "--questions", str(questions),
            "--model", "openai:gpt-loopback",
            "--base-url", provider.base_url,
            "--out", str(out),
        ]  # fmt: skip
        # one question raised in every mode: its figures are shown, no headline, exit 1
        assert main(argv, out=text) == 1, text.getvalue()
    assert provider.remaining == 0
    assert provider.rejected == []  # every history the agent sent was valid
    first = provider.requests[0]["messages"]
    assert first[0] == {
        "role": "system",
        "content": "You are Acme's support agent. Use the tools; answer in one sentence.",
    }
    document = json.loads((out / "bench.json").read_text())
    modes = by_mode(document)
    assert [c["name"] for c in document["configs"]] == ["agent-never", "agent-hard", "agent-polish"]
    assert {m: c["queries"] for m, c in modes.items()} == {"never": 4, "hard": 4, "polish": 4}
    # the warm-up's calls are not counted
    assert {m: c["model_calls"] for m, c in modes.items()} == {"never": 7, "hard": 4, "polish": 7}
    assert modes["polish"]["narration_calls"] == 3
    assert modes["never"]["rules"] == {"error": 1, "none": 3}
    assert modes["never"]["would_stop"] == 3
    assert modes["hard"]["rules"] == {"completed": 3, "error": 1}
    assert modes["hard"]["input_tokens"] < modes["never"]["input_tokens"]
    assert all(c["input_tokens"] > 0 and c["output_tokens"] > 0 for c in modes.values())
    assert all(c["errors"] == 1 and c["wall_s"] > 0 for c in modes.values())
    # only the guard's refusals, one per mode, in the order the modes ran question 2
    assert [(e["index"], e["question"], e["mode"]) for e in document["errors"]] == [
        (2, "What is the admin password?", mode) for mode in ("polish", "never", "hard")
    ]
    assert {e["error"] for e in document["errors"]} == {
        "ValueError: the guard refused a question about passwords"
    }
    assert document["headline"] == {}
    reason = "never: 1 of 4 never runs raised"
    assert {m: r[: len(reason)] for m, r in document["withheld"].items()} == {
        "hard": reason,
        "polish": reason,
    }
    assert document["settings"]["model"] == "openai:gpt-loopback"
    page = (out / "report.html").read_text()
    assert 'data-config="agent-hard" data-metric="model_calls">4<' in page
    assert 'data-withheld="hard">hard vs never: withheld, never: 1 of 4 never runs raised' in page
    assert (out / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = text.getvalue().splitlines()
    assert lines[1].split() == [
        "mode",
        "questions",
        "model",
        "calls",
        "input",
        "tokens",
        "output",
        "tokens",
        "ms",
        "/",
        "question",
        "errors",
        "tool",
        "errors",
    ]
    assert lines[3].split()[:3] == ["hard", "4", "4"]
    refused = "error: question 2 'What is the admin password?' (never): ValueError: the guard"
    assert refused in text.getvalue()
    assert f"no headline for hard vs never: {reason}" in text.getvalue()
    assert "agent, hard vs never" not in text.getvalue()


@pytest.mark.parametrize("kind", AGENTS)
def test_bench_agent_loses_no_question_on_a_pooling_async_client(
    in_folder: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # a real ChatOpenAI keeps its connections in a pool; each run in a new event loop lost
    # every question whose pooled connection belonged to a closed loop
    pytest.importorskip("langchain_openai", reason="needs the `openai` extra")
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    from toolstop.testing.loopback import LoopbackProvider

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    write_module(in_folder, "support", AGENTS[kind])
    asked = ["Where is order o-1?", "Refund 20 on o-3, it arrived damaged"] * 4
    (in_folder / "questions.txt").write_text("\n".join(asked) + "\n")
    r = loopback_replies()
    per_question = [
        {"never": [r[tool], "answer"], "hard": [r[tool]], "polish": [r[tool], "narration"]}
        for tool in ["status", "refund"] * 4
    ]
    out = in_folder / "bench-out"
    text = io.StringIO()
    with keep_alive(LoopbackProvider(bench_script(per_question))) as provider:
        argv = ["bench", "--agent", "support:make_agent", "--tools", "support:TOOLS"]
        argv += ["--questions", "questions.txt", "--model", "openai:gpt-loopback"]
        argv += ["--base-url", provider.base_url, "--out", str(out)]
        assert main(argv, out=text) == 0, text.getvalue()
    assert provider.remaining == 0
    assert provider.rejected == []
    document = json.loads((out / "bench.json").read_text())
    assert document["errors"] == []
    modes = by_mode(document)
    assert {m: c["model_calls"] for m, c in modes.items()} == {"never": 16, "hard": 8, "polish": 16}
    assert {m: c["rules"] for m, c in modes.items()} == {
        "never": {"none": 8},
        "hard": {"completed": 8},
        "polish": {"completed": 8},
    }
    assert document["headline"]["agent"]["model_calls_hard_vs_never"] == 0.5
    assert document["headline"]["agent"]["model_calls_polish_vs_never"] == 1.0
    assert document["withheld"] == {}


def test_bench_agent_offline_with_plain_text_questions(in_folder: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    write_module(in_folder, "support", SUPPORT_AGENT)
    (in_folder / "questions.txt").write_text("Where is order o-1?\n\nRefund my damaged order\n")
    argv = ["bench", "--agent", "support:make_agent", "--tools", "support:TOOLS"]
    argv += ["--questions", "questions.txt", "--latency-ms", "0", "--out", "out"]
    assert main(argv, out=io.StringIO()) == 0
    document = json.loads((in_folder / "out" / "bench.json").read_text())
    modes = by_mode(document)
    # the simulated model calls the tool closest to each question once; each completes
    assert {m: c["model_calls"] for m, c in modes.items()} == {"never": 4, "hard": 2, "polish": 4}
    assert modes["hard"]["rules"] == {"completed": 2}
    assert document["errors"] == []
    assert document["settings"]["model"] == "simulated"


def test_bench_agent_repeats_the_questions_and_gives_the_spread(in_folder: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    write_module(in_folder, "support", SUPPORT_AGENT)
    (in_folder / "q.txt").write_text("Where is order o-1?\nRefund my damaged order\n")
    argv = ["bench", "--agent", "support:make_agent", "--tools", "support:TOOLS"]
    argv += ["--questions", "q.txt", "--latency-ms", "0", "--repeat", "3", "--out", "out"]
    text = io.StringIO()
    assert main(argv, out=text) == 0, text.getvalue()
    document = json.loads((in_folder / "out" / "bench.json").read_text())
    modes = by_mode(document)
    # the simulated model calls one tool a question; each completes: 2 questions x 3 repeats
    assert {m: c["model_calls"] for m, c in modes.items()} == {
        "never": 12,
        "hard": 6,
        "polish": 12,
    }
    assert {m: c["queries"] for m, c in modes.items()} == dict.fromkeys(MODES, 6)
    lines = text.getvalue().splitlines()
    assert lines[0].endswith("2 questions x 3 repeats, model: simulated")
    for mode in ("hard", "polish"):
        each = [
            round(run / base, 4)
            for run, base in zip(
                modes[mode]["wall_s_by_repeat"], modes["never"]["wall_s_by_repeat"], strict=True
            )
        ]
        ratios = document["headline"]["agent"]
        assert ratios[f"wall_time_{mode}_vs_never_spread"] == [min(each), max(each)]
        at = lines.index(
            f"agent, {mode} vs never: "
            + (
                f"model calls {ratios[f'model_calls_{mode}_vs_never']}, "
                f"input tokens {ratios[f'input_tokens_{mode}_vs_never']}"
            )
        )
        assert lines[at + 1] == (
            f"  wall time {ratios[f'wall_time_{mode}_vs_never']} "
            f"({min(each)}-{max(each)} over 3 repeats)"
        )


BAD = [
    (["--questions", "missing.jsonl"], "--questions missing.jsonl: no such file"),
    (["--questions", "bad.jsonl"], "--questions bad.jsonl line 2: not JSON"),
    (["--questions", "wrong.jsonl"], 'line 1: expected {"question": "..."}'),
    (["--questions", "empty.txt"], "--questions empty.txt has no questions"),
    (["--questions", "ok.txt", "--mix", "1/1/1"], "--mix shapes the simulated workload"),
    (["--questions", "ok.txt", "--overhead"], "--overhead shapes the simulated workload"),
    ([], "--agent MODULE:FACTORY, --tools MODULE:ATTR and --questions FILE go together"),
    (["--questions", "ok.txt", "--model", "nonsense"], "--model takes PROVIDER:NAME"),
    (["--questions", "ok.txt", "--repeat", "0"], "--repeat must be at least 1, got 0"),
]


@pytest.mark.parametrize(("extra", "expected"), BAD, ids=[b[1][:40] for b in BAD])
def test_bench_agent_usage_errors_are_one_line(
    in_folder: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    write_module(in_folder, "support", SUPPORT_AGENT)
    (in_folder / "bad.jsonl").write_text('{"question": "a"}\n{"question": \n')
    (in_folder / "wrong.jsonl").write_text('{"q": "a"}\n')
    (in_folder / "empty.txt").write_text("\n\n")
    (in_folder / "ok.txt").write_text("a question\n")
    argv = ["bench", "--agent", "support:make_agent", "--tools", "support:TOOLS", *extra]
    assert main(argv, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.startswith("toolstop bench: "), err
    assert err.count("\n") == 1, err
    assert expected in err
    assert not (in_folder / "bench-out").exists()


PLAIN = """
from langchain_core.tools import tool

from toolstop import build_react_graph


@tool
def weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    return "Sunny."


TOOLS = [weather]


def make(model, tools, policy):
    return build_react_graph(model, tools, policy=policy)
"""


def test_bench_agent_says_when_no_tool_signals(in_folder: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    write_module(in_folder, "plain", PLAIN)
    (in_folder / "q.txt").write_text("Weather in Paris?\r\n")
    text = io.StringIO()
    argv = ["bench", "--agent", "plain:make", "--tools", "plain:TOOLS", "--questions", "q.txt"]
    assert main([*argv, "--latency-ms", "0"], out=text) == 0
    assert "no tool result signalled a stop: do your tools return (content, signal(...))?" in (
        text.getvalue()
    )
    modes = by_mode(json.loads((in_folder / "bench-out" / "bench.json").read_text()))
    assert {m: c["model_calls"] for m, c in modes.items()} == {"never": 2, "hard": 2, "polish": 2}


def test_bench_agent_exits_1_when_any_run_failed(in_folder: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    write_module(in_folder, "support", SUPPORT_AGENT)
    (in_folder / "refused.txt").write_text("What is the admin password?\n")
    (in_folder / "mixed.txt").write_text("What is the admin password?\nWhere is order o-1?\n")
    argv = ["bench", "--agent", "support:make_agent", "--tools", "support:TOOLS"]
    argv += ["--latency-ms", "0"]
    assert main([*argv, "--questions", "refused.txt", "--out", "a"], out=io.StringIO()) == 1
    failed = json.loads((in_folder / "a" / "bench.json").read_text())["errors"]
    assert sorted(e["mode"] for e in failed) == ["hard", "never", "polish"]
    text = io.StringIO()
    assert main([*argv, "--questions", "mixed.txt", "--out", "b"], out=text) == 1
    document = json.loads((in_folder / "b" / "bench.json").read_text())
    assert len(document["errors"]) == 3
    assert document["headline"] == {}
    assert "no headline for polish vs never: never: 1 of 2 never runs raised" in text.getvalue()


FLAKY = """
from langchain.agents import create_agent
from langchain_core.tools import tool

from toolstop import Outcome, StopOnArtifact, signal

CALLS = []


@tool(response_format="content_and_artifact")
{kind}def order_status(order_id: str):
    \"\"\"Look up an order's status by its id.\"\"\"
    CALLS.append(order_id)
    if len(CALLS) == 5:  # the warm-up made calls 1-3, never's first run 4: hard's first raises
        raise RuntimeError(
            "upstream refused: api_key=sk-live-0123456789abcdef\\n\\x1b[2Jcleared"
        )
    return f"Order {{order_id}} ships tomorrow.", signal(Outcome.COMPLETED)


TOOLS = [order_status]


def make_agent(model, tools, policy):
    return create_agent(model, tools, middleware=[StopOnArtifact(policy)])
"""


@pytest.mark.parametrize("kind", ["", "async "], ids=["sync tools", "async tools"])
def test_bench_agent_withholds_the_headline_of_a_mode_whose_run_raised(
    in_folder: Path, kind: str
) -> None:
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    write_module(in_folder, "flaky", FLAKY.format(kind=kind))
    (in_folder / "q.txt").write_text("Where is order o-1?\nWhere is order o-2?\n")
    argv = ["bench", "--agent", "flaky:make_agent", "--tools", "flaky:TOOLS"]
    argv += ["--questions", "q.txt", "--latency-ms", "0", "--out", "out"]
    text = io.StringIO()
    assert main(argv, out=text) == 1, text.getvalue()
    document = json.loads((in_folder / "out" / "bench.json").read_text())
    shown = "RuntimeError: upstream refused: api_key=***\\n\\x1b[2Jcleared"
    assert document["errors"] == [
        {"index": 0, "question": "Where is order o-1?", "mode": "hard", "repeat": 0, "error": shown}
    ]
    assert "sk-live" not in text.getvalue()
    assert "\x1b" not in text.getvalue()
    assert f"error: question 0 'Where is order o-1?' (hard): {shown}" in text.getvalue()
    # hard's figures cover a run that did not finish: no hard ratios; polish's stand
    assert document["withheld"] == {
        "hard": "1 of 2 hard runs raised (listed in bench.json); ratios over runs that did not "
        "all finish are not savings"
    }
    assert set(document["headline"]["agent"]) == {
        "model_calls_polish_vs_never",
        "input_tokens_polish_vs_never",
        "wall_time_polish_vs_never",
        "wall_time_polish_vs_never_spread",
    }
    assert "no headline for hard vs never: 1 of 2 hard runs raised" in text.getvalue()
    assert "agent, polish vs never: model calls 1.0" in text.getvalue()


NO_ROUTER = {
    "create_agent": '''
from langchain.agents import create_agent
from langchain_core.tools import tool

from toolstop import Outcome, signal


@tool(response_format="content_and_artifact")
def order_status(order_id: str):
    """Look up an order's status by its id."""
    return f"Order {order_id} ships tomorrow.", signal(Outcome.COMPLETED)


TOOLS = [order_status]


def make_agent(model, tools, policy):
    return create_agent(model, tools)  # converted tools, but StopOnArtifact forgotten
''',
    "hand-built graph, async tools": '''
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from toolstop import Outcome, signal


@tool(response_format="content_and_artifact")
async def order_status(order_id: str):
    """Look up an order's status by its id."""
    return f"Order {order_id} ships tomorrow.", signal(Outcome.COMPLETED)


TOOLS = [order_status]


def make_agent(model, tools, policy):
    bound = model.bind_tools(tools)

    async def agent(state):
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)  # LangGraph's router, not toolstop's
    graph.add_edge("tools", "agent")
    return graph.compile()
''',
}


@pytest.mark.parametrize("agent", NO_ROUTER)
def test_bench_agent_says_when_the_agent_has_no_toolstop_router(
    in_folder: Path, agent: str
) -> None:
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    write_module(in_folder, "unrouted", NO_ROUTER[agent])
    (in_folder / "q.txt").write_text("Where is order o-1?\nWhere is order o-2?\n")
    argv = ["bench", "--agent", "unrouted:make_agent", "--tools", "unrouted:TOOLS"]
    argv += ["--questions", "q.txt", "--latency-ms", "0", "--out", "out"]
    text = io.StringIO()
    assert main(argv, out=text) == 1, text.getvalue()
    document = json.loads((in_folder / "out" / "bench.json").read_text())
    modes = by_mode(document)
    # nothing stopped: every mode ran the plain loop (a tool call and an answer a question)
    assert {m: c["model_calls"] for m, c in modes.items()} == {"never": 4, "hard": 4, "polish": 4}
    assert {m: c["unrouted"] for m, c in modes.items()} == {"never": 2, "hard": 2, "polish": 2}
    assert document["headline"] == {}
    assert document["withheld"] == dict.fromkeys(
        ("hard", "polish"), "the agent has no toolstop router"
    )
    said = text.getvalue()
    assert (
        "the agent has no toolstop router: in 6 runs a tool result signalled a stop but the run "
        "kept no stop_record, so nothing stopped and every mode measured the plain loop; add "
        "StopOnArtifact(policy) to your create_agent middleware, or build with "
        "build_react_graph(model, tools, policy=policy)"
    ) in said
    assert "do your tools return" not in said  # the tools signal: they are not to blame
    assert "vs never: model calls" not in said
