"""`convert`: an existing tool, unchanged, as one that signals per call.

The advisor (`toolstop report`) says which tools to convert; `convert(tool)` is the one line that
does it. The converted tool has the tool's name, description and arguments and runs the tool
itself; only its result is read: a successful result signals `completed` (the loop can end on
it), an exception or an error-shaped result signals `transient` (back to the model, against the
retry budget). `answer=` gives the user a text of its own instead of the raw result.
"""

from __future__ import annotations

import json
import logging
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, cast

from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_tool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import InjectedState
from pydantic import BaseModel, create_model

from toolstop._secrets import mask_secrets
from toolstop.decision import is_answer
from toolstop.errors import ToolstopConfigError
from toolstop.levels import SUBAGENT_KEY
from toolstop.observe import logger
from toolstop.outcome import Outcome, signal
from toolstop.record import reads_as_error
from toolstop.tools import tool_error_text

__all__ = [
    "Answer",
    "OutcomeRule",
    "checked",
    "convert",
    "parsed_result",
    "render_answer",
    "signal_for",
]

Answer = str | Callable[[Any, Mapping[str, Any]], str]
"""What the user sees on a stop: a `str.format` template over the result, or a function of
`(result, context)` returning the text."""

OutcomeRule = Callable[[Any], Outcome | str]
"""Classifies one call: given the result (JSON parsed) or the exception, returns its `Outcome`."""

CONTEXT_ARG = "toolstop_messages"
"""The injected argument through which a converted tool that needs `context` gets the run's
messages (never shown to the model, never passed to the tool)."""

_JSON_READ = 1_000_000
"""Characters of a result parsed as JSON at most; a longer result is passed as its text."""
_WHY_MAX = 200
"""Characters of an `answer_failed` reason at most."""

_warned: set[tuple[str, str]] = set()


def convert(
    tool: BaseTool | Callable[..., Any],
    *,
    answer: Answer | None = None,
    outcome: OutcomeRule | None = None,
) -> BaseTool:
    """The tool as a `content_and_artifact` tool that signals per call, from its result.

    The converted tool has `tool`'s name, description and arguments (injected ones such as
    `ToolRuntime`, `InjectedState` or `InjectedToolCallId` included) and calls `tool` itself, sync
    or async, with the same tool call. Its content is the tool's content, unchanged; its artifact
    is a signal (`toolstop.signal`):

    - a result → `completed` (a stop in hard mode: the user sees the result);
    - an exception, an error `ToolMessage` (`handle_tool_error`), or a result that reads as an
      error (`toolstop.record.reads_as_error`, the rule the advisor and the what-if use: a text
      starting with "Error", `{"error": ...}`, `{"success": false}`) → `transient`, with the
      model-visible error text (`tool_error_text`) for an exception;
    - `outcome=`: a function of the result (JSON parsed where it is JSON) or of the exception,
      returning an `Outcome` (or its value), decides instead. If it raises or returns something
      else, the call is `transient` (in doubt, continue) and the artifact says why
      (`outcome_failed`).

    A tool whose result already carries a signal (an artifact with `stop` or `reason`, an MCP
    tool loaded with `toolstop.mcp.load_tools`) keeps it. A tool's own artifact that is not a
    signal is kept under the signal's `tool_artifact` key.

    Args:
        tool: A LangChain tool (`@tool`, `StructuredTool`, `BaseTool`, an MCP tool from
            langchain-mcp-adapters) or a plain function (made a tool with `@tool` first).
        answer: What the user sees when a `completed` call ends the run in hard mode, instead of
            the content (the model still sees the content). A `str.format` template over the
            result: its JSON keys (`"Booked {reservation_id}, {flights[0][flight_number]}"`),
            `{result}` for the whole result, and `{context[TOOL][FIELD]}` for the latest result
            of an earlier call of `TOOL` in this run. Or a function `(result, context) -> str`,
            where `context` maps each tool called earlier in this run to its latest result. A
            template that fails to render (a missing field, a blank text) never breaks the run:
            the stop shows the content, the artifact says why (`answer_failed`), the stop
            record names the tool and the exception's type (`StopRecord.answer_failed`) and
            logger `toolstop` warns once per tool.
        outcome: Classifies each call instead of the default rule (see above).

    Returns:
        The converted tool; pass it to any toolstop router or adapter in the tool's place.

    Raises:
        ToolstopConfigError: for an `answer` that is neither a string nor a function, an
            `outcome` that is not a function, a `tool` with `return_direct=True` (the routers
            refuse it: the stop is per call now), or a `subagent_tool` (it signals already:
            convert the sub-agent's tools).

    Deliberately not handled: `context` is read from the graph state's `messages`; a tool run
    outside a LangGraph `ToolNode` (called by hand) gets an empty `context`.
    """
    base = tool if isinstance(tool, BaseTool) else as_tool(tool)
    answer, outcome = checked(answer, outcome)
    if (base.metadata or {}).get(SUBAGENT_KEY):
        msg = (
            f"{base.name} is a subagent_tool: it forwards the sub-agent's stop already, so "
            "converting it changes nothing; convert the sub-agent's own tools instead (their "
            "stops travel up to this agent)"
        )
        raise ToolstopConfigError(msg)
    if base.return_direct:
        msg = (
            f"{base.name} has return_direct=True; convert ends the run per call instead, "
            "so create it without return_direct"
        )
        raise ToolstopConfigError(msg)
    return _Converted(
        name=base.name,
        description=base.description,
        args_schema=base.args_schema,
        metadata=base.metadata,
        tags=base.tags,
        wrapped=base,
        answer=answer,
        outcome=outcome,
        needs_context=callable(answer) or (isinstance(answer, str) and _uses_context(answer)),
    )


