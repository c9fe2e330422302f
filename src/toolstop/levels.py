"""Agents at several levels: a sub-agent's stop travels up; its record stays at its level.

A sub-agent with toolstop's router that stopped on a tool's signal (`completed`, `fatal`,
`policy_block`) ended its run on the tool's text, without a restating model call. Its parent,
with a toolstop router of its own, can end on that same text without restating it either, when
the sub-agent's result carries the stop as an artifact: `forwarded_stop` builds it from the
sub-agent's `stop_record`. Two ways in:

- `subagent_tool(agent, name=..., description=...)`: any compiled agent (with `messages` in its
  state) as a `content_and_artifact` tool of the parent.
- Deep Agents' `task` tool (and any tool that returns a sub-agent's state update in a `Command`):
  `StopOnArtifact` in the parent forwards the stop in the `stop_record` that the update carries,
  and removes that record from the update, so it never enters the parent's state.

A sub-agent that answered through its model, or ended on a budget (`retry_budget`,
`step_budget`), a limit or an interruption, forwards no stop: its answer goes back to the
parent's model (`stop: false`).

Shadow mode (`never`) at several levels: a sub-agent whose record says it would have stopped
(`would_stop` completed / fatal / policy_block) forwards `stop: false` with
`subagent_would_stop: true`; a parent in `never` mode records that as its own would-stop, so
its `would_save` counts the restating calls that hard mode saves at its level too. A parent in
any other mode ignores the key (its model goes on, as it did with the sub-agent's answer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from pydantic import BaseModel, Field

from toolstop._lifecycle import RUN_KEY
from toolstop._relay import model_text
from toolstop.decision import content_text
from toolstop.errors import ToolstopConfigError
from toolstop.outcome import Outcome, signal
from toolstop.record import StopRecord

__all__ = [
    "HANDOFF_KEY",
    "SUBAGENT_KEY",
    "defer_handoff",
    "forward_in_update",
    "forwarded_stop",
    "hand_off",
    "handoff_overridden",
    "handoff_record",
    "settle_handoff",
    "subagent_tool",
    "without_record",
]

SUBAGENT_KEY = "toolstop_subagent"
"""The metadata key naming the `subagent_tool` a sub-agent's run was called as (its checkpoints
keep it: `toolstop explain` labels the run's level with it)."""

HANDOFF_KEY = "handoff"
"""The key, in the run's private state (`RUN_KEY`), of a hand-off held until its turn is
answered (see `defer_handoff`). Not a state key of its own: every channel an agent declares
costs LangGraph work on every step of every run."""

FORWARDED = frozenset({Outcome.COMPLETED.value, Outcome.FATAL.value, Outcome.POLICY_BLOCK.value})
"""The rules a sub-agent's stop is forwarded on: the stops a tool signalled."""


def forwarded_stop(record: Any, *, name: str | None = None) -> dict[str, Any]:
    """The artifact a sub-agent's result carries to its parent's router.

    Args:
        record: The sub-agent's `stop_record` (anything else, or a malformed record, forwards
            no stop: the parent's model goes on).
        name: The sub-agent's name, kept in the artifact for the application (`subagent`).

    Returns:
        `signal(rule)` when the sub-agent's run stopped on a tool's signal (`FORWARDED`);
        otherwise `{"stop": False, "reason": "completed"}` when its model answered, or
        `{"stop": False, "reason": "fatal"}` when a budget, a limit or an interruption ended
        it (it could not finish; the parent's model decides what to tell the user). A run in
        `never` mode that would have stopped on a tool's signal forwards
        `signal(would_stop, stop=False, subagent_would_stop=True)`: only a parent in `never`
        mode reads it (as a would-stop of its own). The
        sub-agent's rule is kept as `subagent_rule` (never read for routing); the record itself
        is never copied.
    """
    rule = record.get("rule") if isinstance(record, Mapping) else None
    stopped = isinstance(record, Mapping) and record.get("stopped") is True
    extra: dict[str, Any] = {"subagent_rule": rule if isinstance(rule, str) else None}
    if name is not None:
        extra["subagent"] = name
    if stopped and rule in FORWARDED:
        return signal(str(rule), **extra)
    would = record.get("would_stop") if isinstance(record, Mapping) else None
    if not stopped and isinstance(would, str) and would in FORWARDED:
        return signal(str(would), stop=False, subagent_would_stop=True, **extra)
    if not isinstance(record, Mapping) or (rule == "none" and not record.get("ended_by")):
        return signal(Outcome.COMPLETED, stop=False, **extra)
    return signal(Outcome.FATAL, stop=False, **extra)


