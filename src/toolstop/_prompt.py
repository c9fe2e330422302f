"""The hand-built graph's `prompt`: what `create_react_agent` takes, applied on every call."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.prompts import BasePromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig

from toolstop._lifecycle import RUN_KEY
from toolstop.errors import ToolstopConfigError

__all__ = ["Prompt", "PromptInput"]


def _state(state: Mapping[str, Any], messages: list[BaseMessage]) -> dict[str, Any]:
    """The state a prompt sees: the graph's, with the run's messages, without toolstop's run."""
    return {**{k: v for k, v in state.items() if k != RUN_KEY}, "messages": messages}


Prompt: TypeAlias = str | SystemMessage | Callable[..., Any] | Runnable[Any, Any] | None
"""What `build_react_graph(prompt=...)` takes, as LangGraph's `create_react_agent` does: a system
prompt (str or SystemMessage), a function of the state (`prompt(state)` or
`prompt(state, config)`, sync or async), or a Runnable invoked with the state (a
`ChatPromptTemplate` with a `("placeholder", "{messages}")`); each returns the model's input."""


class PromptInput:
    """The model's input on every call: the prompt applied to the state's messages.

    A Runnable gets the state with the run's messages (toolstop's repaired ones) and the node's
    config; a prompt template's variables that the state does not hold are filled from
    `config["configurable"]` (the customer-support tutorial's `{user_info}`).
    """

    def __init__(self, prompt: Prompt) -> None:
        self.prompt = prompt
        self.takes_config = False
        if prompt is None or isinstance(prompt, str | SystemMessage | Runnable):
            return
        if not callable(prompt):
            msg = (
                "prompt must be None, a str, a SystemMessage, a function of the state or a "
                f"Runnable (a ChatPromptTemplate), got {type(prompt).__name__}"
            )
            raise ToolstopConfigError(msg)
        try:
            parameters = inspect.signature(prompt).parameters
        except (TypeError, ValueError):  # a builtin without a signature: called with the state
            return
        self.takes_config = "config" in parameters

    def _input(
        self, state: Mapping[str, Any], messages: list[BaseMessage], config: RunnableConfig
    ) -> Any:
        given = _state(state, messages)
        if isinstance(self.prompt, BasePromptTemplate):
            configurable = config.get("configurable") or {}
            missing = [v for v in self.prompt.input_variables if v not in given]
            for variable in missing:
                if variable in configurable:
                    given[variable] = configurable[variable]
            unfilled = [v for v in missing if v not in given]
            if unfilled:
                msg = (
                    f"the prompt needs {unfilled}, which neither the state nor "
                    "config['configurable'] holds: pass them in config['configurable'], fill "
                    "them with prompt.partial(...), or give a function prompt(state, config) "
                    "that supplies them (a default when the config has none)"
                )
                raise ToolstopConfigError(msg)
        return given

    def _called(
        self, state: Mapping[str, Any], messages: list[BaseMessage], config: RunnableConfig
    ) -> Any:
        function: Any = self.prompt
        given = _state(state, messages)
        return function(given, config) if self.takes_config else function(given)

    def apply(
        self, state: Mapping[str, Any], messages: list[BaseMessage], config: RunnableConfig
    ) -> Any:
        """The model's input for `messages` (sync: an async function prompt is refused)."""
        prompt = self.prompt
        if prompt is None:
            return messages
        if isinstance(prompt, str):
            return [SystemMessage(content=prompt), *messages]
        if isinstance(prompt, SystemMessage):
            return [prompt, *messages]
        if isinstance(prompt, Runnable):
            return prompt.invoke(self._input(state, messages, config), config)
        if inspect.iscoroutinefunction(prompt):
            msg = "the prompt is an async function: run the graph with ainvoke or astream"
            raise ToolstopConfigError(msg)
        return self._called(state, messages, config)

    async def aapply(
        self, state: Mapping[str, Any], messages: list[BaseMessage], config: RunnableConfig
    ) -> Any:
        """The model's input for `messages`, in async code."""
        prompt = self.prompt
        if isinstance(prompt, Runnable):
            return await prompt.ainvoke(self._input(state, messages, config), config)
        if callable(prompt) and inspect.iscoroutinefunction(prompt):
            return await self._called(state, messages, config)
        return self.apply(state, messages, config)
