"""`LoopbackProvider` on the wire: the exact responses a client gets, read with plain HTTP.

tests/test_providers.py runs real provider clients against it, and those clients are lenient
(they ignore a field they do not need); here every field of OpenAI's chat completion, chunk,
model and error shapes is read back as sent, against values the test derives from the script.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from toolstop.testing.loopback import (
    LoopbackProvider,
    Reply,
    message_order_problems,
    reply,
    request_problem,
)

USER = {"role": "user", "content": "How do refunds work?"}
CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
TEXT = "Refunds are paid within five business days of the request."  # 59 characters


def usage(messages: list[Any], text: str | None, calls: int) -> dict[str, int]:
    """The loopback's token estimate: a token per 4 characters of the request's messages as
    JSON and of the reply's text (at least 1), and 10 tokens per tool call."""
    prompt = len(json.dumps(messages)) // 4
    completion = max(1, len(text or "") // 4) + 10 * calls
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def post(
    http: httpx.Client, provider: LoopbackProvider, body: Any, path: str = "/chat/completions"
) -> httpx.Response:
    return http.post(f"{provider.base_url}{path}", json=body)


def events(response: httpx.Response) -> list[Any]:
    """The server-sent events of a streamed answer, `[DONE]` included as a string."""
    assert response.headers["content-type"] == "text/event-stream"
    blocks = response.text.split("\n\n")
    assert blocks[-1] == ""  # every event ends with a blank line
    data = []
    for block in blocks[:-1]:
        assert block.startswith("data: ")
        payload = block.removeprefix("data: ")
        data.append(payload if payload == "[DONE]" else json.loads(payload))
    return data


def test_a_text_reply_is_a_whole_chat_completion() -> None:
    messages = [USER]
    with LoopbackProvider([TEXT]) as provider, httpx.Client() as http:
        answer = post(http, provider, {"model": "gpt-x", "messages": messages})
        assert provider.remaining == 0
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert int(answer.headers["content-length"]) == len(answer.content)
    assert answer.json() == {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-x",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": TEXT}, "finish_reason": "stop"}
        ],
        "usage": usage(messages, TEXT, 0),
    }


def test_tool_calls_are_numbered_by_request_and_position() -> None:
    first = reply(None, ("lookup", {"query": "refunds"}), ("search", {"q": "x", "n": 2}))
    with LoopbackProvider(["Hello.", first]) as provider, httpx.Client() as http:
        post(http, provider, {"model": "m", "messages": [USER]})
        messages = [USER, {"role": "assistant", "content": "Hello."}, USER]
        answer = post(http, provider, {"model": "m", "messages": messages}).json()
    assert answer["id"] == "chatcmpl-2"
    [choice] = answer["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_2_0",
                "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"query": "refunds"})},
            },
            {
                "id": "call_2_1",
                "type": "function",
                "function": {"name": "search", "arguments": json.dumps({"q": "x", "n": 2})},
            },
        ],
    }
    assert answer["usage"] == usage(messages, None, 2)


