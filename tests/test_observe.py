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
from toolstop.observe import span_attributes
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
    model = ScriptedChatModel([call("lookup", query=SECRET), *more])
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
    expected = {
        k: tuple(v) if isinstance(v, list) else v for k, v in span_attributes(record).items()
    }
    assert seen["spans"][0] == expected
    # The planted secret was in the question, the tool's arguments and its content.
    everything = json.dumps(seen, default=str)
    assert SECRET not in everything


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


def test_a_failing_channel_never_breaks_the_run(router: Router) -> None:
    class Broken(BaseCallbackHandler):
        raise_error = False

        def on_custom_event(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("observer down")

    model = ScriptedChatModel([call("lookup")])
    agent = router.build(
        model,
        [forced_tool("lookup", ("page", signal("completed")))],
        policy=None,
        checkpointer=None,
    )
    state = agent.invoke({"messages": [HumanMessage("q")]}, {"callbacks": [Broken()]})
    assert state["stop_record"]["rule"] == "completed"
