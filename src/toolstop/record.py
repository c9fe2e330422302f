"""The stop record: why a run ended, what it cost. Plain JSON, never tool content or arguments."""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Collection, Iterable
from typing import Any, NotRequired

from langchain_core.messages import AIMessage, ToolMessage
from typing_extensions import TypedDict

from toolstop.decision import (
    MALFORMED_SIGNALS,
    PROBLEMS_NOT_INVALID,
    CallSignal,
    Decision,
    Problem,
    Rule,
)
from toolstop.outcome import Outcome
from toolstop.policy import StopPolicy

__all__ = [
    "ANSWER_FAILED_MAX",
    "RECORD_SCHEMA_VERSION",
    "AfterFirst",
    "AnswerFailed",
    "EndedAfter",
    "InvalidSignal",
    "Judged",
    "ReAsk",
    "Savings",
    "StopRecord",
    "answer_failed_why",
    "count_model_call",
    "failed_calls",
    "fold_turn",
    "fold_unanswered",
    "new_record",
    "reads_as_error",
    "stopped",
    "successful",
]

RECORD_SCHEMA_VERSION = 5
"""The stop record's shape. Readers check it; a record without the field is version 1 (before
`unsignalled` was told apart from invalid and `would_save` was recorded). Version 3 added
`relayed` and `on_budget`; readers of older records take `[]` and `"message"`. Version 4 added
`calls_by_tool` and `ended_after`; readers treat them as absent in older records. Version 5
added `after_first`, `asked`, `would_skip` and `ended_after.judged` (absent before: unknown,
not empty)."""

SKIPPED_MAX = 16
"""At most this many distinct tool names are kept in `would_skip` and in each `after_first`
entry's `skipped` (the first ones called); the count of runs cut short is exact regardless."""

AFTER_FIRST_MAX = 64
"""At most this many tools get an `after_first` entry per run (the first ones to succeed)."""

ANSWER_FAILED_MAX = 16
"""At most this many `answer_failed` entries are kept per run (the first ones)."""


class InvalidSignal(TypedDict):
    """One tool call whose artifact was not a valid signal (routing went on with the model)."""

    tool: str
    tool_call_id: str
    problem: str


class Savings(TypedDict):
    """What hard mode would have saved in a `never`-mode run, as observed in that run."""

    model_calls: int
    input_tokens: int
    output_tokens: int


class Judged(TypedDict):
    """What the final answer did with one tool's result (see `toolstop._judge`).

    Words and field names only, never content."""

    shape: str
    """`empty`, `object`, `list`, `value` or `prose`."""
    action: str
    """`asked`, `computed`, `selected`, `relayed`, `restated` or `own`; `failed` when every
    result of the tool in that turn was an error (a ToolMessage with status `error`, or a text
    that `reads_as_error`): an error never serves as the answer."""
    fields: list[str]
    """The result's JSON keys whose values the answer used (masked, at most 8)."""
    earlier: NotRequired[list[str]]
    """The tools of earlier results that held the numbers the answer stated and this result
    did not (masked, at most 8): facts restated from them, not computed. Absent when there
    were none, and in records written before it was recorded (a `computed` there may be
    such a restatement)."""


class EndedAfter(TypedDict):
    """The model's final answer right after a tool turn: its cost, and what it repeats.

    What that answer cost and how much of it repeats each tool's result. Numbers only, never
    content."""

    tools: dict[str, float]
    """Each tool of that turn -> `answer_overlap`: the share (0..1) of the final answer's
    case-folded word tokens that also occur in that tool's results of the turn."""
    input_tokens: int
    """The final model call's input tokens (provider usage; 0 when it reported none)."""
    output_tokens: int
    """The final model call's output tokens."""
    judged: NotRequired[dict[str, Judged]]
    """Each tool of that turn -> what the answer did with its result (since schema version 5)."""


