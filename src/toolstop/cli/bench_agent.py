"""The command-line shell of `toolstop bench --agent`.

`toolstop bench --agent MODULE:FACTORY --tools MODULE:ATTR --questions FILE [--model P:N]
[--base-url URL]`."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from toolstop._printable import printable
from toolstop.cli._output import progress, versions, write_outputs
from toolstop.cli._run_config import run_config
from toolstop.errors import ToolstopConfigError

__all__ = ["run_bench_agent"]

# Flags of the simulated workload, with their defaults: they do not apply to --agent.
_WORKLOAD_FLAGS = {
    "queries": ("--queries", 100),
    "mix": ("--mix", "60/25/15"),
    "payload_kb": ("--payload-kb", 4.0),
    "parallel": ("--parallel", 0.2),
    "seed": ("--seed", 0),
    "overhead": ("--overhead", False),
}

NOTES = """<p>Your agent, your tools and your questions, once per mode in one process. <i>never</i>
is the plain loop (toolstop records what it would have stopped, <code>would_stop</code>);
<i>hard</i> relays a stopping tool's text; <i>polish</i> makes one narrating call. An error is one
question's run that raised (listed in bench.json).</p>"""


def _usage(args: argparse.Namespace) -> str | None:
    if not (args.agent and args.tools and args.questions):
        return "--agent MODULE:FACTORY, --tools MODULE:ATTR and --questions FILE go together"
    for key, (flag, default) in _WORKLOAD_FLAGS.items():
        if getattr(args, key) != default:
            return f"{flag} shapes the simulated workload; it does not apply to --agent"
    if args.latency_ms < 0:
        return "--latency-ms must be >= 0"
    if args.repeat < 1:
        return f"--repeat must be at least 1, got {args.repeat}"
    return None


def run_bench_agent(args: argparse.Namespace, out: TextIO) -> int:
    """Run `toolstop bench --agent ...` with parsed `args`; return the exit code."""
    from toolstop._check.factory import load_factory, load_tools
    from toolstop.bench.agent import ToolPickingModel, load_questions, run_agent_bench
    from toolstop.bench.report import (
        ratio_text,
        render_chart,
        render_html,
        render_table,
        write_json,
    )
    from toolstop.models import chat_model

    problem = _usage(args)
    if problem is not None:
        print(f"toolstop bench: {problem}", file=sys.stderr)
        return 2
    try:
        extra = run_config(args)
        factory = load_factory(args.agent)
        tools = load_tools(args.tools)
        questions = load_questions(args.questions)
        if args.model:
            model = chat_model(args.model, base_url=args.base_url)
        else:
            model = ToolPickingModel(tools=tools, latency_s=args.latency_ms / 1000)
    except ToolstopConfigError as error:
        print(f"toolstop bench: {error}", file=sys.stderr)
        return 2
    advance, stop = progress("toolstop bench", len(questions) * args.repeat, sys.stderr.isatty())
    try:
        totals, errors = run_agent_bench(
            factory,
            tools,
            questions,
            model=model,
            repeat=args.repeat,
            on_question=advance,
            run_config=extra,
        )
    except ToolstopConfigError as error:
        print(f"toolstop bench: {error}", file=sys.stderr)
        return 2
    finally:
        stop()
    rows = [t.as_dict() for t in totals]
    failing = [t for t in totals if t.tools_failing]
    unrouted = sum(t.unrouted for t in totals)
    withheld = _withheld(totals, unrouted)
    document: dict[str, Any] = {
        "settings": {
            "agent": factory.name,
            "tools": [t.name for t in tools],
            "questions": len(questions),
            "questions_file": str(args.questions),
            "model": args.model or "simulated",
            "latency_ms": None if args.model else args.latency_ms,
            "repeat": args.repeat,
            # the keys only: a passenger id or a tenant is not written to a file
            "configurable": sorted(extra.get("configurable", {})),
        },
        "versions": versions(),
        "configs": rows,
        "headline": _headline(rows, withheld),
        "withheld": withheld,
        "stops_from_failures": stops_from_failures(rows),
        "errors": errors,
    }
    written = write_outputs(
        "toolstop bench",
        args.out,
        json_name="bench.json",
        write_json=lambda path: write_json(document, path),
        render_chart=lambda path: render_chart(rows, path),
        render_html=lambda chart, path: render_html(
            document, chart, path, columns=table_columns(rows), notes=NOTES
        ),
    )
    if written is None:
        return 2
    repeats = f" x {args.repeat} repeats" if args.repeat > 1 else ""
    print(
        f"toolstop bench --agent {factory.name}: {_plural(len(questions), 'question')}"
        f"{repeats}, model: {args.model or 'simulated'}",
        file=out,
    )
    render_table(rows, out, columns=table_columns(rows))
    for row in rows:
        rules = ", ".join(f"{printable(rule)} {count}" for rule, count in row["rules"].items())
        shadow = (
            f" (would have stopped: {row['would_stop']})" if row["behaviour"] == "never" else ""
        )
        print(f"{row['behaviour']} rules: {rules}{shadow}", file=out)
    stops = sum(row["would_stop"] for row in rows) + sum(
        count for row in rows for rule, count in row["rules"].items() if rule not in _NO_STOP
    )
    if unrouted:
        print(f"the agent has no toolstop router: {_no_router(unrouted)}", file=out)
    elif not stops and not failing and len(errors) < runs_of(rows):  # a raising tool: no signal
        print(
            "no tool result signalled a stop: do your tools return (content, signal(...))? "
            'a tool declared with response_format="content_and_artifact" returns the text '
            "for the model and signal(Outcome.COMPLETED) (or another outcome) as its artifact",
            file=out,
        )
    for router, ratios in document["headline"].items():
        for mode in _HEADLINE_MODES:
            text = ratio_text(ratios, mode, args.repeat)
            if text:
                print(f"{router}, {mode} vs never: {text}", file=out)
    for mode, reason in withheld.items():
        print(f"no headline for {mode} vs never: {reason}", file=out)
    for mode, failures in document["stops_from_failures"].items():
        print(f"warning: {_failure_note(mode, failures)}", file=out)
    for failed in errors[:5]:
        again = f", repeat {failed['repeat'] + 1}" if args.repeat > 1 else ""
        print(
            f"error: question {failed['index']} {failed['question'][:60]!r} ({failed['mode']}"
            f"{again}): {printable(str(failed['error']))}",
            file=out,
        )
    if len(errors) > 5:
        print(f"... {len(errors) - 5} more errors in bench.json", file=out)
    for total in failing:
        print(
            f"{total.behaviour}: {total.tool_errors} of {total.tool_calls} tool calls failed: "
            f"the tool raised (first: {printable(str(total.first_tool_error))}); the figures "
            "above measure "
            "failing tools, not savings",
            file=out,
        )
    print("wrote " + ", ".join(str(path) for path in written), file=out)
    return 1 if failing or errors or unrouted else 0


