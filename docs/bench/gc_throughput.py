"""1,000 concurrent runs with Python's garbage collector on and off (README, `--overhead`).

The bench's concurrent-throughput figure (`toolstop bench --overhead`), with the empty-hook
floors of its wall-time table added, measured twice in one process: as it is, then with
`gc.disable()` around the whole measurement. Each configuration's
ratio to bare `create_agent` in each half says how much of the concurrency gap is the garbage
collector's work. Run: `python docs/bench/gc_throughput.py` (writes the JSON beside it; 4 min
34 s on this 2-core machine with nothing else running, 2 min 6 s on the faster one of an
earlier session).
"""

from __future__ import annotations

import gc
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

from toolstop.bench.overhead import throughput

CONCURRENT = 1000
ROUNDS = 5


def main(concurrent: int = CONCURRENT, rounds: int = ROUNDS) -> dict[str, Any]:
    with_gc = throughput(concurrent, rounds, floors=True)
    gc.disable()
    try:
        without_gc = throughput(concurrent, rounds, floors=True)
    finally:
        gc.enable()
    return {
        "langchain": version("langchain"),
        "langgraph": version("langgraph"),  # it has no __version__ attribute
        "gc_on": with_gc,
        "gc_off": without_gc,
    }


if __name__ == "__main__":
    document = main()
    out = Path(__file__).with_suffix(".json")
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    for half in ("gc_on", "gc_off"):
        for name, figures in document[half]["figures"].items():
            print(f"{half:6s} {name:30s} {figures['vs_create_agent']:.3f}x")
