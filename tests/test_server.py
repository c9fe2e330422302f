"""The example agents on a real `langgraph dev` server, driven through `langgraph_sdk`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parent.parent
CLI = Path(sys.executable).parent / "langgraph"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("langgraph_api", reason="needs the `server` extra (langgraph-cli[inmem])")
    pytest.importorskip("langgraph_sdk", reason="needs langgraph-sdk")
    if not CLI.exists():
        pytest.skip(f"no langgraph CLI at {CLI}")
    port = free_port()
    log = (tmp_path_factory.mktemp("server") / "server.log").open("w")
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
    env.pop("TOOLSTOP_MODEL", None)  # the simulated model: no key needed
    process = subprocess.Popen(
        [str(CLI), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
         "--port", str(port), "--config", str(ROOT / "langgraph.json")],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300  # a hang guard: a busy machine starts it slowly
        while True:
            try:
                with urllib.request.urlopen(f"{url}/ok", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"langgraph dev did not start; see {log.name}")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:  # pragma: no cover
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()


@pytest.mark.parametrize("graph_id", ["toolstop_graph", "toolstop_agent"])
def test_runs_on_the_server_keep_the_artifact_and_the_record(server: str, graph_id: str) -> None:
    from langgraph_sdk import get_sync_client

    with get_sync_client(url=server) as client:
        check_on(client, graph_id)


def check_on(client: Any, graph_id: str) -> None:
    """One stopping run and a second turn on one thread of the server."""
    from toolstop.examples import SEARCH_INDEX
    from toolstop.examples.search import page_answer

    assert {a["graph_id"] for a in client.assistants.search()} >= {graph_id}
    thread = client.threads.create()
    question = {"messages": [{"role": "human", "content": "How do refunds work?"}]}
    client.runs.wait(thread["thread_id"], graph_id, input=question)
    values = client.threads.get_state(thread["thread_id"])["values"]
    messages = values["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    answer = page_answer(SEARCH_INDEX["refund"])
    assert messages[-1]["content"] == answer  # the tool's answer for the user
    assert messages[2]["content"] == SEARCH_INDEX["refund"]  # the page, for the model
    assert messages[2]["artifact"] == {
        "stop": True,
        "reason": "completed",
        "answer": answer,
        "found": True,
        "topic": "refund",
    }
    record = values["stop_record"]
    assert (record["rule"], record["stopped"], record["model_calls"]) == ("completed", True, 1)
    # a second turn on the same thread works after the stop
    client.runs.wait(
        thread["thread_id"],
        graph_id,
        input={"messages": [{"role": "human", "content": "shipping?"}]},
    )
    values = client.threads.get_state(thread["thread_id"])["values"]
    messages = values["messages"]
    assert len(messages) == 8
    assert messages[5]["tool_calls"][0]["args"] == {"query": "shipping?"}  # what was asked
    assert messages[6]["artifact"]["topic"] == "shipping"
    assert [messages[1]["tool_calls"][0]["id"], messages[5]["tool_calls"][0]["id"]] == [
        "search-1",
        "search-2",  # unique across the thread's turns
    ]
    assert values["stop_record"]["rule"] == "completed"


@pytest.mark.parametrize("graph_id", ["toolstop_graph", "toolstop_agent"])
def test_a_canary_on_the_server_keeps_each_threads_arm_and_reads_the_reasks(
    server: str, graph_id: str
) -> None:
    """An assistant with `toolstop_canary`: both arms, a thread's arm kept across its runs,
    the re-ask recorded with the earlier run's arm, the way back reading the server's
    checkpointer (too few stops to send anything back)."""
    from langgraph_sdk import get_sync_client

    question = {"messages": [{"role": "human", "content": "How do refunds work?"}]}
    again = {"messages": [{"role": "human", "content": "That did not help. How do refunds work?"}]}
    with get_sync_client(url=server) as client:
        assistant = client.assistants.create(
            graph_id, config={"configurable": {"toolstop_canary": 0.5}}
        )
        arms = set()
        for _ in range(8):
            thread = client.threads.create()["thread_id"]
            client.runs.wait(thread, assistant["assistant_id"], input=question)
            first = client.threads.get_state(thread)["values"]["stop_record"]
            client.runs.wait(thread, assistant["assistant_id"], input=again)
            second = client.threads.get_state(thread)["values"]["stop_record"]
            assert first["arm"] == second["arm"]
            if first["arm"] == "canary":
                assert (first["rule"], first["model_calls"]) == ("completed", 1)
            else:
                assert (first["would_stop"], first["model_calls"]) == ("completed", 2)
            reask = second["reask"]
            assert (reask["arm"], reask["asked_again"], reask["why"]) == (
                first["arm"], True, "complaint"
            )  # fmt: skip
            assert "sent_back" not in second
            arms.add(first["arm"])
        assert arms == {"canary", "shadow"}
