"""`toolstop report` and `toolstop explain` on shadow-mode and hard-mode traffic, checkpointed
in SQLite and PostgreSQL, against figures the test computes itself (from its own plan, the
scripted models' call logs and the messages' usage), never from the records."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import sqlite3
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from helpers import CHROMIUM, chromium
from toolstop import Outcome, StopPolicy, build_react_graph, signal
from toolstop.cli import main
from toolstop.legacy import create_react_agent
from toolstop.logs import log_json_lines
from toolstop.record import RECORD_SCHEMA_VERSION
from toolstop.testing import ScriptedChatModel, call, forced_tool, turn

pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
pytest.importorskip("langchain.agents", reason="the traffic includes create_agent runs")
pytest.importorskip("matplotlib", reason="the report chart needs the `bench` extra")

# A hang guard, not a speed target: the traffic, Chromium and the child processes of the scale
# test take seconds, many more on the shared machine at load 6-8.
pytestmark = pytest.mark.timeout(600)

DONE = ("Paid. Receipt r-1.", signal(Outcome.COMPLETED))
FOUND = ("Refunds take 5 days.", signal(Outcome.COMPLETED))
RETRY = ("The service timed out.", signal(Outcome.TRANSIENT))
FATAL = ("The card was declined.", signal(Outcome.FATAL))
YES = ("Looked it up.", {"stop": "yes"})  # a malformed signal
PLAIN = ("Just text.", None)  # a tool that does not signal


@dataclass
class Spec:
    """One run the test drives, and what it expects (written by hand, not by toolstop)."""

    thread: str
    router: str
    mode: str
    script: list[Any]
    results: dict[str, list[Any]]
    rule: str
    deciding: list[tuple[str, str]] = field(default_factory=list)  # (tool, call id)
    turns: list[list[tuple[str, str, str, bool]]] = field(default_factory=list)
    invalid: int = 0
    unsignalled: int = 0
    retries: int = 3
    parallel: str = "all"


PLAN = [
    # a thread rolled out from shadow to hard mode, on the hand-built graph
    Spec(
        "shop", "graph", "never", [call("pay", id="p1"), "You paid."], {"pay": [DONE]},
        rule="none", deciding=[("pay", "p1")], turns=[[("pay", "p1", "completed", True)]],
    ),
    Spec(
        "shop", "graph", "never",
        [call("lookup", id="l1"), call("lookup", id="l2"), "Five days."],
        {"lookup": [RETRY, FOUND]},
        rule="none", deciding=[("lookup", "l2")],
        turns=[[("lookup", "l1", "transient", False)], [("lookup", "l2", "completed", True)]],
    ),
    Spec(
        "shop", "graph", "hard", [call("pay", id="p2")], {"pay": [DONE]},
        rule="completed", deciding=[("pay", "p2")], turns=[[("pay", "p2", "completed", True)]],
    ),
    Spec("shop", "graph", "hard", ["Hello!"], {"pay": [DONE]}, rule="none"),
    # the middleware: unsignalled, invalid, fatal, retry budget, a parallel shadow stop
    Spec(
        "desk", "middleware", "never", [call("plain", id="u1"), "Done."], {"plain": [PLAIN]},
        rule="none", turns=[[("plain", "u1", "unsignalled", False)]], unsignalled=1,
    ),
    Spec(
        "desk", "middleware", "hard",
        [call("lookup", id="l3"), call("lookup", id="l4")], {"lookup": [YES, FATAL]},
        rule="fatal", deciding=[("lookup", "l4")], invalid=1,
        turns=[
            [("lookup", "l3", "invalid: stop_not_bool", False)],
            [("lookup", "l4", "fatal", True)],
        ],
    ),
    Spec(
        "desk", "middleware", "hard",
        [call("lookup", id="l5"), call("lookup", id="l6")], {"lookup": [RETRY, RETRY]},
        rule="retry_budget", deciding=[("lookup", "l6")], retries=1,
        turns=[[("lookup", "l5", "transient", False)], [("lookup", "l6", "transient", False)]],
    ),
    Spec(
        "desk", "middleware", "never",
        [turn(call("pay", id="p3"), call("lookup", id="l7")), "Both done."],
        {"pay": [DONE], "lookup": [FOUND]},
        rule="none", deciding=[("pay", "p3"), ("lookup", "l7")],
        turns=[[("pay", "p3", "completed", True), ("lookup", "l7", "completed", True)]],
    ),
    # the legacy drop-in, narrating
    Spec(
        "old", "legacy", "polish", [call("pay", id="p4"), "Your order is paid."],
        {"pay": [DONE]},
        rule="completed", deciding=[("pay", "p4")], turns=[[("pay", "p4", "completed", True)]],
    ),
]  # fmt: skip


def build(spec: Spec, model: Any, checkpointer: Any, **extra: Any) -> Any:
    tools = [forced_tool(name, *results) for name, results in spec.results.items()]
    policy = StopPolicy(
        mode=spec.mode,  # type: ignore[arg-type]
        max_transient_retries=spec.retries,
        parallel=spec.parallel,  # type: ignore[arg-type]
    )
    if spec.router == "graph":
        return build_react_graph(model, tools, policy=policy, checkpointer=checkpointer, **extra)
    if spec.router == "legacy":
        return create_react_agent(model, tools, policy=policy, checkpointer=checkpointer)
    from langchain.agents import create_agent

    from toolstop import StopOnArtifact

    return create_agent(
        model, tools, middleware=[StopOnArtifact(policy)], checkpointer=checkpointer
    )


@dataclass
class Observed:
    """What the test saw of a run, from the scripted model and the messages alone."""

    spec: Spec
    thread_id: str
    model_calls: int
    input_tokens: int
    output_tokens: int
    saved: dict[str, int]
    window: tuple[datetime, datetime] = (datetime.min.replace(tzinfo=UTC),) * 2


def observe(spec: Spec, thread_id: str, before: int, state: dict[str, Any], calls: int) -> Observed:
    new = state["messages"][before:]
    usage = [m.usage_metadata or {} for m in new if isinstance(m, AIMessage)]
    saved = {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}
    if spec.mode == "never" and spec.deciding:
        last_id = spec.deciding[-1][1]
        at = max(
            i for i, m in enumerate(new) if isinstance(m, ToolMessage) and m.tool_call_id == last_id
        )
        later = [m.usage_metadata or {} for m in new[at + 1 :] if isinstance(m, AIMessage)]
        saved = {
            "model_calls": len(later),
            "input_tokens": sum(u.get("input_tokens", 0) for u in later),
            "output_tokens": sum(u.get("output_tokens", 0) for u in later),
        }
    return Observed(
        spec,
        thread_id,
        calls,
        sum(u.get("input_tokens", 0) for u in usage),
        sum(u.get("output_tokens", 0) for u in usage),
        saved,
    )


def drive(checkpointer: Any, prefix: str) -> list[Observed]:
    """Run the plan on `checkpointer` (thread ids under `prefix`); leave one run open."""
    seen = []
    for spec in PLAN:
        thread_id = f"{prefix}-{spec.thread}"
        config = {"configurable": {"thread_id": thread_id}}
        model = ScriptedChatModel(spec.script)
        agent = build(spec, model, checkpointer)
        previous = agent.get_state(config).values.get("messages", [])
        started = datetime.now(UTC)
        state = agent.invoke({"messages": [HumanMessage("Please help.")]}, config)
        finished = datetime.now(UTC)
        model.assert_complete()
        observed = observe(spec, thread_id, len(previous) + 1, state, len(model.calls))
        observed.window = (started, finished)
        seen.append(observed)
    # a run interrupted before its tools: in progress, no record yet
    spec = Spec("open", "graph", "hard", [call("pay", id="p9")], {"pay": [DONE]}, rule="-")
    agent = build(spec, ScriptedChatModel(spec.script), checkpointer, interrupt_before=["tools"])
    agent.invoke(
        {"messages": [HumanMessage("Pay.")]}, {"configurable": {"thread_id": f"{prefix}-open"}}
    )
    return seen


def expected_report(seen: list[Observed]) -> dict[str, Any]:
    """The report's figures, from the plan and the observations."""
    stops: dict[str, Counter[str]] = {}
    would: dict[str, Counter[str]] = {}
    for o in seen:
        if not o.spec.deciding:
            continue
        table = would if o.spec.mode == "never" else stops
        rule = "completed" if o.spec.mode == "never" else o.spec.rule
        for tool in dict.fromkeys(t for t, _ in o.spec.deciding):
            table.setdefault(tool, Counter())[rule] += 1
    never = [o for o in seen if o.spec.mode == "never"]
    saving = [o for o in never if o.spec.deciding]
    return {
        "runs": len(seen),
        "rules": dict(Counter(o.spec.rule for o in seen)),
        "modes": dict(Counter(o.spec.mode for o in seen)),
        "hard_share": round(sum(o.spec.mode == "hard" for o in seen) / len(seen), 4),
        "stopped": sum(o.spec.mode != "never" and o.spec.rule != "none" for o in seen),
        "model_calls": sum(o.model_calls for o in seen),
        "input_tokens": sum(o.input_tokens for o in seen),
        "output_tokens": sum(o.output_tokens for o in seen),
        "invalid": sum(o.spec.invalid for o in seen),
        "unsignalled": sum(o.spec.unsignalled for o in seen),
        "stops_by_tool": {k: dict(v) for k, v in stops.items()},
        "would_stop_by_tool": {k: dict(v) for k, v in would.items()},
        "would_save": {
            "runs": len(saving),
            **{
                key: sum(o.saved[key] for o in saving)
                for key in ("model_calls", "input_tokens", "output_tokens")
            },
        },
        "never_model_calls": sum(o.model_calls for o in never),
        "would_stop_rules": dict(
            Counter("completed" if o.spec.deciding else "none" for o in never)
        ),
        "hard_stops": sum(
            o.spec.mode == "hard" and o.spec.rule not in ("none", "step_budget") for o in seen
        ),
        "hard_runs": sum(o.spec.mode == "hard" for o in seen),
    }