def final_text(messages: Sequence[Any]) -> tuple[str, Any]:
    """`(text for the parent's model, answer for the user or None)` of a sub-agent's run.

    The text is the last AIMessage with text (as Deep Agents' `task` reads it). When that
    message is a relay that showed a tool's `answer`, the parent's model gets the tool's
    content instead, and the answer travels in the artifact (`signal(answer=...)`).
    """
    for message in reversed(messages):
        if not isinstance(message, AIMessage):
            continue
        text = content_text(message.content).strip()
        if not text:
            continue
        kept = model_text(message.response_metadata)
        if kept is not None:
            return content_text(kept), message.content
        return text, None
    return "", None


class _Request(BaseModel):
    request: str = Field(
        description="The task for the sub-agent, with everything it needs to know: it sees "
        "nothing else of this conversation."
    )
    tool_call_id: Annotated[str, InjectedToolCallId]


def _config(agent: Any, name: str, tool_call_id: str) -> RunnableConfig:
    """The call's metadata with the sub-agent's name (`SUBAGENT_KEY`), and a thread of its own
    for a sub-agent compiled with its own checkpointer (else it runs as a subgraph of the call:
    a new conversation each time)."""
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.config import get_config

    try:
        current = get_config()
    except RuntimeError:  # called outside a graph run
        current = {}
    metadata = {**(current.get("metadata") or {}), SUBAGENT_KEY: name}
    if not isinstance(getattr(agent, "checkpointer", None), BaseCheckpointSaver):
        return {"metadata": metadata}
    parent = current.get("configurable", {}).get("thread_id")
    return {
        "configurable": {"thread_id": f"{parent}/{name}/{tool_call_id}"},
        "metadata": metadata,
    }


