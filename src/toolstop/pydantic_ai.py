"""The same contract on Pydantic AI: `StopOnArtifact` as an agent capability.

A tool returns `ToolReturn(return_value=content, metadata=signal(...))`: Pydantic AI sends the
return value to the model and keeps `metadata` for the application, as LangChain keeps a tool's
artifact. Before the next model request, the capability builds the turn (the model's tool calls
and their returns) as messages and asks the same `decide` the LangGraph routers use. On a stop it
raises Pydantic AI's `SkipModelRequest` with the tool's text as the response, so the model is not
called again and the run ends with that text as its output.

    agent = Agent(model, tools=[search], capabilities=[StopOnArtifact(StopPolicy())])

The run's stop record is kept in the run's message history, in the `metadata` of its last
`ModelResponse` (`stop_record(result)` reads it), so it is stored with the history wherever the
application stores it. A streamed run hands out its final response before the run ends; the
capability wraps the model so that response shares its `metadata` dict with the one the run
keeps, and the record reaches both.

Deliberately not handled: the step budget (Pydantic AI's own `UsageLimits` raise instead), and
tool exceptions other than `ModelRetry` (Pydantic AI lets them propagate, so the run fails as it
would without toolstop). Needs the `pydantic-ai` extra.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

try:
    from pydantic_ai import ToolReturn
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ModelRetry, SkipModelRequest, ToolRetryError
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models import Model, StreamedResponse
    from pydantic_ai.models.wrapper import WrapperModel
except ImportError as error:  # pragma: no cover - depends on the environment
    msg = "toolstop.pydantic_ai needs Pydantic AI: pip install 'toolstop[pydantic-ai]'"
    raise ImportError(msg) from error

from langchain_core.messages import AIMessage, ToolMessage

from toolstop._convert_function import converted_function
from toolstop._lifecycle import RunState, ended_after
from toolstop._relay import model_text
from toolstop.convert import Answer, OutcomeRule
from toolstop.decision import Decision, Earlier, Turn, content_text, decide_turn
from toolstop.observe import logger, publish_run_end
from toolstop.policy import StopPolicy, resolve_policy
from toolstop.record import Savings, StopRecord, fold_turn, new_record, stopped

__all__ = [
    "RECORD_KEY",
    "RELAY_KEY",
    "StopOnArtifact",
    "convert",
    "current_turn",
    "stop_record",
]

RECORD_KEY = "toolstop_record"
"""The key of the stop record in the `metadata` of a run's last `ModelResponse`."""

RELAY_KEY = "toolstop"
"""The key that marks a relay (`{"relay": True, "rule": ...}`) in a `ModelResponse`'s metadata."""

_FAILED = frozenset({"failed", "retried", "interrupted"})
"""`ToolReturnPart.outcome` values that are a tool failure (counted against the retry budget)."""

_REJECTED = {"lc_source": "hitl_interrupt_decision", "lc_data": {"decision": "reject"}}
"""How `decide` knows a call a reviewer turned down (Pydantic AI's `outcome="denied"`)."""


@dataclass
class _Run:
    """One run's bookkeeping (the capability's per-run copy holds it)."""

    record: StopRecord
    start: int = 0
    """How many messages the run was invoked with: turns among them are not this run's."""
    decided: set[int] = field(default_factory=set)
    """Positions of the tool-return requests already decided."""
    relays: int = 0
    """Requests answered by a relay: Pydantic AI counts them as requests, they are no model call."""
    mark: Savings | None = None
    """The run's usage when it first would have stopped (never mode)."""


def _tool_message(part: Any) -> ToolMessage | None:
    """One tool-return (or retry) part as a ToolMessage; `None` for parts that answer no tool."""
    kind = getattr(part, "part_kind", None)
    name = getattr(part, "tool_name", None)
    if kind == "retry-prompt" and name:  # a ModelRetry on releases before `outcome`
        return ToolMessage(
            content="", tool_call_id=part.tool_call_id, name=name, status="error", artifact=None
        )
    if kind != "tool-return":
        return None
    outcome = getattr(part, "outcome", "success")
    text = part.model_response_str() if hasattr(part, "model_response_str") else str(part.content)
    if outcome == "denied":
        return ToolMessage(
            content=text,
            tool_call_id=part.tool_call_id,
            name=name,
            status="error",
            additional_kwargs=dict(_REJECTED),
        )
    return ToolMessage(
        content=text,
        tool_call_id=part.tool_call_id,
        name=name,
        artifact=part.metadata,
        status="error" if outcome in _FAILED else "success",
    )


