"""`toolstop bench --agent`: your agent, your tools, your questions, under never / hard / polish.

Every question runs through `FACTORY(model, tools, StopPolicy(mode=...))` once per mode,
interleaved question by question in one process, with your real tools. Model calls and tokens
are counted from the model's callbacks (provider-reported `usage_metadata`), as the simulated
bench counts them; the rules come from each run's `stop_record`. One question's error is
recorded and the run goes on.

The agent runs as shipped: through `ainvoke` when it works only in async code (a tool written
with `async def`, a middleware with only `awrap_model_call`), found from the tools or from the
first run that says so; a run that pauses at your own human review is resumed on the bench's
own in-memory checkpointer with every call approved (`reviews` counts them). A tool call that
ended in an error (`status="error"`: an exception the agent sent back to the model) is counted
per mode in `tool_errors`: savings measured over failing tools are no savings.

Without `--model`, a simulated model stands in (`ToolPickingModel`): it calls the tool whose
name or description shares the most words with the question, with arguments generated from the
tool's schema, retries a transient failure up to three times, and answers; it measures the
mechanics, not your model.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from pydantic import Field

from toolstop._check.factory import AgentFactory
from toolstop._check.routers import in_new_loop, resumable
from toolstop.bench.workload import CallCounter, RunTotals
from toolstop.errors import ToolstopConfigError
from toolstop.examples.simulated import LatencyChatModel
from toolstop.policy import Mode, StopPolicy
from toolstop.testing.scripted import approximate_usage
from toolstop.testing.stand_ins import example_args

__all__ = ["MODES", "ModeTotals", "ToolPickingModel", "load_questions", "run_agent_bench"]

MODES: tuple[Mode, ...] = ("never", "hard", "polish")
ANSWER = "Here is the answer, based on the tool's result above."
_RETRIES = 3


def load_questions(path: Path) -> list[str]:
    """Questions from a JSONL file (`{"question": "..."}` per line) or plain text (one a line).

    A file is JSONL when its name ends in `.jsonl` or its first non-blank line starts with `{`.
    Blank lines are skipped.

    Raises:
        ToolstopConfigError: a missing or unreadable file, a line that is not a JSON object
            with a non-empty string `question`, or no question at all; naming the line.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"--questions {path}: no such file"
        raise ToolstopConfigError(msg) from None
    except (OSError, UnicodeDecodeError) as error:
        msg = f"--questions {path}: cannot read it ({error})"
        raise ToolstopConfigError(msg) from None
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        msg = f"--questions {path} has no questions"
        raise ToolstopConfigError(msg)
    if not (path.suffix == ".jsonl" or lines[0][1].startswith("{")):
        return [line for _, line in lines]
    questions = []
    for number, line in lines:
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            msg = f"--questions {path} line {number}: not JSON ({error.msg})"
            raise ToolstopConfigError(msg) from None
        question = item.get("question") if isinstance(item, dict) else None
        if not isinstance(question, str) or not question.strip():
            msg = (
                f'--questions {path} line {number}: expected {{"question": "..."}}, got {line:.60}'
            )
            raise ToolstopConfigError(msg)
        questions.append(question)
    return questions


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", text.lower()) if len(w) > 2}


class ToolPickingModel(LatencyChatModel):
    """A simulated model for `bench --agent` without `--model` (see the module docstring)."""

    tools: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "toolstop-bench-tool-picking"

    def _pick(self, question: str) -> BaseTool:
        words = _words(question)
        scores = [
            (len(words & _words(f"{t.name.replace('_', ' ')} {t.description}")), -i)
            for i, t in enumerate(self.tools)
        ]
        return self.tools[-max(scores)[1]]  # type: ignore[no-any-return]

    def _answer(self, messages: list[BaseMessage], offered: bool) -> AIMessage:
        question = next((m for m in messages if isinstance(m, HumanMessage)), None)
        last = messages[-1] if messages else None
        turns = sum(1 for m in messages if isinstance(m, AIMessage) and m.tool_calls)
        retry = isinstance(last, ToolMessage) and (
            last.status == "error"
            or (isinstance(last.artifact, dict) and last.artifact.get("reason") == "transient")
        )
        if offered and self.tools and (turns == 0 or (retry and turns <= _RETRIES)):
            tool = self._pick(str(question.content) if question else "")
            call = {"name": tool.name, "args": example_args(tool), "id": f"call-{turns + 1}"}
            response = AIMessage(content="", tool_calls=[call])
        else:
            response = AIMessage(content=ANSWER)
        response.usage_metadata = approximate_usage(messages, response)
        return response