def assert_figures(document: dict[str, Any], expected: dict[str, Any]) -> None:
    for key in (
        "runs", "modes", "hard_share", "stopped", "model_calls", "input_tokens",
        "output_tokens", "invalid", "unsignalled", "stops_by_tool", "would_stop_by_tool",
    ):  # fmt: skip
        assert document[key] == expected[key], key
    assert document["rules"] == expected["rules"]
    assert sum(document["rules"].values()) == document["runs"]
    saved = document["would_save"]
    assert {k: saved[k] for k in expected["would_save"]} == expected["would_save"]
    assert saved["model_calls"] > 0
    assert saved["share_of_shadow_model_calls"] == round(
        expected["would_save"]["model_calls"] / expected["never_model_calls"], 4
    )
    assert document["invalid_by_tool"] == {"lookup": {"stop_not_bool": expected["invalid"]}}
    assert document["schema_versions"] == {str(RECORD_SCHEMA_VERSION): expected["runs"]}
    assert document["would_stop_rules"] == expected["would_stop_rules"]
    assert {k: v for k, v in document["runs_by_outcome"].items() if k.startswith("would")} == {
        f"would stop: {rule}": n
        for rule, n in expected["would_stop_rules"].items()
        if rule != "none"
    }
    hard = document["hard_mode"]
    assert (hard["runs"], hard["stopped"], hard["model_calls_saved"]) == (
        expected["hard_runs"],
        expected["hard_stops"],
        expected["hard_stops"],
    )
    per_call = saved["input_tokens"] / saved["model_calls"]
    assert hard["input_tokens_saved_estimate"] == round(expected["hard_stops"] * per_call)


