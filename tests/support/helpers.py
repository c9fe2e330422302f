"""Shared helpers for tests: run a graph and collect its node path and final state; read a
report page in headless Chromium."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from toolstop._check.routers import arun_agent as arun
from toolstop._check.routers import run_agent as run

__all__ = ["CHROMIUM", "arun", "chromium", "layout", "run"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def chromium(page: Path, profile: Path, *, screenshot: Path | None = None) -> str:
    """The DOM of `page` as headless Chromium renders it (and a screenshot, when asked for)."""
    assert CHROMIUM is not None
    url = page.resolve().as_uri()
    base = [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}"]
    dom = subprocess.run(
        [*base, "--dump-dom", url], capture_output=True, text=True, timeout=600, check=True
    ).stdout
    if screenshot is not None:
        subprocess.run(
            [*base, "--window-size=1300,1800", f"--screenshot={screenshot}", url],
            capture_output=True, timeout=600, check=True,
        )  # fmt: skip
    return dom


_PROBE = """<!doctype html><html><head><meta charset="utf-8"></head>
<body style="margin:0"><iframe id="page" src="%s" style="border:0;width:%dpx;height:%dpx"></iframe>
<script>
addEventListener("load", () => {
  const view = document.getElementById("page").contentWindow, doc = view.document;
  const width = view.innerWidth, found = [];
  for (const el of doc.body.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    const name = el.tagName + (el.id ? "#" + el.id : "") + (el.className ? "." + el.className : "");
    if (box.width && (box.right > width + 1 || box.left < -1)) found.push("outside " + name);
    if (el.clientWidth && el.scrollWidth > el.clientWidth + 1) found.push("overflows " + name);
  }
  const out = document.createElement("pre");
  out.id = "toolstop-layout";
  out.textContent = JSON.stringify({
    inner: width, scroll: doc.documentElement.scrollWidth, problems: found,
    images: [...doc.images].map(i => i.complete && i.naturalWidth > 0),
    scripts: doc.scripts.length,
  });
  document.body.append(out);
});
</script></body></html>"""


def layout(page: Path, profile: Path, size: tuple[int, int], screenshot: Path) -> dict[str, Any]:
    """How `page` lays out in headless Chromium in a viewport of `size` (width, height): the
    viewport's width, the document's scroll width, elements outside the viewport or wider than
    their box, whether each image loaded, and the page's scripts.

    The page is shown in an iframe of that size (headless Chromium's window is at least 500
    pixels wide, a phone's viewport is narrower), measured by a script of the probe page (the
    report itself has none). The screenshot shows the page in that frame (at most 2400 high).
    """
    import html
    import json
    import re

    assert CHROMIUM is not None
    width, height = size
    probe = page.with_name(f"probe-{width}x{height}.html")
    probe.write_text(_PROBE % (html.escape(page.resolve().as_uri()), width, height))
    base = [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "--allow-file-access-from-files",
            "--hide-scrollbars"]  # fmt: skip
    dom = subprocess.run(
        [*base, f"--window-size={max(width, 500)},{height}", "--virtual-time-budget=3000",
         "--dump-dom", probe.resolve().as_uri()],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout  # fmt: skip
    shot = page.with_name(f"shot-{width}.html")
    shot.write_text(
        _PROBE.split("<script>")[0] % (html.escape(page.resolve().as_uri()), width, 2400)
    )
    subprocess.run(
        [*base, f"--window-size={max(width, 500)},2400", f"--screenshot={screenshot}",
         shot.resolve().as_uri()],
        capture_output=True, timeout=600, check=True,
    )  # fmt: skip
    found = re.search(r'<pre id="toolstop-layout">(.*?)</pre>', dom, re.S)
    assert found is not None, "the layout probe did not run"
    return json.loads(html.unescape(found.group(1)))  # type: ignore[no-any-return]
