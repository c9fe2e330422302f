"""Crash and resume: kill -9 a child at each node boundary (and inside the tool), resume the
thread in a new process, and get the same answer and record, with the write applied once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from routers import ROUTERS

pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
# Each run starts Python child processes: 15-20 s at load 4, over 60 s at load 11 on the shared
# 2-core machine. The hang guard stays, wide enough for load.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CHILD = Path(__file__).parent / "support" / "crash_child.py"


def drive(
    db: str,
    store: Path,
    router: str,
    *,
    kill_at: str | None,
    resume: bool = False,
    thread: str = "crash",
) -> dict[str, Any] | None:
    """Run the child; answer `go` at every pause except `kill_at`, where it gets SIGKILL."""
    argv = [sys.executable, str(CHILD), "--db", db, "--store", str(store), "--router", router]
    argv += ["--thread", thread]
    child = subprocess.Popen(
        [*argv, *(["--resume"] if resume else [])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdin is not None
    assert child.stdout is not None
    result = None
    try:
        for line in child.stdout:
            if line.startswith("AT "):
                if line[3:].strip() == kill_at:
                    os.kill(child.pid, signal.SIGKILL)  # a real kill -9, mid-run
                    child.wait(timeout=600)
                    return None
                child.stdin.write("go\n")
                child.stdin.flush()
            elif line.startswith("RESULT "):
                result = json.loads(line[7:])
        child.wait(timeout=600)
    finally:
        if child.poll() is None:
            child.kill()
        child.stdin.close()
        child.stdout.close()
        assert child.stderr is not None
        errors = child.stderr.read()
        child.stderr.close()
    assert child.returncode == 0, errors
    return result


def writes(store: Path) -> int:
    with sqlite3.connect(store) as db:
        row = db.execute("select writes from records where key = 'order-1'").fetchone()
    return int(row[0]) if row else 0


ROUTER_NAMES = [r.name for r in ROUTERS if r.name != "legacy"]  # legacy is the graph's shell
BOUNDARIES = {
    "graph": ["after-agent", "after-tools", "inside-tool"],
    "middleware": ["after-model", "after-tools", "inside-tool"],
}


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A function point -> database for one crash scenario (a file, or a fresh thread in PG)."""
    if request.param == "postgres":
        url = str(request.getfixturevalue("postgres_url"))
        return lambda point: url
    return lambda point: str(tmp_path / f"{point}.sqlite")


@pytest.mark.parametrize("router", ROUTER_NAMES)
def test_resume_after_kill_minus_nine_at_each_boundary(
    router: str, tmp_path: Path, backend: Any
) -> None:
    run = uuid.uuid4().hex[:8]
    baseline = drive(
        backend("base"), tmp_path / "base-store.sqlite", router, kill_at=None, thread=f"{run}-base"
    )
    assert baseline is not None
    assert baseline["record"]["rule"] == "completed"
    survived = 0
    for point in BOUNDARIES[router]:
        db, store, thread = backend(point), tmp_path / f"{point}-store.sqlite", f"{run}-{point}"
        assert drive(db, store, router, kill_at=point, thread=thread) is None  # killed
        resumed = drive(db, store, router, kill_at=None, resume=True, thread=thread)
        assert resumed is not None, point
        assert writes(store) == 1, f"{point}: the record was applied {writes(store)} times"
        assert resumed["record"]["rule"] == baseline["record"]["rule"] == "completed"
        if point == "inside-tool":
            # The write happened, its checkpoint did not: the replayed call finds it done.
            assert resumed["artifacts"][-1]["already_applied"] is True
            assert resumed["final"] == "Record order-1 was already saved."
        else:
            assert resumed["final"] == baseline["final"]
            assert resumed["record"] == baseline["record"]
            assert resumed["artifacts"] == baseline["artifacts"]
        survived += 1
    assert survived == len(BOUNDARIES[router])
