"""The hand-built ReAct graph: `agent`, `tools`, `finalize` (+ `polish`), routed by `decide`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, TypeAlias

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    MessageLikeRepresentation,
)
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.managed import RemainingSteps
from typing_extensions import TypedDict

from toolstop._compat import prebuilt_mismatch

try:
    from langgraph.prebuilt import ToolNode
except ImportError as error:  # pragma: no cover - a broken langgraph / langgraph-prebuilt pair
    raise ImportError(prebuilt_mismatch(error)) from error

from toolstop import _invocation
from toolstop._lifecycle import (
    RUN_KEY,
    Begun,
    RunState,
    afinish,
    answered,
    away_back_now,
    begin,
    ended_after,
    finish,
    for_run,
    invocation_of,
    last_answer,
    plain_answer,
    relay_message,
    run_start,
    turn_event,
)
from toolstop._narrator import answer_of, count_narrator_call, narration
from toolstop._prompt import Prompt, PromptInput
from toolstop._relay import to_model
from toolstop.decision import Decision, current_turn, decide_turn
from toolstop.errors import ToolstopConfigError
from toolstop.observe import apublish_run_end, publish_run_end
from toolstop.policy import StopPolicy, resolve_policy
from toolstop.record import StopRecord, count_model_call
from toolstop.tools import (
    check_tools,
    find_tool_node,
    mark_fallback_errors,
    reject_return_direct,
    tool_error_text,
)

_RunnableCallable: Any
try:  # private, but stable across langgraph 0.6.6 - 1.2; a fallback keeps us working without it
    from langgraph._internal._runnable import RunnableCallable as _RunnableCallable
except ImportError:  # pragma: no cover - depends on the langgraph version
    _RunnableCallable = None

__all__ = [
    "ReactGraph",
    "ReactIO",
    "ReactInput",
    "ReactState",
    "build_react_graph",
    "check_tools",
    "compile_react_graph",
    "reject_return_direct",
    "route_after_agent",
]


class ReactIO(TypedDict):
    """What the hand-built graph takes and returns.

    Attributes:
        messages: The conversation (LangGraph's `add_messages` reducer).
        stop_record: The record of the thread's latest finished run (see `toolstop.StopRecord`).
    """

    messages: Annotated[list[AnyMessage], add_messages]
    stop_record: NotRequired[StopRecord]


class ReactState(ReactIO):
    """State of the hand-built graph: its input and output, plus toolstop's private keys.

    Attributes:
        remaining_steps: LangGraph's managed step counter (read for the step budget).
        toolstop_run: The run in progress (see `toolstop._lifecycle.RunState`); not in the output.
    """

    remaining_steps: RemainingSteps
    toolstop_run: NotRequired[RunState]


class ReactInput(TypedDict):
    """What type checkers accept as the hand-built graph's input.

    `messages` as anything LangGraph's `add_messages` takes (messages, `("user", "hi")` pairs,
    dicts, strings)."""

    messages: Sequence[MessageLikeRepresentation]
    stop_record: NotRequired[StopRecord]


if TYPE_CHECKING:
    ReactGraph: TypeAlias = CompiledStateGraph[ReactState, None, ReactInput, ReactIO]
else:  # the generic's parameters differ between langgraph versions; only type checkers need them
    ReactGraph = CompiledStateGraph
"""The type `build_react_graph` returns: LangGraph's compiled graph of `ReactState`, taking
`ReactInput` and returning `ReactIO`."""


def _node(func: Callable[..., Any], afunc: Callable[..., Any], name: str) -> Runnable[Any, Any]:
    """A graph node with a sync and an async body.

    langgraph's own `RunnableCallable` (what its prebuilt agents use; same module path on 0.6 and
    1.x) inspects the signature once; langchain-core's `RunnableLambda` does it on every call,
    which costs throughput under many concurrent runs (`toolstop bench --overhead` measures it).
    """
    if _RunnableCallable is not None:
        node: Runnable[Any, Any] = _RunnableCallable(func, afunc, name=name, trace=False)
        return node
    # a langgraph without it; tests/test_graph.py runs this path with the private import hidden
    return RunnableLambda(func, afunc=afunc, name=name)  # pragma: no cover


def _router(func: Callable[..., Any]) -> Any:
    """A conditional edge's function as `create_agent` passes its own (`RunnableCallable`).

    A plain function is wrapped by LangGraph with a traced run per call and, in async runs, a
    thread-pool hop per call (`run_in_executor`); a router does no I/O, so it runs inline and
    untraced, in sync and async runs alike.
    """
    if _RunnableCallable is not None:
        return _RunnableCallable(func, None, trace=False)
    return func  # pragma: no cover - a langgraph without it coerces the function itself


def route_after_agent(state: ReactState) -> Literal["tools", "__end__"]:
    """Go to `tools` when the last AIMessage asks for tool calls, else end."""
    last = state["messages"][-1] if state["messages"] else None
    if isinstance(last, AIMessage) and last.tool_calls:
        return "tools"
    return "__end__"


GRAPH_LOOP_STEPS = 2
"""Nodes a tool turn needs on the hand-built graph after `agent` until the run can end: `tools`,
then `finalize` (or `polish`, or `agent` answering without tools)."""


class _Nodes:
    """The graph's nodes and its tools router, sharing one policy. Each is a thin shell."""

    def __init__(
        self,
        model: BaseChatModel,
        tools: Sequence[BaseTool],
        policy: StopPolicy,
        prompt: Prompt,
        name: str | None,
    ) -> None:
        self.policy = policy
        self.prompt = PromptInput(prompt)
        self.model = model
        self.name = name
        self.bound: Runnable[Any, Any] = model.bind_tools(list(tools))

    def _begin(
        self, state: ReactState, config: RunnableConfig, sent_back: frozenset[str] | None = None
    ) -> Begun:
        """The run this node belongs to, with the tool turn just executed folded in.

        An earlier run that did not finish is closed first (see `close_aborted`); the messages
        are then the repaired ones, which the model gets and the node writes back.
        """
        remaining = state.get("remaining_steps")
        return begin(
            state.get("toolstop_run"),
            state.get("stop_record"),
            state["messages"],
            self.policy,
            invocation=_invocation.current(config) or invocation_of(remaining, config),
            remaining_steps=remaining,
            loop_steps=GRAPH_LOOP_STEPS,
            config=config,
            sent_back=sent_back,
        )

    def _stop(self, state: ReactState, config: RunnableConfig) -> tuple[Begun, Decision]:
        begun = self._begin(state, config)
        decision = begun.decision
        if decision is None or not decision.stop:  # pragma: no cover - routers share `decide`
            msg = "toolstop bug: a stop node ran for a turn that does not stop"
            raise AssertionError(msg)
        turn_event(decision, begun.turn, begun.run)
        return begun, decision

    @staticmethod
    def _sent(begun: Begun) -> list[BaseMessage]:
        """The messages the model is sent: the tools' content in a relay's `answer` place (the
        history is read for relays only when the thread holds one)."""
        return to_model(begun.messages) if begun.relays else list(begun.messages)

    def _messages(self, begun: Begun, state: ReactState, config: RunnableConfig) -> Any:
        return self.prompt.apply(state, self._sent(begun), config)

    async def _amessages(self, begun: Begun, state: ReactState, config: RunnableConfig) -> Any:
        return await self.prompt.aapply(state, self._sent(begun), config)

    def _named(self, answer: BaseMessage) -> BaseMessage:
        if self.name is not None and isinstance(answer, AIMessage):
            answer.name = self.name
        return answer

    @staticmethod
    def _update(begun: Begun, run: RunState, answer: AIMessage) -> dict[str, Any]:
        """A node's update: the answer, the run, and what closing an aborted run wrote."""
        update: dict[str, Any] = {"messages": [answer], RUN_KEY: run}
        if begun.aborted is not None:
            update["messages"] = [*begun.aborted.update(), answer]
            update["stop_record"] = begun.aborted.record
        return update

    def _end(
        self, begun: Begun, run: RunState, answer: AIMessage, config: RunnableConfig
    ) -> dict[str, Any]:
        record, run = finish(ended_after(run, begun.turn, answer, begun.messages), config)
        return {**self._update(begun, run, answer), "stop_record": record}

    async def _aend(
        self, begun: Begun, run: RunState, answer: AIMessage, config: RunnableConfig
    ) -> dict[str, Any]:
        record, run = await afinish(ended_after(run, begun.turn, answer, begun.messages), config)
        return {**self._update(begun, run, answer), "stop_record": record}

    def _answer(
        self, state: ReactState, begun: Begun, response: AIMessage
    ) -> tuple[AIMessage, RunState]:
        return answered(
            begun.run,
            self._named(response),  # type: ignore[arg-type]
            self.policy,
            remaining_steps=state.get("remaining_steps"),
            loop_steps=GRAPH_LOOP_STEPS,
            name=self.name,
            messages=begun.messages,
        )

    def _polished(self, run: RunState, response: BaseMessage) -> tuple[AIMessage, RunState]:
        answer = plain_answer(self._named(response))
        return answer, last_answer(
            {**run, "record": count_model_call(run["record"], answer)}, answer
        )

    def _narrated(self, run: RunState, response: Any) -> tuple[AIMessage, RunState]:
        answer = answer_of(response)
        self._named(answer)
        return answer, last_answer(
            {**run, "record": count_narrator_call(run["record"], answer)}, answer
        )

    # -- nodes -----------------------------------------------------------------------------
    def agent(self, state: ReactState, config: RunnableConfig) -> dict[str, Any]:
        begun = self._begin(state, config)
        if begun.aborted is not None:
            publish_run_end(begun.aborted.record, config)
        turn_event(begun.decision, begun.turn, begun.run)
        response = self.bound.invoke(self._messages(begun, state, config), config)
        answer, run = self._answer(state, begun, response)
        if answer.tool_calls:
            return self._update(begun, run, answer)
        return self._end(begun, run, answer, config)

    async def aagent(self, state: ReactState, config: RunnableConfig) -> dict[str, Any]:
        await _invocation.aclaim(config)
        sent_back = None
        if self.policy.way_back is not None:  # read without blocking the event loop
            sent_back = await away_back_now(self.policy, config)
        begun = self._begin(state, config, sent_back)
        if begun.aborted is not None:
            await apublish_run_end(begun.aborted.record, config)
        turn_event(begun.decision, begun.turn, begun.run)
        response = await self.bound.ainvoke(await self._amessages(begun, state, config), config)
        answer, run = self._answer(state, begun, response)
        if answer.tool_calls:
            return self._update(begun, run, answer)
        return await self._aend(begun, run, answer, config)

    def finalize(self, state: ReactState, config: RunnableConfig) -> dict[str, Any]:
        begun, decision = self._stop(state, config)
        relay = relay_message(
            decision.relay, decision.rule, name=self.name, for_model=decision.for_model
        )
        return self._end(begun, begun.run, relay, config)

    async def afinalize(self, state: ReactState, config: RunnableConfig) -> dict[str, Any]:
        await _invocation.aclaim(config)
        begun, decision = self._stop(state, config)
        relay = relay_message(
            decision.relay, decision.rule, name=self.name, for_model=decision.for_model
        )
        return await self._aend(begun, begun.run, relay, config)

    def polish(self, state: ReactState, config: RunnableConfig) -> dict[str, Any]:
        begun, _ = self._stop(state, config)
        narrator = self.policy.narrator
        if narrator is not None:
            response = narrator.invoke(narration(state["messages"]), config)
            answer, run = self._narrated(begun.run, response)
            return self._end(begun, run, answer, config)
        response = self.model.invoke(self._messages(begun, state, config), config)
        answer, run = self._polished(begun.run, response)
        return self._end(begun, run, answer, config)

    async def apolish(self, state: ReactState, config: RunnableConfig) -> dict[str, Any]:
        await _invocation.aclaim(config)
        begun, _ = self._stop(state, config)
        narrator = self.policy.narrator
        if narrator is not None:
            response = await narrator.ainvoke(narration(state["messages"]), config)
            answer, run = self._narrated(begun.run, response)
            return await self._aend(begun, run, answer, config)
        response = await self.model.ainvoke(await self._amessages(begun, state, config), config)
        answer, run = self._polished(begun.run, response)
        return await self._aend(begun, run, answer, config)

    # -- router ----------------------------------------------------------------------------
    def route_after_tools(self, state: ReactState) -> Literal["agent", "finalize", "polish"]:
        """Back to `agent`, or to the stop node the policy's mode asks for.

        The turn is read without its earlier turns: they change a stop's relay, which the node
        it routes to builds, never whether it stops (see `toolstop.decision.current_turn`)."""
        run = state.get("toolstop_run")
        remaining = state.get("remaining_steps")
        decision = decide_turn(
            current_turn(state["messages"], since=run_start(run), earlier=False),
            for_run(self.policy, run) if self.policy.per_run else self.policy,
            transient_count=run["record"]["transient_retries"] if run else 0,
            # the node after `tools` runs one step later
            remaining_steps=None if remaining is None else remaining - 1,
            loop_steps=GRAPH_LOOP_STEPS,
        )
        if not decision.stop:
            return "agent"
        return "polish" if decision.narrate else "finalize"


