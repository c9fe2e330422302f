"""Run a scenario on a router, record a normalised transcript, and explain every breach."""

from __future__ import annotations

import itertools
import json
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from toolstop._check.routers import Router, arun_agent, in_new_loop, resumable, run_agent
from toolstop._check.run_config import merged_config
from toolstop._check.scenarios import Scenario
from toolstop.decision import content_text, read_signal, shown
from toolstop.testing.history import PROVIDERS, history_problems
from toolstop.testing.scripted import ScriptedChatModel, ScriptExhaustedError

__all__ = [
    "CheckResult",
    "Transcript",
    "broken_runs",
    "check",
    "compare",
    "goldens_dir",
    "invariant_breaches",
    "judge",
    "load_golden",
    "planned_malformed_signals_hidden",
    "run_scenario",
    "write_golden",
]

Transcript = dict[str, Any]
"""A run as plain JSON: path, model calls, tool results, final message, record. No ids."""

QUESTION = "How do refunds work?"


def describe(message: BaseMessage) -> str:
    """A message as a short, id-free token: `human`, `ai`, `ai[lookup]`, `tool[lookup]`."""
    if isinstance(message, AIMessage):
        names = [c["name"] for c in message.tool_calls]
        return f"ai[{','.join(names)}]" if names else "ai"
    if isinstance(message, ToolMessage):
        error = ":error" if message.status == "error" else ""
        return f"tool[{message.name}]{error}"
    return message.type


def _signal(message: ToolMessage) -> str:
    signal = read_signal(message)
    if signal.problem is not None:
        return f"invalid:{signal.problem.value}"
    assert signal.reason is not None
    return f"{signal.reason.value}:{'stop' if signal.stop else 'continue'}"


