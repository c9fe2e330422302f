"""`toolstop demo`: the example search agent on the scripted model, explained."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any, TextIO

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from toolstop._printable import printable
from toolstop._redact import redact
from toolstop.cli._output import shown
from toolstop.cli.checkpoints import default_db_path, open_checkpointer
from toolstop.errors import ToolstopConfigError
from toolstop.examples._forced import OutcomePicker
from toolstop.examples.business import make_poll_job_tool
from toolstop.examples.search import DEFAULT_WEIGHTS, make_search_tool
from toolstop.graph import build_react_graph
from toolstop.models import chat_model
from toolstop.policy import StopPolicy
from toolstop.report.decode import SafeDecoder, install
from toolstop.testing import ScriptedChatModel, ScriptStep, call

__all__ = ["add_demo_parser", "run_demo"]

DEFAULT_QUESTION = "How do refunds work?"
PROMPT = "Answer with the search tool. Call it with the user's question."
_PREVIEW = 600


def _outcomes(outcome: str | None, seed: int, budget: int | None) -> list[str]:
    """The search outcomes the demo will see, call by call, ending at the first stop.

    With no `--outcome` they are drawn with `seed` from `DEFAULT_WEIGHTS` (60% success, 25%
    retryable, 15% fatal), so the scripted model can be given exactly as many turns as the run
    needs.
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
    # The scripted model cannot read the tool's text; a real model writes these from it.
    if mode == "never":
        steps.append(f"(the model's own answer to {question!r}, written from the search result)")
    elif mode == "polish" and outcomes[-1] != "retryable":
        steps.append(f"(the model's narration of the search result for {question!r}, no tools)")
    return steps


def _preview(content: Any) -> str:
    """The start of the final answer, its control characters escaped (a real model wrote it)."""
    text = content if isinstance(content, str) else json.dumps(content)
    if len(text) <= _PREVIEW:
        return printable(text, keep_newlines=True)
    shown = printable(text[:_PREVIEW], keep_newlines=True)
    return f"{shown}\n... ({len(text) - _PREVIEW} more characters)"


def _stream(graph: Any, question: str, config: Any) -> tuple[list[str], dict[str, Any]]:
    path: list[str] = []
    final: dict[str, Any] = {}
    inputs = {"messages": [HumanMessage(content=question)]}
    for mode, chunk in graph.stream(inputs, config, stream_mode=["updates", "values"]):
        if mode == "updates":
            path.extend(chunk)
        else:
            final = chunk
    return path, final


def _failure(error: Exception, args: argparse.Namespace) -> str:
    name = type(error).__name__
    if "Connection" in name or "Timeout" in name:
        where = args.base_url or f"the {str(args.model).split(':')[0]} API"
        return shown(f"cannot reach the model at {where} ({name}: {error})", *_sources(args))
    return shown(f"the run failed: {name}: {error}", *_sources(args))


def _sources(args: argparse.Namespace) -> tuple[str | None, ...]:
    """The values an error may quote that may carry a password (masked where printed)."""
    return (args.db, args.base_url)


