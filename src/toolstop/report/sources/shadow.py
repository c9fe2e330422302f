"""The stop records shadow mode would have written for a recorded conversation, without an agent.

`shadow_records(messages)` runs toolstop's own run lifecycle (`toolstop._lifecycle`: `begin`,
`answered`, `begin_turn`, `ended_after`, as `StopOnArtifact` calls them) over the recorded
messages, one model call at a time, instead of replaying them through `create_agent`: the
records are the ones the middleware writes when the recording is replayed through an unchanged
`create_agent` with `StopOnArtifact(StopPolicy(mode="never"))`, the scripted model and the
stand-in tools of `toolstop.testing.replay` (tests/test_sources_shadow.py compares them field
for field), at a fraction of the cost.

The conversation is cut into runs by the rule every reader shares
(`toolstop.report.sources._runs.segment`): a user message starts a run, as in shadow mode; a run
left open on a tool call or on tool results is closed as the thread's next run closes it in
shadow mode (`left_open`). An answer without recorded usage gets an estimate
(`toolstop._tokens`: the messages the model saw, the tool definitions the log gives, and the
answer), each message counted once, so a replay takes time linear in its length.

Deliberately not handled: system messages (the replayed agent has its own prompt, so they are
neither replayed nor counted in an estimate), the step budget (runs are taken as LangGraph ran
them, with no recursion limit), and the turns another middleware would change (human review,
call limits, summarization).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from toolstop._lifecycle import (
    Begun,
    RunState,
    answered,
    begin,
    begin_turn,
    close_aborted,
    ended_after,
    open_run,
    pending,
    run_start,
)
from toolstop._tokens import RunningCount
from toolstop.decision import Decision, Turn, current_turn
from toolstop.policy import StopPolicy
from toolstop.record import StopRecord
from toolstop.report.sources._base import Unreadable
from toolstop.report.sources._runs import Segments, ending, runs_of, segment

__all__ = [
    "Replayed",
    "left_open",
    "limit_ending",
    "replay_answer",
    "replay_begin",
    "replay_records",
    "runs_of",
    "shadow_records",
]


def _ended(
    run: RunState | None,
    previous: StopRecord | None,
    history: list[BaseMessage],
    policy: StopPolicy,
    *,
    delivered: bool,
) -> tuple[Decision | None, RunState, Turn | None]:
    """What `StopOnArtifact.after_agent` does first at a run's end (its last message last in
    `history`): the turn before it decided and folded in once (a stop `delivered` or not)."""
    since = run_start(run)
    end = len(history) - 1
    turn = current_turn(history, since=since, end=end, earlier=False)
    if pending(turn, run):
        turn = current_turn(history, since=since, end=end)
    if run is None or not run["open"]:
        run = open_run(run, previous, policy, turn)
    decision, run = begin_turn(
        run, turn, policy, remaining_steps=None, loop_steps=0, delivered=delivered
    )
    return decision, run, turn


def _ending(
    run: RunState | None,
    previous: StopRecord | None,
    history: list[BaseMessage],
    policy: StopPolicy,
) -> StopRecord:
    """The run's end, as `StopOnArtifact.after_agent` makes it when the model answered."""
    _, run, turn = _ended(run, previous, history, policy, delivered=False)
    return ended_after(run, turn, history[-1], history)["record"]


def limit_ending(
    run: RunState | None,
    previous: StopRecord | None,
    history: list[BaseMessage],
    policy: StopPolicy,
) -> tuple[StopRecord, Decision | None]:
    """The end of a run `ModelCallLimitMiddleware` ended (its message last in `history`).

    As `StopOnArtifact.after_agent` makes it: the turn no model call read decided and
    delivered; a stop replaces the message with its relay (the decision is returned), otherwise
    the record says `ended_by`."""
    decision, run, _ = _ended(run, previous, history, policy, delivered=True)
    record = run["record"]
    if decision is not None and decision.stop:
        return StopRecord(**{**record, "relayed": list(decision.relayed)}), decision
    limited = StopRecord(
        **{
            **record,
            "ended_by": "ModelCallLimitMiddleware",
            "ended_by_message": str(history[-1].content),
        }
    )
    return limited, None


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


def replay_answer(
    begun: Begun, answer: AIMessage, policy: StopPolicy, count: RunningCount
) -> tuple[Any, RunState]:
    """`answered` for a recorded model answer, its usage estimated when none was recorded.

    The estimate is `count`'s, from what the model was sent (`count` holds the replay's
    running sum: one per conversation)."""
    if answer.usage_metadata is None:
        answer.usage_metadata = count.usage(begun.messages, answer)
    return answered(
        begun.run,
        answer,
        policy,
        remaining_steps=None,
        loop_steps=begun.needed,
        messages=begun.messages,
    )


