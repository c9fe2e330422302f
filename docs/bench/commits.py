"""toolstop's cost per run at several commits, side by side, with the garbage collector fair.

    python docs/bench/commits.py OUT.json CYCLES ROUNDS [--bind] [--json] LABEL=SRC [LABEL=SRC ...]

Each `SRC` is the `src` folder of a checkout (`git worktree add /tmp/old a2a35af`). A child
process per checkout runs the bench's no-stop workload (a scripted model calling one tool three
times, then answering; no checkpointer) through bare `create_agent`, the floor of
StopOnArtifact's design with and without the empty tool hook (`floor`: `wrap_model_call`,
`wrap_tool_call` and `after_agent`, the hooks StopOnArtifact has since 2f0ae19; `floor_m`:
without `wrap_tool_call`, the hooks it had before), `create_agent` + `StopOnArtifact` and the
hand-built graph, `ROUNDS` rounds (in a cyclic order that is rotated every other round and run
backwards every other round, so each side of a pair runs first as often), each run on a fresh
agent; a round's agents are built and the garbage collected before it, and the collector is
paused during the round, so its runs follow each other within milliseconds and none pays for
collecting another's garbage. The model, the tool and the floors are defined here, not taken
from the checkout, so every commit runs the same workload. The model's `bind_tools` returns the
model itself; with `--bind` it binds the tools in OpenAI's format, as every provider's chat model
and the bench's `ScriptedChatModel` do (`create_agent` binds on every model call, the hand-built
graph once when it is built). With `--json` the tool returns a result as tools return them (a
JSON object holding a list of 40 records, 2.8 KB, as `scripts/call_counts.py`'s) and the final
answer restates three of them, so a run's end reads and judges a real result. The children of
the checkouts take turns, `CYCLES` times (the order rotated each cycle), so a change in the
machine's load falls on all of them.

Each run is timed twice: wall time (`perf_counter`) and the process's CPU time (`process_time`,
every thread: `ToolNode` runs even a single tool call in a worker thread, so `thread_time` would
miss the tool). CPU time does not count the time the process waits for a core, so it is the
measure to trust on a loaded machine; wall time is kept beside it.

A ratio (say `soa/floor`) is estimated from pairs: in each round every configuration runs once,
back to back, so the two runs of a pair share the machine's state of that moment; the figure is
the median of the per-round ratios `soa_i / floor_i`, pooled over every child (`paired`). This
matters on a virtual machine: the speed of a core alone (a fixed loop of pure Python, in CPU
time) moves by up to 1.6x in phases of about 0.1 s, whatever the load average, so a ratio of
medians taken over whole runs of samples moves by several points from one child to the next.
The median of pairs discards the rounds a phase change or a stray allocation hit one side of
(with a collection and an agent build between the two runs of a pair, as in the first version
of this script, the spread between children was 2.5 times wider).
Each child's own median is kept (`per_child`, `spread`): `floor/bare`, which toolstop does not
touch, should come out the same for every checkout, and its spread between children is how far
one child's figure can be trusted. The ratio of the medians of all samples (`medians`, the
figure of the earlier notes) and of their lower quartiles (`q1`) are kept beside it. The
checkouts of a cycle run with the same `PYTHONHASHSEED` (cycle number), each cycle another.
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
from pathlib import Path
from typing import Any

NAMES = ["graph", "bare", "floor", "soa", "floor_m"]
"""In a cycle that puts the two sides of every ratio next to each other (`soa/bare` two apart)."""
RATIOS = {
    "soa/floor": ("soa", "floor"),
    "soa/floor_m": ("soa", "floor_m"),
    "soa/bare": ("soa", "bare"),
    "graph/bare": ("graph", "bare"),
    "floor/bare": ("floor", "bare"),
}


BIND = "--bind"
"""The flag that makes the scripted model bind its tools as providers do (see above)."""
JSON = "--json"
"""The flag that makes the tool return a JSON result and the answer restate it (see above)."""


sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from call_counts import JSON_ANSWER, JSON_CONTENT  # noqa: E402  (the guard's real result)


def _builders(*, bind: bool = False, real: bool = False) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

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
            if not bind:
                return self
            return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any):  # type: ignore[no-untyped-def]
            step = self.steps[self.at]
            self.at += 1
            call = {"name": "search", "args": {"query": "x"}, "id": f"c{next(ids)}"}
            answer = JSON_ANSWER if real else "answer"
            msg = AIMessage(answer) if step is None else AIMessage("", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=msg)])

    def model() -> Any:
        return Scripted(steps=["s", "s", "s", None])

    def tools() -> list[Any]:
        content = JSON_CONTENT if real else "partial result"

        def search(query: str = "") -> tuple[str, dict[str, Any]]:
            return content, {"stop": False, "reason": "completed"}

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


MEASURES = ("wall", "cpu")
"""`wall`: `time.perf_counter`; `cpu`: `time.process_time` (all of the process's threads)."""


def child(
    rounds: int, *, bind: bool = False, real: bool = False
) -> dict[str, dict[str, list[float]]]:
    """`rounds` rounds of every configuration, in this process (the checkout on its path).

    Returns `{measure: {configuration: [ms per run, one per round]}}`.
    """
    from langchain_core.messages import HumanMessage

    builders = _builders(bind=bind, real=real)
    given = {"messages": [HumanMessage("q")]}
    for name in NAMES:  # warm-up, not counted
        builders[name]().invoke(given)
    samples: dict[str, dict[str, list[float]]] = {m: {n: [] for n in NAMES} for m in MEASURES}
    wall, cpu = samples["wall"], samples["cpu"]
    for round_ in range(rounds):
        shift = round_ // 2 % len(NAMES)
        order = NAMES[shift:] + NAMES[:shift]
        order = order if round_ % 2 == 0 else order[::-1]
        # Built and the garbage collected before the round, the collector paused during it:
        # the runs of a round follow each other within milliseconds (a pair shares the core's
        # speed of that moment), and no run pays for collecting another's garbage.
        agents = [(name, builders[name]()) for name in order]
        gc.collect()
        gc.disable()
        for name, agent in agents:
            start, start_cpu = time.perf_counter(), time.process_time()
            agent.invoke(given)
            elapsed_cpu, elapsed = time.process_time() - start_cpu, time.perf_counter() - start
            wall[name].append(round(1000 * elapsed, 4))
            cpu[name].append(round(1000 * elapsed_cpu, 4))
        gc.enable()
    return samples


def _q1(values: list[float]) -> float:
    return statistics.quantiles(values, n=4, method="inclusive")[0]


def figures(children: list[dict[str, list[float]]]) -> dict[str, Any]:
    """The ratios of one measure, from each child's samples (`{configuration: [ms per round]}`).

    `paired`: the median of the per-round ratios, all children pooled; `per_child`: each child's
    median of its per-round ratios; `spread`: their lowest and highest; `medians` and `q1`: the
    ratio of the medians (lower quartiles) of all samples.
    """
    pooled: dict[str, list[float]] = {name: [] for name in NAMES}
    for samples in children:
        for name in NAMES:
            pooled[name] += samples[name]
    found: dict[str, Any] = {}
    for ratio, (a, b) in RATIOS.items():
        per_child = [
            statistics.median(x / y for x, y in zip(c[a], c[b], strict=True)) for c in children
        ]
        pairs = [x / y for c in children for x, y in zip(c[a], c[b], strict=True)]
        found[ratio] = {
            "paired": round(statistics.median(pairs), 4),
            "per_child": [round(r, 4) for r in per_child],
            "spread": [round(min(per_child), 4), round(max(per_child), 4)],
            "medians": round(statistics.median(pooled[a]) / statistics.median(pooled[b]), 4),
            "q1": round(_q1(pooled[a]) / _q1(pooled[b]), 4),
        }
    return found


def main(
    out: str,
    cycles: int,
    rounds: int,
    specs: list[tuple[str, str]],
    *,
    bind: bool = False,
    real: bool = False,
) -> dict[str, Any]:
    children: dict[str, list[dict[str, dict[str, list[float]]]]] = {label: [] for label, _ in specs}
    for cycle in range(cycles):
        shift = cycle % len(specs)
        for label, src in specs[shift:] + specs[:shift]:
            # the checkouts of a cycle share a hash seed (each cycle its own): a seed moves a
            # process's speed by a few percent, and would otherwise land on one checkout only
            env = {**os.environ, "PYTHONPATH": src, "PYTHONHASHSEED": str(cycle)}
            flags = [*([BIND] if bind else []), *([JSON] if real else [])]
            command = [sys.executable, __file__, "--child", str(rounds), *flags]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            children[label].append(json.loads(done.stdout))
    from importlib.metadata import version

    import langchain

    document = {
        "stack": {"langchain": langchain.__version__, "langgraph": version("langgraph")},
        "cycles": cycles,
        "rounds": rounds,
        "bind": bind,
        **({"json": True} if real else {}),
        "sources": dict(specs),
        "load_average": os.getloadavg(),
        # per measure, per checkout: one entry per child, {configuration: [ms per round]}
        "samples_ms": {
            measure: {label: [c[measure] for c in runs] for label, runs in children.items()}
            for measure in MEASURES
        },
        "figures": {
            measure: {
                label: figures([c[measure] for c in runs]) for label, runs in children.items()
            }
            for measure in MEASURES
        },
    }
    with open(out, "w", encoding="utf-8") as file:
        json.dump(document, file)
    return document


def headline(document: dict[str, Any]) -> dict[str, Any]:
    """Each measure's paired ratios and their spread between children, per checkout."""
    return {
        measure: {
            label: {r: [f["paired"], *f["spread"]] for r, f in found.items()}
            for label, found in by_label.items()
        }
        for measure, by_label in document["figures"].items()
    }


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        print(
            json.dumps(
                child(int(sys.argv[2]), bind=BIND in sys.argv[3:], real=JSON in sys.argv[3:])
            )
        )
    else:
        bind, real = BIND in sys.argv[4:], JSON in sys.argv[4:]
        labels = [tuple(a.split("=", 1)) for a in sys.argv[4:] if a not in (BIND, JSON)]
        result = main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), labels, bind=bind, real=real)  # type: ignore[arg-type]
        print(json.dumps(headline(result), indent=1))