def _calls(asking: ModelResponse, answered: set[str]) -> list[Any]:
    """The response's function-tool calls that `answered` holds, as LangChain tool calls."""
    return [
        {"name": p.tool_name, "args": p.args_as_dict(), "id": p.tool_call_id, "type": "tool_call"}
        for p in asking.parts
        if isinstance(p, ToolCallPart) and p.tool_call_id in answered
    ]


def _pair(messages: Sequence[Any], at: int) -> tuple[AIMessage, tuple[ToolMessage, ...]] | None:
    """The tool turn whose returns are the request `messages[at]`, as LangChain messages.

    `None` when `messages[at]` holds no tool returns or the message before it is not the
    response that asked for them.
    """
    request = messages[at]
    asking = messages[at - 1] if at >= 1 else None
    if not isinstance(request, ModelRequest) or not isinstance(asking, ModelResponse):
        return None
    answers = tuple(m for m in map(_tool_message, request.parts) if m is not None)
    if not answers:
        return None
    calls = _calls(asking, {m.tool_call_id for m in answers})
    return AIMessage(content="", tool_calls=calls), answers


def _answers_in_text(response: ModelResponse) -> bool:
    """True when the model wrote text in `response` (which answers the results before it)."""
    return any(isinstance(p, TextPart) and p.content.strip() for p in response.parts)


def current_turn(messages: Sequence[Any], start: int = 0) -> tuple[Turn | None, int]:
    """The tool turn at the end of a Pydantic AI history, as LangChain messages.

    Returns the turn (the last `ModelResponse`'s tool calls and the returns in the request after
    it, with the run's earlier tool turns that no model text answered, whose returns are at
    position `start` or later) and the position of that request; `(None, -1)` when the history ends
    otherwise. Calls of output tools are not part of the turn (they end the run by themselves).
    """
    at = len(messages) - 1
    pair = _pair(messages, at) if at >= start else None
    if pair is None:
        return None, -1
    asking, results = pair
    earlier: list[Earlier] = []
    if not _answers_in_text(messages[at - 1]):
        back = at - 2
        while back >= start:
            response = messages[back - 1]
            found = _pair(messages, back)
            if found is None or _answers_in_text(response):
                break
            earlier.append(Earlier(asking=found[0], results=found[1]))
            back -= 2
    earlier.reverse()
    return Turn(asking=asking, results=results, earlier=tuple(earlier)), at


def _usage(ctx: Any, relays: int) -> Savings:
    """Pydantic AI's usage of the run so far, less the relays it counted as requests."""
    usage = getattr(ctx, "usage", None)
    if usage is None:
        return Savings(model_calls=0, input_tokens=0, output_tokens=0)
    return Savings(
        model_calls=max(int(usage.requests) - relays, 0),
        input_tokens=int(usage.input_tokens or 0),
        output_tokens=int(usage.output_tokens or 0),
    )


def _previous_run(messages: Sequence[Any]) -> int:
    """The number of the last run recorded in a history (0 when none is)."""
    for message in reversed(messages):
        data = getattr(message, "metadata", None) if isinstance(message, ModelResponse) else None
        record = data.get(RECORD_KEY) if isinstance(data, dict) else None
        if isinstance(record, dict) and isinstance(record.get("run"), int):
            return int(record["run"])
    return 0


def _structured(decision: Decision, turn: Turn) -> Any:
    """The deciding call's artifact `structured_response`, when exactly one call decided."""
    if len(decision.deciding) != 1:
        return None
    call_id = decision.deciding[0].tool_call_id
    artifact = next((m.artifact for m in turn.results if m.tool_call_id == call_id), None)
    return dict.get(artifact, "structured_response") if isinstance(artifact, dict) else None


def _plain(data: Any) -> Any:
    """A pydantic model or a dataclass instance as a dict; anything else as it is."""
    if hasattr(data, "model_dump"):
        return data.model_dump(mode="json")
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return dataclasses.asdict(data)
    return data


