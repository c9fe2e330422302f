"""`make serve`: the project's `langgraph.json` on LangGraph Server, PostgreSQL and Redis.

Runs in its own environment (`.venv-serve`, `pip install 'toolstop[serve-pg]'`), because the
server packages pin versions the development environment does not share. It reads the
environment, prepares the database once (the runtime's schema migrations, LangGraph's own
checkpointer and store tables), then replaces itself with `langhost serve`: the stock
`langgraph-api` server on the community PostgreSQL + Redis runtime `langgraph-runtime-pg`.
Signals (Ctrl-C, SIGTERM) then go straight to the server, which shuts down its workers.

Environment:
    DATABASE_URI: PostgreSQL (threads, runs, checkpoints, store); required.
    REDIS_URI: Redis (the run queue's wake-ups, heartbeats, streaming between workers); required.
    PORT: default 8123. The server binds 127.0.0.1 only.
    WORKERS: server processes, default 2.
    N_JOBS_PER_WORKER: runs each process executes at once, default 10 (langgraph-api's).
    LG_BG_JOB_HEARTBEAT: seconds, default 10 here (langgraph-api's own default is 120): a
        crashed worker's or replica's runs go back to the queue, and are run again, once their
        heartbeat (kept for about twice this) expires. Shorter sweeps sooner; too short re-runs
        a run whose worker is only stalled (a long blocking call) while it still runs.

Usage: `make serve [CONFIG=langgraph.json]`, or `python scripts/serve.py [CONFIG]` in
`.venv-serve`. Before the server starts, the port must be free (langgraph-api would otherwise
move to a random port; a stopped server's lingering connections do not count), Redis and
PostgreSQL must answer, and every graph of CONFIG must load (its paths resolved against the
config file's folder, as the LangGraph CLI does; the server runs from that folder); each
failure is one sentence and exit status 2.

Deliberately not handled: TLS, authentication, binding other interfaces. This is the local
production-like setup; put a reverse proxy in front for anything else.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from toolstop._redact import driver_error, redact, without_password

__all__ = [
    "ServeSettings",
    "check_port_free",
    "check_redis",
    "load_graphs",
    "main",
    "prepare_database",
    "serve_command",
]

DEFAULT_PORT = 8123
DEFAULT_WORKERS = 2
DEFAULT_JOBS_PER_WORKER = 10
DEFAULT_HEARTBEAT_S = 10
"""`LG_BG_JOB_HEARTBEAT` unless set: a killed worker's runs are swept back to the queue in about
20 s instead of about 4 minutes with langgraph-api's 120 s, while a worker has to block for
about 20 s before its live runs are taken for dead."""
HOST = "127.0.0.1"


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    """What `make serve` was asked for (see the module docstring for the variables).

    Attributes:
        database_uri: PostgreSQL URI.
        redis_uri: Redis URI.
        port: TCP port on 127.0.0.1.
        workers: server processes.
        jobs_per_worker: concurrent runs per process.
    """

    database_uri: str
    redis_uri: str
    port: int = DEFAULT_PORT
    workers: int = DEFAULT_WORKERS
    jobs_per_worker: int = DEFAULT_JOBS_PER_WORKER

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ServeSettings:
        """Read and check the settings.

        Raises:
            ValueError: one sentence naming the variable that is missing or malformed.
        """
        return cls(
            database_uri=_required(env, "DATABASE_URI", "postgresql://", "postgres://"),
            redis_uri=_required(env, "REDIS_URI", "redis://", "rediss://", "unix://"),
            port=_integer(env, "PORT", DEFAULT_PORT, 1, 65535),
            workers=_integer(env, "WORKERS", DEFAULT_WORKERS, 1, 64),
            jobs_per_worker=_integer(env, "N_JOBS_PER_WORKER", DEFAULT_JOBS_PER_WORKER, 0, 1000),
        )


def _required(env: Mapping[str, str], name: str, *schemes: str) -> str:
    value = env.get(name, "").strip()
    example = {
        "DATABASE_URI": "postgresql://postgres@127.0.0.1:5432/toolstop",
        "REDIS_URI": "redis://127.0.0.1:6379/0",
    }[name]
    if not value:
        msg = f"{name} is not set; make serve needs it, e.g. {name}={example}"
        raise ValueError(msg)
    if not value.startswith(schemes):
        msg = (
            f"{name} must start with {' or '.join(schemes)}, e.g. {example}; got {redact(value)!r}"
        )
        raise ValueError(msg)
    return value


def _integer(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        msg = f"{name} must be a whole number from {low} to {high}, got {raw!r}"
        raise ValueError(msg)
    return value


def serve_command(settings: ServeSettings, config: Path, bin_dir: Path) -> list[str]:
    """The `langhost serve` command line for `settings`."""
    return [
        str(bin_dir / "langhost"),
        "serve",
        "--host",
        HOST,
        "--port",
        str(settings.port),
        "--workers",
        str(settings.workers),
        "--n-jobs-per-worker",
        str(settings.jobs_per_worker),
        "--config",
        str(config),
        "--no-browser",
    ]


def prepare_database(database_uri: str, bin_dir: Path) -> None:
    """Create or upgrade every table the server uses, once, before any worker starts.

    Each worker would otherwise migrate on its own at start-up, and on a fresh database two
    workers racing to create the same tables make the server exit (`UniqueViolation`). This runs
    the runtime's own migrations (`langgraph-runtime-pg-migrate upgrade`) and LangGraph's own
    `PostgresSaver.setup()` / `PostgresStore.setup()`; each is idempotent.

    Raises:
        RuntimeError: when the database cannot be reached or migrated (its error included).
    """
    migrate = bin_dir / "langgraph-runtime-pg-migrate"
    env = {**os.environ, "DATABASE_URI": database_uri}
    done = subprocess.run(
        [str(migrate), "upgrade"], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        reason = driver_error(_reason(done.stderr or done.stdout), database_uri)
        msg = f"cannot migrate {without_password(database_uri)}: {reason}"
        raise RuntimeError(msg)
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    try:
        with PostgresSaver.from_conn_string(database_uri) as saver:
            saver.setup()
        with PostgresStore.from_conn_string(database_uri) as store:
            store.setup()
    except Exception as error:
        reason = driver_error(str(error), database_uri)
        msg = f"cannot set up LangGraph's tables in {without_password(database_uri)}: {reason}"
        raise RuntimeError(msg) from None


def _reason(output: str) -> str:
    """The line of a failed migration's output that says why (not SQLAlchemy's link line)."""
    lines = [
        line.strip()
        for line in output.strip().splitlines()
        if line.strip() and not line.strip().startswith("(Background on this error")
    ]
    for line in reversed(lines):
        if "Error" in line or "error" in line or "does not exist" in line:
            return line
    return lines[-1] if lines else "no output"


def check_port_free(port: int) -> None:
    """Refuse a port something already listens on (langgraph-api would pick a random one).

    The probe binds with `SO_REUSEADDR`, as the server does: connections of a server that just
    stopped linger in TIME_WAIT for a minute, and they do not keep the server from starting
    again at once; only a socket that listens does.

    Raises:
        ValueError: one sentence naming the port.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            msg = (
                f"port {port} on {HOST} is in use (another server or replica?); choose another PORT"
            )
            raise ValueError(msg) from None


