"""Loading a user's agent factory and tools by name (`toolstop._check.factory`): each refusal's
one sentence, exactly as `toolstop check --agent ... --tools ...` prints it.

tests/test_agent_check.py and test_agent_ship.py run whole checks of loaded agents; here each
loading rule is pinned on small modules the test writes into a folder of its own.
"""

from __future__ import annotations

import inspect
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from toolstop._check.factory import (
    PYDANTIC_AI_HINT,
    AgentFactory,
    as_factory,
    load_factory,
    load_object,
    load_tools,
)
from toolstop.errors import ToolstopConfigError


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The current directory, as the CLI's: a fresh folder (not on sys.path yet)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def module(folder: Path, source: str, name: str | None = None) -> str:
    name = name or f"m_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(source, encoding="utf-8")
    return name


def refusal(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ToolstopConfigError) as error:
        call(*args, **kwargs)
    return str(error.value)


TOOLS = """
from langchain_core.tools import tool

@tool
def one(x: str) -> str:
    "One."
    return x

@tool
def two(x: str) -> str:
    "Two."
    return x

class Box:
    class Inner:
        value = 7

TOOLS = [one, two]
"""


def test_an_object_is_found_by_module_and_dotted_attribute(folder: Path) -> None:
    name = module(folder, TOOLS)
    assert load_object(f"{name}:Box.Inner.value", "--agent") == 7
    assert str(folder) in sys.path  # the current directory, as `python -m` would have it
    assert [t.name for t in load_tools(f"{name}:TOOLS")] == ["one", "two"]
    assert [t.name for t in load_tools(f"{name}:one")] == ["one"]  # one tool alone


@pytest.mark.parametrize("spec", ["nocolon", ":attr", "mod:", ""])
def test_a_spec_that_is_not_module_colon_attribute(spec: str) -> None:
    assert refusal(load_object, spec, "--tools") == (
        f"--tools takes MODULE:ATTR (e.g. my_agent:make_agent), got {spec!r}"
    )


def test_a_file_path_given_as_the_module(folder: Path) -> None:
    (folder / "pkg").mkdir()
    assert refusal(load_object, "pkg/agent.py:make", "--agent") == (
        "--agent takes a module name, not a file path: pkg.agent:make, not pkg/agent.py:make"
    )
    assert refusal(load_object, "agent.py:make", "--agent") == (
        "--agent takes a module name, not a file path: agent:make, not agent.py:make"
    )
    assert refusal(load_object, "pkg\\agent:make", "--agent") == (
        "--agent takes a module name, not a file path: pkg.agent:make, not pkg\\agent:make"
    )
    assert refusal(load_object, f"{folder}/agent.py:make", "--agent") == (
        f"--agent takes a module name, not a file path: agent:make, not {folder}/agent.py:make"
    )
    for outside in ("/elsewhere/agent.py:make", "my-agent/agent.py:make"):
        assert refusal(load_object, outside, "--agent") == (
            f"--agent takes MODULE:ATTR, a module importable from the current directory, not a "
            f"file path ({outside}); run toolstop from the folder that holds the module"
        )


def test_a_module_that_cannot_be_imported(folder: Path) -> None:
    assert refusal(load_object, "nowhere_xyz:make", "--agent") == (
        f"--agent nowhere_xyz:make: no module named 'nowhere_xyz' in {folder} or the installed "
        "packages"
    )
    assert refusal(load_object, "nowhere_xyz.sub:make", "--agent") == (
        f"--agent nowhere_xyz.sub:make: no module named 'nowhere_xyz' in {folder} or the "
        "installed packages"
    )
    needs = module(folder, "import missing_dependency_xyz\n")
    assert refusal(load_object, f"{needs}:x", "--agent") == (
        f"--agent {needs}:x: importing {needs} failed: No module named 'missing_dependency_xyz'"
    )
    broken = module(folder, "raise RuntimeError('no key')\n")
    assert refusal(load_object, f"{broken}:x", "--agent") == (
        f"--agent {broken}:x: importing {broken} raised RuntimeError: no key"
    )
    syntax = module(folder, "x = (\n")
    assert refusal(load_object, f"{syntax}:x", "--agent") == (
        f"--agent {syntax}:x: importing {syntax} raised SyntaxError: '(' was never closed "
        f"({folder / syntax}.py, line 1)"
    )
    name = module(folder, TOOLS)
    assert refusal(load_object, f"{name}:Box.Missing", "--agent") == (
        f"--agent {name}:Box.Missing: {name} has no attribute 'Box.Missing'"
    )


