"""The version matrix: the router contract on legacy, pinned-current and newest LangGraph.

`make test` runs `nox -s contract`; `nox -s "contract(legacy)"` runs one environment.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

MATRIX = {
    # langgraph 0.6.6: the last line before create_react_agent gave way to create_agent.
    "legacy": ["langgraph==0.6.6", "langchain-core<1"],
    # the seed article's pins
    "current": ["langchain==1.4.2", "langgraph==1.2.11"],
    # whatever the index serves as newest
    "newest": ["langchain>=1.4", "langgraph>=1.2,<2"],
}


@nox.session(python="3.11")
@nox.parametrize("stack", list(MATRIX), ids=list(MATRIX))
def contract(session: nox.Session, stack: str) -> None:
    """Install toolstop with one stack of the matrix; run the contract tests and `toolstop check`."""
    session.install("-e", ".", "pytest>=8", "pytest-timeout>=2.3", *MATRIX[stack])
    session.run("python", "-m", "pip", "list", "--format=freeze", silent=False)
    session.run("python", "-m", "pytest", "-m", "contract", "-q", *session.posargs)
    session.run("toolstop", "check")
