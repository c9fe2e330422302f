"""Pydantic AI as a router of the scenario matrix: the same scenarios, tools and scripts.

`PYDANTIC_AI` builds a Pydantic AI `Agent` with `toolstop.pydantic_ai.StopOnArtifact` from what
every router gets: a LangChain chat model (the scenario's scripted model, or a real one) and
LangChain tools that return `(content, artifact)`. The chat model answers through a
`FunctionModel`, so the scripted model records each call as on the LangGraph routers; each tool
becomes a Pydantic AI tool returning `ToolReturn(return_value=content, metadata=artifact)`, and a
tool's exception goes back to the model as a `ModelRetry` (the LangGraph routers' error
message). The run's history comes back as LangChain messages with the `stop_record`, so the
check engine compares it with the same goldens and invariants.

Deliberately not run here: scenarios with `create_agent` middleware (they need
`create_agent`), and the step budget (a LangGraph recursion limit; Pydantic AI's usage limits
are its budget). There is no node path: the transcript's path is empty.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from toolstop._check.routers import Router
from toolstop.decision import content_text
from toolstop.policy import StopPolicy

__all__ = ["PYDANTIC_AI", "build", "pydantic_ai_unavailable", "to_langchain"]

NOT_APPLICABLE = {"step-budget": "a LangGraph recursion limit; Pydantic AI has usage limits"}
"""Scenarios of the matrix that do not apply to Pydantic AI, and why."""

_TOOL_RETRIES = 100
"""Pydantic AI's per-tool retry limit for the stand-ins: toolstop's retry budget decides."""


def pydantic_ai_unavailable() -> str | None:
    """Why the Pydantic AI router cannot run here (`None` when it can)."""
    try:
        import pydantic_ai  # noqa: F401
        from pydantic_ai.exceptions import SkipModelRequest  # noqa: F401
    except ImportError as error:
        return f"Pydantic AI is not installed ({error}): pip install 'toolstop[pydantic-ai]'"
    return None


def to_langchain(messages: Sequence[Any]) -> list[BaseMessage]:
    """A Pydantic AI history as LangChain messages (a relay keeps toolstop's marker)."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart

    from toolstop.pydantic_ai import RELAY_KEY, _tool_message

    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                kind = getattr(part, "part_kind", None)
                content: Any = getattr(part, "content", "")
                text = content if isinstance(content, str) else ""
                if kind == "user-prompt":
                    out.append(HumanMessage(content=text))
                elif kind == "system-prompt":
                    out.append(SystemMessage(content=text))
                else:
                    answer = _tool_message(part)
                    if answer is not None:
                        out.append(answer)
        elif isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = [
                {
                    "name": p.tool_name,
                    "args": p.args_as_dict(),
                    "id": p.tool_call_id,
                    "type": "tool_call",
                }
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            relay = (message.metadata or {}).get(RELAY_KEY)
            out.append(
                AIMessage(
                    content=text,
                    tool_calls=calls,
                    response_metadata={"toolstop": relay} if relay else {},
                )
            )
    return out


def _function_model(model: Any, tools: dict[str, BaseTool], config: dict[str, Any]) -> Any:
    """A `FunctionModel` asking the LangChain chat model, with the tools Pydantic AI offers.

    `config["run"]` is the LangChain config of the run in progress (its callbacks count the
    model's calls and tokens, as on the LangGraph routers).
    """
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import RequestUsage

    def respond(messages: list[Any], info: Any) -> Any:
        offered = [tools[t.name] for t in info.function_tools if t.name in tools]
        bound = model.bind_tools(offered) if offered else model
        answer = bound.invoke(to_langchain(messages), config.get("run"))
        parts: list[Any] = []
        text = content_text(answer.content)
        if text:
            parts.append(TextPart(content=text))
        for call in getattr(answer, "tool_calls", None) or ():
            parts.append(ToolCallPart(call["name"], call["args"], tool_call_id=call["id"]))
        usage = getattr(answer, "usage_metadata", None) or {}
        return ModelResponse(
            parts=parts or [TextPart(content="")],
            usage=RequestUsage(
                input_tokens=int(usage.get("input_tokens", 0)),
                output_tokens=int(usage.get("output_tokens", 0)),
            ),
        )

    return FunctionModel(respond, model_name="toolstop-check")


def _tool(tool: BaseTool) -> Any:
    """A LangChain `content_and_artifact` tool as a Pydantic AI tool with `ToolReturn.metadata`."""
    from pydantic_ai import ModelRetry, Tool, ToolReturn

    def run(ctx: Any, **args: Any) -> Any:
        call = {"name": tool.name, "args": args, "id": ctx.tool_call_id, "type": "tool_call"}
        try:
            message = tool.invoke(call)
        except Exception as error:  # the LangGraph routers' recipe: the error goes to the model
            raise ModelRetry(f"Error: {error!r}") from error
        if getattr(message, "status", "success") == "error":
            raise ModelRetry(content_text(message.content))
        content = content_text(getattr(message, "content", str(message)))
        return ToolReturn(return_value=content, metadata=getattr(message, "artifact", None))

    schema = convert_to_openai_tool(tool)["function"]
    parameters = schema.get("parameters") or {"type": "object", "properties": {}}
    return Tool.from_schema(
        run, name=tool.name, description=tool.description, json_schema=parameters, takes_ctx=True
    )


class _Agent:
    """A Pydantic AI agent behind the `invoke` the check engine calls."""

    def __init__(self, agent: Any, config: dict[str, Any]) -> None:
        self.agent = agent
        self.config = config

    def invoke(self, inputs: Any, config: Any = None) -> dict[str, Any]:
        """Run the agent on the last message's text; callbacks in `config` see the model calls."""
        from toolstop.pydantic_ai import stop_record

        question = content_text(inputs["messages"][-1].content)
        self.config["run"] = (
            {"callbacks": config["callbacks"]} if config and "callbacks" in config else None
        )
        result = asyncio.run(self.agent.run(question))
        return {"messages": to_langchain(result.all_messages()), "stop_record": stop_record(result)}


def build(
    model: Any, tools: Sequence[Any], *, policy: StopPolicy | None, checkpointer: Any = None
) -> _Agent:
    """The router's `build`: a Pydantic AI agent with `StopOnArtifact` (no checkpointer)."""
    from pydantic_ai import Agent

    from toolstop.pydantic_ai import StopOnArtifact

    lc_tools = {t.name: t for t in tools}
    config: dict[str, Any] = {}
    agent = Agent(
        _function_model(model, lc_tools, config),
        tools=[_tool(t) for t in tools],
        capabilities=[StopOnArtifact(policy)],
        retries=_TOOL_RETRIES,
    )
    return _Agent(agent, config)


PYDANTIC_AI = Router(
    name="pydantic_ai",
    build=build,
    model_node="",
    stop_node="",
    polish_node="",
    skips=tuple(NOT_APPLICABLE),
)
"""Pydantic AI with `StopOnArtifact`: runs where Pydantic AI is installed."""
