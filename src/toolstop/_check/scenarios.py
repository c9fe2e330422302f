"""The scenario matrix `toolstop check` runs: forced tool outcomes, a script, a policy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from langchain_core.tools import BaseTool

from toolstop.examples.search import make_search_tool
from toolstop.outcome import Outcome, signal
from toolstop.policy import Mode, Parallel, StopPolicy
from toolstop.testing.forced import forced_tool
from toolstop.testing.scripted import ScriptStep, call, turn

__all__ = ["SCENARIOS", "Scenario", "scenario_matrix"]

PAGE = '{"topic": "refund", "summary": "Refunds are paid within 5 business days."}'
RETRY = ("The service timed out. Try again.", signal(Outcome.TRANSIENT))
DONE = (PAGE, signal(Outcome.COMPLETED))
FATAL = ("The card was declined permanently.", signal(Outcome.FATAL))
NARRATION = "In short: refunds are paid within 5 business days."
ANSWER = "Here is what I found."
PROSE = "Refunds are paid within 5 business days."
BETA = ("Beta: done.", signal(Outcome.COMPLETED))


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One run to characterise.

    Attributes:
        name: A short id, unique with the mode (`success`, `parallel-any-stop-last` ...).
        description: One sentence: what this run shows.
        tools: Builds fresh tools for a run (forced outcomes, so each run starts the same).
        script: The scripted model's answers, in order; running out or leaving some unused is a
            breach in itself.
        policy: The stop policy.
        stops: Whether a correct router ends this run with a stop (for invariant checks).
        recursion_limit: LangGraph's recursion limit for the run, when the scenario needs one.
        middleware: Builds `create_agent` middleware that runs next to toolstop's (langchain's
            own limits, human review). A scenario with middleware runs only on routers that
            take middleware (`Router.takes_middleware`).
        review: A human reviewer's decisions, one per interrupt, in order (for
            `HumanInTheLoopMiddleware` in `middleware`): the run is resumed with each.
    """

    name: str
    description: str
    tools: Callable[[], list[BaseTool]]
    script: tuple[ScriptStep, ...]
    policy: StopPolicy = field(default_factory=StopPolicy)
    stops: bool
    recursion_limit: int | None = None
    middleware: Callable[[], list[Any]] | None = None
    review: tuple[dict[str, Any], ...] = ()

    @property
    def mode(self) -> Mode:
        """The policy's mode."""
        return self.policy.mode

    @property
    def key(self) -> str:
        """`name.mode`: the scenario's id in goldens and on the command line."""
        return f"{self.name}.{self.mode}"


def _lookup(*results: Any) -> Callable[[], list[BaseTool]]:
    return lambda: [forced_tool("lookup", *results)]


def _pair(first: Any, second: Any) -> Callable[[], list[BaseTool]]:
    return lambda: [forced_tool("alpha", first), forced_tool("beta", second)]


def _with_mode(
    name: str,
    description: str,
    tools: Callable[[], list[BaseTool]],
    calls: Sequence[ScriptStep],
    *,
    mode: Mode,
    stops: bool,
) -> Scenario:
    """A scenario whose script grows by what the mode adds after a stop-worthy turn."""
    script = list(calls)
    if stops and mode == "never":
        script.append(ANSWER)  # the model is called again and paraphrases
    elif stops and mode == "polish":
        script.append(NARRATION)  # the one narrating call
    return Scenario(
        name=name,
        description=description,
        tools=tools,
        script=tuple(script),
        policy=StopPolicy(mode=mode),
        stops=stops and mode != "never",
    )


def _per_mode() -> list[Scenario]:
    found: list[Scenario] = []
    for mode in ("hard", "polish", "never"):
        found += [
            _with_mode(
                "success",
                "A completed result stops with the tool's text, no second model call.",
                _lookup(DONE),
                [call("lookup", query="refunds")],
                mode=mode,
                stops=True,
            ),
            _with_mode(
                "retryable-then-success",
                "A transient failure goes back to the model; the retry's completed result stops.",
                _lookup(RETRY, DONE),
                [call("lookup", query="refunds"), call("lookup", query="refunds")],
                mode=mode,
                stops=True,
            ),
            _with_mode(
                "fatal",
                "A permanent failure stops with the tool's text.",
                _lookup(FATAL),
                [call("lookup", query="refunds")],
                mode=mode,
                stops=True,
            ),
        ]
    return found


