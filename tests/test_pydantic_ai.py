"""The same contract on Pydantic AI: FunctionModel scripts, and a real client on the loopback."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from importlib.metadata import version
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, ToolReturn
from pydantic_ai import models as pai_models
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from toolstop import StopPolicy, signal
from toolstop.pydantic_ai import RECORD_KEY, RELAY_KEY, StopOnArtifact, current_turn, stop_record
from toolstop.testing.loopback import LoopbackProvider, reply

_PYDANTIC_AI = tuple(int(part) for part in version("pydantic-ai-slim").split(".")[:2])
OLD_STREAM = pytest.mark.xfail(
    _PYDANTIC_AI < (2, 68),
    reason="before Pydantic AI 2.68 (2.0.0 tested) a streamed run the model ends hands its "
    "caller a response the record is not on; the toolstop log line carries it (docs/adapters.md)",
    strict=True,
)

pai_models.ALLOW_MODEL_REQUESTS = False  # no real provider; the loopback tests lift it

PAGE = "Refunds are paid within 5 business days."
SECRET = "ARTIFACT-ONLY-7d3"
DONE = (PAGE, signal("completed", secret=SECRET))
RETRY = ("The service timed out.", signal("transient", secret=SECRET))
FATAL = ("The card was declined.", signal("fatal", secret=SECRET))
BLOCK = ("internal: blocked", signal("policy_block", secret=SECRET))
PLAIN = ("Some text, no signal.", None)
BROKEN = ("Looks fine.", {"stop": "yes", "reason": "completed"})
ANSWER = "The model's own answer."


@pytest.fixture(autouse=True)
def _close_the_loop_run_sync_left() -> Iterator[None]:
    """`run_sync` runs on an event loop it sets and leaves open; close it after each test."""
    yield
    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:  # none set (asyncio.run unset it)
        return
    if not loop.is_running():
        loop.close()
        policy.set_event_loop(None)


class Script:
    """A scripted model: one response per call, in order; an extra call fails the test."""

    def __init__(self, steps: list[ModelResponse]) -> None:
        self.steps = list(steps)
        self.infos: list[AgentInfo] = []

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.infos.append(info)
        assert self.steps, f"unexpected model call #{len(self.infos)}"
        return self.steps.pop(0)

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        response = self.respond(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {
                    index: DeltaToolCall(
                        name=part.tool_name,
                        json_args=part.args_as_json_str(),
                        tool_call_id=part.tool_call_id,
                    )
                }

    @property
    def calls(self) -> int:
        return len(self.infos)

    def model(self) -> FunctionModel:
        return FunctionModel(self.respond, stream_function=self.stream)


def calls(*names: str) -> ModelResponse:
    """The model asks for the tools `names`, in this order (ids c0, c1, ...)."""
    return ModelResponse(
        parts=[
            ToolCallPart(name, {"query": "refunds"}, tool_call_id=f"c{i}")
            for i, name in enumerate(names)
        ]
    )


def text(content: str = ANSWER) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content)])


def planned(name: str, *plan: tuple[str, Any]) -> Any:
    """A tool that returns the planned `(content, metadata)` pairs in order (the last repeats)."""
    results = list(plan)

    def tool(query: str) -> Any:
        content, metadata = results.pop(0) if len(results) > 1 else results[0]
        if metadata is None:
            return content
        return ToolReturn(return_value=content, metadata=metadata)

    tool.__name__ = name
    tool.__doc__ = "Look something up."
    return tool


def agent_for(script: Script, tools: list[Any], policy: StopPolicy | None = None, **kw: Any) -> Any:
    return Agent(
        script.model(), tools=tools, capabilities=[StopOnArtifact(policy or StopPolicy())], **kw
    )


def run(
    steps: list[ModelResponse],
    tools: list[Any],
    policy: StopPolicy | None = None,
    **kw: Any,
) -> tuple[Any, Script, dict[str, Any]]:
    script = Script(steps)
    limits = {"usage_limits": kw.pop("usage_limits")} if "usage_limits" in kw else {}
    result = agent_for(script, tools, policy, **kw).run_sync("How do refunds work?", **limits)
    record = stop_record(result)
    assert record is not None
    assert not script.steps, "scripted responses left unused"
    return result, script, dict(record)


# -- the scenario table -------------------------------------------------------------------------


def test_completed_ends_the_run_with_the_tool_text_and_no_second_model_call() -> None:
    result, script, record = run([calls("lookup")], [planned("lookup", DONE)])
    assert result.output == PAGE
    assert script.calls == 1
    assert (record["rule"], record["stopped"], record["model_calls"]) == ("completed", True, 1)
    assert record["tools"] == ["lookup"]
    assert record["tool_call_ids"] == ["c0"]
    last = result.all_messages()[-1]
    assert isinstance(last, ModelResponse)
    assert last.metadata is not None
    assert last.metadata[RELAY_KEY] == {"relay": True, "rule": "completed"}
    assert SECRET not in json.dumps(record)  # the record keeps names and counts, not content


def test_fatal_ends_the_run_with_the_failure_text() -> None:
    result, script, record = run([calls("lookup")], [planned("lookup", FATAL)])
    assert (result.output, script.calls, record["rule"]) == (FATAL[0], 1, "fatal")


def test_policy_block_ends_with_the_policys_text_not_the_tools() -> None:
    policy = StopPolicy(policy_block_message="Not allowed.")
    result, _, record = run([calls("lookup")], [planned("lookup", BLOCK)], policy)
    assert result.output == "Not allowed."
    assert record["rule"] == "policy_block"


def test_transient_goes_back_to_the_model_then_completed_stops() -> None:
    result, script, record = run(
        [calls("lookup"), calls("lookup")], [planned("lookup", RETRY, DONE)]
    )
    assert (result.output, script.calls) == (PAGE, 2)
    assert (record["transient_retries"], record["tool_turns"], record["model_calls"]) == (1, 2, 2)


@pytest.mark.parametrize(
    ("returned", "problem"), [(PLAIN, None), (BROKEN, "stop_not_bool")], ids=["plain", "invalid"]
)
def test_plain_and_invalid_returns_go_back_to_the_model(
    returned: tuple[str, Any], problem: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    tool = planned(f"lookup_{problem or 'plain'}", returned)
    with caplog.at_level(logging.WARNING, logger="toolstop"):
        result, script, record = run([calls(tool.__name__), text()], [tool])
    assert (result.output, script.calls, record["rule"]) == (ANSWER, 2, "none")
    if problem is None:
        assert record["outcomes"]["unsignalled"] == 1
        assert record["invalid_signals"] == []
        assert "malformed stop signal" not in caplog.text
    else:
        assert [s["problem"] for s in record["invalid_signals"]] == [problem]
        assert "malformed stop signal" in caplog.text
        assert tool.__name__ in caplog.text


def test_never_mode_lets_the_model_answer_and_records_what_would_have_stopped() -> None:
    result, script, record = run(
        [calls("lookup"), text()], [planned("lookup", DONE)], StopPolicy(mode="never")
    )
    assert (result.output, script.calls) == (ANSWER, 2)
    assert (record["rule"], record["stopped"], record["would_stop"]) == ("none", False, "completed")
    assert record["would_save"]["model_calls"] == 1
    assert record["would_save"]["output_tokens"] > 0


def test_polish_makes_one_narrating_call_with_no_function_tools() -> None:
    result, script, record = run(
        [calls("lookup"), text("Refunds take five days.")],
        [planned("lookup", DONE)],
        StopPolicy(mode="polish"),
    )
    assert result.output == "Refunds take five days."
    assert [len(i.function_tools) for i in script.infos] == [1, 0]
    assert (record["rule"], record["stopped"], record["model_calls"]) == ("completed", True, 2)


def test_the_retry_budget_ends_the_run_without_an_exception() -> None:
    policy = StopPolicy(max_transient_retries=1)
    result, script, record = run(
        [calls("lookup"), calls("lookup")], [planned("lookup", RETRY)], policy
    )
    assert result.output == policy.retry_budget_message
    assert script.calls == 2
    assert (record["rule"], record["stopped"]) == ("retry_budget", True)


def test_a_model_retry_from_the_tool_counts_against_the_retry_budget() -> None:
    def lookup(query: str) -> str:
        """Look something up."""
        raise ModelRetry("try again later")

    policy = StopPolicy(max_transient_retries=0)
    result, script, record = run([calls("lookup")], [lookup], policy)
    assert (result.output, script.calls) == (policy.retry_budget_message, 1)
    assert record["outcomes"]["invalid"] == 1
    assert [s["problem"] for s in record["invalid_signals"]] == ["tool_error"]


def planned_retry() -> Any:
    """A tool `lookup` that raises `ModelRetry` on every call."""

    def lookup(query: str) -> str:
        """Look something up."""
        raise ModelRetry("try again later")

    return lookup


def test_pydantic_ais_tool_retries_below_the_budget_are_warned_of_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Pydantic AI gives a tool 1 retry by default: a tool that keeps raising ModelRetry fails the
    run before the budget (3) can end it, and the capability says how to let the budget fire."""
    from pydantic_ai.exceptions import UnexpectedModelBehavior

    script = Script([calls("lookup")] * 2)
    agent = agent_for(script, [planned_retry()])
    with caplog.at_level(logging.WARNING, logger="toolstop"):
        for _ in range(2):
            script.steps = [calls("lookup")] * 2
            with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries count of 1"):
                agent.run_sync("How do refunds work?")
    warnings = [r.getMessage() for r in caplog.records if "ModelRetry" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "'lookup'" in warnings[0]
    assert "retries=4" in warnings[0]


def test_with_tool_retries_above_the_budget_the_budget_ends_a_model_retry_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy = StopPolicy(max_transient_retries=3)
    with caplog.at_level(logging.WARNING, logger="toolstop"):
        result, script, record = run([calls("lookup")] * 4, [planned_retry()], policy, retries=4)
    assert (result.output, script.calls) == (policy.retry_budget_message, 4)
    assert (record["rule"], record["outcomes"]["invalid"]) == ("retry_budget", 4)
    assert "ModelRetry" not in caplog.text


@pytest.mark.parametrize("order", [("lookup", "other"), ("other", "lookup")], ids=["first", "last"])
@pytest.mark.parametrize(("parallel", "stops"), [("all", False), ("any", True)], ids=["all", "any"])
def test_parallel_rules_do_not_depend_on_the_order_of_the_calls(
    order: tuple[str, str], parallel: Any, stops: bool
) -> None:
    steps = [calls(*order)] + ([] if stops else [text()])
    result, script, record = run(
        steps,
        [planned("lookup", DONE), planned("other", RETRY)],
        StopPolicy(parallel=parallel),
    )
    assert result.output == (PAGE if stops else ANSWER)
    assert script.calls == (1 if stops else 2)
    assert record["stopped"] is stops


def test_two_stopping_calls_are_joined_in_call_order() -> None:
    second = ("Your ticket is T-7.", signal("completed"))
    result, _, record = run(
        [calls("other", "lookup")], [planned("lookup", DONE), planned("other", second)]
    )
    assert result.output == f"{second[0]}\n\n{PAGE}"
    assert record["tools"] == ["other", "lookup"]


def test_the_next_run_on_the_history_is_run_2_and_does_not_redecide_the_old_turn() -> None:
    script = Script([calls("lookup"), text()])
    agent = agent_for(script, [planned("lookup", DONE)])
    first = agent.run_sync("How do refunds work?")
    second = agent.run_sync("Thanks!", message_history=first.all_messages())
    assert (first.output, second.output, script.calls) == (PAGE, ANSWER, 2)
    record = stop_record(second)
    assert record is not None
    assert (record["run"], record["rule"], record["tool_turns"]) == (2, "none", 0)
    assert stop_record(first.all_messages()) == stop_record(second.all_messages()[:4])


class Seeing(Script):
    """A `Script` that also keeps the messages each call was sent."""

    def __init__(self, steps: list[ModelResponse]) -> None:
        super().__init__(steps)
        self.sent: list[list[ModelMessage]] = []

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.sent.append(list(messages))
        return super().respond(messages, info)


TOLD = "Your refund is on its way. "  # what the tool tells the user, not the model


@pytest.mark.parametrize(
    "answer",
    [TOLD + "x" * 10_000_000, [{"type": "text", "text": TOLD}, {"type": "text", "text": "!"}]],
    ids=["10MB", "blocks"],
)
def test_a_later_run_sends_the_model_the_content_never_the_answer(answer: Any) -> None:
    script = Seeing([calls("lookup"), text()])
    agent = agent_for(script, [planned("lookup", (PAGE, signal("completed", answer=answer)))])
    first = agent.run_sync("How do refunds work?")
    shown = answer if isinstance(answer, str) else TOLD + "!"
    assert first.output == shown  # the user sees the answer
    second = agent.run_sync("Thanks!", message_history=first.all_messages())
    assert (second.output, script.calls) == (ANSWER, 2)
    relay = script.sent[-1][3]
    assert isinstance(relay, ModelResponse)
    assert relay.parts == [TextPart(PAGE)]  # the relay, as the model would have been shown it
    contents = [getattr(p, "content", None) for m in script.sent[-1] for p in m.parts]
    assert TOLD not in repr(contents)  # (a part's `metadata` is never sent to a provider)
    kept = second.all_messages()[3]
    assert isinstance(kept, ModelResponse)
    if _PYDANTIC_AI < (2, 68):  # 2.0 writes what before_model_request sends into the history
        assert kept.parts == [TextPart(PAGE)]
    else:
        assert kept.parts == [TextPart(shown)]  # the history keeps what the user saw


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        (("", signal("completed")), "empty_relay"),
        ((" \n", signal("fatal")), "empty_relay"),
        (("", {"stop": True, "reason": "completed", "answer": ""}), "answer_not_text"),
        (
            (PAGE, {"stop": True, "reason": "completed", "answer": [{"type": "text", "text": 5}]}),
            "answer_not_text",
        ),
        (
            (PAGE, {"stop": True, "reason": "completed", "answer": [{"type": "image_url"}]}),
            "answer_not_text",
        ),
    ],
    ids=["empty", "blank", "empty-answer", "text-not-str", "image"],
)
def test_a_stop_with_no_text_to_relay_goes_back_to_the_model_and_is_recorded_so(
    result: tuple[str, Any], problem: str
) -> None:
    outcome, script, record = run([calls("lookup"), text()], [planned("lookup", result)])
    assert (outcome.output, script.calls) == (ANSWER, 2)
    assert (record["rule"], record["stopped"], record["relayed"]) == ("none", False, [])
    assert [i["problem"] for i in record["invalid_signals"]] == [problem]


