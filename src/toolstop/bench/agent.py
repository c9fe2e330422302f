"""`toolstop bench --agent`: your agent, your tools, your questions, under never / hard / polish.

Every question runs through `FACTORY(model, tools, StopPolicy(mode=...))` once per mode (and
per `--repeat`), interleaved question by question in one process, with your real tools, after
one warm-up run per mode that is not counted. Model calls and tokens are counted from the
model's callbacks (provider-reported `usage_metadata`), as the simulated bench counts them; the
rules come from each run's `stop_record`. One question's error is recorded and the run goes
on. A run whose tool results signalled a stop but that kept no `stop_record` is `unrouted`: the
agent has no toolstop router.

The agent runs as shipped: through `ainvoke` when it works only in async code (a tool written
with `async def`, a middleware with only `awrap_model_call`), found from the tools or from the
first run that says so, every async run on the bench's one event loop (`agent_runs`); a run
that pauses at your own human review is resumed on the bench's own in-memory checkpointer with
every call approved (`reviews` counts them). A tool call that
ended in an error (`status="error"`: an exception the agent sent back to the model) is counted
per mode in `tool_errors`: savings measured over failing tools are no savings.

Without `--model`, a simulated model stands in (`ToolPickingModel`): it calls the tool whose
name or description shares the most words with the question, with arguments generated from the
tool's schema, retries a transient failure up to three times, and answers; it measures the
mechanics, not your model.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from pydantic import Field

from toolstop._check.factory import AgentFactory
from toolstop._check.preflight import refuse_tools_not_offered
from toolstop._printable import printable
from toolstop._redact import shown_error
from toolstop._secrets import mask_secrets
from toolstop.bench.agent_runs import Failed, Runner, async_only, run_levels, with_saver
from toolstop.bench.runner import rotated
from toolstop.bench.workload import RunTotals
from toolstop.decision import read_signal
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
    unrouted: int = 0
    """Runs in which a tool result signalled a stop and that kept no `stop_record`: the agent
    has no toolstop router."""
    first_tool_error: str | None = None

    def add_tools(self, messages: Sequence[Any]) -> bool:
        """Count a run's tool results and those that are errors; True when one signalled a stop.

        A signalled stop is a valid toolstop artifact with `stop: true`."""
        signalled = False
        for message in messages:
            if not isinstance(message, ToolMessage):
                continue
            self.tool_calls += 1
            signalled = signalled or read_signal(message).stop
            if message.status == "error":
                self.tool_errors += 1
                if self.first_tool_error is None:
                    text = printable(mask_secrets(f"{message.name}: {message.content}"))
                    self.first_tool_error = text[:200]
        return signalled

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
            "unrouted": self.unrouted,
            "rules": dict(sorted(self.rules.items())),
        }


def run_agent_bench(
    factory: AgentFactory,
    tools: Sequence[BaseTool],
    questions: Sequence[str],
    *,
    model: Any,
    modes: Sequence[Mode] = MODES,
    repeat: int = 1,
    on_question: Callable[[], None] | None = None,
    run_config: Mapping[str, Any] | None = None,
) -> tuple[list[ModeTotals], list[dict[str, Any]]]:
    """Run every question under every mode, `repeat` times; return the totals and failed runs.

    One agent per mode, built once. First a warm-up: the first question once per mode, not
    counted (the first runs pay for imports, caches and the client's connections). Then the
    questions one by one, each under every mode, the modes' order rotating by one per question
    and per repeat (`rotated`). Every async run is on the one event loop of the bench. The
    errors are `{"index", "question", "mode", "repeat", "error"}`, one per failed run, the
    question and the error (`Type: message`) with secrets masked and control characters
    escaped. `run_config` (`configurable`, `tags`, `metadata`) is merged into each run's
    config, for tools and prompts that read it.

    Raises:
        ToolstopConfigError: the factory raised while building an agent, or the agent does
            not offer the tools to its model (`refuse_tools_not_offered`).
    """
    built = {mode: factory.build_or_refuse(model, tools, StopPolicy(mode=mode)) for mode in modes}
    for agent in built.values():
        refuse_tools_not_offered(agent, tools, factory.name, "bench")
    agents = {mode: with_saver(agent) for mode, agent in built.items()}
    totals = {mode: ModeTotals(behaviour=mode) for mode in modes}
    errors: list[dict[str, Any]] = []
    session = uuid.uuid4().hex[:8]
    runner = Runner(run_async=any(async_only(t) for t in tools), run_config=run_config)
    try:
        for mode in modes if questions else ():  # the warm-up, not counted
            with contextlib.suppress(Failed):
                runner.run(agents[mode], questions[0], f"toolstop-bench-{session}-warm-up-{mode}")
        for round_ in range(repeat):
            for index, question in enumerate(questions):
                for mode in rotated(modes, index + round_):
                    thread = f"toolstop-bench-{session}-{mode}-{round_}-{index}"
                    failed = _count(runner, agents[mode], question, thread, totals[mode], round_)
                    if failed is not None:
                        errors.append(
                            {
                                "index": index,
                                "question": printable(mask_secrets(question))[:200],
                                "mode": mode,
                                "repeat": round_,
                                "error": shown_error(failed),
                            }
                        )
                if on_question is not None:
                    on_question()
    finally:
        runner.close()
    return list(totals.values()), errors


def _count(
    runner: Runner, agent: Any, question: str, thread: str, total: ModeTotals, repeat: int
) -> Exception | None:
    """Run one question and add what it cost to `total`; the error when it raised."""
    total.queries += 1
    start = time.perf_counter()
    try:
        counter, state, reviews = runner.run(agent, question, thread)
    except Failed as failed:
        total.errors += 1
        total.rules["error"] += 1
        total.add_calls(failed.counter)
        return failed.error
    total.add_wall(time.perf_counter() - start, repeat)
    total.reviews += reviews
    total.add_calls(counter)
    record = state.get("stop_record") if isinstance(state, dict) else None
    messages = list(state.get("messages") or [] if isinstance(state, dict) else [])
    if not isinstance(record, dict):  # a parent graph: the record is where its router is
        record, results = run_levels(agent, thread)
        messages = _each_once([*messages, *results])
    rule = record.get("rule") if isinstance(record, dict) else "no stop_record"
    total.rules[str(rule)] += 1
    if isinstance(record, dict) and record.get("would_stop"):
        total.would_stop += 1
    signalled = total.add_tools(messages)
    if signalled and not isinstance(record, dict):
        total.unrouted += 1
    return None


def _each_once(messages: Sequence[Any]) -> list[Any]:
    """The tool results among `messages`, each call once (a parent's messages and its
    subgraph's hold the same results)."""
    seen: set[Any] = set()
    once = []
    for message in messages:
        if isinstance(message, ToolMessage) and message.tool_call_id not in seen:
            seen.add(message.tool_call_id)
            once.append(message)
    return once
