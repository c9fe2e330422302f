"""The report on a parent whose sub-agent is a `subagent_tool` (a new user's trial): the tool
signals already, so it is never the tool to convert; the sub-agent's own tool is."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:  # a create_agent parent and StopOnArtifact at each level
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from toolstop import StopOnArtifact, StopPolicy, subagent_tool
from toolstop.cli import main
from toolstop.testing import ScriptedChatModel, call

sqlite_saver = pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
pytest.importorskip("matplotlib", reason="the report chart needs the `bench` extra")


@tool
def get_invoice(invoice_id: str) -> str:
    """An invoice."""
    return json.dumps({"invoice_id": invoice_id, "amount": 120, "status": "paid"})


def _shadow() -> StopOnArtifact:
    return StopOnArtifact(StopPolicy(mode="never"))


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six threads: the parent asks billing, billing's model restates the invoice, the parent's
    model restates billing's text."""
    path = tmp_path_factory.mktemp("billing") / "support.sqlite"
    with sqlite_saver.SqliteSaver.from_conn_string(str(path)) as saver:
        for n in range(6):
            said = f"Invoice I{n} for 120 is paid."
            worker = create_agent(
                ScriptedChatModel([call("get_invoice", invoice_id=f"I{n}"), said]),
                [get_invoice],
                middleware=[_shadow()],
            )
            billing = subagent_tool(worker, name="billing", description="Billing questions.")
            parent = create_agent(
                ScriptedChatModel([call("billing", request=f"invoice I{n}?"), said]),
                [billing],
                middleware=[_shadow()],
                checkpointer=saver,
            )
            question = {"messages": [HumanMessage(f"Is invoice I{n} paid?")]}
            parent.invoke(question, {"configurable": {"thread_id": f"t{n}"}})
    return path


@pytest.fixture(scope="module")
def report(database: Path) -> tuple[dict[str, Any], str]:
    """`toolstop report --db` on `database`: report.json and the summary."""
    out, folder = io.StringIO(), database.parent / "rep"
    assert main(["report", "--db", str(database), "--out", str(folder)], out=out) == 0
    return json.loads((folder / "report.json").read_text()), out.getvalue()


def test_a_subagent_tool_signals_already_and_its_sub_agents_tool_comes_first(
    report: tuple[dict[str, Any], str],
) -> None:
    document, summary = report
    assert document["namespaces"] == {"root": 6, "nested": 6}
    entries = {e["tool"]: e for e in document["candidates"]}
    billing, invoice = entries["billing"], entries["get_invoice"]
    assert billing["signals"] is True
    assert billing["convert_line"] is None
    assert "it is a subagent_tool" in billing["advice_why"]
    assert billing["advice_why"].endswith(
        "convert the sub-agent's own tools (get_invoice), whose stops travel up"
    )
    assert billing["why"] == billing["advice_why"]
    assert invoice["signals"] is False
    assert invoice["advice"] in ("convert", "convert_with_answer")
    assert document["candidates"][0]["tool"] == "get_invoice"
    assert "toolstop.convert(billing" not in summary
    [lead] = [line for line in summary.splitlines() if line.startswith("convert first")]
    assert lead.startswith("convert first, with an answer: get_invoice")


def test_from_checkpoints_it_signals_already_too(database: Path, tmp_path: Path) -> None:
    """`--from` reads the top level only: the tool is known by its results' artifacts, and
    its sub-agent's tools are not named (they are not in that source)."""
    out = io.StringIO()
    argv = ["report", "--from", str(database), "--out", str(tmp_path)]
    assert main(argv, out=out) == 0, out.getvalue()
    document = json.loads((tmp_path / "report.json").read_text())
    [billing] = document["candidates"]
    assert billing["tool"] == "billing"
    assert billing["signals"] is True
    assert billing["convert_line"] is None
    assert billing["advice_why"].endswith("own tools (not in this source), whose stops travel up")
    assert "toolstop.convert(billing" not in out.getvalue()
