"""`replay`: a recorded conversation as a script and stand-in tools, to run through your agent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, ToolException
from pydantic import BaseModel, ConfigDict

__all__ = ["Replay", "UnknownCallError", "replay"]


class UnknownCallError(AssertionError):
    """A replayed tool was called with a call id the recording has no result for.

    The agent asked for a call the recorded model never made (a different id, or the right id
    under another tool's name): the replay has diverged from the recording, which is a test
    failure, never a made-up result.

    Attributes:
        tool: The tool that was called.
        call_id: The call id it was given.
    """

    def __init__(self, message: str, *, tool: str, call_id: str):
        super().__init__(message)
        self.tool = tool
        self.call_id = call_id


@dataclass(frozen=True, kw_only=True)
class Replay:
    """A recorded conversation, ready to run through an agent.

    Attributes:
        script: The recorded assistant messages, in order, each with its recorded
            `usage_metadata` when it had one: `ScriptedChatModel(replay.script)` answers with
            them (and with langchain-core's approximation where the recording has no usage).
        tools: One stand-in per tool name the recording calls, in name order: it returns the
            recorded result of the call id it is given.
        questions: The recorded user messages, in order: each starts one run
            (`agent.invoke({"messages": [question]}, config)` on one thread).
    """

    script: tuple[AIMessage, ...]
    tools: tuple[BaseTool, ...]
    questions: tuple[HumanMessage, ...]


class _AnyArguments(BaseModel):
    """Whatever arguments the recorded call had; the call id is injected."""

    model_config = ConfigDict(extra="allow")
    tool_call_id: Annotated[str, InjectedToolCallId]


def _stand_in(
    name: str, results: dict[str, tuple[str, ToolMessage]], *, content_and_artifact: bool
) -> BaseTool:
    def recorded(tool_call_id: str, **_: Any) -> Any:
        found = results.get(tool_call_id)
        if found is None or found[0] != name:
            known = sorted(i for i, (tool, _) in results.items() if tool == name)
            shown = ", ".join(repr(i) for i in known[:5]) + (", ..." if len(known) > 5 else "")
            msg = (
                f"replay: tool {name!r} was called with call id {tool_call_id!r}, which the "
                f"recording has no {name!r} result for (its {name!r} call ids: {shown or 'none'})"
            )
            raise UnknownCallError(msg, tool=name, call_id=tool_call_id)
        message = found[1]
        if message.status == "error":  # the tool node makes it a ToolMessage with status error
            raise ToolException(message.content)
        if content_and_artifact:
            return message.content, message.artifact
        return message.content

    return StructuredTool(
        name=name,
        description=f"The recorded results of {name}.",
        args_schema=_AnyArguments,
        func=recorded,
        response_format="content_and_artifact" if content_and_artifact else "content",
        handle_tool_error=lambda error: str(error.args[0]) if error.args else "",
    )


def replay(messages: Sequence[BaseMessage], *, content_and_artifact: bool = False) -> Replay:
    """The script, stand-in tools and questions that replay a recorded conversation.

    Each stand-in returns the recorded `ToolMessage`'s content for the call id it is given (a
    result recorded with `status="error"` comes back as an error result, status and text kept);
    with `content_and_artifact=True` the stand-ins are `content_and_artifact` tools returning
    the recorded content and artifact (None where none was recorded). The arguments a call
    carries are accepted whatever they are and not compared with the recorded ones.

    Deliberately not handled: system messages are not replayed (give your agent its own
    prompt); a tool call the recording never answered has no result, so calling it raises
    `UnknownCallError` like any unknown call id.

    Args:
        messages: The recorded conversation as LangChain messages (user, assistant, tool and
            system messages, in the order they happened).
        content_and_artifact: Make the stand-ins return `(content, artifact)`.

    Returns:
        The `Replay`: `script` for `ScriptedChatModel`, `tools` for the agent, `questions`.

    Raises:
        TypeError: `messages` is not a sequence of LangChain messages.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        msg = (
            f"replay(messages) takes a list of LangChain messages, got a {type(messages).__name__}"
        )
        raise TypeError(msg)
    for index, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            msg = f"replay(messages): message {index} is a {type(message).__name__}, not a message"
            raise TypeError(msg)
    names: dict[str, str] = {}  # call id -> tool name, from the assistant messages
    for message in messages:
        if isinstance(message, AIMessage):
            for tool_call in message.tool_calls:
                names.setdefault(str(tool_call.get("id")), tool_call["name"])
    results: dict[str, tuple[str, ToolMessage]] = {}
    for message in messages:
        if isinstance(message, ToolMessage) and message.tool_call_id in names:
            results.setdefault(message.tool_call_id, (names[message.tool_call_id], message))
    return Replay(
        script=tuple(m.model_copy(deep=True) for m in messages if isinstance(m, AIMessage)),
        tools=tuple(
            _stand_in(name, results, content_and_artifact=content_and_artifact)
            for name in sorted(set(names.values()))
        ),
        questions=tuple(m for m in messages if isinstance(m, HumanMessage)),
    )