# -- sync, async, streaming ---------------------------------------------------------------------


def test_async_run_stops_as_the_sync_run() -> None:
    script = Script([calls("lookup")])
    agent = agent_for(script, [planned("lookup", DONE)])
    result = asyncio.run(agent.run("How do refunds work?"))
    assert (result.output, script.calls) == (PAGE, 1)
    record = stop_record(result)
    assert record is not None
    assert record["rule"] == "completed"


def test_a_streamed_run_streams_the_tool_text_as_its_output() -> None:
    script = Script([calls("lookup")])
    agent = agent_for(script, [planned("lookup", DONE)])

    async def stream() -> tuple[list[str], Any]:
        async with agent.run_stream("How do refunds work?") as streamed:
            chunks = [chunk async for chunk in streamed.stream_text(delta=True)]
        return chunks, streamed

    chunks, streamed = asyncio.run(stream())
    assert "".join(chunks) == PAGE
    assert script.calls == 1
    record = stop_record(streamed)
    assert record is not None
    assert (record["rule"], record["model_calls"]) == ("completed", 1)


def test_a_streamed_run_that_goes_on_streams_the_models_answer() -> None:
    script = Script([calls("lookup"), text()])
    agent = agent_for(script, [planned("lookup", RETRY)])

    async def stream() -> str:
        async with agent.run_stream("How do refunds work?") as streamed:
            return await streamed.get_output()

    assert asyncio.run(stream()) == ANSWER
    assert script.calls == 2


