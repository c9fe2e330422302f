"""The stop record's arithmetic, unit-tested on `toolstop.record` (no graph).

The routers' tests check records end to end; these pin what they cannot reach: a record from an
older checkpoint that lacks an outcome key, inputs left unchanged, responses without usage, and
the malformed-signal warning's text and cap.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from toolstop import Outcome, Problem, Rule, StopPolicy
from toolstop import record as record_module
from toolstop.decision import CallSignal, Decision
from toolstop.record import count_model_call, fold_turn, new_record, stopped


def _signal(i: int, reason: Outcome | None = None, problem: Problem | None = None) -> CallSignal:
    stop = reason in (Outcome.COMPLETED, Outcome.FATAL) and problem is None
    return CallSignal(
        tool=f"tool{i}", tool_call_id=f"c{i}", reason=reason, stop=stop, problem=problem
    )


def test_a_new_record_starts_empty() -> None:
    policy = StopPolicy(mode="polish", parallel="any")
    assert new_record(policy) == {
        "schema_version": record_module.RECORD_SCHEMA_VERSION,
        "run": 1,
        "rule": "none",
        "stopped": False,
        "mode": "polish",
        "parallel": "any",
        "would_stop": None,
        "would_save": {"model_calls": 0, "input_tokens": 0, "output_tokens": 0},
        "tools": [],
        "tool_call_ids": [],
        "relayed": [],
        "on_budget": "message",
        "invalid_signals": [],
        "outcomes": {
            "completed": 0,
            "transient": 0,
            "fatal": 0,
            "policy_block": 0,
            "invalid": 0,
            "unsignalled": 0,
            "rejected": 0,
        },
        "transient_retries": 0,
        "tool_turns": 0,
        "model_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "calls_by_tool": {},
        "ended_after": None,
        "after_first": {},
        "asked": [],
        "would_skip": [],
    }
    assert new_record(policy, run=4)["run"] == 4


def test_a_turn_is_counted_by_kind_even_into_a_record_that_lacks_the_key() -> None:
    """A record restored from an older checkpoint may lack an outcome key: it counts from 0."""
    record = new_record(StopPolicy())
    record["outcomes"] = {}
    signals = (
        _signal(0, Outcome.TRANSIENT),
        _signal(1, Outcome.TRANSIENT),
        _signal(2, problem=Problem.UNSIGNALLED),
        _signal(3, problem=Problem.UNSIGNALLED),
        _signal(4, problem=Problem.MISSING_STOP),
        _signal(5, problem=Problem.UNKNOWN_REASON),
    )
    decision = Decision(stop=False, rule=Rule.NONE, signals=signals, transient_in_turn=2)
    folded = fold_turn(record, decision)
    assert folded["outcomes"] == {"transient": 2, "unsignalled": 2, "invalid": 2}
    assert folded["invalid_signals"] == [
        {"tool": "tool4", "tool_call_id": "c4", "problem": "missing_stop"},
        {"tool": "tool5", "tool_call_id": "c5", "problem": "unknown_reason"},
    ]
    assert (folded["tool_turns"], folded["transient_retries"]) == (1, 2)
    again = fold_turn(folded, decision)
    assert again["outcomes"] == {"transient": 4, "unsignalled": 4, "invalid": 4}
    assert len(again["invalid_signals"]) == 4


def test_folding_and_stopping_leave_the_input_record_unchanged() -> None:
    """Records are values: a checkpointed record must not change when the next turn is folded."""
    record = fold_turn(
        new_record(StopPolicy()),
        Decision(stop=False, rule=Rule.NONE, signals=(_signal(0, problem=Problem.MISSING_STOP),)),
    )
    before = copy.deepcopy(record)
    signals = (_signal(1, Outcome.COMPLETED), _signal(2, problem=Problem.STOP_NOT_BOOL))
    decision = Decision(stop=True, rule=Rule.COMPLETED, signals=signals, deciding=signals[:1])
    folded = fold_turn(record, decision)
    ended = stopped(folded, decision)
    assert record == before
    assert [s["tool_call_id"] for s in folded["invalid_signals"]] == ["c0", "c2"]
    assert (ended["rule"], ended["stopped"]) == ("completed", True)
    assert (ended["tools"], ended["tool_call_ids"]) == (["tool1"], ["c1"])


@pytest.mark.parametrize(
    ("response", "tokens"),
    [
        (
            AIMessage(
                "a", usage_metadata={"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}
            ),
            (7, 3),
        ),
        (
            AIMessage(
                "a", usage_metadata={"input_tokens": 7, "output_tokens": 0, "total_tokens": 7}
            ),
            (7, 0),
        ),
        (
            AIMessage(
                "a", usage_metadata={"input_tokens": 0, "output_tokens": 2, "total_tokens": 2}
            ),
            (0, 2),
        ),
        (AIMessage("a"), (0, 0)),  # no usage: a call, no tokens (never estimated)
        ("a plain string from a middleware", (0, 0)),
    ],
)
def test_a_model_call_adds_the_providers_tokens_only(
    response: Any, tokens: tuple[int, int]
) -> None:
    record = new_record(StopPolicy())
    record["input_tokens"], record["output_tokens"] = 100, 50
    counted = count_model_call(record, response)
    assert counted["model_calls"] == 1
    assert (counted["input_tokens"], counted["output_tokens"]) == (100 + tokens[0], 50 + tokens[1])
    assert counted["would_save"] == {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}
    assert record["model_calls"] == 0


def test_the_malformed_signal_warning_is_worded_and_capped(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(record_module, "_warned", set())
    monkeypatch.setattr(record_module, "_WARNED_MAX", 2)
    caplog.set_level(logging.WARNING, logger="toolstop")
    for tool in ("a", "a", "b", "c"):
        record_module._warn_once(tool, Problem.MISSING_STOP)
    assert [r.getMessage() for r in caplog.records] == [
        f"tool {tool!r} returned a malformed stop signal (missing_stop); it went back to the "
        "model. Logged once per tool and problem; every occurrence is in the stop record."
        for tool in ("a", "b")  # "a" once; "c" is past the cap of 2 remembered pairs
    ]
    assert caplog.records[0].toolstop_signal == {"tool": "a", "problem": "missing_stop"}  # type: ignore[attr-defined]


def test_folding_a_turn_warns_of_a_malformed_signal_only_by_its_tools_name(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool's signal bug is logged naming the tool; a tool exception is not a signal bug."""
    monkeypatch.setattr(record_module, "_warned", set())
    caplog.set_level(logging.WARNING, logger="toolstop")
    signals = (
        CallSignal(
            tool="book", tool_call_id="c1", reason=None, stop=False, problem=Problem.STOP_NOT_BOOL
        ),
        CallSignal(
            tool="pay", tool_call_id="c2", reason=None, stop=False, problem=Problem.TOOL_ERROR
        ),
    )
    fold_turn(new_record(StopPolicy()), Decision(stop=False, rule=Rule.NONE, signals=signals))
    assert [r.toolstop_signal for r in caplog.records] == [  # type: ignore[attr-defined]
        {"tool": "book", "problem": "stop_not_bool"}
    ]