def report(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["report", *argv], out=out), out.getvalue()


def explain(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["explain", *argv], out=out), out.getvalue()


def check_explain(db: str, seen: list[Observed]) -> None:
    for thread_id in sorted({o.thread_id for o in seen}):
        code, text = explain(thread_id, "--db", db, "--json")
        assert code == 0, text
        explanation = json.loads(text)
        runs = [o for o in seen if o.thread_id == thread_id]
        assert [r["run"] for r in explanation["runs"]] == list(range(1, len(runs) + 1))
        for got, o in zip(explanation["runs"], runs, strict=True):
            assert (got["rule"], got["mode"]) == (o.spec.rule, o.spec.mode)
            # the run ended while it was being invoked, not during a later run
            assert o.window[0] <= datetime.fromisoformat(got["ended_at"]) <= o.window[1]
            assert [(d["tool"], d["tool_call_id"]) for d in got["deciding"]] == o.spec.deciding
            turns = [
                [(c["tool"], c["tool_call_id"], c["signal"], c["stop"]) for c in t]
                for t in got["turns"]
            ]
            assert turns == o.spec.turns
            assert (got["model_calls"], got["input_tokens"], got["output_tokens"]) == (
                o.model_calls,
                o.input_tokens,
                o.output_tokens,
            )
            spent = sum(1 for t in o.spec.turns for c in t if c[2] == "transient")
            spent -= o.spec.rule == "retry_budget"  # the failure that hit the budget
            assert got["transient_retries"] == spent
            if o.spec.mode == "never" and o.spec.deciding:
                assert got["would_save"] == o.saved
        assert explanation["in_progress"] == []


