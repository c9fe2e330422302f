"""`StopPolicy`: how a turn's signals become one decision (parallel rule, mode, budgets)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from toolstop.errors import ToolstopConfigError
from toolstop.outcome import Outcome

__all__ = [
    "Mode",
    "OnBudget",
    "Parallel",
    "ParallelRule",
    "StopMode",
    "StopPolicy",
    "resolve_policy",
]

ParallelRule = Literal["all", "any", "first", "priority"]
"""How the signals of several tool calls in one turn combine.

- `"all"`: stop only when every call of the turn asks to stop (the safe default).
- `"any"`: stop when at least one call asks to stop, whatever order the model listed the calls in.
- `"first"`: the first call in tool-call order that carries a valid signal decides.
- `"priority"`: the highest reason present (in `StopPolicy.priority` order) decides.
"""

StopMode = Literal["hard", "polish", "never"]
"""What a stop does.

- `"hard"`: relay the deciding tool content verbatim as the final AIMessage; no model call.
- `"polish"`: one more model call, with no tools offered, narrates the result.
- `"never"`: shadow mode; routing ignores stops but the record says what *would* have stopped.
"""

Parallel = ParallelRule
"""The former name of `ParallelRule`, kept as an alias until 1.0."""

Mode = StopMode
"""The former name of `StopMode`, kept as an alias until 1.0."""

OnBudget = Literal["message", "model"]
"""How a run ends when a budget (retry or step) is spent.

- `"message"`: with the policy's user-safe text (after the run's completed results); no model call.
- `"model"`: one more model call, with no tools offered, answers from what the run found (as
  `polish` does); the step budget keeps the steps that call needs.
"""

_PARALLEL: tuple[str, ...] = get_args(Parallel)
_ON_BUDGET: tuple[str, ...] = get_args(OnBudget)
_MODES: tuple[str, ...] = get_args(Mode)
_REASONS: tuple[str, ...] = tuple(o.value for o in Outcome)


@dataclass(frozen=True, kw_only=True)
class StopPolicy:
    """How toolstop turns tool signals into a stop or a continue. Validated when built.

    Attributes:
        parallel: How the calls of one turn combine; see `Parallel`.
        priority: Reasons from most to least important, for `parallel="priority"` and for naming
            the rule when stopping calls carry different reasons. Reasons left out rank last.
        mode: What a stop does; see `Mode`.
        max_transient_retries: How many times a transient failure (or a tool exception) may go
            back to the model in one run; the next one stops with rule `retry_budget`. `None`
            means no budget (the step budget still holds).
        retry_budget_message: The user-safe final text when the retry budget is spent.
        step_budget_message: The user-safe final text when the recursion limit is near.
        policy_block_message: The user-safe final text of a `policy_block` stop. Blocked tool
            content is never relayed, whatever the tool put in it.
        on_budget: How a spent budget ends the run; see `OnBudget`. Not for the OpenAI Agents
            adapter, whose `tool_use_behavior` cannot call the model.
        narrator: In `polish` mode, a chat model (anything with `invoke`/`ainvoke`, e.g. a
            cheaper one from `init_chat_model`) that narrates a stop instead of the agent's
            model: it gets the user's request and the run's tool results only, no tools. Its
            calls and tokens are recorded apart (`narrator_calls`, `narrator_input_tokens`,
            `narrator_output_tokens`). `None`: the agent's model narrates. Not for the
            adapters (OpenAI Agents, Pydantic AI).
    """

    parallel: Parallel = "all"
    priority: tuple[str, ...] = ("policy_block", "fatal", "completed", "transient")
    mode: Mode = "hard"
    max_transient_retries: int | None = 3
    retry_budget_message: str = (
        "I could not complete this: the service kept failing temporarily. Please try again later."
    )
    step_budget_message: str = (
        "I could not complete this within the allowed number of steps. Please narrow the request."
    )
    policy_block_message: str = "I can't help with that request."
    on_budget: OnBudget = "message"
    narrator: Any = None

    def __post_init__(self) -> None:
        if self.parallel not in _PARALLEL:
            msg = f"StopPolicy.parallel must be one of {_PARALLEL}, got {self.parallel!r}"
            raise ToolstopConfigError(msg)
        if self.mode not in _MODES:
            msg = f"StopPolicy.mode must be one of {_MODES}, got {self.mode!r}"
            raise ToolstopConfigError(msg)
        if self.on_budget not in _ON_BUDGET:
            msg = f"StopPolicy.on_budget must be one of {_ON_BUDGET}, got {self.on_budget!r}"
            raise ToolstopConfigError(msg)
        self._check_priority()
        if self.narrator is not None:
            if self.mode != "polish":
                msg = f"StopPolicy.narrator narrates polish stops; mode is {self.mode!r}"
                raise ToolstopConfigError(msg)
            if not callable(getattr(self.narrator, "invoke", None)):
                kind = type(self.narrator).__name__
                msg = f"StopPolicy.narrator must be a chat model (with invoke), got {kind}"
                raise ToolstopConfigError(msg)
        budget = self.max_transient_retries
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            msg = f"StopPolicy.max_transient_retries must be an int or None, got {budget!r}"
            raise ToolstopConfigError(msg)
        if budget is not None and budget < 0:
            msg = f"StopPolicy.max_transient_retries must be >= 0, got {budget}"
            raise ToolstopConfigError(msg)
        for name in ("retry_budget_message", "step_budget_message", "policy_block_message"):
            text = getattr(self, name)
            if not isinstance(text, str) or not text.strip():
                msg = f"StopPolicy.{name} must be a non-empty string, got {text!r}"
                raise ToolstopConfigError(msg)

    def _check_priority(self) -> None:
        priority = self.priority
        if isinstance(priority, str) or not isinstance(priority, (tuple, list)):
            msg = f"StopPolicy.priority must be a tuple of reasons, got {priority!r}"
            raise ToolstopConfigError(msg)
        values = tuple(Outcome(p).value if isinstance(p, Outcome) else p for p in priority)
        unknown = [p for p in values if p not in _REASONS]
        if unknown:
            msg = f"StopPolicy.priority has unknown reasons {unknown}; known: {_REASONS}"
            raise ToolstopConfigError(msg)
        if len(set(values)) != len(values):
            msg = f"StopPolicy.priority lists a reason twice: {values}"
            raise ToolstopConfigError(msg)
        if not values:
            msg = "StopPolicy.priority must name at least one reason"
            raise ToolstopConfigError(msg)
        # Normalise lists and enum members to a tuple of plain strings (the class is frozen).
        object.__setattr__(self, "priority", values)

    def rank(self, reason: str) -> int:
        """Position of `reason` in `priority` (lower is more important); unlisted reasons last."""
        try:
            return self.priority.index(reason)
        except ValueError:
            return len(self.priority)


def resolve_policy(policy: Any, where: str) -> StopPolicy:
    """`policy`, or `StopPolicy()` for None; a TypeError naming `StopPolicy` for anything else.

    Every router calls it when it is built, so a wrong argument (`StopOnArtifact("hard")`) fails
    there, not at the first model call.
    """
    if policy is None:
        return StopPolicy()
    if isinstance(policy, StopPolicy):
        return policy
    hint = f" (did you mean StopPolicy(mode={policy!r})?)" if policy in _MODES else ""
    kind = type(policy).__name__
    msg = f"{where}: policy must be a StopPolicy or None, got {kind} {policy!r}{hint}"
    raise TypeError(msg)
