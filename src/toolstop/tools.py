"""`with_timeout`: a tool that hangs becomes a model-visible error, not a hung agent."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from toolstop.errors import ToolstopError

__all__ = ["ToolTimeoutError", "with_timeout"]


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