class AfterFirst(TypedDict):
    """What the run did after one tool's first successful call.

    What hard mode would have saved, and skipped, had that tool signalled a stop there. Numbers
    and tool names only."""

    model_calls: int
    """Model calls made after the turn of the tool's first successful call (the final answer's
    included): hard mode would have relayed the result instead."""
    input_tokens: int
    output_tokens: int
    skipped: list[str]
    """Tools called in later turns of the run, which a stop there would never have run
    (distinct names in call order, at most `SKIPPED_MAX`). Not empty: a cut-short run."""


class ReAsk(TypedDict):
    """Whether the user asked again after the thread's previous run ended on a tool result.

    Written into the next run's record: its new input (`restated`, `complaint`) or a call of it
    that repeats a deciding call of the previous run (`same_call`). No content, only the verdict.
    """

    run: int
    """The previous run's number."""
    asked_again: bool
    why: str
    """`restated`, `complaint`, `same_call`, or `none`."""
    stopped: bool
    """The previous run stopped on the result (True) or, in `never` mode, only would have."""
    arm: NotRequired[str]
    """The previous run's canary arm, when it had one."""
    tools: list[str]
    """The previous run's deciding tools."""


class AnswerFailed(TypedDict):
    """One call of a converted tool whose `answer` did not render: the stop showed its content.

    A tool name and a short reason, never content."""

    tool: str
    why: str
    """The exception's type (`KeyError`, `IndexError`, `ValueError`, ...), or `blank` for a
    text with nothing but whitespace (the full reason is in the call's artifact and on logger
    `toolstop`)."""


