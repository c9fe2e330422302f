"""Time spent inside StopOnArtifact's hooks per run, the model and the tools excluded.

    python docs/bench/own_time.py [RUNS]

Runs the no-stop workload of `commits.py` (`RUNS` runs, 500 by default, each on a fresh agent,
the garbage collected before and the collector paused during them) with StopOnArtifact's three
hooks wrapped: each hook call is timed with `perf_counter_ns`, less the time its handler (the
model or the tool) took. Prints, per hook, the calls per run and the median time of one call,
and their sum per run (`own`, the medians times the calls).

It then times, inside the same runs, two functions of the run's end twice in a row: the first
call finds the code it runs cold (LangGraph's steps ran since it last did), the second warm.
Their ratio is how much more a function costs in a run than in a loop that calls only it.
Run with the Python of the stack to measure and `PYTHONPATH` set to the checkout's `src`.
"""

from __future__ import annotations

import functools
import gc
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import commits

_NS = time.perf_counter_ns


def _timed(samples: list[int], hook: Any, *, handled: bool) -> Any:
    @functools.wraps(hook)  # LangGraph reads the hook's signature (after_agent's `runtime`)
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        inner = 0
        if handled:
            request, handler = args

            def timed_handler(request: Any) -> Any:
                nonlocal inner
                start = _NS()
                try:
                    return handler(request)
                finally:
                    inner += _NS() - start

            args = (request, timed_handler)
        start = _NS()
        try:
            return hook(self, *args, **kwargs)
        finally:
            samples.append(_NS() - start - inner)

    return wrapped


def _twice(samples: dict[str, list[int]], name: str, function: Any) -> Any:
    """`function`, called twice in a row each time it is called: the first call's time and the
    second's are kept apart."""

    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        start = _NS()
        function(*args, **kwargs)
        middle = _NS()
        result = function(*args, **kwargs)
        samples[f"{name}, first"].append(middle - start)
        samples[f"{name}, second"].append(_NS() - middle)
        return result

    return wrapped


def measure(runs: int) -> dict[str, Any]:
    """The hooks' own time per run and the first and second calls' times, in microseconds."""
    from langchain_core.messages import HumanMessage

    import toolstop._lifecycle as lifecycle
    from toolstop.middleware import StopOnArtifact

    hooks: dict[str, list[int]] = defaultdict(list)
    for name, handled in (("wrap_model_call", True), ("wrap_tool_call", True)):
        if name in vars(StopOnArtifact):
            hook = _timed(hooks[name], vars(StopOnArtifact)[name], handled=handled)
            setattr(StopOnArtifact, name, hook)
    ending = _timed(hooks["after_agent"], StopOnArtifact.after_agent, handled=False)
    StopOnArtifact.after_agent = ending  # type: ignore[method-assign]
    twice: dict[str, list[int]] = defaultdict(list)
    if hasattr(lifecycle, "judge_turn"):
        lifecycle.judge_turn = _twice(twice, "judge_turn", lifecycle.judge_turn)  # type: ignore[attr-defined]
    if hasattr(lifecycle, "reads_as_error"):
        lifecycle.reads_as_error = _twice(twice, "reads_as_error", lifecycle.reads_as_error)  # type: ignore[attr-defined]

    build = commits._builders()["soa"]
    given = {"messages": [HumanMessage("q")]}
    for _ in range(3):  # warm-up, not counted
        build().invoke(given)
    for samples in (*hooks.values(), *twice.values()):
        samples.clear()
    agents = [build() for _ in range(runs)]
    gc.collect()
    gc.disable()
    for agent in agents:
        agent.invoke(given)
    gc.enable()
    per_hook = {
        name: {
            "calls_per_run": len(samples) / runs,
            "median_us": round(statistics.median(samples) / 1000, 2),
        }
        for name, samples in hooks.items()
    }
    own = sum(h["calls_per_run"] * h["median_us"] for h in per_hook.values())
    return {
        "runs": runs,
        "hooks": per_hook,
        "own_us": round(own, 1),
        "twice_median_us": {
            name: round(statistics.median(samples) / 1000, 2) for name, samples in twice.items()
        },
    }


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 500), indent=1))
