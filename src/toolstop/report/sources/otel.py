"""OpenTelemetry GenAI spans: OTLP JSON (one export request a line), `gen_ai.*` conventions.

Each line is an OTLP/JSON `ExportTraceServiceRequest` (`{"resourceSpans": [{"scopeSpans":
[{"spans": [...]}]}]}`), as the OTLP file exporter writes them. The spans of one `traceId` form
one conversation:

- a chat span (`gen_ai.operation.name` `chat`, `text_completion` or `generate_content`) gives
  the history the call was given and its answer: the attributes `gen_ai.input.messages` and
  `gen_ai.output.messages` (JSON: `{"role", "parts": [{"type": "text", "content"},
  {"type": "tool_call", "id", "name", "arguments"}, {"type": "tool_call_response", "id",
  "response"}]}`, a JSON string or the structured value itself) with
  `gen_ai.system_instructions`, on the span or on its `gen_ai.client.inference.operation.details`
  event (the newest conventions); or, in the earlier conventions, span events
  `gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
  `gen_ai.tool.message` and `gen_ai.choice`, their fields as event attributes (`content`,
  `tool_calls`, `id`, `message`) or as a JSON body in `gen_ai.event.content`;
- its usage is `gen_ai.usage.input_tokens` / `gen_ai.usage.output_tokens`;
- an `execute_tool` span gives the result of a call no later history shows:
  `gen_ai.tool.call.id`, `gen_ai.tool.call.result` (an error status makes it an error result).

Message content is only in spans when the instrumentation captures it (often opt-in, e.g.
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`); a trace without it is skipped and
counted. Spans are grouped by trace with a bound (`max_open` traces at once; see `_traces`).

The details event may also come as a log record of an OTLP logs export on its own line
(`resourceLogs`; see `otel_logs`), attached to the chat span it names.

Deliberately not handled: OTLP protobuf, one JSON document spread over several lines, and the
earlier per-message events sent as log records.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    InvalidToolCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

from toolstop.report.sources import openai
from toolstop.report.sources._base import (
    Conversation,
    ReadProblems,
    Unreadable,
    json_records,
    non_negative_int,
)
from toolstop.report.sources._traces import (
    MAX_OPEN_TRACES,
    ModelCall,
    TraceLimits,
    TraceParts,
    conversations,
    first_seen,
    first_str,
    group_by_trace,
    in_time_order,
    kept_size,
)
from toolstop.report.sources.otel_logs import attach_logs, is_otel_logs, log_spans

__all__ = ["compact_span", "is_otel", "read_otel"]

_CHAT = ("chat", "text_completion", "generate_content")


def is_otel(value: Any) -> bool:
    """Whether a decoded line looks like an OTLP JSON trace export."""
    return isinstance(value, Mapping) and isinstance(value.get("resourceSpans"), list)


def _value(raw: Any, depth: int = 0) -> Any:
    """An OTLP `AnyValue` as plain data."""
    if not isinstance(raw, Mapping) or depth > 16:
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in raw:
            return raw[key]
    if "intValue" in raw:
        return non_negative_int(raw["intValue"]) if raw["intValue"] != "" else None
    if isinstance(raw.get("arrayValue"), Mapping):
        values = raw["arrayValue"].get("values")
        return [_value(v, depth + 1) for v in values] if isinstance(values, list) else []
    if isinstance(raw.get("kvlistValue"), Mapping):
        return _attributes(raw["kvlistValue"].get("values"), depth + 1)
    return None


def _attributes(raw: Any, depth: int = 0) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in raw if isinstance(raw, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("key"), str):
            found[item["key"]] = _value(item.get("value"), depth)
    return found


def _spans(value: Any) -> Iterator[Mapping[str, Any]]:
    for resource in value.get("resourceSpans") or ():
        scopes = resource.get("scopeSpans") if isinstance(resource, Mapping) else None
        for scope in scopes if isinstance(scopes, list) else ():
            spans = scope.get("spans") if isinstance(scope, Mapping) else None
            for span in spans if isinstance(spans, list) else ():
                if isinstance(span, Mapping):
                    yield span


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, ensure_ascii=False, default=str)


def _parts_message(raw: Any, where: str) -> list[BaseMessage]:
    """A semconv message (`role` and `parts`) as LangChain messages (one per tool response)."""
    if not isinstance(raw, Mapping):
        msg = f"{where}: not a message object"
        raise Unreadable(msg)
    role, parts = raw.get("role"), raw.get("parts")
    if not isinstance(parts, list):
        return [openai.message(raw, where)]  # an OpenAI-shaped message
    texts: list[str] = []
    calls: list[ToolCall] = []
    invalid_calls: list[InvalidToolCall] = []
    responses: list[ToolMessage] = []
    for position, part in enumerate(parts):
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(_as_text(part.get("content")))
        elif kind == "tool_call":
            name = first_str(part.get("name"))
            if name is None:
                msg = f"{where}: a tool call without a name"
                raise Unreadable(msg)
            arguments = part.get("arguments")
            function: dict[str, Any] = {"name": name}
            if arguments is not None:  # a JSON string, or the object itself
                function["arguments" if isinstance(arguments, str) else "args"] = arguments
            call = {
                "id": first_str(part.get("id")) or f"{where}-call-{position}",
                "function": function,
            }
            valid, invalid = openai.tool_calls([call], where)
            calls.extend(valid)
            invalid_calls.extend(invalid)
        elif kind == "tool_call_response":
            response_id = first_str(part.get("id"))
            if response_id is None:
                msg = f"{where}: a tool call response without an id"
                raise Unreadable(msg)
            responses.append(
                ToolMessage(content=_as_text(part.get("response")), tool_call_id=response_id)
            )
    content = "".join(texts)
    if role == "assistant":
        return [AIMessage(content=content, tool_calls=calls, invalid_tool_calls=invalid_calls)]
    if role == "tool" or responses:
        return list(responses)
    if role == "user":
        return [HumanMessage(content=content)]
    if role == "system":
        return [SystemMessage(content=content)]
    shown = role if isinstance(role, str) else type(role).__name__
    msg = f"{where}: role {shown[:40]!r} is not system, user, assistant or tool"
    raise Unreadable(msg)


def _messages(raw: Any, where: str) -> list[BaseMessage]:
    found = _json(raw)
    if not isinstance(found, list):
        return []
    return [m for i, item in enumerate(found) for m in _parts_message(item, f"{where} {i + 1}")]


def _instructions(raw: Any) -> list[BaseMessage]:
    """`gen_ai.system_instructions` (a list of parts, or a str) as one system message."""
    found = _json(raw)
    if isinstance(found, list):
        found = "".join(
            _as_text(p.get("content"))
            for p in found
            if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return [SystemMessage(content=found)] if isinstance(found, str) and found else []


_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _event_messages(events: Any, where: str) -> tuple[list[BaseMessage], AIMessage | None]:
    """The earlier conventions: one span event per message, `gen_ai.choice` the answer."""
    history: list[BaseMessage] = []
    answer: AIMessage | None = None
    for index, event in enumerate(events if isinstance(events, list) else ()):
        name = event.get("name") if isinstance(event, Mapping) else None
        if name not in _EVENT_ROLES and name != "gen_ai.choice":
            continue
        fields = _attributes(event.get("attributes"))
        body = _json(fields.get("gen_ai.event.content"))
        body = dict(body) if isinstance(body, Mapping) else fields
        if name == "gen_ai.choice":
            found = _json(body.get("message"))
            body = dict(found) if isinstance(found, Mapping) else body
            role = "assistant"
        else:
            role = _EVENT_ROLES[name]
        raw = {
            "role": role,
            "content": _as_text(body.get("content")) if body.get("content") is not None else "",
            "tool_calls": _json(body.get("tool_calls")),
            "tool_call_id": first_str(body.get("id"), body.get("tool_call_id")),
        }
        message = openai.message(raw, f"{where} event {index + 1}")
        if name == "gen_ai.choice":
            answer = message if isinstance(message, AIMessage) else None
        else:
            history.append(message)
    return history, answer


_DETAILS = "gen_ai.client.inference.operation.details"


def _details(span: Mapping[str, Any], attributes: dict[str, Any]) -> dict[str, Any]:
    """The span's attributes, with those of its `_DETAILS` event where the span has no messages.

    The newest conventions may put the messages (and usage) on that event instead of the span."""
    if "gen_ai.input.messages" in attributes or "gen_ai.output.messages" in attributes:
        return attributes
    events = span.get("events")
    for event in events if isinstance(events, list) else ():
        if isinstance(event, Mapping) and event.get("name") == _DETAILS:
            return {**attributes, **_attributes(event.get("attributes"))}
    return attributes


def _model_call(span: Mapping[str, Any], attributes: dict[str, Any], where: str) -> ModelCall:
    attributes = _details(span, attributes)
    history = _instructions(attributes.get("gen_ai.system_instructions"))
    history += _messages(attributes.get("gen_ai.input.messages"), f"{where} input")
    answers = _messages(attributes.get("gen_ai.output.messages"), f"{where} output")
    answer = next((m for m in answers if isinstance(m, AIMessage)), None)
    if not history and answer is None:
        history, answer = _event_messages(span.get("events"), where)
    if answer is not None:
        input_tokens = non_negative_int(attributes.get("gen_ai.usage.input_tokens"))
        output_tokens = non_negative_int(attributes.get("gen_ai.usage.output_tokens"))
        if input_tokens is not None and output_tokens is not None:
            answer.usage_metadata = {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            }
    return ModelCall(history, answer)


def _tool_result(span: Mapping[str, Any], attributes: dict[str, Any]) -> ToolMessage | None:
    call_id = first_str(attributes.get("gen_ai.tool.call.id"))
    if call_id is None or "gen_ai.tool.call.result" not in attributes:
        return None
    status = span.get("status")
    failed = isinstance(status, Mapping) and status.get("code") in (2, "STATUS_CODE_ERROR")
    return ToolMessage(
        content=_as_text(_json(attributes["gen_ai.tool.call.result"])),
        tool_call_id=call_id,
        status="error" if failed else "success",
    )


def _nanos(value: Any) -> int | None:
    """An OTLP `fixed64` time: a JSON number, or (as OTLP JSON writes it) a decimal string of
    up to 20 digits; `None` for anything else."""
    if isinstance(value, str) and value.isdigit() and len(value) <= 20:
        return int(value)
    return non_negative_int(value)


def trace_conversation(
    trace: str, first_line: int, spans: list[tuple[int, Any]], problems: ReadProblems
) -> Conversation | None:
    """The conversation of one trace's spans (None: the trace has no chat span), in the order
    they started (`startTimeUnixNano`; a trace with a span without one keeps the file's order).

    Raises:
        Unreadable: a span that cannot be read, or a trace without a chat span's messages.
    """
    parts = TraceParts()
    start = in_time_order(
        attach_logs(spans), lambda span: span.get("startTimeUnixNano"), problems, parse=_nanos
    )
    for line, span in start:
        attributes = _attributes(span.get("attributes"))
        parts.thread = parts.thread or first_str(attributes.get("gen_ai.conversation.id"))
        operation = attributes.get("gen_ai.operation.name")
        if operation in _CHAT:
            parts.calls.append(_model_call(span, attributes, f"line {line}"))
        elif operation == "execute_tool":
            parts.add_result(_tool_result(span, attributes))
    return parts.conversation(
        trace, first_line, missing="chat span with messages (is content capture on?)"
    )


def read_otel(
    path: Path,
    problems: ReadProblems,
    *,
    max_open: int = MAX_OPEN_TRACES,
    limits: TraceLimits | None = None,
) -> Iterator[Conversation]:
    """The conversations of an OTLP JSON trace file (one export a line), one per trace, streamed.

    Each trace keeps only its `gen_ai.*` spans' GenAI fields (`compact_span`), within `limits`
    (`TraceLimits`: a trace over them is counted as unreadable).

    Raises:
        OSError: the file cannot be opened.
    """

    threads: OrderedDict[str, None] = OrderedDict()

    def spans() -> Iterator[tuple[int, Any]]:
        for line, value in json_records(path, problems):
            if is_otel_logs(value):  # the details events, sent as log records
                yield from ((line, span) for span in log_spans(value))
                continue
            if not is_otel(value):
                problems.line_problem(line, "not an OTLP trace export (no resourceSpans)")
                continue
            for span in _spans(value):
                kept = compact_span(span)
                names_thread = "status" not in kept and "attributes" in kept  # only that
                if names_thread and not first_seen(threads, kept.get("traceId")):  # once is enough
                    del kept["attributes"]
                yield line, kept

    def trace_of(span: Any) -> str | None:
        return first_str(span.get("traceId"))

    groups = group_by_trace(
        spans(), trace_of, problems, max_open=max_open, weigh=_weigh, limits=limits
    )

    def build(trace: str, first_line: int, spans: list[tuple[int, Any]]) -> Conversation | None:
        return trace_conversation(trace, first_line, spans, problems)

    yield from conversations(groups, build, problems)


_KEPT = frozenset((*_CHAT, "execute_tool"))
"""The operations whose spans a conversation is made of."""


def compact_span(span: Mapping[str, Any]) -> dict[str, Any]:
    """What `trace_conversation` reads of a span, no more.

    Its trace, start, status, and its `gen_ai.*` attributes and events; only the trace and
    start of a span of another operation (an HTTP or database span: `_weigh` lets it go), and
    its conversation id when it has one."""
    raw = span.get("attributes")
    attributes = [
        item
        for item in (raw if isinstance(raw, list) else ())
        if isinstance(item, Mapping)
        and isinstance(item.get("key"), str)
        and item["key"].startswith("gen_ai.")
    ]
    kept = {"traceId": span.get("traceId"), "startTimeUnixNano": span.get("startTimeUnixNano")}
    operation = _attributes(
        [item for item in attributes if item["key"] == "gen_ai.operation.name"]
    ).get("gen_ai.operation.name")
    if not (isinstance(operation, str) and operation in _KEPT):  # a hostile value: any type
        thread = [item for item in attributes if item["key"] == "gen_ai.conversation.id"]
        return {**kept, "attributes": thread} if thread else kept
    events = span.get("events")
    return {
        **kept,
        "spanId": span.get("spanId"),  # a details event sent as a log record names it
        "status": span.get("status"),
        "attributes": attributes,
        "events": [
            event
            for event in (events if isinstance(events, list) else ())
            if isinstance(event, Mapping) and str(event.get("name", "")).startswith("gen_ai.")
        ],
    }


def _weigh(span: Mapping[str, Any]) -> int | None:
    """A compact span's kept size; `None` (not kept) for one with no `gen_ai.*` attribute."""
    return kept_size([span.get("attributes"), span.get("events")]) if "attributes" in span else None