def build_react_graph(
    model: BaseChatModel,
    tools: Sequence[BaseTool | Callable[..., Any]] | Runnable[Any, Any],
    *,
    policy: StopPolicy | None = None,
    prompt: Prompt = None,
    checkpointer: Any = None,
    store: Any = None,
    interrupt_before: list[str] | None = None,
    interrupt_after: list[str] | None = None,
    debug: bool = False,
    name: str | None = None,
) -> ReactGraph:
    """Build and compile the hand-built ReAct graph whose tool turns stop per call.

    Nodes: `agent` (calls the model with tools bound), `tools` (LangGraph's `ToolNode`; a tool's
    exception becomes an error ToolMessage whose text is `toolstop.tools.tool_error_text`: its
    type and first line, connection details masked), `finalize` (appends the stop's relay as an
    AIMessage, no model call) and, in `polish` mode or with `on_budget="model"`, `polish` (one
    model call with no tools).
    After `tools`, `decide` routes to `agent`, `finalize` or `polish`.

    Args:
        model: A chat model that supports `bind_tools`.
        tools: Tools (or callables), or a ready tools node used as it is: a `ToolNode`, or one
            wrapped by `with_fallbacks`, `with_config` or `with_retry` (the customer-support
            tutorial's `ToolNode(tools).with_fallbacks([...], exception_key="error")`); the
            model is bound to the `ToolNode`'s tools; the ToolMessages a fallback returns are
            marked `status="error"` (it ran because a tool raised), so they count against the
            retry budget as `ToolNode`'s own error messages do. Tools signal through
            `content_and_artifact`; plain tools work too (their results go back to the model).
        policy: The stop policy; `StopPolicy()` by default.
        prompt: What LangGraph's `create_react_agent` takes, applied before every model call
            and not stored in state: a system prompt (str or `SystemMessage`); a function of
            the state, `prompt(state)` or `prompt(state, config)`, sync or async, returning
            the model's input; or a Runnable invoked with the state, such as a
            `ChatPromptTemplate` with `("placeholder", "{messages}")`, whose variables the state
            does not hold are filled from `config["configurable"]`.
        checkpointer: Any LangGraph checkpointer, passed to `compile`.
        store: A LangGraph store, passed to `compile`.
        interrupt_before: Node names to interrupt before, passed to `compile`.
        interrupt_after: Node names to interrupt after, passed to `compile`.
        debug: LangGraph's debug flag, passed to `compile`.
        name: The agent's name: the compiled graph's name (default `"toolstop"`) and, when
            given, the `name` of every AIMessage it adds (model answers and relays), as
            LangGraph's `create_react_agent` does, so multi-agent setups can attribute them.

    Returns:
        The compiled graph (`invoke`, `ainvoke`, `stream`, `astream`). It takes and returns
        `messages` and `stop_record`; its state also holds LangGraph's `remaining_steps` and
        toolstop's private `toolstop_run` (the run in progress).

    Raises:
        ToolstopConfigError: if a tool has `return_direct=True`, the prompt is of a wrong type,
            or `tools` is a runnable with no `ToolNode` inside (a node function: the tools to
            bind to the model cannot be seen in it).

    Deliberately not handled: structured responses, dynamic models, a state schema of your own
    (use `create_agent` with `StopOnArtifact` for those).
    """
    return compile_react_graph(
        model,
        tools,
        policy=policy,
        prompt=prompt,
        compile_kwargs={
            "checkpointer": checkpointer,
            "store": store,
            "interrupt_before": interrupt_before,
            "interrupt_after": interrupt_after,
            "debug": debug,
            "name": name or "toolstop",
        },
        agent_name=name,
    )


