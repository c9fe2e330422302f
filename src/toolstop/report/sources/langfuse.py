"""Langfuse exports: observation rows; a trace's `GENERATION` and `TOOL` rows, one conversation.

Each record is one observation as Langfuse exports it: the blob storage export's rows
(`observations_v2/`, or the legacy `observations/` file, snake_case: `id`, `trace_id`, `type`,
`start_time`, `input`, `output`, `usage_details`, `tool_calls`, `metadata`, `level`,
`status_message`, `session_id`), or the public API's (camelCase: `traceId`, `startTime`,
`usageDetails`, `usage`, `statusMessage`). A record may also hold several: an API page
(`{"data": [...]}`), a trace with its `observations` (`GET /traces/{id}`), or `{"trace": {...},
"observations": [...]}`. A legacy `traces/` row (`id`, `timestamp`, no `type`) gives its trace's
`session_id` as the thread. The observations of one trace form one conversation:

- a `GENERATION`, in `start_time` order (the instant, whatever its ISO 8601 form: see
  `_traces.instant`; a trace with a time that cannot be read keeps the file's order), gives the
  history the model was given (`input`: a list of role/content messages, or `{"messages":
  [...]}`, or a prompt's text; the entries Langfuse's LangChain handler adds for the tool
  definitions, `{"role": "tool", "content": {...}}` without a `tool_call_id`, are left out) and
  its answer (`output`: an assistant message, an OpenAI response's `choices[0].message`, or the
  text; the tool calls of the row's `tool_calls`, each a JSON string, when the answer holds
  none);
- its usage is `usage_details` (the `input*` keys summed, as Langfuse counts cached tokens
  apart from `input`, and the `output*` keys), else `usage`;
- a `TOOL` gives the result of a call no later history shows: its `output` as a tool message
  (with a `tool_call_id`), or its text with the call id its `metadata` names (`tool_call_id`);
  an `ERROR` level makes it an error result.

The export is JSON lines, or one JSON document over many lines (an array of observations, or an
API page; see `_document`). `input`, `output`, `metadata` and the usage may be JSON strings (as
the blob export writes them) or the values themselves. Records are grouped by trace with a bound
(`max_open` traces at once; see `_traces`).

Deliberately not handled: other observation types (spans, agents, chains: their content is
not a model call), and a `TOOL` whose result names no call id (its call is answered only where
a later history shows it).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata

from toolstop.report.sources import openai
from toolstop.report.sources._base import (
    Conversation,
    ReadProblems,
    Unreadable,
    non_negative_int,
    usage,
)
from toolstop.report.sources._document import json_values
from toolstop.report.sources._traces import (
    MAX_OPEN_TRACES,
    ModelCall,
    TraceLimits,
    TraceParts,
    conversations,
    decoded,
    first_str,
    group_by_trace,
    in_time_order,
    kept_size,
)
from toolstop.report.sources.langchain import lc_message

__all__ = ["is_langfuse", "observations", "read_langfuse"]

_TYPES = frozenset(
    {"SPAN", "GENERATION", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER", "EVALUATOR"}
    | {"EMBEDDING", "GUARDRAIL"}
)
_SESSIONS = 100_000
"""Trace ids whose session a legacy `traces/` row gave, remembered at most."""


def _get(record: Mapping[str, Any], snake: str, camel: str) -> Any:
    found = record.get(snake)
    return record.get(camel) if found is None else found


def _trace_of(record: Any) -> str | None:
    if not isinstance(record, Mapping):
        return None
    return first_str(_get(record, "trace_id", "traceId"))


def _is_observation(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("type"), str)
        and value["type"].upper() in _TYPES
        and _trace_of(value) is not None
    )


def _is_trace(value: Any) -> bool:
    """A legacy `traces/` row or an API trace: an id and a timestamp, no observation type."""
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("id"), str)
        and isinstance(value.get("timestamp"), str)
        and "type" not in value
    )


def is_langfuse(value: Any) -> bool:
    """Whether a decoded record looks like a Langfuse observation (or a page or trace of them)."""
    if not isinstance(value, Mapping):
        return False
    nested = value.get("data") if isinstance(value.get("data"), list) else value.get("observations")
    if isinstance(nested, list) and nested:
        return _is_observation(nested[0])
    return _is_observation(value)


def _remember(sessions: OrderedDict[str, str], trace: str | None, session: Any) -> None:
    """Keep the session a trace's row names (the first one), bounded."""
    if trace is None or not isinstance(session, str) or not session or trace in sessions:
        return
    sessions[trace] = session
    if len(sessions) > _SESSIONS:
        sessions.popitem(last=False)