@dataclass(kw_only=True)
class ModeTotals(RunTotals):
    """What one mode cost over the questions."""

    behaviour: Mode
    errors: int = 0
    would_stop: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    reviews: int = 0
    first_tool_error: str | None = None

    def add_tools(self, messages: Sequence[Any]) -> None:
        """Count a run's tool results and those that are errors."""
        for message in messages:
            if not isinstance(message, ToolMessage):
                continue
            self.tool_calls += 1
            if message.status == "error":
                self.tool_errors += 1
                if self.first_tool_error is None:
                    self.first_tool_error = f"{message.name}: {str(message.content)[:200]}"

    @property
    def tools_failing(self) -> bool:
        """Whether most of this mode's tool calls failed."""
        return self.tool_calls > 0 and 2 * self.tool_errors > self.tool_calls

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON for bench.json."""
        return {
            "name": f"agent-{self.behaviour}",
            "router": "agent",
            "behaviour": self.behaviour,
            "queries": self.queries,
            "model_calls": self.model_calls,
            "narration_calls": self.narration_calls,
            **self.costs(self.queries - self.errors),
            "errors": self.errors,
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            "reviews": self.reviews,
            "would_stop": self.would_stop,
            "rules": dict(sorted(self.rules.items())),
        }


def run_agent_bench(
    factory: AgentFactory,
    tools: Sequence[BaseTool],
    questions: Sequence[str],
    *,
    model: Any,
    modes: Sequence[Mode] = MODES,
    on_question: Callable[[], None] | None = None,
) -> tuple[list[ModeTotals], list[dict[str, Any]]]:
    """Run every question under every mode; return the totals per mode and the failed runs.

    One agent per mode, built once. The errors are `{"index", "question", "mode", "error"}`, one per
    failed run.

    Raises:
        ToolstopConfigError: the factory raised while building an agent.
    """
    agents = {
        mode: _with_saver(factory.build_or_refuse(model, tools, StopPolicy(mode=mode)))
        for mode in modes
    }
    totals = {mode: ModeTotals(behaviour=mode) for mode in modes}
    errors: list[dict[str, Any]] = []
    session = uuid.uuid4().hex[:8]
    runner = _Runner(run_async=any(_async_only(t) for t in tools))
    for index, question in enumerate(questions):
        for mode in modes:
            total = totals[mode]
            total.queries += 1
            thread = f"toolstop-bench-{session}-{mode}-{index}"
            start = time.perf_counter()
            try:
                counter, state, reviews = runner.run(agents[mode], question, thread)
            except _Failed as failed:
                counter, error = failed.counter, failed.error
                total.errors += 1
                total.rules["error"] += 1
                text = f"{type(error).__name__}: {error}"
                errors.append(
                    {"index": index, "question": question, "mode": mode, "error": text[:500]}
                )
                state = None
            else:
                total.wall_s += time.perf_counter() - start
                total.reviews += reviews
            total.add_calls(counter)
            if state is not None:
                record = state.get("stop_record") if isinstance(state, dict) else None
                rule = record.get("rule") if isinstance(record, dict) else "no stop_record"
                total.rules[str(rule)] += 1
                if isinstance(record, dict) and record.get("would_stop"):
                    total.would_stop += 1
                total.add_tools(state.get("messages") or [] if isinstance(state, dict) else [])
        if on_question is not None:
            on_question()
    return list(totals.values()), errors


_SYNC_UNSUPPORTED = ("Synchronous implementation of", "does not support sync invocation")
_MAX_REVIEWS = 20


def _async_only(tool: BaseTool) -> bool:
    """A tool written with `async def` (it cannot run in `invoke()`)."""
    return getattr(tool, "func", None) is None and getattr(tool, "coroutine", None) is not None


def _with_saver(agent: Any) -> Any:
    """A compiled graph with the bench's own in-memory checkpointer (so a human-review
    interrupt can be resumed, and no bench run is written to your database)."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.pregel import Pregel

    if isinstance(agent, Pregel):
        return agent.copy(update={"checkpointer": InMemorySaver()})
    return agent


class _Failed(Exception):
    def __init__(self, counter: CallCounter, error: Exception) -> None:
        super().__init__(str(error))
        self.counter, self.error = counter, error


def _approve_all(state: Any) -> Any:
    """The resume value approving the first pending interrupt's every request, or None."""
    for task in getattr(state, "tasks", ()):
        for pending in task.interrupts:
            value = pending.value
            requests = value.get("action_requests") if isinstance(value, dict) else None
            return {"decisions": [{"type": "approve"}] * max(1, len(requests or ()))}
    return None


class _Runner:
    """Runs one question: sync until the agent shows it runs only in async code; every
    interrupt approved."""

    def __init__(self, *, run_async: bool) -> None:
        self.run_async = run_async

    def run(self, agent: Any, question: str, thread: str) -> tuple[CallCounter, Any, int]:
        counter = CallCounter()
        config = {"callbacks": [counter], "configurable": {"thread_id": thread}}
        try:
            if self.run_async:
                return (counter, *in_new_loop(_arun(agent, question, config)))
            return (counter, *_run(agent, question, config))
        except Exception as error:
            if self.run_async or not any(t in str(error) for t in _SYNC_UNSUPPORTED):
                raise _Failed(counter, error) from error
        self.run_async = True
        return self.run(agent, question, f"{thread}-async")


def _run(agent: Any, question: str, config: dict[str, Any]) -> tuple[Any, int]:
    from langgraph.types import Command

    state = agent.invoke({"messages": [HumanMessage(question)]}, config)
    for reviews in range(_MAX_REVIEWS):
        resume = _approve_all(agent.get_state(config)) if resumable(agent) else None
        if resume is None:
            return state, reviews
        state = agent.invoke(Command(resume=resume), config)
    return state, _MAX_REVIEWS


async def _arun(agent: Any, question: str, config: dict[str, Any]) -> tuple[Any, int]:
    from langgraph.types import Command

    state = await agent.ainvoke({"messages": [HumanMessage(question)]}, config)
    for reviews in range(_MAX_REVIEWS):
        resume = _approve_all(await agent.aget_state(config)) if resumable(agent) else None
        if resume is None:
            return state, reviews
        state = await agent.ainvoke(Command(resume=resume), config)
    return state, _MAX_REVIEWS
