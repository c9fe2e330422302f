"""`StopOnArtifact`: the stop contract as `create_agent` middleware.

It decides in `wrap_model_call`, just before the model would be called after a tool turn: when
the turn says stop it answers with the relay *instead of* calling the model, and the agent ends
because the "model" answered without tool calls. That adds no node to the loop. The alternative,
a `before_model` hook with `@hook_config(can_jump_to=["end"])`, adds a node to every loop and is
slower (`toolstop bench --overhead` measures both), so it is not used.

One `after_agent` hook (a node per run, not per loop) ends each run: it writes and publishes the
run's `stop_record`, and delivers a stop that `ModelCallLimitMiddleware` would otherwise swallow
(the limit ends the run before the model node, where the relay would have been given).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, NotRequired, cast

from toolstop._compat import middleware_import_error

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
    from langchain.agents.middleware.types import ExtendedModelResponse, PrivateStateAttr
except ImportError as error:  # pragma: no cover - exercised in the legacy environments
    raise ImportError(middleware_import_error(error)) from error

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.types import Command

from toolstop import _invocation
from toolstop._lifecycle import (
    RUN_KEY,
    Begun,
    RunState,
    afinish,
    answered,
    away_back_now,
    begin,
    begin_turn,
    close_aborted,
    ended_after,
    finish,
    last_answer,
    open_run,
    pending,
    plain_answer,
    relay_message,
    repair_history,
    run_start,
    turn_event,
)
from toolstop._narrator import answer_of, count_narrator_call, narration
from toolstop._relay import to_model
from toolstop.decision import Decision, Turn, current_turn
from toolstop.errors import ToolstopConfigError
from toolstop.levels import (
    HANDOFF_KEY,
    defer_handoff,
    forward_in_update,
    handoff_record,
    settle_handoff,
    without_record,
)
from toolstop.observe import agent_name as _agent_name
from toolstop.observe import apublish_run_end, logger, publish_run_end
from toolstop.policy import StopPolicy, resolve_policy
from toolstop.record import StopRecord, count_model_call
from toolstop.tools import check_tools

__all__ = ["StopOnArtifact", "StopOnArtifactState"]

Handler = Callable[[ModelRequest], ModelResponse]
AsyncHandler = Callable[[ModelRequest], Awaitable[ModelResponse]]

_SCRATCHPAD = "__pregel_scratchpad"
"""Where LangGraph keeps a task's step and its invocation's step limit (`step`, `stop`): what its
managed `RemainingSteps` value reads, without a state key."""

_LIMIT_KEYS = ("thread_model_call_count", "run_model_call_count")
"""`ModelCallLimitMiddleware`'s counters (it counts every answer of the model node)."""

_LIMIT_TEXT = "Model call limits exceeded"
"""How `ModelCallLimitMiddleware` (exit_behavior="end") begins the message it ends a run with."""

_EDITS_KEY = "hitl_edited_tool_calls"
"""`HumanInTheLoopMiddleware`'s state key: tool call id -> the call a reviewer ran instead."""


def _to_model(request: ModelRequest, begun: Begun) -> ModelRequest:
    """The request with each earlier relay's `answer` replaced by the tools' content.

    The messages are read only when the thread holds such a relay (`begun.relays`), or when the
    request's messages are not the state's (another middleware's `wrap_model_call` gave the
    model messages of its own, which the run has not looked at).
    """
    sent = request.messages
    held = begun.messages
    if not begun.relays and (
        sent is held
        or (len(sent) == len(held) and (not sent or (sent[0] is held[0] and sent[-1] is held[-1])))
    ):
        return request
    messages = list(sent)
    swapped = to_model(messages)
    changed = False
    for a, b in zip(swapped, messages, strict=True):
        if a is not b:
            changed = True
            break
    return request.override(messages=swapped) if changed else request


_NONE_ANSWERED: frozenset[str] = frozenset()
"""No call answered in the model's own response (the usual one-message response)."""


class StopOnArtifactState(AgentState[Any]):
    """The agent state plus the run's `stop_record` (kept in checkpoints like any state key).

    `toolstop_run` (the run in progress) is private: it is neither input nor output of the agent.
    """

    stop_record: NotRequired[StopRecord]
    toolstop_run: NotRequired[Annotated[RunState, PrivateStateAttr]]


