"""Records that prove savings: `would_save` in shadow mode, unsignalled vs invalid, the schema
version, and the once-per-tool warning for malformed signals. On every router."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

import toolstop.record
from helpers import run
from routers import ROUTERS, Router
from toolstop import Outcome, StopPolicy, signal
from toolstop.record import RECORD_SCHEMA_VERSION
from toolstop.testing import ScriptedChatModel, call, forced_tool

pytestmark = pytest.mark.contract

DONE = ("Refunds take 5 days.", signal(Outcome.COMPLETED))
RETRY = ("The service timed out.", signal(Outcome.TRANSIENT))
SECRET = "CONTENT-7f3"


@pytest.fixture(params=ROUTERS, ids=lambda r: r.name)
def router(request: pytest.FixtureRequest) -> Router:
    return request.param  # type: ignore[no-any-return]


def agent_run(router: Router, script: list[Any], *tools: Any, mode: str = "never") -> Any:
    model = ScriptedChatModel(script)
    agent = router.build(model, list(tools), policy=StopPolicy(mode=mode), checkpointer=None)  # type: ignore[arg-type]
    _, state = run(agent)
    model.assert_complete()
    return state


def spent_after(messages: list[BaseMessage], tool_call_id: str) -> dict[str, int]:
    """Model calls and tokens of the AIMessages after the result of `tool_call_id` (from the
    messages' own usage, independently of the record)."""
    at = next(
        i
        for i, m in enumerate(messages)
        if isinstance(m, ToolMessage) and m.tool_call_id == tool_call_id
    )
    later = [m for m in messages[at + 1 :] if isinstance(m, AIMessage)]
    usage = [m.usage_metadata or {} for m in later]
    return {
        "model_calls": len(later),
        "input_tokens": sum(u.get("input_tokens", 0) for u in usage),
        "output_tokens": sum(u.get("output_tokens", 0) for u in usage),
    }


def test_shadow_mode_records_what_a_stop_would_have_saved(router: Router) -> None:
    lookup = forced_tool("lookup", RETRY, DONE, DONE)
    script = [
        call("lookup", id="c1"),
        call("lookup", id="c2"),  # completed: hard mode would stop here
        call("lookup", id="c3"),
        "Refunds take five days.",
    ]
    state = agent_run(router, script, lookup)
    record = state["stop_record"]
    assert (record["rule"], record["would_stop"], record["tool_call_ids"]) == (
        "none",
        "completed",
        ["c2"],
    )
    expected = spent_after(state["messages"], "c2")
    assert expected["model_calls"] == 2
    assert expected["input_tokens"] > 0
    assert record["would_save"] == expected
    assert record["model_calls"] == 4


def test_shadow_mode_that_would_not_stop_saves_nothing(router: Router) -> None:
    state = agent_run(router, [call("lookup"), "answer"], forced_tool("lookup", RETRY))
    record = state["stop_record"]
    assert record["would_stop"] is None
    assert record["would_save"] == {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}


def test_hard_mode_saves_nothing_more_and_carries_the_schema_version(router: Router) -> None:
    state = agent_run(router, [call("lookup")], forced_tool("lookup", DONE), mode="hard")
    record = state["stop_record"]
    assert record["schema_version"] == RECORD_SCHEMA_VERSION == 5
    assert (record["rule"], record["stopped"], record["model_calls"]) == ("completed", True, 1)
    assert record["would_save"] == {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}


@pytest.fixture
def fresh_warnings() -> Any:
    toolstop.record._warned.clear()
    yield
    toolstop.record._warned.clear()


def malformed_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "toolstop" and r.levelno == logging.WARNING]


