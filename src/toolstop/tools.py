"""Tools as toolstop needs them: timeouts, error texts, and the checks every router runs.

`with_timeout` (a hung tool becomes a model-visible error, not a hung agent), `tool_error_text`
(what a tool's exception looks like to the model), and the checks every router runs on the tools
it is given."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from toolstop._secrets import mask_secrets
from toolstop.errors import ToolstopConfigError, ToolstopError
from toolstop.observe import logger

__all__ = [
    "ToolTimeoutError",
    "as_content_and_artifact",
    "check_tools",
    "find_tool_node",
    "mark_fallback_errors",
    "reject_return_direct",
    "tool_call",
    "tool_error_text",
    "with_timeout",
]

_MAX_MESSAGE = 200
"""Characters of an exception's message the model gets at most (its first line)."""
_MAX_READ = 16_384
"""Characters of an exception's text that are masked at all (only the first line is shown)."""


def _message(error: BaseException) -> str:
    """The first line of `str(error)`, secrets masked, at most `_MAX_MESSAGE` characters.

    An exception whose `str()` raises (or returns something else than a string) has no message."""
    try:
        text = str(error)
    except Exception:
        return ""
    if not isinstance(text, str):  # pragma: no cover - str() itself refuses a non-string
        return ""
    if len(text) > _MAX_READ:
        # cut at a space, so no secret is cut to a piece no pattern recognises
        text = text[:_MAX_READ].rsplit(None, 1)[0] if text[:_MAX_READ].split() else ""
    lines = mask_secrets(text.strip()).splitlines()
    message = lines[0].strip() if lines else ""
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 3] + "..."
    return message


def tool_error_text(error: Exception) -> str:
    """What a tool's exception looks like to the model: `Error: <type>: <message>`.

    The message is its first line, at most 200 characters, with secrets and connection details
    masked (`toolstop._secrets`): URLs of any scheme (`postgresql://alice:pw@db:5432/app`
    becomes `postgresql://***`), `key=value`, `key: value` and JSON pairs whose key names a
    password, token, secret, API key, user, host, port or database (`PGPASSWORD=`,
    `DB_PASSWORD=`, `*_TOKEN=`, `"password": "..."`), `Authorization` and `Bearer` credentials,
    tokens by their shape (AWS, OpenAI, GitHub, GitLab, Slack, Google, Stripe, Hugging Face, npm,
    JSON Web Tokens), private key blocks, e-mail addresses, quoted server, user, host and
    database names, and IP addresses. The model learns what failed and can decide to retry or
    explain; internal details that could reach the user do not. It never raises: an exception
    whose `str()` fails is shown by its type name alone.

    The hand-built graph and the legacy drop-in answer a tool's exception with this text (an
    error ToolMessage, which toolstop routes as a transient failure, against the retry budget,
    and records as problem `tool_error`). `create_agent` fails the
    run on a tool exception unless error middleware answers it; pass this function to
    langchain's `ToolErrorMiddleware(on_error=lambda error, request: tool_error_text(error))`
    for the same text there.

    Deliberately not handled: secrets in other shapes (a bare password in free text) are not
    recognised; raise exceptions whose messages are safe, or give the tool node a fixed text.
    """
    message = _message(error)
    name = type(error).__name__
    return f"Error: {name}: {message}" if message else f"Error: {name}"


class ToolTimeoutError(ToolstopError, TimeoutError):
    """A tool wrapped by `with_timeout` did not answer in time.

    Raised inside the tool, so the tool node turns it into an error ToolMessage: the model sees
    it, and toolstop routes it as a transient failure against the retry budget (recorded as
    problem `tool_error`).
    """


def _unpack(result: Any) -> tuple[Any, Any]:
    if isinstance(result, ToolMessage):
        return result.content, result.artifact
    return result, None


def tool_call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A tool call for `tool.invoke` that returns a `ToolMessage` (with the artifact)."""
    return {"type": "tool_call", "name": name, "args": arguments, "id": call_id}


def as_content_and_artifact(
    tool: BaseTool,
    *,
    func: Callable[..., tuple[Any, Any]] | None = None,
    coroutine: Callable[..., Awaitable[tuple[Any, Any]]] | None = None,
) -> BaseTool:
    """A `content_and_artifact` tool with `tool`'s name, description and arguments.

    It runs `func` (sync) and `coroutine` (async), each returning `(content, artifact)`."""
    return StructuredTool.from_function(
        func=func,
        coroutine=coroutine,
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        response_format="content_and_artifact",
    )


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
        return tool_call(name, arguments, "toolstop-timeout")

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

    return as_content_and_artifact(tool, func=run, coroutine=arun)


def reject_return_direct(tools: Sequence[BaseTool | Any], where: str) -> None:
    """Refuse tools with `return_direct=True`: a static stop would bypass the stop policy.

    Raises:
        ToolstopConfigError: naming the tools and what to do instead.
    """
    static = [getattr(t, "name", repr(t)) for t in tools if getattr(t, "return_direct", False)]
    if static:
        msg = (
            f"{where}: tools {static} have return_direct=True. A static stop ends the loop on "
            "every call, bypassing the stop policy (a transient failure would end the run). "
            "Drop return_direct and return signal(Outcome.COMPLETED) in the tool's artifact."
        )
        raise ToolstopConfigError(msg)


def _returns_a_pair(tool: Any) -> bool:
    """True when a tool's function is annotated to return a tuple (content and artifact?)."""
    import inspect
    import typing

    function = getattr(tool, "func", None) or getattr(tool, "coroutine", None)
    if function is None:
        return False
    try:
        annotation = inspect.signature(function).return_annotation
    except (TypeError, ValueError):
        return False
    if isinstance(annotation, str):
        return annotation.replace(" ", "").lower().startswith(("tuple[", "typing.tuple["))
    return typing.get_origin(annotation) is tuple