def _named(answer: AIMessage, config: Any) -> AIMessage:
    """A narrator's answer, attributed like the agent's own (`create_agent(name=...)`)."""
    name = _agent_name(config)
    if name:
        answer.name = name
    return answer


def _config() -> Any:
    try:
        return get_config()
    except RuntimeError:  # called outside a graph run
        return None


def _steps(config: Any) -> tuple[int | None, int | str | None]:
    """`(remaining steps, invocation)` of the running node, from LangGraph's scratchpad and loop.

    The remaining steps are what `RemainingSteps` gives a node; the invocation is named by
    `toolstop._invocation.current` (which also refuses a second run on a thread that has one in
    progress), or, when LangGraph's loop is out of reach, is the invocation's step limit.
    `(None, None)` outside a graph run.
    """
    try:
        scratchpad = config["configurable"][_SCRATCHPAD]
        step, stop = scratchpad.step, scratchpad.stop
    except Exception:
        return None, None
    if type(step) is not int or type(stop) is not int:
        return None, None
    name = _invocation.current(config)
    return stop - step, stop if name is None else name


def _graph_shape(config: Any) -> tuple[int, int] | None:
    """`(loop, tail)` steps of the running `create_agent` graph, read from its node names.

    loop: from one model call to the next (`before_model` hooks, model, `after_model` hooks,
    tools); tail: from the final model call to the end (`after_model` and `after_agent` hooks).
    Reads LangGraph's private channel map; `None` when that is not possible (the run then
    measures its loop instead).
    """
    global _known_shape
    try:
        read = config["configurable"]["__pregel_read"]
        channels = read.args[1]
        known = _known_shape
        if known is not None and channels.keys() == known[0]:
            return known[1]  # the same graph (or one of the same nodes) as the last one read
        if "branch:to:model" not in channels:
            return None
        before = after = ends = 0
        for name in channels:  # one pass: it runs once per thread (the run keeps the shape)
            if type(name) is not str or not name.startswith("branch:to:"):
                continue
            if name.endswith(".before_model"):
                before += 1
            elif name.endswith(".after_model"):
                after += 1
            elif name.endswith(".after_agent"):
                ends += 1
        shape = before + after + 2, after + ends
        _known_shape = frozenset(channels), shape
    except Exception:
        return None
    return shape


_known_shape: tuple[frozenset[Any], tuple[int, int]] | None = None
"""The channel names of the graph whose shape was read last, and that shape."""


def _steps_needed(run: RunState, remaining: int | None, config: Any) -> tuple[RunState, int]:
    """The steps a further tool turn needs from this model call until the run can end.

    Raises:
        ToolstopConfigError: when the recursion limit leaves too few steps for even a final
            answer (the nodes after the model call could not run: LangGraph would raise
            `GraphRecursionError`).
    """
    if run.get("loop") is None or run.get("tail") is None:
        shape = _graph_shape(config)
        if shape is not None:
            run = {**run, "loop": shape[0], "tail": shape[1]}
    loop, tail = run.get("loop"), run.get("tail")
    if loop is None:  # nothing read or measured yet: twice the steps this invocation took so far
        limit = (config or {}).get("recursion_limit")
        used = limit - 1 - remaining if isinstance(limit, int) and remaining is not None else 0
        loop = 2 * max(used, 0) + 2
    if tail is None:
        tail = loop - 1
    if remaining is not None and remaining <= tail:
        limit = (config or {}).get("recursion_limit")
        msg = (
            f"recursion_limit={limit} is too low for this agent: after a model call {tail} more "
            f"node(s) run ({'after_model and ' if tail > 1 else ''}after_agent hooks), so a run "
            f"needs a recursion_limit of at least {limit + tail + 1 - remaining}"
            if isinstance(limit, int)
            else "the recursion limit is too low for this agent"
        )
        raise ToolstopConfigError(msg)
    return run, loop + tail


def _original_content(message: ToolMessage, executed: Any) -> ToolMessage:
    """The ToolMessage without the note `HumanInTheLoopMiddleware` prepends to an edited call.

    The note is meant for the model ("a human reviewer replaced this tool call ..."); the user
    gets the tool's own text. langchain writes it as `<notice> Executed instead: NAME with
    arguments ARGS.` followed by `\\n\\nTool response:\\n` and the content (or as a first block).
    """
    if not isinstance(executed, Mapping):
        return message
    marker = (
        f" Executed instead: {executed.get('name')} with arguments "
        f"{json.dumps(executed.get('args'), default=str)}."
    )
    content = message.content
    if isinstance(content, str):
        at = content.find(marker)
        if at < 0:
            return message
        rest = content[at + len(marker) :]
        rest = rest.removeprefix("\n\nTool response:").removeprefix("\n")
        return message.model_copy(update={"content": rest})
    first = content[0] if content else None
    text = first if isinstance(first, str) else (first or {}).get("text", "")
    if isinstance(text, str) and marker in text:
        return message.model_copy(update={"content": content[1:]})
    return message


