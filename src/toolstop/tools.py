"""Tool failures the model sees: `with_timeout` (a hung tool becomes an error, not a hung
agent) and `tool_error_text` (what a tool's exception looks like to the model)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from toolstop.errors import ToolstopError

__all__ = ["ToolTimeoutError", "tool_error_text", "with_timeout"]

_URL = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*)://[^\s'\"<>]+")
_SECRET = re.compile(
    r"\b(password|passwd|pwd|secret|token|api[_-]?key|user(?:name)?|host|hostaddr|port|dbname)"
    r"(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;)]+)",
    re.IGNORECASE,
)
_QUOTED_DETAIL = re.compile(
    r"\b(server at|user|host|database|role)(\s+)(\"[^\"]*\"|'[^']*')", re.IGNORECASE
)
_ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\[[0-9a-fA-F:]+\](?::\d+)?")
_MAX_MESSAGE = 200
"""Characters of an exception's message the model gets at most (its first line)."""


def tool_error_text(error: Exception) -> str:
    """What a tool's exception looks like to the model: `Error: <type>: <message>`.

    The message is its first line, at most 200 characters, with connection details masked:
    URLs (`postgresql://alice:pw@db:5432/app` becomes `postgresql://***`), `key=value` pairs
    naming a password, token, key, user, host, port or database, quoted server, user, host and
    database names, and IP addresses. The model learns what failed and can decide to retry or
    explain; internal details that could reach the user do not.

    The hand-built graph and the legacy drop-in answer a tool's exception with this text (an
    error ToolMessage, which toolstop counts as a transient failure). `create_agent` fails the
    run on a tool exception unless error middleware answers it; pass this function to
    langchain's `ToolErrorMiddleware(on_error=lambda error, request: tool_error_text(error))`
    for the same text there.

    Deliberately not handled: secrets in other shapes (a bare password in free text) are not
    recognised; raise exceptions whose messages are safe, or give the tool node a fixed text.
    """
    lines = str(error).strip().splitlines()
    message = lines[0] if lines else ""
    message = _URL.sub(lambda m: f"{m.group(1)}://***", message)
    message = _SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}***", message)
    message = _QUOTED_DETAIL.sub(lambda m: f"{m.group(1)}{m.group(2)}***", message)
    message = _ADDRESS.sub("***", message)
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 3] + "..."
    name = type(error).__name__
    return f"Error: {name}: {message}" if message else f"Error: {name}"


class ToolTimeoutError(ToolstopError, TimeoutError):
    """A tool wrapped by `with_timeout` did not answer in time.

    Raised inside the tool, so the tool node turns it into an error ToolMessage: the model sees
    it, and toolstop counts it as a transient failure against the retry budget.
    """


def _unpack(result: Any) -> tuple[Any, Any]:
    if isinstance(result, ToolMessage):
        return result.content, result.artifact
    return result, None


def with_timeout(tool: BaseTool, seconds: float) -> BaseTool:
    """Wrap `tool` so a call that takes longer than `seconds` fails with `ToolTimeoutError`.

    The wrapper keeps the tool's name, description and arguments and returns
    `(content, artifact)`; the model sees only the content, as before.

    Deliberately not handled: Python cannot stop a thread, so a sync tool that hangs keeps
    running in the background after the timeout (its result is dropped); an async tool is
    cancelled. Tools with injected arguments (`InjectedState`, `ToolRuntime`) are not supported.

    Raises:
        ValueError: if `seconds` is not positive.
    """
    if not seconds > 0:
        msg = f"with_timeout needs a positive number of seconds, got {seconds!r}"
        raise ValueError(msg)
    name = tool.name

    def call(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"type": "tool_call", "name": name, "args": arguments, "id": "toolstop-timeout"}

    def run(**arguments: Any) -> tuple[Any, Any]:
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        future = pool.submit(tool.invoke, call(arguments))
        try:
            return _unpack(future.result(timeout=seconds))
        except concurrent.futures.TimeoutError:
            msg = f"the {name} tool did not answer within {seconds:g} s"
            raise ToolTimeoutError(msg) from None
        finally:
            pool.shutdown(wait=False)

    async def arun(**arguments: Any) -> tuple[Any, Any]:
        try:
            result = await asyncio.wait_for(tool.ainvoke(call(arguments)), timeout=seconds)
        except TimeoutError:
            msg = f"the {name} tool did not answer within {seconds:g} s"
            raise ToolTimeoutError(msg) from None
        return _unpack(result)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=name,
        description=tool.description,
        args_schema=tool.args_schema,
        response_format="content_and_artifact",
    )
