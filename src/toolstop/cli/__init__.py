"""The `toolstop` command line. `main(argv)` is a function; only `main_entry` exits."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn, TextIO

from toolstop._redact import mask_sources
from toolstop.cli.bench import add_bench_parser, run_bench_command
from toolstop.cli.check import add_check_parser, run_check
from toolstop.cli.demo import add_demo_parser, run_demo
from toolstop.cli.explain import add_explain_parser, run_explain
from toolstop.cli.report import add_report_parser, run_report

__all__ = ["main", "main_entry"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors mask the passwords of the arguments they quote
    (`toolstop check --db postgresql://u:secret@db/app`: an unrecognised argument)."""

    sources: Sequence[str] = ()

    def error(self, message: str) -> NoReturn:
        """Print the usage and `message`, every argument's password masked; exit 2."""
        super().error(mask_sources(message, *self.sources))


def _parser(
    argv: Sequence[str] = (),
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and the parser of each subcommand, by name; their errors mask the
    passwords of `argv`'s arguments."""
    parser = _Parser(
        prog="toolstop",
        description="Per-call, result-driven stops for LangGraph / LangChain tool-calling agents.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_demo_parser(commands)
    add_check_parser(commands)
    add_bench_parser(commands)
    add_report_parser(commands)
    add_explain_parser(commands)
    for each in (parser, *commands.choices.values()):
        each.sources = tuple(argv)
    choices: dict[str, argparse.ArgumentParser] = dict(commands.choices)
    return parser, choices


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the CLI with `argv` (default: `sys.argv[1:]`); return the exit code."""
    parser, subcommands = _parser(sys.argv[1:] if argv is None else argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # argparse would print the top-level usage; the subcommand's is the helpful one
        subcommands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "demo":
        return run_demo(args, out or sys.stdout)
    if args.command == "check":
        return run_check(args, out or sys.stdout)
    if args.command == "bench":
        return run_bench_command(args, out or sys.stdout)
    if args.command == "report":
        return run_report(args, out or sys.stdout)
    if args.command == "explain":
        return run_explain(args, out or sys.stdout)
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
