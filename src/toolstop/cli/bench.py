"""`toolstop bench`: the savings of per-call stops, measured side by side in one process."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from toolstop.bench.report import PRICES
from toolstop.cli._output import progress, versions, write_outputs
from toolstop.cli._run_config import add_run_config_arguments
from toolstop.errors import ToolstopConfigError
from toolstop.models import chat_model

__all__ = ["add_bench_parser", "parse_mix", "run_bench_command"]

DEFAULT_MIX = "60/25/15"


def parse_mix(text: str) -> dict[str, float]:
    """`"60/25/15"` -> success / retryable / fatal weights; a clear error for anything else."""
    parts = text.split("/")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 3 or any(v < 0 for v in values) or not sum(values):
        msg = f"--mix takes three non-negative weights success/retryable/fatal, got {text!r}"
        raise ToolstopConfigError(msg)
    if values[0] + values[2] == 0:
        msg = "--mix needs some success or fatal outcomes, or no query would ever end"
        raise ToolstopConfigError(msg)
    return dict(zip(("success", "retryable", "fatal"), values, strict=True))


def add_bench_parser(commands: Any) -> None:
    """Register `toolstop bench` on the CLI's subparsers."""
    parser = commands.add_parser(
        "bench",
        help="measure model calls, tokens and time per stop configuration",
        description=(
            "Run a query set through never (the plain ReAct loop), static return_direct, hard "
            "and polish, on the hand-built graph and the create_agent middleware, side by side "
            "in one process, on a simulated model. Writes a table, bench.json, chart.png and "
            "report.html. With --agent, --tools and --questions: your own agent factory, your "
            "tools and your questions under never, hard and polish instead."
        ),
    )
    parser.add_argument("--queries", type=int, default=100, help="queries per configuration")
    parser.add_argument(
        "--mix", default=DEFAULT_MIX, help="success/retryable/fatal weights (default 60/25/15)"
    )
    parser.add_argument(
        "--payload-kb", type=float, default=4.0, help="size of a successful result (KB)"
    )
    parser.add_argument(
        "--parallel", type=float, default=0.2, help="share of queries with two calls per turn"
    )
    parser.add_argument(
        "--latency-ms", type=float, default=20.0, help="simulated model latency per call"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run the queries (or your questions) N times; the wall-time ratios come with "
        "their spread over the repeats",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-out"), help="output folder")
    parser.add_argument(
        "--model", metavar="PROVIDER:NAME", help="a real model instead of the simulated one"
    )
    parser.add_argument("--base-url", help="an OpenAI-compatible server for --model")
    parser.add_argument(
        "--agent",
        metavar="MODULE:FACTORY",
        help="measure your own agent: FACTORY(model, tools, policy), importable from here",
    )
    parser.add_argument(
        "--tools", metavar="MODULE:ATTR", help="with --agent: your list of LangChain tools"
    )
    parser.add_argument(
        "--questions",
        type=Path,
        metavar="FILE",
        help='with --agent: JSONL ({"question": ...} a line) or plain text, one question a line',
    )
    for flag, default, what in (
        ("--price-in", PRICES["model"][0], "the agent model's price per million input tokens"),
        ("--price-out", PRICES["model"][1], "the agent model's price per million output tokens"),
        ("--narrator-price-in", PRICES["narrator"][0], "the narrator's, input"),
        ("--narrator-price-out", PRICES["narrator"][1], "the narrator's, output"),
    ):
        parser.add_argument(
            flag, type=float, default=default, metavar="PRICE", help=f"{what} (default {default:g})"
        )
    add_run_config_arguments(parser)
    parser.add_argument(
        "--overhead",
        action="store_true",
        help="also measure hook overhead, decide() scaling, concurrent throughput and RSS "
        "(written to overhead.json too)",
    )
    parser.add_argument(
        "--overhead-only",
        action="store_true",
        help="measure only the overhead (takes minutes); writes overhead.json",
    )


def run_bench_command(args: argparse.Namespace, out: TextIO) -> int:
    """Run `toolstop bench` with parsed `args`; return the exit code."""
    if args.agent or args.tools or args.questions:
        from toolstop.cli.bench_agent import run_bench_agent

        return run_bench_agent(args, out)
    if args.configurable or args.config is not None:
        print(
            "toolstop bench: --configurable and --config go with --agent (the simulated "
            "workload reads no run config)",
            file=sys.stderr,
        )
        return 2
    from toolstop.bench.report import (
        cost_lines,
        headline,
        priced,
        ratio_text,
        render_chart,
        render_html,
        render_table,
        write_json,
    )
    from toolstop.bench.runner import available_configs, run_bench
    from toolstop.bench.workload import make_queries, payload

    try:
        mix = parse_mix(args.mix)
        _check_numbers(args)
        model = chat_model(args.model, base_url=args.base_url) if args.model else None
    except ToolstopConfigError as error:
        print(f"toolstop bench: {error}", file=sys.stderr)
        return 2
    try:  # before the run: a folder that cannot be written fails now, not after minutes
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"toolstop bench: cannot write to {args.out}: {error.strerror}", file=sys.stderr)
        return 2
    if args.overhead_only:
        return _overhead_only(args.out, out)
    queries = make_queries(args.queries, mix=mix, parallel_share=args.parallel, seed=args.seed)
    # the narrator is a second simulated model: not measured beside a real one
    configs = [c for c in available_configs() if model is None or not c.narrator]
    prices = {
        "model": (args.price_in, args.price_out),
        "narrator": (args.narrator_price_in, args.narrator_price_out),
    }
    advance, stop = progress("toolstop bench", len(queries) * args.repeat, sys.stderr.isatty())
    try:
        totals = run_bench(
            queries,
            configs,
            page=payload(args.payload_kb, args.seed),
            latency_s=args.latency_ms / 1000,
            model=model,
            repeat=args.repeat,
            on_query=advance,
        )
    except Exception as error:  # a provider down mid-run: one sentence, no traceback
        print(f"toolstop bench: the run failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    finally:
        stop()
    rows = priced([t.as_dict() for t in totals], prices)
    document: dict[str, Any] = {
        "settings": {
            "queries": args.queries,
            "mix": mix,
            "payload_kb": args.payload_kb,
            "parallel": args.parallel,
            "latency_ms": args.latency_ms if model is None else None,
            "model": args.model or "simulated",
            "seed": args.seed,
            "repeat": args.repeat,
            "prices": {name: list(pair) for name, pair in prices.items()},
        },
        "versions": versions(),
        "configs": rows,
        "headline": headline(rows),
    }
    if args.overhead:
        from toolstop.bench.overhead import measure_overhead, write_overhead

        document["overhead"] = measure_overhead()
        write_overhead({"versions": document["versions"], **document["overhead"]}, args.out)
    written = write_outputs(
        "toolstop bench",
        args.out,
        json_name="bench.json",
        write_json=lambda path: write_json(document, path),
        render_chart=lambda path: render_chart(rows, path),
        render_html=lambda chart, path: render_html(document, chart, path),
    )
    if written is None:
        return 1
    render_table(rows, out)
    for router, ratios in document["headline"].items():
        print(f"{router}, hard vs never: {ratio_text(ratios, 'hard', args.repeat)}", file=out)
    for line in cost_lines(rows, prices):
        print(line, file=out)
    if args.overhead:
        _print_overhead(document["overhead"], out)
    print(f"wrote {args.out / 'bench.json'}, {args.out / 'report.html'}", file=out)
    return 0


def _check_numbers(args: argparse.Namespace) -> None:
    """ToolstopConfigError naming the first numeric flag out of range."""
    limits = [
        ("--queries", args.queries >= 1, "at least 1", args.queries),
        ("--repeat", args.repeat >= 1, "at least 1", args.repeat),
        ("--parallel", 0 <= args.parallel <= 1, "between 0 and 1", args.parallel),
        ("--latency-ms", args.latency_ms >= 0, "0 or more", args.latency_ms),
        ("--payload-kb", args.payload_kb > 0, "more than 0", args.payload_kb),
        *(
            (flag, value >= 0, "0 or more", value)
            for flag, value in (
                ("--price-in", args.price_in),
                ("--price-out", args.price_out),
                ("--narrator-price-in", args.narrator_price_in),
                ("--narrator-price-out", args.narrator_price_out),
            )
        ),
    ]
    for flag, valid, wanted, value in limits:
        if not valid:
            msg = f"{flag} must be {wanted}, got {value}"
            raise ToolstopConfigError(msg)


def _overhead_only(folder: Path, out: TextIO) -> int:
    from toolstop.bench.overhead import measure_overhead, write_overhead

    document = {"versions": versions(), **measure_overhead()}
    folder.mkdir(parents=True, exist_ok=True)
    write_overhead(document, folder)
    _print_overhead(document, out)
    print(f"wrote {folder / 'overhead.json'}", file=out)
    return 0


def _met(met: bool) -> str:
    return "met" if met else "not met"


def _print_overhead(figures: dict[str, Any], out: TextIO) -> None:
    from toolstop.bench.overhead import (
        CHOSEN,
        FLOOR_WITH_STATE,
        TARGET_THROUGHPUT_VS_FLOOR,
        TARGET_VS_FLOOR,
    )

    wall = figures["wall_per_run_no_stop"]
    print(
        f"overhead (nothing stops, 3 tool turns, medians of {wall['runs']} interleaved runs):",
        file=out,
    )
    for name, values in wall["figures"].items():
        median, ratio = values["median_ms"], values["vs_create_agent"]
        print(f"  {name:48s} {median:8.3f} ms  {ratio:.3f}x", file=out)
    chosen = wall["figures"].get(CHOSEN, {})
    if "vs_floor" in chosen:
        print(
            f"  StopOnArtifact vs the floor of its design (its three hooks, empty): "
            f"{chosen['vs_floor']:.3f}x (target <= {TARGET_VS_FLOOR:.3f}x: "
            f"{_met(chosen['vs_floor'] <= TARGET_VS_FLOOR)})",
            file=out,
        )
    state = wall["figures"].get(FLOOR_WITH_STATE, {})
    if "vs_floor" in state:
        print(
            f"  that floor with toolstop's state vs the floor: {state['vs_floor']:.3f}x "
            "(what the state costs)",
            file=out,
        )
    if "vs_floor_with_state" in chosen:
        print(
            f"  StopOnArtifact vs that floor with toolstop's state: "
            f"{chosen['vs_floor_with_state']:.3f}x (toolstop's own work)",
            file=out,
        )
    scaling = figures["decide_scaling"]["figures"]
    print(
        f"  decide(): {scaling['10_messages_us']} us at 10 messages, "
        f"{scaling['10000_messages_us']} us at 10,000 ({scaling['ratio_10000_vs_10']}x)",
        file=out,
    )
    throughput = figures["concurrent_throughput"]
    for name, values in throughput["figures"].items():
        ratio, runs = values["vs_create_agent"], values["runs_per_s"]
        print(
            f"  {throughput['concurrent']} concurrent, {name:48s} {runs:8.1f} runs/s  {ratio:.3f}x",
            file=out,
        )
    chosen = throughput["figures"].get(CHOSEN, {})
    if "vs_floor" in chosen:
        print(
            f"  {throughput['concurrent']} concurrent, StopOnArtifact vs the floor of its design: "
            f"{chosen['vs_floor']:.3f}x its runs/s (target >= {TARGET_THROUGHPUT_VS_FLOOR:.3f}x: "
            f"{_met(chosen['vs_floor'] >= TARGET_THROUGHPUT_VS_FLOOR)})",
            file=out,
        )
    state = throughput["figures"].get(FLOOR_WITH_STATE, {})
    if "vs_floor" in state:
        print(
            f"  {throughput['concurrent']} concurrent, that floor with toolstop's state vs the "
            f"floor: {state['vs_floor']:.3f}x its runs/s",
            file=out,
        )
    if "vs_floor_with_state" in chosen:
        print(
            f"  {throughput['concurrent']} concurrent, StopOnArtifact vs that floor with "
            f"toolstop's state: {chosen['vs_floor_with_state']:.3f}x its runs/s",
            file=out,
        )
    profiled = figures["calls_per_run"]
    print(f"  Python calls per run (cProfile, {profiled['runs']} runs each):", file=out)
    for name, values in profiled["figures"].items():
        print(
            f"  {name:48s} {values['calls_per_run']:8d}  {values['vs_create_agent']:.3f}x  "
            f"toolstop's own: {values['toolstop_calls_per_run']} calls, "
            f"{100 * values['toolstop_time_share']:.1f}% of the time",
            file=out,
        )
    rss = figures["rss"]
    print(
        f"  RSS over {rss['runs']} runs: {rss['rss_before_mb']} -> {rss['rss_after_mb']} MB "
        f"({rss['growth_mb']} MB)",
        file=out,
    )
