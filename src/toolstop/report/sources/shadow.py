"""The stop records shadow mode would have written for a recorded conversation, without an agent.

`shadow_records(messages)` runs toolstop's own run lifecycle (`toolstop._lifecycle`: `begin`,
`answered`, `begin_turn`, `ended_after`, as `StopOnArtifact` calls them) over the recorded
messages, one model call at a time, instead of replaying them through `create_agent`: the
records are the ones the middleware writes when the recording is replayed through an unchanged
`create_agent` with `StopOnArtifact(StopPolicy(mode="never"))`, the scripted model and the
stand-in tools of `toolstop.testing.replay` (tests/test_sources_shadow.py compares them field
for field), at a fraction of the cost.

Each user message starts a run, as in shadow mode. An answer without recorded usage gets the
scripted model's estimate (`approximate_usage` of the messages the model saw and the answer).

Deliberately not handled: system messages (the replayed agent has its own prompt, so they are
neither replayed nor counted in an estimate), the step budget (runs are taken as LangGraph ran
them, with no recursion limit), and the turns another middleware would change (human review,
call limits, summarization).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from toolstop._lifecycle import (
    Begun,
    RunState,
    answered,
    begin,
    begin_turn,
    ended_after,
    open_run,
    pending,
    run_start,
)
from toolstop._relay import to_model
from toolstop.decision import current_turn
from toolstop.policy import StopPolicy
from toolstop.record import StopRecord
from toolstop.report.sources._base import Unreadable
from toolstop.testing.scripted import approximate_usage

__all__ = ["replay_answer", "replay_begin", "runs_of", "shadow_records"]


def runs_of(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """The conversation cut into runs: a user message, then what the agent did until it answered.

    System messages are left out.

    Raises:
        Unreadable: a shape a replay cannot reproduce: a message before the first user
            message, a run that does not end with an answer without tool calls, or tool
            results that do not answer the run's tool calls one to one.
    """
    runs: list[list[BaseMessage]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, HumanMessage):
            runs.append([message])
        elif not runs:
            msg = f"a {message.type} message comes before the first user message"
            raise Unreadable(msg)
        else:
            runs[-1].append(message)
    for number, run in enumerate(runs, 1):
        last = run[-1]
        if not isinstance(last, AIMessage) or last.tool_calls:
            msg = f"run {number} does not end with an answer without tool calls"
            raise Unreadable(msg)
        called = sorted(str(c["id"]) for m in run if isinstance(m, AIMessage) for c in m.tool_calls)
        results = sorted(m.tool_call_id for m in run if isinstance(m, ToolMessage))
        if called != results:
            msg = f"run {number}: the tool results do not answer the tool calls one to one"
            raise Unreadable(msg)
    return runs


def _ending(
    run: RunState | None,
    previous: StopRecord | None,
    history: list[BaseMessage],
    policy: StopPolicy,
) -> StopRecord:
    """The run's end, as `StopOnArtifact.after_agent` makes it when the model answered."""
    last = history[-1]
    since = run_start(run)
    end = len(history) - 1
    turn = current_turn(history, since=since, end=end, earlier=False)
    if pending(turn, run):
        turn = current_turn(history, since=since, end=end)
    if run is None or not run["open"]:
        run = open_run(run, previous, policy, turn)
    _, run = begin_turn(run, turn, policy, remaining_steps=None, loop_steps=0, delivered=False)
    return ended_after(run, turn, last, history)["record"]


def prepared(
    message: BaseMessage, number: int, names: dict[str, str], *, artifacts: bool = True
) -> BaseMessage:
    """A copy of a recorded `message` as the agent's state would hold it: id `m{number}`
    (LangGraph gives each message an id; the lifecycle keys on it), a tool result named after
    its tool (`names`: call id to tool name, as the tool node names it), and without its
    artifact unless `artifacts` (as a plain stand-in returns it)."""
    copy = message.model_copy()
    copy.id = f"m{number}"
    if isinstance(copy, ToolMessage):
        if not artifacts:
            copy.artifact = None
        if copy.name is None:
            copy.name = names.get(copy.tool_call_id)
    return copy


def replay_begin(
    run: RunState | None,
    previous: StopRecord | None,
    history: list[Any],
    policy: StopPolicy,
    invocation: int,
) -> Begun:
    """`begin` for the next recorded model answer of a replay (no step limits: not recorded)."""
    return begin(
        run, previous, history, policy, invocation=invocation, remaining_steps=None, loop_steps=0
    )


def replay_answer(begun: Begun, answer: AIMessage, policy: StopPolicy) -> tuple[Any, RunState]:
    """`answered` for a recorded model answer, its usage estimated when none was recorded.

    The estimate is the test kit's model's, from what the model was sent."""
    if answer.usage_metadata is None:
        answer.usage_metadata = approximate_usage(to_model(begun.messages), answer)
    return answered(
        begun.run,
        answer,
        policy,
        remaining_steps=None,
        loop_steps=begun.needed,
        messages=begun.messages,
    )


def shadow_records(
    messages: Sequence[BaseMessage],
    policy: StopPolicy | None = None,
    *,
    artifacts: bool = False,
) -> list[StopRecord]:
    """The record of each run of a recorded conversation, as shadow mode writes them.

    Args:
        messages: The recorded conversation (a `Conversation`'s `messages`); not changed.
        policy: The policy in shadow mode (default `StopPolicy(mode="never")`).
        artifacts: Keep the tool results' recorded artifacts (a signal in one is decided on),
            as `replay(..., content_and_artifact=True)`'s stand-ins return them; by default
            they are dropped, as plain stand-ins (an agent without toolstop) return none.

    Returns:
        One record per user message, in order.

    Raises:
        Unreadable: the conversation's shape cannot be replayed (see `runs_of`).
    """
    policy = policy if policy is not None else StopPolicy(mode="never")
    runs = runs_of(messages)
    names = {
        str(c["id"]): c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls
    }
    history: list[Any] = []
    run: RunState | None = None
    previous: StopRecord | None = None
    records: list[StopRecord] = []
    count = 0
    for invocation, recorded in enumerate(runs):
        for message in recorded:
            copy = prepared(message, count, names, artifacts=artifacts)
            count += 1
            if not isinstance(copy, AIMessage):
                history.append(copy)
                continue
            answer, run = replay_answer(
                replay_begin(run, previous, history, policy, invocation), copy, policy
            )
            history.append(answer)
        record = _ending(run, previous, history, policy)
        records.append(record)
        previous = record
        if run is not None:
            run = {**run, "open": False}
    return records
