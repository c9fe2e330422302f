"""How `toolstop report` scales: time and peak memory on a database of many runs.

    python scripts/report_scale.py --runs 100000 [--db postgresql://.../empty_db]

Builds a template of real runs (shadow and hard mode, every outcome, a plain tool; 20 threads of
5 runs each, on the hand-built graph and the scripted model), copies its checkpoint rows under
new thread ids until the database holds `--runs` runs, then runs `toolstop report` on it in a
child process, at a tenth of the runs and at all of them, and prints the wall time and the
child's peak RSS for each (flat memory shows as two close figures). Without `--db` it uses a
SQLite file in a temporary folder; with a `postgresql://` URL the database must be empty (the
rows are copied with SQL on the server). The report's own counts are checked against the
template's times the copies.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["build_template", "main", "measure"]

TEMPLATE_THREADS = 20
TEMPLATE_RUNS = 5
PAYLOAD = "Refunds are paid within 5 business days of the return. " * 15


def build_template(checkpointer: Any) -> dict[str, int]:
    """Drive the template's runs into `checkpointer`; return their rules (to check a report)."""
    from langchain_core.runnables import RunnableConfig

    from toolstop import Outcome, StopPolicy, build_react_graph, signal
    from toolstop.policy import Mode
    from toolstop.testing import ScriptedChatModel, ScriptStep, call, forced_tool

    done = (PAYLOAD, signal(Outcome.COMPLETED))
    retry = ("The service timed out.", signal(Outcome.TRANSIENT))
    fatal = ("The card was declined.", signal(Outcome.FATAL))
    answer = "Here is what I found."
    rules: dict[str, int] = {}
    for thread in range(TEMPLATE_THREADS):
        mode: Mode = "never" if thread % 2 == 0 else "hard"
        config: RunnableConfig = {"configurable": {"thread_id": f"t{thread:02d}"}}
        for run in range(TEMPLATE_RUNS):
            kind = (thread + run) % 5
            script: list[ScriptStep]
            if kind == 0:  # a hit
                tools, script, rule = [forced_tool("search", done)], [call("search")], "completed"
            elif kind == 1:  # a timeout, then a hit
                tools = [forced_tool("search", retry, done)]
                script, rule = [call("search"), call("search")], "completed"
            elif kind == 2:  # a declined card
                tools, script, rule = [forced_tool("pay", fatal)], [call("pay")], "fatal"
            elif kind == 3:  # a plain tool: no signal, the model answers
                tools = [forced_tool("plain", (PAYLOAD, None))]
                script, rule = [call("plain"), answer], "none"
            else:  # the model answers without tools
                tools, script, rule = [forced_tool("search", done)], [answer], "none"
            if mode == "never" and rule != "none":  # shadow: the model paraphrases
                script, rule = [*script, answer], "none"
            agent = build_react_graph(
                ScriptedChatModel(script),
                tools,
                policy=StopPolicy(mode=mode),
                checkpointer=checkpointer,
            )
            agent.invoke({"messages": [("user", "Where is my refund?")]}, config)
            rules[rule] = rules.get(rule, 0) + 1
    return rules


def _columns(conn: Any, sql: str, table: str) -> list[str]:
    return [str(row[0]) for row in conn.execute(sql, (table,))]


def _copy_sqlite(template: Path, target: Path, copies: int) -> None:
    """`target`: LangGraph's tables (made by its saver) with `copies` copies of the template."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    target.unlink(missing_ok=True)
    conn = sqlite3.connect(target, check_same_thread=False)
    try:
        SqliteSaver(conn).setup()
        conn.execute("ATTACH DATABASE ? AS template", (str(template),))
        for table in ("checkpoints", "writes"):
            columns = [row[1] for row in conn.execute(f"PRAGMA template.table_info({table})")]
            for copy in range(copies):
                chosen = ", ".join(
                    f"thread_id || '#{copy}'" if c == "thread_id" else c for c in columns
                )
                conn.execute(
                    f"INSERT INTO main.{table} ({', '.join(columns)}) "
                    f"SELECT {chosen} FROM template.{table}"
                )
        conn.commit()
    finally:
        conn.close()


def _copy_postgres(db: str, start: int, stop: int) -> None:
    """Copies `start` .. `stop - 1` of the template's rows (copy 0 is the template itself)."""
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            columns = _columns(
                conn,
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                "ORDER BY ordinal_position",
                table,
            )
            chosen = ", ".join("thread_id || '#' || n" if c == "thread_id" else c for c in columns)
            conn.execute(
                f"INSERT INTO {table} ({', '.join(columns)}) SELECT {chosen} FROM {table}, "
                f"generate_series({start}, {stop - 1}) AS n WHERE thread_id NOT LIKE '%#%'"
            )
        conn.execute("ANALYZE")


def _report(db: str, out: Path) -> dict[str, Any]:
    """`toolstop report` in a child process: its wall time, peak RSS and report."""
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "toolstop", "report", "--db", db, "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        if child.returncode != 0:
            errors.seek(0)
            msg = f"toolstop report failed: {errors.read().decode(errors='replace')}"
            raise RuntimeError(msg)
    document = json.loads((out / "report.json").read_text())
    return {
        "runs": document["runs"],
        "seconds": round(seconds, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "rules": document["rules"],
    }


def measure(runs: int, db: str | None = None, folder: Path | None = None) -> dict[str, Any]:
    """Build a database of about `runs` runs and measure `toolstop report` on it."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    per_template = TEMPLATE_THREADS * TEMPLATE_RUNS
    copies = max(1, runs // per_template)
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        work = Path(scratch)
        results: dict[str, Any] = {"template_runs": per_template, "copies": copies}
        if db is None:
            template = work / "template.sqlite"
            with SqliteSaver.from_conn_string(str(template)) as saver:
                rules = build_template(saver)
            steps = [max(1, copies // 10), copies]
            for step in steps:
                target = work / f"runs-{step}.sqlite"
                _copy_sqlite(template, target, step)
                results[f"{step * per_template}_runs"] = {
                    **_report(str(target), work / f"out-{step}"),
                    "database_mb": round(target.stat().st_size / 2**20, 1),
                }
                target.unlink()
        else:
            from langgraph.checkpoint.postgres import PostgresSaver

            with PostgresSaver.from_conn_string(db) as saver:
                saver.setup()
                rules = build_template(saver)
            first = max(1, copies // 10)
            _copy_postgres(db, 1, first)
            results[f"{first * per_template}_runs"] = _report(db, work / "out-first")
            _copy_postgres(db, first, copies)
            results[f"{copies * per_template}_runs"] = _report(db, work / "out-all")
        results["template_rules"] = rules
        return results


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the figures as JSON; return the exit code."""
    parser = argparse.ArgumentParser(prog="python scripts/report_scale.py")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--db", help="an empty postgresql:// database (default: SQLite files)")
    parser.add_argument("--tmp", type=Path, help="where the SQLite files go (default: $TMPDIR)")
    args = parser.parse_args(argv)
    figures = measure(args.runs, args.db, args.tmp)
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
