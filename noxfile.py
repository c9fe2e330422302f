"""The version matrix: the router contract from langgraph 0.6 to the newest LangChain.

`make test` runs `nox -s contract` and `nox -s pydantic_ai`; `nox -s "contract(floor)"` runs one
environment. Each environment is installed once and reused while `pyproject.toml` and its pins
are unchanged (`newest` re-resolves once a day); `rm -rf .nox` starts over.
"""

from __future__ import annotations

import datetime
import hashlib
from pathlib import Path

import nox

# uv (a dev dependency) installs a stack in seconds where pip takes a minute; venv if it is missing.
nox.options.default_venv_backend = "uv|venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

# langgraph 1.0.x resolves langgraph-prebuilt 1.0.13, which needs langgraph 1.1 (ExecutionInfo).
PREBUILT_FOR_LANGGRAPH_1_0 = "langgraph-prebuilt<1.0.9"

MATRIX = {
    # langgraph 0.6.6: the last line before create_react_agent gave way to create_agent.
    "legacy": ["langgraph==0.6.6", "langchain-core<1"],
    # create_agent without ExtendedModelResponse: StopOnArtifact refused, `check` skips it.
    "old": ["langchain==1.0.8", PREBUILT_FOR_LANGGRAPH_1_0],
    # the middleware's floor, on its era's langgraph 1.0.x
    "floor": ["langchain==1.2.9", PREBUILT_FOR_LANGGRAPH_1_0],
    # the last 1.3 release (ToolErrorMiddleware from 1.3.14)
    "last-1.3": ["langchain==1.3.18"],
    # the versions toolstop was first built and verified on
    "current": ["langchain==1.4.2", "langgraph==1.2.11"],
    # whatever the index serves as newest
    "newest": ["langchain>=1.4", "langgraph>=1.2,<2"],
}

# The Pydantic AI adapter: the oldest 2.x release tested (capabilities and SkipModelRequest are
# there) and whatever the index serves as newest.
PYDANTIC_AI = {
    "2.0": ["pydantic-ai-slim[openai]==2.0.0"],
    "newest": ["pydantic-ai-slim[openai]>=2.0"],
}

# Multi-agent setups: toolstop's routers at several levels (docs/multi-agent.md), on the newest
# langchain with the newest Deep Agents, langgraph-swarm and langgraph-supervisor.
MULTIAGENT = ["langchain>=1.4", "langgraph>=1.2,<2", "-e", ".[multiagent]"]

BASE = ["-e", ".", "pytest>=8", "pytest-timeout>=2.3"]

# What the stack resolved to (uv's environments have no pip to ask).
SHOW_VERSIONS = (
    "import importlib.metadata as m; "
    "print(*sorted(f'{d.name}=={d.version}' for d in m.distributions()), sep='\\n')"
)


def _install_once(session: nox.Session, stack: str, pins: list[str] | None = None) -> None:
    """Install the stack (`pins`, or the matrix's) unless this environment already holds it."""
    requirements = [*BASE, *(MATRIX[stack] if pins is None else pins)]
    key = Path("pyproject.toml").read_text(encoding="utf-8") + repr(requirements)
    if stack == "newest":
        key += datetime.date.today().isoformat()
    digest = hashlib.sha256(key.encode()).hexdigest()
    stamp = Path(session.virtualenv.location) / ".toolstop-installed"
    if stamp.exists() and stamp.read_text(encoding="utf-8") == digest:
        session.log(f"{stack}: installed already (pyproject.toml and pins unchanged)")
        return
    session.install(*requirements)
    stamp.write_text(digest, encoding="utf-8")


@nox.session(python="3.11")
@nox.parametrize("stack", list(MATRIX), ids=list(MATRIX))
def contract(session: nox.Session, stack: str) -> None:
    """One stack of the matrix: install it with toolstop, run the contract tests and `check`."""
    _install_once(session, stack)
    session.run("python", "-c", SHOW_VERSIONS, silent=False)
    session.run("python", "-m", "pytest", "-m", "contract", "-q", *session.posargs)
    session.run("toolstop", "check")


@nox.session(name="pydantic_ai", python="3.11")
@nox.parametrize("release", list(PYDANTIC_AI), ids=list(PYDANTIC_AI))
def pydantic_ai(session: nox.Session, release: str) -> None:
    """The Pydantic AI adapter's tests on one release (without LangChain's agents)."""
    _install_once(session, release, PYDANTIC_AI[release])
    session.run("python", "-c", SHOW_VERSIONS, silent=False)
    session.run("python", "-m", "pytest", "tests/test_pydantic_ai.py", "-q", *session.posargs)
    session.run("toolstop", "check", "--router", "pydantic_ai")


@nox.session(python="3.11")
def multiagent(session: nox.Session) -> None:
    """The multi-agent tests (`-m multiagent`): sub-agents, Deep Agents, supervisors, swarms."""
    _install_once(session, "multiagent", MULTIAGENT)
    session.run("python", "-c", SHOW_VERSIONS, silent=False)
    session.run("python", "-m", "pytest", "-m", "multiagent", "-q", *session.posargs)
