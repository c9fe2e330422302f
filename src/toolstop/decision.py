"""`decide`: the one pure function every router is a thin shell around.

It reads the current turn from the end of the message list (the last AIMessage and the
ToolMessages after it that answer its tool calls) and, for the relay, the run's earlier tool
turns back to the run's start or the last model text, never further: its cost is O(messages of
the current run), independent of how long the conversation is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from toolstop.outcome import Outcome
from toolstop.policy import StopPolicy

__all__ = [
    "MALFORMED_SIGNALS",
    "PROBLEMS_NOT_INVALID",
    "SIGNAL_KEYS",
    "CallSignal",
    "Decision",
    "Problem",
    "Rule",
    "SignalProblem",
    "StopRule",
    "Turn",
    "budget_relay",
    "content_text",
    "current_turn",
    "decide",
    "decide_turn",
    "near_miss_key",
    "read_signal",
    "shown",
]


class StopRule(StrEnum):
    """Which rule ended a run (or would have, in `never` mode). Stored in the stop record."""

    COMPLETED = "completed"
    FATAL = "fatal"
    POLICY_BLOCK = "policy_block"
    RETRY_BUDGET = "retry_budget"
    STEP_BUDGET = "step_budget"
    NONE = "none"
    INTERRUPTED = "interrupted"
    """The run never finished (cancelled, failed, or its worker died); recorded when the thread's
    next run starts. Never decided by the policy."""


class SignalProblem(StrEnum):
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
    ANSWER_NOT_TEXT = "answer_not_text"
    """An `answer` that is neither a string nor a list of text blocks (`{"type": "text", "text":
    str}`), or that has no text but whitespace: an image, a number, a block whose `text` is not
    a string, `""`."""
    EMPTY_RELAY = "empty_relay"
    """A stop (`completed` or `fatal` with `stop: true`) whose content has no text (empty, only
    whitespace, only an image): the relay would be blank for the user, or, behind an `answer`,
    for the model on later turns. A blank final message is refused by Anthropic in a later
    request and is no output for Pydantic AI, so the model answers instead, on every router and
    adapter."""
    NEAR_MISS_KEY = "near_miss_key"
    """A key that is `stop`, `reason` or `answer` only when case and surrounding space are
    ignored (`"Stop"`, `"stop "`, `"STOP"`): a typo, which is never read as the key it resembles."""


Rule = StopRule
"""The former name of `StopRule`, kept as an alias until 1.0."""

Problem = SignalProblem
"""The former name of `SignalProblem`, kept as an alias until 1.0."""

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
        Problem.ANSWER_NOT_TEXT,
        Problem.EMPTY_RELAY,
        Problem.NEAR_MISS_KEY,
    }
)
"""Invalid signals that are a bug in the tool (it tried to signal and got it wrong): besides
being recorded, each is logged once at WARNING on logger `toolstop` (see `toolstop.record`).
The other invalid problems are not the signal's fault: a tool exception (`tool_error`), a call
left without a result (`no_result`), a signal from an untrusted source (`untrusted`)."""


_T = TypeVar("_T")


def _frozen(cls: type[_T], fields: dict[str, Any]) -> _T:
    """`cls(**fields)` for a frozen dataclass, built without its `__init__` (`fields` must name
    every field). On the per-call path each turn makes several; its generated `__init__` sets
    each field through `object.__setattr__`, which costs more than the rest of the decision."""
    made = object.__new__(cls)
    object.__setattr__(made, "__dict__", fields)
    return made


SIGNAL_KEYS = ("stop", "reason", "answer")
"""The artifact keys toolstop reads; every other key is the application's own."""

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
        would_stop: A sub-agent in `never` mode would have stopped on this result
            (`subagent_would_stop` in a forwarded artifact, see `toolstop.forwarded_stop`):
            a parent in `never` mode records it as a would-stop too; any other mode ignores it.
        answer_failed: The artifact's `answer_failed` (a converted tool's `answer` that did not
            render, see `toolstop.convert`), as the artifact holds it (any value: read it as
            hostile); `None` when it has none.
    """

    tool: str
    tool_call_id: str
    reason: Outcome | None
    stop: bool
    problem: Problem | None = None
    would_stop: bool = False
    answer_failed: Any = None

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
        relay: The final content on a stop: every completed result of the run that no model
            text answered yet, in call order, then the deciding calls' (a result's `answer` when
            it has one, JSON content in a fenced block; one result verbatim, several joined as
            text); for budgets the policy's user-safe text after those results; for policy
            blocks the policy's text alone. `None` when the run goes on. This holds tool
            content: never log it.
        relayed: The call ids whose results the relay carries, in the order shown.
        for_model: What later model calls see in place of `relay` when a result is shown by its
            `answer`: the same relay built from the results' content (the `answer` is for the
            user and never sent to the model). `None` when the relay holds no `answer`.
    """

    stop: bool
    rule: Rule
    would_stop: Rule | None = None
    narrate: bool = False
    signals: tuple[CallSignal, ...] = ()
    deciding: tuple[CallSignal, ...] = ()
    transient_in_turn: int = 0
    relay: str | list[str | dict[str, Any]] | None = None
    relayed: tuple[str, ...] = ()
    for_model: str | list[str | dict[str, Any]] | None = None