def observations(value: Any, sessions: OrderedDict[str, str]) -> Iterator[Any]:
    """The observation rows of one record; a trace row's session is kept in `sessions`."""
    if not isinstance(value, Mapping):
        yield value
        return
    found = value.get("trace")
    trace: Mapping[str, Any] = found if isinstance(found, Mapping) else value
    trace_id = first_str(trace.get("id")) if _is_trace(trace) or trace is not value else None
    _remember(sessions, trace_id, _get(trace, "session_id", "sessionId"))
    nested = value.get("data") if isinstance(value.get("data"), list) else value.get("observations")
    if isinstance(nested, list):
        for item in nested:  # an observation of a trace may leave its trace id out
            if isinstance(item, Mapping) and trace_id is not None and _trace_of(item) is None:
                item = {**item, "trace_id": trace_id}
            yield item
    elif not _is_trace(value):
        yield value


def _is_tool_definition(message: Any) -> bool:
    """What the LangChain handler appends for each tool given: a `tool` role with no call id."""
    return (
        isinstance(message, Mapping)
        and message.get("role") == "tool"
        and not message.get("tool_call_id")
    )


def _history(raw: Any, where: str) -> list[BaseMessage]:
    found = decoded(raw)
    if isinstance(found, Mapping) and isinstance(found.get("messages"), list):
        found = found["messages"]
    if isinstance(found, str):
        return [HumanMessage(content=found)] if found else []
    if not isinstance(found, list):
        return []
    kept = [m for m in found if not _is_tool_definition(m)]
    if all(isinstance(m, Mapping) and "role" in m for m in kept):
        return openai.messages(kept)  # legacy function results are answered by name
    return [lc_message(m, f"{where} input {i + 1}") for i, m in enumerate(kept)]


def _answer(row: Mapping[str, Any], where: str) -> AIMessage | None:
    found = decoded(row.get("output"))
    if isinstance(found, Mapping) and isinstance(found.get("choices"), list) and found["choices"]:
        first = found["choices"][0]
        found = first.get("message") if isinstance(first, Mapping) else None
    if found == "":  # the export's "not set"
        return None
    if isinstance(found, str | list):  # the text, or content parts (their text kept)
        answer: BaseMessage = AIMessage(content=openai.text(found, f"{where} output"))
    elif isinstance(found, Mapping):
        if "role" not in found and "type" not in found and "tool_calls" in found:
            found = {**found, "role": "assistant"}  # a tool-calling answer's additional_kwargs
        answer = lc_message(found, f"{where} output")
    else:
        return None
    if not isinstance(answer, AIMessage):
        msg = f"{where}: the output is a {answer.type} message, not an answer"
        raise Unreadable(msg)
    listed = row.get("tool_calls")
    if not answer.tool_calls and not answer.invalid_tool_calls and isinstance(listed, list):
        valid, invalid = openai.tool_calls([decoded(c) for c in listed], where)
        answer = AIMessage(content=answer.content, tool_calls=valid, invalid_tool_calls=invalid)
    answer.usage_metadata = _usage(row) or answer.usage_metadata
    return answer


def _usage(row: Mapping[str, Any]) -> UsageMetadata | None:
    """`usage_details` with the `input*` / `output*` keys summed; else `usage` as recorded."""
    details = decoded(_get(row, "usage_details", "usageDetails"))
    if isinstance(details, Mapping) and "input" in details and "output" in details:
        sums = []
        for side in ("input", "output"):
            counts = [
                non_negative_int(v)
                for k, v in details.items()
                if isinstance(k, str) and k.startswith(side) and "cost" not in k
            ]
            sums.append(sum(n for n in counts if n is not None))
        if non_negative_int(details["input"]) is not None:
            return UsageMetadata(
                input_tokens=sums[0], output_tokens=sums[1], total_tokens=sums[0] + sums[1]
            )
    legacy = decoded(row.get("usage"))
    if isinstance(legacy, Mapping) and "input" in legacy and "output" in legacy:
        legacy = {"input_tokens": legacy["input"], "output_tokens": legacy["output"]}
    return usage(details) or usage(legacy)


