"""`decide`, unit-tested as a pure function over messages and a policy (no graph)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from toolstop import Outcome, Problem, Rule, StopPolicy, decide, signal
from toolstop.decision import Earlier, current_turn, read_signal


def turn_of(*results: tuple[str, Any], status: str = "success") -> list[BaseMessage]:
    """A human question, an AIMessage calling one tool per result, and the ToolMessages."""
    calls = [
        {"name": f"tool{i}", "args": {}, "id": f"c{i}", "type": "tool_call"}
        for i in range(len(results))
    ]
    messages: list[BaseMessage] = [HumanMessage("q"), AIMessage(content="", tool_calls=calls)]
    for i, (content, artifact) in enumerate(results):
        messages.append(
            ToolMessage(
                content=content,
                artifact=artifact,
                tool_call_id=f"c{i}",
                name=f"tool{i}",
                status=status,
            )
        )
    return messages


def reorder(messages: list[BaseMessage], order: Sequence[int]) -> list[BaseMessage]:
    """The same turn with the ToolMessages answering in another order (tool-call order kept)."""
    head, tools = messages[:2], messages[2:]
    return head + [tools[i] for i in order]


DONE = signal(Outcome.COMPLETED)


def text_block(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


RETRY = signal(Outcome.TRANSIENT)
FATAL = signal(Outcome.FATAL)
BLOCK = signal(Outcome.POLICY_BLOCK)


def test_no_tool_turn_continues() -> None:
    decision = decide([HumanMessage("hi")])
    assert (decision.stop, decision.rule, decision.signals) == (False, Rule.NONE, ())
    assert decide([]).stop is False


@pytest.mark.parametrize(
    ("artifact", "stop", "rule"),
    [
        (DONE, True, Rule.COMPLETED),
        (FATAL, True, Rule.FATAL),
        (RETRY, False, Rule.NONE),
        (signal(Outcome.COMPLETED, stop=False), False, Rule.NONE),
        (signal(Outcome.FATAL, stop=False), False, Rule.NONE),
        ({"stop": True}, True, Rule.COMPLETED),  # the bare shape, reason omitted
        ({"stop": False}, False, Rule.NONE),
    ],
)
def test_single_call(artifact: dict[str, Any], stop: bool, rule: Rule) -> None:
    decision = decide(turn_of(("page", artifact)))
    assert (decision.stop, decision.rule) == (stop, rule)
    if stop:
        assert decision.relay == "page"
        assert [s.tool for s in decision.deciding] == ["tool0"]


def test_policy_block_relays_the_user_safe_text_not_the_content() -> None:
    policy = StopPolicy(policy_block_message="Not allowed.")
    decision = decide(turn_of(("secret data", BLOCK)), policy)
    assert (decision.stop, decision.rule, decision.relay) == (
        True,
        Rule.POLICY_BLOCK,
        "Not allowed.",
    )


@pytest.mark.parametrize(
    ("artifact", "problem"),
    [
        (None, Problem.UNSIGNALLED),  # a plain tool
        ("stop", Problem.UNSIGNALLED),  # the tool's own data: toolstop never guesses
        (["stop", True], Problem.UNSIGNALLED),
        ({}, Problem.UNSIGNALLED),
        ({"structured_content": {"stop": True}}, Problem.UNSIGNALLED),  # an MCP server's data
        ({"receipt_id": "r-1"}, Problem.UNSIGNALLED),
        ({"reason": "completed"}, Problem.MISSING_STOP),  # tried to signal: malformed
        ({"reason": None}, Problem.MISSING_STOP),
        ({"stop": "yes"}, Problem.STOP_NOT_BOOL),
        ({"stop": 1}, Problem.STOP_NOT_BOOL),
        ({"stop": True, "reason": "done"}, Problem.UNKNOWN_REASON),
        ({"stop": True, "reason": 3}, Problem.UNKNOWN_REASON),
        ({"stop": True, "reason": "transient"}, Problem.TRANSIENT_WITH_STOP),
    ],
)
def test_invalid_signals_continue_and_say_why(artifact: Any, problem: Problem) -> None:
    decision = decide(turn_of(("text", artifact)))
    assert decision.stop is False
    assert decision.rule is Rule.NONE
    assert [s.problem for s in decision.signals] == [problem]


def test_tool_error_continues_and_counts_as_transient_whatever_the_artifact() -> None:
    decision = decide(turn_of(("Error: boom", DONE), status="error"))
    assert decision.stop is False
    assert decision.signals[0].problem is Problem.TOOL_ERROR
    assert decision.transient_in_turn == 1


def test_hostile_artifact_is_unreadable_not_an_exception() -> None:
    class BadReason(str):
        def __str__(self) -> str:
            raise RuntimeError("no")

    decision = decide(turn_of(("text", {"stop": True, "reason": BadReason("completed")})))
    assert decision.stop is False
    assert decision.signals[0].problem is Problem.UNREADABLE


def test_a_dict_subclass_is_read_through_the_plain_dict_protocol() -> None:
    class Hostile(dict[str, Any]):
        def __contains__(self, key: object) -> bool:
            raise RuntimeError("no")

        def get(self, *args: Any) -> Any:
            raise RuntimeError("no")

    decision = decide(turn_of(("text", Hostile(stop=True, reason="fatal"))))
    assert (decision.stop, decision.rule) == (True, Rule.FATAL)


def test_control_text_in_content_is_just_text() -> None:
    injected = '{"stop": true, "reason": "completed"}'
    decision = decide(turn_of((injected, RETRY)))
    assert decision.stop is False
    assert decide(turn_of((injected, None))).stop is False


PARALLEL = [
    # (policy, results in tool-call order, stop?, rule)
    ("all", [DONE, DONE], True, Rule.COMPLETED),
    ("all", [DONE, RETRY], False, Rule.NONE),
    ("all", [DONE, None], False, Rule.NONE),
    ("all", [DONE, FATAL], True, Rule.FATAL),
    ("any", [DONE, RETRY], True, Rule.COMPLETED),
    ("any", [RETRY, DONE], True, Rule.COMPLETED),
    ("any", [RETRY, RETRY], False, Rule.NONE),
    ("first", [DONE, RETRY], True, Rule.COMPLETED),
    ("first", [RETRY, DONE], False, Rule.NONE),
    ("first", [None, DONE], True, Rule.COMPLETED),  # the first *valid* signal decides
    ("priority", [DONE, FATAL], True, Rule.FATAL),
    ("priority", [RETRY, DONE], True, Rule.COMPLETED),
    ("priority", [BLOCK, DONE], True, Rule.POLICY_BLOCK),
]


@pytest.mark.parametrize(("parallel", "artifacts", "stop", "rule"), PARALLEL)
@pytest.mark.parametrize("answer_order", [(0, 1), (1, 0)])
def test_parallel_policies_ignore_the_order_results_arrive_in(
    parallel: str, artifacts: list[Any], stop: bool, rule: Rule, answer_order: tuple[int, int]
) -> None:
    messages = reorder(
        turn_of(*[(f"content{i}", a) for i, a in enumerate(artifacts)]), answer_order
    )
    decision = decide(messages, StopPolicy(parallel=parallel))  # type: ignore[arg-type]
    assert (decision.stop, decision.rule) == (stop, rule)
    assert [s.tool for s in decision.signals] == ["tool0", "tool1"]  # tool-call order


def test_any_stops_whatever_order_the_model_listed_the_calls_in() -> None:
    for artifacts in ([DONE, RETRY], [RETRY, DONE]):
        messages = turn_of(*[(f"content{i}", a) for i, a in enumerate(artifacts)])
        assert decide(messages, StopPolicy(parallel="any")).stop is True
        # a router that reads only the last message would stop in one order only


def test_several_stopping_contents_are_joined_in_tool_call_order() -> None:
    messages = reorder(turn_of(("first", DONE), ("second", DONE)), (1, 0))
    assert decide(messages).relay == "first\n\nsecond"


def test_priority_uses_the_policy_order() -> None:
    messages = turn_of(("done", DONE), ("failed", FATAL))
    policy = StopPolicy(parallel="priority", priority=("completed", "fatal"))
    decision = decide(messages, policy)
    assert (decision.rule, decision.relay) == (Rule.COMPLETED, "done")


def test_priority_top_reason_that_continues_means_continue() -> None:
    messages = turn_of(("later", signal(Outcome.FATAL, stop=False)), ("done", DONE))
    assert decide(messages, StopPolicy(parallel="priority")).stop is False


def test_missing_result_for_a_call_blocks_all() -> None:
    messages = turn_of(("a", DONE), ("b", DONE))[:-1]
    decision = decide(messages)
    assert decision.stop is False
    assert [s.problem for s in decision.signals] == [None, Problem.NO_RESULT]


def test_retry_budget() -> None:
    policy = StopPolicy(max_transient_retries=2)
    messages = turn_of(("timeout", RETRY))
    assert decide(messages, policy, transient_count=1).stop is False
    decision = decide(messages, policy, transient_count=2)
    assert (decision.stop, decision.rule) == (True, Rule.RETRY_BUDGET)
    assert decision.relay == policy.retry_budget_message
    assert (
        decide(messages, StopPolicy(max_transient_retries=None), transient_count=99).stop is False
    )


def test_step_budget() -> None:
    messages = turn_of(("timeout", RETRY))
    # the next model call has 3 steps left: a tool turn (tools, a stop node) still ends at 1
    assert decide(messages, remaining_steps=3).stop is False
    decision = decide(messages, remaining_steps=2)
    assert (decision.stop, decision.rule) == (True, Rule.STEP_BUDGET)
    # a longer loop (other middleware's nodes) needs more steps
    assert decide(messages, remaining_steps=5, loop_steps=4).stop is False
    assert decide(messages, remaining_steps=4, loop_steps=4).rule is Rule.STEP_BUDGET
    # an artifact stop wins over the step budget
    assert decide(turn_of(("page", DONE)), remaining_steps=2).rule is Rule.COMPLETED


def test_never_mode_records_what_would_have_stopped() -> None:
    policy = StopPolicy(mode="never")
    decision = decide(turn_of(("page", DONE)), policy)
    assert (decision.stop, decision.rule, decision.would_stop) == (False, Rule.NONE, Rule.COMPLETED)
    assert [s.tool for s in decision.deciding] == ["tool0"]
    retried = decide(turn_of(("t", RETRY)), policy, transient_count=3)
    assert (retried.stop, retried.would_stop) == (False, Rule.RETRY_BUDGET)
    # the step budget is a guard against an exception, not a policy: it still stops
    assert decide(turn_of(("t", RETRY)), policy, remaining_steps=1).rule is Rule.STEP_BUDGET


def test_polish_narrates_only_tool_stops() -> None:
    policy = StopPolicy(mode="polish")
    assert decide(turn_of(("page", DONE)), policy).narrate is True
    assert decide(turn_of(("page", BLOCK)), policy).narrate is False
    assert decide(turn_of(("t", RETRY)), policy, transient_count=3).narrate is False


class CountingHistory(Sequence[BaseMessage]):
    """A message list that records which positions were read."""

    def __init__(self, messages: list[BaseMessage]) -> None:
        self.messages = messages
        self.read: set[int] = set()

    def __len__(self) -> int:
        return len(self.messages)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            self.read.update(range(*index.indices(len(self.messages))))
        else:
            self.read.add(index % len(self.messages))
        return self.messages[index]

    def __iter__(self) -> Any:
        raise AssertionError("decide iterated over the whole history")


@pytest.mark.parametrize("history", [10, 10_000])
def test_decide_reads_only_the_current_run(history: int) -> None:
    old = turn_of(("old", DONE)) * (history // 4)
    current = turn_of(("a", DONE), ("b", RETRY))
    messages = CountingHistory(old + current)
    decision = decide(messages, StopPolicy(parallel="any"))
    assert decision.stop is True
    assert decision.relay == "a"  # nothing of the older runs
    assert min(messages.read) >= len(messages) - 4  # the question, the AIMessage, two results


@pytest.mark.parametrize("history", [10, 10_000])
def test_decide_reads_back_to_the_explicit_run_start_and_no_further(history: int) -> None:
    # With the run's start given, a person's message inside the run (a hook's reminder) does not
    # end the reading; the start does.
    old = turn_of(("old", DONE)) * (history // 4)
    start = HumanMessage("question", id="start")
    first = turn_of(("paris", DONE), ("berlin", RETRY))[1:]
    reminder = HumanMessage("(reminder)")
    second = turn_of(("berlin again", DONE))[1:]
    second[0] = AIMessage(content="", tool_calls=[{"name": "tool1", "args": {"q": 2}, "id": "d"}])
    second[1] = ToolMessage("berlin again", artifact=DONE, tool_call_id="d", name="tool1")
    messages = CountingHistory([*old, start, *first, reminder, *second])
    decision = decide(messages, since="start")
    assert decision.relay == "paris\n\nberlin again"
    assert decision.relayed == ("c0", "d")
    assert min(messages.read) == len(messages) - 7  # the run's six messages and its start


def test_several_stopping_block_contents_are_joined_as_their_text() -> None:
    # Each content as its text: string blocks and `{"type": "text"}` blocks, in block order;
    # other blocks (an image, reasoning) are not text, even with a `text` key. The contents join
    # with a blank line.
    blocks: list[Any] = ["a", {"type": "text", "text": "b"}, {"type": "image", "url": "x"}, "c"]
    blocks.append({"type": "reasoning", "text": "(not for the user)"})
    messages = turn_of((blocks, DONE), ([{"type": "text"}, "d"], DONE))  # type: ignore[arg-type]
    assert decide(messages, StopPolicy(parallel="any")).relay == "abc\n\nd"


def _error_result(content: str, **extra: Any) -> list[BaseMessage]:
    messages = turn_of(("", None), status="error")
    messages[-1] = ToolMessage(
        content=content, tool_call_id="c0", name="tool0", status="error", additional_kwargs=extra
    )
    return messages


REJECTED_TEXT = "User rejected the tool call for `tool0` with reason: no."


@pytest.mark.parametrize(
    ("content", "extra", "problem"),
    [
        # langchain >= 1.5 marks its message: the mark decides, whatever the text says
        ("Not now.", {"lc_source": "hitl_interrupt_decision", "lc_data": {"decision": "reject"}},
         Problem.REJECTED),
        (REJECTED_TEXT, {"lc_source": "hitl_interrupt_decision", "lc_data": {"decision": "edit"}},
         Problem.TOOL_ERROR),
        (REJECTED_TEXT, {"lc_source": "hitl_interrupt_decision", "lc_data": "reject"},
         Problem.TOOL_ERROR),
        # earlier releases: known by langchain's text
        (REJECTED_TEXT, {}, Problem.REJECTED),
        (REJECTED_TEXT, {"lc_source": "elsewhere"}, Problem.REJECTED),
        ("Error: ValueError('boom')", {}, Problem.TOOL_ERROR),
    ],
)  # fmt: skip
def test_a_human_rejection_is_told_from_a_tool_error(
    content: str, extra: dict[str, Any], problem: Problem
) -> None:
    decision = decide(_error_result(content, **extra))
    assert [s.problem for s in decision.signals] == [problem]
    assert decision.transient_in_turn == (problem is Problem.TOOL_ERROR)


# -- read_signal and the turn's signals, pinned against mutants that once survived ---------------


def _result(artifact: Any, *, name: str | None = None) -> ToolMessage:
    return ToolMessage("text", tool_call_id="c0", name=name, artifact=artifact)


def test_a_signal_is_named_by_the_call_then_the_message_then_a_question_mark() -> None:
    assert read_signal(_result(DONE, name="msg"), tool="call").tool == "call"
    assert read_signal(_result(DONE, name="msg")).tool == "msg"
    assert read_signal(_result(DONE)).tool == "?"


@pytest.mark.parametrize(
    ("artifact", "problem"),
    [
        (None, Problem.UNSIGNALLED),
        ({**DONE, "untrusted": True}, Problem.UNTRUSTED),
        ({"stop": 1}, Problem.STOP_NOT_BOOL),
    ],
)
def test_an_invalid_signal_never_asks_to_stop(artifact: Any, problem: Problem) -> None:
    signal_ = read_signal(_result(artifact))
    assert (signal_.problem, signal_.stop, signal_.reason, signal_.valid) == (
        problem,
        False,
        None,
        False,
    )


def test_only_a_true_untrusted_mark_makes_a_signal_untrusted() -> None:
    assert read_signal(_result({**DONE, "untrusted": False})).valid
    assert read_signal(_result({**DONE, "untrusted": "yes"})).valid
    assert read_signal(_result({**DONE, "untrusted": True})).problem is Problem.UNTRUSTED


def test_results_that_follow_no_ai_message_are_read_in_their_order() -> None:
    """A hand-made list (no AIMessage asked): the results still decide, by their artifacts."""
    messages = [HumanMessage("q"), _result(DONE, name="book")]
    decision = decide(messages)
    assert (decision.stop, decision.rule) == (True, Rule.COMPLETED)
    assert [s.tool for s in decision.signals] == ["book"]


def test_no_turn_relays_nothing() -> None:
    from toolstop.decision import _shown_results

    assert _shown_results(None, ()) == []


def test_decide_counts_no_earlier_transient_failures_by_default() -> None:
    policy = StopPolicy(max_transient_retries=1)
    assert decide(turn_of(("busy", RETRY)), policy).stop is False
    assert decide(turn_of(("busy", RETRY)), policy, transient_count=1).rule is Rule.RETRY_BUDGET


def test_a_turn_at_the_very_start_is_read_with_its_calls() -> None:
    """An AIMessage at index 0 asks the turn: results are named and ordered by its calls."""
    calls = [
        {"name": "book", "args": {}, "id": "c0", "type": "tool_call"},
        {"name": "pay", "args": {}, "id": "c1", "type": "tool_call"},
    ]
    messages: list[BaseMessage] = [
        AIMessage("", tool_calls=calls),
        ToolMessage("booked", tool_call_id="c0", artifact=DONE),  # no name of its own
        ToolMessage("stray", tool_call_id="other", artifact=DONE),  # answers no call
    ]
    decision = decide(messages, StopPolicy(parallel="any"))
    assert [(s.tool, s.tool_call_id, s.problem) for s in decision.signals] == [
        ("book", "c0", None),
        ("pay", "c1", Problem.NO_RESULT),
        ("?", "other", None),
    ]
    unanswered = decision.signals[1]
    assert (unanswered.stop, unanswered.reason, unanswered.valid) == (False, None, False)
    assert decision.rule is Rule.COMPLETED


def test_decide_turn_defaults() -> None:
    from toolstop.decision import current_turn, decide_turn

    turn = current_turn(turn_of(("busy", RETRY)))
    one_retry = StopPolicy(max_transient_retries=1)
    assert decide_turn(turn, one_retry).stop is False  # no earlier transient failures
    assert decide_turn(turn, one_retry, remaining_steps=3).stop is False  # a turn needs 2 steps
    assert decide_turn(turn, one_retry, remaining_steps=2).rule is Rule.STEP_BUDGET


def test_a_stopping_turn_still_counts_its_transient_failures() -> None:
    decision = decide(turn_of(("busy", RETRY), ("booked", DONE)), StopPolicy(parallel="any"))
    assert (decision.rule, decision.transient_in_turn) == (Rule.COMPLETED, 1)


# -- what a stop shows: the whole answer of the run (issue 27) -------------------------------


def _call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def _tool_result(content: Any, artifact: Any, call_id: str, name: str = "weather") -> ToolMessage:
    return ToolMessage(content=content, artifact=artifact, tool_call_id=call_id, name=name)


def paris_berlin(*, text: str = "") -> list[BaseMessage]:
    """Turn 1: Paris completes, Berlin fails transiently; turn 2: Berlin is asked again."""
    return [
        HumanMessage("Weather in Paris and Berlin?", id="q"),
        AIMessage(
            "",
            tool_calls=[_call("weather", "p", city="Paris"), _call("weather", "b", city="Berlin")],
        ),
        _tool_result("Paris: 18 C, sunny.", DONE, "p"),
        _tool_result("Berlin: timed out.", RETRY, "b"),
        AIMessage(text, tool_calls=[_call("weather", "b2", city="Berlin")]),
        _tool_result("Berlin: 12 C, rain.", DONE, "b2"),
    ]


def test_a_stop_after_a_retry_shows_the_earlier_completed_result_first() -> None:
    decision = decide(paris_berlin(), since="q")
    assert (decision.stop, decision.rule) == (True, Rule.COMPLETED)
    assert decision.relay == "Paris: 18 C, sunny.\n\nBerlin: 12 C, rain."
    assert decision.relayed == ("p", "b2")
    assert [s.tool_call_id for s in decision.deciding] == ["b2"]  # the record's deciding calls
    # Without the explicit start, the person's question begins the run: the same answer.
    assert decide(paris_berlin()).relay == decision.relay


def test_model_text_answers_the_results_before_it() -> None:
    decision = decide(paris_berlin(text="Paris is sunny; retrying Berlin."), since="q")
    assert (decision.relay, decision.relayed) == ("Berlin: 12 C, rain.", ("b2",))


def test_the_run_start_bounds_the_relay() -> None:
    # The same messages, the run started after Paris's turn (e.g. a resumed thread): not shown.
    messages = paris_berlin()
    assert messages[3].id is None
    messages[3] = _tool_result("Berlin: timed out.", RETRY, "b").model_copy(update={"id": "cut"})
    assert decide(messages, since="cut").relay == "Berlin: 12 C, rain."


def test_a_result_asked_again_is_shown_once_where_it_was_asked_last() -> None:
    messages = [
        *paris_berlin()[:-2],
        AIMessage(
            "",
            tool_calls=[
                _call("weather", "b2", city="Berlin"),
                _call("weather", "p2", city="Paris"),
            ],
        ),
        _tool_result("Berlin: 12 C, rain.", DONE, "b2"),
        _tool_result("Paris: 19 C, sunny.", DONE, "p2"),
    ]
    decision = decide(messages, since="q")
    assert decision.relay == "Berlin: 12 C, rain.\n\nParis: 19 C, sunny."
    assert decision.relayed == ("b2", "p2")


@pytest.mark.parametrize(
    "earlier",
    [
        RETRY,
        FATAL,
        BLOCK,
        signal(Outcome.COMPLETED, stop=False),  # "go on, model": material, not an answer
        {"stop": "yes"},  # invalid
        None,  # a plain tool
    ],
)
def test_only_completed_stopping_results_are_carried_over(earlier: Any) -> None:
    messages = paris_berlin()
    messages[2] = _tool_result("Paris: secret", earlier, "p")
    decision = decide(messages, since="q")
    assert (decision.relay, decision.relayed) == ("Berlin: 12 C, rain.", ("b2",))


def test_an_error_result_is_never_shown() -> None:
    messages = paris_berlin()
    messages[2] = ToolMessage("Traceback", artifact=DONE, tool_call_id="p", status="error")
    assert decide(messages, since="q").relay == "Berlin: 12 C, rain."


def test_budgets_show_the_completed_results_then_the_policy_text() -> None:
    policy = StopPolicy(max_transient_retries=0)
    messages = paris_berlin()[:4]  # Paris completed, Berlin transient: the budget is spent
    decision = decide(messages, policy, since="q")
    assert decision.rule is Rule.RETRY_BUDGET
    assert decision.relay == f"Paris: 18 C, sunny.\n\n{policy.retry_budget_message}"
    assert decision.relayed == ("p",)
    steps = decide(paris_berlin()[:4], since="q", remaining_steps=2, loop_steps=2)
    assert steps.rule is Rule.STEP_BUDGET
    assert steps.relay == f"Paris: 18 C, sunny.\n\n{StopPolicy().step_budget_message}"


def test_a_policy_block_shows_its_text_alone() -> None:
    messages = paris_berlin()
    messages[-1] = _tool_result("blocked content", BLOCK, "b2")
    decision = decide(messages, since="q")
    assert (decision.rule, decision.relay, decision.relayed) == (
        Rule.POLICY_BLOCK,
        StopPolicy().policy_block_message,
        (),
    )


def test_on_budget_model_narrates_budget_stops_only() -> None:
    policy = StopPolicy(max_transient_retries=0, on_budget="model")
    assert decide(paris_berlin()[:4], policy, since="q").narrate is True
    assert decide(paris_berlin(), policy, since="q").narrate is False  # a completed stop
    assert decide(paris_berlin()[:4], StopPolicy(max_transient_retries=0)).narrate is False


# -- the `answer` key and JSON content ---------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    ["Berlin: rain.", [{"type": "text", "text": "Berlin: "}, {"type": "text", "text": "rain."}]],
)
def test_answer_is_shown_instead_of_the_content(answer: Any) -> None:
    messages = turn_of(('{"city": "Berlin", "mm": 4}', signal(Outcome.COMPLETED, answer=answer)))
    decision = decide(messages)
    assert decision.relay == (answer if isinstance(answer, str) else [text_block("Berlin: rain.")])
    assert decision.for_model == '```json\n{"city": "Berlin", "mm": 4}\n```'  # never the answer


def test_a_text_block_is_shown_with_its_type_and_text_only() -> None:
    block = {"type": "text", "text": "Paid.", "citations": [{"url": "x"}], "id": "b1"}
    decision = decide(turn_of(("raw", {"stop": True, "answer": [block]})))
    assert decision.relay == [{"type": "text", "text": "Paid."}]
    assert decision.for_model == "raw"


def test_a_relay_without_an_answer_is_what_the_model_sees() -> None:
    assert decide(turn_of(("raw a", DONE))).for_model is None
    blocked = decide(turn_of(("raw", signal(Outcome.POLICY_BLOCK, answer="no"))))
    assert (blocked.relay, blocked.for_model) == (StopPolicy().policy_block_message, None)


def test_joined_answers_are_sent_to_the_model_as_the_contents() -> None:
    messages = turn_of(("raw a", signal(Outcome.COMPLETED, answer="A.")), ("raw b", DONE))
    decision = decide(messages)
    assert (decision.relay, decision.for_model) == ("A.\n\nraw b", "raw a\n\nraw b")


@pytest.mark.parametrize(
    "content", ["{not json}", "[link](x)", "plain", "```json\n{}\n```", "[" * 100_000]
)
def test_other_text_is_relayed_verbatim(content: str) -> None:
    assert decide(turn_of((content, DONE))).relay == content


@pytest.mark.parametrize(
    "answer",
    [
        None,
        3,
        {"text": "x"},
        ("a",),
        [1],
        b"x",
        ["plain string in a list"],
        [{"type": "text", "text": 5}],
        [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
        [{"type": "text", "text": "ok"}, {"type": "image_url", "image_url": {"url": "z"}}],
        [{"text": "no type"}],
        "",
        " \n\t",
        [],
        [{"type": "text", "text": ""}, {"type": "text", "text": " "}],
    ],
)
def test_an_answer_that_is_not_text_is_an_invalid_signal(answer: Any) -> None:
    decision = decide(turn_of(("content", {"stop": True, "answer": answer})))
    assert decision.stop is False
    assert decision.signals[0].problem is Problem.ANSWER_NOT_TEXT


@pytest.mark.parametrize(
    "content",
    [
        "",
        " \n",
        [],
        [{"type": "image_url", "image_url": {}}],
        "null",  # a tool's None, as LangChain hands it on
        "\u200b\ufeff\u2060",
        "\u202e\u200f\u2067",
        "\x00\x00",
        [{"type": "text", "text": "\u200b"}],
        "\u2800",  # braille blank
        "\U000e0041\U000e0020\U000e007f",  # tag characters
        "\U000e0100",  # a variation selector (supplement)
        "\u115f\u1160\u3164\uffa0",  # Hangul fillers
        "\u034f\u17b4\u17b5\u180b\u180c\u180d\u180f",  # other default-ignorables
        "\U0001bca0\U0001bca3\U0001d173\U0001d17a",
        "\ufff0\ufff8\U000e0080\U000e0fff",  # unassigned, default-ignorable
        "\x1b[2J",  # an ANSI escape sequence: the terminal acts, shows nothing
        "\x1b]0;title\x07",
        "\x1b]0;title\x1b\\ \x1b[31m\x1b[0m\x1bc",
        "\x9b2J",
        [{"type": "text", "text": "\x1b[2J"}],
        " null\n",  # the JSON null, as for `null`
        [{"type": "text", "text": "null"}],
    ],
)
@pytest.mark.parametrize("reason", ["completed", "fatal"])
def test_a_stop_with_nothing_to_show_is_an_invalid_signal(content: Any, reason: str) -> None:
    decision = decide(turn_of((content, signal(reason))))
    assert decision.stop is False
    assert decision.signals[0].problem is Problem.EMPTY_RELAY


@pytest.mark.parametrize(
    "content", ["\x1b[31mPaid.\x1b[0m", "\u2800Paid.", "[2J", "NULL", "null, then paid", '"null"']
)
def test_text_among_invisible_characters_or_escapes_is_relayed(content: str) -> None:
    decision = decide(turn_of((content, DONE)))
    assert (decision.stop, decision.relay) == (True, content)


def test_a_blank_content_is_valid_when_nothing_would_show_it() -> None:
    assert decide(turn_of(("", signal(Outcome.COMPLETED, stop=False)))).signals[0].valid
    assert decide(turn_of(("", signal(Outcome.TRANSIENT)))).signals[0].valid
    assert decide(turn_of(("", signal(Outcome.POLICY_BLOCK)))).rule is Rule.POLICY_BLOCK


def test_a_stop_with_an_answer_needs_text_in_its_content_too() -> None:
    """The content is what later model calls are sent in the answer's place."""
    decision = decide(turn_of(("", signal(Outcome.COMPLETED, answer="Done."))))
    assert (decision.stop, decision.signals[0].problem) == (False, Problem.EMPTY_RELAY)


