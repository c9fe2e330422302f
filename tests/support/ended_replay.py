"""A recorded conversation replayed through a real `create_agent` as far as the log goes.

The reference for logs that end mid-conversation (tests/test_sources_shadow.py,
tests/test_report_what_if.py): each run is one `invoke` of an unchanged `create_agent` with
`StopOnArtifact` on a SQLite checkpointer, a new scripted model per run holding that run's
recorded answers. Where the log ends a run without an answer the agent's run ends the way a real
one does: a tool call without a recorded result raises in its stand-in (as a hand-off that
paused the run, or a process that died, leaves it), tool results with no recorded answer after
them meet a model with nothing left to say (it raises: the run ends there). A last run with no
model call at all raises at its model call. One more run then closes whatever was left open, as
a user's next message would; the records are read back as `toolstop report --db` reads them,
and the closing run's own record is left out.

The runs are cut here on their own, from the message types alone (user messages in a row are
one run's input; assistant text before the first user message is the first run's input)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from toolstop import StopOnArtifact, StopPolicy
from toolstop.testing import ScriptedChatModel, replay

__all__ = ["ended_replay"]


def _runs(messages: Sequence[BaseMessage]) -> list[tuple[list[BaseMessage], list[AIMessage]]]:
    """(the run's input, its recorded answers) per run."""
    runs: list[tuple[list[BaseMessage], list[AIMessage]]] = []
    lead: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, HumanMessage):
            if runs and not runs[-1][1]:
                runs[-1][0].append(message)
            else:
                runs.append(([*lead, message], []))
                lead = []
        elif not runs:
            lead.append(message)
        elif isinstance(message, AIMessage):
            runs[-1][1].append(message)
    return runs


def ended_replay(
    messages: Sequence[BaseMessage],
    db: Path,
    *,
    policy: StopPolicy | None = None,
    artifacts: bool = False,
    prepare: Any = None,
) -> tuple[list[dict[str, Any]], list[int]]:
    """The records of a real replay of `messages` (see the module docstring), and the model
    calls each recorded run made (`prepare`, if given, maps the messages first, e.g. to put
    signals on results)."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.sqlite import SqliteSaver

    from toolstop.report.reader import open_database

    prepared = prepare(messages) if prepare is not None else list(messages)
    recording = replay(prepared, content_and_artifact=artifacts)
    config: Any = {"configurable": {"thread_id": "t"}}
    calls: list[int] = []
    runs = [*_runs(prepared), ([HumanMessage("(the next message)")], [AIMessage("closed")])]
    with SqliteSaver.from_conn_string(str(db)) as saver:
        for number, (given, answers) in enumerate(runs):
            model = ScriptedChatModel(answers)
            agent = create_agent(
                model,
                list(recording.tools),
                middleware=[StopOnArtifact(policy or StopPolicy(mode="never"))],
                checkpointer=saver,
            )
            with contextlib.suppress(Exception):  # a run that ends where the log ends it
                agent.invoke({"messages": given}, config)
            if number < len(runs) - 1:
                calls.append(len(model.calls))
    with open_database(str(db)) as database:
        ends, _ = database.run_ends("t", "")
    return [dict(end.record) for end in ends][:-1], calls