def _graph_file(spec: str, base: Path) -> tuple[Path | None, str, str]:
    """`(file, module, attribute)` of a graph spec: `./path/file.py:attr` resolved against
    `base` (the config file's folder, as the LangGraph CLI resolves it), or `package.module:attr`
    (file None)."""
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py") or "/" in target or "\\" in target:
        file = (base / target).resolve()
        return file, f"_serve_graph_{file.stem}", attr
    return None, target, attr


def load_graphs(config: Path) -> dict[str, str]:
    """Import every graph of `config` once, as the server will, before any worker starts; return
    graph name -> where it was loaded from.

    Paths resolve against the config file's folder, and that folder is importable (as with
    the LangGraph CLI's `"dependencies": ["."]`).

    Raises:
        ValueError: one sentence: a config that is not JSON, or the first graph that does not
            load (its name, file and error).
    """
    import importlib
    import importlib.util
    import json

    try:
        document = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        msg = f"{config} is not a readable JSON file: {error}"
        raise ValueError(msg) from None
    graphs = document.get("graphs") if isinstance(document, dict) else None
    if not isinstance(graphs, dict) or not graphs:
        msg = f'{config} names no graphs (a "graphs" object of name -> ./file.py:attr)'
        raise ValueError(msg)
    base = config.resolve().parent
    if str(base) not in sys.path:
        sys.path.insert(0, str(base))
    loaded: dict[str, str] = {}
    for name, value in graphs.items():
        spec = value.get("path") if isinstance(value, dict) else value
        if not isinstance(spec, str) or ":" not in spec:
            msg = f"graph {name!r} in {config}: expected ./file.py:attr, got {spec!r}"
            raise ValueError(msg)
        file, module_name, attr = _graph_file(spec, base)
        where = str(file) if file is not None else module_name
        try:
            if file is not None:
                if not file.is_file():
                    raise FileNotFoundError(f"no such file (resolved against {base})")
                found = importlib.util.spec_from_file_location(module_name, file)
                if found is None or found.loader is None:
                    raise ImportError("not a Python module")
                module = importlib.util.module_from_spec(found)
                sys.modules[module_name] = module
                found.loader.exec_module(module)
            else:
                module = importlib.import_module(module_name)
            if not hasattr(module, attr):
                raise AttributeError(f"it has no attribute {attr!r}")
        except BaseException as error:  # the user's module may raise anything, SystemExit too
            if isinstance(error, KeyboardInterrupt):
                raise
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            msg = f"graph {name!r} ({where}) does not load: {type(error).__name__}: {reason}"
            raise ValueError(msg.rstrip(": ")) from None
        loaded[name] = f"{where}:{attr}"
    return loaded


