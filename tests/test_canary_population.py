"""A simulated population under a canary: thousands of threads through a real agent, scripted
users who ask again at set rates per arm; the arm shares, the re-ask rates and the verdict must
come out right within their intervals (issue 50)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from population import population
from toolstop import StopPolicy
from toolstop.report.arms import Arms

pytestmark = pytest.mark.timeout(1200)  # a hang guard: thousands of runs on a busy machine


def _compared(records: list[dict[str, Any]]) -> dict[str, Any]:
    arms = Arms()
    for record in records:
        arms.add(record)
    document = arms.document()
    assert document is not None
    return document


def _within_binomial(count: int, n: int, share: float, sigmas: float = 5.0) -> bool:
    spread = sigmas * math.sqrt(n * share * (1 - share))
    return abs(count - n * share) <= spread


@pytest.mark.parametrize(
    ("rates", "verdict"),
    [
        ({"canary": 0.15, "shadow": 0.04}, "worse"),
        ({"canary": 0.05, "shadow": 0.05}, "no_difference"),
    ],
    ids=["canary-worse", "no-difference"],
)
def test_two_thousand_threads_give_the_shares_rates_and_verdict(
    rates: dict[str, float], verdict: str
) -> None:
    threads = 2000
    records = population(
        StopPolicy(mode="hard", canary=0.25), InMemorySaver(), range(threads), rates, seed=11
    )
    firsts = records[::2]
    canary = [r for r in firsts if r["arm"] == "canary"]
    assert _within_binomial(len(canary), threads, 0.25)
    assert all(r["stopped"] and r["model_calls"] == 1 for r in canary)
    shadow = [r for r in firsts if r["arm"] == "shadow"]
    assert all(r["would_stop"] == "completed" and r["model_calls"] == 2 for r in shadow)
    assert all(r["arm"] == f["arm"] for f, r in zip(records[::2], records[1::2], strict=True))
    document = _compared(records)
    for arm, rate in rates.items():
        reask = document["by_arm"][arm]["reask"]
        assert reask["stops"] == len(canary if arm == "canary" else shadow)
        low, high = reask["interval"]
        assert low <= rate <= high, (arm, reask)
    comparison = document["comparison"]
    assert comparison["verdict"] == verdict
    low, high = comparison["interval"]
    assert low <= rates["canary"] - rates["shadow"] <= high
    assert (
        document["by_arm"]["canary"]["model_calls_per_run"]
        < (document["by_arm"]["shadow"]["model_calls_per_run"])
    )


def test_a_shadow_arm_of_canaried_tools_is_the_reports_shadow_baseline(tmp_path: Any) -> None:
    """With `canary_tools`, a shadow-arm run keeps `mode="hard"` (other tools still stop): the
    report counts it as shadow, so the hard-mode share and the shadow share are right."""
    import json

    from langgraph.checkpoint.sqlite import SqliteSaver

    from toolstop.cli import main

    db = str(tmp_path / "threads.sqlite")
    policy = StopPolicy(mode="hard", canary=0.25, canary_tools=("exchange",))
    with SqliteSaver.from_conn_string(db) as saver:
        records = population(policy, saver, range(200), {"canary": 0.0, "shadow": 0.0})
    assert {r["mode"] for r in records} == {"hard"}
    shadow_runs = sum(r["arm"] == "shadow" for r in records)
    assert main(["report", "--db", db, "--out", str(tmp_path / "out")]) == 0
    document = json.loads((tmp_path / "out" / "report.json").read_text())
    assert document["modes"] == {"hard": len(records) - shadow_runs, "never": shadow_runs}
    assert document["hard_share"] == round((len(records) - shadow_runs) / len(records), 4)
    assert document["would_save"]["share_of_shadow_model_calls"] is not None
