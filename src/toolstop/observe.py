"""Where a run's stop record goes besides the state: the ecosystem's own channels.

When a run ends, its record is published as
- a custom stream event (LangGraph's stream writer; `stream_mode="custom"`):
  `{"toolstop": "run_end", "record": {...}}`;
- a structured log record on logger `toolstop` (the record under `extra={"toolstop": ...}`);
- a LangChain custom callback event `toolstop_run_end` (LangSmith shows it on the trace; any
  callback handler's `on_custom_event` receives it);
- an OpenTelemetry span event `toolstop.run_end` on the current span (or a short `toolstop.run`
  span when none is recording), when `opentelemetry-api` is installed and an SDK is set;
- OpenTelemetry metrics (`toolstop.metrics`), when a MeterProvider is set.

The log record also carries the thread (`extra={"toolstop_thread": {"thread_id": ...,
"checkpoint_ns": ...}}`, when the run has one); `toolstop.logs.JsonLines` writes both as one JSON
line, the format `toolstop report --log` reads.

After each tool turn a `{"toolstop": "turn", ...}` stream event carries each call's signal and,
when the artifact has a numeric `progress`, that number (for a UI; the model never sees it).

Records hold names, ids, counts and rules only; nothing here reads tool content or arguments.
Every channel is best effort: a failing handler never breaks the agent's run.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from types import CodeType
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.config import get_stream_writer

from toolstop._printable import printable
from toolstop.decision import Decision, Turn
from toolstop.metrics import provider_may_be_set, record_run_metrics
from toolstop.record import StopRecord

try:  # optional: OpenTelemetry is used when the application has it
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover - depends on the environment
    _otel_trace = None  # type: ignore[assignment]

# A proxy tracer: it follows whatever provider the application sets later.
_tracer = _otel_trace.get_tracer("toolstop") if _otel_trace is not None else None

__all__ = [
    "EVENT_RUN_END",
    "EVENT_TURN",
    "apublish_run_end",
    "logger",
    "publish_run_end",
    "publish_turn",
    "span_attributes",
]

logger = logging.getLogger("toolstop")
EVENT_RUN_END = "run_end"
EVENT_TURN = "turn"


def _does_nothing(_: Any) -> None:
    pass


_NOTHING = _does_nothing.__code__.co_code
"""The bytecode of a function that does nothing: LangGraph's writer when nobody streams "custom"."""

_silent: CodeType | None = None
"""The code object last found to do nothing (LangGraph makes a new writer per invocation from
one code object, so one identity check answers every later call)."""


def _stream_writer() -> Any:
    """The graph's custom-stream writer, or `None` when nobody streams custom events.

    Outside `stream_mode="custom"` LangGraph hands out a writer that does nothing; building an
    event for it would be work nobody receives, so it counts as no writer.
    """
    global _silent
    try:
        writer = get_stream_writer()
    except Exception:  # outside a graph run
        return None
    code = getattr(writer, "__code__", None)
    if code is None:
        return writer
    if code is _silent:
        return None
    if code.co_code == _NOTHING and not code.co_names:  # reading co_code copies the bytecode
        _silent = code
        return None
    return writer


def _progress(message: ToolMessage | None) -> float | None:
    artifact = getattr(message, "artifact", None)
    if not isinstance(artifact, dict):
        return None
    try:
        value = dict.get(artifact, "progress")
    except Exception:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def publish_turn(decision: Decision, turn: Turn, record: StopRecord) -> None:
    """Stream one tool turn's signals (and artifact `progress`) as a custom event."""
    writer = _stream_writer()
    if writer is None:
        return
    by_id = {message.tool_call_id: message for message in turn.results}
    signals = []
    for signal in decision.signals:
        entry: dict[str, Any] = {
            "tool": signal.tool,
            "tool_call_id": signal.tool_call_id,
            "reason": signal.reason.value if signal.reason else None,
            "stop": signal.stop,
            "problem": signal.problem.value if signal.problem else None,
        }
        progress = _progress(by_id.get(signal.tool_call_id))
        if progress is not None:
            entry["progress"] = progress
        signals.append(entry)
    event = {"toolstop": EVENT_TURN, "turn": record["tool_turns"], "signals": signals}
    _safely(writer, event)


