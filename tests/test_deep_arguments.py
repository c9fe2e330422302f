"""Tool arguments nested about 975 deep (a model chooses them) never crash a router or a reader.

`decision._call_key` wrote them as JSON and raised `RecursionError`: a `build_react_graph`
agent whose tool signalled a stop crashed instead of stopping, `StopOnArtifact` too, and
`report --from ... --convert` failed on the whole file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

import toolstop
from routers import MIDDLEWARE_UNAVAILABLE
from toolstop import StopPolicy, build_react_graph, signal
from toolstop.decision import _call_key

DEPTH = 975


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@tool(response_format="content_and_artifact")
def lookup(data: Any) -> tuple[str, dict[str, Any]]:
    """Looks the data up and signals that its result is the answer."""
    return "found", signal("completed")


class AsksOnce(BaseChatModel):
    """Asks `lookup` once with deeply nested arguments; fails on a second call.

    Not the scripted model: it deep-copies its script, which the nesting would overflow."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "asks-once"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        assert self.calls == 1, "the model was called after the stop"
        call = {"name": "lookup", "args": {"data": nested(DEPTH)}, "id": "c1"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))])


def test_the_key_of_a_call_too_deep_to_write_stands_on_its_own() -> None:
    call = {"name": "lookup", "args": {"data": nested(5000)}, "id": "c7"}
    assert _call_key(call) == "id:c7"
    shallow = {"name": "lookup", "args": {"b": 1, "a": [2]}, "id": "c8"}
    assert _call_key(shallow) == json.dumps(["lookup", {"a": [2], "b": 1}])


def test_the_hand_built_graph_stops() -> None:
    model = AsksOnce()
    state = build_react_graph(model, [lookup]).invoke({"messages": [HumanMessage("q")]})
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    assert state["messages"][-1].content == "found"
    assert state["stop_record"]["rule"] == "completed"
    assert model.calls == 1


@pytest.mark.skipif(bool(MIDDLEWARE_UNAVAILABLE), reason=str(MIDDLEWARE_UNAVAILABLE))
def test_stop_on_artifact_stops() -> None:
    from langchain.agents import create_agent

    from toolstop import StopOnArtifact

    model = AsksOnce()
    agent = create_agent(model, [lookup], middleware=[StopOnArtifact(StopPolicy())])
    state = agent.invoke({"messages": [HumanMessage("q")]})
    assert state["messages"][-1].content == "found"
    assert state["stop_record"]["rule"] == "completed"
    assert model.calls == 1


@pytest.mark.slow
def test_report_convert_reads_the_rest_of_the_file(tmp_path: Path) -> None:
    """In a child process: the depth the reader's JSON parser reaches depends on the stack
    it starts from, and the command's is shallower than a test's."""
    deep = "[" * DEPTH + '"x"' + "]" * DEPTH
    asks = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": "lookup", "arguments": '{"data": ' + deep + "}"}}
            ],
        }
        for i in (1, 2)
    ]  # fmt: skip
    messages = [
        {"role": "user", "content": "q"},
        asks[0],
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        asks[1],
        {"role": "tool", "tool_call_id": "c2", "content": "found again"},
        {"role": "assistant", "content": "done"},
    ]
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    log = tmp_path / "deep.jsonl"
    log.write_text(
        json.dumps({"id": "deep", "messages": messages})
        + "\n"
        + json.dumps({"id": "plain", "messages": plain})
        + "\n"
    )
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(Path(toolstop.__file__).parents[1])}
    command = [sys.executable, "-m", "toolstop", "report", "--from", str(log),
               "--convert", "lookup", "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    document = json.loads((out / "report.json").read_text())
    assert document["runs"] == 2, done.stderr
    assert (document["what_if"]["runs"], document["what_if"]["stopped_runs"]) == (2, 1)
    assert document["what_if"]["not_run"] == [{"tool": "lookup", "calls": 1, "writes": False}]
