"""The package's layers (import-linter contracts in pyproject.toml) hold, stay declared, and
catch an import against the grain."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter not installed")

LIBRARY = [
    "toolstop.outcome",
    "toolstop.policy",
    "toolstop.decision",
    "toolstop.record",
    "toolstop.errors",
    "toolstop._compat",
    "toolstop._redact",
    "toolstop._printable",
    "toolstop._secrets",
    "toolstop._version",
    "toolstop._judge",
    "toolstop._reask",
    "toolstop._reply",
    "toolstop._lifecycle",
    "toolstop._relay",
    "toolstop.flags",
    "toolstop._tokens",
    "toolstop._prompt",
    "toolstop._invocation",
    "toolstop.graph",
    "toolstop.middleware",
    "toolstop.legacy",
    "toolstop.levels",
    "toolstop.tools",
    "toolstop.convert",
    "toolstop._convert_function",
    "toolstop._narrator",
    "toolstop.envelope",
    "toolstop.mcp",
    "toolstop.openai_agents",
    "toolstop.pydantic_ai",
    "toolstop.observe",
    "toolstop.logs",
    "toolstop.metrics",
    "toolstop.streaming",
    "toolstop.models",
    "toolstop.canary",
    "toolstop._decode",
]


def _contracts() -> dict[str, dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    return {c["id"]: c for c in contracts}


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_layer_contracts_are_declared() -> None:
    contracts = _contracts()
    assert sorted(contracts) == ["check-engine", "layers", "library", "server", "test-kit"]
    library = contracts["library"]
    assert library["source_modules"] == LIBRARY
    assert set(library["forbidden_modules"]) == {  # type: ignore[arg-type]
        "toolstop.cli",
        "toolstop.bench",
        "toolstop.report",
        "toolstop.examples",
        "toolstop._check",
        "toolstop.testing",
    }
    assert set(contracts["test-kit"]["forbidden_modules"]) == {  # type: ignore[arg-type]
        "toolstop.cli",
        "toolstop.bench",
        "toolstop.report",
        "toolstop.examples",
        "toolstop._check",
    }
    # the one exception: toolstop.testing re-exports the engine's names lazily
    ignored = contracts["test-kit"]["ignore_imports"]
    assert all(i.startswith("toolstop.testing -> toolstop._check.") for i in ignored)  # type: ignore[union-attr]
    assert set(contracts["check-engine"]["forbidden_modules"]) == {  # type: ignore[arg-type]
        "toolstop.cli",
        "toolstop.bench",
        "toolstop.report",
    }
    assert contracts["layers"]["layers"] == [
        "cli",
        "bench | report",
        "_check",
        "examples",
        "testing",
    ]


def test_every_library_module_is_in_the_library_contract() -> None:
    """A new top-level module is either in the library contract or deliberately elsewhere."""
    elsewhere = {"toolstop.server", "toolstop.checkpoints", "toolstop._page", "toolstop.__main__"}
    modules = {
        f"toolstop.{path.stem}"
        for path in (ROOT / "src" / "toolstop").glob("*.py")
        if path.stem != "__init__"
    }
    assert modules - elsewhere == set(LIBRARY)


@pytest.mark.slow
def test_the_package_keeps_its_layers() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout


@pytest.mark.slow
def test_an_import_against_the_grain_is_caught(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(
        ROOT / "src" / "toolstop",
        tmp_path / "src" / "toolstop",
        ignore=shutil.ignore_patterns("__pycache__", "goldens"),
    )
    decision = tmp_path / "src" / "toolstop" / "decision.py"
    decision.write_text(
        decision.read_text(encoding="utf-8") + "\nimport toolstop.cli  # against the grain\n",
        encoding="utf-8",
    )
    result = _lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout
    assert "toolstop.decision -> toolstop.cli" in result.stdout


def test_the_test_kit_loads_the_check_engine_only_when_asked() -> None:
    code = (
        "import sys, toolstop.testing as kit\n"
        "assert 'toolstop._check.harness' not in sys.modules, 'loaded at import'\n"
        "assert kit.check_agent.__module__ == 'toolstop._check.agent'\n"
        "assert 'toolstop._check.harness' in sys.modules\n"
        "assert {'check', 'Scenario', 'run_scenario'} <= set(dir(kit))\n"
        "try:\n    kit.no_such_name\nexcept AttributeError as e:\n    print(e)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "module 'toolstop.testing' has no attribute 'no_such_name'"
