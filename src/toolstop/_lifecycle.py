"""What every router shell does around `decide`: run boundaries, the run's record, the relay.

The hand-built graph, the `create_agent` middleware and the legacy drop-in all call these, so the
record and the stop behave the same whichever shell runs them.

A run is explicit. It opens at the first model call after the agent is invoked with new input and
ends when its final answer (the model's, or a relay) has been given; only then is `stop_record`
written and published. Until then its bookkeeping lives in a private state channel, `RUN_KEY`
(checkpointed like any state, so a run interrupted by a human review continues when resumed).
Nothing is inferred from the type of the last message, so messages that other middleware adds
between the tool results and the next model call change nothing.

A run that never finished (cancelled, a tool that raised and failed the run, a worker that died)
leaves its run open in the last checkpoint. The thread's next run closes it (`close_aborted`):
its record is written and published with rule `interrupted`, the tool calls it left open are
answered with error ToolMessages before the model is called, and the new run is numbered and
counted afresh. A run resumed after a human review (`Command(resume=...)`) is not such a run.

Which invocation of the graph served a run is named by `toolstop._invocation.current` (LangGraph's
loop: a checkpoint id written for the invocation), not by arithmetic on its steps, so a later run
with another `recursion_limit` is never taken for the aborted one; a second run started on a
thread while one runs there is refused before its first model call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, NotRequired, TypeGuard, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from typing_extensions import TypedDict

from toolstop._judge import judge_turn, text_of
from toolstop._reask import asked_again, call_key
from toolstop._relay import holds_relay
from toolstop.decision import (
    Decision,
    Rule,
    Turn,
    budget_relay,
    content_text,
    current_turn,
    decide_turn,
)
from toolstop.observe import apublish_run_end, publish_run_end, publish_turn
from toolstop.policy import ArmContext, StopPolicy
from toolstop.record import (
    EndedAfter,
    Judged,
    ReAsk,
    StopRecord,
    count_model_call,
    failed_calls,
    fold_turn,
    fold_unanswered,
    new_record,
    reads_as_error,
    stopped,
)

__all__ = [
    "INTERRUPTED_ANSWER",
    "INTERRUPTED_TEXT",
    "RUN_KEY",
    "Aborted",
    "Begun",
    "RunState",
    "afinish",
    "answered",
    "begin",
    "begin_turn",
    "close_aborted",
    "ended_after",
    "finish",
    "for_run",
    "invocation_of",
    "last_answer",
    "left_open_calls",
    "open_run",
    "pending",
    "plain_answer",
    "relay_message",
    "repair_history",
    "run_start",
    "served",
    "turn_event",
]

RUN_KEY = "toolstop_run"
"""The state key of the run in progress (private: not part of an agent's input or output)."""


class RunState(TypedDict):
    """toolstop's bookkeeping of the run in progress (state key `toolstop_run`).

    Attributes:
        open: True from the run's first model call until its final answer was given.
        record: The run's record so far; copied to `stop_record` when the run ends.
        turn: The id of the AIMessage whose tool turn was last folded into the record, so a turn
            is never counted twice (a model call retried by other middleware sees it again).
        remaining: LangGraph's remaining steps at the run's last model call (measures the loop).
        loop: Steps from one model call to the next, when known (measured or read from the graph).
        tail: Steps from the final model call to the end of the run, when known.
        invocation: Which invocation of the graph last served this run (its name from
            `toolstop._invocation.current`: a checkpoint id LangGraph wrote for it; an int in
            runs checkpointed before, see `invocation_of`), so the next invocation can tell a
            resumed run from an aborted one.
        start: The id of the last message before the run began (its input): a stop relays
            results of this run only (see `toolstop.decision.current_turn`). Absent in runs
            checkpointed before it existed.
        answer: The id of the run's last model answer (see `last_answer`), so the run's end can
            tell the model's final answer from one another middleware wrote.
        relays: The thread holds a relay that showed an `answer` (see `toolstop._relay`): model
            calls are then sent the tools' content in its place. Kept from run to run.
        seen: The id of the last message looked at for such a relay (`relays` covers the
            messages up to it). Kept from run to run.
        again: While the record's `reask` says the user did not ask again: the keys
            (`toolstop._reask.call_key`) of the previous run's deciding calls; a call of this
            run with the same key is asking again (`same_call`).
        handoff: A hand-off held until its turn is answered (`toolstop.levels.defer_handoff`),
            from the tools until the next model call settles it.
    """

    open: bool
    record: StopRecord
    turn: str | None
    remaining: int | None
    loop: NotRequired[int | None]
    tail: NotRequired[int | None]
    invocation: NotRequired[int | str | None]
    start: NotRequired[str | None]
    answer: NotRequired[str | None]
    relays: NotRequired[bool]
    seen: NotRequired[str | None]
    again: NotRequired[list[str]]
    handoff: NotRequired[dict[str, Any]]


INTERRUPTED_TEXT = (
    "This tool call was interrupted before its result was recorded (the run ended abnormally: "
    "cancelled, failed or stopped). It may or may not have run. Call the tool again if its "
    "result is still needed."
)
"""The content of the error ToolMessage that answers a tool call an aborted run left open."""

INTERRUPTED_ANSWER = "(This request was interrupted before it finished.)"
"""The answer that closes an aborted run's tool turn in the history, before the next input."""


class Aborted(NamedTuple):
    """An earlier run of the thread that did not finish, as the next run found it.

    Attributes:
        record: Its record, closed with rule `interrupted` (to publish and to number from).
        messages: The thread's messages with every tool call it left open answered, when some
            were (else `None`: the history is valid as it is).
    """

    record: StopRecord
    messages: list[AnyMessage] | None

    def update(self) -> list[BaseMessage]:
        """The `messages` update that writes the repaired history (empty when none is needed).

        The answers must follow the call they answer, before the new input, so the whole list is
        written again; this happens once, on the first model call after an aborted run.
        """
        if self.messages is None:
            return []
        return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *self.messages]


