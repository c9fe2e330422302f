"""toolstop's shipped test kit: a strict scripted model, forced tools and the check harness.

Also scripted tool calls, the harness behind `toolstop check` (scenarios, routers, golden
transcripts), and `check_agent` for your own agent factory."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from toolstop.testing.forced import ForcedResult, forced_tool
from toolstop.testing.history import assert_valid_history, history_problems
from toolstop.testing.replay import Replay, UnknownCallError, replay
from toolstop.testing.scripted import (
    ModelCall,
    ScriptedChatModel,
    ScriptExhaustedError,
    ScriptMismatchError,
    ScriptStep,
    call,
    turn,
)
from toolstop.testing.stand_ins import example_args, stand_in

if TYPE_CHECKING:
    from toolstop._check.agent import AgentCheck, check_agent
    from toolstop._check.harness import CheckResult, check, run_scenario
    from toolstop._check.routers import Router, available_routers, run_agent
    from toolstop._check.scenarios import Scenario, scenario_matrix

# The check engine's names, loaded on first use: the engine builds on this kit, so importing it
# here at once would be a cycle.
_FROM_THE_CHECK_ENGINE = {
    "AgentCheck": "toolstop._check.agent",
    "check_agent": "toolstop._check.agent",
    "CheckResult": "toolstop._check.harness",
    "check": "toolstop._check.harness",
    "run_scenario": "toolstop._check.harness",
    "Router": "toolstop._check.routers",
    "available_routers": "toolstop._check.routers",
    "run_agent": "toolstop._check.routers",
    "Scenario": "toolstop._check.scenarios",
    "scenario_matrix": "toolstop._check.scenarios",
}


def __getattr__(name: str) -> Any:
    module = _FROM_THE_CHECK_ENGINE.get(name)
    if module is None:
        msg = f"module 'toolstop.testing' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM_THE_CHECK_ENGINE})


__all__ = [
    "AgentCheck",
    "CheckResult",
    "ForcedResult",
    "ModelCall",
    "Replay",
    "Router",
    "Scenario",
    "ScriptExhaustedError",
    "ScriptMismatchError",
    "ScriptStep",
    "ScriptedChatModel",
    "UnknownCallError",
    "assert_valid_history",
    "available_routers",
    "call",
    "check",
    "check_agent",
    "example_args",
    "forced_tool",
    "history_problems",
    "replay",
    "run_agent",
    "run_scenario",
    "scenario_matrix",
    "stand_in",
    "turn",
]
