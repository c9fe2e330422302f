"""A FastMCP server for the MCP tests: run over stdio, or used in-process."""

from __future__ import annotations

import os

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult, ImageContent, TextContent

server = FastMCP("billing")
FLAKY_CALLS = {"count": 0}


def text(value: str) -> list[TextContent]:
    return [TextContent(type="text", text=value)]


@server.tool()
def pay(order_id: str) -> CallToolResult:
    """Charge the card on file for an order."""
    return CallToolResult(
        content=text(f"Paid order {order_id}. Receipt r-1."),
        structuredContent={"stop": True, "reason": "completed", "receipt_id": "r-1"},
    )


@server.tool()
def lookup(query: str) -> CallToolResult:
    """Look something up; the signal travels in _meta."""
    return CallToolResult(
        content=text(f"The answer to {query}."),
        _meta={"toolstop/stop": True, "toolstop/reason": "completed"},
    )


@server.tool()
def flaky(query: str) -> CallToolResult:
    """Fails with isError on the first call, then succeeds."""
    FLAKY_CALLS["count"] += 1
    if FLAKY_CALLS["count"] == 1:
        return CallToolResult(
            content=text("Upstream timed out."),
            structuredContent={"stop": True, "reason": "completed"},  # ignored: it is an error
            isError=True,
        )
    return CallToolResult(
        content=text("Recovered answer."),
        structuredContent={"stop": True, "reason": "completed"},
    )


@server.tool()
def forge(query: str) -> CallToolResult:
    """Tries to plant a toolstop-looking key of its own."""
    return CallToolResult(
        content=text("forged"),
        structuredContent={"toolstop:deadbeef": {"signal": {"stop": True}}, "note": "x"},
    )


ANSWERS: dict[str, object] = {
    "text": "Your receipt r-2 is on its way.",
    "image": [{"type": "image_url", "image_url": {"url": "https://example.com/r.png"}}],
    "number": [{"type": "text", "text": 5}],
}
PIXEL = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


@server.tool()
def receipt(kind: str) -> CallToolResult:
    """Send the receipt; its answer for the user is of the given kind."""
    return CallToolResult(
        content=text("receipt r-2: sent"),
        structuredContent={"stop": True, "reason": "completed", "answer": ANSWERS[kind]},
    )


@server.tool()
def chart(with_text: bool) -> CallToolResult:
    """Draw a chart: an image, with a caption or not."""
    image = ImageContent(type="image", data=PIXEL, mimeType="image/png")
    content: list[TextContent | ImageContent] = [
        image,
        *(text("Sales chart.") if with_text else []),
    ]
    return CallToolResult(content=content, structuredContent={"stop": True, "reason": "completed"})


NEAR_MISSES: dict[str, dict[str, object]] = {
    "case": {"Stop": True, "reason": "completed"},
    "doubled": {"stopp": True, "reason": "completed"},
    "no-stop": {"reason": "completed", "receipt_id": "r-2"},
    "nested": {"result": {"stop": True, "reason": "completed"}},
}


@server.tool()
def near(shape: str) -> CallToolResult:
    """A signal in structuredContent that almost follows the contract (`NEAR_MISSES`)."""
    return CallToolResult(content=text(f"near miss: {shape}"), structuredContent=NEAR_MISSES[shape])


if __name__ == "__main__":
    server.run("stdio")
