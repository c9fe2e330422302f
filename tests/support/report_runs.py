"""Six finished runs written by hand, shared by the report's figure and page tests."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from toolstop.report.reader import RunEnd
from toolstop.report.summary import Summary


def end(thread: str, at: str | None, ns: str = "", **record: Any) -> RunEnd:
    moment = datetime.fromisoformat(at) if at else None
    return RunEnd(thread_id=thread, checkpoint_ns=ns, ended_at=moment, record=record)


RUNS = [
    # shadow mode: would have stopped on pay; ended right after it (overlap 0.9)
    end(
        "a", "2026-11-30T10:00+00:00",
        schema_version=5, mode="never", rule="none", stopped=False, would_stop="completed",
        tools=["pay"], model_calls=2, input_tokens=300, output_tokens=40,
        outcomes={"completed": 1},
        would_save={"model_calls": 1, "input_tokens": 100, "output_tokens": 20},
        calls_by_tool={"pay": 1},
        ended_after={"tools": {"pay": 0.9}, "input_tokens": 100, "output_tokens": 20},
    ),
    # hard mode, a nested namespace; 00:30 at +01:00 is still 30 November in UTC
    end(
        "a", "2026-12-01T00:30+01:00", ns="sub",
        schema_version=5, mode="hard", rule="completed", stopped=True, tools=["pay", "pay"],
        model_calls=1, input_tokens=150, output_tokens=10,
        outcomes={"completed": 1, "transient": 1},
    ),
    # a step budget: stopped, but no tool decided; schema 1 (no version); no time known
    end(
        "b", None,
        mode="hard", rule="step_budget", stopped=True, model_calls=3, input_tokens=50,
        output_tokens=5, outcomes={"invalid": 1, "unsignalled": 2},
        invalid_signals=[{"tool": "lookup", "problem": "stop_not_bool"}, "junk",
                         {"problem": "stop_not_bool"}],
    ),
    # polish mode, ended by another middleware; counts of the wrong type count as 0
    end(
        "b", "2026-12-01T23:30+00:00",
        schema_version=4, mode="polish", rule="fatal", stopped=True, tools=["charge"],
        model_calls=True, input_tokens="7", output_tokens=3, ended_by="LimitMW",
        outcomes={"fatal": 1},
    ),
    # shadow mode, nothing would have stopped (its would_save is not counted); an unknown rule
    end(
        "c", "2026-11-30T12:00+00:00",
        schema_version=5, mode="never", rule="old_rule", stopped=False, would_stop=None,
        model_calls=1, input_tokens=20, output_tokens=2,
        would_save={"model_calls": 9, "input_tokens": 9, "output_tokens": 9},
        calls_by_tool={"search": 1},
        ended_after={"tools": {"search": 0.1}, "input_tokens": 15, "output_tokens": 1},
    ),
    # shadow mode, would have stopped by the retry budget
    end(
        "c", "2026-12-01T10:00+00:00",
        schema_version=5, mode="never", rule="none", stopped=False, would_stop="retry_budget",
        tools=["lookup"], model_calls=4, input_tokens=200, output_tokens=30,
        would_save={"model_calls": 2, "input_tokens": 60, "output_tokens": "x"},
    ),
]  # fmt: skip


def summary(runs: list[RunEnd]) -> dict[str, Any]:
    folded = Summary()
    for run in runs:
        folded.add(run)
    return folded.document()
