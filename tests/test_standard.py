"""LangChain's own standard tests (`langchain-tests`) on the scripted model and the example tools.

The chat-model integration tests run offline: each test gets a `ScriptedChatModel` scripted with
the answers that test asks for, and the script must be used up when the test ends. Skipped here,
with the reason the suite prints (`-ra`):

- unit `test_init_from_env`: the scripted model reads nothing from the environment;
- unit `test_serdes`: a script and its call log are run-time test state, not configuration, so
  the model is not serializable;
- integration `test_json_mode`: no JSON mode of its own (langchain-core's default
  `with_structured_output` uses tool calling for every method);
- integration `test_pdf_inputs`, `test_audio_inputs`, `test_image_inputs`,
  `test_image_tool_message`, `test_pdf_tool_message`: these download files from the internet
  and only check that a provider accepts the media; a scripted model accepts any input;
- integration `test_stream_time`: a benchmark of recorded HTTP traffic (VCR); there is none.

One configuration differs from the suite's defaults: the unit tests' standard constructor
parameters leave out `timeout`, `max_retries` and `api_key`, which a model without a network
does not take (it rejects unknown options; that rejection is tested below).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_tests", reason="needs langchain-tests (the dev extra)")

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ChatModelIntegrationTests, ToolsIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests, ToolsUnitTests
from pydantic import ValidationError

from toolstop.decision import read_signal
from toolstop.examples import (
    make_pay_tool,
    make_poll_job_tool,
    make_search_tool,
    make_write_record_tool,
)
from toolstop.testing import ScriptedChatModel, ScriptStep, call

OVERRIDE = "scripted-override"
TEXT = "Hello! A scripted answer, streamed a word at a time."
JOKE = {
    "setup": "Why did the cat sit on the computer?",
    "punchline": "To keep an eye on the mouse.",
}


def _texts(n: int) -> list[ScriptStep]:
    return [TEXT] * n


SCRIPTS: dict[str, list[ScriptStep]] = {
    "test_invoke": _texts(1),
    "test_ainvoke": _texts(1),
    "test_stream": _texts(1),
    "test_astream": _texts(1),
    "test_stream_events_v3": _texts(1),
    "test_astream_events_v3": _texts(1),
    "test_invoke_with_model_override": _texts(1),
    "test_ainvoke_with_model_override": _texts(1),
    "test_stream_with_model_override": _texts(1),
    "test_astream_with_model_override": _texts(1),
    "test_batch": _texts(2),
    "test_abatch": _texts(2),
    "test_conversation": _texts(1),
    "test_double_messages_conversation": _texts(1),
    "test_usage_metadata": _texts(1),
    "test_usage_metadata_streaming": _texts(1),
    "test_stop_sequence": _texts(1),
    "test_tool_calling": [call("magic_function", input=3)] * 2,
    "test_tool_calling_async": [call("magic_function", input=3)] * 2,
    "test_bind_runnables_as_tools": [call("greeting_generator", answer_style="pirate")],
    "test_tool_message_histories_string_content": ["1 + 2 = 3"],
    "test_tool_message_histories_list_content": ["1 + 2 = 3"],
    "test_tool_choice": [call("get_weather", location="Paris"), call("magic_function", input=1)],
    "test_tool_calling_with_no_arguments": [call("magic_function_no_args")] * 2,
    "test_tool_message_error_status": ["The tool needs both numbers."],
    "test_structured_few_shot_examples": [call("my_adder_tool", a=3, b=4)],
    "test_structured_output": [call("Joke", **JOKE)] * 2,
    "test_structured_output_async": [call("Joke", **JOKE)] * 2,
    "test_structured_output_pydantic_2_v1": [call("Joke", **JOKE)] * 4,
    "test_structured_output_optional_param": [
        call("Joke", setup="Why did the cat sit on the computer?"),
        call("Joke", **JOKE),
        call("Joke", **JOKE),
        call("JokeDict", **JOKE),
    ],
    "test_anthropic_inputs": ["Purple it is.", "Well, thanks for asking."],
    "test_message_with_name": _texts(1),
    "test_agent_loop": [call("get_weather", location="San Francisco, CA"), "It's sunny."],
    "test_unicode_tool_call_integration": [
        call("unicode_customer", customer_name="你好啊集团", description="A Chinese tech company"),
        call("unicode_customer", customer_name="こんにちは株式会社", description="A Japanese firm"),
    ],
}
"""What each integration test asks the model for, in call order."""

# Structured output names the tool after the schema: the typed dict is `JokeDict`.
STRUCTURED = {"typeddict": "JokeDict"}


class TestScriptedChatModelUnit(ChatModelUnitTests):
    """`ChatModelUnitTests` on `ScriptedChatModel`."""

    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ScriptedChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"script": [], "model": "scripted-unit"}

    @property
    def standard_chat_model_params(self) -> dict[str, Any]:
        params = super().standard_chat_model_params
        for option in ("timeout", "max_retries", "api_key"):  # no network, see the module doc
            params.pop(option)
        return params


class TestScriptedChatModelIntegration(ChatModelIntegrationTests):
    """`ChatModelIntegrationTests` on `ScriptedChatModel`, each test with its own script."""

    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ScriptedChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        # Only for the models a test builds itself (test_stop_sequence's second model).
        return {"script": ["Hi! How are you?"], "model": "scripted-integration"}

    @property
    def model_override_value(self) -> str:
        return OVERRIDE

    @property
    def supports_anthropic_inputs(self) -> bool:
        return True  # Anthropic-format tools and content blocks; no image download without images

    @pytest.fixture
    def model(self, request: pytest.FixtureRequest) -> Iterator[ScriptedChatModel]:
        extra = getattr(request, "param", None) or {}
        name = request.node.originalname
        script = list(SCRIPTS.get(name, []))  # a test without a script must not call
        schema = (
            request.node.callspec.params.get("schema_type")
            if hasattr(request.node, "callspec")
            else None
        )
        if schema in STRUCTURED:
            script = [call(STRUCTURED[schema], **JOKE) for _ in script]
        model = ScriptedChatModel(script, model="scripted-integration", **extra)
        yield model
        model.assert_complete()  # the test made exactly the calls scripted for it


def _tool_suites(
    build: Any, example: dict[str, Any], reason: str, stop: bool
) -> tuple[type[ToolsUnitTests], type[ToolsIntegrationTests]]:
    """`ToolsUnitTests` and `ToolsIntegrationTests` classes for one example tool and outcome."""

    class Example:
        @property
        def tool_constructor(self) -> BaseTool:
            return build()  # type: ignore[no-any-return]

        @property
        def tool_invoke_params_example(self) -> dict[str, Any]:
            return example

    class Unit(Example, ToolsUnitTests):
        pass

    class Integration(Example, ToolsIntegrationTests):
        def test_artifact_is_a_valid_signal(self, tool: BaseTool) -> None:
            """Beyond the standard tests: the artifact is the signal toolstop routes on."""
            tool_call = {"type": "tool_call", "name": tool.name, "args": example, "id": "1"}
            signal = read_signal(tool.invoke(tool_call))
            assert signal.problem is None, signal
            assert signal.reason is not None
            assert (signal.reason.value, signal.stop) == (reason, stop)

    return Unit, Integration


SEARCH = {"query": "refund policy"}
PAY = {"amount_eur": 12.5, "order_id": "o-1"}

TestSearchHit, TestSearchHitIntegration = _tool_suites(
    lambda: make_search_tool(force_outcome="success"), SEARCH, "completed", True
)
TestSearchNothingFound, TestSearchNothingFoundIntegration = _tool_suites(
    lambda: make_search_tool(force_outcome="success"), {"query": "zzz"}, "completed", True
)
TestSearchRetryable, TestSearchRetryableIntegration = _tool_suites(
    lambda: make_search_tool(force_outcome="retryable"), SEARCH, "transient", False
)
TestSearchFatal, TestSearchFatalIntegration = _tool_suites(
    lambda: make_search_tool(force_outcome="fatal"), SEARCH, "fatal", True
)
TestPayReceipt, TestPayReceiptIntegration = _tool_suites(
    lambda: make_pay_tool(force_outcome="receipt"), PAY, "completed", True
)
TestPayTimeout, TestPayTimeoutIntegration = _tool_suites(
    lambda: make_pay_tool(force_outcome="timeout"), PAY, "transient", False
)
TestPayDeclined, TestPayDeclinedIntegration = _tool_suites(
    lambda: make_pay_tool(force_outcome="declined"), PAY, "fatal", True
)
TestWriteRecord, TestWriteRecordIntegration = _tool_suites(
    make_write_record_tool, {"key": "order-1", "value": "paid"}, "completed", True
)
TestPollJobDone, TestPollJobDoneIntegration = _tool_suites(
    lambda: make_poll_job_tool(steps=1), {"job_id": "export-42"}, "completed", True
)


def test_unknown_constructor_options_are_rejected() -> None:
    """The suite's defaults a networked model takes are refused, and so is any typo."""
    for option in ({"timeout": 60}, {"max_retries": 2}, {"api_key": "x"}, {"temprature": 0}):
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            ScriptedChatModel([], **option)
