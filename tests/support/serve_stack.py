"""What the `make serve` tests need before a server starts: PostgreSQL, Redis, `.venv-serve`."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from serve_process import ADMIN_URL, REDIS_URL, redis_problem, scratch_database

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def serve_stack(logs: Path) -> Iterator[dict[str, Any]]:
    """A scratch database, Redis and the serve environment; skips the test without them."""
    pytest.importorskip("langgraph_sdk", reason="needs langgraph-sdk (the `server` extra)")
    pytest.importorskip("psycopg", reason="needs psycopg (the `postgres` extra)")
    import psycopg

    try:
        with psycopg.connect(ADMIN_URL, connect_timeout=3):
            pass
    except psycopg.OperationalError as error:
        pytest.skip(f"no PostgreSQL at {ADMIN_URL}: {error}")
    problem = redis_problem(REDIS_URL)
    if problem:
        pytest.skip(problem)
    if shutil.which("make") is None:
        pytest.skip("make serve needs make")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    made = subprocess.run(
        ["make", "-s", "serve-env"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if made.returncode != 0:
        tail = "\n".join((made.stdout + made.stderr).strip().splitlines()[-5:])
        pytest.skip(f"the serve environment (.venv-serve) could not be created:\n{tail}")
    with scratch_database() as database:
        yield {"database": database, "redis": REDIS_URL, "logs": logs}
