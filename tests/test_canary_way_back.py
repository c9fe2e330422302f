"""The canary's way back (`toolstop.canary.WayBack`): which tools go back to `never` mode.

Records are written into real checkpointers (InMemorySaver, SQLite, PostgreSQL, sync and async),
by a real agent where it matters and by `checkpointer.put` for populations; a child process
writes into the same database for the two-process tests.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

import toolstop.canary as canary
from toolstop import ToolstopConfigError
from toolstop.canary import WayBack
from way_back_records import (
    apostgres_saver,
    awrite_arms,
    fresh_schema,
    population,
    postgres_saver,
    record,
    sqlite_saver,
    write_thread,
)

CHILD = Path(__file__).parent / "support" / "way_back_records.py"
pytestmark = pytest.mark.timeout(600)  # a hang guard: some tests start a child process


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def arms(saver: Any, tool: str, canary_asked: int, shadow_asked: int, n: int = 40) -> None:
    """`n` canary and `n` shadow threads of `tool`, so many of each asked again."""
    prefix = uuid.uuid4().hex[:8]
    for arm, asked in (("canary", canary_asked), ("shadow", shadow_asked)):
        for thread, records in population(tool, arm, n, asked, prefix=prefix):
            write_thread(saver, thread, records)


def figures(way_back: WayBack, tool: str) -> tuple[int, int, int, int]:
    found = way_back.evidence()[tool]
    return (
        found["canary"]["n"],
        found["canary"]["asked"],
        found["shadow"]["n"],
        found["shadow"]["asked"],
    )


# --- the rule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("canary_asked", "shadow_asked", "back"),
    [
        (12, 3, True),  # canary worse by 22.5 points
        (3, 12, False),  # shadow worse
        (6, 6, False),  # equal
        (0, 0, False),  # nobody asked again
        (40, 40, False),  # everybody asked again, in both arms
        (6, 4, False),  # 15% vs 10%: exactly the margin, not more
        (7, 4, True),  # 17.5% vs 10%: more than the margin
    ],
)
def test_a_tool_goes_back_when_its_canary_is_asked_again_more(
    canary_asked: int, shadow_asked: int, back: bool
) -> None:
    saver = InMemorySaver()
    arms(saver, "pay", canary_asked, shadow_asked)
    way_back = WayBack()
    assert way_back.sent_back(saver) == (frozenset({"pay"}) if back else frozenset())
    assert figures(way_back, "pay") == (40, canary_asked, 40, shadow_asked)
    assert way_back.evidence()["pay"]["tripped"] is back
    assert way_back.evidence()["pay"]["canary"]["rate"] == canary_asked / 40


@pytest.mark.parametrize(("canary_n", "back"), [(29, False), (30, True)])
def test_too_few_stops_in_an_arm_never_trip(canary_n: int, back: bool) -> None:
    saver = InMemorySaver()
    prefix = "few"
    for thread, records in population("pay", "canary", canary_n, canary_n, prefix=prefix):
        write_thread(saver, thread, records)
    for thread, records in population("pay", "shadow", 40, 0, prefix=prefix):
        write_thread(saver, thread, records)
    way_back = WayBack(min_stops=30)
    assert way_back.sent_back(saver) == (frozenset({"pay"}) if back else frozenset())
    assert figures(way_back, "pay") == (canary_n, canary_n, 40, 0)


def test_too_few_shadow_stops_never_trip() -> None:
    saver = InMemorySaver()
    for thread, records in population("pay", "canary", 40, 40, prefix="s"):
        write_thread(saver, thread, records)
    assert WayBack().sent_back(saver) == frozenset()


def test_only_the_tool_that_is_worse_goes_back() -> None:
    saver = InMemorySaver()
    arms(saver, "pay", 20, 2)
    arms(saver, "lookup", 2, 2)
    arms(saver, "refund", 2, 20)
    way_back = WayBack()
    assert way_back.sent_back(saver) == frozenset({"pay"})
    assert {tool for tool, found in way_back.evidence().items() if found["tripped"]} == {"pay"}
    assert set(way_back.evidence()) == {"pay", "lookup", "refund"}


def test_an_entry_counts_for_each_of_its_deciding_tools() -> None:
    saver = InMemorySaver()
    for arm, asked in (("canary", 40), ("shadow", 0)):
        for number in range(40):
            write_thread(
                saver, f"{arm}-{number}", [{"run": 1}, record(2, ["pay", "ship"], arm, asked > 0)]
            )
    assert WayBack().sent_back(saver) == frozenset({"pay", "ship"})


def test_only_the_last_entries_of_each_arm_count() -> None:
    saver = InMemorySaver()
    arms(saver, "pay", 40, 0)  # older: the canary was asked again every time
    arms(saver, "pay", 0, 0)  # newer: nobody was
    assert WayBack(last=40).sent_back(saver) == frozenset()
    way_back = WayBack(last=80)
    assert way_back.sent_back(saver) == frozenset({"pay"})
    assert figures(way_back, "pay") == (80, 40, 80, 0)


def test_a_record_kept_in_many_checkpoints_counts_once() -> None:
    saver = InMemorySaver()
    for arm, asked in (("canary", True), ("shadow", False)):
        for number in range(30):
            # runs 2..4 of each thread: three entries, each record kept in six checkpoints
            records = [{"run": 1}, *(record(run, ["pay"], arm, asked) for run in (2, 3, 4))]
            write_thread(saver, f"{arm}-{number}", records)
    way_back = WayBack()
    assert way_back.sent_back(saver) == frozenset({"pay"})
    assert figures(way_back, "pay") == (90, 90, 90, 0)


def test_the_window_bounds_what_one_read_looks_at() -> None:
    saver = InMemorySaver()
    arms(saver, "pay", 40, 0)  # 80 threads of 2 runs, 6 checkpoints each
    assert WayBack(last=40).window == 40 * canary.CHECKPOINTS_PER_ENTRY
    # a thread is 12 checkpoints, its second record in the last: the newest 60 hold five
    narrow = WayBack(window=60)
    assert narrow.sent_back(saver) == frozenset()
    assert figures(narrow, "pay") == (0, 0, 5, 0)


# --- hostile records ------------------------------------------------------------------------

HOSTILE: list[Any] = [
    "not a record",
    ["a", "list"],
    {"reask": "yes"},
    {"reask": None},
    {"reask": {"run": True, "asked_again": True, "arm": "canary", "tools": ["pay"]}},
    {"reask": {"run": "1", "asked_again": True, "arm": "canary", "tools": ["pay"]}},
    {"reask": {"run": -1, "asked_again": True, "arm": "canary", "tools": ["pay"]}},
    {"reask": {"run": 1, "asked_again": "yes", "arm": "canary", "tools": ["pay"]}},
    {"reask": {"run": 1, "asked_again": 1, "arm": "canary", "tools": ["pay"]}},
    {"reask": {"run": 1, "asked_again": True, "arm": "CANARY", "tools": ["pay"]}},
    {"reask": {"run": 1, "asked_again": True, "arm": ["canary"], "tools": ["pay"]}},
    {"reask": {"run": 1, "asked_again": True, "tools": ["pay"]}},  # no arm
    {"reask": {"run": 1, "asked_again": True, "arm": "canary", "tools": "pay"}},
    {"reask": {"run": 1, "asked_again": True, "arm": "canary", "tools": [1, None, {"a": 1}]}},
    {"reask": {"run": 1, "asked_again": True, "arm": "canary", "tools": ["x" * 100_000]}},
    {"reask": {"run": 1, "asked_again": True, "arm": "canary", "tools": [""]}},
    {"reask": {"run": 1, "asked_again": True, "arm": "canary", "tools": []}},
    {"reask": {"run": 1, "asked_again": True, "arm": "canary", "tools": ["pay"]}, "x": 1}
    | {"reask": [1]},
]


@pytest.mark.parametrize("saver_kind", ["memory", "sqlite"])
def test_hostile_records_are_ignored_without_a_crash(saver_kind: str, tmp_path: Path) -> None:
    with (
        sqlite_saver(str(tmp_path / "hostile.sqlite"))
        if saver_kind == "sqlite"
        else nullcontext(InMemorySaver()) as saver
    ):
        for number, value in enumerate(HOSTILE):
            for copy in range(40):  # enough of each to trip, were they counted
                write_thread(saver, f"h-{number}-{copy}", [{"run": 1}, value])
        arms(saver, "pay", 2, 2)
        many = record(2, [f"t{n}" for n in range(10_000)], "canary", True)
        write_thread(saver, "many", [{"run": 1}, many])
        way_back = WayBack()
        assert way_back.sent_back(saver) == frozenset()
        assert figures(way_back, "pay") == (40, 2, 40, 2)
        # an entry's first TOOLS_PER_ENTRY names count, the rest are left out
        assert len(way_back.evidence()) == 1 + canary.TOOLS_PER_ENTRY


def test_a_hostile_tool_name_is_escaped_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    saver = InMemorySaver()
    name = "pay\n[ERROR] forged\x1b[2J\u202e"
    arms(saver, name, 30, 0)
    with caplog.at_level(logging.WARNING, logger="toolstop"):
        assert WayBack().sent_back(saver) == frozenset({name})
    (line,) = [r.getMessage() for r in caplog.records if "sent back" in r.getMessage()]
    assert "\n" not in line
    assert "\x1b" not in line
    assert "\u202e" not in line
    assert "pay\\n[ERROR] forged\\x1b[2J\\u202e" in line
    assert "canary 30 of 40 asked again (75.0%), shadow 0 of 40 (0.0%)" in line


@pytest.mark.parametrize(
    "kwargs",
    [
        {"margin": -0.01},
        {"margin": 1.0},
        {"margin": float("nan")},
        {"margin": "0.05"},
        {"margin": True},
        {"last": 0},
        {"last": 2.5},
        {"min_stops": 0},
        {"min_stops": 300},
        {"refresh": -1},
        {"refresh": float("inf")},
        {"refresh": "60"},
        {"window": 0},
    ],
)
def test_a_wrong_setting_is_a_clear_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ToolstopConfigError, match="WayBack"):
        WayBack(**kwargs)


# --- refresh, logging, metrics, failures, concurrency --------------------------------------


def test_the_answer_is_read_again_only_when_refresh_has_passed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    saver, clock = InMemorySaver(), Clock()
    way_back = WayBack(refresh=60, clock=clock)
    assert way_back.sent_back(saver) == frozenset()  # the first call reads: nothing yet
    arms(saver, "pay", 30, 0)
    clock.now += 59.9
    assert way_back.sent_back(saver) == frozenset()  # cached
    clock.now += 0.1
    with caplog.at_level(logging.INFO, logger="toolstop"):
        assert way_back.sent_back(saver) == frozenset({"pay"})
        arms(saver, "pay", 0, 0, n=200)  # the newest entries no longer support it
        assert way_back.sent_back(saver) == frozenset({"pay"})  # until the next read
        clock.now += 60
        assert way_back.sent_back(saver) == frozenset()
        arms(saver, "pay", 200, 0, n=200)
        clock.now += 60
        assert way_back.sent_back(saver) == frozenset({"pay"})  # back again
    messages = [r.getMessage() for r in caplog.records]
    assert sum("sent back to never mode for new runs" in m for m in messages) == 1  # once
    assert sum("no longer sent back" in m for m in messages) == 1


def test_each_time_a_tool_goes_back_is_counted_in_the_metrics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted: list[str] = []
    monkeypatch.setattr(canary, "record_sent_back", counted.append)
    saver, clock = InMemorySaver(), Clock()
    way_back = WayBack(refresh=1, clock=clock)
    arms(saver, "pay", 30, 0)
    way_back.sent_back(saver)
    clock.now += 1
    way_back.sent_back(saver)  # still back: not a new trip
    arms(saver, "pay", 0, 0, n=200)
    clock.now += 1
    way_back.sent_back(saver)
    arms(saver, "pay", 200, 0, n=200)
    clock.now += 1
    way_back.sent_back(saver)
    assert counted == ["pay", "pay"]


def test_the_sent_back_counter_carries_the_tool_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolstop import metrics

    added: list[tuple[int, dict[str, Any]]] = []

    class Counter:
        def add(self, amount: int, attributes: dict[str, Any]) -> None:
            added.append((amount, attributes))

    class Instruments:
        sent_back = Counter()

    monkeypatch.setattr(metrics, "_instruments", Instruments())
    monkeypatch.setattr(metrics, "_provider_set", lambda: True)
    metrics.record_sent_back("pay")
    assert added == [(1, {"gen_ai.tool.name": "pay"})]
    monkeypatch.setattr(metrics, "_provider_set", lambda: False)
    metrics.record_sent_back("pay")
    assert len(added) == 1  # no provider: nothing recorded


class Failing:
    """A checkpointer whose database is gone."""

    def __init__(self) -> None:
        self.reads = 0

    def list(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self.reads += 1
        msg = "unable to open database file postgresql://u:secret@db/x"
        raise sqlite3.OperationalError(msg)


def test_a_failing_read_keeps_the_last_answer(caplog: pytest.LogCaptureFixture) -> None:
    saver, clock = InMemorySaver(), Clock()
    arms(saver, "pay", 30, 0)
    way_back = WayBack(refresh=60, clock=clock)
    assert way_back.sent_back(saver) == frozenset({"pay"})
    failing = Failing()
    clock.now += 60
    with caplog.at_level(logging.WARNING, logger="toolstop"):
        assert way_back.sent_back(failing) == frozenset({"pay"})
        assert way_back.sent_back(failing) == frozenset({"pay"})  # not retried before refresh
    assert failing.reads == 1
    (line,) = [r.getMessage() for r in caplog.records if "could not read" in r.getMessage()]
    assert "OperationalError" in line
    assert "secret" not in line
    clock.now += 60
    assert way_back.sent_back(saver) == frozenset({"pay"})


def test_no_checkpointer_sends_nothing_back_and_a_given_one_wins() -> None:
    saver = InMemorySaver()
    arms(saver, "pay", 30, 0)
    assert WayBack().sent_back(None) == frozenset()
    assert WayBack(checkpointer=saver).sent_back(InMemorySaver()) == frozenset({"pay"})
    assert WayBack(checkpointer=saver).sent_back() == frozenset({"pay"})


class Slow:
    """A checkpointer whose read waits until the test lets it go on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads = 0
        self.started = threading.Event()
        self.go_on = threading.Event()

    def list(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self.reads += 1
        self.started.set()
        assert self.go_on.wait(timeout=300)  # a hang guard
        # InMemorySaver does not list newest first across threads; every item is read here
        yield from self.inner.list(None)


def test_concurrent_callers_share_one_read() -> None:
    inner = InMemorySaver()
    arms(inner, "pay", 30, 0)
    slow = Slow(inner)
    way_back = WayBack(refresh=60, clock=Clock())
    answers: list[frozenset[str]] = []
    reader = threading.Thread(target=lambda: answers.append(way_back.sent_back(slow)))
    reader.start()
    assert slow.started.wait(timeout=300)
    others = [way_back.sent_back(slow) for _ in range(5)]  # while the read is in flight
    slow.go_on.set()
    reader.join(timeout=300)
    assert others == [frozenset()] * 5  # the previous answer, without waiting
    assert answers == [frozenset({"pay"})]
    assert way_back.sent_back(slow) == frozenset({"pay"})
    assert slow.reads == 1


async def test_async_callers_share_one_read_without_blocking_the_loop() -> None:
    inner = InMemorySaver()
    arms(inner, "pay", 30, 0)
    slow = Slow(inner)  # a sync saver: read in a worker thread
    way_back = WayBack(refresh=60, clock=Clock())
    first = asyncio.ensure_future(way_back.asent_back(slow))
    while not slow.started.is_set():
        await asyncio.sleep(0)  # the loop runs while the read waits in its thread
    assert await way_back.asent_back(slow) == frozenset()
    slow.go_on.set()
    assert await first == frozenset({"pay"})
    assert slow.reads == 1


# --- savers: in memory, SQLite, PostgreSQL; sync and async; two processes -------------------


def test_sqlite_in_one_process(tmp_path: Path) -> None:
    with sqlite_saver(str(tmp_path / "one.sqlite")) as saver:
        arms(saver, "pay", 12, 3)
        arms(saver, "lookup", 3, 12)
        way_back = WayBack()
        assert way_back.sent_back(saver) == frozenset({"pay"})
        assert figures(way_back, "pay") == (40, 12, 40, 3)


async def test_async_sqlite(tmp_path: Path) -> None:
    aiosqlite_saver = pytest.importorskip("langgraph.checkpoint.sqlite.aio")
    path = str(tmp_path / "async.sqlite")
    async with aiosqlite_saver.AsyncSqliteSaver.from_conn_string(path) as saver:
        await awrite_arms(saver, "pay", 12, 3)
        way_back = WayBack()
        assert await way_back.asent_back(saver) == frozenset({"pay"})
        assert figures(way_back, "pay") == (40, 12, 40, 3)
    with sqlite_saver(path) as sync:  # the same file through the sync saver, in a thread
        assert await WayBack().asent_back(sync) == frozenset({"pay"})


async def test_async_in_memory() -> None:
    saver = InMemorySaver()
    arms(saver, "pay", 12, 3)
    assert await WayBack().asent_back(saver) == frozenset({"pay"})


def child(db: str, tool: str, arm: str, threads: int, asked: int, schema: str = "") -> None:
    done = subprocess.run(
        [
            sys.executable, str(CHILD), "--db", db, "--schema", schema, "--tool", tool,
            "--arm", arm, "--threads", str(threads), "--asked", str(asked),
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "DONE"


def test_sqlite_across_two_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "two.sqlite")
    clock = Clock()
    with sqlite_saver(path) as saver:
        for thread, records in population("pay", "shadow", 40, 2, prefix="parent"):
            write_thread(saver, thread, records)
        way_back = WayBack(refresh=60, clock=clock)
        assert way_back.sent_back(saver) == frozenset()
        child(path, "pay", "canary", 40, 20)  # another process: the canary is asked again
        assert way_back.sent_back(saver) == frozenset()  # not before refresh
        clock.now += 60
        assert way_back.sent_back(saver) == frozenset({"pay"})
        assert figures(way_back, "pay") == (40, 20, 40, 2)


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    """A schema of its own in the test database (other tests' records are not read)."""
    yield from fresh_schema(postgres_url, "way_back")


def test_postgres_in_one_process_and_across_two(postgres_url: str, schema: str) -> None:
    clock = Clock()
    with postgres_saver(postgres_url, schema) as saver:
        arms(saver, "lookup", 3, 12)
        for thread, records in population("pay", "shadow", 40, 2, prefix="parent"):
            write_thread(saver, thread, records)
        way_back = WayBack(refresh=60, clock=clock)
        assert way_back.sent_back(saver) == frozenset()
        assert figures(way_back, "lookup") == (40, 3, 40, 12)
        child(postgres_url, "pay", "canary", 40, 20, schema=schema)
        clock.now += 60
        assert way_back.sent_back(saver) == frozenset({"pay"})
        assert figures(way_back, "pay") == (40, 20, 40, 2)


async def test_async_postgres(postgres_url: str, schema: str) -> None:
    async with apostgres_saver(postgres_url, schema) as saver:
        await awrite_arms(saver, "pay", 12, 3)
        way_back = WayBack()
        assert await way_back.asent_back(saver) == frozenset({"pay"})
        assert figures(way_back, "pay") == (40, 12, 40, 3)


# --- records a real agent wrote -------------------------------------------------------------


def test_records_written_by_a_real_agent(tmp_path: Path) -> None:
    from routers import MIDDLEWARE_UNAVAILABLE

    if MIDDLEWARE_UNAVAILABLE:  # no langchain, or langchain < 1.2.9
        pytest.skip(MIDDLEWARE_UNAVAILABLE)
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from population import REQUESTS, Clerk
    from toolstop import Outcome, StopOnArtifact, StopPolicy, signal
    from toolstop.policy import share
    from toolstop.testing import forced_tool

    threads = 4
    exchange = forced_tool("exchange", ("Exchanged.", signal(Outcome.COMPLETED)))
    chosen = {"canary": [], "shadow": []}
    for n in range(200):
        arm = "canary" if share(f"t{n}", None) < 0.5 else "shadow"
        if len(chosen[arm]) < threads:
            chosen[arm].append(f"t{n}")
    with sqlite_saver(str(tmp_path / "agent.sqlite")) as saver:
        policy = StopPolicy(mode="hard", canary=0.5)
        agent = create_agent(
            Clerk(), [exchange], middleware=[StopOnArtifact(policy)], checkpointer=saver
        )
        for arm, names in chosen.items():
            for thread in names:
                config = {"configurable": {"thread_id": thread}}
                request = REQUESTS[0].format(n=7)
                agent.invoke({"messages": [HumanMessage(request)]}, config)
                again = f"That is wrong. {request}" if arm == "canary" else "Thanks, bye"
                agent.invoke({"messages": [HumanMessage(again)]}, config)
                finished = agent.get_state(config).values["stop_record"]
                assert (finished["run"], finished["arm"]) == (2, arm)
                assert finished["reask"]["asked_again"] is (arm == "canary")
        way_back = WayBack(min_stops=threads, last=threads)
        assert way_back.sent_back(saver) == frozenset({"exchange"})
        assert figures(way_back, "exchange") == (threads, threads, threads, 0)


def test_a_canary_run_sent_back_is_no_evidence_about_its_stop() -> None:
    """Once sent back, the canary arm's runs of the tool are `never` runs (`stopped` False):
    they are left out, so the evidence of the stops that were made is what stays."""
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    for thread, records in population("pay", "canary", 40, 20, prefix="stopped"):
        write_thread(saver, thread, records)
    for thread, records in population("pay", "shadow", 40, 2, prefix="shadow"):
        write_thread(saver, thread, records)
    for number in range(200):  # later canary runs, in never mode after the way back: no stop
        never = record(2, ["pay"], "canary", False, stopped=False)
        write_thread(saver, f"never-{number}", [{**never, "reask": never["reask"]}])
    way_back = WayBack()
    assert way_back.sent_back(saver) == frozenset({"pay"})
    assert figures(way_back, "pay") == (40, 20, 40, 2)