def test_a_streamed_reply_comes_in_16_character_pieces_then_its_usage() -> None:
    messages = [USER]
    body = {
        "model": "m",
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with LoopbackProvider([TEXT]) as provider, httpx.Client() as http:
        answer = post(http, provider, body)
        assert answer.status_code == 200
        received = events(answer)
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    pieces = [TEXT[0:16], TEXT[16:32], TEXT[32:48], TEXT[48:]]
    final = chunk({}, "stop")
    final["x_groq"] = {"id": "chatcmpl-1", "usage": usage(messages, TEXT, 0)}
    assert received == [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": piece}) for piece in pieces),
        final,
        {**base, "choices": [], "usage": usage(messages, TEXT, 0)},
        "[DONE]",
    ]


def test_streamed_tool_calls_carry_their_index_and_no_usage_chunk_unless_asked() -> None:
    answer = reply(None, ("lookup", {"query": "a"}), ("lookup", {"query": "b"}))
    with LoopbackProvider([answer]) as provider, httpx.Client() as http:
        received = events(post(http, provider, {"model": "m", "messages": [USER], "stream": True}))
    assert received[-1] == "[DONE]"
    deltas = [c["choices"][0]["delta"] for c in received[1:-2]]
    assert deltas == [
        {"tool_calls": [{"index": i, "id": f"call_1_{i}", "type": "function", "function": f}]}
        for i, f in enumerate(
            [
                {"name": "lookup", "arguments": json.dumps({"query": "a"})},
                {"name": "lookup", "arguments": json.dumps({"query": "b"})},
            ]
        )
    ]
    final = received[-2]
    assert final["choices"] == [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]
    assert final["x_groq"]["usage"] == usage([USER], None, 2)
    assert all(c["choices"] for c in received[:-1])  # no usage-only chunk: it was not asked for


def test_a_request_past_the_script_is_a_server_error_and_is_recorded() -> None:
    with LoopbackProvider(["only one"]) as provider, httpx.Client() as http:
        post(http, provider, {"model": "m", "messages": [USER]})
        answer = post(http, provider, {"model": "m", "messages": [USER]})
        assert provider.remaining == 0
        assert len(provider.requests) == 2
    assert answer.status_code == 500
    assert answer.json() == {
        "error": {
            "message": "unexpected request #2: the script is used up",
            "type": "server_error",
        }
    }
    assert provider.rejected == []  # a valid request, not a rejected one


def test_what_it_records_of_each_request() -> None:
    raw_bad = b"{not json"
    valid = {"model": "m", "messages": [USER]}
    rejected = {"model": "m", "messages": []}
    with LoopbackProvider(["one", Reply(text="two")]) as provider, httpx.Client() as http:
        assert provider.base_url == f"http://127.0.0.1:{provider.port}/v1"
        assert provider.remaining == 2
        url = f"{provider.base_url}/chat/completions"
        http.post(url, content=raw_bad)
        http.post(url, content=b"[1]")
        assert http.post(url, content=json.dumps(rejected).encode()).status_code == 400
        first = http.post(
            f"{url}/?trace=1", content=json.dumps(valid).encode()
        )  # a query and a trailing slash
        assert first.json()["choices"][0]["message"]["content"] == "one"
        assert provider.remaining == 1
    assert provider.raw_requests == [
        raw_bad,
        b"[1]",
        json.dumps(rejected).encode(),
        json.dumps(valid).encode(),
    ]
    assert provider.requests == [rejected, valid]  # bodies that parsed as JSON objects
    assert provider.rejected == [raw_bad, [1], rejected]
    assert first.json()["id"] == "chatcmpl-2"  # numbered by the requests recorded


def test_a_closed_provider_refuses_connections() -> None:
    with LoopbackProvider([]) as provider:
        url = f"{provider.base_url}/models"
        assert httpx.get(url).status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(url)


def test_models_and_unknown_paths() -> None:
    card = {"id": "llama3.1", "object": "model", "created": 0, "owned_by": "toolstop"}
    with LoopbackProvider([], model="llama3.1") as provider, httpx.Client() as http:
        base = provider.base_url
        listing = http.get(f"{base}/models/?page=2")
        one = http.get(f"{base}/models/llama3.1")
        missing = http.get(f"{base}/models/gpt-5")
        unknown = http.get(f"{base}/embeddings?x=1")
        wrong_post = http.post(f"{base}/completions", json={"model": "m", "messages": [USER]})
        assert provider.raw_requests == []  # only chat completions are recorded
    assert (listing.status_code, listing.json()) == (200, {"object": "list", "data": [card]})
    assert (one.status_code, one.json()) == (200, card)
    assert missing.status_code == 404
    assert missing.json() == {
        "error": {
            "message": "The model 'gpt-5' does not exist",
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }
    }
    assert unknown.status_code == 404
    assert unknown.json()["error"] == {
        "message": "Invalid URL (GET /v1/embeddings?x=1)",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    assert wrong_post.status_code == 404
    assert wrong_post.json()["error"]["message"] == "Invalid URL (POST /v1/completions)"


def test_a_malformed_body_gets_openais_message() -> None:
    with LoopbackProvider([]) as provider, httpx.Client() as http:
        answer = http.post(f"{provider.base_url}/chat/completions", content=b"{")
    assert answer.status_code == 400
    assert answer.json() == {
        "error": {
            "message": "We could not parse the JSON body of your request.",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


def assistant(*calls: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param([USER], ("the request body must be a JSON object, not list", None), id="list"),
        pytest.param(
            {"messages": [USER]}, ("you must provide a model parameter", "model"), id="no-model"
        ),
        pytest.param(
            {"model": "", "messages": [USER]},
            ("you must provide a model parameter", "model"),
            id="empty-model",
        ),
        pytest.param(
            {"model": 3, "messages": [USER]},
            ("you must provide a model parameter", "model"),
            id="model-not-text",
        ),
        pytest.param(
            {"model": "m", "messages": []},
            ("'messages' must be a non-empty list of messages, not []", "messages"),
            id="no-messages",
        ),
        pytest.param(
            {"model": "m", "messages": "x" * 100},
            (
                f"'messages' must be a non-empty list of messages, not {('x' * 100)!r:.60}",
                "messages",
            ),
            id="messages-a-long-string",
        ),
        pytest.param(
            {"model": "m", "messages": [USER, 7]},
            ("messages[1] must be an object, not 7", "messages[1]"),
            id="message-not-object",
        ),
        pytest.param(
            {"model": "m", "messages": [{"role": "wizard"}]},
            (
                "messages[0].role 'wizard' is not one of "
                "['assistant', 'developer', 'function', 'system', 'tool', 'user']",
                "messages[0].role",
            ),
            id="unknown-role",
        ),
        pytest.param(
            {"model": "m", "messages": [USER, {"role": "tool", "tool_call_id": 5}]},
            ("messages[1]: a tool message needs a 'tool_call_id'", "messages[1].tool_call_id"),
            id="tool-call-id-not-text",
        ),
        pytest.param(
            {"model": "m", "messages": [USER, {"role": "assistant", "tool_calls": {"id": "c"}}]},
            ("messages[1].tool_calls must be a list", "messages[1].tool_calls"),
            id="tool-calls-not-a-list",
        ),
        pytest.param(
            {"model": "m", "messages": [USER, assistant(CALL, "c2")]},
            ("messages[1].tool_calls[1] must be an object", "messages[1].tool_calls[1]"),
            id="call-not-object",
        ),
        pytest.param(
            {"model": "m", "messages": [USER, assistant({**CALL, "id": ""})]},
            (
                "messages[1].tool_calls[0]: a tool call needs an 'id'",
                "messages[1].tool_calls[0].id",
            ),
            id="empty-call-id",
        ),
        pytest.param(
            {
                "model": "m",
                "messages": [USER, assistant({"id": "c1", "function": {"arguments": "{}"}})],
            },
            (
                "messages[1].tool_calls[0]: a tool call needs a 'function' with a 'name'",
                "messages[1].tool_calls[0].function",
            ),
            id="call-without-name",
        ),
        pytest.param(
            {"model": "m", "messages": [USER, assistant({"id": "c1", "function": "lookup"})]},
            (
                "messages[1].tool_calls[0]: a tool call needs a 'function' with a 'name'",
                "messages[1].tool_calls[0].function",
            ),
            id="function-not-object",
        ),
        pytest.param(
            {"model": "m", "messages": [USER, assistant(CALL), USER]},
            ("messages[2]: tool calls ['c1'] have no response", "messages"),
            id="unanswered",
        ),
        pytest.param(
            {
                "model": "m",
                "messages": [USER, assistant(CALL), {"role": "tool", "tool_call_id": "c1"}, USER],
            },
            None,
            id="valid",
        ),
        pytest.param(
            {"model": "m", "messages": [USER, {"role": "user", "tool_calls": "ignored"}]},
            None,
            id="tool-calls-only-read-on-the-assistant",
        ),
        pytest.param(
            {
                "model": "m",
                "messages": [USER, {"role": "assistant", "content": "hi", "tool_calls": None}],
            },
            None,
            id="null-tool-calls",
        ),
    ],
)
def test_request_problem_names_the_first_problem(body: Any, expected: Any) -> None:
    assert request_problem(body) == expected


def test_message_order_problems_name_every_problem() -> None:
    tool = {"role": "tool", "tool_call_id": "c1"}
    assert message_order_problems([USER, assistant(CALL), tool, USER]) == []
    assert message_order_problems([USER, assistant(CALL), USER, tool]) == [
        "messages[2]: tool calls ['c1'] have no response",
        "messages[3]: tool message 'c1' answers no tool call",
    ]
    both = {"model": "m", "messages": [USER, assistant(CALL), USER, tool]}
    assert request_problem(both) == (
        "messages[2]: tool calls ['c1'] have no response; "
        "messages[3]: tool message 'c1' answers no tool call",
        "messages",
    )
    assert message_order_problems([USER, tool, tool]) == [
        "messages[1]: tool message 'c1' answers no tool call",
        "messages[2]: tool message 'c1' answers no tool call",
    ]
    two = assistant(CALL, {**CALL, "id": "c2"}, {"id": 3}, "bad")  # malformed calls open nothing
    assert message_order_problems([USER, two, tool, USER, assistant(CALL)]) == [
        "messages[3]: tool calls ['c2'] have no response",
        "tool calls ['c1'] at the end have no response",
    ]
    # An assistant message without tool calls after open ones: they have no response.
    assert message_order_problems(
        [USER, assistant(CALL), {"role": "assistant", "content": "x"}]
    ) == ["messages[2]: tool calls ['c1'] have no response"]


def test_reply_and_a_text_in_the_script() -> None:
    assert reply("hi") == Reply(text="hi", tool_calls=())
    assert reply(None, ("a", {"x": 1}), ("b", {})) == Reply(None, (("a", {"x": 1}), ("b", {})))
    with LoopbackProvider(["plain text"]) as provider, httpx.Client() as http:
        answer = post(http, provider, {"model": "m", "messages": [USER]}).json()
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "plain text"}


def test_the_script_is_served_in_order() -> None:
    with LoopbackProvider(["one", "two", "three"]) as provider, httpx.Client() as http:
        texts = [
            post(http, provider, {"model": "m", "messages": [USER]}).json()["choices"][0]["message"]
            for _ in range(3)
        ]
    assert [t["content"] for t in texts] == ["one", "two", "three"]


def test_two_providers_at_once_and_the_default_model() -> None:
    with LoopbackProvider(["a"]) as first, LoopbackProvider(["b"]) as second:
        assert first.port != second.port
        assert first.model == "gpt-loopback"
        listing = httpx.get(f"{first.base_url}/models").json()
        assert [m["id"] for m in listing["data"]] == ["gpt-loopback"]
        for provider, text in ((first, "a"), (second, "b")):
            body = {"model": "m", "messages": [USER]}
            answer = httpx.post(f"{provider.base_url}/chat/completions", json=body).json()
            assert answer["choices"][0]["message"]["content"] == text


def test_a_path_is_matched_whole() -> None:
    with LoopbackProvider(["never"]) as provider, httpx.Client() as http:
        model = http.get(f"{provider.base_url}/models/X")
        chat = http.post(
            f"{provider.base_url}/chat/completionsX", json={"model": "m", "messages": [USER]}
        )
        assert provider.remaining == 1
    assert (model.status_code, model.json()["error"]["code"]) == (404, "model_not_found")
    assert chat.status_code == 404


def test_a_post_without_a_content_length_is_an_empty_body() -> None:
    import socket

    with LoopbackProvider(["never"]) as provider:
        with socket.create_connection(("127.0.0.1", provider.port), timeout=30) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: loopback\r\n\r\n")
            head = sock.recv(4096).split(b"\r\n", 1)[0]
        assert provider.raw_requests == [b""]
    assert head == b"HTTP/1.0 400 Bad Request"