def test_tools_that_are_not_a_list_of_tools(folder: Path) -> None:
    name = module(
        folder,
        TOOLS
        + "def get_tools():\n    return TOOLS\n"
        + "TEXT = 'one'\nEMPTY = []\nPLAIN = [one, get_tools]\nODD = [one, 3]\n"
        + "TWICE = [one, two, one, two]\n",
    )
    assert refusal(load_tools, f"{name}:get_tools") == (
        f"--tools {name}:get_tools is a function, not a list of LangChain tools (name a list in "
        "your module, e.g. TOOLS = get_tools())"
    )
    assert refusal(load_tools, f"{name}:TEXT", "--x") == (
        f"--x {name}:TEXT is a str, not a list of LangChain tools"
    )
    assert refusal(load_tools, f"{name}:EMPTY") == (
        f"--tools {name}:EMPTY is an empty list; name at least one tool"
    )
    assert refusal(load_tools, f"{name}:PLAIN") == (
        f"--tools {name}:PLAIN: item 1 (get_tools) is a function, not a LangChain tool "
        "(decorate it with @tool)"
    )
    assert refusal(load_tools, f"{name}:ODD") == (
        f"--tools {name}:ODD: item 1 (3) is a int, not a LangChain tool"
    )
    assert refusal(load_tools, f"{name}:TWICE") == (
        f"--tools {name}:TWICE: two tools share the name one, two"
    )


def test_a_tool_written_for_pydantic_ai_is_pointed_to_its_router(folder: Path) -> None:
    name = module(
        folder,
        "from typing import Any\n"
        "def with_context(ctx: 'RunContext[Any]', q: str) -> str:\n    return q\n"
        "def returning(q: str) -> 'ToolReturn':\n    return q\n"
        "def plain(q: str) -> str:\n    return q\n"
        "TOOLS = [with_context]\nRETURNING = [returning]\nPLAIN = [plain]\n",
    )
    hint = f" (it looks written for Pydantic AI: {PYDANTIC_AI_HINT})"
    for attr, tool_name in (("TOOLS", "with_context"), ("RETURNING", "returning")):
        assert refusal(load_tools, f"{name}:{attr}") == (
            f"--tools {name}:{attr}: item 0 ({tool_name}) is a function, not a LangChain tool{hint}"
        )
    assert refusal(load_tools, f"{name}:PLAIN").endswith("(decorate it with @tool)")
    pydantic_ai = pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")
    imports = module(
        folder, "from pydantic_ai import Agent\ndef look(q):\n    return q\nT = [look]\n"
    )
    assert refusal(load_tools, f"{imports}:T").endswith(hint)
    their_tool = pydantic_ai.Tool(lambda q: q, name="theirs")
    assert _refused_tools([their_tool]).endswith(hint)


def _refused_tools(items: list[Any]) -> str:
    holder = sys.modules.setdefault("toolstop_test_holder", type(sys)("toolstop_test_holder"))
    holder.ITEMS = items  # type: ignore[attr-defined]
    return refusal(load_tools, "toolstop_test_holder:ITEMS")


def test_an_item_is_labelled_by_its_name_or_its_repr() -> None:
    class Named:
        name = "by-attribute"

    class Unnamed:
        name = ""

        def __repr__(self) -> str:
            return "U" * 60

    assert "item 0 (by-attribute) is a Named" in _refused_tools([Named()])
    assert f"item 0 ({'U' * 40}) is a Unnamed" in _refused_tools([Unnamed()])


def test_a_factory_must_take_model_tools_and_policy() -> None:
    def make(model: Any, tools: Any, policy: Any) -> Any:
        return None

    def make_with(model: Any, tools: Any, policy: Any, *, middleware: Any = ()) -> Any:
        return None

    def make_positional(model: Any, tools: Any, policy: Any, middleware: Any = ()) -> Any:
        return None

    def make_var(model: Any, tools: Any, policy: Any, **middleware: Any) -> Any:
        return None

    def two(model: Any, tools: Any) -> Any:
        return None

    assert as_factory(make) == AgentFactory(name=make.__qualname__, build=make)
    assert as_factory(make_with, name="m:f").takes_middleware is True
    assert as_factory(make_positional).takes_middleware is True
    assert as_factory(make_var).takes_middleware is False
    assert refusal(as_factory, two, name="m:two") == (
        f"--agent m:two must take (model, tools, policy); its signature is {inspect.signature(two)}"
    )
    assert refusal(as_factory, 3, flag="--x") == (
        "--x 3 is a int, not a function (model, tools, policy)"
    )
    assert as_factory(dict).build is dict  # no signature to read: trusted
    assert as_factory(dict).takes_middleware is False


def test_a_factory_that_returns_no_agent_or_raises(folder: Path) -> None:
    name = module(
        folder,
        "def make(model, tools, policy):\n    return [model, tools, policy]\n"
        "def fails(model, tools, policy):\n    raise KeyError('OPENAI_API_KEY')\n",
    )
    factory = load_factory(f"{name}:make")
    assert factory.name == f"{name}:make"
    assert refusal(factory.build_or_refuse, "model", (), None) == (
        f"--agent {name}:make returned list, which has no invoke(); return the compiled graph "
        "or agent"
    )
    failing = load_factory(f"{name}:fails", flag="--agent")
    assert refusal(failing.build_or_refuse, "model", [], None) == (
        f"--agent {name}:fails: calling it with (model, tools, policy) raised KeyError: "
        "'OPENAI_API_KEY'"
    )


