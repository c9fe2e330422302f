"""What the CLI's HTML reports share: one self-contained page that opens offline.

`toolstop bench` and `toolstop report` write it with their charts inlined as PNG data and no CDN."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

__all__ = ["cell", "inline_png", "page"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
table { border-collapse: collapse; }
th, td { padding: .3rem .7rem; border-bottom: 1px solid #ddd; }
td { text-align: right; } td:first-child { text-align: left; }
img { max-width: 100%; } code { background: #f4f4f4; padding: 0 .2rem; }
"""


def cell(value: Any) -> str:
    """A figure as a table cell's text: floats with two decimals, `None` as a dash."""
    if isinstance(value, float):
        return f"{value:.2f}"
    return "-" if value is None else str(value)


def inline_png(chart: Path | None, alt: str) -> str:
    """An `<img id="chart">` with the PNG inlined, or `""` when there is no chart."""
    if chart is None or not chart.exists():
        return ""
    encoded = base64.b64encode(chart.read_bytes()).decode("ascii")
    return f'<img id="chart" alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">'


def page(title: str, body: str, *, style: str = "") -> str:
    """A whole HTML document: `title`, `body` and the page's own CSS.

    `title` is escaped here, `body` is HTML escaped by the caller, and `style` follows the
    shared style."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_STYLE}{style}</style></head><body>
{body}
</body></html>
"""
