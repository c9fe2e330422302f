"""OpenTelemetry metrics of finished runs, beside the span events (`opentelemetry-api`).

Recorded when a run ends, and only when the application has set a `MeterProvider` (with none
set, nothing is computed). Names are toolstop's own (`toolstop.*`); attributes follow the
OpenTelemetry GenAI semantic conventions where they apply (`gen_ai.operation.name` is
`invoke_agent`, `gen_ai.token.type` is `input` / `output`, `gen_ai.tool.name`,
`gen_ai.agent.name`), units are UCUM annotations (`{run}`, `{call}`, `{token}`).

Instruments (attributes in brackets; the table with units is in docs/metrics.md):
- `toolstop.runs` [mode, rule, would_stop, stopped]: finished runs;
- `toolstop.stops` [mode, rule, `gen_ai.tool.name`]: runs stopped, per deciding tool (in `never`
  mode: would have stopped; rule is then the `would_stop` rule);
- `toolstop.model_calls` [mode, rule] and the histogram `toolstop.run.model_calls` (per run);
- `toolstop.tokens` [mode, `gen_ai.token.type`]: tokens from the provider's usage;
- `toolstop.tool_calls` [mode, `toolstop.signal`]: tool calls by reason, `invalid`,
  `unsignalled`, `rejected`;
- `toolstop.would_save.model_calls`, `toolstop.would_save.tokens` [would_stop,
  `gen_ai.token.type`]: shadow mode, what a stop would have saved;
- `toolstop.reasks` [`toolstop.arm`, `toolstop.asked_again`, `toolstop.why`,
  `toolstop.stopped`, `gen_ai.tool.name`]: runs that followed a run ended (or, in shadow,
  that would have ended) on a tool result, by whether the user asked again; the arm and
  `stopped` are the earlier run's;
- `toolstop.sent_back` [`gen_ai.tool.name`]: a canary's way back sent the tool back to `never`
  mode (`toolstop.canary.WayBack`), once each time it goes back, in each process.

Under a canary every instrument but `toolstop.sent_back` also carries `toolstop.arm`.

`mode`, `rule`, `would_stop` and `stopped` are `toolstop.mode`, `toolstop.rule`,
`toolstop.would_stop` and `toolstop.stopped`. Like every channel, metrics never carry tool
content or arguments, and a failing exporter never breaks a run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

_otel_metrics_internal: Any
try:  # optional: OpenTelemetry is used when the application has it
    from opentelemetry import metrics as _otel_metrics
except ImportError:  # pragma: no cover - depends on the environment
    _otel_metrics = None  # type: ignore[assignment]
try:  # where the API keeps its provider; without it the API is asked on every run
    from opentelemetry.metrics import _internal as _otel_metrics_internal
except ImportError:  # pragma: no cover - depends on the OpenTelemetry version
    _otel_metrics_internal = None

__all__ = ["MODEL_CALL_BUCKETS", "deciding_tools", "record_run_metrics", "record_sent_back"]

MODEL_CALL_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50)
"""Bucket bounds of `toolstop.run.model_calls` (an advice to the SDK; views may override)."""


class _Instruments:
    """The instruments, made once from the API's proxy meter (they follow a provider set later)."""

    def __init__(self, meter: Any) -> None:
        self.runs = meter.create_counter("toolstop.runs", "{run}", "Finished agent runs")
        self.stops = meter.create_counter(
            "toolstop.stops", "{stop}", "Runs stopped (never mode: would have), per deciding tool"
        )
        self.model_calls = meter.create_counter(
            "toolstop.model_calls", "{call}", "Model calls of finished runs"
        )
        try:
            self.per_run = meter.create_histogram(
                "toolstop.run.model_calls",
                "{call}",
                "Model calls per run",
                explicit_bucket_boundaries_advisory=[float(b) for b in MODEL_CALL_BUCKETS],
            )
        except TypeError:  # pragma: no cover - opentelemetry-api < 1.23 has no advice
            self.per_run = meter.create_histogram(
                "toolstop.run.model_calls", "{call}", "Model calls per run"
            )
        self.tokens = meter.create_counter(
            "toolstop.tokens", "{token}", "Tokens of finished runs (provider usage)"
        )
        self.tool_calls = meter.create_counter(
            "toolstop.tool_calls", "{call}", "Tool calls by signal"
        )
        self.saved_calls = meter.create_counter(
            "toolstop.would_save.model_calls",
            "{call}",
            "Shadow mode: model calls a stop would have saved",
        )
        self.saved_tokens = meter.create_counter(
            "toolstop.would_save.tokens", "{token}", "Shadow mode: tokens a stop would have saved"
        )
        self.reasks = meter.create_counter(
            "toolstop.reasks",
            "{run}",
            "Runs after a (would-)stop on a tool result, by whether the user asked again",
        )
        self.sent_back = meter.create_counter(
            "toolstop.sent_back", "{tool}", "Tools a canary's way back sent back to never mode"
        )


_instruments = _Instruments(_otel_metrics.get_meter("toolstop")) if _otel_metrics else None


