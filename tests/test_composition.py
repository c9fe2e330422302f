"""StopOnArtifact composed with langchain's own middleware and with users' own hooks.

Each case runs a real `create_agent` stack, in both list orders where the order could matter, and
checks what a user sees: the final text, the rule, one record per run (published once), model
calls counted right, a history a real provider accepts on the next turn, and never
`GraphRecursionError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from pydantic import PrivateAttr

from routers import MIDDLEWARE_UNAVAILABLE
from toolstop import Outcome, StopPolicy, ToolstopConfigError, signal
from toolstop.testing import ScriptedChatModel, assert_valid_history, call, forced_tool

if MIDDLEWARE_UNAVAILABLE:  # no langchain, or langchain < 1.2.9
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)
middleware_module = pytest.importorskip("langchain.agents.middleware")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import (  # noqa: E402
    AgentMiddleware,
    ModelCallLimitMiddleware,
    ToolCallLimitMiddleware,
    after_model,
    before_model,
)

from toolstop import StopOnArtifact  # noqa: E402

pytestmark = pytest.mark.contract

PAID = "Paid order o-1. Receipt r-1."
DECLINED = "The card was declined; nothing was charged."
TIMEOUT = "The processor timed out; nothing was charged."
DONE = (PAID, signal(Outcome.COMPLETED, receipt_id="r-1"))
FATAL = (DECLINED, signal(Outcome.FATAL))
RETRY = (TIMEOUT, signal(Outcome.TRANSIENT))
MODES = ["hard", "polish", "never"]
ORDERS = ["first", "last"]


def stack(middleware: Sequence[Any], policy: StopPolicy | None, order: str) -> list[Any]:
    """StopOnArtifact first or last among the user's middleware."""
    stop = StopOnArtifact(policy)
    return [stop, *middleware] if order == "first" else [*middleware, stop]


def run(agent: Any, inputs: Any, config: dict[str, Any] | None = None) -> tuple[Any, list[Any]]:
    """Stream one invocation; the final state and toolstop's custom events."""
    state: Any = None
    events: list[Any] = []
    for mode, chunk in agent.stream(inputs, config, stream_mode=["custom", "values"]):
        if mode == "custom" and isinstance(chunk, dict) and "toolstop" in chunk:
            events.append(chunk)
        elif mode == "values":
            state = chunk
    return state, events


def ask(question: str = "Pay order o-1") -> dict[str, Any]:
    return {"messages": [HumanMessage(question)]}


def run_ends(events: list[Any]) -> list[dict[str, Any]]:
    return [e["record"] for e in events if e["toolstop"] == "run_end"]


def turns(events: list[Any]) -> list[int]:
    return [e["turn"] for e in events if e["toolstop"] == "turn"]


@pytest.fixture(scope="module")
def provider() -> Iterator[Any]:
    """The loopback provider a second turn is sent to (None without langchain-openai)."""
    try:
        from langchain_openai import ChatOpenAI
    except ImportError:
        yield None
        return
    import httpx

    from toolstop.testing.loopback import LoopbackProvider

    with LoopbackProvider(["ok"] * 500) as server, httpx.Client() as http:
        # its own HTTP client: closing langchain-openai's shared, cached one would break
        # another test that gets the same loopback port
        model = ChatOpenAI(
            model="gpt-loopback",
            base_url=server.base_url,
            api_key="test-key",
            max_retries=0,
            http_client=http,
        )
        yield server, model


def assert_next_turn_accepted(provider: Any, messages: Sequence[BaseMessage]) -> None:
    """The history is valid, and a real client's next turn on it is accepted over HTTP."""
    assert_valid_history(list(messages))
    if provider is None:
        return
    server, model = provider
    rejected = len(server.rejected)
    model.invoke([*messages, HumanMessage("Thanks. Anything else?")])
    assert len(server.rejected) == rejected