def read_signal(message: ToolMessage, *, tool: str | None = None) -> CallSignal:
    """Read one ToolMessage's artifact as a signal. Never raises; anything odd is a `Problem`.

    No artifact, a non-dict, or a dict with neither `stop` nor `reason` is `unsignalled` (a tool
    that does not signal: normal); a dict that tries to signal and gets it wrong is invalid.
    A `reason` may be omitted (a bare `{"stop": true}`): it is then taken as
    `completed` when `stop` is true and `transient` when it is false. An error ToolMessage (a tool
    exception) is a `tool_error` whatever its artifact says: it goes back to the model and counts
    as a transient failure. `stop` must be a real `bool` (`1` and `"yes"` are invalid). A key
    that is `stop`, `reason` or `answer` only when case and surrounding space are ignored is a
    typo (`near_miss_key`), an `answer` that is not text (or is blank) is `answer_not_text`, and
    a stop whose content has no text is `empty_relay`: empty, whitespace, control, zero-width,
    bidi or other invisible characters and ANSI escape sequences only, or `None` (LangChain
    hands it on as the text `null`).
    """
    name = tool or message.name or "?"
    read = _read(message)
    if type(read) is tuple:
        return _frozen(
            CallSignal,
            {
                "tool": name,
                "tool_call_id": message.tool_call_id,
                "reason": read[0],
                "stop": read[1],
                "problem": None,
                "would_stop": read[2],
                "answer_failed": read[3],
            },
        )
    return _frozen(
        CallSignal,
        {
            "tool": name,
            "tool_call_id": message.tool_call_id,
            "reason": None,
            "stop": False,
            "problem": read,
            "would_stop": False,
            "answer_failed": None,
        },
    )


