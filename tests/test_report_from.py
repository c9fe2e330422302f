"""`toolstop report --from`: the advisor on recorded conversations equals shadow mode's."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:  # these compare with a real create_agent + StopOnArtifact
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from toolstop import StopOnArtifact, StopPolicy
from toolstop.cli import main
from toolstop.report.from_logs import join_threads
from toolstop.report.sources import Conversation, read_conversations
from toolstop.report.sources._base import conversation
from toolstop.testing import ScriptedChatModel, replay

pytest.importorskip("langgraph.checkpoint.sqlite")
from langgraph.checkpoint.sqlite import SqliteSaver

ROOT = Path(__file__).parent / "fixtures"
LOGS = ROOT / "logs"
TRAFFIC = ROOT / "traffic" / "tau2_student_domains" / "conversations.jsonl"

DIFFERENT = {"source", "generated_at", "threads", "open_runs", "conversations", "tokens"}
"""report.json's keys that say where the runs were read from, not what they did."""
WHEN = {"first_run_ended", "last_run_ended", "by_day"}
"""When the runs ended: a checkpoint knows, a recording is not given a time."""


def record_agents(
    saver: Any, conversations: Iterable[tuple[str, Sequence[BaseMessage]]], *, shadow: bool
) -> None:
    """Replay each conversation through a real `create_agent` on `saver`, thread by thread."""
    from langchain.agents import create_agent

    for thread_id, messages in conversations:
        recording = replay(messages)
        model = ScriptedChatModel(recording.script)
        agent = create_agent(
            model,
            list(recording.tools),
            middleware=[StopOnArtifact(StopPolicy(mode="never"))] if shadow else [],
            checkpointer=saver,
        )
        config: Any = {"configurable": {"thread_id": thread_id}}
        for question in recording.questions:
            agent.invoke({"messages": [question]}, config)
        model.assert_complete()


def report(tmp_path: Path, name: str, *argv: str) -> dict[str, Any]:
    out = tmp_path / name
    assert main(["report", *argv, "--out", str(out)]) == 0
    return json.loads((out / "report.json").read_text())


def same_advice(left: dict[str, Any], right: dict[str, Any]) -> None:
    apart = DIFFERENT | WHEN | {"unreadable"}
    assert {k: v for k, v in left.items() if k not in apart} == {
        k: v for k, v in right.items() if k not in apart
    }
    assert (left["by_day"], left["first_run_ended"]) == ([], None)


def shadow_database(tmp_path: Path, items: list[Conversation]) -> Path:
    path = tmp_path / "shadow.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        record_agents(saver, [(c.thread or c.id, c.messages) for c in items], shadow=True)
    return path


@pytest.mark.parametrize("log_format", ["openai", "langchain", "langsmith", "otel", "langfuse"])
def test_each_format_gives_the_report_of_shadow_mode(tmp_path: Path, log_format: str) -> None:
    log = LOGS / f"{log_format}.jsonl"
    database = shadow_database(tmp_path, list(read_conversations(log)))
    wanted = report(tmp_path, "db", "--db", str(database), "--examples", "3")
    found = report(tmp_path, "from", "--from", str(log), "--examples", "3")
    same_advice(found, wanted)
    assert found["source"]["format"] == log_format
    assert found["tokens"] == {"recorded": 1, "estimated": 1, "partly": 0}


def test_real_traffic_gives_the_report_of_shadow_mode(tmp_path: Path) -> None:
    lines = TRAFFIC.read_text().splitlines()[::6]  # every domain, a slice
    # in the order a database lists its threads, so the lists of threads come in one order
    lines.sort(key=lambda line: json.loads(line)["id"])
    log = tmp_path / "slice.jsonl"
    log.write_text("\n".join(lines) + "\n")
    items = list(read_conversations(log))
    database = shadow_database(tmp_path, items)
    argv = ("--examples", "2", "--writes", "create_ticket", "--price-in", "3")
    wanted = report(tmp_path, "db", "--db", str(database), *argv)
    found = report(tmp_path, "from", "--from", str(log), *argv)
    same_advice(found, wanted)
    assert found["runs"] == wanted["runs"] > len(items)
    assert any(c["examples"] for c in found["candidates"])
    assert found["tokens"] == {"recorded": len(items), "estimated": 0, "partly": 0}


def test_an_agent_without_toolstop_is_read_from_its_checkpoints(tmp_path: Path) -> None:
    items = list(read_conversations(LOGS / "openai.jsonl"))
    plain = tmp_path / "threads.sqlite"
    with SqliteSaver.from_conn_string(str(plain)) as saver:
        record_agents(saver, [(c.id, c.messages) for c in items], shadow=False)
    database = shadow_database(tmp_path, items)
    wanted = report(tmp_path, "db", "--db", str(database), "--examples", "3")
    found = report(tmp_path, "from", "--from", str(plain), "--examples", "3")  # detected
    same_advice(found, wanted)
    assert found["source"]["format"] == "checkpoints"
    assert (found["threads"], found["open_runs"]) == (2, 0)


