"""`toolstop explain`: why a conversation ended the way it did, run by run."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from toolstop.errors import ToolstopConfigError

__all__ = ["add_explain_parser", "run_explain"]


def add_explain_parser(commands: Any) -> None:
    """Register `toolstop explain` on the CLI's subparsers."""
    parser = commands.add_parser(
        "explain",
        help="why a conversation ended the way it did, run by run",
        description=(
            "For one thread of a checkpoint database: per run, the rule, the deciding tools "
            "and call ids, the signal of every tool call per turn, budgets spent, model calls "
            "and tokens. Never tool content, never arguments."
        ),
    )
    parser.add_argument("thread_id", metavar="THREAD_ID")
    parser.add_argument(
        "--db",
        metavar="PATH_OR_URL",
        required=True,
        help="a SQLite file or a PostgreSQL URL or key=value string",
    )
    parser.add_argument("--run", type=int, metavar="N", help="only run number N of the thread")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def run_explain(args: argparse.Namespace, out: TextIO) -> int:
    """Run `toolstop explain` with parsed `args`; return the exit code."""
    from toolstop.cli._output import failure, shown
    from toolstop.report.explain import explain_thread, print_explanation
    from toolstop.report.reader import open_database, redact

    try:
        with open_database(args.db) as database:
            explanation = explain_thread(database, args.thread_id, run=args.run)
    except ToolstopConfigError as error:
        print(f"toolstop explain: {shown(str(error), args.db)}", file=sys.stderr)
        return 2
    except Exception as error:  # a database gone mid-read: one sentence, no traceback
        print(f"toolstop explain: reading failed: {failure(error, args.db)}", file=sys.stderr)
        return 1
    if explanation is None:
        print(
            f"toolstop explain: no thread {args.thread_id!r} in {shown(redact(args.db))}",
            file=sys.stderr,
        )
        return 1
    if args.run is not None and not explanation["runs"]:
        print(
            f"toolstop explain: thread {args.thread_id!r} has no finished run {args.run}",
            file=sys.stderr,
        )
        return 1
    if args.json:
        print(json.dumps(explanation, indent=2, default=repr), file=out)
    else:
        print_explanation(explanation, out)
    return 0
