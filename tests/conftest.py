"""Test-wide guards: no test reaches the network unless it is marked `live`."""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
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
    return POSTGRES_URL


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """langchain-tests' `test_init_time` is a benchmark: run it once, time nothing."""
    if hasattr(config.option, "benchmark_disable"):
        config.option.benchmark_disable = True