def assert_one_record(state: Any, events: list[Any], *, rule: str, run: int = 1) -> dict[str, Any]:
    """The run left exactly one record: in state and in one run_end event."""
    record = state["stop_record"]
    assert (record["rule"], record["run"]) == (rule, run)
    assert run_ends(events) == [record]
    return dict(record)


# -- 1. a model-call limit never swallows a stop ------------------------------------------------


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_a_run_limit_reached_by_the_tool_turn_does_not_swallow_the_stop(
    order: str, mode: str, provider: Any
) -> None:
    model = ScriptedChatModel([call("pay", query="o-1")])
    limit = ModelCallLimitMiddleware(run_limit=1)
    policy = StopPolicy(mode=mode)  # type: ignore[arg-type]
    agent = create_agent(
        model, [forced_tool("pay", DONE)], middleware=stack([limit], policy, order)
    )
    state, events = run(agent, ask())
    model.assert_complete()  # the limit refuses the narrating call of polish too
    if mode == "never":  # shadow mode: the limit's answer stands; the record says what it saved
        assert state["messages"][-1].content.startswith("Model call limits exceeded")
        record = assert_one_record(state, events, rule="none")
        assert record["would_stop"] == "completed"
    else:
        assert state["messages"][-1].content == PAID
        record = assert_one_record(state, events, rule="completed")
        assert record["stopped"] is True
        assert record["relayed"] == [state["messages"][-2].tool_call_id]  # polish's too
    assert record["model_calls"] == 1
    assert_next_turn_accepted(provider, state["messages"])


@pytest.mark.parametrize("order", ORDERS)
def test_a_run_limit_after_a_retry_still_delivers_the_stop(order: str) -> None:
    model = ScriptedChatModel([call("pay"), call("pay")])
    limit = ModelCallLimitMiddleware(run_limit=2)
    agent = create_agent(
        model, [forced_tool("pay", RETRY, DONE)], middleware=stack([limit], None, order)
    )
    state, events = run(agent, ask())
    model.assert_complete()
    assert state["messages"][-1].content == PAID
    record = assert_one_record(state, events, rule="completed")
    assert (record["model_calls"], record["transient_retries"]) == (2, 1)


