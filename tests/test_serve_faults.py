"""`make serve` under faults: runs cancelled and a PostgreSQL connection cut mid-queue.

20 threads get one run each, queued at once on a 1-worker server that runs 4 at a time with
slow tools (`TOOLSTOP_SIMULATED_TOOL_LATENCY_MS`), so runs are in flight when the faults hit:
`runs.cancel` on two running and two queued runs, then every PostgreSQL connection of the
scratch database is terminated while other runs sit in their tools. Afterwards every thread
gets a next turn, which must get a record of its own (numbered after whatever came before,
its model calls counted afresh) and a history valid for OpenAI, Anthropic and Mistral.

The fault table (per thread: completed, cancelled, failed, lost, duplicated, bad state) is
printed (`pytest -s`); lost, duplicated and bad state must be 0. A cut can fail the checkpoint
that ends a step whose writes were saved: `get_state` shows them, but the next run (new input
on the last checkpoint) drops them, as LangGraph does; such a thread is counted and expected to
number its next run from the last checkpoint.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import convert_to_messages

from serve_process import ADMIN_URL, ServeProcess, human
from serve_stack import serve_stack
from toolstop.testing import assert_valid_history

pytestmark = [pytest.mark.server, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parent.parent
GRAPHS = ("toolstop_graph", "toolstop_agent")
THREADS = 20
JOBS = 4  # runs at once on the one worker: the rest wait in the queue
TOOL_LATENCY_MS = 1500  # a tool answers this long after its work: runs sit in their tools
CUTS = 4  # times every connection is cut, 0.3 s apart
SETTLE_S = 90.0  # how long the first runs may take to end after the faults
COLUMNS = ("completed", "cancelled", "failed", "lost", "duplicated", "bad state")


def question(index: int) -> str:
    """The first turn of thread `index`: searches and saves, in turn."""
    if index % 3 == 2:
        return f"save fault-{index}: value {index}"
    return ("How do refunds work?", "I forgot my password")[index % 3]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """PostgreSQL, Redis, the serve environment and a scratch database; skips without them."""
    with serve_stack(tmp_path_factory.mktemp("serve-faults")) as found:
        yield found


def cut_connections(database_uri: str) -> int:
    """Terminate every PostgreSQL connection to `database_uri`'s database; how many were cut."""
    import psycopg

    name = database_uri.rsplit("/", 1)[1]
    with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5) as connection:
        rows = connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return sum(1 for (cut,) in rows if cut)


@dataclass
class Thread:
    """One thread of the probe: its first run and what it left, then its next turn."""

    index: int
    graph: str
    thread_id: str
    run_id: str
    status: str = "pending"
    fault: str | None = None
    """`cancel`, `cut` (running when the connections were cut) or None"""
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    next_status: str = ""
    discarded: bool = False
    """the first run's last step was never checkpointed (the next run started before it)"""
    duplicated: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


SERVER_ERRORS: list[str] = []
"""The 5xx answers the API gave after the cut (its own pooled connections were cut too)."""


def retried(call: Any, *args: Any, **kwargs: Any) -> Any:
    """`call(*args, **kwargs)`, again (up to 5 times) while the API answers 5xx after the cut."""
    from langgraph_sdk.errors import InternalServerError

    for attempt in range(5):
        try:
            return call(*args, **kwargs)
        except InternalServerError as error:
            SERVER_ERRORS.append(f"{getattr(call, '__name__', call)}: {error}")
            if attempt == 4:
                raise
            time.sleep(0.3)
    raise AssertionError("unreachable")


def statuses(client: Any, threads: list[Thread]) -> dict[str, str]:
    return {
        t.run_id: str(retried(client.runs.get, t.thread_id, t.run_id)["status"]) for t in threads
    }


