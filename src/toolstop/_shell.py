"""What every router shell does around `decide`: keep the run's record, relay, guard the steps.

The hand-built graph, the `create_agent` middleware and the legacy drop-in all call these, so the
record and the stop behave the same whichever shell runs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop.decision import Decision, Rule, decide
from toolstop.observe import publish_run_end, publish_turn
from toolstop.policy import StopPolicy
from toolstop.record import StopRecord, count_model_call, fold_turn, new_record, stopped

__all__ = [
    "AGENT_STEPS",
    "after_model",
    "plain_answer",
    "publish_run_end",
    "relay_message",
    "remaining_from_config",
    "turn_start",
]

AGENT_STEPS = 3
"""Steps a tool-calling answer still needs from the model's step: tools, one more node, plus one."""


def remaining_from_config(config: Mapping[str, Any] | None) -> int | None:
    """LangGraph's remaining steps at the running node, from its config (None when unknown)."""
    if not config:
        return None
    step = (config.get("metadata") or {}).get("langgraph_step")
    limit = config.get("recursion_limit")
    if isinstance(step, int) and isinstance(limit, int):
        return limit - step
    return None


def turn_start(
    messages: Sequence[BaseMessage],
    record: StopRecord | None,
    policy: StopPolicy,
    *,
    remaining_steps: int | None,
) -> tuple[Decision | None, StopRecord]:
    """Where a run stands when a node after the tools (model, finalize, polish) starts.

    Args:
        messages: The thread's messages.
        record: The run's record so far (`None` at the start of a thread).
        policy: The stop policy.
        remaining_steps: The node's remaining steps. Nodes run one step after the tools step
            whose view `decide` takes, so one is added here.

    Returns:
        `(None, new record)` when a new run starts (the last message is not a tool result);
        otherwise the turn's decision and the record with the turn folded in (and marked
        stopped when the decision stops). The turn is published as a stream event.
    """
    if record is None or not messages or not isinstance(messages[-1], ToolMessage):
        return None, new_record(policy)
    decision = decide(
        messages,
        policy,
        transient_count=record["transient_retries"],
        remaining_steps=None if remaining_steps is None else remaining_steps + 1,
    )
    record = fold_turn(record, decision)
    if decision.stop:
        record = stopped(record, decision)
    publish_turn(decision, messages, record)
    return decision, record


def after_model(
    record: StopRecord,
    response: AIMessage,
    policy: StopPolicy,
    *,
    remaining_steps: int | None,
    config: Any = None,
) -> tuple[AIMessage, StopRecord]:
    """Count a model call; replace a tool-calling answer that could not finish in the steps left.

    Returns the answer to keep (the model's, or the policy's step-budget text with no tool calls,
    so the history stays valid) and the updated record. An answer without tool calls ends the
    run, so the record is then published.
    """
    record = count_model_call(record, response)
    if response.tool_calls and remaining_steps is not None and remaining_steps < AGENT_STEPS:
        record = StopRecord(**{**record, "rule": Rule.STEP_BUDGET.value, "stopped": True})
        response = relay_message(policy.step_budget_message, Rule.STEP_BUDGET)
    if not response.tool_calls:
        publish_run_end(record, config)
    return response, record


def relay_message(content: Any, rule: Rule) -> AIMessage:
    """The final AIMessage of a stop. Marked in `response_metadata`, which is never sent."""
    return AIMessage(
        content=content, response_metadata={"toolstop": {"relay": True, "rule": rule.value}}
    )


def plain_answer(response: BaseMessage) -> AIMessage:
    """A narrated (polish) answer as an AIMessage without tool calls.

    A stray tool call in it would leave a call unanswered and the history invalid, so it is
    dropped (the text is kept).
    """
    calls = isinstance(response, AIMessage) and (response.tool_calls or response.invalid_tool_calls)
    if isinstance(response, AIMessage) and not calls:
        return response
    return AIMessage(
        content=response.content,
        id=response.id,
        usage_metadata=getattr(response, "usage_metadata", None),
        response_metadata=response.response_metadata,
    )