def test_a_malformed_signal_is_logged_once_per_tool_and_problem(
    router: Router, caplog: pytest.LogCaptureFixture, fresh_warnings: Any
) -> None:
    caplog.set_level(logging.WARNING, logger="toolstop")
    yes = (f"text {SECRET}", {"stop": "yes", "note": SECRET})
    done = (f"text {SECRET}", {"stop": True, "reason": "done"})
    for _ in range(2):  # two runs, the same tool and problem: one line
        agent_run(router, [call("lookup", query=SECRET), "answer"], forced_tool("lookup", yes))
    lines = malformed_lines(caplog)
    assert [(r.toolstop_signal["tool"], r.toolstop_signal["problem"]) for r in lines] == [  # type: ignore[attr-defined]
        ("lookup", "stop_not_bool")
    ]
    message = lines[0].getMessage()
    assert "lookup" in message
    assert "stop_not_bool" in message
    # the same tool with another problem, another tool with the same problem: one line each
    agent_run(router, [call("lookup"), "answer"], forced_tool("lookup", done))
    agent_run(router, [call("other"), "answer"], forced_tool("other", yes))
    seen = [
        (r.toolstop_signal["tool"], r.toolstop_signal["problem"]) for r in malformed_lines(caplog)
    ]  # type: ignore[attr-defined]
    assert seen == [
        ("lookup", "stop_not_bool"),
        ("lookup", "unknown_reason"),
        ("other", "stop_not_bool"),
    ]
    assert SECRET not in caplog.text  # never content, never arguments


def test_unsignalled_results_and_tool_errors_are_not_warned_about(
    router: Router, caplog: pytest.LogCaptureFixture, fresh_warnings: Any
) -> None:
    caplog.set_level(logging.WARNING, logger="toolstop")
    agent_run(router, [call("plain"), "answer"], forced_tool("plain", ("text", None)))
    agent_run(router, [call("boom"), "answer"], forced_tool("boom", RuntimeError("boom")))
    assert malformed_lines(caplog) == []


# -- which tool's result preceded the final answer (schema version 3) -------------------------
ORDER = "Order 4711 ships Monday from the Berlin warehouse by express courier."
REPEATED = "Order 4711 ships Monday from the Berlin warehouse by express courier."
REASONED = "Given that, I would wait: a refund now costs more than it saves you."


def test_the_record_says_which_tool_ended_the_run_and_how_much_the_answer_repeats(
    router: Router,
) -> None:
    plain = forced_tool("lookup_order", (ORDER, None))
    repeats = agent_run(router, [call("lookup_order", id="c1"), REPEATED], plain)
    reasons = agent_run(router, [call("lookup_order", id="c1"), REASONED], plain)
    for state, overlap, action in ((repeats, 1.0, "relayed"), (reasons, 0.0, "own")):
        record = state["stop_record"]
        final = state["messages"][-1]
        assert isinstance(final, AIMessage)
        usage = final.usage_metadata or {}
        assert record["calls_by_tool"] == {"lookup_order": 1}
        assert record["ended_after"] == {
            "tools": {"lookup_order": overlap},
            "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
            "judged": {"lookup_order": {"shape": "prose", "action": action, "fields": []}},
        }
        assert usage["input_tokens"] > 0
        assert ORDER not in str(record)  # numbers only, never content


def test_a_partial_overlap_counts_the_answers_words_that_the_result_holds(router: Router) -> None:
    # 8 words in the answer, 4 of them ("order", "4711", "ships", "monday") in the result
    answer = "ORDER 4711 ships Monday, but call us tomorrow."
    state = agent_run(
        router, [call("lookup_order"), answer], forced_tool("lookup_order", (ORDER, None))
    )
    assert state["stop_record"]["ended_after"]["tools"] == {"lookup_order": 0.5}


def test_no_ended_after_when_a_relay_ends_the_run_or_no_tool_ran(router: Router) -> None:
    hard = agent_run(router, [call("lookup")], forced_tool("lookup", DONE), mode="hard")
    assert hard["stop_record"]["ended_after"] is None
    direct = agent_run(router, ["Hello."], forced_tool("lookup", DONE))
    assert direct["stop_record"]["ended_after"] is None
    assert direct["stop_record"]["calls_by_tool"] == {}


def test_a_tool_turn_before_a_further_model_turn_is_not_the_one_that_ended_it(
    router: Router,
) -> None:
    script = [call("lookup_order", id="c1"), call("weather", id="c2"), REPEATED]
    state = agent_run(
        router,
        script,
        forced_tool("lookup_order", (ORDER, None)),
        forced_tool("weather", ("Sunny, 21 degrees.", None)),
    )
    record = state["stop_record"]
    assert record["calls_by_tool"] == {"lookup_order": 1, "weather": 1}
    assert record["ended_after"]["tools"] == {"weather": 0.0}
