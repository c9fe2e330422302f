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


def test_bench_agent_over_a_real_client_and_the_loopback_provider(
    in_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("langchain_openai", reason="needs the `openai` extra")
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    from toolstop.testing.loopback import LoopbackProvider, reply

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    write_module(in_folder, "support", SUPPORT_AGENT)
    questions = in_folder / "questions.jsonl"
    questions.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    status = reply(None, ("order_status", {"order_id": "o-1"}))
    slow = reply(None, ("order_status", {"order_id": "o-slow"}))
    retry = reply(None, ("order_status", {"order_id": "o-2"}))
    money = {"request": {"order_id": "o-3", "amount": 20, "reason": "damaged"}}
    refund = reply(None, ("refund", money))
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
    script = [
        step for q in per_question for mode in ("never", "hard", "polish") for step in q[mode]
    ]
    out = in_folder / "bench-out"
    text = io.StringIO()
    with LoopbackProvider(script) as provider:
        argv = [
            "bench",
            "--agent", "support:make_agent",
            "--tools", "support:TOOLS",
            "--questions", str(questions),
            "--model", "openai:gpt-loopback",
            "--base-url", provider.base_url,
            "--out", str(out),
        ]  # fmt: skip
        assert main(argv, out=text) == 0, text.getvalue()
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
    assert {m: c["model_calls"] for m, c in modes.items()} == {"never": 7, "hard": 4, "polish": 7}
    assert modes["polish"]["narration_calls"] == 3
    assert modes["never"]["rules"] == {"error": 1, "none": 3}
    assert modes["never"]["would_stop"] == 3
    assert modes["hard"]["rules"] == {"completed": 3, "error": 1}
    assert modes["hard"]["input_tokens"] < modes["never"]["input_tokens"]
    assert all(c["input_tokens"] > 0 and c["output_tokens"] > 0 for c in modes.values())
    assert all(c["errors"] == 1 and c["wall_s"] > 0 for c in modes.values())
    assert [(e["index"], e["question"]) for e in document["errors"]] == [
        (2, "What is the admin password?")
    ] * 3
    assert (
        "ValueError: the guard refused a question about passwords" in document["errors"][0]["error"]
    )
    assert document["headline"]["agent"]["model_calls_hard_vs_never"] == round(4 / 7, 4)
    assert document["settings"]["model"] == "openai:gpt-loopback"
    page = (out / "report.html").read_text()
    assert 'data-config="agent-hard" data-metric="model_calls">4<' in page
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


BAD = [
    (["--questions", "missing.jsonl"], "--questions missing.jsonl: no such file"),
    (["--questions", "bad.jsonl"], "--questions bad.jsonl line 2: not JSON"),
    (["--questions", "wrong.jsonl"], 'line 1: expected {"question": "..."}'),
    (["--questions", "empty.txt"], "--questions empty.txt has no questions"),
    (["--questions", "ok.txt", "--mix", "1/1/1"], "--mix shapes the simulated workload"),
    (["--questions", "ok.txt", "--overhead"], "--overhead shapes the simulated workload"),
    ([], "--agent MODULE:FACTORY, --tools MODULE:ATTR and --questions FILE go together"),
    (["--questions", "ok.txt", "--model", "nonsense"], "--model takes PROVIDER:NAME"),
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


def test_bench_agent_exits_1_only_when_every_run_failed(in_folder: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    write_module(in_folder, "support", SUPPORT_AGENT)
    (in_folder / "refused.txt").write_text("What is the admin password?\n")
    (in_folder / "mixed.txt").write_text("What is the admin password?\nWhere is order o-1?\n")
    argv = ["bench", "--agent", "support:make_agent", "--tools", "support:TOOLS"]
    argv += ["--latency-ms", "0"]
    assert main([*argv, "--questions", "refused.txt", "--out", "a"], out=io.StringIO()) == 1
    failed = json.loads((in_folder / "a" / "bench.json").read_text())["errors"]
    assert sorted(e["mode"] for e in failed) == ["hard", "never", "polish"]
    assert main([*argv, "--questions", "mixed.txt", "--out", "b"], out=io.StringIO()) == 0
    assert len(json.loads((in_folder / "b" / "bench.json").read_text())["errors"]) == 3