# -- SQLite ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sqlite_traffic(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, list[Observed], Path, datetime]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    folder = tmp_path_factory.mktemp("traffic")
    db, log = folder / "threads.sqlite", folder / "toolstop.jsonl"
    handler = log_json_lines(str(log))
    try:
        with SqliteSaver.from_conn_string(str(db)) as saver:
            first = drive(saver, "a")
            middle = datetime.now(UTC)
            second = drive(saver, "b")
    finally:
        logging.getLogger("toolstop").removeHandler(handler)
        handler.close()
        logging.getLogger("toolstop").setLevel(logging.NOTSET)
    return db, first + second, log, middle


def test_report_on_sqlite_has_the_figures_of_the_traffic(
    sqlite_traffic: Any, tmp_path: Path
) -> None:
    db, seen, _, _ = sqlite_traffic
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    code, text = report("--db", str(db), "--out", str(tmp_path))
    assert code == 0, text
    document = json.loads((tmp_path / "report.json").read_text())
    assert_figures(document, expected_report(seen))
    assert (document["threads"], document["open_runs"]) == (6, 2)
    assert f"runs: {len(seen)}" in text
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest  # read-only
    assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"


def test_report_since_counts_only_later_runs(sqlite_traffic: Any, tmp_path: Path) -> None:
    db, seen, _, middle = sqlite_traffic
    code, _ = report("--db", str(db), "--since", middle.isoformat(), "--out", str(tmp_path))
    assert code == 0
    document = json.loads((tmp_path / "report.json").read_text())
    later = [o for o in seen if o.thread_id.startswith("b-")]
    assert_figures(document, expected_report(later))
    code, _ = report("--db", str(db), "--since", "1d", "--out", str(tmp_path))
    assert json.loads((tmp_path / "report.json").read_text())["runs"] == len(seen)


