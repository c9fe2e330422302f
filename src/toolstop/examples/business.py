"""Example tools beyond search: a payment, an idempotent write, a job poller."""

from __future__ import annotations

import threading
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from langchain_core.tools import BaseTool, tool

from toolstop.examples._forced import OutcomePicker
from toolstop.outcome import Outcome, signal

__all__ = ["make_pay_tool", "make_poll_job_tool", "make_write_record_tool"]


def make_pay_tool(
    *,
    force_outcome: str | Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
    seed: int | None = 0,
) -> BaseTool:
    """Build the `pay` tool: a receipt (stop), a processor timeout (retry), a declined card (stop).

    Args:
        force_outcome: `"receipt"`, `"timeout"` or `"declined"` (or a sequence, last repeats).
        weights: Outcome weights when not forced; equal by default.
        seed: Seed for outcomes and receipt ids.
    """
    picker = OutcomePicker(
        ("receipt", "timeout", "declined"), force=force_outcome, weights=weights, seed=seed
    )

    @tool(response_format="content_and_artifact")
    def pay(amount_eur: float, order_id: str) -> tuple[str, dict[str, Any]]:
        """Charge the customer's card on file for an order."""
        outcome = picker.next()
        if outcome == "timeout":
            text = "The payment processor timed out; no money was taken. It is safe to retry."
            return text, signal(Outcome.TRANSIENT, retry_after=2)
        if outcome == "declined":
            text = "The card was declined permanently. Please use another payment method."
            return text, signal(Outcome.FATAL, decline_code="do_not_honor")
        receipt_id = f"rcpt_{picker.rng.randrange(10**8):08d}"
        text = (
            f"<p>Payment received: <b>{amount_eur:.2f} EUR</b> for order {order_id}.</p>"
            f"<p>Receipt {receipt_id}</p>"
        )
        return text, signal(Outcome.COMPLETED, receipt_id=receipt_id)

    return pay


def make_write_record_tool(store: MutableMapping[str, str] | None = None) -> BaseTool:
    """Build the idempotent `write_record` tool.

    Args:
        store: Where records go (a dict by default; any mutable mapping, e.g. a shelf). Writing
            the same key and value again changes nothing and says `already_applied: True`.
            Writing another value under an existing key is a `fatal` conflict.
    """
    records: MutableMapping[str, str] = {} if store is None else store
    lock = threading.Lock()

    @tool(response_format="content_and_artifact")
    def write_record(key: str, value: str) -> tuple[str, dict[str, Any]]:
        """Save a record under a key. Safe to call twice with the same key and value."""
        with lock:
            existing = records.get(key)
            if existing is None:
                records[key] = value
                return f"Saved record {key}.", signal(Outcome.COMPLETED, already_applied=False)
        if existing == value:
            return f"Record {key} was already saved.", signal(
                Outcome.COMPLETED, already_applied=True
            )
        return f"Record {key} already holds a different value; not overwritten.", signal(
            Outcome.FATAL, conflict=True
        )

    return write_record


def make_poll_job_tool(*, steps: int = 3) -> BaseTool:
    """Build `poll_job`: each poll advances a job; `progress` in the artifact feeds a UI.

    The model sees only a short status line; the progress fraction stays in the artifact, which
    a UI can read from the graph's stream. Polls in progress are `completed` with `stop: False`
    (the poll worked; the model should poll again); the last one stops.
    """
    if steps < 1:
        msg = f"steps must be >= 1, got {steps}"
        raise ValueError(msg)
    polls: dict[str, int] = {}
    lock = threading.Lock()

    @tool(response_format="content_and_artifact")
    def poll_job(job_id: str) -> tuple[str, dict[str, Any]]:
        """Check on a running export job."""
        with lock:
            done = polls[job_id] = min(polls.get(job_id, 0) + 1, steps)
        progress = done / steps
        if done < steps:
            return f"Job {job_id} is still running.", signal(
                Outcome.COMPLETED, stop=False, progress=progress, job_id=job_id
            )
        return f"Job {job_id} finished: the export is ready to download.", signal(
            Outcome.COMPLETED, progress=1.0, job_id=job_id
        )

    return poll_job
