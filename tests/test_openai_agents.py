"""The same scenario table on the OpenAI Agents SDK, with its own ScriptedModel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the `openai-agents` extra")

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from toolstop import StopPolicy, ToolstopConfigError, signal
from toolstop.openai_agents import artifact_tool, stop_on_artifact

set_tracing_disabled(True)  # no trace export: tests stay offline

PAGE = "Refunds are paid within 5 business days."
SECRET = "ARTIFACT-ONLY-5f1"


def planned(name: str, plan: list[tuple[str, dict[str, Any]]]) -> Any:
    results = list(plan)

    def run(query: str) -> tuple[str, dict[str, Any]]:
        """Look something up."""
        return results.pop(0) if len(results) > 1 else results[0]

    return artifact_tool(run, name_override=name)


def make_tools(*plans: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    return [planned(name, plan) for name, plan in zip(("lookup", "other"), plans, strict=False)]


DONE = (PAGE, signal("completed", secret=SECRET))
RETRY = ("The service timed out.", signal("transient", secret=SECRET))
FATAL = ("The card was declined.", signal("fatal", secret=SECRET))


def agent_run(
    steps: list[Any], tools: list[Any], policy: StopPolicy | None = None
) -> tuple[Any, ScriptedModel, Any]:
    model = ScriptedModel(steps)
    behaviour = stop_on_artifact(policy)
    agent = Agent(
        name="support",
        instructions="Use the tools.",
        tools=tools,
        model=model,
        tool_use_behavior=behaviour,
    )
    result = asyncio.run(Runner.run(agent, "How do refunds work?"))
    return result, model, behaviour.record(result.context_wrapper)


def call(name: str, call_id: str) -> Any:
    return [function_call(name, {"query": "refunds"}, call_id=call_id)]


@pytest.mark.parametrize(("result", "rule"), [(DONE, "completed"), (FATAL, "fatal")])
def test_success_and_fatal_end_with_the_tool_text(result: tuple[str, Any], rule: str) -> None:
    outcome, model, record = agent_run([call("lookup", "c1")], make_tools([result]))
    assert outcome.final_output == result[0]
    assert len(model.calls) == 1
    model.assert_complete()
    assert (record["rule"], record["tools"]) == (rule, ["lookup"])


def test_transient_goes_back_to_the_model_with_content_only() -> None:
    outcome, model, record = agent_run(
        [call("lookup", "c1"), call("lookup", "c2")], make_tools([RETRY, DONE])
    )
    assert outcome.final_output == PAGE
    assert len(model.calls) == 2
    assert SECRET not in repr(model.calls[1].input)  # the artifact never reached the model
    assert "The service timed out." in repr(model.calls[1].input)
    assert (record["rule"], record["transient_retries"]) == ("completed", 1)


@pytest.mark.parametrize(
    ("parallel", "stops"),
    [("all", False), ("any", True), ("first", True), ("priority", True)],
)
@pytest.mark.parametrize("order", ["stop-first", "stop-last"])
def test_parallel_turns_follow_the_policy(parallel: str, stops: bool, order: str) -> None:
    calls = [
        function_call("lookup", {"query": "a"}, call_id="c1"),
        function_call("other", {"query": "b"}, call_id="c2"),
    ]
    if order == "stop-last":
        calls.reverse()
    if parallel == "first" and order == "stop-last":
        stops = False  # the transient call comes first and decides
    steps: list[Any] = [calls] if stops else [calls, [assistant_message("answer")]]
    outcome, model, record = agent_run(
        steps, make_tools([DONE], [RETRY]), StopPolicy(parallel=parallel)
    )  # type: ignore[arg-type]
    model.assert_complete()
    assert outcome.final_output == (PAGE if stops else "answer")
    assert record["stopped"] is stops


def test_invalid_signals_and_never_mode_go_back_to_the_model() -> None:
    outcome, model, record = agent_run(
        [call("lookup", "c1"), [assistant_message("answer")]], make_tools([("x", {"stop": "yes"})])
    )
    model.assert_complete()
    assert outcome.final_output == "answer"
    assert record["invalid_signals"][0]["problem"] == "stop_not_bool"
    outcome, _model, record = agent_run(
        [call("lookup", "c1"), [assistant_message("paraphrase")]],
        make_tools([DONE]),
        StopPolicy(mode="never"),
    )
    assert outcome.final_output == "paraphrase"
    assert record["would_stop"] == "completed"


def test_retry_budget_ends_with_the_user_safe_text() -> None:
    policy = StopPolicy(max_transient_retries=1)
    outcome, model, record = agent_run(
        [call("lookup", "c1"), call("lookup", "c2")], make_tools([RETRY]), policy
    )
    model.assert_complete()
    assert outcome.final_output == policy.retry_budget_message
    assert record["rule"] == "retry_budget"


def test_polish_is_refused() -> None:
    with pytest.raises(ToolstopConfigError, match="polish"):
        stop_on_artifact(StopPolicy(mode="polish"))


def test_a_policy_that_is_not_a_stop_policy_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^stop_on_artifact: policy must be a StopPolicy"):
        stop_on_artifact("hard")  # type: ignore[arg-type]


def test_a_raising_tool_counts_against_the_retry_budget_like_on_langgraph() -> None:
    def lookup(query: str) -> tuple[str, dict[str, Any]]:
        """Look something up."""
        msg = "backend exploded"
        raise RuntimeError(msg)

    policy = StopPolicy(max_transient_retries=2)
    model = ScriptedModel([call("lookup", f"c{i}") for i in range(3)])
    behaviour = stop_on_artifact(policy)
    agent = Agent(
        name="support", tools=[artifact_tool(lookup)], model=model, tool_use_behavior=behaviour
    )
    result = asyncio.run(Runner.run(agent, "How do refunds work?", max_turns=5))
    model.assert_complete()  # three failures: the first try and two retries, then the budget
    assert result.final_output == policy.retry_budget_message
    record = behaviour.record(result.context_wrapper)
    assert (record["rule"], record["transient_retries"]) == ("retry_budget", 2)
    assert [s["problem"] for s in record["invalid_signals"]] == ["tool_error"] * 3
    # the model saw the SDK's own error text, nothing of the exception
    assert "An error occurred while running the tool" in repr(model.calls[1].input)


def test_a_custom_failure_function_is_kept_and_none_still_raises() -> None:
    def lookup(query: str) -> tuple[str, dict[str, Any]]:
        """Look something up."""
        msg = "backend exploded"
        raise RuntimeError(msg)

    tool = artifact_tool(lookup, failure_error_function=lambda ctx, error: f"sorry: {error}")
    model = ScriptedModel([call("lookup", "c1"), [assistant_message("gave up")]])
    agent = Agent(name="s", tools=[tool], model=model, tool_use_behavior=stop_on_artifact())
    result = asyncio.run(Runner.run(agent, "q"))
    assert result.final_output == "gave up"
    assert "sorry: backend exploded" in repr(model.calls[1].input)
    raising = artifact_tool(lookup, failure_error_function=None)
    agent = Agent(
        name="s",
        tools=[raising],
        model=ScriptedModel([call("lookup", "c1")]),
        tool_use_behavior=stop_on_artifact(),
    )
    with pytest.raises(Exception, match="backend exploded"):
        asyncio.run(Runner.run(agent, "q"))


def test_the_record_counts_the_runs_model_calls_and_tokens() -> None:
    outcome, model, record = agent_run(
        [call("lookup", "c1"), call("lookup", "c2")], make_tools([RETRY, DONE])
    )
    usage = outcome.context_wrapper.usage
    assert record["model_calls"] == len(model.calls) == usage.requests == 2
    assert (record["input_tokens"], record["output_tokens"]) == (
        usage.input_tokens,
        usage.output_tokens,
    )
    # a run the model answers without any tool still has its record
    answered, _model, plain = agent_run([[assistant_message("hi")]], make_tools([DONE]))
    assert answered.final_output == "hi"
    assert (plain["rule"], plain["model_calls"], plain["tool_turns"]) == ("none", 1, 0)


def test_shadow_mode_records_what_a_stop_would_have_saved_from_the_sdks_usage() -> None:
    from agents.usage import Usage

    per_call = Usage(requests=1, input_tokens=100, output_tokens=7, total_tokens=107)
    steps = [
        call("lookup", "c1"),
        call("lookup", "c2"),
        call("lookup", "c3"),
        [assistant_message("ok")],
    ]
    model = ScriptedModel(steps, default_usage=per_call)
    behaviour = stop_on_artifact(StopPolicy(mode="never"))
    tools = make_tools([RETRY, DONE, DONE])
    agent = Agent(name="support", tools=tools, model=model, tool_use_behavior=behaviour)
    result = asyncio.run(Runner.run(agent, "How do refunds work?"))
    model.assert_complete()
    record = behaviour.record(result.context_wrapper)
    assert (record["would_stop"], record["tool_call_ids"]) == ("completed", ["c2"])
    # four model calls; the two after the second tool turn are what a hard stop saves
    assert record["model_calls"] == 4
    assert record["would_save"] == {"model_calls": 2, "input_tokens": 200, "output_tokens": 14}
    assert record["schema_version"] == 5


def test_a_stop_shows_the_runs_earlier_completed_results() -> None:
    # Turn 1: lookup completes, other times out; turn 2: other completes. Both texts, in order.
    steps = [
        [function_call("lookup", {"query": "a"}, call_id="c1"), *call("other", "c2")],
        call("other", "c3"),
    ]
    tools = make_tools([DONE], [RETRY, ("Other: done.", signal("completed"))])
    result, _, record = agent_run(steps, tools)
    assert result.final_output == f"{PAGE}\n\nOther: done."
    assert record["relayed"] == ["c1", "c3"]


def test_a_result_asked_again_is_shown_once_on_the_sdk() -> None:
    steps = [
        [*call("lookup", "c1"), *call("other", "c2")],
        [*call("other", "c3"), *call("lookup", "c4")],
    ]
    later = ("Refunds: 5 days.", signal("completed"))
    tools = make_tools([DONE, later], [RETRY, ("Other: done.", signal("completed"))])
    result, _, record = agent_run(steps, tools)
    assert result.final_output == f"Other: done.\n\n{later[0]}"
    assert record["relayed"] == ["c3", "c4"]


def test_answer_is_the_final_output_and_on_budget_model_is_refused() -> None:
    answered = ('{"days": 5}', signal("completed", answer="Refunds take 5 days."))
    result, _, _ = agent_run([call("lookup", "c1")], make_tools([answered]))
    assert result.final_output == "Refunds take 5 days."
    with pytest.raises(ToolstopConfigError, match="on_budget='model'"):
        stop_on_artifact(StopPolicy(on_budget="model"))


def test_a_later_turn_sends_the_model_the_content_never_the_answer() -> None:
    told = "Your refund is on its way."
    answered = (PAGE, signal("completed", answer=told + " " + "x" * 1_000_000))
    model = ScriptedModel([call("lookup", "c1"), [assistant_message("You're welcome.")]])
    agent = Agent(
        name="support",
        tools=make_tools([answered]),
        model=model,
        tool_use_behavior=stop_on_artifact(StopPolicy()),
    )
    first = asyncio.run(Runner.run(agent, "How do refunds work?"))
    assert first.final_output.startswith(told)  # the user sees the answer
    history = [*first.to_input_list(), {"role": "user", "content": "Thanks!"}]
    second = asyncio.run(Runner.run(agent, history))
    model.assert_complete()
    assert second.final_output == "You're welcome."
    sent = repr(model.calls[-1].input)
    assert PAGE in sent  # the SDK's history holds the tool's content ...
    assert told not in sent  # ... and never the answer, as on every router


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        (("", signal("completed")), "empty_relay"),
        ((" ", signal("fatal")), "empty_relay"),
        ((None, signal("completed")), "empty_relay"),
        (("\u200b\u202e\x00", signal("completed")), "empty_relay"),
        (("", {"stop": True, "reason": "completed", "answer": ""}), "answer_not_text"),
        ((PAGE, {"stop": True, "answer": [{"type": "text", "text": 5}]}), "answer_not_text"),
        (
            (PAGE, {"stop": True, "answer": [{"type": "image_url", "image_url": {}}]}),
            "answer_not_text",
        ),
    ],
    ids=["empty", "blank", "None", "invisible", "empty-answer", "text-not-str", "image"],
)
def test_a_stop_with_no_text_to_relay_goes_back_to_the_model_and_is_recorded_so(
    result: tuple[str, Any], problem: str
) -> None:
    steps = [call("lookup", "c1"), [assistant_message("The model's own answer.")]]
    outcome, model, record = agent_run(steps, make_tools([result]))
    model.assert_complete()
    assert outcome.final_output == "The model's own answer."
    assert (record["rule"], record["stopped"], record["relayed"]) == ("none", False, [])
    assert [i["problem"] for i in record["invalid_signals"]] == [problem]
