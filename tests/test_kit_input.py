"""The test kit's helpers refuse a wrong argument with a `TypeError` that names the helper and
what it takes (not langchain's `AttributeError` from deep inside a message), and the loopback
provider listens on a port of your choosing."""

from __future__ import annotations

import json
import socket
import urllib.request
from typing import Any

import pytest
from langchain_core.tools import tool

from toolstop import signal
from toolstop.testing import ScriptedChatModel, call, forced_tool, stand_in, turn
from toolstop.testing.loopback import LoopbackProvider, reply


@tool
def search(query: str) -> str:
    """Search."""
    return query


WRONG: list[tuple[Any, str]] = [
    (lambda: turn(("search", {"query": "x"})), r"^turn\(\*calls\) takes tool calls made by call"),
    (lambda: turn({"name": "search"}), r"^turn\(\*calls\) .* call 1 is a dict"),
    (lambda: turn(call("search"), content=3), r"^turn\(\*calls, content=\.\.\.\) takes .* str"),
    (lambda: call({"query": "x"}), r"^call\(name, \*\*args\) takes the tool's name as a str"),
    (lambda: call(""), r"^call\(name, \*\*args\)"),
    (lambda: call("search", id=7), r"^call\(name, id=\.\.\., \*\*args\) takes the call's id"),
    (lambda: ScriptedChatModel("hello"), r"^ScriptedChatModel\(script\) takes a list of steps"),
    (lambda: ScriptedChatModel([("search", {})]), r"^ScriptedChatModel: script step 0"),
    (lambda: forced_tool("x", "found"), r"^forced_tool\(name, \*results\) takes results that"),
    (lambda: forced_tool(("x", signal("completed"))), r"^forced_tool\(name, \*results\) takes"),
    (lambda: stand_in(search, ["a", None]), r"^stand_in\(tool, \*results\) takes results"),
    (lambda: stand_in(lambda q: q, ("a", None)), r"^stand_in\(tool, \*results\) takes a Lang"),
    (lambda: reply(("search", {"query": "x"})), r"^reply\(text, \*calls\) takes the answer's"),
    (lambda: reply(None, ["search", {}]), r"^reply\(text, \*calls\) takes tool calls as"),
    (lambda: LoopbackProvider("hi"), r"^LoopbackProvider\(script\) takes a list of replies"),
    (lambda: LoopbackProvider([{"text": "hi"}]), r"^LoopbackProvider\(script\) takes replies"),
    (lambda: LoopbackProvider([], port="8080"), r"^LoopbackProvider\(port=\.\.\.\) takes an int"),
]


@pytest.mark.parametrize(("make", "said"), WRONG, ids=lambda v: getattr(v, "__name__", "said"))
def test_a_wrong_argument_is_a_type_error_naming_the_helper(make: Any, said: str) -> None:
    with pytest.raises(TypeError, match=said):
        make()


def test_the_right_arguments_still_work() -> None:
    step = turn(call("search", query="x", id="c1"), content="looking")
    assert step.tool_calls[0]["name"] == "search"
    model = ScriptedChatModel([step, "done"])
    assert model.remaining == 2
    assert forced_tool("x", ("found", signal("completed")), ValueError("boom")).name == "x"
    assert reply(None, ("search", {"query": "x"})).tool_calls == (("search", {"query": "x"}),)
    with pytest.raises(ValueError, match="0 \\(a free port\\) to 65535"):
        LoopbackProvider([], port=70000)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_loopback_provider_listens_on_the_port_given() -> None:
    port = free_port()
    with LoopbackProvider(["hi"], port=port) as provider:
        assert provider.port == port
        assert provider.base_url == f"http://127.0.0.1:{port}/v1"
        with urllib.request.urlopen(f"{provider.base_url}/models", timeout=10) as response:
            assert json.load(response)["data"][0]["id"] == "gpt-loopback"
    with LoopbackProvider([]) as provider:  # the default stays a free port
        assert provider.port > 0
