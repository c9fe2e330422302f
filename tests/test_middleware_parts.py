"""StopOnArtifact's helpers, unit-tested where a graph rarely reaches them.

The step arithmetic when LangGraph's channel map cannot be read, the reviewer's note on an
edited call, the structured response taken from an artifact, the call-limit check, and the
async hooks. Each test was written against a mutant that survived the rest of the suite.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelCallLimitMiddleware, hook_config
from langchain.agents.structured_output import AutoStrategy, ProviderStrategy, ToolStrategy
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from toolstop import Outcome, Rule, StopOnArtifact, StopPolicy, ToolstopConfigError, signal
from toolstop.decision import CallSignal, Decision, Turn
from toolstop.middleware import (
    _as_the_tool_said,
    _graph_shape,
    _limit_swallowed,
    _original_content,
    _plain,
    _steps_needed,
    _structured_response,
)
from toolstop.testing import ScriptedChatModel, call, forced_tool


def _config(channels: list[Any], limit: int = 25) -> dict[str, Any]:
    """A node config whose private channel map lists `channels` (what `_graph_shape` reads)."""
    read = functools.partial(lambda *args: None, None, dict.fromkeys(channels))
    return {"recursion_limit": limit, "configurable": {"__pregel_read": read}}


HOOKS = [
    "branch:to:model",
    "branch:to:Guard.before_model",
    "branch:to:Trim.before_model",
    "branch:to:Redact.after_model",
    "branch:to:StopOnArtifact.after_agent",
    "messages",
    42,  # not a name: skipped
]


def test_the_graphs_shape_is_read_from_its_channels() -> None:
    assert _graph_shape(_config(HOOKS)) == (2 + 1 + 2, 1 + 1)
    assert _graph_shape(_config(["branch:to:model"])) == (2, 0)
    assert _graph_shape(_config(["branch:to:agent"])) is None  # not a create_agent graph
    assert _graph_shape({"configurable": {}}) is None
    assert _graph_shape(None) is None


def test_the_shape_read_last_is_reused_only_for_the_same_channels() -> None:
    # Graphs of several shapes in one process: each read answers for its own channels.
    wider = [*HOOKS, "branch:to:Audit.before_model"]
    for _ in range(2):
        assert _graph_shape(_config(HOOKS)) == (5, 2)
        assert _graph_shape(_config(HOOKS)) == (5, 2)  # the remembered shape
        assert _graph_shape(_config(wider)) == (6, 2)
        assert _graph_shape(_config(["branch:to:model"])) == (2, 0)
        assert _graph_shape(_config(["branch:to:agent"])) is None


def test_the_steps_a_turn_needs_come_from_the_graphs_shape_once_per_run() -> None:
    run: Any = {"open": True}
    read, needed = _steps_needed(run, 20, _config(HOOKS))
    assert (read["loop"], read["tail"], needed) == (5, 2, 7)
    # Known from an earlier call (or run): not read again, even from another shape.
    kept, needed = _steps_needed(read, 20, _config(["branch:to:model"]))
    assert (kept, needed) == (read, 7)
    # Half known: both are read again.
    half, needed = _steps_needed({"open": True, "loop": 9}, 20, _config(HOOKS))  # type: ignore[typeddict-item]
    assert (half["loop"], half["tail"], needed) == (5, 2, 7)
    half, needed = _steps_needed({"open": True, "tail": 9}, 20, _config(HOOKS))  # type: ignore[typeddict-item]
    assert (half["loop"], half["tail"], needed) == (5, 2, 7)


@pytest.mark.parametrize(
    ("run", "remaining", "config", "needed"),
    [
        # Nothing read or measured: twice the steps this invocation took so far, plus 2.
        ({"open": True}, 20, {"recursion_limit": 25}, 2 * 4 + 2 + (2 * 4 + 1)),
        ({"open": True}, 24, {"recursion_limit": 25}, 2 + 1),  # the first step
        ({"open": True}, 30, {"recursion_limit": 25}, 2 + 1),  # more left than the limit
        ({"open": True}, None, {"recursion_limit": 25}, 2 + 1),  # no managed counter
        ({"open": True}, 20, None, 2 + 1),  # no config
        ({"open": True}, 20, {"recursion_limit": "25"}, 2 + 1),  # a limit that is no int
        # A measured loop and no tail: the tail is the loop less the model call.
        ({"open": True, "loop": 4}, 20, {}, 4 + 3),
        ({"open": True, "loop": 4, "tail": 1}, 20, {}, 4 + 1),
    ],
)
def test_the_steps_a_turn_needs_when_the_shape_cannot_be_read(
    run: Any, remaining: int | None, config: Any, needed: int
) -> None:
    kept, steps = _steps_needed(run, remaining, config)
    assert steps == needed
    assert kept == run


def test_a_recursion_limit_too_low_for_the_hooks_is_refused_by_name() -> None:
    with pytest.raises(ToolstopConfigError) as error:
        _steps_needed({"open": True}, 2, _config(HOOKS, limit=3))
    assert str(error.value) == (
        "recursion_limit=3 is too low for this agent: after a model call 2 more node(s) run "
        "(after_model and after_agent hooks), so a run needs a recursion_limit of at least 4"
    )
    with pytest.raises(ToolstopConfigError) as error:
        _steps_needed({"open": True, "loop": 3, "tail": 1}, 1, {"recursion_limit": 2})  # type: ignore[typeddict-item]
    assert str(error.value) == (
        "recursion_limit=2 is too low for this agent: after a model call 1 more node(s) run "
        "(after_agent hooks), so a run needs a recursion_limit of at least 3"
    )
    with pytest.raises(ToolstopConfigError) as error:
        _steps_needed({"open": True, "loop": 3, "tail": 1}, 1, {})  # type: ignore[typeddict-item]
    assert str(error.value) == "the recursion limit is too low for this agent"


# -- the reviewer's note on an edited call ----------------------------------------------------

EXECUTED = {"name": "book", "args": {"flight": "LH1", "when": dataclasses.__name__}}
MARKER = ' Executed instead: book with arguments {"flight": "LH1", "when": "dataclasses"}.'


def _result(content: Any) -> ToolMessage:
    return ToolMessage(content=content, tool_call_id="c1", name="book")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (f"Note:{MARKER}\n\nTool response:\nBooked.", "Booked."),
        (f"{MARKER}\n\nTool response:\nBooked.", "Booked."),  # the note at the very start
        (f"N{MARKER}\nBooked.", "Booked."),
        ("Booked, no note.", "Booked, no note."),
        ([{"type": "text", "text": f"Note:{MARKER}"}, "Booked."], ["Booked."]),
        (
            [f"Note:{MARKER}", {"type": "text", "text": "Booked."}],
            [{"type": "text", "text": "Booked."}],
        ),
        (["Booked.", f"Note:{MARKER}"], ["Booked.", f"Note:{MARKER}"]),  # not the first block
        ([{"type": "image"}, "Booked."], [{"type": "image"}, "Booked."]),
        ([], []),
    ],
)
def test_the_reviewers_note_is_taken_off_an_edited_result(content: Any, expected: Any) -> None:
    assert _original_content(_result(content), EXECUTED).content == expected
    assert _original_content(_result(content), None).content == content


def test_arguments_that_are_not_json_are_matched_as_langchain_writes_them() -> None:
    import datetime

    when = datetime.date(2026, 12, 1)
    executed = {"name": "book", "args": {"when": when}}
    content = 'Note: Executed instead: book with arguments {"when": "2026-12-01"}.\nBooked.'
    assert _original_content(_result(content), executed).content == "Booked."


def test_only_results_a_human_edited_lose_a_note() -> None:
    asking = AIMessage("", tool_calls=[call("book", id="c1"), call("book", id="c2")])
    notes = f"Note:{MARKER}\nBooked."
    turn = Turn(
        asking=asking,
        results=(_result(notes), _result(notes).model_copy(update={"tool_call_id": "c2"})),
    )
    cleaned = _as_the_tool_said(turn, {"hitl_edited_tool_calls": {"c1": EXECUTED}})
    assert cleaned is not None
    assert cleaned.asking is asking
    assert [m.content for m in cleaned.results] == ["Booked.", notes]
    assert _as_the_tool_said(turn, {}) is turn
    assert _as_the_tool_said(turn, {"hitl_edited_tool_calls": ["c1"]}) is turn
    assert _as_the_tool_said(None, {"hitl_edited_tool_calls": {"c1": EXECUTED}}) is None


# -- the structured response on a hard stop ----------------------------------------------------


class Booking(BaseModel):
    flight: str


class Refund(BaseModel):
    amount: int


@dataclasses.dataclass
class BookingData:
    flight: str


def _stop(artifact: Any, *, deciding: int = 1, format_: Any = Booking) -> Any:
    signals = tuple(
        CallSignal(tool="book", tool_call_id=f"c{i}", reason=Outcome.COMPLETED, stop=True)
        for i in range(deciding)
    )
    decision = Decision(stop=True, rule=Rule.COMPLETED, signals=signals, deciding=signals)
    results = (ToolMessage("Booked.", tool_call_id="c0", name="book", artifact=artifact),)
    turn = Turn(asking=None, results=results)
    return _structured_response(SimpleNamespace(response_format=format_), decision, turn)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "format_", [Booking, ToolStrategy(Booking), ProviderStrategy(Booking), AutoStrategy(Booking)]
)
def test_a_stop_takes_the_structured_response_from_the_artifact(format_: Any) -> None:
    data = {**signal(Outcome.COMPLETED), "structured_response": {"flight": "LH1"}}
    assert _stop(data, format_=format_) == Booking(flight="LH1")
    instance = Booking(flight="LH2")
    assert _stop({**data, "structured_response": instance}, format_=format_) is instance
    dataclass_data = {**data, "structured_response": BookingData("LH3")}
    assert _stop(dataclass_data, format_=format_) == Booking(flight="LH3")


def test_a_union_format_takes_the_schema_the_data_fits() -> None:
    data = {**signal(Outcome.COMPLETED), "structured_response": {"amount": 3}}
    assert _stop(data, format_=ToolStrategy(Booking | Refund)) == Refund(amount=3)


def test_no_structured_response_without_a_fitting_one(caplog: pytest.LogCaptureFixture) -> None:
    data = {**signal(Outcome.COMPLETED), "structured_response": {"flight": "LH1"}}
    assert _stop(data, format_=None) is None
    assert _stop(data, deciding=2) is None  # two calls decided: whose would it be?
    assert _stop(signal(Outcome.COMPLETED)) is None
    assert _stop(None) is None
    plain = ToolMessage("Booked.", tool_call_id="other", name="book", artifact=data)
    decision = Decision(
        stop=True,
        rule=Rule.COMPLETED,
        deciding=(CallSignal(tool="book", tool_call_id="c0", reason=Outcome.COMPLETED, stop=True),),
    )
    request: Any = SimpleNamespace(response_format=Booking)
    assert _structured_response(request, decision, Turn(asking=None, results=(plain,))) is None
    assert _structured_response(request, decision, None) is None
    with caplog.at_level(logging.WARNING, logger="toolstop"):
        assert _stop({**data, "structured_response": {"seats": 2}}) is None
        assert _stop(data, format_=42) is None  # a format no specs are built for
    assert [r.getMessage() for r in caplog.records] == [
        "toolstop: the structured_response in the artifact of tool 'book' does not fit the "
        "agent's response_format; structured_response is None"
    ] * 2


def test_plain_turns_instances_into_dicts_and_leaves_the_rest() -> None:
    assert _plain(Booking(flight="LH1")) == {"flight": "LH1"}
    assert _plain(BookingData("LH1")) == {"flight": "LH1"}
    assert _plain(BookingData) is BookingData  # a class is not an instance
    assert _plain({"flight": "LH1"}) == {"flight": "LH1"}


@pytest.mark.parametrize(
    ("message", "state", "swallowed"),
    [
        (
            AIMessage("Model call limits exceeded: run limit (1/1)"),
            {"run_model_call_count": 1},
            True,
        ),
        (AIMessage("Model call limits exceeded"), {"thread_model_call_count": 1}, True),
        (AIMessage("Model call limits exceeded"), {}, False),  # no limit middleware
        (AIMessage("The model's answer"), {"run_model_call_count": 1}, False),
        (AIMessage(["Model call limits exceeded"]), {"run_model_call_count": 1}, False),
        (
            AIMessage("Model call limits exceeded", tool_calls=[call("book", id="c")]),
            {"run_model_call_count": 1},
            False,
        ),
        (HumanMessage("Model call limits exceeded"), {"run_model_call_count": 1}, False),
    ],
)
def test_a_swallowed_stop_is_told_from_the_limits_message(
    message: Any, state: dict[str, Any], swallowed: bool
) -> None:
    assert _limit_swallowed(message, state) is swallowed


# -- StopOnArtifact end to end where the rest of the suite does not look -----------------------


@tool(return_direct=True)
def static(query: str) -> str:
    """Always ends the loop."""
    return query


def test_the_errors_name_stop_on_artifact() -> None:
    with pytest.raises(TypeError, match=r"^StopOnArtifact: policy must be a StopPolicy"):
        StopOnArtifact("hard")  # type: ignore[arg-type]
    agent = create_agent(ScriptedChatModel(["hi"]), [static], middleware=[StopOnArtifact()])
    with pytest.raises(ToolstopConfigError, match=r"^StopOnArtifact: tools \['static'\] have"):
        agent.invoke({"messages": [HumanMessage("q")]})


def test_async_runs_relay_narrate_publish_and_name_like_sync_ones() -> None:
    async def stream(agent: Any) -> list[Any]:
        inputs = {"messages": [HumanMessage("q")]}
        return [c async for c in agent.astream(inputs, stream_mode=["custom", "values"])]

    for mode, script, final in (
        ("hard", [call("book")] * 2, "ok"),
        ("polish", [call("book")] * 2 + ["narrated"], "narrated"),
    ):
        booking = forced_tool("book", ("busy", signal("transient")), ("ok", signal("completed")))
        model = ScriptedChatModel(script)
        policy = StopPolicy(mode=mode)
        agent = create_agent(model, [booking], middleware=[StopOnArtifact(policy)], name="booker")
        chunks = asyncio.run(stream(agent))
        custom = [c for kind, c in chunks if kind == "custom"]
        state = [c for kind, c in chunks if kind == "values"][-1]
        assert [(c["toolstop"], c.get("turn")) for c in custom] == [
            ("turn", 1),
            ("turn", 2),
            ("run_end", None),
        ]
        final_message = state["messages"][-1]
        assert (final_message.content, final_message.name) == (final, "booker")
        record = state["stop_record"]
        assert (record["rule"], record["tool_turns"]) == ("completed", 2)
        assert record["model_calls"] == len(model.calls)
        answers = [m for m in state["messages"] if isinstance(m, AIMessage) and m.usage_metadata]
        assert record["input_tokens"] == sum(m.usage_metadata["input_tokens"] for m in answers)
        assert [c.tools for c in model.calls] == [("book",), ("book",), ()][: len(model.calls)]


def test_an_async_run_gives_async_handlers_its_end_on_the_event_loop() -> None:
    """`aafter_agent` dispatches the run's end asynchronously: an async handler runs on the
    event loop's thread (the sync dispatch would hand it to langchain-core's thread pool)."""

    class Events(AsyncCallbackHandler):
        def __init__(self) -> None:
            self.seen: list[tuple[str, bool]] = []

        async def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
            self.seen.append((name, threading.current_thread() is threading.main_thread()))

    booking = forced_tool("book", ("ok", signal("completed")))
    model = ScriptedChatModel([call("book")])
    agent = create_agent(model, [booking], middleware=[StopOnArtifact()])
    events = Events()
    state = asyncio.run(agent.ainvoke({"messages": [HumanMessage("q")]}, {"callbacks": [events]}))
    assert state["stop_record"]["rule"] == "completed"
    assert events.seen == [("toolstop_run_end", True)]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_step_budgets_answer_is_named_for_the_agent(asynchronous: bool) -> None:
    looking = forced_tool("look", ("seen", None))  # no signal: never stops
    agent = create_agent(
        ScriptedChatModel([call("look")] * 5),
        [looking],
        middleware=[StopOnArtifact()],
        name="booker",
    )
    inputs, config = {"messages": [HumanMessage("q")]}, {"recursion_limit": 4}
    state = (
        asyncio.run(agent.ainvoke(inputs, config)) if asynchronous else agent.invoke(inputs, config)
    )
    assert state["stop_record"]["rule"] == "step_budget"
    assert state["messages"][-1].name == "booker"
    assert [m.type for m in state["messages"]] == ["human", "ai"]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_stop_a_call_limit_swallowed_is_delivered_named(asynchronous: bool) -> None:
    booking = forced_tool("book", ("booked", signal("completed")))
    limit = ModelCallLimitMiddleware(run_limit=1, exit_behavior="end")
    agent = create_agent(
        ScriptedChatModel([call("book")]),
        [booking],
        middleware=[limit, StopOnArtifact()],
        name="booker",
    )
    inputs = {"messages": [HumanMessage("q")]}
    state = asyncio.run(agent.ainvoke(inputs)) if asynchronous else agent.invoke(inputs)
    assert (state["messages"][-1].content, state["messages"][-1].name) == ("booked", "booker")
    assert state["stop_record"]["rule"] == "completed"


class _Refuse(AgentMiddleware):  # type: ignore[type-arg]
    """A guard that answers in place of the model on every run."""

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "end", "messages": [AIMessage("Refused.")]}


def test_a_run_refused_before_any_model_call_gets_its_own_record() -> None:
    """Not the turn it was invoked with, and numbered after the thread's last run."""
    booking = forced_tool("book", ("booked", signal("completed")))
    agent = create_agent(
        ScriptedChatModel([]),
        [booking],
        middleware=[_Refuse(), StopOnArtifact()],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "t"}}
    asked = AIMessage("", id="caller", tool_calls=[call("book", id="x1")])
    result = ToolMessage("booked", tool_call_id="x1", name="book", artifact=signal("completed"))
    first = agent.invoke({"messages": [HumanMessage("q"), asked, result]}, thread)
    record = first["stop_record"]
    assert first["messages"][-1].content == "Refused."
    assert (record["run"], record["rule"], record["tool_turns"], record["model_calls"]) == (
        1,
        "none",
        0,
        0,
    )
    second = agent.invoke({"messages": [HumanMessage("again")]}, thread)
    assert second["stop_record"]["run"] == 2


