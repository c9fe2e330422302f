"""The README keeps its quick start and its diagram matches the compiled graph."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_python_examples() -> None:
    assert BLOCKS, "the README lost its quick start"  # they run in tests/test_docs.py


def _edges(mermaid: str) -> set[str]:
    return {line.strip() for line in mermaid.splitlines() if "-->" in line or "-.->" in line}


def test_readme_diagram_matches_the_compiled_graph() -> None:
    from toolstop import StopPolicy, build_react_graph
    from toolstop.testing import ScriptedChatModel, forced_tool

    graph = build_react_graph(
        ScriptedChatModel([]), [forced_tool("t", ("x", None))], policy=StopPolicy(mode="polish")
    )
    drawn = re.search(r"```mermaid\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert drawn is not None
    assert _edges(drawn.group(1)) == _edges(graph.get_graph().draw_mermaid())
