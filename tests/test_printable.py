"""Strings a run produced reach terminals and log lines escaped (`toolstop._printable`): a tool
name the model chose cannot clear a terminal, set its title, or forge a log line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from toolstop import StopPolicy, build_react_graph, signal
from toolstop._printable import printable, printable_data
from toolstop.cli import main
from toolstop.testing import ScriptedChatModel, call, forced_tool

ESCAPES = "\x1b]0;pwn\x07\x1b[2J"
FORGED = "a\nWARNING toolstop forged"
HOSTILE = [ESCAPES, FORGED]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (ESCAPES, "\\x1b]0;pwn\\x07\\x1b[2J"),
        (FORGED, "a\\nWARNING toolstop forged"),
        ("tab\there\r", "tab\\there\\r"),
        ("del\x7f c1\x9b nul\x00", "del\\x7f c1\\x9b nul\\x00"),
        ("bidi \u202egnp.exe\u202c \u2066x\u2069", "bidi \\u202egnp.exe\\u202c \\u2066x\\u2069"),
        ("line\u2028sep\u2029 bom\ufeff", "line\\u2028sep\\u2029 bom\\ufeff"),
        ("café 東京 lookup_v2", "café 東京 lookup_v2"),
    ],
)
def test_controls_are_escaped_and_text_is_kept(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_every_string_in_data_is_escaped_keys_too() -> None:
    data = {"tools": [ESCAPES], FORGED: ("x\x1b", 3, None), "n": 1.5}
    assert printable_data(data) == {
        "tools": [printable(ESCAPES)],
        printable(FORGED): (printable("x\x1b"), 3, None),
        "n": 1.5,
    }


def _no_raw_control(text: str) -> None:
    lines = text.splitlines()
    assert not any(line.startswith("WARNING toolstop forged") for line in lines), text
    assert "\x1b" not in text
    assert "\x07" not in text


@pytest.fixture
def hostile_threads(tmp_path: Path) -> Path:
    """A SQLite checkpoint database with runs of unsignalling tools with hostile names.

    Five runs of each, the answer the tool's result: enough for the report to name the tool."""
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path / "threads.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        for index, name in enumerate(HOSTILE):
            for run in range(5):
                tool = forced_tool(name, ("Found it.", None))
                model = ScriptedChatModel([call(name, id=f"c{index}"), "Found it."])
                agent = build_react_graph(
                    model, [tool], policy=StopPolicy(mode="never"), checkpointer=saver
                )
                thread = f"t{index}\x1b[2J" + (f"-{run}" if run else "")
                agent.invoke(
                    {"messages": [HumanMessage("q")]}, {"configurable": {"thread_id": thread}}
                )
    return db


