"""Python calls per run of StopOnArtifact's state, part by part, on empty hooks.

What stands between StopOnArtifact and the floor of its design (README, "toolstop bench"): the
bench's 3-turn no-stop workload, 20 runs per configuration under cProfile (a count, so the
machine's load does not move it). Every configuration but the last is the floor (an empty
`wrap_model_call` and an empty `after_agent` hook) with a part of StopOnArtifact's state added;
what a part adds is the most that dropping it could save (a design without it still needs some
work in its place); what StopOnArtifact adds to the last of them is toolstop's own work.
Run: `python docs/bench/state_calls.py` (writes the JSON beside it).
"""

from __future__ import annotations

import cProfile
import json
import pstats
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, NotRequired

import langchain
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import ExtendedModelResponse, PrivateStateAttr
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from toolstop import StopOnArtifact
from toolstop.bench.overhead import _no_stop_tools
from toolstop.middleware import RUN_KEY
from toolstop.testing import ScriptedChatModel, call

RUNS = 20


class RecordOnly(AgentState[Any]):
    stop_record: NotRequired[dict[str, Any]]


class RecordAndRun(RecordOnly):
    toolstop_run: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]


def _floor(schema: type | None = None, *, write_per_call: bool = False) -> AgentMiddleware:
    class Floor(AgentMiddleware):  # type: ignore[type-arg]
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            response = handler(request)
            if not write_per_call:
                return response
            update = {RUN_KEY: {"open": True, "model_calls": 1}}
            return ExtendedModelResponse(model_response=response, command=Command(update=update))

        def after_agent(self, state: Any, runtime: Any) -> Any:
            return {"stop_record": {"stopped": False}} if schema is not None else None

    if schema is not None:
        Floor.state_schema = schema
    return Floor()


CONFIGS: dict[str, Any] = {
    "floor (empty wrap_model_call + after_agent)": lambda: _floor(),
    "+ stop_record, written once per run": lambda: _floor(RecordOnly),
    "+ the private run channel": lambda: _floor(RecordAndRun),
    "+ the run state written on every model call": lambda: _floor(
        RecordAndRun, write_per_call=True
    ),
    "StopOnArtifact": StopOnArtifact,
}


def _calls(middleware: Any) -> int:
    def agent() -> Any:
        model = ScriptedChatModel([call("search"), call("search"), call("search"), "answer"])
        return create_agent(model, _no_stop_tools(), middleware=middleware())

    agent().invoke({"messages": [HumanMessage("q")]})  # warm
    agents = [agent() for _ in range(RUNS)]
    profile = cProfile.Profile()
    profile.enable()
    for each in agents:
        each.invoke({"messages": [HumanMessage("q")]})
    profile.disable()
    return int(pstats.Stats(profile).total_calls) // RUNS  # type: ignore[attr-defined]


def main() -> dict[str, Any]:
    assert set(RecordAndRun.__annotations__) >= {"stop_record", RUN_KEY}
    bare = _calls(list)
    counts = {name: _calls(lambda m=middleware: [m()]) for name, middleware in CONFIGS.items()}
    names = list(counts)
    return {
        "langchain": langchain.__version__,
        "runs": RUNS,
        "bare_create_agent_calls_per_run": bare,
        "calls_per_run": counts,
        "vs_bare": {name: round(n / bare, 4) for name, n in counts.items()},
        # What each row adds to the one before; StopOnArtifact's is toolstop's own work.
        "adds_to_the_row_before": {
            name: counts[name] - counts[previous] for previous, name in pairwise(names)
        },
    }


if __name__ == "__main__":
    document = main()
    out = Path(__file__).with_suffix(".json")
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(document, indent=2))
