"""What the CLI commands share: a progress indicator on stderr, and the installed versions."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Callable

__all__ = ["progress", "versions"]


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
