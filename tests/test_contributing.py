"""CONTRIBUTING.md and the changelog name only what exists: targets, stacks, markers, hooks."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][a-z-]*):", text, flags=re.M))


def test_every_make_command_it_names_is_a_target() -> None:
    named = set(re.findall(r"`make ((?:[a-z][a-z-]* ?)+)", CONTRIBUTING))
    named |= set(re.findall(r"^make ((?:[a-z][a-z-]* ?)+)", CONTRIBUTING, flags=re.M))
    targets = {word for words in named for word in words.split()}
    assert {"demo", "test", "test-fast", "format", "matrix", "mutation", "docs"} <= targets
    assert targets <= makefile_targets()


def test_the_stack_table_is_the_noxfile_matrix() -> None:
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    matrix = re.search(r"^MATRIX = \{(.*?)^\}", noxfile, flags=re.M | re.S)
    assert matrix is not None
    stacks = re.findall(r'^    "([\w.-]+)": \[', matrix.group(1), flags=re.M)
    table = re.findall(r"^\| `([\w.-]+)` \| ", CONTRIBUTING, flags=re.M)
    markers = {"contract", "slow", "server", "live", "mutation", "multiagent"}
    assert [name for name in table if name not in markers] == stacks


def test_the_marker_table_is_pyproject_s_markers() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = [m.split(":")[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]]
    table = re.findall(r"^\| `([\w.-]+)` \| ", CONTRIBUTING, flags=re.M)
    assert sorted(name for name in table if name in declared) == sorted(declared)


def test_the_changelog_keeps_an_unreleased_section_and_the_current_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "version"
    ]
    releases = re.findall(r"^## \[([^\]]+)\]", changelog, flags=re.M)
    assert releases[0] == "Unreleased"
    assert version in releases
    assert "## Version policy" in changelog


def test_the_pre_commit_ruff_pin_is_a_ruff_version() -> None:
    config = (ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    pins = set(re.findall(r'"ruff==([\d.]+)"', config))
    assert len(pins) == 1  # both ruff hooks run the same ruff
    assert "language: pygrep" in config
    assert "stages: [commit-msg]" in config
