"""No output of the CLI shows a connection string's password, whatever its form: stdout, stderr,
report.json's `db`, report.html."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from toolstop.cli import main

SECRET = "s3cr3tpw"

UNREACHABLE = [
    f"postgresql://nobody@127.0.0.1:1/none?password={SECRET}",
    f"postgresql://nobody@127.0.0.1:1/none?sslmode=disable&password={SECRET}",
    f"POSTGRESQL://nobody:{SECRET}@127.0.0.1:1/none",
    f"Postgres://nobody:{SECRET}@127.0.0.1:1/none",
    f"host=127.0.0.1 port=1 dbname=none user=nobody password={SECRET}",
    f"host=127.0.0.1 port=1 dbname=none password='{SECRET} x'",
    f"host=127.0.0.1 port=1 password={SECRET} x dbname=none",
    f"mysql://nobody:{SECRET}@127.0.0.1:1/none",  # not PostgreSQL: a path, still masked
    f"postgresql://nobody@127.0.0.1:1/none?pass%77ord={SECRET}",  # libpq decodes the name
    f"postgresql://nobody@127.0.0.1:1/none?%70assword={SECRET}",
    f"postgresql:/nobody:{SECRET}@127.0.0.1:1/none",  # a typo: read as a path, still masked
    # forms libpq refuses, or reads as part of the database name: masked all the same
    f"postgresql://nobody@127.0.0.1:1/none?password+={SECRET}",
    f"postgresql://nobody@127.0.0.1:1/none?pass+word={SECRET}",
    f"postgresql://nobody:pw@127.0.0.1:1/none;password={SECRET}",
    f"postgresql://nobody@127.0.0.1:1/none;password={SECRET}",
    f"host=127.0.0.1 port=1 dbname=none;password={SECRET}",
    f"host=127.0.0.1 port=1 password={SECRET};x",
]


@pytest.mark.parametrize("db", UNREACHABLE)
@pytest.mark.parametrize("command", ["report", "explain"])
def test_a_failed_connection_shows_no_password(
    db: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("psycopg")
    argv = ["report", "--db", db, "--out", str(tmp_path)]
    if command == "explain":
        argv = ["explain", "t-1", "--db", db]
    out = io.StringIO()
    assert main(argv, out=out) == 2
    err = capsys.readouterr().err
    assert SECRET not in err + out.getvalue()
    assert len(err.strip().splitlines()) == 1, err
    assert not list(tmp_path.iterdir())


def test_an_upper_case_scheme_is_read_as_postgresql(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("psycopg")
    assert main(["report", "--db", "POSTGRESQL://u@127.0.0.1:1/x", "--out", str(tmp_path)]) == 2
    assert "cannot connect to POSTGRESQL://u@127.0.0.1:1/x" in capsys.readouterr().err


@pytest.fixture
def empty_checkpoints(postgres_url: str) -> Iterator[tuple[str, str]]:
    """A database of its own with LangGraph's tables and no thread: (name, host and port)."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    name = f"toolstop_redact_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(postgres_url)
    url = parts._replace(path=f"/{name}").geturl()
    try:
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
        yield name, parts.netloc.rpartition("@")[2]
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_report_shows_no_password_in_any_form(
    empty_checkpoints: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test server trusts local connections, so each password is sent and ignored."""
    name, where = empty_checkpoints
    host, _, port = where.partition(":")
    forms = [
        f"postgresql://postgres@{where}/{name}?password={SECRET}",
        f"postgresql://postgres@{where}/{name}?pass%77ord={SECRET}",
        f"postgresql://postgres@{where}/{name}?%70assword={SECRET}",
        f"POSTGRESQL://postgres:{SECRET}@{where}/{name}",
        f"host={host} port={port or 5432} dbname={name} user=postgres password={SECRET}",
        f"host={host} port={port or 5432} dbname={name} user=postgres password='{SECRET} x'",
        f"host={host} port={port or 5432} dbname={name} application_name=a;password={SECRET}",
    ]
    for index, db in enumerate(forms):
        folder = tmp_path / str(index)
        out = io.StringIO()
        assert main(["report", "--db", db, "--out", str(folder)], out=out) == 0, (
            db,
            capsys.readouterr().err,
        )
        assert main(["explain", "nobody", "--db", db], out=out) == 1
        shown = out.getvalue() + capsys.readouterr().err
        for written in folder.iterdir():
            if written.suffix in (".json", ".html"):
                shown += written.read_text(encoding="utf-8")
        assert SECRET not in shown, db
        document = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        assert "***" in document["source"]["db"]


@pytest.mark.parametrize(
    "db",
    [
        f"postgresql://postgres@127.0.0.1/test;password={SECRET}",
        f"postgresql://postgres:pw@127.0.0.1/test;password={SECRET}",
        f"host=127.0.0.1 user=postgres dbname=test;password={SECRET}",
        f"host=127.0.0.1 user=postgres dbname=test,password={SECRET}",
    ],
)
def test_a_server_quoting_a_password_in_a_database_name_shows_none_of_it(
    db: str, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """libpq reads `test;password=...` as the database's name; the server says it does not
    exist, quoting it."""
    out = io.StringIO()
    assert main(["explain", "t-1", "--db", db], out=out) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err
    assert SECRET not in err + out.getvalue()
