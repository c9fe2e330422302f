"""Machine instructions per run of StopOnArtifact's state, part by part, by hash seed.

The same configurations as `state_calls.py` beside it (the floor of StopOnArtifact's design,
then the parts of its state added one by one, then StopOnArtifact), counted in instructions by
valgrind's cachegrind instead of Python calls: a count that the machine's load does not move,
and that weighs LangGraph's C-level work (dict copies, channel reads) which a call count does
not see. Each configuration runs `FEW` and `MANY` runs of the bench's 3-turn no-stop workload
on one compiled agent (a scripted model long enough for all of them) in a process of its own;
instructions per run are the difference divided by `MANY - FEW`, so start-up, imports and
compiling cancel out. Python's hash seed moves dict layouts and so the counts by a few tenths
of a point: each seed in `SEEDS` is measured.
Run: `python docs/bench/state_instructions.py` (needs valgrind; some 15 minutes on two cores;
writes the JSON beside it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
FEW, MANY = 10, 30
SEEDS = (0, 1, 2)
BARE = "bare create_agent"


def _state_calls() -> Any:
    """`state_calls.py`, whose configurations are measured here."""
    spec = importlib.util.spec_from_file_location("state_calls", HERE / "state_calls.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["state_calls"] = module  # its TypedDicts resolve through it
    spec.loader.exec_module(module)
    return module


def run(name: str, runs: int) -> None:
    """`runs` runs of configuration `name` on one compiled agent (what valgrind counts)."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from toolstop.bench.overhead import _no_stop_tools
    from toolstop.testing import ScriptedChatModel, call

    configs = _state_calls().CONFIGS
    middleware = [] if name == BARE else [configs[name]()]
    model = ScriptedChatModel([call("search"), call("search"), call("search"), "answer"] * runs)
    agent = create_agent(model, _no_stop_tools(), middleware=middleware)
    for _ in range(runs):
        agent.invoke({"messages": [HumanMessage("q")]})
    model.assert_complete()


def _instructions(name: str, runs: int, seed: int) -> int:
    """Instructions valgrind counts for a process that makes `runs` runs of `name`."""
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--run",
        name,
        str(runs),
    ]
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        msg = f"no instruction count in valgrind's output:\n{done.stderr}"
        raise RuntimeError(msg)
    return int(found.group(1).replace(",", ""))


def figures(per_run: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Ratios to the floor (the first configuration after bare) and what each row adds to the
    row before, in points of the floor, per seed, from the instructions per run."""
    out: dict[str, Any] = {}
    for seed, counts in per_run.items():
        names = [n for n in counts if n != BARE]
        floor = counts[names[0]]
        out[seed] = {
            "vs_floor": {n: round(counts[n] / floor, 4) for n in names},
            "points_added": {
                b: round(100 * (counts[b] - counts[a]) / floor, 2) for a, b in pairwise(names)
            },
        }
    return out


def main() -> dict[str, Any]:
    import langchain

    names = [BARE, *_state_calls().CONFIGS]
    jobs = [(name, runs, seed) for seed in SEEDS for name in names for runs in (FEW, MANY)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counted = dict(zip(jobs, pool.map(lambda job: _instructions(*job), jobs), strict=True))
    per_run = {
        str(seed): {
            name: (counted[name, MANY, seed] - counted[name, FEW, seed]) // (MANY - FEW)
            for name in names
        }
        for seed in SEEDS
    }
    return {
        "langchain": langchain.__version__,
        "python": sys.version.split()[0],
        "runs": [FEW, MANY],
        "instructions_per_run": per_run,
        "figures": figures(per_run),
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run"]:
        run(sys.argv[2], int(sys.argv[3]))
    else:
        document = main()
        out = Path(__file__).with_suffix(".json")
        out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        print(json.dumps(document, indent=2))
