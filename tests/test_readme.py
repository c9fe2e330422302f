"""The README's claims about the command line hold, and its diagram matches the compiled graph.

(Its Python blocks run in tests/test_docs.py.)"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from toolstop.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
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
    assert checked >= 20  # the README's usage lines were found


def test_the_check_table_in_the_readme_is_what_check_prints() -> None:
    readme = README.read_text(encoding="utf-8")
    sample = re.search(r"```text\n(scenario .*?)\n\.\.\.\n", readme, flags=re.S)
    assert sample is not None
    shown = [line.split() for line in sample.group(1).splitlines()]
    out = io.StringIO()
    argv = ["check", "--router", "graph", "--scenario", "success.hard"]
    assert main([*argv, "--scenario", "retryable-then-success.hard"], out=out) == 0
    printed = [line.split() for line in out.getvalue().splitlines()[2:]]  # after the versions
    # the header and the two passing rows; the sample's FAIL rows show a breach of another router
    assert printed == [*shown[:3], ["2", "passed,", "0", "failed"]]
    assert shown[3][3:5] == ["FAIL", "expected"]
    assert shown[4][0] == "actual"


def test_the_readmes_example_check_runs() -> None:
    from routers import MIDDLEWARE_UNAVAILABLE

    argv = "toolstop check --router middleware --scenario parallel-any-stop-last"
    assert argv in command_lines()
    if MIDDLEWARE_UNAVAILABLE:
        pytest.skip(MIDDLEWARE_UNAVAILABLE)
    out = io.StringIO()
    assert main(argv.split()[1:], out=out) == 0
    rows = [line.split() for line in out.getvalue().splitlines()[3:-1]]  # versions, model, header
    assert {(row[0], row[1], row[3]) for row in rows} == {
        ("parallel-any-stop-last.hard", "middleware", "pass")
    }
    assert out.getvalue().splitlines()[-1] == f"{len(rows)} passed, 0 failed"


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
