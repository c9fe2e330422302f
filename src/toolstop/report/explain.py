"""`toolstop explain`: why a conversation ended the way it did, run by run, for support.

The rule, the deciding tools and call ids, budgets spent, model calls and tokens come from each
run's stop record. The signal of every tool call per turn is not in the record: it is read again
from the checkpointed messages' artifacts with `decide_turn` / `read_signal`, exactly as the
router read it. Only names, ids, reasons and counts are shown: never tool content, never
arguments. Names and ids are cut to `NAME_LIMIT` characters (`records.cut`), as the report cuts
them: a tool name of megabytes is shown as its first 199 characters and `…`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop._lifecycle import INTERRUPTED_TEXT, left_open_calls
from toolstop._printable import printable_data
from toolstop.decision import PROBLEMS_NOT_INVALID, Turn, decide_turn
from toolstop.levels import SUBAGENT_KEY
from toolstop.report.examples import ended_after_pair
from toolstop.report.levels import HANDED_OFF, level_of, thread_runs
from toolstop.report.reader import Database, RunEnd, database_error
from toolstop.report.records import cut

__all__ = ["explain_thread", "print_explanation", "turns_of"]


def turns_of(messages: Sequence[BaseMessage]) -> list[Turn]:
    """Every tool turn in `messages`: an AIMessage with tool calls and the results answering it."""
    turns: list[tuple[AIMessage, list[ToolMessage], set[str]]] = []
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = {str(c.get("id")) for c in message.tool_calls}
            turns.append((message, [], ids))
        elif isinstance(message, ToolMessage) and turns and message.tool_call_id in turns[-1][2]:
            turns[-1][1].append(message)
    return [Turn(asking=asking, results=tuple(results)) for asking, results, _ in turns]


def _signals(turn: Turn, handed_off: bool = False) -> list[dict[str, Any]]:
    pending = {
        m.tool_call_id
        for m in turn.results
        if getattr(m, "status", None) == "error" and m.content == INTERRUPTED_TEXT
    }
    answered = {m.tool_call_id for m in turn.results}
    calls = []
    signals = list(decide_turn(turn).signals)
    if handed_off:  # the calls the parent answered have no result here
        known = {signal.tool_call_id for signal in signals}
        calls = [
            {
                "tool": cut(str(c.get("name"))),
                "tool_call_id": cut(str(c.get("id"))),
                "signal": "handed off: answered by the parent graph",
                "stop": False,
            }
            for c in (turn.asking.tool_calls if turn.asking is not None else [])
            if c.get("id") not in answered and c.get("id") not in known
        ]
    for signal in signals:
        if handed_off and signal.tool_call_id not in answered:
            said = "handed off: answered by the parent graph"
        elif signal.tool_call_id in pending:
            # toolstop's own answer to a call the run left open (a hand-off that paused it, or
            # the process ended): the tool never answered, it did not fail
            said = "pending: left open, answered as interrupted"
        elif signal.problem is None:
            said = signal.reason.value if signal.reason else "?"
        elif signal.problem in PROBLEMS_NOT_INVALID:
            said = signal.problem.value
        else:
            said = f"invalid: {signal.problem.value}"
        calls.append(
            {
                "tool": cut(str(signal.tool)),
                "tool_call_id": cut(str(signal.tool_call_id)),
                "signal": said,
                "stop": signal.stop,
            }
        )
    return calls


DELTA_MESSAGES = (
    "its messages are kept as deltas, in a LangGraph DeltaChannel as deepagents 0.7 keeps "
    "them; toolstop does not replay them"
)
"""Why a run's turns are not shown when its checkpoint versions `messages` but holds none."""


def _messages(
    database: Database, end: RunEnd
) -> tuple[list[BaseMessage] | None, str | None, str | None]:
    """The messages at the run's end, or None and why (None when not known), and the name of
    the `subagent_tool` the run was called as (`SUBAGENT_KEY` in its checkpoint's metadata)."""
    try:
        found = database.full.get_tuple(end.checkpoint_config())
        checkpoint = found.checkpoint if found is not None else {}
        values = checkpoint.get("channel_values")
        versions = checkpoint.get("channel_versions")
        metadata = getattr(found, "metadata", None)
        worker = metadata.get(SUBAGENT_KEY) if isinstance(metadata, dict) else None
    except Exception as error:  # a checkpoint the saver cannot take apart: turns unknown
        if database_error(error):
            raise
        return None, None, None
    worker = _cut(worker) if isinstance(worker, str) and worker.strip() else None
    messages = values.get("messages") if isinstance(values, dict) else None
    if isinstance(messages, list):
        return list(messages), None, worker
    delta = isinstance(versions, dict) and "messages" in versions and messages is None
    return None, DELTA_MESSAGES if delta else None, worker


