"""`make serve` and `report` on a deployment as users set it up: their own config folder, a
password with an unencoded `@`, a restart right after a stop (issue 26, items 7-9)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

import serve as deploy
from serve import check_port_free, main
from toolstop.cli import main as toolstop

GRAPH = """
from toolstop.testing.scripted import ScriptedChatModel
from toolstop import build_react_graph

graph = build_react_graph(ScriptedChatModel(["hi"]), [])
"""


@pytest.fixture
def serve_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Valid settings on a free port, langhost 'installed', Redis answering."""
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=2).close()
    except OSError as error:
        pytest.skip(f"no Redis on 127.0.0.1:6379: {error}")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        "DATABASE_URI": "postgresql://postgres:s3cret@127.0.0.1:1/none",
        "REDIS_URI": "redis://127.0.0.1:6379/0",
        "PORT": str(port),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(deploy.shutil, "which", lambda *_a, **_k: "/usr/bin/langhost")
    return env


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A deployment folder with its own langgraph.json; the current directory is another."""
    folder = tmp_path / "deploy"
    folder.mkdir()
    (folder / "agent.py").write_text(GRAPH)
    config = {"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}}
    (folder / "langgraph.json").write_text(json.dumps(config))
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.chdir(checkout)
    monkeypatch.setattr(deploy.sys, "path", list(deploy.sys.path))
    return folder


# -- item 7: CONFIG's graph paths ------------------------------------------------------------
def test_graph_paths_resolve_against_the_config_files_folder(
    elsewhere: Path, serve_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    started: dict[str, Any] = {}

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        started.update(path=path, argv=argv, cwd=os.getcwd())
        raise SystemExit(0)

    monkeypatch.setattr(deploy, "prepare_database", lambda *_a: None)
    monkeypatch.setattr(deploy.os, "execve", execve)
    config = elsewhere / "langgraph.json"
    assert deploy.load_graphs(config) == {"agent": f"{elsewhere / 'agent.py'}:graph"}
    with pytest.raises(SystemExit):
        main([os.path.relpath(config)])
    assert started["cwd"] == str(elsewhere)  # the server resolves paths from the config's folder
    assert started["argv"][started["argv"].index("--config") + 1] == str(config)


def test_a_graph_that_does_not_load_is_one_line_before_any_worker(
    elsewhere: Path,
    serve_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (elsewhere / "agent.py").write_text("import no_such_package\n")
    migrated: list[str] = []
    monkeypatch.setattr(deploy, "prepare_database", lambda uri, _bin: migrated.append(uri))
    assert main([str(elsewhere / "langgraph.json")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"make serve: graph 'agent' ({elsewhere / 'agent.py'}) does not load: "
        "ModuleNotFoundError: No module named 'no_such_package'\n"
    )
    assert migrated == []  # nothing started


def test_a_missing_graph_file_names_where_it_was_looked_for(elsewhere: Path) -> None:
    config = {"graphs": {"agent": "./agents/support.py:graph"}}
    (elsewhere / "langgraph.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="does not load") as caught:
        deploy.load_graphs(elsewhere / "langgraph.json")
    assert str(caught.value) == (
        f"graph 'agent' ({elsewhere / 'agents' / 'support.py'}) does not load: "
        f"FileNotFoundError: no such file (resolved against {elsewhere})"
    )


# -- item 8: a password with an unencoded @ ----------------------------------------------------
BAD_URL = "postgresql://postgres:hunter2@prod@127.0.0.1:5432/test"


def test_report_never_shows_a_piece_of_a_password_with_an_unencoded_at(tmp_path: Path) -> None:
    pytest.importorskip("psycopg", reason="needs the `postgres` extra")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = toolstop(["report", "--db", BAD_URL, "--out", str(tmp_path)], out=io.StringIO())
    assert code == 2
    assert err.getvalue() == (
        "toolstop report: cannot connect to postgresql://postgres:***@127.0.0.1:5432/test: the "
        "password holds an unencoded '@', so the driver reads the URL differently; "
        "percent-encode the password ('@' is %40)\n"
    )


def test_make_serve_never_shows_a_piece_of_a_password_with_an_unencoded_at(
    tmp_path: Path,
    serve_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the runtime's migration reads the URL as libpq does: host from after the first '@'
    migrate = tmp_path / "langgraph-runtime-pg-migrate"
    migrate.write_text(
        "#!/bin/sh\n"
        "echo \"psycopg.OperationalError: failed to resolve host 'prod@127.0.0.1'\" >&2\n"
        "exit 1\n"
    )
    migrate.chmod(0o755)
    monkeypatch.setenv("DATABASE_URI", BAD_URL)
    monkeypatch.setattr(deploy.sys, "executable", str(tmp_path / "python"))
    monkeypatch.chdir(Path(__file__).parents[1])  # the checkout's langgraph.json
    assert main(["langgraph.json"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "make serve: cannot migrate postgresql://postgres:***@127.0.0.1:5432/test: the password "
        "holds an unencoded '@', so the driver reads the URL differently; percent-encode the "
        "password ('@' is %40)\n"
    )
    assert "prod" not in err.replace("/test", "")


# -- item 9: a restart right after a stop --------------------------------------------------------
def _serve_clients(clients: int) -> int:
    """A server as langgraph-api's binds (SO_REUSEADDR), serving `clients`, then stopped: it
    closes the connections first, so they linger in TIME_WAIT on its port. Returns the port."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = int(listener.getsockname()[1])
    connected = [socket.create_connection(("127.0.0.1", port)) for _ in range(clients)]
    accepted = [listener.accept()[0] for _ in range(clients)]
    for client, served in zip(connected, accepted, strict=True):
        client.sendall(b"GET /ok HTTP/1.1\r\n\r\n")
        served.recv(64)
        served.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
        client.recv(64)
    listener.close()  # the stop: the server closes first
    for served in accepted:
        served.close()
    for client in connected:
        client.recv(1)  # the server's FIN
        client.close()
    return port


def test_the_port_probe_lets_a_server_restart_right_after_a_stop() -> None:
    port = _serve_clients(3)
    # without SO_REUSEADDR (the old probe) the lingering connections refuse it
    with socket.socket() as plain, pytest.raises(OSError, match="Address already in use"):
        plain.bind(("127.0.0.1", port))
    check_port_free(port)  # the restart goes ahead


def test_the_port_probe_still_refuses_a_port_something_listens_on() -> None:
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        with pytest.raises(ValueError, match=f"port {port} on 127.0.0.1 is in use"):
            check_port_free(port)
