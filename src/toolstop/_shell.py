"""What every router shell does around `decide`: run boundaries, the run's record, the relay.

The hand-built graph, the `create_agent` middleware and the legacy drop-in all call these, so the
record and the stop behave the same whichever shell runs them.

A run is explicit. It opens at the first model call after the agent is invoked with new input and
ends when its final answer (the model's, or a relay) has been given; only then is `stop_record`
written and published. Until then its bookkeeping lives in a private state channel, `RUN_KEY`
(checkpointed like any state, so a run interrupted by a human review continues when resumed).
Nothing is inferred from the type of the last message, so messages that other middleware adds
between the tool results and the next model call change nothing.
"""

from __future__ import annotations

from typing import Any, NotRequired

from langchain_core.messages import AIMessage, BaseMessage
from typing_extensions import TypedDict

from toolstop.decision import Decision, Rule, Turn, decide_turn
from toolstop.observe import apublish_run_end, publish_run_end, publish_turn
from toolstop.policy import StopPolicy
from toolstop.record import StopRecord, count_model_call, fold_turn, new_record, stopped

__all__ = [
    "RUN_KEY",
    "RunState",
    "afinish",
    "answered",
    "begin_turn",
    "finish",
    "open_run",
    "plain_answer",
    "relay_message",
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
    """

    open: bool
    record: StopRecord
    turn: str | None
    remaining: int | None
    loop: NotRequired[int | None]
    tail: NotRequired[int | None]


def open_run(
    run: RunState | None,
    previous: StopRecord | None,
    policy: StopPolicy,
    turn: Turn | None,
) -> RunState:
    """The run a model call belongs to: the open one, or a new one.

    Args:
        run: The run state in the graph (`None` on a thread's first run).
        previous: The thread's last finished record, to number the new run.
        policy: The stop policy (its mode and parallel rule go into the record).
        turn: The current tool turn, if any. A new run never decides a turn that was already in
            the messages it was invoked with: it belongs to an earlier run (or to the caller).
    """
    if run is not None and run["open"]:
        return run
    number = previous["run"] + 1 if previous and isinstance(previous.get("run"), int) else 1
    return RunState(
        open=True,
        record=new_record(policy, run=number),
        turn=turn.id if turn is not None else None,
        remaining=None,
        loop=run.get("loop") if run is not None else None,
        tail=run.get("tail") if run is not None else None,
    )


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
    if turn is None or not turn.results or (turn.id is not None and turn.id == run["turn"]):
        return None, run
    record = run["record"]
    decision = decide_turn(
        turn,
        policy,
        transient_count=record["transient_retries"],
        remaining_steps=remaining_steps,
        loop_steps=loop_steps,
    )
    record = fold_turn(record, decision)
    if decision.stop and delivered:
        record = stopped(record, decision)
    return decision, {**run, "record": record, "turn": turn.id}


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
) -> tuple[AIMessage, RunState]:
    """Count a model call; replace a tool-calling answer that could not finish in the steps left.

    Returns the answer to keep (the model's, or the policy's step-budget text with no tool calls,
    so the history stays valid) and the updated run. The run's loop is measured from the steps
    between this model call and the previous one.
    """
    record = count_model_call(run["record"], response)
    if response.tool_calls and remaining_steps is not None and remaining_steps <= loop_steps:
        record = StopRecord(**{**record, "rule": Rule.STEP_BUDGET.value, "stopped": True})
        response = relay_message(policy.step_budget_message, Rule.STEP_BUDGET, name=name)
    updated: RunState = {**run, "record": record, "remaining": remaining_steps}
    previous = run["remaining"]
    if remaining_steps is not None and previous is not None and previous > remaining_steps:
        updated["loop"] = previous - remaining_steps
    return response, updated


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


def relay_message(content: Any, rule: Rule, *, name: str | None = None) -> AIMessage:
    """The final AIMessage of a stop. Marked in `response_metadata`, which is never sent.

    `name` is the agent's name, so multi-agent setups attribute the relay like the model's own
    answers.
    """
    return AIMessage(
        content=content,
        name=name,
        response_metadata={"toolstop": {"relay": True, "rule": rule.value}},
    )


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
