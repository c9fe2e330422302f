"""Test-wide guards: no test reaches the network unless it is marked `live`."""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The tests' shared helpers (tests/support/) and the development tools (scripts/, not in the
# wheel) import by their module names.
_ROOT = Path(__file__).resolve().parent.parent
for _folder in (_ROOT / "scripts", _ROOT / "tests" / "support"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))


def _fresh_thread_pools_in_a_forked_child() -> None:
    """Drop langchain-core's shared thread pool in a forked child (`make mutation`'s workers).

    mutmut forks each worker from a process that has run the suite once: a pool created there
    has no threads in the child, and the first async callback dispatched from sync code (an
    `astream_events` test) would wait on it forever.
    """
    try:
        from langchain_core.callbacks import manager
    except ImportError:  # pragma: no cover - langchain-core is a dependency
        return
    manager._executor.cache_clear()


os.register_at_fork(after_in_child=_fresh_thread_pools_in_a_forked_child)


def _is_local(address: Any) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX socket paths
        return True
    host = address[0] if isinstance(address, tuple) and address else ""
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _no_network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse connections to anything but loopback (like pydantic-ai's ALLOW_MODEL_REQUESTS)."""
    if request.node.get_closest_marker("live"):
        yield
        return
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if not _is_local(address):
            msg = f"test tried to reach {address!r}; mark it `live` to allow the network"
            raise RuntimeError(msg)
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield


POSTGRES_URL = os.environ.get("TOOLSTOP_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test PostgreSQL (127.0.0.1:5432, database `test`); skips cleanly where there is none."""
    pytest.importorskip("langgraph.checkpoint.postgres", reason="needs the `postgres` extra")
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL, connect_timeout=3):
            pass
    except Exception as error:
        pytest.skip(f"no PostgreSQL at {POSTGRES_URL}: {error}")
    _migrate_once(POSTGRES_URL)
    return POSTGRES_URL


def _migrate_once(url: str) -> None:
    """Create the saver's tables before any test opens a saver, one process at a time.

    Tests run in parallel (`make test-fast`, pytest-xdist) share the database, and LangGraph's
    `setup()` on an empty database fails when two processes run it at once (both create the same
    tables). The lock is polled, not waited for: a process blocked in `pg_advisory_lock` holds a
    snapshot that the migration's `CREATE INDEX CONCURRENTLY` would wait for, forever.
    """
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    key = "hashtext('toolstop tests: migrations')"
    with psycopg.connect(url, autocommit=True) as lock:
        while lock.execute(f"SELECT pg_try_advisory_lock({key})").fetchone() != (True,):
            time.sleep(0.1)
        try:
            with PostgresSaver.from_conn_string(url) as saver:
                saver.setup()
        finally:
            lock.execute(f"SELECT pg_advisory_unlock({key})")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """langchain-tests' `test_init_time` is a benchmark: run it once, time nothing."""
    if hasattr(config.option, "benchmark_disable"):
        config.option.benchmark_disable = True


@pytest.fixture(autouse=True)
def _a_terminal_100_columns_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables that fit the terminal (`toolstop check`'s) are laid out for 100 columns in every test.

    The width is otherwise the terminal's: an 80-column terminal, or a pytest-xdist worker (which
    sets `COLUMNS=80`), would wrap the rows that the tests compare with the README's samples.
    """
    monkeypatch.setenv("COLUMNS", "100")