def test_an_agent_without_toolstop_is_read_from_postgres(tmp_path: Path, postgres_url: str) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    name = f"toolstop_from_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    dsn = urlunsplit(urlsplit(postgres_url)._replace(path=f"/{name}"))
    try:
        items = list(read_conversations(LOGS / "langchain.jsonl"))
        with PostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
            record_agents(saver, [(c.id, c.messages) for c in items], shadow=False)
        database = shadow_database(tmp_path, items)
        wanted = report(tmp_path, "db", "--db", str(database))
        found = report(tmp_path, "from", "--from", dsn, "--format", "checkpoints")
        same_advice(found, wanted)
        assert found["threads"] == 2
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_run_still_open_at_the_latest_checkpoint_is_counted_not_guessed(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "threads.sqlite"
    items = list(read_conversations(LOGS / "openai.jsonl"))
    with SqliteSaver.from_conn_string(str(plain)) as saver:
        record_agents(saver, [(c.id, c.messages) for c in items], shadow=False)
        from langchain.agents import create_agent

        model = ScriptedChatModel([AIMessage("", tool_calls=[])])  # never called
        agent = create_agent(model, [], checkpointer=saver, interrupt_before=["model"])
        agent.invoke({"messages": [("user", "hello?")]}, {"configurable": {"thread_id": "open"}})
    found = report(tmp_path, "from", "--from", str(plain))
    assert (found["threads"], found["open_runs"], found["runs"]) == (2, 1, 2)


def test_bad_lines_are_counted_escaped_and_masked_never_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = (LOGS / "openai.jsonl").read_text().splitlines()
    log = tmp_path / "bad.jsonl"
    secret = "sk-" + "a1B2" * 12
    hostile = json.dumps({"messages": [{"role": "\x1b[31m" + secret, "content": "x"}]})
    log.write_text("\n".join([good[0], hostile, good[1], "{not json"]) + "\n")
    found = report(tmp_path, "from", "--from", str(log))
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr
    assert "2 of 4 lines could not be read; first: line 2: message 1: role " in stderr
    assert secret[:12] not in stderr
    assert "\x1b" not in stderr
    assert found["unreadable"]["lines"] == 2
    assert found["unreadable"]["first"].startswith("line 2: message 1: role ")
    assert secret[:12] not in json.dumps(found)
    assert found["runs"] == 2


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--from", "missing.jsonl"], "cannot read"),
        (["--from", "README.md"], "cannot be told"),
        (["--from", "x.jsonl", "--format", "csv"], "invalid choice"),
        (["--from", "x.jsonl", "--since", "7d"], "--since needs --db or --log"),
    ],
)
def test_wrong_input_exits_2_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    (tmp_path / "README.md").write_text("# not a log\n")
    argv = [a if not a.endswith((".md", ".jsonl")) else str(tmp_path / a) for a in argv]
    try:
        code = main(["report", *argv, "--out", str(tmp_path / "out")])
    except SystemExit as exit_:  # argparse's own refusal
        code = int(exit_.code or 0)
    stderr = capsys.readouterr().err
    assert code == 2
    assert says in stderr
    assert "Traceback" not in stderr


def _turn(question: str, answer: str) -> list[BaseMessage]:
    return [HumanMessage(question), AIMessage(answer)]


def test_the_traces_of_a_thread_are_joined_in_order_without_the_replayed_history() -> None:
    first = _turn("one", "1")
    second = [*first, *_turn("two", "2")]  # the second trace replays the thread so far
    items = [
        conversation("a", first, line=1, thread="t"),
        conversation("x", _turn("alone", "0"), line=2),
        conversation("b", second, line=3, thread="t"),
        conversation("c", [*_turn("three", "3"), ToolMessage("", tool_call_id="z")], line=4,
                     thread="u"),
    ]  # fmt: skip
    joined = list(join_threads(items, max_open=1))
    assert [(c.thread or c.id, [m.content for m in c.messages]) for c in joined] == [
        ("x", ["alone", "0"]),
        ("t", ["one", "1", "two", "2"]),
        ("u", ["three", "3", ""]),
    ]