def _result(state: Any, name: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(state, Mapping) or not isinstance(state.get("messages"), Sequence):
        msg = f"sub-agent {name!r} returned no `messages` (got {type(state).__name__})"
        raise ToolstopConfigError(msg)
    text, answer = final_text(state["messages"])
    artifact = forwarded_stop(state.get("stop_record"), name=name)
    if answer is not None and artifact["stop"]:
        artifact["answer"] = answer
    return text, artifact


def subagent_tool(agent: Any, *, name: str, description: str) -> BaseTool:
    """A compiled agent as a `content_and_artifact` tool of a parent agent (sync and async).

    The tool takes one argument, `request` (the task), and invokes the agent with it as the
    only message. Its content is the sub-agent's final text; its artifact forwards the
    sub-agent's stop (`forwarded_stop`): a parent with toolstop's router (`StopOnArtifact`,
    `build_react_graph`, the legacy drop-in) ends on a sub-agent's `completed` / `fatal` /
    `policy_block` stop with the text unchanged and no restating model call; a sub-agent that
    answered through its model, or ended on a budget or a limit, returns its answer with
    `stop: false` and the parent's model goes on.

    Scoping: stateless. Each call is a new conversation with the sub-agent, which sees only
    the request. A sub-agent compiled without a checkpointer runs as a subgraph of the call
    (checkpointed under the parent's thread, in the call's own namespace); one compiled with
    its own checkpointer gets a thread of its own per call, `<parent thread>/<name>/<call id>`.
    Either way its run's metadata names it (`SUBAGENT_KEY`, kept in its checkpoints), and so
    does the tool's (`toolstop.convert` refuses it: it signals already; convert the sub-agent's
    tools, whose stops travel up).
    Its `stop_record` stays in its own state: the parent's state gets the text and the
    artifact only (which names the sub-agent's rule, `subagent_rule`).

    Deliberately not handled: a sub-agent that pauses on a human review (`interrupt`) pauses
    the parent (LangGraph raises the interrupt through the call); a sub-agent without
    `messages` in its state is refused with `ToolstopConfigError` when called.

    Args:
        agent: A compiled agent: `create_agent`, `build_react_graph`, Deep Agents, or any
            runnable taking and returning a state with `messages`.
        name: The tool's name (what the parent's model calls).
        description: What the sub-agent does, for the parent's model.

    Raises:
        TypeError: `agent` is not a runnable (no `invoke` and `ainvoke`), or `name` or
            `description` is not a non-empty str.
    """
    if not callable(getattr(agent, "invoke", None)) or not callable(
        getattr(agent, "ainvoke", None)
    ):
        msg = (
            f"subagent_tool(agent) takes a compiled agent (a runnable), got {type(agent).__name__}"
        )
        raise TypeError(msg)
    for field, value in (("name", name), ("description", description)):
        if not isinstance(value, str) or not value.strip():
            msg = f"subagent_tool({field}=...) takes a non-empty str, got {value!r}"
            raise TypeError(msg)

    def run(request: str, tool_call_id: str) -> tuple[str, dict[str, Any]]:
        state = agent.invoke(_input(request), _config(agent, name, tool_call_id))
        return _result(state, name)

    async def arun(request: str, tool_call_id: str) -> tuple[str, dict[str, Any]]:
        state = await agent.ainvoke(_input(request), _config(agent, name, tool_call_id))
        return _result(state, name)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=name,
        description=description,
        args_schema=_Request,
        response_format="content_and_artifact",
        metadata={SUBAGENT_KEY: name},  # `convert` refuses it: it forwards a stop already
    )


def _input(request: str) -> dict[str, list[BaseMessage]]:
    return {"messages": [HumanMessage(request)]}


def forward_in_update(result: Any) -> Any:
    """A tool's `Command` with the sub-agent's `stop_record` taken out of its state update.

    Deep Agents' `task` tool returns the sub-agent's state keys in a `Command` update; its
    `stop_record` would overwrite the parent's. It is removed, and its stop is forwarded as the
    artifact of the update's ToolMessage (`forwarded_stop`), unless that message has an
    artifact of its own. Anything else is returned as it is.
    """
    from langgraph.types import Command

    if not isinstance(result, Command) or not isinstance(result.update, Mapping):
        return result
    update = dict(result.update)
    if "stop_record" not in update:
        return result
    record = update.pop("stop_record")
    messages = update.get("messages")
    if isinstance(messages, Sequence) and not isinstance(messages, str):
        tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
        if len(tool_messages) == 1 and tool_messages[0].artifact is None:
            message = tool_messages[0]
            artifact = forwarded_stop(record)
            update["messages"] = [
                message.model_copy(update={"artifact": artifact}) if m is message else m
                for m in messages
            ]
    return Command(graph=result.graph, update=update, resume=result.resume, goto=result.goto)


def without_record(request: Any) -> Any:
    """A tool call's request whose state has no `stop_record` (the same request when it has none).

    Deep Agents' `task` gives its sub-agent the state its tool is given, minus the keys it
    excludes; the level's record is not one of them.
    """
    state = getattr(request, "state", None)
    if not isinstance(state, Mapping) or "stop_record" not in state:
        return request
    return request.override(state={k: v for k, v in state.items() if k != "stop_record"})


def _handoff(result: Any) -> Any:
    """`result` when it is a hand-off (a `Command` to the parent graph with a `goto`), else None."""
    from langgraph.types import Command

    if isinstance(result, Command) and result.graph == Command.PARENT and result.goto:
        return result
    return None


