"""Docstrings read well in the API reference and do not go stale.

One summary line, then the rest after a blank line (mkdocstrings shows the summary in tables of
contents); no pointers to documents a user of the package does not have, and no measured ratios
that the next benchmark run would contradict.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import toolstop

SRC = Path(toolstop.__file__).parent


def documented() -> Iterator[tuple[str, Any]]:
    """Every module of the package, the names in its `__all__`, and their public methods."""
    for info in pkgutil.walk_packages(toolstop.__path__, "toolstop."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra is not installed here
            continue
        yield info.name, module
        for name in getattr(module, "__all__", []):
            value = getattr(module, name)
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            yield f"{info.name}.{name}", value
            if inspect.isclass(value) and value.__module__.startswith("toolstop"):
                for attribute, member in vars(value).items():
                    if inspect.isfunction(member) and not attribute.startswith("_"):
                        yield f"{info.name}.{name}.{attribute}", member


def test_every_docstring_starts_with_one_summary_line() -> None:
    long_summaries = []
    for name, value in documented():
        lines = (inspect.getdoc(value) or "").splitlines()
        if len(lines) > 1 and lines[1].strip():
            long_summaries.append(f"{name}: {lines[0]}")
    assert long_summaries == []


def test_the_check_sees_a_summary_that_runs_on() -> None:
    def runs_on() -> None:
        """A summary that
        runs on."""

    lines = (inspect.getdoc(runs_on) or "").splitlines()
    assert len(lines) == 2  # what the test above reports
    assert lines[1].strip() == "runs on."


UNKNOWN_TO_USERS = re.compile(r"(?i:seed article|the article|see the README)|DESIGN\b|findings\.md")
MEASURED_RATIO = re.compile(r"\b\d+\.\d+x\b")


def test_no_prose_points_at_documents_a_user_does_not_have() -> None:
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if UNKNOWN_TO_USERS.search(line) or MEASURED_RATIO.search(line)
    ]
    assert found == []


def test_the_patterns_catch_what_they_are_for() -> None:
    assert UNKNOWN_TO_USERS.search("the seed article's search agent")
    assert UNKNOWN_TO_USERS.search("(DESIGN §7)")
    assert UNKNOWN_TO_USERS.search("see the README for the table")
    assert not UNKNOWN_TO_USERS.search("against the `wrap_model_call` design")
    assert MEASURED_RATIO.search("which measured 0.70x the throughput")
    assert not MEASURED_RATIO.search('f"{ratio:.3f}x"')  # a format, not a figure
