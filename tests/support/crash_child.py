"""A child process for the crash tests: runs (or resumes) a thread and pauses at every node
boundary, printing where it is, until the parent says go (or kills it with SIGKILL)."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any

from langchain_core.messages import HumanMessage

from toolstop._check.routers import ROUTERS
from toolstop.cli.checkpoints import open_checkpointer
from toolstop.examples import make_write_record_tool
from toolstop.testing import ScriptedChatModel, call


class RecordStore(MutableMapping[str, str]):
    """write_record's store in its own SQLite file; counts real writes (applications)."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute(
            "create table if not exists records (key text primary key, value text, writes int)"
        )

    def __getitem__(self, key: str) -> str:
        row = self.db.execute("select value from records where key = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(key)
        return str(row[0])

    def __setitem__(self, key: str, value: str) -> None:
        self.db.execute(
            "insert into records values (?, ?, 1) on conflict(key) "
            "do update set value = excluded.value, writes = writes + 1",
            (key, value),
        )
        pause("inside-tool")  # the write is durable; the tools step's checkpoint is not yet

    def __delitem__(self, key: str) -> None:
        self.db.execute("delete from records where key = ?", (key,))

    def __iter__(self) -> Iterator[str]:
        return iter([row[0] for row in self.db.execute("select key from records")])

    def __len__(self) -> int:
        return int(self.db.execute("select count(*) from records").fetchone()[0])


def pause(where: str) -> None:
    print(f"AT {where}", flush=True)
    if sys.stdin.readline().strip() != "go":
        sys.exit(3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True, help="a SQLite path or a postgresql:// URL")
    parser.add_argument("--thread", default="crash")
    parser.add_argument("--store", required=True)
    parser.add_argument("--router", default="graph")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    router = ROUTERS[args.router]
    model = ScriptedChatModel([call("write_record", key="order-1", value="paid")])
    tool = make_write_record_tool(RecordStore(args.store))
    config: Any = {"configurable": {"thread_id": args.thread}}
    with open_checkpointer(args.db) as saver:
        agent = router.build(model, [tool], policy=None, checkpointer=saver)
        inputs = None if args.resume else {"messages": [HumanMessage("Save order-1 as paid.")]}
        for update in agent.stream(inputs, config, stream_mode="updates", durability="sync"):
            for node in update:
                pause(f"after-{node}")
        state = agent.get_state(config).values
    print("RESULT " + json.dumps({
        "final": state["messages"][-1].content,
        "record": state["stop_record"],
        "artifacts": [getattr(m, "artifact", None) for m in state["messages"] if m.type == "tool"],
    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
