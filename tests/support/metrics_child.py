"""A child process for the metrics test: OpenTelemetry's meter provider is global and can be set
once per process, so the runs happen here. Prints the collected metric points and the figures
the runs' own messages give, as JSON."""

from __future__ import annotations

import json
import sys
from typing import Any

from langchain_core.messages import AIMessage

from toolstop import Outcome, StopOnArtifact, StopPolicy, build_react_graph, signal
from toolstop.testing import ScriptedChatModel, call, forced_tool

DONE = ("Paid. Receipt r-1.", signal(Outcome.COMPLETED))
RETRY = ("The service timed out.", signal(Outcome.TRANSIENT))


def usage(state: dict[str, Any], after: int = 0) -> dict[str, int]:
    answers = [m for m in state["messages"][after:] if isinstance(m, AIMessage)]
    found = [m.usage_metadata or {} for m in answers]
    return {
        "calls": sum(1 for m in answers if m.usage_metadata),
        "input": sum(u.get("input_tokens", 0) for u in found),
        "output": sum(u.get("output_tokens", 0) for u in found),
    }


def runs() -> dict[str, Any]:
    from langchain.agents import create_agent

    seen: dict[str, Any] = {}
    pay = forced_tool("pay", DONE)
    hard = build_react_graph(ScriptedChatModel([call("pay")]), [pay])
    seen["hard"] = usage(hard.invoke({"messages": [("user", "pay")]}))
    shadow = build_react_graph(
        ScriptedChatModel([call("pay"), "You paid."]), [pay], policy=StopPolicy(mode="never")
    )
    state = shadow.invoke({"messages": [("user", "pay")]})
    seen["never"] = usage(state)
    seen["never_saved"] = usage(state, after=3)  # after user, call, tool result
    lookup = forced_tool("lookup", RETRY, ("Refunds take 5 days.", signal(Outcome.COMPLETED)))
    model = ScriptedChatModel([call("lookup"), call("lookup")])
    agent = create_agent(model, [lookup], middleware=[StopOnArtifact()], name="support")
    seen["agent"] = usage(agent.invoke({"messages": [("user", "refunds?")]}))
    plain = forced_tool("plain", ("Just text.", None))
    quiet = build_react_graph(ScriptedChatModel([call("plain"), "Done."]), [plain])
    seen["plain"] = usage(quiet.invoke({"messages": [("user", "hi")]}))
    return seen


def canary_runs() -> dict[str, Any]:
    """Two threads under a canary (one per arm), each asking again after a (would-)stop."""
    from langgraph.checkpoint.memory import InMemorySaver

    from toolstop.policy import share

    pay = forced_tool("pay", DONE)
    policy = StopPolicy(mode="hard", canary=0.5)
    threads = {"canary": "", "shadow": ""}
    for n in range(100):  # one thread of each arm (the hash decides, the same everywhere)
        arm = "canary" if share(f"t{n}", None) < 0.5 else "shadow"
        threads[arm] = threads[arm] or f"t{n}"
    saver = InMemorySaver()
    for thread in threads.values():
        agent = build_react_graph(
            ScriptedChatModel([call("pay"), "You paid.", "Sorry about that."]),
            [pay],
            policy=policy,
            checkpointer=saver,
        )
        config = {"configurable": {"thread_id": thread}}
        agent.invoke({"messages": [("user", "pay my order")]}, config)
        if agent.get_state(config).values["stop_record"]["stopped"]:  # no second model call
            agent = build_react_graph(
                ScriptedChatModel(["Sorry about that."]), [pay], policy=policy, checkpointer=saver
            )
        agent.invoke({"messages": [("user", "that is wrong, try again")]}, config)
    return threads


def points(reader: Any) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    entry: dict[str, Any] = {
                        "attributes": dict(point.attributes),
                        "unit": metric.unit,
                    }
                    if hasattr(point, "bucket_counts"):
                        entry |= {
                            "count": point.count,
                            "sum": point.sum,
                            "bounds": list(point.explicit_bounds),
                        }
                    else:
                        entry["value"] = point.value
                    found.setdefault(metric.name, []).append(entry)
    return found


def main() -> None:
    if sys.argv[1:] == ["no-provider"]:
        import toolstop.metrics as metrics

        def boom(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("recorded without a MeterProvider")

        assert metrics._instruments is not None
        metrics._instruments.runs.add = boom  # type: ignore[method-assign]
        metrics.record_run_metrics({"rule": "none", "mode": "hard", "model_calls": 1})
        print(json.dumps({"provider_set": metrics._provider_set()}))
        return
    from opentelemetry import metrics as otel
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    otel.set_meter_provider(MeterProvider(metric_readers=[reader]))
    seen = canary_runs() if sys.argv[1:] == ["canary"] else runs()
    print(json.dumps({"seen": seen, "points": points(reader)}))


if __name__ == "__main__":
    main()