def check_redis(redis_uri: str, timeout: float = 5.0) -> None:
    """Refuse a Redis that does not answer PING (the server would start and fail in its workers).

    Raises:
        RuntimeError: one sentence naming the URI (without its password) and the reason.
    """
    shown = without_password(redis_uri)
    parts = urlsplit(redis_uri)
    try:
        if parts.scheme == "unix":
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.settimeout(timeout)
            connection.connect(parts.path)
        else:
            address = (parts.hostname or "127.0.0.1", parts.port or 6379)
            connection = socket.create_connection(address, timeout=timeout)
        with connection:
            if parts.scheme == "rediss":
                return  # TLS: reachable is as far as a plain socket can tell
            if parts.password is not None:
                user = [parts.username] if parts.username else []
                command = ["AUTH", *user, parts.password]
                connection.sendall(_resp(command))
                answer = connection.recv(256)
                if not answer.startswith(b"+"):
                    msg = f"Redis at {shown} refused the password"
                    raise RuntimeError(msg)
            connection.sendall(_resp(["PING"]))
            answer = connection.recv(256)
    except OSError as error:
        msg = f"cannot reach Redis at {shown}: {error.strerror or error}"
        raise RuntimeError(msg) from None
    if not answer.startswith(b"+PONG"):
        reply = answer.decode("utf-8", "replace").strip() or "no answer"
        msg = f"Redis at {shown} did not answer PING: {reply}"
        raise RuntimeError(msg)


def _resp(command: list[str]) -> bytes:
    parts = [f"*{len(command)}\r\n".encode()]
    for word in command:
        data = word.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _server_env(env: Mapping[str, str]) -> dict[str, str]:
    child = dict(env)
    child["LG_RUNTIME_PG_AUTO_MIGRATE"] = "false"  # prepare_database did it, once
    child.setdefault("LANGGRAPH_NO_VERSION_CHECK", "true")
    child.setdefault("LG_BG_JOB_HEARTBEAT", str(DEFAULT_HEARTBEAT_S))
    child.setdefault("LANGSMITH_TRACING", "false")
    child.setdefault("LANGGRAPH_CLI_NO_ANALYTICS", "1")
    return child


def main(argv: Sequence[str] | None = None) -> int:
    """Prepare the database and become `langhost serve` (returns only on an error: 2).

    Args:
        argv: `[CONFIG]`, the path of `langgraph.json` (default: `./langgraph.json`).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 0
    config = Path(args[0] if args else "langgraph.json")
    bin_dir = Path(sys.executable).parent
    try:
        settings = ServeSettings.from_env(os.environ)
        if not config.is_file():
            msg = f"no {config}; run make serve from the project's folder"
            raise ValueError(msg)
        if shutil.which("langhost", path=str(bin_dir)) is None:
            msg = f"langhost is not installed next to {sys.executable}; make serve installs it"
            raise ValueError(msg)
        check_port_free(settings.port)
        check_redis(settings.redis_uri)
        load_graphs(config)
        prepare_database(settings.database_uri, bin_dir)
    except (ValueError, RuntimeError) as error:
        print(f"make serve: {error}", file=sys.stderr)
        return 2
    # The server resolves the config's paths against the current directory; the LangGraph CLI
    # resolves them against the config file's folder: run the server from there.
    config = config.resolve()
    command = serve_command(settings, config, bin_dir)
    env = _server_env(os.environ)
    env["DATABASE_URI"], env["REDIS_URI"] = settings.database_uri, settings.redis_uri
    print(
        f"make serve: {config} on http://{HOST}:{settings.port} with {settings.workers} "
        f"worker(s) x {settings.jobs_per_worker} job(s); Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )
    os.chdir(config.parent)
    os.execve(command[0], command, env)
    return 2  # pragma: no cover - execve does not return


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
