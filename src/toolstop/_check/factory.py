"""Load your agent factory and tools by name (`MODULE:ATTR`), as `--agent` / `--tools` take them.

The recommended structure of an agent is a factory, `make_agent(model, tools, policy,
checkpointer=None)`, that returns a compiled graph or agent (anything with `invoke` on
`{"messages": [...]}`). Production calls it with the real model, the real tools, `StopPolicy()`
and its checkpointer; `toolstop check --agent` calls it with a scripted model, stand-ins of the
tools, each scenario's policy and an in-memory checkpointer of its own; `toolstop bench --agent`
with the real tools and each mode's policy. `--agent` imports the factory's module: building
clients or running anything at import happens then too, so keep those in another module.

Every loading problem raises `ToolstopConfigError` with one sentence that names what was wrong;
the CLI prints it and exits 2.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from toolstop.errors import ToolstopConfigError

__all__ = ["AgentFactory", "as_factory", "load_factory", "load_object", "load_tools"]


def load_object(spec: str, flag: str) -> Any:
    """Import `MODULE:ATTR` (the module importable from the current directory); return the object.

    `ATTR` may be dotted (`module:Class.method`). `flag` names the option in the error.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        msg = f"{flag} takes MODULE:ATTR (e.g. my_agent:make_agent), got {spec!r}"
        raise ToolstopConfigError(msg)
    if module_name.endswith(".py") or "/" in module_name or "\\" in module_name:
        raise ToolstopConfigError(_path_given(module_name, attr, spec, flag))
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            msg = f"{flag} {spec}: no module named {missing!r} in {here} or the installed packages"
        else:
            msg = f"{flag} {spec}: importing {module_name} failed: {error}"
        raise ToolstopConfigError(msg) from None
    except Exception as error:
        reason = str(error)
        if isinstance(error, SyntaxError) and error.filename:
            reason = f"{error.msg} ({error.filename}, line {error.lineno})"
        msg = f"{flag} {spec}: importing {module_name} raised {type(error).__name__}: {reason}"
        raise ToolstopConfigError(msg) from None
    found: Any = module
    for part in attr.split("."):
        if not hasattr(found, part):
            msg = f"{flag} {spec}: {module_name} has no attribute {attr!r}"
            raise ToolstopConfigError(msg)
        found = getattr(found, part)
    return found


def _path_given(module_name: str, attr: str, spec: str, flag: str) -> str:
    """The error for a file path given as the module: the module name to use, if there is one."""
    here = Path.cwd().resolve()
    path = Path(module_name.replace("\\", "/")).with_suffix("")
    try:
        parts = (path if path.is_absolute() else here / path).resolve().relative_to(here).parts
    except ValueError:
        parts = ()
    if not parts or not all(part.isidentifier() for part in parts):
        return (
            f"{flag} takes MODULE:ATTR, a module importable from the current directory, not a "
            f"file path ({spec}); run toolstop from the folder that holds the module"
        )
    return f"{flag} takes a module name, not a file path: {'.'.join(parts)}:{attr}, not {spec}"


@dataclass(frozen=True, kw_only=True)
class AgentFactory:
    """The user's factory, validated.

    Attributes:
        name: `MODULE:ATTR`, as given.
        build: The factory itself, `build(model, tools, policy)`.
        takes_middleware: Whether it takes a `middleware` keyword (langchain middleware it puts
            first in its list); `toolstop check` then also runs the model-call-limit and
            human-review scenarios.
        takes_checkpointer: Whether it takes a `checkpointer` keyword (passed to `compile`,
            or `create_agent`); `toolstop check` then passes its own in-memory one through it.
    """

    name: str
    build: Callable[..., Any]
    takes_middleware: bool = False
    takes_checkpointer: bool = False

    def __call__(self, model: Any, tools: Sequence[BaseTool], policy: Any, **extra: Any) -> Any:
        """Build the agent; a factory that returns something without `invoke` is refused."""
        agent = self.build(model, list(tools), policy, **extra)
        if not callable(getattr(agent, "invoke", None)):
            msg = (
                f"--agent {self.name} returned {type(agent).__name__}, which has no invoke(); "
                "return the compiled graph or agent"
            )
            raise ToolstopConfigError(msg + self._pydantic_ai_hint(agent))
        return agent

    def build_or_refuse(self, model: Any, tools: Sequence[BaseTool], policy: Any) -> Any:
        """Build the agent, `self(model, tools, policy)`, or refuse in one sentence.

        Anything the factory raises becomes one `ToolstopConfigError` sentence (for building before
        any run: nothing to record yet)."""
        try:
            return self(model, tools, policy)
        except ToolstopConfigError:
            raise
        except Exception as error:
            msg = (
                f"--agent {self.name}: calling it with (model, tools, policy) raised "
                f"{type(error).__name__}: {error}"
            )
            raise ToolstopConfigError(msg + self._pydantic_ai_hint(None)) from None

    def _pydantic_ai_hint(self, agent: Any) -> str:
        """The pointer to the Pydantic AI router, when the factory or its agent is Pydantic AI's."""
        if not (_from_pydantic_ai(type(agent)) or _looks_pydantic_ai(self.build)):
            return ""
        return f" ({PYDANTIC_AI_HINT})"