def invocation_of(remaining_steps: int | None, config: Any) -> int | None:
    """A number that is the same for every node of one invocation of a graph (a fallback).

    Used when `toolstop._invocation.current` cannot name the invocation: LangGraph's step plus
    its remaining steps (the invocation's step limit). Two invocations of one thread can share
    it (a later one with a smaller `recursion_limit`), so it is used only when LangGraph's loop
    is out of reach. `None` when either is unknown."""
    metadata = (config or {}).get("metadata") or {}
    step = metadata.get("langgraph_step")
    if isinstance(step, int) and isinstance(remaining_steps, int):
        return step + remaining_steps
    return None


def left_open_calls(messages: Sequence[BaseMessage]) -> tuple[int, list[Any]]:
    """The last AIMessage's index and its tool calls that no ToolMessage after it answers."""
    answered_ids: set[str] = set()
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ToolMessage):
            answered_ids.add(message.tool_call_id)
        elif isinstance(message, AIMessage):
            return index, [c for c in message.tool_calls if c.get("id") not in answered_ids]
    return -1, []


def _new_input(messages: list[AnyMessage], after: int) -> bool:
    return any(isinstance(m, HumanMessage) for m in messages[after + 1 :])


def close_aborted(
    run: RunState | None,
    messages: list[AnyMessage],
    invocation: int | str | None,
    policy: StopPolicy | None = None,
) -> Aborted | None:
    """The thread's open run, when it belongs to an earlier invocation that did not finish.

    The run in state is open and was last served by another invocation, and either a tool call
    it made has no answer (it was cancelled or failed while its tools ran) or new user input
    follows its last model answer (it ended during a model call or a hook). A run resumed after
    an interrupt (a human review, `interrupt_before`) is neither: its calls are answered when
    the model is next due, and no user message came in between.

    Args:
        run: The run state in the graph.
        messages: The thread's messages as the model would get them.
        invocation: The current invocation (`toolstop._invocation.current`).
        policy: The stop policy, to account for a tool turn the aborted run had answered but
            not decided (its signals go into the closed record; nothing is delivered).

    Returns:
        `None` when there is nothing to close (the usual case: one check of a dict); otherwise
        the closed record and the repaired messages.
    """
    if run is None or not run["open"] or invocation == run.get("invocation"):
        return None
    at, left_open = left_open_calls(messages)
    if not left_open and not _new_input(messages, at):
        return None
    if not left_open and policy is not None:
        # its last tool turn was answered but the run ended before deciding it: account for it
        _, run = begin_turn(
            run, current_turn(messages), policy, remaining_steps=None, loop_steps=0, delivered=False
        )
    names = [str(c.get("name")) for c in left_open]
    record = StopRecord(
        **{
            # the calls left open came after every folded turn: a stop there skips them too
            **fold_unanswered(run["record"], names),
            "rule": Rule.INTERRUPTED.value,
            "stopped": False,
            "tools": names,
            "tool_call_ids": [str(c.get("id")) for c in left_open],
        }
    )
    return Aborted(record, repair_history(messages))


