"""`toolstop report`: shadow-mode savings and stop reasons from the team's own traffic.

It reads a checkpoint database or the `toolstop` logger's JSON lines."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, BinaryIO, TextIO

from toolstop._redact import without_password
from toolstop.cli._output import failure, shown, write_outputs
from toolstop.cli._report_from import read_from_args, what_if_of
from toolstop.errors import ToolstopConfigError

THREADS_COUNTED = 100_000
"""Distinct thread ids of a `--log` counted exactly (as hashes); beyond, `threads` is a lower
bound and report.json says `threads_at_least`."""

__all__ = ["CHECK_FAILED", "add_report_parser", "run_report"]


def add_report_parser(commands: Any) -> None:
    """Register `toolstop report` on the CLI's subparsers."""
    parser = commands.add_parser(
        "report",
        help="what stops did and what shadow mode would save, from your own runs",
        description=(
            "Read every finished run's stop record from a LangGraph checkpoint database "
            "(every thread, every run of its history) or from the toolstop logger's JSON lines, "
            "and write report.json, chart.png and report.html: runs by rule, model calls and "
            "tokens, stops by tool, invalid and unsignalled tool calls, what hard mode would "
            "save in shadow-mode runs, and the hard-mode share."
        ),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--db",
        metavar="PATH_OR_URL",
        help="a SQLite file or a PostgreSQL URL or key=value string (read-only)",
    )
    source.add_argument(
        "--log",
        metavar="FILE",
        help="JSON lines of the toolstop logger (toolstop.logs.JsonLines); - reads stdin",
    )
    source.add_argument(
        "--from",
        dest="from_",
        metavar="PATH",
        help=(
            "recorded conversations of an agent without toolstop: a chat log (OpenAI, "
            "LangChain, LangSmith, OpenTelemetry or Langfuse export) or its checkpoint database (a "
            "SQLite file or a PostgreSQL URL); the records are made as shadow mode would"
        ),
    )
    parser.add_argument(
        "--format",
        choices=("openai", "langchain", "langsmith", "otel", "langfuse", "checkpoints"),
        help="the format of --from (default: detected from the content)",
    )
    parser.add_argument(
        "--convert",
        metavar="TOOLS",
        help=(
            "with --from: replay the conversations as if these comma-separated tools signalled "
            "in hard mode, and report what it would have saved and cut (report.json's what_if)"
        ),
    )
    parser.add_argument(
        "--template",
        metavar="TOOL",
        help=(
            "with --from: suggest an answer= template for TOOL from the answers recorded after "
            "it, with its coverage (report.json's template); with --judge, the model drafts "
            "it too, kept only if it renders on every recorded result and covers as much"
        ),
    )
    parser.add_argument(
        "--success",
        metavar="REGEX",
        help=(
            "with --convert: a result matching REGEX is a success (stop); others are transient "
            "(default: a result that is not an error message or status)"
        ),
    )
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only runs that ended since: 2025-05-01, 2025-05-01T12:00+02:00, or 30m, 12h, 7d",
    )
    parser.add_argument(
        "--price-in",
        type=_price,
        metavar="PRICE",
        help="your model's price per million input tokens (adds money to the savings)",
    )
    parser.add_argument(
        "--price-out",
        type=_price,
        metavar="PRICE",
        help="your model's price per million output tokens (with --price-in)",
    )
    parser.add_argument(
        "--narrator-price-in",
        type=_price,
        metavar="PRICE",
        help="the narrator model's price per million input tokens (default: --price-in)",
    )
    parser.add_argument(
        "--narrator-price-out",
        type=_price,
        metavar="PRICE",
        help="the narrator model's price per million output tokens (default: --price-out)",
    )
    parser.add_argument(
        "--examples",
        type=_count,
        default=0,
        metavar="K",
        help=(
            "put up to K pairs per candidate (the tool's result and the final answer, each cut "
            "at 2,000 characters, secrets masked) in report.json and the page (--db or --from)"
        ),
    )
    parser.add_argument(
        "--writes",
        metavar="TOOLS",
        default="",
        help=(
            "comma-separated tools that write (book, pay, send...), beside those whose name says "
            "so: a stop that would skip one is flagged"
        ),
    )
    parser.add_argument(
        "--judge",
        metavar="PROVIDER:NAME",
        help=(
            "ask a chat model (any init_chat_model spec, e.g. openai:gpt-4o-mini) whether each "
            "candidate's sampled results would have served as the answer (--db or --from; "
            "costs calls: it says how many and asks first)"
        ),
    )
    parser.add_argument(
        "--judge-samples",
        type=_samples,
        default=20,
        metavar="N",
        help="at most N pairs judged per tool, sampled deterministically (default: 20)",
    )
    parser.add_argument("--base-url", help="an OpenAI-compatible server for --judge")
    parser.add_argument(
        "--yes",
        action="store_true",
        help="judge without asking (needed when stdin is not a terminal)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help=(
            "a gate for CI or cron: exit 3 when the canary arm's re-ask rate is worse than the "
            "shadow arm's (overall or for a tool) or a tool was sent back to never, 0 otherwise; "
            "prints one line why"
        ),
    )
    parser.add_argument(
        "--reask-margin",
        type=_margin,
        default=0.0,
        metavar="POINTS",
        help=(
            "percentage points the canary's re-ask rate may exceed the shadow's before it is "
            "worse: worse when the 95%% interval of the difference lies above it (default: 0)"
        ),
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("toolstop-report"),
        help="output folder for report.json, report.html, chart.png (default: ./toolstop-report)",
    )


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 100:
        msg = f"--examples is a whole number from 0 to 100, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _samples(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 1000:
        msg = f"--judge-samples is a whole number from 1 to 1000, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


