"""The wheel as a user installs it: the package only (no development tools), and `toolstop demo`
and `toolstop check` run from a bare environment."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UV = Path(sys.executable).with_name("uv")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not UV.exists(), reason="uv (a dev dependency) is not installed"),
]

# The development tools live in scripts/ and must not ship (they need a checkout: `make serve`).
DEV_TOOLS = ("serve.py", "serve_bench.py", "serve_process.py", "report_scale.py", "diagrams.py")
_UNREACHABLE = ("error sending request", "failed to connect", "network", "dns error", "timed out")


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = _run(UV, "build", "--wheel", "--out-dir", out, ROOT, cwd=ROOT)
    if built.returncode and any(s in built.stderr.lower() for s in _UNREACHABLE):
        pytest.skip(f"the package index is unreachable: {built.stderr.strip()[-200:]}")
    assert built.returncode == 0, built.stderr
    (found,) = out.glob("toolstop-*.whl")
    return found


def test_the_wheel_holds_the_package_and_no_development_tools(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("scripts/")]
    assert not [n for n in names if n.rsplit("/", 1)[-1] in DEV_TOOLS], names
    assert not [n for n in names if n.startswith(("tests/", "docs/"))]
    assert "toolstop/cli/__init__.py" in names
    assert "toolstop/py.typed" in names
    goldens = [n for n in names if n.startswith("toolstop/_check/goldens/")]
    assert len(goldens) == len(list((ROOT / "src/toolstop/_check/goldens").rglob("*.json")))


def test_demo_and_check_run_from_a_bare_environment(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    assert _run(UV, "venv", "--python", sys.executable, venv, cwd=tmp_path).returncode == 0
    python = venv / "bin" / "python"
    installed = _run(UV, "pip", "install", "--python", python, f"{wheel}[agents]", cwd=tmp_path)
    if installed.returncode and any(s in installed.stderr.lower() for s in _UNREACHABLE):
        pytest.skip(f"the package index is unreachable: {installed.stderr.strip()[-200:]}")
    assert installed.returncode == 0, installed.stderr
    toolstop = venv / "bin" / "toolstop"
    demo = _run(toolstop, "demo", "--outcome", "success", cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "rule" in demo.stdout.lower()
    check = _run(toolstop, "check", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert " 0 failed" in check.stdout
    where = _run(python, "-c", "import toolstop; print(toolstop.__file__)", cwd=tmp_path)
    assert str(venv) in where.stdout  # the wheel ran, not the checkout
