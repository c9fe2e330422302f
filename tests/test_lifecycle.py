"""What every router shell does around `decide` (`toolstop._lifecycle`), tested without a graph.

The routers' tests run these through real graphs; these pin what a graph rarely reaches: a run
invoked with a tool turn already in its input, the loop measured when the graph's shape cannot be
read, the step-budget answer's record, the relay's mark, and a narrated answer's cleanup.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from toolstop import Outcome, Rule, StopPolicy, signal
from toolstop._lifecycle import (
    INTERRUPTED_ANSWER,
    INTERRUPTED_TEXT,
    Aborted,
    afinish,
    answer_overlap,
    answered,
    begin,
    begin_turn,
    close_aborted,
    finish,
    invocation_of,
    left_open_calls,
    open_run,
    pending,
    plain_answer,
    relay_message,
    repair_history,
    run_start,
    served,
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


def test_a_turn_is_pending_while_it_has_results_the_run_has_not_folded() -> None:
    turn = current_turn(_stopping_turn())
    assert turn is not None
    run = open_run(None, None, StopPolicy(), None)
    assert pending(turn, run)  # the run has folded no turn yet
    assert pending(turn, None)  # no run yet: nothing folded
    assert not pending(turn, {**run, "turn": "ai-1"})  # folded once, never again
    assert pending(turn, {**run, "turn": "ai-0"})  # an earlier turn was folded, not this one
    assert not pending(None, run)
    asked = current_turn(_stopping_turn()[:2])  # the calls, no result yet
    assert asked is not None
    assert asked.results == ()
    assert not pending(asked, run)
    unasked = current_turn([_stopping_turn()[2]])  # results without an AIMessage
    assert unasked is not None
    assert unasked.asking is None
    assert pending(unasked, {**run, "turn": None})
    no_id = current_turn(
        [HumanMessage("q"), *(m.model_copy(update={"id": None}) for m in _stopping_turn()[1:])]
    )
    assert no_id is not None
    assert no_id.id is None
    assert pending(no_id, {**run, "turn": None})  # a turn without an id cannot be known as folded


def test_a_model_call_after_calls_without_results_decides_nothing() -> None:
    """A hook sent the model back before the tools ran (`jump_to: "model"`): no turn to fold."""
    policy = StopPolicy()
    messages = _stopping_turn()[:2]
    begun = begin(None, None, messages, policy, invocation=None, remaining_steps=None, loop_steps=2)
    assert begun.decision is None
    assert begun.run["record"]["tool_turns"] == 0
    assert (
        begun.run["record"]["outcomes"] == open_run(None, None, policy, None)["record"]["outcomes"]
    )


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


def _call(call_id: str, name: str = "book") -> dict:
    return {"name": name, "args": {}, "id": call_id, "type": "tool_call"}


INTERRUPTED_RELAY = {"toolstop": {"relay": True, "rule": "interrupted"}}


def test_the_calls_left_open_are_those_of_the_last_ai_message_without_an_answer() -> None:
    asking = AIMessage("", id="ai-1", tool_calls=[_call("c1"), _call("c2", "pay")])
    answer = ToolMessage("ok", tool_call_id="c1", name="book")
    assert left_open_calls([HumanMessage("q"), asking, answer]) == (1, [_call("c2", "pay")])
    assert left_open_calls([HumanMessage("q"), asking]) == (1, [_call("c1"), _call("c2", "pay")])
    assert left_open_calls([HumanMessage("q")]) == (-1, [])
    assert left_open_calls([]) == (-1, [])
    assert left_open_calls([answer]) == (-1, [])


def test_an_invocation_is_numbered_by_langgraphs_step_and_remaining_steps() -> None:
    config = {"metadata": {"langgraph_step": 4}}
    assert invocation_of(21, config) == 25
    assert invocation_of(None, config) is None
    assert invocation_of(21, {"metadata": {"langgraph_step": "4"}}) is None
    assert invocation_of(21, {"metadata": None}) is None
    assert invocation_of(21, None) is None


def test_a_run_is_marked_served_and_its_start_is_read_only_while_open() -> None:
    run = open_run(None, None, StopPolicy(), None, messages=[HumanMessage("q", id="h-1")])
    assert run_start(run) == "h-1"
    assert run_start(None) is None
    assert run_start({**run, "open": False}) is None
    marked = served(run, 7)
    assert marked == {**run, "invocation": 7}
    assert served(marked, 7) is marked
    assert open_run(None, None, StopPolicy(), None)["start"] is None


def test_an_aborted_runs_open_call_is_answered_and_its_turn_closed() -> None:
    asking = AIMessage("", id="ai-1", tool_calls=[_call("c1"), _call("c2", "pay")])
    answer = ToolMessage("ok", tool_call_id="c1", name="book")
    later = HumanMessage("next")
    repaired = repair_history([HumanMessage("q"), asking, answer, later])
    assert repaired is not None
    assert [type(m).__name__ for m in repaired] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
    ]
    assert repaired[1] is asking
    assert repaired[2] is answer
    filled = repaired[3]
    assert isinstance(filled, ToolMessage)
    assert (filled.content, filled.name, filled.tool_call_id, filled.status) == (
        INTERRUPTED_TEXT,
        "pay",
        "c2",
        "error",
    )
    closing = repaired[4]
    assert (closing.content, closing.response_metadata) == (INTERRUPTED_ANSWER, INTERRUPTED_RELAY)
    assert repaired[5] is later


def test_a_history_is_repaired_only_where_it_needs_to_be() -> None:
    asking = AIMessage("", id="ai-1", tool_calls=[_call("c1")])
    answer = ToolMessage("ok", tool_call_id="c1", name="book")
    assert repair_history([HumanMessage("q")]) is None
    assert repair_history([HumanMessage("q"), asking, answer]) is None
    assert repair_history([HumanMessage("q"), asking, answer, AIMessage("done")]) is None
    assert repair_history([HumanMessage("q"), AIMessage("hi"), HumanMessage("again")]) is None
    # An open call with nothing after it: answered, and no closing answer is needed yet.
    alone = repair_history([HumanMessage("q"), asking])
    assert alone is not None
    assert [type(m).__name__ for m in alone] == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert (alone[2].content, alone[2].tool_call_id) == (INTERRUPTED_TEXT, "c1")
    # New input right after the open call: the answer goes between them, then the closing one.
    cut = repair_history([HumanMessage("q"), asking, HumanMessage("next")])
    assert cut is not None
    assert [(type(m).__name__, m.content) for m in cut] == [
        ("HumanMessage", "q"),
        ("AIMessage", ""),
        ("ToolMessage", INTERRUPTED_TEXT),
        ("AIMessage", INTERRUPTED_ANSWER),
        ("HumanMessage", "next"),
    ]
    first = repair_history([asking])  # a history that begins with the model's call
    assert first is not None
    assert [(type(m).__name__, m.content) for m in first] == [
        ("AIMessage", ""),
        ("ToolMessage", INTERRUPTED_TEXT),
    ]
    # Every call answered, then new input: only the closing answer.
    later = HumanMessage("next")
    closed = repair_history([HumanMessage("q"), asking, answer, later])
    assert closed is not None
    assert [type(m).__name__ for m in closed] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
    ]
    assert (closed[3].content, closed[3].response_metadata) == (
        INTERRUPTED_ANSWER,
        INTERRUPTED_RELAY,
    )
    assert closed[4] is later


def test_an_aborted_runs_update_writes_the_whole_repaired_history() -> None:
    record = open_run(None, None, StopPolicy(), None)["record"]
    assert Aborted(record, None).update() == []
    messages = [HumanMessage("q", id="h-1")]
    update = Aborted(record, messages).update()
    assert len(update) == 2
    assert isinstance(update[0], RemoveMessage)
    assert update[0].id == REMOVE_ALL_MESSAGES
    assert update[1] is messages[0]


def _open_run(invocation: int) -> dict:
    return served(open_run(None, None, StopPolicy(), None), invocation)


def test_only_an_open_run_of_another_invocation_that_did_not_finish_is_closed() -> None:
    asking = AIMessage("", id="ai-1", tool_calls=[_call("c1")])
    left_open = [HumanMessage("q"), asking]
    run = _open_run(3)
    assert close_aborted(None, left_open, 9) is None
    assert close_aborted({**run, "open": False}, left_open, 9) is None
    assert close_aborted(run, left_open, 3) is None  # the same invocation: resumed, not aborted
    answered_turn = [*left_open, ToolMessage("ok", tool_call_id="c1", name="book")]
    assert close_aborted(run, answered_turn, 9) is None  # a review resumed: nothing came in
    aborted = close_aborted(run, left_open, 9)
    assert aborted is not None
    assert aborted.record == {
        **run["record"],
        "rule": "interrupted",
        "stopped": False,
        "tools": ["book"],
        "tool_call_ids": ["c1"],
    }
    assert aborted.messages == repair_history(left_open)


def test_a_run_that_ended_after_the_models_answer_is_closed_when_new_input_follows() -> None:
    run = _open_run(3)
    messages = [HumanMessage("q"), AIMessage("hello"), HumanMessage("next")]
    aborted = close_aborted(run, messages, 9)
    assert aborted is not None
    assert (aborted.record["rule"], aborted.record["tools"], aborted.messages) == (
        "interrupted",
        [],
        None,
    )


def test_an_aborted_runs_answered_turn_is_accounted_for_in_its_record() -> None:
    asking = AIMessage("", id="ai-1", tool_calls=[_call("c1")])
    done = ToolMessage("booked", tool_call_id="c1", name="book", artifact=signal(Outcome.COMPLETED))
    messages = [HumanMessage("q", id="h-1"), asking, done, HumanMessage("next")]
    run = served(open_run(None, None, StopPolicy(), None, messages=messages[:1]), 3)
    counted = close_aborted(run, messages, 9, StopPolicy())
    assert counted is not None
    record = counted.record
    assert (record["rule"], record["stopped"], record["tool_turns"]) == ("interrupted", False, 1)
    assert record["outcomes"]["completed"] == 1
    assert (record["tools"], record["tool_call_ids"], record["relayed"]) == ([], [], [])
    # The turn is decided under the run's own policy (here `never`: it would have stopped).
    never = close_aborted(run, messages, 9, StopPolicy(mode="never"))
    assert never is not None
    assert (never.record["would_stop"], never.record["tool_turns"]) == ("completed", 1)
    assert counted.record["would_stop"] is None
    # Without a policy the turn is not decided: the record is the run's as it was.
    plain = close_aborted(run, messages, 9)
    assert plain is not None
    assert (plain.record["tool_turns"], plain.record["outcomes"]["completed"]) == (0, 0)


@pytest.mark.parametrize(
    ("answer", "source"),
    [
        ("The Straße is closed", "STRASSE closed: strasse"),  # case folding lengthens a word
        ("a_b and a b", "x_a_b a_b"),
        ("order 12 ok", "order-123 12x 112 a12 12_ (12)"),  # `12` inside words, then alone
        ("e e e", "eee see bee the fee tree e"),  # found inside words past the places looked at
        ("e", "eee see bee the fee tree"),  # only inside words
        ("x² ٣", "x² and ٣"),
        ("İstanbul", "istanbul"),
        ("", "anything"),
        ("nothing here", ""),
    ],
)
def test_answer_overlap_counts_the_answers_words_among_the_sources_words(
    answer: str, source: str
) -> None:
    """Built independently: the share of the answer's `\\w+` tokens (case-folded) that are
    among the source's, however often a word also occurs inside longer words."""
    words = re.findall(r"\w+", answer.casefold())
    tokens = set(re.findall(r"\w+", source.casefold()))
    expected = round(sum(w in tokens for w in words) / len(words), 4) if words else 0.0
    assert answer_overlap(answer, source) == expected