@pytest.mark.parametrize("order", ORDERS)
def test_a_relay_is_not_a_model_call_for_a_thread_limit(order: str, provider: Any) -> None:
    # thread_limit=3: three runs of one model call each fit; relays are not counted.
    model = ScriptedChatModel([call("pay")] * 3)
    limit = ModelCallLimitMiddleware(thread_limit=3)
    agent = create_agent(
        model,
        [forced_tool("pay", DONE)],
        middleware=stack([limit], None, order),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": f"thread-limit-{order}"}}
    for number in (1, 2, 3):
        state, events = run(agent, ask(f"Pay order o-{number}"), config)
        assert state["messages"][-1].content == PAID
        assert assert_one_record(state, events, rule="completed", run=number)["model_calls"] == 1
    assert agent.get_state(config).values["thread_model_call_count"] == 3
    model.assert_complete()
    # The fourth run is refused before any model call; it leaves its own record, not the third's.
    state, events = run(agent, ask("Pay order o-4"), config)
    assert state["messages"][-1].content.startswith("Model call limits exceeded")
    record = assert_one_record(state, events, rule="none", run=4)
    assert (record["model_calls"], record["tool_turns"], record["stopped"]) == (0, 0, False)
    assert_next_turn_accepted(provider, state["messages"])


def test_a_limit_that_raises_cannot_be_repaired_and_says_so() -> None:
    """exit_behavior="error" raises before any hook of StopOnArtifact runs (documented)."""
    from langchain.agents.middleware.model_call_limit import ModelCallLimitExceededError

    model = ScriptedChatModel([call("pay")])
    limit = ModelCallLimitMiddleware(run_limit=1, exit_behavior="error")
    agent = create_agent(model, [forced_tool("pay", DONE)], middleware=stack([limit], None, "last"))
    with pytest.raises(ModelCallLimitExceededError):
        agent.invoke(ask())


@pytest.mark.parametrize("order", ORDERS)
def test_a_tool_call_limit_goes_back_to_the_model_with_a_valid_history(
    order: str, provider: Any
) -> None:
    model = ScriptedChatModel([call("pay"), call("pay"), "I could not pay: the limit is reached."])
    limit = ToolCallLimitMiddleware(run_limit=1)
    agent = create_agent(model, [forced_tool("pay", RETRY)], middleware=stack([limit], None, order))
    state, events = run(agent, ask())
    model.assert_complete()
    assert state["messages"][-1].content == "I could not pay: the limit is reached."
    record = assert_one_record(state, events, rule="none")
    assert record["model_calls"] == 3
    assert_next_turn_accepted(provider, state["messages"])


# -- 2. the step budget measures the loop ------------------------------------------------------


def _noop_hooks(before: int, after: int) -> list[Any]:
    hooks: list[Any] = []
    for index in range(before):

        @before_model(name=f"Before{index}")
        def look(state: Any, runtime: Any) -> None:
            return None

        hooks.append(look)
    for index in range(after):

        @after_model(name=f"After{index}")
        def check(state: Any, runtime: Any) -> None:
            return None

        hooks.append(check)
    return hooks


def _tool_turns_that_fit(limit: int, before: int, after: int) -> int:
    """How many tool turns bare create_agent fits into `limit` with these hooks, found by running
    it (no toolstop): the most turns after which the model can still answer without raising."""
    fitted = 0
    for wanted in range(1, limit + 1):
        model = ScriptedChatModel([call("pay")] * wanted + ["done"])

        class End(AgentMiddleware):  # toolstop's after_agent node, as a plain hook
            def after_agent(self, state: Any, runtime: Any) -> None:
                return None

        agent = create_agent(
            model, [forced_tool("pay", RETRY)], middleware=[*_noop_hooks(before, after), End()]
        )
        try:
            agent.invoke(ask(), {"recursion_limit": limit})
        except GraphRecursionError:
            return fitted
        fitted = wanted
    return fitted


@pytest.mark.timeout(600)  # a hang guard: 29 agents per case, on a shared machine
@pytest.mark.parametrize(("before", "after"), [(0, 0), (1, 1), (2, 0), (0, 2), (3, 1)])
def test_the_step_budget_ends_the_run_for_any_recursion_limit_and_any_hooks(
    before: int, after: int
) -> None:
    policy = StopPolicy(max_transient_retries=None)
    # The shortest run: the hooks, the model and after_agent, the last with a step left.
    minimum = before + after + 3
    for limit in range(2, 31):
        model = ScriptedChatModel([call("pay")] * limit)
        agent = create_agent(
            model,
            [forced_tool("pay", RETRY)],
            middleware=[*_noop_hooks(before, after), StopOnArtifact(policy)],
        )
        if limit < before + 1:  # the model node never runs: LangGraph raises before toolstop can
            with pytest.raises(GraphRecursionError):
                agent.invoke(ask(), {"recursion_limit": limit})
            continue
        if limit < minimum:  # no run fits: a named error, not GraphRecursionError
            with pytest.raises(ToolstopConfigError, match=f"at least {minimum}"):
                agent.invoke(ask(), {"recursion_limit": limit})
            continue
        try:
            state = agent.invoke(ask(), {"recursion_limit": limit})
        except GraphRecursionError:  # pragma: no cover - the failure being tested
            pytest.fail(f"GraphRecursionError at recursion_limit={limit} ({before}, {after})")
        record = state["stop_record"]
        assert record["rule"] == "step_budget", limit
        assert state["messages"][-1].content == policy.step_budget_message
        assert_valid_history(state["messages"])
        # exactly as many tool turns as the stack fits (a relay takes the final answer's place)
        assert record["tool_turns"] == _tool_turns_that_fit(limit, before, after), limit
        assert record["model_calls"] == max(record["tool_turns"], 1), limit  # none wasted


# -- 3. a hook that adds a message after the tool results ---------------------------------------


@before_model
def remind(state: Any, runtime: Any) -> dict[str, Any] | None:
    """A user's hook: a reminder after every tool turn (what once made toolstop lose the run)."""
    if isinstance(state["messages"][-1], ToolMessage):
        return {"messages": [HumanMessage("(reminder: be concise)")]}
    return None


@pytest.mark.parametrize("order", ORDERS)
def test_a_message_after_the_tool_results_does_not_hide_the_turn(order: str) -> None:
    model = ScriptedChatModel([call("pay")])
    agent = create_agent(model, [forced_tool("pay", DONE)], middleware=stack([remind], None, order))
    state, events = run(agent, ask())
    model.assert_complete()  # no paraphrase
    assert state["messages"][-1].content == PAID
    assert assert_one_record(state, events, rule="completed")["model_calls"] == 1


@pytest.mark.parametrize("order", ORDERS)
def test_the_retry_budget_fires_with_messages_between_turns(order: str) -> None:
    policy = StopPolicy(max_transient_retries=2)
    model = ScriptedChatModel([call("pay")] * 3)
    agent = create_agent(
        model, [forced_tool("pay", RETRY)], middleware=stack([remind], policy, order)
    )
    state, events = run(agent, ask())
    model.assert_complete()
    assert state["messages"][-1].content == policy.retry_budget_message
    record = assert_one_record(state, events, rule="retry_budget")
    assert (record["model_calls"], record["tool_turns"], record["transient_retries"]) == (3, 3, 2)
    assert turns(events) == [1, 2, 3]


@pytest.mark.parametrize("order", ORDERS)
def test_a_guard_that_ends_the_run_keeps_its_answer_and_the_turn_is_recorded(order: str) -> None:
    from langchain.agents.middleware import hook_config

    class Guard(AgentMiddleware):
        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            if isinstance(state["messages"][-1], ToolMessage):
                return {"messages": [AIMessage("A guard ended the run.")], "jump_to": "end"}
            return None

    model = ScriptedChatModel([call("pay")])
    agent = create_agent(
        model, [forced_tool("pay", DONE)], middleware=stack([Guard()], None, order)
    )
    state, events = run(agent, ask())
    model.assert_complete()
    assert state["messages"][-1].content == "A guard ended the run."  # a guard's answer stands
    record = assert_one_record(state, events, rule="none")
    assert (record["tool_turns"], record["outcomes"]["completed"], record["stopped"]) == (
        1,
        1,
        False,
    )
    assert turns(events) == [1]


# -- 6. names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_relay_carries_the_agents_name(mode: str) -> None:
    script: list[Any] = [call("pay")] + (["narrated"] if mode != "hard" else [])
    model = ScriptedChatModel(script)
    agent = create_agent(
        model,
        [forced_tool("pay", DONE)],
        middleware=[StopOnArtifact(StopPolicy(mode=mode))],  # type: ignore[arg-type]
        name="concierge",
    )
    state = agent.invoke(ask())
    answers = [m for m in state["messages"] if isinstance(m, AIMessage)]
    assert [m.name for m in answers] == ["concierge"] * len(answers)


@pytest.mark.parametrize("mode", MODES)
def test_the_graph_and_the_legacy_agent_name_their_answers(mode: str) -> None:
    from toolstop import build_react_graph
    from toolstop.legacy import create_react_agent

    builders: list[Callable[..., Any]] = [build_react_graph, create_react_agent]
    for build in builders:
        script: list[Any] = [call("pay")] + (["narrated"] if mode != "hard" else [])
        policy = StopPolicy(mode=mode)  # type: ignore[arg-type]
        agent = build(
            ScriptedChatModel(script), [forced_tool("pay", DONE)], policy=policy, name="x"
        )
        answers = [m for m in agent.invoke(ask())["messages"] if isinstance(m, AIMessage)]
        assert [m.name for m in answers] == ["x"] * len(answers), build.__name__
        unnamed = build(ScriptedChatModel(script), [forced_tool("pay", DONE)], policy=policy)
        assert all(m.name is None for m in unnamed.invoke(ask())["messages"] if m.type == "ai")


# -- 4. human in the loop ----------------------------------------------------------------------


def _review_has(feature: str) -> bool:
    """What the installed HumanInTheLoopMiddleware does (it grew over langchain 1.2 - 1.5)."""
    import importlib.metadata
    import inspect
    from typing import get_args

    from langchain.agents.middleware import human_in_the_loop as review

    if feature == "respond":  # from langchain 1.2.18
        return "respond" in get_args(review.DecisionType)
    if feature == "edit_notice":  # the note for the model on an edited call, from 1.4
        return "edit_notice" in inspect.signature(review.HumanInTheLoopMiddleware).parameters
    # "User rejected the tool call for `x` with reason: ...", from langchain 1.3.17; before,
    # a reason replaced langchain's text and cannot be told from a tool error
    version = tuple(int(p) for p in importlib.metadata.version("langchain").split(".")[:3])
    return version >= (1, 3, 17)


def _reviewed(decision: dict[str, Any], order: str, script: list[Any]) -> tuple[Any, Any, Any]:
    """Run `pay` under HumanInTheLoopMiddleware; resume with `decision`. (state, events, model)"""
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.types import Command

    model = ScriptedChatModel(script)
    review = HumanInTheLoopMiddleware(interrupt_on={"pay": True})
    policy = StopPolicy(max_transient_retries=0)  # a rejection must not spend any budget
    agent = create_agent(
        model,
        [forced_tool("pay", DONE)],
        middleware=stack([review], policy, order),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "review"}}
    paused, before = run(agent, ask(), config)
    assert "__interrupt__" in paused or agent.get_state(config).interrupts
    assert run_ends(before) == []  # an interrupted run has not ended
    state, events = run(agent, Command(resume={"decisions": [decision]}), config)
    return state, events, model


