"""toolstop's cost per run at several commits, side by side, with the garbage collector fair.

    python docs/bench/commits.py OUT.json CYCLES ROUNDS LABEL=SRC [LABEL=SRC ...]

Each `SRC` is the `src` folder of a checkout (`git worktree add /tmp/old a2a35af`). A child
process per checkout runs the bench's no-stop workload (a scripted model calling one tool three
times, then answering; no checkpointer) through bare `create_agent`, the floor of
StopOnArtifact's design with and without the empty tool hook (`floor`: `wrap_model_call`,
`wrap_tool_call` and `after_agent`, the hooks StopOnArtifact has since 2f0ae19; `floor_m`:
without `wrap_tool_call`, the hooks it had before), `create_agent` + `StopOnArtifact` and the
hand-built graph, `ROUNDS` rounds in an order rotated each round, each run on a fresh agent with
garbage collected before and the collector paused during it. The model, the tool and the
floors are defined here, not taken from the checkout, so every commit runs the same workload.
The children of the checkouts take turns, `CYCLES` times (the order rotated each cycle), so a
change in the machine's load falls on all of them; the figures are the medians of all samples.
Run with the Python of the stack to measure (its langchain and langgraph).
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

NAMES = ["bare", "floor", "floor_m", "soa", "graph"]
RATIOS = {
    "soa/floor": ("soa", "floor"),
    "soa/floor_m": ("soa", "floor_m"),
    "soa/bare": ("soa", "bare"),
    "graph/bare": ("graph", "bare"),
    "floor/bare": ("floor", "bare"),
}


def _builders() -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool

    from toolstop.graph import build_react_graph
    from toolstop.middleware import StopOnArtifact

    ids = itertools.count()

    class Scripted(BaseChatModel):
        steps: list[Any]
        at: int = 0

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any):  # type: ignore[no-untyped-def]
            step = self.steps[self.at]
            self.at += 1
            call = {"name": "search", "args": {"query": "x"}, "id": f"c{next(ids)}"}
            msg = AIMessage("answer") if step is None else AIMessage("", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=msg)])

    def model() -> Any:
        return Scripted(steps=["s", "s", "s", None])

    def tools() -> list[Any]:
        def search(query: str = "") -> tuple[str, dict[str, Any]]:
            return "partial result", {"stop": False, "reason": "completed"}

        async def asearch(query: str = "") -> tuple[str, dict[str, Any]]:
            return search(query)

        tool = StructuredTool.from_function(
            search,
            coroutine=asearch,
            name="search",
            description="Search.",
            response_format="content_and_artifact",
        )
        return [tool]

    class Floor(AgentMiddleware):  # type: ignore[type-arg]
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

        def after_agent(self, state: Any, runtime: Any) -> None:
            return None

    class FloorWithToolHook(Floor):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

    return {
        "bare": lambda: create_agent(model(), tools()),
        "floor": lambda: create_agent(model(), tools(), middleware=[FloorWithToolHook()]),
        "floor_m": lambda: create_agent(model(), tools(), middleware=[Floor()]),
        "soa": lambda: create_agent(model(), tools(), middleware=[StopOnArtifact()]),
        "graph": lambda: build_react_graph(model(), tools()),
    }


def child(rounds: int) -> dict[str, list[float]]:
    """`rounds` rounds of every configuration, in this process (the checkout on its path)."""
    from langchain_core.messages import HumanMessage

    builders = _builders()
    given = {"messages": [HumanMessage("q")]}
    for name in NAMES:  # warm-up, not counted
        builders[name]().invoke(given)
    samples: dict[str, list[float]] = {name: [] for name in NAMES}
    for round_ in range(rounds):
        shift = round_ % len(NAMES)
        for name in NAMES[shift:] + NAMES[:shift]:
            agent = builders[name]()
            gc.collect()
            gc.disable()
            start = time.perf_counter()
            agent.invoke(given)
            elapsed = time.perf_counter() - start
            gc.enable()
            samples[name].append(round(1000 * elapsed, 4))
    return samples


def figures(samples: dict[str, list[float]]) -> dict[str, float]:
    """The ratios of the configurations' medians."""
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {ratio: round(medians[a] / medians[b], 4) for ratio, (a, b) in RATIOS.items()}


def main(out: str, cycles: int, rounds: int, specs: list[tuple[str, str]]) -> dict[str, Any]:
    samples: dict[str, dict[str, list[float]]] = {
        label: {name: [] for name in NAMES} for label, _ in specs
    }
    for cycle in range(cycles):
        shift = cycle % len(specs)
        for label, src in specs[shift:] + specs[:shift]:
            env = {**os.environ, "PYTHONPATH": src}
            command = [sys.executable, __file__, "--child", str(rounds)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            for name, values in json.loads(done.stdout).items():
                samples[label][name] += values
    from importlib.metadata import version

    import langchain

    document = {
        "stack": {"langchain": langchain.__version__, "langgraph": version("langgraph")},
        "cycles": cycles,
        "rounds": rounds,
        "sources": dict(specs),
        "samples_ms": samples,
        "figures": {label: figures(samples[label]) for label, _ in specs},
    }
    with open(out, "w", encoding="utf-8") as file:
        json.dump(document, file)
    return document


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        print(json.dumps(child(int(sys.argv[2]))))
    else:
        labels = [tuple(a.split("=", 1)) for a in sys.argv[4:]]
        result = main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), labels)  # type: ignore[arg-type]
        print(json.dumps(result["figures"], indent=2))
