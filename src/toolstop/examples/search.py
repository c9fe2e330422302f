"""The example `search` tool: a small knowledge index that signals through its artifact.

Its calls succeed, fail, or fail for good; each says which in its artifact."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.tools import BaseTool, tool

from toolstop.examples._forced import OutcomePicker
from toolstop.outcome import Outcome, signal

__all__ = [
    "DEFAULT_WEIGHTS",
    "FATAL_MESSAGES",
    "RETRYABLE_MESSAGES",
    "SEARCH_INDEX",
    "make_search_tool",
    "page_answer",
]

DEFAULT_WEIGHTS = {"success": 60.0, "retryable": 25.0, "fatal": 15.0}
"""The search tool's outcome mix in `toolstop demo` and the example agents: success, retryable,
fatal."""


def _page(topic: str, summary: str, facts: list[str]) -> str:
    document = {
        "topic": topic,
        "summary": summary,
        "facts": facts,
        "source": f"kb://{topic.replace(' ', '-')}",
    }
    return json.dumps(document, indent=2)


SEARCH_INDEX: dict[str, str] = {
    "refund": _page(
        "refund",
        "Refunds are paid to the original payment method within 5 business days.",
        ["Orders can be refunded within 30 days.", "Shipping costs are refunded too."],
    ),
    "shipping": _page(
        "shipping",
        "Standard shipping takes 2-4 business days; express ships the next day.",
        ["Free shipping from 50 EUR.", "Tracking links arrive by e-mail."],
    ),
    "langgraph": _page(
        "langgraph",
        "LangGraph builds stateful agent loops as graphs of nodes and edges.",
        ["Nodes return state updates.", "Conditional edges route between nodes."],
    ),
    "password": _page(
        "password",
        "Reset a password from the sign-in page with 'Forgot password'.",
        ["Reset links expire after one hour.", "Passwords need 12 characters."],
    ),
}
"""The knowledge index: topic -> a JSON page (what a successful search returns verbatim)."""


def page_answer(page: str) -> str | None:
    """A page as prose for the user: its summary, then its facts (`None`: not such a page).

    The model gets the JSON page as content; a hard stop shows this text instead (the
    artifact's `answer`), so a chat UI shows a sentence, not a data structure.
    """
    try:
        document = json.loads(page)
    except ValueError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("summary"), str):
        return None
    facts = document.get("facts")
    extra = [f for f in facts if isinstance(f, str)] if isinstance(facts, list) else []
    return " ".join([document["summary"], *extra])


RETRYABLE_MESSAGES = (
    "The search service timed out. Try again.",
    "The search service answered 503 Service Unavailable. Try again shortly.",
    "The search service is rate limited right now. Try again.",
)
FATAL_MESSAGES = (
    "The search index is offline for maintenance; searching again will not help.",
    "This query was rejected by the search service as malformed.",
)
NOTHING_FOUND = "Nothing in the index overlaps with this query."

_CHOICES = ("success", "retryable", "fatal")


def make_search_tool(
    *,
    force_outcome: str | Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
    seed: int | None = 0,
    index: Mapping[str, str] | None = None,
) -> BaseTool:
    """Build the `search` tool.

    Args:
        force_outcome: `"success"`, `"retryable"` or `"fatal"` for every call, or a sequence used
            in call order (its last entry repeats).
        weights: Outcome weights when not forced, e.g. `{"success": 60, "retryable": 25,
            "fatal": 15}`; equal weights by default.
        seed: Seed of the tool's own `random.Random` (outcomes and message texts).
        index: The knowledge index; `SEARCH_INDEX` by default.

    Returns:
        A `content_and_artifact` tool. A hit returns the JSON page with `completed`/stop and,
        for the user, the page as prose in `answer` (see `page_answer`); a retryable failure
        `transient` (the model may retry); a fatal one `fatal`/stop. A query matching nothing
        stops too (`completed`, `found: False`): the search did its job.
    """
    picker = OutcomePicker(_CHOICES, force=force_outcome, weights=weights, seed=seed)
    pages = dict(SEARCH_INDEX if index is None else index)

    @tool(response_format="content_and_artifact")
    def search(query: str) -> tuple[str, dict[str, Any]]:
        """Search the knowledge base for information about the query."""
        outcome = picker.next()
        if outcome == "retryable":
            return picker.rng.choice(RETRYABLE_MESSAGES), signal(Outcome.TRANSIENT)
        if outcome == "fatal":
            return picker.rng.choice(FATAL_MESSAGES), signal(Outcome.FATAL)
        wanted = query.lower()
        for topic, page in pages.items():
            if topic in wanted or wanted in topic:
                prose = page_answer(page)
                return page, signal(Outcome.COMPLETED, answer=prose, found=True, topic=topic)
        return NOTHING_FOUND, signal(Outcome.COMPLETED, found=False)

    return search