class StopRecord(TypedDict):
    """What one run of an agent did and why it ended. JSON-serialisable; kept in graph state.

    It holds names, ids, counts and rules only: never tool content, never tool arguments.
    """

    schema_version: int
    """The record's shape (`RECORD_SCHEMA_VERSION`), so readers of stored records can evolve."""
    run: int
    """Which run of the thread this is: 1, 2, ... (each invocation with new input is a run;
    resuming an interrupted run continues it). Without a checkpointer every run is 1."""
    rule: str
    """`completed`, `fatal`, `policy_block`, `retry_budget`, `step_budget`, or `none`."""
    stopped: bool
    """True when toolstop ended the run (a stop node ran); False when the model simply answered."""
    mode: str
    parallel: str
    would_stop: str | None
    """In `never` mode: the first rule that would have stopped this run."""
    would_save: Savings
    """In `never` mode: the model calls and tokens this run spent after the tool turn that would
    have stopped it (observed, not estimated): what hard mode would have saved. Zero when
    nothing would have stopped, and in the other modes."""
    tools: list[str]
    """Names of the calls that decided the stop (or, in `never` mode, would have)."""
    tool_call_ids: list[str]
    relayed: NotRequired[list[str]]
    """The call ids whose results the final answer shows, in the order shown: the run's
    earlier completed results, then the deciding calls'. Empty when the model answered (also
    after a narrated stop). Absent in records before schema version 3."""
    on_budget: NotRequired[str]
    """How a spent budget ends a run: `message` (the policy's text) or `model` (one more model
    call). Absent in records before schema version 3."""
    invalid_signals: list[InvalidSignal]
    outcomes: dict[str, int]
    """Tool calls by reason, plus `invalid`, `unsignalled` (no signal: a plain tool) and
    `rejected` (by a human reviewer)."""
    transient_retries: int
    tool_turns: int
    model_calls: int
    input_tokens: int
    output_tokens: int
    ended_by: NotRequired[str]
    """Present when another middleware ended the run (rule `none`, not the model's answer):
    `ModelCallLimitMiddleware` (its limit was reached), or `another middleware` (a guard's
    `jump_to: "end"`, a run left on a tool result or with open tool calls) when the name cannot
    be known."""
    ended_by_message: NotRequired[str]
    """The message that middleware ended the run with, when it is langchain's own (the limit's
    `Model call limits exceeded: ...`); never a guard's text, which may quote the user."""
    calls_by_tool: dict[str, int]
    """Tool calls of the run by tool name (since schema version 4)."""
    ended_after: EndedAfter | None
    """Set when the run's final answer was a model call made right after a tool turn (since
    schema version 4): the run ended after those tools, and hard mode could have ended it
    without that call had they signalled a stop. `None` otherwise (a relay ended the run, the
    model answered without calling a tool, another middleware ended it, or it was
    interrupted)."""
    after_first: NotRequired[dict[str, AfterFirst]]
    """Each tool that succeeded in this run (a result that is not an error, a rejection or a
    transient/fatal/policy signal) -> what the run spent, and which tools it called, after the
    tool's first successful call (since schema version 5). A tool whose entry has no model
    call ended the run on its result (a hand-off, or the process ended)."""
    asked: NotRequired[list[str]]
    """The tools the run's last model call asked for (distinct, at most `SKIPPED_MAX`; empty
    when it asked for none), since schema version 5. A run left open on those calls (the
    process ended, a hand-off) counts toward them even when its last turn was never folded."""
    narrator_calls: NotRequired[int]
    """Calls of the policy's narrator (`StopPolicy(narrator=...)`), apart from `model_calls`;
    present only when a narrator ran. Its tokens are `narrator_input_tokens` and
    `narrator_output_tokens`, apart from the agent model's."""
    narrator_input_tokens: NotRequired[int]
    narrator_output_tokens: NotRequired[int]
    would_skip: NotRequired[list[str]]
    """In `never` mode: the tools called after the turn that would have stopped the run, which
    hard mode would never have run (since schema version 5). Not empty: a cut-short run."""
    handed_off_to: NotRequired[str]
    """The agent a hand-off (langgraph-swarm) gave the conversation to: the run ended there,
    without an answer of its own. Absent when the run did not end on a hand-off."""
    handoff_overridden: NotRequired[str]
    """The agent a hand-off asked for in the turn whose stop ended the run: the stop was
    honoured and the conversation stayed with this agent. Absent otherwise."""
    arm: NotRequired[str]
    """`canary` or `shadow`: the run's arm under `StopPolicy(canary=...)`. Absent without one."""
    modes: NotRequired[dict[str, str]]
    """Tools whose mode in this run differs from `mode` (a canary's shadow arm, per-tool
    `modes`, a way back). Absent when none does."""
    sent_back: NotRequired[list[str]]
    """Tools the policy's way back sent back to `never` for this run. Absent when none was."""
    reask: NotRequired[ReAsk]
    """Whether the user asked again after the previous run of the thread, when that run ended
    (or in `never` mode would have ended) on a tool result: `completed` or `fatal`."""
    answer_failed: NotRequired[list[AnswerFailed]]
    """The calls of converted tools (`toolstop.convert`) whose `answer` did not render (a
    missing field, a blank text): their stop showed the content instead. Present only when one
    failed (at most `ANSWER_FAILED_MAX`, the first ones); absent otherwise, and in records
    written before it was recorded."""


_OUTCOME_KEYS = {o: o.value for o in Outcome}
"""Each outcome's key in `StopRecord.outcomes` (a plain string)."""

_NO_OUTCOMES = {o.value: 0 for o in Outcome} | {"invalid": 0, "unsignalled": 0, "rejected": 0}
"""`StopRecord.outcomes` of a run with no tool turn (copied into each new record)."""


def new_record(policy: StopPolicy, *, run: int = 1) -> StopRecord:
    """A fresh record for run number `run` under `policy`."""
    return StopRecord(
        schema_version=RECORD_SCHEMA_VERSION,
        run=run,
        rule=Rule.NONE.value,
        stopped=False,
        mode=policy.mode,
        parallel=policy.parallel,
        would_stop=None,
        would_save=Savings(model_calls=0, input_tokens=0, output_tokens=0),
        tools=[],
        tool_call_ids=[],
        relayed=[],
        on_budget=policy.on_budget,
        invalid_signals=[],
        outcomes=dict(_NO_OUTCOMES),
        transient_retries=0,
        tool_turns=0,
        model_calls=0,
        input_tokens=0,
        output_tokens=0,
        calls_by_tool={},
        ended_after=None,
        after_first={},
        asked=[],
        would_skip=[],
    )


_NOT_SUCCESS = frozenset({Outcome.TRANSIENT, Outcome.FATAL, Outcome.POLICY_BLOCK})


