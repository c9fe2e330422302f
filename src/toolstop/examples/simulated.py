"""A keyless stand-in for a real model, for the exported example agents (`toolstop.server`).

It behaves like a small real agent with the example tools: it searches for what the user asked,
saves a record when asked to (`save KEY: VALUE`), retries a call whose result says to try again,
and answers from the tool results when no call needs another try. Like a real model it reads
only the tool *content*, never the artifact. Deliberately simple: one tool call per turn, chosen
by keyword; it is a stand-in that makes the server's runs realistic, not a language model.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import tool_call
from langchain_core.outputs import ChatGeneration, ChatResult

from toolstop.testing.scripted import approximate_usage

__all__ = ["SAVE_REQUEST", "LatencyChatModel", "SimulatedAgentModel"]

SAVE_REQUEST = re.compile(
    r"^\s*(?:save|remember|record)\s+(?P<key>[\w.@/-]+)\s*[:=]\s*(?P<value>\S.*?)\s*$",
    re.IGNORECASE | re.DOTALL,
)
"""A request to save a record: `save KEY: VALUE` (or `remember` / `record`, `=` for `:`)."""

_TRY_AGAIN = re.compile(r"\btry again\b|\bsafe to retry\b", re.IGNORECASE)
_NOTHING_TO_DO = "Ask me about refunds, shipping, passwords or LangGraph, or say `save KEY: VALUE`."


class LatencyChatModel(BaseChatModel):
    """The simulated models of the example agents and the bench.

    `_answer(messages, offered)` answers after `latency_s` of waiting (a sleep, or an
    `asyncio.sleep` on the async path), with the tools offered as a call parameter."""

    latency_s: float = 0.0

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """Offer `tools`: they travel as the `tools` call parameter, as with real providers."""
        specs = [{"type": "function", "function": {"name": getattr(t, "name", "")}} for t in tools]
        return self.bind(tools=specs)

    def _answer(self, messages: list[BaseMessage], offered: bool) -> AIMessage:
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            time.sleep(self.latency_s)
        answer = self._answer(messages, bool(kwargs.get("tools")))
        return ChatResult(generations=[ChatGeneration(message=answer)])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        answer = self._answer(messages, bool(kwargs.get("tools")))
        return ChatResult(generations=[ChatGeneration(message=answer)])


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = [c.get("text", "") if isinstance(c, dict) else str(c) for c in content]
    return " ".join(p for p in parts if p)


def _paraphrase(results: Sequence[ToolMessage]) -> str:
    """What a model says after reading the results: a search page's summary, else the text."""
    said = []
    for result in results:
        text = _text(result)
        try:
            page = json.loads(text)
        except ValueError:
            page = None
        if isinstance(page, dict) and isinstance(page.get("summary"), str):
            said.append(page["summary"])
        else:
            said.append(text)
    return "From the tools: " + " ".join(said)


class SimulatedAgentModel(LatencyChatModel):
    """A chat model that needs no key and acts like a small agent (see the module docstring).

    Tool-call ids are unique within a thread (`search-1`, `search-2` on the next turn, ...):
    providers reject a history in which two calls share an id. It costs `latency_s` per call and
    reports tokens from langchain-core's approximate counter, like the bench's simulated model.
    """

    tool_names: tuple[str, ...] = ()

    @property
    def _llm_type(self) -> str:
        return "toolstop-simulated-agent"

    def _answer(self, messages: list[BaseMessage], offered: bool) -> AIMessage:
        response = self._respond(messages, offered)
        response.usage_metadata = approximate_usage(messages, response)
        return response

    def _respond(self, messages: list[BaseMessage], offered: bool) -> AIMessage:
        results: list[ToolMessage] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            results.insert(0, message)
        if results:
            retry = [r for r in results if r.status == "error" or _TRY_AGAIN.search(_text(r))]
            if retry and offered:
                return self._calls(messages, [self._call_of(messages, r) for r in retry])
            return AIMessage(content=_paraphrase(results))
        last = messages[-1] if messages else None
        if not offered or not isinstance(last, HumanMessage):
            return AIMessage(content=_NOTHING_TO_DO)
        request = _text(last).strip()
        save = SAVE_REQUEST.match(request)
        if save and "write_record" in self.tool_names:
            args = {"key": save["key"], "value": save["value"]}
            return self._calls(messages, [("write_record", args)])
        if request and "search" in self.tool_names:
            return self._calls(messages, [("search", {"query": request})])
        return AIMessage(content=_NOTHING_TO_DO)

    @staticmethod
    def _call_of(messages: list[BaseMessage], result: ToolMessage) -> tuple[str, dict[str, Any]]:
        """The call `result` answers, to make it again."""
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                for call in message.tool_calls:
                    if call["id"] == result.tool_call_id:
                        return call["name"], dict(call["args"])
        return result.name or "search", {}

    @staticmethod
    def _calls(
        messages: list[BaseMessage], calls: Sequence[tuple[str, dict[str, Any]]]
    ) -> AIMessage:
        made = sum(len(m.tool_calls) for m in messages if isinstance(m, AIMessage))
        tool_calls = [
            tool_call(name=name, args=args, id=f"{name}-{made + position + 1}")
            for position, (name, args) in enumerate(calls)
        ]
        return AIMessage(content="", tool_calls=tool_calls)