def check_tools(tools: Sequence[BaseTool | Any], where: str) -> None:
    """Refuse static stops; warn about a tool whose artifact would go to the model as text.

    A tool that returns `(content, artifact)` but is not declared with
    `response_format="content_and_artifact"` has the whole pair stringified into its content:
    the model sees the signal and toolstop never does. That is logged once, at WARNING, when the
    router is built (the graph) or first runs (the middleware).

    Raises:
        ToolstopConfigError: for tools with `return_direct=True` (see `reject_return_direct`).
    """
    reject_return_direct(tools, where)
    for tool in tools:
        if getattr(tool, "response_format", None) == "content" and _returns_a_pair(tool):
            logger.warning(
                "toolstop: %s: tool %r returns a tuple but is not declared with "
                "response_format='content_and_artifact'; its artifact goes to the model as text "
                "and never reaches toolstop",
                where,
                getattr(tool, "name", "?"),
            )


_UNWRAP_DEPTH = 8
"""How many wrappers `find_tool_node` looks through (a guard against a wrapper cycle)."""


def find_tool_node(node: Any) -> Any | None:
    """The LangGraph `ToolNode` a tools node runs, or None when it is not one.

    Looks through the wrappers LangGraph and LangChain put around a `ToolNode`:
    `with_fallbacks` (`RunnableWithFallbacks`, its primary runnable), `with_config`, `bind`,
    `with_retry` (`RunnableBinding`), and a compiled graph's node (`PregelNode`'s `bound`).
    Reads only the wrappers' own fields, never their `__getattr__` (`RunnableWithFallbacks`
    forwards unknown attributes to the runnable it wraps, and that can raise).

    Deliberately not handled: a node function that calls tools itself, a `RunnableSequence`
    or a subgraph: which tools they run cannot be seen from outside (None).
    """
    from langchain_core.runnables.base import RunnableBindingBase
    from langchain_core.runnables.fallbacks import RunnableWithFallbacks

    try:
        from langgraph.prebuilt import ToolNode
    except ImportError:  # pragma: no cover - a broken langgraph-prebuilt: no ToolNode to find
        return None
    for _ in range(_UNWRAP_DEPTH):
        if isinstance(node, ToolNode):
            return node
        if isinstance(node, RunnableWithFallbacks):
            node = node.runnable
        elif isinstance(node, RunnableBindingBase):
            node = node.bound
        elif type(node).__name__ == "PregelNode":
            node = vars(node).get("bound")
        else:
            return None
    return None


def _fallback_errors(output: Any) -> Any:
    """A fallback's output with its ToolMessages marked as errors (see `mark_fallback_errors`).

    Only a ToolMessage with neither `status="error"` nor an artifact is marked: one with an
    artifact speaks for itself (a backup `ToolNode` whose tools signal). The content is never
    read."""

    def mark(message: Any) -> Any:
        if (
            isinstance(message, ToolMessage)
            and message.status != "error"
            and message.artifact is None
        ):
            return message.model_copy(update={"status": "error"})
        return message

    if isinstance(output, dict) and isinstance(output.get("messages"), list):
        return {**output, "messages": [mark(m) for m in output["messages"]]}
    if isinstance(output, list):
        return [mark(m) for m in output]
    return mark(output)


async def _afallback_errors(output: Any) -> Any:
    return _fallback_errors(output)


def mark_fallback_errors(node: Any) -> Any:
    """`node` with the ToolMessages its `with_fallbacks` fallbacks return marked as errors.

    A fallback of a tools node runs because the `ToolNode` raised: what it answers is that
    call's error, whatever its text. LangGraph's customer-support tutorial
    (`create_tool_node_with_fallback`) builds those ToolMessages without `status="error"`, so
    the decision would read a raised exception as a plain result (`unsignalled`): back to the
    model without touching the retry budget, and a tool that always raises loops until the
    step budget. Marked, it is a `tool_error`, counted against `max_transient_retries`, as
    `ToolNode`'s own error handling is. The mark comes from where the message was made (the
    fallback path), never from its content.

    Looks through `with_config` / `bind` / `with_retry` (`RunnableBinding`) and nested
    `with_fallbacks`, as `find_tool_node` does; any other node is returned as it is.
    Deliberately not handled: a node function that catches the exception itself (the check's
    `tool-raises-forever` scenario shows it), a fallback whose output is a `Command`.
    """
    from langchain_core.runnables import RunnableLambda
    from langchain_core.runnables.base import RunnableBindingBase
    from langchain_core.runnables.fallbacks import RunnableWithFallbacks

    def marked(current: Any, depth: int) -> Any:
        if depth >= _UNWRAP_DEPTH:
            return current
        if isinstance(current, RunnableWithFallbacks):
            marker = RunnableLambda(_fallback_errors, afunc=_afallback_errors, name="error")
            return current.model_copy(
                update={
                    "runnable": marked(current.runnable, depth + 1),
                    "fallbacks": [fallback | marker for fallback in current.fallbacks],
                }
            )
        if isinstance(current, RunnableBindingBase):
            return current.model_copy(update={"bound": marked(current.bound, depth + 1)})
        return current

    return marked(node, 0)
