"""The example tools signal through their artifacts, each outcome as its docstring says."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool

from toolstop import ToolstopConfigError
from toolstop.examples import (
    SEARCH_INDEX,
    make_pay_tool,
    make_poll_job_tool,
    make_search_tool,
    make_write_record_tool,
)
from toolstop.examples.search import FATAL_MESSAGES, NOTHING_FOUND, RETRYABLE_MESSAGES


def use(tool: BaseTool, **args: Any) -> tuple[Any, Any]:
    message = tool.invoke({"type": "tool_call", "name": tool.name, "args": args, "id": "1"})
    return message.content, message.artifact


def test_search_outcomes() -> None:
    content, artifact = use(make_search_tool(force_outcome="success"), query="refund policy")
    assert content == SEARCH_INDEX["refund"]  # the JSON page, for the model
    prose = (
        "Refunds are paid to the original payment method within 5 business days. Orders can be "
        "refunded within 30 days. Shipping costs are refunded too."
    )
    assert artifact == {
        "stop": True,
        "reason": "completed",
        "answer": prose,  # the page as prose, for the user
        "found": True,
        "topic": "refund",
    }
    content, artifact = use(make_search_tool(force_outcome="retryable"), query="refund")
    assert content in RETRYABLE_MESSAGES
    assert artifact == {"stop": False, "reason": "transient"}
    content, artifact = use(make_search_tool(force_outcome="fatal"), query="refund")
    assert content in FATAL_MESSAGES
    assert artifact == {"stop": True, "reason": "fatal"}
    content, artifact = use(make_search_tool(force_outcome="success"), query="quantum gravity")
    assert (content, artifact["stop"], artifact["found"]) == (NOTHING_FOUND, True, False)


def test_search_forced_sequence_then_last_repeats() -> None:
    search = make_search_tool(force_outcome=["retryable", "success"])
    reasons = [use(search, query="shipping")[1]["reason"] for _ in range(3)]
    assert reasons == ["transient", "completed", "completed"]


def test_search_weights_are_seeded() -> None:
    weights = {"success": 60, "retryable": 25, "fatal": 15}

    def draw(seed: int) -> list[str]:
        search = make_search_tool(weights=weights, seed=seed)
        return [use(search, query="refund")[1]["reason"] for _ in range(30)]

    assert draw(7) == draw(7)
    assert set(draw(7)) == {"completed", "transient", "fatal"}


def test_search_rejects_unknown_outcomes() -> None:
    with pytest.raises(ToolstopConfigError, match="unknown outcome"):
        make_search_tool(force_outcome="maybe")
    with pytest.raises(ToolstopConfigError, match="weights"):
        make_search_tool(weights={"success": 0})


def test_pay() -> None:
    content, artifact = use(make_pay_tool(force_outcome="receipt"), amount_eur=12.5, order_id="o1")
    assert "12.50 EUR" in content
    assert artifact["reason"] == "completed"
    assert artifact["receipt_id"].startswith("rcpt_")
    _, artifact = use(make_pay_tool(force_outcome="timeout"), amount_eur=1, order_id="o1")
    assert artifact == {"stop": False, "reason": "transient", "retry_after": 2}
    _, artifact = use(make_pay_tool(force_outcome="declined"), amount_eur=1, order_id="o1")
    assert (artifact["stop"], artifact["reason"]) == (True, "fatal")


def test_write_record_is_idempotent() -> None:
    store: dict[str, str] = {}
    write = make_write_record_tool(store)
    assert use(write, key="k", value="v")[1]["already_applied"] is False
    assert use(write, key="k", value="v")[1]["already_applied"] is True
    assert store == {"k": "v"}
    _, conflict = use(write, key="k", value="other")
    assert (conflict["reason"], store["k"]) == ("fatal", "v")


def test_poll_job_progress_stays_in_the_artifact() -> None:
    poll = make_poll_job_tool(steps=3)
    results = [use(poll, job_id="j") for _ in range(3)]
    assert [a["progress"] for _, a in results] == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert [a["stop"] for _, a in results] == [False, False, True]
    assert all("progress" not in c and "%" not in c for c, _ in results)
    with pytest.raises(ValueError, match="steps"):
        make_poll_job_tool(steps=0)


@pytest.mark.parametrize("page", ["not json", "[1]", '{"facts": ["x"]}', '{"summary": 3}'])
def test_a_page_without_a_summary_has_no_answer(page: str) -> None:
    from toolstop.examples.search import page_answer

    assert page_answer(page) is None
    content, artifact = use(make_search_tool(force_outcome="success", index={"x": page}), query="x")
    assert content == page
    assert "answer" not in artifact


def test_a_summary_without_facts_is_the_answer() -> None:
    from toolstop.examples.search import page_answer

    assert page_answer('{"summary": "S.", "facts": [1, "F."]}') == "S. F."
    assert page_answer('{"summary": "S."}') == "S."