@pytest.mark.parametrize("order", ORDERS)
def test_an_approved_call_stops_with_one_record_across_the_interrupt(
    order: str, provider: Any
) -> None:
    state, events, model = _reviewed({"type": "approve"}, order, [call("pay", query="o-1")])
    model.assert_complete()
    assert state["messages"][-1].content == PAID
    assert assert_one_record(state, events, rule="completed")["model_calls"] == 1
    assert_next_turn_accepted(provider, state["messages"])


@pytest.mark.parametrize("order", ORDERS)
def test_an_edited_call_relays_the_tools_own_text_not_the_reviewers_note(order: str) -> None:
    edit = {"type": "edit", "edited_action": {"name": "pay", "args": {"query": "o-2"}}}
    state, events, model = _reviewed(edit, order, [call("pay", query="o-1")])
    model.assert_complete()
    tool_text = next(m for m in state["messages"] if isinstance(m, ToolMessage)).content
    if _review_has("edit_notice"):  # the model's view keeps langchain's note
        assert "human reviewer" in str(tool_text)
    assert state["messages"][-1].content == PAID  # the user's view is the tool's own text
    assert_one_record(state, events, rule="completed")


@pytest.mark.parametrize("reason", [None, "not now"])
@pytest.mark.parametrize("order", ORDERS)
def test_a_rejection_goes_back_to_the_model_without_spending_the_budget(
    order: str, reason: str | None, provider: Any
) -> None:
    if reason and not _review_has("reasoned_rejection"):
        pytest.skip("before langchain 1.3.17 a rejection's reason replaces langchain's text")
    reject = {"type": "reject", **({"message": reason} if reason else {})}
    state, events, model = _reviewed(reject, order, [call("pay"), "Understood, I won't pay."])
    model.assert_complete()
    assert state["messages"][-1].content == "Understood, I won't pay."
    record = assert_one_record(state, events, rule="none")
    assert (record["transient_retries"], record["model_calls"]) == (0, 2)
    assert record["outcomes"]["rejected"] == 1
    assert record["invalid_signals"] == []
    assert_next_turn_accepted(provider, state["messages"])