def _with_open_calls(record: dict[str, Any], messages: list[BaseMessage] | None) -> dict[str, Any]:
    """An `interrupted` or `handed_off` record rebuilt by the reader names no call ids; its
    checkpoint does."""
    rebuilt = record.get("rule") == HANDED_OFF and not record.get("tool_call_ids")
    if not rebuilt and (record.get("rule") != "interrupted" or record.get("tools")):
        return record
    if messages is None:
        return record
    _, calls = left_open_calls(messages)
    return {
        **record,
        "tools": [cut(str(c.get("name"))) for c in calls],
        "tool_call_ids": [cut(str(c.get("id"))) for c in calls],
    }


def _ended_after(record: dict[str, Any], messages: list[BaseMessage] | None) -> Any:
    """The tools the final answer followed, their overlap and judgement, and the answer itself
    (masked, cut at 2,000 characters) when the checkpoint has it; `None` for other runs."""
    after = record.get("ended_after")
    if not isinstance(after, dict) or not isinstance(after.get("tools"), dict):
        return None
    pair = ended_after_pair(messages) if messages is not None else None
    judged = after.get("judged")
    return {
        "tools": {cut(str(t)): o for t, o in after["tools"].items()},
        "judged": judged if isinstance(judged, dict) else {},
        "final_answer": pair["final_answer"] if pair is not None else None,
    }


def _run(
    record: dict[str, Any],
    end: RunEnd,
    turns: list[Turn] | None,
    messages: list[BaseMessage] | None = None,
    *,
    number: int,
) -> dict[str, Any]:
    saved = record.get("would_save") or {}
    handed_off = record.get("rule") == HANDED_OFF
    return {
        "run": number,
        "record_run": record.get("run"),
        "level": level_of(end.checkpoint_ns),
        "checkpoint_ns": end.checkpoint_ns,
        "ended_at": end.ended_at.isoformat() if end.ended_at else None,
        "schema_version": record.get("schema_version", 1),
        "mode": record.get("mode"),
        "rule": record.get("rule"),
        "stopped": record.get("stopped"),
        "ended_by": record.get("ended_by"),
        "ended_by_message": record.get("ended_by_message"),
        "would_stop": record.get("would_stop"),
        "deciding": [
            {"tool": _cut(tool), "tool_call_id": _cut(call_id)}
            for tool, call_id in zip(
                record.get("tools") or [], record.get("tool_call_ids") or [], strict=False
            )
        ],
        "shown": _names(record.get("relayed")),
        "turns": None if turns is None else [_signals(turn, handed_off) for turn in turns],
        "tool_turns": record.get("tool_turns"),
        "transient_retries": record.get("transient_retries"),
        "outcomes": record.get("outcomes"),
        "model_calls": record.get("model_calls"),
        "input_tokens": record.get("input_tokens"),
        "output_tokens": record.get("output_tokens"),
        "would_save": saved or None,
        "would_skip": _names(record.get("would_skip")),
        **_canary(record),
        "if_signalled": _if_signalled(record),
        "ended_after": _ended_after(record, messages),
        "answer_failed": [
            {"tool": _cut(str(item.get("tool"))), "why": _cut(str(item.get("why")))}
            for item in record.get("answer_failed") or []
            if isinstance(item, dict)
        ],
    }


