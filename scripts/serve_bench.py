"""The example agents on LangGraph Server + PostgreSQL + Redis (`make serve`), driven and measured.

`make serve-bench` (`python scripts/serve_bench.py`) starts `make serve` on a scratch database
and measures two figures: runs per second on 2 workers, `hard` vs `never`, with the simulated
model at 20 ms per call, interleaved in one run; and how long a SIGKILLed replica's in-flight runs
take to complete on the surviving replica, with the heartbeat it sets. The `server` tests start
their servers with the same helpers, so what is measured is what is tested.

Run it from the project's folder (it runs `make serve`), with PostgreSQL and Redis (see
`scripts/serve_process.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve_process import (
    REDIS_URL,
    ServeProcess,
    human,
    redis_problem,
    scratch_database,
)

__all__ = [
    "GRAPHS",
    "HEARTBEAT_S",
    "TOOL_LATENCY_MS",
    "CrashResult",
    "main",
    "measure_throughput",
    "replica_env",
    "run_crash",
]

GRAPHS = ("toolstop_graph", "toolstop_agent")
HEARTBEAT_S = 2
"""`LG_BG_JOB_HEARTBEAT` for the crash runs. The runtime keeps a run's heartbeat for twice this
(at least 4 s) and refreshes it every half; a run whose heartbeat expired is put back in the
queue by the next sweep (every twice this)."""

TOOL_LATENCY_MS = 3000
"""How long the example tools take to answer after their work, for the crash runs: the window in
which a replica is killed between a record's write and the write's answer. Polling under load
takes up to about a second to see a write; this leaves a margin."""


def _question(index: int) -> str:
    return f"save key-{index}: value-{index}"


async def _timed_batch(url: str, assistant: str, count: int, concurrency: int) -> list[float]:
    """Run `count` runs (each on a new thread), `concurrency` at a time; the seconds: one each,
    then the whole batch's, from the first submission until the last run finished."""
    from langgraph_sdk import get_client

    gate = asyncio.Semaphore(concurrency)
    started = time.perf_counter()

    async def one(client: Any) -> tuple[str, float]:
        async with gate:
            begun = time.perf_counter()
            thread = await client.threads.create()
            run = await client.runs.create(
                thread["thread_id"], assistant, input=human("How do refunds work?")
            )
            await client.runs.join(thread["thread_id"], run["run_id"])
            done = await client.runs.get(thread["thread_id"], run["run_id"])
            return str(done["status"]), time.perf_counter() - begun

    async with get_client(url=url) as client:
        results = await asyncio.gather(*(one(client) for _ in range(count)))
    batch = time.perf_counter() - started
    failed = [status for status, _ in results if status != "success"]
    if failed:
        msg = f"{len(failed)} of {count} runs did not succeed: {sorted(set(failed))}"
        raise RuntimeError(msg)
    return [seconds for _, seconds in results] + [batch]


def measure_throughput(
    url: str, *, runs: int = 50, rounds: int = 6, one_at_a_time: int = 5
) -> dict[str, Any]:
    """Runs per second, `hard` vs `never`, interleaved, on both graphs of a running server.

    Each round, for each mode (in alternating order) and graph: `runs` runs submitted at once
    (each on a new thread; a mode's runs per second is all its runs over all their batches'
    time), then `one_at_a_time` runs one after the other (the median is a run's latency on an
    idle server). `never` runs on an assistant created with `configurable.toolstop_mode =
    "never"`; `hard` on the graph's default assistant.
    """
    from langgraph_sdk import get_sync_client

    with get_sync_client(url=url) as client:
        never = {
            graph: client.assistants.create(
                graph, config={"configurable": {"toolstop_mode": "never"}}, name=f"{graph}-never"
            )["assistant_id"]
            for graph in GRAPHS
        }
    assistants = {"hard": dict(zip(GRAPHS, GRAPHS, strict=True)), "never": never}
    busy = dict.fromkeys(assistants, 0.0)
    alone: dict[str, list[float]] = {mode: [] for mode in assistants}
    for round_ in range(rounds):
        order = ["hard", "never"] if round_ % 2 == 0 else ["never", "hard"]
        for mode in order:
            for graph in GRAPHS:
                busy[mode] += asyncio.run(_timed_batch(url, assistants[mode][graph], runs, 64))[-1]
                alone[mode] += asyncio.run(
                    _timed_batch(url, assistants[mode][graph], one_at_a_time, 1)
                )[:-1]
    total = runs * rounds * len(GRAPHS)
    per_s = {mode: round(total / seconds, 2) for mode, seconds in busy.items()}
    latency = {mode: round(1000 * statistics.median(values), 1) for mode, values in alone.items()}
    return {
        "runs_per_mode": total,
        "runs_per_s": per_s,
        "hard_vs_never": round(per_s["hard"] / per_s["never"], 3),
        "one_at_a_time_runs_per_mode": one_at_a_time * rounds * len(GRAPHS),
        "one_at_a_time_median_ms": latency,
        "one_at_a_time_hard_vs_never": round(latency["hard"] / latency["never"], 3),
    }