def test_a_factory_gets_a_list_of_the_tools_and_the_extra_keywords() -> None:
    seen: list[Any] = []

    class Agent:
        def invoke(self, value: Any) -> Any:
            return value

    def make(model: Any, tools: Any, policy: Any, **extra: Any) -> Agent:
        seen.append((model, tools, policy, extra))
        return Agent()

    @tool
    def one(x: str) -> str:
        """One."""
        return x

    factory = as_factory(make)
    assert isinstance(factory("m", (one,), "p", middleware=["mw"]), Agent)
    assert isinstance(factory.build_or_refuse("m", (one,), "p"), Agent)
    assert seen == [("m", [one], "p", {"middleware": ["mw"]}), ("m", [one], "p", {})]


def test_a_pydantic_ai_agent_from_a_factory_is_pointed_to_its_router(folder: Path) -> None:
    pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")
    name = module(
        folder,
        "from pydantic_ai import Agent\n"
        "def make(model, tools, policy):\n    return Agent('test')\n"
        "def fails(model, tools, policy):\n    raise ValueError('no')\n",
    )
    made = refusal(load_factory(f"{name}:make").build_or_refuse, None, [], None)
    assert made == (
        f"--agent {name}:make returned Agent, which has no invoke(); return the compiled graph "
        f"or agent ({PYDANTIC_AI_HINT})"
    )
    raised = refusal(load_factory(f"{name}:fails").build_or_refuse, None, [], None)
    assert raised.endswith(f"raised ValueError: no ({PYDANTIC_AI_HINT})")


def test_an_agent_whose_attributes_raise_gets_no_pydantic_ai_hint() -> None:
    class Meta(type):
        def __getattribute__(cls, name: str) -> Any:
            if name == "__module__":
                raise RuntimeError(name)
            return super().__getattribute__(name)

    class Odd(metaclass=Meta):
        pass

    factory = as_factory(lambda model, tools, policy: Odd(), name="m:odd")
    assert refusal(factory.build_or_refuse, None, [], None) == (
        "--agent m:odd returned Odd, which has no invoke(); return the compiled graph or agent"
    )


def test_a_tool_whose_module_imports_pydantic_ai_is_pointed_to_its_router(folder: Path) -> None:
    pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")
    name = module(folder, "import pydantic_ai\ndef look(q):\n    return q\nT = [look]\n")
    assert refusal(load_tools, f"{name}:T").endswith(
        f"(it looks written for Pydantic AI: {PYDANTIC_AI_HINT})"
    )


def test_a_pydantic_ai_agent_from_a_plain_module_is_pointed_to_its_router(folder: Path) -> None:
    pytest.importorskip("pydantic_ai", reason="needs the `pydantic-ai` extra")
    helper = module(
        folder, "from pydantic_ai import Agent\ndef build():\n    return Agent('test')\n"
    )
    name = module(
        folder, f"import {helper}\ndef make(model, tools, policy):\n    return {helper}.build()\n"
    )
    made = refusal(load_factory(f"{name}:make").build_or_refuse, None, [], None)
    assert made.endswith(f"return the compiled graph or agent ({PYDANTIC_AI_HINT})")


def test_the_flags_named_by_default_and_the_spec_split_at_the_first_colon(folder: Path) -> None:
    assert refusal(load_factory, "nocolon") == (
        "--agent takes MODULE:ATTR (e.g. my_agent:make_agent), got 'nocolon'"
    )
    assert refusal(load_tools, "nocolon") == (
        "--tools takes MODULE:ATTR (e.g. my_agent:make_agent), got 'nocolon'"
    )
    name = module(folder, TOOLS + "NUMBER = 3\n")
    assert refusal(load_factory, f"{name}:NUMBER") == (
        f"--agent {name}:NUMBER is a int, not a function (model, tools, policy)"
    )
    assert refusal(load_factory, f"{name}:NUMBER", flag="--x").startswith(f"--x {name}:NUMBER is")
    assert refusal(load_object, f"{name}:Box:x", "--agent") == (
        f"--agent {name}:Box:x: {name} has no attribute 'Box:x'"
    )
    assert refusal(load_object, "pkg/agent:make", "--agent") == (
        "--agent takes a module name, not a file path: pkg.agent:make, not pkg/agent:make"
    )
    assert as_factory(dict, name="m:d").name == "m:d"


def test_the_current_directory_comes_first_on_the_path(
    folder: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path_factory.mktemp("elsewhere")
    name = f"m_{uuid.uuid4().hex[:8]}"
    (other / f"{name}.py").write_text("WHERE = 'elsewhere'\n", encoding="utf-8")
    (folder / f"{name}.py").write_text("WHERE = 'here'\n", encoding="utf-8")
    monkeypatch.setattr(sys, "path", [str(other), *sys.path])
    assert load_object(f"{name}:WHERE", "--agent") == "here"  # the user's module wins