def _as_the_tool_said(turn: Turn | None, state: Mapping[str, Any]) -> Turn | None:
    """The turn with reviewer notes removed from results a human edited (rarely any)."""
    edited = state.get(_EDITS_KEY)
    if turn is None or not edited or not isinstance(edited, Mapping):
        return turn
    return turn.with_results(lambda m: _original_content(m, edited.get(m.tool_call_id)))


def _schema_specs(response_format: Any) -> list[Any]:
    """The schemas of a `create_agent` response format (a strategy or a bare schema)."""
    from langchain.agents.structured_output import AutoStrategy, ProviderStrategy, ToolStrategy

    if isinstance(response_format, ToolStrategy):
        return list(response_format.schema_specs)
    if isinstance(response_format, ProviderStrategy):
        return [response_format.schema_spec]
    # Not `getattr(..., "schema")`: a bare pydantic model has a `schema` classmethod.
    schema = (
        response_format.schema if isinstance(response_format, AutoStrategy) else response_format
    )
    return list(ToolStrategy(schema).schema_specs)


def _structured_response(request: ModelRequest, decision: Decision, turn: Turn | None) -> Any:
    """The agent's structured response on a hard stop, from the deciding tool's artifact.

    A tool may put the structured answer next to its text: `signal(..., structured_response=
    {...})`. It is used when exactly one call decided the stop and the value validates against
    the agent's `response_format`; otherwise the structured response stays `None`.
    """
    if request.response_format is None or turn is None or len(decision.deciding) != 1:
        return None
    deciding = decision.deciding[0]
    artifact = next(
        (m.artifact for m in turn.results if m.tool_call_id == deciding.tool_call_id), None
    )
    data = dict.get(artifact, "structured_response") if isinstance(artifact, dict) else None
    if data is None:
        return None
    from langchain.agents.structured_output import OutputToolBinding

    try:
        specs = _schema_specs(request.response_format)
    except Exception:  # a response format this langchain does not build specs for
        specs = []
    for spec in specs:
        if isinstance(spec.schema, type) and isinstance(data, spec.schema):
            return data  # already an instance of the schema
        try:
            return OutputToolBinding.from_schema_spec(spec).parse(_plain(data))
        except Exception:  # does not fit this schema; try the next
            continue
    logger.warning(
        "toolstop: the structured_response in the artifact of tool %r does not fit the agent's "
        "response_format; structured_response is None",
        deciding.tool,
    )
    return None


def _plain(data: Any) -> Any:
    """A pydantic model or a dataclass instance as a dict; anything else as it is."""
    import dataclasses

    if hasattr(data, "model_dump"):
        return data.model_dump()
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return dataclasses.asdict(data)
    return data


def _has_limit(state: Mapping[str, Any]) -> bool:
    """True when `ModelCallLimitMiddleware` counts this agent's model calls."""
    return _LIMIT_KEYS[0] in state or _LIMIT_KEYS[1] in state


def _limit_swallowed(message: BaseMessage, state: Mapping[str, Any]) -> bool:
    """True when `ModelCallLimitMiddleware` ended the run in place of the model node."""
    return (
        _has_limit(state)
        and isinstance(message, AIMessage)
        and not message.tool_calls
        and isinstance(message.content, str)
        and message.content.startswith(_LIMIT_TEXT)
    )


OTHER_MIDDLEWARE = "another middleware"
"""`ended_by` when the middleware that ended a run cannot be named."""