class _Converted(BaseTool):
    """A tool that runs `wrapped` and signals from its result (see `convert`)."""

    wrapped: BaseTool
    answer: Any = None
    outcome: Any = None
    needs_context: bool = False
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        """The wrapped tool's input schema, plus the run's messages when `answer` needs them.

        The messages come in as an `InjectedState` argument, which no model is shown."""
        schema = cast(type[BaseModel], self.wrapped.get_input_schema(config))
        if not self.needs_context:
            return schema
        return cast(
            type[BaseModel],
            create_model(
                schema.__name__,
                __base__=schema if isinstance(self.wrapped.args_schema, type) else None,
                **{CONTEXT_ARG: (Annotated[Any, InjectedState("messages")], None)},  # type: ignore[call-overload]
            ),
        )

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke is overridden
        msg = "a converted tool runs through invoke"
        raise NotImplementedError(msg)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:  # noqa: A002
        """Run the wrapped tool with the same call, then signal from its result."""
        call, messages = _split(input)
        try:
            result = self.wrapped.invoke(call, config, **kwargs)
        except GraphBubbleUp:  # an interrupt, a refused overlapping run: not the tool's failure
            raise
        except Exception as error:
            return self._signalled(input, error=error)
        return self._signalled(input, result=result, messages=messages)

    async def ainvoke(
        self,
        input: Any,  # noqa: A002 - Runnable's own name
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        """`invoke`, async: the wrapped tool runs with `ainvoke`."""
        call, messages = _split(input)
        try:
            result = await self.wrapped.ainvoke(call, config, **kwargs)
        except GraphBubbleUp:
            raise
        except Exception as error:
            return self._signalled(input, error=error)
        return self._signalled(input, result=result, messages=messages)

    def _signalled(
        self,
        given: Any,
        *,
        result: Any = None,
        error: Exception | None = None,
        messages: Sequence[Any] = (),
    ) -> Any:
        """The result as this tool returns it: a ToolMessage (for a tool call) with the signal."""
        if error is not None:
            content: Any = tool_error_text(error)
            own: Any = None
            failed = True
        elif isinstance(result, ToolMessage):
            content, own = result.content, result.artifact
            failed = result.status == "error" or reads_as_error(content)
        else:
            content, own, failed = result, None, reads_as_error(result)
        if _signals(own):
            artifact: dict[str, Any] = own
        else:
            artifact = signal_for(
                self.name,
                content,
                error=error,
                failed=failed,
                answer=self.answer,
                outcome=self.outcome,
                context=_context(messages),
            )
            if own is not None:
                artifact["tool_artifact"] = own
        if not (isinstance(given, dict) and given.get("type") == "tool_call"):
            return content
        return ToolMessage(
            content=content,
            artifact=artifact,
            tool_call_id=given["id"],
            name=self.name,
            status="success",
        )


def checked(
    answer: Answer | None, outcome: OutcomeRule | None
) -> tuple[Answer | None, OutcomeRule | None]:
    """`answer` and `outcome` as `convert` takes them, checked (every adapter's convert uses it).

    Raises:
        ToolstopConfigError: for an `answer` that is neither a string nor a function, a template
            `str.format` cannot parse, or an `outcome` that is not a function.
    """
    if answer is not None and not (isinstance(answer, str) or callable(answer)):
        msg = f"answer must be a str.format template or a function, got {type(answer).__name__}"
        raise ToolstopConfigError(msg)
    if outcome is not None and not callable(outcome):
        msg = f"outcome must be a function of the result, got {type(outcome).__name__}"
        raise ToolstopConfigError(msg)
    if isinstance(answer, str):
        _check_template(answer)
    return answer, outcome


def signal_for(
    name: str,
    content: Any,
    *,
    error: BaseException | None = None,
    failed: bool | None = None,
    answer: Answer | None = None,
    outcome: OutcomeRule | None = None,
    context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The signal a converted tool `name` gives one call (see `convert`).

    The one rule of every router's and adapter's `convert`.

    Args:
        name: The tool's name (for the once-per-tool warning).
        content: What the model sees of the result (ignored for an `error`).
        error: The exception the call raised, if it did.
        failed: Whether the result is a failure; `None`: `reads_as_error(content)`.
        answer: The user's text (template or function), rendered on a `completed` call.
        outcome: The user's classification, instead of the default rule.
        context: Tools called earlier in the run -> their latest result, for `answer`.
    """
    parsed = parsed_result(content) if error is None else None
    if failed is None:
        failed = error is not None or reads_as_error(content)
    extra: dict[str, Any] = {}
    reason = Outcome.TRANSIENT if failed else Outcome.COMPLETED
    if outcome is not None:
        try:
            reason = Outcome(outcome(error if error is not None else parsed))
        except Exception as problem:
            reason = Outcome.TRANSIENT
            extra["outcome_failed"] = _failed(name, "outcome", problem)
    if reason is not Outcome.COMPLETED or answer is None:
        return signal(reason, **extra)
    try:
        text = render_answer(answer, parsed, context or {})
    except Exception as problem:
        return signal(reason, answer_failed=_failed(name, "answer", problem), **extra)
    if not is_answer(text) or not text.strip():
        why = _failed(name, "answer", "blank: the answer has no text")
        return signal(reason, answer_failed=why, **extra)
    return signal(reason, answer=text, **extra)


def _failed(name: str, what: str, problem: Exception | str) -> str:
    """Why `what` (answer or outcome) failed, masked and cut; logged once per tool.

    `TYPE: message` for an exception (the record keeps `TYPE` only, see
    `toolstop.record.answer_failed_why`), `problem` itself for a text."""
    said = problem if isinstance(problem, str) else f"{type(problem).__name__}: {problem}"
    why = mask_secrets(said)[:_WHY_MAX]
    if (name, what) not in _warned:
        _warned.add((name, what))
        logger.log(
            logging.WARNING,
            "toolstop: the %s of converted tool %r failed (%s); the stop shows the content",
            what,
            name[:_WHY_MAX],
            why,
        )
    return why


def _split(given: Any) -> tuple[Any, Sequence[Any]]:
    """The call for the wrapped tool (without the injected messages), and those messages."""
    if not isinstance(given, dict):
        return given, ()
    if given.get("type") == "tool_call":
        arguments = dict(given.get("args") or {})
        messages = arguments.pop(CONTEXT_ARG, None) or ()
        return {**given, "args": arguments}, messages
    if CONTEXT_ARG in given:
        arguments = dict(given)
        return arguments, arguments.pop(CONTEXT_ARG) or ()
    return given, ()


def _signals(artifact: Any) -> bool:
    """Whether the tool's own artifact already is a signal (it then decides as it is)."""
    return isinstance(artifact, dict) and any(
        key in artifact for key in ("stop", "reason", "untrusted", "envelope_error")
    )


def _text(content: Any) -> str | None:
    """The text of a content: a string, or the text blocks of a list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            b if isinstance(b, str) else b.get("text")
            for b in content
            if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
        ]
        if all(isinstance(p, str) for p in parts):
            return "".join(cast(list[str], parts))
    return None


def parsed_result(content: Any) -> Any:
    """A result as a template sees it: JSON parsed where it is JSON, else its text."""
    text = _text(content)
    if text is None:
        return content
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and len(stripped) <= _JSON_READ:
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError):
            return text
    return text


def _context(messages: Sequence[Any]) -> dict[str, Any]:
    """Each tool called so far in this run (since the last human message) -> its latest result."""
    run: list[AnyMessage] = []
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        run.append(message)
    context: dict[str, Any] = {}
    for message in reversed(run):
        if isinstance(message, ToolMessage) and message.status != "error" and message.name:
            context[message.name] = parsed_result(message.content)
    return context


class _Formatter(string.Formatter):
    """`str.format` over plain data: keys and indexes only, no attribute access."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        depth = 0
        for char in field_name:
            depth += {"[": 1, "]": -1}.get(char, 0)
            if char == "." and depth == 0:
                msg = f"{{{field_name}}}: attributes are not read, only [keys] and [indexes]"
                raise ValueError(msg)
        return super().get_field(field_name, args, kwargs)


def render_answer(answer: Any, result: Any, context: Mapping[str, Any]) -> Any:
    """The user's text for one result: the template filled in, or the function's return."""
    if not isinstance(answer, str):
        return answer(result, context)
    fields = result if isinstance(result, dict) else {}
    named = {k: v for k, v in fields.items() if isinstance(k, str)}
    return _Formatter().vformat(answer, (), {**named, "result": result, "context": context})


def _check_template(template: str) -> None:
    """Refuse a template `str.format` cannot parse, when it is given (not at the first call)."""
    try:
        for _, field, _, _ in _Formatter().parse(template):
            if field is not None and not field:
                msg = f"answer template {template!r}: name each field ({{}} is positional)"
                raise ToolstopConfigError(msg)
    except ValueError as error:
        msg = f"answer template {template!r} is not a str.format template: {error}"
        raise ToolstopConfigError(msg) from None


def _uses_context(template: str) -> bool:
    """Whether a template reads `{context[...]}`."""
    return any(
        field is not None and field.split("[", 1)[0].split(".", 1)[0] == "context"
        for _, field, _, _ in _Formatter().parse(template)
    )
