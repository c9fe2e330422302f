"""toolstop's shipped test kit: a strict scripted model, scripted tool calls and forced tools."""

from toolstop.testing.forced import ForcedResult, forced_tool
from toolstop.testing.history import assert_valid_history, history_problems
from toolstop.testing.scripted import (
    ModelCall,
    ScriptedChatModel,
    ScriptExhaustedError,
    ScriptStep,
    call,
    turn,
)

__all__ = [
    "ForcedResult",
    "ModelCall",
    "ScriptExhaustedError",
    "ScriptStep",
    "ScriptedChatModel",
    "assert_valid_history",
    "call",
    "forced_tool",
    "history_problems",
    "turn",
]