def _ended_by(
    messages: Sequence[BaseMessage],
    state: Mapping[str, Any],
    record: Any,
    answer: str | None = None,
) -> dict[str, str]:
    """`ended_by` (and the limit's message) when another middleware ended the run: not a stop of
    toolstop's, and not the model's own answer (`answer`: the id of the run's last model
    answer, when known). Empty when the model answered or toolstop stopped."""
    if record.get("stopped") or not messages:
        return {}
    last = messages[-1]
    if answer is not None and last.id == answer and isinstance(last, AIMessage):
        return {} if not last.tool_calls else {"ended_by": OTHER_MIDDLEWARE}
    if _limit_swallowed(last, state):
        return {"ended_by": "ModelCallLimitMiddleware", "ended_by_message": str(last.content)}
    if isinstance(last, ToolMessage) or (isinstance(last, AIMessage) and last.tool_calls):
        return {"ended_by": OTHER_MIDDLEWARE}  # tool calls or results the model never saw
    if isinstance(last, AIMessage):
        start = len(messages) - 1
        while start >= 0 and messages[start].type != "human":
            start -= 1
        answers = 0
        for m in messages[start + 1 :]:
            if isinstance(m, AIMessage) and not (m.response_metadata or {}).get("toolstop", {}).get(
                "relay"
            ):
                answers += 1
        if answers > record.get("model_calls", 0):  # an answer no model call gave
            return {"ended_by": OTHER_MIDDLEWARE}
        return {}
    if last.type == "human" and not record.get("model_calls"):
        return {"ended_by": OTHER_MIDDLEWARE}  # refused before any model call
    return {}