def successful(signal: CallSignal) -> bool:
    """Whether a call succeeded, as a converted tool would signal a stop on.

    A result that is not an error, a rejection, a malformed signal, or a transient, fatal or
    blocked outcome."""
    if signal.problem is not None:
        return signal.problem is Problem.UNSIGNALLED
    return signal.reason not in _NOT_SUCCESS


ERROR_SCAN = 20_000
"""A JSON object result of at most this many characters is parsed to look for an error key;
a longer one is taken as a success (bounded work on the hot path)."""

_ERROR_START = re.compile(
    r"[^\w{\"]{0,3}(?:error|exception|traceback|failed|failure)\b", re.IGNORECASE
)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            b if isinstance(b, str) else str(b.get("text") or "")
            for b in content[:20]
            if isinstance(b, (str, dict))
        )
    return ""


def reads_as_error(content: Any) -> bool:
    """Whether a result that carries no signal reads as an error message.

    A text that starts with "error", "exception", "traceback", "failed" or "failure" (any case,
    after at most three punctuation characters, not a JSON object's or string's), or a JSON
    object (at most `ERROR_SCAN` characters) with a non-empty top-level `error`/`errors` or
    `"success": false`. A converted tool knows when it failed and would not signal `completed`
    then: its first *successful* call is where hard mode stops, so `after_first` starts there.
    A heuristic on the text; a longer result is taken as a success."""
    text = _text(content).lstrip()
    if _ERROR_START.match(text[:40]):
        return True
    if not text.startswith("{") or len(text) > ERROR_SCAN:
        return False
    if '"error' not in text and '"success"' not in text and "\\u" not in text:
        return False  # no such key (only a `\u` escape could spell one otherwise): not parsed
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False
    if not isinstance(data, dict):
        return False
    if any(data.get(key) not in (None, False, "", [], {}) for key in ("error", "errors")):
        return True
    success = data.get("success")
    return success is False or (isinstance(success, str) and success.casefold() == "false")


def failed_calls(
    record: StopRecord, decision: Decision, results: Iterable[ToolMessage]
) -> frozenset[str]:
    """The tool call ids of a turn whose unsignalled result reads as an error.

    Such a call (`reads_as_error`) is not a tool's first successful call. Only the calls of
    tools without an `after_first` entry yet are read."""
    after = record.get("after_first")
    if after is None:
        return frozenset()
    wanted = {
        s.tool_call_id
        for s in decision.signals
        if s.problem is Problem.UNSIGNALLED and s.tool not in after
    }
    if not wanted:
        return frozenset()
    return frozenset(
        m.tool_call_id for m in results if m.tool_call_id in wanted and reads_as_error(m.content)
    )


def _skipping(after: dict[str, AfterFirst], names: list[str]) -> dict[str, AfterFirst]:
    """Each `after_first` entry with `names` added to the tools it skipped.

    `after` itself when no entry changes (the usual turn: its tools were skipped already); the
    caller copies it before adding an entry."""
    if not after:
        return {}
    changed: dict[str, AfterFirst] | None = None
    for tool, entry in after.items():
        skipped = _merged(entry["skipped"], names)
        if skipped is not entry["skipped"]:
            if changed is None:
                changed = dict(after)
            changed[tool] = AfterFirst(
                model_calls=entry["model_calls"],
                input_tokens=entry["input_tokens"],
                output_tokens=entry["output_tokens"],
                skipped=skipped,
            )
    return after if changed is None else changed


def _merged(names: list[str], more: list[str]) -> list[str]:
    """`names` with the new ones of `more` appended (distinct, at most `SKIPPED_MAX`).

    The same list when nothing is added."""
    if len(more) == 1:  # one tool in the turn: the usual case
        name = more[0]
        if name in names or len(names) >= SKIPPED_MAX:
            return names
        return [*names, name]
    added = [n for n in dict.fromkeys(more) if n not in names][: SKIPPED_MAX - len(names)]
    return [*names, *added] if added else names


