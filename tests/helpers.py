"""Shared helpers for router tests: run a graph and collect its node path and final state."""

from __future__ import annotations

from toolstop.testing.routers import arun_agent as arun
from toolstop.testing.routers import run_agent as run

__all__ = ["arun", "run"]