def defer_handoff(request: Any, result: Any) -> Any:
    """A hand-off in a turn with other calls, held until every call of the turn is answered.

    langgraph-swarm's hand-off tool returns a `Command` to the swarm carrying the history up to
    its own result: a call of the same turn that runs beside it goes unanswered and its result
    is lost. Held instead: the hand-off's result is written like any tool result, the hand-off
    itself into the run's `HANDOFF_KEY`, and the next model call decides (`hand_off`,
    `handoff_overridden`). A hand-off alone in its turn, and anything else, is returned as it
    is.
    """
    command = _handoff(result)
    state = getattr(request, "state", None)
    if command is None or not isinstance(state, Mapping):
        return result
    messages = state.get("messages") or []
    asking = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    update = command.update if isinstance(command.update, Mapping) else None
    if asking is None or len(asking.tool_calls) < 2 or update is None:
        return result
    call_id = (getattr(request, "tool_call", None) or {}).get("id")
    answers = [
        m
        for m in update.get("messages") or []
        if isinstance(m, ToolMessage) and m.tool_call_id == call_id
    ]
    if len(answers) != 1 or not isinstance(command.goto, str):
        return result
    from langgraph.types import Command

    held = {
        "goto": command.goto,
        "update": {k: v for k, v in update.items() if k != "messages"},
        "tool_call_id": call_id,
    }
    run = state.get(RUN_KEY)
    return Command(
        update={
            "messages": answers,
            RUN_KEY: {**(run if isinstance(run, Mapping) else {}), HANDOFF_KEY: held},
        }
    )


def hand_off(held: Mapping[str, Any], messages: Sequence[BaseMessage]) -> Exception:
    """The exception that carries out a held hand-off with the whole answered turn.

    Raised from the model node, it hands the conversation over as the hand-off tool would
    have, with `messages` (every call of the turn answered) in place of its truncated history.
    """
    from langgraph.errors import ParentCommand
    from langgraph.types import Command

    update = {**held.get("update", {}), "messages": list(messages)}
    return ParentCommand(Command(graph=Command.PARENT, goto=held["goto"], update=update))


def handoff_overridden(held: Mapping[str, Any], messages: Sequence[BaseMessage]) -> list[Any]:
    """The hand-off's result rewritten for a turn whose stop was honoured, as an update.

    The conversation stays with this agent; empty when the result is not found."""
    call_id = held.get("tool_call_id")
    for message in messages:
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id and message.id:
            text = f"Not transferred to {held.get('goto')}: a result of the same turn ended it."
            return [message.model_copy(update={"content": text})]
    return []


def handoff_record(state: Any, result: Any) -> Any:
    """The record to publish for a run that a hand-off alone in its turn ends right away.

    The run's record so far with `handed_off_to`; None when `result` is no such hand-off."""
    command = _handoff(result)
    run = state.get(RUN_KEY) if isinstance(state, Mapping) else None
    if command is None or not isinstance(run, Mapping) or not isinstance(command.goto, str):
        return None
    record = run.get("record")
    return {**record, "handed_off_to": command.goto} if isinstance(record, Mapping) else None


def settle_handoff(
    held: Mapping[str, Any],
    record: StopRecord,
    stops: bool,
    messages: Sequence[BaseMessage],
) -> tuple[StopRecord, dict[str, Any] | Exception]:
    """What the model call after a held hand-off does (see `defer_handoff`).

    Args:
        held: The hand-off (`HANDOFF_KEY`).
        record: The run's record, with the answered turn folded in.
        stops: Whether the turn's decision ends the run now (a relay).
        messages: The agent's messages, every call of the turn answered.

    Returns:
        When the turn stops, the stop is honoured: the record with `handoff_overridden`, and
        the state update that rewrites its result (the caller clears the hand-off from the
        run). Otherwise the hand-off is carried out: the record with `handed_off_to` (to
        publish: the run ends here) and the exception to raise (`hand_off`).
    """
    goto = str(held.get("goto"))
    if stops:
        rewritten = handoff_overridden(held, messages)
        update: dict[str, Any] = {}
        if rewritten:
            update["messages"] = rewritten
        return StopRecord(**{**record, "handoff_overridden": goto}), update
    return StopRecord(**{**record, "handed_off_to": goto}), hand_off(held, messages)
