"""`forced_tool`: a tool whose results are scripted, for router tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import PrivateAttr

__all__ = ["ForcedResult", "ForcedTool", "forced_tool", "in_call_order"]

ForcedResult = tuple[Any, Any] | BaseException
"""`(content, artifact)` to return, or an exception to raise (a tool failure)."""


class ForcedTool(StructuredTool):
    """A `StructuredTool` that knows its scripted results (`forced`).

    A harness can hand the same results to a stand-in of another tool."""

    _forced: tuple[ForcedResult, ...] = PrivateAttr(default=())

    @property
    def forced(self) -> tuple[ForcedResult, ...]:
        """The scripted results, in call order (the last repeats)."""
        return self._forced


def in_call_order(
    results: Sequence[ForcedResult], helper: str = "forced_tool(name, *results)"
) -> Callable[[], tuple[Any, Any]]:
    """A function returning `results` one per call (the last repeats; exceptions are raised).

    Raises:
        ValueError: no result.
        TypeError: a result that is neither a `(content, artifact)` pair nor an exception,
            naming `helper` and what it takes.
    """
    if not results:
        msg = "a forced tool needs at least one result"
        raise ValueError(msg)
    for index, result in enumerate(results, 1):
        if not isinstance(result, BaseException) and not (
            isinstance(result, tuple) and len(result) == 2
        ):
            msg = (
                f"{helper} takes results that are (content, artifact) pairs or exceptions, "
                f'e.g. ("found it", signal("completed")); result {index} is a '
                f"{type(result).__name__}: {result!r:.80}"
            )
            raise TypeError(msg)
    lock = threading.Lock()
    used = [0]

    def next_result() -> tuple[Any, Any]:
        with lock:
            result = results[min(used[0], len(results) - 1)]
            used[0] += 1
        if isinstance(result, BaseException):
            raise result
        return result

    return next_result


def forced_tool(name: str, *results: ForcedResult, description: str | None = None) -> BaseTool:
    """A `content_and_artifact` tool that returns `results` in call order (the last repeats).

    Each result is a `(content, artifact)` pair, returned as is (so a test can hand the router
    any artifact at all), or an exception, which the tool raises. The tool takes one optional
    `query: str` argument.

    Example:
        ```pycon
        >>> from toolstop import signal
        >>> lookup = forced_tool("lookup", ("42", signal("completed")))
        >>> lookup.invoke({"type": "tool_call", "name": "lookup", "args": {}, "id": "1"}).artifact
        {'stop': True, 'reason': 'completed'}

        ```
    """
    if not isinstance(name, str) or not name:
        msg = f"forced_tool(name, *results) takes the tool's name as a str first, got {name!r:.80}"
        raise TypeError(msg)
    next_result = in_call_order(results)

    def run(query: str = "") -> tuple[Any, Any]:
        return next_result()

    tool = ForcedTool.from_function(
        run,
        name=name,
        description=description or f"The {name} tool (scripted results).",
        response_format="content_and_artifact",
    )
    assert isinstance(tool, ForcedTool)
    tool._forced = tuple(results)
    return tool
