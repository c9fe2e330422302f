"""OpenTelemetry GenAI events sent as log records: OTLP JSON logs beside (or without) the spans.

The newest GenAI conventions emit a model call's content as the event
`gen_ai.client.inference.operation.details`, and an SDK emits events as log records: an OTLP
logs export (`{"resourceLogs": [{"scopeLogs": [{"logRecords": [...]}]}]}`), each record with
its `eventName` (or an `event.name` attribute), `traceId`, `spanId`, `timeUnixNano` and the
event's attributes (`gen_ai.input.messages`, `gen_ai.output.messages`,
`gen_ai.system_instructions`, `gen_ai.usage.*`). The OTLP file exporter writes logs and traces
to separate files; `cat traces.jsonl logs.jsonl` gives one file the OTel reader takes.

Each such record becomes a span as the OTel reader reads spans (`log_spans`): a chat span whose
`events` hold the record. Within a trace, `attach_logs` moves a record onto the chat span it
names (`spanId`), where its attributes stand in for the content the span lacks (its own usage
kept); a record whose span is not in the file is a chat call of its own.

Deliberately not handled: the earlier per-message events (`gen_ai.user.message`, ...) sent as
log records.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["DETAILS", "attach_logs", "is_otel_logs", "log_spans"]

DETAILS = "gen_ai.client.inference.operation.details"


def is_otel_logs(value: Any) -> bool:
    """Whether a decoded line looks like an OTLP JSON logs export."""
    return isinstance(value, Mapping) and isinstance(value.get("resourceLogs"), list)


def _records(value: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for resource in value.get("resourceLogs") or ():
        scopes = resource.get("scopeLogs") if isinstance(resource, Mapping) else None
        for scope in scopes if isinstance(scopes, list) else ():
            records = scope.get("logRecords") if isinstance(scope, Mapping) else None
            for record in records if isinstance(records, list) else ():
                if isinstance(record, Mapping):
                    yield record


def _event_name(record: Mapping[str, Any]) -> Any:
    if record.get("eventName"):
        return record["eventName"]
    attributes = record.get("attributes")
    for item in attributes if isinstance(attributes, list) else ():
        if isinstance(item, Mapping) and item.get("key") == "event.name":
            value = item.get("value")
            return value.get("stringValue") if isinstance(value, Mapping) else None
    return None


def _genai(attributes: Any) -> list[Any]:
    """The `gen_ai.*` attributes alone: what a chat span keeps too."""
    return [
        item
        for item in (attributes if isinstance(attributes, list) else ())
        if isinstance(item, Mapping)
        and isinstance(item.get("key"), str)
        and item["key"].startswith("gen_ai.")
    ]


def log_spans(value: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The `DETAILS` records of a logs export, each as a chat span holding it as its event."""
    for record in _records(value):
        if _event_name(record) != DETAILS:
            continue
        yield {
            "traceId": record.get("traceId"),
            "spanId": record.get("spanId"),
            "startTimeUnixNano": record.get("timeUnixNano"),
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            ],
            "events": [{"name": DETAILS, "attributes": _genai(record.get("attributes"))}],
            "_log": True,
        }


def attach_logs(spans: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """A trace's spans with each log record's event moved onto the chat span it names."""
    by_id = {
        span.get("spanId"): index
        for index, (_, span) in enumerate(spans)
        if not span.get("_log") and span.get("spanId")
    }
    moved: dict[int, list[Any]] = {}
    for _, span in spans:
        target = by_id.get(span.get("spanId")) if span.get("_log") else None
        if target is not None:
            moved.setdefault(target, []).extend(span["events"])
    if not moved:
        return spans
    joined = []
    for index, (line, span) in enumerate(spans):
        if index in moved:
            events = span.get("events")
            span = {
                **span,
                "events": [*(events if isinstance(events, list) else ()), *moved[index]],
            }
        if not span.get("_log") or span.get("spanId") not in by_id:
            joined.append((line, span))
    return joined