class StopOnArtifact(AgentMiddleware[StopOnArtifactState, Any]):
    """End a `create_agent` run per call, from the tool results' artifacts.

    Uses the same `decide` as the hand-built graph and keeps the same `stop_record` in state.
    Modes: `hard` answers with the relay (no model call), `polish` makes the one narrating model
    call with no tools offered, `never` only records.

    Composition (tested with langchain's own middleware; the docs' composition page has the table):
    - Hooks that refuse (`wrap_tool_call` middleware rewriting a ToolMessage as `policy_block`,
      `before_model` guards) act before this middleware decides, whatever their position in the
      list, because it reads the tool results from state when the model is next due.
    - `wrap_model_call` middleware listed *before* it wraps its short circuit and sees the relay as
      the model's answer; `after_model` hooks (output guards, redaction) see the relay too.
    - A relay is not a model call: `ModelCallLimitMiddleware` does not count it, and a limit
      reached right after a tool turn that stops does not swallow the stop (the `after_agent`
      hook delivers it). With `exit_behavior="error"` the limit raises before any hook of this
      middleware can run: use `"end"` next to toolstop.
    - `HumanInTheLoopMiddleware`: a rejected call goes back to the model without spending the
      retry budget (recorded as `rejected`); the note langchain adds to an edited call's result
      is for the model, the relay is the tool's own text.
    - Structured output (`response_format`): in `polish` mode the narrating call is offered only
      the structured-output tool, so it yields `structured_response`. In `hard` mode a stop ends
      the run with the relay; `structured_response` is the deciding tool's artifact
      `structured_response` when it validates against the schema, else `None`.

    Tool exceptions: `create_agent` re-raises unexpected tool exceptions. To send them back to
    the model as error ToolMessages (which this middleware counts as transient failures against
    the retry budget, like the hand-built graph does), add langchain's own
    `ToolErrorMiddleware(on_error=...)` (langchain >= 1.3.14) or
    `ToolRetryMiddleware(max_retries=0, on_failure="continue")`.

    Deliberately not handled: tools with `return_direct=True` are refused (the error is raised on
    the first model call, as middleware cannot see the agent's tools earlier).

    Example:
        ```pycon
        >>> from langchain.agents import create_agent
        >>> agent = create_agent(model, tools, middleware=[StopOnArtifact()])  # doctest: +SKIP

        ```
    """

    state_schema = StopOnArtifactState

    def __init__(self, policy: StopPolicy | None = None) -> None:
        """Create the middleware.

        Args:
            policy: The stop policy; `StopPolicy()` by default.

        Raises:
            TypeError: when `policy` is not a `StopPolicy` (or None).
        """
        super().__init__()
        self.policy = resolve_policy(policy, "StopOnArtifact")
        self._checked_tools: object = None  # the tools list last checked for return_direct

    # -- the decision, shared by sync and async ---------------------------------------------
    def _begin(
        self, request: ModelRequest, sent_back: frozenset[str] | None = None
    ) -> tuple[Begun, int | None, Any, Any]:
        """The run's state at this model call (see `toolstop._lifecycle.begin`), the steps left,
        the node's config, and a hand-off held until this call (`toolstop.levels.defer_handoff`;
        usually `None`). `sent_back`: what an async call read of the way back."""
        if request.tools is not self._checked_tools:  # once per agent, unless a hook swaps tools
            check_tools([t for t in request.tools if isinstance(t, BaseTool)], "StopOnArtifact")
            self._checked_tools = request.tools
        config = _config()
        state: Any = request.state
        remaining, invocation = _steps(config)
        run = state.get(RUN_KEY)
        loop = run.get("loop") if run is not None else None
        tail = run.get("tail") if run is not None else None
        begun = begin(
            run,
            state.get("stop_record"),
            state["messages"],
            self.policy,
            invocation=invocation,
            remaining_steps=remaining,
            # the shape is known once a run of the thread has read or measured it
            loop_steps=loop + tail
            if loop is not None and tail is not None and (remaining is None or remaining > tail)
            else lambda run: _steps_needed(run, remaining, config),
            as_said=(lambda turn: _as_the_tool_said(turn, state)) if _EDITS_KEY in state else None,
            config=config,
            sent_back=sent_back,
        )
        held = run.get(HANDOFF_KEY) if run is not None else None
        return begun, remaining, config, held if held and isinstance(held, Mapping) else None

    @staticmethod
    def _repaired(request: ModelRequest, begun: Begun) -> ModelRequest:
        """The request with the calls an aborted run left open answered (it is rarely needed)."""
        if begun.aborted is None or begun.aborted.messages is None:
            return request
        messages = repair_history(list(request.messages))
        return request if messages is None else request.override(messages=messages)

    @staticmethod
    def _settle(
        held: Mapping[str, Any], begun: Begun, decision: Decision | None
    ) -> tuple[Begun, dict[str, Any] | None, tuple[StopRecord, Exception] | None]:
        """`(begun, relay update, None)`, or `(begun, None, (record, exception))` when `held`, a
        hand-off held until its turn was answered (`toolstop.levels.defer_handoff`), is carried
        out. A stop honoured instead clears it from the run."""
        stops = decision is not None and decision.stop and not decision.narrate
        record, settled = settle_handoff(held, begun.run["record"], stops, begun.messages)
        if isinstance(settled, Exception):
            return begun, None, (record, settled)
        run = cast(dict[str, Any], {**begun.run, "record": record})
        run.pop(HANDOFF_KEY, None)
        return begun._replace(run=cast(RunState, run)), settled, None

    def _relay(
        self,
        request: ModelRequest,
        begun: Begun,
        decision: Decision,
        config: Any,
        extra: dict[str, Any] | None = None,
    ) -> Any:
        turn_event(decision, begun.turn, begun.run)
        relay = relay_message(
            decision.relay, decision.rule, name=_agent_name(config), for_model=decision.for_model
        )
        update: dict[str, Any] = {RUN_KEY: begun.run, **(extra or {})}
        state: Any = request.state
        if _has_limit(state):
            # ModelCallLimitMiddleware counts every answer of the model node in `after_model`;
            # a relay is not a model call, so its count is taken back here.
            for key in _LIMIT_KEYS:
                update[key] = state.get(key, 0) - 1
        structured = _structured_response(request, decision, begun.turn)
        return ExtendedModelResponse(
            model_response=ModelResponse(result=[relay], structured_response=structured),
            command=Command(update=update),
        )

    def _answered(
        self,
        response: ModelResponse,
        begun: Begun,
        *,
        narrated: bool,
        remaining: int | None,
        config: Any,
    ) -> Any:
        messages = response.result
        run = begun.run
        index, answer = 0, None
        for message in messages:  # the model's answer (the first AIMessage of the response)
            if type(message) is AIMessage or isinstance(message, AIMessage):
                answer = message
                break
            index += 1
        if answer is not None:  # else nothing to account for (a middleware answered otherwise)
            given = answer
            # Calls answered in the same response (create_agent's structured-output tool) need
            # no tool turn.
            answered_ids = (
                frozenset(m.tool_call_id for m in messages if isinstance(m, ToolMessage))
                if len(messages) > 1
                else _NONE_ANSWERED
            )
            if narrated:
                answer = plain_answer(answer, answered_ids=answered_ids)
            calls = answer.tool_calls
            if narrated or (
                calls and answered_ids and all(c.get("id") in answered_ids for c in calls)
            ):
                counted = (
                    count_narrator_call(run["record"], answer)
                    if narrated and self.policy.narrator is not None
                    else count_model_call(run["record"], answer)
                )
                run = last_answer({**run, "record": counted}, answer)
                if calls and answer.id is not None:
                    # Only calls answered in this same step are left (the structured-output
                    # call): the run's answer, not a tool turn (`begin_turn` skips its turn).
                    run["turn"] = answer.id
            else:
                answer, run = answered(
                    run,
                    answer,
                    self.policy,
                    remaining_steps=remaining,
                    loop_steps=begun.needed,
                    # the name is only given to a step-budget answer: looked up only for one
                    name=_agent_name(config)
                    if calls and remaining is not None and remaining <= begun.needed
                    else None,
                    messages=begun.messages,
                )
            if answer is not given:
                messages = list(messages)
                messages[index] = answer
                response = ModelResponse(
                    result=messages, structured_response=response.structured_response
                )
        update: dict[str, Any] = {RUN_KEY: run}
        aborted = begun.aborted
        if aborted is not None:
            update["stop_record"] = aborted.record
            if aborted.messages is not None:
                # written after the model's answer: the whole repaired history, then the answer
                update["messages"] = [*aborted.update(), *response.result]
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    @staticmethod
    def _narrating(request: ModelRequest) -> ModelRequest:
        """The one narrating call: no tools (a structured-output tool is still offered)."""
        return request.override(tools=[], tool_choice=None)

    # -- hooks ------------------------------------------------------------------------------
    def wrap_model_call(self, request: ModelRequest, handler: Handler) -> Any:
        """Answer with the relay on a stop; otherwise call the model and account for it."""
        begun, remaining, config, held = self._begin(request)
        decision = begun.decision
        if begun.aborted is not None:
            publish_run_end(begun.aborted.record, config)
        extra = None
        if held is not None:  # a hand-off held back
            begun, extra, ended = self._settle(held, begun, decision)
            if ended is not None:  # it is carried out: this agent's run ends here
                publish_run_end(ended[0], config)
                raise ended[1]
        if decision is not None and decision.stop and not decision.narrate:
            return self._relay(request, begun, decision, config, extra)
        narrated = decision is not None and decision.narrate
        if begun.aborted is not None:
            request = self._repaired(request, begun)
        request = _to_model(request, begun)
        if narrated and self.policy.narrator is not None:
            answer = answer_of(self.policy.narrator.invoke(narration(request.messages), config))
            response = ModelResponse(result=[_named(answer, config)])
        else:
            response = handler(self._narrating(request) if narrated else request)
        if decision is not None:
            turn_event(decision, begun.turn, begun.run)
        return self._answered(
            response, begun, narrated=narrated, remaining=remaining, config=config
        )

    async def awrap_model_call(self, request: ModelRequest, handler: AsyncHandler) -> Any:
        """Async twin of `wrap_model_call`."""
        await _invocation.aclaim(_config())
        sent_back = None
        if self.policy.way_back is not None:  # read without blocking the event loop
            sent_back = await away_back_now(self.policy, _config())
        begun, remaining, config, held = self._begin(request, sent_back)
        decision = begun.decision
        if begun.aborted is not None:
            await apublish_run_end(begun.aborted.record, config)
        extra = None
        if held is not None:  # a hand-off held back
            begun, extra, ended = self._settle(held, begun, decision)
            if ended is not None:  # it is carried out: this agent's run ends here
                await apublish_run_end(ended[0], config)
                raise ended[1]
        if decision is not None and decision.stop and not decision.narrate:
            return self._relay(request, begun, decision, config, extra)
        narrated = decision is not None and decision.narrate
        if begun.aborted is not None:
            request = self._repaired(request, begun)
        request = _to_model(request, begun)
        if narrated and self.policy.narrator is not None:
            narrator = self.policy.narrator
            answer = answer_of(await narrator.ainvoke(narration(request.messages), config))
            response = ModelResponse(result=[_named(answer, config)])
        else:
            response = await handler(self._narrating(request) if narrated else request)
        if decision is not None:
            turn_event(decision, begun.turn, begun.run)
        return self._answered(
            response, begun, narrated=narrated, remaining=remaining, config=config
        )

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Claim the thread before a tool runs, then run it.

        A resume after a human review starts at the tools, and a second resume of the same
        review must not run them twice. No record crosses a level: a tool does not see this
        level's `stop_record` in the state it is given (Deep Agents' `task` copies that state
        into its sub-agent), and a tool that returns a sub-agent's state update has the
        sub-agent's record taken out and its stop forwarded
        (`toolstop.levels.forward_in_update`)."""
        config = _config()
        _invocation.current(config)
        state = request.state
        if (type(state) is dict or isinstance(state, Mapping)) and "stop_record" in state:
            request = without_record(request)
        result = handler(request)
        if not isinstance(result, Command):  # a ToolMessage: no sub-agent state, no hand-off
            return result
        result = forward_in_update(result)
        deferred = defer_handoff(request, result)
        record = handoff_record(request.state, deferred)
        if record is not None:
            publish_run_end(record, config)
        return deferred

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async twin of `wrap_tool_call`."""
        config = _config()
        await _invocation.aclaim(config)
        state = request.state
        if (type(state) is dict or isinstance(state, Mapping)) and "stop_record" in state:
            request = without_record(request)
        result = await handler(request)
        if not isinstance(result, Command):  # a ToolMessage: no sub-agent state, no hand-off
            return result
        result = forward_in_update(result)
        deferred = defer_handoff(request, result)
        record = handoff_record(request.state, deferred)
        if record is not None:
            await apublish_run_end(record, config)
        return deferred

    def _ending(
        self, state: Any, config: Any
    ) -> tuple[dict[str, Any], RunState, StopRecord | None]:
        """The run's last update (without its record), the run to finish, and the record of an
        aborted run this one closed (when it made no model call that could)."""
        messages = state["messages"]
        update: dict[str, Any] = {}
        run = state.get(RUN_KEY)
        aborted = close_aborted(run, messages, _steps(config)[1], self.policy)
        if aborted is not None and run is not None:
            run = {**run, "open": False}
            if aborted.messages is not None:
                messages = aborted.messages
                update["messages"] = aborted.update()
        last = messages[-1] if messages else None
        answered = isinstance(last, AIMessage) and not last.tool_calls  # by anyone
        since = run_start(run)
        end = len(messages) - 1 if answered else None
        turn = current_turn(messages, since=since, end=end, earlier=False)
        if pending(turn, run):
            # a turn no model call decided: a stop's relay shows its earlier turns
            turn = current_turn(messages, since=since, end=end)
        if run is None or not run["open"]:
            # No model call in this run (refused before it): a tool turn in its messages came
            # with its input, and is not this run's to decide.
            previous = aborted.record if aborted is not None else state.get("stop_record")
            run = open_run(run, previous, self.policy, turn, config=config)
        swallowed = last is not None and _limit_swallowed(last, state)
        decision, decided = begin_turn(
            run,
            _as_the_tool_said(turn, state),
            self.policy,
            remaining_steps=None,
            loop_steps=0,
            delivered=swallowed,
        )
        run = decided
        turn_event(decision, turn, run)
        ended_by = _ended_by(messages, state, run["record"], run.get("answer"))
        if ended_by:
            run = cast(RunState, {**run, "record": {**run["record"], **ended_by}})
        if answered:
            run = ended_after(run, turn, last, messages)
        if swallowed and decision is not None and decision.stop and last is not None:
            # No model call is allowed any more, so a polish stop is relayed as it is.
            relay = relay_message(
                decision.relay,
                decision.rule,
                name=_agent_name(config),
                for_model=decision.for_model,
            )
            update["messages"] = [RemoveMessage(id=last.id), relay]
            shown = StopRecord(**{**run["record"], "relayed": list(decision.relayed)})
            run = {**run, "record": shown}
        return update, run, aborted.record if aborted is not None else None

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """End the run: write and publish its record; deliver a stop a call limit swallowed.

        A run another middleware ended (a guard's or a limit's `jump_to: "end"`) may still have
        a tool turn the model never saw: it is accounted for in the record. Only a stop that
        `ModelCallLimitMiddleware` swallowed is delivered in place of the limit's message; a
        guard's answer stands.
        """
        config = _config()
        update, run, aborted = self._ending(state, config)
        if aborted is not None:
            publish_run_end(aborted, config)
        update["stop_record"], update[RUN_KEY] = finish(run, config)
        return update

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async twin of `after_agent`: async callback handlers get the run's end on the event loop.

        Sync handlers get it as langchain-core runs sync handlers in async code."""
        config = _config()
        await _invocation.aclaim(config)
        update, run, aborted = self._ending(state, config)
        if aborted is not None:
            await apublish_run_end(aborted, config)
        update["stop_record"], update[RUN_KEY] = await afinish(run, config)
        return update
