"""`check_agent`: toolstop's scenario matrix through *your* agent factory.

The factory gets stand-ins of *your* tools; the runs are held to the same invariants as
`toolstop check` (and, optionally, your own goldens).

Each scenario of `scenario_matrix()` is retargeted onto your tools: a scenario on one tool runs
once per tool; a scenario on two tools (the parallel policies) uses your first two tools and is
skipped when you have only one; calls that would land twice on one tool in a turn are split
into consecutive turns. Every stand-in has your tool's name, description and argument schema;
the scripted model calls it with arguments generated from that schema (`example_args`).

The scenarios with langchain middleware (a model-call limit, human review) run only when your
factory takes a `middleware` keyword (it puts that middleware first in its own list); without
it they are listed in `AgentCheck.skipped`, with why.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, ToolCall
from langchain_core.tools import BaseTool
from langgraph.pregel import Pregel

from toolstop._check.factory import AgentFactory, as_factory
from toolstop._check.harness import (
    CheckResult,
    Transcript,
    broken_runs,
    invariant_breaches,
    judge,
    load_golden,
    needs_async,
    planned_malformed_signals_hidden,
    run_scenario,
    write_golden,
)
from toolstop._check.preflight import _STOP_HINTS, _preflight
from toolstop._check.routers import Router
from toolstop._check.scenarios import Scenario, scenario_matrix
from toolstop.errors import ToolstopConfigError
from toolstop.outcome import Outcome, signal
from toolstop.policy import StopPolicy
from toolstop.testing.forced import ForcedResult, ForcedTool
from toolstop.testing.scripted import ScriptStep
from toolstop.testing.stand_ins import example_args, stand_in

__all__ = [
    "AgentCheck",
    "agent_scenarios",
    "check_agent",
    "write_agent_goldens",
]

_IDLE: ForcedResult = ("(not called in this scenario)", signal(Outcome.COMPLETED))
_RAISED_HINT = (
    " (create_agent re-raises a tool's exception: add langchain's ToolErrorMiddleware, or "
    "ToolRetryMiddleware(max_retries=0, on_failure=...), to send it back to the model)"
)

_HIDDEN_ERROR_HINT = (
    " (your tool's exception reached the model as a plain result, so the retry budget never "
    "counted it: give the ToolMessage your error handler or tools-node fallback builds "
    'status="error")'
)
_RAISES = frozenset({"tool-exception", "tool-raises-forever"})

_NOT_TOOLSTOP_HINT = (
    " (add StopOnArtifact(policy) to your create_agent middleware, or build with "
    "build_react_graph(model, tools, policy=policy))"
)


class _RunEnds(BaseCallbackHandler):
    """Counts toolstop's `toolstop_run_end` callback events (one per finished run)."""

    def __init__(self) -> None:
        self.count = 0

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == "toolstop_run_end":
            self.count += 1


