"""MCP tools on the same contract: signals from trusted servers only.

An MCP server signals through its result's `structuredContent` (`{"stop": ..., "reason": ...}`)
or namespaced keys of the result's `_meta` (`"toolstop/stop"`, `"toolstop/reason"`). A
`structuredContent` that tries to signal and gets it wrong (`"Stop"`, `"stopp"`, a `reason`
without `stop`, a signal nested one level too deep) is a malformed signal, as in an artifact.
langchain-mcp-adapters keeps structured content in the artifact (under `structured_content`) but
drops `_meta` and raises on `isError` results, so `load_tools` installs an interceptor that sees
the raw result, and wraps each tool so the router finds the signal where it always does: at the
top of the artifact.

Trust: a stop signal counts only when the server is on the application's allowlist. A server you
do not control must not be able to stop your agent's loop with a signal or fake a `completed`;
its signals are kept as `{"untrusted": true}` (recorded as an invalid signal, routing goes back to
the model). An `isError` result, from any server, goes back to the model as a transient failure,
with its text: it counts against the retry budget, so a server that keeps failing ends the run
with `retry_budget` (the policy's own text) instead of looping on it.

Needs the `mcp` extra (`langchain-mcp-adapters`).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from langchain_core.tools import BaseTool

try:
    from langchain_mcp_adapters.tools import load_mcp_tools
    from mcp.types import CallToolResult
except ImportError as error:  # pragma: no cover - depends on the environment
    msg = "toolstop.mcp needs langchain-mcp-adapters: pip install 'toolstop[mcp]'"
    raise ImportError(msg) from error

from toolstop.decision import SIGNAL_KEYS, near_miss_key
from toolstop.outcome import Outcome
from toolstop.tools import as_content_and_artifact, tool_call

__all__ = ["SignalInterceptor", "lift_signal", "load_tools"]

# Only this process knows the key, so no server can plant a signal where the wrapper looks.
_KEY = f"toolstop:{secrets.token_hex(8)}"
_META_STOP = "toolstop/stop"
_META_REASON = "toolstop/reason"


def _candidate(result: CallToolResult) -> dict[str, Any] | None:
    """The signal a result carries, from `structuredContent` first, then `_meta`.

    A `structuredContent` that tries to signal and gets it wrong is handed on as it is, for the
    router to record as a malformed signal (back to the model, warned once): a near-miss key
    (`"Stop"`, `"stopp"`), a `reason` without `stop`. A toolstop signal nested one
    level too deep (`{"result": {"stop": true, "reason": "completed"}}`) is a malformed
    envelope.
    """
    structured = result.structuredContent or {}
    if isinstance(structured, dict):
        keys = [k for k in structured if isinstance(k, str)]
        # a bare `answer` is a server's own data far more often than a signal missing `stop`
        if any(k in ("stop", "reason") or near_miss_key(k) for k in keys):
            return dict(structured)
        nested = next((k for k in keys if _is_signal(structured[k])), None)
        if nested is not None and not nested.startswith("toolstop:"):
            return {
                "envelope_error": f"a toolstop signal nested under {nested!r}: put `stop` and "
                "`reason` at the top of structuredContent"
            }
    meta = result.meta or {}
    if _META_STOP in meta:
        candidate = {"stop": meta[_META_STOP]}
        if _META_REASON in meta:
            candidate["reason"] = meta[_META_REASON]
        return candidate
    return None


def _is_signal(value: Any) -> bool:
    """A dict of signal keys only, with `stop` among them: a toolstop signal."""
    return (
        isinstance(value, dict)
        and "stop" in value
        and all(isinstance(k, str) and k in SIGNAL_KEYS for k in value)
    )


class SignalInterceptor:
    """An MCP tool interceptor that reads the raw result's signal and judges its trust.

    Args:
        trusted_servers: Names (the `server_name` given to the adapter) whose signals count.
    """

    def __init__(self, trusted_servers: Iterable[str]) -> None:
        self.trusted = frozenset(trusted_servers)

    async def __call__(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        result = await handler(request)
        if not isinstance(result, CallToolResult):
            return result
        server = request.server_name
        trusted = server in self.trusted
        signal: dict[str, Any] | None
        if result.isError:
            signal = {"stop": False, "reason": Outcome.TRANSIENT.value, "mcp_error": True}
        else:
            signal = _candidate(result)
            if signal is not None and not trusted:
                signal = {"untrusted": True, "server": server}
        original = result.structuredContent
        kept = {k: v for k, v in (original or {}).items() if not str(k).startswith("toolstop:")}
        envelope = {"signal": signal, "server": server, "trusted": trusted, "original": original}
        return CallToolResult(
            content=result.content,
            structuredContent={**kept, _KEY: envelope},
            isError=False,
            _meta=result.meta,
        )


def lift_signal(tool: BaseTool) -> BaseTool:
    """Wrap an adapter tool so the interceptor's signal becomes the artifact's top level.

    The model sees the same content. The artifact is the signal (if any) plus an `mcp` key with
    the server name, its trust and the result's own structured content. A tool loaded without
    the interceptor gets no signal (routing goes back to the model).
    """

    async def run(**arguments: Any) -> tuple[Any, dict[str, Any]]:
        message = await tool.ainvoke(tool_call(tool.name, arguments, "toolstop-mcp"))
        artifact = getattr(message, "artifact", None)
        structured = artifact.get("structured_content") if isinstance(artifact, dict) else None
        envelope = structured.get(_KEY) if isinstance(structured, dict) else None
        if not isinstance(envelope, dict):
            return message.content, {"mcp": {"structured_content": structured}}
        lifted = dict(envelope["signal"] or {})
        lifted["mcp"] = {
            "server": envelope["server"],
            "trusted": envelope["trusted"],
            "structured_content": envelope["original"],
        }
        return message.content, lifted

    return as_content_and_artifact(tool, coroutine=run)


async def load_tools(
    session: Any = None,
    *,
    server_name: str,
    trusted_servers: Iterable[str],
    connection: Any = None,
    tool_interceptors: Sequence[Any] = (),
) -> list[BaseTool]:
    """Load an MCP server's tools, signalling per call to toolstop's routers.

    Args:
        session: An open MCP `ClientSession`, or None with `connection`.
        server_name: The server's name, as the allowlist knows it.
        trusted_servers: Servers whose stop signals count.
        connection: A langchain-mcp-adapters connection (stdio, http ...) instead of a session.
        tool_interceptors: Your own interceptors; they run inside toolstop's.

    Returns:
        Async `content_and_artifact` tools for any router (use `ainvoke` / `astream`).
    """
    interceptors = [SignalInterceptor(trusted_servers), *tool_interceptors]
    tools = await load_mcp_tools(
        session, connection=connection, server_name=server_name, tool_interceptors=interceptors
    )
    return [lift_signal(tool) for tool in tools]