def fold_turn(record: StopRecord, decision: Decision, failed: Collection[str] = ()) -> StopRecord:
    """Return `record` with one tool turn's signals added (a new dict; `record` is not changed).

    `failed`: the tool call ids whose unsignalled result reads as an error (`failed_calls`):
    they do not start an `after_first` entry."""
    updated = record.copy()
    outcomes = updated["outcomes"] = dict(record["outcomes"])
    calls = updated["calls_by_tool"] = dict(record.get("calls_by_tool") or {})
    for signal in decision.signals:
        calls[signal.tool] = calls.get(signal.tool, 0) + 1
        if signal.problem is None and signal.reason is not None:  # a valid signal: the usual
            key = _OUTCOME_KEYS[signal.reason]
            outcomes[key] = outcomes.get(key, 0) + 1
        elif signal.problem is not None and signal.problem in PROBLEMS_NOT_INVALID:
            outcomes[signal.problem.value] = outcomes.get(signal.problem.value, 0) + 1
        elif signal.problem is not None:
            outcomes["invalid"] = outcomes.get("invalid", 0) + 1
            if signal.problem in MALFORMED_SIGNALS:
                _warn_once(signal.tool, signal.problem)
            if updated["invalid_signals"] is record["invalid_signals"]:
                updated["invalid_signals"] = list(record["invalid_signals"])
            updated["invalid_signals"].append(
                InvalidSignal(
                    tool=signal.tool, tool_call_id=signal.tool_call_id, problem=signal.problem.value
                )
            )
        if signal.answer_failed is not None:
            _fold_answer_failed(updated, signal)
    updated["tool_turns"] = record["tool_turns"] + 1
    _fold_later(record, updated, decision, failed)
    if not decision.stop:
        updated["transient_retries"] = record["transient_retries"] + decision.transient_in_turn
    if decision.would_stop is not None and record["would_stop"] is None:
        updated["would_stop"] = decision.would_stop.value
        updated["tools"] = [s.tool for s in decision.deciding]
        updated["tool_call_ids"] = [s.tool_call_id for s in decision.deciding]
    return updated


_WHY = re.compile(r"([A-Za-z_][A-Za-z0-9_]{0,63}):")


def answer_failed_why(text: Any) -> str:
    """The record's short reason for an artifact's `answer_failed` text (which may be hostile).

    The exception type it starts with (`KeyError: 'seat'` -> `KeyError`), `blank`, or
    `unreadable` for anything else: never the rest of the text, which may quote content."""
    if not isinstance(text, str):
        return "unreadable"
    found = _WHY.match(text)
    return found.group(1) if found else "unreadable"


def _fold_answer_failed(updated: StopRecord, signal: CallSignal) -> None:
    """Add one call's failed `answer` to `updated["answer_failed"]` (a new list)."""
    failed = list(updated.get("answer_failed") or [])
    if len(failed) < ANSWER_FAILED_MAX:
        failed.append(AnswerFailed(tool=signal.tool, why=answer_failed_why(signal.answer_failed)))
    updated["answer_failed"] = failed


def _fold_later(
    record: StopRecord, updated: StopRecord, decision: Decision, failed: Collection[str]
) -> None:
    """Fold one turn into `would_skip` and `after_first` of `updated`.

    Its tools are skipped by every earlier stop; its successful tools start their own entry."""
    names = [s.tool for s in decision.signals]
    if record["would_stop"] is not None and "would_skip" in record:
        updated["would_skip"] = _merged(record["would_skip"], names)
    after = record.get("after_first")
    if after is None:  # a record of an older shape, carried on: left as it is
        return
    later = _skipping(after, names)
    for signal in decision.signals:
        if (
            signal.tool not in later
            and len(later) < AFTER_FIRST_MAX
            and successful(signal)
            and signal.tool_call_id not in failed
        ):
            if later is after:  # `_skipping` returned the record's own dict: not changed here
                later = dict(after)
            later[signal.tool] = AfterFirst(
                model_calls=0, input_tokens=0, output_tokens=0, skipped=[]
            )
    updated["after_first"] = later