@pytest.mark.parametrize(
    ("mode", "steps", "rule"),
    [
        ("hard", [calls("lookup"), text()], "none"),
        ("hard", [text()], "none"),
        ("never", [calls("lookup"), text()], "none"),
        ("polish", [calls("lookup"), text("Refunds take five days.")], "completed"),
    ],
    ids=["hard-goes-on", "hard-no-tool", "never", "polish"],
)
@OLD_STREAM
def test_a_streamed_run_the_model_ends_keeps_its_record(
    mode: Any, steps: list[ModelResponse], rule: str
) -> None:
    """The model's own streamed text ends the run: the record is on the response the stream
    handed out, as on the response a non-streamed run keeps."""
    script = Script(steps)
    tool = planned("lookup", DONE if mode != "hard" else RETRY)
    agent = agent_for(script, [tool], StopPolicy(mode=mode))

    async def stream() -> tuple[str, Any]:
        async with agent.run_stream("How do refunds work?") as streamed:
            return await streamed.get_output(), streamed

    output, streamed = asyncio.run(stream())
    assert output == steps[-1].parts[0].content  # type: ignore[union-attr]
    assert not script.steps
    record = stop_record(streamed)
    assert record is not None
    assert stop_record(streamed.all_messages()) == record
    assert (record["rule"], record["model_calls"]) == (rule, len(steps))
    if mode == "never":
        assert record["would_stop"] == "completed"
    assert RECORD_KEY in (streamed.all_messages()[-1].metadata or {})
    assert [m.metadata for m in streamed.all_messages()[:-1] if isinstance(m, ModelResponse)] == [
        None
    ] * (len(steps) - 1)