PYDANTIC_AI_HINT = (
    "--agent takes LangChain/LangGraph agents only; Pydantic AI is checked by the built-in "
    "router, toolstop check --router pydantic_ai"
)
"""What a loading error adds when the factory or the tools are written for Pydantic AI."""


def load_factory(spec: str, flag: str = "--agent") -> AgentFactory:
    """Load and check `FACTORY(model, tools, policy)` from `MODULE:ATTR`."""
    return as_factory(load_object(spec, flag), name=spec, flag=flag)


def as_factory(factory: Any, *, name: str | None = None, flag: str = "--agent") -> AgentFactory:
    """Check that `factory` can be called as `factory(model, tools, policy)`; wrap it.

    Raises:
        ToolstopConfigError: not callable, or a signature that does not take three arguments.
    """
    name = name or getattr(factory, "__qualname__", None) or repr(factory)
    if not callable(factory):
        msg = f"{flag} {name} is a {type(factory).__name__}, not a function (model, tools, policy)"
        raise ToolstopConfigError(msg)
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return AgentFactory(name=name, build=factory)
    try:
        signature.bind(None, None, None)
    except TypeError:
        msg = f"{flag} {name} must take (model, tools, policy); its signature is {signature}"
        raise ToolstopConfigError(msg) from None
    return AgentFactory(
        name=name,
        build=factory,
        takes_middleware=_keyword(signature, "middleware"),
        takes_checkpointer=_keyword(signature, "checkpointer"),
    )


def _keyword(signature: inspect.Signature, name: str) -> bool:
    parameter = signature.parameters.get(name)
    return parameter is not None and parameter.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


def load_tools(spec: str, flag: str = "--tools") -> list[BaseTool]:
    """Load a list of LangChain tools from `MODULE:ATTR` (a list or tuple of `BaseTool`)."""
    found = load_object(spec, flag)
    if isinstance(found, BaseTool):
        found = [found]
    if isinstance(found, str | bytes) or not isinstance(found, Sequence):
        hint = " (name a list in your module, e.g. TOOLS = get_tools())" if callable(found) else ""
        msg = f"{flag} {spec} is a {type(found).__name__}, not a list of LangChain tools{hint}"
        raise ToolstopConfigError(msg)
    if not found:
        msg = f"{flag} {spec} is an empty list; name at least one tool"
        raise ToolstopConfigError(msg)
    for index, item in enumerate(found):
        if not isinstance(item, BaseTool):
            hint = " (decorate it with @tool)" if callable(item) else ""
            if _looks_pydantic_ai(item):
                hint = f" (it looks written for Pydantic AI: {PYDANTIC_AI_HINT})"
            msg = (
                f"{flag} {spec}: item {index} ({_label(item)}) is a {type(item).__name__}, "
                f"not a LangChain tool{hint}"
            )
            raise ToolstopConfigError(msg)
    names = [tool.name for tool in found]
    doubles = sorted({name for name in names if names.count(name) > 1})
    if doubles:
        msg = f"{flag} {spec}: two tools share the name {', '.join(doubles)}"
        raise ToolstopConfigError(msg)
    return list(found)


def _label(item: Any) -> str:
    name = getattr(item, "__name__", None) or getattr(item, "name", None)
    return str(name) if isinstance(name, str) and name else repr(item)[:40]


def _from_pydantic_ai(value: Any) -> bool:
    try:
        module = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
    except Exception:  # an object whose attributes raise: not Pydantic AI's
        return False
    return isinstance(module, str) and module.split(".")[0] == "pydantic_ai"


def _looks_pydantic_ai(item: Any) -> bool:
    """True for a Pydantic AI `Tool`, or a function written for Pydantic AI: it takes a
    `RunContext`, returns a `ToolReturn`, or its module imports from `pydantic_ai`."""
    if _from_pydantic_ai(type(item)):
        return True
    if not inspect.isfunction(item):
        return False
    annotations = " ".join(str(a) for a in item.__annotations__.values())
    if "RunContext" in annotations or "ToolReturn" in annotations:
        return True
    return any(_from_pydantic_ai(value) for value in item.__globals__.values())
