"""The graphs drawn: Mermaid text from the compiled graphs, for `docs/graphs.md`.

Regenerate deliberately with `python scripts/diagrams.py > docs/graphs.md`; a test fails when
the committed page no longer matches the code.
"""

from __future__ import annotations

from typing import Any

from toolstop._compat import has_agents
from toolstop.graph import build_react_graph
from toolstop.policy import StopPolicy
from toolstop.testing.forced import forced_tool
from toolstop.testing.scripted import ScriptedChatModel

__all__ = ["diagrams", "page"]


def diagrams() -> dict[str, str]:
    """Title -> Mermaid text of each router's compiled graph."""
    tool = forced_tool("search", ("x", None))
    drawn: dict[str, Any] = {
        "build_react_graph, mode hard or never": build_react_graph(ScriptedChatModel([]), [tool]),
        "build_react_graph, mode polish": build_react_graph(
            ScriptedChatModel([]), [tool], policy=StopPolicy(mode="polish")
        ),
    }
    if has_agents():
        from langchain.agents import create_agent

        from toolstop.middleware import StopOnArtifact

        drawn["create_agent + StopOnArtifact (one node per run)"] = create_agent(
            ScriptedChatModel([]), [tool], middleware=[StopOnArtifact()]
        )
    return {title: graph.get_graph().draw_mermaid() for title, graph in drawn.items()}


def page() -> str:
    """The whole `docs/graphs.md`."""
    parts = [
        "# The graphs, drawn\n",
        "Generated from the compiled graphs by `python scripts/diagrams.py > docs/graphs.md`;",
        "`tests/test_docs.py` fails when this page no longer matches the code.\n",
    ]
    for title, mermaid in diagrams().items():
        parts.append(f"## {title}\n\n```mermaid\n{mermaid.rstrip()}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    print(page(), end="")
