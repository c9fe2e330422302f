"""The regression guard on toolstop's cost: Python calls per run, against a committed baseline.

Counted by `scripts/call_counts.py` in a fresh interpreter (nothing another test set up, such as
an OpenTelemetry provider or a log handler, changes the path a run takes). A count does not
depend on the machine's load; it depends on the stack, so the baseline has one entry per stack
and a stack without one is skipped, with the command that adds it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "scripts" / "call_counts.py"
sys.path.insert(0, str(SCRIPT.parent))

import call_counts  # noqa: E402


def test_no_router_costs_more_calls_per_run_than_its_baseline() -> None:
    stacks = json.loads(call_counts.BASELINE.read_text(encoding="utf-8"))["stacks"]
    key = call_counts.stack_key()
    if key not in stacks:
        pytest.skip(
            f"no call-count baseline for this stack ({key}); the baseline has "
            f"{sorted(stacks)}. Add one with `python scripts/call_counts.py --update`."
        )
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True, timeout=600
    )
    measured = json.loads(done.stdout)
    assert measured["stack"] == key
    assert set(measured["counts"]) == set(stacks[key])  # the same routers are counted
    grown = call_counts.grown(measured["counts"], stacks[key])
    assert not grown, (
        "toolstop costs more Python calls per run than its baseline (docs/bench/call_counts.json)"
        ":\n  " + "\n  ".join(grown) + "\nIf the change is meant to cost that, run "
        "`python scripts/call_counts.py --update` on each stack of the baseline and commit it."
    )


def test_the_guard_fails_on_growth_beyond_the_margin_only() -> None:
    base = {"router": {"calls": 10_000, "toolstop": 200}}
    assert call_counts.MARGIN == 0.05
    assert call_counts.grown({"router": {"calls": 10_500, "toolstop": 210}}, base) == []
    assert call_counts.grown({"router": {"calls": 9_000, "toolstop": 100}}, base) == []
    assert call_counts.grown({"router": {"calls": 10_501, "toolstop": 211}}, base) == [
        "router: calls 10,501 per run, baseline 10,000 (+5.0%, margin 5%)",
        "router: toolstop 211 per run, baseline 200 (+5.5%, margin 5%)",
    ]


def test_the_baseline_has_every_router_of_the_stack_it_was_taken_on() -> None:
    stored = json.loads(call_counts.BASELINE.read_text(encoding="utf-8"))
    assert stored["margin"] == call_counts.MARGIN
    for key, counts in stored["stacks"].items():
        routers = {"hand-built graph", "hand-built graph" + call_counts.JSON_RESULT} | (
            set()
            if "langchain none" in key
            else {
                "create_agent",
                "create_agent+empty wrap_model_call+after_agent",
                "create_agent+StopOnArtifact",
                "create_agent+StopOnArtifact" + call_counts.JSON_RESULT,
            }
        )
        assert set(counts) == routers, key
        assert all(c["calls"] > c["toolstop"] >= 0 for c in counts.values()), key