def span_attributes(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record flattened to OpenTelemetry attribute types (str, bool, int, lists of str)."""
    attributes: dict[str, Any] = {}
    for key, value in record.items():
        name = f"toolstop.{key}"
        if isinstance(value, (str, bool, int, float)):
            attributes[name] = value
        elif value is None:
            attributes[name] = ""
        elif isinstance(value, dict):
            for inner, count in value.items():
                if isinstance(count, dict):  # ended_after.tools: tool -> overlap
                    for deeper, number in count.items():
                        if isinstance(number, dict):  # ended_after.judged: tool -> features
                            for key_, feature in number.items():
                                attributes[f"{name}.{inner}.{deeper}.{key_}"] = feature
                        else:
                            attributes[f"{name}.{inner}.{deeper}"] = number
                else:
                    attributes[f"{name}.{inner}"] = count
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            attributes[name] = list(value)
        elif isinstance(value, list):  # invalid_signals: problems only
            attributes[name] = [str(v.get("problem")) for v in value if isinstance(v, dict)]
    return attributes


def _safely(function: Any, *args: Any, **kwargs: Any) -> None:
    try:
        function(*args, **kwargs)
    except Exception:  # an observer must never break the run
        logger.debug("toolstop: an observability channel failed", exc_info=True)


def _has_handlers(callbacks: Any) -> bool:
    """True when someone listens: a non-empty list, or a manager with handlers."""
    if not callbacks:
        return False
    handlers = getattr(callbacks, "handlers", callbacks)
    return bool(handlers)


def _callback_event(record: StopRecord, config: Any) -> None:
    if not config or not _has_handlers(config.get("callbacks")):
        return  # nobody listens: skip building a callback manager on every run
    from langchain_core.callbacks.manager import dispatch_custom_event

    dispatch_custom_event("toolstop_run_end", dict(record), config=config)


async def _acallback_event(record: StopRecord, config: Any) -> None:
    if not config or not _has_handlers(config.get("callbacks")):
        return
    from langchain_core.callbacks.manager import adispatch_custom_event

    await adispatch_custom_event("toolstop_run_end", dict(record), config=config)


def _span_event(record: StopRecord) -> None:
    if (
        _otel_trace is None
        or not provider_may_be_set(_otel_trace, "_TRACER_PROVIDER", "OTEL_PYTHON_TRACER_PROVIDER")
        or isinstance(_otel_trace.get_tracer_provider(), _otel_trace.ProxyTracerProvider)
    ):
        return  # no OpenTelemetry SDK configured: nobody records spans
    span = _otel_trace.get_current_span()
    if span.is_recording():
        span.add_event("toolstop.run_end", span_attributes(record))
        return
    assert _tracer is not None
    own = _tracer.start_span("toolstop.run")
    if not own.is_recording():  # no SDK configured: the API's no-op span, nothing to record
        return
    own.add_event("toolstop.run_end", span_attributes(record))
    own.end()


_SHOWN_THREAD = 200
"""Characters of a thread id the log line shows (the whole id is in `extra`)."""


def _publish_stream_and_log(record: StopRecord, config: Any) -> None:
    writer = _stream_writer()
    if writer is not None:
        _safely(writer, {"toolstop": EVENT_RUN_END, "record": dict(record)})
    if logger.isEnabledFor(logging.INFO):
        configurable = (config or {}).get("configurable") or {}
        # The node's namespace ends with its own task; the graph's is what comes before it.
        task_ns = configurable.get("checkpoint_ns")
        thread = {
            "thread_id": configurable.get("thread_id"),
            "checkpoint_ns": task_ns.rpartition("|")[0] if isinstance(task_ns, str) else "",
        }
        shown = printable(str(thread["thread_id"]))
        logger.info(
            "run ended: thread=%s run=%s rule=%s stopped=%s mode=%s model_calls=%d "
            "input_tokens=%d output_tokens=%d tools=%s",
            shown if len(shown) <= _SHOWN_THREAD else shown[:_SHOWN_THREAD] + "...",
            record["run"],
            record["rule"],
            record["stopped"],
            record["mode"],
            record["model_calls"],
            record["input_tokens"],
            record["output_tokens"],
            ",".join(printable(str(tool)) for tool in record["tools"]) or "-",
            extra={"toolstop": dict(record), "toolstop_thread": thread},
        )


def _publish_telemetry(record: StopRecord, config: Any) -> None:
    _safely(_span_event, record)
    _safely(record_run_metrics, record, agent_name(config))


def publish_run_end(record: StopRecord, config: Any = None) -> None:
    """Publish a finished run's record on every channel (see the module docstring)."""
    _publish_stream_and_log(record, config)
    _safely(_callback_event, record, config)
    _publish_telemetry(record, config)


async def apublish_run_end(record: StopRecord, config: Any = None) -> None:
    """Async twin of `publish_run_end`, for nodes that run on the event loop.

    The callback event goes through `adispatch_custom_event`: async handlers (`astream_events`,
    an `AsyncCallbackHandler`) run on the event loop, where the sync dispatch would hand them to
    langchain-core's thread pool.
    """
    _publish_stream_and_log(record, config)
    try:
        await _acallback_event(record, config)
    except Exception:  # an observer must never break the run
        logger.debug("toolstop: an observability channel failed", exc_info=True)
    _publish_telemetry(record, config)


def agent_name(config: Any) -> str | None:
    """The agent's name in a run's config (`create_agent(name=...)`), or None."""
    name = ((config or {}).get("metadata") or {}).get("lc_agent_name")
    return name if isinstance(name, str) else None
