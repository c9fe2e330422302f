"""`toolstop check --agent MODULE:FACTORY --tools MODULE:ATTR`: the matrix through your agent."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import TextIO

from toolstop._console import progress, versions
from toolstop.agent import load_factory, load_tools
from toolstop.errors import ToolstopConfigError

__all__ = ["run_check_agent"]


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
    from toolstop.check import _table
    from toolstop.testing.agent_check import check_agent, write_agent_goldens

    problem = _usage(args)
    if problem is not None:
        print(f"toolstop check: {problem}", file=sys.stderr)
        return 2
    goldens = Path(args.goldens) if args.goldens else None
    try:
        factory = load_factory(args.agent)
        tools = load_tools(args.tools)
        if goldens is not None and goldens.exists() and not goldens.is_dir():
            msg = f"--goldens {goldens} is a file, not a folder"
            raise ToolstopConfigError(msg)
        from toolstop.testing.agent_check import agent_scenarios

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
        }
        print(json.dumps(document, indent=2), file=out)
        return 1 if failed else 0
    stack = ", ".join(f"{k} {v}" for k, v in versions().items())
    names = ", ".join(t.name for t in tools)
    print(f"toolstop check --agent {factory.name} (tools: {names}) on {stack}", file=out)
    reasons: dict[str, list[str]] = {}
    for name, why in result.skipped.items():
        reasons.setdefault(why, []).append(name)
    for why, scenarios in reasons.items():
        print(f"skipped {', '.join(scenarios)}: {why}", file=out)
    _table(result.results, out, shutil.get_terminal_size((100, 24)).columns)
    if failed:
        print("\nbreaches:", file=out)
        for r in failed:
            for breach in r.breaches:
                print(f"- {r.scenario.key}: {breach}", file=out)
    print(f"{len(result.results) - len(failed)} passed, {len(failed)} failed", file=out)
    return 1 if failed else 0
