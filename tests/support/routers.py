"""The routers of the shipped test kit, as the router tests use them."""

from __future__ import annotations

from toolstop._check.routers import (
    GRAPH,
    LEGACY,
    MIDDLEWARE,
    Router,
    available_routers,
    has_agents,
)
from toolstop._compat import middleware_unavailable

HAS_AGENTS = has_agents()
ROUTERS: list[Router] = available_routers()
MIDDLEWARE_UNAVAILABLE = middleware_unavailable()
"""Why StopOnArtifact cannot run here (no langchain, or langchain < 1.2.9); None when it can."""

__all__ = [
    "GRAPH",
    "HAS_AGENTS",
    "LEGACY",
    "MIDDLEWARE",
    "MIDDLEWARE_UNAVAILABLE",
    "ROUTERS",
    "Router",
]
