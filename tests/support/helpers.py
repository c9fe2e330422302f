"""Shared helpers for tests: run a graph and collect its node path and final state; read a
report page in headless Chromium."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from toolstop._check.routers import arun_agent as arun
from toolstop._check.routers import run_agent as run

__all__ = ["CHROMIUM", "arun", "chromium", "run"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def chromium(page: Path, profile: Path, *, screenshot: Path | None = None) -> str:
    """The DOM of `page` as headless Chromium renders it (and a screenshot, when asked for)."""
    assert CHROMIUM is not None
    url = page.resolve().as_uri()
    base = [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}"]
    dom = subprocess.run(
        [*base, "--dump-dom", url], capture_output=True, text=True, timeout=600, check=True
    ).stdout
    if screenshot is not None:
        subprocess.run(
            [*base, "--window-size=1300,1800", f"--screenshot={screenshot}", url],
            capture_output=True, timeout=600, check=True,
        )  # fmt: skip
    return dom
