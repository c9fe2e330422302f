"""The routers of the shipped test kit, as the router tests use them."""

from __future__ import annotations

from toolstop.testing.routers import (
    GRAPH,
    LEGACY,
    MIDDLEWARE,
    Router,
    available_routers,
    has_agents,
)

HAS_AGENTS = has_agents()
ROUTERS: list[Router] = available_routers()

__all__ = ["GRAPH", "HAS_AGENTS", "LEGACY", "MIDDLEWARE", "ROUTERS", "Router"]
