"""toolstop: end a LangGraph / LangChain agent loop per call, from the tool's result.

Tools return `(content, artifact)`: the content goes to the model, the artifact
(`{"stop": bool, "reason": ...}`, built with `signal`) goes to the router, which `decide`s.
"""

from toolstop.decision import CallSignal, Decision, Problem, Rule, decide
from toolstop.errors import ToolstopConfigError, ToolstopError
from toolstop.graph import ReactState, build_react_graph
from toolstop.outcome import Outcome, signal
from toolstop.policy import Mode, Parallel, StopPolicy
from toolstop.record import InvalidSignal, StopRecord

__version__ = "0.1.0"

__all__ = [
    "CallSignal",
    "Decision",
    "InvalidSignal",
    "Mode",
    "Outcome",
    "Parallel",
    "Problem",
    "ReactState",
    "Rule",
    "StopPolicy",
    "StopRecord",
    "ToolstopConfigError",
    "ToolstopError",
    "__version__",
    "build_react_graph",
    "decide",
    "signal",
]