def _tool_results(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Each tool result of a run: its tool and how toolstop read its signal."""
    return [{"tool": m.name, "signal": _signal(m)} for m in messages if isinstance(m, ToolMessage)]


def _normalise_record(record: Any) -> Any:
    if not isinstance(record, dict):
        return record
    tokens: dict[str, Any] = {
        k: ("<positive>" if record.get(k) else 0) for k in ("input_tokens", "output_tokens")
    }
    saved = record.get("would_save")
    if isinstance(saved, dict):  # token counts vary with langchain-core's approximation
        tokens["would_save"] = {
            **saved,
            **{k: ("<positive>" if saved.get(k) else 0) for k in ("input_tokens", "output_tokens")},
        }
    after = record.get("ended_after")
    if isinstance(after, dict):
        tokens["ended_after"] = {
            **after,
            **{k: ("<positive>" if after.get(k) else 0) for k in ("input_tokens", "output_tokens")},
        }
    firsts = record.get("after_first")
    if isinstance(firsts, dict):
        tokens["after_first"] = {
            tool: {
                **entry,
                **{
                    k: ("<positive>" if entry.get(k) else 0)
                    for k in ("input_tokens", "output_tokens")
                },
            }
            for tool, entry in firsts.items()
        }
    return {**record, **tokens}


def _final(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    if not messages:
        return {"type": None, "content": None}
    last = messages[-1]
    final: dict[str, Any] = {"type": describe(last), "content": content_text(last.content)}
    if isinstance(last, AIMessage):
        final["relay"] = bool((last.response_metadata or {}).get("toolstop", {}).get("relay"))
    return final


def _calls(model: ScriptedChatModel) -> list[dict[str, Any]]:
    return [
        {
            "saw": [describe(m) for m in c.messages],
            "tools": list(c.tools),
            "answer": describe(c.response),
        }
        for c in model.calls
    ]


def _after_a_note(results: dict[str, ToolMessage], wanted: list[str]) -> list[str]:
    """What one edited result shows when a note for the model precedes the tool's own text:
    the shown text of every tail of its content that starts on a new line."""
    if len(wanted) != 1 or wanted[0] not in results:
        return []
    message = results[wanted[0]]
    text = content_text(message.content)
    tails = [text[i + 1 :] for i, char in enumerate(text) if char == "\n"]
    return [content_text(shown(message.model_copy(update={"content": t}))) for t in tails]


def transcript_of(
    scenario: Scenario,
    router: Router,
    path: list[str],
    state: dict[str, Any],
    model: ScriptedChatModel | None,
) -> Transcript:
    """Build the normalised transcript of a finished run."""
    messages: list[BaseMessage] = list(state.get("messages", []))
    transcript: Transcript = {
        "scenario": scenario.name,
        "mode": scenario.mode,
        "router": router.name,
        "description": scenario.description,
        "path": path,
    }
    if model is not None:
        transcript["model_calls"] = _calls(model)
        transcript["script"] = {"steps": len(scenario.script), "unused": model.remaining}
    transcript["tool_results"] = _tool_results(messages)
    transcript["final"] = _final(messages)
    record = state.get("stop_record")
    if isinstance(record, dict) and record.get("rule") in ("completed", "fatal"):
        # What the relay shows: the run's completed results and the deciding ones, in order.
        wanted = list(record.get("relayed") or record.get("tool_call_ids") or [])
        results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
        contents = [content_text(shown(results[i])) for i in wanted if i in results]
        if scenario.mode == "hard":
            relay, content = transcript["final"]["content"], "\n\n".join(contents)
            # A human-edited call's result starts with langchain's note for the model; the
            # relay is the tool's own text, which follows the note.
            edited = any(d.get("type") == "edit" for d in scenario.review)
            transcript["relay_is_tool_content"] = relay == content or (
                edited and bool(relay) and relay in _after_a_note(results, wanted)
            )
    transcript["history_problems"] = history_problems(messages, "all")
    transcript["stop_record"] = _normalise_record(state.get("stop_record"))
    return transcript


REVIEWER = "HumanInTheLoopMiddleware"
"""The name of the middleware whose interrupts a scenario's review decisions answer."""

MAX_RESUMES = 20
"""How many interrupts one run may raise before the check gives up on it (a loop of reviews)."""

SYNC_UNSUPPORTED = ("Synchronous implementation of", "does not support sync invocation")
"""Errors that mean the agent runs only in async code (an `async def` tool, a middleware with
only `awrap_model_call`): the check runs it again through `astream`."""


def needs_async(transcript: Transcript) -> bool:
    """Whether `transcript` is a run that failed only because it was run synchronously."""
    error = transcript.get("error")
    return isinstance(error, str) and any(text in error for text in SYNC_UNSUPPORTED)


@dataclass
class _Reviews:
    """A reviewer's state through one run: the scenario's decisions left, and who else paused
    the run (approved by default)."""

    decisions: list[dict[str, Any]]
    reviewer: str
    approved: list[str] = field(default_factory=list)
    waiting: str | None = None

    def answer(self, pending: list[tuple[str, Any]]) -> Any:
        """The resume value for the first pending interrupt."""
        task, value = pending[0]
        node = task.split(".", 1)[0]
        if node == self.reviewer and self.decisions:
            return {"decisions": [self.decisions.pop(0)]}
        requests = value.get("action_requests") if isinstance(value, dict) else None
        self.approved.append(node)
        return {"decisions": [{"type": "approve"}] * max(1, len(requests or ()))}


def _pending(state: Any) -> list[tuple[str, Any]]:
    """The pending interrupts, each named by the innermost task that raised it: a review inside
    a subgraph node (the toolstop agent in a parent graph) is its middleware's, not the node's
    (read with `get_state(config, subgraphs=True)`)."""
    found: list[tuple[str, Any]] = []
    for task in state.tasks:
        inner = getattr(task, "state", None)
        nested = _pending(inner) if hasattr(inner, "tasks") else []
        found += nested or [(task.name, i.value) for i in task.interrupts]
    return found


def _drive(
    agent: Any, config: dict[str, Any], reviews: _Reviews
) -> tuple[list[str], dict[str, Any]]:
    """Run, then answer every interrupt as a reviewer would until the run ends."""
    path, state = run_agent(agent, QUESTION, config)
    for _ in range(MAX_RESUMES):
        pending = _pending(agent.get_state(config, subgraphs=True)) if resumable(agent) else []
        if not pending:
            return path, state
        more, state = run_agent(agent, config=config, resume=reviews.answer(pending))
        path += more
    reviews.waiting = _pending(agent.get_state(config, subgraphs=True))[0][0].split(".", 1)[0]
    return path, state


async def _adrive(
    agent: Any, config: dict[str, Any], reviews: _Reviews
) -> tuple[list[str], dict[str, Any]]:
    """`_drive`, through `astream`."""
    path, state = await arun_agent(agent, QUESTION, config)
    for _ in range(MAX_RESUMES):
        pending = (
            _pending(await agent.aget_state(config, subgraphs=True)) if resumable(agent) else []
        )
        if not pending:
            return path, state
        more, state = await arun_agent(agent, config=config, resume=reviews.answer(pending))
        path += more
    waiting = _pending(await agent.aget_state(config, subgraphs=True))
    reviews.waiting = waiting[0][0].split(".", 1)[0]
    return path, state


def run_scenario(
    scenario: Scenario,
    router: Router,
    *,
    model: Any = None,
    callbacks: Sequence[Any] = (),
    reviewer: str = REVIEWER,
    checkpointer: bool = False,
    run_async: bool = False,
    run_config: Mapping[str, Any] | None = None,
) -> Transcript:
    """Run `scenario` on `router` and return its transcript (an exception is recorded, not raised).

    With `model=None` the scenario's script drives a `ScriptedChatModel`; otherwise `model` (a
    real chat model) decides, and only invariants can be checked. `callbacks` go into the run's
    config (LangChain callback handlers). The run has a thread id of its own, so an agent
    compiled with a checkpointer runs as well.

    Every interrupt is answered as a reviewer would: one from the middleware named `reviewer`
    with the scenario's next review decision, any other (your own human review) with approve;
    those are listed in the transcript's `interrupts`. `checkpointer`: give every run an
    in-memory checkpointer (not only the review scenarios), so any interrupt can be resumed.
    `run_async`: run through `astream` (for async tools and async-only middleware).
    `run_config`: your own run config (`configurable`, `tags`, `metadata`) merged into the
    run's (`toolstop._check.run_config.merged_config`).
    """
    # one model per scenario: its plain call ids (`call_<step>_<position>`) are the goldens'
    scripted = ScriptedChatModel(scenario.script, id_prefix="call") if model is None else None
    thread = f"toolstop-check-{scenario.key}-{uuid.uuid4().hex[:8]}"
    config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    if callbacks:
        config["callbacks"] = list(callbacks)
    if scenario.recursion_limit is not None:
        config["recursion_limit"] = scenario.recursion_limit
    config = merged_config(config, run_config)
    extra: dict[str, Any] = {}
    if scenario.middleware is not None:
        extra["middleware"] = scenario.middleware()
    saver = None
    if scenario.review or checkpointer:  # an interrupted run is resumed from its checkpoint
        from langgraph.checkpoint.memory import InMemorySaver

        saver = InMemorySaver()
    reviews = _Reviews(decisions=list(scenario.review), reviewer=reviewer)
    try:
        agent = router.build(
            scripted or model, scenario.tools(), policy=scenario.policy, checkpointer=saver, **extra
        )
        if run_async:
            path, state = in_new_loop(_adrive(agent, config, reviews))
        else:
            path, state = _drive(agent, config, reviews)
    except Exception as error:
        transcript: Transcript = {
            "scenario": scenario.name,
            "mode": scenario.mode,
            "router": router.name,
            "error": f"{type(error).__name__}: {error}",
        }
        if scripted is not None:
            calls = _calls(scripted)
            if isinstance(error, ScriptExhaustedError):
                seen = [describe(m) for m in error.messages]
                calls.append({"saw": seen, "tools": list(error.tools), "answer": "(unscripted)"})
                transcript["tool_results"] = _tool_results(error.messages)
            transcript["model_calls"] = calls
        if reviews.approved:
            transcript["interrupts"] = reviews.approved
        return transcript
    transcript = transcript_of(scenario, router, path, state, scripted)
    if reviews.approved:
        transcript["interrupts"] = reviews.approved
    if reviews.waiting is not None:
        transcript["waiting_for"] = reviews.waiting
    return transcript


# -- goldens ----------------------------------------------------------------------------------
def goldens_dir() -> Path:
    """Where the shipped golden transcripts live (inside the installed package)."""
    return Path(str(resources.files("toolstop._check") / "goldens"))


def _golden_path(directory: Path, golden: str, scenario: Scenario) -> Path:
    return directory / golden / f"{scenario.key}.json"


def load_golden(
    scenario: Scenario, golden: str, directory: Path | None = None
) -> Transcript | None:
    """The golden transcript of `scenario` for router `golden`, or None when there is none."""
    path = _golden_path(directory or goldens_dir(), golden, scenario)
    if not path.exists():
        return None
    data: Transcript = json.loads(path.read_text(encoding="utf-8"))
    return data


def write_golden(
    transcript: Transcript, scenario: Scenario, golden: str, directory: Path | None = None
) -> Path:
    """Write `transcript` as the golden of `scenario` for router `golden` (diff-friendly JSON)."""
    path = _golden_path(directory or goldens_dir(), golden, scenario)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(transcript, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


# -- breaches ---------------------------------------------------------------------------------
def _model_calls(transcript: Transcript) -> int | None:
    calls = transcript.get("model_calls")
    if isinstance(calls, list):
        return len(calls)
    return calls if isinstance(calls, int) else None


def _relay_hidden(transcript: Transcript) -> bool:
    """A model call that saw a plain AIMessage right after tool results: the 'variant B' loop."""
    for call in transcript.get("model_calls") or []:
        seen = call["saw"] if isinstance(call, dict) else []
        for before, after in itertools.pairwise(seen):
            if before.startswith("tool[") and after == "ai":
                return True
    return False


def invariant_breaches(scenario: Scenario, transcript: Transcript) -> list[str]:
    """Breaches that need no golden: they hold for any correct router and any model."""
    breaches: list[str] = []
    if _relay_hidden(transcript):
        breaches.append(
            "the model was called after a relay AIMessage that followed the tool results: a relay "
            "added in the same update hides the tool-calling AIMessage from the stop check (a "
            "wrap_tool_call returning the relay with the tool result?); relay only on the stop "
            "path, after the decision"
        )
    waiting = transcript.get("waiting_for")
    if waiting:
        breaches.append(
            f"the run was still waiting at a human-review interrupt from {waiting} after "
            f"{MAX_RESUMES} answers: a review that asks again on every resume never ends"
        )
    if "error" in transcript:
        error = transcript["error"]
        if error.startswith("ScriptExhaustedError"):
            breaches.append(
                "the model was called more often than a correct router calls it: the run did "
                f"not stop where it should have ({error})"
            )
        else:
            breaches.append(f"the run raised {error}; a router must end every run cleanly")
        return breaches
    final = transcript["final"]
    if final["type"] and final["type"].startswith("tool["):
        breaches.append(
            "the run ended on a ToolMessage, not an AIMessage: the stop came from return_direct, "
            "not from the artifact (remove return_direct; let the artifact decide)"
        )
    for problem in transcript.get("history_problems") or []:
        provider = problem.split(" ", 1)[0]
        who = provider if provider in PROVIDERS else "a provider"
        breaches.append(f"the history is invalid ({problem}): {who} would reject the next turn")
    script = transcript.get("script")
    if script and script.get("unused"):
        breaches.append(
            f"the run made fewer model calls than a correct router ({script['unused']} scripted "
            "answers unused): it stopped where it should have gone back to the model"
        )
    if not transcript.get("tool_results"):
        breaches.append(_no_tool_ran(transcript))
    if transcript.get("relay_is_tool_content") is False:
        breaches.append(
            "the final answer of a hard-mode stop is not what the run's results show (each "
            "result's answer, or its content verbatim, in call order)"
        )
    record = transcript.get("stop_record")
    if not isinstance(record, dict):
        breaches.append("no stop_record in the final state: the router is not toolstop's")
    elif (
        scenario.stops
        and scenario.mode == "hard"
        and not final.get("relay")
        and not _budget_narrated(scenario, record)
    ):
        breaches.append(
            "a hard-mode stop did not end on toolstop's relay: a model call was made after the "
            "stop, or the stop was not taken"
        )
    return breaches


def _no_tool_ran(transcript: Transcript) -> str:
    """Why no tool result could be checked: the model asked for none, or the run ended before
    the tool it asked for ran."""
    asked = [
        name
        for call in transcript.get("model_calls") or []
        if isinstance(call, dict) and str(call.get("answer", "")).startswith("ai[")
        for name in str(call["answer"])[3:-1].split(",")
    ]
    if not asked:
        return (
            "the model never called a tool, so the stop could not be checked (a scripted run "
            "always calls one; a real model may need a clearer question or tool support)"
        )
    record = transcript.get("stop_record")
    rule = record.get("rule") if isinstance(record, dict) else None
    ended = f"with rule {rule!r} " if rule else ""
    return (
        f"the model called {', '.join(dict.fromkeys(asked))}, but the run ended {ended}before "
        "any tool ran, so the stop after a tool could not be checked"
    )


def _budget_narrated(scenario: Scenario, record: dict[str, Any]) -> bool:
    """A spent budget that `on_budget="model"` ends with the model's answer, not a relay."""
    budget = record.get("rule") in ("retry_budget", "step_budget")
    return budget and scenario.policy.on_budget == "model"


def _path_text(path: Any) -> str:
    return " > ".join(path) if isinstance(path, list) else "none (the run did not finish)"


def _explain_difference(key: str, expected: Any, actual: Any) -> str:
    if key == "path":
        return f"expected path {_path_text(expected)}, got {_path_text(actual)}"
    if key == "model_calls":
        want = len(expected) if isinstance(expected, list) else expected
        got = len(actual) if isinstance(actual, list) else actual
        if want != got:
            hint = (
                "an extra model call: the router did not stop on the artifact"
                if (got or 0) > (want or 0)
                else "a missing model call: the run stopped too early"
            )
            return f"expected {want} model calls, got {got} ({hint})"
        return "the model calls saw different messages or tools than expected"
    if key == "final" and isinstance(expected, dict) and isinstance(actual, dict):
        return (
            f"expected the final {expected.get('type')} {expected.get('content')!r:.80}, "
            f"got {actual.get('type')} {actual.get('content')!r:.80}"
        )
    if key == "stop_record":
        if isinstance(expected, dict) and isinstance(actual, dict):
            fields = sorted(
                k for k in set(expected) | set(actual) if expected.get(k) != actual.get(k)
            )
            rule = ""
            if expected.get("rule") != actual.get("rule"):
                rule = f" (rule {expected.get('rule')!r} expected, {actual.get('rule')!r} recorded)"
            return f"the stop record differs in {', '.join(fields)}{rule}"
        return f"expected stop_record {expected!r}, got {actual!r}"
    return f"{key} differs: expected {expected!r}, got {actual!r}"


def compare(expected: Transcript | None, actual: Transcript) -> list[str]:
    """Sentences for every field in which `actual` differs from the golden `expected`."""
    if expected is None:
        return [
            "no golden transcript for this scenario and router: write them with --update-goldens "
            "(with the same --goldens DIR, and --agent/--tools for your own agent)"
        ]
    keys = [k for k in expected if k not in ("description", "router")]
    keys += [k for k in actual if k not in expected and k not in ("description", "router")]
    return [
        _explain_difference(key, expected.get(key), actual.get(key))
        for key in keys
        if expected.get(key) != actual.get(key)
    ]


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """One scenario on one router: what was expected, what happened, and every breach."""

    scenario: Scenario
    router: str
    expected: Transcript | None
    actual: Transcript
    breaches: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when there is no breach."""
        return not self.breaches

    def summary(self) -> dict[str, Any]:
        """A JSON row for `toolstop check --json`.

        `interrupts` (the middleware of your own human review that paused the run, each
        approved) only on a run that was paused."""
        paused = self.actual.get("interrupts")
        return {
            "scenario": self.scenario.name,
            "mode": self.scenario.mode,
            "router": self.router,
            "expected_path": (self.expected or {}).get("path"),
            "actual_path": self.actual.get("path"),
            "expected_model_calls": _model_calls(self.expected or {}),
            "actual_model_calls": _model_calls(self.actual),
            "passed": self.passed,
            "breaches": self.breaches,
            **({"interrupts": list(paused)} if paused else {}),
        }


def check(
    scenarios: Iterable[Scenario],
    routers: Iterable[Router],
    *,
    golden_for: dict[str, str] | None = None,
    directory: Path | None = None,
    model: Any = None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Run every scenario on every router and compare with the goldens and the invariants.

    Args:
        scenarios: What to run.
        routers: Where to run it.
        golden_for: Router name -> the name whose goldens it must match (default: its own).
        directory: The goldens' folder (default: the package's).
        model: A real chat model instead of the scripts; then only invariants are checked
            (a real model's words cannot match a golden).
        on_result: Called after each run (progress reporting).
    """
    results = []
    scenarios = list(scenarios)
    for router in routers:
        golden = (golden_for or {}).get(router.name, router.name)
        for scenario in scenarios:
            if scenario.middleware is not None and not router.takes_middleware:
                continue  # langchain's middleware runs only next to StopOnArtifact
            if scenario.name in router.skips:
                continue
            actual = run_scenario(scenario, router, model=model)
            expected = None if model is not None else load_golden(scenario, golden, directory)
            result = judge(
                scenario,
                router.name,
                actual,
                invariant_breaches(scenario, actual),
                golden=expected,
                compared=model is None,
            )
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def judge(
    scenario: Scenario,
    router: str,
    actual: Transcript,
    breaches: list[str],
    *,
    golden: Transcript | None,
    compared: bool,
    expected: Transcript | None = None,
) -> CheckResult:
    """One run's result: `breaches` plus, when `compared`, every difference from `golden`.

    A run that raised differs from its golden everywhere, so it is not compared: its error is
    said once. `expected` is what the result shows as expected (default: `golden`).
    """
    if compared and "error" not in actual:
        breaches = breaches + compare(golden, actual)
    return CheckResult(
        scenario=scenario,
        router=router,
        expected=golden if expected is None else expected,
        actual=actual,
        breaches=list(dict.fromkeys(breaches)),
    )


def broken_runs(
    results: Iterable[CheckResult], golden_of: Callable[[CheckResult], Transcript | None]
) -> list[CheckResult]:
    """The runs a golden must not be written from.

    A breach that comparing with the (old or missing) golden `golden_of(result)` does not
    explain breaks an invariant, and a golden of a broken run would make the breach the
    expectation."""

    def golden_only(result: CheckResult) -> set[str]:
        if "error" in result.actual:
            return set()
        return set(compare(golden_of(result), result.actual))

    return [r for r in results if any(b not in golden_only(r) for b in r.breaches)]


class _PlannedMalformedSignals(logging.Filter):
    """Drops the malformed-signal warnings of the scenarios' deliberately broken tools."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not hasattr(record, "toolstop_signal")


@contextmanager
def planned_malformed_signals_hidden() -> Iterator[None]:
    """Hide the `toolstop` logger's malformed-signal warnings while the scenarios run.

    Their tools return malformed signals on purpose, and the warnings would only be noise."""
    quiet = _PlannedMalformedSignals()
    logging.getLogger("toolstop").addFilter(quiet)
    try:
        yield
    finally:
        logging.getLogger("toolstop").removeFilter(quiet)
