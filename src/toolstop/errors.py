"""Exceptions raised by toolstop.

toolstop raises only for programming errors: a policy that makes no sense, a tool set that would
bypass the policy, a second run started on a thread that has one running. A *tool* that signals
badly never raises; it is recorded and routing continues with the model (see `toolstop.decide`).
"""

from __future__ import annotations

from langgraph.errors import GraphBubbleUp

__all__ = ["ToolstopConcurrentRunError", "ToolstopConfigError", "ToolstopError"]


class ToolstopError(Exception):
    """Base class of every exception toolstop raises."""


class ToolstopConfigError(ToolstopError, ValueError):
    """A setting or a tool set was rejected when it was built, not when it ran.

    Subclasses `ValueError`, so `except ValueError` keeps working for callers that validate input
    generically.
    """


class ToolstopConcurrentRunError(ToolstopError, GraphBubbleUp, RuntimeError):
    """A run was started on a thread while another run of this process ran or wrote there.

    Raised before the new run's first model call or tool call; the other run goes on and is
    recorded as usual. Subclasses `RuntimeError` and LangGraph's `GraphBubbleUp`, the base of its
    control-flow signals (interrupts, parent commands): tool and model error handlers
    (`ToolNode`'s, `ToolErrorMiddleware`, the retry and fallback middleware) let it through
    rather than answer the model with it, LangGraph's retry policies do not retry it, and no
    error is written to the thread for it (checkpoints of the refused run's earlier steps stay:
    see `checkpoint_id`).

    Attributes:
        thread_id: The thread's id (as the config gave it, whole).
        checkpoint_id: The checkpoint to continue the thread from (pass it as `checkpoint_id` in
            the config's `configurable`), or `None` when waiting for the other run, or sending
            the input again, is enough. Set when the refused run's own checkpoints, or the ones
            it started from, came after the other run's result: until the thread is continued
            from this checkpoint (or its state updated), every run starting from them is refused.
    """

    def __init__(
        self, message: str, *, thread_id: str | None = None, checkpoint_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
