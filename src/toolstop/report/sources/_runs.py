"""Where the runs of a recorded conversation begin and end: the one rule every reader meets.

Logs end mid-conversation: on a hand-off to a human (a tool called last, its result recorded or
not), on a step limit (tool results no model call read), on a user message nobody answered. A
conversation is cut into runs here, before any record is made, for every log format and the
checkpoints of an agent without toolstop (`toolstop.report.from_logs`), `shadow_records` and the
what-if (`toolstop.report.what_if`), so a reader added later gets the same rule.

- A run starts at a user message (several user messages in a row start one run) and takes what
  the agent did until the next user message.
- A run that `ModelCallLimitMiddleware` ended with its message is finished as `StopOnArtifact`
  finishes it (`ended_by`); the message is not a model call.
- A run ends on an answer (an assistant message without tool calls), or is left open on a tool
  call or on tool results: such a run is replayed, and closed as shadow mode closes a run left
  open when the thread's next run starts (`toolstop._lifecycle.close_aborted`: rule
  `interrupted`, the calls left open in `tools` and `asked`; its tools `ended_on_it`). When
  some calls of its last turn have results and others none, those results are left out: the
  agent's tool step failed, and a failed step writes none of its results to the thread.
- User messages at the end that no model call answered are an open run with no model call:
  counted (`Segments.unanswered`), nothing to replay.
- Assistant text before the first user message (a fixed greeting) is input the agent was given
  (`Segments.context`); a tool call or result there cannot be replayed and is left out.
- A run whose tool results do not answer its tool calls one to one (a result with no call, a
  call left unanswered before the model is called again) cannot be replayed: it and the runs
  after it are dropped and counted (`Segments.dropped`, with the first reason), never the runs
  before it.

Deliberately not handled: system messages (left out, as the replayed agent has its own prompt).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

__all__ = ["LIMIT_TEXT", "Ending", "Segments", "ending", "runs_of", "segment"]

LIMIT_TEXT = "Model call limits exceeded"
"""How the message `ModelCallLimitMiddleware(exit_behavior="end")` ends a run with begins (the
text `toolstop.middleware` recognises it by): written by the middleware, not by a model call."""

Ending = Literal["answer", "tool_call", "tool_result", "limit"]
"""How a replayable run ends.

- `"answer"`: an assistant message without tool calls.
- `"tool_call"`: an assistant message's tool calls, some left without a result (a hand-off that
  paused the run, a process that ended).
- `"tool_result"`: tool results no model call read (a hand-off that ended the graph, a limit).
- `"limit"`: the message `ModelCallLimitMiddleware` ends a run with, in the model's place (a log
  written from the agent's state, such as its checkpoints, holds it).
"""


@dataclass(frozen=True, kw_only=True)
class Segments:
    """A recorded conversation cut into runs (see the module docstring).

    Attributes:
        context: Assistant text the conversation opens with, before its first user message:
            input the first run is given, not a model call.
        runs: The runs a replay can reproduce, in order; each starts with its user message(s).
        unanswered: 1 when the conversation ends with user messages no model call answered
            (an open run with no model call), else 0.
        dropped: Runs left out, from the first one a replay cannot reproduce to the end (an
            unanswered one at the end included).
        left_out: Messages before the first user message left out (tool calls or results).
        problem: Why the first part was left out (`None`: nothing was).
    """

    context: list[BaseMessage] = field(default_factory=list)
    runs: list[list[BaseMessage]] = field(default_factory=list)
    unanswered: int = 0
    dropped: int = 0
    left_out: int = 0
    problem: str | None = None


def ending(run: Sequence[BaseMessage]) -> Ending:
    """How a run of `Segments.runs` ends."""
    answered: set[str] = set()
    for message in reversed(run):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AIMessage):
            if not message.tool_calls:
                limit = isinstance(message.content, str) and message.content.startswith(LIMIT_TEXT)
                return "limit" if limit and message is run[-1] else "answer"
            left_open = any(str(c["id"]) not in answered for c in message.tool_calls)
            return "tool_call" if left_open else "tool_result"
    return "tool_call"  # unreachable for a run of `segment`: it holds a model call


def _why_not(run: Sequence[BaseMessage]) -> str | None:
    """Why a run (user messages, then the agent's) cannot be replayed; `None` when it can."""
    waiting: dict[str, None] = {}  # the calls of the last assistant message still unanswered
    seen: set[str] = set()
    for message in run:
        if isinstance(message, AIMessage):
            if waiting:
                return "a tool call has no result before the model is called again"
            ids = [str(c["id"]) for c in message.tool_calls]
            if len(set(ids)) != len(ids) or seen.intersection(ids):
                return "a tool call id is used twice"
            seen.update(ids)
            waiting = dict.fromkeys(ids)
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in waiting:
                return "a tool result answers no tool call of the turn before it"
            del waiting[message.tool_call_id]
    return None


def segment(messages: Sequence[BaseMessage]) -> Segments:
    """`messages` cut into runs a replay can reproduce, what is open at the end, what is not.

    Never raises on a conversation's shape: what cannot be replayed is counted instead."""
    lead: list[BaseMessage] = []
    groups: list[list[BaseMessage]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, HumanMessage):
            if groups and all(isinstance(m, HumanMessage) for m in groups[-1]):
                groups[-1].append(message)  # no model call between them: one run's input
            else:
                groups.append([message])
        elif groups:
            groups[-1].append(message)
        else:
            lead.append(message)
    context: list[BaseMessage] = [m for m in lead if isinstance(m, AIMessage) and not m.tool_calls]
    left_out = len(lead) - len(context)
    problem = (
        f"{left_out} tool message(s) before the first user message left out" if left_out else None
    )
    unanswered = 0
    if groups and all(isinstance(m, HumanMessage) for m in groups[-1]):
        groups.pop()
        unanswered = 1
    for number, run in enumerate(groups, 1):
        asked = any(isinstance(m, AIMessage) for m in run)
        if asked and ending(run) == "tool_call":  # a failed tool step writes none of its results
            while isinstance(run[-1], ToolMessage):
                run.pop()
        why = _why_not(run)
        if why is not None:
            return Segments(
                context=context,
                runs=groups[: number - 1],
                dropped=len(groups) - number + 1 + unanswered,
                left_out=left_out,
                problem=problem or f"run {number}: {why}",
            )
    return Segments(
        context=context, runs=groups, unanswered=unanswered, left_out=left_out, problem=problem
    )


def runs_of(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """The runs of `messages` a replay can reproduce (`segment(messages).runs`)."""
    return segment(messages).runs