def _read(message: ToolMessage) -> tuple[Outcome, bool, bool, Any] | Problem:
    """`read_signal`'s reading: `(reason, stop, would_stop, answer_failed)` of a valid signal,
    or why it is invalid."""
    if getattr(message, "status", "success") == "error":
        return Problem.REJECTED if _human_rejected(message) else Problem.TOOL_ERROR
    try:
        artifact = message.artifact
        if not isinstance(artifact, dict):  # no artifact, or the tool's own data
            return Problem.UNSIGNALLED
        if type(artifact) is not dict:
            # The raw dict protocol: a dict subclass's overridden methods are never called
            # (`dict.copy` copies the entries into a plain dict without calling any of them).
            artifact = dict.copy(artifact)
        if artifact.get("untrusted") is True:
            return Problem.UNTRUSTED
        if "envelope_error" in artifact:
            return Problem.MALFORMED_ENVELOPE
        for key in artifact:  # a key that is a signal key but for case, space or a doubled letter
            if type(key) is str and key not in SIGNAL_KEYS and near_miss_key(key):
                return Problem.NEAR_MISS_KEY
        if "stop" not in artifact:
            signals = "reason" in artifact or "answer" in artifact
            return Problem.MISSING_STOP if signals else Problem.UNSIGNALLED
        stop = artifact["stop"]
        if type(stop) is not bool:
            return Problem.STOP_NOT_BOOL
        raw_reason = artifact.get("reason")
        if raw_reason is None:
            reason = Outcome.COMPLETED if stop else Outcome.TRANSIENT
        else:
            # a str subclass is read as its plain text (its own __eq__/__hash__ never run)
            known = _REASONS.get(str(raw_reason)) if isinstance(raw_reason, str) else None
            if known is None:
                return Problem.UNKNOWN_REASON
            reason = known
        answer = artifact.get("answer", _NO_ANSWER)
        if answer is not _NO_ANSWER and not is_answer(answer):
            return Problem.ANSWER_NOT_TEXT
        relayed = stop and reason in (Outcome.COMPLETED, Outcome.FATAL)
        if relayed and _nothing_to_relay(message.content):
            return Problem.EMPTY_RELAY
        would_stop = (
            not stop and reason in _STOP_RULES and artifact.get("subagent_would_stop") is True
        )
        # `in` first: no call on the per-call path when no template failed
        failed = artifact["answer_failed"] if "answer_failed" in artifact else None  # noqa: SIM401
    except Exception:  # hostile artifacts: __eq__/__hash__/__getitem__ that raise
        return Problem.UNREADABLE
    if reason is Outcome.TRANSIENT and stop:
        return Problem.TRANSIENT_WITH_STOP
    return reason, stop, would_stop, failed


def near_miss_key(key: str) -> bool:
    """True for a typo of a signal key (`stop`, `reason`, `answer`).

    A typo is the key with case and surrounding space ignored (`"Stop"`, `"stop "`) or with one
    doubled letter read once (`"stopp"`, `"reasson"`). Plurals and other words (`"stops"`,
    `"stopped"`, `"step"`) are the application's own keys."""
    if key in SIGNAL_KEYS:
        return False
    folded = key.strip().lower()
    if folded in SIGNAL_KEYS:
        return True
    if len(folded) not in _NEAR_MISS_LENGTHS:
        return False
    return any(
        folded[i] == folded[i + 1] and folded[:i] + folded[i + 1 :] in SIGNAL_KEYS
        for i in range(len(folded) - 1)
    )


_NEAR_MISS_LENGTHS = frozenset(len(k) + 1 for k in SIGNAL_KEYS)
"""A key one letter longer than a signal key may be one with a doubled letter."""


_NO_ANSWER = object()


def is_answer(value: Any) -> bool:
    """A valid `answer`: a string, or a list of text blocks whose `text` is a string, with some
    text that is not whitespace (the rule `signal` enforces).

    Exactly the types (`str` and `list`, `dict` blocks with `"type": "text"`); anything else
    (an `image_url` block, a plain string inside the list, `{"type": "text", "text": 5}`, `""`)
    is not an answer.
    """
    if type(value) is str:
        return not _blank(value)
    return (
        type(value) is list
        and all(
            type(block) is dict
            and dict.get(block, "type") == "text"
            and type(dict.get(block, "text")) is str
            for block in value
        )
        and not _blank(value)
    )


_ESCAPE = (
    "(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI (`ESC [2J`): parameters, then a final byte
    # OSC, DCS, SOS, PM, APC (`ESC ]0;title BEL`): a string, to BEL or ST
    "|(?:\x1b[\\]PX^_]|[\x90\x98\x9d-\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)?"
    "|\x1b[ -/]*[0-~]"  # any other escape (`ESC c`, `ESC ( B`, `ESC 7`)
)
"""An ANSI escape sequence: a terminal acts on it and shows nothing. A string one (OSC, DCS,
SOS, PM, APC: `ESC ]0;title BEL`) runs to BEL or ST, or to the end of the text."""