@pytest.mark.parametrize("order", ORDERS)
def test_a_human_response_goes_back_to_the_model(order: str, provider: Any) -> None:
    if not _review_has("respond"):
        pytest.skip("HumanInTheLoopMiddleware has no respond decision before langchain 1.2.18")
    respond = {"type": "respond", "message": "Order o-1 is already paid."}
    state, events, model = _reviewed(respond, order, [call("pay"), "It was already paid."])
    model.assert_complete()
    assert state["messages"][-1].content == "It was already paid."
    assert assert_one_record(state, events, rule="none")["model_calls"] == 2
    assert_next_turn_accepted(provider, state["messages"])


# -- 5. structured output ----------------------------------------------------------------------


def _receipt_schema() -> Any:
    from pydantic import BaseModel

    class Receipt(BaseModel):
        """A payment receipt."""

        receipt_id: str
        summary: str

    return Receipt


def _structured(mode: str, script: list[Any], result: tuple[str, Any] = DONE) -> tuple[Any, Any]:
    from langchain.agents.structured_output import ToolStrategy

    model = ScriptedChatModel(script)
    agent = create_agent(
        model,
        [forced_tool("pay", result)],
        middleware=[StopOnArtifact(StopPolicy(mode=mode))],  # type: ignore[arg-type]
        response_format=ToolStrategy(_receipt_schema()),
    )
    state, events = run(agent, ask())
    model.assert_complete()
    return state, events


