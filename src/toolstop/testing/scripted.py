"""`ScriptedChatModel`: a strict scripted chat model that fails loudly on any surprise."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolCall
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, PrivateAttr

from toolstop.testing._chunks import message_chunks, truncate_at_stop

__all__ = [
    "ModelCall",
    "ScriptExhaustedError",
    "ScriptMismatchError",
    "ScriptStep",
    "ScriptedChatModel",
    "approximate_usage",
    "call",
    "turn",
]

ScriptStep = AIMessage | str | ToolCall | Sequence[ToolCall]
"""One scripted answer: an AIMessage, a final text, one tool call, or a parallel turn of calls."""


def _seen(messages: Sequence[BaseMessage], *, last: int = 12) -> str:
    """The message types a call saw, for an error: the last `last` of them, with a count."""
    types = [m.type for m in messages]
    if len(types) <= last:
        return ", ".join(types)
    return f"{len(types)} messages, the last {last}: ... " + ", ".join(types[-last:])


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


class ScriptMismatchError(AssertionError):
    """The call forced a tool choice that the scripted answer contradicts.

    `tool_choice="none"` with a scripted tool call, `"any"` / `"required"` / `True` with a
    scripted text answer, or a named tool with a call to another one: a real model obeys the
    choice, so the script (or the code that set the choice) is wrong. The step is not consumed.

    Attributes:
        messages: What the call saw.
        tools: The tools it was offered.
        tool_choice: The choice the call was made with.
    """

    def __init__(
        self,
        message: str,
        *,
        messages: Sequence[BaseMessage],
        tools: Sequence[str],
        tool_choice: Any,
    ):
        super().__init__(message)
        self.messages = tuple(messages)
        self.tools = tuple(tools)
        self.tool_choice = tool_choice


def call(name: str, /, *, id: str | None = None, **args: Any) -> ToolCall:  # noqa: A002
    """A tool call for a script, e.g. `call("search", query="refunds")`.

    Raises:
        TypeError: `name` is not a non-empty str, or `id` is neither a str nor None.
    """
    if not isinstance(name, str) or not name:
        msg = (
            "call(name, **args) takes the tool's name as a str, then its arguments as keywords, "
            f'e.g. call("search", query="refunds"); got {_shown(name)}'
        )
        raise TypeError(msg)
    if id is not None and not isinstance(id, str):
        msg = f"call(name, id=..., **args) takes the call's id as a str or None, got {_shown(id)}"
        raise TypeError(msg)
    return ToolCall(name=name, args=args, id=id, type="tool_call")


def turn(*calls: ToolCall, content: str = "") -> AIMessage:
    """An AIMessage asking for `calls` (in this order) in one turn.

    Raises:
        TypeError: a call that is not a tool call as `call(...)` makes it (a dict with a str
            `name` and a dict `args`), or `content` that is not a str.
    """
    for index, tool_call in enumerate(calls, 1):
        if not (
            isinstance(tool_call, dict)
            and isinstance(tool_call.get("name"), str)
            and isinstance(tool_call.get("args"), dict)
        ):
            msg = (
                "turn(*calls) takes tool calls made by call(name, **args), e.g. "
                f'turn(call("search", query="refunds")); call {index} is {_shown(tool_call)}'
            )
            raise TypeError(msg)
    if not isinstance(content, str):
        msg = f"turn(*calls, content=...) takes the turn's text as a str, got {_shown(content)}"
        raise TypeError(msg)
    return AIMessage(content=content, tool_calls=list(calls))


def _shown(value: Any) -> str:
    """`value` for an error message: its type and the start of its repr."""
    text = repr(value)
    return f"a {type(value).__name__}: {text if len(text) <= 80 else text[:77] + '...'}"


@dataclass(frozen=True, kw_only=True)
class ModelCall:
    """One call the scripted model answered.

    Attributes:
        messages: The messages the model saw, in order.
        tools: Names of the tools offered on this call (empty: no tools bound).
        response: What it answered, as the model produced it: before streaming split it into
            chunks and before langchain-core gave it the run's message id.
        tool_choice: The call's `tool_choice` as given to `bind_tools` or `invoke`, or None.
        options: Every other keyword argument the call received (from `bind`, `bind_tools` or
            `invoke`: `parallel_tool_calls`, `model`, your own ...), plus `stop` when set;
            never `tools`, and never `ls_structured_output_format`, which langchain-core turns
            into callback metadata before the model sees the call.
        streamed: True when the answer went out as chunks (`stream`, `astream`,
            `astream_events`, LangGraph's `stream_mode="messages"`, or `streaming=True`).
    """

    messages: tuple[BaseMessage, ...]
    tools: tuple[str, ...]
    response: AIMessage
    tool_choice: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
    streamed: bool = False

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
    """`usage_metadata` for a simulated answer, from langchain-core's approximate counter.

    A malformed content block (a text block whose `text` is not a string, a block whose `type`
    is not one) is counted as empty text, where the counter would raise: the messages may be a
    tool's result or a recorded thread."""
    input_tokens = count_tokens_approximately([_countable(m) for m in messages])
    output_tokens = count_tokens_approximately([_countable(response)])
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


def _malformed(block: Any) -> bool:
    """A content block no provider sends: a `type` that is not a string, or a text block whose
    `text` is not a string (a text block without `text` is read as empty)."""
    if not isinstance(block, dict):
        return False
    kind = block.get("type", "")
    return not isinstance(kind, str) or (
        kind == "text" and not isinstance(block.get("text", ""), str)
    )


_EMPTY_TEXT = {"type": "text", "text": ""}


def _countable(message: BaseMessage) -> BaseMessage:
    """`message` with each malformed content block (`_malformed`) as an empty text block."""
    content = message.content
    if not isinstance(content, list) or not any(_malformed(b) for b in content):
        return message
    blocks = [dict(_EMPTY_TEXT) if _malformed(b) else b for b in content]
    return message.model_copy(update={"content": blocks})


def _as_message(step: ScriptStep, index: int, prefix: str = "call") -> AIMessage:
    if isinstance(step, AIMessage):
        message = step.model_copy(deep=True)
    elif isinstance(step, str):
        message = AIMessage(content=step)
    elif isinstance(step, dict):
        message = turn(step)
    elif isinstance(step, Sequence) and all(isinstance(c, dict) for c in step):
        message = turn(*step)
    else:
        msg = (
            f"ScriptedChatModel: script step {index} is not an AIMessage, a str or tool calls "
            f"made by call(...) or turn(...): {step!r}"
        )
        raise TypeError(msg)
    if isinstance(message.content, list):
        for position, block in enumerate(message.content):
            if _malformed(block):
                msg = (
                    f"script step {index}: content block {position} is {_shown(block)}; a text "
                    'block is {"type": "text", "text": str} (a provider sends nothing else)'
                )
                raise TypeError(msg)
    calls = []
    for position, tool_call in enumerate(message.tool_calls):
        try:  # a provider sends JSON: the arguments are what json.loads gives back
            args = json.loads(json.dumps(tool_call["args"]))
        except (TypeError, ValueError) as error:
            msg = (
                f"script step {index}: the arguments of tool call {tool_call['name']!r} are not "
                f"JSON ({error}); a provider only sends JSON arguments"
            )
            raise TypeError(msg) from None
        call_id = tool_call.get("id") or f"{prefix}_{index}_{position}"
        calls.append({**tool_call, "args": args, "id": call_id})
    message.tool_calls = calls  # type: ignore[assignment]
    return message


def _tool_names(tools: Any) -> tuple[str, ...]:
    """The names of tools as a call received them (OpenAI format after `bind_tools`)."""
    names = []
    for tool in tools or ():
        spec = tool if isinstance(tool, dict) else convert_to_openai_tool(tool)
        function = spec.get("function")
        names.append(str(function["name"] if isinstance(function, dict) else spec.get("name", "")))
    return tuple(names)


_ANY = ("any", "required")

_INSTANCES = itertools.count()
"""Numbers the scripted models of the process, for call ids unique to each (`next` is atomic)."""


def _normalise_choice(tool_choice: Any, tools: Sequence[str]) -> str | None:
    """`None` (the model decides), `"none"`, `"any"`, or the one tool the call must use.

    Raises:
        ValueError: a choice naming a tool that is not offered, `True` with several tools, or a
            value of a kind no provider takes.
    """
    name: Any = None
    if tool_choice is None or tool_choice is False or tool_choice == "auto":
        return None
    if tool_choice == "none":
        return "none"
    if tool_choice is True:
        if len(tools) != 1:
            msg = f"tool_choice=True needs exactly one tool, got {list(tools)}"
            raise ValueError(msg)
        return tools[0]
    if tool_choice in _ANY:
        return "any"
    if isinstance(tool_choice, str):
        name = tool_choice
    elif isinstance(tool_choice, dict):
        kind = tool_choice.get("type")
        if kind in ("auto", "none", "any"):
            return _normalise_choice(kind, tools)
        function = tool_choice.get("function")
        name = function.get("name") if isinstance(function, dict) else tool_choice.get("name")
    if not isinstance(name, str) or not name:
        msg = f"unsupported tool_choice {tool_choice!r}"
        raise ValueError(msg)
    if name not in tools:
        msg = f"tool_choice names {name!r}, but the tools offered are {list(tools)}"
        raise ValueError(msg)
    return name


def _contradiction(step: AIMessage, choice: str | None) -> str | None:
    """Why a scripted answer contradicts the forced choice (None: it does not)."""
    called = [c["name"] for c in step.tool_calls]
    if choice == "none" and called:
        return f"calls {called}, but the call allowed no tool (tool_choice 'none')"
    if choice == "any" and not called:
        return "answers without a tool call, but the call forced one (tool_choice 'any')"
    if choice not in (None, "none", "any") and (not called or set(called) != {choice}):
        return f"calls {called or 'no tool'}, but the call forced tool {choice!r}"
    return None


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script and fails loudly on any surprise.

    - Each call consumes the next step; a call past the end raises `ScriptExhaustedError`
      (an unexpected extra model call is a test failure, never a silent wrap-around).
    - `assert_complete()` fails when steps were left unconsumed.
    - Every call is recorded (`calls`): the messages seen, the tools offered, `tool_choice`,
      every other call option, the answer, and whether it was streamed.
    - `bind_tools(tools, tool_choice=..., **kwargs)` returns a `RunnableBinding`, like a
      provider's model: the tools (in OpenAI format), the choice and every other keyword travel
      with each call and are recorded; `with_structured_output` works through it and its
      `ls_structured_output_format` reaches the callbacks. A `tool_choice` naming a tool that is
      not offered raises `ValueError` at bind time; a scripted answer that contradicts the
      forced choice raises `ScriptMismatchError` at call time.
    - Streaming is real: `stream`, `astream`, `astream_events` and LangGraph's
      `stream_mode="messages"` get the answer as chunks, text a word at a time, each tool call
      as pieces of its JSON arguments, `usage_metadata` on the last chunk only (marked
      `chunk_position="last"` on langchain-core >= 1.0). The chunks add up to what `invoke`
      returns for the same step, except the message id that langchain-core gives each run and
      an AIMessage `name`, which langchain-core's chunk merge drops.
    - Every answer carries `usage_metadata` and `response_metadata["model_name"]` (the call's
      `model` option, else `model`). The usage is the scripted AIMessage's own when it has one
      (a recorded answer keeps the provider's figures), else langchain-core's approximate
      token counter's.
    - Tool calls without an id get one unique to the model instance,
      `call_m<instance>_<step>_<position>` (`call_id(step, position)` gives it), so the models
      of a multi-level agent in one thread never share a call id; `id_prefix="call"` gives
      the plain `call_<step>_<position>` of one model's transcript (goldens); tool-call
      arguments must be JSON and a text block's `text` a string (a provider sends nothing
      else), checked when the script is built (`TypeError`). A malformed block in a message the
      model is sent (a tool's result) is counted as empty text in the usage estimate.
    - Unknown constructor options are rejected (pydantic `ValidationError`), so a typo cannot
      pass silently.

    Options (besides the script):
        model: The name reported as `ls_model_name` in traces and as `model_name` in each
            answer's `response_metadata` (default `"scripted"`).
        streaming: True makes `invoke` answer through the stream too, as for a provider model.
        stop: Stop sequences: a text answer is cut before the first one, as a provider cuts it
            (a `stop` given to the call wins).
        temperature: Reported as `ls_temperature` in traces; never changes an answer.
        max_tokens: Reported as `ls_max_tokens` in traces; never cuts an answer.
        id_prefix: What the ids of scripted tool calls without one start with (default
            `call_m<n>`, `n` numbering the instances of the process).

    Deliberately not handled: it does not check that the model "would" call the tools it is
    scripted to call; a script may call a tool that is not bound (the tool node then reports it).
    It has no network, so it takes no `api_key`, `timeout` or `max_retries`.

    Example:
        ```pycon
        >>> model = ScriptedChatModel([call("search", query="refunds")])
        >>> [c["name"] for c in model.invoke("how do refunds work?").tool_calls]
        ['search']
        >>> model.assert_complete()

        ```
    """

    model_config = ConfigDict(extra="forbid")

    model: str = "scripted"
    streaming: bool = False
    stop: list[str] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    _script: _Script = PrivateAttr()
    _id_prefix: str = PrivateAttr()

    def __init__(
        self, script: Sequence[ScriptStep], *, id_prefix: str | None = None, **kwargs: Any
    ) -> None:
        if id_prefix is not None and (not isinstance(id_prefix, str) or not id_prefix):
            msg = f"ScriptedChatModel(id_prefix=...) takes a non-empty str, got {_shown(id_prefix)}"
            raise TypeError(msg)
        if isinstance(script, str | bytes | AIMessage | dict) or not isinstance(script, Sequence):
            msg = (
                "ScriptedChatModel(script) takes a list of steps (answers as str or AIMessage, "
                f'tool calls as call(...) or turn(...)), e.g. ["hi"]; got {_shown(script)}'
            )
            raise TypeError(msg)
        super().__init__(**kwargs)
        prefix = id_prefix if id_prefix is not None else f"call_m{next(_INSTANCES)}"
        self._id_prefix = prefix
        self._script = _Script(
            steps=[_as_message(step, i, prefix) for i, step in enumerate(script)]
        )

    @property
    def _llm_type(self) -> str:
        return "toolstop-scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model}

    @property
    def calls(self) -> list[ModelCall]:
        """Every call answered so far, in order."""
        return list(self._script.calls)

    def call_id(self, step: int, position: int = 0) -> str:
        """The id of tool call `position` of script step `step`, when the script gave none."""
        return f"{self._id_prefix}_{step}_{position}"

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
        tool_choice: str | dict[str, Any] | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """A `RunnableBinding` offering `tools` (OpenAI format) with `tool_choice` and `kwargs`.

        Raises:
            ValueError: `tool_choice` names a tool that is not in `tools`, is `True` with
                several tools, or is of a kind no provider takes.
        """
        formatted = [convert_to_openai_tool(t) for t in tools]
        _normalise_choice(tool_choice, _tool_names(formatted))
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "toolstop"
        if "ls_stop" not in params and self.stop:
            params["ls_stop"] = self.stop
        return params

    def _answer(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        kwargs: dict[str, Any],
        *,
        streamed: bool,
    ) -> AIMessage:
        """Consume the next step for this call, record the call, and return the answer."""
        tools = _tool_names(kwargs.get("tools"))
        tool_choice = kwargs.get("tool_choice")
        options = {k: v for k, v in kwargs.items() if k not in ("tools", "tool_choice")}
        stop = stop if stop is not None else self.stop
        if stop is not None:
            options["stop"] = list(stop)
        choice = _normalise_choice(tool_choice, tools)
        script = self._script
        with script.lock:
            if script.position >= len(script.steps):
                seen = _seen(messages)
                msg = (
                    f"unexpected model call #{script.position + 1}: the script has "
                    f"{len(script.steps)} steps (messages seen: {seen})"
                )
                raise ScriptExhaustedError(msg, messages=messages, tools=tools)
            step = script.steps[script.position]
            problem = _contradiction(step, choice)
            if problem is not None:
                msg = f"script step {script.position} {problem}"
                raise ScriptMismatchError(
                    msg, messages=messages, tools=tools, tool_choice=tool_choice
                )
            response = truncate_at_stop(step.model_copy(deep=True), stop)
            script.position += 1
            model_name = options.get("model") or self.model
            response.response_metadata = {"model_name": model_name, **response.response_metadata}
            if response.usage_metadata is None:  # a recorded answer keeps its own figures
                response.usage_metadata = approximate_usage(messages, response)
            script.calls.append(
                ModelCall(
                    messages=tuple(messages),
                    tools=tools,
                    response=response,
                    tool_choice=tool_choice,
                    options=options,
                    streamed=streamed,
                )
            )
        return response.model_copy(deep=True)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        response = self._answer(messages, stop, kwargs, streamed=False)
        return ChatResult(generations=[ChatGeneration(message=response)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        response = self._answer(messages, stop, kwargs, streamed=True)
        for chunk in message_chunks(response):
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        response = self._answer(messages, stop, kwargs, streamed=True)
        for chunk in message_chunks(response):
            yield ChatGenerationChunk(message=chunk)
            await asyncio.sleep(0)  # let a consumer see each chunk before the next
