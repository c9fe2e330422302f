"""The same tools and the same `StopPolicy` in the OpenAI Agents SDK.

The SDK's own options are static (`stop_on_first_tool`, `StopAtTools`). Here a function tool
returns `(content, artifact)` like a LangChain `content_and_artifact` tool; `artifact_tool`
hands the model only the content (the SDK stringifies a `ToolOutput` to its content), and
`stop_on_artifact(policy)` is the agent's `tool_use_behavior`: it builds the turn as messages and
asks the same `decide` the LangGraph routers use.

    agent = Agent(name="support", tools=[artifact_tool(search)],
                  tool_use_behavior=stop_on_artifact(StopPolicy()))

Deliberately not handled: `mode="polish"` and `on_budget="model"` (a `tool_use_behavior` cannot
make a model call; both are refused) and the step budget (the SDK's own `max_turns` raises
instead).
Needs the `openai-agents` extra.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

try:
    from agents import FunctionTool, RunContextWrapper, function_tool
    from agents.agent import ToolsToFinalOutputResult
    from agents.tool import FunctionToolResult, default_tool_error_function
except ImportError as error:  # pragma: no cover - depends on the environment
    msg = (
        "toolstop.openai_agents needs the OpenAI Agents SDK: pip install 'toolstop[openai-agents]'"
    )
    raise ImportError(msg) from error

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop._convert_function import converted_function
from toolstop.convert import Answer, OutcomeRule
from toolstop.decision import content_text, decide
from toolstop.errors import ToolstopConfigError
from toolstop.policy import StopPolicy, resolve_policy
from toolstop.record import Savings, StopRecord, fold_turn, new_record, stopped

__all__ = ["FailedText", "ToolOutput", "artifact_tool", "convert", "stop_on_artifact"]


@dataclass(frozen=True)
class ToolOutput:
    """A tool result with two channels: `str()` is the content the model sees; `artifact` is not."""

    content: str
    artifact: Any = None

    def __str__(self) -> str:
        return self.content


class FailedText(str):
    """The text the SDK gives the model when a tool raised, marked as a tool failure.

    `stop_on_artifact` reads it as an error result (like an error `ToolMessage`): it goes back to
    the model and counts against the retry budget.
    """

    __slots__ = ()


def _marking(failure: Any) -> Callable[..., Any]:
    """The SDK's failure function (or the user's), its text marked as a `FailedText`."""
    base = failure if callable(failure) else default_tool_error_function

    async def on_failure(context: RunContextWrapper[Any], error: Exception) -> str:
        text = base(context, error)
        if inspect.isawaitable(text):
            text = await text
        return FailedText(text)

    return on_failure


def artifact_tool(function: Callable[..., Any], **options: Any) -> FunctionTool:
    """An SDK function tool from a function that returns `(content, artifact)`.

    A tool that raises is answered as the SDK answers it (its `failure_error_function`, or the
    SDK's default text), and `stop_on_artifact` counts it as a tool failure against the retry
    budget. With `failure_error_function=None` the exception propagates, as in the SDK.

    Args:
        function: Sync or async; returns `(content, artifact)` (anything else is passed on as
            content with no artifact, so routing goes back to the model).
        **options: Passed to the SDK's `function_tool` (name_override, ...).
    """
    failure = options.get("failure_error_function", default_tool_error_function)
    options["failure_error_function"] = None if failure is None else _marking(failure)

    def wrap(result: Any) -> ToolOutput:
        if isinstance(result, tuple) and len(result) == 2:
            content = "" if result[0] is None else str(result[0])  # None: nothing to relay
            return ToolOutput(content=content, artifact=result[1])
        return ToolOutput(content=str(result))

    if _is_async(function):

        @functools.wraps(function)
        async def arun(*args: Any, **kwargs: Any) -> ToolOutput:
            return wrap(await function(*args, **kwargs))

        return function_tool(arun, **options)

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> ToolOutput:
        return wrap(function(*args, **kwargs))

    return function_tool(run, **options)


def convert(
    function: Callable[..., Any],
    *,
    answer: Answer | None = None,
    outcome: OutcomeRule | None = None,
    **options: Any,
) -> FunctionTool:
    """An SDK function tool from a plain function, signalling per call (`toolstop.convert`).

    A result signals `completed`; an exception (its text as `tool_error_text` gives it) or a
    result that reads as an error signals `transient`; `outcome=` decides instead when given;
    `answer=` (a template over the JSON result, or a function `(result, context)`) is what the
    user sees on a stop. `context` is empty on the SDK (no earlier results are read).

    Args:
        function: Sync or async, returning its result (a string, or JSON data sent as JSON).
        answer: See `toolstop.convert`.
        outcome: See `toolstop.convert`.
        **options: Passed to `artifact_tool` and the SDK's `function_tool` (name_override, ...).
    """
    name = str(options.get("name_override") or getattr(function, "__name__", "tool"))
    converted = converted_function(
        function,
        name=name,
        answer=answer,
        outcome=outcome,
        returning=lambda content, artifact: (content, artifact),
    )
    return artifact_tool(converted, **options)


def _is_async(function: Callable[..., Any]) -> bool:
    import inspect

    return inspect.iscoroutinefunction(function)


def _as_messages(results: list[FunctionToolResult]) -> list[BaseMessage]:
    """The turn as LangChain messages, in the order the model called the tools."""
    calls, answers = [], []
    for index, result in enumerate(results):
        raw = getattr(result.run_item, "raw_item", None)
        call_id = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
        call_id = str(call_id or f"call-{index}")
        output = result.output
        artifact = output.artifact if isinstance(output, ToolOutput) else None
        arguments = (
            raw.get("arguments") if isinstance(raw, dict) else getattr(raw, "arguments", None)
        )
        calls.append(
            {
                "name": result.tool.name,
                "args": _arguments(arguments),
                "id": call_id,
                "type": "tool_call",
            }
        )
        answers.append(
            ToolMessage(
                content=str(output),
                artifact=artifact,
                tool_call_id=call_id,
                name=result.tool.name,
                status="error" if isinstance(output, FailedText) else "success",
            )
        )
    return [AIMessage(content="", tool_calls=calls), *answers]


def _arguments(text: Any) -> dict[str, Any]:
    """A call's arguments as the SDK got them from the model (JSON text); `{}` when unreadable.

    Used only to tell a call asked again (same tool, same arguments) from a new one."""
    import json

    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {"raw": text}
    return value if isinstance(value, dict) else {"value": value}


class _Behaviour:
    """The `tool_use_behavior` callable; keeps each run's record on its context."""

    def __init__(self, policy: StopPolicy) -> None:
        if policy.mode == "polish":
            msg = (
                "stop_on_artifact does not support mode='polish': "
                "a tool_use_behavior cannot make the narrating model call"
            )
            raise ToolstopConfigError(msg)
        if policy.on_budget == "model":
            msg = (
                "stop_on_artifact does not support on_budget='model': "
                "a tool_use_behavior cannot make the closing model call"
            )
            raise ToolstopConfigError(msg)
        self.policy = policy
        self.records: weakref.WeakKeyDictionary[Any, StopRecord] = weakref.WeakKeyDictionary()
        # The SDK's usage when the run first would have stopped (never mode): what came after
        # is what hard mode would have saved.
        self.marks: weakref.WeakKeyDictionary[Any, Savings] = weakref.WeakKeyDictionary()
        # The run's tool turns so far, so a stop shows every completed result of the run.
        self.turns: weakref.WeakKeyDictionary[Any, list[BaseMessage]] = weakref.WeakKeyDictionary()

    def __call__(
        self, context: RunContextWrapper[Any], results: list[FunctionToolResult]
    ) -> ToolsToFinalOutputResult:
        record = self.records.get(context) or new_record(self.policy)
        messages = [*self.turns.get(context, ()), *_as_messages(results)]
        decision = decide(messages, self.policy, transient_count=record["transient_retries"])
        would_stop = record["would_stop"]
        record = fold_turn(record, decision)
        if decision.stop:
            record = stopped(record, decision)
        if would_stop is None and record["would_stop"] is not None:
            self.marks[context] = _usage(context)
        self.records[context] = record
        if not decision.stop:
            self.turns[context] = messages
            return ToolsToFinalOutputResult(is_final_output=False)
        self.turns.pop(context, None)
        relay = (
            decision.relay
            if isinstance(decision.relay, str)
            else content_text(decision.relay or "")
        )
        return ToolsToFinalOutputResult(is_final_output=True, final_output=relay)

    def record(self, context: RunContextWrapper[Any]) -> StopRecord:
        """The stop record of the run that `context` belongs to.

        Rule, tool turns and signals are toolstop's; model calls and tokens are the SDK's own
        count for the run (`context.usage`), read when the record is asked for. In never mode
        `would_save` is the SDK's count since the tool turn that would have stopped the run.
        """
        record = self.records.get(context) or new_record(self.policy)
        if getattr(context, "usage", None) is None:
            return _sdk_counted(record)
        now = _usage(context)
        mark = self.marks.get(context)
        if mark is not None:
            saved = Savings(
                model_calls=now["model_calls"] - mark["model_calls"],
                input_tokens=now["input_tokens"] - mark["input_tokens"],
                output_tokens=now["output_tokens"] - mark["output_tokens"],
            )
            record = StopRecord(**{**record, "would_save": saved})
        return StopRecord(**{**_sdk_counted(record), **now})  # type: ignore[typeddict-item]


def _usage(context: Any) -> Savings:
    """The SDK's usage of the run so far: requests (model calls) and tokens."""
    usage = getattr(context, "usage", None)
    if usage is None:
        return Savings(model_calls=0, input_tokens=0, output_tokens=0)
    return Savings(
        model_calls=int(usage.requests),
        input_tokens=int(usage.input_tokens),
        output_tokens=int(usage.output_tokens),
    )


def stop_on_artifact(policy: StopPolicy | None = None) -> _Behaviour:
    """A `tool_use_behavior` for `Agent`: stop per call, from the tools' artifacts.

    Success and fatal stop with the tool's text as the final output (after the run's earlier
    completed results, as on LangGraph; the model's text between turns is not visible here, so
    every earlier completed result of the run is shown); transient goes back to the model;
    parallel calls follow `policy.parallel`; the retry budget ends with its user-safe text.
    `behaviour.record(result.context_wrapper)` returns the run's stop record, with model calls
    and tokens from the SDK's `result.context_wrapper.usage`.

    Raises:
        ToolstopConfigError: for `mode="polish"`.
        TypeError: when `policy` is not a `StopPolicy` (or None).
    """
    return _Behaviour(resolve_policy(policy, "stop_on_artifact", per_run=False))


def _sdk_counted(record: StopRecord) -> StopRecord:
    """`record` without `after_first` and `asked`: model calls are the SDK's own count, not
    toolstop's per call, so they are unknown here (absent, not empty)."""
    kept = record.copy()
    kept.pop("after_first", None)
    kept.pop("asked", None)
    return kept
