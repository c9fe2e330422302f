"""Opt-in: `toolstop check --model` against a real provider. Skipped without its API key."""

from __future__ import annotations

import io
import os

import pytest

from toolstop.cli import main

pytestmark = pytest.mark.live

LIVE = [
    ("groq:llama-3.3-70b-versatile", "GROQ_API_KEY", "langchain_groq"),
    ("openai:gpt-4o-mini", "OPENAI_API_KEY", "langchain_openai"),
]


@pytest.mark.parametrize(("spec", "env", "package"), LIVE, ids=[s for s, _, _ in LIVE])
def test_check_invariants_on_a_real_model(spec: str, env: str, package: str) -> None:
    if not os.environ.get(env):
        pytest.skip(f"{env} is not set: the live check of {spec} is opt-in")
    pytest.importorskip(package, reason=f"{spec} needs {package}")
    out = io.StringIO()
    code = main(["check", "--model", spec], out=out)
    assert code == 0, out.getvalue()
