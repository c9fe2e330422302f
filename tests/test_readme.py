"""The README is a short front door; the command lines the README and docs/ show exist; the
sample `toolstop check` table and the drawn graph match the code.

(The Python blocks of the README and docs/ run in tests/test_docs.py.)"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from toolstop.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TESTING = ROOT / "docs" / "testing.md"
ROUTERS = ROOT / "docs" / "routers.md"
README_LIMIT = 12_000  # bytes: a pitch, an install, a quick start and links; the rest is in docs/
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
COMMANDS = ("demo", "check", "bench", "report", "explain")


def command_lines() -> list[str]:
    """Every `toolstop COMMAND ...` the pages show: inline code and lines of `sh` blocks."""
    found: list[str] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        found += re.findall(r"`(toolstop [a-z]+[^`]*)`", text)
        for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
            joined = block.replace("\\\n", " ")
            found += [line.strip() for line in joined.splitlines() if line.startswith("toolstop ")]
    return found


def help_text(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_every_command_option_and_choice_the_docs_name_exists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = command_lines()
    named = {line.split()[1] for line in lines}
    assert named == set(COMMANDS), named  # every command is documented, none made up
    helps = {command: help_text(command, capsys) for command in COMMANDS}
    checked = 0
    for line in lines:
        command = line.split()[1]
        code = line.split("#")[0]  # not the shell comment after the command
        for option, choices in re.findall(r"(--[a-z][a-z-]*)(?:[ =]([a-z]+(?:\|[a-z]+)+))?", code):
            assert re.search(rf"{option}(?![\w-])", helps[command]), (
                f"`{line}`: toolstop {command} has no {option}"
            )
            for choice in choices.split("|") if choices else []:
                assert re.search(rf"{option} \{{[^}}]*\b{choice}\b", helps[command]), (
                    f"`{line}`: {option} does not take {choice}"
                )
            checked += 1
    assert checked >= 20  # the usage lines of the README and docs/ were found


def test_the_check_table_on_the_testing_page_is_what_check_prints() -> None:
    page = TESTING.read_text(encoding="utf-8")
    sample = re.search(r"```text\n(scenario .*?)\n\.\.\.\n", page, flags=re.S)
    assert sample is not None
    shown = [line.split() for line in sample.group(1).splitlines()]
    out = io.StringIO()
    argv = ["check", "--router", "graph", "--scenario", "success.hard"]
    assert main([*argv, "--scenario", "retryable-then-success.hard"], out=out) == 0
    # after the versions, up to the summary (then: none of your tools was called)
    lines = out.getvalue().splitlines()
    summary = next(i for i, line in enumerate(lines) if line.endswith(" failed"))
    printed = [line.split() for line in lines[2 : summary + 1]]
    # the header and the two passing rows; the sample's FAIL rows show a breach of another router
    assert printed == [*shown[:3], ["2", "passed,", "0", "failed"]]
    assert shown[3][3:5] == ["FAIL", "expected"]
    assert shown[4][0] == "actual"


def test_the_documented_example_check_runs() -> None:
    from routers import MIDDLEWARE_UNAVAILABLE

    argv = "toolstop check --router middleware --scenario parallel-any-stop-last"
    assert argv in command_lines()
    if MIDDLEWARE_UNAVAILABLE:
        pytest.skip(MIDDLEWARE_UNAVAILABLE)
    out = io.StringIO()
    assert main(argv.split()[1:], out=out) == 0
    # after the versions, model and header; before the summary and "none of your tools ..."
    lines = out.getvalue().splitlines()
    summary = next(i for i, line in enumerate(lines) if line.endswith(" failed"))
    rows = [line.split() for line in lines[3:summary]]
    assert {(row[0], row[1], row[3]) for row in rows} == {
        ("parallel-any-stop-last.hard", "middleware", "pass")
    }
    assert lines[summary] == f"{len(rows)} passed, 0 failed"


def _edges(mermaid: str) -> set[str]:
    return {line.strip() for line in mermaid.splitlines() if "-->" in line or "-.->" in line}


def test_the_routers_page_diagram_matches_the_compiled_graph() -> None:
    from toolstop import StopPolicy, build_react_graph
    from toolstop.testing import ScriptedChatModel, forced_tool

    graph = build_react_graph(
        ScriptedChatModel([]), [forced_tool("t", ("x", None))], policy=StopPolicy(mode="polish")
    )
    drawn = re.search(r"```mermaid\n(.*?)```", ROUTERS.read_text(encoding="utf-8"), flags=re.S)
    assert drawn is not None
    assert _edges(drawn.group(1)) == _edges(graph.get_graph().draw_mermaid())


def test_the_readme_is_a_front_door() -> None:
    """Short enough to read in five minutes; the rest lives in docs/ pages."""
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size:,} bytes; move detail to a docs/ page"


def test_the_readme_names_the_two_set_up_commands() -> None:
    """A fresh machine needs exactly `make demo` and `make test`, and both are Makefile targets."""
    readme = README.read_text(encoding="utf-8")
    block = re.search(r"```sh\n(make .*?)```", readme, flags=re.S)
    assert block is not None, "the README lost its set-up commands"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["make demo", "make test"]
    targets = re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), flags=re.M)
    assert {"demo", "test"} <= set(targets)


def test_the_readme_links_into_the_docs_site() -> None:
    """Every page the site's navigation lists is reachable: from the README or docs/index.md."""
    nav = re.findall(r":\s*([\w/-]+\.md)$", (ROOT / "mkdocs.yml").read_text(), flags=re.M)
    pages = {path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md")}
    assert set(nav) == pages, "mkdocs.yml's nav and docs/ differ"
    linked = set(re.findall(r"\]\(docs/([\w/-]+\.md)", README.read_text(encoding="utf-8")))
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    linked |= set(re.findall(r"\]\(([\w/-]+\.md)", index))
    assert pages - {"index.md"} <= linked, sorted(pages - {"index.md"} - linked)
