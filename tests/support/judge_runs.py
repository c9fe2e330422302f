"""Shadow-mode databases for the judge's tests: one run per answer, a tool called first."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from routers import ROUTERS
from toolstop import StopPolicy
from toolstop.testing import ScriptedChatModel, call

__all__ = ["recorded"]


def recorded(db: Path, tool: Any, answers: list[str]) -> Path:
    """`db`, a SQLite database of one shadow-mode run per answer: `tool` called, then it."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(str(db)) as saver:
        for n, answer in enumerate(answers):
            model = ScriptedChatModel([call(tool.name, order_id=str(n)), answer])
            agent = ROUTERS[0].build(
                model, [tool], policy=StopPolicy(mode="never"), checkpointer=saver
            )
            agent.invoke(
                {"messages": [HumanMessage("Where is it?")]},
                {"configurable": {"thread_id": f"thread-{n}"}},
            )
    logging.getLogger("toolstop").setLevel(logging.NOTSET)
    return db