_SHOWN = re.compile(
    _ESCAPE + "|(?P<seen>[^\\s\x00-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5"
    "\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u2800\u3164\ufe00-\ufe0f\ufeff"
    "\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff])"
)
"""An escape sequence, or (group `seen`) a character a reader sees: not whitespace, not a control
(NUL...), not a zero-width or bidi formatting character (ZWSP, ZWJ, LRM/RLM, LRE...RLO,
LRI...PDI, word joiner, BOM), not a Hangul filler, the braille blank, a tag character, a
variation selector or another default-ignorable one (combining grapheme joiner, Khmer inherent
vowels, Mongolian free variation selectors, shorthand and musical format controls). Read in
order, so the characters of an escape sequence are never seen."""


def _blank(content: Any) -> bool:
    """True when a content (or an `answer`) has no text to show: empty, or only whitespace,
    control characters (NUL), zero-width, bidi formatting and other invisible characters, and
    ANSI escape sequences; `None` too."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "".join(_texts(content))
    else:
        return True
    return not any(found.lastgroup == "seen" for found in _SHOWN.finditer(text))


def _nothing_to_relay(content: Any) -> bool:
    """True when a stop's content has nothing to relay: `_blank`, or the text `null` (in text
    blocks too, surrounding whitespace aside), what LangChain makes of a tool's `None`."""
    if _blank(content):
        return True
    text = content if isinstance(content, str) else "".join(_texts(content))
    return str.strip(text) == _STRINGIFIED_NONE  # a str subclass's own strip never runs


_STRINGIFIED_NONE = "null"
"""What LangChain makes of a tool's `None` content (`json.dumps(None)`): the tool returned
nothing to relay."""


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
class Earlier:
    """One earlier tool turn of the current run: a model call's tool calls and their results.

    Attributes:
        asking: The AIMessage that asked for the calls.
        results: The ToolMessages after it, in message order.
    """

    asking: AIMessage
    results: tuple[ToolMessage, ...]


@dataclass(frozen=True, kw_only=True)
class Turn:
    """The current tool turn: the last AIMessage and the ToolMessages after it.

    Attributes:
        asking: The AIMessage whose tool calls the turn answers (`None` when the results follow
            no AIMessage, e.g. a hand-made message list).
        results: The ToolMessages after it, in message order. Messages of other types between
            them (a hook's reminder, a summary) are skipped.
        earlier: The run's earlier tool turns whose results no model text answered yet, oldest
            first (read back to the run's start, or to the last AIMessage with text or without
            tool calls). A stop relays their completed results before the turn's own.
    """

    asking: AIMessage | None
    results: tuple[ToolMessage, ...]
    earlier: tuple[Earlier, ...] = ()

    @property
    def id(self) -> str | None:
        """The asking AIMessage's id: which turn this is (`None` when unknown)."""
        return self.asking.id if self.asking is not None else None

    def with_results(self, change: Any) -> Turn:
        """This turn with `change(message)` applied to every result, earlier turns' included."""
        earlier = tuple(
            Earlier(asking=e.asking, results=tuple(change(m) for m in e.results))
            for e in self.earlier
        )
        return replace(self, results=tuple(change(m) for m in self.results), earlier=earlier)