class _ClaimingTools(RunnableBinding[Any, Any]):
    """The tools node, claiming the thread before its tools run (`toolstop._invocation`).

    A resume after a review (`interrupt_before=["tools"]`, an `interrupt()` in a tool) starts
    at the tools, before any model call: a second resume of the same review is refused here,
    before it runs them again. A binding, so `find_tool_node` still sees the `ToolNode`.

    The binding holds nothing to merge (no config, factories or keyword arguments), so the
    node's config goes to the tools node as LangGraph made it: `RunnableBinding` would merge it
    with an empty one on every tool turn (two `merge_configs`, each copying the callbacks).
    """

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:  # noqa: A002 - Runnable's name
        _invocation.current(config)
        return self.bound.invoke(input, config, **kwargs)

    async def ainvoke(
        self,
        input: Any,  # noqa: A002
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        await _invocation.aclaim(config)
        return await self.bound.ainvoke(input, config, **kwargs)


def _tools_node(tools: Any, where: str) -> tuple[Any, list[BaseTool]]:
    """The graph's `tools` node and the tools it runs (bound to the model).

    A list of tools gets LangGraph's `ToolNode` with toolstop's error text; a `ToolNode`, or one
    wrapped (`with_fallbacks`, `with_config`, `with_retry`), is used as it is, but for the
    ToolMessages a fallback returns, which are marked `status="error"`
    (`toolstop.tools.mark_fallback_errors`).

    Raises:
        ToolstopConfigError: for a runnable with no `ToolNode` inside (a node function): the
            tools the model is bound to cannot be seen in it.
    """
    if isinstance(tools, Runnable) and not isinstance(tools, BaseTool):
        found = find_tool_node(tools)
        if found is None:
            msg = (
                f"{where} takes a list of tools or a ToolNode (also wrapped: with_fallbacks, "
                f"with_config, with_retry); got {type(tools).__name__}, with no ToolNode inside, "
                "so the tools to bind to the model cannot be seen: pass the tools list"
            )
            raise ToolstopConfigError(msg)
        return mark_fallback_errors(tools), list(found.tools_by_name.values())
    if isinstance(tools, BaseTool) or not isinstance(tools, Sequence):
        msg = (
            f"{where} takes a list of tools or a ToolNode, got {type(tools).__name__} (put a "
            "single tool in a list)"
        )
        raise ToolstopConfigError(msg)
    tool_node = ToolNode(list(tools), handle_tool_errors=tool_error_text)
    return tool_node, list(tool_node.tools_by_name.values())


def compile_react_graph(
    model: BaseChatModel,
    tools: Sequence[BaseTool | Callable[..., Any]] | Runnable[Any, Any],
    *,
    policy: StopPolicy | None,
    prompt: Prompt,
    compile_kwargs: dict[str, Any],
    agent_name: str | None,
    where: str = "build_react_graph",
) -> ReactGraph:
    """`build_react_graph` with the compile arguments and the agent's name given separately.

    `where` names the public function in error messages (`create_react_agent` for the legacy
    drop-in)."""
    policy = resolve_policy(policy, where)
    tools_node, held = _tools_node(tools, where)
    check_tools(held, where)
    nodes = _Nodes(model, held, policy, prompt, agent_name)

    graph = StateGraph(ReactState, input_schema=ReactIO, output_schema=ReactIO)
    graph.add_node("agent", _node(nodes.agent, nodes.aagent, "agent"))
    graph.add_node("tools", _ClaimingTools(bound=tools_node))
    graph.add_node("finalize", _node(nodes.finalize, nodes.afinalize, "finalize"))
    targets: list[str] = ["agent", "finalize"]
    if (
        policy.mode == "polish"
        or policy.on_budget == "model"
        or "polish" in policy.modes.values()
        or callable(policy.canary)  # a flag may name polish
    ):
        graph.add_node("polish", _node(nodes.polish, nodes.apolish, "polish"))
        graph.add_edge("polish", END)
        targets.append("polish")
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", _router(route_after_agent), ["tools", END])
    graph.add_conditional_edges("tools", _router(nodes.route_after_tools), targets)
    graph.add_edge("finalize", END)
    compiled: ReactGraph = graph.compile(**compile_kwargs)  # type: ignore[assignment]
    return compiled
