"""Stand-ins of the user's tools, and valid arguments generated from a tool's schema.

A stand-in keeps the tool's name, description and argument schema; its results are forced."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from toolstop.errors import ToolstopConfigError
from toolstop.testing.forced import ForcedResult, in_call_order

__all__ = ["example_args", "stand_in", "tool_parameters"]

_FORMATS = {
    "date": "2024-01-15",
    "date-time": "2024-01-15T10:00:00Z",
    "time": "10:00:00",
    "email": "user@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "127.0.0.1",
}


def stand_in(tool: BaseTool, *results: ForcedResult) -> BaseTool:
    """A `content_and_artifact` stand-in of `tool` whose calls return `results` in order.

    It keeps `tool`'s name, description, argument schema and `return_direct`, and runs as
    `tool` does: a tool written with `async def` (no sync function) gets an async-only
    stand-in, which fails in `invoke()` as the tool would. The last result repeats; an
    exception is raised, as a failing tool would. The arguments are validated by the schema,
    then ignored.

    Raises:
        TypeError: `tool` is not a LangChain tool, or a result is neither a
            `(content, artifact)` pair nor an exception."""
    if not isinstance(tool, BaseTool):
        msg = (
            "stand_in(tool, *results) takes a LangChain tool (decorated with @tool) first, got "
            f"a {type(tool).__name__}"
        )
        raise TypeError(msg)
    next_result = in_call_order(results, "stand_in(tool, *results)")

    def run(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return next_result()

    async def arun(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return next_result()

    async_only = getattr(tool, "func", None) is None and getattr(tool, "coroutine", None)
    schema = tool.args_schema if tool.args_schema is not None else tool.tool_call_schema
    return StructuredTool(
        name=tool.name,
        description=tool.description,
        args_schema=schema,
        func=None if async_only else run,
        coroutine=arun if async_only else None,
        response_format="content_and_artifact",
        return_direct=tool.return_direct,
    )


def tool_parameters(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of the arguments a model is offered for `tool` (injected ones left out)."""
    schema = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        offered = schema.model_json_schema()
        declared = _declared_examples(tool)
        for name, field in offered.get("properties", {}).items():
            if declared.get(name) and "examples" not in field:
                field["examples"] = declared[name]
        return offered
    if isinstance(schema, dict):
        return schema
    parameters: dict[str, Any] = convert_to_openai_tool(tool)["function"].get("parameters") or {}
    return parameters


def _declared_examples(tool: BaseTool) -> dict[str, list[Any]]:
    """Each argument's `Field(examples=[...])` as the tool declares it: langchain's tool-call
    schema drops them (from an `args_schema` model, a `Field` default or an `Annotated` one)."""
    found: dict[str, list[Any]] = {}
    full = tool.args_schema
    if isinstance(full, type) and issubclass(full, BaseModel):
        for name, field in full.model_fields.items():
            if field.examples:
                found[name] = list(field.examples)
    function = getattr(tool, "func", None) or getattr(tool, "coroutine", None)
    if callable(function):
        try:
            hints = typing.get_type_hints(function, include_extras=True)
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError, NameError):
            return found
        for name, parameter in parameters.items():
            declared = [parameter.default, *getattr(hints.get(name), "__metadata__", ())]
            for info in declared:
                if isinstance(info, FieldInfo) and info.examples and name not in found:
                    found[name] = list(info.examples)
    return found


def example_args(tool: BaseTool) -> dict[str, Any]:
    """Arguments that `tool`'s schema accepts, as a model would send them.

    Required fields only (optional ones keep their defaults). Per field, in order: `const`,
    the first of `examples`, `default`, the first `enum` value, the first non-null branch of
    `anyOf` / `oneOf`, then a value of its type (strings honour `format`, `minLength` and
    `maxLength`; numbers their bounds; arrays `minItems`; objects recurse). Not generated:
    strings that must match a `pattern` (give the field `examples=[...]`).

    Raises:
        ToolstopConfigError: when the generated arguments do not validate against the tool's
            schema, naming the tool and the field.
    """
    schema = tool_parameters(tool)
    args = _value(schema, schema, depth=0)
    if not isinstance(args, dict):
        args = {}
    model = tool.tool_call_schema
    if isinstance(model, type) and issubclass(model, BaseModel):
        try:
            model.model_validate(args)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(arguments)"
            msg = (
                f"cannot generate valid arguments for tool {tool.name!r}: {where}: {first['msg']}; "
                "give the field an example (pydantic Field(examples=[...]))"
            )
            raise ToolstopConfigError(msg) from None
    return args


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    found: Any = root
    for part in ref[2:].split("/"):
        found = found.get(part, {}) if isinstance(found, Mapping) else {}
    rest = {k: v for k, v in schema.items() if k != "$ref"}
    return {**found, **rest} if isinstance(found, Mapping) else rest


def _value(schema: Any, root: Mapping[str, Any], *, depth: int) -> Any:
    if not isinstance(schema, Mapping) or depth > 12:
        return None
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        return examples[0]
    if "default" in schema:
        return schema["default"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            real = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
            return _value((real or branches)[0], root, depth=depth + 1)
    if isinstance(schema.get("allOf"), list):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            if isinstance(part, Mapping):
                merged.update(_resolve(part, root))
        return _value(merged, root, depth=depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    return _typed(kind, schema, root, depth)


def _typed(kind: str, schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> Any:
    if kind == "object":
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        return {
            name: _value(properties.get(name, {}), root, depth=depth + 1)
            for name in required
            if isinstance(name, str)
        }
    if kind == "array":
        items = schema.get("items") or {}
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and prefix:
            return [_value(p, root, depth=depth + 1) for p in prefix]
        count = max(int(schema.get("minItems") or 0), 1)
        if isinstance(schema.get("maxItems"), int):
            count = min(count, schema["maxItems"])
        return [_value(items, root, depth=depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _string(schema)


def _number(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    low = schema.get("minimum")
    if low is None and schema.get("exclusiveMinimum") is not None:
        low = schema["exclusiveMinimum"] + (1 if integer else 0.5)
    high = schema.get("maximum")
    if high is None and schema.get("exclusiveMaximum") is not None:
        high = schema["exclusiveMaximum"] - (1 if integer else 0.5)
    value: float = 1
    if low is not None:
        value = max(value, low)
    if high is not None:
        value = min(value, high)
    if integer:
        return int(value) if float(value).is_integer() else int(value) + 1
    return value


def _string(schema: Mapping[str, Any]) -> str:
    text = _FORMATS.get(str(schema.get("format")), "example")
    least = schema.get("minLength")
    if isinstance(least, int) and len(text) < least:
        text = text + "x" * (least - len(text))
    most = schema.get("maxLength")
    if isinstance(most, int) and len(text) > most:
        text = text[:most]
    return text
