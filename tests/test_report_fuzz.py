"""`toolstop report` and `toolstop explain` on mutated checkpoint databases (hypothesis).

The seed is a real database: a real agent (`build_react_graph`, scripted model, signalling tool)
run with LangGraph's `SqliteSaver`, in shadow and hard mode, with a run left open. Each example
mutates a copy of it: bytes of the file flipped; a checkpoint or write blob replaced by random
bytes, truncated, or given another type; rows deleted; or one value deep inside a checkpoint
(extensions kept) replaced by a random one. Whatever the mutation: no traceback (nothing
escapes `main`, stderr names no traceback), nothing written outside `--out` (the database
itself included), and the exit code is one docs/cli.md documents (0, 1 or 2).
"""

from __future__ import annotations

import hashlib
import io
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import Any

import ormsgpack
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="needs hypothesis (dev extra)")
pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from toolstop import Outcome, StopPolicy, build_react_graph, signal  # noqa: E402
from toolstop.cli import main  # noqa: E402
from toolstop.testing import ScriptedChatModel, call, forced_tool  # noqa: E402

# Many examples each write a report (a chart, a page): seconds, not milliseconds.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

THREADS = ("shop", "desk", "open")
FUZZ = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bytes of a database a real agent wrote: four finished runs and one left open."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path_factory.mktemp("seed") / "threads.sqlite"
    done = ("Paid. Receipt r-1.", signal(Outcome.COMPLETED))
    retry = ("Timed out.", signal(Outcome.TRANSIENT))
    runs: list[tuple[str, str, list[Any], list[Any], dict[str, Any]]] = [
        ("shop", "never", [call("pay", id="p1"), "You paid."], [done], {}),
        ("shop", "hard", [call("pay", id="p2")], [done], {}),
        ("desk", "hard", [call("pay", id="p3"), call("pay", id="p4")], [retry, done], {}),
        ("desk", "never", ["Hello!"], [done], {}),
        ("open", "hard", [call("pay", id="p5")], [done], {"interrupt_before": ["tools"]}),
    ]
    with SqliteSaver.from_conn_string(str(path)) as saver:
        for thread, mode, script, results, extra in runs:
            model = ScriptedChatModel(script)
            agent = build_react_graph(
                model,
                [forced_tool("pay", *results)],
                policy=StopPolicy(mode=mode),  # type: ignore[arg-type]
                checkpointer=saver,
                **extra,
            )
            agent.invoke(
                {"messages": [("user", "Please pay.")]}, {"configurable": {"thread_id": thread}}
            )
            model.assert_complete()
    return path


def files(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def run(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(list(argv), out=io.StringIO())
    return code, err.getvalue()


def check_commands(folder: Path) -> None:
    """Report and explain the database in `folder`; only `folder/out` may change."""
    db = str(folder / "threads.sqlite")
    before = files(folder)
    out = folder / "out"
    results = [run("report", "--db", db, "--out", str(out))]
    results += [run("explain", thread, "--db", db) for thread in (*THREADS, "nobody")]
    results.append(run("explain", "shop", "--db", db, "--json", "--run", "1"))
    for code, err in results:
        assert code in (0, 1, 2), err
        assert "Traceback" not in err
        assert len(err.strip().splitlines()) <= 3, err  # a few sentences, never a dump
    after = {name: digest for name, digest in files(folder).items() if not name.startswith("out")}
    assert after == before


@contextmanager
def opened(folder: Path) -> Iterator[sqlite3.Connection]:
    """The copy, opened to mutate; closed out of WAL mode, so no -wal file is left beside it."""
    conn = sqlite3.connect(folder / "threads.sqlite")
    try:
        yield conn
        conn.commit()
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()


def copy(data: bytes) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="toolstop-fuzz-"))
    (folder / "threads.sqlite").write_bytes(data)
    return folder


