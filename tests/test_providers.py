"""Real provider clients (ChatOpenAI, ChatGroq) over real HTTP against the loopback provider."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from routers import ROUTERS, Router
from toolstop import Outcome, StopPolicy, signal
from toolstop.testing import assert_valid_history, forced_tool
from toolstop.testing.loopback import LoopbackProvider, message_order_problems, reply

ARTIFACT_SECRET = "ARTIFACT-SENTINEL-91c2"
PAGE = "Refunds are paid within 5 business days."
DONE = (PAGE, signal(Outcome.COMPLETED, secret=ARTIFACT_SECRET))
RETRY = ("The service timed out.", signal(Outcome.TRANSIENT, secret=ARTIFACT_SECRET))
FATAL = ("The card was declined.", signal(Outcome.FATAL, secret=ARTIFACT_SECRET))
BLOCK = ("blocked", signal(Outcome.POLICY_BLOCK, secret=ARTIFACT_SECRET))
LOOKUP = reply(None, ("lookup", {"query": "refunds"}))


CLOSE: list[Any] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Any:
    """Close the HTTP clients each test's models use (no unclosed-socket warnings at exit).

    Each model gets its own httpx clients. langchain-openai otherwise shares one cached client
    per base URL across models, and closing it broke a later test whose loopback server got
    the same port ("client has been closed").
    """
    yield
    while CLOSE:
        CLOSE.pop().close()


def client(kind: str, provider: LoopbackProvider, streaming: bool) -> Any:
    import httpx

    sync, asynchronous = httpx.Client(), httpx.AsyncClient()
    CLOSE.append(sync)  # the async client holds no connection once its loop has ended
    return _client(kind, provider, streaming, sync, asynchronous)


def _client(kind: str, provider: LoopbackProvider, streaming: bool, *http: Any) -> Any:
    sync, asynchronous = http
    if kind == "openai":
        openai = pytest.importorskip("langchain_openai", reason="needs the `openai` extra")
        return openai.ChatOpenAI(
            model="gpt-loopback",
            base_url=provider.base_url,
            api_key="test-key",
            streaming=streaming,
            stream_usage=True,
            max_retries=0,
            http_client=sync,
            http_async_client=asynchronous,
        )
    groq = pytest.importorskip("langchain_groq", reason="needs the `groq` extra")
    return groq.ChatGroq(
        model="llama-loopback",
        base_url=f"http://127.0.0.1:{provider.port}",
        api_key="test-key",
        streaming=streaming,
        max_retries=0,
        http_client=sync,
        http_async_client=asynchronous,
    )


CLIENTS = [
    pytest.param(kind, streaming, id=f"{kind}-{'stream' if streaming else 'plain'}")
    for kind in ("openai", "groq")
    for streaming in (False, True)
]


@pytest.fixture(params=ROUTERS, ids=lambda r: r.name)
def router(request: pytest.FixtureRequest) -> Router:
    return request.param  # type: ignore[no-any-return]


def no_artifact_reached(provider: LoopbackProvider) -> None:
    assert provider.raw_requests
    assert not any(ARTIFACT_SECRET.encode() in body for body in provider.raw_requests)


@pytest.mark.parametrize(("kind", "streaming"), CLIENTS)
def test_hard_stop_sends_no_request_after_the_tool_result(
    router: Router, kind: str, streaming: bool
) -> None:
    with LoopbackProvider([LOOKUP]) as provider:
        agent = router.build(
            client(kind, provider, streaming),
            [forced_tool("lookup", DONE)],
            policy=None,
            checkpointer=None,
        )
        state = agent.invoke({"messages": [HumanMessage("How do refunds work?")]})
    assert len(provider.requests) == 1  # nothing after the tool result
    assert provider.remaining == 0
    assert state["messages"][-1].content == PAGE
    record = state["stop_record"]
    assert (record["rule"], record["model_calls"]) == ("completed", 1)
    assert record["input_tokens"] > 0  # the provider's usage
    assert record["output_tokens"] > 0
    no_artifact_reached(provider)


@pytest.mark.parametrize(("kind", "streaming"), CLIENTS)
def test_transient_goes_back_as_content_only(router: Router, kind: str, streaming: bool) -> None:
    with LoopbackProvider([LOOKUP, LOOKUP]) as provider:
        tools = [forced_tool("lookup", RETRY, DONE)]
        agent = router.build(
            client(kind, provider, streaming), tools, policy=None, checkpointer=None
        )
        state = agent.invoke({"messages": [HumanMessage("q")]})
    assert len(provider.requests) == 2
    tool_messages = [m for m in provider.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["The service timed out."]
    assert state["stop_record"]["rule"] == "completed"
    assert provider.rejected == []
    no_artifact_reached(provider)


@pytest.mark.parametrize(("kind", "streaming"), CLIENTS)
def test_polish_sends_exactly_one_request_with_no_tools(
    router: Router, kind: str, streaming: bool
) -> None:
    with LoopbackProvider([LOOKUP, "Refunds take five days."]) as provider:
        model = client(kind, provider, streaming)
        agent = router.build(
            model,
            [forced_tool("lookup", DONE)],
            policy=StopPolicy(mode="polish"),
            checkpointer=None,
        )
        state = agent.invoke({"messages": [HumanMessage("q")]})
    assert len(provider.requests) == 2
    assert provider.requests[0].get("tools")
    assert not provider.requests[1].get("tools")  # narrated with no tools offered
    assert provider.requests[1]["messages"][-1]["role"] == "tool"
    assert state["messages"][-1].content == "Refunds take five days."
    no_artifact_reached(provider)


STOPS = {
    "completed": ([LOOKUP], [DONE], {}),
    "fatal": ([LOOKUP], [FATAL], {}),
    "policy_block": ([LOOKUP], [BLOCK], {}),
    "retry_budget": ([LOOKUP, LOOKUP], [RETRY], {"max_transient_retries": 1}),
}


@pytest.mark.parametrize("stop", list(STOPS))
@pytest.mark.parametrize(("kind", "streaming"), [CLIENTS[0], CLIENTS[3]])
def test_a_second_user_turn_is_accepted_after_every_kind_of_stop(
    router: Router, stop: str, kind: str, streaming: bool
) -> None:
    script, results, settings = STOPS[stop]
    with LoopbackProvider([*script, "You're welcome."]) as provider:
        policy = StopPolicy(**settings)
        agent = router.build(
            client(kind, provider, streaming),
            [forced_tool("lookup", *results)],
            policy=policy,
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": f"{router.name}-{stop}"}}
        first = agent.invoke({"messages": [HumanMessage("q")]}, config)
        assert first["stop_record"]["rule"] == stop
        second = agent.invoke({"messages": [HumanMessage("thanks")]}, config)
    assert provider.rejected == []  # the provider accepted the thread's history
    assert second["messages"][-1].content == "You're welcome."
    assert_valid_history(second["messages"])
    no_artifact_reached(provider)


ANSWER_SENTINEL = "ANSWER-SENTINEL-4be0"


@pytest.mark.parametrize(
    "answer",
    [
        ANSWER_SENTINEL + " " + "x" * 100_000,
        [{"type": "text", "text": ANSWER_SENTINEL}, {"type": "text", "text": " Thanks."}],
    ],
    ids=["str", "blocks"],
)
@pytest.mark.parametrize(("kind", "streaming"), [CLIENTS[0], CLIENTS[3]])
def test_a_later_turn_sends_the_provider_the_content_never_the_answer(
    router: Router, answer: Any, kind: str, streaming: bool
) -> None:
    answered = (PAGE, signal(Outcome.COMPLETED, answer=answer))
    with LoopbackProvider([LOOKUP, "You're welcome."]) as provider:
        agent = router.build(
            client(kind, provider, streaming),
            [forced_tool("lookup", answered)],
            policy=StopPolicy(),
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": f"{router.name}-answer"}}
        first = agent.invoke({"messages": [HumanMessage("q")]}, config)
        assert ANSWER_SENTINEL in json.dumps(first["messages"][-1].content)  # the user saw it
        second = agent.invoke({"messages": [HumanMessage("thanks")]}, config)
    assert provider.rejected == []
    assert second["messages"][-1].content == "You're welcome."
    assert len(provider.raw_requests) == 2
    assert not any(ANSWER_SENTINEL.encode() in body for body in provider.raw_requests)
    assert PAGE.encode() in provider.raw_requests[-1]


def test_the_loopback_rejects_what_providers_reject() -> None:
    orphan = [
        {"role": "user", "content": "q"},
        {"role": "tool", "tool_call_id": "x", "content": "r"},
    ]
    unanswered = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": "again"},
    ]  # fmt: skip
    assert message_order_problems(orphan)
    assert message_order_problems(unanswered)
    with LoopbackProvider(["never served"]) as provider:
        request = urllib.request.Request(
            f"{provider.base_url}/chat/completions",
            data=json.dumps({"model": "m", "messages": orphan}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=600)
        assert error.value.code == 400
        error.value.close()
        assert provider.remaining == 1


# -- failing like the real API ----------------------------------------------------------------
USER = {"role": "user", "content": "q"}
BAD_REQUESTS = [
    pytest.param(b"{not json", None, id="malformed-json"),
    pytest.param(b"[1, 2]", None, id="json-array"),
    pytest.param({"messages": [USER]}, "model", id="no-model"),
    pytest.param({"model": "m", "messages": "hello"}, "messages", id="messages-not-a-list"),
    pytest.param({"model": "m", "messages": []}, "messages", id="no-messages"),
    pytest.param({"model": "m", "messages": ["hello"]}, "messages[0]", id="message-not-object"),
    pytest.param(
        {"model": "m", "messages": [{"role": "wizard", "content": "q"}]},
        "messages[0].role",
        id="unknown-role",
    ),
    pytest.param(
        {
            "model": "m",
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"type": "function", "function": {"name": "f", "arguments": ""}}
                    ],
                },
                {"role": "tool", "tool_call_id": "a", "content": "r"},
            ],
        },
        "messages[1].tool_calls[0].id",
        id="tool-call-without-id",
    ),
    pytest.param(
        {"model": "m", "messages": [USER, {"role": "tool", "content": "r"}]},
        "messages[1].tool_call_id",
        id="tool-message-without-call-id",
    ),
    pytest.param(
        {"model": "m", "messages": [USER, {"role": "tool", "tool_call_id": "x", "content": "r"}]},
        "messages",
        id="orphan-tool-message",
    ),
]


def assert_openai_error(body: Any, param: str | None) -> None:
    assert set(body) == {"message", "type", "param", "code"}
    assert body["type"] == "invalid_request_error"
    assert body["param"] == param
    assert body["message"]


@pytest.mark.parametrize(("request_body", "param"), BAD_REQUESTS)
def test_a_malformed_request_is_a_400_with_openais_error_shape(
    request_body: bytes | dict[str, Any], param: str | None
) -> None:
    openai = pytest.importorskip("openai", reason="needs the `openai` extra")
    import httpx

    raw = request_body if isinstance(request_body, bytes) else json.dumps(request_body).encode()
    with LoopbackProvider(["the one reply"]) as provider, httpx.Client() as http:
        answer = http.post(
            f"{provider.base_url}/chat/completions",
            content=raw,
            headers={"Content-Type": "application/json"},
        )
        assert answer.status_code == 400
        assert_openai_error(answer.json()["error"], param)
        if isinstance(request_body, dict):  # the SDK itself, with its default retries
            client = openai.OpenAI(base_url=provider.base_url, api_key="k", http_client=http)
            with pytest.raises(openai.BadRequestError) as error:
                client.post("/chat/completions", body=request_body, cast_to=httpx.Response)
            assert error.value.param == param
            assert_openai_error(error.value.body, param)
        sent = 1 + isinstance(request_body, dict)
        assert len(provider.raw_requests) == sent  # the client did not retry
        assert len(provider.rejected) == sent
        assert provider.remaining == 1  # a rejected request consumes no reply
        valid = {"model": "m", "messages": [USER]}
        reply_body = http.post(f"{provider.base_url}/chat/completions", json=valid).json()
        assert reply_body["choices"][0]["message"]["content"] == "the one reply"


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        pytest.param("wizard", "messages[0].role", id="unknown-role"),
        pytest.param("no-id", "messages[1].tool_calls[0].id", id="tool-call-without-id"),
        pytest.param("orphan", "messages", id="orphan-tool-message"),
        pytest.param("no-model", "model", id="no-model"),
    ],
)
def test_chat_openai_gets_the_400_and_no_reply_is_consumed(messages: str, param: str) -> None:
    openai = pytest.importorskip("openai", reason="needs the `openai` extra")
    from langchain_core.messages import AIMessage, ChatMessage, ToolMessage

    question = HumanMessage("q")
    sent = {
        "wizard": [ChatMessage(role="wizard", content="q")],
        "no-id": [
            question,
            AIMessage(content="", tool_calls=[{"name": "f", "args": {}, "id": None}]),
            ToolMessage("r", tool_call_id=""),
        ],
        "orphan": [question, ToolMessage("r", tool_call_id="nobody")],
        "no-model": [question],
    }[messages]
    with LoopbackProvider(["the one reply"]) as provider:
        model = client("openai", provider, streaming=False)
        if messages == "no-model":
            model.model_name = ""
        with pytest.raises(openai.BadRequestError) as error:
            model.invoke(sent)
        assert error.value.status_code == 400
        assert_openai_error(error.value.body, param)
        assert provider.remaining == 1
        model.model_name = "gpt-loopback"
        assert model.invoke([question]).content == "the one reply"


def test_models_are_listed_and_unknown_paths_are_404s() -> None:
    openai = pytest.importorskip("openai", reason="needs the `openai` extra")
    import httpx

    with LoopbackProvider([], model="llama3.1") as provider, httpx.Client() as http:
        sdk = openai.OpenAI(base_url=provider.base_url, api_key="k", http_client=http)
        assert [m.id for m in sdk.models.list()] == ["llama3.1"]
        assert sdk.models.retrieve("llama3.1").id == "llama3.1"
        with pytest.raises(openai.NotFoundError) as missing:
            sdk.models.retrieve("gpt-5")
        assert missing.value.code == "model_not_found"
        for method in ("GET", "POST"):
            answer = http.request(method, f"{provider.base_url}/embeddings", json={})
            assert answer.status_code == 404
            assert_openai_error(answer.json()["error"], None)
            assert answer.json()["error"]["message"] == f"Invalid URL ({method} /v1/embeddings)"
        assert provider.requests == []
