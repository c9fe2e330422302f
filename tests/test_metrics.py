"""OpenTelemetry metrics of finished runs, read with the SDK's InMemoryMetricReader (in a child
process: the meter provider is global and can be set once)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.metrics", reason="needs opentelemetry-sdk")
pytest.importorskip("langchain.agents", reason="one run is a create_agent run")

CHILD = Path(__file__).parent / "support" / "metrics_child.py"
pytestmark = pytest.mark.timeout(600)  # a hang guard: a child process starts Python and langchain


def child(*argv: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(CHILD), *argv],
        capture_output=True, text=True, timeout=600, check=True, cwd=CHILD.parent,
    )  # fmt: skip
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def total(points: list[dict[str, Any]], **attributes: Any) -> int:
    """The sum of the points whose attributes include `attributes` (dots as `__`)."""
    wanted = {k.replace("__", "."): v for k, v in attributes.items()}
    return sum(
        p.get("value", p.get("sum", 0))
        for p in points
        if all(p["attributes"].get(k) == v for k, v in wanted.items())
    )


def test_runs_stops_calls_tokens_and_savings_are_counted() -> None:
    found = child()
    seen, points = found["seen"], found["points"]
    runs = points["toolstop.runs"]
    assert total(runs) == 4
    assert all(p["attributes"]["gen_ai.operation.name"] == "invoke_agent" for p in runs)
    assert total(runs, toolstop__mode="hard", toolstop__rule="completed") == 2
    assert total(runs, toolstop__mode="never", toolstop__would_stop="completed") == 1
    assert total(runs, gen_ai__agent__name="support") == 1
    assert {p["unit"] for p in runs} == {"{run}"}
    stops = points["toolstop.stops"]
    assert total(stops, gen_ai__tool__name="pay", toolstop__mode="hard") == 1
    assert total(stops, gen_ai__tool__name="pay", toolstop__mode="never") == 1  # a shadow stop
    assert total(stops, gen_ai__tool__name="lookup", toolstop__rule="completed") == 1
    calls = (
        sum(s["calls"] for s in seen.values() if isinstance(s, dict)) - seen["never_saved"]["calls"]
    )
    assert total(points["toolstop.model_calls"]) == calls == 7
    histogram = points["toolstop.run.model_calls"]
    assert sum(p["count"] for p in histogram) == 4
    assert sum(p["sum"] for p in histogram) == calls
    assert histogram[0]["bounds"][:3] == [1.0, 2.0, 3.0]
    runs_seen = [seen[k] for k in ("hard", "never", "agent", "plain")]
    tokens = points["toolstop.tokens"]
    assert total(tokens, gen_ai__token__type="input") == sum(s["input"] for s in runs_seen)
    assert total(tokens, gen_ai__token__type="output") == sum(s["output"] for s in runs_seen)
    signals = points["toolstop.tool_calls"]
    assert total(signals, toolstop__signal="transient") == 1
    assert total(signals, toolstop__signal="completed") == 3
    assert total(signals, toolstop__signal="unsignalled") == 1
    saved = seen["never_saved"]
    assert total(points["toolstop.would_save.model_calls"]) == saved["calls"] == 1
    saved_tokens = points["toolstop.would_save.tokens"]
    assert total(saved_tokens, gen_ai__token__type="input") == saved["input"]
    assert total(saved_tokens, gen_ai__token__type="output") == saved["output"]


def test_nothing_is_recorded_without_a_meter_provider() -> None:
    assert child("no-provider") == {"provider_set": False}


def test_a_canary_counts_runs_by_arm_and_the_users_who_asked_again() -> None:
    points = child("canary")["points"]
    runs = points["toolstop.runs"]
    assert total(runs, toolstop__arm="canary", toolstop__rule="completed") == 1
    assert total(runs, toolstop__arm="shadow", toolstop__would_stop="completed") == 1
    assert total(runs, toolstop__arm="canary") == 2  # the first run and the one asking again
    reasks = points["toolstop.reasks"]
    assert total(reasks) == 2
    assert total(reasks, toolstop__arm="canary", toolstop__stopped=True) == 1
    assert total(reasks, toolstop__arm="shadow", toolstop__stopped=False) == 1
    assert total(reasks, toolstop__asked_again=True, toolstop__why="complaint") == 2
    assert total(reasks, gen_ai__tool__name="pay") == 2