def test_never_mode_keeps_the_first_rule_that_would_have_stopped() -> None:
    book = CallSignal(tool="book", tool_call_id="c1", reason=Outcome.COMPLETED, stop=True)
    would = Decision(stop=False, rule=Rule.NONE, would_stop=Rule.COMPLETED, deciding=(book,))
    first = fold_turn(new_record(StopPolicy(mode="never")), would)
    assert (first["would_stop"], first["tools"], first["tool_call_ids"]) == (
        "completed",
        ["book"],
        ["c1"],
    )
    later = Decision(stop=False, rule=Rule.NONE, would_stop=Rule.FATAL, deciding=())
    again = fold_turn(first, later)
    assert (again["would_stop"], again["tools"], again["tool_call_ids"]) == (
        "completed",
        ["book"],
        ["c1"],
    )


def test_a_stop_records_the_results_it_showed_unless_the_model_narrated() -> None:
    book = CallSignal(tool="book", tool_call_id="c2", reason=Outcome.COMPLETED, stop=True)
    shown = Decision(stop=True, rule=Rule.COMPLETED, deciding=(book,), relayed=("c1", "c2"))
    record = stopped(new_record(StopPolicy()), shown)
    assert (record["rule"], record["stopped"], record["relayed"]) == (
        "completed",
        True,
        ["c1", "c2"],
    )
    narrated = Decision(
        stop=True, rule=Rule.COMPLETED, narrate=True, deciding=(book,), relayed=("c1", "c2")
    )
    assert stopped(new_record(StopPolicy(mode="polish")), narrated)["relayed"] == []


def test_model_calls_after_a_would_stop_are_what_never_mode_would_save() -> None:
    usage = {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}
    record = new_record(StopPolicy(mode="never"))
    before = count_model_call(record, AIMessage("a", usage_metadata=usage))
    assert before["would_save"] == {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}
    after = count_model_call(
        {**before, "would_stop": "completed"}, AIMessage("b", usage_metadata=usage)
    )
    assert after["would_save"] == {"model_calls": 1, "input_tokens": 5, "output_tokens": 2}
    assert (after["model_calls"], after["input_tokens"], after["output_tokens"]) == (2, 10, 4)