def test_the_judge_sends_the_pairs_it_sends_for_the_shadow_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolstop.testing.loopback import LoopbackProvider

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    log = LOGS / "openai.jsonl"
    database = shadow_database(tmp_path, list(read_conversations(log)))
    sent = []
    for name, argv in (("db", ["--db", str(database)]), ("from", ["--from", str(log)])):
        with LoopbackProvider(['{"label": "keep"}'] * 10) as provider:
            found = report(
                tmp_path, name, *argv, "--judge", "openai:gpt-4o-mini", "--base-url",
                provider.base_url, "--yes",
            )  # fmt: skip
            # the fences' tags are drawn afresh for each call; the pairs are what must match
            sent.append(
                sorted(re.sub(rb"\b[0-9a-f]{12}\b", b"TAG", body) for body in provider.raw_requests)
            )
        assert found["model_judge"]["calls"] > 0
    assert sent[0] == sent[1]


def documented_commands() -> list[list[str]]:
    """Every `toolstop report --from` line of the rollout page's console blocks."""
    import re
    import shlex

    page = (Path(__file__).parent.parent / "docs" / "rollout.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```console\n(.*?)```", page, flags=re.S)
    return [
        shlex.split(line)[1:]
        for block in blocks
        for line in block.splitlines()
        if line.startswith("toolstop report --from ")
    ]


def test_each_documented_command_runs_on_the_fixtures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = documented_commands()
    formats = {argv[argv.index("--format") + 1] for argv in commands if "--format" in argv}
    assert formats == {"openai", "langchain", "langsmith", "otel", "langfuse"}
    assert any("--convert" in argv for argv in commands)
    monkeypatch.chdir(Path(__file__).parent.parent)
    for number, argv in enumerate(commands):
        out = tmp_path / str(number)
        assert main([*argv, "--out", str(out)]) == 0, capsys.readouterr().err
        document = json.loads((out / "report.json").read_text())
        assert document["runs"] > 0
        assert ("what_if" in document) == ("--convert" in argv)
        if "--convert" in argv:
            assert document["what_if"]["stopped_runs"] > 0


def test_the_docs_quote_the_stored_report_from_run() -> None:
    import re

    root = Path(__file__).parent.parent
    stored = json.loads((root / "docs" / "bench" / "sources.json").read_text())["report"]
    assert stored["counts_match"]
    page = (root / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = " ".join(page[page.index("## Reading recorded logs") :].split())
    found = re.search(
        r"The whole `toolstop report --from FILE` .*? made the report of ([\d,]+) "
        r"conversations \(([\d,]+) runs\) in ([\d.]+) s \(peak RSS ([\d.]+) MB",
        section,
    )
    assert found is not None
    quoted = [float(x.replace(",", "")) for x in found.groups()]
    assert quoted == [
        stored["conversations"],
        stored["runs"],
        stored["seconds"],
        stored["peak_rss_mb"],
    ]


def test_a_thread_that_cannot_be_decoded_is_counted_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    items = list(read_conversations(LOGS / "openai.jsonl"))
    plain = tmp_path / "threads.sqlite"
    with SqliteSaver.from_conn_string(str(plain)) as saver:
        record_agents(saver, [(c.id, c.messages) for c in items], shadow=False)
    with sqlite3.connect(plain) as conn:  # a blob no decoder reads, in every checkpoint of one
        conn.execute(
            "UPDATE checkpoints SET type = 'msgpack', checkpoint = X'c1c1c1' WHERE thread_id = ?",
            (items[0].id,),
        )
    found = report(tmp_path, "from", "--from", str(plain), "--format", "checkpoints")
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr
    assert "1 thread(s) could not be decoded" in stderr
    assert (found["unreadable"]["threads"], found["threads"], found["runs"]) == (1, 1, 1)


def test_a_langsmith_export_of_root_runs_only_says_what_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the root chain runs (no chat-model runs): nothing to read, and the reason is said."""
    roots = [
        line
        for line in (LOGS / "langsmith.jsonl").read_text().splitlines()
        if json.loads(line)["parent_run_id"] is None
    ]
    log = tmp_path / "roots.jsonl"
    log.write_text("\n".join(roots) + "\n")
    out = tmp_path / "out"
    assert main(["report", "--from", str(log), "--format", "langsmith", "--out", str(out)]) == 0
    assert "a LangSmith export needs the chat-model runs" in capsys.readouterr().err


def test_report_db_on_an_agent_without_toolstop_points_at_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = list(read_conversations(LOGS / "openai.jsonl"))
    plain = tmp_path / "threads.sqlite"
    with SqliteSaver.from_conn_string(str(plain)) as saver:
        record_agents(saver, [(c.id, c.messages) for c in items], shadow=False)
    assert main(["report", "--db", str(plain), "--out", str(tmp_path / "out")]) == 0
    assert (
        "no toolstop run record: an agent without toolstop? read its conversations with --from"
        in (" ".join(capsys.readouterr().err.split()))
    )
