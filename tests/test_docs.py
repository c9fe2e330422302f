"""Every Python block in the README and docs/ runs; the drawn graphs match the code."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=lambda p: p.name)
def test_every_python_block_runs_in_order(page: Path) -> None:
    """A page's blocks run top to bottom in one namespace, as a reader pasting them would."""
    if MIDDLEWARE_UNAVAILABLE:
        pytest.skip(f"the docs' middleware examples: {MIDDLEWARE_UNAVAILABLE}")
    required = re.search(r"<!-- requires: ([\w. ]+) -->", page.read_text(encoding="utf-8"))
    for module in required.group(1).split() if required else []:
        pytest.importorskip(module, reason=f"{page.name} needs {module}")
    namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
    for index, block in enumerate(blocks(page)):
        # dont_inherit: the blocks run as a reader runs them, without this file's `from __future__`
        code = compile(block, f"{page.name} python block {index}", "exec", dont_inherit=True)
        exec(code, namespace)


def test_the_docs_link_to_pages_that_exist() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(((?:docs/)?[\w./-]+\.(?:md|json|png))\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def test_the_docs_quote_the_records_current_schema_version() -> None:
    from toolstop.record import RECORD_SCHEMA_VERSION

    quoted = {
        page.name: int(version)
        for page in PAGES
        for version in re.findall(r"`schema_version` \((\d+)", page.read_text(encoding="utf-8"))
    }
    assert quoted, "no page quotes the schema version"
    assert quoted == dict.fromkeys(quoted, RECORD_SCHEMA_VERSION)


def test_the_drawn_graphs_match_the_compiled_graphs() -> None:
    if MIDDLEWARE_UNAVAILABLE:
        pytest.skip(f"the page draws create_agent + StopOnArtifact too: {MIDDLEWARE_UNAVAILABLE}")
    from diagrams import page

    committed = (ROOT / "docs" / "graphs.md").read_text(encoding="utf-8")
    assert committed == page(), (
        "docs/graphs.md is stale: python scripts/diagrams.py > docs/graphs.md"
    )


def test_the_docs_site_builds_strict(tmp_path: Path) -> None:
    """MkDocs Material + mkdocstrings: the guides of docs/ and an API reference generated from
    the docstrings. `--strict`: a broken link, a missing page or an unresolved reference fails."""
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs site needs the dev extra")
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    api = (tmp_path / "api" / "toolstop" / "index.html").read_text(encoding="utf-8")
    for name in ("signal", "StopPolicy", "build_react_graph", "StopOnArtifact", "decide"):
        assert f'id="toolstop.{name}"' in api, f"the API reference lost toolstop.{name}"


def test_the_docstring_examples_run() -> None:
    import doctest
    import importlib

    for name in ("toolstop.outcome", "toolstop.testing.forced", "toolstop.testing.scripted"):
        failed, tried = doctest.testmod(importlib.import_module(name))
        assert tried, f"{name} has no example"
        assert failed == 0, f"an example in {name}'s docstrings fails"


TEST_ID = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?(?:\[[^\]`]*\])?`")
CLAIM = re.compile(r'^\| (README|docs/[\w.]+\.md) \| "(.+)" \| (.+) \|$', flags=re.M)


def defined_tests(path: Path) -> set[str]:
    """The test functions a file defines, top level or in a class, read from its syntax tree."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_every_claim_is_quoted_and_names_tests_that_exist() -> None:
    table = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    claims = CLAIM.findall(table)
    assert len(claims) >= 60, "the claims table lost its rows"
    for page, quote, tests in claims:
        text = _flat((ROOT / ("README.md" if page == "README" else page)).read_text("utf-8"))
        assert _flat(quote.replace('\\"', '"')) in text, f"{page} no longer says: {quote}"
        assert TEST_ID.search(tests), f"the claim {quote!r} names no test"
    named = {m for page in PAGES for m in TEST_ID.findall(page.read_text(encoding="utf-8"))}
    assert len(named) >= 100
    for file, function in sorted(named):
        path = ROOT / file
        assert path.is_file(), f"the docs name {file}, which does not exist"
        if function:
            assert function in defined_tests(path), (
                f"the docs name {file}::{function}: no such test"
            )


def test_every_test_the_docs_name_by_its_bare_name_exists() -> None:
    known = set().union(*(defined_tests(path) for path in (ROOT / "tests").glob("test_*.py")))
    for page in PAGES:
        for name in re.findall(r"`(test_\w+)`", page.read_text(encoding="utf-8")):
            assert name in known, f"{page.name} names {name}: no such test"
