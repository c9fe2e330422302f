"""Python calls per run of StopOnArtifact alone and with langchain's tool-error middleware.

The cost of sending tool exceptions back to the model (README, "Tool exceptions"): the bench's
3-turn no-stop workload, 20 runs per configuration, every Python and C function call counted in
every thread (a count, so the machine's load does not move it). cProfile would not do here: it
counts only the thread that enables it, and `ToolNode` runs the tools, and the `wrap_tool_call`
hooks around them, in a thread pool. Run: `python docs/bench/tool_error_calls.py` (writes the
JSON beside it).
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import langchain
from langchain.agents import create_agent
from langchain.agents.middleware import ToolRetryMiddleware
from langchain_core.messages import HumanMessage

from toolstop import StopOnArtifact
from toolstop.bench.overhead import _no_stop_tools
from toolstop.testing import ScriptedChatModel, call

RUNS = 20


def _configs() -> dict[str, Any]:
    configs: dict[str, Any] = {
        "StopOnArtifact": lambda: [StopOnArtifact()],
        "ToolRetryMiddleware(max_retries=0) + StopOnArtifact": lambda: [
            ToolRetryMiddleware(max_retries=0, on_failure="continue"),
            StopOnArtifact(),
        ],
    }
    try:
        from langchain.agents.middleware import ToolErrorMiddleware  # langchain >= 1.3.14
    except ImportError:
        return configs
    configs["ToolErrorMiddleware + StopOnArtifact"] = lambda: [
        ToolErrorMiddleware(on_error=lambda error, request: str(error)),  # type: ignore[call-arg]
        StopOnArtifact(),
    ]
    return configs


def _agent(middleware: Any) -> Any:
    model = ScriptedChatModel([call("search"), call("search"), call("search"), "answer"])
    return create_agent(model, _no_stop_tools(), middleware=middleware())


def _calls_in_every_thread(run: Any) -> int:
    """Function calls (Python and C) made while `run()` runs, in this and every new thread."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    threading.setprofile(count)
    sys.setprofile(count)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return calls


def main() -> dict[str, Any]:
    counts: dict[str, int] = {}
    for name, middleware in _configs().items():
        _agent(middleware).invoke({"messages": [HumanMessage("q")]})  # warm
        agents = [_agent(middleware) for _ in range(RUNS)]

        def run(agents: list[Any] = agents) -> None:
            for agent in agents:
                agent.invoke({"messages": [HumanMessage("q")]})

        counts[name] = _calls_in_every_thread(run) // RUNS
    base = counts["StopOnArtifact"]
    return {
        "langchain": langchain.__version__,
        "runs": RUNS,
        "calls_per_run": counts,
        "vs_stop_on_artifact": {name: round(n / base, 3) for name, n in counts.items()},
    }


if __name__ == "__main__":
    document = main()
    out = Path(__file__).with_suffix(".json")
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(document, indent=2))