def repair_history(messages: list[AnyMessage]) -> list[AnyMessage] | None:
    """`messages` as an aborted run should have left them; `None` when they already are.

    Each tool call of the last AIMessage that nothing answered gets an error ToolMessage
    (`INTERRUPTED_TEXT`) right after it; when tool results are then followed by anything but an
    AIMessage (the new user input), an AIMessage marked as a relay with rule `interrupted` closes
    the aborted run's turn, since some providers (Mistral) refuse a user message after a tool
    result.
    """
    at, left_open = left_open_calls(messages)
    if at < 0:
        return None
    answers: list[AnyMessage] = [
        ToolMessage(
            content=INTERRUPTED_TEXT,
            name=c.get("name"),
            tool_call_id=str(c.get("id")),
            status="error",
        )
        for c in left_open
    ]
    end = at + 1
    while end < len(messages) and isinstance(messages[end], ToolMessage):
        end += 1
    results = answers or messages[at + 1 : end]
    follows = messages[end] if end < len(messages) else None
    closing: list[AnyMessage] = []
    if results and follows is not None and not isinstance(follows, AIMessage):
        closing = [relay_message(INTERRUPTED_ANSWER, Rule.INTERRUPTED)]
    if not answers and not closing:
        return None
    return [*messages[:end], *answers, *closing, *messages[end:]]


def served(run: RunState, invocation: int | str | None) -> RunState:
    """`run` marked as served by `invocation` (the same dict when it already is)."""
    if run.get("invocation") == invocation:
        return run
    return {**run, "invocation": invocation}


def run_start(run: RunState | None) -> str | None:
    """Where the open run began (`None` for no open run, or one that did not record it)."""
    if run is None or not run["open"]:
        return None
    return run.get("start")


def open_run(
    run: RunState | None,
    previous: StopRecord | None,
    policy: StopPolicy,
    turn: Turn | None,
    *,
    messages: Sequence[BaseMessage] = (),
    config: Any = None,
    sent_back: frozenset[str] | None = None,
) -> RunState:
    """The run a model call belongs to: the open one, or a new one.

    Args:
        run: The run state in the graph (`None` on a thread's first run).
        previous: The thread's last finished record, to number the new run. It numbers it only
            next to this router's run state: a `stop_record` without one was not written at
            this level (a parent copied its own into a sub-agent's input, as Deep Agents'
            `task` does), so the run is the level's first.
        policy: The stop policy (its mode and parallel rule go into the record).
        turn: The current tool turn, if any. A new run never decides a turn that was already in
            the messages it was invoked with: it belongs to an earlier run (or to the caller).
        messages: The messages at the run's first model call; a new run starts after the last.
        config: The run's config: its thread id places the thread in a canary's arm.
        sent_back: The tools the policy's way back sent back to `never` (`None`: ask it).
    """
    if run is not None and run["open"]:
        return run
    number = 1
    if run is not None and isinstance(previous, dict) and isinstance(previous.get("run"), int):
        number = previous["run"] + 1
    record = new_record(policy, run=number)
    again: list[str] = []
    if run is not None and isinstance(previous, dict) and messages:
        reask = _reask_of(previous, run, messages)
        if reask is not None:
            record["reask"], again = reask
    if policy.per_run:
        _arm_record(record, policy, messages, config, sent_back)
    opened = RunState(
        open=True,
        record=record,
        turn=turn.id if turn is not None else None,
        remaining=None,
        loop=run.get("loop") if run is not None else None,
        tail=run.get("tail") if run is not None else None,
        start=messages[-1].id if messages else None,
        relays=run.get("relays", False) if run is not None else False,
        seen=run.get("seen") if run is not None else None,
    )
    if again:
        opened["again"] = again
    return opened


def for_run(policy: StopPolicy, run: RunState | None) -> StopPolicy:
    """The policy as `run` applies it: with the modes its record names (a canary's arm)."""
    if not policy.per_run or run is None:
        return policy
    record = run["record"]
    return policy.with_modes(record["mode"], record.get("modes"))


