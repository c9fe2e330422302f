"""`toolstop report --from` and `--convert`: the CLI's side of reading recorded conversations.

The reading and the what-if live in `toolstop.report.from_logs` and `toolstop.report.what_if`;
this module turns the arguments into them and their findings into stderr lines."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["read_from_args", "what_if_of"]


def what_if_of(args: argparse.Namespace, writes: frozenset[str]) -> Any:
    """The what-if of `--convert` (`None` without it, `False` after a refusal, printed)."""
    if not args.convert:
        if args.success:
            print("toolstop report: --success needs --convert", file=sys.stderr)
            return False
        return None
    if not args.from_:
        print("toolstop report: --convert needs --from (recorded conversations)", file=sys.stderr)
        return False
    import re

    from toolstop.report.what_if import WhatIf

    try:
        success = re.compile(args.success) if args.success else None
    except (re.error, RecursionError, OverflowError) as error:
        print(f"toolstop report: --success is not a regular expression: {error}", file=sys.stderr)
        return False
    tools = [t.strip() for t in args.convert.split(",") if t.strip()]
    if not tools:
        print("toolstop report: --convert names no tool", file=sys.stderr)
        return False
    return WhatIf(tools, success=success, declared_writes=writes, examples=args.examples)


def read_from_args(
    args: argparse.Namespace, summary: Any, judged: bool, what_if: Any
) -> tuple[Any, ...]:
    """`--from`: the source, the extra figures, the example pairs and the judge's pairs."""
    from toolstop.report.from_logs import read_from
    from toolstop.report.reader import redact

    found = read_from(
        args.from_,
        summary,
        format=args.format,
        keep_messages=bool(args.examples) or judged,
        what_if=what_if,
    )
    for line in found.messages():
        print(f"toolstop report: {line}", file=sys.stderr)
    examples = (
        found.pairs(summary.candidates.kept, summary.candidates.cut_shown(), limit=args.examples)
        if args.examples
        else None
    )
    pairs: dict[str, Any] = {}
    if judged:
        signalling = set(summary.stops) | set(summary.would_stops)
        sampled = summary.candidates.sampled.runs()
        pairs = found.pairs({t: e for t, e in sampled.items() if t not in signalling})
    extra = {
        "threads": found.threads,
        "open_runs": found.open_runs,
        **found.document(),
    }
    if found.rejected:
        extra["unreadable_runs"] = found.rejected
    return {"from": redact(args.from_), "format": found.format}, extra, examples, pairs