def _print_canary(run: dict[str, Any], out: TextIO) -> None:
    """The run's canary arm and modes, and whether the user asked again after the run before."""
    if run.get("arm"):
        line = f"  canary arm: {run['arm']}"
        if run.get("modes"):
            line += " (" + ", ".join(f"{t} {m}" for t, m in run["modes"].items()) + ")"
        print(line, file=out)
    elif run.get("modes"):
        print("  modes: " + ", ".join(f"{t} {m}" for t, m in run["modes"].items()), file=out)
    if run.get("sent_back"):
        print(f"  sent back to never by the way back: {', '.join(run['sent_back'])}", file=out)
    reask = run.get("reask")
    if reask:
        how = "stopped on" if reask["stopped"] else "would have stopped on"
        verdict = f"yes ({reask['why']})" if reask["asked_again"] else "no"
        print(
            f"  asked again after run {reask['run']} ({how} {', '.join(reask['tools'])}): "
            f"{verdict}",
            file=out,
        )


def _if_signalled(record: dict[str, Any]) -> dict[str, list[str]]:
    """Each tool whose first successful call was followed by other tools' calls -> those
    tools (`after_first`): had it signalled a stop, they would not have run. The tools that
    decided a shadow-mode stop are left out (`would_skip` says it for them)."""
    after = record.get("after_first")
    if not isinstance(after, dict):
        return {}
    deciding = set(_names(record.get("tools"))) if record.get("would_stop") else set()
    found = {}
    for tool, entry in after.items():
        skipped = _names(entry.get("skipped")) if isinstance(entry, dict) else []
        if skipped and cut(str(tool)) not in deciding:
            found[cut(str(tool))] = skipped
    return found


def _canary(record: dict[str, Any]) -> dict[str, Any]:
    """A record's canary fields (`arm`, `modes`, `sent_back`, `reask`), those it has."""
    found = {
        "arm": cut(record["arm"]) if isinstance(record.get("arm"), str) else None,
        "modes": _modes(record.get("modes")),
        "sent_back": _names(record.get("sent_back")),
        "reask": _reask(record.get("reask")),
    }
    return {key: value for key, value in found.items() if value}


def _modes(value: Any) -> dict[str, str]:
    """A record's per-tool `modes`, names and modes cut; `{}` for anything else."""
    if not isinstance(value, dict):
        return {}
    return {cut(str(k)): cut(str(v)) for k, v in list(value.items())[:20]}


def _reask(value: Any) -> dict[str, Any] | None:
    """A record's `reask` verdict with its types checked (a hostile record gives `None`)."""
    if not isinstance(value, dict) or not isinstance(value.get("asked_again"), bool):
        return None
    run = value.get("run")
    return {
        "run": run if isinstance(run, int) and not isinstance(run, bool) else None,
        "asked_again": value["asked_again"],
        "why": cut(str(value.get("why"))),
        "stopped": value.get("stopped") is True,
        "arm": cut(value["arm"]) if isinstance(value.get("arm"), str) else None,
        "tools": _names(value.get("tools")),
    }


def _cut(value: Any) -> Any:
    """A string cut to `NAME_LIMIT`; any other value as it is."""
    return cut(value) if isinstance(value, str) else value


def _names(value: Any) -> list[str]:
    """The names (or ids) in a record's list, each cut to `NAME_LIMIT`; `[]` for a non-list."""
    return [cut(str(v)) for v in value] if isinstance(value, list) else []


