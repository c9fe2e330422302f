"""`toolstop report --from LOG --template TOOL`: an `answer=` template learned from the answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from toolstop.cli import main
from toolstop.convert import render_answer
from toolstop.report.template import Pair, learn_template, pairs_of, template_lines

TRAFFIC = Path(__file__).parent / "fixtures" / "traffic" / "tau2_student_domains"


def booking(number: int, flight: str, total: float) -> dict[str, Any]:
    return {"reservation_id": f"R{number:03d}", "flight": flight, "total": total}


def conversation(number: int, flight: str, total: float, departs: str) -> list[Any]:
    """A run: search, book, and the model's answer restating both results' facts."""
    return [
        HumanMessage(f"book {flight}"),
        AIMessage("", tool_calls=[{"name": "search", "args": {}, "id": f"s{number}"}]),
        ToolMessage(
            json.dumps({"flights": [{"number": flight, "departs": departs}]}),
            tool_call_id=f"s{number}",
            name="search",
        ),
        AIMessage("", tool_calls=[{"name": "book", "args": {}, "id": f"b{number}"}]),
        ToolMessage(
            json.dumps(booking(number, flight, total)), tool_call_id=f"b{number}", name="book"
        ),
        AIMessage(
            f"Booked! Your reservation R{number:03d} on {flight} departs at {departs}. "
            f"The total is {total:.2f} dollars."
        ),
    ]


def test_pairs_are_the_runs_whose_answer_came_right_after_the_tool() -> None:
    messages = [
        *conversation(1, "HAT001", 120.0, "08:00"),
        HumanMessage("thanks"),
        AIMessage("You're welcome."),  # a run without the tool: no pair
    ]
    pairs = list(pairs_of(messages, "book"))
    assert len(pairs) == 1
    assert pairs[0].result == booking(1, "HAT001", 120.0)
    assert pairs[0].context == {"search": {"flights": [{"number": "HAT001", "departs": "08:00"}]}}
    assert list(pairs_of(messages, "search")) == []  # the answer came after book, not search


def test_a_template_over_the_result_and_an_earlier_result_carries_every_fact() -> None:
    recorded = [
        conversation(n, f"HAT{n:03d}", 100.0 + n * 7.25, f"{8 + n}:15") for n in range(1, 7)
    ]
    pairs = [p for messages in recorded for p in pairs_of(messages, "book")]
    learned = learn_template("book", pairs)
    assert learned.pairs == 6
    assert learned.template is not None
    assert "{reservation_id}" in learned.template
    assert "{context[search][flights][0][departs]}" in learned.template
    assert "{total:.2f}" in learned.template
    assert learned.uses_context == ["search"]
    assert (learned.coverage, learned.covered_share) == (1.0, 1.0)
    # rendered on a new booking, it says that booking's facts, none of the recorded ones
    new = Pair(
        result=booking(99, "XYZ9", 55.5),
        answer="",
        context={"search": {"flights": [{"number": "XYZ9", "departs": "23:05"}]}},
    )
    text = render_answer(learned.template, new.result, new.context)
    assert (
        text
        == "Booked! Your reservation R099 on XYZ9 departs at 23:05. The total is 55.50 dollars."
    )
    assert learned.document()["convert"] == (
        f"toolstop.convert(book, answer={json.dumps(learned.template)})"
    )


def test_a_sentence_with_a_fact_found_in_no_result_is_left_out() -> None:
    pairs = [
        Pair(
            result={"order_id": f"O{n}", "status": "cancelled"},
            answer=f"Order O{n} is cancelled. Your refund of {n * 11} dollars is on its way.",
            context={},
        )
        for n in range(1, 5)
    ]
    learned = learn_template("cancel", pairs)
    assert learned.template == "Order {order_id} is {status}."
    assert learned.unmapped_answers == 4  # the refund sum is in no result: computed
    # facts per answer: the order id, "cancelled" and the refund sum; the template carries two
    assert learned.coverage == 2 / 3


def test_a_field_some_results_lack_counts_as_not_carried() -> None:
    pairs = [
        Pair(result={"id": "A1", "eta": "May 2"}, answer="Order A1 arrives May 2.", context={}),
        Pair(result={"id": "A2", "eta": "May 3"}, answer="Order A2 arrives May 3.", context={}),
        Pair(result={"id": "A3"}, answer="Order A3 is on its way.", context={}),
    ]
    learned = learn_template("track", pairs)
    assert learned.template == "Order {id} arrives {eta}."
    assert learned.coverage == 2 / 3  # the third result cannot render it
    assert learned.covered_share == 2 / 3


def test_no_pairs_and_no_facts_give_no_template() -> None:
    assert learn_template("x", []).template is None
    prose = [Pair(result={"ok": True}, answer="Done, have a nice day!", context={})] * 3
    learned = learn_template("x", prose)
    assert learned.template is None
    assert learned.pairs == 3


def test_recorded_braces_and_secrets_do_not_reach_the_template() -> None:
    pairs = [
        Pair(
            result={"id": f"K{n}"},
            answer=f"Key K{n} made {{literal}}. Use password=hunter{n}x to log in.",
            context={},
        )
        for n in range(3)
    ]
    learned = learn_template("keys", pairs)
    assert learned.template is not None
    assert "hunter" not in learned.template
    assert render_answer(learned.template, {"id": "K9"}, {}).startswith("Key K9 made {literal}.")


def test_the_cli_prints_the_line_to_paste_and_writes_it_in_report_json(
    tmp_path: Path, capsys: Any
) -> None:
    log = tmp_path / "log.jsonl"
    lines = []
    for n in range(1, 5):
        lines.append(
            {
                "messages": [
                    {"role": "user", "content": "where is my order"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"c{n}",
                                "type": "function",
                                "function": {"name": "track", "arguments": "{}"},
                            }
                        ],
                    },
                    {
                        "role": "tool",
                        "tool_call_id": f"c{n}",
                        "content": json.dumps({"id": f"A{n}", "eta": f"May {n}"}),
                    },
                    {"role": "assistant", "content": f"Order A{n} arrives May {n}."},
                ]
            }
        )
    log.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["report", "--from", str(log), "--template", "track", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert 'toolstop.convert(track, answer="Order {id} arrives {eta}.")' in printed
    assert "coverage: 100%" in printed
    document = json.loads((out / "report.json").read_text(encoding="utf-8"))["template"]
    assert (document["pairs"], document["coverage"]) == (4, 1.0)


def test_template_needs_from(tmp_path: Path, capsys: Any) -> None:
    assert main(["report", "--db", str(tmp_path / "x.sqlite"), "--template", "track"]) == 2
    assert "--template needs --from" in capsys.readouterr().err


def test_on_real_recorded_traffic_the_template_is_checked_against_every_answer() -> None:
    """τ²-bench student domains (tests/fixtures/traffic): a supply lookup's answers restate
    its fields; the learned template carries all of their facts."""
    from toolstop.report.template import template_from

    learned = template_from(str(TRAFFIC / "conversations.jsonl"), "get_supply_details")
    assert learned.pairs == 3
    assert learned.template is not None
    assert "{supply_number}" in learned.template
    assert "{debt_amount}" in learned.template
    assert learned.coverage == 1.0


def test_the_advice_prints_the_line_that_converts_a_tool() -> None:
    from toolstop.report.advice import convert_line

    assert convert_line("lookup", "convert", {}) == "toolstop.convert(lookup)"
    judged = {"fields": ["reservation_id", "total", 'x"}', "{a}"], "earlier": ["search", "a b"]}
    assert convert_line("book", "convert_with_answer", judged) == (
        'toolstop.convert(book, answer="{reservation_id} {total} {context[search][...]}")'
    )  # a field or tool that is no plain name is left out (it comes from the log)
    assert convert_line("get-order", "convert", {}) == "toolstop.convert(TOOL)"
    assert convert_line("x", "keep", {}) is None
    assert convert_line("x", "cut_short", {}) is None


def test_a_list_position_that_is_the_wrong_item_is_caught() -> None:
    """A search returns two flights; the booked one alternates. A template that reads the
    departure of `flights[1]` is right on half the bookings only: it must not pass as covered."""
    flights = [{"number": "HA100", "departs": "06:10"}, {"number": "HA200", "departs": "13:15"}]
    pairs = []
    for n in range(6):
        booked = flights[n % 2]
        pairs.append(
            Pair(
                result={"reservation_id": f"R{n}", "flight": booked["number"]},
                answer=f"Booked R{n} on {booked['number']}, departing {booked['departs']}.",
                context={"search": {"flights": flights}},
            )
        )
    learned = learn_template("book", pairs)
    document = learned.document()
    assert learned.template is not None
    if "[departs]" in learned.template:  # it reads a departure by position: flagged
        assert document["wrong_pairs"] == 3
        assert document["list_positions"]
        assert any("WARNING" in line for line in template_lines(document))
    else:  # or it left the departure out
        assert document["wrong_pairs"] == 0
    assert learned.coverage < 1.0  # no template carries every departure


def _numbers_answer(n: int) -> list[Pair]:
    result = {f"v{i}": i * 7 + 1 for i in range(n)}
    answer = "\n".join(f"Value {i * 7 + 1}." for i in range(n))
    return [Pair(result=result, answer=answer, context={})] * 3


def test_learning_takes_work_linear_in_an_answers_length() -> None:
    """A security review: an answer of numbers on separate lines took 96 s at 129 KB (every
    sentence compared with every fact). Counted, not timed: Python calls (generator steps
    included) while learning, for an answer 4 times as long."""
    import cProfile
    import pstats

    work = []
    for n in (50, 200):
        profile = cProfile.Profile()
        profile.enable()
        learn_template("t", _numbers_answer(n))
        profile.disable()
        work.append(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]
    assert work[1] <= 5 * work[0]  # 4 times the answer: about 4 times the work, not 16


def test_a_huge_answer_gives_a_bounded_template() -> None:
    pairs = [
        Pair(result={"order": 7}, answer="Order 7 ok, " * 10_000, context={}) for _ in range(3)
    ]
    learned = learn_template("t", pairs)
    document = learned.document()
    assert learned.template is None or len(learned.template) <= 1000
    assert all(len(line) <= 4200 for line in template_lines(document))
