"""`toolstop check`: the scenario matrix against the installed LangGraph / LangChain."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any, TextIO

from toolstop._check.agent import PAUSED_NOTE
from toolstop._check.factory import load_factory, load_tools
from toolstop._check.harness import (
    CheckResult,
    broken_runs,
    check,
    goldens_dir,
    planned_malformed_signals_hidden,
    write_golden,
)
from toolstop._check.preflight import stand_in_summary
from toolstop._check.pydantic_ai_router import PYDANTIC_AI, pydantic_ai_unavailable
from toolstop._check.routers import ROUTERS, available_routers
from toolstop._check.scenarios import Scenario, scenario_matrix
from toolstop._compat import middleware_unavailable
from toolstop._printable import printable
from toolstop.cli._output import progress, versions
from toolstop.cli._run_config import add_run_config_arguments, run_config
from toolstop.errors import ToolstopConfigError
from toolstop.models import chat_model

__all__ = ["add_check_parser", "run_check"]

# Scenarios whose meaning survives a real model (it decides the calls, not a script).
_LIVE = ("success.hard", "retryable-then-success.hard", "fatal.hard", "policy-block.hard")


def add_check_parser(commands: Any) -> None:
    """Register `toolstop check` on the CLI's subparsers."""
    parser = commands.add_parser(
        "check",
        help="run the scenario matrix on the installed LangGraph / LangChain",
        description=(
            "Run every scenario (success, retries, fatal, budgets, parallel policies, invalid "
            "signals, injected text, tool exceptions, each mode) on every router the installed "
            "versions support, compare each run with its golden transcript, and explain every "
            "breach. Run it before and after upgrading LangGraph. Exit code 1 on any breach. "
            "With --agent and --tools: the same scenarios through your own agent factory, with "
            "stand-ins of your tools."
        ),
    )
    parser.add_argument(
        "--router",
        action="append",
        choices=[*ROUTERS, PYDANTIC_AI.name],
        help="only this router (repeatable; default: every router installed)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        metavar="NAME",
        help="only this scenario, by name (`success`) or key (`success.polish`); repeatable",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--update-goldens",
        action="store_true",
        help="rewrite the golden transcripts from this run (a deliberate act; review the diff)",
    )
    parser.add_argument(
        "--model",
        metavar="PROVIDER:NAME",
        help="run against a real model (init_chat_model), checking invariants only",
    )
    parser.add_argument(
        "--base-url", help="an OpenAI-compatible server for --model (Ollama, vLLM, a proxy)"
    )
    parser.add_argument(
        "--agent",
        metavar="MODULE:FACTORY",
        help="check your own agent: FACTORY(model, tools, policy), importable from here",
    )
    parser.add_argument(
        "--tools", metavar="MODULE:ATTR", help="with --agent: your list of LangChain tools"
    )
    parser.add_argument(
        "--goldens",
        metavar="DIR",
        help="with --agent: compare with (or, with --update-goldens, write) your agent's goldens",
    )
    add_run_config_arguments(parser)


def _select_scenarios(names: list[str] | None) -> list[Scenario]:
    matrix = scenario_matrix()
    if not names:
        return matrix
    chosen = [s for s in matrix if s.key in names or s.name in names]
    unknown = [n for n in names if not any(n in (s.key, s.name) for s in matrix)]
    if unknown:
        known = ", ".join(sorted({s.name for s in matrix}))
        msg = f"unknown scenario {unknown}; known: {known}"
        raise SystemExit(msg)
    return chosen


def _real_model(spec: str, base_url: str | None) -> Any:
    """A chat model from `provider:name`, or SystemExit with one clear sentence."""
    try:
        return chat_model(spec, base_url=base_url)
    except ToolstopConfigError as error:
        raise SystemExit(f"toolstop check --model {spec}: {error}") from None