def explain_thread(
    database: Database, thread_id: str, *, run: int | None = None
) -> dict[str, Any] | None:
    """Every finished run of `thread_id` (or only run number `run`), explained.

    Runs are numbered 1, 2, ... in the order they ended, across every level of a multi-level
    agent (`toolstop.report.levels`: each record once, runs a parent left open closed); each
    says its level and the run number its own record gives. A run's turns are those at its end
    that were not there at the end of an earlier run (of any level: a parent's messages hold
    its children's turns); unknown when the previous run of its level cannot be read.

    `None` when the database has no such thread."""
    namespaces = database.namespaces(thread_id)
    if not namespaces:
        return None
    rejected = database.rejected
    read = thread_runs(database, thread_id, namespaces)
    ends = read.ends
    wanted = set(range(len(ends))) if run is None else {run - 1} & set(range(len(ends)))
    # Each run's own turns: those at its end not at the end of the last earlier run of any
    # level (a level's messages grow from run to run; a parent's hold its children's turns).
    # Only those runs are read, and of them only their turns' ids are kept.
    plan: dict[int, tuple[int | None, list[int]]] = {}
    needed: set[int] = set()
    last: dict[str, int] = {}
    for index, end in enumerate(ends):
        level = level_of(end.checkpoint_ns)
        if index in wanted:
            plan[index] = (last.get(level), sorted(last.values()))
            needed |= {index, *last.values()}
        last[level] = index
    ids: dict[int, set[str] | None] = {}
    runs: list[dict[str, Any]] = []
    for index in sorted(needed):
        end = ends[index]
        messages, why, worker = _messages(database, end)
        turns = turns_of(messages) if messages is not None else None
        ids[index] = None if turns is None else {t.id for t in turns if t.id is not None}
        if index not in wanted:
            continue
        own_level, earlier = plan[index]
        if turns is not None and own_level is not None and ids[own_level] is None:
            turns = None  # which turns are its own is not known without its level's last
        elif turns is not None:
            seen = set().union(*(ids[i] or set() for i in earlier))
            turns = [t for t in turns if t.id is None or t.id not in seen]
        record = _with_open_calls(end.record, messages)
        runs.append(_run(record, end, turns, messages, number=index + 1))
        if turns is None and why is not None:
            runs[-1]["turns_unread"] = why
        if worker is not None and runs[-1]["level"]:  # the worker's name, not its node's
            runs[-1]["level"] = "/".join([*runs[-1]["level"].split("/")[:-1], worker])
    return {
        "thread_id": thread_id,
        "runs": runs,
        "finished": len(ends),
        "in_progress": [
            {
                "checkpoint_ns": namespace,
                "level": level_of(namespace),
                "run": current.get("run"),
                "tool_turns": current.get("tool_turns"),
                "model_calls": current.get("model_calls"),
                "pending": _names(current.get("asked")),
            }
            for namespace, current in read.in_progress
        ],
        "copied_records": read.copies,
        "unreadable_namespaces": read.unreadable,
        "unreadable_runs": database.rejected - rejected,
    }


