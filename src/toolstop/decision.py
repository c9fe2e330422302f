"""`decide`: the one pure function every router is a thin shell around.

It reads the current turn from the end of the message list (the last AIMessage and the
ToolMessages after it that answer its tool calls) and never the rest, so its cost is O(messages
since the last AIMessage), independent of how long the conversation is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop.outcome import Outcome
from toolstop.policy import StopPolicy

__all__ = [
    "MALFORMED_SIGNALS",
    "PROBLEMS_NOT_INVALID",
    "CallSignal",
    "Decision",
    "Problem",
    "Rule",
    "Turn",
    "current_turn",
    "decide",
    "decide_turn",
    "read_signal",
]


class Rule(StrEnum):
    """Which rule ended a run (or would have, in `never` mode). Stored in the stop record."""

    COMPLETED = "completed"
    FATAL = "fatal"
    POLICY_BLOCK = "policy_block"
    RETRY_BUDGET = "retry_budget"
    STEP_BUDGET = "step_budget"
    NONE = "none"


class Problem(StrEnum):
    """Why a tool call carried no valid signal. Every one of them means *continue*."""

    UNSIGNALLED = "unsignalled"
    """No signal at all, which is normal: no artifact, an artifact that is not a dict (the tool's
    own data, as in LangChain's `content_and_artifact` examples), or a dict with neither `stop`
    nor `reason` (an MCP server's `structured_content`, the application's own keys). A plain
    tool, an MCP server that never signals, a human reviewer's "respond". Not invalid."""
    MISSING_STOP = "missing_stop"
    """A dict with a `reason` but no `stop`: a signal with its routing key missing."""
    STOP_NOT_BOOL = "stop_not_bool"
    UNKNOWN_REASON = "unknown_reason"
    TRANSIENT_WITH_STOP = "transient_with_stop"
    TOOL_ERROR = "tool_error"
    NO_RESULT = "no_result"
    UNREADABLE = "unreadable"
    MALFORMED_ENVELOPE = "malformed_envelope"
    """A plain-text tool's envelope could not be read; its text went to the model as is."""
    UNTRUSTED = "untrusted"
    """An adapter marked the signal as coming from a source the application does not trust
    (e.g. an MCP server off the allowlist): `{"untrusted": true, ...}`."""
    REJECTED = "rejected"
    """A human reviewer rejected the call (langchain's `HumanInTheLoopMiddleware`); the tool never
    ran. A decision, not a failure: it goes back to the model and spends no retry budget."""


PROBLEMS_NOT_INVALID = frozenset({Problem.REJECTED, Problem.UNSIGNALLED})
"""Problems that are not a tool's bug: counted by what they are (the record's `outcomes`
`rejected` and `unsignalled`), not in `invalid_signals`."""

MALFORMED_SIGNALS = frozenset(
    {
        Problem.MISSING_STOP,
        Problem.STOP_NOT_BOOL,
        Problem.UNKNOWN_REASON,
        Problem.TRANSIENT_WITH_STOP,
        Problem.UNREADABLE,
        Problem.MALFORMED_ENVELOPE,
    }
)
"""Invalid signals that are a bug in the tool (it tried to signal and got it wrong): besides
being recorded, each is logged once at WARNING on logger `toolstop` (see `toolstop.record`).
The other invalid problems are not the signal's fault: a tool exception (`tool_error`), a call
left without a result (`no_result`), a signal from an untrusted source (`untrusted`)."""


_REASONS = {o.value: o for o in Outcome}
_STOP_RULES = {
    Outcome.COMPLETED: Rule.COMPLETED,
    Outcome.FATAL: Rule.FATAL,
    Outcome.POLICY_BLOCK: Rule.POLICY_BLOCK,
}


@dataclass(frozen=True, kw_only=True)
class CallSignal:
    """What one tool call of the turn said, as read from its ToolMessage (never its content).

    Attributes:
        tool: The tool's name.
        tool_call_id: The id of the tool call this answers.
        reason: The valid reason, or `None` when the signal is invalid.
        stop: Whether this call asks to stop; always `False` for an invalid signal.
        problem: Why the signal is invalid, or `None` when it is valid.
    """

    tool: str
    tool_call_id: str
    reason: Outcome | None
    stop: bool
    problem: Problem | None = None

    @property
    def valid(self) -> bool:
        """True when the call carried a well-formed signal."""
        return self.problem is None


@dataclass(frozen=True, kw_only=True)
class Decision:
    """The outcome of `decide` for one turn.

    Attributes:
        stop: Whether the run ends now.
        rule: The rule that ended it (`Rule.NONE` when it goes on).
        would_stop: In `never` mode, the rule that would have ended it; otherwise `None`.
        narrate: True when the stop is narrated by one more model call (`polish` mode).
        signals: Every call of the turn, in tool-call order.
        deciding: The calls whose signals made the decision (or, with `would_stop`, would have),
            in tool-call order.
        transient_in_turn: Transient failures and tool errors in this turn (they count against
            `StopPolicy.max_transient_retries`).
        relay: The final content on a stop: the deciding tool content verbatim (several joined in
            tool-call order), or the policy's user-safe text for policy blocks and budgets. `None`
            when the run goes on. This holds tool content: never log it.
    """

    stop: bool
    rule: Rule
    would_stop: Rule | None = None
    narrate: bool = False
    signals: tuple[CallSignal, ...] = ()
    deciding: tuple[CallSignal, ...] = ()
    transient_in_turn: int = 0
    relay: str | list[str | dict[str, Any]] | None = None


def read_signal(message: ToolMessage, *, tool: str | None = None) -> CallSignal:
    """Read one ToolMessage's artifact as a signal. Never raises; anything odd is a `Problem`.

    No artifact, a non-dict, or a dict with neither `stop` nor `reason` is `unsignalled` (a tool
    that does not signal: normal); a dict that tries to signal and gets it wrong is invalid.
    A `reason` may be omitted (a bare `{"stop": true}`): it is then taken as
    `completed` when `stop` is true and `transient` when it is false. An error ToolMessage (a tool
    exception) is a `tool_error` whatever its artifact says: it goes back to the model and counts
    as a transient failure. `stop` must be a real `bool` (`1` and `"yes"` are invalid).
    """
    name = tool or message.name or "?"
    call_id = message.tool_call_id

    def invalid(problem: Problem) -> CallSignal:
        return CallSignal(tool=name, tool_call_id=call_id, reason=None, stop=False, problem=problem)

    if getattr(message, "status", "success") == "error":
        return invalid(Problem.REJECTED if _human_rejected(message) else Problem.TOOL_ERROR)
    try:
        artifact = message.artifact
        if not isinstance(artifact, dict):  # no artifact, or the tool's own data
            return invalid(Problem.UNSIGNALLED)
        # The raw dict protocol: a dict subclass's overridden methods are never called.
        if dict.get(artifact, "untrusted") is True:
            return invalid(Problem.UNTRUSTED)
        if dict.__contains__(artifact, "envelope_error"):
            return invalid(Problem.MALFORMED_ENVELOPE)
        if not dict.__contains__(artifact, "stop"):
            has_reason = dict.__contains__(artifact, "reason")
            return invalid(Problem.MISSING_STOP if has_reason else Problem.UNSIGNALLED)
        stop = dict.__getitem__(artifact, "stop")
        if type(stop) is not bool:
            return invalid(Problem.STOP_NOT_BOOL)
        raw_reason = dict.get(artifact, "reason")
        if raw_reason is None:
            reason = Outcome.COMPLETED if stop else Outcome.TRANSIENT
        elif isinstance(raw_reason, str) and str(raw_reason) in _REASONS:
            reason = _REASONS[str(raw_reason)]
        else:
            return invalid(Problem.UNKNOWN_REASON)
    except Exception:  # hostile artifacts: __eq__/__hash__/__getitem__ that raise
        return invalid(Problem.UNREADABLE)
    if reason is Outcome.TRANSIENT and stop:
        return invalid(Problem.TRANSIENT_WITH_STOP)
    return CallSignal(tool=name, tool_call_id=call_id, reason=reason, stop=stop)


_REJECTION_TEXT = "User rejected the tool call for `"


def _human_rejected(message: ToolMessage) -> bool:
    """True for the error ToolMessage langchain's `HumanInTheLoopMiddleware` adds on a reject.

    langchain >= 1.5 marks it (`additional_kwargs["lc_source"] == "hitl_interrupt_decision"`,
    `lc_data["decision"] == "reject"`). Earlier releases add an unmarked message; it is known by
    the text langchain writes into it and by carrying no artifact (the tool never ran). This only
    changes what a call that goes back to the model is counted as; it can never cause a stop.
    """
    extra = message.additional_kwargs
    if extra.get("lc_source") == "hitl_interrupt_decision":
        data = extra.get("lc_data")
        return isinstance(data, dict) and data.get("decision") == "reject"
    content = message.content
    return (
        message.artifact is None
        and isinstance(content, str)
        and content.startswith(_REJECTION_TEXT)
    )


@dataclass(frozen=True, kw_only=True)
class Turn:
    """The current tool turn: the last AIMessage and the ToolMessages after it.

    Attributes:
        asking: The AIMessage whose tool calls the turn answers (`None` when the results follow
            no AIMessage, e.g. a hand-made message list).
        results: The ToolMessages after it, in message order. Messages of other types between
            them (a hook's reminder, a summary) are skipped.
    """

    asking: AIMessage | None
    results: tuple[ToolMessage, ...]

    @property
    def id(self) -> str | None:
        """The asking AIMessage's id: which turn this is (`None` when unknown)."""
        return self.asking.id if self.asking is not None else None


def current_turn(messages: Sequence[BaseMessage]) -> Turn | None:
    """The tool turn at the end of `messages`, or `None` when there is none.

    Scans back to the last AIMessage and no further. The turn exists when that AIMessage asked
    for tool calls (or, with no AIMessage at all, when ToolMessages are present); messages of
    other types after the results (a `before_model` hook's reminder) do not hide it.
    """
    results: list[ToolMessage] = []
    index = len(messages) - 1
    while index >= 0:
        message = messages[index]
        if isinstance(message, AIMessage):
            if not message.tool_calls:
                return None
            results.reverse()
            return Turn(asking=message, results=tuple(results))
        if isinstance(message, ToolMessage):
            results.append(message)
        index -= 1
    if not results:
        return None
    results.reverse()
    return Turn(asking=None, results=tuple(results))


def _signals(turn: Turn | None) -> tuple[CallSignal, ...]:
    """Signals of the turn's results, in the order of the AIMessage's tool calls."""
    if turn is None or not turn.results:
        return ()
    calls = turn.asking.tool_calls if turn.asking is not None else []
    if not calls:
        return tuple(read_signal(m) for m in turn.results)
    by_id: dict[str, ToolMessage] = {}
    for m in turn.results:
        by_id.setdefault(m.tool_call_id, m)
    signals: list[CallSignal] = []
    for call in calls:
        call_id = call.get("id") or ""
        answer = by_id.pop(call_id, None)
        if answer is None:
            signals.append(
                CallSignal(
                    tool=call["name"],
                    tool_call_id=call_id,
                    reason=None,
                    stop=False,
                    problem=Problem.NO_RESULT,
                )
            )
        else:
            signals.append(read_signal(answer, tool=call["name"]))
    # Results that answer no call of the turn cannot stop it, but they are recorded.
    signals.extend(read_signal(m) for m in by_id.values())
    return tuple(signals)


def _stopping(signals: tuple[CallSignal, ...], policy: StopPolicy) -> tuple[CallSignal, ...]:
    """The calls that stop the turn under the policy's parallel rule (empty: go on)."""
    valid = [s for s in signals if s.valid]
    if policy.parallel == "all":
        if signals and all(s.valid and s.stop for s in signals):
            return signals
        return ()
    if policy.parallel == "any":
        return tuple(s for s in valid if s.stop)
    if policy.parallel == "first":
        return (valid[0],) if valid and valid[0].stop else ()
    # priority: the most important reason present decides.
    if not valid:
        return ()
    top = min(policy.rank(s.reason.value) for s in valid if s.reason is not None)
    return tuple(
        s for s in valid if s.stop and s.reason is not None and policy.rank(s.reason.value) == top
    )


def _relay(turn: Turn | None, deciding: tuple[CallSignal, ...]) -> str | list[str | dict[str, Any]]:
    """The deciding calls' content: verbatim for one, text joined in tool-call order for several."""
    wanted = {s.tool_call_id for s in deciding}
    contents: dict[str, str | list[str | dict[str, Any]]] = {}
    for message in turn.results if turn is not None else ():
        if message.tool_call_id in wanted:
            contents.setdefault(message.tool_call_id, message.content)
    ordered = [contents.get(s.tool_call_id, "") for s in deciding]
    if len(ordered) == 1:
        return ordered[0]
    return "\n\n".join(content_text(c) for c in ordered)


def content_text(content: str | list[str | dict[str, Any]]) -> str:
    """The text of a message content (a string, or a list of string / `{"type": "text"}` blocks)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def decide(
    messages: Sequence[BaseMessage],
    policy: StopPolicy | None = None,
    *,
    transient_count: int = 0,
    remaining_steps: int | None = None,
    loop_steps: int = 2,
) -> Decision:
    """Decide whether the run stops after the current tool turn.

    Args:
        messages: The thread's whole message list. Only the current turn is read: the last
            AIMessage and the ToolMessages after it (see `current_turn`).
        policy: The stop policy; `StopPolicy()` when omitted.
        transient_count: Transient failures already sent back to the model in this run (before
            this turn). With this turn's they are checked against `max_transient_retries`.
        remaining_steps: LangGraph's remaining steps at the node that would call the model next,
            or `None` when unknown (no step budget). A run can only end at a node that still has
            at least one step left.
        loop_steps: The nodes a further tool turn needs after that node until the run can end
            (2 for `agent -> tools -> finalize`; more when other nodes run in the loop or after
            the final answer). With no more steps than this left, the run stops with
            `step_budget` instead of letting LangGraph raise `GraphRecursionError`.

    Returns:
        A `Decision`. Precedence: a stop asked for by the signals (per `policy.parallel`), then
        the retry budget, then the step budget. In `never` mode the first two are only recorded
        as `would_stop`; the step budget still stops, since the alternative is an exception.

    Deliberately not handled: the content of tool messages is never parsed (text that looks like
    `{"stop": true}` is just text), and messages before the current turn are never read.
    """
    return decide_turn(
        current_turn(messages),
        policy,
        transient_count=transient_count,
        remaining_steps=remaining_steps,
        loop_steps=loop_steps,
    )


def decide_turn(
    turn: Turn | None,
    policy: StopPolicy | None = None,
    *,
    transient_count: int = 0,
    remaining_steps: int | None = None,
    loop_steps: int = 2,
) -> Decision:
    """`decide` for a turn already found with `current_turn` (the routers' entry point)."""
    policy = policy if policy is not None else StopPolicy()
    signals = _signals(turn)
    transient = sum(1 for s in signals if _is_transient(s))
    rule = Rule.NONE
    deciding = _stopping(signals, policy)
    if deciding:
        top = min(deciding, key=lambda s: policy.rank(s.reason.value if s.reason else ""))
        assert top.reason is not None  # deciding signals are valid
        rule = _STOP_RULES[top.reason]
    elif (
        transient
        and policy.max_transient_retries is not None
        and transient_count + transient > policy.max_transient_retries
    ):
        rule = Rule.RETRY_BUDGET
        deciding = tuple(s for s in signals if _is_transient(s))
    would_stop = None
    if rule is not Rule.NONE and policy.mode == "never":
        would_stop, rule = rule, Rule.NONE
    out_of_steps = remaining_steps is not None and remaining_steps <= loop_steps
    if rule is Rule.NONE and signals and out_of_steps:
        rule = Rule.STEP_BUDGET
    if rule is Rule.NONE:
        return Decision(
            stop=False,
            rule=rule,
            would_stop=would_stop,
            signals=signals,
            deciding=deciding if would_stop is not None else (),
            transient_in_turn=transient,
        )
    return Decision(
        stop=True,
        rule=rule,
        would_stop=would_stop,
        narrate=policy.mode == "polish" and rule in (Rule.COMPLETED, Rule.FATAL),
        signals=signals,
        deciding=deciding,
        transient_in_turn=transient,
        relay=_relay_for(rule, turn, deciding, policy),
    )


def _is_transient(signal: CallSignal) -> bool:
    """Counts against the retry budget: a transient failure, or a tool exception."""
    return signal.reason is Outcome.TRANSIENT or signal.problem is Problem.TOOL_ERROR


def _relay_for(
    rule: Rule,
    turn: Turn | None,
    deciding: tuple[CallSignal, ...],
    policy: StopPolicy,
) -> str | list[str | dict[str, Any]]:
    """The final content for a stop by `rule`: tool content, or a user-safe text of the policy."""
    if rule is Rule.POLICY_BLOCK:
        return policy.policy_block_message
    if rule is Rule.RETRY_BUDGET:
        return policy.retry_budget_message
    if rule is Rule.STEP_BUDGET:
        return policy.step_budget_message
    return _relay(turn, deciding)