def thread_key(config: Any, messages: Sequence[BaseMessage]) -> str:
    """What places a thread in a canary's arm: its id, else its first user message's text."""
    configurable = config.get("configurable") if isinstance(config, dict) else None
    thread = configurable.get("thread_id") if isinstance(configurable, dict) else None
    if thread is not None:
        return str(thread)
    for message in messages:
        if isinstance(message, HumanMessage):
            return content_text(message.content)[:4000]  # type: ignore[arg-type]
    return ""


def _arm_record(
    record: StopRecord,
    policy: StopPolicy,
    messages: Sequence[BaseMessage],
    config: Any,
    sent_back: frozenset[str] | None,
) -> None:
    """Put a new run's arm and modes into its `record` (in place: the record is new)."""
    if sent_back is None:
        sent_back = way_back_now(policy, config)
    context = ArmContext(
        thread=thread_key(config, messages),
        config=config if isinstance(config, dict) else {},
        tools=policy.canary_tools,
    )
    chosen = policy.run_modes(context, sent_back)
    record["mode"] = chosen.mode
    if chosen.arm is not None:
        record["arm"] = chosen.arm
    if chosen.modes:
        record["modes"] = chosen.modes
    if chosen.sent_back:
        record["sent_back"] = chosen.sent_back


def checkpointer_of(config: Any) -> Any:
    """The checkpointer of the graph running with `config` (`None` without one)."""
    configurable = config.get("configurable") if isinstance(config, dict) else None
    return configurable.get("__pregel_checkpointer") if isinstance(configurable, dict) else None


def way_back_now(policy: StopPolicy, config: Any) -> frozenset[str]:
    """The tools the policy's way back sends back now (read from the run's checkpointer)."""
    if policy.way_back is None:
        return frozenset()
    return frozenset(policy.way_back.sent_back(checkpointer_of(config)))


async def away_back_now(policy: StopPolicy, config: Any) -> frozenset[str]:
    """Async twin of `way_back_now` (an async checkpointer is read without blocking)."""
    if policy.way_back is None:
        return frozenset()
    return frozenset(await policy.way_back.asent_back(checkpointer_of(config)))


_ANSWERED_RULES = frozenset({Rule.COMPLETED.value, Rule.FATAL.value})
"""Rules under which a tool's result was (or would have been) the run's answer."""


def _reask_of(
    previous: StopRecord, run: RunState, messages: Sequence[BaseMessage]
) -> tuple[ReAsk, list[str]] | None:
    """Whether the user asked again after `previous` ended on (or would have ended on) a tool
    result, as far as the new input tells; and the keys of its deciding calls (`same_call`).

    `None` when the previous run did not end so, or its request is not in `messages`."""
    stopped_ = previous.get("stopped") is True and previous.get("rule") in _ANSWERED_RULES
    if not stopped_ and previous.get("would_stop") not in _ANSWERED_RULES:
        return None
    start = run.get("start")
    ids = previous.get("tool_call_ids")
    request = answer = message = None
    keys: list[str] = []
    wanted = set(ids) if isinstance(ids, list) else set()
    for index in range(len(messages) - 1, -1, -1):
        item = messages[index]
        if message is None:
            if isinstance(item, HumanMessage):
                message = item
            continue
        if answer is None and isinstance(item, AIMessage) and not item.tool_calls:
            answer = item
        if wanted and isinstance(item, AIMessage):
            for call in item.tool_calls:
                if call.get("id") in wanted:
                    keys.append(call_key(str(call.get("name")), call.get("args")))
        if start is not None and item.id == start:
            request = item
            break
    if message is None or request is None:
        return None
    why = asked_again(
        content_text(request.content),  # type: ignore[arg-type]
        content_text(answer.content) if answer is not None else None,  # type: ignore[arg-type]
        content_text(message.content),  # type: ignore[arg-type]
    )
    reask = ReAsk(
        run=int(previous.get("run") or 0),
        asked_again=why is not None,
        why=why or "none",
        stopped=stopped_,
        tools=list(previous.get("tools") or [])[:16],
    )
    arm = previous.get("arm")
    if isinstance(arm, str):
        reask["arm"] = arm
    return reask, ([] if why is not None else keys)


def _asked_again_by_call(run: RunState, turn: Turn) -> RunState:
    """`run` with its `reask` turned to `same_call` when `turn` repeats a call of the previous
    run's deciding calls (name and arguments); nothing changes otherwise."""
    again = run.get("again")
    if not again or turn.asking is None:
        return run
    for call in turn.asking.tool_calls:
        if call_key(str(call.get("name")), call.get("args")) in again:
            record = run["record"]
            reask = {**record["reask"], "asked_again": True, "why": "same_call"}
            updated: RunState = {**run, "record": {**record, "reask": reask}}  # type: ignore[typeddict-item]
            updated.pop("again", None)
            return updated
    return run


