"""`create_react_agent`: a drop-in for langgraph 0.6's prebuilt agent, with per-call stops.

Swap one import and keep your tools:

    # from langgraph.prebuilt import create_react_agent
    from toolstop.legacy import create_react_agent
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode

from toolstop._prompt import Prompt
from toolstop.errors import ToolstopConfigError
from toolstop.graph import ReactGraph, compile_react_graph
from toolstop.policy import StopPolicy

__all__ = ["create_react_agent"]

_UNSUPPORTED = (
    "response_format",
    "pre_model_hook",
    "post_model_hook",
    "state_schema",
    "context_schema",
    "config_schema",
)


def _resolve_model(model: BaseChatModel | str) -> BaseChatModel:
    if not isinstance(model, str):
        return model
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as error:
        msg = (
            f"a model given by name ({model!r}) needs langchain's init_chat_model: "
            "pip install 'toolstop[agents]', or pass a chat model instance"
        )
        raise ToolstopConfigError(msg) from error
    return init_chat_model(model)


def create_react_agent(
    model: BaseChatModel | str,
    tools: Sequence[BaseTool | Callable[..., Any]] | ToolNode | Runnable[Any, Any],
    *,
    prompt: Prompt = None,
    checkpointer: Any = None,
    store: Any = None,
    interrupt_before: list[str] | None = None,
    interrupt_after: list[str] | None = None,
    debug: bool = False,
    version: str = "v2",
    name: str | None = None,
    policy: StopPolicy | None = None,
    **unsupported: Any,
) -> ReactGraph:
    """Build a ReAct agent like `langgraph.prebuilt.create_react_agent`, stopping per call.

    The common subset of langgraph 0.6's signature is accepted with the same meaning; the graph
    is toolstop's hand-built one (nodes `agent`, `tools`, `finalize`, + `polish`), so the run
    ends on an AIMessage, never on a ToolMessage. `return_direct` is refused: the artifact decides.

    Args:
        model: A chat model, or a `"provider:name"` string (needs `toolstop[agents]`).
        tools: Tools or callables, or a `ToolNode`, also wrapped by `with_fallbacks`,
            `with_config` or `with_retry` (used as it is, with its error handling).
        prompt: A system prompt (str or SystemMessage), a function of the state
            (`prompt(state)` or `prompt(state, config)`), or a Runnable invoked with the state
            (see `build_react_graph`).
        checkpointer: Any LangGraph checkpointer.
        store: A LangGraph store, passed to `compile`.
        interrupt_before: Node names to interrupt before.
        interrupt_after: Node names to interrupt after.
        debug: LangGraph's debug flag.
        version: Accepted for compatibility; tool calls of a turn always run in one `tools` step
            (langgraph's "v1" layout), which the turn-wide decision needs.
        name: The agent's name: the graph's name (default `"LangGraph"`) and, when given, the
            `name` of every AIMessage it adds (model answers and relays), like LangGraph's own.
        policy: toolstop's `StopPolicy`.
        **unsupported: `response_format`, `pre_model_hook`, `post_model_hook`, `state_schema`,
            `context_schema` and `config_schema` are refused with a clear error.

    Raises:
        ToolstopConfigError: for an unsupported argument, a prompt of a wrong type, or a tool
            with `return_direct=True`.
    """
    given = [key for key, value in unsupported.items() if value is not None]
    if given:
        known = [key for key in given if key in _UNSUPPORTED]
        unknown = [key for key in given if key not in _UNSUPPORTED]
        if unknown:
            msg = f"create_react_agent() got unexpected keyword arguments {unknown}"
            raise TypeError(msg)
        msg = (
            f"toolstop.legacy.create_react_agent does not support {known}: use langgraph's own "
            "create_react_agent for them, or create_agent with toolstop.StopOnArtifact"
        )
        raise ToolstopConfigError(msg)
    if version not in ("v1", "v2"):
        msg = f"version must be 'v1' or 'v2', got {version!r}"
        raise ToolstopConfigError(msg)
    return compile_react_graph(
        _resolve_model(model),
        tools,
        policy=policy,
        prompt=prompt,
        compile_kwargs={
            "checkpointer": checkpointer,
            "store": store,
            "interrupt_before": interrupt_before,
            "interrupt_after": interrupt_after,
            "debug": debug,
            "name": name or "LangGraph",
        },
        agent_name=name,
        where="create_react_agent",
    )