def _every_call_answered(messages: Sequence[BaseMessage]) -> None:
    asked = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    assert asked == answered


def test_structured_output_hard_stop_relays_and_leaves_structured_response_empty(
    provider: Any,
) -> None:
    state, events = _structured("hard", [call("pay")])
    assert state["messages"][-1].content == PAID
    assert state.get("structured_response") is None
    assert_one_record(state, events, rule="completed")
    assert_next_turn_accepted(provider, state["messages"])


def test_structured_output_hard_stop_takes_a_valid_structured_response_from_the_artifact() -> None:
    receipt = {"receipt_id": "r-1", "summary": "Paid order o-1."}
    result = (PAID, signal(Outcome.COMPLETED, structured_response=receipt))
    state, _ = _structured("hard", [call("pay")], result)
    assert state["messages"][-1].content == PAID
    assert state["structured_response"].model_dump() == receipt
    # an instance of the schema (a pydantic model) is taken as it is
    instance = _receipt_schema()(**receipt)
    state, _ = _structured(
        "hard", [call("pay")], (PAID, signal("completed", structured_response=instance))
    )
    assert state["structured_response"].model_dump() == receipt


def test_a_structured_response_that_does_not_fit_is_none_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wrong = (PAID, signal(Outcome.COMPLETED, structured_response={"receipt": "SECRET-1"}))
    with caplog.at_level("WARNING", logger="toolstop"):
        state, _ = _structured("hard", [call("pay")], wrong)
    assert state.get("structured_response") is None
    assert state["messages"][-1].content == PAID
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        "toolstop: the structured_response in the artifact of tool 'pay' does not fit the "
        "agent's response_format; structured_response is None"
    ]
    assert "SECRET-1" not in caplog.text


def test_structured_output_polish_narrates_into_the_structured_response(provider: Any) -> None:
    narration = call("Receipt", receipt_id="r-1", summary="Your order is paid.")
    state, events = _structured("polish", [call("pay"), narration])
    assert state["structured_response"].summary == "Your order is paid."
    record = assert_one_record(state, events, rule="completed")
    assert record["model_calls"] == 2
    _every_call_answered(state["messages"])  # create_agent answers the structured-output call
    if provider is not None:
        server, model = provider
        model.invoke([*state["messages"], HumanMessage("Thanks")])
        assert server.rejected == []


def test_structured_output_never_mode_is_create_agents_own_behaviour() -> None:
    narration = call("Receipt", receipt_id="r-1", summary="Paid.")
    state, events = _structured("never", [call("pay"), narration])
    assert state["structured_response"].receipt_id == "r-1"
    assert assert_one_record(state, events, rule="none")["would_stop"] == "completed"
    _every_call_answered(state["messages"])