def pending(turn: Turn | None, run: RunState | None) -> TypeGuard[Turn]:
    """True when `turn` has results that `run` has not folded into its record yet.

    A turn is folded once: `run["turn"]` is the id of the last one folded (a model call retried
    by other middleware, or the run's end, sees the same turn again).
    """
    if turn is None or not turn.results:
        return False
    asking = turn.asking  # `turn.id`, without the property call (this runs on every model call)
    return run is None or asking is None or asking.id is None or asking.id != run["turn"]


def begin_turn(
    run: RunState,
    turn: Turn | None,
    policy: StopPolicy,
    *,
    remaining_steps: int | None,
    loop_steps: int,
    delivered: bool = True,
) -> tuple[Decision | None, RunState]:
    """Decide the run's pending tool turn and fold it into the record (once per turn).

    Args:
        run: The open run.
        turn: The current tool turn (see `toolstop.decision.current_turn`).
        policy: The stop policy.
        remaining_steps: LangGraph's remaining steps at the node that would call the model.
        loop_steps: The steps a further tool turn needs from that node (see `decide`).
        delivered: Whether a stop it decides is delivered (False: another middleware already
            ended the run; the turn is only accounted for).

    Returns:
        `(None, run)` when there is no turn to decide (a run's first model call, or a turn
        already folded); otherwise the decision and the run with the turn folded in (and its
        record marked stopped when the decision stops).
    """
    if not pending(turn, run):
        return None, run
    return _decided(run, turn, policy, remaining_steps, loop_steps, delivered)


def _decided(
    run: RunState,
    turn: Turn,
    policy: StopPolicy,
    remaining_steps: int | None,
    loop_steps: int,
    delivered: bool,
) -> tuple[Decision, RunState]:
    """`begin_turn` for a turn known to be pending."""
    if "again" in run:
        run = _asked_again_by_call(run, turn)
    record = run["record"]
    decision = decide_turn(
        turn,
        for_run(policy, run) if policy.per_run else policy,
        transient_count=record["transient_retries"],
        remaining_steps=remaining_steps,
        loop_steps=loop_steps,
    )
    record = fold_turn(record, decision, failed_calls(record, decision, turn.results))
    if decision.stop and delivered:
        record = stopped(record, decision)
    return decision, {**run, "record": record, "turn": turn.id}


class Begun(NamedTuple):
    """What a model request starts from (see `begin`).

    Attributes:
        decision: The decision on the run's pending tool turn (`None`: no turn to decide).
        run: The run, with that turn folded into its record and marked as served.
        turn: The pending tool turn as it is in the messages (`None` when there is none).
        aborted: An earlier run of the thread this request closed, if any.
        messages: The messages the model gets (the repaired ones after an aborted run).
        needed: The steps a further tool turn needs from this model call (see `decide`).
        relays: Whether `messages` hold a relay that showed an `answer`: only then must the
            model be sent them through `toolstop._relay.to_model`.
    """

    decision: Decision | None
    run: RunState
    turn: Turn | None
    aborted: Aborted | None
    messages: list[AnyMessage]
    needed: int
    relays: bool = True