# -- what hard mode would do: from a tool's first successful call ------------------------------
def _plain(tool: str, call_id: str, problem: Problem = Problem.UNSIGNALLED) -> CallSignal:
    return CallSignal(tool=tool, tool_call_id=call_id, reason=None, stop=False, problem=problem)


def _turn(*signals: CallSignal, would: Rule | None = None) -> Decision:
    deciding = signals if would is not None else ()
    return Decision(
        stop=False, rule=Rule.NONE, would_stop=would, deciding=deciding, signals=signals
    )


def _call(record: Any, tokens: tuple[int, int], *, asks: bool = False) -> Any:
    usage = {"input_tokens": tokens[0], "output_tokens": tokens[1], "total_tokens": sum(tokens)}
    calls = [{"name": "x", "args": {}, "id": "x1"}] if asks else []
    return count_model_call(record, AIMessage("", tool_calls=calls, usage_metadata=usage))


def test_after_first_counts_every_call_after_a_tools_first_success_and_what_it_skipped() -> None:
    """status, then a failed return, a retried one, an answer: a stop on the status call would
    have saved the three later calls and skipped initiate_return (a cut-short run)."""
    record = _call(new_record(StopPolicy(mode="never")), (10, 1), asks=True)
    record = fold_turn(record, _turn(_plain("get_order_status", "c1")))
    record = _call(record, (20, 2), asks=True)
    record = fold_turn(record, _turn(_plain("initiate_return", "c2", Problem.TOOL_ERROR)))
    assert "initiate_return" not in record["after_first"]  # an error is no success
    record = _call(record, (30, 3), asks=True)
    record = fold_turn(record, _turn(_plain("initiate_return", "c3")))
    record = _call(record, (40, 4))
    assert record["after_first"] == {
        "get_order_status": {
            "model_calls": 3,
            "input_tokens": 90,
            "output_tokens": 9,
            "skipped": ["initiate_return"],
        },
        "initiate_return": {
            "model_calls": 1,
            "input_tokens": 40,
            "output_tokens": 4,
            "skipped": [],
        },
    }
    assert record["would_skip"] == []  # no tool signalled: nothing would have stopped
    assert record["asked"] == []  # the last call answered
    assert _call(record, (1, 1), asks=True)["asked"] == ["x"]


def test_a_turn_that_changes_no_after_first_entry_keeps_them_and_adds_its_own_to_a_copy() -> None:
    """A turn whose tools every entry skipped already keeps the entries; a first success in it
    starts its entry in a new dict, never in the folded record's (records are values)."""
    record = fold_turn(new_record(StopPolicy()), _turn(_plain("a", "c1")))
    record = fold_turn(record, _turn(_plain("b", "c2", Problem.TOOL_ERROR)))  # skipped, no entry
    before = copy.deepcopy(record)
    again = fold_turn(record, _turn(_plain("b", "c3", Problem.TOOL_ERROR)))
    assert again["after_first"] is record["after_first"]  # nothing new skipped, nothing started
    later = fold_turn(record, _turn(_plain("b", "c4")))  # b's first success
    assert record == before
    assert later["after_first"] == {
        "a": {"model_calls": 0, "input_tokens": 0, "output_tokens": 0, "skipped": ["b"]},
        "b": {"model_calls": 0, "input_tokens": 0, "output_tokens": 0, "skipped": []},
    }


def test_would_skip_names_the_tools_after_the_turn_that_would_have_stopped() -> None:
    status = CallSignal(tool="status", tool_call_id="c1", reason=Outcome.COMPLETED, stop=True)
    record = fold_turn(new_record(StopPolicy(mode="never")), _turn(status, would=Rule.COMPLETED))
    assert record["would_skip"] == []  # the deciding turn itself ran in hard mode too
    record = fold_turn(record, _turn(_plain("initiate_return", "c2"), _plain("email", "c3")))
    record = fold_turn(record, _turn(_plain("initiate_return", "c4")))
    assert record["would_skip"] == ["initiate_return", "email"]


def test_skipped_names_are_capped() -> None:
    record = fold_turn(new_record(StopPolicy(mode="never")), _turn(_plain("first", "c0")))
    for n in range(40):
        record = fold_turn(record, _turn(_plain(f"tool{n}", f"c{n + 1}")))
    skipped = record["after_first"]["first"]["skipped"]
    assert skipped == [f"tool{n}" for n in range(record_module.SKIPPED_MAX)]
    assert len(record["after_first"]) == 41


def test_a_record_of_an_older_shape_carried_on_gets_no_after_first() -> None:
    old = dict(new_record(StopPolicy(mode="never")))
    del old["after_first"], old["would_skip"]
    folded = fold_turn(old, _turn(_plain("a", "c1"), would=Rule.COMPLETED))  # type: ignore[arg-type]
    folded = fold_turn(folded, _turn(_plain("b", "c2")))
    counted = _call(folded, (1, 1))
    assert "after_first" not in counted
    assert "would_skip" not in counted