def test_the_seed_is_read_whole(seed: Path) -> None:
    """The mutations start from a database both commands read without a fault."""
    folder = copy(seed.read_bytes())
    try:
        db = str(folder / "threads.sqlite")
        code, err = run("report", "--db", db, "--out", str(folder / "out"))
        assert (code, err) == (0, "")
        assert '"runs": 4' in (folder / "out" / "report.json").read_text()
        assert run("explain", "shop", "--db", db) == (0, "")
    finally:
        shutil.rmtree(folder)


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 255)), max_size=8))
def test_flipped_bytes(seed: Path, flips: list[tuple[int, int]]) -> None:
    data = bytearray(seed.read_bytes())
    for offset, mask in flips:
        data[offset % len(data)] ^= mask
    folder = copy(bytes(data))
    try:
        check_commands(folder)
    finally:
        shutil.rmtree(folder)


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.binary(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

BLOB = st.one_of(
    st.binary(max_size=64),
    JSONISH.map(ormsgpack.packb),
    st.sampled_from(["truncate", "flip"]),
)


@FUZZ
@given(
    table=st.sampled_from(["checkpoints", "writes"]),
    row=st.integers(0, 200),
    blob=BLOB,
    kind=st.sampled_from(["msgpack", "json", "pickle", "null", "bytes", "x"]),
    change_kind=st.booleans(),
    delete=st.integers(0, 3),
)
def test_replaced_blobs_and_deleted_rows(
    seed: Path, table: str, row: int, blob: Any, kind: str, change_kind: bool, delete: int
) -> None:
    folder = copy(seed.read_bytes())
    try:
        column = "checkpoint" if table == "checkpoints" else "value"
        with opened(folder) as conn:
            rows = conn.execute(f"SELECT rowid, {column} FROM {table}").fetchall()
            rowid, old = rows[row % len(rows)]
            if blob == "truncate":
                blob = old[: len(old) // 2]
            elif blob == "flip":
                blob = bytes([(old[:1] or b"\0")[0] ^ 0xFF]) + old[1:]  # a value may be b""
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (blob, rowid))
            if change_kind:
                conn.execute(f"UPDATE {table} SET type = ? WHERE rowid = ?", (kind, rowid))
            for gone in rows[row % len(rows) + 1 :][:delete]:
                conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (gone[0],))
        check_commands(folder)
    finally:
        shutil.rmtree(folder)


class Opened:
    """A msgpack extension opened up (LangGraph packs a message as one), so that a value inside
    it, a message's field, can be mutated too; packed back as the same extension."""

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        try:
            self.tree: Any = unpack(data)
            self.raw = False
        except ValueError:
            self.tree, self.raw = data, True

    def __getitem__(self, key: str) -> Any:
        return self.tree

    def __setitem__(self, key: str, value: Any) -> None:
        self.tree = value


def unpack(data: bytes) -> Any:
    return ormsgpack.unpackb(data, ext_hook=Opened, option=ormsgpack.OPT_NON_STR_KEYS)


def pack(tree: Any) -> bytes:
    return ormsgpack.packb(tree, default=_repack, option=ormsgpack.OPT_NON_STR_KEYS)


def _repack(value: Any) -> ormsgpack.Ext:
    if not isinstance(value, Opened):
        raise TypeError
    return ormsgpack.Ext(value.code, value.tree if value.raw else pack(value.tree))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a tree of dicts, lists and opened extensions (the root excluded)."""
    items: Any = []
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    elif isinstance(value, Opened) and not value.raw:
        items = [("tree", value.tree)]
    found = []
    for key, child in items:
        found.append((*prefix, key))
        found.extend(_paths(child, (*prefix, key)))
    return found


@FUZZ
@given(row=st.integers(0, 200), where=st.integers(0, 10**6), value=JSONISH)
def test_one_value_deep_in_a_checkpoint_replaced(
    seed: Path, row: int, where: int, value: Any
) -> None:
    """The record, the run state, a message's fields: any one value becomes any other.

    `where` picks among the checkpoint's values, those inside messages included."""
    folder = copy(seed.read_bytes())
    try:
        with opened(folder) as conn:
            rows = conn.execute("SELECT rowid, checkpoint FROM checkpoints").fetchall()
            rowid, blob = rows[row % len(rows)]
            tree = unpack(blob)
            paths = _paths(tree)
            path = paths[where % len(paths)]
            parent = tree
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = value
            conn.execute(
                "UPDATE checkpoints SET checkpoint = ? WHERE rowid = ?", (pack(tree), rowid)
            )
        check_commands(folder)
    finally:
        shutil.rmtree(folder)
