"""The way back on real traffic: a population written by another process through a real agent
under a canary; a new run in the same checkpointer sends the tool back only when its canary arm
was asked again more often (issue 50, on SQLite and PostgreSQL)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from population import REQUESTS, Clerk
from toolstop import Outcome, StopPolicy, build_react_graph, signal
from toolstop.canary import WayBack
from toolstop.policy import share
from toolstop.testing import forced_tool
from way_back_records import fresh_schema, postgres_saver, sqlite_saver

pytestmark = pytest.mark.timeout(1200)  # a hang guard: a child process runs 600 agent runs

SUPPORT = Path(__file__).parent / "support"
SHARE = 0.3


def _write(db: str, schema: str, canary_rate: float, shadow_rate: float) -> None:
    done = subprocess.run(
        [
            sys.executable, str(SUPPORT / "population.py"), db, schema, "300",
            str(canary_rate), str(shadow_rate), str(SHARE),
        ],
        capture_output=True, text=True, timeout=1200, check=False, cwd=SUPPORT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "DONE"


def _new_canary_run(checkpointer: Any, way_back: WayBack) -> dict[str, Any]:
    thread = next(f"new-{n}" for n in range(1000) if share(f"new-{n}", None) < SHARE)
    policy = StopPolicy(mode="hard", canary=SHARE, way_back=way_back)
    tools = [forced_tool("exchange", ("Exchanged.", signal(Outcome.COMPLETED)))]
    agent = build_react_graph(Clerk(), tools, policy=policy, checkpointer=checkpointer)
    given = {"messages": [HumanMessage(REQUESTS[0].format(n=1))]}
    record: dict[str, Any] = agent.invoke(given, {"configurable": {"thread_id": thread}})[
        "stop_record"
    ]
    return record


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    yield from fresh_schema(postgres_url, "canary")


@pytest.mark.parametrize(
    ("rates", "sent"),
    [((0.30, 0.03), True), ((0.05, 0.05), False)],
    ids=["canary-worse-goes-back", "equal-stays"],
)
@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_a_new_run_reads_the_way_back_from_another_processs_traffic(
    rates: tuple[float, float], sent: bool, database: str, tmp_path: Path, request: Any
) -> None:
    if database == "postgres":
        db = request.getfixturevalue("postgres_url")
        name = request.getfixturevalue("schema")
        opened = postgres_saver(db, name)
    else:
        db, name = str(tmp_path / "threads.sqlite"), ""
        opened = sqlite_saver(db)
    now = [0.0]
    with opened as checkpointer:  # the tables exist before the other process writes
        way_back = WayBack(margin=0.05, refresh=60, clock=lambda: now[0])
        assert way_back.sent_back(checkpointer) == frozenset()  # nothing yet
        _write(db, name, *rates)
        assert way_back.sent_back(checkpointer) == frozenset()  # not read again before refresh
        now[0] += 60
        record = _new_canary_run(checkpointer, way_back)
    figures = way_back.evidence()["exchange"]
    assert figures["tripped"] is sent
    canary, shadow = figures["canary"], figures["shadow"]
    # every thread's first run once, each arm's newest `last` (200) entries
    assert shadow["n"] == min(200, 300 - canary["n"])
    assert 45 <= canary["n"] <= 135  # binomial(300, 0.3): 90 +- 5 sd
    assert (canary["rate"] - shadow["rate"] > 0.05) is sent
    assert record["arm"] == "canary"
    if sent:
        assert (record["sent_back"], record["modes"]) == (["exchange"], {"exchange": "never"})
        assert (record["stopped"], record["would_stop"]) == (False, "completed")
    else:
        assert "sent_back" not in record
        assert (record["stopped"], record["rule"]) == (True, "completed")
