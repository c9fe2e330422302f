# mypy: warn-unused-ignores
"""What a type checker sees of toolstop's public surface; checked by mypy --strict in `make test`.

Never run, only type-checked. `assert_type` fails when a type widens (to `Any`, say), and each
`# type: ignore[...]` marks a mistake mypy must catch: with `warn-unused-ignores` an ignore that
is no longer needed (because the mistake went unnoticed) is itself an error.
"""

from __future__ import annotations

from typing import Any, assert_type

from langchain_core.language_models import BaseChatModel

import toolstop
import toolstop.legacy
from toolstop import StopOnArtifact, StopOnArtifactState, StopPolicy, build_react_graph, signal
from toolstop.graph import ReactGraph


def usage(model: BaseChatModel) -> None:
    graph = build_react_graph(model, [])
    assert_type(graph, ReactGraph)
    graph.invok({"messages": []})  # type: ignore[attr-defined]
    legacy = toolstop.legacy.create_react_agent(model, [])
    assert_type(legacy, ReactGraph)
    legacy.invok({"messages": []})  # type: ignore[attr-defined]
    graph.invoke({"messages": [("user", "hi")]})  # anything add_messages takes
    graph.invoke({"mesages": [("user", "hi")]})  # type: ignore[call-overload]

    middleware = StopOnArtifact(StopPolicy(mode="polish"))
    assert_type(middleware, StopOnArtifact)
    assert_type(toolstop.StopOnArtifact, type[StopOnArtifact])
    assert_type(StopOnArtifactState, type[StopOnArtifactState])
    StopOnArtifact("hard")  # type: ignore[arg-type]
    StopOnArtifact(policy=StopPolicy(mode="fast"))  # type: ignore[arg-type]

    artifact = signal("completed", receipt_id="r1")
    assert_type(artifact, dict[str, Any])
    signal("completed", stop="yes")  # type: ignore[arg-type]
