"""`LoopbackProvider`: an OpenAI-compatible chat server on 127.0.0.1 for offline client tests.

Real provider clients (`ChatOpenAI`, `ChatGroq`, anything speaking `/chat/completions`) talk to it
over real HTTP. It answers from a script, records every request body, and rejects what real
providers reject: a tool message that answers no preceding assistant tool call, and an assistant
tool call left unanswered. Streaming (server-sent events, with a usage chunk when asked) and
plain responses are both served.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["LoopbackProvider", "Reply", "message_order_problems", "reply"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a text, or tool calls as `(name, arguments)` pairs."""

    text: str | None = None
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


def reply(text: str | None = None, *calls: tuple[str, dict[str, Any]]) -> Reply:
    """A scripted answer: `reply("hi")` or `reply(None, ("search", {"query": "x"}))`."""
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
            open_ids = {c["id"] for c in message.get("tool_calls") or []}
    if open_ids:
        problems.append(f"tool calls {sorted(open_ids)} at the end have no response")
    return problems


class LoopbackProvider:
    """A scripted OpenAI-compatible server on a free port of 127.0.0.1. Use as a context manager.

    Attributes:
        requests: Every request body received, parsed, in order (rejected ones too).
        rejected: Bodies answered with HTTP 400 (invalid message order).
    """

    def __init__(self, script: Sequence[Reply | str]) -> None:
        self._script = [Reply(text=s) if isinstance(s, str) else s for s in script]
        self._position = 0
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.raw_requests: list[bytes] = []
        self.rejected: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
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
    def _next(self, body: dict[str, Any]) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(body)
            problems = message_order_problems(body.get("messages") or [])
            if problems:
                self.rejected.append(body)
                error = {"message": "; ".join(problems), "type": "invalid_request_error"}
                return 400, {"error": error}
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

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                provider.raw_requests.append(raw)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                body = json.loads(raw or b"{}")
                status, answer = provider._next(body)
                if status != 200:
                    self._json(status, answer)
                elif body.get("stream"):
                    self._stream(body, answer)
                else:
                    self._json(200, _completion(body, answer))

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
