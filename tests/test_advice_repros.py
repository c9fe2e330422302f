"""The advisor on a new user's repro logs (the third trial): one tool called twice in a turn is
never read as one prose text, a call a stop would skip is counted even when it never got a
result, a call that never got a result is no stop, and the evidence shows what came before."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from toolstop._judge import judge_turn
from toolstop.cli import main


def _call(*calls: tuple[str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": name, "arguments": "{}"}}
            for i, name in calls
        ],
    }


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _report(tmp_path: Path, conversations: list[list[dict[str, Any]]]) -> dict[str, Any]:
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"messages": c}) + "\n" for c in conversations))
    out = tmp_path / "out"
    argv = ["report", "--from", str(log), "--out", str(out), "--examples", "3"]
    assert main(argv, out=io.StringIO()) == 0
    return json.loads((out / "report.json").read_text())


def _entry(document: dict[str, Any], tool: str) -> dict[str, Any]:
    return next(c for c in document["candidates"] if c["tool"] == tool)


def _exchange(n: int) -> list[dict[str, Any]]:
    """One run: `exchange_items` called twice in one turn, the answer naming both results."""
    first, second = (f'{{"exchange_id": "EX-{k}{n}", "status": "requested"}}' for k in (1, 2))
    return [
        {"role": "user", "content": "exchange both items"},
        _call((f"a{n}", "exchange_items"), (f"b{n}", "exchange_items")),
        _result(f"a{n}", first),
        _result(f"b{n}", second),
        {"role": "assistant", "content": f"Both items are exchanged (EX-1{n} and EX-2{n})."},
    ]


def test_two_results_of_one_tool_are_judged_as_a_list_not_as_prose(tmp_path: Path) -> None:
    document = _report(tmp_path, [_exchange(n) for n in range(6)])
    entry = _entry(document, "exchange_items")
    # joined by a space, the two JSON objects read as prose the answer "relayed": `convert`,
    # while hard mode would show the user two raw JSON objects
    assert entry["judged"]["actions"] == {"restated": 6}
    assert entry["judged"]["shapes"] == {"list": 6}
    assert entry["advice"] == "convert_with_answer"
    assert entry["judged"]["fields"] == ["exchange_id"]


def test_several_prose_results_are_never_relayed_one_is() -> None:
    receipt = "Your exchange request was filed and a return label is on its way by email."
    answer = "Your exchange request was filed; a return label is on its way by email."
    assert judge_turn([receipt], answer)["action"] == "relayed"
    assert judge_turn([receipt, receipt], answer)["action"] == "restated"
    mixed = judge_turn(['{"exchange_id": "EX-1"}', receipt], answer)
    assert mixed["shape"] == "prose"
    assert mixed["action"] == "restated"


def _open_after_a_lookup() -> list[dict[str, Any]]:
    """`get_order` succeeds, then the run is cut off on an `exchange_items` call."""
    return [
        {"role": "user", "content": "swap the shirt"},
        _call(("c2", "get_order")),
        _result("c2", '{"order_id": "#W1", "status": "delivered"}'),
        _call(("c3", "exchange_items")),
    ]


def test_a_call_left_without_a_result_is_skipped_by_an_earlier_stop(tmp_path: Path) -> None:
    left_open = [{"role": "user", "content": "where is my order?"}, _call(("c1", "get_order"))]
    document = _report(tmp_path, [left_open, _open_after_a_lookup()])
    lookup = _entry(document, "get_order")
    # a stop on get_order's result would never have asked for the exchange
    assert lookup["cut_short_runs"] == 1
    assert lookup["cut_short"]["skipped_tools"] == [
        {"tool": "exchange_items", "runs": 1, "writes": True}
    ]
    assert lookup["advice"] == "cut_short"
    assert lookup["advice_why"].startswith("a stop on it would have skipped later tool calls")
    # the run left open on get_order's own call: it ended on it, but no stop there
    assert (lookup["runs"], lookup["stoppable_runs"], lookup["ended_on_it"]) == (2, 1, 1)
    exchange = _entry(document, "exchange_items")
    assert (exchange["runs"], exchange["stoppable_runs"]) == (1, 0)


def test_earlier_names_only_results_before_the_judged_one() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from toolstop.report.examples import cut_short_pair

    def asks(call_id: str, name: str) -> AIMessage:
        return AIMessage("", tool_calls=[{"id": call_id, "name": name, "args": {}}])

    def run(before: list[Any]) -> list[Any]:
        return [
            HumanMessage("refund my order"),
            *before,
            asks("g", "get_order"),
            ToolMessage(
                '{"order_id": "W1", "status": "delivered"}', tool_call_id="g", name="get_order"
            ),
            asks("r", "refund"),
            ToolMessage('{"refund_id": 4711}', tool_call_id="r", name="refund"),
            AIMessage("Refund 4711 of order W1 is on its way."),
        ]

    # 4711 came from a result after get_order's: not restated from an earlier one
    later = cut_short_pair(run([]), "get_order")
    assert later is not None
    assert later["judged"]["action"] == "computed"
    assert "earlier" not in later["judged"]
    # the same number in a result before it is
    lookup = [asks("p", "past_refunds"), ToolMessage("4711", tool_call_id="p", name="past_refunds")]
    before = cut_short_pair(run(lookup), "get_order")
    assert before is not None
    assert before["judged"]["earlier"] == ["past_refunds"]


def _lookup_run(n: int, *, refund: bool) -> list[dict[str, Any]]:
    """`get_order` answers last; with `refund`, called again after a refund (cut short)."""
    order = f'{{"order_id": "W{n}", "status": "delivered"}}'
    again = [
        _call((f"r{n}", "refund")),
        _result(f"r{n}", '{"refunded": true}'),
        _call((f"h{n}", "get_order")),
        _result(f"h{n}", order),
    ]
    return [
        {"role": "user", "content": f"refund order W{n}"},
        _call((f"g{n}", "get_order")),
        _result(f"g{n}", order),
        *(again if refund else []),
        {"role": "assistant", "content": f"Order W{n} is refunded."},
    ]


def test_a_cut_short_tool_shows_k_distinct_cut_short_runs_first(tmp_path: Path) -> None:
    runs = [_lookup_run(n, refund=n < 4) for n in range(8)]
    document = _report(tmp_path, runs)
    entry = _entry(document, "get_order")
    assert (entry["advice"], entry["cut_short_runs"]) == ("cut_short", 4)
    examples = entry["examples"]
    assert [e.get("cut_short", False) for e in examples] == [True, True, True]
    assert len({(e["thread_id"], e["run"]) for e in examples}) == 3


def test_the_page_of_a_log_says_what_applies_to_it(tmp_path: Path) -> None:
    _report(tmp_path, [_exchange(n) for n in range(6)])
    page = (tmp_path / "out" / "report.html").read_text()
    # explain reads a checkpoint database: a --from user has none
    assert "toolstop explain" not in page
    assert "<code>line-N</code>: the one on its line N" in page
    # an OpenAI log records no time
    assert "ended - to -" not in page
    assert "no run&#x27;s end time recorded" in page


def test_calls_left_without_a_result_go_into_what_a_stop_would_skip() -> None:
    from toolstop import StopPolicy
    from toolstop.record import AfterFirst, fold_unanswered, new_record

    record = new_record(StopPolicy(mode="never"))
    record["would_stop"] = "completed"
    record["after_first"] = {
        "get_order": AfterFirst(model_calls=1, input_tokens=9, output_tokens=2, skipped=["log"])
    }
    folded = fold_unanswered(record, ["exchange_items", "exchange_items", "log"])
    assert folded["would_skip"] == ["exchange_items", "log"]
    assert folded["after_first"]["get_order"] == AfterFirst(
        model_calls=1, input_tokens=9, output_tokens=2, skipped=["log", "exchange_items"]
    )
    assert record["after_first"]["get_order"]["skipped"] == ["log"]  # not changed
    assert fold_unanswered(record, []) is record
