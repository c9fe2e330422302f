"""Time spent inside StopOnArtifact's hooks per run, the model and the tools excluded.

    python docs/bench/own_time.py [RUNS]

Runs the no-stop workload of `commits.py` (`RUNS` runs, 500 by default, each on a fresh agent,
the garbage collected before and the collector paused during them) with StopOnArtifact's three
hooks wrapped: each hook call is timed with `perf_counter_ns`, less the time its handler (the
model or the tool) took. Prints, per hook, the calls per run and the median time of one call,
and their sum per run (`own`, the medians times the calls).

A second pass of as many runs times two functions of the run's end twice in a row: the first
call finds the code it runs cold (LangGraph's steps ran since it last did), the second warm.
Their ratio is how much more a function costs in a run than in a loop that calls only it. (The
hooks' time of that pass, which calls them twice, is not kept.)
Run with the Python of the stack to measure and `PYTHONPATH` set to the checkout's `src`.
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any


def _workload() -> Any:
    """`commits.py` beside this file (its model, tool and agents), loaded from its path."""
    spec = importlib.util.spec_from_file_location("commits", Path(__file__).with_name("commits.py"))
    assert spec is not None
    assert spec.loader is not None
    module = sys.modules.get("commits")
    if module is None or getattr(module, "__file__", None) != spec.origin:
        module = importlib.util.module_from_spec(spec)
        sys.modules["commits"] = module  # pydantic resolves the model's annotations through it
        spec.loader.exec_module(module)
    return module


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


def measure(runs: int, *, twice: bool = False) -> dict[str, Any]:
    """The hooks' own time per run, in microseconds; with `twice`, the first and second calls'
    times of two functions of the run's end instead (the hooks are then not timed)."""
    from langchain_core.messages import HumanMessage

    import toolstop._lifecycle as lifecycle
    from toolstop.middleware import StopOnArtifact

    hooks: dict[str, list[int]] = defaultdict(list)
    calls: dict[str, list[int]] = defaultdict(list)
    handled = {"wrap_model_call": True, "wrap_tool_call": True, "after_agent": False}
    patched: list[tuple[Any, str, Any]] = []  # (owner, name, original), restored at the end
    if twice:
        for name in ("judge_turn", "reads_as_error"):
            if hasattr(lifecycle, name):
                patched.append((lifecycle, name, getattr(lifecycle, name)))
                setattr(lifecycle, name, _twice(calls, name, getattr(lifecycle, name)))
    else:
        for name, with_handler in handled.items():
            if name in vars(StopOnArtifact):  # a2a35af's StopOnArtifact has no tool hook
                patched.append((StopOnArtifact, name, vars(StopOnArtifact)[name]))
                hook = _timed(hooks[name], vars(StopOnArtifact)[name], handled=with_handler)
                setattr(StopOnArtifact, name, hook)
    try:
        build = _workload()._builders()["soa"]
        given = {"messages": [HumanMessage("q")]}
        for _ in range(3):  # warm-up, not counted
            build().invoke(given)
        for samples in (*hooks.values(), *calls.values()):
            samples.clear()
        agents = [build() for _ in range(runs)]
        gc.collect()
        gc.disable()
        try:
            for agent in agents:
                agent.invoke(given)
        finally:
            gc.enable()
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)
    if twice:
        return {
            "runs": runs,
            "median_us": {
                name: round(statistics.median(samples) / 1000, 2) for name, samples in calls.items()
            },
        }
    per_hook = {
        name: {
            "calls_per_run": len(samples) / runs,
            "median_us": round(statistics.median(samples) / 1000, 2),
        }
        for name, samples in hooks.items()
    }
    own = sum(h["calls_per_run"] * h["median_us"] for h in per_hook.values())
    return {"runs": runs, "hooks": per_hook, "own_us": round(own, 1)}


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    found = {"own": measure(count), "cold_and_warm": measure(count, twice=True)}
    print(json.dumps(found, indent=1))
