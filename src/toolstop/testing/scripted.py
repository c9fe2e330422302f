"""`ScriptedChatModel`: a strict scripted chat model that fails loudly on any surprise."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolCall
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

__all__ = [
    "ModelCall",
    "ScriptExhaustedError",
    "ScriptStep",
    "ScriptedChatModel",
    "approximate_usage",
    "call",
    "turn",
]

ScriptStep = AIMessage | str | ToolCall | Sequence[ToolCall]
"""One scripted answer: an AIMessage, a final text, one tool call, or a parallel turn of calls."""


class ScriptExhaustedError(AssertionError):
    """The model was called more often than its script allows (an unexpected extra model call).

    Attributes:
        messages: What the unexpected call saw.
        tools: The tools it was offered.
    """

    def __init__(self, message: str, *, messages: Sequence[BaseMessage], tools: Sequence[str]):
        super().__init__(message)
        self.messages = tuple(messages)
        self.tools = tuple(tools)


def call(name: str, /, *, id: str | None = None, **args: Any) -> ToolCall:  # noqa: A002
    """A tool call for a script, e.g. `call("search", query="refunds")`."""
    return ToolCall(name=name, args=args, id=id, type="tool_call")


def turn(*calls: ToolCall, content: str = "") -> AIMessage:
    """An AIMessage asking for `calls` (in this order) in one turn."""
    return AIMessage(content=content, tool_calls=list(calls))


@dataclass(frozen=True, kw_only=True)
class ModelCall:
    """One call the scripted model answered.

    Attributes:
        messages: The messages the model saw, in order.
        tools: Names of the tools offered on this call (empty: no tools bound).
        response: What it answered.
    """

    messages: tuple[BaseMessage, ...]
    tools: tuple[str, ...]
    response: AIMessage

    @property
    def message_types(self) -> tuple[str, ...]:
        """The `type` of each message seen (`system`, `human`, `ai`, `tool`)."""
        return tuple(m.type for m in self.messages)


@dataclass
class _Script:
    """The state every bound copy of one model shares: the steps, the position, the log."""

    steps: list[AIMessage]
    position: int = 0
    calls: list[ModelCall] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def approximate_usage(messages: Sequence[BaseMessage], response: AIMessage) -> UsageMetadata:
    """`usage_metadata` for a simulated answer, from langchain-core's approximate counter."""
    input_tokens = count_tokens_approximately(messages)
    output_tokens = count_tokens_approximately([response])
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


def _as_message(step: ScriptStep, index: int) -> AIMessage:
    if isinstance(step, AIMessage):
        message = step.model_copy(deep=True)
    elif isinstance(step, str):
        message = AIMessage(content=step)
    elif isinstance(step, dict):
        message = turn(step)
    elif isinstance(step, Sequence) and all(isinstance(c, dict) for c in step):
        message = turn(*step)
    else:
        msg = f"script step {index} is not an AIMessage, a str or tool calls: {step!r}"
        raise TypeError(msg)
    calls = []
    for position, tool_call in enumerate(message.tool_calls):
        calls.append({**tool_call, "id": tool_call.get("id") or f"call_{index}_{position}"})
    message.tool_calls = calls  # type: ignore[assignment]
    return message


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script and fails loudly on any surprise.

    - Each call consumes the next step; a call past the end raises `ScriptExhaustedError`
      (an unexpected extra model call is a test failure, never a silent wrap-around).
    - `assert_complete()` fails when steps were left unconsumed.
    - `bind_tools` returns a copy that shares the script and the log, and remembers which tools
      were offered, so a test can prove a call was made with no tools (polish mode).
    - Every answer carries `usage_metadata` from langchain-core's approximate token counter.
    - Tool calls without an id get a deterministic one (`call_<step>_<position>`).

    Deliberately not handled: it does not check that the model "would" call the tools it is
    scripted to call; a script may call a tool that is not bound (the tool node then reports it).

    Example:
        >>> model = ScriptedChatModel([call("search", query="refunds")])
        >>> model.invoke("how do refunds work?").tool_calls[0]["name"]
        'search'
        >>> model.assert_complete()
    """

    bound_tools: tuple[str, ...] = ()
    _script: _Script = PrivateAttr()

    def __init__(self, script: Sequence[ScriptStep], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._script = _Script(steps=[_as_message(step, i) for i, step in enumerate(script)])

    @property
    def _llm_type(self) -> str:
        return "toolstop-scripted"

    @property
    def calls(self) -> list[ModelCall]:
        """Every call answered so far, in order (shared by all bound copies)."""
        return list(self._script.calls)

    @property
    def remaining(self) -> int:
        """Steps not consumed yet."""
        return len(self._script.steps) - self._script.position

    def assert_complete(self) -> None:
        """Fail when the script has steps that were never used."""
        if self.remaining:
            used = self._script.position
            msg = f"scripted model used {used} of {len(self._script.steps)} steps"
            raise AssertionError(msg)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """A copy offering `tools`, sharing this model's script and call log."""
        names = tuple(convert_to_openai_tool(t)["function"]["name"] for t in tools)
        return self.model_copy(update={"bound_tools": names})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        script = self._script
        with script.lock:
            if script.position >= len(script.steps):
                seen = ", ".join(m.type for m in messages)
                msg = (
                    f"unexpected model call #{script.position + 1}: the script has "
                    f"{len(script.steps)} steps (messages seen: {seen})"
                )
                raise ScriptExhaustedError(msg, messages=messages, tools=self.bound_tools)
            response = script.steps[script.position].model_copy(deep=True)
            script.position += 1
            response.usage_metadata = approximate_usage(messages, response)
            script.calls.append(
                ModelCall(messages=tuple(messages), tools=self.bound_tools, response=response)
            )
        return ChatResult(generations=[ChatGeneration(message=response)])
