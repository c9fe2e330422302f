"""What hard mode would have done on recorded conversations, had some tools signalled.

`toolstop report --from PATH --convert TOOL[,TOOL]` replays each recorded conversation as
`StopOnArtifact(StopPolicy(mode="hard"))` would have run it with those tools converted: each of
their results carries `signal(Outcome.COMPLETED)` when it is a success, `signal(Outcome.TRANSIENT)`
otherwise. `converted_records` runs toolstop's own run lifecycle (`toolstop._lifecycle`:
`begin`, `answered`, `ended_after`, as the middleware calls them) one model call at a time,
like `shadow_records`; where a model call's `begin` decides a stop, the relay is the run's
answer and the rest of the recorded run (its later model calls and tool calls) is cut off. The
records equal those of the same conversation replayed through a real `create_agent` with the
converted stand-ins, the script cut at each stop (tests/test_report_what_if.py).

A result is a success when its tool message's status is not `error` and its text does not
read as an error (`toolstop.record.reads_as_error`, the rule by which the shadow-mode record
predicts `would_save`, so prediction and what-if agree); with `--success REGEX`, when its text
matches the pattern (`re.search`) instead.

Deliberately not handled: `polish` mode (a narrated stop calls the model, whose answer no log
holds) and a converted tool's own `answer=` (the relay shows the recorded result).
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop._judge import text_of
from toolstop._lifecycle import relay_message
from toolstop._tokens import RunningCount
from toolstop.outcome import Outcome, signal
from toolstop.policy import StopPolicy
from toolstop.record import StopRecord, reads_as_error
from toolstop.report.candidates import writes
from toolstop.report.examples import clean
from toolstop.report.records import cut, out_of_range
from toolstop.report.sources._runs import ending, segment
from toolstop.report.sources.shadow import Replayed, _ending, limit_ending, replay_answer
from toolstop.report.tally import SHOWN, Tally, top

__all__ = [
    "Converted",
    "WhatIf",
    "converted_records",
    "is_success",
    "signalled",
    "what_if_html",
    "what_if_lines",
]

_TOKENS = ("model_calls", "input_tokens", "output_tokens")


def is_success(message: ToolMessage, success: re.Pattern[str] | None = None) -> bool:
    """Whether a recorded result reads as a success (see the module docstring)."""
    text = text_of(message.content)
    if success is not None:
        return success.search(text) is not None
    return message.status != "error" and not reads_as_error(text)


def signalled(
    messages: Sequence[BaseMessage],
    tools: Collection[str],
    success: re.Pattern[str] | None = None,
) -> list[BaseMessage]:
    """The messages with each converted tool's result carrying its signal as the artifact.

    Other results carry none, as a plain tool returns them."""
    names = {
        str(c["id"]): c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls
    }
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            copy = message.model_copy()
            name = copy.name or names.get(copy.tool_call_id)
            copy.artifact = (
                signal(Outcome.COMPLETED if is_success(message, success) else Outcome.TRANSIENT)
                if name in tools
                else None
            )
            out.append(copy)
        else:
            out.append(message)
    return out


@dataclass(frozen=True, kw_only=True)
class Converted:
    """A conversation replayed with tools converted.

    Attributes:
        records: One record per run, as hard mode writes them.
        relays: Per run, the relay the user would have seen (None: the run was not stopped).
        skipped_tools: Per run, the tool calls the stop left unmade (names, in order).
        answers: Per run, the recorded final answer.
    """

    records: list[StopRecord]
    relays: list[str | None]
    skipped_tools: list[list[str]]
    answers: list[str]


def converted_records(
    messages: Sequence[BaseMessage],
    tools: Collection[str],
    *,
    success: re.Pattern[str] | None = None,
    policy: StopPolicy | None = None,
    definitions: Sequence[Mapping[str, Any]] = (),
) -> Converted:
    """The records hard mode writes for a recorded conversation with `tools` signalling.

    The runs are those of `shadow_records` (`toolstop.report.sources._runs.segment`). A run
    the recording leaves open on tool results is stopped when they decide a stop, as hard mode
    would at the model call that was next due (its relay answers; nothing is saved, as no model
    call followed); otherwise, and on a tool call without a result, it is closed as shadow mode
    closes it (rule `interrupted`). `definitions` are the tool definitions the log gives
    (`Conversation.tools`), counted in each estimated model call as `shadow_records` counts
    them.
    """
    policy = policy if policy is not None else StopPolicy(mode="hard")
    segments = segment(signalled(messages, tools, success))
    thread = Replayed(segments)
    tokens = RunningCount(definitions)
    relays: list[str | None] = []
    skipped_tools: list[list[str]] = []
    answers: list[str] = []
    for invocation, recorded in enumerate(segments.runs):
        end = ending(recorded)
        played = recorded[:-1] if end == "limit" else recorded
        relay, skipped = _replay_run(
            thread, played, policy, invocation, tokens, at_end=end == "tool_result"
        )
        if relay is None and end == "limit":  # as after_agent delivers a stop the limit swallowed
            thread.history.append(thread.prepared(recorded[-1]))
            record, decision = limit_ending(thread.run, thread.previous, thread.history, policy)
            if decision is not None:
                shown = relay_message(decision.relay, decision.rule, for_model=decision.for_model)
                shown.id = thread.history[-1].id
                thread.history[-1] = shown
                relay = text_of(shown.content)
            thread.finished(record)
        elif relay is not None or end == "answer":
            thread.finished(_ending(thread.run, thread.previous, thread.history, policy))
        # else left open: closed by the next run's first model call, or by `close` below
        relays.append(relay)
        skipped_tools.append(skipped)
        answers.append(text_of(recorded[-1].content) if ending(recorded) == "answer" else "")
    thread.close(policy, len(segments.runs))
    return Converted(
        records=thread.records, relays=relays, skipped_tools=skipped_tools, answers=answers
    )


def _replay_run(
    thread: Replayed,
    recorded: Sequence[BaseMessage],
    policy: StopPolicy,
    invocation: int,
    tokens: RunningCount,
    *,
    at_end: bool,
) -> tuple[str | None, list[str]]:
    """Replay one recorded run into `thread`, cut at a hard stop: (the relay, the tools the
    stop left uncalled); `(None, [])` when nothing stopped it. With `at_end`, the model is due
    once more after the recorded messages (its results were left unread)."""
    for position, message in enumerate([*recorded, None]):
        if message is None:  # the recording ends the run: would hard mode stop on its results?
            if not at_end:
                return None, []
            begun = thread.begin(policy, invocation)
            copy_id: str | None = f"m{thread.count}"
            thread.count += 1
            copy: AIMessage | None = None
        else:
            prepared = thread.prepared(message)
            if not isinstance(prepared, AIMessage):
                thread.history.append(prepared)
                continue
            copy = prepared
            begun = thread.begin(policy, invocation)
            copy_id = copy.id
        decision = begun.decision
        if decision is not None and decision.stop and not decision.narrate:
            shown = relay_message(decision.relay, decision.rule, for_model=decision.for_model)
            shown.id = copy_id
            thread.history.append(shown)
            thread.run = begun.run
            skipped = [
                c["name"]
                for m in recorded[position:]
                if isinstance(m, AIMessage)
                for c in m.tool_calls
            ]
            return text_of(shown.content), skipped
        if copy is None:
            return None, []  # hard mode would have called the model: left open, as recorded
        answer, thread.run = replay_answer(begun, copy, policy, tokens)
        thread.history.append(answer)
    return None, []


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class WhatIf:
    """The what-if's figures, folded one conversation at a time (constant memory)."""

    def __init__(
        self,
        tools: Collection[str],
        *,
        success: re.Pattern[str] | None = None,
        declared_writes: Collection[str] = (),
        examples: int = 0,
    ) -> None:
        """An empty what-if for `tools`, keeping up to `examples` example relays."""
        self.tools = sorted(set(tools))
        self.success = success
        self.declared_writes = frozenset(declared_writes)
        self.keep = examples
        self.runs = 0
        self.rejected = 0
        self.stopped = 0
        self.cut_short = 0
        self.before: Counter[str] = Counter()
        self.after: Counter[str] = Counter()
        self.skipped = Tally()
        self.cut_saved: Counter[str] = Counter()
        self.seen: set[str] = set()
        self.examples: list[dict[str, Any]] = []

    def add(
        self,
        thread: str,
        messages: Sequence[BaseMessage],
        baseline: Sequence[Any],
        definitions: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Fold one conversation in, beside its shadow-mode records `baseline`.

        `definitions` are the tool definitions the log gives, counted in estimates."""
        converted = converted_records(
            messages, self.tools, success=self.success, definitions=definitions
        )
        if len(self.seen) < len(self.tools):
            called = {c.get("name") for m in messages for c in getattr(m, "tool_calls", None) or ()}
            self.seen.update(tool for tool in self.tools if tool in called)
        for number, (old, new) in enumerate(zip(baseline, converted.records, strict=True)):
            if out_of_range(old) is not None or out_of_range(new) is not None:
                self.rejected += 1  # refused as the report refuses it (records.out_of_range)
                continue
            self.runs += 1
            for key in _TOKENS:
                self.before[key] += _int(old.get(key))
                self.after[key] += _int(new.get(key))
            relay = converted.relays[number]
            if relay is None:
                continue
            self.stopped += 1
            skipped = [cut(name) for name in converted.skipped_tools[number]]
            self.cut_short += bool(skipped)
            if skipped:  # saved by skipping later work: counted apart, never a gain
                for key in _TOKENS:
                    self.cut_saved[key] += _int(old.get(key)) - _int(new.get(key))
            self.skipped.update(skipped)
            if len(self.examples) < self.keep:
                self.examples.append(
                    {
                        "thread_id": cut(thread),
                        "run": new.get("run"),
                        "tools": [cut(str(tool)) for tool in new.get("tools") or []][:SHOWN],
                        "relay": clean(relay),
                        "recorded_answer": clean(converted.answers[number]),
                        "not_run": skipped[:20],
                    }
                )

    def document(self, price_in: float | None, price_out: float | None) -> dict[str, Any]:
        """report.json's `what_if`."""
        saved = {key: self.before[key] - self.after[key] for key in _TOKENS}
        cost = None
        if price_in is not None or price_out is not None:
            cost = round(
                (
                    saved["input_tokens"] * (price_in or 0.0)
                    + saved["output_tokens"] * (price_out or 0.0)
                )
                / 1_000_000,
                6,
            )
        not_run = dict(self.skipped.most_common())
        folded: dict[str, Any] = {}
        not_run = top(not_run, self.skipped, folded, "not_run")
        return {
            "tools": self.tools,
            "success": self.success.pattern if self.success is not None else None,
            "runs": self.runs,
            "rejected_runs": self.rejected,
            "stopped_runs": self.stopped,
            "cut_short_runs": self.cut_short,
            "before": {key: self.before[key] for key in _TOKENS},
            "after": {key: self.after[key] for key in _TOKENS},
            "saved": {**saved, "cost": cost},
            "cut_short_saved": {key: self.cut_saved[key] for key in _TOKENS},
            "gain": {key: saved[key] - self.cut_saved[key] for key in _TOKENS},
            "unseen": [tool for tool in self.tools if tool not in self.seen],
            "not_run": [
                {
                    "tool": tool,
                    "calls": count,
                    "writes": writes(tool, self.declared_writes),
                }
                for tool, count in not_run.items()
            ],
            "folded": folded,
            "examples": self.examples,
        }


def what_if_lines(document: dict[str, Any]) -> list[str]:
    """The what-if in a few lines for the terminal (names escaped by the caller's printer)."""
    saved = document["saved"]
    lines = [
        f"what if {', '.join(document['tools'])} signalled (hard mode): "
        f"{document['stopped_runs']} of {document['runs']} runs stopped, "
        f"{document['cut_short_runs']} cut short; saved {saved['model_calls']} model calls, "
        f"{saved['input_tokens']} input and {saved['output_tokens']} output tokens"
        + (f", {saved['cost']:.4f} at your prices" if saved["cost"] is not None else "")
    ]
    cut = document.get("cut_short_saved") or {}
    if cut.get("model_calls"):
        lines.append(
            f"  of which {cut['model_calls']} model calls in cut-short runs (later work skipped: "
            f"not a gain); gain {document['gain']['model_calls']} model calls"
        )
    if document.get("unseen"):
        lines.append(
            "  WARNING: never called in these conversations (a typo?): "
            + ", ".join(document["unseen"])
        )
    flagged = [e for e in document["not_run"] if e["writes"]]
    if document["not_run"]:
        shown = document["not_run"][:10]
        more = len(document["not_run"]) - len(shown)
        lines.append(
            "  would not have run: "
            + ", ".join(f"{e['tool']} {e['calls']}" for e in shown)
            + (f" and {more} more" if more else "")
            + _other(document)
        )
    if flagged:
        lines.append(
            "  WARNING: writes that would not have run: "
            + ", ".join(f"{e['tool']} {e['calls']}" for e in flagged)
        )
    return lines


def _other(document: dict[str, Any]) -> str:
    """ ", other N tools (K calls)" for the skipped tools the what-if folded, else ""."""
    entry = (document.get("folded") or {}).get("not_run")
    if not entry:
        return ""
    names = f"{entry['names']:,}{'+' if entry.get('at_least') else ''}"
    return f", other {names} tools ({entry['count']:,} calls)"


def what_if_html(document: dict[str, Any] | None) -> str:
    """The page's what-if section (empty without `--convert`); every string escaped."""
    if not document:
        return ""
    saved = document["saved"]
    cost = f", {saved['cost']:.4f} at your prices" if saved["cost"] is not None else ""
    rows = "".join(
        f"<tr><td>{html.escape(e['tool'])}</td><td>{e['calls']}</td>"
        f"<td>{'writes' if e['writes'] else ''}</td></tr>"
        for e in document["not_run"]
    )
    other = _other(document)
    if rows and other:
        rows += f'<tr><td colspan="3">{html.escape(other.removeprefix(", "))}</td></tr>'
    examples = "".join(
        f"<li>thread {html.escape(str(e['thread_id']))}, run {html.escape(str(e['run']))}: "
        f"the user would have seen <pre>{html.escape(e['relay'])}</pre> instead of "
        f"<pre>{html.escape(e['recorded_answer'])}</pre></li>"
        for e in document["examples"]
    )
    return (
        f"<h2>What if {html.escape(', '.join(document['tools']))} signalled (hard mode)</h2>"
        f"<p>{document['stopped_runs']} of {document['runs']} runs would have stopped, "
        f"{document['cut_short_runs']} of them cut short; saved {saved['model_calls']} model "
        f"calls, {saved['input_tokens']} input and {saved['output_tokens']} output tokens"
        f"{html.escape(cost)}.</p>"
        + (
            "<table><thead><tr><th>tool that would not have run</th><th>calls</th>"
            f"<th></th></tr></thead><tbody>{rows}</tbody></table>"
            if rows
            else ""
        )
        + (f"<ul>{examples}</ul>" if examples else "")
    )