def provider_may_be_set(api: Any, attribute: str, variable: str) -> bool:
    """False when the OpenTelemetry API has certainly no provider (nobody listens).

    Asking the API (`get_meter_provider()`, `get_tracer_provider()`) reads the environment on every
    call until a provider is set; this reads the API's global instead (`attribute`), and the
    environment variable that configures a provider (`variable`) as it was when toolstop was
    imported. True when either says a provider may be set, or when the global is not where it
    is expected (then the API decides).
    """
    found = getattr(api, attribute, _UNKNOWN)
    return found is _UNKNOWN or found is not None or variable in _CONFIGURED


_UNKNOWN = object()
_CONFIGURED = frozenset(
    name
    for name in ("OTEL_PYTHON_METER_PROVIDER", "OTEL_PYTHON_TRACER_PROVIDER")
    if name in os.environ
)
"""The provider variables set when toolstop was imported."""


def _provider_set() -> bool:
    """True when the application set a MeterProvider (the API's default is a proxy)."""
    if _otel_metrics is None or not provider_may_be_set(
        _otel_metrics_internal, "_METER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER"
    ):
        return False
    provider = _otel_metrics.get_meter_provider()
    name = type(provider).__name__
    return name not in ("_ProxyMeterProvider", "NoOpMeterProvider")


def deciding_tools(record: Mapping[str, Any]) -> tuple[str | None, list[str], bool]:
    """The rule a run's deciding tools stopped it by, those tools, and whether it was a shadow stop.

    Returns `(rule, tools, shadow)`: the tools each once, and `shadow` when `never` mode only
    recorded the stop (the run would have stopped). `(None, [], False)` when no tool decided (the
    model answered; a step budget)."""
    tools = [str(t) for t in dict.fromkeys(record.get("tools") or [])]
    rule = record.get("rule")
    if record.get("stopped") and rule != "step_budget":
        return str(rule), tools, False
    would_stop = record.get("would_stop")
    if would_stop is not None:
        return str(would_stop), tools, True
    return None, [], False


def _record_reask(reask: Any, agent_name: str | None) -> None:
    """Count a run's re-ask verdict on the earlier run, once per deciding tool of that run."""
    if _instruments is None or not isinstance(reask, Mapping):
        return
    said: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "toolstop.asked_again": reask.get("asked_again") is True,
        "toolstop.why": str(reask.get("why")),
        "toolstop.stopped": reask.get("stopped") is True,
    }
    if isinstance(reask.get("arm"), str):
        said["toolstop.arm"] = reask["arm"]
    if agent_name:
        said["gen_ai.agent.name"] = agent_name
    tools = reask.get("tools")
    for tool in tools[:16] if isinstance(tools, list) else []:
        _instruments.reasks.add(1, {**said, "gen_ai.tool.name": str(tool)})


def record_run_metrics(record: Mapping[str, Any], agent_name: str | None = None) -> None:
    """Record one finished run's metrics (nothing when no MeterProvider is set).

    Args:
        record: The run's stop record.
        agent_name: The agent's name, when known (`gen_ai.agent.name`).
    """
    if _instruments is None or not _provider_set():
        return
    mode = str(record.get("mode"))
    rule = str(record.get("rule"))
    would_stop = record.get("would_stop")
    base: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "toolstop.mode": mode}
    if agent_name:
        base["gen_ai.agent.name"] = agent_name
    arm = record.get("arm")
    if isinstance(arm, str):
        base["toolstop.arm"] = arm
    _record_reask(record.get("reask"), agent_name)
    ruled = {**base, "toolstop.rule": rule}
    _instruments.runs.add(
        1,
        {
            **ruled,
            "toolstop.would_stop": str(would_stop or "none"),
            "toolstop.stopped": bool(record.get("stopped")),
        },
    )
    calls = int(record.get("model_calls") or 0)
    _instruments.model_calls.add(calls, ruled)
    _instruments.per_run.record(calls, ruled)
    for kind in ("input", "output"):
        count = int(record.get(f"{kind}_tokens") or 0)
        if count:
            _instruments.tokens.add(count, {**base, "gen_ai.token.type": kind})
    stop_rule, tools, _ = deciding_tools(record)
    for tool in tools:
        _instruments.stops.add(1, {**base, "toolstop.rule": stop_rule, "gen_ai.tool.name": tool})
    for signal, count in (record.get("outcomes") or {}).items():
        if count:
            _instruments.tool_calls.add(int(count), {**base, "toolstop.signal": str(signal)})
    saved = record.get("would_save")
    if would_stop is not None and isinstance(saved, Mapping):
        shadow = {**base, "toolstop.would_stop": str(would_stop)}
        _instruments.saved_calls.add(int(saved.get("model_calls") or 0), shadow)
        for kind in ("input", "output"):
            count = int(saved.get(f"{kind}_tokens") or 0)
            if count:
                _instruments.saved_tokens.add(count, {**shadow, "gen_ai.token.type": kind})


def record_sent_back(tool: str) -> None:
    """Count one tool sent back to `never` mode by a canary's way back (nothing without a provider).

    Args:
        tool: The tool's name.
    """
    if _instruments is None or not _provider_set():
        return
    _instruments.sent_back.add(1, {"gen_ai.tool.name": tool})