def current_turn(
    messages: Sequence[BaseMessage],
    *,
    since: str | None = None,
    earlier: bool = True,
    end: int | None = None,
) -> Turn | None:
    """The tool turn at the end of `messages`, or `None` when there is none.

    Scans back to the last AIMessage for the turn. The turn exists when that AIMessage asked for
    tool calls (or, with no AIMessage at all, when ToolMessages are present); messages of other
    types after the results (a `before_model` hook's reminder) do not hide it. Its `earlier`
    turns are read further back, never past the message whose id is `since` (the last message
    before the run began; without it, past the last HumanMessage), nor past an AIMessage with
    text or without tool calls.

    Args:
        messages: The thread's messages.
        since: The id of the last message before the run began (see above).
        earlier: False leaves `Turn.earlier` empty: only a stop shows earlier turns, so the
            routers read them once a turn stops (`decide_turn` of a turn read without them
            decides the same; only its relay lacks the earlier results).
        end: Read `messages[:end]` (without copying them); all of them when `None`.
    """
    results: list[ToolMessage] = []
    index = (len(messages) if end is None else end) - 1
    while index >= 0:
        message = messages[index]
        # the exact types first: isinstance on a message class is slower
        if type(message) is ToolMessage:
            results.append(message)
        elif type(message) is AIMessage or isinstance(message, AIMessage):
            if not message.tool_calls:
                return None
            results.reverse()
            found: tuple[Earlier, ...] = ()
            if earlier and (message.id is None or message.id != since) and not _has_text(message):
                found = _earlier(messages, index, since)
            return _frozen(Turn, {"asking": message, "results": tuple(results), "earlier": found})
        elif isinstance(message, ToolMessage):
            results.append(message)
        index -= 1
    if not results:
        return None
    results.reverse()
    return _frozen(Turn, {"asking": None, "results": tuple(results), "earlier": ()})


def _has_text(message: AIMessage) -> bool:
    """True when the model wrote text (which answers the results before it)."""
    return bool(content_text(message.content).strip())


def _earlier(messages: Sequence[BaseMessage], index: int, since: str | None) -> tuple[Earlier, ...]:
    """The tool turns before `messages[index]` that belong to the run and no text answered (an
    empty answer, with neither text nor tool calls, answers nothing and is passed over)."""
    turns: list[Earlier] = []
    results: list[ToolMessage] = []
    index -= 1
    while index >= 0:
        message = messages[index]
        if since is not None and message.id == since:
            break
        if since is None and isinstance(message, HumanMessage):
            break  # no explicit start: a person's message begins the run
        if isinstance(message, AIMessage):
            if not message.tool_calls and not _has_text(message):
                index -= 1  # an empty answer (the model asked again) answered nothing
                continue
            if not message.tool_calls or _has_text(message):
                break
            results.reverse()
            turns.append(Earlier(asking=message, results=tuple(results)))
            results = []
        elif isinstance(message, ToolMessage):
            results.append(message)
        index -= 1
    turns.reverse()
    return tuple(turns)


def _signals(turn: Turn | None) -> tuple[CallSignal, ...]:
    """Signals of the turn's results, in the order of the AIMessage's tool calls."""
    if turn is None or not turn.results:
        return ()
    calls = turn.asking.tool_calls if turn.asking is not None else []
    if not calls:
        return tuple(read_signal(m) for m in turn.results)
    results = turn.results
    if (
        len(calls) == 1
        and len(results) == 1
        and results[0].tool_call_id == (calls[0].get("id") or "")
    ):
        return (read_signal(results[0], tool=calls[0]["name"]),)  # one call, its one result
    by_id: dict[str, ToolMessage] = {}
    for m in results:
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
    if policy.parallel == "all":
        for s in signals:
            if s.problem is not None or not s.stop:
                return ()
        return signals
    valid = [s for s in signals if s.problem is None]
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


def _call_key(call: Any) -> str:
    """What makes two calls the same question: the tool's name and its arguments.

    Arguments that cannot be written as JSON (unsortable keys, or nested deeper than the
    interpreter's recursion limit allows: a model chooses them) make the call stand on its own.
    """
    try:
        return json.dumps([call.get("name"), call.get("args")], sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):  # the call stands on its own
        return f"id:{call.get('id')}"


def _completed_stop(message: ToolMessage, tool: str) -> bool:
    """A result that completed and asked to stop (shown by a stop of the run it belongs to)."""
    signal = read_signal(message, tool=tool)
    return signal.valid and signal.stop and signal.reason is Outcome.COMPLETED