def _run_demo(args: argparse.Namespace, out: TextIO) -> int:
    if args.db and not args.thread:
        print("toolstop demo: --db needs --thread (the conversation it keeps)", file=sys.stderr)
        return 2
    policy = StopPolicy(mode=args.mode)
    outcomes = _outcomes(args.outcome, args.seed, policy.max_transient_retries)
    tool = make_search_tool(force_outcome=outcomes, seed=args.seed)
    scripted = (
        None if args.model else ScriptedChatModel(_script(args.question, outcomes, args.mode))
    )
    with ExitStack() as stack:
        try:
            model = scripted or chat_model(args.model, base_url=args.base_url)
            checkpointer = None
            if args.thread:
                checkpointer = stack.enter_context(open_checkpointer(args.db))
                # the conversation is read back with toolstop's decoder: a database from
                # elsewhere names no class that is built (it writes as LangGraph does)
                install(checkpointer, SafeDecoder(write_with=checkpointer.serde))
        except ToolstopConfigError as error:
            print(f"toolstop demo: {shown(str(error), *_sources(args))}", file=sys.stderr)
            return 2
        graph = build_react_graph(
            model, [tool], policy=policy, prompt=PROMPT, checkpointer=checkpointer
        )
        config = {"configurable": {"thread_id": args.thread}} if args.thread else None
        try:
            path, final = _stream(graph, args.question, config)
        except Exception as error:  # a provider down, a bad key: one sentence, no traceback
            print(f"toolstop demo: {_failure(error, args)}", file=sys.stderr)
            return 1
    record = final.get("stop_record") or {}
    print(f"question : {args.question}", file=out)
    how = "forced" if args.outcome else f"drawn from a 60/25/15 mix with seed {args.seed}"
    print(f"outcomes : {' -> '.join(outcomes)} (search tool, {how})", file=out)
    print(f"mode     : {args.mode}", file=out)
    print(f"model    : {args.model or 'scripted'}", file=out)
    if args.thread:
        where = redact(args.db) if args.db else default_db_path()
        print(f"thread   : {args.thread} ({len(final['messages'])} messages in {where})", file=out)
    print(f"path     : {' -> '.join(path)}", file=out)
    print(f"model calls: {record.get('model_calls')}", file=out)
    for number, seen in enumerate(scripted.calls if scripted else [], start=1):
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
    print(json.dumps(record, indent=2), file=out)
    if scripted is not None and scripted.remaining:
        print(
            f"error: the run used fewer model calls than scripted ({scripted.remaining} left)",
            file=sys.stderr,
        )
        return 1
    return 0


def add_demo_parser(commands: Any) -> None:
    """Register `toolstop demo` on the CLI's subparsers."""
    demo = commands.add_parser(
        "demo",
        help="run the search agent on the scripted model and show how the run ended",
        description=(
            "Run the example search agent on a scripted model (no API key needed) and "
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
    demo.add_argument("--model", metavar="PROVIDER:NAME", help="a real model instead of the script")
    demo.add_argument("--base-url", help="an OpenAI-compatible server for --model")
    demo.add_argument(
        "--thread", help="keep the conversation under this id (SQLite, or --db) and continue it"
    )
    demo.add_argument(
        "--db",
        help=(
            "SQLite file (in an existing folder) or postgresql:// URL for --thread "
            "(default: the user data dir); needs --thread"
        ),
    )
    demo.add_argument(
        "--job",
        action="store_true",
        help="instead: poll an export job; its progress (artifact only) drives a progress bar",
    )


def run_demo(args: argparse.Namespace, out: TextIO) -> int:
    """Run `toolstop demo` with parsed `args`; return the exit code."""
    if args.job:
        return _run_job(args, out)
    return _run_demo(args, out)


def _bar(fraction: float, width: int = 30) -> str:
    done = round(fraction * width)
    return f"[{'#' * done}{'.' * (width - done)}] {fraction:4.0%}"


def _run_job(args: argparse.Namespace, out: TextIO) -> int:
    """Poll a job until done; the UI's progress comes from the artifact via the stream."""
    steps = 5
    model = ScriptedChatModel([call("poll_job", job_id="export-42")] * steps)
    graph = build_react_graph(
        model, [make_poll_job_tool(steps=steps)], policy=StopPolicy(mode=args.mode)
    )
    question: list[BaseMessage] = [
        HumanMessage(content="Export my data and tell me when it is ready.")
    ]
    final: dict[str, Any] = {}
    interactive = out.isatty()
    parts: Iterator[tuple[str, dict[str, Any]]] = graph.stream(  # type: ignore[assignment]
        {"messages": question}, stream_mode=["custom", "values"]
    )
    for mode, chunk in parts:
        if mode == "values":
            final = chunk
            continue
        if chunk.get("toolstop") != "turn":
            continue
        for signal in chunk["signals"]:
            if "progress" in signal:
                line = f"job export-42 {_bar(signal['progress'])}"
                print(
                    f"\r{line}" if interactive else line, end="" if interactive else "\n", file=out
                )
    if interactive:
        print(file=out)
    print(f"final (model calls: {len(model.calls)}): {final['messages'][-1].content}", file=out)
    print(f"rule: {final['stop_record']['rule']}", file=out)
    model.assert_complete()
    return 0