@dataclass(kw_only=True)
class CrashResult:
    """What happened when replica A was SIGKILLed with runs in flight.

    Attributes:
        runs: `(thread_id, run_id, key)` of each queued run, in submission order.
        in_flight: run ids that were running on A when it was killed.
        done_before: run ids that had finished on A before the kill.
        written_in_flight: the run whose record was written, its answer still pending, at the kill.
        swept_s: from the kill until replica B had put every in-flight run back in the queue
            (its log's `Swept stale run`; the same machine's clock).
        recovered_s: from the kill until every in-flight run had completed on replica B.
        drained_s: from the kill until the whole queue was done.
        statuses: each run's final status.
    """

    runs: list[tuple[str, str, str]] = field(default_factory=list)
    in_flight: list[str] = field(default_factory=list)
    done_before: list[str] = field(default_factory=list)
    written_in_flight: str = ""
    swept_s: float = 0.0
    recovered_s: float = 0.0
    drained_s: float = 0.0
    statuses: dict[str, str] = field(default_factory=dict)


def run_crash(
    a: ServeProcess, b: ServeProcess, *, queued: int = 12, timeout: float = 180
) -> CrashResult:
    """Queue `queued` save runs on replica A, SIGKILL A mid-queue, let replica B finish them.

    B is paused (SIGSTOP) while the runs are queued, so A holds the in-flight runs, and resumed
    right after the kill. A is killed once a run has finished on it and another run's record has
    been written while that run is still running (the write's answer is pending:
    `TOOLSTOP_SIMULATED_TOOL_LATENCY_MS`), so its retry on B meets its own write. Timings are
    measured from the kill; `in_flight` is what A was running a moment before it (a run A
    claimed in that moment is retried too, but not counted there).
    """
    from langgraph_sdk import get_sync_client

    result = CrashResult()
    with get_sync_client(url=a.url) as client_a, get_sync_client(url=b.url) as client_b:
        b.signal_group(signal.SIGSTOP)
        try:
            for index in range(queued):
                thread = client_a.threads.create()
                run = client_a.runs.create(
                    thread["thread_id"],
                    GRAPHS[index % 2],
                    input=human(_question(index)),
                )
                result.runs.append((thread["thread_id"], run["run_id"], f"key-{index}"))
            deadline = time.monotonic() + timeout
            while not result.written_in_flight:
                if time.monotonic() > deadline:
                    msg = "no run reached its write on replica A in time"
                    raise RuntimeError(msg)
                time.sleep(0.05)
                statuses = {r: client_a.runs.get(t, r)["status"] for t, r, _ in result.runs}
                if "success" not in statuses.values():
                    continue
                written = {
                    item["key"]
                    for item in client_a.store.search_items(["toolstop", "records"], limit=1000)[
                        "items"
                    ]
                }
                for thread_id, run_id, key in result.runs:
                    # written, and still running right now: its answer is pending
                    if (
                        key in written
                        and statuses[run_id] == "running"
                        and client_a.runs.get(thread_id, run_id)["status"] == "running"
                    ):
                        result.written_in_flight = run_id
                        break
            a.kill()
            killed, killed_at = time.monotonic(), time.time()
        finally:
            b.signal_group(signal.SIGCONT)
        result.in_flight = [r for r, s in statuses.items() if s == "running"]
        result.done_before = [r for r, s in statuses.items() if s == "success"]
        pending = {r: t for t, r, _ in result.runs}
        deadline = killed + timeout
        while pending and time.monotonic() < deadline:
            for run_id, thread_id in list(pending.items()):
                status = client_b.runs.get(thread_id, run_id)["status"]
                if status not in ("pending", "running"):
                    elapsed = round(time.monotonic() - killed, 3)
                    result.statuses[run_id] = str(status)
                    del pending[run_id]
                    result.drained_s = elapsed
                    if run_id in result.in_flight:
                        result.recovered_s = max(result.recovered_s, elapsed)
            time.sleep(0.1)
        for run_id in pending:
            result.statuses[run_id] = "lost"
        swept = b.swept_runs()
        for run_id in result.in_flight:
            if run_id in swept:
                result.swept_s = max(result.swept_s, round(swept[run_id] - killed_at, 3))
    return result


