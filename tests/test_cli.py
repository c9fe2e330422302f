"""The CLI is a function: `main(argv)` returns an exit code."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

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
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert '"rule": "fatal"' in result.stdout


def test_demo_job_progress_comes_from_the_artifact_not_the_model() -> None:
    code, text = demo("--job")
    assert code == 0
    bars = [line for line in text.splitlines() if line.startswith("job export-42")]
    assert [line.split()[-1] for line in bars] == ["20%", "40%", "60%", "80%", "100%"]
    assert "rule: completed" in text
