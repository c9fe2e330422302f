"""What the final answer did with a tool's result (`toolstop._judge`), and the advice the report
draws from it (`toolstop.report.advice`), on pairs shaped like real traffic: JSON lists of
flights the model filtered, receipts it paraphrased, JSON receipts rewritten as confirmations,
retrieved chunks it picked from."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolstop._judge import FIELD_CHARS, FIELDS_MAX, judge, shape_of
from toolstop.report.advice import Judgements, advise, verdict_of

FLIGHTS = json.dumps(
    [
        {
            "flight_number": f"HAT{n:03d}",
            "origin": "JFK",
            "destination": "SFO",
            "scheduled_departure_time_est": f"{8 + n:02d}:00:00",
            "prices": {"basic_economy": 100 + 7 * n, "economy": 200 + 11 * n},
        }
        for n in range(8)
    ]
)
CANCELLED = json.dumps(
    {"reservation_id": "ZFA04Y", "status": "cancelled", "refund": 450, "payment_id": "gift_7"}
)
POLICIES = (
    "Returns: items can be returned within 30 days of delivery for a full refund when unused "
    "and in their original packaging; refunds go to the original payment method within five "
    "business days once the warehouse has inspected the parcel. "
    "Shipping: standard delivery takes three to five business days; express delivery is "
    "available in most regions for an extra fee and arrives the next business day when ordered "
    "before noon; international parcels may be held by customs for additional checks, and "
    "duties are paid by the recipient on arrival. Gift cards cannot be exchanged for cash."
)


@pytest.mark.parametrize(
    ("result", "shape"),
    [
        ("", "empty"), ("  ", "empty"), ("[]", "empty"), ("{}", "empty"),
        (FLIGHTS, "list"), ('{"flights": [1, 2]}', "list"), (CANCELLED, "object"),
        ("42", "value"), ('"done"', "value"), ("Transferred.", "value"),
        ("Order 1 ships Monday from Berlin.", "prose"), ("[not json", "value"),
        ("{not json at all, but prose}", "prose"),
        # a list beside a count, a page or the query is the list; beside a record's fields not
        ('{"results": [1, 2], "Total": 2, "next_cursor": null}', "list"),
        ('{"query": "hat", "items": [1, 2], "page": 1}', "list"),
        ('{"data": [1, 2], "totalCount": 2, "nextPageToken": "x", "has-more": false}', "list"),
        ('{"order_id": "W1", "status": "delivered", "items": [1, 2]}', "object"),
        ('{"results": [1, 2], "total": {"value": 2}}', "object"),
        ('{"results": [1, 2], "pages": [1, 2]}', "object"),
    ],
)  # fmt: skip
def test_the_shape_of_a_result(result: str, shape: str) -> None:
    assert shape_of(result)[0] == shape


def test_a_pick_from_a_list_beside_its_count_is_selected() -> None:
    """A search API's envelope (`{"results": [...], "total": n}`) read as an object made a pick
    from its list `restated`, so the advice could convert a tool whose stop relays the list."""
    items = json.loads(FLIGHTS)
    enveloped = json.dumps({"results": items, "total": len(items), "page": 1})
    answer = "HAT001 leaves at 09:00 and costs $107 in basic economy."
    assert judge(enveloped, answer)["action"] == judge(FLIGHTS, answer)["action"] == "selected"
    assert judge(enveloped, answer)["shape"] == "list"
    # the count the answer states is the result's, not a computed number
    counted = judge(enveloped, f"I found {len(items)} flights; HAT001 is the cheapest.")
    assert counted["action"] == "selected"


@pytest.mark.parametrize(
    ("answer", "action"),
    [
        # filtered to the user's constraint, asked which to book: never a relay
        ("The cheapest is HAT002 at 10:00 for $114 in basic economy. Which one should I book?",
         "asked"),
        # summed two legs: a number the result does not hold
        ("HAT001 at 09:00 and HAT003 at 11:00 come to $228 together.", "computed"),
        # picked one of eight
        ("HAT001 leaves at 09:00 and costs $107 in basic economy.", "selected"),
        # picked two, naming the origin and destination every flight shares
        ("From JFK to SFO, HAT001 and HAT003 leave in the morning.", "selected"),
        # only what every flight shares: no flight picked
        ("All of them fly from JFK to SFO.", "restated"),
        # times and prices alone (digits) and the keys' words use no item: the model's own
        ("Times vary: 00 and 00; origin, destination and economy prices differ.", "own"),
    ],
)  # fmt: skip
def test_a_filtered_flight_list_is_never_relayed(answer: str, action: str) -> None:
    judged = judge(FLIGHTS, answer)
    assert judged["shape"] == "list"
    assert judged["action"] == action


def test_digits_keys_and_punctuation_do_not_make_an_answer_relayed() -> None:
    result = json.dumps({"price": 1400, "time": "14:00", "gate": "B12"})
    assert judge(result, "price, time -- {gate}: 00!")["action"] == "own"
    assert judge("Flight at 14:00, 15:00, 16:00.", "14 00 15 00 16 00")["action"] == "own"


def test_a_paraphrased_short_receipt_reads_as_relayed() -> None:
    receipt = "Certificate 500 USD issued to user mia_li_3668 as compensation."
    paraphrase = (
        "I've sent you a $500 certificate as a gesture of goodwill. "
        "Is there anything else I can help you with?"  # a closing, not a question to act on
    )
    assert judge(receipt, paraphrase) == {"shape": "prose", "action": "relayed", "fields": []}


def test_reasoning_about_a_short_result_is_the_models_own() -> None:
    figures = "Order 4800: price 120 EUR, restocking fee 35 EUR, return shipping 12 EUR."
    reasoning = "Keeping it is cheaper for you than sending it back, so I suggest you do not."
    assert judge(figures, reasoning)["action"] == "own"
    assert judge(figures, "You would get 73 EUR back after the fees.")["action"] == "computed"


def test_a_json_receipt_rewritten_as_a_confirmation_is_restated_with_its_fields() -> None:
    answer = "Your reservation ZFA04Y is cancelled; the refund of $450 goes back to your card."
    assert judge(CANCELLED, answer) == {
        "shape": "object",
        "action": "restated",
        "fields": ["reservation_id", "status", "refund"],
    }


def test_an_answer_from_one_of_two_retrieved_chunks_selected_it() -> None:
    answer = "Unused items can be returned within 30 days of delivery for a full refund."
    assert judge(POLICIES, answer)["action"] == "selected"
    assert judge(POLICIES, POLICIES)["action"] == "relayed"


def test_field_names_are_masked_cut_and_capped() -> None:
    hostile = {f"k{n}\x1b[31m<b>{'x' * 80}": f"value{n}word" for n in range(20)}
    answer = " ".join(f"value{n}word" for n in range(20))
    fields = judge(json.dumps(hostile), answer)["fields"]
    assert len(fields) == FIELDS_MAX
    assert all(len(f) <= FIELD_CHARS for f in fields)
    assert all(
        set(f) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
        for f in fields
    )


@pytest.mark.parametrize(
    "result",
    ["[" * 5000 + "]" * 5000, "[" * 30 + '"deep"' + "]" * 30,
     json.dumps(list(range(100_000))), "\x00\ud800", "null", "true"],
)  # fmt: skip
def test_hostile_results_are_judged_without_a_crash(result: str) -> None:
    judged = judge(result, "deep 5 answer?")
    assert judged["action"] in ("asked", "computed", "selected", "relayed", "restated", "own")


# -- the advice ---------------------------------------------------------------------------------
def judged(**actions: int) -> dict[str, Any]:
    return {"runs": sum(actions.values()), "actions": actions, "shapes": {}, "fields": ["id"]}


@pytest.mark.parametrize(
    ("runs", "ended", "cut", "actions", "advice"),
    [
        (20, 10, 2, {"relayed": 10}, "cut_short"),  # 2 of 20 runs: 1 in 10, never convert
        (21, 10, 2, {"relayed": 10}, "convert"),  # under 1 in 10
        (3, 3, 1, {"relayed": 3}, "cut_short"),
        (8, 4, 0, {"relayed": 4}, "too_few"),
        (8, 5, 0, {"relayed": 3, "restated": 2}, "convert"),
        (8, 5, 0, {"relayed": 2, "restated": 1, "asked": 2}, "convert_with_answer"),
        (8, 5, 0, {"restated": 2, "selected": 2, "own": 1}, "keep"),
        (24, 24, 0, {"selected": 10, "computed": 8, "asked": 6}, "keep"),
    ],
)  # fmt: skip
def test_the_advice_bands(
    runs: int, ended: int, cut: int, actions: dict[str, int], advice: str
) -> None:
    got, why = advise(
        runs=runs, ended_runs=ended, cut_short_runs=cut, judged=judged(**actions), verdict="keep"
    )
    assert got == advice, why


def test_the_advice_says_why() -> None:
    assert advise(
        runs=8, ended_runs=5, cut_short_runs=0, judged=judged(restated=4, own=1), verdict="keep"
    )[1] == (
        "in 4 of 5 runs the answer only restated the result (id): have the tool write the "
        "user's text with toolstop.convert(TOOL, answer=...) (its convert line) or "
        "signal(..., answer=...)"
    )
    assert advise(runs=30, ended_runs=24, cut_short_runs=4, judged=judged(own=1), verdict="keep")[
        1
    ] == (
        "a stop on it would have skipped later tool calls in 4 of the 30 runs it would end: do "
        "not convert it as it is; besides, the model went beyond the result (own 1 of 1 runs): "
        "keep the model"
    )
    # answers that would serve are not said beside it: the cut-short runs decide
    assert advise(
        runs=30, ended_runs=24, cut_short_runs=4, judged=judged(relayed=5), verdict="keep"
    )[1] == (
        "a stop on it would have skipped later tool calls in 4 of the 30 runs it would end: do "
        "not convert it as it is"
    )
    keep = advise(
        runs=9, ended_runs=6, cut_short_runs=0, judged=judged(asked=4, own=2), verdict="x"
    )
    assert keep == (
        "keep",
        "the model went beyond the result (asked 4, own 2 of 6 runs): keep the model",
    )
    # the tool's name where it is a Python name, TOOL where it is not (a log's name, not code)
    for tool, shown in (("get_order", "get_order"), ("get-order", "TOOL")):
        said = advise(
            runs=8,
            ended_runs=5,
            cut_short_runs=0,
            judged=judged(restated=5),
            verdict="keep",
            tool=tool,
        )[1]
        assert f"toolstop.convert({shown}, answer=...)" in said


def test_records_without_a_judgement_fall_back_on_the_verdict() -> None:
    none = {"runs": 0, "actions": {}, "shapes": {}, "fields": []}
    kw: dict[str, Any] = {"runs": 9, "ended_runs": 6, "cut_short_runs": 0, "judged": none}
    assert advise(**kw, verdict="candidate")[0] == "convert"
    assert advise(**kw, verdict="mixed")[0] == "keep"
    assert [verdict_of(a, 3) for a in ("convert", "convert_with_answer", "keep", "cut_short")] == [
        "candidate", "candidate", "keep", "keep",
    ]  # fmt: skip
    assert (verdict_of("too_few", 3), verdict_of("too_few", 0)) == ("few", "none")


def test_odd_judgements_count_as_nothing() -> None:
    judgements = Judgements()
    for odd in (None, [], {"t": "x"}, {"t": {"action": "shouted", "shape": "prose"}},
                {"t": {"action": "own", "shape": 3}}):  # fmt: skip
        judgements.add(odd)
    assert judgements.of("t")["runs"] == 0
    judgements.add({"t": {"action": "restated", "shape": "object", "fields": ["a", 3, "b", "a"]}})
    assert judgements.of("t") == {
        "runs": 1,
        "actions": {"restated": 1},
        "shapes": {"object": 1},
        "fields": ["a", "b"],
        "earlier": [],
    }


def test_a_judge_that_fails_leaves_the_tool_out_and_the_record_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug in the heuristic must never break a run's end: the record is written without it."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from toolstop import StopPolicy, _lifecycle
    from toolstop._lifecycle import answered, ended_after, open_run
    from toolstop.decision import current_turn

    def broken(results: Any, answer: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise ZeroDivisionError

    asking = AIMessage("", id="a1", tool_calls=[{"name": "t", "args": {}, "id": "c1"}])
    messages = [
        HumanMessage("q", id="h"),
        asking,
        ToolMessage("result", tool_call_id="c1", name="t"),
    ]
    run = open_run(None, None, StopPolicy(mode="never"), None, messages=messages[:1])
    run = {**run, "record": {**run["record"], "tool_turns": 1}}
    final = AIMessage("result", id="a2")
    _, run = answered(run, final, StopPolicy(), remaining_steps=None, loop_steps=2)
    turn = current_turn(messages)
    assert ended_after(run, turn, final)["record"]["ended_after"]["judged"] == {
        "t": {"shape": "value", "action": "relayed", "fields": []}
    }
    monkeypatch.setattr(_lifecycle, "judge_turn", broken)
    after = ended_after(run, turn, final)["record"]["ended_after"]
    assert after["judged"] == {}
    assert after["tools"] == {"t": 1.0}


# Rules tuned on the recorded τ²-bench traffic (docs/advisor-validation.md); each is general.


@pytest.mark.parametrize(
    "closing",
    [
        "¿Hay algo más en lo que pueda ayudarte?",
        "¿En qué más puedo ayudarle?",
        "Posso ajudar com mais alguma coisa?",
        "Puis-je vous aider avec autre chose ?",
        "Kann ich Ihnen sonst noch weiter helfen?",
    ],
)
def test_a_closing_in_another_language_is_not_a_question(closing: str) -> None:
    answer = f"Your order ORD-7 is cancelled. {closing}"
    assert judge(json.dumps({"order_id": "ORD-7", "status": "cancelled"}), answer)["action"] == (
        "restated"
    )


def test_a_yes_no_offer_of_the_next_step_is_not_asking() -> None:
    slot = json.dumps({"slot": "SLOT-1", "hospital": "Padre Hurtado", "date": "2026-04-20"})
    offer = "One slot at Padre Hurtado on 2026-04-20. Would you like me to book it?"
    assert judge(slot, offer)["action"] == "restated"
    spanish = "Hay un cupo en Padre Hurtado el 2026-04-20. ¿Te gustaría agendar esta cita?"
    assert judge(slot, spanish)["action"] == "restated"
    # a question for something the task needs is asking, whatever words it shares
    which = "Hay un cupo en Padre Hurtado. ¿En qué fecha te gustaría ir?"
    assert judge(slot, which)["action"] == "asked"
    # so is a request without a question mark, beside an offer
    request = "Padre Hurtado has a slot. Would you like me to book it? I'll need your phone number."
    assert judge(slot, request)["action"] == "asked"


def test_accents_do_not_split_a_word() -> None:
    result = json.dumps({"hospital": "Sotero Rio", "beds": "12"})
    assert judge(result, "Le esperan en el Sótero Río.")["fields"] == ["hospital"]


def test_an_outcome_announced_in_the_models_words_is_restated() -> None:
    """A bare status, or a JSON receipt with a yes flag, answered in other words (or another
    language): a tool-written answer would have served."""
    answer = "I have transferred you to a human agent; please wait while I connect you."
    assert judge("Transfer successful", answer)["action"] == "restated"
    receipt = json.dumps({"escalated": "True", "message": "Tu solicitud ha sido transferida."})
    english = "Your request has been passed to a human agent. Thank you for your patience!"
    assert judge(receipt, english)["action"] == "restated"
    # data without a yes flag, a flag without a message, a bare word that is no outcome, and
    # short prose stay the model's own
    assert judge(json.dumps({"stock": "0", "price": "380"}), english)["action"] == "own"
    assert judge(json.dumps({"stop": True, "reason": "completed"}), english)["action"] == "own"
    assert judge("text", "Here is what I found.")["action"] == "own"
    assert judge("true", english)["action"] == "own"  # a JSON scalar is data
    not_found = "No protocol was found for that diagnosis."
    reasoning = "The policy gives priority to children with strabismus; refer the adult later."
    assert judge(not_found, reasoning)["action"] == "own"


def test_a_record_written_as_labelled_fields_is_restated_not_relayed() -> None:
    record = "SLOTS: - Slot: SLOT-1 | Hospital: Padre Hurtado | Date/Time: 2026-04-20 11:30"
    answer = "There is one slot at Padre Hurtado on 20 April 2026 at 11:30."
    assert judge(record, answer)["action"] == "restated"
    notice = "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."
    assert (
        judge(notice, "You are being transferred to a human agent. Please hold on.")["action"]
        == "relayed"
    )


def test_a_lists_values_are_read_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """A list result repeats its values item after item, and its items are read for the fields
    and again for `selected`: each distinct value is judged once per answer (with the items
    read once, the run end's largest cost on a 40-item list went from 858 to 354 us)."""
    from toolstop import _judge

    flights = [
        {"id": f"LH{n}", "from": "FRA", "to": "JFK", "price": 400 + n, "seats": n % 7}
        for n in range(40)
    ]
    read: list[str] = []
    real = _judge._used

    def counted(value: str, words: set[str], numbers: set[float]) -> bool:
        read.append(value)
        return real(value, words, numbers)

    monkeypatch.setattr(_judge, "_used", counted)
    found = judge(json.dumps({"flights": flights}), "The cheapest is LH0 at 400 EUR.")
    assert found == {"shape": "list", "action": "selected", "fields": ["id", "price"]}
    distinct = {str(v) for flight in flights for v in flight.values()}
    assert sorted(read) == sorted(distinct)


def test_an_item_past_the_reading_limit_is_still_read_for_a_selection() -> None:
    """The fields are read from the first 5,000 values of a list; whether the answer selected
    an item is read item by item, so an item past that limit still counts."""
    filler = [{"code": f"row{k}x", "seat": f"seat{k}y"} for k in range(150)]
    items = [{"rows": filler, "flight": f"AB{n:03d}"} for n in range(20)]  # 301 values each
    assert judge(json.dumps(items), "Flight AB019 it is.")["action"] == "selected"


@pytest.mark.parametrize(
    ("record", "fielded"),
    [
        ("Hospital: Padre Hurtado | Date: 2026-04-20 | Doctor: Lee", True),  # exactly three
        ("Hospital: Padre Hurtado | Date: 2026-04-20", False),
        ("Hospital: Padre Hurtado | Date: 2026-04-20 at 11h30 | Doctor Lee", False),
    ],
)
def test_three_labelled_fields_make_a_record_two_do_not(record: str, fielded: bool) -> None:
    """The boundary of `FIELDED`: three `Label: value` fields are a record written as text (a
    restatement of it is `restated`), two are prose (`relayed`)."""
    answer = "Your slot is at Padre Hurtado on 2026-04-20 with Doctor Lee."
    assert judge(record, answer)["action"] == ("restated" if fielded else "relayed")


# -- issue 46 item 5: facts restated from earlier results are not computed --------------------
EXCHANGED = (
    '{"order_id": "#W2378156", "status": "exchange requested", '
    '"exchange_items": ["4602305039"], "exchange_price_difference": 0.0}'
)
USER = (
    '{"user_id": "yusuf_rossi_9620", "payment_methods": {"credit_card_9513926": '
    '{"source": "credit_card", "brand": "mastercard", "last_four": "2478"}}}'
)
FLIGHT = '{"flight_number": "HAT170", "scheduled_departure_time_est": "19:00:00"}'
RECEIPT_ANSWER = (
    "The exchange for order #W2378156 is requested; any difference goes to your mastercard "
    "ending in 2478."
)


def test_a_number_from_an_earlier_result_is_restated_not_computed() -> None:
    assert judge(EXCHANGED, RECEIPT_ANSWER)["action"] == "computed"  # as before, alone
    earlier = [("get_user_details", USER), ("get_order_details", '{"order_id": "#W2378156"}')]
    assert judge(EXCHANGED, RECEIPT_ANSWER, earlier) == {
        "shape": "object",
        "action": "restated",
        "fields": ["order_id", "status"],
        "earlier": ["get_user_details"],  # only the tool whose result held 2478
    }


def test_several_earlier_tools_are_named_the_most_recent_first() -> None:
    answer = RECEIPT_ANSWER + " Your flight HAT170 leaves at 19:00."
    earlier = [("get_user_details", USER), ("get_flight_status", FLIGHT)]
    judged = judge(EXCHANGED, answer, earlier)
    assert judged["action"] == "restated"
    assert judged["earlier"] == ["get_flight_status", "get_user_details"]


def test_a_number_in_no_result_is_still_computed() -> None:
    answer = RECEIPT_ANSWER + " You will get 37 dollars back."  # 37 is in no result
    judged = judge(EXCHANGED, answer, [("get_user_details", USER)])
    assert judged == {"shape": "object", "action": "computed", "fields": ["order_id", "status"]}


def test_a_prose_receipt_with_earlier_facts_is_restated_not_relayed() -> None:
    receipt = "Your exchange is confirmed and a new item ships soon."
    answer = "Your exchange is confirmed and the new item ships soon; card ending 2478 is billed."
    assert judge(receipt, answer, [("get_user_details", USER)])["action"] == "restated"
    # the same answer without the card: the receipt as it is would have served
    assert judge(receipt, "Your exchange is confirmed and a new item ships soon.")["action"] == (
        "relayed"
    )


def test_the_run_end_reads_earlier_results_of_the_thread() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from toolstop import StopPolicy
    from toolstop._lifecycle import answered, ended_after, open_run
    from toolstop.decision import current_turn

    def asking(name: str, number: int) -> AIMessage:
        return AIMessage(
            "", id=f"a{number}", tool_calls=[{"name": name, "args": {}, "id": f"c{number}"}]
        )

    messages = [
        HumanMessage("who am I", id="h1"),
        asking("get_user_details", 1),
        ToolMessage(USER, tool_call_id="c1", name="get_user_details"),
        AIMessage("Which order?", id="a2"),
        HumanMessage("exchange it", id="h2"),
        asking("exchange_delivered_order_items", 3),
        ToolMessage(EXCHANGED, tool_call_id="c3", name="exchange_delivered_order_items"),
    ]
    run = open_run(None, None, StopPolicy(mode="never"), None, messages=messages[:5])
    run = {**run, "record": {**run["record"], "tool_turns": 1}}
    final = AIMessage(RECEIPT_ANSWER, id="a4")
    _, run = answered(run, final, StopPolicy(), remaining_steps=None, loop_steps=2)
    turn = current_turn(messages)
    judged = ended_after(run, turn, final, messages)["record"]["ended_after"]["judged"]
    assert judged["exchange_delivered_order_items"]["action"] == "restated"
    assert judged["exchange_delivered_order_items"]["earlier"] == ["get_user_details"]
    alone = ended_after(run, turn, final)["record"]["ended_after"]["judged"]
    assert alone["exchange_delivered_order_items"]["action"] == "computed"


def test_the_advice_says_which_earlier_results_a_template_needs() -> None:
    judgements = Judgements()
    for _ in range(5):
        judgements.add(
            {"x": {"action": "restated", "shape": "object", "fields": ["order_id"],
                   "earlier": ["get_user_details", 7]}}
        )  # fmt: skip
    judged = judgements.of("x")
    assert judged["earlier"] == ["get_user_details"]
    advice, why = advise(
        runs=5, ended_runs=5, cut_short_runs=0, judged=judged, verdict="keep", why=""
    )
    assert advice == "convert_with_answer"
    assert why.endswith("(its template needs fields of earlier results: get_user_details)")


@pytest.mark.timeout(120)  # a hang guard: linear, this takes milliseconds; quadratic, hours
def test_an_answer_without_a_full_stop_is_judged_in_linear_time() -> None:
    """A security review: `[^.!?\\n]*\\?` tried at every position made 200,000 characters of
    one sentence take 50 s per answer (a 1 MB log 247 s). 2,000,000 characters now."""
    from toolstop._judge import _QUESTION

    assert _QUESTION.findall("a" * 2_000_000) == []
    assert [q.strip() for q in _QUESTION.findall("Is it ok? Yes. And this?\nno")] == [
        "Is it ok?",
        "And this?",
    ]
    judged = judge("Order 7 shipped.", "a" * 2_000_000 + "?")
    assert judged["action"] == "asked"


def test_a_value_that_is_a_number_is_read_as_the_numbers_in_its_text() -> None:
    """A value is used when the answer states every number its text holds (10 or more), the
    text read as the judge reads any text: ".15" and "15." hold 15, "0012" holds 12, "1,200"
    holds 1200; 25.0 is not stated."""
    result = json.dumps({"a": ".15", "b": "15.", "c": 25.0, "d": "0012", "e": "1,200", "f": "7"})
    judged = judge(result, "That is 15 for 1200 units, 12 left and 7 more.")
    assert judged["fields"] == ["a", "b", "d", "e"]
    assert judge(result, "No figures in this answer.")["fields"] == []


def test_a_word_every_item_shares_picks_no_item() -> None:
    """Three of forty products named: "Widget" is in every item's name, so it does not make the
    other 37 read as used (the answer selected; it did not restate the list)."""
    records = [{"id": f"sku-{n:04d}", "name": f"Widget {n}", "price": 9.99 + n} for n in range(40)]
    result = json.dumps({"results": records})
    answer = "Three fit: Widget 1 (sku-0001) at 10.99, Widget 2 at 11.99 and Widget 5 at 14.99."
    assert judge(result, answer) == {
        "shape": "list",
        "action": "selected",
        "fields": ["id", "name", "price"],
    }
    assert judge(result, "Every Widget is in stock.")["action"] == "restated"