def _relay(decision: Decision, turn: Turn, parameters: Any) -> ModelResponse | None:
    """The response that ends the run in place of the model, or `None` when it must narrate.

    Text output: the tool's text. A structured output type: the deciding tool's
    `structured_response` (its artifact), as a call of the output tool or as JSON text; without
    one, `None` (the model writes the output, with no function tools offered).
    """
    marker: dict[str, dict[str, Any]] = {RELAY_KEY: {"relay": True, "rule": decision.rule.value}}
    output_tools = list(getattr(parameters, "output_tools", None) or ())
    structured_output = bool(output_tools) or getattr(parameters, "output_object", None) is not None
    if not structured_output:
        text = content_text(decision.relay or "")
        if decision.for_model is not None:  # later model calls see the content, not `answer`
            marker[RELAY_KEY]["for_model"] = content_text(decision.for_model)
        return ModelResponse(parts=[TextPart(content=text)], metadata=marker)
    if decision.rule.value in ("retry_budget", "policy_block"):
        return None  # a user-safe text is not the output type: the model writes it
    data = _structured(decision, turn)
    if data is None:
        return None
    data = _plain(data)
    if output_tools:
        part: Any = ToolCallPart(tool_name=output_tools[0].name, args=data)
    else:
        part = TextPart(content=json.dumps(data))
    return ModelResponse(parts=[part], metadata=marker)


def _withhold(request_context: Any, decision: Decision, text: str) -> None:
    """Send the model the policy's text in place of blocked results (this request only)."""
    blocked = {s.tool_call_id for s in decision.deciding}
    messages = request_context.messages
    last = messages[-1] if messages else None
    if not isinstance(last, ModelRequest):  # pragma: no cover - a turn ends on its returns
        return
    parts: list[Any] = list(last.parts)
    for index, part in enumerate(parts):
        if _blocked(part, blocked):
            parts[index] = dataclasses.replace(part, content=text)
    request_context.messages = [*messages[:-1], dataclasses.replace(last, parts=parts)]


def _to_model(request_context: Any) -> None:
    """Send each earlier relay that showed an `answer` as the tools' content (this request only;
    the history keeps the relay as the user saw it)."""
    messages = list(request_context.messages)
    changed = False
    for index, message in enumerate(messages):
        if not isinstance(message, ModelResponse):
            continue
        text = model_text(message.metadata)  # the mark is under RELAY_KEY ("toolstop")
        if isinstance(text, str):
            messages[index] = dataclasses.replace(message, parts=[TextPart(content=text)])
            changed = True
    if changed:
        request_context.messages = messages


def _blocked(part: Any, blocked: set[str]) -> bool:
    return getattr(part, "part_kind", None) == "tool-return" and part.tool_call_id in blocked


