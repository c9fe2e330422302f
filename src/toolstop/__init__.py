"""toolstop: end a LangGraph / LangChain agent loop per call, from the tool's result.

Tools return `(content, artifact)`: the content goes to the model, the artifact
(`{"stop": bool, "reason": ...}`, built with `signal`) goes to the router, which `decide`s.
"""

import importlib
from typing import TYPE_CHECKING, Any

from toolstop._version import __version__
from toolstop.convert import convert
from toolstop.decision import CallSignal, Decision, Problem, Rule, SignalProblem, StopRule, decide
from toolstop.errors import ToolstopConcurrentRunError, ToolstopConfigError, ToolstopError
from toolstop.graph import ReactState, build_react_graph
from toolstop.levels import forwarded_stop, subagent_tool
from toolstop.outcome import Outcome, signal
from toolstop.policy import Mode, OnBudget, Parallel, ParallelRule, StopMode, StopPolicy
from toolstop.record import InvalidSignal, Savings, StopRecord
from toolstop.tools import ToolTimeoutError, with_timeout

if TYPE_CHECKING:  # type checkers see the real classes; at run time they load on first use
    from toolstop.middleware import StopOnArtifact, StopOnArtifactState


def __getattr__(name: str) -> Any:
    # StopOnArtifact needs the `agents` extra (langchain); import it only when asked for, so
    # `import toolstop` works without langchain and the ImportError names the extra to install.
    if name in ("StopOnArtifact", "StopOnArtifactState"):
        return getattr(importlib.import_module("toolstop.middleware"), name)
    msg = f"module 'toolstop' has no attribute {name!r}"
    raise AttributeError(msg)


__all__ = [
    "CallSignal",
    "Decision",
    "InvalidSignal",
    "Mode",
    "OnBudget",
    "Outcome",
    "Parallel",
    "ParallelRule",
    "Problem",
    "ReactState",
    "Rule",
    "Savings",
    "SignalProblem",
    "StopMode",
    "StopOnArtifact",
    "StopOnArtifactState",
    "StopPolicy",
    "StopRecord",
    "StopRule",
    "ToolTimeoutError",
    "ToolstopConcurrentRunError",
    "ToolstopConfigError",
    "ToolstopError",
    "__version__",
    "build_react_graph",
    "convert",
    "decide",
    "forwarded_stop",
    "signal",
    "subagent_tool",
    "with_timeout",
]
