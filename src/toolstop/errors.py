"""Exceptions raised by toolstop.

toolstop raises only for programming errors: a policy that makes no sense, a tool set that would
bypass the policy. A *tool* that signals badly never raises; it is recorded and routing continues
with the model (see `toolstop.decide`).
"""

from __future__ import annotations

__all__ = ["ToolstopConfigError", "ToolstopError"]


class ToolstopError(Exception):
    """Base class of every exception toolstop raises."""


class ToolstopConfigError(ToolstopError, ValueError):
    """A setting or a tool set was rejected when it was built, not when it ran.

    Subclasses `ValueError`, so `except ValueError` keeps working for callers that validate input
    generically.
    """
