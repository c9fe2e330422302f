"""The `toolstop` command line. `main(argv)` is a function; only `main_entry` exits."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from toolstop.bench.command import add_bench_parser, run_bench_command
from toolstop.check import add_check_parser, run_check
from toolstop.examples._forced import OutcomePicker
from toolstop.examples.search import make_search_tool
from toolstop.graph import build_react_graph
from toolstop.policy import StopPolicy
from toolstop.testing import ScriptedChatModel, ScriptStep, call

__all__ = ["main", "main_entry"]

DEFAULT_QUESTION = "How do refunds work?"
DEFAULT_WEIGHTS = {"success": 60.0, "retryable": 25.0, "fatal": 15.0}
_PREVIEW = 600


def _outcomes(outcome: str | None, seed: int, budget: int | None) -> list[str]:
    """The search outcomes the demo will see, call by call, ending at the first stop.

    With no `--outcome` they are drawn from the article's 60/25/15 mix with `seed`, so the scripted
    model can be given exactly as many turns as the run needs.
    """
    if outcome == "retryable":
        drawn = ["retryable", "success"]
    elif outcome is not None:
        drawn = [outcome]
    else:
        picker = OutcomePicker(
            tuple(DEFAULT_WEIGHTS), force=None, weights=DEFAULT_WEIGHTS, seed=seed
        )
        drawn = [picker.next()]
        while drawn[-1] == "retryable" and len(drawn) < 50:
            drawn.append(picker.next())
    if budget is not None and drawn.count("retryable") > budget:
        drawn = drawn[: budget + 1]  # the retry budget ends the run at this call
    return drawn


def _script(question: str, outcomes: list[str], mode: str) -> list[ScriptStep]:
    steps: list[ScriptStep] = [call("search", query=question) for _ in outcomes]
    if mode == "never":
        steps.append("Here is what the search found, in my words: see the page above.")
    elif mode == "polish" and outcomes[-1] != "retryable":
        steps.append("In short: the search answered your question; the details are above.")
    return steps


def _preview(content: Any) -> str:
    text = content if isinstance(content, str) else json.dumps(content)
    if len(text) <= _PREVIEW:
        return text
    return f"{text[:_PREVIEW]}\n... ({len(text) - _PREVIEW} more characters)"


def _run_demo(args: argparse.Namespace, out: TextIO) -> int:
    policy = StopPolicy(mode=args.mode)
    outcomes = _outcomes(args.outcome, args.seed, policy.max_transient_retries)
    model = ScriptedChatModel(_script(args.question, outcomes, args.mode))
    tool = make_search_tool(force_outcome=outcomes, seed=args.seed)
    graph = build_react_graph(model, [tool], policy=policy, prompt="Answer with the search tool.")

    path: list[str] = []
    final: dict[str, Any] = {}
    question: list[BaseMessage] = [HumanMessage(content=args.question)]
    for mode, chunk in graph.stream({"messages": question}, stream_mode=["updates", "values"]):
        if mode == "updates":
            path.extend(chunk)
        else:
            final = chunk
    print(f"question : {args.question}", file=out)
    print(f"outcomes : {' -> '.join(outcomes)} (search tool, forced)", file=out)
    print(f"mode     : {args.mode}", file=out)
    print(f"path     : {' -> '.join(path)}", file=out)
    print(f"model calls: {len(model.calls)}", file=out)
    for number, seen in enumerate(model.calls, start=1):
        tools = ", ".join(seen.tools) or "none"
        asked = ", ".join(c["name"] for c in seen.response.tool_calls) or "answer"
        print(
            f"  {number}. saw [{', '.join(seen.message_types)}], tools: {tools} -> {asked}",
            file=out,
        )
    answer = final["messages"][-1]
    kind = "AIMessage" if isinstance(answer, AIMessage) else type(answer).__name__
    print(f"final ({kind}):", file=out)
    print(_preview(answer.content), file=out)
    print("stop record:", file=out)
    print(json.dumps(final.get("stop_record"), indent=2), file=out)
    try:
        model.assert_complete()
    except AssertionError as error:
        print(f"error: the run used fewer model calls than scripted: {error}", file=sys.stderr)
        return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolstop",
        description="Per-call, result-driven stops for LangGraph / LangChain tool-calling agents.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run the search agent on the scripted model and show how the run ended",
        description=(
            "Run the seed article's search agent on a scripted model (no API key needed) and "
            "print the node path, every model call, the final answer and the stop record. "
            "success and fatal stop after one model call; retryable goes back to the model once."
        ),
    )
    demo.add_argument("question", nargs="?", default=DEFAULT_QUESTION, help="what to ask")
    demo.add_argument(
        "--outcome",
        choices=["success", "retryable", "fatal"],
        help="force the search outcome (default: drawn from a 60/25/15 mix with --seed)",
    )
    demo.add_argument(
        "--mode", choices=["hard", "polish", "never"], default="hard", help="stop mode"
    )
    demo.add_argument("--seed", type=int, default=0, help="seed for drawn outcomes and texts")
    add_check_parser(commands)
    add_bench_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the CLI with `argv` (default: `sys.argv[1:]`); return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _run_demo(args, out or sys.stdout)
    if args.command == "check":
        return run_check(args, out or sys.stdout)
    if args.command == "bench":
        return run_bench_command(args, out or sys.stdout)
    parser.print_help(out or sys.stdout)
    return 2


def main_entry() -> None:
    """Console-script entry point."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `toolstop demo | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)
