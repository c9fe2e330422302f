"""`StopPolicy`: how a turn's signals become one decision (parallel rule, mode, budgets)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal, get_args

from toolstop.errors import ToolstopConfigError
from toolstop.outcome import Outcome

__all__ = [
    "ArmContext",
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
        modes: Per-tool modes that differ from `mode`, e.g. `{"exchange_items": "never"}`: a
            turn stops only on the calls of tools whose mode stops; a tool in `never` is
            recorded as a would-stop. A stop's mode (`hard` or `polish`) is its deciding tool's.
        canary: Hard (or polish) mode on a share of threads only: a float in (0, 1], the share
            of threads in the `canary` arm (a stable hash of the thread id and `canary_tools`,
            so a thread never changes arm and every process agrees), or a callable that names
            the arm per thread (see `ArmContext`; `toolstop.flags.OpenFeatureArm` asks an
            OpenFeature provider). In the `shadow` arm the canaried tools run in `never` mode.
            Every record says its `arm`. `None`: no canary.
        canary_tools: The tools the canary switches; `None`: every tool.
        way_back: A `toolstop.canary.WayBack`: the tools whose canary arm's users asked again
            more often than the shadow arm's go back to `never` for new runs (read from the
            records in the run's checkpointer). `None`: no way back.
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
    modes: Mapping[str, StopMode] = field(default_factory=dict, hash=False)
    canary: float | Callable[[ArmContext], Any] | None = field(default=None, hash=False)
    canary_tools: tuple[str, ...] | None = None
    way_back: Any = field(default=None, hash=False)
    per_run: bool = field(default=False, init=False, repr=False, compare=False)
    """True when runs may differ in their modes (a canary or a way back); set when built."""

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
            if self.mode != "polish" and "polish" not in dict(self.modes).values():
                msg = f"StopPolicy.narrator narrates polish stops; mode is {self.mode!r}"
                raise ToolstopConfigError(msg)
            if not callable(getattr(self.narrator, "invoke", None)):
                kind = type(self.narrator).__name__
                msg = f"StopPolicy.narrator must be a chat model (with invoke), got {kind}"
                raise ToolstopConfigError(msg)
        self._check_canary()
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

    def _check_canary(self) -> None:
        modes = self.modes
        if not isinstance(modes, Mapping):
            msg = f"StopPolicy.modes must map tool names to modes, got {type(modes).__name__}"
            raise ToolstopConfigError(msg)
        for tool, mode in modes.items():
            if not isinstance(tool, str) or mode not in _MODES:
                msg = f"StopPolicy.modes: {tool!r} -> {mode!r}; modes are {_MODES}"
                raise ToolstopConfigError(msg)
        object.__setattr__(self, "modes", MappingProxyType(dict(modes)))
        canary = self.canary
        if canary is not None and not callable(canary):
            if isinstance(canary, bool) or not isinstance(canary, (int, float)):
                msg = f"StopPolicy.canary must be a share in (0, 1] or a callable, got {canary!r}"
                raise ToolstopConfigError(msg)
            if not 0 < canary <= 1:
                msg = f"StopPolicy.canary must be a share in (0, 1], got {canary!r}"
                raise ToolstopConfigError(msg)
        tools = self.canary_tools
        if tools is not None:
            if isinstance(tools, str) or not all(isinstance(t, str) for t in tools):
                msg = f"StopPolicy.canary_tools must be a tuple of tool names, got {tools!r}"
                raise ToolstopConfigError(msg)
            if not tools:
                msg = "StopPolicy.canary_tools must name at least one tool (None: every tool)"
                raise ToolstopConfigError(msg)
            object.__setattr__(self, "canary_tools", tuple(tools))
        if tools is not None and canary is None:
            msg = "StopPolicy.canary_tools needs a canary (a share or a callable)"
            raise ToolstopConfigError(msg)
        nothing = not any(m != "never" for m in modes.values())
        if self.mode == "never" and canary is not None and not callable(canary) and nothing:
            msg = "StopPolicy.canary: mode='never' has nothing to canary (set mode='hard')"
            raise ToolstopConfigError(msg)
        way_back = self.way_back
        if way_back is not None and not callable(getattr(way_back, "sent_back", None)):
            msg = f"StopPolicy.way_back must be a toolstop.canary.WayBack, got {way_back!r}"
            raise ToolstopConfigError(msg)
        object.__setattr__(self, "_variants", {})
        # read on every tool turn: a plain attribute, not a property
        object.__setattr__(self, "per_run", canary is not None or way_back is not None)

    def tool_mode(self, tool: str) -> StopMode:
        """The mode of `tool`'s stops under this policy (`modes`, else `mode`)."""
        return self.modes.get(tool, self.mode)

    def with_modes(self, mode: str, modes: Mapping[str, str] | None) -> StopPolicy:
        """This policy as one run applies it: its `mode` and per-tool `modes` (cached)."""
        key = (mode, tuple(sorted(modes.items())) if modes else ())
        if key == (self.mode, tuple(sorted(self.modes.items()))) and not self.per_run:
            return self
        variants: dict[Any, StopPolicy] = self._variants  # type: ignore[attr-defined]
        found = variants.get(key)
        if found is None:
            if len(variants) >= 64:
                variants.clear()
            polish = mode == "polish" or any(m == "polish" for _, m in key[1])
            found = variants[key] = replace(
                self,
                mode=mode,  # type: ignore[arg-type]
                modes=dict(key[1]),  # type: ignore[arg-type]
                narrator=self.narrator if polish else None,
                canary=None,
                canary_tools=None,
                way_back=None,
            )
        return found

    def run_modes(
        self, context: ArmContext, sent_back: frozenset[str] | set[str] = frozenset()
    ) -> RunModes:
        """The arm and the modes of a new run (see `canary`, `way_back`), for its record."""
        mode: str = self.mode
        modes: dict[str, str] = dict(self.modes)
        arm: str | None = None
        if self.canary is not None:
            arm, flagged = _arm(self.canary, context, self.canary_tools)
            if flagged is not None:  # a flag named the modes
                mode = flagged.pop("*", mode)
                modes.update(flagged)
            elif arm == "shadow" and self.canary_tools is None:
                mode, modes = "never", {}
            elif arm == "shadow":
                modes.update(dict.fromkeys(self.canary_tools or (), "never"))
        for tool in sent_back:
            modes[tool] = "never"
        differ = {tool: m for tool, m in modes.items() if m != mode}
        return RunModes(mode=mode, modes=differ, arm=arm, sent_back=sorted(sent_back))

    def rank(self, reason: str) -> int:
        """Position of `reason` in `priority` (lower is more important); unlisted reasons last."""
        try:
            return self.priority.index(reason)
        except ValueError:
            return len(self.priority)


