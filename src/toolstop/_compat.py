"""Which installed LangChain / LangGraph the routers can run on, said in one sentence.

`StopOnArtifact` needs langchain 1.2.9: its `wrap_model_call` updates the run's bookkeeping in
state on every turn through `ExtendedModelResponse`, which langchain added in 1.2.9; before it a
`wrap_model_call` could answer but not update state. Checked by the feature, not by a version
number, so a backport or a pre-release behaves as what it contains.

A fresh install of langgraph 1.0.x resolves `langgraph-prebuilt` 1.0.13, whose `ToolNode`
imports `ExecutionInfo` from langgraph 1.1; `langgraph-prebuilt<1.0.9` is the working pair.
"""

from __future__ import annotations

import importlib
import importlib.metadata

__all__ = [
    "MIDDLEWARE_MIN_LANGCHAIN",
    "has_agents",
    "middleware_import_error",
    "middleware_unavailable",
    "prebuilt_mismatch",
]

MIDDLEWARE_MIN_LANGCHAIN = "1.2.9"
"""The first langchain `StopOnArtifact` runs on (`ExtendedModelResponse`)."""

_NEED = f"StopOnArtifact needs langchain>={MIDDLEWARE_MIN_LANGCHAIN} (create_agent middleware)"
_OTHER_ROUTERS = "build_react_graph and toolstop.legacy.create_react_agent run without it"


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def prebuilt_mismatch(error: ImportError) -> str:
    """The sentence for an `ImportError` raised by `langgraph.prebuilt` on import.

    Args:
        error: The error importing `langgraph.prebuilt` raised.

    Returns:
        What is installed, why it fails, and the pin that fixes it when the cause is the known
        langgraph 1.0 / langgraph-prebuilt >= 1.0.9 pair; otherwise the error, unexplained.
    """
    langgraph, prebuilt = _installed("langgraph"), _installed("langgraph-prebuilt")
    if "ExecutionInfo" in str(error):
        return (
            f"langgraph-prebuilt {prebuilt} does not work with langgraph {langgraph}: its "
            f"ToolNode imports ExecutionInfo, which langgraph adds in 1.1 ({error}). pip "
            "resolves this pair for langgraph 1.0.x; pin it with "
            "pip install 'langgraph-prebuilt<1.0.9', or upgrade langgraph to 1.1 or newer"
        )
    return (
        f"importing langgraph.prebuilt failed on langgraph {langgraph}, langgraph-prebuilt "
        f"{prebuilt}: {error}"
    )


def middleware_unavailable() -> str | None:
    """Why `StopOnArtifact` cannot run on the installed versions; `None` when it can.

    Returns:
        `None` when langchain's `create_agent` middleware with `ExtendedModelResponse` imports;
        otherwise one sentence naming the installed version, the minimum (1.2.9), why, and what
        to do. Used by the import guard of `toolstop.middleware`, by the test kit and by
        `toolstop check`, which skips the middleware router with this sentence.
    """
    langchain = _installed("langchain")
    if langchain is None:
        return f"{_NEED}, which is not installed: pip install 'toolstop[agents]' ({_OTHER_ROUTERS})"
    try:
        types = importlib.import_module("langchain.agents.middleware.types")
    except ImportError as error:
        return (
            f"{_NEED}; langchain {langchain} is installed, and importing its create_agent "
            f"middleware failed ({error}): pip install 'toolstop[agents]' ({_OTHER_ROUTERS})"
        )
    if not hasattr(types, "ExtendedModelResponse"):
        return (
            f"{_NEED}; langchain {langchain} is installed. StopOnArtifact updates the agent's "
            "state from wrap_model_call on every turn through ExtendedModelResponse, which "
            f"langchain adds in {MIDDLEWARE_MIN_LANGCHAIN}: upgrade with "
            f"pip install 'toolstop[agents]' ({_OTHER_ROUTERS})"
        )
    return None


def middleware_import_error(error: ImportError) -> str:
    """The message for the `ImportError` that importing `toolstop.middleware` raises.

    Args:
        error: The error importing langchain's middleware raised.

    Returns:
        `middleware_unavailable()`'s sentence, or, when the installed versions look fine (a
        module blocked or half-installed), the minimum version, the extra and the error.
    """
    return middleware_unavailable() or (
        f"{_NEED}: pip install 'toolstop[agents]' (importing it failed: {error})"
    )


def has_agents() -> bool:
    """True when `StopOnArtifact` can run: langchain>=1.2.9 (the `agents` extra) is installed.

    On older langchain (1.0.0 to 1.2.8) `create_agent` exists but `StopOnArtifact` does not
    run; `middleware_unavailable()` says why in a sentence.
    """
    return middleware_unavailable() is None