def fold_unanswered(record: StopRecord, names: list[str]) -> StopRecord:
    """Return `record` with tool calls that never got a result added to what stops skip.

    A run left open on them, or cut off after it asked for them: each `after_first` entry's
    `skipped` and, once the run would have stopped, `would_skip` get `names`, since a stop on
    an earlier successful call would never have asked for them. A new dict (`record` is not
    changed); `record` itself when there is nothing to add."""
    if not names:
        return record
    updated = record.copy()
    if record["would_stop"] is not None and "would_skip" in record:
        updated["would_skip"] = _merged(record["would_skip"], names)
    after = record.get("after_first")
    if after:
        updated["after_first"] = _skipping(after, names)
    return updated


def stopped(record: StopRecord, decision: Decision) -> StopRecord:
    """Return `record` marked as ended by `decision` (which must be a stop)."""
    updated = record.copy()
    updated["rule"] = decision.rule.value
    updated["stopped"] = True
    updated["tools"] = [s.tool for s in decision.deciding]
    updated["tool_call_ids"] = [s.tool_call_id for s in decision.deciding]
    updated["relayed"] = [] if decision.narrate else list(decision.relayed)
    return updated


def count_model_call(record: StopRecord, response: Any) -> StopRecord:
    """Return `record` with one model call and its `usage_metadata` tokens added.

    Tokens come only from the provider's `usage_metadata`; a response without it adds a call and
    no tokens (it is not estimated here, to keep the hot path free of O(history) work). Once the
    run would have stopped (`would_stop`, never mode) the call is also added to `would_save`.
    """
    is_answer = type(response) is AIMessage or isinstance(response, AIMessage)
    usage = response.usage_metadata if is_answer else None
    input_tokens = usage["input_tokens"] if usage else 0
    output_tokens = usage["output_tokens"] if usage else 0
    updated = record.copy()
    updated["model_calls"] = record["model_calls"] + 1
    if input_tokens or output_tokens:
        updated["input_tokens"] = record["input_tokens"] + input_tokens
        updated["output_tokens"] = record["output_tokens"] + output_tokens
    calls = response.tool_calls if is_answer else None
    if "asked" in record and (record["asked"] or calls):
        if not calls:
            updated["asked"] = []
        elif len(calls) == 1:
            updated["asked"] = [str(calls[0].get("name"))]
        else:
            updated["asked"] = _merged([], [str(c.get("name")) for c in calls])
    after = record.get("after_first")
    if after:
        updated["after_first"] = {
            tool: AfterFirst(
                model_calls=entry["model_calls"] + 1,
                input_tokens=entry["input_tokens"] + input_tokens,
                output_tokens=entry["output_tokens"] + output_tokens,
                skipped=entry["skipped"],
            )
            for tool, entry in after.items()
        }
    if record["would_stop"] is not None:
        saved = record["would_save"]
        updated["would_save"] = Savings(
            model_calls=saved["model_calls"] + 1,
            input_tokens=saved["input_tokens"] + input_tokens,
            output_tokens=saved["output_tokens"] + output_tokens,
        )
    return updated


_logger = logging.getLogger("toolstop")
_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()
_WARNED_MAX = 1024
"""At most this many distinct (tool, problem) pairs are remembered (and so warned about) per
process; later pairs are still recorded in every run's `invalid_signals`, just not logged."""


def _warn_once(tool: str, problem: Problem) -> None:
    """Log a malformed signal once per process per (tool, problem), at WARNING on `toolstop`.

    The line names the tool and the problem, never content or arguments. `extra` carries the
    same as `{"toolstop_signal": {"tool": ..., "problem": ...}}` for structured handlers.
    """
    key = (tool, problem.value)
    with _warned_lock:
        if key in _warned or len(_warned) >= _WARNED_MAX:
            return
        _warned.add(key)
    _logger.warning(
        "tool %r returned a malformed stop signal (%s); it went back to the model. "
        "Logged once per tool and problem; every occurrence is in the stop record.",
        tool,
        problem.value,
        extra={"toolstop_signal": {"tool": tool, "problem": problem.value}},
    )
