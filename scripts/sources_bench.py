"""How fast toolstop reads recorded conversations: an OpenAI chat log of many conversations.

    python scripts/sources_bench.py --conversations 100000 [--keep FILE] [--out JSON]

Writes `--conversations` synthetic conversations in OpenAI chat format to a JSONL file (each
with two user turns, a turn of two parallel tool calls, a single call, recorded usage on every
answer, and texts that differ per conversation), then reads the file with
`toolstop.report.sources.read_conversations` in a child process, at a tenth of the
conversations and at all of them, and prints, for each, the conversations and messages read,
the wall time and the child's peak RSS (flat memory shows as two close figures); then all of
them again, also making each conversation's shadow-mode records
(`toolstop.report.sources.shadow_records`): the part of `report --from` before the advisor; and
last the whole `toolstop report --from FILE` (reading, records, the advisor, report.json, the
chart and the page). The counts are checked against what was written (the report's runs too);
exits 1 when they differ. `--out` stores the summary
(docs/bench/sources.json is the run docs/benchmarks.md quotes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "MESSAGES_PER_CONVERSATION",
    "RUNS_PER_CONVERSATION",
    "conversation",
    "main",
    "read",
    "report",
    "write",
]

MESSAGES_PER_CONVERSATION = 12
RUNS_PER_CONVERSATION = 3


def _call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def conversation(number: int) -> dict[str, Any]:
    """The `number`-th synthetic conversation (`MESSAGES_PER_CONVERSATION` messages)."""
    order = f"o-{number}"
    return {
        "id": f"conversation-{number}",
        "messages": [
            {"role": "system", "content": "You are the order desk. Be brief."},
            {"role": "user", "content": f"Where is order {order}, and what did it cost?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    _call(f"a{number}", "order_status", order_id=order),
                    _call(f"b{number}", "order_total", order_id=order, currency="EUR"),
                ],
                "usage": _usage(900 + number % 97, 40),
            },
            {
                "role": "tool",
                "tool_call_id": f"a{number}",
                "content": json.dumps({"status": "shipped", "carrier": "ups", "eta": "2026-05-12"}),
            },
            {
                "role": "tool",
                "tool_call_id": f"b{number}",
                "content": json.dumps({"total": number % 500 + 0.99, "currency": "EUR"}),
            },
            {
                "role": "assistant",
                "content": f"Order {order} has shipped (UPS, due 12 May); it cost "
                f"{number % 500 + 0.99} EUR.",
                "usage": _usage(1100, 28),
            },
            {"role": "user", "content": "Please cancel it."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [_call(f"c{number}", "cancel_order", order_id=order)],
                "usage": _usage(1200, 20),
            },
            {
                "role": "tool",
                "tool_call_id": f"c{number}",
                "content": f"Order {order} cannot be cancelled: it has shipped.",
            },
            {
                "role": "assistant",
                "content": "It has shipped, so it cannot be cancelled; you can return it instead.",
                "usage": _usage(1300, 25),
            },
            {"role": "user", "content": "Thanks."},
            {"role": "assistant", "content": "You're welcome.", "usage": _usage(1400, 4)},
        ],
    }


def write(path: Path, conversations: int) -> int:
    """Write `conversations` synthetic conversations to `path`; return the file's size."""
    with path.open("w", encoding="utf-8") as out:
        for number in range(conversations):
            out.write(json.dumps(conversation(number)) + "\n")
    return path.stat().st_size


def read(path: Path, limit: int | None = None, *, records: bool = False) -> dict[str, Any]:
    """Read `path` (its first `limit` conversations), with `records` also make each one's
    shadow-mode records: counts, wall time, this process's peak RSS."""
    from toolstop.report.sources import ReadProblems, read_conversations, shadow_records

    problems = ReadProblems()
    conversations = messages = recorded = made = 0
    started = time.perf_counter()
    for found in read_conversations(path, problems=problems):
        conversations += 1
        messages += len(found.messages)
        recorded += found.tokens == "recorded"
        if records:
            made += len(shadow_records(found.messages))
        if limit is not None and conversations >= limit:
            break
    seconds = time.perf_counter() - started
    return {
        "conversations": conversations,
        "messages": messages,
        "recorded_tokens": recorded,
        "records": made,
        "skipped_lines": problems.skipped_lines,
        "seconds": round(seconds, 2),
        "conversations_per_second": round(conversations / seconds) if seconds else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def _child(path: Path, limit: int, *, records: bool) -> dict[str, Any]:
    code = (
        "import json, sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
        "from sources_bench import read; "
        "print(json.dumps(read(Path(sys.argv[2]), int(sys.argv[3]), records=sys.argv[4] == '1')))"
    )
    here = str(Path(__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", code, here, str(path), str(limit), "1" if records else "0"],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def report(path: Path, out: Path) -> dict[str, Any]:
    """Run the whole `toolstop report --from path --out out` in this process: its runs, wall
    time and this process's peak RSS."""
    import contextlib
    import io

    from toolstop.cli import main as toolstop

    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = toolstop(["report", "--from", str(path), "--out", str(out)])
    seconds = time.perf_counter() - started
    document = json.loads((out / "report.json").read_text()) if code == 0 else {}
    return {
        "command": "toolstop report --from FILE",
        "exit_code": code,
        "conversations": document.get("conversations"),
        "runs": document.get("runs"),
        "seconds": round(seconds, 2),
        "conversations_per_second": round(document.get("conversations", 0) / seconds)
        if seconds
        else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def _report_child(path: Path, out: Path) -> dict[str, Any]:
    code = (
        "import json, sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
        "from sources_bench import report; "
        "print(json.dumps(report(Path(sys.argv[2]), Path(sys.argv[3]))))"
    )
    here = str(Path(__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", code, here, str(path), str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Write; read a tenth, all, then all with the records; check the counts; print JSON."""
    parser = argparse.ArgumentParser(prog="python scripts/sources_bench.py")
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument(
        "--keep", type=Path, help="write the log here (kept) instead of a temp file"
    )
    parser.add_argument("--out", type=Path, help="also store the JSON summary in this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        path = args.keep or Path(folder) / "conversations.jsonl"
        size = write(path, args.conversations)
        plan = [(max(1, args.conversations // 10), False), (args.conversations, False)]
        plan.append((args.conversations, True))
        runs = [_child(path, n, records=records) for n, records in plan]
        whole = _report_child(path, Path(folder) / "report")
    code = 0
    for (n, records), run in zip(plan, runs, strict=True):
        expected = (n, n * MESSAGES_PER_CONVERSATION, n, n * RUNS_PER_CONVERSATION * records, 0)
        got = (
            run["conversations"],
            run["messages"],
            run["recorded_tokens"],
            run["records"],
            run["skipped_lines"],
        )
        run["counts_match"] = got == expected
        code = code or (0 if got == expected else 1)
    expected_report = (0, args.conversations, args.conversations * RUNS_PER_CONVERSATION)
    whole["counts_match"] = (
        whole["exit_code"],
        whole["conversations"],
        whole["runs"],
    ) == expected_report
    code = code or (0 if whole["counts_match"] else 1)
    summary = {
        "file_mb": round(size / 1e6, 1),
        "cpus": os.cpu_count(),
        "runs": runs,
        "report": whole,
    }
    text = json.dumps(summary, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
