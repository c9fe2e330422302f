"""The version is written once, in pyproject.toml, and read from the package metadata."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

import toolstop
from toolstop import _version

ROOT = Path(__file__).parent.parent


def test_the_version_comes_from_the_package_metadata() -> None:
    assert toolstop.__version__ == importlib.metadata.version("toolstop")


def test_the_installed_metadata_is_pyproject_s_version() -> None:
    """A stale install (pyproject's version bumped, no reinstall) says so instead of lying."""
    written = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    expected = written["project"]["version"]
    assert importlib.metadata.version("toolstop") == expected, (
        "the installed metadata is not pyproject.toml's version: reinstall (`pip install -e .`)"
    )


def test_the_version_is_written_nowhere_else_in_the_package() -> None:
    version = importlib.metadata.version("toolstop")
    written = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "src" / "toolstop").rglob("*.py"))
        if re.search(rf"""["']{re.escape(version)}["']""", path.read_text(encoding="utf-8"))
    ]
    assert written == []


def test_without_package_metadata_the_version_is_a_safe_placeholder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_version, "version", missing)
    assert _version.installed_version() == _version.UNKNOWN_VERSION == "0+unknown"


def test_another_distribution_s_version_is_read_the_same_way() -> None:
    assert _version.installed_version("pytest") == pytest.__version__