_HEADLINE_MODES = ("hard", "polish")
"""The modes the headline compares with never."""


def _no_router(runs: int) -> str:
    return (
        f"in {runs} run{'s' if runs != 1 else ''} a tool result signalled a stop but the run "
        "kept no stop_record, so nothing stopped and every mode measured the plain loop; add "
        "StopOnArtifact(policy) to your create_agent middleware, or build with "
        "build_react_graph(model, tools, policy=policy)"
    )


def _withheld(totals: list[Any], unrouted: int) -> dict[str, str]:
    """Why a mode's ratios vs never are not a saving: `{mode: reason}` (empty: none withheld).

    A mode whose runs raised (the ratios would compare runs that did not all finish), whose
    tools mostly failed, or an agent without a toolstop router (nothing stopped); a reason of
    never's withholds every mode."""
    if unrouted:
        return dict.fromkeys(_HEADLINE_MODES, "the agent has no toolstop router")
    reasons: dict[str, str] = {}
    for total in totals:
        if total.errors:
            reasons[total.behaviour] = (
                f"{total.errors} of {total.queries} {total.behaviour} runs raised (listed in "
                "bench.json); ratios over runs that did not all finish are not savings"
            )
        elif total.tools_failing:
            reasons[total.behaviour] = (
                f"{total.tool_errors} of {total.tool_calls} {total.behaviour} tool calls failed"
            )
    if "never" in reasons:
        return dict.fromkeys(_HEADLINE_MODES, f"never: {reasons['never']}")
    return {mode: reasons[mode] for mode in _HEADLINE_MODES if mode in reasons}


def _headline(rows: list[dict[str, Any]], withheld: dict[str, str]) -> dict[str, Any]:
    """hard and polish vs never, without the modes `withheld`."""
    from toolstop.bench.report import headline

    modes = [m for m in _HEADLINE_MODES if m not in withheld]
    return headline(rows, modes) if modes else {}


_NO_STOP = ("none", "error", "no stop_record")

REVIEWS_COLUMN = ("reviews", "reviews")
"""The table's column of your own human review's interrupts (each approved), shown when a run
had one."""

FAILURE_RULES = ("fatal", "policy_block", "retry_budget", "step_budget")
"""Stop rules that end a run on a failure, not an answer: fewer model calls there are no
saving to claim."""


def table_columns(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The bench table's columns: `reviews` too when your own review paused a run."""
    from toolstop.bench.report import AGENT_COLUMNS

    reviewed = any(row.get("reviews") for row in rows)
    return [*AGENT_COLUMNS, *([REVIEWS_COLUMN] if reviewed else [])]


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def stops_from_failures(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per mode whose stops (or, under never, whose tool calls) include failures: how many
    stops it made, how many ended on a failure rule (by rule), and its tool calls that raised.
    Empty when every stop was an answer and no tool raised."""
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        rules = row.get("rules") or {}
        failed = {rule: rules[rule] for rule in FAILURE_RULES if rules.get(rule)}
        if failed or row.get("tool_errors"):
            found[str(row["behaviour"])] = {
                "stops": sum(n for rule, n in rules.items() if rule not in _NO_STOP),
                "rules": failed,
                "tool_errors": int(row.get("tool_errors") or 0),
                "tool_calls": int(row.get("tool_calls") or 0),
            }
    return found


def _failure_note(mode: str, failures: dict[str, Any]) -> str:
    """One sentence: where `mode`'s stops came from, when some came from failures."""
    parts = []
    if failures["rules"]:
        by_rule = ", ".join(f"{rule} {n}" for rule, n in failures["rules"].items())
        parts.append(
            f"{sum(failures['rules'].values())} of {_plural(failures['stops'], 'stop')} "
            f"ended on a failure ({by_rule})"
        )
    if failures["tool_errors"]:
        parts.append(
            f"{failures['tool_errors']} of {_plural(failures['tool_calls'], 'tool call')} raised"
        )
    what = (
        "the baseline measures failed tools too"
        if mode == "never"
        else "that part of the saving comes from failures, not from answers"
    )
    return (
        f"{mode}: {' and '.join(parts)}: {what} (a tool that reads the run's config needs "
        "--configurable KEY=VALUE; one that fails on the simulated model's arguments needs "
        "examples in its schema)"
    )


def runs_of(rows: list[dict[str, Any]]) -> int:
    """Runs attempted over every mode."""
    return sum(int(row["queries"]) for row in rows)
