"""A plain function converted for the adapters: `toolstop.convert`'s rule, without a ToolMessage.

The OpenAI Agents SDK and Pydantic AI take plain functions; their `convert` wraps one here."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import Any

from toolstop.convert import Answer, OutcomeRule, checked, signal_for
from toolstop.tools import tool_error_text

__all__ = ["converted_function"]


def _content(result: Any) -> str:
    """What the model sees of a result: a string as it is, other data as JSON (else `str`)."""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError):  # not JSON data: its text
        return str(result)


def converted_function(
    function: Callable[..., Any],
    *,
    name: str,
    answer: Answer | None,
    outcome: OutcomeRule | None,
    returning: Callable[[str, dict[str, Any]], Any],
    passes: tuple[type[BaseException], ...] = (),
) -> Callable[..., Any]:
    """`function` (sync or async, same signature) returning `returning(content, signal)`.

    An exception becomes the model-visible error text and a `transient` signal, unless it is
    one of `passes` (the framework's own control flow, such as Pydantic AI's `ModelRetry`).
    `answer` gets no `context` (earlier results of the run) on the adapters."""
    answer, outcome = checked(answer, outcome)

    def finish(result: Any = None, error: Exception | None = None) -> Any:
        content = tool_error_text(error) if error is not None else _content(result)
        artifact = signal_for(name, content, error=error, answer=answer, outcome=outcome)
        return returning(content, artifact)

    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def arun(*args: Any, **kwargs: Any) -> Any:
            try:
                result = await function(*args, **kwargs)
            except passes:
                raise
            except Exception as error:
                return finish(error=error)
            return finish(result)

        return arun

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            result = function(*args, **kwargs)
        except passes:
            raise
        except Exception as error:
            return finish(error=error)
        return finish(result)

    return run
