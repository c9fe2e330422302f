"""Checkpoints decoded without building anything a blob names: toolstop's one decoder.

LangGraph's default serializer (`JsonPlusSerializer`) imports the module and calls the name that
a checkpoint's msgpack extension (or an `lc` JSON constructor) gives, so a crafted database runs
code in whoever reads it (an extension naming `os.system` runs a shell command). Every command
of toolstop that reads a checkpoint database (`report`, `explain`, `demo --thread` resuming a
conversation), and the canary's way back (`toolstop.canary`, records only), decodes through
`SafeDecoder` instead:

- msgpack and JSON are parsed as plain data; no module is imported, nothing named is called;
- LangChain messages (`AIMessage`, `ToolMessage`, `HumanMessage`, ... of
  `langchain_core.messages`: an allow-list) are built by toolstop from their plain fields;
- any other object a blob names becomes its plain arguments (what LangGraph itself falls back
  to for a type it does not allow), or `None`;
- a format it does not know (pickle, an encrypting or custom serializer) or bytes it cannot
  parse raise `ValueError`: the reader counts the thread unreadable and goes on.

Deliberately not handled: LangGraph's strict msgpack mode (`LANGGRAPH_STRICT_MSGPACK`) exists
only in recent `langgraph-checkpoint` releases, and still builds the types it allows.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["SafeDecoder", "install"]

_EXT_SINGLE_ARG, _EXT_POS_ARGS, _EXT_KW_ARGS, _EXT_METHOD = 0, 1, 2, 3
_EXT_PYDANTIC_V1, _EXT_PYDANTIC_V2, _EXT_NUMPY, _EXT_DELTA = 4, 5, 6, 7

_MESSAGE_MODULES = ("langchain_core.messages", "langchain.schema.messages")
"""Where LangChain's message classes live (a module name is compared, never imported)."""

_FIELDS = (
    "content",
    "id",
    "name",
    "tool_calls",
    "invalid_tool_calls",
    "tool_call_id",
    "artifact",
    "status",
    "role",
    "additional_kwargs",
    "response_metadata",
    "usage_metadata",
)
"""The plain fields a message is built from; every other key of a blob is dropped."""


def _message_classes() -> dict[str, type[Any]]:
    from langchain_core import messages

    return {
        name: getattr(messages, name)
        for name in (
            "AIMessage",
            "AIMessageChunk",
            "ToolMessage",
            "ToolMessageChunk",
            "HumanMessage",
            "HumanMessageChunk",
            "SystemMessage",
            "SystemMessageChunk",
            "ChatMessage",
            "ChatMessageChunk",
            "FunctionMessage",
            "FunctionMessageChunk",
        )
        if hasattr(messages, name)
    }


class SafeDecoder:
    """A checkpoint serializer for reading that never builds a class a blob names.

    Args:
        messages: Build LangChain messages from their plain fields (what `explain` needs). When
            `False` (what `report` needs), every extension type is skipped as `None` without
            being parsed: records are plain data, and memory stays small.
        write_with: A serializer for `dumps_typed` (a saver that also writes, as `demo --thread`'s);
            without one, writing raises `NotImplementedError`.
    """

    def __init__(self, *, messages: bool = True, write_with: Any = None) -> None:
        """A decoder; see the class docstring."""
        self.messages = messages
        self._classes = _message_classes() if messages else {}
        self._write_with = write_with

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Serialize with `write_with`; toolstop's readers never write."""
        if self._write_with is None:
            msg = "toolstop's checkpoint decoder reads only"
            raise NotImplementedError(msg)
        result: tuple[str, bytes] = self._write_with.dumps_typed(obj)
        return result

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Decode one stored value as plain data (messages built by toolstop).

        Raises:
            ValueError: an unknown format or bytes that cannot be parsed.
        """
        kind, payload = data
        try:
            if kind == "null":
                return None
            if kind == "bytes":
                return bytes(payload)
            if kind == "bytearray":
                return bytearray(payload)
            if kind == "msgpack":
                return self._unpack(payload)
            if kind == "json":
                return self.loads(payload)
        except Exception as error:  # bad bytes, RecursionError, TypeError (an unhashable key)
            msg = f"undecodable {kind} checkpoint value: {type(error).__name__}"
            raise ValueError(msg) from None
        msg = f"checkpoint values of type {str(kind)[:40]!r} are not read (only msgpack and json)"
        raise ValueError(msg)

    # The `jsonplus_serde` of older savers (metadata as JSON) is given this object too.
    def loads(self, data: bytes | str) -> Any:
        """JSON with LangChain's `lc` constructors read as plain data (messages built)."""
        return json.loads(data, object_hook=self._revive)

    def dumps(self, obj: Any) -> bytes:
        """Plain JSON (older savers round-trip metadata through it)."""
        return json.dumps(obj).encode()

    def _unpack(self, payload: bytes) -> Any:
        import ormsgpack

        return ormsgpack.unpackb(payload, ext_hook=self._ext, option=ormsgpack.OPT_NON_STR_KEYS)

    def _ext(self, code: int, data: bytes) -> Any:
        if not self.messages:
            return None
        try:
            if code == _EXT_DELTA:
                return self._unpack(data)
            if code == _EXT_NUMPY or code > _EXT_DELTA:
                return None
            parts = self._unpack(data)
            if not isinstance(parts, (list, tuple)) or len(parts) < 3:
                return None
            module, name, args = parts[0], parts[1], parts[2]
            if code in (_EXT_KW_ARGS, _EXT_PYDANTIC_V1, _EXT_PYDANTIC_V2):
                return self._named(module, name, args)
            return list(args) if code == _EXT_POS_ARGS and isinstance(args, list) else args
        except Exception:  # an odd payload is no value; it never stops the read
            return None

    def _revive(self, value: dict[str, Any]) -> Any:
        ident = value.get("id")
        if (
            value.get("lc") in (1, 2)
            and value.get("type") == "constructor"
            and isinstance(ident, list)
            and ident
            and all(isinstance(part, str) for part in ident)
        ):
            if not self.messages:
                return None
            module = ".".join(ident[:-1])
            if module.startswith("langchain.schema"):
                module = "langchain.schema.messages"
            return self._named(module, ident[-1], value.get("kwargs"))
        return value

    def _named(self, module: Any, name: Any, fields: Any) -> Any:
        """A message built from plain fields when `module.name` is an allowed message class;
        otherwise the fields themselves."""
        if not isinstance(fields, dict):
            return fields
        cls = self._classes.get(name) if isinstance(name, str) else None
        if cls is None or not (
            isinstance(module, str)
            and any(module == m or module.startswith(m + ".") for m in _MESSAGE_MODULES)
        ):
            return fields
        plain = {key: fields[key] for key in _FIELDS if key in fields}
        try:
            return cls(**plain)
        except Exception:  # fields a message refuses: kept as plain data, not a message
            return fields


def install(saver: Any, decoder: SafeDecoder) -> Any:
    """Give `saver` the decoder for every value it reads, and return it.

    Older savers also keep a `jsonplus_serde` for metadata; it is replaced too."""
    saver.serde = decoder
    if hasattr(saver, "jsonplus_serde"):
        saver.jsonplus_serde = decoder
    return saver