@dataclass(frozen=True)
class ArmContext:
    """What a canary callable is given to name a thread's arm.

    Attributes:
        thread: The thread's id (`config["configurable"]["thread_id"]`), else the run's first
            user message: the key the share is hashed from.
        config: The run's config (its `configurable` and `metadata` name the user, tenant...).
        tools: `StopPolicy.canary_tools`, or `None` for every tool.
    """

    thread: str
    config: Mapping[str, Any]
    tools: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RunModes:
    """How one run stops (see `StopPolicy.run_modes`): recorded in its stop record."""

    mode: str
    modes: dict[str, str]
    arm: str | None
    sent_back: list[str]


_logger = logging.getLogger("toolstop")
_warned: set[str] = set()


def share(thread: str, tools: tuple[str, ...] | None) -> float:
    """Where `thread` falls in [0, 1) for a canary of `tools`: the same in every process."""
    key = thread + "\0" + ",".join(sorted(tools) if tools else ["*"])
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _arm(
    canary: Any, context: ArmContext, tools: tuple[str, ...] | None
) -> tuple[str, dict[str, str] | None]:
    """The arm a canary names for a thread, and the per-tool modes a flag gave (else `None`).

    A callable that raises or answers something unknown puts the thread in the shadow arm
    (the safe default: the model answers), logged once per kind of problem."""
    if not callable(canary):
        return ("canary" if share(context.thread, tools) < canary else "shadow"), None
    try:
        said = canary(context)
    except Exception as error:  # a flag service down must not break the run
        _warn(f"StopPolicy.canary raised {type(error).__name__}; the thread runs in the shadow arm")
        return "shadow", None
    if isinstance(said, bool):
        return ("canary" if said else "shadow"), None
    if said in ("canary", "shadow"):
        return said, None
    if said in _MODES:
        arm = "shadow" if said == "never" else "canary"
        return arm, dict.fromkeys(tools, said) if tools else {"*": said}
    if isinstance(said, Mapping) and all(
        isinstance(k, str) and v in _MODES for k, v in said.items()
    ):
        flagged = dict(said)
        arm = "canary" if any(v != "never" for v in flagged.values()) else "shadow"
        return arm, flagged
    shown = ascii(said)[:60] if isinstance(said, str) else type(said).__name__
    _warn(
        f"StopPolicy.canary answered {shown}, not canary, shadow, a mode, a bool or per-tool "
        "modes; the thread runs in the shadow arm"
    )
    return "shadow", None


def _warn(text: str) -> None:
    if text not in _warned:
        _warned.add(text)
        _logger.warning("toolstop: %s", text)


def resolve_policy(policy: Any, where: str, *, per_run: bool = True) -> StopPolicy:
    """`policy`, or `StopPolicy()` for None; a TypeError naming `StopPolicy` for anything else.

    Every router calls it when it is built, so a wrong argument (`StopOnArtifact("hard")`) fails
    there, not at the first model call. `per_run=False` (the adapters): a canary or a way back,
    which need LangGraph's threads and checkpointer, is refused with `ToolstopConfigError`.
    """
    if policy is None:
        return StopPolicy()
    if isinstance(policy, StopPolicy):
        if policy.per_run and not per_run:
            msg = (
                f"{where}: StopPolicy(canary=...) and way_back need a LangGraph router "
                "(threads and a checkpointer); per-tool modes work here"
            )
            raise ToolstopConfigError(msg)
        return policy
    hint = f" (did you mean StopPolicy(mode={policy!r})?)" if policy in _MODES else ""
    kind = type(policy).__name__
    msg = f"{where}: policy must be a StopPolicy or None, got {kind} {policy!r}{hint}"
    raise TypeError(msg)