def test_report_from_json_log_lines_matches_the_database(
    sqlite_traffic: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, seen, log, _ = sqlite_traffic
    lines = log.read_text().splitlines()
    with log.open("a") as extra:  # other loggers' lines and garbage are skipped, not fatal
        extra.write("not json\n" + json.dumps({"event": "log", "message": "hi"}) + "\n")
    code, text = report("--log", str(log), "--out", str(tmp_path))
    assert code == 0, text
    document = json.loads((tmp_path / "report.json").read_text())
    assert_figures(document, expected_report(seen))
    assert document["skipped_lines"] == 2 + sum('"event":"run_end"' not in line for line in lines)
    assert f"{document['skipped_lines']} line(s) of {log} are not run records" in (
        capsys.readouterr().err
    )
    assert document["threads"] == len({o.thread_id for o in seen})  # from the lines' thread ids
    assert document["open_runs"] is None  # a log has no checkpoints to show runs in progress
    assert f"wrote {tmp_path / 'report.json'}, {tmp_path / 'report.html'}" in text
    first = json.loads(lines[0])
    assert first["event"] == "run_end"
    assert first["thread_id"] == "a-shop"
    assert first["checkpoint_ns"] == ""


def test_explain_on_sqlite_gives_each_runs_reasons(sqlite_traffic: Any) -> None:
    db, seen, _, _ = sqlite_traffic
    check_explain(str(db), seen)
    code, text = explain("a-open", "--db", str(db), "--json")
    assert code == 0
    assert json.loads(text)["in_progress"] == [
        {"checkpoint_ns": "", "level": "", "run": 1, "tool_turns": 0, "model_calls": 1}
        | {"pending": ["pay"]}
    ]


def test_explain_text_never_shows_content_or_arguments(sqlite_traffic: Any) -> None:
    db, _, _, _ = sqlite_traffic
    code, text = explain("a-desk", "--db", str(db))
    assert code == 0
    assert "run 2, ended" in text
    assert "turn 1: lookup l3 invalid: stop_not_bool" in text
    assert "deciding: lookup (l4)" in text
    assert "1 tool turn\n" in text  # one turn, one word
    assert "1 tool turns" not in text
    assert "2 tool turns" in text
    for content in ("Paid.", "Refunds take", "timed out", "declined", "Please help", "query"):
        assert content not in text
    code, text = explain("a-desk", "--db", str(db), "--run", "3", "--json")
    runs = json.loads(text)["runs"]
    assert [(r["run"], r["rule"]) for r in runs] == [(3, "retry_budget")]
    assert len(runs[0]["turns"]) == 2


class Metrics(HTMLParser):
    """Collects `data-metric` cells from the rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[str, list[str]] = {}
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        metric = dict(attrs).get("data-metric")
        if tag in ("td", "b") and metric:
            self._open = metric
            self.cells.setdefault(metric, []).append("")

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self.cells[self._open][-1] += data

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "b"):
            self._open = None


def _at(document: Any, path: str) -> Any:
    for part in path.split("."):
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document


@pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (.ci/run installs it)"
)
def test_report_html_renders_in_chromium_with_the_figures_of_report_json(
    sqlite_traffic: Any, tmp_path: Path
) -> None:
    db, _, _, _ = sqlite_traffic
    assert report("--db", str(db), "--out", str(tmp_path))[0] == 0
    document = json.loads((tmp_path / "report.json").read_text())
    shot = tmp_path / "shot.png"
    parser = Metrics()
    parser.feed(chromium(tmp_path / "report.html", tmp_path / "profile", screenshot=shot))
    for path in ("runs", "would_save.model_calls", "runs_by_outcome.completed",
                 "stops_by_tool.pay.completed", "would_stop_by_tool.lookup.completed",
                 "unsignalled", "invalid"):  # fmt: skip
        assert path in parser.cells, path
    for path, texts in parser.cells.items():
        value = _at(document, path)
        for text in texts:
            if isinstance(value, float):  # two decimals, or a share as a percentage
                assert text in (f"{value:.2f}", f"{value:.0%}"), path
            else:
                assert text == f"{value:,}", path
    page = (tmp_path / "report.html").read_text()
    assert page.index('class="answer"') < page.index('id="headline"')
    assert "Do not compare the modes' averages" in page  # several modes: the note is there
    assert "Hard mode saved at least" in page
    assert "would stop: completed" in page  # the shadow chart's and table's rules
    assert shot.stat().st_size > 20_000  # a page with a chart and tables, not a blank one


# -- errors: one clear line, non-zero ----------------------------------------------------------
def test_unknown_thread_and_databases_are_one_clear_line(
    sqlite_traffic: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _, _, _ = sqlite_traffic
    not_db = tmp_path / "notes.txt"
    not_db.write_text("hello")
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute("CREATE TABLE t (x)").connection.commit()
    cases = [
        (["explain", "nobody", "--db", str(db)], 1, "no thread 'nobody'"),
        (["explain", "a-shop", "--db", str(db), "--run", "9"], 1, "no finished run 9"),
        (["report", "--db", str(tmp_path / "missing.sqlite")], 2, "no database at"),
        (["explain", "t", "--db", str(tmp_path / "missing.sqlite")], 2, "no database at"),
        (["report", "--db", str(not_db)], 2, "not a readable SQLite database"),
        (["report", "--db", str(empty)], 2, "holds no LangGraph checkpoints"),
        (["report", "--db", "postgresql://nobody:secret@127.0.0.1:1/none"], 2, "cannot connect"),
        (["report", "--db", str(db), "--since", "last tuesday"], 2, "--since takes"),
        (["report", "--log", str(tmp_path / "missing.jsonl")], 2, "cannot read"),
        (["report", "--db", str(db), "--out", str(not_db / "sub")], 2, "cannot write"),
    ]
    for argv, code, message in cases:
        capsys.readouterr()
        assert main(argv, out=io.StringIO()) == code, argv
        err = capsys.readouterr().err
        assert message in err, (argv, err)
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err
        assert "secret" not in err
    assert not (tmp_path / "missing.sqlite").exists()  # nothing created by a reader


# -- PostgreSQL --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def postgres_db(postgres_url: str) -> Iterator[str]:
    """A database of our own on the shared server (the report reads every thread in it)."""
    import psycopg

    name = f"toolstop_report_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = urlunsplit(urlsplit(postgres_url)._replace(path=f"/{name}"))
    try:
        yield url
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def postgres_traffic(postgres_db: str) -> list[Observed]:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_db) as saver:
        saver.setup()
        return drive(saver, "pg")


def test_report_and_explain_on_postgres(
    postgres_db: str, postgres_traffic: list[Observed], tmp_path: Path
) -> None:
    code, text = report("--db", postgres_db, "--out", str(tmp_path))
    assert code == 0, text
    document = json.loads((tmp_path / "report.json").read_text())
    assert_figures(document, expected_report(postgres_traffic))
    assert (document["threads"], document["open_runs"]) == (3, 1)
    check_explain(postgres_db, postgres_traffic)
    code, _ = explain("nobody", "--db", postgres_db)
    assert code == 1


def test_report_reads_json_lines_from_stdin(
    sqlite_traffic: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, seen, log, _ = sqlite_traffic
    monkeypatch.setattr("sys.stdin", io.StringIO(log.read_text()))
    assert report("--log", "-", "--out", str(tmp_path))[0] == 0
    assert json.loads((tmp_path / "report.json").read_text())["runs"] == len(seen)


@pytest.mark.slow
def test_the_scale_measurement_builds_the_runs_it_claims(tmp_path: Path) -> None:
    from report_scale import TEMPLATE_RUNS, TEMPLATE_THREADS, measure

    figures = measure(200, folder=tmp_path)
    template = TEMPLATE_RUNS * TEMPLATE_THREADS
    assert figures["copies"] == 200 // template
    rules = figures["template_rules"]
    assert sum(rules.values()) == template
    for runs, copies in ((template, 1), (200, 2)):
        measured = figures[f"{runs}_runs"]
        assert measured["runs"] == runs
        assert measured["rules"] == {rule: count * copies for rule, count in sorted(rules.items())}


def test_explain_says_which_results_a_stop_showed_beyond_the_deciding_call() -> None:
    from toolstop.report.explain import print_explanation

    run = {
        "run": 1, "checkpoint_ns": "", "ended_at": None, "mode": "hard", "rule": "completed",
        "stopped": True, "would_stop": None, "turns": [], "tool_turns": 2,
        "transient_retries": 1, "model_calls": 2, "input_tokens": 0, "output_tokens": 0,
        "would_save": None, "deciding": [{"tool": "weather", "tool_call_id": "b2"}],
    }  # fmt: skip
    lines = []
    for shown in (["p", "b2"], ["b2"], []):
        out = io.StringIO()
        print_explanation(
            {"thread_id": "t", "runs": [{**run, "shown": shown}], "in_progress": []}, out
        )
        lines.append([line for line in out.getvalue().splitlines() if "showed" in line])
    assert lines == [["  the answer showed the results of: p, b2"], [], []]