def run_faults(server: ServeProcess, database: str) -> tuple[list[Thread], int]:
    """Queue the runs, cancel some, cut PostgreSQL, wait for every run to end (or count it lost)."""
    from langgraph_sdk import get_sync_client

    threads: list[Thread] = []
    with get_sync_client(url=server.url) as client:
        for index in range(THREADS):
            graph = GRAPHS[index % 2]
            created = client.threads.create()
            run = client.runs.create(created["thread_id"], graph, input=human(question(index)))
            threads.append(Thread(index, graph, created["thread_id"], run["run_id"]))
        by_run = {t.run_id: t for t in threads}

        # cancel two runs in their tools and two still queued; the queue is first in, first
        # out, so the third wave starts once the runs are all queued, and a poll of that wave
        # alone is short enough for the cancel to land while the run is in its tool
        wave = threads[2 * JOBS : 3 * JOBS]
        now: dict[str, str] = {}
        in_flight: list[str] = []
        deadline = time.monotonic() + 60
        while len(in_flight) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the third wave of runs did not start")
            now.update(statuses(client, wave))
            started = [r for r, s in now.items() if s == "running" and r not in in_flight]
            if started:
                time.sleep(0.3)  # past the model call (100 ms): in the tool
                for run_id in started[: 2 - len(in_flight)]:
                    in_flight.append(run_id)
                    client.runs.cancel(by_run[run_id].thread_id, run_id, wait=False)
        queued = [t.run_id for t in threads[-2:]]
        for run_id in queued:
            client.runs.cancel(by_run[run_id].thread_id, run_id, wait=False)
        for run_id in in_flight + queued:
            by_run[run_id].fault = "cancel"

        # cut PostgreSQL while other runs sit in their tools
        def others_running() -> bool:
            now.update(statuses(client, threads))
            return any(s == "running" and by_run[r].fault is None for r, s in now.items())

        wait_until(others_running, 60, "runs in flight to cut")
        time.sleep(0.5)
        cut = 0
        for _ in range(CUTS):  # a few cuts, so that some land while a run talks to PostgreSQL
            for run_id, status in statuses(client, threads).items():
                if status == "running" and by_run[run_id].fault is None:
                    by_run[run_id].fault = "cut"
            cut += cut_connections(database)
            time.sleep(0.3)

        deadline = time.monotonic() + SETTLE_S
        pending = dict(by_run)
        while pending and time.monotonic() < deadline:
            for run_id, thread in list(pending.items()):
                status = str(retried(client.runs.get, thread.thread_id, run_id)["status"])
                if status not in ("pending", "running"):
                    thread.status = status
                    del pending[run_id]
            time.sleep(0.2)
        for thread in pending.values():
            thread.status = "lost"
        for thread in threads:
            thread.before = retried(client.threads.get_state, thread.thread_id)["values"] or {}
            runs = retried(client.runs.list, thread.thread_id)
            if [r["run_id"] for r in runs] != [thread.run_id]:
                thread.duplicated.append(f"runs {[r['run_id'] for r in runs]}")
    return threads, cut


def duplicates(values: dict[str, Any]) -> list[str]:
    """What the first run wrote more than once: its input, a tool's answer, a record's write."""
    found: list[str] = []
    messages = values.get("messages") or []
    humans = [m for m in messages if m["type"] == "human"]
    if len(humans) > 1:
        found.append(f"{len(humans)} human messages")
    answered = Counter(m.get("tool_call_id") for m in messages if m["type"] == "tool")
    found += [f"{call} answered {n} times" for call, n in answered.items() if n > 1]
    found += [
        f"{m.get('tool_call_id')} wrote again"
        for m in messages
        if m["type"] == "tool" and (m.get("artifact") or {}).get("already_applied")
    ]
    return found


def check_next_turn(thread: Thread) -> list[str]:
    """Why the next turn's record or history is wrong (empty when it is right)."""
    problems: list[str] = []
    before, after = thread.before, thread.after
    if thread.next_status != "success":
        return [f"next turn ended {thread.next_status}"]
    previous = before.get("stop_record")
    aborted = before.get("toolstop_run") or {}
    messages = after.get("messages") or []
    answers = [m for m in before.get("messages") or [] if m["type"] == "ai"]
    kept = {m["id"] for m in messages}
    if aborted.get("open") and answers and answers[-1]["id"] not in kept:
        # A step wrote its messages, but the cut failed the checkpoint that would have kept
        # them: `get_state` showed those pending writes, and the next run, started from the
        # last checkpoint with new input, rightly dropped them.
        thread.discarded = True
        if answers[0]["id"] not in kept:
            # It was the step that opened the run (its first model call), so no checkpoint
            # holds the open run: the next run numbers from the last finished one.
            aborted = {}
        # Else a later step was lost: the checkpoint before it holds the open run, which the
        # next run closes (rule `interrupted`) and numbers from.
    if aborted.get("open"):  # the first run opened its record and did not finish it
        expected_run = aborted["record"]["run"] + 1
    elif previous:
        expected_run = previous["run"] + 1
    else:
        expected_run = 1
    record = after.get("stop_record") or {}
    if record.get("run") != expected_run:
        problems.append(f"record run {record.get('run')}, expected {expected_run}")
    if (record.get("model_calls"), record.get("tool_turns")) != (1, 1):
        problems.append(
            f"record counts model_calls={record.get('model_calls')}"
            f" tool_turns={record.get('tool_turns')}, expected 1 and 1"
        )
    if (record.get("rule"), record.get("stopped")) != ("completed", True):
        problems.append(f"record rule {record.get('rule')}, stopped {record.get('stopped')}")
    calls = [c["id"] for m in messages if m["type"] == "ai" for c in m.get("tool_calls") or []]
    if not calls or record.get("tool_call_ids") != [calls[-1]]:
        problems.append(
            f"record tool_call_ids {record.get('tool_call_ids')}, last call {calls[-1:]}"
        )
    if len(set(calls)) != len(calls):
        problems.append(f"tool call ids repeat: {calls}")
    try:
        assert_valid_history(convert_to_messages(messages), "all")
    except AssertionError as error:
        problems.append(str(error))
    return problems


