"""Python function calls per run of each router: the count `make test` holds toolstop's cost to.

    python scripts/call_counts.py            # print this stack's counts and the baseline's
    python scripts/call_counts.py --update   # write them into the baseline (deliberately)

Counts, with cProfile, the Python function calls (built-ins included) of one run of the bench's
3-turn workload on which nothing stops (`toolstop bench --overhead`'s), for bare `create_agent`,
the floor of StopOnArtifact's design (its hooks, empty), `create_agent` + `StopOnArtifact` and the
hand-built graph: all of them (`calls`) and those of toolstop's own functions (`toolstop`; the test
kit and the bench excluded). The two routers are counted a second time with a result as tools
return them (`JSON_RESULT`: a JSON object holding a list of 40 records, 2.8 KB) and a final answer
that restates three of them: the run's end then reads, judges and compares a real result, which the
bench's two-word result leaves out. Unlike time, a count does not move with the machine's load or
speed: on one stack it is the same in every process and for every hash seed. The tools run in the
calling thread (LangGraph's `ToolNode` would run them in a thread pool, which cProfile does not
see), the garbage collector is paused, and every agent has run once before it is counted.

The counts depend on the versions of Python, LangChain and LangGraph, so the baseline
(`docs/bench/call_counts.json`) keeps one entry per stack (`stack_key`), and
`tests/test_call_counts.py` compares the stack it runs on with its entry, failing when a count
grew by more than `MARGIN`, and skipping, saying so, on a stack that has none. After a change
that is meant to cost more (or that saves), run `--update` on each stack in the file and commit
the JSON with the change that moved it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = [
    "BASELINE",
    "JSON_ANSWER",
    "JSON_CONTENT",
    "JSON_RESULT",
    "MARGIN",
    "RUNS",
    "count",
    "grown",
    "main",
    "stack_key",
]

BASELINE = Path(__file__).parent.parent / "docs" / "bench" / "call_counts.json"
"""Where the counts of each stack are kept."""

MARGIN = 0.05
"""How much a count may grow over the baseline before the guard fails (5%)."""

RUNS = 5
"""Runs counted per router (the count is per run; more runs change nothing but the time)."""

_OWN = os.sep + "toolstop" + os.sep
_NOT_OWN = (
    _OWN + "testing" + os.sep,
    _OWN + "bench" + os.sep,
    # the token estimate the test kit's scripted model reports as its usage (no router calls it)
    _OWN + "_tokens.py",
)


def stack_key() -> str:
    """The stack the counts belong to: Python's minor version and the LangChain packages'."""
    parts = [f"python {sys.version_info.major}.{sys.version_info.minor}"]
    for package in ("langchain", "langgraph", "langchain-core"):
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            parts.append(f"{package} none")
    return ", ".join(parts)


class _Inline:
    """An executor that runs what it is given in the calling thread (so cProfile sees it)."""

    def map(self, fn: Any, *iterables: Any) -> Iterator[Any]:
        return iter(list(map(fn, *iterables)))


@contextlib.contextmanager
def _tools_inline() -> Iterator[None]:
    import langgraph.prebuilt.tool_node

    tool_node: Any = langgraph.prebuilt.tool_node

    @contextlib.contextmanager
    def inline(config: Any) -> Iterator[_Inline]:
        yield _Inline()

    saved = tool_node.get_executor_for_config
    tool_node.get_executor_for_config = inline
    try:
        yield
    finally:
        tool_node.get_executor_for_config = saved


JSON_RESULT = ", a JSON result"
"""The suffix of a router counted on the workload with a real result (see `_json_tools`)."""

JSON_CONTENT = json.dumps(
    {
        "results": [
            {
                "id": f"sku-{n:04d}",
                "name": f"Widget {n}",
                "price": round(9.99 + n, 2),
                "stock": n % 7,
            }
            for n in range(40)
        ]
    }
)
"""The real result: a JSON object with a list of 40 records (2.8 KB; `docs/bench/commits.py
--json` returns it too)."""
JSON_ANSWER = "Three fit: Widget 1 (sku-0001) at 10.99, Widget 2 at 11.99 and Widget 5 at 14.99."
"""The final answer on the real result: it restates three of the records."""


def _json_tools() -> list[Any]:
    """`_no_stop_tools`'s tool, returning a JSON object with a list of 40 records (2.8 KB)."""
    from langchain_core.tools import StructuredTool

    from toolstop import Outcome, signal

    def search(query: str = "") -> tuple[str, dict[str, Any]]:
        return JSON_CONTENT, signal(Outcome.COMPLETED, stop=False)

    return [
        StructuredTool.from_function(
            search,
            name="search",
            description="Search (never asks to stop).",
            response_format="content_and_artifact",
        )
    ]


def count(runs: int = RUNS) -> dict[str, dict[str, int]]:
    """`{router: {"calls": per run, "toolstop": per run}}` on the stack this runs on."""
    import cProfile
    import pstats

    from langchain_core.messages import HumanMessage

    from toolstop.bench.overhead import BARE, CHOSEN, FLOOR, _builders, _no_stop_tools
    from toolstop.testing import ScriptedChatModel, call

    builders = _builders(design_floor=True)
    names = [n for n in (BARE, FLOOR, CHOSEN, "hand-built graph") if n in builders]
    names += [n + JSON_RESULT for n in (CHOSEN, "hand-built graph") if n in builders]
    counts: dict[str, dict[str, int]] = {}
    with _tools_inline():
        for name in names:

            def agent(name: str = name) -> Any:
                router = name.removesuffix(JSON_RESULT)
                real = router != name
                script: list[Any] = [call("search"), call("search"), call("search")]
                script.append(JSON_ANSWER if real else "answer")
                tools = _json_tools() if real else _no_stop_tools()
                return builders[router](ScriptedChatModel(script), tools)

            agent().invoke({"messages": [HumanMessage("q")]})  # caches, first-call paths
            agents = [agent() for _ in range(runs)]
            gc.collect()
            gc.disable()
            profile = cProfile.Profile()
            try:
                profile.enable()
                for each in agents:
                    each.invoke({"messages": [HumanMessage("q")]})
                profile.disable()
            finally:
                gc.enable()
            stats: Any = pstats.Stats(profile)
            own = sum(
                calls
                for (path, _, _), (_, calls, _, _, _) in stats.stats.items()
                if _OWN in path and not any(part in path for part in _NOT_OWN)
            )
            counts[name] = {"calls": stats.total_calls // runs, "toolstop": own // runs}
    return counts


def grown(counts: dict[str, dict[str, int]], baseline: dict[str, dict[str, int]]) -> list[str]:
    """Each count that grew by more than `MARGIN` over its baseline, as a sentence."""
    found = []
    for router, base in baseline.items():
        for what, was in base.items():
            now = counts.get(router, {}).get(what)
            if now is not None and now > was * (1 + MARGIN):
                found.append(
                    f"{router}: {what} {now:,} per run, baseline {was:,} "
                    f"(+{100 * (now - was) / max(was, 1):.1f}%, margin {100 * MARGIN:.0f}%)"
                )
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    key, counts = stack_key(), count()
    stored = json.loads(BASELINE.read_text(encoding="utf-8")) if BASELINE.exists() else {}
    stacks = stored.setdefault("stacks", {})
    print(json.dumps({"stack": key, "counts": counts, "baseline": stacks.get(key)}, indent=2))
    if "--update" in args:
        stored["margin"] = MARGIN
        stored["runs"] = RUNS
        stacks[key] = counts
        stored["stacks"] = dict(sorted(stacks.items()))
        BASELINE.write_text(json.dumps(stored, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {BASELINE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
