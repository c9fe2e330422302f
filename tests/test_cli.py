"""The CLI is a function: `main(argv)` returns an exit code."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from toolstop.cli import main


def demo(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["demo", *argv], out=out)
    return code, out.getvalue()


def record_of(text: str) -> dict[str, object]:
    return json.loads(text.split("stop record:\n", 1)[1])


@pytest.mark.parametrize(
    ("outcome", "path", "calls", "rule"),
    [
        ("success", "agent -> tools -> finalize", 1, "completed"),
        ("fatal", "agent -> tools -> finalize", 1, "fatal"),
        ("retryable", "agent -> tools -> agent -> tools -> finalize", 2, "completed"),
    ],
)
def test_demo_outcomes(outcome: str, path: str, calls: int, rule: str) -> None:
    code, text = demo("--outcome", outcome)
    assert code == 0
    assert f"path     : {path}" in text
    assert f"model calls: {calls}" in text
    assert record_of(text)["rule"] == rule


def test_demo_modes() -> None:
    code, text = demo("--outcome", "success", "--mode", "polish")
    assert code == 0
    assert "agent -> tools -> polish" in text
    assert "tools: none" in text  # the polish call had no tools
    code, text = demo("--outcome", "success", "--mode", "never")
    assert code == 0
    assert record_of(text)["would_stop"] == "completed"


@pytest.mark.parametrize("seed", range(6))
def test_demo_drawn_outcomes_are_consistent(seed: int) -> None:
    code, text = demo("--seed", str(seed))
    assert code == 0, text
    assert re.search(r"path     : agent -> tools", text)


def test_help_and_no_command() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--help"], out=io.StringIO())
    assert exit_info.value.code == 0
    assert main([], out=io.StringIO()) == 2


def test_console_script_module() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "toolstop", "demo", "--outcome", "fatal"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert '"rule": "fatal"' in result.stdout


def test_demo_job_progress_comes_from_the_artifact_not_the_model() -> None:
    code, text = demo("--job")
    assert code == 0
    bars = [line for line in text.splitlines() if line.startswith("job export-42")]
    assert [line.split()[-1] for line in bars] == ["20%", "40%", "60%", "80%", "100%"]
    assert "rule: completed" in text


@pytest.mark.parametrize(
    "argv",
    [["demo"], ["check"], ["bench"], ["report", "--log", "-"], ["explain", "t", "--db", "x"]],
)
def test_a_bad_flag_shows_the_subcommands_usage(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    command = argv[0]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--frobnicate"], out=io.StringIO())
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: toolstop {command} ")
    assert err.rstrip().endswith("error: unrecognized arguments: --frobnicate")


def test_demo_says_whether_outcomes_were_forced_or_drawn() -> None:
    _, forced = demo("--outcome", "success")
    assert "(search tool, forced)" in forced
    _, drawn = demo("--seed", "3")
    assert "forced" not in drawn
    assert "(search tool, drawn from a 60/25/15 mix with seed 3)" in drawn


def test_db_without_thread_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"{tmp_path}/new/threads.sqlite"
    code, _ = demo("--outcome", "success", "--db", db)
    assert code == 2
    err = capsys.readouterr().err
    assert err == "toolstop demo: --db needs --thread (the conversation it keeps)\n"


# Every file a command writes or reads, unwritable or missing: one line, non-zero, no traceback.
# MISSING is a file in a folder that does not exist (under the test's tmp_path).
MISSING = "MISSING/x.sqlite"
BAD_PATHS = [
    ["bench", "--queries", "1", "--out", "/proc/x"],
    ["report", "--log", "MISSING/log.jsonl"],
    ["report", "--db", MISSING],
    ["report", "--log", "-", "--out", "/proc/x"],
    ["explain", "t1", "--db", MISSING],
    ["demo", "--outcome", "success", "--thread", "t1", "--db", "/proc/x/threads.sqlite"],
    ["demo", "--outcome", "success", "--thread", "t1", "--db", MISSING],
]


@pytest.mark.parametrize("argv", BAD_PATHS, ids=lambda argv: " ".join(argv))
def test_a_path_that_cannot_be_used_is_one_line(
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    argv = [arg.replace("MISSING", str(tmp_path / "missing")) for arg in argv]
    code = main(argv, out=io.StringIO())
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"toolstop {argv[0]}: ")
    assert "Traceback" not in err
    assert "/proc/x" in err or str(tmp_path / "missing") in err
    assert not (tmp_path / "missing").exists()  # nothing created on the way
