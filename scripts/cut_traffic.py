"""Cut τ²-bench simulation files into the traffic fixture (OpenAI chat format, JSONL).

    python scripts/cut_traffic.py SIMULATION.json [...] --max-bytes 6000 \
        --out tests/fixtures/traffic/SET/conversations.jsonl

Reads τ²-bench `results.json`-style files (`{"info": ..., "simulations": [{"messages": ...}]}`)
and writes one conversation a line: `{"id", "domain", "model", "messages"}`, where `messages`
are OpenAI chat messages: `user`, `assistant` (with `tool_calls` as OpenAI sends them and the
recorded `usage`), and `tool` (`tool_call_id`, `content`). How a conversation is cut:

- the fixed greeting τ²-bench's agent opens with (not a model call) is dropped;
- the conversation ends at its last assistant message without tool calls (the user
  simulator's closing message, which no model call answers, is dropped);
- conversations without a tool call, tool calls made by the simulated user, and conversations
  whose call ids do not pair up with tool results one to one are left out;
- timestamps, costs and raw provider payloads are left out; texts are kept as recorded;
- with `--max-bytes N`, a conversation whose line is longer than N bytes is left out (to keep
  the fixture small).

With `--as-recorded`, a conversation is kept as it ends, as a log holds it: the simulated user's
closing message that nobody answers, a last tool call (a transfer to a human) or tool result, a
conversation without tool calls, and calls without results are kept; only the greeting, user-side
tool calls and conversations without an assistant message are left out.

The source files are not in this repository; the fixture's README says where they came from.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["convert_simulation", "main"]


def _usage(raw: Any) -> dict[str, int] | None:
    if not isinstance(raw, dict):
        return None
    prompt = raw.get("prompt_tokens")
    completion = raw.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def convert_simulation(
    messages: Sequence[dict[str, Any]], *, as_recorded: bool = False
) -> list[dict[str, Any]] | None:
    """One simulation's messages in OpenAI chat format, or None when it is left out.

    With `as_recorded`, the conversation is kept as it ends (see the module docstring)."""
    out: list[dict[str, Any]] = []
    calls: list[str] = []
    results: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if index == 0 and role == "assistant" and not message.get("tool_calls"):
            continue  # the fixed greeting
        if role == "user":
            if message.get("tool_calls"):
                return None  # a user-side tool: not this agent's traffic
            out.append({"role": "user", "content": message.get("content") or ""})
        elif role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
            tool_calls = []
            for call in message.get("tool_calls") or ():
                if call.get("requestor", "assistant") != "assistant":
                    return None
                calls.append(call["id"])
                tool_calls.append(
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {
                            "name": call["name"],
                            "arguments": json.dumps(call.get("arguments") or {}),
                        },
                    }
                )
            if tool_calls:
                entry["tool_calls"] = tool_calls
            usage = _usage(message.get("usage"))
            if usage is not None:
                entry["usage"] = usage
            out.append(entry)
        elif role == "tool":
            results.append(message["id"])
            out.append(
                {"role": "tool", "tool_call_id": message["id"], "content": message["content"]}
            )
    if as_recorded:
        return out if any(m["role"] == "assistant" for m in out) else None
    last = max(
        (i for i, m in enumerate(out) if m["role"] == "assistant" and not m.get("tool_calls")),
        default=None,
    )
    if last is None:
        return None
    out = out[: last + 1]
    kept_calls = [c["id"] for m in out for c in m.get("tool_calls", ())]
    kept_results = [m["tool_call_id"] for m in out if m["role"] == "tool"]
    if not kept_calls or sorted(kept_calls) != sorted(kept_results):
        return None
    if len(set(kept_calls)) != len(kept_calls):
        return None
    return out


def conversations(path: Path, *, as_recorded: bool = False) -> Iterator[dict[str, Any]]:
    """The fixture lines cut from one τ²-bench results file."""
    document = json.loads(path.read_text())
    info = document.get("info") or {}
    domain = (info.get("environment_info") or {}).get("domain_name") or path.stem
    model = (info.get("agent_info") or {}).get("llm")
    for number, simulation in enumerate(document.get("simulations") or ()):
        messages = convert_simulation(simulation.get("messages") or (), as_recorded=as_recorded)
        if messages is None:
            continue
        yield {
            "id": f"{domain}/{simulation.get('task_id')}/{simulation.get('trial', 0)}/"
            f"{str(simulation.get('id') or number)[:8]}",
            "domain": domain,
            "model": model,
            "messages": messages,
        }


def main(argv: Sequence[str] | None = None) -> int:
    """Write the fixture; print how many conversations each file gave."""
    parser = argparse.ArgumentParser(prog="python scripts/cut_traffic.py")
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-bytes", type=int, help="leave out longer conversations")
    parser.add_argument(
        "--as-recorded",
        action="store_true",
        help="keep each conversation as it ends (only the greeting and user-side tools cut)",
    )
    args = parser.parse_args(argv)
    lines: list[str] = []
    for path in args.files:
        kept = [
            c
            for c in conversations(path, as_recorded=args.as_recorded)
            if args.max_bytes is None
            or len(json.dumps(c, ensure_ascii=False).encode()) <= args.max_bytes
        ]
        print(f"{path.name}: {len(kept)}")
        lines.extend(json.dumps(c, ensure_ascii=False) for c in kept)
    args.out.write_text("".join(line + "\n" for line in lines))
    print(f"{len(lines)} conversations, {args.out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
