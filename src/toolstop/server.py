"""The example agents exported for LangGraph Server (see `langgraph.json`).

`graph` builds the hand-built graph and `agent` builds `create_agent` + `StopOnArtifact`, both
with the example `search` tool and the idempotent `write_record` tool. Both are graph
factories: the server calls them with the run's config, and `configurable.toolstop_mode`
(`hard`, the default, `polish` or `never`) picks the stop mode, so an assistant created with
`{"configurable": {"toolstop_mode": "never"}}` runs in shadow mode; `toolstop_canary` (a share,
e.g. `0.1`) runs that mode on a share of threads only, with a way back read from the server's
checkpointer (`StopPolicy(canary=..., way_back=WayBack())`). Neither has a checkpointer
of its own: the server brings one (in memory under `langgraph dev`, PostgreSQL under
`make serve`).

The model is `TOOLSTOP_MODEL` (`PROVIDER:NAME`, with the provider's API key in the environment;
`TOOLSTOP_BASE_URL` for an OpenAI-compatible server); the search tool then draws its outcomes
with the demo's weights (60% success, 25% retryable, 15% fatal), so the real model meets
retries and fatal failures.
Without `TOOLSTOP_MODEL` a simulated model (`SimulatedAgentModel`, `TOOLSTOP_SIMULATED_LATENCY_MS`
per call, default 0) drives a search tool forced to succeed, so the server runs with no key and
its runs are predictable (see `example_tools`). `write_record` keeps its records in the
server's store (namespace `("toolstop", "records")`, PostgreSQL under `make serve`), shared by
every worker and replica.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterator, MutableMapping
from typing import Any, get_args

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool

from toolstop._compat import has_agents
from toolstop.errors import ToolstopConfigError
from toolstop.examples.business import make_write_record_tool
from toolstop.examples.search import DEFAULT_WEIGHTS, make_search_tool
from toolstop.examples.simulated import SimulatedAgentModel
from toolstop.graph import build_react_graph
from toolstop.models import chat_model
from toolstop.policy import Mode, StopPolicy

__all__ = ["MODE_KEY", "RECORDS_NAMESPACE", "ServerRecords", "agent", "example_tools", "graph"]

MODE_KEY = "toolstop_mode"
"""The `configurable` key that picks the stop mode of a run (an assistant's config sets it)."""
CANARY_KEY = "toolstop_canary"
"""The `configurable` key of a canary's share of threads (see `toolstop.policy.StopPolicy`)."""

RECORDS_NAMESPACE = ("toolstop", "records")
"""Where `write_record` keeps its records in the server's store."""

PROMPT = (
    "Answer with the tools. Search the knowledge base with the user's question; "
    "when the user says `save KEY: VALUE`, save that record."
)


class ServerRecords(MutableMapping[str, str]):
    """`write_record`'s records in the LangGraph store of the running graph.

    On LangGraph Server that is the server's store (PostgreSQL under `make serve`), so every
    worker and replica sees the same records and a run retried after a crash finds its write
    (`already_applied: True`) instead of writing twice. A graph run with no store (a plain
    `invoke` without `store=`) keeps them in this process only. Check-then-write is not atomic
    across processes: two runs writing the same key at the same moment can both write.
    """

    def __init__(self) -> None:
        self._local: dict[str, str] = {}

    @staticmethod
    def _store() -> Any:
        from langgraph.config import get_store

        try:
            return get_store()
        except (RuntimeError, KeyError):  # outside a run, or a run with no runtime
            return None

    def __getitem__(self, key: str) -> str:
        store = self._store()
        if store is None:
            return self._local[key]
        item = store.get(RECORDS_NAMESPACE, key)
        if item is None:
            raise KeyError(key)
        return str(item.value["value"])

    def __setitem__(self, key: str, value: str) -> None:
        store = self._store()
        if store is None:
            self._local[key] = value
        else:
            store.put(RECORDS_NAMESPACE, key, {"value": value})

    def __delitem__(self, key: str) -> None:
        store = self._store()
        if store is None:
            del self._local[key]
            return
        if store.get(RECORDS_NAMESPACE, key) is None:
            raise KeyError(key)
        store.delete(RECORDS_NAMESPACE, key)

    def __iter__(self) -> Iterator[str]:
        store = self._store()
        if store is None:
            yield from list(self._local)
            return
        offset, page = 0, 100
        while True:
            items = store.search(RECORDS_NAMESPACE, limit=page, offset=offset)
            yield from (item.key for item in items)
            if len(items) < page:
                return
            offset += page

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _simulated() -> bool:
    return not os.environ.get("TOOLSTOP_MODEL")


def _seconds(name: str) -> float:
    raw = os.environ.get(name, "0")
    try:
        milliseconds = float(raw)
    except ValueError:
        milliseconds = -1.0
    if not 0 <= milliseconds <= 60_000:
        msg = f"{name} must be a number of ms from 0 to 60000, got {raw!r}"
        raise ToolstopConfigError(msg)
    return milliseconds / 1000


def _model(tool_names: tuple[str, ...]) -> Any:
    spec = os.environ.get("TOOLSTOP_MODEL")
    if spec:
        return chat_model(spec, base_url=os.environ.get("TOOLSTOP_BASE_URL"))
    latency_s = _seconds("TOOLSTOP_SIMULATED_LATENCY_MS")
    return SimulatedAgentModel(latency_s=latency_s, tool_names=tool_names)


def _answer_late(tool: BaseTool, seconds: float) -> BaseTool:
    """`tool` does its work, then takes `seconds` to answer (a slow service's response)."""
    if not seconds or not isinstance(tool, StructuredTool) or tool.func is None:
        return tool
    work = tool.func

    def late(*args: Any, **kwargs: Any) -> Any:
        result = work(*args, **kwargs)
        time.sleep(seconds)
        return result

    tool.func = late
    return tool


def example_tools() -> list[BaseTool]:
    """The exported agents' tools: `search` and `write_record` (records in `ServerRecords`).

    With the simulated model (no `TOOLSTOP_MODEL`) the search outcome is forced to success, and
    each tool answers `TOOLSTOP_SIMULATED_TOOL_LATENCY_MS` after doing its work (default 0; the
    crash tests use it to kill a replica between a write and its answer). With `TOOLSTOP_MODEL`
    the outcome is drawn with the demo's weights (unseeded), as a real service
    fails, and no latency is added.

    Raises:
        ToolstopConfigError: for a latency that is not a number of ms from 0 to 60000.
    """
    records = make_write_record_tool(ServerRecords())
    if not _simulated():
        return [make_search_tool(weights=DEFAULT_WEIGHTS, seed=None), records]
    late = _seconds("TOOLSTOP_SIMULATED_TOOL_LATENCY_MS")
    return [_answer_late(t, late) for t in (make_search_tool(force_outcome="success"), records)]


def _mode(config: RunnableConfig | None) -> Mode:
    configurable = (config or {}).get("configurable") or {}
    mode = configurable.get(MODE_KEY, "hard")
    if mode not in get_args(Mode):
        msg = f"configurable {MODE_KEY!r} must be one of {get_args(Mode)}, got {mode!r}"
        raise ToolstopConfigError(msg)
    return mode  # type: ignore[no-any-return]


def _canary(config: RunnableConfig | None) -> float | None:
    configurable = (config or {}).get("configurable") or {}
    share = configurable.get(CANARY_KEY)
    if share is None:
        return None
    try:
        value = float(share)
    except (TypeError, ValueError):
        value = -1.0
    if not 0 < value <= 1:
        msg = f"configurable {CANARY_KEY!r} must be a share in (0, 1], got {share!r:.40}"
        raise ToolstopConfigError(msg)
    return value


@functools.cache
def _build(kind: str, mode: Mode, canary: float | None = None) -> Any:
    tools = example_tools()
    model = _model(tuple(t.name for t in tools))
    policy = StopPolicy(mode=mode)
    if canary is not None:
        from toolstop.canary import WayBack

        policy = StopPolicy(mode=mode, canary=canary, way_back=WayBack())
    if kind == "graph":
        return build_react_graph(model, tools, policy=policy, prompt=PROMPT, name="toolstop-graph")
    from langchain.agents import create_agent

    from toolstop.middleware import StopOnArtifact

    return create_agent(
        model,
        tools,
        system_prompt=PROMPT,
        middleware=[StopOnArtifact(policy)],
        name="toolstop-agent",
    )


def graph(config: RunnableConfig) -> Any:
    """The hand-built graph in the mode `configurable.toolstop_mode` asks for (default `hard`).

    Raises:
        ToolstopConfigError: for an unknown mode, or a `TOOLSTOP_MODEL` / latency that cannot
            be used (one sentence, in the run's error).
    """
    return _build("graph", _mode(config), _canary(config))


def agent(config: RunnableConfig) -> Any:
    """`create_agent` + `StopOnArtifact` in the mode `configurable.toolstop_mode` asks for.

    Needs langchain >= 1.4 (`toolstop[agents]`).

    Raises:
        ToolstopConfigError: as `graph`, and when langchain is not installed.
    """
    if not has_agents():
        msg = "the toolstop_agent graph needs langchain >= 1.4: pip install 'toolstop[agents]'"
        raise ToolstopConfigError(msg)
    return _build("agent", _mode(config), _canary(config))
