"""A LangSmith run export: JSONL of runs; the chat-model and tool runs of a trace, one conversation.

Each line is one run as LangSmith stores it (its run data format): `id`, `trace_id`,
`parent_run_id`, `run_type` (`llm`, `tool`, `chain`, ...), `inputs`, `outputs`, `extra`,
`start_time`, `dotted_order`, and the token counts `prompt_tokens` / `completion_tokens`. The
runs of one trace (`trace_id`, else the run's own `id` for a root) form one conversation:

- the `llm` runs, in `dotted_order` order (else by the instant of `start_time`, whatever its ISO
  8601 form; a trace with a time that cannot be read keeps the file's order), give the history
  each call was given (`inputs.messages`, a list of messages or a list of such lists, each
  message in LangChain's serialized form or a role/content dict) and its answer
  (`outputs.generations[0][0].message`, or an OpenAI response's `choices[0].message`);
- each answer's usage is its message's `usage_metadata`, else the run's
  `prompt_tokens` / `completion_tokens`, else `outputs.llm_output.token_usage`;
- a `tool` run whose output is a tool message (`outputs.output` with a `tool_call_id`) gives
  the result of a call no later history shows;
- the first model run's `extra.invocation_params.tools` (the tool definitions it was offered,
  when the export has them) are counted in the token estimate of each call without usage.

Runs are grouped by trace with a bound (`max_open` traces at once; see `_traces`): an export
sorted by trace, as LangSmith's bulk export writes it per trace, needs one.

Deliberately not handled: plain-text LLM runs (`inputs.prompts`), tool runs without a call id
in their output, and threads: each trace is its own conversation, even when several traces
are runs of one LangGraph thread.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop.report.sources._base import (
    Conversation,
    ReadProblems,
    Unreadable,
    json_records,
    usage,
)
from toolstop.report.sources._traces import (
    MAX_OPEN_TRACES,
    ModelCall,
    TraceLimits,
    TraceParts,
    conversations,
    first_seen,
    first_str,
    group_by_trace,
    in_time_order,
    kept_size,
)
from toolstop.report.sources.langchain import lc_message

__all__ = ["MAX_TOOLS", "compact_run", "is_langsmith", "read_langsmith"]


def is_langsmith(value: Any) -> bool:
    """Whether a decoded line looks like a LangSmith run."""
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("run_type"), str)
        and (isinstance(value.get("trace_id"), str) or isinstance(value.get("id"), str))
    )


def _trace(run: Any) -> str | None:
    if not isinstance(run, Mapping):
        return None
    return first_str(run.get("trace_id"), run.get("id"))


def _history(inputs: Any, where: str) -> list[BaseMessage]:
    found = inputs.get("messages") if isinstance(inputs, Mapping) else None
    if not isinstance(found, list):
        return []
    if found and all(isinstance(m, list) for m in found):  # one list per prompt: the first
        found = found[0]
    return [lc_message(m, f"{where} input {i + 1}") for i, m in enumerate(found)]


def _answer(run: Mapping[str, Any], where: str) -> AIMessage | None:
    outputs = run.get("outputs")
    if not isinstance(outputs, Mapping):
        return None
    raw: Any = None
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0]
        first = first[0] if isinstance(first, list) and first else first
        raw = first.get("message") if isinstance(first, Mapping) else None
    choices = outputs.get("choices")
    if raw is None and isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        raw = choices[0].get("message")
    if raw is None:
        raw = outputs.get("output") if isinstance(outputs.get("output"), Mapping) else None
    if raw is None:
        return None
    message = lc_message(raw, f"{where} output")
    if not isinstance(message, AIMessage):
        msg = f"{where}: the output is a {message.type} message, not an answer"
        raise Unreadable(msg)
    if message.usage_metadata is None:
        llm_output = outputs.get("llm_output")
        message.usage_metadata = (
            usage(run)
            or usage(llm_output.get("token_usage") if isinstance(llm_output, Mapping) else None)
            or usage(outputs.get("usage"))
        )
    return message


def _tool_result(run: Mapping[str, Any], where: str) -> ToolMessage | None:
    outputs = run.get("outputs")
    raw = outputs.get("output") if isinstance(outputs, Mapping) else None
    if not isinstance(raw, Mapping):
        return None
    message = lc_message(raw, f"{where} output")
    return message if isinstance(message, ToolMessage) else None


def _thread(run: Mapping[str, Any]) -> str | None:
    extra = run.get("extra")
    metadata = extra.get("metadata") if isinstance(extra, Mapping) else None
    if not isinstance(metadata, Mapping):
        return None
    keys = ("thread_id", "session_id", "conversation_id")
    return first_str(*(metadata.get(k) for k in keys))


def _tools(run: Mapping[str, Any]) -> Any:
    """The tool definitions a model run was invoked with (`extra.invocation_params.tools`)."""
    extra = run.get("extra")
    params = extra.get("invocation_params") if isinstance(extra, Mapping) else None
    found = params.get("tools") if isinstance(params, Mapping) else None
    return found if isinstance(found, list) else None


def _in_order(runs: list[tuple[int, Any]], problems: ReadProblems) -> list[tuple[int, Any]]:
    """A trace's runs by `dotted_order` (fixed-width UTC times: compared as text) when every
    run has one, else by the instant of `start_time` (see `in_time_order`)."""
    if all(isinstance(run.get("dotted_order"), str) for _, run in runs):
        return sorted(runs, key=lambda item: (item[1]["dotted_order"], item[0]))
    return in_time_order(runs, lambda run: run.get("start_time"), problems)


def trace_conversation(
    trace: str, first_line: int, runs: list[tuple[int, Any]], problems: ReadProblems
) -> Conversation | None:
    """The conversation of one trace's runs (None: the trace has no `llm` run).

    Raises:
        Unreadable: a run that cannot be read, or a trace without a model call's messages.
    """
    parts = TraceParts()
    for line, run in _in_order(runs, problems):
        where = f"line {line}"
        parts.thread = parts.thread or _thread(run)
        if run.get("run_type") == "llm":
            if parts.tools is None:
                parts.tools = _tools(run)
            parts.calls.append(ModelCall(_history(run.get("inputs"), where), _answer(run, where)))
        elif run.get("run_type") == "tool":
            parts.add_result(_tool_result(run, where))
    return parts.conversation(trace, first_line, missing="chat model run with messages")


def read_langsmith(
    path: Path,
    problems: ReadProblems,
    *,
    max_open: int = MAX_OPEN_TRACES,
    limits: TraceLimits | None = None,
    records: Iterable[tuple[int, Any]] | None = None,
) -> Iterator[Conversation]:
    """The conversations of a LangSmith run export (JSONL), one per trace, streamed.

    Each trace keeps only what its conversation reads (`compact_run`), within `limits`
    (`TraceLimits`: a trace over them is counted as unreadable). `records` gives the runs
    decoded some other way (a Parquet bulk export's rows) instead of the file's JSON lines.

    Raises:
        OSError: the file cannot be opened.
    """

    threads: OrderedDict[str, None] = OrderedDict()
    tooled: OrderedDict[str, None] = OrderedDict()

    def runs() -> Iterator[tuple[int, Any]]:
        for line, value in records if records is not None else json_records(path, problems):
            if not isinstance(value, Mapping) or not isinstance(value.get("run_type"), str):
                problems.line_problem(line, "not a run (an object with a run_type)")
                continue
            run = compact_run(value)
            extra = run.get("extra")
            tools = isinstance(extra, dict) and "invocation_params" in extra
            if tools and not first_seen(tooled, _trace(run)):  # one list of tools per trace
                del run["extra"]["invocation_params"]
                if not run["extra"]:
                    del run["extra"]
            names_thread = run.get("run_type") not in ("llm", "tool") and "extra" in run
            if names_thread and not first_seen(threads, _trace(run)):  # once is enough
                del run["extra"]
            yield line, run

    groups = group_by_trace(
        runs(), _trace, problems, max_open=max_open, weigh=_weigh, limits=limits
    )

    def build(trace: str, first_line: int, runs: list[tuple[int, Any]]) -> Conversation | None:
        return trace_conversation(trace, first_line, runs, problems)

    yield from conversations(groups, build, problems)


MAX_TOOLS = 1000
"""The tool definitions a trace keeps (the first model run's, read first), the rest let go."""

_ORDER_KEYS = ("id", "trace_id", "run_type", "dotted_order", "start_time")
_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")


def compact_run(run: Mapping[str, Any]) -> dict[str, Any]:
    """What `trace_conversation` reads of a run, no more.

    Its place in the trace and thread; an `llm` run's messages, outputs, token counts and the
    tool definitions it was invoked with; a `tool` run's output. A run of another type (a
    chain, a retriever: `_weigh` lets it go) keeps only its place and thread."""
    kept: dict[str, Any] = {key: run[key] for key in _ORDER_KEYS if key in run}
    thread = _thread(run)
    if thread is not None:
        kept["extra"] = {"metadata": {"thread_id": thread}}
    kind = run.get("run_type")
    inputs, outputs = run.get("inputs"), run.get("outputs")
    if kind == "llm":
        kept.update({key: run[key] for key in _USAGE_KEYS if key in run})
        tools = _tools(run)
        if tools is not None:  # at most MAX_TOOLS definitions
            kept.setdefault("extra", {})["invocation_params"] = {"tools": tools[:MAX_TOOLS]}
        if isinstance(inputs, Mapping) and "messages" in inputs:
            kept["inputs"] = {"messages": inputs["messages"]}
        if isinstance(outputs, Mapping):
            kept["outputs"] = {
                key: outputs[key]
                for key in ("generations", "choices", "output", "llm_output", "usage")
                if key in outputs
            }
    elif kind == "tool" and isinstance(outputs, Mapping) and "output" in outputs:
        kept["outputs"] = {"output": outputs["output"]}
    return kept


def _weigh(run: Mapping[str, Any]) -> int | None:
    """A compact run's kept size, every field it keeps counted (its place, thread, messages,
    outputs, counts and tool definitions); `None` for a run the conversation does not read."""
    if run.get("run_type") not in ("llm", "tool") and "extra" not in run:
        return None
    return kept_size(run)
