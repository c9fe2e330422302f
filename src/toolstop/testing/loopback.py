"""`LoopbackProvider`: an OpenAI-compatible chat server on 127.0.0.1 for offline client tests.

Real provider clients (`ChatOpenAI`, `ChatGroq`, anything speaking `/chat/completions`) talk to it
over real HTTP. It answers from a script, records every request body, and fails like the real
API: a malformed request (a body that is not a JSON object, no `model`, `messages` that is not a
list of message objects, an unknown role, an assistant tool call without an `id`, a tool message
that answers no preceding assistant tool call, an assistant tool call left unanswered) is answered
with HTTP 400 and OpenAI's error shape,
`{"error": {"message", "type": "invalid_request_error", "param", "code"}}`, and never consumes a
scripted reply. `GET /v1/models` lists the served model; any other path is a 404 of the same shape.
Streaming (server-sent events, with a usage chunk when asked) and plain responses are both served.

Deliberately not checked: the model name of a request (any name is answered), sampling
parameters, and the JSON schema of the tools.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["LoopbackProvider", "Reply", "message_order_problems", "reply", "request_problem"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
"""The roles OpenAI's chat completions API accepts."""


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a text, or tool calls as `(name, arguments)` pairs."""

    text: str | None = None
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


def reply(text: str | None = None, *calls: tuple[str, dict[str, Any]]) -> Reply:
    """A scripted answer: `reply("hi")` or `reply(None, ("search", {"query": "x"}))`.

    Raises:
        TypeError: `text` is neither a str nor None (a call given first: pass None before
            it), or a call is not a `(name, arguments)` pair of a str and a dict.
    """
    if text is not None and not isinstance(text, str):
        msg = (
            "reply(text, *calls) takes the answer's text (a str, or None for tool calls "
            f'only) first, e.g. reply(None, ("search", {{"query": "x"}})); got {text!r:.80}'
        )
        raise TypeError(msg)
    for index, tool_call in enumerate(calls, 1):
        if not (
            isinstance(tool_call, tuple)
            and len(tool_call) == 2
            and isinstance(tool_call[0], str)
            and isinstance(tool_call[1], dict)
        ):
            msg = (
                "reply(text, *calls) takes tool calls as (name, arguments) pairs, e.g. "
                f'("search", {{"query": "x"}}); call {index} is {tool_call!r:.80}'
            )
            raise TypeError(msg)
    return Reply(text=text, tool_calls=tuple(calls))


def message_order_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """What a real provider rejects in an OpenAI-style message list (empty: accepted)."""
    problems: list[str] = []
    open_ids: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_ids:
                problems.append(f"messages[{index}]: tool message {call_id!r} answers no tool call")
            open_ids.discard(call_id)  # type: ignore[arg-type]
            continue
        if open_ids:
            problems.append(f"messages[{index}]: tool calls {sorted(open_ids)} have no response")
            open_ids = set()
        if role == "assistant":
            calls = message.get("tool_calls") or []
            open_ids = {
                c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)
            }
    if open_ids:
        problems.append(f"tool calls {sorted(open_ids)} at the end have no response")
    return problems


def _error(message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error body."""
    kind = "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def request_problem(body: Any) -> tuple[str, str | None] | None:
    """The first reason the chat completions API rejects `body`, as `(message, param)`; None: valid.

    `body` is the parsed JSON of a request. Checks the shape (an object with a `model` string and a
    non-empty list of message objects with known roles; tool calls with an `id` and a function
    name; tool messages with a `tool_call_id`), then the message order (`message_order_problems`).
    """
    if not isinstance(body, dict):
        return f"the request body must be a JSON object, not {type(body).__name__}", None
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter", "model"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return f"'messages' must be a non-empty list of messages, not {messages!r:.60}", "messages"
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            return f"{where} must be an object, not {message!r:.60}", where
        role = message.get("role")
        if role not in ROLES:
            return f"{where}.role {role!r:.60} is not one of {sorted(ROLES)}", f"{where}.role"
        if role == "tool" and not isinstance(message.get("tool_call_id"), str):
            return f"{where}: a tool message needs a 'tool_call_id'", f"{where}.tool_call_id"
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls is None:
            continue
        if not isinstance(calls, list):
            return f"{where}.tool_calls must be a list", f"{where}.tool_calls"
        for number, call in enumerate(calls):
            at = f"{where}.tool_calls[{number}]"
            if not isinstance(call, dict):
                return f"{at} must be an object", at
            if not isinstance(call.get("id"), str) or not call["id"]:
                return f"{at}: a tool call needs an 'id'", f"{at}.id"
            function = call.get("function")
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                return f"{at}: a tool call needs a 'function' with a 'name'", f"{at}.function"
    problems = message_order_problems(messages)
    return ("; ".join(problems), "messages") if problems else None