def begin(
    run: RunState | None,
    previous: StopRecord | None,
    messages: list[AnyMessage],
    policy: StopPolicy,
    *,
    invocation: int | str | None,
    remaining_steps: int | None,
    loop_steps: int | Callable[[RunState], tuple[RunState, int]],
    as_said: Callable[[Turn], Turn | None] | None = None,
    config: Any = None,
    sent_back: frozenset[str] | None = None,
) -> Begun:
    """Everything a router does when the model is next due, in one call.

    Closes an earlier run that did not finish (`close_aborted`), opens the run or continues it
    (`open_run`), and decides its pending tool turn and folds it into the record once
    (`begin_turn`). The turn is read without its earlier turns (`current_turn(earlier=False)`)
    unless it stops: only a stop's relay shows them, so a turn that goes on reads the messages
    back to its own AIMessage only.

    Args:
        run: The run state in the graph.
        previous: The thread's last finished record (`stop_record`), to number a new run.
        messages: The thread's messages.
        policy: The stop policy.
        invocation: The current invocation (see `toolstop._invocation.current`).
        remaining_steps: LangGraph's remaining steps at this node.
        loop_steps: The steps a further tool turn needs from this node, or a function of the
            (open) run that returns it with the run (the middleware reads or measures its
            graph's shape into the run).
        as_said: What the tools said, given the turn in the messages (the middleware's view of
            results a reviewer edited); the turn is decided as it returns it.
        config: The node's config (a canary places the thread by its id).
        sent_back: The tools a way back sent back, read by an async router beforehand
            (`away_back_now`); `None`: read here when a new run needs it.
    """
    aborted = None
    if run is not None and run["open"] and invocation != run.get("invocation"):
        aborted = close_aborted(run, messages, invocation, policy)
        if aborted is not None:
            run, previous = {**run, "open": False}, aborted.record
            if aborted.messages is not None:
                messages = aborted.messages
    since = run.get("start") if run is not None and run["open"] else None
    turn = current_turn(messages, since=since, earlier=False)
    if run is None or not run["open"]:
        run = open_run(
            run, previous, policy, turn, messages=messages, config=config, sent_back=sent_back
        )
    if isinstance(loop_steps, int):
        needed = loop_steps
    else:
        run, needed = loop_steps(run)
    decision = None
    if pending(turn, run):
        said = as_said(turn) if as_said is not None else turn
        decision, decided = (
            _decided(run, said, policy, remaining_steps, needed, True)
            if said is not None
            else (None, run)
        )
        if decision is not None and decision.stop:  # its relay shows the run's earlier turns
            turn = current_turn(messages, since=since)
            said = as_said(turn) if as_said is not None and turn is not None else turn
            decision, decided = begin_turn(
                run, said, policy, remaining_steps=remaining_steps, loop_steps=needed
            )
        run = decided
    relays = run.get("relays") is True or holds_relay(messages, run.get("seen"))
    run = {
        **run,
        "invocation": invocation,
        "relays": relays,
        "seen": messages[-1].id if messages else None,
    }
    return Begun(decision, run, turn, aborted, messages, needed, relays)


def turn_event(decision: Decision | None, turn: Turn | None, run: RunState) -> None:
    """Publish a decided turn as a stream event (nothing when there was no turn)."""
    if decision is not None and turn is not None:
        publish_turn(decision, turn, run["record"])


def answered(
    run: RunState,
    response: AIMessage,
    policy: StopPolicy,
    *,
    remaining_steps: int | None,
    loop_steps: int,
    name: str | None = None,
    messages: Sequence[BaseMessage] = (),
) -> tuple[AIMessage, RunState]:
    """Count a model call; replace a tool-calling answer that could not finish in the steps left.

    Returns the answer to keep (the model's, or a step-budget relay with no tool calls, so the
    history stays valid) and the updated run. The relay is what any budget stop shows: the
    run's completed results in `messages` (the ones the model saw) that no text answered, then
    the policy's step-budget text. The run's loop is measured from the steps between this model
    call and the previous one.
    """
    record = count_model_call(run["record"], response)
    if response.tool_calls and remaining_steps is not None and remaining_steps <= loop_steps:
        # an empty answer (no text, no calls) answered nothing: the results before it still show
        said = [m for m in messages if not _empty_answer(m)]
        turn = current_turn(said, since=run_start(run)) if said else None
        relay, relayed, for_model = budget_relay(turn, policy)
        record = StopRecord(
            **{
                **record,
                "rule": Rule.STEP_BUDGET.value,
                "stopped": True,
                "relayed": list(relayed),
            }
        )
        response = relay_message(relay, Rule.STEP_BUDGET, name=name, for_model=for_model)
    updated: RunState = {**run, "record": record, "remaining": remaining_steps}
    if response.id is not None:
        updated["answer"] = response.id
    previous = run["remaining"]
    if remaining_steps is not None and previous is not None and previous > remaining_steps:
        updated["loop"] = previous - remaining_steps
    return response, updated


def _empty_answer(message: BaseMessage) -> bool:
    """An AIMessage with neither text nor tool calls (a model's empty answer)."""
    return (
        isinstance(message, AIMessage)
        and not message.tool_calls
        and not content_text(message.content).strip()  # type: ignore[arg-type]
    )


def last_answer(run: RunState, response: BaseMessage) -> RunState:
    """`run` remembering `response` as its last model answer (for `ended_after`)."""
    return {**run, "answer": response.id}