def test_a_structured_answer_needs_no_tool_turn_even_at_the_last_step() -> None:
    """The structured-output call is answered in the same step: no step budget applies to it."""
    model = ScriptedChatModel([call("Booking", flight="LH1")])
    looking = forced_tool("look", ("seen", None))
    agent = create_agent(
        model, [looking], middleware=[StopOnArtifact()], response_format=ToolStrategy(Booking)
    )
    state = agent.invoke({"messages": [HumanMessage("q")]}, {"recursion_limit": 3})
    assert state["structured_response"] == Booking(flight="LH1")
    record = state["stop_record"]
    assert (record["rule"], record["model_calls"], record["tool_turns"]) == ("none", 1, 0)
    assert record["outcomes"]["unsignalled"] == 0  # the structured answer is no tool turn
    assert record["input_tokens"] == state["messages"][1].usage_metadata["input_tokens"]


def test_a_new_run_of_the_middleware_never_decides_the_turn_it_was_invoked_with() -> None:
    booking = forced_tool("book", ("booked", signal("completed")))
    model = ScriptedChatModel(["the model's answer"])
    agent = create_agent(model, [booking], middleware=[StopOnArtifact()])
    asked = AIMessage("", id="caller", tool_calls=[call("book", id="x1")])
    result = ToolMessage("booked", tool_call_id="x1", name="book", artifact=signal("completed"))
    state = agent.invoke({"messages": [HumanMessage("q"), asked, result]})
    assert state["messages"][-1].content == "the model's answer"
    assert (state["stop_record"]["rule"], state["stop_record"]["tool_turns"]) == ("none", 0)