@dataclass(frozen=True, kw_only=True)
class AgentCheck:
    """What `check_agent` found.

    Attributes:
        factory: The factory's name.
        results: One per scenario run, in order.
        skipped: Scenario name -> why it did not run on this agent.
        goldens: The folder of golden transcripts compared with, if any.
        notes: What the check cannot see in your agent, a sentence each (a graph whose tools
            node is a function of yours, not a `ToolNode`).
    """

    factory: str
    results: list[CheckResult]
    skipped: dict[str, str] = field(default_factory=dict)
    goldens: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no scenario has a breach."""
        return all(r.passed for r in self.results)

    @property
    def breaches(self) -> list[str]:
        """Every breach, as `scenario.mode: sentence`."""
        return [f"{r.scenario.key}: {b}" for r in self.results for b in r.breaches]

    def assert_passed(self) -> None:
        """Raise `AssertionError` listing every breach (for your own test suite)."""
        if not self.passed:
            failed = sum(not r.passed for r in self.results)
            lines = "\n".join(f"- {b}" for b in self.breaches)
            msg = f"{self.factory}: {failed} of {len(self.results)} scenarios broke:\n{lines}"
            raise AssertionError(msg)


# -- retargeting the matrix onto the user's tools -----------------------------------------------
def _remap_call(
    tool_call: ToolCall, names: dict[str, BaseTool], args: dict[str, dict[str, Any]]
) -> ToolCall:
    target = names[tool_call["name"]]
    return ToolCall(name=target.name, args=dict(args[target.name]), id=None, type="tool_call")


def _remap_script(
    script: Sequence[ScriptStep], names: dict[str, BaseTool], args: dict[str, dict[str, Any]]
) -> tuple[ScriptStep, ...]:
    """The script with each call on the mapped tool and its generated arguments; a turn with two
    calls on one tool becomes consecutive turns (so each tool's results come in a fixed order)."""
    steps: list[ScriptStep] = []
    for step in script:
        if isinstance(step, str):
            steps.append(step)
            continue
        if isinstance(step, AIMessage):
            calls = [
                ToolCall(name=c["name"], args=c["args"], id=None, type="tool_call")
                for c in step.tool_calls
            ]
            if not calls:
                steps.append(step)
                continue
        elif isinstance(step, dict):
            calls = [step]  # type: ignore[list-item]
        else:
            calls = list(step)
        turns: list[list[ToolCall]] = [[]]
        for c in calls:
            mapped = _remap_call(c, names, args)
            if any(m["name"] == mapped["name"] for m in turns[-1]):
                turns.append([])
            turns[-1].append(mapped)
        steps += [AIMessage(content="", tool_calls=list(t)) for t in turns]
    return tuple(steps)


CHECK_PREFIX = "ToolstopCheck"
"""The check's own langchain middleware is renamed `ToolstopCheck<class>`, so it runs next to
the same middleware in your agent (langchain refuses two instances of one name)."""

REVIEWER = f"{CHECK_PREFIX}HumanInTheLoopMiddleware"
"""The check's human review: its interrupts get the scenario's decisions; your own review's
interrupts are approved."""


PAUSED_NOTE = " (this run was paused by your own review, {by}, and approved by the check)"
"""Said after each breach of a run that your own human review interrupted."""


def _skip_hook(self: Any, state: Any, runtime: Any) -> None:
    return None


async def _askip_hook(self: Any, state: Any, runtime: Any) -> None:
    return None


def _as_checks(middleware: Any, own: frozenset[str]) -> Any:
    """`middleware` under the check's name. A model-call limit next to your own
    `ModelCallLimitMiddleware` leaves the counting to yours (both would count each call in the
    same state key, and the check's limit would be reached at half its calls)."""
    from langchain.agents.middleware import ModelCallLimitMiddleware

    base = type(middleware)
    name = f"{CHECK_PREFIX}{base.__name__}"
    namespace: dict[str, Any] = {"name": property(lambda self: name)}
    if isinstance(middleware, ModelCallLimitMiddleware) and base.__name__ in own:
        namespace.update(after_model=_skip_hook, aafter_model=_askip_hook)
    middleware.__class__ = type(name, (base,), namespace)
    return middleware


def _remap_middleware(
    build: Callable[[], list[Any]], names: dict[str, BaseTool], own: frozenset[str] = frozenset()
) -> Callable[[], list[Any]]:
    def remapped() -> list[Any]:
        from langchain.agents.middleware import HumanInTheLoopMiddleware

        found = []
        for middleware in build():
            if isinstance(middleware, HumanInTheLoopMiddleware):
                interrupt_on: dict[str, Any] = {
                    names[k].name: v for k, v in middleware.interrupt_on.items()
                }
                middleware = HumanInTheLoopMiddleware(interrupt_on=interrupt_on)
            found.append(_as_checks(middleware, own))
        return found

    return remapped


def _remap_review(
    review: Sequence[dict[str, Any]], names: dict[str, BaseTool], args: dict[str, dict[str, Any]]
) -> tuple[dict[str, Any], ...]:
    decisions = []
    for decision in review:
        decision = copy.deepcopy(decision)
        action = decision.get("edited_action")
        if isinstance(action, dict) and action.get("name") in names:
            target = names[action["name"]]
            decision["edited_action"] = {"name": target.name, "args": dict(args[target.name])}
        decisions.append(decision)
    return tuple(decisions)


def _retarget(
    base: Scenario,
    names: dict[str, BaseTool],
    tools: Sequence[BaseTool],
    args: dict[str, dict[str, Any]],
    forced: dict[str, tuple[ForcedResult, ...]],
    name: str,
    own: frozenset[str] = frozenset(),
) -> Scenario:
    results: dict[str, list[ForcedResult]] = {}
    for role, target in names.items():
        results.setdefault(target.name, []).extend(forced[role])

    def build() -> list[BaseTool]:
        return [stand_in(t, *(results.get(t.name) or [_IDLE])) for t in tools]

    recursion_limit, script = base.recursion_limit, _remap_script(base.script, names, args)
    if base.name == "step-budget":
        # How many steps a tool turn takes depends on your agent's nodes: the check finds the
        # recursion limit that leaves room for one tool turn (`_step_budget_limit`); the script
        # has more calls than any limit lets through.
        recursion_limit = None
        script = script[:1] * _STEP_BUDGET_CALLS
    used = ", ".join(dict.fromkeys(t.name for t in names.values()))
    return Scenario(
        name=name,
        description=f"{base.description} (your tools: {used})",
        tools=build,
        script=script,
        policy=base.policy,
        stops=base.stops,
        recursion_limit=recursion_limit,
        middleware=_remap_middleware(base.middleware, names, own) if base.middleware else None,
        review=_remap_review(base.review, names, args),
    )


def agent_scenarios(
    tools: Sequence[BaseTool], *, middleware: bool = True, own: frozenset[str] = frozenset()
) -> tuple[list[tuple[Scenario, Scenario]], dict[str, str]]:
    """The matrix retargeted onto `tools`, and the scenarios that cannot run there.

    Returns `([(scenario, the toolstop scenario it is from)], skipped)`, where `skipped` maps a
    scenario name to why it does not run. `own`: the names of the middleware your agent already
    has (see `_as_checks`).

    Raises:
        ToolstopConfigError: when no valid arguments can be generated for a tool.
    """
    args = {t.name: example_args(t) for t in tools}
    found: list[tuple[Scenario, Scenario]] = []
    skipped: dict[str, str] = {}
    for base in scenario_matrix():
        made = base.tools()
        if not all(isinstance(t, ForcedTool) for t in made):
            skipped[base.name] = "it runs toolstop's own example search tool"
            continue
        if base.middleware is not None and not middleware:
            skipped[base.name] = (
                "your factory takes no `middleware` keyword (the model-call-limit and "
                "human-review scenarios add langchain middleware to your agent)"
            )
            continue
        forced = {t.name: t.forced for t in made if isinstance(t, ForcedTool)}
        roles = list(forced)
        if len(roles) == 1:
            for target in tools:
                scenario = _retarget(
                    base, {roles[0]: target}, tools, args, forced, f"{base.name}@{target.name}", own
                )
                found.append((scenario, base))
            continue
        if base.name.startswith("parallel-") and len(tools) < 2:
            skipped[base.name] = "the parallel scenarios need two tools; you have one"
            continue
        names = {role: tools[i % len(tools)] for i, role in enumerate(roles)}
        found.append((_retarget(base, names, tools, args, forced, base.name, own), base))
    return found, skipped


# -- running ---------------------------------------------------------------------------------
def _router(factory: AgentFactory) -> Router:
    def build(
        model: Any,
        tools: Sequence[BaseTool],
        *,
        policy: StopPolicy,
        checkpointer: Any = None,
        middleware: Sequence[Any] | None = None,
    ) -> Any:
        extra: dict[str, Any] = {"middleware": list(middleware)} if middleware is not None else {}
        # the check's own in-memory checkpointer (to resume after an interrupt), never yours:
        # the check's runs are not written to your database
        if checkpointer is not None and factory.takes_checkpointer:
            extra["checkpointer"] = checkpointer
        agent = factory(model, tools, policy, **extra)
        if checkpointer is not None and isinstance(agent, Pregel):
            agent = agent.copy(update={"checkpointer": checkpointer})
        return agent

    return Router(
        name=factory.name,
        build=build,
        model_node="model",
        stop_node="model",
        polish_node="model",
        takes_middleware=factory.takes_middleware,
    )


def _expected_rule(base: Scenario) -> str | None:
    """The rule toolstop's own router records on the same scenario (its shipped golden)."""
    golden = load_golden(base, "middleware" if base.middleware else "graph")
    record = (golden or {}).get("stop_record")
    return record.get("rule") if isinstance(record, dict) else None


def _breaches(
    scenario: Scenario, base: Scenario, actual: Transcript, run_ends: int, stop: str = ""
) -> list[str]:
    breaches = _run_breaches(scenario, base, actual, run_ends, stop)
    paused = actual.get("interrupts")
    if breaches and paused:
        by = ", ".join(dict.fromkeys(paused))
        note = PAUSED_NOTE.format(by=by)
        breaches = [b + note for b in breaches]
    return breaches


def _run_breaches(
    scenario: Scenario, base: Scenario, actual: Transcript, run_ends: int, stop: str = ""
) -> list[str]:
    """`stop`: what the agent's graph shows of StopOnArtifact (`_stop_status`)."""
    breaches = invariant_breaches(scenario, actual)
    if base.name == "step-budget":  # the script is longer than any agent's budget, on purpose
        breaches = [b for b in breaches if "scripted answers unused" not in b]
    if "error" in actual:
        if base.name in _RAISES and "backend exploded" in actual["error"]:
            breaches = [b + _RAISED_HINT if "the run raised" in b else b for b in breaches]
        elif base.name == "tool-raises-forever" and _errors_hidden(actual) and breaches:
            breaches[0] += _HIDDEN_ERROR_HINT
        elif "ScriptExhaustedError" in actual["error"] and breaches and stop in _STOP_HINTS:
            breaches[0] += _STOP_HINTS[stop]
        return breaches
    breaches = [b + _NOT_TOOLSTOP_HINT if b.startswith("no stop_record") else b for b in breaches]
    record = actual.get("stop_record")
    policy = scenario.policy
    if isinstance(record, dict) and (record.get("mode"), record.get("parallel")) != (
        policy.mode,
        policy.parallel,
    ):
        breaches.insert(
            0,
            f"your factory ignores the policy it is given: the record says mode "
            f"{record.get('mode')!r}, parallel {record.get('parallel')!r}; the check passed "
            f"mode {policy.mode!r}, parallel {policy.parallel!r} (pass `policy` on: "
            "StopOnArtifact(policy) or build_react_graph(model, tools, policy=policy))",
        )
    want = _expected_rule(base)
    if isinstance(record, dict) and want is not None and record.get("rule") != want:
        hidden = base.name in _RAISES and _errors_hidden(actual)
        hint = _HIDDEN_ERROR_HINT if hidden else ""
        breaches.append(
            f"the stop record's rule is {record.get('rule')!r}; toolstop's own router records "
            f"{want!r} on this scenario{hint}"
        )
    if isinstance(record, dict) and run_ends != 1:
        breaches.append(
            f"the run published {run_ends} run-end records; a run publishes exactly one (is "
            "StopOnArtifact listed twice, or the graph wrapped in another toolstop graph?)"
        )
    return breaches


def _async_only(tool: BaseTool) -> bool:
    """A tool written with `async def` (it cannot run in `invoke()`)."""
    return getattr(tool, "func", None) is None and getattr(tool, "coroutine", None) is not None


def _errors_hidden(actual: Transcript) -> bool:
    """Whether a tool of a raising scenario (`_RAISES`) answered without an error status: a
    result reads `invalid:unsignalled` where the stand-in raised (in those scenarios it never
    returns a result without a signal)."""
    results = actual.get("tool_results") or []
    return any(isinstance(r, dict) and r.get("signal") == "invalid:unsignalled" for r in results)


def check_agent(
    factory: Callable[..., Any] | AgentFactory,
    tools: Sequence[BaseTool],
    *,
    goldens: Path | str | None = None,
    scenarios: Sequence[str] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    run_config: Mapping[str, Any] | None = None,
) -> AgentCheck:
    """Run toolstop's scenario matrix through your agent factory, with stand-ins of `tools`.

    `factory(model, tools, policy)` builds the agent; every invariant `toolstop check` checks is
    checked.

    Args:
        factory: Your agent factory (or a loaded `toolstop._check.factory.AgentFactory`).
        tools: Your tools (only their names, descriptions and schemas are used).
        goldens: A folder of golden transcripts of your agent to compare with (written by
            `write_agent_goldens` or `toolstop check --agent ... --update-goldens`); a missing
            golden is a breach. None: invariants only.
        scenarios: Only these scenarios, by name (`success`, `success@search`) or key
            (`success@search.hard`).
        on_result: Called after each run (progress reporting).
        run_config: Merged into each run's config: `configurable` (for tools and prompts that
            read `config["configurable"]`, such as a passenger id), `tags`, `metadata`. The
            check sets the thread id, callbacks and recursion limit itself.

    Raises:
        ToolstopConfigError: the factory raises when called, returns something without
            `invoke()`, or builds with its own tools instead of the ones it is given (the check
            would run your real tools); valid arguments cannot be generated for a tool; an
            unknown scenario name.
    """
    if not isinstance(factory, AgentFactory):
        factory = as_factory(factory)
    own, stop, notes = _preflight(factory, tools)
    matrix, skipped = agent_scenarios(tools, middleware=factory.takes_middleware, own=own)
    if scenarios:
        wanted = set(scenarios)
        known = {n for s, b in matrix for n in (s.key, s.name, b.name, b.key)}
        unknown = sorted(wanted - known)
        if unknown:
            names = ", ".join(sorted({b.name for _, b in matrix}))
            msg = f"unknown scenario {unknown}; known: {names}"
            raise ToolstopConfigError(msg)
        matrix = [(s, b) for s, b in matrix if wanted & {s.key, s.name, b.name, b.key}]
    router = _router(factory)
    directory = Path(goldens) if goldens is not None else None
    results = []
    # an agent with an `async def` tool runs through astream from the first run: its stand-in is
    # async-only too, and an error handler of yours may turn the sync failure into a message
    runner = _Runner(router, run_config, run_async=any(_async_only(t) for t in tools))
    with planned_malformed_signals_hidden():
        for scenario, base in matrix:
            if base.name == "step-budget":
                limit = runner.step_budget_limit(scenario)
                if limit is None:
                    skipped[scenario.name] = STEP_BUDGET_REVIEWED
                    continue
                scenario = replace(scenario, recursion_limit=limit)
            run_ends = _RunEnds()
            actual = runner.run(scenario, run_ends)
            actual["router"] = factory.name
            golden = None if directory is None else load_golden(scenario, "", directory)
            result = judge(
                scenario,
                factory.name,
                actual,
                _breaches(scenario, base, actual, run_ends.count, stop),
                golden=golden,
                compared=directory is not None,
                expected=golden or {"model_calls": _scripted_calls(scenario)},
            )
            results.append(result)
            if on_result is not None:
                on_result(result)
    return AgentCheck(
        factory=factory.name, results=results, skipped=skipped, goldens=directory, notes=notes
    )


_STEP_BUDGET_CALLS = 60
"""Scripted tool calls of the step-budget scenario: more than any recursion limit it tries."""

STEP_BUDGET_REVIEWED = (
    "your own human review pauses this tool, and every resume starts LangGraph's step count "
    "again: no recursion limit reaches the step budget after the tool ran"
)
"""Why the step-budget scenario is skipped on a tool your own review pauses."""

_STEP_BUDGET_FALLBACK = 12
"""The step-budget scenario's recursion limit when no limit leads to a step-budget stop (the
agent is broken: the run's breaches say how)."""


class _Runner:
    """Runs the scenarios on your agent: through `astream` from the first run when `run_async`
    (an `async def` tool), else synchronously until a run shows that the agent works only in
    async code (a middleware with only `awrap_model_call`), then through `astream` (that run
    again, and every run after it)."""

    def __init__(
        self,
        router: Router,
        run_config: Mapping[str, Any] | None = None,
        *,
        run_async: bool = False,
    ) -> None:
        self.router = router
        self.run_async = run_async
        self.run_config = run_config

    def run(self, scenario: Scenario, run_ends: _RunEnds | None = None) -> Transcript:
        def once() -> Transcript:
            return run_scenario(
                scenario,
                self.router,
                callbacks=[run_ends] if run_ends is not None else [],
                reviewer=REVIEWER,
                checkpointer=True,
                run_async=self.run_async,
                run_config=self.run_config,
            )

        actual = once()
        if not self.run_async and needs_async(actual):
            self.run_async = True
            if run_ends is not None:
                run_ends.count = 0
            actual = once()
        return actual

    def step_budget_limit(self, scenario: Scenario) -> int | None:
        """The smallest recursion limit at which the scenario ends with rule `step_budget`
        after at least one tool turn: how many steps a turn takes depends on your agent's
        nodes (your own middleware adds some), so it is found on your agent's graph.

        None when your own human review paused a run: each resume starts LangGraph's step
        count again, so the budget the stop sees is not the run's (`STEP_BUDGET_REVIEWED`)."""
        for limit in range(3, _STEP_BUDGET_CALLS):
            actual = self.run(replace(scenario, recursion_limit=limit))
            if actual.get("interrupts") or actual.get("waiting_for"):
                return None
            record = actual.get("stop_record")
            rule = record.get("rule") if isinstance(record, dict) else None
            if rule == "step_budget" and actual.get("tool_results"):
                return limit
            error = str(actual.get("error", ""))
            too_low = error.startswith("GraphRecursionError") or "is too low" in error
            if rule != "step_budget" and not too_low:
                break  # the run ended another way: a higher limit will not change that
        return _STEP_BUDGET_FALLBACK


def _scripted_calls(scenario: Scenario) -> int | None:
    """How many model calls a correct agent makes: one per scripted answer (unknown for the step
    budget, which depends on your agent's nodes)."""
    if scenario.name.startswith("step-budget"):
        return None
    return len(scenario.script)


def write_agent_goldens(check: AgentCheck, directory: Path | str) -> list[Path]:
    """Write each run of `check` as a golden transcript in `directory`.

    A check whose runs break an invariant is refused: a golden of a broken run would make the breach
    the expectation.

    Raises:
        ToolstopConfigError: when a run breaks an invariant; nothing is written then.
    """
    goldens = check.goldens
    broken = broken_runs(
        check.results,
        lambda r: None if goldens is None else load_golden(r.scenario, "", goldens),
    )
    if broken:
        msg = (
            f"refused: {len(broken)} runs break an invariant ({broken[0].scenario.key}: "
            f"{broken[0].breaches[0]}); no golden was written"
        )
        raise ToolstopConfigError(msg)
    return [write_golden(r.actual, r.scenario, "", Path(directory)) for r in check.results]
