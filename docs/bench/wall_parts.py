"""Wall time of StopOnArtifact, part by part, in five interleaved runs (README, `--overhead`).

`state_calls.py` counts Python calls; this measures what the same parts cost in time, with the
bench's own timing (`toolstop.bench.overhead.wall_per_run`: the 3-turn no-stop workload, every
configuration once per round in a rotated order, medians). Each run has, side by side:

- bare `create_agent`, and an empty `wrap_model_call` hook (the empty-hook floor);
- + an empty `after_agent` hook (the node StopOnArtifact ends its runs with);
- + StopOnArtifact's state on those empty hooks (`stop_record` written once per run, the private
  run channel written on every model call, the managed step counter): what is left between it
  and StopOnArtifact is toolstop's own work;
- StopOnArtifact;
- a prototype, not shipped: StopOnArtifact without its `after_agent` node, ending the run (its
  record written and published) in the model call that gives the final answer. It shows what
  dropping the node would buy; it would lose a record for runs other middleware ends (a guard's
  or a call limit's `jump_to: "end"`) and the delivery of a stop a call limit swallowed.

Run: `python docs/bench/wall_parts.py` (writes the JSON beside it; about 5 minutes on this 2-core
machine with nothing else running).
"""

from __future__ import annotations

import json
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import langchain
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage

sys.path.insert(0, str(Path(__file__).parent))
import state_calls  # the floors with StopOnArtifact's state, from the script beside

from toolstop import StopOnArtifact
from toolstop._lifecycle import RUN_KEY, finish
from toolstop.bench.overhead import BARE, _floor, wall_per_run
from toolstop.middleware import _config

RUNS = 300
REPEATS = 5
PROTOTYPE = "StopOnArtifact without its after_agent node (prototype)"


def _closed(extended: Any) -> Any:
    """End the run in this model call when its answer is final (no tool calls)."""
    update = extended.command.update
    answers = [m for m in extended.model_response.result if isinstance(m, AIMessage)]
    if answers and not answers[-1].tool_calls:
        update["stop_record"], update[RUN_KEY] = finish(update[RUN_KEY], _config())
    return extended


class WithoutEndNode(StopOnArtifact):
    """The prototype: `create_agent` adds no `after_agent` node for it (it finds hooks by
    class)."""

    after_agent = AgentMiddleware.after_agent  # type: ignore[assignment]
    aafter_agent = AgentMiddleware.aafter_agent  # type: ignore[assignment]

    def _relay(self, *args: Any, **kwargs: Any) -> Any:
        return _closed(super()._relay(*args, **kwargs))

    def _answered(self, *args: Any, **kwargs: Any) -> Any:
        return _closed(super()._answered(*args, **kwargs))


def _with(middleware: Any) -> Any:
    """A builder `(model, tools) -> agent` with a fresh middleware from `middleware()`."""
    return lambda model, tools: create_agent(model, tools, middleware=[middleware()])


BUILDERS: dict[str, Any] = {
    BARE: lambda model, tools: create_agent(model, tools),
    "empty wrap_model_call": _with(lambda: _floor(after_agent=False)),
    "+ empty after_agent": _with(lambda: _floor(after_agent=True)),
    "+ StopOnArtifact's state": _with(
        lambda: state_calls._floor(state_calls.RecordAndRun, write_per_call=True)
    ),
    "StopOnArtifact": _with(StopOnArtifact),
    PROTOTYPE: _with(WithoutEndNode),
}


def points(figures: dict[str, Any]) -> dict[str, float]:
    """What each configuration adds to the one before it, in points of bare's median."""
    ratios = [figures[name]["vs_create_agent"] for name in BUILDERS]
    steps = zip(list(BUILDERS)[1:5], pairwise(ratios[:5]), strict=True)
    added = {name: round(100 * (b - a), 1) for name, (a, b) in steps}
    added[PROTOTYPE + " vs StopOnArtifact"] = round(100 * (ratios[5] - ratios[4]), 1)
    return added


def main(runs: int = RUNS, repeats: int = REPEATS) -> dict[str, Any]:
    measured = [wall_per_run(runs, BUILDERS) for _ in range(repeats)]
    return {
        "langchain": langchain.__version__,
        "runs": runs,
        "repeats": [
            {"samples_ms": m["samples_ms"], "figures": m["figures"], "points": points(m["figures"])}
            for m in measured
        ],
    }


if __name__ == "__main__":
    document = main()
    out = Path(__file__).with_suffix(".json")
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    for repeat in document["repeats"]:
        print(" ".join(f"{f['vs_create_agent']:.3f}" for f in repeat["figures"].values()))
        print("  points added:", repeat["points"])
