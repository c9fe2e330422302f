"""How real logs end, as a log holds them: the conversations tests of log endings share.

A hand-off to a human called last (its result recorded or not), a later run after it, a user
message nobody answered, parallel calls half answered, user messages in a row, a greeting."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

__all__ = ["ENDINGS", "FIRST_RUN", "HAND_OFF", "LATER", "TRANSFERRED", "asks"]


def asks(call_id: str, name: str = "pay") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": {}, "id": call_id}])


def _answered(call_id: str, text: str, name: str = "lookup") -> ToolMessage:
    return ToolMessage(text, tool_call_id=call_id, name=name)


FIRST_RUN: list[BaseMessage] = [
    HumanMessage("Where is order 7?"),
    asks("c1", "lookup"),
    _answered("c1", "order 7: shipped on May 2"),
    AIMessage("Order 7 shipped on May 2."),
]
HAND_OFF: list[BaseMessage] = [
    *FIRST_RUN,
    HumanMessage("I want a person."),
    asks("c2", "lookup"),
    _answered("c2", "customer 12: gold"),
    asks("c3", "transfer_to_human_agents"),
]
TRANSFERRED = _answered("c3", "Transfer successful", "transfer_to_human_agents")
LATER: list[BaseMessage] = [HumanMessage("Hello?"), AIMessage("Hello again.")]

# how real logs end, as a log holds them
ENDINGS: dict[str, list[BaseMessage]] = {
    "on a hand-off's call": HAND_OFF,
    "on a hand-off's result": [*HAND_OFF, TRANSFERRED],
    "on a call, then a later run": [*HAND_OFF, *LATER],
    "on a result, then a later run": [*HAND_OFF, TRANSFERRED, *LATER],
    "on a call, then an unanswered message": [*HAND_OFF, HumanMessage("###STOP###")],
    "on an unanswered message": [*FIRST_RUN, HumanMessage("###STOP###")],
    "on parallel calls, one answered": [
        *FIRST_RUN,
        HumanMessage("Both?"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "lookup", "args": {}, "id": "p1"},
                {"name": "refund", "args": {}, "id": "p2"},
            ],
        ),
        _answered("p1", "order 8: shipped"),
    ],
    "with two user messages in a row": [
        HumanMessage("Hi."),
        HumanMessage("Where is order 7?"),
        *FIRST_RUN[1:],
    ],
    "with a greeting first": [AIMessage("Hello! How can I help?"), *HAND_OFF, TRANSFERRED],
}
