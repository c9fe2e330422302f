"""`toolstop report --from` on each format's fixture counts what a hand count of the file gives.

The figures of `COUNTED` were counted by hand from each fixture (its README says what each one
holds): runs (user messages that start one), model calls (assistant answers), tool calls, and the
recorded input / output tokens. They are not taken from a run of the readers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolstop.cli import main

LOGS = Path(__file__).parent / "fixtures" / "logs"

COUNTED: dict[str, tuple[str, dict[str, int]]] = {
    # 1: a request and its answer, the usage beside the messages (21 / 3); 2: two runs of
    # legacy function calls (in 50 + 70 + 90 + 105, out 12 + 10 + 12 + 7); 3: a function call
    # (40 / 9) and an answer whose usage is the line's (60 / 6)
    "openai_legacy.jsonl": (
        "openai",
        {"runs": 4, "model_calls": 7, "tool_calls": 3, "input_tokens": 436, "output_tokens": 59},
    ),
    # the order trace: two generations (120 / 10, 100 + 60 cached / 8), one tool; the refund
    # trace: two parallel calls, no usage (estimated, so only the counts are checked)
    "langfuse.jsonl": ("langfuse", {"runs": 2, "model_calls": 4, "tool_calls": 3}),
    # legacy traces/ rows then observations/ rows: two traces of one session (60 / 14, 88 / 9;
    # 70 / 14, 101 / 11), then an API trace with its observation inside (usage 40 / 6)
    "langfuse_legacy.jsonl": (
        "langfuse",
        {"runs": 3, "model_calls": 5, "tool_calls": 2, "input_tokens": 359, "output_tokens": 54},
    ),
    # LangSmith's bulk export of langsmith.jsonl's runs: the order (two model calls, one
    # tool) and the refund (two model calls, two parallel tools, no usage)
    "langsmith.parquet": ("langsmith", {"runs": 2, "model_calls": 4, "tool_calls": 3}),
    "langfuse.parquet": ("langfuse", {"runs": 2, "model_calls": 4, "tool_calls": 3}),
    # parcel 9: a call (80 / 15) and the answer (110 / 9); booking 4: two parallel calls
    # (95 / 30), one result only in its execute_tool span, and the answer (140 / 12)
    "otel_semconv.jsonl": (
        "otel",
        {"runs": 2, "model_calls": 4, "tool_calls": 3, "input_tokens": 425, "output_tokens": 66},
    ),
    # a traces export then a logs export: the weather trace's chat spans hold the usage (64 / 11,
    # 90 / 8), its details events the messages; a call known only from its event (30 / 5)
    "otel_logs.jsonl": (
        "otel",
        {"runs": 2, "model_calls": 3, "tool_calls": 1, "input_tokens": 184, "output_tokens": 24},
    ),
}


def _report(tmp_path: Path, *argv: str) -> dict[str, Any]:
    out = tmp_path / "out"
    assert main(["report", "--from", *argv, "--out", str(out)]) == 0
    return json.loads((out / "report.json").read_text())


@pytest.mark.parametrize("fixture", sorted(COUNTED))
def test_each_fixture_counts_what_a_hand_count_gives(fixture: str, tmp_path: Path) -> None:
    log_format, counted = COUNTED[fixture]
    if fixture.endswith(".parquet"):
        pytest.importorskip("pyarrow", reason="needs pyarrow (the parquet extra)")
    found = _report(tmp_path, str(LOGS / fixture), "--format", log_format)
    assert found["unreadable"]["first"] is None
    assert found["source"]["format"] == log_format
    found_counts = {
        "runs": found["runs"],
        "model_calls": found["model_calls"],
        "tool_calls": sum(found["tool_calls"].values()),
        "input_tokens": found["input_tokens"],
        "output_tokens": found["output_tokens"],
    }
    assert {k: found_counts[k] for k in counted} == counted
    if "input_tokens" in counted:
        assert found["tokens"]["estimated"] == found["tokens"]["partly"] == 0
    # the format is told from the content too
    detected = _report(tmp_path / "detected", str(LOGS / fixture))
    assert detected["source"]["format"] == log_format
    assert detected["runs"] == counted["runs"]


def test_a_langfuse_export_without_its_io_says_what_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The blob export's io field group left out: observations without input and output."""
    rows = [json.loads(line) for line in (LOGS / "langfuse.jsonl").read_text().splitlines()]
    log = tmp_path / "no-io.jsonl"
    log.write_text("".join(json.dumps({**r, "input": "", "output": ""}) + "\n" for r in rows))
    found = _report(tmp_path, str(log), "--format", "langfuse")
    assert (found["conversations"], found["runs"]) == (0, 0)
    # "" is the export's "not set": no message is made of it, and the reason says so
    assert (
        found["unreadable"]["first"] == "line 1: trace 'lf-order' has no generation with messages"
    )
    err = " ".join(capsys.readouterr().err.split())
    assert "a Langfuse export needs the GENERATION observations with their input and output" in err