class LoopbackProvider:
    """A scripted OpenAI-compatible server on 127.0.0.1, as a context manager.

    It listens on a free port, or on the `port` given.

    Args:
        script: The replies, served in order to the accepted chat completion requests.
        model: The model name `GET /v1/models` lists (requests may name any model).
        port: The port to listen on; 0 (the default) takes a free one (see `port`, `base_url`).
            A fixed port lets a client config written beforehand point at it.

    Raises:
        TypeError: a script item that is neither a `Reply` nor a str, or a port that is not an
            int.
        ValueError: a port outside 0-65535.
        OSError: the port is taken.

    Attributes:
        requests: Every chat completion body that parsed as JSON, in order (rejected ones too).
        raw_requests: Every chat completion body as received, in order.
        rejected: Bodies answered with HTTP 400 (parsed, or the raw bytes when they did not parse).
    """

    def __init__(
        self, script: Sequence[Reply | str], *, model: str = "gpt-loopback", port: int = 0
    ) -> None:
        if isinstance(script, str) or not isinstance(script, Sequence):
            msg = f"LoopbackProvider(script) takes a list of replies, got {script!r:.80}"
            raise TypeError(msg)
        for index, item in enumerate(script, 1):
            if not isinstance(item, Reply | str):
                msg = (
                    "LoopbackProvider(script) takes replies made by reply(...) or str answers; "
                    f"item {index} is a {type(item).__name__}: {item!r:.80}"
                )
                raise TypeError(msg)
        if isinstance(port, bool) or not isinstance(port, int):
            msg = f"LoopbackProvider(port=...) takes an int (0: a free port), got {port!r:.80}"
            raise TypeError(msg)
        if not 0 <= port <= 65535:
            msg = f"LoopbackProvider(port=...) takes 0 (a free port) to 65535, got {port}"
            raise ValueError(msg)
        self.model = model
        self._script = [Reply(text=s) if isinstance(s, str) else s for s in script]
        self._position = 0
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.raw_requests: list[bytes] = []
        self.rejected: list[Any] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1` (for ChatOpenAI; ChatGroq takes the URL without `/v1`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def remaining(self) -> int:
        """Scripted replies not served yet."""
        return len(self._script) - self._position

    def __enter__(self) -> LoopbackProvider:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- serving ---------------------------------------------------------------------------------
    def _next(self, raw: bytes) -> tuple[int, Any]:
        with self._lock:
            self.raw_requests.append(raw)
            try:
                body = json.loads(raw)
            except ValueError:
                self.rejected.append(raw)
                return 400, _error("We could not parse the JSON body of your request.")
            if isinstance(body, dict):
                self.requests.append(body)
            problem = request_problem(body)
            if problem:
                self.rejected.append(body)
                return 400, _error(*problem)
            if self._position >= len(self._script):
                message = f"unexpected request #{len(self.requests)}: the script is used up"
                return 500, {"error": {"message": message, "type": "server_error"}}
            step = self._script[self._position]
            self._position += 1
            number = len(self.requests)
        prompt = len(json.dumps(body.get("messages") or [])) // 4
        completion = max(1, len(step.text or "") // 4) + 10 * len(step.tool_calls)
        calls = [
            {
                "id": f"call_{number}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(step.tool_calls)
        ]
        return 200, {
            "body": body,
            "number": number,
            "text": step.text,
            "calls": calls,
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                path = self.path.split("?")[0].rstrip("/")
                card = {
                    "id": provider.model,
                    "object": "model",
                    "created": 0,
                    "owned_by": "toolstop",
                }
                if path.endswith("/models"):
                    self._json(200, {"object": "list", "data": [card]})
                elif path.endswith(f"/models/{provider.model}"):
                    self._json(200, card)
                elif "/models/" in path:
                    name = path.rsplit("/", 1)[1]
                    message = f"The model '{name}' does not exist"
                    self._json(404, _error(message, "model", "model_not_found"))
                else:
                    self._unknown("GET")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
                    self._unknown("POST")
                    return
                status, answer = provider._next(raw)
                if status != 200:
                    self._json(status, answer)
                elif answer["body"].get("stream"):
                    self._stream(answer["body"], answer)
                else:
                    self._json(200, _completion(answer["body"], answer))

            def _unknown(self, method: str) -> None:
                self._json(404, _error(f"Invalid URL ({method} {self.path})"))

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], answer: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in _chunks(body, answer):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler


def _completion(body: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer["text"]}
    if answer["calls"]:
        message["tool_calls"] = answer["calls"]
    return {
        "id": f"chatcmpl-{answer['number']}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "loopback"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if answer["calls"] else "stop",
            }
        ],
        "usage": answer["usage"],
    }


def _chunks(body: dict[str, Any], answer: dict[str, Any]) -> list[dict[str, Any]]:
    base = {
        "id": f"chatcmpl-{answer['number']}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": body.get("model", "loopback"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    text = answer["text"] or ""
    for start in range(0, len(text), 16):
        chunks.append(chunk({"content": text[start : start + 16]}))
    for index, call in enumerate(answer["calls"]):
        chunks.append(chunk({"tool_calls": [{"index": index, **call}]}))
    final = chunk({}, "tool_calls" if answer["calls"] else "stop")
    final["x_groq"] = {"id": base["id"], "usage": answer["usage"]}  # where Groq streams usage
    chunks.append(final)
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": answer["usage"]})
    return chunks