def _width(out: TextIO) -> int | None:
    """The columns to fit the table in: `COLUMNS`, else the terminal's; None when the output
    is not a terminal and `COLUMNS` is unset (a CI log: one line per scenario, never wrapped)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    isatty = getattr(out, "isatty", None)
    if callable(isatty) and isatty():
        return shutil.get_terminal_size((100, 24)).columns
    return None


def _table(results: list[CheckResult], out: TextIO, width: int | None) -> None:
    """The results, one row each, within `width` columns (None: one line per row, unwrapped,
    with the path's middle nodes elided to `CI_PATH` characters).

    The node path comes last and wraps at its `>` steps onto continuation lines: paths of the
    middleware router run to 140 characters (hook nodes are shown without "Middleware":
    `HumanInTheLoop.after_model`). When a run left the expected path, the row shows
    both, `expected` then `actual`; otherwise the one path.
    """
    header = ("scenario", "router", "calls", "result")
    rows: list[tuple[tuple[str, ...], list[str]]] = [(header, ["path"])]
    for r in results:
        data = r.summary()
        expected = ">".join(data["expected_path"] or []) or "-"
        path = data["actual_path"]  # None: the run raised; []: an agent that is not a graph
        actual = "error" if path is None else ">".join(path) or "(no graph)"
        want, got = data["expected_model_calls"], data["actual_model_calls"]
        calls = f"{'-' if want is None else want}/{'-' if got is None else got}"
        verdict = "pass" if r.passed else "FAIL"
        both = [f"expected {expected}", f"actual {actual}"]
        paths = [actual] if expected in (actual, "-") else both
        row = (printable(r.scenario.key), printable(r.router), calls, verdict)
        rows.append((row, [printable(path) for path in paths]))  # names a run produced
    widths = [max(len(cells[i]) for cells, _ in rows) for i in range(len(header))]
    indent = sum(widths) + 2 * len(widths)
    room = max(24, width - indent) if width is not None else 0
    for cells, paths in rows:
        if width is None:
            lines = ["; ".join(_elide(path, CI_PATH) for path in paths)]
        else:
            lines = [line for path in paths for line in _wrap_path(path, room)]
        first = "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True))
        print(f"{first}  {lines[0]}".rstrip(), file=out)
        for line in lines[1:]:
            print(f"{' ' * indent}{line}", file=out)


_RUN_DETAILS = (
    # which call of how long a script, and what it saw, differ from run to run: one cause
    (
        re.compile(
            r"ScriptExhaustedError: unexpected model call #\d+: the script has \d+ steps"
            r" \(messages seen: [^)]*\)"
        ),
        "ScriptExhaustedError: a model call after the scripted ones",
    ),
    (re.compile(r"Recursion limit of \d+ reached"), "Recursion limit reached"),
)
"""The parts of a breach that differ between runs of one cause, and what the cause says."""


def _cause(breach: str) -> str:
    """`breach` without the details of its run, so that one cause is one group."""
    for pattern, said in _RUN_DETAILS:
        breach = pattern.sub(said, breach)
    return " ".join(breach.split())  # an exception's text may run over lines: one line a cause


_PAUSED = re.compile(re.escape(PAUSED_NOTE).replace(re.escape("{by}"), "(.+?)") + "$")


def _by_cause(failed: list[CheckResult], out: TextIO, *, routers: bool) -> None:
    """The breaches grouped by cause: a run's first breach is its cause (the ones after it
    mostly follow from it); one sentence per cause, how many runs it covers and which, the
    most common first. `--json` has every breach of every run."""
    causes: dict[str, list[str]] = {}
    follow = 0
    for r in failed:
        run = f"{r.scenario.key} on {r.router}" if routers else r.scenario.key
        cause = _cause(r.breaches[0])
        paused = _PAUSED.search(cause)
        if paused:  # the same cause, in a run your own review paused: said at the run
            cause = cause[: paused.start()]
            run += f" (paused by {paused.group(1)})"
        causes.setdefault(cause, []).append(run)
        follow += len(r.breaches) - 1
    print(f"\nbreaches, by cause ({len(causes)}):", file=out)
    for cause, runs in sorted(causes.items(), key=lambda item: -len(item[1])):
        print(f"- {len(runs)} run{'s' if len(runs) != 1 else ''}: {printable(cause)}", file=out)
        print(f"  in {printable(', '.join(runs))}", file=out)
    if follow:
        print(f"({follow} more breaches follow from these causes; --json lists them)", file=out)


CI_PATH = 60
"""The characters a node path takes in a CI log row (its middle nodes elided); `--json` has
the whole path."""


def _elide(path: str, room: int) -> str:
    """`path` in at most about `room` characters: its first and last nodes, with how many
    nodes in between are left out (`...7 nodes...`). A shorter path is shown whole."""
    path = path.replace("Middleware.", ".")
    steps = path.split(">")
    if len(path) <= room or len(steps) < 3:
        return path
    head, tail = [steps[0]], [steps[-1]]
    left = steps[1:-1]
    while left:
        step = left[-1] if len(tail) <= len(head) else left[0]
        size = sum(len(s) + 1 for s in (*head, *tail, step)) + len("...99 nodes...")
        if size > room:
            break
        if step is left[-1] and len(tail) <= len(head):
            tail.insert(0, left.pop())
        else:
            head.append(left.pop(0))
    if not left:
        return path
    middle = f"...{len(left)} node{'s' if len(left) != 1 else ''}..."
    return ">".join([*head, middle, *tail])


def _wrap_path(path: str, room: int) -> list[str]:
    """`path` in lines of at most `room` characters, broken after a `>` (a longer step is broken
    after a `.` or `_` in it, mid-word only when it has neither)."""
    lines: list[str] = []
    line = ""
    # LangChain's hook nodes are `ClassName.hook`; "Middleware" in a class name says nothing here
    for step in path.replace("Middleware.", ".").replace(">", ">\0").split("\0"):
        if line and len(line) + len(step) > room:
            lines.append(line)
            line = ""
        line += step
        while len(line) > room:
            cut = line.rfind(".", 0, room) + 1 or line.rfind("_", 0, room) + 1 or room
            lines.append(line[:cut])
            line = line[cut:]
    return [*lines, line] if line or not lines else lines


def run_check(args: argparse.Namespace, out: TextIO) -> int:
    """Run `toolstop check` with parsed `args`; return the exit code."""
    if args.agent or args.tools or args.goldens:
        return run_check_agent(args, out)
    if args.configurable or args.config is not None:
        print(
            "toolstop check: --configurable and --config go with --agent (toolstop's own "
            "scenarios read no run config)",
            file=sys.stderr,
        )
        return 2
    # Why a router cannot run here (None when it can): said, never a failed run.
    why_not = {"middleware": middleware_unavailable(), PYDANTIC_AI.name: pydantic_ai_unavailable()}
    every = {**ROUTERS, PYDANTIC_AI.name: PYDANTIC_AI}
    routers = [*available_routers(), *([PYDANTIC_AI] if why_not[PYDANTIC_AI.name] is None else [])]
    if args.router:
        for name in args.router:
            if why_not.get(name) is not None:
                print(f"toolstop check --router {name}: {why_not[name]}", file=sys.stderr)
                return 2
        routers = [every[name] for name in args.router]
    skipped = {k: v for k, v in why_not.items() if v is not None} if not args.router else {}
    try:
        scenarios = _select_scenarios(args.scenario)
        model = None
        if args.model:
            if args.update_goldens:
                print("--update-goldens cannot be combined with --model", file=sys.stderr)
                return 2
            model = _real_model(args.model, args.base_url)
            scenarios = [s for s in scenarios if s.key in _LIVE]
    except SystemExit as error:
        print(error, file=sys.stderr)
        return 2
    interactive = not args.json and sys.stderr.isatty()
    advance, stop = progress("toolstop check", len(scenarios) * len(routers), interactive)
    try:
        with planned_malformed_signals_hidden():
            results = check(scenarios, routers, model=model, on_result=lambda result: advance())
    finally:
        stop()
    if args.update_goldens:
        return _update(results, out)
    failed = [r for r in results if not r.passed]
    summary = f"{len(results) - len(failed)} passed, {len(failed)} failed"
    if args.json:
        document = {
            "versions": versions(),
            "model": args.model or "scripted",
            "results": [r.summary() for r in results],
            "passed": len(results) - len(failed),
            "failed": len(failed),
            "skipped": skipped,
        }
        print(json.dumps(document, indent=2), file=out)
        return 1 if failed else 0
    width = _width(out)
    stack = ", ".join(f"{k} {v}" for k, v in versions().items())
    wrap = textwrap.TextWrapper(width or 10_000, break_long_words=False, break_on_hyphens=False)
    print(wrap.fill(f"toolstop check on {stack}"), file=out)
    print(f"model: {args.model or 'scripted'}", file=out)
    for name, why in skipped.items():
        print(wrap.fill(f"skipped the {name} router: {why}"), file=out)
    _table(results, out, width)
    if failed:
        _by_cause(failed, out, routers=True)
    print(summary, file=out)
    print(
        wrap.fill(
            "the runs used toolstop's own forced tools; none of your tools was called (check "
            "your agent with --agent MODULE:FACTORY --tools MODULE:ATTR)"
        ),
        file=out,
    )
    return 1 if failed else 0


def _update(results: list[CheckResult], out: TextIO) -> int:
    """Write goldens for runs that keep every invariant; refuse the others."""
    broken = broken_runs(results, lambda r: r.expected)
    if broken:
        for r in broken:
            for breach in r.breaches:
                print(f"- {r.scenario.key} on {r.router}: {breach}", file=out)
        print(f"refused: {len(broken)} runs break an invariant; no golden was written", file=out)
        return 1
    try:
        for r in results:
            write_golden(r.actual, r.scenario, r.router)
    except OSError as error:  # an installed package's folder is often read-only
        where = error.filename or goldens_dir()
        print(f"toolstop check: cannot write {where}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"wrote {len(results)} golden transcripts to {goldens_dir()}", file=out)
    return 0


def _usage(args: argparse.Namespace) -> str | None:
    """A sentence for a flag combination that makes no sense with --agent, or None."""
    if not args.agent or not args.tools:
        return "--agent MODULE:FACTORY and --tools MODULE:ATTR go together"
    if args.router:
        return "--router does not apply to --agent: your factory is the router"
    if args.model:
        return (
            "--model does not apply to --agent: the check forces outcomes with a scripted model; "
            "measure your model with toolstop bench --agent ... --model"
        )
    if args.update_goldens and not args.goldens:
        return "--update-goldens with --agent needs --goldens DIR (your agent's goldens)"
    return None


def run_check_agent(args: argparse.Namespace, out: TextIO) -> int:
    """Run `toolstop check --agent ... --tools ...` with parsed `args`; return the exit code."""
    from toolstop._check.agent import agent_scenarios, check_agent, write_agent_goldens

    problem = _usage(args)
    if problem is not None:
        print(f"toolstop check: {problem}", file=sys.stderr)
        return 2
    goldens = Path(args.goldens) if args.goldens else None
    try:
        extra = run_config(args)
        factory = load_factory(args.agent)
        tools = load_tools(args.tools)
        if goldens is not None and goldens.exists() and not goldens.is_dir():
            msg = f"--goldens {goldens} is a file, not a folder"
            raise ToolstopConfigError(msg)

        planned = len(agent_scenarios(tools, middleware=factory.takes_middleware)[0])
    except ToolstopConfigError as error:
        print(f"toolstop check: {error}", file=sys.stderr)
        return 2
    interactive = not args.json and sys.stderr.isatty()
    advance, stop = progress("toolstop check", planned, interactive)
    try:
        result = check_agent(
            factory,
            tools,
            goldens=None if args.update_goldens else goldens,
            scenarios=args.scenario,
            on_result=lambda r: advance(),
            run_config=extra,
        )
    except ToolstopConfigError as error:
        print(f"toolstop check: {error}", file=sys.stderr)
        return 2
    finally:
        stop()
    if args.update_goldens:
        assert goldens is not None
        try:
            written = write_agent_goldens(result, goldens)
        except ToolstopConfigError as error:
            for breach in result.breaches:
                print(f"- {breach}", file=out)
            print(error, file=out)
            return 1
        except OSError as error:
            print(f"toolstop check: cannot write to {goldens}: {error.strerror}", file=sys.stderr)
            return 2
        print(f"wrote {len(written)} golden transcripts of {factory.name} to {goldens}", file=out)
        return 0
    failed = [r for r in result.results if not r.passed]
    if args.json:
        document = {
            "versions": versions(),
            "agent": factory.name,
            "tools": [t.name for t in tools],
            "model": "scripted",
            "results": [r.summary() for r in result.results],
            "passed": len(result.results) - len(failed),
            "failed": len(failed),
            "skipped": result.skipped,
            "notes": result.notes,
            "your_tools_called": False,
            **stand_in_summary(tools),
        }
        print(json.dumps(document, indent=2), file=out)
        return 1 if failed else 0
    stack = ", ".join(f"{k} {v}" for k, v in versions().items())
    names = ", ".join(printable(t.name) for t in tools)
    print(f"toolstop check --agent {printable(factory.name)} (tools: {names}) on {stack}", file=out)
    reasons: dict[str, list[str]] = {}
    for name, why in result.skipped.items():
        reasons.setdefault(why, []).append(name)
    for why, scenarios in reasons.items():
        print(f"skipped {printable(', '.join(scenarios))}: {printable(why)}", file=out)
    _table(result.results, out, _width(out))
    if failed:
        _by_cause(failed, out, routers=False)
    print(f"{len(result.results) - len(failed)} passed, {len(failed)} failed", file=out)
    for note in result.notes:
        print(f"note: {note}", file=out)
    for line in _stand_in_lines(tools):
        print(line, file=out)
    return 1 if failed else 0


def _stand_in_lines(tools: list[Any]) -> list[str]:
    """What a green check does not prove: it ran stand-ins, never your tools."""
    summary = {
        key: [printable(str(name)) for name in value] if isinstance(value, list) else value
        for key, value in stand_in_summary(tools).items()
    }
    lines = [
        f"stand-ins: {', '.join(summary['stand_ins'])}: the check forced their results; your "
        "real tools were not called (bench --agent runs them)"
    ]
    if summary["signal"]:
        lines.append(
            f"signal in their own code (response_format='content_and_artifact'): "
            f"{', '.join(summary['signal'])}"
        )
    if summary["plain"]:
        lines.append(
            f"no signal (plain results go back to the model, never stop a run): "
            f"{', '.join(summary['plain'])}"
        )
    return lines
