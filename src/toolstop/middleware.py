"""`StopOnArtifact`: the stop contract as `create_agent` middleware (langchain >= 1.4).

It decides in `wrap_model_call`, just before the model would be called after a tool turn: when
the turn says stop it answers with the relay *instead of* calling the model, and the agent ends
because the "model" answered without tool calls. That adds no graph node. The article's
alternative, a `before_model` hook with `@hook_config(can_jump_to=["end"])`, adds a node to every
loop; it measured slower (see the README), so it is not used.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NotRequired

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
    from langchain.agents.middleware.types import ExtendedModelResponse
except ImportError as error:  # pragma: no cover - exercised in the legacy environment
    msg = (
        "toolstop.StopOnArtifact needs langchain>=1.4 (create_agent middleware). "
        "Install it with: pip install 'toolstop[agents]'"
    )
    raise ImportError(msg) from error

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.types import Command

from toolstop._shell import (
    after_model,
    plain_answer,
    publish_run_end,
    relay_message,
    remaining_from_config,
    turn_start,
)
from toolstop.decision import Decision
from toolstop.graph import reject_return_direct
from toolstop.policy import StopPolicy
from toolstop.record import StopRecord, count_model_call

__all__ = ["StopOnArtifact", "StopOnArtifactState"]

Handler = Callable[[ModelRequest], ModelResponse]
AsyncHandler = Callable[[ModelRequest], Awaitable[ModelResponse]]


class StopOnArtifactState(AgentState[Any]):
    """The agent state plus the run's `stop_record` (kept in checkpoints like any state key)."""

    stop_record: NotRequired[StopRecord]


def _config() -> Any:
    try:
        return get_config()
    except RuntimeError:  # called outside a graph run
        return None


def _remaining_steps() -> int | None:
    return remaining_from_config(_config())


def _first_ai(messages: list[BaseMessage]) -> tuple[int, AIMessage] | None:
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            return index, message
    return None


class StopOnArtifact(AgentMiddleware[StopOnArtifactState, Any]):
    """End a `create_agent` run per call, from the tool results' artifacts.

    Uses the same `decide` as the hand-built graph and keeps the same `stop_record` in state.
    Modes: `hard` answers with the relay (no model call), `polish` makes the one narrating model
    call with no tools offered, `never` only records.

    Composition: hooks that refuse (`wrap_tool_call` middleware rewriting a ToolMessage as
    `policy_block`, `before_model` guards) act before this middleware decides, whatever their
    position in the list, because it reads the tool results from state when the model is next
    due. `wrap_model_call` middleware listed *before* it wraps its short circuit and sees the relay
    as the model's answer; `after_model` hooks (output guards, redaction, call counters) see the
    relay like any model answer (`ModelCallLimitMiddleware` counts it as a call).

    Tool exceptions: `create_agent` re-raises unexpected tool exceptions. To send them back to
    the model as error ToolMessages (which this middleware counts as transient failures against
    the retry budget, like the hand-built graph does), add langchain's own
    `ToolErrorMiddleware(on_error=...)` or `ToolRetryMiddleware(on_failure="continue")`. This
    middleware adds no `wrap_tool_call` of its own: that hook alone costs about 4% per run.

    Deliberately not handled: tools with `return_direct=True` are refused (the error is raised on
    the first model call, as middleware cannot see the agent's tools earlier); structured output
    (`response_format`) on a stop path; the relay is the tool content, not a structured response.

    Example:
        >>> from langchain.agents import create_agent
        >>> agent = create_agent(model, tools, middleware=[StopOnArtifact()])  # doctest: +SKIP
    """

    state_schema = StopOnArtifactState

    def __init__(
        self, policy: StopPolicy | None = None, *, handle_tool_errors: bool = True
    ) -> None:
        """Create the middleware.

        Args:
            policy: The stop policy; `StopPolicy()` by default.
            handle_tool_errors: Turn a tool's exception into an error ToolMessage that goes back
                to the model (and counts against the retry budget), as the hand-built graph does.
                `create_agent` re-raises such exceptions by default; `False` keeps that.
                LangGraph interrupts always propagate.
        """
        super().__init__()
        self.policy = policy if policy is not None else StopPolicy()
        self.handle_tool_errors = handle_tool_errors

    # -- the decision, shared by sync and async ---------------------------------------------
    def _begin(self, request: ModelRequest) -> tuple[Decision | None, StopRecord, int | None]:
        reject_return_direct(
            [t for t in request.tools if isinstance(t, BaseTool)], "StopOnArtifact"
        )
        remaining = _remaining_steps()
        state: Any = request.state
        decision, record = turn_start(
            state["messages"], state.get("stop_record"), self.policy, remaining_steps=remaining
        )
        return decision, record, remaining

    @staticmethod
    def _respond(messages: list[BaseMessage], response: ModelResponse, record: StopRecord) -> Any:
        update: Command[Any] = Command(update={"stop_record": record})
        result = ModelResponse(result=messages, structured_response=response.structured_response)
        return ExtendedModelResponse(model_response=result, command=update)

    def _relay(self, decision: Decision, record: StopRecord) -> Any:
        relay = relay_message(decision.relay, decision.rule)
        publish_run_end(record, _config())
        return self._respond([relay], ModelResponse(result=[relay]), record)

    def _answered(
        self,
        response: ModelResponse,
        record: StopRecord,
        *,
        narrated: bool,
        remaining: int | None,
    ) -> Any:
        messages = list(response.result)
        found = _first_ai(messages)
        if found is None:  # nothing to account for (a middleware answered with no AIMessage)
            return self._respond(messages, response, record)
        index, answer = found
        if narrated:
            answer = plain_answer(answer)
            record = count_model_call(record, answer)
            publish_run_end(record, _config())
        else:
            answer, record = after_model(
                record, answer, self.policy, remaining_steps=remaining, config=_config()
            )
        messages[index] = answer
        return self._respond(messages, response, record)

    # -- hooks ------------------------------------------------------------------------------
    def wrap_model_call(self, request: ModelRequest, handler: Handler) -> Any:
        """Answer with the relay on a stop; otherwise call the model and account for it."""
        decision, record, remaining = self._begin(request)
        if decision is not None and decision.stop and not decision.narrate:
            return self._relay(decision, record)
        narrated = decision is not None and decision.narrate
        if narrated:
            request = request.override(tools=[], tool_choice=None)
        response = handler(request)
        return self._answered(response, record, narrated=narrated, remaining=remaining)

    async def awrap_model_call(self, request: ModelRequest, handler: AsyncHandler) -> Any:
        """Async twin of `wrap_model_call`."""
        decision, record, remaining = self._begin(request)
        if decision is not None and decision.stop and not decision.narrate:
            return self._relay(decision, record)
        narrated = decision is not None and decision.narrate
        if narrated:
            request = request.override(tools=[], tool_choice=None)
        response = await handler(request)
        return self._answered(response, record, narrated=narrated, remaining=remaining)