def test_explain_escapes_tool_names_and_thread_ids(
    hostile_threads: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for index, name in enumerate(HOSTILE):
        out = io.StringIO()
        assert main(["explain", f"t{index}\x1b[2J", "--db", str(hostile_threads)], out=out) == 0
        text = out.getvalue() + capsys.readouterr().err
        _no_raw_control(text)
        assert printable(name) in text
        # --json keeps the name as data, escaped by JSON itself
        out = io.StringIO()
        argv = ["explain", f"t{index}\x1b[2J", "--db", str(hostile_threads), "--json"]
        assert main(argv, out=out) == 0
        _no_raw_control(out.getvalue())
        assert json.loads(out.getvalue())["thread_id"] == f"t{index}\x1b[2J"


def test_the_reports_summary_escapes_tool_names(
    hostile_threads: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="the report chart needs the `bench` extra")
    out = io.StringIO()
    assert (
        main(["report", "--db", str(hostile_threads), "--out", str(tmp_path / "r")], out=out) == 0
    )
    text = out.getvalue() + capsys.readouterr().err
    _no_raw_control(text)
    assert any(printable(name) in text for name in HOSTILE), text


@contextmanager
def _logged(form: str) -> Iterator[io.StringIO]:
    """What logger `toolstop` writes at INFO while the block runs, formatted by `form`."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(form))
    logger = logging.getLogger("toolstop")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_tool_name_cannot_forge_a_log_line() -> None:
    with _logged("%(levelname)s %(name)s %(message)s") as stream:
        tool = forced_tool(FORGED, ("Found it.", signal("completed")))
        model = ScriptedChatModel([call(FORGED, id="c1"), "Found it."])
        agent = build_react_graph(model, [tool], policy=StopPolicy(mode="never"))
        agent.invoke({"messages": [HumanMessage("q")]})
    lines = stream.getvalue().splitlines()
    assert lines, "no run_end line"
    assert all(line.startswith("INFO toolstop run ended:") for line in lines), lines
    assert printable(FORGED) in lines[0]


def test_the_log_line_names_the_thread_escaped_and_cut() -> None:
    """The `run ended` line says which thread and run it is about; a thread id is the caller's
    text: escaped, and cut to 200 characters (the whole id stays in the record's `extra`)."""
    from langgraph.checkpoint.memory import InMemorySaver

    thread_id = FORGED + ESCAPES + "x" * 300
    with _logged("%(message)s") as stream:
        model = ScriptedChatModel(["Hello."])
        agent = build_react_graph(model, [], checkpointer=InMemorySaver())
        agent.invoke({"messages": [HumanMessage("q")]}, {"configurable": {"thread_id": thread_id}})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"run ended: thread={printable(thread_id)[:200]}... run=1 rule=")
    assert "\x1b" not in lines[0]


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_the_clis_error_lines_are_escaped_masked_and_never_raise() -> None:
    from toolstop.cli._output import failure, shown

    db = "host=h password='pw x'"
    assert shown(f"bad {ESCAPES} for pw x", db) == f"bad {printable(ESCAPES)} for ***"
    assert failure(RuntimeError(f"gone: {ESCAPES}\nsecond line")) == (
        f"RuntimeError: gone: {printable(ESCAPES)}"
    )
    assert failure(_Unprintable()) == "_Unprintable"


def test_a_multi_line_answer_keeps_its_lines_and_loses_its_controls() -> None:
    from toolstop.cli.demo import _preview

    assert printable(f"one\n{ESCAPES}", keep_newlines=True) == f"one\n{printable(ESCAPES)}"
    assert _preview(f"Found it.\nsee {ESCAPES}\r") == f"Found it.\nsee {printable(ESCAPES)}\\r"


def test_a_json_log_line_stays_one_line_whatever_the_tool_name() -> None:
    from toolstop.logs import log_json_lines

    stream = io.StringIO()
    logger = logging.getLogger("toolstop")
    level = logger.level
    handler = log_json_lines(stream)
    try:
        tool = forced_tool(FORGED, ("Found it.", {"stop": "yes"}))  # malformed: warned too
        model = ScriptedChatModel([call(FORGED, id="c1"), "Found it."])
        build_react_graph(model, [tool]).invoke({"messages": [HumanMessage("q")]})
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    lines = stream.getvalue().splitlines()
    events = [json.loads(line)["event"] for line in lines]
    assert events == ["malformed_signal", "run_end"]
    assert json.loads(lines[0])["tool"] == FORGED  # the name kept as data, escaped by JSON


HOSTILE_AGENT = '''
from langchain_core.tools import StructuredTool

from toolstop import Outcome, build_react_graph, signal


def _lookup(q: str = "x") -> tuple:
    """Look something up."""
    return "found", signal(Outcome.COMPLETED)


TOOLS = [
    StructuredTool.from_function(
        _lookup, name="look\\x1b]0;pwn\\x07\\u202eup", response_format="content_and_artifact"
    )
]


def make_agent(model, tools, policy):
    return build_react_graph(model, tools, policy=policy)


def make_broken_agent(model, tools, policy):
    from toolstop import StopPolicy

    return build_react_graph(model, tools, policy=StopPolicy(mode="never"))  # never stops
'''


def _check_hostile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, factory: str
) -> tuple[int, str]:
    """`toolstop check --agent hostile_agent:FACTORY`: its exit status and output, escape-free."""
    import sys

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    (tmp_path / "hostile_agent.py").write_text(HOSTILE_AGENT, encoding="utf-8")
    out = io.StringIO()
    try:
        argv = ["--agent", f"hostile_agent:{factory}", "--tools", "hostile_agent:TOOLS"]
        code = main(["check", *argv], out=out)
    finally:
        sys.modules.pop("hostile_agent", None)
    text = out.getvalue()
    _no_raw_control(text)
    assert "\u202e" not in text
    return code, text