def _answered_calls(
    asking: AIMessage | None, results: Sequence[ToolMessage]
) -> list[tuple[Any, ToolMessage]]:
    """`(call, result)` for each call of `asking` that has a result, in tool-call order."""
    by_id: dict[str, ToolMessage] = {}
    for m in results:
        by_id.setdefault(m.tool_call_id, m)
    calls = asking.tool_calls if asking is not None else []
    if not calls:
        return [({"name": m.name, "args": None, "id": m.tool_call_id}, m) for m in by_id.values()]
    pairs: list[tuple[Any, ToolMessage]] = []
    for call in calls:
        found = by_id.get(call.get("id") or "")
        if found is not None:
            pairs.append((call, found))
    return pairs


def _shown_results(
    turn: Turn | None, deciding: tuple[CallSignal, ...], *, completed_in_turn: bool = False
) -> list[ToolMessage]:
    """The results a stop shows: the run's completed ones no text answered, then the deciding.

    Earlier turns' completed results come first, in call order; a result asked again (same tool,
    same arguments) in a later turn is shown once, where it was asked last. `completed_in_turn`
    takes the current turn's completed results instead of `deciding` (budget stops).
    """
    if turn is None:
        return []
    shown: list[tuple[int, str, ToolMessage]] = []
    for number, earlier in enumerate(turn.earlier):
        for call, message in _answered_calls(earlier.asking, earlier.results):
            if _completed_stop(message, call.get("name") or message.name or "?"):
                shown.append((number, _call_key(call), message))
    last = len(turn.earlier)
    pairs = _answered_calls(turn.asking, turn.results)
    if completed_in_turn:
        current = [(call, m) for call, m in pairs if _completed_stop(m, call.get("name") or "?")]
    else:
        by_id = {m.tool_call_id: (call, m) for call, m in reversed(pairs)}
        plain = {m.tool_call_id: m for m in reversed(turn.results)}
        current = []
        for s in deciding:
            pair = by_id.get(s.tool_call_id)
            if pair is not None:
                current.append(pair)
            elif s.tool_call_id in plain:
                message = plain[s.tool_call_id]
                current.append(({"name": s.tool, "args": None, "id": s.tool_call_id}, message))
    shown.extend((last, _call_key(call), message) for call, message in current)
    latest: dict[str, int] = {}
    for number, key, _ in shown:
        latest[key] = number
    return [message for number, key, message in shown if latest[key] == number]


def shown(message: ToolMessage, *, to_model: bool = False) -> str | list[str | dict[str, Any]]:
    """What a stop shows of one result: its `answer`, else its content (JSON in a fence).

    `to_model`: what a later model call sees of it instead, the content (never the `answer`).
    Blocks (of an `answer` or a content) are shown as one `{"type": "text", "text": ...}` block
    holding their texts; a content's other blocks (an image, a file) are not shown.
    """
    artifact = message.artifact
    if not to_model and isinstance(artifact, dict) and dict.__contains__(artifact, "answer"):
        answer = dict.__getitem__(artifact, "answer")
        if is_answer(answer):
            if type(answer) is str:
                return answer
            return [{"type": "text", "text": "".join(dict.__getitem__(b, "text") for b in answer)}]
    content = message.content
    if isinstance(content, str):
        text = content.strip()
        if text[:1] in ("{", "["):
            try:
                json.loads(text)
            except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
                return content
            return f"```json\n{text}\n```"
        return content
    # Content blocks: only their text is relayed, in one text block, since an assistant message
    # is text for every provider (an image or a file block there is refused, and Anthropic
    # refuses an empty text block).
    return [{"type": "text", "text": "".join(_texts(content))}]


def _texts(content: list[Any]) -> list[str]:
    """The texts of a content's blocks: strings and `{"type": "text", "text": str}` blocks."""
    texts: list[str] = []
    for block in content:  # plain str and dict methods: a subclass's overrides never run
        if isinstance(block, str):
            texts.append(str.__str__(block))
        elif isinstance(block, dict) and dict.get(block, "type") == "text":
            text = dict.get(block, "text")
            if isinstance(text, str):
                texts.append(str.__str__(text))
    return texts