CHECK_FAILED = 3
"""`--check`'s exit code when the canary is worse or a tool was sent back (1 and 2 keep their
meanings: the database failed while read, a wrong argument)."""


def _margin(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 100:  # NaN too
        msg = f"--reask-margin is percentage points from 0 to 100 (like 1.5), got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


PRICE_MAX = 10_000.0
"""The highest price per million tokens `--price-in` and the others take (no model costs more;
a larger one is a typo, and 1e308 tokens' worth overflows to infinity)."""


def _price(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= PRICE_MAX:  # NaN and infinity too
        msg = (
            f"a price per million tokens is a number >= 0 and <= {PRICE_MAX:,.0f} (like 2.5), "
            f"got {text!r}"
        )
        raise argparse.ArgumentTypeError(msg)
    return value


def run_report(args: argparse.Namespace, out: TextIO) -> int:
    """Run `toolstop report` with parsed `args`; return the exit code."""
    from toolstop import __version__
    from toolstop.report.examples import messages_at, read_examples
    from toolstop.report.levels import grouped, thread_runs
    from toolstop.report.reader import log_run_ends, open_database, parse_time, redact
    from toolstop.report.reask_judge import ReAskSample
    from toolstop.report.render import render_chart, render_html, render_summary, write_json
    from toolstop.report.summary import REPORT_VERSION, Summary, with_prices
    from toolstop.report.tally import Distinct

    sources = (args.db, args.from_, args.log)  # what an error may quote: masked (`shown`)
    writes = frozenset(t.strip() for t in args.writes.split(",") if t.strip())
    judge = _judge_model(args)
    if judge is False:
        return 2
    what_if = what_if_of(args, writes)
    if what_if is False:
        return 2
    if args.template and not args.from_:
        print("toolstop report: --template needs --from (recorded conversations)", file=sys.stderr)
        return 2
    if args.from_ and args.since:
        print(
            "toolstop report: --since needs --db or --log (a recording gives no run its time)",
            file=sys.stderr,
        )
        return 2
    summary = Summary(
        writes,
        examples=args.examples,
        sample=args.judge_samples if judge is not None else 0,
        reask_margin=args.reask_margin / 100,
    )
    extra: dict[str, Any] = {}
    examples: dict[str, list[dict[str, Any]]] | None = None
    pairs: dict[str, list[dict[str, Any]]] = {}
    reasks: dict[str, dict[str, Any]] | None = None  # the re-ask judge's steps (--db only)
    try:
        since = parse_time(args.since) if args.since else None
        with ExitStack() as stack:
            if args.db:
                database = stack.enter_context(open_database(args.db))
                threads = open_runs = seen = copies = unreadable = 0
                asked = ReAskSample(args.judge_samples) if judge is not None else None
                for thread_id, namespaces in grouped(database.threads()):
                    # every level of a multi-level agent, each record once (report.levels)
                    read = thread_runs(database, thread_id, namespaces, since=since)
                    seen += 1
                    threads += bool(read.ends)
                    open_runs += len(read.in_progress)
                    copies += read.copies
                    unreadable += bool(read.unreadable)  # a thread once, however many levels
                    for _, current in read.in_progress:  # its pending calls count toward them
                        summary.candidates.add_open(current, thread_id)
                    for end in read.ends:
                        summary.add(end)
                        if asked is not None:
                            asked.add(end)
                extra = {"threads": threads, "open_runs": open_runs}
                if copies:
                    extra["copied_records"] = copies
                if seen and not threads and not open_runs and since is None:
                    print(
                        f"toolstop report: {seen} thread(s) and no toolstop run record: an agent "
                        "without toolstop? read its conversations with --from instead of --db",
                        file=sys.stderr,
                    )
                if args.examples:
                    examples = read_examples(
                        database,
                        summary.candidates.kept,
                        summary.candidates.cut_shown(),
                        limit=args.examples,
                    )
                if judge is not None:
                    signalling = set(summary.stops) | set(summary.would_stops)
                    sampled = summary.candidates.sampled.runs()
                    pairs = read_examples(
                        database, {t: e for t, e in sampled.items() if t not in signalling}
                    )
                if asked is not None:
                    reasks = asked.read(lambda end: messages_at(database, end))
                if unreadable:
                    extra["unreadable_threads"] = unreadable
                    print(
                        f"toolstop report: {unreadable} thread(s) could not be read "
                        "(checkpoints written with a serializer toolstop cannot decode, "
                        "undecodable, or not of a checkpoint's shape); their runs are not counted",
                        file=sys.stderr,
                    )
                rejected = [database.rejected]
                source = {"db": redact(args.db)}
            elif args.from_:
                source, extra, examples, pairs = read_from_args(
                    args, summary, judge is not None, what_if or None
                )
                rejected = [0]
            else:
                stream: IO[bytes] | IO[str] = (
                    getattr(sys.stdin, "buffer", sys.stdin)
                    if args.log == "-"
                    else _open_log(args.log, stack)
                )
                skipped, rejected = [0], [0]
                thread_ids = Distinct(THREADS_COUNTED)  # bounded: hashes, up to a cap
                for end in log_run_ends(stream, since=since, skipped=skipped, rejected=rejected):
                    summary.add(end)
                    if end.thread_id is not None:
                        thread_ids.add(end.thread_id)
                # a log has no checkpoints: runs still open are not known from it
                extra = {"threads": len(thread_ids), "open_runs": None, "skipped_lines": skipped[0]}
                if thread_ids.more:
                    extra["threads_at_least"] = True
                source = {"log": args.log}
                if skipped[0]:
                    print(
                        f"toolstop report: {skipped[0]} line(s) of {args.log} are not run records "
                        "(other log lines, toolstop's warnings, not JSON, JSON nested too deeply "
                        "or lines over 64 MiB) and were skipped",
                        file=sys.stderr,
                    )
        if rejected[0]:
            extra["unreadable_runs"] = rejected[0]
            print(
                f"toolstop report: {rejected[0]} run record(s) hold a number out of range "
                "(negative, not finite, absurd or not a number) or a list that is not one; "
                "they are not counted",
                file=sys.stderr,
            )
    except (ToolstopConfigError, ValueError) as error:  # ValueError: an unknown format
        print(f"toolstop report: {shown(str(error), *sources)}", file=sys.stderr)
        return 2
    except OSError as error:
        reason = error.strerror or type(error).__name__
        print(
            f"toolstop report: cannot read {shown(str(args.from_ or args.db), *sources)}: "
            f"{shown(reason, *sources)}",
            file=sys.stderr,
        )
        return 2
    except Exception as error:  # a database gone mid-read: one sentence, no traceback
        print(f"toolstop report: reading failed: {failure(error, *sources)}", file=sys.stderr)
        return 1
    document: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "source": source,
        "since": since.isoformat() if since else None,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "toolstop_version": __version__,
        **extra,
        **summary.document(),
    }
    if examples is not None:
        document["candidates"] = [
            {**entry, "examples": examples.get(entry["tool"], [])}
            for entry in document["candidates"]
        ]
    elif args.examples:
        print(
            "toolstop report: --examples needs --db or --from (a --log holds no messages); "
            "none written",
            file=sys.stderr,
        )
    if judge is not None:
        judged = _run_judge(judge, args, document, pairs)
        if judged is None:
            return 1
        document = judged
        if reasks is None:  # --from: a recording holds no canary's records
            print(
                "toolstop report: re-asks are judged only with --db (a canary's records and "
                "their checkpoints); none judged from --from",
                file=sys.stderr,
            )
        elif document.get("arms"):
            document = _run_reask_judge(judge, args, document, reasks)
    if what_if:
        document["what_if"] = what_if.document(args.price_in, args.price_out)
    if args.template:
        from toolstop.report.template import template_from

        tool = args.template.strip()
        draft = _drafting(judge, args, tool) if judge is not None else None
        document["template"] = template_from(
            args.from_, tool, format=args.format, draft=draft
        ).document()
        advised = next((e for e in document["candidates"] if e["tool"] == tool), None)
        if advised is not None and advised.get("advice") == "cut_short":  # said beside it
            document["template"]["advice"] = "cut_short"
            document["template"]["advice_why"] = advised.get("advice_why")
    if any(
        price is not None
        for price in (
            args.price_in,
            args.price_out,
            args.narrator_price_in,
            args.narrator_price_out,
        )
    ):
        narrator = None
        if args.narrator_price_in is not None or args.narrator_price_out is not None:
            narrator = (args.narrator_price_in or 0.0, args.narrator_price_out or 0.0)
        document = with_prices(
            document, args.price_in or 0.0, args.price_out or 0.0, narrator=narrator
        )
    written = write_outputs(
        "toolstop report",
        args.out,
        json_name="report.json",
        write_json=lambda path: write_json(document, path),
        render_chart=lambda path: render_chart(document, path),
        render_html=lambda chart, path: render_html(document, chart, path),
    )
    if written is None:
        return 2
    render_summary(document, out)
    if what_if:
        from toolstop._printable import printable
        from toolstop.report.what_if import what_if_lines

        for line in what_if_lines(document["what_if"]):
            print(printable(line), file=out)
    if args.template:
        from toolstop._printable import printable
        from toolstop.report.template import template_lines

        for line in template_lines(document["template"]):
            print(printable(line), file=out)
    print("wrote " + ", ".join(str(path) for path in written), file=out)
    if args.check:
        from toolstop._printable import printable
        from toolstop.report.arms import arms_check

        passed, why = arms_check(document)
        print(printable(f"check {'passed' if passed else 'failed'}: {why}"), file=out)
        return 0 if passed else CHECK_FAILED
    return 0


def _open_log(path: str, stack: ExitStack) -> BinaryIO:
    """`--log PATH` opened as `--from` opens a log: a regular file only (never a FIFO or a
    device, which would hang or never end), read as bytes, line by line with a cap."""
    from toolstop.report.sources._base import open_regular

    try:
        return stack.enter_context(open_regular(path))
    except OSError as error:
        msg = f"cannot read {path}: {error.strerror}"
        raise ToolstopConfigError(msg) from None


_CLIENT_OPTIONS = {"openai", "groq", "anthropic", "mistralai"}
"""Providers whose clients take `timeout` and `max_retries` (a judge call never hangs)."""


def _terminal() -> bool:
    """Whether stdin is a terminal (someone can answer a question)."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):  # closed or detached
        return False


def _judge_model(args: argparse.Namespace) -> Any:
    """The judge's chat model, `None` without `--judge`, `False` after a refusal (printed)."""
    if not args.judge:
        return None
    if not args.db and not args.from_:
        print(
            "toolstop report: --judge needs --db or --from (a --log holds no messages)",
            file=sys.stderr,
        )
        return False
    if not args.yes and not _terminal():
        print(
            "toolstop report: --judge calls a model and asks first, but stdin is not a "
            "terminal: pass --yes to judge without asking",
            file=sys.stderr,
        )
        return False
    from toolstop.models import chat_model

    provider = args.judge.partition(":")[0]
    options: dict[str, Any] = (
        {"timeout": 60, "max_retries": 2} if provider in _CLIENT_OPTIONS else {}
    )
    try:
        return chat_model(args.judge, base_url=args.base_url, option="--judge", **options)
    except ToolstopConfigError as error:
        print(f"toolstop report: {shown(str(error), args.base_url)}", file=sys.stderr)
        return False


_HOST_FIELDS = ("openai_api_base", "anthropic_api_url", "base_url", "api_base", "endpoint")
"""Where LangChain's chat models keep the URL they call (the provider's default when unset)."""


def _judge_host(model: Any, args: argparse.Namespace) -> str:
    """The host the judge's calls go to, safe to print: `--base-url` (and whose key it gets),
    the client's own URL (a `*_BASE_URL` in the environment), or the provider's default."""
    from toolstop.models import KEY_ENV

    provider = args.judge.partition(":")[0]
    if args.base_url:
        env = KEY_ENV.get(provider)
        key = ""
        if env:  # the key toolstop knows the client reads; else the provider's own rules
            key = f", sent the environment's {env}" if os.environ.get(env) else ", sent no key"
        return f"{shown(without_password(args.base_url))}{key}"
    for field in _HOST_FIELDS:
        url = getattr(model, field, None)
        if isinstance(url, str) and url:
            return shown(without_password(url))
    return f"the {shown(provider)} provider's default host"


def _drafting(model: Any, args: argparse.Namespace, tool: str) -> Any:
    """`template_from`'s `draft` for `--template` with `--judge`: the model drafts the template
    in one call, announced (and, without `--yes`, asked) first; `None` when declined."""
    from toolstop._printable import printable

    print(
        f"toolstop report: the judge drafts the template of {printable(tool[:200])} in 1 call "
        f"to {shown(args.judge)} at {_judge_host(model, args)}",
        file=sys.stderr,
    )
    if not args.yes and not _yes("draft now?"):
        print("toolstop report: not drafted; the deterministic template", file=sys.stderr)
        return None
    return (model, args.judge, _failure_text)


def _yes(question: str) -> bool:
    """The user's answer to `question` at the terminal (a yes only for `y` or `yes`)."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().casefold() in ("y", "yes")


def _failure_text(error: BaseException) -> str:
    """A failed judge call, as the report may quote it: masked, at most 300 characters."""
    from toolstop.report.examples import mask_secrets

    return mask_secrets(failure(error))[:300]


def _judging(
    args: argparse.Namespace,
    calls: int,
    label: str,
    what: str,
    declined: str,
    run: Callable[[Callable[[], None]], dict[str, dict[str, Any]]],
) -> dict[str, dict[str, Any]] | None:
    """`run(advance)`'s judgements once the user agreed (`None`, said, when they declined),
    with a progress line (`label`) while it runs and the count of its failed calls (`what`
    calls) said after."""
    from toolstop.cli._output import progress

    if calls and not args.yes and not _yes("judge now?"):
        print(f"toolstop report: {declined}", file=sys.stderr)
        return None
    advance, stop = progress(label, calls, sys.stderr.isatty())
    try:
        judged = run(advance)
    finally:
        stop()
    failed = sum(entry["failed"] for entry in judged.values())
    if failed:
        print(
            f"toolstop report: {failed} of {calls} {what} call(s) failed; the report says how many",
            file=sys.stderr,
        )
    return judged


def _run_judge(
    model: Any, args: argparse.Namespace, document: dict[str, Any], pairs: dict[str, Any]
) -> dict[str, Any] | None:
    """`document` with the model judge's counts; `None` when the user declined (printed)."""
    from toolstop.report.model_judge import estimate_tokens, judge_messages, judge_pairs

    order = [e["tool"] for e in document["candidates"] if not e["signals"]]
    chosen = {tool: pairs[tool] for tool in order if pairs.get(tool)}
    calls, tokens = estimate_tokens(
        judge_messages(tool, pair) for tool, items in chosen.items() for pair in items
    )
    print(
        f"toolstop report: the judge makes {calls} call(s) to {shown(args.judge)} "
        f"at {_judge_host(model, args)} "
        f"({len(chosen)} tool(s), at most {args.judge_samples} each), about {tokens} tokens "
        "in all (an estimate)",
        file=sys.stderr,
    )
    judged = _judging(
        args,
        calls,
        "judging",
        "judge",
        "not judged; nothing written",
        lambda advance: judge_pairs(model, args.judge, chosen, _failure_text, advance),
    )
    if judged is None:
        return None
    failed = sum(entry["failed"] for entry in judged.values())
    errors = [entry["error"] for entry in judged.values() if entry["error"]]
    return {
        **document,
        "model_judge": {
            "model": args.judge,
            "samples_per_tool": args.judge_samples,
            "calls": calls,
            "estimated_tokens": tokens,
            "failed": failed,
            "unparseable": sum(entry["unparseable"] for entry in judged.values()),
            "error": errors[0] if errors else None,
        },
        "candidates": [
            {**entry, "model_judge": judged[entry["tool"]]} if entry["tool"] in judged else entry
            for entry in document["candidates"]
        ],
    }


def _run_reask_judge(
    model: Any, args: argparse.Namespace, document: dict[str, Any], read: dict[str, Any]
) -> dict[str, Any]:
    """`document` with `arms.model_judge`: the model's reading of the sampled re-asks, after
    its own estimate and question (`document` unchanged when the user declines, printed)."""
    from toolstop.report.model_judge import estimate_tokens
    from toolstop.report.reask_judge import judge_steps, messages_of_steps

    calls, tokens = estimate_tokens(messages_of_steps(read))
    skipped = sum(entry["not_reconstructed"] for entry in read.values())
    unbuilt = f"; {skipped} sampled could not be rebuilt from the checkpoints" if skipped else ""
    print(
        f"toolstop report: the judge makes {calls} call(s) on re-asks to {shown(args.judge)} "
        f"at {_judge_host(model, args)} ({len(read)} arm(s), at most {args.judge_samples} "
        f"each{unbuilt}), about {tokens} tokens in all (an estimate)",
        file=sys.stderr,
    )
    by_arm = _judging(
        args,
        calls,
        "judging re-asks",
        "re-ask judge",
        "re-asks not judged; the deterministic reading only",
        lambda advance: judge_steps(model, read, document["arms"], _failure_text, advance),
    )
    if by_arm is None:
        return document
    judged = {
        "model": args.judge,
        "samples_per_arm": args.judge_samples,
        "calls": calls,
        "estimated_tokens": tokens,
        "by_arm": by_arm,
    }
    return {**document, "arms": {**document["arms"], "model_judge": judged}}
