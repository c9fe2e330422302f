"""Each provider's history rules, with valid and invalid threads; `toolstop check` names them."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from toolstop.testing import assert_valid_history, history_problems


def _asks(*ids: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "t", "args": {}, "id": i} for i in ids])


def _result(call_id: str) -> ToolMessage:
    return ToolMessage(content="r", tool_call_id=call_id)


Q, ANSWER = HumanMessage("q"), AIMessage("answer")
PARALLEL_TURN = [SystemMessage("s"), Q, _asks("1", "2"), _result("1"), _result("2"), ANSWER]
TWO_TURNS = [*PARALLEL_TURN, HumanMessage("next"), _asks("3"), _result("3"), AIMessage("done")]
REMINDER = [Q, _asks("1"), _result("1"), HumanMessage("(reminder)"), ANSWER]
HALF_ANSWERED = [Q, _asks("1", "2"), _result("1"), ANSWER]
USER_BETWEEN = [Q, _asks("1"), HumanMessage("wait"), _result("1"), ANSWER]
ORPHAN = [Q, _result("9"), ANSWER]
TWO_ANSWERS = [Q, AIMessage("a"), AIMessage("b")]
SYSTEM_AFTER_TOOL = [Q, _asks("1"), _result("1"), SystemMessage("note"), ANSWER]

MISTRAL_USER_AFTER_TOOL = (
    "mistral (role order): message 3: rejected with \"Unexpected role 'user' after role 'tool'\""
)

# Each thread, and what each provider says about it, written out by hand from the rules.
CASES: dict[str, tuple[list[BaseMessage], dict[str, list[str]]]] = {
    "parallel turn": (PARALLEL_TURN, {"openai": [], "anthropic": [], "mistral": []}),
    "two turns": (TWO_TURNS, {"openai": [], "anthropic": [], "mistral": []}),
    "user message right after a tool result": (
        REMINDER,
        {"openai": [], "anthropic": [], "mistral": [MISTRAL_USER_AFTER_TOOL]},
    ),
    "one of two calls answered": (
        HALF_ANSWERED,
        {
            "openai": [
                "openai (every tool call answered): message 3: tool calls ['2'] left unanswered"
            ],
            "anthropic": [
                "anthropic (tool results directly after the tool use): message 3: tool uses "
                "['2'] have no tool result right after the assistant turn"
            ],
            "mistral": [
                "mistral (as many tool results as tool calls): message 3: the assistant "
                "message before it got fewer tool results than it made calls"
            ],
        },
    ),
    "user message between the tool use and its result": (
        USER_BETWEEN,
        {
            "openai": [
                "openai (every tool call answered): message 2: tool calls ['1'] left unanswered",
                "openai (no orphan tool message): message 3: ToolMessage '1' answers no tool "
                "call of the assistant message before it",
            ],
            "anthropic": [
                "anthropic (tool results directly after the tool use): message 2: tool uses "
                "['1'] have no tool result right after the assistant turn",
                "anthropic (no orphan tool result): message 3: ToolMessage '1' answers no tool "
                "use of the assistant turn before it",
            ],
            "mistral": [
                "mistral (role order): message 3: rejected with \"Unexpected role 'tool' after "
                "role 'user'\""
            ],
        },
    ),
    "orphan tool message": (
        ORPHAN,
        {
            "openai": [
                "openai (no orphan tool message): message 1: ToolMessage '9' answers no tool "
                "call of the assistant message before it"
            ],
            "anthropic": [
                "anthropic (no orphan tool result): message 1: ToolMessage '9' answers no tool "
                "use of the assistant turn before it"
            ],
            "mistral": [
                "mistral (role order): message 1: rejected with \"Unexpected role 'tool' after "
                "role 'user'\"",
                "mistral (as many tool results as tool calls): message 2: the assistant "
                "message before it got more tool results than it made calls",
            ],
        },
    ),
    "two assistant turns in a row": (
        TWO_ANSWERS,
        {
            "openai": [],
            "anthropic": [
                "anthropic (alternating roles): message 2: an assistant turn right after an "
                "assistant turn"
            ],
            "mistral": [],
        },
    ),
    "system message right after a tool result": (
        SYSTEM_AFTER_TOOL,
        {
            "openai": [],
            "anthropic": [],
            "mistral": [
                "mistral (role order): message 3: rejected with \"Unexpected role 'system' "
                "after role 'tool'\""
            ],
        },
    ),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("provider", ["openai", "anthropic", "mistral"])
def test_each_provider_rule_on_valid_and_invalid_threads(case: str, provider: Any) -> None:
    messages, expected = CASES[case]
    assert history_problems(messages, provider) == expected[provider]


def test_all_reports_every_provider_in_order() -> None:
    messages, expected = CASES["user message between the tool use and its result"]
    everything = expected["openai"] + expected["anthropic"] + expected["mistral"]
    assert history_problems(messages, "all") == everything
    assert history_problems(messages, ["mistral", "openai"]) == (
        expected["mistral"] + expected["openai"]
    )


def test_assert_valid_history_names_the_provider_and_its_rule() -> None:
    assert_valid_history(TWO_TURNS, provider="all")
    assert_valid_history(REMINDER, provider="openai")
    with pytest.raises(AssertionError, match="Unexpected role 'user' after role 'tool'"):
        assert_valid_history(REMINDER, provider="mistral")
    with pytest.raises(ValueError, match="unknown provider"):
        assert_valid_history(TWO_TURNS, provider="gemini")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown provider"):
        assert_valid_history(TWO_TURNS, provider=[])


def test_the_default_is_what_it_was_before_providers_were_named() -> None:
    # The rules all providers share, in the 0.1 wording; no provider-specific rule.
    assert history_problems(REMINDER) == []
    assert history_problems(TWO_ANSWERS) == []
    assert history_problems(HALF_ANSWERED) == ["message 3: tool calls ['2'] left unanswered"]
    assert history_problems(ORPHAN) == ["message 1: ToolMessage '9' answers no open call"]
    assert history_problems([Q, _asks("1")]) == [
        "end: tool calls ['1'] left unanswered",
        "end: the thread does not end on an AIMessage without tool calls",
    ]


def test_finished_runs_end_on_an_answer_running_ones_need_not() -> None:
    running = [Q, _asks("1"), _result("1")]
    finished_rule = "end: the thread does not end on an AIMessage without tool calls"
    assert history_problems(running, "all") == [finished_rule]
    assert history_problems(running, "all", finished=False) == []
    assert history_problems([], finished=False) == []
    # An unanswered call is a provider's rule, not the finished-run rule: still reported.
    assert history_problems([Q, _asks("1")], "openai", finished=False) == [
        "openai (every tool call answered): end: tool calls ['1'] left unanswered"
    ]


def test_check_names_the_provider_whose_rule_a_router_breaks() -> None:
    """A `before_model` hook that adds a user reminder after tool results (docs/composition.md),
    in never mode so the run finishes: OpenAI and Anthropic accept the history,
    Mistral does not, and the breach says so.
    """
    pytest.importorskip("langchain.agents", reason="needs the `agents` extra")
    from langchain.agents import create_agent
    from langchain.agents.middleware import before_model

    from toolstop import StopOnArtifact
    from toolstop._check.scenarios import SCENARIOS
    from toolstop.testing import Router, check

    @before_model
    def remind(state: Any, runtime: Any) -> dict[str, Any] | None:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [HumanMessage("(reminder: answer briefly)")]}
        return None

    def build(model: Any, tools: Any, *, policy: Any, checkpointer: Any) -> Any:
        middleware = [remind, StopOnArtifact(policy)]
        return create_agent(model, list(tools), middleware=middleware, checkpointer=checkpointer)

    router = Router(
        name="reminder", build=build, model_node="model", stop_node="model", polish_node="model"
    )
    [result] = check([SCENARIOS["retryable-then-success.never"]], [router])
    history = [b for b in result.breaches if b.startswith("the history is invalid")]
    assert history, result.breaches
    assert all("(mistral (role order)" in b for b in history), history
    assert any("Unexpected role 'user' after role 'tool'" in b for b in history)
    assert all(b.endswith("mistral would reject the next turn") for b in history)


def test_anthropic_hoists_system_messages_out_of_the_turn_order() -> None:
    # langchain-anthropic moves a SystemMessage into the `system` parameter: between a tool use
    # and its result it breaks nothing there, while OpenAI and Mistral see a message in between.
    system_between = [Q, _asks("1"), SystemMessage("note"), _result("1"), ANSWER]
    assert history_problems(system_between, "anthropic") == []
    assert history_problems(system_between, "openai") == [
        "openai (every tool call answered): message 2: tool calls ['1'] left unanswered",
        "openai (no orphan tool message): message 3: ToolMessage '1' answers no tool call of "
        "the assistant message before it",
    ]
    # ...and the check goes on after it: a later orphan result is still found.
    later_orphan = [Q, SystemMessage("s"), _asks("1"), _result("1"), _result("7"), ANSWER]
    assert history_problems(later_orphan, "anthropic") == [
        "anthropic (no orphan tool result): message 4: ToolMessage '7' answers no tool use of "
        "the assistant turn before it"
    ]
    # Two answers with only a system message between them are two assistant turns in a row.
    assert history_problems(
        [Q, AIMessage("a"), SystemMessage("s"), AIMessage("b")], "anthropic"
    ) == [
        "anthropic (alternating roles): message 3: an assistant turn right after an assistant turn"
    ]
    # The shared rules (no provider named) do not skip a system message either.
    assert history_problems(system_between) == [
        "message 2: tool calls ['1'] left unanswered",
        "message 3: ToolMessage '1' answers no open call",
    ]


def test_a_thread_may_start_with_an_orphan_tool_message() -> None:
    trimmed = [_result("1"), ANSWER]  # a history trimmed from the front
    assert history_problems(trimmed) == ["message 0: ToolMessage '1' answers no open call"]


def test_a_call_without_an_id_is_named_by_an_empty_id() -> None:
    no_id = AIMessage(content="", tool_calls=[{"name": "t", "args": {}, "id": None}])
    assert history_problems([Q, no_id], finished=False) == ["end: tool calls [''] left unanswered"]


def test_mistral_counts_results_against_calls_at_the_end_of_a_running_thread() -> None:
    end = "mistral (as many tool results as tool calls): end: {} tool results than calls"
    assert history_problems([Q, _asks("1")], "mistral", finished=False) == [end.format("fewer")]
    two_results = [Q, _asks("1"), _result("1"), _result("1")]
    assert history_problems(two_results, "mistral", finished=False) == [end.format("more")]


def test_mistral_names_a_role_it_has_no_name_for() -> None:
    from langchain_core.messages import FunctionMessage

    legacy = [Q, FunctionMessage(content="r", name="f"), ANSWER]
    assert history_problems(legacy, "mistral") == [
        "mistral (role order): message 1: rejected with \"Unexpected role 'function' after "
        "role 'user'\""
    ]


def test_an_unknown_provider_among_known_ones_is_named_alone() -> None:
    with pytest.raises(ValueError, match="unknown provider") as error:
        history_problems(TWO_TURNS, ["openai", "gemini"])  # type: ignore[list-item]
    assert str(error.value) == (
        "unknown provider ['gemini']: use one of ['openai', 'anthropic', 'mistral'] or 'all'"
    )


def test_assert_valid_history_lists_every_problem_and_wants_a_finished_run() -> None:
    with pytest.raises(AssertionError) as error:
        assert_valid_history([*HALF_ANSWERED, _asks("5")])
    assert str(error.value) == (
        "invalid message history:\n"
        "- message 3: tool calls ['2'] left unanswered\n"
        "- end: tool calls ['5'] left unanswered\n"
        "- end: the thread does not end on an AIMessage without tool calls"
    )
    running = [Q, _asks("1"), _result("1")]
    with pytest.raises(AssertionError, match="does not end on an AIMessage"):
        assert_valid_history(running)
    assert_valid_history(running, finished=False)