def _joined(
    messages: Sequence[ToolMessage], tail: str | None = None, *, to_model: bool = False
) -> str | list[str | dict[str, Any]]:
    """One result verbatim; several (or results and a policy text) joined as text."""
    parts = [shown(m, to_model=to_model) for m in messages]
    if tail is not None:
        parts.append(tail)
    if len(parts) == 1:
        return parts[0]
    return "\n\n".join(content_text(p) for p in parts)


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
    since: str | None = None,
    transient_count: int = 0,
    remaining_steps: int | None = None,
    loop_steps: int = 2,
) -> Decision:
    """Decide whether the run stops after the current tool turn.

    Args:
        messages: The thread's whole message list. Only the current run is read: the current
            turn (the last AIMessage and the ToolMessages after it), and for the relay the run's
            earlier tool turns that no model text answered yet (see `current_turn`).
        policy: The stop policy; `StopPolicy()` when omitted.
        since: The id of the last message before the run began (its input), so a relay never
            shows results of an earlier run or of the caller's own messages. `None`: the run is
            taken to begin at the last HumanMessage (routers pass the explicit start).
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
    `{"stop": true}` is just text), and messages before the current run are never read.
    """
    return decide_turn(
        current_turn(messages, since=since),
        policy,
        transient_count=transient_count,
        remaining_steps=remaining_steps,
        loop_steps=loop_steps,
    )


def _decide_by_tool(
    turn: Turn | None,
    policy: StopPolicy,
    transient_count: int,
    remaining_steps: int | None,
    loop_steps: int,
) -> Decision:
    """`decide_turn` under per-tool modes (`StopPolicy.modes`).

    Only the calls of tools whose mode stops can stop the turn (under the parallel rule, the
    calls of tools in `never` mode count as going on); the stop takes its deciding tool's mode.
    When nothing stops, the turn is judged again as if every tool stopped, as `never` mode
    judges it: what would have stopped is the decision's `would_stop`."""
    signals = _signals(turn)
    shadowed = {s.tool for s in signals if policy.tool_mode(s.tool) == "never"}
    live = signals
    if shadowed:
        live = tuple(
            replace(s, stop=False, would_stop=False) if s.tool in shadowed else s for s in signals
        )
    deciding = _stopping(live, policy) if any(s.stop for s in live) else ()
    if deciding:
        top = min(deciding, key=lambda s: policy.rank(s.reason.value if s.reason else ""))
        live_policy = policy.with_modes(policy.tool_mode(top.tool), None)
        return decide_turn(
            turn,
            live_policy,
            transient_count=transient_count,
            remaining_steps=remaining_steps,
            loop_steps=loop_steps,
            signals=live,
        )
    base = policy.with_modes(policy.mode, None)
    decision = decide_turn(
        turn,
        base,
        transient_count=transient_count,
        remaining_steps=remaining_steps,
        loop_steps=loop_steps,
        signals=live,
    )
    if not shadowed or decision.stop or decision.would_stop is not None:
        return decision
    judged = tuple(replace(s, stop=s.stop or s.would_stop) for s in signals)
    shadow = _stopping(judged, policy) if any(s.stop for s in judged) else ()
    if not shadow:
        return decision
    top = min(shadow, key=lambda s: policy.rank(s.reason.value if s.reason else ""))
    assert top.reason is not None  # deciding signals are valid
    return replace(decision, would_stop=_STOP_RULES[top.reason], deciding=shadow)


