"""Python calls per run at several commits: `commits.py`'s workload, counted instead of timed.

    python docs/bench/commits_calls.py OUT.json LABEL=SRC [LABEL=SRC ...]

For each checkout's `src` (in a child process of its own), cProfile counts the calls of
`commits.py`'s configurations (its model, tool and floors) over `RUNS` runs, the tools run in the
calling thread and the garbage collector paused: a count the machine's load does not move. Run
it with the Python of the stack to count; the JSON is keyed by that stack.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RUNS = 5


def _commits() -> Any:
    spec = importlib.util.spec_from_file_location("commits", Path(__file__).with_name("commits.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["commits"] = module
    spec.loader.exec_module(module)
    return module


class _Inline:
    def map(self, fn: Any, *iterables: Any) -> Iterator[Any]:
        return iter(list(map(fn, *iterables)))


def child() -> dict[str, int]:
    import cProfile

    import langgraph.prebuilt.tool_node
    from langchain_core.messages import HumanMessage

    module: Any = langgraph.prebuilt.tool_node

    @contextlib.contextmanager
    def inline(config: Any) -> Iterator[_Inline]:
        yield _Inline()

    module.get_executor_for_config = inline
    commits = _commits()
    builders = commits._builders()
    counts = {}
    for name in commits.NAMES:
        builders[name]().invoke({"messages": [HumanMessage("q")]})
        agents = [builders[name]() for _ in range(RUNS)]
        gc.collect()
        gc.disable()
        profile = cProfile.Profile()
        profile.enable()
        for agent in agents:
            agent.invoke({"messages": [HumanMessage("q")]})
        profile.disable()
        gc.enable()
        stats: Any = __import__("pstats").Stats(profile)
        counts[name] = stats.total_calls // RUNS
    return counts


def main(out: str, specs: list[tuple[str, str]]) -> dict[str, Any]:
    from importlib.metadata import version

    counted = {}
    for label, src in specs:
        env = {**os.environ, "PYTHONPATH": src}
        done = subprocess.run(
            [sys.executable, __file__, "--child"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        counted[label] = json.loads(done.stdout)
    ratios = _commits().RATIOS
    document = {
        "stack": {"langchain": version("langchain"), "langgraph": version("langgraph")},
        "runs": RUNS,
        "sources": dict(specs),
        "calls_per_run": counted,
        "figures": {
            label: {r: round(c[a] / c[b], 4) for r, (a, b) in ratios.items()}
            for label, c in counted.items()
        },
    }
    Path(out).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return document


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        print(json.dumps(child()))
    else:
        labels = [tuple(a.split("=", 1)) for a in sys.argv[2:]]
        print(json.dumps(main(sys.argv[1], labels)["figures"], indent=2))  # type: ignore[arg-type]