def replica_env(database_uri: str, redis_uri: str, *, jobs: int) -> dict[str, str]:
    """`make serve`'s settings for a crash-test replica.

    1 worker running `jobs` runs at once, a 2 s heartbeat, a model at 100 ms per call, tools that
    answer `TOOL_LATENCY_MS` after their work. Replica A gets 2 jobs (so the queue waits on it), B
    10 (room for A's runs)."""
    return {
        "DATABASE_URI": database_uri,
        "REDIS_URI": redis_uri,
        "WORKERS": "1",
        "N_JOBS_PER_WORKER": str(jobs),
        "LG_BG_JOB_HEARTBEAT": str(HEARTBEAT_S),
        "TOOLSTOP_SIMULATED_LATENCY_MS": "100",
        "TOOLSTOP_SIMULATED_TOOL_LATENCY_MS": str(TOOL_LATENCY_MS),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """`make serve-bench`: measure both figures on a scratch database; print and write JSON."""
    parser = argparse.ArgumentParser(prog="python scripts/serve_bench.py", description=__doc__)
    parser.add_argument("--runs", type=int, default=50, help="runs per mode, graph and round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument(
        "--latency-ms", type=int, default=20, help="the simulated model's latency per call"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-out") / "serve.json")
    args = parser.parse_args(argv)
    root = Path.cwd()
    problem = redis_problem(REDIS_URL)
    sane = args.runs >= 1 and args.rounds >= 1 and 0 <= args.latency_ms <= 60_000
    if problem or not (root / "langgraph.json").is_file() or not sane:
        why = problem or (
            "--runs and --rounds must be >= 1, --latency-ms from 0 to 60000; "
            "run it from the project's folder"
        )
        print(f"serve-bench: {why}", file=sys.stderr)
        return 2
    logs = Path("bench-out")
    logs.mkdir(parents=True, exist_ok=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    try:
        with scratch_database() as database:
            env = {"DATABASE_URI": database, "REDIS_URI": REDIS_URL, "WORKERS": "2"}
            env["TOOLSTOP_SIMULATED_LATENCY_MS"] = str(args.latency_ms)
            server = ServeProcess(root, logs / "serve-throughput.log", env).start()
            try:
                throughput = measure_throughput(server.url, runs=args.runs, rounds=args.rounds)
            finally:
                server.stop()
            a = ServeProcess(root, logs / "serve-a.log", replica_env(database, REDIS_URL, jobs=2))
            b = ServeProcess(root, logs / "serve-b.log", replica_env(database, REDIS_URL, jobs=10))
            a.launch()
            b.launch()
            try:
                crash = run_crash(a.wait_ready(), b.wait_ready())
            finally:
                a.kill()
                b.kill()
    except Exception as error:
        print(f"serve-bench: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    lost = sorted(r for r, s in crash.statuses.items() if s != "success")
    document = {
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1min_before": round(load_before, 2),
            "load_average_1min_after": round(os.getloadavg()[0], 2),
        },
        "throughput": {
            **throughput,
            "workers": 2,
            "jobs_per_worker": 10,
            "simulated_model_latency_ms": args.latency_ms,
        },
        "crash": {
            "heartbeat_s": HEARTBEAT_S,
            "tool_latency_ms": TOOL_LATENCY_MS,
            "queued": len(crash.runs),
            "in_flight_at_kill": len(crash.in_flight),
            "swept_s": crash.swept_s,
            "recovered_s": crash.recovered_s,
            "drained_s": crash.drained_s,
            "not_succeeded": lost,
        },
    }
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, indent=2))
    return 0 if not lost else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