# -- 7. tool exceptions through langchain's own middleware --------------------------------------


def _error_middleware() -> list[Any]:
    from langchain.agents.middleware import ToolRetryMiddleware

    found: list[Any] = [ToolRetryMiddleware(max_retries=0, on_failure="continue")]
    tool_error = getattr(middleware_module, "ToolErrorMiddleware", None)  # langchain >= 1.3.14
    if tool_error is not None:
        found.append(tool_error(on_error=lambda error, request: f"Error: {error}"))
    return found


@pytest.mark.parametrize("errors", _error_middleware(), ids=lambda m: type(m).__name__)
@pytest.mark.parametrize("order", ORDERS)
def test_tool_exceptions_count_against_the_retry_budget(errors: Any, order: str) -> None:
    policy = StopPolicy(max_transient_retries=1)
    model = ScriptedChatModel([call("pay"), call("pay")])
    failing = forced_tool("pay", RuntimeError("processor down"))
    agent = create_agent(model, [failing], middleware=stack([errors], policy, order))
    state, events = run(agent, ask())
    model.assert_complete()
    assert state["messages"][-1].content == policy.retry_budget_message
    record = assert_one_record(state, events, rule="retry_budget")
    assert [s["problem"] for s in record["invalid_signals"]] == ["tool_error", "tool_error"]


# -- 9. a retried model call publishes its turn once --------------------------------------------


class FlakyModel(ScriptedChatModel):
    """Fails once, on the first call after a tool turn, like a provider's 503."""

    _failures: list[int] = PrivateAttr(default_factory=lambda: [1])  # shared by bound copies

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        if self._failures[0] > 0 and any(isinstance(m, ToolMessage) for m in messages):
            self._failures[0] -= 1
            msg = "503 Service Unavailable"
            raise ConnectionError(msg)
        return super()._generate(messages, *args, **kwargs)


@pytest.mark.parametrize("order", ORDERS)
def test_a_retried_model_call_publishes_each_turn_once(order: str) -> None:
    from langchain.agents.middleware import ModelRetryMiddleware

    model = FlakyModel([call("pay"), call("pay")])
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    agent = create_agent(
        model, [forced_tool("pay", RETRY, DONE)], middleware=stack([retry], None, order)
    )
    state, events = run(agent, ask())
    model.assert_complete()
    assert model._failures == [0]  # the model did fail once, and was retried
    assert turns(events) == [1, 2]
    assert [e["toolstop"] for e in events] == ["turn", "turn", "run_end"]
    assert state["messages"][-1].content == PAID
    assert assert_one_record(state, events, rule="completed")["model_calls"] == 2


# -- summarization and PII redaction -------------------------------------------------------------