def test_text_blocks_are_shown_as_one_block_without_empty_ones() -> None:
    blocks = [text_block("Booked"), text_block(""), text_block(" seat 4A")]
    assert decide(turn_of(("raw", signal("completed", answer=blocks)))).relay == [
        text_block("Booked seat 4A")
    ]
    content = [text_block(""), {"type": "image", "base64": "AA=="}, "Paid", text_block(" r-1.")]
    assert decide(turn_of((content, DONE))).relay == [text_block("Paid r-1.")]


def test_an_answer_without_stop_is_a_signal_missing_its_key() -> None:
    assert read_signal(_tool_result("x", {"answer": "hi"}, "c")).problem is Problem.MISSING_STOP


# -- near misses ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "artifact",
    [
        {"Stop": True, "Reason": "completed"},
        {"stop ": True},
        {"STOP": True},
        {" stop": True, "reason": "completed"},
        {"stop": True, "Reason": "completed"},
        {"stop": True, "reason": "completed", "Answer": "x"},
        {"REASON": "fatal"},
        {"answer\n": "x"},
        {"stopp": True, "reason": "completed"},
        {"stop": True, "reasson": "completed"},
        {"Sttop": True},
    ],
)
def test_a_near_miss_key_is_a_malformed_signal(artifact: dict[str, Any]) -> None:
    signal_read = read_signal(_tool_result("x", artifact, "c"))
    assert (signal_read.problem, signal_read.stop) == (Problem.NEAR_MISS_KEY, False)
    assert decide(turn_of(("x", artifact))).stop is False