class _ForceTools(AgentMiddleware):  # type: ignore[type-arg]
    """A user's hook that forces a tool call on every model call it wraps."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request.override(tool_choice="any"))

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request.override(tool_choice="any"))


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_narrating_call_offers_no_tools_and_forces_none(asynchronous: bool) -> None:
    booking = forced_tool("book", ("booked", signal("completed")))
    # The narration also asks for a stray tool call: it is dropped, the text kept.
    model = ScriptedChatModel([call("book"), AIMessage("narrated", tool_calls=[call("book")])])
    policy = StopPolicy(mode="polish")
    agent = create_agent(model, [booking], middleware=[_ForceTools(), StopOnArtifact(policy)])
    inputs = {"messages": [HumanMessage("q")]}
    state = asyncio.run(agent.ainvoke(inputs)) if asynchronous else agent.invoke(inputs)
    final = state["messages"][-1]
    assert (final.content, final.tool_calls) == ("narrated", [])
    assert [(c.tools, c.tool_choice) for c in model.calls] == [(("book",), "any"), ((), None)]


class _RefuseAfterTools(AgentMiddleware):  # type: ignore[type-arg]
    """A guard that ends the run, without a message, once a tool has run."""

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if any(isinstance(m, ToolMessage) for m in state["messages"]):
            return {"jump_to": "end"}
        return None


def test_a_turn_a_guard_ended_the_run_after_is_accounted_for() -> None:
    busy = forced_tool("book", ("busy", signal("transient")))
    agent = create_agent(
        ScriptedChatModel([call("book")]),
        [busy],
        middleware=[_RefuseAfterTools(), StopOnArtifact()],
    )
    state = agent.invoke({"messages": [HumanMessage("q")]})
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool"]
    record = state["stop_record"]
    assert (record["tool_turns"], record["outcomes"]["transient"], record["rule"]) == (1, 1, "none")


def test_a_narrated_structured_answer_is_not_counted_as_a_tool_turn() -> None:
    data = {**signal(Outcome.COMPLETED), "structured_response": {"flight": "LH1"}}
    booking = forced_tool("book", ("Booked LH1.", data))
    model = ScriptedChatModel([call("book"), call("Booking", flight="LH1")])
    policy = StopPolicy(mode="polish")
    agent = create_agent(
        model, [booking], middleware=[StopOnArtifact(policy)], response_format=Booking
    )
    state = agent.invoke({"messages": [HumanMessage("q")]})
    assert state["structured_response"] == Booking(flight="LH1")
    record = state["stop_record"]
    assert (record["rule"], record["model_calls"], record["tool_turns"]) == ("completed", 2, 1)
    assert (record["outcomes"]["completed"], record["outcomes"]["unsignalled"]) == (1, 0)
