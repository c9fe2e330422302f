"""The routers of the shipped test kit, as the router tests use them."""

from __future__ import annotations

from toolstop._check.pydantic_ai_router import pydantic_ai_unavailable
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
CHECK_ROUTERS: list[str] = [r.name for r in ROUTERS] + (
    ["pydantic_ai"] if pydantic_ai_unavailable() is None else []
)
"""The routers `toolstop check` runs by default here: these, and Pydantic AI where installed."""

__all__ = [
    "CHECK_ROUTERS",
    "GRAPH",
    "HAS_AGENTS",
    "LEGACY",
    "MIDDLEWARE",
    "MIDDLEWARE_UNAVAILABLE",
    "ROUTERS",
    "Router",
]