# -- structured output --------------------------------------------------------------------------


class Refund(BaseModel):
    days: int


def test_structured_output_is_the_deciding_tools_structured_response() -> None:
    done = (PAGE, signal("completed", structured_response={"days": 5}))
    result, script, record = run([calls("lookup")], [planned("lookup", done)], output_type=Refund)
    assert result.output == Refund(days=5)
    assert (script.calls, record["rule"], record["model_calls"]) == (1, "completed", 1)


def test_structured_output_without_a_structured_response_is_narrated_by_the_model() -> None:
    def final(info_days: int) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("final_result", {"days": info_days})])

    result, script, record = run(
        [calls("lookup"), final(5)], [planned("lookup", DONE)], output_type=Refund
    )
    assert result.output == Refund(days=5)
    assert [len(i.function_tools) for i in script.infos] == [1, 0]
    assert [len(i.output_tools) for i in script.infos] == [1, 1]
    assert (record["rule"], record["stopped"], record["model_calls"]) == ("completed", True, 2)


def test_a_policy_block_with_structured_output_never_sends_the_blocked_text() -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(seen) == 1:
            return calls("lookup")
        return ModelResponse(parts=[ToolCallPart("final_result", {"days": 0})])

    policy = StopPolicy(policy_block_message="Not allowed.")
    agent = Agent(
        FunctionModel(model),
        tools=[planned("lookup", BLOCK)],
        output_type=Refund,
        capabilities=[StopOnArtifact(policy)],
    )
    result = agent.run_sync("How do refunds work?")
    assert result.output == Refund(days=0)
    assert len(seen) == 2
    narrated = seen[1][-1]
    assert isinstance(narrated, ModelRequest)
    returns = [p for p in narrated.parts if isinstance(p, ToolReturnPart)]
    assert [p.content for p in returns] == ["Not allowed."]
    sent = [getattr(p, "content", None) for m in seen[1] for p in m.parts]
    assert BLOCK[0] not in sent
    record = stop_record(result)
    assert record is not None
    assert (record["rule"], record["stopped"]) == ("policy_block", True)


