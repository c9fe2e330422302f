"""What every router shell does around `decide` (`toolstop._lifecycle`), tested without a graph.

The routers' tests run these through real graphs; these pin what a graph rarely reaches: a run
invoked with a tool turn already in its input, the loop measured when the graph's shape cannot be
read, the step-budget answer's record, the relay's mark, and a narrated answer's cleanup.
"""

from __future__ import annotations

import asyncio

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from toolstop import Outcome, Rule, StopPolicy, signal
from toolstop._lifecycle import (
    afinish,
    answered,
    begin_turn,
    finish,
    open_run,
    plain_answer,
    relay_message,
)
from toolstop.decision import current_turn

USAGE = {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}


def _stopping_turn() -> list:
    call = {"name": "book", "args": {}, "id": "c1", "type": "tool_call"}
    return [
        HumanMessage("q"),
        AIMessage("", id="ai-1", tool_calls=[call]),
        ToolMessage("booked", tool_call_id="c1", name="book", artifact=signal(Outcome.COMPLETED)),
    ]


def test_a_new_run_never_decides_the_turn_it_was_invoked_with() -> None:
    turn = current_turn(_stopping_turn())
    assert turn is not None
    run = open_run(None, None, StopPolicy(), turn)
    assert (run["open"], run["turn"], run["record"]["run"]) == (True, "ai-1", 1)
    decision, same = begin_turn(run, turn, StopPolicy(), remaining_steps=None, loop_steps=2)
    assert (decision, same) == (None, run)
    fresh = open_run(None, None, StopPolicy(), None)
    decision, _ = begin_turn(fresh, turn, StopPolicy(), remaining_steps=None, loop_steps=2)
    assert decision is not None
    assert decision.rule is Rule.COMPLETED  # the same turn, decided when it is the run's own


def test_a_new_run_is_numbered_after_the_last_and_keeps_the_measured_loop() -> None:
    first = open_run(None, None, StopPolicy(), None)
    first = {**first, "loop": 5, "tail": 2}
    assert open_run(first, None, StopPolicy(), None) is first  # still open: the same run
    record, closed = finish(first, None)
    second = open_run(closed, record, StopPolicy(), None)
    assert (second["open"], second["record"]["run"], second["turn"]) == (True, 2, None)
    assert (second["loop"], second["tail"], second["remaining"]) == (5, 2, None)
    unnumbered = open_run(closed, {**record, "run": "two"}, StopPolicy(), None)  # type: ignore[typeddict-item]
    assert unnumbered["record"]["run"] == 1
    # The async twin ends a run the same way.
    assert asyncio.run(afinish(first, None)) == (record, closed)
    assert closed == {**first, "open": False}


def test_the_loop_is_measured_between_model_calls() -> None:
    """When the graph's shape cannot be read, the steps between two model calls are the loop."""
    run = open_run(None, None, StopPolicy(), None)
    answer = AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c", "type": "tool_call"}])
    _, run = answered(run, answer, StopPolicy(), remaining_steps=20, loop_steps=2)
    assert (run["remaining"], run.get("loop")) == (20, None)
    _, again = answered(run, answer, StopPolicy(), remaining_steps=20, loop_steps=2)
    assert again.get("loop") is None  # the same step (a retried call): nothing to measure
    _, run = answered(run, answer, StopPolicy(), remaining_steps=17, loop_steps=2)
    assert (run["remaining"], run["loop"]) == (17, 3)
    _, unknown = answered(run, answer, StopPolicy(), remaining_steps=None, loop_steps=2)
    assert unknown["loop"] == 3
    assert run["record"]["model_calls"] == 2


def test_a_tool_call_past_the_step_budget_becomes_the_policys_answer() -> None:
    policy = StopPolicy(step_budget_message="Out of steps.")
    run = open_run(None, None, policy, None)
    call = {"name": "t", "args": {}, "id": "c", "type": "tool_call"}
    asking = AIMessage("", tool_calls=[call], usage_metadata=USAGE)
    response, ended = answered(run, asking, policy, remaining_steps=3, loop_steps=3, name="agent")
    assert (response.content, response.tool_calls, response.name) == ("Out of steps.", [], "agent")
    assert response.response_metadata == {"toolstop": {"relay": True, "rule": "step_budget"}}
    record = ended["record"]
    assert (record["rule"], record["stopped"], record["model_calls"]) == ("step_budget", True, 1)
    assert record["input_tokens"] == 5  # the call was made: its tokens count
    kept, going_on = answered(run, asking, policy, remaining_steps=4, loop_steps=3)
    assert kept is asking
    assert (going_on["record"]["rule"], going_on["record"]["stopped"]) == ("none", False)


def test_a_relay_is_marked_with_its_rule_and_named_for_the_agent() -> None:
    relay = relay_message("booked", Rule.FATAL, name="booker")
    assert (relay.content, relay.name, relay.tool_calls) == ("booked", "booker", [])
    assert relay.response_metadata == {"toolstop": {"relay": True, "rule": "fatal"}}
    assert relay_message("x", Rule.COMPLETED).name is None


def test_a_narrated_answer_keeps_its_text_and_drops_stray_calls() -> None:
    calls = [
        {"name": "t", "args": {}, "id": "stray", "type": "tool_call"},
        {"name": "Answer", "args": {"a": 1}, "id": "structured", "type": "tool_call"},
    ]
    narrated = AIMessage(
        "Booked.",
        id="ai-9",
        name="agent",
        tool_calls=calls,
        usage_metadata=USAGE,
        response_metadata={"model_name": "m"},
    )
    clean = plain_answer(narrated, answered_ids=frozenset({"structured"}))
    assert clean is not narrated
    assert (clean.content, clean.id, clean.name) == ("Booked.", "ai-9", "agent")
    assert [c["id"] for c in clean.tool_calls] == ["structured"]
    assert clean.usage_metadata == USAGE
    assert clean.response_metadata == {"model_name": "m"}
    assert plain_answer(narrated).tool_calls == []
    # Nothing stray: the answer itself.
    assert plain_answer(narrated, answered_ids=frozenset({"stray", "structured"})) is narrated
    plain = AIMessage("Booked.")
    assert plain_answer(plain) is plain


def test_a_narrated_answer_with_an_invalid_call_is_cleaned_too() -> None:
    broken = AIMessage(
        "Booked.",
        id="ai-3",
        invalid_tool_calls=[
            {"name": "t", "args": "{", "id": "bad", "error": "json", "type": "invalid_tool_call"}
        ],
    )
    clean = plain_answer(broken)
    assert (clean.content, clean.id, clean.tool_calls, clean.invalid_tool_calls) == (
        "Booked.",
        "ai-3",
        [],
        [],
    )


def test_a_narrated_answer_that_is_not_an_ai_message_becomes_one() -> None:
    from langchain_core.messages import ChatMessage

    other = ChatMessage(content="Booked.", role="assistant", id="m-1")
    clean = plain_answer(other)
    assert isinstance(clean, AIMessage)
    assert (clean.content, clean.id) == ("Booked.", "m-1")