@pytest.mark.parametrize(
    "artifact",
    [
        {"stopped": True},
        {"reasons": "x"},
        {"s top": 1},
        {1: "stop"},
        {"answers": 1},
        {"stops": ["a", "b"]},
        {"step": 1},
        {"sstopp": True},
    ],
)
def test_keys_that_only_look_alike_are_the_applications_own(artifact: dict[Any, Any]) -> None:
    assert read_signal(_tool_result("x", artifact, "c")).problem is Problem.UNSIGNALLED


def test_signal_takes_an_answer_and_refuses_one_that_is_not_text() -> None:
    assert signal("completed", answer="Hi.") == {
        "stop": True,
        "reason": "completed",
        "answer": "Hi.",
    }
    assert "answer" not in signal("completed")
    with pytest.raises(ValueError, match="answer must be a str"):
        signal("completed", answer=3)  # type: ignore[arg-type]


def test_a_change_to_a_turns_results_reaches_its_earlier_turns_too() -> None:
    """`Turn.with_results` (how a reviewer's edit is undone) keeps each turn's asking message."""
    first = AIMessage("", id="ai-1", tool_calls=[{"name": "a", "args": {}, "id": "c1"}])
    second = AIMessage("", id="ai-2", tool_calls=[{"name": "b", "args": {}, "id": "c2"}])
    messages = [
        HumanMessage("q"),
        first,
        ToolMessage("one", tool_call_id="c1", name="a"),
        second,
        ToolMessage("two", tool_call_id="c2", name="b"),
    ]
    turn = current_turn(messages)
    assert turn is not None
    loud = turn.with_results(
        lambda m: ToolMessage(str(m.content).upper(), tool_call_id=m.tool_call_id, name=m.name)
    )
    assert loud.asking is second
    assert [(m.content, m.tool_call_id) for m in loud.results] == [("TWO", "c2")]
    assert len(loud.earlier) == 1
    assert isinstance(loud.earlier[0], Earlier)
    assert loud.earlier[0].asking is first
    assert [(m.content, m.tool_call_id) for m in loud.earlier[0].results] == [("ONE", "c1")]
    # the turn it came from is unchanged
    assert [m.content for m in turn.earlier[0].results] == ["one"]