def test_a_structured_response_that_does_not_fit_is_corrected_by_the_model() -> None:
    wrong = (PAGE, signal("completed", structured_response={"days": "soon"}))
    fixed = ModelResponse(parts=[ToolCallPart("final_result", {"days": 5})])
    result, script, record = run(
        [calls("lookup"), fixed], [planned("lookup", wrong)], output_type=Refund
    )
    assert result.output == Refund(days=5)
    assert script.calls == 2  # Pydantic AI's validation sent the error back to the model
    assert record["model_calls"] == 2


def test_a_tool_exception_propagates_as_without_toolstop() -> None:
    def lookup(query: str) -> str:
        """Look something up."""
        msg = "the database is gone"
        raise RuntimeError(msg)

    script = Script([calls("lookup")])
    with pytest.raises(RuntimeError, match="the database is gone"):
        agent_for(script, [lookup]).run_sync("How do refunds work?")


# -- the turn as `decide` reads it, observability, configuration ---------------------------------


def test_the_turn_reads_metadata_as_the_artifact_and_outcomes_as_errors() -> None:
    asking = calls("lookup", "other", "third")
    returns = ModelRequest(
        parts=[
            ToolReturnPart("lookup", PAGE, tool_call_id="c0", metadata={"stop": True}),
            ToolReturnPart("other", "no", tool_call_id="c1", outcome="denied"),
            ToolReturnPart("third", "boom", tool_call_id="c2", outcome="failed"),
        ]
    )
    turn, position = current_turn([ModelRequest.user_text_prompt("hi"), asking, returns])
    assert turn is not None
    assert position == 2
    assert turn.asking is not None
    assert [c["id"] for c in turn.asking.tool_calls] == ["c0", "c1", "c2"]
    assert turn.results[0].artifact == {"stop": True}
    assert [m.status for m in turn.results] == ["success", "error", "error"]
    from toolstop.decision import Problem, decide_turn

    signals = decide_turn(turn).signals
    assert [s.problem for s in signals] == [None, Problem.REJECTED, Problem.TOOL_ERROR]
    assert current_turn([ModelRequest.user_text_prompt("hi")]) == (None, -1)