def _tool_result(row: Mapping[str, Any], where: str) -> ToolMessage | None:
    found = decoded(row.get("output"))
    metadata = decoded(row.get("metadata"))
    call_id = first_str(metadata.get("tool_call_id")) if isinstance(metadata, Mapping) else None
    failed = row.get("level") == "ERROR"
    if isinstance(found, Mapping) and found.get("tool_call_id"):
        message = lc_message({"role": "tool", **found} if "type" not in found else found, where)
        if isinstance(message, ToolMessage):
            if failed:
                message.status = "error"
            return message
    if call_id is None:
        return None
    text = found if isinstance(found, str) else ""
    if found is not None and not isinstance(found, str):
        text = json.dumps(found, ensure_ascii=False, default=str)
    if failed and not text:
        text = str(_get(row, "status_message", "statusMessage") or "error")
    return ToolMessage(content=text, tool_call_id=call_id, status="error" if failed else "success")


def _start(row: Mapping[str, Any]) -> Any:
    return _get(row, "start_time", "startTime")


_KEPT = (
    *("trace_id", "traceId", "type", "start_time", "startTime", "input", "output"),
    *("usage_details", "usageDetails", "usage", "tool_calls"),
    *("level", "status_message", "statusMessage"),
)
"""The fields of a `GENERATION` or `TOOL` row its trace's conversation reads."""


def compact_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """What a trace's conversation reads of an observation, no more: a `GENERATION`'s or a
    `TOOL`'s fields (of its metadata, the call id); of another type, its trace alone."""
    if str(row.get("type", "")).upper() not in ("GENERATION", "TOOL"):
        return {"trace_id": _trace_of(row), "type": row["type"]}
    kept = {key: row[key] for key in _KEPT if key in row}
    metadata = decoded(row.get("metadata"))
    if isinstance(metadata, Mapping) and "tool_call_id" in metadata:
        kept["metadata"] = {"tool_call_id": metadata["tool_call_id"]}
    return kept


def _weigh(row: Mapping[str, Any]) -> int | None:
    """A compact row's kept size; `None` (not kept) for an observation of another type."""
    if str(row.get("type", "")).upper() not in ("GENERATION", "TOOL"):
        return None
    return kept_size([row.get("input"), row.get("output"), row.get("tool_calls")])


def _trace_conversation(sessions: Mapping[str, str], problems: ReadProblems) -> Any:
    def build(trace: str, first_line: int, rows: list[tuple[int, Any]]) -> Conversation | None:
        parts = TraceParts(thread=sessions.get(trace))
        for line, row in in_time_order(rows, _start, problems):
            where = f"line {line}"
            kind = row.get("type", "").upper()
            if kind == "GENERATION":
                parts.calls.append(
                    ModelCall(_history(row.get("input"), where), _answer(row, where))
                )
            elif kind == "TOOL":
                parts.add_result(_tool_result(row, where))
        return parts.conversation(trace, first_line, missing="generation with messages")

    return build


def read_langfuse(
    path: Path,
    problems: ReadProblems,
    *,
    max_open: int = MAX_OPEN_TRACES,
    limits: TraceLimits | None = None,
    records: Iterable[tuple[int, Any]] | None = None,
) -> Iterator[Conversation]:
    """The conversations of a Langfuse export, one per trace, streamed.

    Each trace keeps only what its conversation reads (`compact_row`), within `limits`
    (`TraceLimits`: a trace over them is counted as unreadable); the session a row names is
    remembered apart (bounded), so the rows of other types are let go on reading.

    Args:
        path: The export.
        problems: Where what cannot be read is counted.
        max_open: Traces held open at once while grouping.
        limits: How much one open trace may hold.
        records: The file's decoded records (default: its JSON lines).

    Raises:
        OSError: the file cannot be opened.
    """
    sessions: OrderedDict[str, str] = OrderedDict()

    def rows() -> Iterator[tuple[int, Any]]:
        for line, value in records if records is not None else json_values(path, problems):
            counted = False  # a record of several rows counts once, its other rows still read
            for row in observations(value, sessions):
                if _is_observation(row):
                    _remember(sessions, _trace_of(row), _get(row, "session_id", "sessionId"))
                    yield line, compact_row(row)
                elif not counted:
                    problems.line_problem(line, "not a Langfuse observation (a type, a trace id)")
                    counted = True

    groups = group_by_trace(
        rows(), _trace_of, problems, max_open=max_open, weigh=_weigh, limits=limits
    )
    yield from conversations(groups, _trace_conversation(sessions, problems), problems)
