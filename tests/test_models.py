"""Any model by name: demo and check run a real client against the loopback provider."""

from __future__ import annotations

import io
import re
import socket
import sys
from typing import Any

import pytest

from routers import CHECK_ROUTERS
from toolstop.cli import main
from toolstop.errors import ToolstopConfigError
from toolstop.models import LOCAL_KEY, chat_model
from toolstop.testing.loopback import LoopbackProvider, reply

pytest.importorskip("langchain_openai", reason="needs the `openai` extra")

LOOKUP = reply(None, ("lookup", {"query": "refunds"}))
SEARCH = reply(None, ("search", {"query": "How do refunds work?"}))


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_check_with_a_real_client_checks_the_invariants(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    # success 1 + retryable 2 + fatal 1 + policy block 1 request per router
    with LoopbackProvider([LOOKUP] * 5 * len(CHECK_ROUTERS)) as provider:
        code, text = run("check", "--model", "openai:gpt-loopback", "--base-url", provider.base_url)
    assert code == 0, text
    assert f"{4 * len(CHECK_ROUTERS)} passed, 0 failed" in text.splitlines()
    assert provider.rejected == []
    assert provider.remaining == 0


def test_check_with_a_real_model_reports_a_model_that_never_calls_the_tool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with LoopbackProvider(["I'd rather not use tools."] * 4) as provider:
        code, text = run(
            "check", "--model", "openai:gpt-loopback", "--base-url", provider.base_url,
            "--router", "graph",
        )  # fmt: skip
    assert code == 1
    assert "the model never called a tool" in text


def test_demo_with_a_real_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with LoopbackProvider([SEARCH]) as provider:
        code, text = run(
            "demo", "--model", "openai:gpt-loopback", "--base-url", provider.base_url,
            "--outcome", "success",
        )  # fmt: skip
    assert code == 0
    assert "path     : agent -> tools -> finalize" in text
    assert '"rule": "completed"' in text


def test_the_documented_ollama_example_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # toolstop demo --model openai:llama3.1 --base-url http://localhost:11434/v1, as docs/models.md
    # writes it
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with LoopbackProvider([SEARCH], model="llama3.1") as provider:
        code, text = run(
            "demo", "--model", "openai:llama3.1", "--base-url", provider.base_url,
            "--outcome", "success",
        )  # fmt: skip
    assert code == 0, text
    assert '"rule": "completed"' in text
    assert [body["model"] for body in provider.requests] == ["llama3.1"]


def test_a_key_in_the_environment_is_still_used_with_a_base_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    model = chat_model("openai:llama3.1", base_url="http://127.0.0.1:9/v1")
    assert model.openai_api_key.get_secret_value() == "sk-from-env"
    monkeypatch.delenv("OPENAI_API_KEY")
    model = chat_model("openai:llama3.1", base_url="http://127.0.0.1:9/v1")
    assert model.openai_api_key.get_secret_value() == LOCAL_KEY


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_server_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    url = f"http://127.0.0.1:{free_port()}/v1"
    code, _ = run("demo", "--model", "openai:gpt-x", "--base-url", url, "--outcome", "success")
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"toolstop demo: cannot reach the model at {url}")
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("spec", "env", "match"),
    [
        ("gpt-4o", None, "PROVIDER:NAME"),
        ("groq:llama-3.3-70b-versatile", "GROQ_API_KEY", "GROQ_API_KEY is not set"),
        ("openai:gpt-4o-mini", "OPENAI_API_KEY", "OPENAI_API_KEY is not set"),
        ("nosuchprovider:model", None, "cannot create the model"),
    ],
)
def test_model_spec_errors_are_one_sentence(
    monkeypatch: pytest.MonkeyPatch, spec: str, env: str | None, match: str
) -> None:
    if env:
        monkeypatch.delenv(env, raising=False)
    with pytest.raises(ToolstopConfigError, match=match):
        chat_model(spec)


def test_demo_without_a_key_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    code, _ = run("demo", "--model", "groq:llama-3.3-70b-versatile")
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "toolstop demo: GROQ_API_KEY is not set; set it to use groq:llama-3.3-70b-versatile, "
        "or leave out --model for the scripted model"
    )


def test_unreachable_server_is_one_sentence_for_bench(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    url = f"http://127.0.0.1:{free_port()}/v1"
    shape = ("--queries", "1", "--mix", "1/0/0", "--parallel", "0", "--out", str(tmp_path))
    code, _ = run("bench", *shape, "--model", "openai:gpt-x", "--base-url", url)
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("toolstop bench: the run failed: "), err
    assert "Connection" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_unreachable_server_fails_each_check_scenario_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What docs/models.md says of `check` today: every scenario fails, naming the connection error
    (not one sentence: the run is the check's unit)."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    url = f"http://127.0.0.1:{free_port()}/v1"
    argv = ("check", "--router", "graph", "--scenario", "success.hard")
    code, text = run(*argv, "--model", "openai:gpt-x", "--base-url", url)
    assert code == 1
    assert re.search(r"the run raised \w+: Connection error\.", text), text
    assert "0 passed, 1 failed" in text.splitlines()
    assert "Traceback" not in text + capsys.readouterr().err


def test_a_missing_provider_package_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "test-key")
    monkeypatch.setitem(sys.modules, "langchain_groq", None)  # as if it were not installed
    with pytest.raises(ToolstopConfigError, match=r"the groq provider package is missing .*"):
        chat_model("groq:llama-3.3-70b-versatile")
    code, _ = run("demo", "--model", "groq:llama-3.3-70b-versatile")
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("toolstop demo: the groq provider package is missing"), err
    assert err.rstrip().endswith("pip install 'toolstop[groq]'")
    assert len(err.strip().splitlines()) == 1