def test_the_run_end_is_logged_with_its_record(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="toolstop"):
        result, _, record = run([calls("lookup")], [planned("lookup", DONE)])
    ends = [r for r in caplog.records if hasattr(r, "toolstop")]
    assert len(ends) == 1
    assert ends[0].toolstop == record  # type: ignore[attr-defined]
    conversation = getattr(result, "conversation_id", None)  # Pydantic AI >= 2.x with conversations
    assert ends[0].toolstop_thread["thread_id"] == conversation  # type: ignore[attr-defined]


def test_a_request_limit_with_room_for_the_relay_keeps_the_stop() -> None:
    """Pydantic AI counts a relay as a request (a step a capability answered)."""
    from pydantic_ai.usage import UsageLimits

    result, script, record = run(
        [calls("lookup")], [planned("lookup", DONE)], usage_limits=UsageLimits(request_limit=2)
    )
    assert (result.output, script.calls, record["model_calls"]) == (PAGE, 1, 1)


def test_a_wrong_policy_is_refused_when_the_capability_is_built() -> None:
    with pytest.raises(TypeError, match="did you mean StopPolicy"):
        StopOnArtifact("hard")  # type: ignore[arg-type]


def test_the_record_is_kept_in_the_history_and_survives_serialisation() -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    result, _, record = run([calls("lookup")], [planned("lookup", DONE)])
    stored = ModelMessagesTypeAdapter.validate_json(result.all_messages_json())
    assert stop_record(stored) == record
    assert RECORD_KEY in (stored[-1].metadata or {})


# -- a real provider client over HTTP (the loopback provider) ------------------------------------


@pytest.fixture
def allow_requests() -> Iterator[None]:
    with pai_models.override_allow_model_requests(True):
        yield


def openai_model(provider: LoopbackProvider) -> Any:
    openai = pytest.importorskip("pydantic_ai.models.openai", reason="needs pydantic-ai[openai]")
    from pydantic_ai.providers.openai import OpenAIProvider

    return openai.OpenAIChatModel(
        "gpt-loopback", provider=OpenAIProvider(base_url=provider.base_url, api_key="test-key")
    )


LOOKUP = reply(None, ("lookup", {"query": "refunds"}))


@pytest.mark.usefixtures("allow_requests")
@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streaming"])
def test_openai_chat_model_hard_stop_sends_no_request_after_the_tool_result(
    streaming: bool,
) -> None:
    with LoopbackProvider([LOOKUP, "Thanks, bye."]) as provider:
        agent = Agent(
            openai_model(provider),
            tools=[planned("lookup", DONE)],
            capabilities=[StopOnArtifact()],
        )

        async def go() -> tuple[str, Any]:
            if not streaming:
                result = await agent.run("How do refunds work?")
                return result.output, result
            async with agent.run_stream("How do refunds work?") as streamed:
                return await streamed.get_output(), streamed

        output, result = asyncio.run(go())
        assert output == PAGE
        assert len(provider.requests) == 1
        # The next user turn on the same history is a valid request (the loopback 400s otherwise).
        again = agent.run_sync("Thanks!", message_history=result.all_messages())
        assert again.output == "Thanks, bye."
        assert len(provider.requests) == 2
        assert all(SECRET.encode() not in raw for raw in provider.raw_requests)
        assert PAGE in json.dumps(provider.requests[1]["messages"])
    record = stop_record(result)
    assert record is not None
    assert (record["rule"], record["model_calls"]) == ("completed", 1)


