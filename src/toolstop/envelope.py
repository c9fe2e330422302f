"""A documented envelope for tools that can only return a string (remote, HTTP, other stacks).

The envelope (specified in `docs/envelope.md`, JSON Schema `docs/envelope.schema.json`):

    {"toolstop": 1, "content": "what the model sees", "artifact": {"stop": true, ...}}

`from_envelope(tool)` turns such a tool into a `content_and_artifact` tool: the model sees only
`content`, the router reads `artifact`. Anything that is not a well-formed envelope (plain text,
other JSON, a wrong version) is passed through as plain content with an invalid-signal record
(`{"envelope_error": ...}`), never a crash and never a stop.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from toolstop.tools import as_content_and_artifact, tool_call

__all__ = ["ENVELOPE_VERSION", "envelope", "from_envelope", "parse_envelope"]

ENVELOPE_VERSION = 1


def envelope(content: str, artifact: dict[str, Any] | None = None) -> str:
    """Build the envelope string a plain-text tool returns (the sending side)."""
    if not isinstance(content, str):
        msg = f"envelope content must be a str, got {type(content).__name__}"
        raise TypeError(msg)
    return json.dumps({"toolstop": ENVELOPE_VERSION, "content": content, "artifact": artifact})


def parse_envelope(text: Any) -> tuple[Any, dict[str, Any] | None]:
    """Read an envelope: `(content, artifact)`, or `(text, {"envelope_error": why})`."""
    if not isinstance(text, str):
        return text, {"envelope_error": f"not a string but {type(text).__name__}"}
    try:
        data = json.loads(text)
    except ValueError:
        return text, {"envelope_error": "not JSON"}
    if not isinstance(data, dict) or "toolstop" not in data:
        return text, {"envelope_error": "not an envelope (no 'toolstop' key)"}
    if data["toolstop"] != ENVELOPE_VERSION or type(data["toolstop"]) is not int:
        return text, {"envelope_error": f"unknown envelope version {data['toolstop']!r}"}
    content, artifact = data.get("content"), data.get("artifact")
    if not isinstance(content, str):
        return text, {"envelope_error": "'content' must be a string"}
    if artifact is not None and not isinstance(artifact, dict):
        return content, {"envelope_error": "'artifact' must be an object or null"}
    extra = set(data) - {"toolstop", "content", "artifact"}
    if extra:
        return text, {"envelope_error": f"unknown keys {sorted(extra)}"}
    return content, artifact  # a null artifact: no signal (routing goes back to the model)


def from_envelope(tool: BaseTool) -> BaseTool:
    """A `content_and_artifact` version of a tool that returns an envelope string.

    The model sees only the envelope's `content`. Same name, description and arguments.
    """

    def call(arguments: dict[str, Any]) -> dict[str, Any]:
        return tool_call(tool.name, arguments, "toolstop-envelope")

    def unpack(result: Any) -> tuple[Any, dict[str, Any] | None]:
        text = result.content if isinstance(result, ToolMessage) else result
        return parse_envelope(text)

    def run(**arguments: Any) -> tuple[Any, dict[str, Any] | None]:
        return unpack(tool.invoke(call(arguments)))

    async def arun(**arguments: Any) -> tuple[Any, dict[str, Any] | None]:
        return unpack(await tool.ainvoke(call(arguments)))

    return as_content_and_artifact(tool, func=run, coroutine=arun)