@pytest.mark.parametrize("order", ORDERS)
def test_summarization_keeps_runs_and_stops(order: str, provider: Any) -> None:
    from langchain.agents.middleware import SummarizationMiddleware

    summarizer = ScriptedChatModel(["Summary: earlier payments."] * 20)
    summarize = SummarizationMiddleware(
        model=summarizer, trigger=("messages", 4), keep=("messages", 2)
    )
    model = ScriptedChatModel([call("pay")] * 3)
    agent = create_agent(
        model,
        [forced_tool("pay", DONE)],
        middleware=stack([summarize], None, order),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": f"summary-{order}"}}
    for number in (1, 2, 3):
        state, events = run(agent, ask(f"Pay order o-{number}"), config)
        assert state["messages"][-1].content == PAID
        assert assert_one_record(state, events, rule="completed", run=number)["model_calls"] == 1
    model.assert_complete()
    assert summarizer.calls  # it did summarize
    assert_next_turn_accepted(provider, state["messages"])


@pytest.mark.parametrize("order", ORDERS)
def test_a_redacting_after_model_hook_covers_the_relay(order: str) -> None:
    from langchain.agents.middleware import PIIMiddleware

    secret = "Receipt sent to jane.doe@example.com."
    redact = PIIMiddleware("email", strategy="redact", apply_to_input=False, apply_to_output=True)
    model = ScriptedChatModel([call("pay")])
    agent = create_agent(
        model,
        [forced_tool("pay", (secret, signal(Outcome.COMPLETED)))],
        middleware=stack([redact], None, order),
    )
    state, events = run(agent, ask())
    final = state["messages"][-1].content
    assert "jane.doe@example.com" not in final
    assert final.startswith("Receipt sent to [REDACTED")
    assert_one_record(state, events, rule="completed")


# -- the matrix: every composition x mode x order on the two everyday runs -----------------------


@after_model
def inspect(state: Any, runtime: Any) -> None:
    """A user's after_model hook that only looks."""
    return


def _compositions() -> dict[str, Callable[[], list[Any]]]:
    from langchain.agents.middleware import (
        ModelRetryMiddleware,
        PIIMiddleware,
        SummarizationMiddleware,
        ToolRetryMiddleware,
    )

    found: dict[str, Callable[[], list[Any]]] = {
        "model-call-limit": lambda: [ModelCallLimitMiddleware(run_limit=5, thread_limit=50)],
        "tool-call-limit": lambda: [ToolCallLimitMiddleware(run_limit=5)],
        "model-retry": lambda: [ModelRetryMiddleware(max_retries=1, initial_delay=0)],
        "tool-retry": lambda: [ToolRetryMiddleware(max_retries=1, initial_delay=0)],
        "summarization": lambda: [
            SummarizationMiddleware(model=ScriptedChatModel([]), trigger=("messages", 50))
        ],
        "pii": lambda: [PIIMiddleware("email", strategy="redact")],
        "before-model-reminder": lambda: [remind],
        "after-model-hook": lambda: [inspect],
        "everything": lambda: [
            ModelCallLimitMiddleware(run_limit=5),
            ToolCallLimitMiddleware(run_limit=5),
            ModelRetryMiddleware(max_retries=1, initial_delay=0),
            remind,
            inspect,
        ],
    }
    if hasattr(middleware_module, "ToolErrorMiddleware"):  # langchain >= 1.3.14
        found["tool-error"] = lambda: [
            middleware_module.ToolErrorMiddleware(on_error=lambda error, request: str(error))
        ]
    return found


COMPOSITIONS = _compositions()


@pytest.mark.parametrize("composition", list(COMPOSITIONS))
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("retry_first", [False, True], ids=["success", "retry-then-success"])
def test_every_composition_keeps_the_contract(
    composition: str, order: str, mode: str, retry_first: bool, provider: Any
) -> None:
    calls: list[Any] = [call("pay")] * (2 if retry_first else 1)
    narration = "Your order o-1 is paid."
    script = calls + ([narration] if mode != "hard" else [])
    model = ScriptedChatModel(script)
    results = (RETRY, DONE) if retry_first else (DONE,)
    policy = StopPolicy(mode=mode)  # type: ignore[arg-type]
    agent = create_agent(
        model,
        [forced_tool("pay", *results)],
        middleware=stack(COMPOSITIONS[composition](), policy, order),
        name="concierge",
    )
    try:
        state, events = run(agent, ask())
    except GraphRecursionError:  # pragma: no cover - the failure being tested
        pytest.fail("GraphRecursionError")
    model.assert_complete()  # no model call beyond the script: a hard stop makes none
    final = state["messages"][-1]
    assert final.content == (PAID if mode == "hard" else narration)
    assert final.name == "concierge"
    record = assert_one_record(state, events, rule="none" if mode == "never" else "completed")
    assert record["model_calls"] == len(script)
    assert record["transient_retries"] == (1 if retry_first else 0)
    assert record["would_stop"] == ("completed" if mode == "never" else None)
    assert turns(events) == list(range(1, len(calls) + 1))
    assert_next_turn_accepted(provider, state["messages"])