@OLD_STREAM
@pytest.mark.usefixtures("allow_requests")
@pytest.mark.parametrize(
    ("mode", "ended"), [("never", ("none", "completed")), ("polish", ("completed", None))]
)
def test_openai_chat_model_streamed_answer_of_the_model_keeps_the_record(
    mode: Any, ended: tuple[str, str | None]
) -> None:
    with LoopbackProvider([LOOKUP, "Refunds take five days."]) as provider:
        agent = Agent(
            openai_model(provider),
            tools=[planned("lookup", DONE)],
            capabilities=[StopOnArtifact(StopPolicy(mode=mode))],
        )

        async def go() -> tuple[str, Any]:
            async with agent.run_stream("How do refunds work?") as streamed:
                return await streamed.get_output(), streamed

        output, streamed = asyncio.run(go())
        assert (output, len(provider.requests)) == ("Refunds take five days.", 2)
    record = stop_record(streamed)
    assert record is not None
    assert stop_record(streamed.all_messages()) == record
    assert (record["rule"], record["would_stop"]) == ended
    assert record["model_calls"] == 2


@pytest.mark.usefixtures("allow_requests")
def test_openai_chat_model_transient_goes_back_with_the_content_only() -> None:
    with LoopbackProvider([LOOKUP, LOOKUP]) as provider:
        agent = Agent(
            openai_model(provider),
            tools=[planned("lookup", RETRY, DONE)],
            capabilities=[StopOnArtifact()],
        )
        result = agent.run_sync("How do refunds work?")
        assert result.output == PAGE
        assert len(provider.requests) == 2
        tool_messages = [m for m in provider.requests[1]["messages"] if m["role"] == "tool"]
        assert [m["content"] for m in tool_messages] == [RETRY[0]]
        assert all(SECRET.encode() not in raw for raw in provider.raw_requests)


# -- the scenario matrix (`toolstop check`) ------------------------------------------------------


def test_the_scenario_matrix_passes_on_pydantic_ai_as_on_the_hand_built_graph() -> None:
    """Every scenario that applies runs clean, and its transcript is the graph router's golden
    but for the node path (a Pydantic AI agent is not a graph): same model calls, same messages
    seen, same final answer, same stop record."""
    from toolstop._check.harness import check, load_golden
    from toolstop._check.pydantic_ai_router import NOT_APPLICABLE, PYDANTIC_AI
    from toolstop._check.scenarios import scenario_matrix

    scenarios = scenario_matrix()
    results = check(scenarios, [PYDANTIC_AI])
    applicable = [s for s in scenarios if s.middleware is None and s.name not in NOT_APPLICABLE]
    assert [r.scenario.key for r in results] == [s.key for s in applicable]
    assert [(r.scenario.key, r.breaches) for r in results if r.breaches] == []
    for result in results:
        graph = load_golden(result.scenario, "graph")
        assert graph is not None
        ours = {k: v for k, v in result.actual.items() if k not in ("router", "path")}
        theirs = {k: v for k, v in graph.items() if k not in ("router", "path")}
        # toolstop sees each model call on a graph, not on Pydantic AI (its own usage counts):
        # what runs after a tool's first success, and the last call's tools, are not recorded
        assert not {"after_first", "asked"} & set(ours["stop_record"])
        theirs["stop_record"] = {
            k: v for k, v in theirs["stop_record"].items() if k not in ("after_first", "asked")
        }
        if result.scenario.name == "tool-exception":  # the frameworks word a raised error apart
            for record in (ours["stop_record"], theirs["stop_record"]):
                for features in record["ended_after"]["judged"].values():
                    features.pop("shape")
        assert ours == theirs
        assert result.actual["path"] == []
