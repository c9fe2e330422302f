"""`make serve`: the example agents on LangGraph Server + PostgreSQL + Redis, several workers.

One scratch database for the module (`toolstop_srv_<random>`, dropped afterwards), Redis at
`TOOLSTOP_TEST_REDIS`. The servers run in `.venv-serve` (created by `make serve-env` on first
use); the client is `langgraph_sdk` from this environment. The phases build on each other:
a 2-worker server takes 300 runs and streams; Ctrl-C stops it; two replicas start on the same
database and read everything back; one replica is SIGKILLed mid-queue; SIGTERM stops the other.
"""

from __future__ import annotations

import asyncio
import re
import signal
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import convert_to_messages

from serve_bench import CrashResult, replica_env, run_crash
from serve_process import (
    ServeProcess,
    StopResult,
    human,
)
from serve_stack import serve_stack
from toolstop.examples import SEARCH_INDEX
from toolstop.examples.search import NOTHING_FOUND, page_answer
from toolstop.testing import assert_valid_history

pytestmark = [pytest.mark.server, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parent.parent
GRAPHS = ("toolstop_graph", "toolstop_agent")
RUNS = 300

# question -> the topic a search for it must find (None: nothing found), written out by hand
SEARCHES = {
    "How do refunds work?": "refund",
    "shipping?": "shipping",
    "I forgot my password": "password",
    "What is LangGraph?": "langgraph",
    "Tell me about quantum physics": None,
}


def question(index: int) -> str:
    """The index-th question of the 300: the five searches and a save, in turn."""
    searches = list(SEARCHES)
    if index % 6 == 5:
        return f"save note-{index}: value {index}"
    return searches[index % 6]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """PostgreSQL, Redis, the serve environment and a scratch database; skips without them."""
    with serve_stack(tmp_path_factory.mktemp("serve")) as found:
        yield found


def serve(stack: dict[str, Any], name: str, **env: str) -> ServeProcess:
    """`make serve` on the scratch database, launched (`.wait_ready()` waits for it)."""
    settings = {"DATABASE_URI": stack["database"], "REDIS_URI": stack["redis"], **env}
    return ServeProcess(ROOT, stack["logs"] / f"{name}.log", settings).launch()


@dataclass
class Loaded:
    """The first server and what its 300 runs left behind."""

    server: ServeProcess
    runs: list[tuple[int, str, str, str]] = field(default_factory=list)
    """(index, graph, thread_id, run_id)"""
    statuses: dict[str, str] = field(default_factory=dict)
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    stopped: StopResult | None = None


async def submit_and_wait(url: str) -> tuple[list[tuple[int, str, str, str]], dict[str, str]]:
    from langgraph_sdk import get_client

    gate = asyncio.Semaphore(32)

    async def one(client: Any, index: int) -> tuple[tuple[int, str, str, str], str]:
        graph = GRAPHS[index % 2]
        async with gate:
            thread = await client.threads.create()
            run = await client.runs.create(thread["thread_id"], graph, input=human(question(index)))
        async with gate:
            await client.runs.join(thread["thread_id"], run["run_id"])
            done = await client.runs.get(thread["thread_id"], run["run_id"])
        return (index, graph, thread["thread_id"], run["run_id"]), str(done["status"])

    async with get_client(url=url) as client:
        results = await asyncio.gather(*(one(client, i) for i in range(RUNS)))
    return [r for r, _ in results], {r[3]: status for r, status in results}


@pytest.fixture(scope="module")
def loaded(stack: dict[str, Any]) -> Iterator[Loaded]:
    """A 2-worker `make serve` on the fresh database, after 300 runs over both graphs."""
    from langgraph_sdk import get_sync_client

    server = serve(stack, "first", WORKERS="2")
    result = Loaded(server=server)
    try:
        server.wait_ready()
        result.runs, result.statuses = asyncio.run(submit_and_wait(server.url))
        with get_sync_client(url=server.url) as client:
            for _, _, thread_id, _ in result.runs:
                result.states[thread_id] = client.threads.get_state(thread_id)["values"]
        yield result
    finally:
        if result.stopped is None:
            server.stop()


def expected_turn(text: str) -> tuple[str, dict[str, Any], dict[str, Any], str, str]:
    """(tool name, call args, artifact, tool content, final content) a correct run leaves."""
    if text.startswith("save "):
        key, value = text.removeprefix("save ").split(": ", 1)
        artifact = {"stop": True, "reason": "completed", "already_applied": False}
        saved = f"Saved record {key}."
        return "write_record", {"key": key, "value": value}, artifact, saved, saved
    topic = SEARCHES[text]
    if topic is None:
        artifact = {"stop": True, "reason": "completed", "found": False}
        return "search", {"query": text}, artifact, NOTHING_FOUND, NOTHING_FOUND
    answer = page_answer(SEARCH_INDEX[topic])
    artifact = {
        "stop": True,
        "reason": "completed",
        "answer": answer,
        "found": True,
        "topic": topic,
    }
    return "search", {"query": text}, artifact, SEARCH_INDEX[topic], answer


def check_one_turn(values: dict[str, Any], text: str) -> None:
    """The thread holds exactly one correct turn for `text`, and its record says so."""
    name, args, artifact, tool_content, content = expected_turn(text)
    messages = values["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[0]["content"] == text
    (call,) = messages[1]["tool_calls"]
    assert (call["name"], call["args"], call["id"]) == (name, args, f"{name}-1")
    assert messages[2]["artifact"] == artifact
    assert messages[2]["content"] == tool_content  # what the model would have read
    assert messages[3]["content"] == content  # the relay: the tool's answer, else its text
    record = values["stop_record"]
    assert (record["rule"], record["stopped"], record["mode"]) == ("completed", True, "hard")
    assert (record["tools"], record["tool_call_ids"]) == ([name], [f"{name}-1"])
    assert (record["model_calls"], record["tool_turns"]) == (1, 1)
    assert_valid_history(convert_to_messages(messages))


def test_300_runs_on_two_workers_none_lost(loaded: Loaded) -> None:
    from langgraph_sdk import get_sync_client

    assert len(loaded.runs) == RUNS
    assert Counter(loaded.statuses.values()) == {"success": RUNS}
    assert Counter(graph for _, graph, _, _ in loaded.runs) == dict.fromkeys(GRAPHS, RUNS // 2)
    for index, _, thread_id, _ in loaded.runs:
        check_one_turn(loaded.states[thread_id], question(index))
    started, _ = loaded.server.server_processes()
    assert len(started) == 2  # two workers served them
    with get_sync_client(url=loaded.server.url) as client:
        for _, _, thread_id, run_id in loaded.runs[:20]:  # one run per thread, no replay
            assert [r["run_id"] for r in client.runs.list(thread_id)] == [run_id]
        items = client.store.search_items(["toolstop", "records"], limit=1000)["items"]
    saved = {f"note-{i}": f"value {i}" for i in range(RUNS) if i % 6 == 5}
    assert {item["key"]: item["value"]["value"] for item in items} == saved


@pytest.mark.parametrize("graph", GRAPHS)
def test_streaming_shows_the_relay_and_run_end(loaded: Loaded, graph: str) -> None:
    from langgraph_sdk import get_sync_client

    with get_sync_client(url=loaded.server.url) as client:
        thread = client.threads.create()
        parts = list(
            client.runs.stream(
                thread["thread_id"],
                graph,
                input=human("How do refunds work?"),
                stream_mode=["messages-tuple", "custom"],
            )
        )
    page = SEARCH_INDEX["refund"]
    messages = [p.data[0] for p in parts if p.event == "messages"]
    custom = [p.data for p in parts if p.event == "custom"]
    # the model's tool call, the tool's page, then the relay: the page as prose, the AI's answer
    assert [m["type"] for m in messages if m["content"] == page] == ["tool"]
    assert [m["type"] for m in messages if m["content"] == page_answer(page)] == ["ai"]
    assert messages[0]["tool_calls"][0]["args"] == {"query": "How do refunds work?"}
    assert [c["toolstop"] for c in custom] == ["turn", "run_end"]
    record = custom[-1]["record"]
    assert (record["rule"], record["stopped"], record["model_calls"]) == ("completed", True, 1)


def test_the_deployment_client_block_runs_against_make_serve(loaded: Loaded) -> None:
    page = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    marker = "<!-- run by tests/test_serve_pg.py against make serve -->\n```py\n"
    block = re.search(re.escape(marker) + r"(.*?)```", page, flags=re.S)
    assert block is not None, "docs/deployment.md lost its make serve client example"
    source, found = re.subn(
        r'^URL = ".*"$', f'URL = "{loaded.server.url}"', block.group(1), flags=re.M
    )
    assert found == 1
    exec(compile(source, "docs/deployment.md make serve block", "exec"), {"__name__": "docs_serve"})


@pytest.fixture(scope="module")
def replicas(stack: dict[str, Any], loaded: Loaded) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    """Ctrl-C on the first server, then two replicas (A, B) on the same database."""
    loaded.stopped = loaded.server.stop(signal.SIGINT, group=True)
    a = serve(stack, "replica-a", **replica_env(stack["database"], stack["redis"], jobs=2))
    b = serve(stack, "replica-b", **replica_env(stack["database"], stack["redis"], jobs=10))
    try:
        yield a.wait_ready(), b.wait_ready()
    finally:
        a.kill()  # a no-op for what has already stopped
        b.kill()


def test_ctrl_c_stops_the_server_cleanly(
    loaded: Loaded, replicas: tuple[ServeProcess, ServeProcess]
) -> None:
    stopped = loaded.stopped
    assert stopped is not None
    assert stopped.group_gone, "processes of make serve outlived Ctrl-C"
    assert stopped.shutdown_logged, loaded.server.log_tail()


def test_a_restart_reads_every_thread_and_record_back(
    loaded: Loaded, replicas: tuple[ServeProcess, ServeProcess]
) -> None:
    from langgraph_sdk import get_sync_client

    a, b = replicas
    with get_sync_client(url=a.url) as via_a, get_sync_client(url=b.url) as via_b:
        for position, (_, _, thread_id, _) in enumerate(loaded.runs):
            client = via_a if position % 2 else via_b
            assert client.threads.get_state(thread_id)["values"] == loaded.states[thread_id]


@pytest.fixture(scope="module")
def crash(replicas: tuple[ServeProcess, ServeProcess]) -> CrashResult:
    a, b = replicas
    return run_crash(a, b, queued=8)


def test_a_killed_replica_loses_no_run_and_writes_nothing_twice(
    crash: CrashResult, replicas: tuple[ServeProcess, ServeProcess]
) -> None:
    from langgraph_sdk import get_sync_client

    _, b = replicas
    assert Counter(crash.statuses.values()) == {"success": len(crash.runs)}
    assert crash.written_in_flight in b.swept_runs()  # B put A's run back in the queue
    assert crash.written_in_flight in crash.in_flight
    assert crash.done_before
    with get_sync_client(url=b.url) as client:
        for index, (thread_id, run_id, key) in enumerate(crash.runs):
            values = client.threads.get_state(thread_id)["values"]
            messages = values["messages"]
            # exactly once: one turn per run, however often it was attempted
            assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"], key
            assert_valid_history(convert_to_messages(messages))
            (call,) = messages[1]["tool_calls"]
            assert call["args"] == {"key": key, "value": f"value-{index}"}
            artifact = messages[2]["artifact"]
            history = client.threads.get_history(thread_id, limit=50)
            retried = 2 in {h["metadata"].get("run_attempt") for h in history if h["metadata"]}
            if artifact["already_applied"]:
                assert retried, key  # only a retry can meet its own run's write
            if run_id == crash.written_in_flight:
                # its first attempt wrote and died before answering; the retry on B found the
                # record in PostgreSQL instead of writing it again
                assert retried
                assert artifact["already_applied"] is True
            if run_id in crash.done_before:
                assert not retried
                assert artifact["already_applied"] is False
            assert values["stop_record"]["rule"] == "completed"
            assert [r["run_id"] for r in client.runs.list(thread_id)] == [run_id]
        items = client.store.search_items(["toolstop", "records"], limit=1000)["items"]
    records = {i["key"]: i["value"]["value"] for i in items if i["key"].startswith("key-")}
    assert records == {key: f"value-{i}" for i, (_, _, key) in enumerate(crash.runs)}


def test_a_second_turn_on_the_other_replica(
    crash: CrashResult, replicas: tuple[ServeProcess, ServeProcess]
) -> None:
    from langgraph_sdk import get_sync_client

    _, b = replicas
    thread_id, _run_id, key = next(r for r in crash.runs if r[1] in crash.done_before)
    index = [r[2] for r in crash.runs].index(key)
    graph = GRAPHS[index % 2]
    with get_sync_client(url=b.url) as client:  # A, which ran the first turn, is gone
        client.runs.wait(thread_id, graph, input=human(f"save {key}: value-{index}"))
        client.runs.wait(thread_id, graph, input=human("shipping?"))
        values = client.threads.get_state(thread_id)["values"]
    messages = values["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"] * 3
    assert_valid_history(convert_to_messages(messages))
    ids = [c["id"] for m in messages if m["type"] == "ai" for c in m.get("tool_calls") or []]
    assert ids == ["write_record-1", "write_record-2", "search-3"]  # unique across turns
    assert messages[6]["artifact"]["already_applied"] is True  # A's write, seen from B
    assert messages[10]["artifact"]["topic"] == "shipping"
    assert values["stop_record"]["tool_call_ids"] == ["search-3"]


def test_sigterm_stops_a_replica_cleanly(
    crash: CrashResult, replicas: tuple[ServeProcess, ServeProcess]
) -> None:
    _, b = replicas
    stopped = b.stop(signal.SIGTERM)  # to make alone, as a supervisor sends it
    assert stopped.group_gone, "processes of make serve outlived SIGTERM"
    assert stopped.shutdown_logged, b.log_tail()
