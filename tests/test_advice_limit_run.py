"""A run a call limit ended on a repeated call (a new user's trial of issue #51's stop): its
limit message is never paired with a result as a final answer."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from routers import MIDDLEWARE_UNAVAILABLE

if MIDDLEWARE_UNAVAILABLE:  # the trial's agent is a create_agent with StopOnArtifact
    pytest.skip(MIDDLEWARE_UNAVAILABLE, allow_module_level=True)

from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from toolstop import StopOnArtifact, StopPolicy
from toolstop.cli import main
from toolstop.testing import ScriptedChatModel, call

CATALOG = [{"sku": f"SH-{n}", "name": f"Shoe {n}", "price": 40 + 10 * n} for n in range(8)]


@tool
def search_products(query: str) -> str:
    """Search the catalog."""
    return json.dumps({"results": CATALOG, "total": 23, "page": 1})


@pytest.fixture(scope="module")
def shop_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six runs that pick one shoe of the list; one a call limit ends on a second search."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path_factory.mktemp("shop") / "shop.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        for n in range(6):
            script = [call("search_products", query="shoes"), f"Shoe {n} costs {40 + 10 * n}."]
            agent = create_agent(
                ScriptedChatModel(script),
                [search_products],
                middleware=[StopOnArtifact(StopPolicy(mode="never"))],
                checkpointer=saver,
            )
            agent.invoke(
                {"messages": [HumanMessage("shoes?")]}, {"configurable": {"thread_id": f"s{n}"}}
            )
        limited = create_agent(
            ScriptedChatModel(
                [call("search_products", query="a"), call("search_products", query="b")]
            ),
            [search_products],
            middleware=[
                StopOnArtifact(StopPolicy(mode="never")),
                ModelCallLimitMiddleware(run_limit=2, exit_behavior="end"),
            ],
            checkpointer=saver,
        )
        limited.invoke(
            {"messages": [HumanMessage("shoes?")]}, {"configurable": {"thread_id": "L1"}}
        )
    return db


def test_the_limit_message_is_no_final_answer_among_the_examples(
    shop_db: Path, tmp_path: Path
) -> None:
    out = io.StringIO()
    argv = ["report", "--db", str(shop_db), "--out", str(tmp_path), "--examples", "7"]
    assert main(argv, out=out) == 0
    document = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    [entry] = [e for e in document["candidates"] if e["tool"] == "search_products"]
    assert document["ended_by"] == {"ModelCallLimitMiddleware": 1}
    examples = entry["examples"]
    assert {e["thread_id"] for e in examples} == {f"s{n}" for n in range(6)}
    assert not any("limits exceeded" in e["final_answer"] for e in examples)
    assert all(e["judged"]["action"] == "selected" for e in examples)


def test_explain_names_a_later_call_of_the_same_tool(shop_db: Path) -> None:
    out = io.StringIO()
    assert main(["explain", "--db", str(shop_db), "L1"], out=out) == 0
    said = out.getvalue()
    assert "ended by ModelCallLimitMiddleware" in said
    assert "if search_products signalled a stop, a later search_products call would not" in said
