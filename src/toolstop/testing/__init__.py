"""toolstop's shipped test kit: a strict scripted model, forced tools and the check harness.

Also scripted tool calls, the harness behind `toolstop check` (scenarios, routers, golden
transcripts), and `check_agent` for your own agent factory."""

from toolstop.testing.agent_check import AgentCheck, check_agent
from toolstop.testing.forced import ForcedResult, forced_tool
from toolstop.testing.harness import CheckResult, check, run_scenario
from toolstop.testing.history import assert_valid_history, history_problems
from toolstop.testing.routers import Router, available_routers, run_agent
from toolstop.testing.scenarios import Scenario, scenario_matrix
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

__all__ = [
    "AgentCheck",
    "CheckResult",
    "ForcedResult",
    "ModelCall",
    "Router",
    "Scenario",
    "ScriptExhaustedError",
    "ScriptMismatchError",
    "ScriptStep",
    "ScriptedChatModel",
    "assert_valid_history",
    "available_routers",
    "call",
    "check",
    "check_agent",
    "example_args",
    "forced_tool",
    "history_problems",
    "run_agent",
    "run_scenario",
    "scenario_matrix",
    "stand_in",
    "turn",
]