class _SharedMetadata(WrapperModel):
    """The model, with each streamed response given a `metadata` dict from its start.

    A streamed run hands its caller a copy of the final `ModelResponse` before the run ends, and
    keeps another in the run's history: both take the stream's `metadata` as it is, so a dict there
    is shared, and the record `after_run` puts in it is in the copy the caller holds too.
    """

    @asynccontextmanager
    async def request_stream(
        self,
        messages: Any,
        model_settings: Any,
        model_request_parameters: Any,
        run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:
        async with self.wrapped.request_stream(
            messages, model_settings, model_request_parameters, run_context
        ) as stream:
            if stream.metadata is None:
                stream.metadata = {}
            yield stream


@dataclass
class StopOnArtifact(AbstractCapability[Any]):
    """End a Pydantic AI run per call, from the tools' `ToolReturn.metadata`.

    Uses the same `decide` and `StopPolicy` as the LangGraph routers: completed and fatal stop
    with the tool's text as the run's output (no further model call); transient, invalid
    metadata and plain returns go back to the model; parallel calls follow `policy.parallel`;
    the retry budget ends the run with its user-safe text. A tool's `ModelRetry` is a tool
    error (`outcomes.invalid`, problem `tool_error`, as a tool exception on the LangGraph
    routers) and spends the retry budget; Pydantic AI's own retry limit for the tool must be
    above `max_transient_retries` for the budget to end the run (a warning says so once per
    tool otherwise). A call denied by a reviewer goes back to the model without spending the
    budget. `mode="polish"` makes one narrating model call with no function tools offered;
    `mode="never"` only records.

    Structured output (an `output_type` other than `str`): a stop ends the run with the
    deciding tool's `structured_response` (put it in the metadata: `signal(...,
    structured_response={...})`) as the output; Pydantic AI validates it as it validates the
    model's, and asks the model to correct it if it does not fit. Without one (several deciding
    calls, a budget or a policy block), the stop is narrated: one model call, no function tools;
    for a policy block the model gets the policy's text in place of the blocked results.

    The record of each run is in the `metadata` of the run's last `ModelResponse`, under
    `RECORD_KEY`; `stop_record(result)` returns it. It is also published as a log line on logger
    `toolstop`, an OpenTelemetry span event and metrics, as the other routers do.
    """

    policy: StopPolicy | None = None
    _run: _Run | None = field(default=None, init=False, repr=False, compare=False)
    _warned: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    """Tools warned of (shared by the per-run copies): their retry limit is below the budget."""

    def __post_init__(self) -> None:
        self.policy = resolve_policy(self.policy, "StopOnArtifact", per_run=False)

    @property
    def _policy(self) -> StopPolicy:
        assert self.policy is not None  # resolved in __post_init__
        return self.policy

    async def for_run(self, ctx: Any) -> StopOnArtifact:
        """A fresh copy per run: each run's record is its own."""
        copy = StopOnArtifact(self._policy)
        copy._run = _Run(record=new_record(self._policy))
        copy._warned = self._warned
        return copy

    def _state(self, ctx: Any) -> _Run:
        if self._run is None:  # used without for_run (a hand-made context)
            self._run = _Run(record=new_record(self._policy))
        return self._run

    def get_wrapper_model(self, model: Model) -> Model | None:
        """Wrap the model so that a streamed run's final response can carry the record."""
        return _SharedMetadata(model)

    async def before_run(self, ctx: Any) -> None:
        """Number the run and remember which messages it was invoked with."""
        run = self._state(ctx)
        messages = list(getattr(ctx, "messages", None) or ())
        run.start = len(messages)
        run.record = new_record(self._policy, run=_previous_run(messages) + 1)

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        """Decide the pending tool turn; answer with the relay instead of the model on a stop."""
        run = self._state(ctx)
        messages = getattr(ctx, "messages", None) or request_context.messages
        _to_model(request_context)
        turn, position = current_turn(messages, run.start)
        if turn is None or position in run.decided:
            return request_context
        run.decided.add(position)
        decision = decide_turn(turn, self._policy, transient_count=run.record["transient_retries"])
        would_stop = run.record["would_stop"]
        run.record = fold_turn(run.record, decision)
        if would_stop is None and run.record["would_stop"] is not None:
            run.mark = _usage(ctx, run.relays)
        if not decision.stop:
            return request_context
        run.record = stopped(run.record, decision)
        parameters = request_context.model_request_parameters
        response = None if decision.narrate else _relay(decision, turn, parameters)
        if response is None:  # narrate: one model call, no function tools
            request_context.model_request_parameters = dataclasses.replace(
                parameters, function_tools=[]
            )
            if decision.rule.value == "policy_block":
                _withhold(request_context, decision, self._policy.policy_block_message)
            return request_context
        run.relays += 1
        raise SkipModelRequest(response)

    async def wrap_tool_execute(
        self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        """Run the tool; warn once when its `ModelRetry` would fail the run before the budget."""
        try:
            return await handler(args)
        except (ModelRetry, ToolRetryError):
            self._warn_retries(ctx, call.tool_name)
            raise

    def _warn_retries(self, ctx: Any, name: str) -> None:
        budget = self._policy.max_transient_retries
        allowed = getattr(ctx, "max_retries", None)
        if budget is None or not isinstance(allowed, int) or allowed > budget:
            return
        if name in self._warned:
            return
        self._warned.add(name)
        logger.warning(
            "toolstop: tool %r raised ModelRetry; its Pydantic AI retry limit (%d) is not above "
            "max_transient_retries=%d, so a tool that keeps failing makes Pydantic AI fail the run "
            "(UnexpectedModelBehavior) before the retry budget can end it. Give the tool "
            "retries=%d or more (Agent(retries=...) or the tool's own retries).",
            name,
            allowed,
            budget,
            budget + 1,
        )

    async def after_run(self, ctx: Any, *, result: Any) -> Any:
        """Finish the record with Pydantic AI's usage, keep it in the history, publish it."""
        run = self._state(ctx)
        now = _usage(ctx, run.relays)
        # model calls are Pydantic AI's own count, not toolstop's per call: no `after_first`
        record = StopRecord(**{**_without_after_first(run.record), **now})  # type: ignore[typeddict-item]
        if run.mark is not None:
            record["would_save"] = Savings(
                model_calls=now["model_calls"] - run.mark["model_calls"],
                input_tokens=now["input_tokens"] - run.mark["input_tokens"],
                output_tokens=now["output_tokens"] - run.mark["output_tokens"],
            )
        messages = result.all_messages()
        last = _last_response(messages)
        record = _ended_after(record, messages, run.start, last)
        run.record = record
        if last is not None:
            _unshare(messages[run.start :], last)
            if last.metadata is None:
                last.metadata = {}
            last.metadata[RECORD_KEY] = dict(record)  # in place: a streamed copy shares the dict
        else:  # pragma: no cover - a run always ends on a response
            logger.debug("toolstop: a Pydantic AI run without a response; record not kept")
        publish_run_end(record, _config(ctx))
        return result


def _ended_after(
    record: StopRecord, messages: Sequence[Any], start: int, last: ModelResponse | None
) -> StopRecord:
    """`record` with `ended_after` when the model's own text answered right after a tool turn.

    The same measure as on the LangGraph routers (`toolstop._lifecycle.ended_after`): the final
    response's tokens and, per tool of the turn before it, how much of the answer repeats it.
    Not recorded for a relay, a structured output or an answer without a tool turn before it.
    """
    if last is None or (last.metadata or {}).get(RELAY_KEY) or last.tool_calls or not last.text:
        return record
    at = len(messages) - 1
    if messages[at] is not last:
        return record
    turn, _ = current_turn(messages[:at], start)
    usage = last.usage
    answer = AIMessage(
        content=last.text,
        id="toolstop-final",
        usage_metadata={
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
    )
    run: RunState = {
        "open": True,
        "record": record,
        "turn": None,
        "remaining": None,
        "answer": "toolstop-final",
    }
    return ended_after(run, turn, answer)["record"]


def _config(ctx: Any) -> dict[str, Any]:
    """What the published run end names: the agent (metrics) and the conversation (log line)."""
    name = getattr(getattr(ctx, "agent", None), "name", None)
    conversation = getattr(ctx, "conversation_id", None)
    return {
        "metadata": {"lc_agent_name": name} if isinstance(name, str) else {},
        "configurable": {"thread_id": conversation} if isinstance(conversation, str) else {},
    }


def _unshare(messages: Sequence[Any], last: ModelResponse) -> None:
    """Put back `None` for the empty `metadata` dicts the run's streamed responses were given."""
    for message in messages:
        if isinstance(message, ModelResponse) and message is not last and message.metadata == {}:
            message.metadata = None


def _last_response(messages: Sequence[Any]) -> ModelResponse | None:
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            return message
    return None


def stop_record(result: Any) -> StopRecord | None:
    """The stop record of a finished run: `result` is a run result or its message history.

    Reads the last record kept in the history (`result.all_messages()` for a run result or a
    streamed run), so a stored history keeps its runs' records. `None` when there is none (a run
    without `StopOnArtifact`, or one that raised).
    """
    messages = result.all_messages() if hasattr(result, "all_messages") else result
    for message in reversed(list(messages)):
        data = getattr(message, "metadata", None) if isinstance(message, ModelResponse) else None
        record = data.get(RECORD_KEY) if isinstance(data, dict) else None
        if isinstance(record, dict):
            return cast(StopRecord, dict(record))
    return None


def _without_after_first(record: StopRecord) -> StopRecord:
    """`record` without `after_first` and `asked`, which need toolstop's own view of each model
    call (absent: unknown)."""
    kept = record.copy()
    kept.pop("after_first", None)
    kept.pop("asked", None)
    return kept


def convert(
    function: Callable[..., Any],
    *,
    answer: Answer | None = None,
    outcome: OutcomeRule | None = None,
) -> Callable[..., Any]:
    """A plain tool function (sync or async, `RunContext` first or not), signalling per call.

    The same signature, returning `ToolReturn(return_value=content, metadata=signal(...))`: a
    result signals `completed`, an exception or a result that reads as an error `transient`
    (`ModelRetry` still raises: Pydantic AI's own retry), `outcome=` decides instead when
    given, `answer=` is what the user sees on a stop (see `toolstop.convert`; its `context` is
    empty here). Register it as you registered the function: `Agent(tools=[convert(f)])`.
    """
    return converted_function(
        function,
        name=getattr(function, "__name__", "tool"),
        answer=answer,
        outcome=outcome,
        returning=lambda content, artifact: ToolReturn(return_value=content, metadata=artifact),
        passes=(ModelRetry,),
    )
