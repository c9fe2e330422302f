"""What the CLI commands share: progress on stderr, versions, and writing their outputs.

One way a command writes its JSON, chart and HTML page into an output folder, and one way it
shows an error (passwords masked, controls escaped)."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Callable
from pathlib import Path

from toolstop._printable import printable
from toolstop._redact import mask_sources

__all__ = ["chart_or_none", "failure", "progress", "shown", "versions", "write_outputs"]


def shown(text: str, *sources: str | None) -> str:
    """`text` safe for a terminal: the passwords of `sources` masked, controls escaped.

    `sources` are the `--db`, `--from`, `--log` or `--base-url` values `text` may quote
    (`mask_sources`)."""
    return printable(mask_sources(text, *sources))


def failure(error: BaseException, *sources: str | None) -> str:
    """`<type>: <first line>` of an unexpected error, safe to print (see `shown`).

    Never raises: an exception whose `str()` fails is shown by its type name."""
    name = type(error).__name__
    try:
        lines = str(error).strip().splitlines()
    except Exception:
        return name
    return f"{name}: {shown(lines[0], *sources)}" if lines else name


def progress(
    label: str, total: int, enabled: bool
) -> tuple[Callable[[], None], Callable[[], None]]:
    """`(advance, stop)` for a progress bar on stderr: rich's when installed, a counter otherwise.

    Disabled (no output at all) for `--json` or when stderr is not a terminal.
    """
    if not enabled:
        return (lambda: None), (lambda: None)
    try:
        from rich.progress import Progress
    except ImportError:
        done = [0]

        def plain() -> None:
            done[0] += 1
            print(f"\r{label}: {done[0]}/{total}", end="", file=sys.stderr, flush=True)

        return plain, lambda: print(file=sys.stderr)
    bar = Progress(transient=True)
    task = bar.add_task(label, total=total)
    bar.start()
    return (lambda: bar.advance(task)), bar.stop


def versions() -> dict[str, str]:
    """The versions of toolstop and the LangChain stack installed here."""
    found = {}
    for name in ("toolstop", "langgraph", "langchain-core", "langchain"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def chart_or_none(render: Callable[[Path], None], path: Path) -> Path | None:
    """`render(path)` and `path`; None, with a line on stderr, when matplotlib is missing."""
    try:
        render(path)
    except ImportError:
        print(
            "chart skipped: matplotlib is missing (pip install 'toolstop[bench]')", file=sys.stderr
        )
        return None
    return path


def write_outputs(
    command: str,
    folder: Path,
    *,
    json_name: str,
    write_json: Callable[[Path], None],
    render_chart: Callable[[Path], None],
    render_html: Callable[[Path | None, Path], None],
) -> list[Path] | None:
    """Write `json_name`, `chart.png` (skipped without matplotlib) and `report.html` into `folder`.

    Returns:
        The files written (JSON, HTML, then the chart when there is one); None, after one line on
        stderr naming `command` and the folder, when the folder cannot be written.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        chart = chart_or_none(render_chart, folder / "chart.png")
        write_json(folder / json_name)
        render_html(chart, folder / "report.html")
    except OSError as error:
        print(f"{command}: cannot write to {folder}: {error.strerror}", file=sys.stderr)
        return None
    return [folder / json_name, folder / "report.html", *([chart] if chart else [])]