def fault_table(threads: list[Thread]) -> dict[str, int]:
    counts = dict.fromkeys(COLUMNS, 0)
    for thread in threads:
        column = {"success": "completed", "interrupted": "cancelled", "lost": "lost"}
        counts[column.get(thread.status, "failed")] += 1
        counts["duplicated"] += bool(thread.duplicated)
        counts["bad state"] += bool(thread.problems)
    return counts


def test_cancelled_runs_and_a_postgres_cut_leave_every_thread_right(
    stack: dict[str, Any],
) -> None:
    from langgraph_sdk import get_sync_client

    SERVER_ERRORS.clear()
    started = time.monotonic()
    server = ServeProcess(
        ROOT,
        stack["logs"] / "faults.log",
        {
            "DATABASE_URI": stack["database"],
            "REDIS_URI": stack["redis"],
            "WORKERS": "1",
            "N_JOBS_PER_WORKER": str(JOBS),
            "LG_BG_JOB_HEARTBEAT": "2",
            "TOOLSTOP_SIMULATED_LATENCY_MS": "100",
            "TOOLSTOP_SIMULATED_TOOL_LATENCY_MS": str(TOOL_LATENCY_MS),
        },
    )
    try:
        server.start()
        threads, cut = run_faults(server, stack["database"])
        with get_sync_client(url=server.url) as client:
            nexts = [
                retried(client.runs.create, t.thread_id, t.graph, input=human("shipping?"))
                for t in threads
            ]
            for thread, run in zip(threads, nexts, strict=True):
                thread.duplicated += duplicates(thread.before)
                retried(client.runs.join, thread.thread_id, run["run_id"])
                done = retried(client.runs.get, thread.thread_id, run["run_id"])
                thread.next_status = str(done["status"])
                thread.after = retried(client.threads.get_state, thread.thread_id)["values"] or {}
                thread.problems = check_next_turn(thread)
    finally:
        server.stop()
    table = fault_table(threads)
    faults = Counter(f"{t.fault or 'none'} -> {t.status}" for t in threads)
    seconds = time.monotonic() - started
    print(f"\nfault table ({THREADS} threads, {cut} connections cut, {seconds:.1f} s)")
    print("  " + " | ".join(f"{c:>10}" for c in COLUMNS))
    print("  " + " | ".join(f"{table[c]:>10}" for c in COLUMNS))
    numbers = Counter(
        f"{(t.before.get('stop_record') or {}).get('run')}"
        f"/{(t.before.get('toolstop_run') or {}).get('open')}"
        f" -> {(t.after.get('stop_record') or {}).get('run')}"
        for t in threads
    )
    print("  run numbers (finished before/open run before -> next): " + str(dict(numbers)))
    print(f"  5xx answers retried after the cut: {len(SERVER_ERRORS)}")
    print(f"  steps written but never checkpointed: {sum(t.discarded for t in threads)}")
    print("  first runs by fault: " + ", ".join(f"{k}: {n}" for k, n in sorted(faults.items())))
    for thread in threads:
        if thread.fault:
            kinds = [m["type"] for m in thread.before.get("messages") or []]
            print(f"  thread {thread.index}: {thread.fault} -> {thread.status}, left {kinds}")
        if thread.problems or thread.duplicated:
            print(f"  thread {thread.index} ({thread.graph}, {thread.fault} -> {thread.status}):")
            for problem in thread.duplicated + thread.problems:
                print(f"    {problem}")
            after = [(m["type"], m.get("id")) for m in thread.after.get("messages") or []]
            before = [(m["type"], m.get("id")) for m in thread.before.get("messages") or []]
            print(f"    messages before: {before}\n    messages after: {after}")
    assert cut > 0, "no PostgreSQL connection was cut"
    assert table["cancelled"] >= 1, faults  # the faults hit runs
    assert table["lost"] == 0, faults
    assert table["bad state"] == 0, [t.problems for t in threads if t.problems]
    assert table["duplicated"] == 0, [t.duplicated for t in threads if t.duplicated]
    assert sum(table[c] for c in COLUMNS[:4]) == THREADS