@pytest.mark.parametrize(
    "content",
    [
        "Error: 'NoneType' object has no attribute 'get'",
        "ERROR: El RUT ingresado no existe",
        "  [Exception] timeout",
        "Traceback (most recent call last): ...",
        '{"error": "Fuera del plazo"}',
        '{"errors": ["bad id"], "data": null}',
        '{"success": "False", "message": "no stock"}',
        '{"success": false}',
        [{"type": "text", "text": "Failed to reach the service"}],
        # keys spelt with an escape: JSON reads them as `error` and `success`
        '{"\\u0065rror": "quota exceeded"}',
        '{"suc\\u0063ess": false, "id": 3}',
    ],
)
def test_an_error_message_reads_as_an_error(content: Any) -> None:
    assert record_module.reads_as_error(content)


@pytest.mark.parametrize(
    "content",
    [
        '{"order_id": "ORD-1", "status": "shipped"}',
        '{"success": "True", "message": "created"}',
        '{"error": null, "id": 7}',
        '{"message": "no error here", "status": "error-free"}',
        '{"note": "\\"error\\" in a value", "ok": true}',
        '[{"error": "nested, in a list: not the result\'s own"}]',
        "No errors found in the filter.",
        "The order has no error.",
        "",
        None,
        '{"error": "x", ' + '"pad": "' + "a" * record_module.ERROR_SCAN + '"}',  # too long
    ],
)
def test_a_result_reads_as_a_success(content: Any) -> None:
    assert not record_module.reads_as_error(content)


def test_a_first_call_whose_result_reads_as_an_error_starts_no_after_first() -> None:
    """A converted tool signals `transient` on its error message: hard mode stops at its first
    *successful* call, so the calls after an error message are not a saving (the prediction
    counted them, overestimating by up to 100% on the recorded traffic)."""
    from langchain_core.messages import ToolMessage

    from toolstop.record import failed_calls

    record = _call(new_record(StopPolicy(mode="never")), (10, 1), asks=True)
    turn = _turn(_plain("reserve", "c1"), _plain("status", "c2"))
    results = [
        ToolMessage("Error: no such room", tool_call_id="c1"),
        ToolMessage('{"status": "ok"}', tool_call_id="c2"),
    ]
    failed = failed_calls(record, turn, results)
    assert failed == {"c1"}
    record = fold_turn(record, turn, failed)
    assert set(record["after_first"]) == {"status"}
    record = _call(record, (20, 2), asks=True)
    retry = _turn(_plain("reserve", "c3"))
    ok = [ToolMessage('{"reservation_id": "R-1"}', tool_call_id="c3")]
    record = fold_turn(record, retry, failed_calls(record, retry, ok))
    record = _call(record, (30, 3))
    assert record["after_first"]["reserve"]["model_calls"] == 1  # only the answer after it
    assert record["after_first"]["status"]["model_calls"] == 2
    # a tool already counted is not read again; an older record is not read at all
    assert failed_calls(record, _turn(_plain("status", "c4")), results[:1]) == frozenset()
    old = dict(record)
    del old["after_first"]
    assert failed_calls(old, turn, results) == frozenset()  # type: ignore[arg-type]


def test_a_failed_answer_is_folded_with_its_exception_type_only() -> None:
    def failing(i: int, text: Any) -> CallSignal:
        return CallSignal(
            tool=f"tool{i}", tool_call_id=f"c{i}", reason=Outcome.COMPLETED, stop=True,
            answer_failed=text,
        )  # fmt: skip

    record = new_record(StopPolicy())
    turn = Decision(
        stop=False,
        rule=Rule.NONE,
        signals=(
            failing(0, "KeyError: 'seat' in a text that may quote content"),
            _signal(1, Outcome.COMPLETED),
            failing(2, "blank: the answer has no text"),
            failing(3, {"not": "text"}),
            failing(4, "no type here"),
        ),
    )
    folded = fold_turn(record, turn)
    assert "answer_failed" not in record  # the input is not changed
    assert folded["answer_failed"] == [
        {"tool": "tool0", "why": "KeyError"},
        {"tool": "tool2", "why": "blank"},
        {"tool": "tool3", "why": "unreadable"},
        {"tool": "tool4", "why": "unreadable"},
    ]
    again = fold_turn(folded, turn)
    assert len(again["answer_failed"]) == 8
    assert len(folded["answer_failed"]) == 4
    for _ in range(5):
        again = fold_turn(again, turn)
    assert len(again["answer_failed"]) == record_module.ANSWER_FAILED_MAX
    assert "answer_failed" not in fold_turn(record, Decision(stop=False, rule=Rule.NONE))
