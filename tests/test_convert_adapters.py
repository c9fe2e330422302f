"""`convert` on the adapters: OpenAI Agents and Pydantic AI, from a plain function."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolstop import ToolstopConfigError

BOOKING = {"reservation_id": "R1", "flight": "HAT001"}


def book(flight: str) -> dict[str, Any]:
    """Book a flight."""
    if flight == "raise":
        msg = "gateway down, password=hunter2"
        raise RuntimeError(msg)
    if flight == "error":
        return {"error": "seat taken"}
    return BOOKING


async def abook(flight: str) -> dict[str, Any]:
    """Book a flight."""
    await asyncio.sleep(0)
    return book(flight)


# -- OpenAI Agents ------------------------------------------------------------------------------


def sdk_run(tool: Any, flight: str, *, answers: int) -> tuple[Any, Any, Any]:
    pytest.importorskip("agents", reason="needs the `openai-agents` extra")
    from agents import Agent, Runner, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    from toolstop.openai_agents import stop_on_artifact

    set_tracing_disabled(True)
    steps: list[Any] = [[function_call("book", {"flight": flight}, call_id="c1")]]
    steps += [[assistant_message("It did not work.")]] * answers
    model = ScriptedModel(steps)
    behaviour = stop_on_artifact()
    agent = Agent(name="desk", tools=[tool], model=model, tool_use_behavior=behaviour)
    result = asyncio.run(Runner.run(agent, "Book HAT001"))
    return result, model, behaviour.record(result.context_wrapper)


@pytest.mark.parametrize("function", [book, abook], ids=["sync", "async"])
def test_openai_agents_a_result_stops_with_the_answer(function: Any) -> None:
    pytest.importorskip("agents", reason="needs the `openai-agents` extra")
    from toolstop.openai_agents import convert

    tool = convert(function, answer="Booked {reservation_id} on {flight}.", name_override="book")
    result, _, record = sdk_run(tool, "HAT001", answers=0)
    assert result.final_output == "Booked R1 on HAT001."
    assert record["rule"] == "completed"
    assert record["model_calls"] == 1


def test_openai_agents_a_template_that_fails_is_recorded() -> None:
    pytest.importorskip("agents", reason="needs the `openai-agents` extra")
    from toolstop.openai_agents import convert

    tool = convert(book, answer="Booked {seat}.", name_override="book")
    result, _, record = sdk_run(tool, "HAT001", answers=0)
    assert record["rule"] == "completed"
    assert "R1" in result.final_output  # the content, relayed
    assert record["answer_failed"] == [{"tool": "book", "why": "KeyError"}]


@pytest.mark.parametrize("flight", ["raise", "error"])
def test_openai_agents_a_failure_goes_back_to_the_model(flight: str) -> None:
    pytest.importorskip("agents", reason="needs the `openai-agents` extra")
    from toolstop.openai_agents import convert

    result, _, record = sdk_run(convert(book), flight, answers=1)
    assert result.final_output == "It did not work."
    assert record["rule"] == "none"
    assert record["outcomes"]["transient"] == 1
    assert record["model_calls"] == 2


# -- Pydantic AI ----------------------------------------------------------------------------------


def pai_run(tool: Any, flight: str, *, answers: int) -> tuple[Any, list[Any], dict[str, Any]]:
    pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from toolstop import StopPolicy
    from toolstop.pydantic_ai import StopOnArtifact, stop_record

    steps = [ModelResponse(parts=[ToolCallPart("book", {"flight": flight}, tool_call_id="c1")])]
    steps += [ModelResponse(parts=[TextPart("It did not work.")])] * answers
    seen: list[Any] = []

    def respond(messages: list[Any], info: Any) -> Any:
        seen.append(messages)
        assert steps, "unexpected model call"
        return steps.pop(0)

    agent = Agent(FunctionModel(respond), tools=[tool], capabilities=[StopOnArtifact(StopPolicy())])
    result = asyncio.run(agent.run("Book HAT001"))
    assert not steps
    record = stop_record(result)
    assert record is not None
    return result, seen, dict(record)


@pytest.mark.parametrize("function", [book, abook], ids=["sync", "async"])
def test_pydantic_ai_a_result_stops_with_the_answer(function: Any) -> None:
    pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")
    from toolstop.pydantic_ai import convert

    converted = convert(function, answer="Booked {reservation_id} on {flight}.")
    converted.__name__ = "book"
    result, seen, record = pai_run(converted, "HAT001", answers=0)
    assert result.output == "Booked R1 on HAT001."
    assert (record["rule"], len(seen)) == ("completed", 1)


def test_pydantic_ai_a_template_that_fails_is_recorded() -> None:
    pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")
    from toolstop.pydantic_ai import convert

    converted = convert(book, answer="Booked {seat}.")
    converted.__name__ = "book"
    result, seen, record = pai_run(converted, "HAT001", answers=0)
    assert (record["rule"], len(seen)) == ("completed", 1)
    assert "R1" in str(result.output)  # the content, relayed
    assert record["answer_failed"] == [{"tool": "book", "why": "KeyError"}]


@pytest.mark.parametrize("flight", ["raise", "error"])
def test_pydantic_ai_a_failure_goes_back_to_the_model(flight: str) -> None:
    pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")
    from toolstop.pydantic_ai import convert

    result, seen, record = pai_run(convert(book), flight, answers=1)
    assert result.output == "It did not work."
    assert (record["rule"], len(seen)) == ("none", 2)
    assert record["outcomes"]["transient"] == 1
    returned = seen[1][-1].parts[0].content
    if flight == "raise":  # the model-visible error text, masked
        assert returned == "Error: RuntimeError: gateway down, password=***"


def test_pydantic_ai_model_retry_is_pydantic_ais_own() -> None:
    pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")
    from pydantic_ai import ModelRetry

    from toolstop.pydantic_ai import convert

    def picky(flight: str) -> str:
        """Book."""
        raise ModelRetry("say the flight number")

    with pytest.raises(ModelRetry):
        convert(picky)("x")


def test_the_adapters_check_their_settings() -> None:
    pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")
    from toolstop.pydantic_ai import convert

    with pytest.raises(ToolstopConfigError, match="name each field"):
        convert(book, answer="Booked {}")