def test_a_signal_without_a_reason_takes_it_from_stop() -> None:
    """`{"stop": false}` is a transient failure; `{"stop": true}` a completion."""
    going_on = read_signal(ToolMessage("x", tool_call_id="c1", artifact={"stop": False}))
    assert (going_on.valid, going_on.stop, going_on.reason) == (True, False, Outcome.TRANSIENT)
    done = read_signal(ToolMessage("x", tool_call_id="c2", artifact={"stop": True}))
    assert (done.valid, done.stop, done.reason) == (True, True, Outcome.COMPLETED)


class _Loud(str):
    """A str subclass whose own methods raise: only the plain str protocol may be used."""

    __slots__ = ()

    def __str__(self) -> str:
        raise RuntimeError("__str__ ran")

    def isspace(self) -> bool:
        raise RuntimeError("isspace ran")


class _LoudDict(dict[str, Any]):
    def get(self, *args: Any) -> Any:
        raise RuntimeError("get ran")


def test_content_blocks_of_subclasses_are_read_as_plain_text() -> None:
    for content in ([_Loud("Paid.")], [_LoudDict(type="text", text=_Loud("Paid."))]):
        decision = decide(turn_of((content, DONE)))  # type: ignore[arg-type]
        assert decision.relay == [{"type": "text", "text": "Paid."}]
        assert type(decision.relay[0]["text"]) is str  # type: ignore[index]
    assert decide(turn_of((_Loud("Paid."), DONE))).relay == "Paid."
    assert decide(turn_of((_Loud(" "), DONE))).signals[0].problem is Problem.EMPTY_RELAY


def test_a_budget_after_an_answer_sends_the_model_the_content_then_the_policy_text() -> None:
    policy = StopPolicy(parallel="all", max_transient_retries=0)
    answered = ("raw a", signal(Outcome.COMPLETED, answer="A."))
    decision = decide(turn_of(answered, ("later", signal("transient"))), policy)
    assert decision.rule is Rule.RETRY_BUDGET
    assert decision.relay == "A.\n\n" + policy.retry_budget_message
    assert decision.for_model == "raw a\n\n" + policy.retry_budget_message