def print_explanation(explanation: dict[str, Any], out: TextIO) -> None:
    """The explanation as text: one block per run (every string from the database escaped)."""
    explanation = printable_data(explanation)
    runs = explanation["runs"]
    finished = max(explanation.get("finished") or 0, len(runs))
    shown = f" (shown: {len(runs)})" if finished > len(runs) else ""  # `--run N`
    print(f"thread {explanation['thread_id']}: {finished} finished run(s){shown}", file=out)
    for run in runs:
        how = "stopped by toolstop" if run["stopped"] else "the model answered"
        if run["rule"] == "interrupted":
            how = "never finished: cancelled, failed or its worker stopped"
        elif run["rule"] == HANDED_OFF:
            how = "handed off: left open on a call its parent graph answered"
        elif run["rule"] not in ("none", None) and not run["stopped"]:
            how = "not stopped"
        elif run.get("ended_by"):
            how = f"ended by {run['ended_by']}, not the model's answer"
            if run.get("ended_by_message"):
                how += f": {run['ended_by_message']}"
        mode = run["mode"]
        if run.get("arm") == "shadow":
            mode = f"{mode}, shadow arm" if run.get("modes") else "never (shadow arm)"
        elif run.get("arm") == "canary":
            mode = f"{mode} (canary arm)"
        print(
            f"\nrun {run['run']}{_where(run)}, ended {run['ended_at'] or '?'}, mode {mode}: "
            f"rule {run['rule']} ({how})",
            file=out,
        )
        if run["would_stop"]:
            print(f"  would have stopped (shadow mode): rule {run['would_stop']}", file=out)
        _print_canary(run, out)
        if run["deciding"]:
            names = ", ".join(f"{d['tool']} ({d['tool_call_id']})" for d in run["deciding"])
            label = {
                "interrupted": "left open (answered as interrupted)",
                HANDED_OFF: "handed off on",
            }.get(run["rule"], "deciding")
            print(f"  {label}: {names}", file=out)
        deciding = [d["tool_call_id"] for d in run["deciding"]]
        if run.get("shown") and run["shown"] != deciding:
            # The answer also showed earlier completed results of the run (call ids only).
            print(f"  the answer showed the results of: {', '.join(run['shown'])}", file=out)
        if run["turns"] is None:
            why = f" ({run['turns_unread']})" if run.get("turns_unread") else ""
            print(f"  turns: not readable from the checkpoint{why}", file=out)
        for index, turn in enumerate(run["turns"] or [], start=1):
            calls = "; ".join(
                f"{c['tool']} {c['tool_call_id']} {c['signal']}" + (" (stop)" if c["stop"] else "")
                for c in turn
            )
            print(f"  turn {index}: {calls}", file=out)
        print(
            f"  budgets: {run['transient_retries']} transient retries spent, "
            f"{_turns(run['tool_turns'])}",
            file=out,
        )
        print(
            f"  model calls {run['model_calls']}, tokens {run['input_tokens']} in / "
            f"{run['output_tokens']} out",
            file=out,
        )
        saved = run["would_save"]
        if run["would_stop"] and saved:
            print(
                f"  hard mode would have saved {saved.get('model_calls')} model calls, "
                f"{saved.get('input_tokens')} input and {saved.get('output_tokens')} output tokens",
                file=out,
            )
        _print_ended_after(run.get("ended_after"), out)
        for item in run.get("answer_failed") or []:
            print(
                f"  the answer of {item['tool']} did not render ({item['why']}): "
                "the stop showed its content",
                file=out,
            )
        if run["would_stop"] and run.get("would_skip"):
            print(
                f"  cut short: in hard mode, {', '.join(run['would_skip'])} would not have run "
                "(a stop there skips later work: not a saving)",
                file=out,
            )
        for tool, later in (run.get("if_signalled") or {}).items():
            skipped = (f"a later {name} call" if name == tool else name for name in later)
            print(
                f"  if {tool} signalled a stop, {', '.join(skipped)} would not have run "
                "(converting it would cut this run short)",
                file=out,
            )
    if explanation.get("unreadable_namespaces"):
        print(
            "\ncould not be read (a checkpoint undecodable or not of a checkpoint's shape): "
            "namespace(s) " + ", ".join(repr(ns) for ns in explanation["unreadable_namespaces"]),
            file=out,
        )
    if explanation.get("copied_records"):
        print(
            f"\n{explanation['copied_records']} copy(ies) of a record written at another level "
            "(a parent graph with a stop_record key) not shown as runs",
            file=out,
        )
    if explanation.get("unreadable_runs"):
        print(
            f"\n{explanation['unreadable_runs']} run record(s) left out: a number out of range "
            "or a list that is not one",
            file=out,
        )
    for current in explanation["in_progress"]:
        level = f" of level {current['level']}" if current.get("level") else ""
        print(
            f"\nrun {current['run']}{level} in progress: {_turns(current['tool_turns'])}, "
            f"{current['model_calls']} model calls so far (its record is written when it ends; "
            "if it never finished, the next run closes it as interrupted)",
            file=out,
        )
        if current.get("pending"):
            print(
                f"  waiting on: {', '.join(current['pending'])} (its calls are pending, e.g. a "
                "hand-off that paused the run; the report counts the run toward them, as ended "
                "on them)",
                file=out,
            )


def _print_ended_after(after: Any, out: TextIO) -> None:
    """The tools the final answer followed, with overlap and judgement, then the answer."""
    if not after:
        return
    judged = after.get("judged") or {}
    said = []
    for tool, overlap in after["tools"].items():
        features = judged.get(tool) or {}
        how = f", {features['action']} its {features['shape']} result" if features else ""
        earlier = features.get("earlier") if isinstance(features, dict) else None
        if isinstance(earlier, list) and earlier:
            how += f" with facts from earlier results of {', '.join(str(t) for t in earlier[:8])}"
        said.append(f"{tool} (answer overlap {overlap}{how})")
    print(f"  the model answered right after: {', '.join(said)}", file=out)
    if after.get("final_answer") is not None:
        print(f"  final answer: {after['final_answer']}", file=out)


def _where(run: dict[str, Any]) -> str:
    """Which level a run is of, and its own record's number when it is not the thread's."""
    said = []
    if run.get("level"):
        said.append(f"level {run['level']}")
    if run.get("record_run", run["run"]) != run["run"]:
        said.append(f"its run {run['record_run']}")
    where = ", ".join(said)
    if run["checkpoint_ns"]:
        where += ("; " if where else "") + f"namespace {run['checkpoint_ns']!r}"
    return f" ({where})" if where else ""


def _turns(count: int) -> str:
    return f"{count} tool turn" + ("" if count == 1 else "s")
