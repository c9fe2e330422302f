"""A user's agent module, as a team adopting toolstop would write it, for the `--agent` tests.

The tests write it into a temporary folder and run `toolstop check --agent` / `bench --agent`
from there, so it is imported the way the CLI imports a user's module (from the current
directory), not from toolstop's test suite.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SUPPORT_AGENT = '''
"""Acme's support agent: one factory, called by production and by toolstop's check and bench."""

from typing import Literal

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ToolRetryMiddleware
from langchain_core.tools import tool
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel, Field

from toolstop import Outcome, StopOnArtifact, signal

PROMPT = "You are Acme's support agent. Use the tools; answer in one sentence."


class Refund(BaseModel):
    order_id: str = Field(examples=["o-1"])
    amount: float = Field(gt=0, le=500)
    reason: Literal["damaged", "late", "other"]
    note: str | None = None


@tool(response_format="content_and_artifact")
def order_status(order_id: str, fields: list[Literal["items", "tracking"]] = ["tracking"]):
    """Look up an order's status by its id."""
    if order_id == "o-slow":
        return "The order service timed out.", signal(Outcome.TRANSIENT)
    return f"Order {order_id} ships tomorrow.", signal(Outcome.COMPLETED, order_id=order_id)


@tool(response_format="content_and_artifact")
def refund(request: Refund):
    """Refund an order (amounts up to 100 without a manager)."""
    if request.amount > 100:
        return "A manager must approve this refund.", signal(Outcome.POLICY_BLOCK)
    return f"Refunded {request.amount} on {request.order_id}.", signal(Outcome.COMPLETED)


TOOLS = [order_status, refund]


class QuestionGuard(AgentMiddleware):
    """Our own middleware: refuses questions that ask for credentials."""

    def before_agent(self, state, runtime):
        if "password" in str(state["messages"][-1].content).lower():
            raise ValueError("the guard refused a question about passwords")
        return None


def error_text(error):
    if isinstance(error, GraphBubbleUp):  # a human-review interrupt: let it through
        raise error
    return f"Error: {error!r}"


def make_agent(model, tools, policy, middleware=()):
    return create_agent(
        model,
        tools,
        system_prompt=PROMPT,
        middleware=[
            *middleware,
            QuestionGuard(),
            ToolRetryMiddleware(max_retries=0, on_failure=error_text),
            StopOnArtifact(policy),
        ],
    )
'''


@pytest.fixture
def in_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh current directory; modules imported from it are forgotten afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        module = sys.modules.get(name)
        if str(getattr(module, "__file__", "") or "").startswith(str(tmp_path)):
            del sys.modules[name]


def write_module(folder: Path, name: str, source: str) -> Path:
    """Write `name.py` into `folder`."""
    path = folder / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    return path
