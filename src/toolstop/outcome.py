"""The outcome vocabulary shared by every tool, and `signal`, the artifact a tool returns."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

__all__ = ["DEFAULT_STOP", "Outcome", "signal"]


class Outcome(StrEnum):
    """Why a tool call ended the way it did. One vocabulary for every tool, not a flag per tool."""

    COMPLETED = "completed"
    """The call did its job; its content is the answer (stops by default)."""

    TRANSIENT = "transient"
    """A failure worth retrying: timeout, 503, rate limit (goes back to the model; never stops)."""

    FATAL = "fatal"
    """A failure no retry will fix: card declined, nothing to match (stops by default)."""

    POLICY_BLOCK = "policy_block"
    """A guard refused the call or its result (stops with the policy's user-safe text)."""


DEFAULT_STOP: dict[Outcome, bool] = {
    Outcome.COMPLETED: True,
    Outcome.TRANSIENT: False,
    Outcome.FATAL: True,
    Outcome.POLICY_BLOCK: True,
}
"""What `signal` puts in `stop` when the caller does not say."""


def signal(
    outcome: Outcome | str,
    *,
    stop: bool | None = None,
    answer: str | list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Build the artifact a `content_and_artifact` tool returns next to its content.

    Args:
        outcome: Why the call ended; an `Outcome` or its string value.
        stop: Whether the loop should end now. Defaults to the outcome's default
            (`DEFAULT_STOP`). `completed`/`fatal` with `stop=False` are valid ("go on, model").
        answer: What the user sees when this call's result is shown by a hard stop, instead of
            the content: a string, or a list of text blocks (`{"type": "text", "text": str}`),
            with some text that is not whitespace. It is never sent to the model, in this run or
            a later one (later model calls see the content in its place); in `polish` mode the
            model narrates from the content. Omitted when `None`.
        **extra: The application's own JSON data (`receipt_id`, `progress`, ...). Never read for
            routing.

    Returns:
        A plain, JSON-serialisable dict such as `{"stop": False, "reason": "transient",
        "retry_after": 2}`. Tools may just as well build this dict themselves.

    Raises:
        ValueError: for an unknown outcome, a non-bool `stop`, `transient` with `stop=True` (the one
            contradiction in the contract), an extra `reason` (the outcome is the reason), an
            `answer` that is neither a string nor a list of text blocks, or that is blank.

    Example:
        ```pycon
        >>> signal(Outcome.TRANSIENT, retry_after=2)
        {'stop': False, 'reason': 'transient', 'retry_after': 2}

        ```
    """
    try:
        reason = Outcome(outcome)
    except ValueError:
        known = ", ".join(o.value for o in Outcome)
        msg = f"unknown outcome {outcome!r}; expected one of: {known}"
        raise ValueError(msg) from None
    if stop is None:
        stop = DEFAULT_STOP[reason]
    elif not isinstance(stop, bool):
        msg = f"stop must be a bool, got {type(stop).__name__}"
        raise ValueError(msg)
    if reason is Outcome.TRANSIENT and stop:
        msg = "a transient outcome cannot stop the loop; use fatal if retrying is pointless"
        raise ValueError(msg)
    if "reason" in extra:
        msg = f"reason={extra['reason']!r}: the outcome is the reason; extra keys cannot replace it"
        raise ValueError(msg)
    if answer is None:
        return {"stop": stop, "reason": reason.value, **extra}
    problem = _answer_problem(answer)
    if problem is not None:
        raise ValueError(problem)
    return {"stop": stop, "reason": reason.value, "answer": answer, **extra}


def _answer_problem(answer: Any) -> str | None:
    """Why `answer` is refused (the same rule as the routers' reading), or `None`."""
    if type(answer) is str:
        text = answer
    elif type(answer) is list:
        for index, block in enumerate(answer):
            if type(block) is not dict or block.get("type") != "text":
                return (
                    f"answer[{index}] must be a text block {{'type': 'text', 'text': str}}, "
                    f"got {_described(block)}"
                )
            if type(block.get("text")) is not str:
                kind = type(block.get("text")).__name__
                return f"answer[{index}]['text'] must be a str, got {kind}"
        text = "".join(block["text"] for block in answer)
    else:
        return f"answer must be a str or a list of text blocks, got {type(answer).__name__}"
    if not text or text.isspace():
        return "answer must have some text (it replaces the content); omit it to show the content"
    return None


def _described(block: Any) -> str:
    """A block named by its type (and a dict by its `type` key), never by its value."""
    if type(block) is dict:
        return f"a {str(block.get('type'))[:40]!r} block"
    return type(block).__name__
