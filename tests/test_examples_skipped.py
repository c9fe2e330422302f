"""Issue 46 item 4: a cut-short example names every call a stop would have skipped (a second
call of the same tool included), and every example pair shows its judgement."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from toolstop.cli import main
from toolstop.report.examples import cut_short_pair

EXCHANGE = "exchange_delivered_order_items"
CANCEL = "cancel_pending_order"
DONE = '{{"order_id": "#W{n}", "status": "exchange requested", "item_ids": ["{n}1"]}}'
ERROR = "Error: the item is not delivered yet"


def _call(name: str, number: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": {}, "id": f"c{number}"}])


def _result(name: str, number: int, text: str) -> ToolMessage:
    return ToolMessage(text, tool_call_id=f"c{number}", name=name)


def _exchange_both(first: str = DONE.format(n=1)) -> list[BaseMessage]:
    """ "Exchange both, and cancel the other order": two exchanges and a cancellation."""
    return [
        HumanMessage("Hi"),
        AIMessage("Which orders?"),
        HumanMessage("exchange both, and cancel the pending one"),
        _call(EXCHANGE, 1),
        _result(EXCHANGE, 1, first),
        _call(EXCHANGE, 2),
        _result(EXCHANGE, 2, DONE.format(n=2)),
        _call(CANCEL, 3),
        _result(CANCEL, 3, '{"order_id": "#W3", "status": "cancelled"}'),
        AIMessage("Both exchanges for #W1 and #W2 are requested and #W3 is cancelled."),
    ]


def test_a_second_call_of_the_same_tool_is_named_as_skipped() -> None:
    pair = cut_short_pair(_exchange_both(), EXCHANGE)
    assert pair is not None
    assert pair["later_tools"] == [EXCHANGE, CANCEL]  # before: [CANCEL]
    assert pair["skipped_calls"] == 2
    assert pair["tool_result"] == DONE.format(n=1)
    assert pair["judged"]["action"] in ("restated", "relayed", "computed", "own")


def test_the_stop_comes_at_the_first_successful_call() -> None:
    pair = cut_short_pair(_exchange_both(first=ERROR), EXCHANGE)
    assert pair is not None
    assert pair["tool_result"] == DONE.format(n=2)  # an error signals no stop
    assert pair["later_tools"] == [CANCEL]
    assert pair["skipped_calls"] == 1


def test_calls_of_the_same_turn_are_not_skipped() -> None:
    parallel = AIMessage(
        "",
        tool_calls=[
            {"name": EXCHANGE, "args": {}, "id": "c1"},
            {"name": CANCEL, "args": {}, "id": "c2"},
        ],
    )
    messages = [
        HumanMessage("go"),
        parallel,
        _result(EXCHANGE, 1, DONE.format(n=1)),
        _result(CANCEL, 2, "cancelled"),
        _call(EXCHANGE, 3),
        _result(EXCHANGE, 3, DONE.format(n=3)),
        AIMessage("Done."),
    ]
    pair = cut_short_pair(messages, EXCHANGE)
    assert pair is not None
    assert pair["later_tools"] == [EXCHANGE]


def _openai(messages: list[BaseMessage]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, HumanMessage):
            rows.append({"role": "user", "content": m.content})
        elif isinstance(m, ToolMessage):
            rows.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif isinstance(m, AIMessage):
            calls = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": "{}"}}
                for c in m.tool_calls
            ]  # fmt: skip
            rows.append({"role": "assistant", "content": m.content or None, "tool_calls": calls})
            if not calls:
                del rows[-1]["tool_calls"]
    return {"messages": rows}


def test_the_report_and_page_show_the_skipped_calls_and_each_judgement(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    restated = [
        HumanMessage("exchange it"),
        _call(EXCHANGE, 1),
        _result(EXCHANGE, 1, DONE.format(n=5061)),
        AIMessage("The exchange for order #W5061 is requested."),
    ]
    lines = [_openai(_exchange_both())] + [_openai(restated) for _ in range(5)]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = io.StringIO()
    argv = ["report", "--from", str(log), "--out", str(tmp_path), "--examples", "2"]
    assert main(argv, out=out) == 0
    document = json.loads((tmp_path / "report.json").read_text())
    entry = next(e for e in document["candidates"] if e["tool"] == EXCHANGE)
    first, second, *_ = entry["examples"]
    assert first["cut_short"] is True
    assert first["later_tools"] == [EXCHANGE, CANCEL]
    assert {"shape", "action", "fields"} <= set(first["judged"])
    assert second["judged"] == {
        "shape": "object",
        "action": "restated",
        "fields": ["order_id", "status"],
    }
    page = (tmp_path / "report.html").read_text()
    assert f"had it signalled a stop, {EXCHANGE}, {CANCEL} would not have run" in page
    assert "judged: restated, result object (fields used: order_id, status)" in page


def test_repeated_skipped_calls_are_counted_on_the_page() -> None:
    from toolstop.report.evidence import render_evidence

    example = {
        "thread_id": "t",
        "run": 2,
        "cut_short": True,
        "later_tools": [EXCHANGE, CANCEL, EXCHANGE],
        "skipped_calls": 5,
        "tool_result": "r",
        "final_answer": "a",
        "judged": {"shape": "prose", "action": "computed", "fields": [], "earlier": []},
    }
    page = render_evidence({"candidates": [{"tool": EXCHANGE, "examples": [example]}]})
    said = f"{EXCHANGE} (2 calls), {CANCEL} and 2 more call(s) would not have run"
    assert said in page
    assert "; judged: computed, result prose</summary>" in page
