"""The Makefile says what it can do: plain `make` lists every target with its line."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")

DRY_STAMP = "STAMP=no-such-stamp"
"""With `-n`, the recipes are printed, never run: the venv stamp is a file that never exists
(not a file make reads: make updates its own makefiles even under `-n`)."""


def make(*argv: str) -> str:
    """`make ARGV` in the repository, without running any recipe that installs (`-n` or help)."""
    result = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), *argv],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def phony_targets() -> list[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    declared = re.search(r"^\.PHONY:(.*)$", text, flags=re.M)
    assert declared is not None
    return declared.group(1).split()


def test_plain_make_lists_every_target_with_a_line_of_its_own() -> None:
    listed = {}
    for line in make().splitlines()[1:]:
        name, _, doc = line.removeprefix("  make ").partition(" ")
        listed[name] = doc.strip()
    assert sorted(listed) == sorted(phony_targets())
    assert all(listed.values()), [name for name, doc in listed.items() if not doc]
    assert list(listed)[:2] == ["demo", "test"]  # the two set-up commands come first
    assert make("help") == make()


def test_test_fast_runs_the_fast_tests_in_parallel() -> None:
    command = make("-n", "test-fast", DRY_STAMP).strip().splitlines()[-1]
    assert " -m pytest -n auto " in command
    assert '-m "not slow and not server and not live"' in command
    narrowed = make("-n", "test-fast", DRY_STAMP, "PYTEST_ARGS=tests/test_decide.py -x")
    assert narrowed.strip().endswith("tests/test_decide.py -x")


def test_format_fixes_then_formats_what_lint_checks() -> None:
    fix, fmt = make("-n", "format", DRY_STAMP).strip().splitlines()[-2:]
    check, fmt_check, layers = make("-n", "lint", DRY_STAMP).strip().splitlines()[-3:]
    assert fix.endswith("ruff check --fix src tests scripts")
    assert fmt.endswith("ruff format src tests scripts")
    assert check.endswith("ruff check src tests scripts")
    assert fmt_check.endswith("ruff format --check src tests scripts")
    assert layers.endswith("lint-imports")