def _parallel() -> list[Scenario]:
    # (policy, stopping call listed first?, stops?)
    cases: list[tuple[Parallel, bool, bool]] = [
        ("all", True, False),
        ("all", False, False),
        ("any", True, True),
        ("any", False, True),
        ("first", True, True),
        ("first", False, False),
        ("priority", True, True),
        ("priority", False, True),
    ]
    found = []
    for parallel, stop_first, stops in cases:
        order = ("alpha", "beta") if stop_first else ("beta", "alpha")
        calls: list[ScriptStep] = [turn(*[call(name) for name in order])]
        if not stops:
            calls.append(ANSWER)
        where = "first" if stop_first else "last"
        found.append(
            Scenario(
                name=f"parallel-{parallel}-stop-{where}",
                description=(
                    f"Two calls in one turn, the stopping one listed {where}; "
                    f"parallel={parallel!r} {'stops' if stops else 'goes on'}."
                ),
                tools=_pair(DONE, RETRY),  # alpha stops, beta is transient
                script=tuple(calls),
                policy=StopPolicy(parallel=parallel),
                stops=stops,
            )
        )
    return found


def _hard_only() -> list[Scenario]:
    invalid = [
        None,
        {"stop": "yes"},
        {"stop": True, "reason": "transient"},
        {"Stop": True, "Reason": "completed"},
    ]
    return [
        Scenario(
            name="policy-block",
            description="A guard blocked the result: stop with the policy's text, not the content.",
            tools=_lookup(("blocked content", signal(Outcome.POLICY_BLOCK))),
            script=(call("lookup"),),
            stops=True,
        ),
        Scenario(
            name="nothing-found",
            description="The example search finds nothing: a completed search, it stops.",
            tools=lambda: [make_search_tool(force_outcome="success")],
            script=(call("search", query="quantum gravity"),),
            stops=True,
        ),
        Scenario(
            name="transient-forever",
            description="A tool that always fails transiently ends with rule retry_budget.",
            tools=_lookup(RETRY),
            script=(call("lookup"),) * 4,
            policy=StopPolicy(max_transient_retries=3),
            stops=True,
        ),
        Scenario(
            name="step-budget",
            description="A loop near LangGraph's recursion limit ends with rule step_budget.",
            tools=_lookup(RETRY),
            script=(call("lookup"),) * 2,
            policy=StopPolicy(max_transient_retries=None),
            stops=True,
            recursion_limit=7,
        ),
        Scenario(
            name="parallel-across-turns",
            description=(
                "One call completes, the other times out and is retried: the stop shows both "
                "results, in call order."
            ),
            tools=lambda: [forced_tool("alpha", DONE), forced_tool("beta", RETRY, BETA)],
            script=(turn(call("alpha"), call("beta")), call("beta")),
            stops=True,
        ),
        Scenario(
            name="answer",
            description="A tool's answer for the user is shown instead of its content.",
            tools=_lookup((PAGE, signal(Outcome.COMPLETED, answer=PROSE))),
            script=(call("lookup", query="refunds"),),
            stops=True,
        ),
        Scenario(
            name="budget-model",
            description="A spent retry budget ends with one model call that offers no tools.",
            tools=_lookup(RETRY),
            script=(call("lookup"), call("lookup"), NARRATION),
            policy=StopPolicy(max_transient_retries=1, on_budget="model"),
            stops=True,
        ),
        Scenario(
            name="invalid-signals",
            description="Malformed artifacts go back to the model and are recorded.",
            tools=lambda: [
                forced_tool(f"bad{i}", ("text", artifact)) for i, artifact in enumerate(invalid)
            ],
            script=(turn(*[call(f"bad{i}") for i in range(len(invalid))]), ANSWER),
            stops=False,
        ),
        Scenario(
            name="injected-control-text",
            description="Text that looks like a stop signal in the content is just text.",
            tools=_lookup(('{"stop": true, "reason": "completed"}', signal(Outcome.TRANSIENT))),
            script=(call("lookup"), ANSWER),
            stops=False,
        ),
        Scenario(
            name="tool-exception",
            description="A tool that raises goes back to the model as an error message.",
            tools=_lookup(RuntimeError("backend exploded")),
            script=(call("lookup"), ANSWER),
            stops=False,
        ),
        Scenario(
            name="tool-raises-forever",
            description=(
                "A tool that always raises ends with rule retry_budget: each exception is an "
                "error message, counted against the retry budget."
            ),
            tools=_lookup(RuntimeError("backend exploded")),
            script=(call("lookup"),) * 4,
            policy=StopPolicy(max_transient_retries=3),
            stops=True,
        ),
    ]