_WORD = re.compile(r"\w+")
_JUDGED_CHARS = 200_000
"""A result or answer longer than this is judged on its first characters (bounded work)."""


_EARLIER_RESULTS = 64
"""At most this many earlier results (the most recent) are read for an answer's other facts."""
_EARLIER_MESSAGES = 1000
"""...found among at most this many messages before the turn (bounded work per run end)."""


def _earlier_results(
    messages: Sequence[BaseMessage], asking: AIMessage | None
) -> list[tuple[str, str]]:
    """`(tool, text)` of the results the model saw before the turn `asking` asked for, oldest
    first: at most `_EARLIER_RESULTS` of the `_EARLIER_MESSAGES` messages before it, in all at
    most `_JUDGED_CHARS` characters. Empty when `asking` is not among `messages`."""
    if asking is None:
        return []
    at = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if messages[i] is asking or (asking.id is not None and messages[i].id == asking.id)
        ),
        None,
    )
    if at is None:
        return []
    found: list[tuple[str, str]] = []
    left = _JUDGED_CHARS
    for message in reversed(messages[max(0, at - _EARLIER_MESSAGES) : at]):
        if isinstance(message, ToolMessage):
            text = text_of(message.content)[:left]
            found.append((str(message.name or "?"), text))
            left -= len(text)
            if left <= 0 or len(found) >= _EARLIER_RESULTS:
                break
    found.reverse()
    return found


def _judged(
    results: Sequence[str],
    answer: str,
    earlier: Callable[[], list[tuple[str, str]]] = list,
) -> Judged | None:
    """`toolstop._judge.judge_turn` of a tool's results of the turn and the answer, on their
    first `_JUDGED_CHARS` characters; `None` (the tool is left out of `judged`) should judging
    fail, so the run's record is still written. An answer judged `computed` is judged again
    with the `earlier` results (read only then): a number from one of them is restated, not
    computed."""
    try:
        judged = judge_turn(results, answer, limit=_JUDGED_CHARS)
        if judged["action"] == "computed":
            judged = judge_turn(results, answer, earlier(), limit=_JUDGED_CHARS)
        return cast(Judged, judged)
    except Exception:  # a heuristic must never break the end of a run
        return None


def answer_overlap(answer: str, source: str) -> float:
    """The share (0..1, four decimals) of `answer`'s case-folded word tokens that also occur in
    `source`; 0.0 for an answer without words.

    A result is long and an answer short, so each of the answer's words is looked up in the
    source's text (`_holds_word`) rather than the source cut into its words; only a word found
    inside many longer words makes the source be read into them."""
    words = _WORD.findall(answer.casefold())
    if not words:
        return 0.0
    folded = source.casefold()
    tokens: set[str] | None = None
    known: dict[str, bool] = {}
    found = 0
    for word in words:
        hit = known.get(word)
        if hit is None:
            hit = _holds_word(folded, word)
            if hit is None:
                if tokens is None:
                    tokens = set(_WORD.findall(folded))
                hit = word in tokens
            known[word] = hit
        found += hit
    return round(found / len(words), 4)


_LOOKED_AT = 4
"""How many places of a word `_holds_word` looks at before it gives up (returns `None`)."""


def _holds_word(text: str, word: str) -> bool | None:
    """Whether `word` (a run of word characters) is one of `text`'s words (`\\w+` tokens):
    found with no word character on either side. `None` when it is only found inside longer
    words at its first `_LOOKED_AT` places (decided by reading `text` into its words)."""
    start = text.find(word)
    looked = 0
    while start != -1:
        end = start + len(word)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        # `\w` is a character for which `str.isalnum()` holds, or `_`
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        looked += 1
        if looked == _LOOKED_AT:
            return None
        start = text.find(word, start + 1)
    return False