class Replayed:
    """The state a replay carries from one recorded message to the next (see `shadow_records`).

    Attributes:
        names: Call id to tool name, over the conversation's runs (to name tool results).
        history: The thread's messages as the agent's state holds them.
        run: The run state (`None` before the first model call).
        previous: The thread's last finished record.
        records: The records written so far, one per run.
        count: Messages prepared so far (their ids are `m0`, `m1`, ...).
    """

    def __init__(self, segments: Segments) -> None:
        """A thread about to replay `segments`: its history holds their context."""
        self.names = {
            str(c["id"]): c["name"]
            for run in segments.runs
            for m in run
            if isinstance(m, AIMessage)
            for c in m.tool_calls
        }
        self.run: RunState | None = None
        self.previous: StopRecord | None = None
        self.records: list[StopRecord] = []
        self.count = 0
        self.history: list[Any] = [self.prepared(m) for m in segments.context]

    def prepared(self, message: BaseMessage, **kwargs: Any) -> BaseMessage:
        """The next recorded message as the state holds it (see `prepared`)."""
        copy = prepared(message, self.count, self.names, **kwargs)
        self.count += 1
        return copy

    def begin(self, policy: StopPolicy, invocation: int) -> Begun:
        """`replay_begin` for the next model call.

        A run left open before it is closed first, its record written, as the thread's next
        run closes it (`close_aborted`)."""
        begun = replay_begin(self.run, self.previous, self.history, policy, invocation)
        if begun.aborted is not None:
            self.finished(begun.aborted.record)
            if begun.aborted.messages is not None:  # the calls it left open, answered
                self.history = self._with_ids(begun.messages)
                begun = begun._replace(messages=self.history)
        return begun

    def _with_ids(self, messages: Sequence[Any]) -> list[Any]:
        """`messages` with an id on each message that has none (as LangGraph's reducer gives)."""
        out = []
        for message in messages:
            if message.id is None:
                message = message.model_copy()
                message.id = f"r{self.count}"
                self.count += 1
            out.append(message)
        return out

    def finished(self, record: StopRecord) -> None:
        """A run's record is written: it numbers the next run."""
        self.records.append(record)
        self.previous = record
        if self.run is not None:
            self.run = {**self.run, "open": False}

    def close(self, policy: StopPolicy, invocation: int) -> None:
        """Close the run the conversation leaves open on a tool call or result, if any."""
        if self.run is not None and self.run["open"]:
            self.finished(left_open(self.run, self.history, policy, invocation))


def left_open(run: RunState, history: list[Any], policy: StopPolicy, invocation: int) -> StopRecord:
    """The record of a run a recording leaves open on a tool call or on tool results.

    It is the record shadow mode writes when the thread's next run closes such a run
    (`close_aborted`): rule `interrupted`, the calls left open in `tools`, results no model
    call read folded in (their tools `ended_on_it`). `invocation` is the next run's."""
    closing = close_aborted(run, [*history, HumanMessage("", id="next")], invocation, policy)
    if closing is None:  # not a run left open: a replay never gets here
        msg = "the run is not left open on a tool call or result"
        raise Unreadable(msg)
    return closing.record


def replay_records(
    segments: Segments,
    policy: StopPolicy | None = None,
    *,
    artifacts: bool = False,
    tools: Sequence[Mapping[str, Any]] = (),
) -> list[StopRecord]:
    """The record of each replayable run of a segmented conversation (see `shadow_records`)."""
    policy = policy if policy is not None else StopPolicy(mode="never")
    thread = Replayed(segments)
    tokens = RunningCount(tools)
    for invocation, recorded in enumerate(segments.runs):
        end = ending(recorded)
        for message in recorded:
            copy = thread.prepared(message, artifacts=artifacts)
            if not isinstance(copy, AIMessage) or (end == "limit" and message is recorded[-1]):
                thread.history.append(copy)
                continue
            begun = thread.begin(policy, invocation)
            answer, thread.run = replay_answer(begun, copy, policy, tokens)
            thread.history.append(answer)
        if end == "limit":
            record, _ = limit_ending(thread.run, thread.previous, thread.history, policy)
            thread.finished(record)
        elif end == "answer":
            thread.finished(_ending(thread.run, thread.previous, thread.history, policy))
        # else left open: the next run's first model call closes it, or `close` below
    thread.close(policy, len(segments.runs))
    return thread.records


def shadow_records(
    messages: Sequence[BaseMessage],
    policy: StopPolicy | None = None,
    *,
    artifacts: bool = False,
    tools: Sequence[Mapping[str, Any]] = (),
) -> list[StopRecord]:
    """The record of each run of a recorded conversation, as shadow mode writes them.

    A run left open on a tool call or on tool results (a hand-off, a step limit) gets the
    record shadow mode writes when the thread's next run closes it (rule `interrupted`); user
    messages at the end nobody answered, and runs a replay cannot reproduce, get none (see
    `toolstop.report.sources._runs`: `segment` says how many).

    Args:
        messages: The recorded conversation (a `Conversation`'s `messages`); not changed.
        policy: The policy in shadow mode (default `StopPolicy(mode="never")`).
        artifacts: Keep the tool results' recorded artifacts (a signal in one is decided on),
            as `replay(..., content_and_artifact=True)`'s stand-ins return them; by default
            they are dropped, as plain stand-ins (an agent without toolstop) return none.
        tools: The tool definitions each model call was sent, where the log has them
            (`Conversation.tools`): counted in the estimate of each call without usage.

    Returns:
        One record per replayable run, in order.
    """
    return replay_records(segment(messages), policy, artifacts=artifacts, tools=tools)