def test_check_agent_escapes_tool_names_in_every_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table's rows and the `stand-ins:` / `signal in their own code` lines name the tools."""
    _, text = _check_hostile(tmp_path, monkeypatch, "make_agent")
    assert "look\\x1b]0;pwn\\x07\\u202eup" in text
    assert any(line.startswith("stand-ins: ") for line in text.splitlines())
    assert any(line.startswith("success@look\\x1b") for line in text.splitlines()), text


def test_check_agent_escapes_tool_names_in_the_breaches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`breaches, by cause` lists the runs behind each cause: scenario keys name the tools."""
    code, text = _check_hostile(tmp_path, monkeypatch, "make_broken_agent")
    assert code == 1
    runs = [line for line in text.splitlines() if line.startswith("  in ")]
    assert any("@look\\x1b]0;pwn\\x07\\u202eup" in line for line in runs), text


def test_the_page_escapes_controls_and_bidi(tmp_path: Path) -> None:
    """report.html: ESC and U+202E shown escaped, as on a terminal, then HTML-escaped."""
    pytest.importorskip("matplotlib", reason="the report chart needs the `bench` extra")
    name = "pay\x1b[2J\u202eevil<b>"
    record = {
        "schema_version": 5, "run": 1, "rule": "completed", "stopped": True, "mode": "hard",
        "tools": [name], "outcomes": {"completed": 1}, "model_calls": 1,
        "calls_by_tool": {name: 1}, "invalid_signals": [{"tool": name, "problem": "x\u202ey"}],
    }  # fmt: skip
    log = tmp_path / "runs.jsonl"
    log.write_text(json.dumps({"event": "run_end", "thread_id": "t", "record": record}) + "\n")
    out = io.StringIO()
    assert main(["report", "--log", str(log), "--out", str(tmp_path / "r")], out=out) == 0
    page = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "\x1b" not in page
    assert "\u202e" not in page
    assert "pay\\x1b[2J\\u202eevil&lt;b&gt;" in page


def test_explain_cuts_a_huge_tool_name_as_the_report_does(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
    from langgraph.checkpoint.sqlite import SqliteSaver

    from toolstop.report.records import NAME_LIMIT, cut

    # Plain letters: building the tool's schema with control characters in a long name is slow
    # in pydantic (the escaping is shown by tests/test_explain.py).
    name = "x" * 3_000_000
    db = tmp_path / "threads.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        tool = forced_tool(name, ("Found it.", signal("completed")))
        agent = build_react_graph(
            ScriptedChatModel([call(name, id="c1")]), [tool], checkpointer=saver
        )
        agent.invoke({"messages": [HumanMessage("q")]}, {"configurable": {"thread_id": "t"}})
    out = io.StringIO()
    assert main(["explain", "t", "--db", str(db)], out=out) == 0
    text = out.getvalue()
    _no_raw_control(text)
    assert max(len(line) for line in text.splitlines()) < 2 * NAME_LIMIT + 100
    assert f"  deciding: {printable(cut(name))} (c1)" in text.splitlines()
    out = io.StringIO()
    assert main(["explain", "t", "--db", str(db), "--json"], out=out) == 0
    assert json.loads(out.getvalue())["runs"][0]["turns"][0][0]["tool"] == cut(name)
