"""The exported example agents (`toolstop.server`) and `make serve`'s settings, in process."""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

import serve as deploy
from serve import ServeSettings, main, serve_command
from toolstop import server
from toolstop._compat import has_agents
from toolstop.errors import ToolstopConfigError
from toolstop.examples import SEARCH_INDEX
from toolstop.examples.simulated import SimulatedAgentModel
from toolstop.testing import assert_valid_history

KINDS = ["graph", "agent"] if has_agents() else ["graph"]


@pytest.fixture(autouse=True)
def _fresh_agents(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test builds the agents from its own environment (the server builds them once)."""
    for name in ("TOOLSTOP_MODEL", "TOOLSTOP_SIMULATED_LATENCY_MS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("TOOLSTOP_SIMULATED_TOOL_LATENCY_MS", raising=False)
    server._build.cache_clear()
    yield
    server._build.cache_clear()


def on_a_server(kind: str, store: Any, mode: str | None = None) -> Any:
    """The exported graph as the server runs it: its config, a checkpointer and a store."""
    config = {"configurable": {server.MODE_KEY: mode}} if mode else {"configurable": {}}
    graph = getattr(server, kind)(config)
    return graph.copy(update={"checkpointer": InMemorySaver(), "store": store})


def ask(graph: Any, thread: str, text: str, mode: str | None = None) -> dict[str, Any]:
    configurable = {"thread_id": thread, **({server.MODE_KEY: mode} if mode else {})}
    values: dict[str, Any] = graph.invoke(
        {"messages": [HumanMessage(text)]}, {"configurable": configurable}
    )
    return values


@pytest.mark.parametrize("kind", KINDS)
def test_the_simulated_agent_searches_what_was_asked_with_unique_ids(kind: str) -> None:
    graph = on_a_server(kind, InMemoryStore())
    ask(graph, "t", "How do refunds work?")
    ask(graph, "t", "I forgot my password")
    values = ask(graph, "t", "save order-7: paid in full")
    messages = values["messages"]
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [(c["name"], c["args"], c["id"]) for c in calls] == [
        ("search", {"query": "How do refunds work?"}, "search-1"),
        ("search", {"query": "I forgot my password"}, "search-2"),
        ("write_record", {"key": "order-7", "value": "paid in full"}, "write_record-3"),
    ]
    tools = [m for m in messages if isinstance(m, ToolMessage)]
    assert tools[1].content == SEARCH_INDEX["password"]
    assert tools[2].artifact == {"stop": True, "reason": "completed", "already_applied": False}
    assert values["stop_record"]["tool_call_ids"] == ["write_record-3"]
    assert_valid_history(messages)


@pytest.mark.parametrize("kind", KINDS)
def test_records_are_shared_through_the_store_like_replicas_on_one_database(kind: str) -> None:
    store = InMemoryStore()  # what PostgreSQL is to two replicas
    first, second = on_a_server(kind, store), on_a_server(kind, store)
    server._build.cache_clear()
    other = on_a_server(kind, store)  # built anew: its own tool objects, the same store
    assert ask(first, "a", "save k: v")["messages"][-2].artifact["already_applied"] is False
    assert ask(other, "b", "save k: v")["messages"][-2].artifact["already_applied"] is True
    conflict = ask(second, "c", "save k: w")
    assert conflict["stop_record"]["rule"] == "fatal"
    assert store.get(server.RECORDS_NAMESPACE, "k").value == {"value": "v"}  # not overwritten


def test_records_without_a_store_stay_in_the_process() -> None:
    records = server.ServerRecords()
    records["a"] = "1"
    assert (dict(records), len(records), "a" in records) == ({"a": "1"}, 1, True)
    del records["a"]
    with pytest.raises(KeyError):
        records["a"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_mode_comes_from_the_assistant_config(kind: str) -> None:
    never = on_a_server(kind, InMemoryStore(), mode="never")
    values = ask(never, "t", "shipping?", mode="never")
    record = values["stop_record"]
    assert (record["mode"], record["stopped"], record["would_stop"]) == (
        "never",
        False,
        "completed",
    )
    assert record["model_calls"] == 2  # the model answered after the tool, as without toolstop
    assert values["messages"][-1].content.startswith("From the tools: Standard shipping")
    with pytest.raises(ToolstopConfigError, match="toolstop_mode"):
        getattr(server, kind)({"configurable": {server.MODE_KEY: "sometimes"}})


def outcomes(tool: Any, calls: int) -> Counter[str]:
    """The reasons `calls` searches of `tool` signal."""
    reasons: Counter[str] = Counter()
    for index in range(calls):
        call = {"type": "tool_call", "name": "search", "id": f"c{index}", "args": {"query": "x"}}
        reasons[tool.invoke(call).artifact["reason"]] += 1
    return reasons


def test_forced_success_only_with_the_simulated_model(monkeypatch: pytest.MonkeyPatch) -> None:
    assert outcomes(server.example_tools()[0], 50) == {"completed": 50}
    monkeypatch.setenv("TOOLSTOP_MODEL", "openai:gpt-4o-mini")
    seen = outcomes(server.example_tools()[0], 300)
    # the demo's weights (60/25/15), unseeded: all three outcomes show in 300 calls
    assert set(seen) == {"completed", "transient", "fatal"}
    assert seen["completed"] > seen["transient"] > 0


def test_a_real_model_is_built_from_toolstop_model(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_openai")
    monkeypatch.setenv("TOOLSTOP_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    model = server._model(("search",))
    assert type(model).__name__ == "ChatOpenAI"
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ToolstopConfigError, match="OPENAI_API_KEY is not set"):
        server.graph({"configurable": {}})


@pytest.mark.parametrize(
    "name", ["TOOLSTOP_SIMULATED_LATENCY_MS", "TOOLSTOP_SIMULATED_TOOL_LATENCY_MS"]
)
@pytest.mark.parametrize("value", ["fast", "-1", "60001"])
def test_a_bad_latency_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ToolstopConfigError, match=f"{name} must be a number of ms"):
        server.graph({"configurable": {}})


def test_the_simulated_model_retries_what_says_try_again_and_answers_the_rest() -> None:
    model = SimulatedAgentModel(tool_names=("search",)).bind(tools=[{"type": "function"}])
    asked = [SystemMessage("be brief"), HumanMessage("refund?")]
    first = model.invoke(asked)
    assert first.tool_calls[0]["args"] == {"query": "refund?"}
    failed = ToolMessage("The search service timed out. Try again.", tool_call_id="search-1")
    retry = model.invoke([*asked, first, failed])
    assert [(c["name"], c["args"], c["id"]) for c in retry.tool_calls] == [
        ("search", {"query": "refund?"}, "search-2")
    ]
    page = ToolMessage(SEARCH_INDEX["refund"], tool_call_id="search-2")
    answer = model.invoke([*asked, first, failed, retry, page])
    assert answer.tool_calls == []
    assert answer.content.startswith("From the tools: Refunds are paid")
    assert answer.usage_metadata["input_tokens"] > 0
    # nothing asked, or tools not offered: an answer, never a call
    assert model.invoke([HumanMessage("   ")]).tool_calls == []
    narrated = SimulatedAgentModel(tool_names=("search",)).invoke([*asked, first, page])
    assert narrated.tool_calls == []


def test_serve_settings_from_the_environment() -> None:
    env = {"DATABASE_URI": "postgresql://u@h:5432/d", "REDIS_URI": "redis://h:6379/1"}
    settings = ServeSettings.from_env(env)
    assert (settings.port, settings.workers, settings.jobs_per_worker) == (8123, 2, 10)
    command = serve_command(settings, Path("langgraph.json"), Path("/venv/bin"))
    assert command[:2] == ["/venv/bin/langhost", "serve"]
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert command[command.index("--workers") + 1] == "2"
    custom = ServeSettings.from_env(
        {**env, "PORT": "9000", "WORKERS": "4", "N_JOBS_PER_WORKER": "0"}
    )
    assert (custom.port, custom.workers, custom.jobs_per_worker) == (9000, 4, 0)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"REDIS_URI": "redis://h"}, "DATABASE_URI is not set"),
        ({"DATABASE_URI": "postgresql://h/d"}, "REDIS_URI is not set"),
        ({"DATABASE_URI": "mysql://h/d", "REDIS_URI": "redis://h"}, "DATABASE_URI must start with"),
        (
            {"DATABASE_URI": "POSTGRESQL://u:s3cr3t@h/d", "REDIS_URI": "redis://h"},
            "DATABASE_URI must start with",
        ),
        (
            {"DATABASE_URI": "host=h password=s3cr3t", "REDIS_URI": "redis://h"},
            "DATABASE_URI must start with",
        ),
        (
            {"DATABASE_URI": "postgresql://h/d", "REDIS_URI": "REDIS://:s3cr3t@h"},
            "REDIS_URI must start with",
        ),
        (
            {"DATABASE_URI": "postgresql://h/d", "REDIS_URI": "redis://h", "PORT": "80x"},
            "PORT must",
        ),
        (
            {"DATABASE_URI": "postgresql://h/d", "REDIS_URI": "redis://h", "WORKERS": "0"},
            "WORKERS must",
        ),
    ],
)
def test_make_serve_refuses_bad_settings_in_one_sentence(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    message: str,
) -> None:
    for name in ("DATABASE_URI", "REDIS_URI", "PORT", "WORKERS", "N_JOBS_PER_WORKER"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["langgraph.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"make serve: {message}")
    assert len(err.strip().splitlines()) == 1  # one sentence, no traceback
    assert "s3cr3t" not in err


def test_make_serve_without_langhost_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URI", "postgresql://h/d")
    monkeypatch.setenv("REDIS_URI", "redis://h")
    assert main(["langgraph.json"]) == 2  # this environment is .venv, not .venv-serve
    assert "langhost is not installed" in capsys.readouterr().err


@pytest.fixture
def serve_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Valid settings on a free port, langhost 'installed': the checks after those run."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        "DATABASE_URI": "postgresql://postgres:s3cret@127.0.0.1:1/none",
        "REDIS_URI": "redis://127.0.0.1:6379/0",
        "PORT": str(port),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(deploy.shutil, "which", lambda *_a, **_k: "/usr/bin/langhost")
    return env


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens once the probe is closed


def test_make_serve_refuses_a_port_in_use(
    serve_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:  # langgraph-api would move to a random port instead
        taken.bind(("127.0.0.1", int(serve_env["PORT"])))
        taken.listen()
        assert main(["langgraph.json"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"make serve: port {serve_env['PORT']} on 127.0.0.1 is in use (another server or "
        "replica?); choose another PORT\n"
    )


def test_make_serve_refuses_an_unreachable_redis_without_its_password(
    serve_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = _closed_port()
    monkeypatch.setenv("REDIS_URI", f"redis://:hunter2@127.0.0.1:{port}/0")
    assert main(["langgraph.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"make serve: cannot reach Redis at redis://:***@127.0.0.1:{port}/0: ")
    assert len(err.strip().splitlines()) == 1
    assert "hunter2" not in err


def test_check_redis_passes_a_redis_that_answers() -> None:
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=2).close()
    except OSError as error:
        pytest.skip(f"no Redis on 127.0.0.1:6379: {error}")
    deploy.check_redis("redis://127.0.0.1:6379/0")  # PING -> +PONG


def test_a_failed_migration_names_its_reason_not_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate = tmp_path / "langgraph-runtime-pg-migrate"
    migrate.write_text(
        "#!/bin/sh\n"
        "echo 'Traceback (most recent call last):' >&2\n"
        "echo 'sqlalchemy.exc.OperationalError: (psycopg.OperationalError) connection failed: "
        'FATAL:  database "nosuchdb" does not exist\' >&2\n'
        "echo '(Background on this error at: https://sqlalche.me/e/21/e3q8)' >&2\n"
        "exit 1\n"
    )
    migrate.chmod(0o755)
    with pytest.raises(RuntimeError) as caught:
        deploy.prepare_database("postgresql://postgres:s3cret@127.0.0.1/nosuchdb", tmp_path)
    message = str(caught.value)
    assert message.startswith("cannot migrate postgresql://postgres:***@127.0.0.1/nosuchdb: ")
    assert 'database "nosuchdb" does not exist' in message
    assert "sqlalche.me" not in message
    assert "s3cret" not in message


def test_make_serve_help_says_how_to_serve_your_own_config(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    assert "make serve [CONFIG=langgraph.json]" in capsys.readouterr().err