def ended_after(
    run: RunState,
    turn: Turn | None,
    answer: BaseMessage | None,
    messages: Sequence[BaseMessage] = (),
) -> RunState:
    """`run` with `ended_after` recorded, when the model's final answer followed a tool turn.

    Recorded when `answer` is the model's final answer right after one of the run's tool turns
    (see `StopRecord.ended_after`); `run` is returned as it is otherwise.

    Computed once, at the run's end: O(length of the answer and of the turn's results).

    Args:
        run: The run that ends.
        turn: The tool turn right before the final answer (`current_turn` of the messages
            without the answer), if any.
        answer: The final answer, when it is a model answer (`None` for a relay). It must be
            the run's last model answer (`last_answer` / `answered`), else another middleware
            wrote it and nothing is recorded.
        messages: The thread's messages (the turn's among them): an answer that states a
            number the turn's result does not hold is judged against the results before the
            turn too (`toolstop._judge`: restated from them, or computed). Without them, such
            an answer is `computed`.
    """
    record = run["record"]
    if (
        answer is None
        or not isinstance(answer, AIMessage)
        or answer.tool_calls
        or answer.id is None
        or answer.id != run.get("answer")
        or turn is None
        or not turn.results
        or not record["tool_turns"]  # the turn came with the run's input: not this run's
    ):
        return run
    text = text_of(answer.content)
    names = {c.get("id"): c["name"] for c in turn.asking.tool_calls} if turn.asking else {}
    by_tool: dict[str, list[str]] = {}
    errors: dict[str, bool] = {}
    for result in turn.results:
        name = names.get(result.tool_call_id) or result.name or "?"
        by_tool.setdefault(name, []).append(text_of(result.content))
        error = getattr(result, "status", "success") == "error" or reads_as_error(result.content)
        errors[name] = errors.get(name, True) and error
    usage = answer.usage_metadata
    tools = {}
    judged: dict[str, Judged] = {}
    read: list[list[tuple[str, str]]] = []

    def earlier() -> list[tuple[str, str]]:
        if not read:  # read once per run end, and only for an answer judged `computed`
            read.append(_earlier_results(messages, turn.asking))
        return read[0]

    for tool, parts in by_tool.items():
        source = parts[0] if len(parts) == 1 else " ".join(parts)
        tools[tool] = answer_overlap(text, source)
        features = _judged(parts, text, earlier)
        if features is not None and errors[tool]:
            # an error never served as the answer as is, whatever the answer repeats; its shape
            # is `error` whatever the framework made of it (an SDK's retry prompt may be empty)
            features = Judged(shape="error", action="failed", fields=[])
        if features is not None:
            judged[tool] = features
    found: EndedAfter = {
        "tools": tools,
        "input_tokens": usage["input_tokens"] if usage else 0,
        "output_tokens": usage["output_tokens"] if usage else 0,
        "judged": judged,
    }
    return {**run, "record": {**record, "ended_after": found}}


def finish(run: RunState, config: Any) -> tuple[StopRecord, RunState]:
    """End the run: its record is final and published. Returns the record and the closed run."""
    record = run["record"]
    publish_run_end(record, config)
    return record, {**run, "open": False}


async def afinish(run: RunState, config: Any) -> tuple[StopRecord, RunState]:
    """Async twin of `finish`: async callback handlers get the run's end on the event loop.

    Sync handlers get it as langchain-core runs sync handlers in async code."""
    record = run["record"]
    await apublish_run_end(record, config)
    return record, {**run, "open": False}


def relay_message(
    content: Any, rule: Rule, *, name: str | None = None, for_model: Any = None
) -> AIMessage:
    """The final AIMessage of a stop. Marked in `response_metadata`, which is never sent.

    `name` is the agent's name, so multi-agent setups attribute the relay like the model's own
    answers. `for_model` (`Decision.for_model`) is kept in the mark when the relay shows an
    `answer`: later model calls see it in place of the content (`toolstop._relay.to_model`).
    """
    mark: dict[str, Any] = {"relay": True, "rule": rule.value}
    if for_model is not None:
        mark["for_model"] = for_model
    return AIMessage(content=content, name=name, response_metadata={"toolstop": mark})


def plain_answer(response: BaseMessage, *, answered_ids: frozenset[str] = frozenset()) -> AIMessage:
    """A narrated (polish) answer as an AIMessage without tool calls left unanswered.

    A stray tool call would leave a call unanswered and the history invalid, so it is dropped
    (the text is kept). Calls in `answered_ids` are kept: something else answers them in the
    same step (`create_agent`'s structured-output tool).
    """
    if not isinstance(response, AIMessage):
        return AIMessage(content=response.content, id=response.id)
    stray = [c for c in response.tool_calls if c.get("id") not in answered_ids]
    if not stray and not response.invalid_tool_calls:
        return response
    kept = [c for c in response.tool_calls if c.get("id") in answered_ids]
    return AIMessage(
        content=response.content,
        id=response.id,
        name=response.name,
        tool_calls=kept,
        usage_metadata=response.usage_metadata,
        response_metadata=response.response_metadata,
    )