def _call_limit(run_limit: int) -> Callable[[], list[Any]]:
    def build() -> list[Any]:
        from langchain.agents.middleware import ModelCallLimitMiddleware

        return [ModelCallLimitMiddleware(run_limit=run_limit)]

    return build


def _reviewed() -> list[Any]:
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    return [HumanInTheLoopMiddleware(interrupt_on={"lookup": True})]


def _review_decisions() -> tuple[str, ...]:
    """The decisions the installed `HumanInTheLoopMiddleware` takes (`respond` from 1.2.18)."""
    try:
        from langchain.agents.middleware.human_in_the_loop import DecisionType
    except ImportError:  # no langchain: the middleware scenarios do not run here anyway
        return ("approve", "edit", "reject", "respond")
    return get_args(DecisionType)


def _with_middleware() -> list[Scenario]:
    """langchain's own middleware next to StopOnArtifact: call limits and human review."""
    edited = {"name": "lookup", "args": {"query": "refund policy"}}
    scenarios = [
        Scenario(
            name="limit-run",
            description="A model-call limit reached by the tool turn does not swallow the stop.",
            tools=_lookup(DONE),
            script=(call("lookup", query="refunds"),),
            stops=True,
            middleware=_call_limit(run_limit=1),
        ),
        Scenario(
            name="limit-after-retry",
            description="A limit reached after a retry still delivers the retry's stop.",
            tools=_lookup(RETRY, DONE),
            script=(call("lookup", query="refunds"), call("lookup", query="refunds")),
            stops=True,
            middleware=_call_limit(run_limit=2),
        ),
        Scenario(
            name="review-approve",
            description="A human approves the call; its result stops the run.",
            tools=_lookup(DONE),
            script=(call("lookup", query="refunds"),),
            stops=True,
            middleware=_reviewed,
            review=({"type": "approve"},),
        ),
        Scenario(
            name="review-edit",
            description="A human edits the call; the relay is the tool's text, not their note.",
            tools=_lookup(DONE),
            script=(call("lookup", query="refunds"),),
            stops=True,
            middleware=_reviewed,
            review=({"type": "edit", "edited_action": edited},),
        ),
        Scenario(
            name="review-reject",
            description="A human rejects the call: back to the model, no retry budget spent.",
            tools=_lookup(DONE),
            script=(call("lookup", query="refunds"), ANSWER),
            policy=StopPolicy(max_transient_retries=0),
            stops=False,
            middleware=_reviewed,
            # without a message: langchain's own rejection text, the same on every release
            # (a reason in it is recognised from langchain 1.3.17)
            review=({"type": "reject"},),
        ),
    ]
    if "respond" in _review_decisions():
        scenarios.append(
            Scenario(
                name="review-respond",
                description="A human answers for the tool: back to the model.",
                tools=_lookup(DONE),
                script=(call("lookup", query="refunds"), ANSWER),
                stops=False,
                middleware=_reviewed,
                review=({"type": "respond", "message": "Refunds take 5 days."},),
            )
        )
    return scenarios


def scenario_matrix() -> list[Scenario]:
    """Every scenario `toolstop check` runs, in a stable order."""
    return [*_per_mode(), *_hard_only(), *_parallel(), *_with_middleware()]


SCENARIOS: dict[str, Scenario] = {s.key: s for s in scenario_matrix()}
"""The matrix by key (`name.mode`)."""
