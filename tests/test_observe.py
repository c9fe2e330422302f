"""Every run's record reaches the ecosystem's channels, and no tool content or argument does."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage

from routers import ROUTERS, Router
from toolstop import Outcome, StopPolicy, signal
from toolstop.testing import ScriptedChatModel, call, forced_tool, turn

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="needs opentelemetry-sdk")
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

SECRET = "SENTINEL-7f3a-do-not-leak"
EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _tracer_provider() -> Iterator[None]:
    provider = otel_sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)
    return


@pytest.fixture(autouse=True)
def _clear_spans() -> None:
    EXPORTER.clear()


class Events(BaseCallbackHandler):
    """Collects LangChain custom callback events (what LangSmith would show on the trace)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(
        self,
        name: str,
        data: Any,
        *,
        run_id: UUID,
        tags: Any = None,
        metadata: Any = None,
        **kw: Any,
    ) -> None:
        self.events.append((name, data))


@pytest.fixture(params=ROUTERS, ids=lambda r: r.name)
def router(request: pytest.FixtureRequest) -> Router:
    return request.param  # type: ignore[no-any-return]


SCENARIOS = {
    # name: (tool results, script after the first call, mode, expected rule)
    "completed": ([(f"page {SECRET}", signal(Outcome.COMPLETED))], [], "hard", "completed"),
    "fatal": ([(f"declined {SECRET}", signal(Outcome.FATAL))], [], "hard", "fatal"),
    "policy_block": (
        [(f"blocked {SECRET}", signal(Outcome.POLICY_BLOCK))],
        [],
        "hard",
        "policy_block",
    ),
    "retry_budget": (
        [(f"timeout {SECRET}", signal(Outcome.TRANSIENT))],
        [call("lookup", query=SECRET)],
        "hard",
        "retry_budget",
    ),
    "polish": (
        [(f"page {SECRET}", signal(Outcome.COMPLETED))],
        ["narrated"],
        "polish",
        "completed",
    ),
    "never": ([(f"page {SECRET}", signal(Outcome.COMPLETED))], ["paraphrase"], "never", "none"),
}


