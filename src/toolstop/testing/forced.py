"""`forced_tool`: a tool whose results are scripted, for router tests."""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

__all__ = ["ForcedResult", "forced_tool"]

ForcedResult = tuple[Any, Any] | BaseException
"""`(content, artifact)` to return, or an exception to raise (a tool failure)."""


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
    if not results:
        msg = "forced_tool needs at least one result"
        raise ValueError(msg)
    lock = threading.Lock()
    used = [0]

    def run(query: str = "") -> tuple[Any, Any]:
        with lock:
            result = results[min(used[0], len(results) - 1)]
            used[0] += 1
        if isinstance(result, BaseException):
            raise result
        return result

    return StructuredTool.from_function(
        run,
        name=name,
        description=description or f"The {name} tool (scripted results).",
        response_format="content_and_artifact",
    )
