"""The envelope for plain-text tools: unwrapped before the model, malformed passes through."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from routers import ROUTERS, Router
from toolstop.decision import read_signal
from toolstop.envelope import envelope, from_envelope, parse_envelope
from toolstop.testing import ScriptedChatModel, call

jsonschema = pytest.importorskip("jsonschema", reason="the schema test needs jsonschema")
DOCS = Path(__file__).resolve().parent.parent / "docs"
SCHEMA = json.loads((DOCS / "envelope.schema.json").read_text())


def valid(document: Any) -> bool:
    try:
        jsonschema.validate(document, SCHEMA)
    except jsonschema.ValidationError:
        return False
    return True


GOOD = [
    envelope("Paid.", {"stop": True, "reason": "completed", "receipt": "r-1"}),
    envelope("Timed out.", {"stop": False, "reason": "transient"}),
    envelope("No signal."),
]
BAD = [
    "plain text",
    '{"stop": true}',
    '{"toolstop": 2, "content": "x", "artifact": {"stop": true}}',
    '{"toolstop": 1, "content": 5, "artifact": null}',
    '{"toolstop": 1, "content": "x", "artifact": {"stop": true}, "extra": 1}',
    '{"toolstop": 1, "content": "x", "artifact": [1]}',
    "{not json",
]


@pytest.mark.parametrize("text", GOOD)
def test_good_envelopes_match_the_schema_and_parse(text: str) -> None:
    assert valid(json.loads(text))
    content, artifact = parse_envelope(text)
    assert content == json.loads(text)["content"]
    assert artifact is None or "envelope_error" not in artifact


@pytest.mark.parametrize("text", BAD)
def test_bad_envelopes_fail_the_schema_and_pass_through(text: str) -> None:
    with contextlib.suppress(ValueError):  # not JSON at all
        assert not valid(json.loads(text))
    content, artifact = parse_envelope(text)
    assert artifact is not None
    assert "envelope_error" in artifact
    assert content in (text, "x")


@pytest.mark.parametrize(
    ("artifact", "accepted"),
    [
        ({"stop": True, "answer": "Paid."}, True),
        ({"stop": True, "answer": [{"type": "text", "text": "Paid."}]}, True),
        ({"stop": True, "answer": ["Paid", {"type": "text", "text": "."}]}, False),
        ({"stop": True, "answer": [{"type": "text", "text": 5}]}, False),
        ({"stop": True, "answer": [{"type": "image_url", "image_url": {"url": "x"}}]}, False),
        ({"stop": True, "answer": ""}, False),
        ({"stop": True, "answer": [{"type": "text", "text": " "}]}, False),
        ({"stop": True, "answer": []}, False),
        ({"stop": True, "answer": 3}, False),
        ({"stop": True, "answer": [1]}, False),
        ({"Stop": True}, False),
        ({"stop": True, "reason ": "completed"}, False),
        ({"stop": True, "ANSWER": "x"}, False),
        ({"stop": True, "stopped": "own data"}, True),
    ],
)
def test_the_schema_matches_the_routers_reading_of_answer_and_near_misses(
    artifact: dict[str, Any], accepted: bool
) -> None:
    assert valid({"toolstop": 1, "content": "x", "artifact": artifact}) is accepted
    content, parsed = parse_envelope(envelope("x", artifact))
    signal_read = read_signal(ToolMessage(content, artifact=parsed, tool_call_id="c"))
    assert signal_read.valid is accepted


def test_the_schema_rejects_the_contradiction() -> None:
    assert not valid(
        {"toolstop": 1, "content": "x", "artifact": {"stop": True, "reason": "transient"}}
    )


@pytest.fixture(params=ROUTERS, ids=lambda r: r.name)
def router(request: pytest.FixtureRequest) -> Router:
    return request.param  # type: ignore[no-any-return]


def string_tool(text: str) -> Any:
    @tool
    def remote(query: str) -> str:
        """A remote tool that returns a string."""
        return text

    return from_envelope(remote)


def test_a_stop_through_the_envelope(router: Router) -> None:
    model = ScriptedChatModel([call("remote", query="q")])
    agent = router.build(model, [string_tool(GOOD[0])], policy=None, checkpointer=None)
    state = agent.invoke({"messages": [("user", "q")]})
    model.assert_complete()
    assert state["messages"][-1].content == "Paid."
    assert state["stop_record"]["rule"] == "completed"
    assert state["messages"][2].content == "Paid."  # the model would have seen only the content


@pytest.mark.parametrize("text", BAD)
def test_a_malformed_envelope_goes_back_to_the_model_with_a_record(
    router: Router, text: str
) -> None:
    model = ScriptedChatModel([call("remote", query="q"), "answer"])
    agent = router.build(model, [string_tool(text)], policy=None, checkpointer=None)
    state = agent.invoke({"messages": [("user", "q")]})
    model.assert_complete()
    assert state["stop_record"]["rule"] == "none"
    assert state["stop_record"]["invalid_signals"][0]["problem"] == "malformed_envelope"


def test_the_docs_example_runs() -> None:
    block = re.search(r"```python\n(.*?)```", (DOCS / "envelope.md").read_text(), flags=re.S)
    assert block is not None
    exec(compile(block.group(1), "docs/envelope.md", "exec"), {"__name__": "docs"})
