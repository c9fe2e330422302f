"""`make serve` driven from Python: a server in a process group of its own, a scratch database.

What the `server` tests and `make serve-bench` start their servers with. Run from the project's
folder (it runs `make serve`), with PostgreSQL at `TOOLSTOP_TEST_POSTGRES` (a database to connect
to for creating scratch ones; default `postgresql://postgres@127.0.0.1:5432/test`) and Redis at
`TOOLSTOP_TEST_REDIS` (default `redis://127.0.0.1:6379/13`).
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = [
    "ADMIN_URL",
    "REDIS_URL",
    "ServeProcess",
    "StopResult",
    "free_port",
    "human",
    "redis_problem",
    "scratch_database",
]

ADMIN_URL = os.environ.get("TOOLSTOP_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TOOLSTOP_TEST_REDIS", "redis://127.0.0.1:6379/13")
_MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_problem(url: str) -> str | None:
    """Why Redis at `url` cannot be used (one sentence), or None when it answers PING."""
    parts = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 3) as s:
            s.sendall(b"PING\r\n")
            answer = s.recv(64)
    except OSError as error:
        return f"no Redis at {url}: {error}"
    if not answer.startswith(b"+PONG"):
        return f"Redis at {url} answered {answer!r} to PING"
    return None


@contextmanager
def scratch_database(admin_url: str = ADMIN_URL) -> Iterator[str]:
    """A fresh database `toolstop_srv_<random>` next to `admin_url`'s, dropped afterwards.

    Raises:
        psycopg.OperationalError: when PostgreSQL cannot be reached.
    """
    import psycopg

    name = f"toolstop_srv_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    parts = urllib.parse.urlsplit(admin_url)
    try:
        yield urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass(frozen=True, kw_only=True)
class StopResult:
    """How a server stopped.

    Attributes:
        returncode: `make serve`'s exit status (negative: the signal that ended it).
        seconds: from the signal until every process of the server's group was gone.
        group_gone: True when no process of the group was left (False: some had to be killed).
        shutdown_logged: True when every server process logged a completed shutdown.
    """

    returncode: int
    seconds: float
    group_gone: bool
    shutdown_logged: bool


class ServeProcess:
    """`make serve` in a process group of its own, its output in a log file.

    Args:
        root: the project's folder (with the Makefile and `langgraph.json`).
        log: where the server's output goes.
        env: variables on top of this process's environment (`DATABASE_URI`, `REDIS_URI`, ...);
            `PORT` is chosen when not given. `TOOLSTOP_MODEL` is removed: the simulated model.
    """

    def __init__(self, root: Path, log: Path, env: Mapping[str, str]) -> None:
        self.root = root
        self.log = log
        self.port = int(env.get("PORT") or free_port())
        base = {k: v for k, v in os.environ.items() if k not in _MAKE_VARIABLES}
        base.pop("TOOLSTOP_MODEL", None)
        self.env = {**base, **env, "PORT": str(self.port)}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0) -> ServeProcess:
        """Start `make serve` and wait until the server answers `/ok` (`launch`, `wait_ready`)."""
        return self.launch().wait_ready(timeout)

    def launch(self) -> ServeProcess:
        """Start `make serve` without waiting for it."""
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                ["make", "-s", "--no-print-directory", "serve"],
                cwd=self.root,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def wait_ready(self, timeout: float = 180.0) -> ServeProcess:
        """Wait until the launched server answers `/ok`.

        Raises:
            RuntimeError: when it exits or does not answer within `timeout` (log included).
        """
        assert self.process is not None, "not launched"
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/ok", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                msg = f"make serve did not start on {self.url}:\n{self.log_tail()}"
                raise RuntimeError(msg)
            time.sleep(0.3)

    def log_tail(self, lines: int = 30) -> str:
        """The end of the server's log."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _group_alive(self) -> bool:
        assert self.process is not None
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def signal_group(self, signum: int) -> None:
        """Send `signum` to every process of the server (what Ctrl-C in a terminal does)."""
        if self.process is not None and self._group_alive():
            os.killpg(self.process.pid, signum)

    def stop(
        self, signum: int = signal.SIGTERM, *, group: bool = False, timeout: float = 60.0
    ) -> StopResult:
        """Stop the server: `signum` to `make` (as a supervisor does) or to the whole group.

        Processes still alive after `timeout` are killed (and `group_gone` is False).
        """
        assert self.process is not None, "not started"
        started = time.monotonic()
        if group:
            self.signal_group(signum)
        elif self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            returncode = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            returncode = -signal.SIGKILL
        while self._group_alive() and time.monotonic() - started < timeout:
            time.sleep(0.1)
        gone = not self._group_alive()
        seconds = time.monotonic() - started
        if not gone:
            self.kill()
        started_pids, finished_pids = self.server_processes()
        return StopResult(
            returncode=returncode,
            seconds=round(seconds, 3),
            group_gone=gone,
            shutdown_logged=bool(started_pids) and started_pids <= finished_pids,
        )

    def server_processes(self) -> tuple[set[str], set[str]]:
        """The ids of the server processes (workers) its log says started, and finished."""
        log = self.log.read_text(errors="replace") if self.log.exists() else ""
        started = set(re.findall(r"Started server process \[(\d+)\]", log))
        finished = set(re.findall(r"Finished server process \[(\d+)\]", log))
        return started, finished

    def swept_runs(self) -> dict[str, float]:
        """Run id -> when (epoch seconds) this server put it back in the queue, from its log.

        The runtime logs `Swept stale run` with the run id when a run's heartbeat has expired.
        """
        log = self.log.read_text(errors="replace") if self.log.exists() else ""
        swept: dict[str, float] = {}
        for line in re.sub(r"\x1b\[[0-9;]*m", "", log).splitlines():
            found = re.match(r"(\S+Z) .*Swept stale run .*run_id=([0-9a-f-]+)", line)
            if found:
                swept[found[2]] = datetime.fromisoformat(found[1]).timestamp()
        return swept

    def kill(self) -> None:
        """SIGKILL every process of the server (a crash), and reap `make`."""
        self.signal_group(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=30)


def human(text: str) -> Any:
    """A run's input: one human message."""
    return {"messages": [{"role": "human", "content": text}]}
