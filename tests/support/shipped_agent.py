"""The agent teams actually ship, for the `--agent` tests of check, bench and explain.

Async tools, its own `HumanInTheLoopMiddleware` on the payment tool, its own
`ModelCallLimitMiddleware`, `SummarizationMiddleware`, an audit middleware with only
`awrap_model_call`, and `StopOnArtifact`. The tests write it into a temporary folder (see
`user_agent.write_module`) and run the CLI from there, as a user would. `broken(kind)` is the
same agent with one mistake: `nostop` (StopOnArtifact left out), `nopolicy` (the policy
dropped), `direct` (a static `return_direct` on the payment tool). `variant("review-first")` is a
correct agent with its review listed before its limit (`exit_behavior="end"`), as a new user's.
"""

from __future__ import annotations

SHIPPED_AGENT = '''
"""Acme's payments agent as it ships: async tools, its own review, limits, summarisation."""

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    ModelCallLimitMiddleware,
    SummarizationMiddleware,
    ToolRetryMiddleware,
)
from langchain_core.tools import tool
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel, Field

from toolstop import Outcome, StopOnArtifact, signal

AUDIT = []
LIMIT = 8


class Payment(BaseModel):
    order_id: str = Field(examples=["o-1"])
    amount: float = Field(gt=0, le=500)


@tool(response_format="content_and_artifact")
async def order_status(order_id: str):
    """Look up an order's status by its id."""
    return f"Order {order_id} ships tomorrow.", signal(Outcome.COMPLETED, order_id=order_id)


@tool(response_format="content_and_artifact")
async def pay(request: Payment):
    """Pay an order (a human approves every payment)."""
    return f"Paid {request.amount} on {request.order_id}.", signal(Outcome.COMPLETED)


TOOLS = [order_status, pay]


class Audit(AgentMiddleware):
    """Logs every model call; written async-only, as the rest of the service."""

    async def awrap_model_call(self, request, handler):
        AUDIT.append(len(request.messages))
        return await handler(request)


def error_text(error):
    if isinstance(error, GraphBubbleUp):  # a human-review interrupt: let it through
        raise error
    return f"Error: {error!r}"


def make_agent(model, tools, policy, middleware=()):
    return create_agent(
        model,
        tools,
        system_prompt="You are Acme's payments agent.",
        middleware=[
            *middleware,
            ModelCallLimitMiddleware(run_limit=LIMIT),
            HumanInTheLoopMiddleware(interrupt_on={"pay": True}),
            SummarizationMiddleware(model, trigger=("messages", 40)),
            Audit(),
            ToolRetryMiddleware(max_retries=0, on_failure=error_text),
            StopOnArtifact(policy),
        ],
    )
'''

_MISTAKES = {
    "nostop": ("            StopOnArtifact(policy),\n", ""),
    "nopolicy": ("StopOnArtifact(policy)", "StopOnArtifact()"),
    "direct": (
        '@tool(response_format="content_and_artifact")\nasync def pay',
        '@tool(response_format="content_and_artifact", return_direct=True)\nasync def pay',
    ),
}


def broken(kind: str) -> str:
    """`SHIPPED_AGENT` with one mistake (`nostop`, `nopolicy`, `direct`)."""
    old, new = _MISTAKES[kind]
    assert old in SHIPPED_AGENT
    return SHIPPED_AGENT.replace(old, new)


_VARIANTS = {
    "review-first": (
        "            ModelCallLimitMiddleware(run_limit=LIMIT),\n"
        '            HumanInTheLoopMiddleware(interrupt_on={"pay": True}),\n',
        '            HumanInTheLoopMiddleware(interrupt_on={"pay": True}),\n'
        '            ModelCallLimitMiddleware(run_limit=LIMIT, exit_behavior="end"),\n',
    ),
}


def variant(kind: str) -> str:
    """`SHIPPED_AGENT` written another correct way (`review-first`)."""
    old, new = _VARIANTS[kind]
    assert old in SHIPPED_AGENT
    return SHIPPED_AGENT.replace(old, new)