def observe(router: Router, name: str, caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    results, more, mode, _ = SCENARIOS[name]
    policy = StopPolicy(mode=mode, max_transient_retries=1)  # type: ignore[arg-type]
    model = ScriptedChatModel([call("lookup", query=SECRET), *more], id_prefix="call")
    agent = router.build(model, [forced_tool("lookup", *results)], policy=policy, checkpointer=None)
    handler = Events()
    custom: list[Any] = []
    final: dict[str, Any] = {}
    with caplog.at_level(logging.INFO, logger="toolstop"):
        chunks = agent.stream(
            {"messages": [HumanMessage(f"question {SECRET}")]},
            {"callbacks": [handler]},
            stream_mode=["custom", "values"],
        )
        for kind, chunk in chunks:
            if kind == "custom":
                custom.append(chunk)
            else:
                final = chunk
    model.assert_complete()
    logs = [r for r in caplog.records if r.name == "toolstop"]
    events = [
        e for s in EXPORTER.get_finished_spans() for e in s.events if e.name == "toolstop.run_end"
    ]
    return {
        "record": final["stop_record"],
        "stream": custom,
        "logs": [(r.getMessage(), getattr(r, "toolstop", None)) for r in logs],
        "callbacks": handler.events,
        "spans": [dict(e.attributes or {}) for e in events],
    }


def flattened(record: dict[str, Any]) -> dict[str, Any]:
    """The span attributes a record should become, written out here (not with the code under
    test): nested counts as dotted keys, lists as tuples, None as "", invalid signals as their
    problems."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, dict):
            for inner, count in value.items():
                if isinstance(count, dict):
                    for k, v in count.items():
                        if isinstance(v, dict):
                            out.update(
                                {
                                    f"toolstop.{key}.{inner}.{k}.{f}": tuple(x)
                                    if isinstance(x, list)
                                    else x
                                    for f, x in v.items()
                                }
                            )
                        else:
                            out[f"toolstop.{key}.{inner}.{k}"] = (
                                tuple(v) if isinstance(v, list) else v
                            )
                else:
                    out[f"toolstop.{key}.{inner}"] = count
        elif key == "invalid_signals":
            out[f"toolstop.{key}"] = tuple(str(entry["problem"]) for entry in value)
        elif isinstance(value, list):
            out[f"toolstop.{key}"] = tuple(value)
        else:
            out[f"toolstop.{key}"] = "" if value is None else value
    return out


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_each_channel_names_the_rule_and_nothing_leaks(
    router: Router, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    seen = observe(router, name, caplog)
    rule = SCENARIOS[name][3]
    record = seen["record"]
    assert record["rule"] == rule
    run_ends = [e for e in seen["stream"] if e.get("toolstop") == "run_end"]
    assert [e["record"] for e in run_ends] == [record]
    assert [extra for _, extra in seen["logs"]] == [record]
    assert f"rule={rule}" in seen["logs"][0][0]
    assert seen["callbacks"] == [("toolstop_run_end", record)]
    assert len(seen["spans"]) == 1
    assert seen["spans"][0]["toolstop.rule"] == rule
    assert seen["spans"][0] == flattened(record)
    # The planted secret was in the question, the tool's arguments and its content.
    everything = json.dumps(seen, default=str)
    assert SECRET not in everything


def test_the_span_event_carries_every_field_of_the_record(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    seen = observe(router, "never", caplog)
    record = seen["record"]
    assert seen["spans"] == [
        {
            "toolstop.schema_version": 5,
            "toolstop.run": 1,
            "toolstop.rule": "none",
            "toolstop.stopped": False,
            "toolstop.mode": "never",
            "toolstop.parallel": "all",
            "toolstop.would_stop": "completed",
            "toolstop.would_save.model_calls": 1,
            "toolstop.would_save.input_tokens": record["would_save"]["input_tokens"],
            "toolstop.would_save.output_tokens": record["would_save"]["output_tokens"],
            "toolstop.tools": ("lookup",),
            "toolstop.tool_call_ids": ("call_0_0",),
            "toolstop.relayed": (),
            "toolstop.on_budget": "message",
            "toolstop.invalid_signals": (),
            "toolstop.outcomes.completed": 1,
            "toolstop.outcomes.transient": 0,
            "toolstop.outcomes.fatal": 0,
            "toolstop.outcomes.policy_block": 0,
            "toolstop.outcomes.invalid": 0,
            "toolstop.outcomes.unsignalled": 0,
            "toolstop.outcomes.rejected": 0,
            "toolstop.transient_retries": 0,
            "toolstop.tool_turns": 1,
            "toolstop.model_calls": 2,
            "toolstop.input_tokens": record["input_tokens"],
            "toolstop.output_tokens": record["output_tokens"],
            "toolstop.calls_by_tool.lookup": 1,
            "toolstop.ended_after.tools.lookup": record["ended_after"]["tools"]["lookup"],
            "toolstop.ended_after.input_tokens": record["ended_after"]["input_tokens"],
            "toolstop.ended_after.output_tokens": record["ended_after"]["output_tokens"],
            "toolstop.ended_after.judged.lookup.shape": "value",
            "toolstop.ended_after.judged.lookup.action": record["ended_after"]["judged"]["lookup"][
                "action"
            ],
            "toolstop.ended_after.judged.lookup.fields": (),
            "toolstop.after_first.lookup.model_calls": 1,
            "toolstop.after_first.lookup.input_tokens": record["would_save"]["input_tokens"],
            "toolstop.after_first.lookup.output_tokens": record["ended_after"]["output_tokens"],
            "toolstop.after_first.lookup.skipped": (),
            "toolstop.asked": (),
            "toolstop.would_skip": (),
        }
    ]
    assert record["would_save"]["input_tokens"] > 0  # tokens from the messages' usage


def test_the_span_event_lists_invalid_signals_by_problem(router: Router) -> None:
    model = ScriptedChatModel([call("lookup"), "answer"])
    agent = router.build(
        model,
        [forced_tool("lookup", (f"page {SECRET}", {"stop": "yes", "reason": SECRET}))],
        policy=None,
        checkpointer=None,
    )
    agent.invoke({"messages": [HumanMessage("q")]})
    [event] = [
        e for s in EXPORTER.get_finished_spans() for e in s.events if e.name == "toolstop.run_end"
    ]
    attributes = dict(event.attributes or {})
    assert attributes["toolstop.invalid_signals"] == ("stop_not_bool",)
    assert attributes["toolstop.outcomes.invalid"] == 1
    assert SECRET not in json.dumps(attributes, default=str)


def test_turn_events_carry_signals_and_progress_only(router: Router) -> None:
    poll = forced_tool(
        "poll",
        (f"running {SECRET}", signal(Outcome.COMPLETED, stop=False, progress=0.5, secret=SECRET)),
        ("done", signal(Outcome.COMPLETED, progress=1.0)),
    )
    model = ScriptedChatModel([call("poll"), turn(call("poll"))])
    agent = router.build(model, [poll], policy=None, checkpointer=None)
    turns = [
        chunk
        for chunk in agent.stream({"messages": [HumanMessage("q")]}, stream_mode="custom")
        if chunk.get("toolstop") == "turn"
    ]
    assert [t["signals"][0]["progress"] for t in turns] == [0.5, 1.0]
    assert [t["signals"][0]["stop"] for t in turns] == [False, True]
    assert SECRET not in json.dumps(turns)
    # The shape docs/observability.md documents.
    assert [sorted(t) for t in turns] == [["signals", "toolstop", "turn"]] * 2
    assert [t["turn"] for t in turns] == [1, 2]
    first = turns[0]["signals"][0]
    assert sorted(first) == ["problem", "progress", "reason", "stop", "tool", "tool_call_id"]
    assert (first["tool"], first["reason"], first["problem"]) == ("poll", "completed", None)


def test_a_failing_channel_never_breaks_the_run(
    router: Router, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken(BaseCallbackHandler):
        raise_error = True  # LangChain re-raises it: only toolstop's own guard can catch it

        def on_custom_event(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("observer down")

    def broken_writer(chunk: Any) -> None:
        raise RuntimeError("stream consumer down")

    written: list[str] = []

    def writer() -> Any:
        written.append("asked")
        return broken_writer

    monkeypatch.setattr("toolstop.observe.get_stream_writer", writer)
    model = ScriptedChatModel([call("lookup")])
    agent = router.build(
        model,
        [forced_tool("lookup", ("page", signal("completed")))],
        policy=None,
        checkpointer=None,
    )
    state = agent.invoke({"messages": [HumanMessage("q")]}, {"callbacks": [Broken()]})
    assert state["stop_record"]["rule"] == "completed"
    assert written  # the failing writer was reached (turn and run_end events)


def test_no_stream_event_is_built_when_nobody_streams_custom_events(
    router: Router, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolstop.observe

    built: list[object] = []
    real = toolstop.observe._progress
    monkeypatch.setattr(toolstop.observe, "_progress", lambda m: built.append(m) or real(m))

    def agent() -> Any:
        poll = forced_tool(
            "poll",
            ("running", signal(Outcome.COMPLETED, stop=False)),
            ("done", signal(Outcome.COMPLETED)),
        )
        model = ScriptedChatModel([call("poll"), call("poll")])
        return router.build(model, [poll], policy=None, checkpointer=None)

    agent().invoke({"messages": [HumanMessage("q")]})
    list(agent().stream({"messages": [HumanMessage("q")]}, stream_mode=["values", "updates"]))
    assert built == []  # LangGraph's writer does nothing here: no event is built for it
    list(agent().stream({"messages": [HumanMessage("q")]}, stream_mode="custom"))
    assert len(built) == 2  # one per tool turn, when someone listens


def test_nobody_listening_asks_opentelemetry_nothing(
    router: Router, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an SDK no run looks a provider up (OpenTelemetry's lookup reads the environment
    on every call until one is set); once an SDK is set, the run end asks for it."""
    from opentelemetry import metrics
    from opentelemetry.metrics import _internal as metrics_internal

    asked: list[str] = []
    real_tracer_provider = trace.get_tracer_provider()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", None)
    monkeypatch.setattr(
        trace, "get_tracer_provider", lambda: asked.append("tracer") or trace.ProxyTracerProvider()
    )
    monkeypatch.setattr(
        metrics, "get_meter_provider", lambda: asked.append("meter") or metrics.NoOpMeterProvider()
    )

    def run() -> None:
        model = ScriptedChatModel([call("lookup")])
        tool = forced_tool("lookup", ("found", signal(Outcome.COMPLETED)))
        agent = router.build(model, [tool], policy=None, checkpointer=None)
        assert agent.invoke({"messages": [HumanMessage("q")]})["stop_record"]["stopped"]

    run()
    assert asked == []
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", real_tracer_provider)
    run()
    assert asked == ["tracer"]