def decide_turn(
    turn: Turn | None,
    policy: StopPolicy | None = None,
    *,
    transient_count: int = 0,
    remaining_steps: int | None = None,
    loop_steps: int = 2,
    signals: tuple[CallSignal, ...] | None = None,
) -> Decision:
    """`decide` for a turn already found with `current_turn` (the routers' entry point).

    `signals`: the turn's signals as already read (`None`: read from the turn)."""
    policy = policy if policy is not None else StopPolicy()
    if signals is None:
        if policy.modes:
            return _decide_by_tool(turn, policy, transient_count, remaining_steps, loop_steps)
        signals = _signals(turn)
    transient = 0
    asks = False  # whether any call asks to stop (only such calls can decide a stop)
    for s in signals:  # `_is_transient`, inline: this runs on every tool turn
        if s.reason is Outcome.TRANSIENT or s.problem is Problem.TOOL_ERROR:
            transient += 1
        if s.stop:
            asks = True
    rule = Rule.NONE
    if policy.mode == "never" and any(s.would_stop for s in signals):
        # a sub-agent that would have stopped: recorded as this level's would-stop too
        asks = True
        judged = tuple(replace(s, stop=s.stop or s.would_stop) for s in signals)
        deciding = _stopping(judged, policy)
    else:
        deciding = _stopping(signals, policy) if asks else ()
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
        return _frozen(
            Decision,
            {
                "stop": False,
                "rule": rule,
                "would_stop": would_stop,
                "narrate": False,
                "signals": signals,
                "deciding": deciding if would_stop is not None else (),
                "transient_in_turn": transient,
                "relay": None,
                "relayed": (),
            },
        )
    narrate = rule in (Rule.COMPLETED, Rule.FATAL) and policy.mode == "polish"
    narrate = narrate or (
        rule in (Rule.RETRY_BUDGET, Rule.STEP_BUDGET) and policy.on_budget == "model"
    )
    relay, relayed, for_model = _relay_for(rule, turn, deciding, policy)
    return Decision(
        stop=True,
        rule=rule,
        would_stop=would_stop,
        narrate=narrate,
        signals=signals,
        deciding=deciding,
        transient_in_turn=transient,
        relay=relay,
        relayed=relayed,
        for_model=for_model,
    )


def _is_transient(signal: CallSignal) -> bool:
    """Counts against the retry budget: a transient failure, or a tool exception."""
    return signal.reason is Outcome.TRANSIENT or signal.problem is Problem.TOOL_ERROR


def budget_relay(
    turn: Turn | None, policy: StopPolicy
) -> tuple[
    str | list[str | dict[str, Any]], tuple[str, ...], str | list[str | dict[str, Any]] | None
]:
    """The relay of a step-budget stop that replaces a model answer asking for more tools.

    Returns the relay's content, the call ids it shows and its text for later model calls (as
    `Decision.for_model`): as any budget stop, the run's completed results no text answered
    (`turn` read with its earlier turns), then the policy's `step_budget_message`."""
    return _relay_for(Rule.STEP_BUDGET, turn, (), policy)


def _relay_for(
    rule: Rule,
    turn: Turn | None,
    deciding: tuple[CallSignal, ...],
    policy: StopPolicy,
) -> tuple[
    str | list[str | dict[str, Any]], tuple[str, ...], str | list[str | dict[str, Any]] | None
]:
    """The final content for a stop by `rule`, the call ids it shows, and what later model calls
    see in its place (`None`: the same content; see `Decision.for_model`).

    Completed and fatal stops show the run's unanswered completed results, then the deciding
    calls'; budgets show the run's completed results, then the policy's text; a policy block
    shows only the policy's text (nothing a guard refused is relayed).
    """
    if rule is Rule.POLICY_BLOCK:
        return policy.policy_block_message, (), None
    tail = None
    if rule in (Rule.RETRY_BUDGET, Rule.STEP_BUDGET):
        tail = (
            policy.retry_budget_message if rule is Rule.RETRY_BUDGET else policy.step_budget_message
        )
        found = _shown_results(turn, (), completed_in_turn=True)
    else:
        found = _shown_results(turn, deciding)
    relayed = tuple(m.tool_call_id for m in found)
    if not found and tail is None:
        return "", relayed, None
    relay = _joined(found, tail)
    answered = any(
        isinstance(m.artifact, dict) and dict.__contains__(m.artifact, "answer") for m in found
    )
    return relay, relayed, _joined(found, tail, to_model=True) if answered else None
