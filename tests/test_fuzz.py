"""Property-based fuzzing: hostile artifacts, mixed signals and arbitrary policies never crash
the decision, never stop without a valid signal asking for it, and always leave a JSON record."""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="needs hypothesis (dev extra)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402

from toolstop import Rule, StopPolicy, build_react_graph, decide  # noqa: E402
from toolstop.record import fold_turn, new_record, stopped  # noqa: E402
from toolstop.testing import ScriptedChatModel, assert_valid_history, call, forced_tool, turn  # noqa: E402

# Seconds of CPU each (the 10,000-case fuzz over a minute): on a busy shared machine the
# default 60 s hang guard fired; the guard stays, wide enough for load (10 minutes were measured
# for the 10,000 cases at load 7 on 2 cores).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
SEEN: Counter[str] = Counter()


class Explodes:
    """An object whose every comparison, truth test and lookup raises."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("__eq__")

    def __hash__(self) -> int:
        raise RuntimeError("__hash__")

    def __bool__(self) -> bool:
        raise RuntimeError("__bool__")

    def get(self, *args: Any) -> Any:
        raise RuntimeError("get")


class HostileDict(dict[str, Any]):
    """A dict whose overridden methods raise (the plain dict protocol still works)."""

    def get(self, *args: Any) -> Any:  # type: ignore[override]
        raise RuntimeError("get")

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("__getitem__")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("__eq__")

    __hash__ = None  # type: ignore[assignment]


class Truthy(str):
    """A str subclass that compares equal to everything."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
WEIRD = [
    Explodes,
    lambda: b"stop",
    lambda: float("nan"),
    lambda: math.inf,
    object,
    lambda: Truthy("completed"),
    lambda: (True, "completed"),
    lambda: {"stop": Explodes()},
    lambda: {"stop": True, "reason": Explodes()},
    lambda: {"stop": True, "reason": Truthy("x")},
    lambda: HostileDict(stop=True, reason="completed"),
    lambda: {"stop": 1.0},
    lambda: {"stop": None},
    lambda: "x" * 10_000,
    lambda: {"stop": True, "reason": "completed", "nested": [[[[[[{"deep": True}]]]]]]},
]
# Hypothesis only sees an index; the hostile object is made inside the test (hypothesis itself
# would trip over objects whose __eq__ / __getitem__ raise).
weird = st.integers(min_value=0, max_value=len(WEIRD) - 1).map(lambda i: ("weird", i))
valid = st.builds(
    lambda stop, reason, extra: {"stop": stop, "reason": reason, **extra},
    st.booleans(),
    st.sampled_from(["completed", "transient", "fatal", "policy_block"]) | st.none(),
    st.dictionaries(
        st.text(max_size=5).filter(lambda k: k not in ("stop", "reason")), json_values, max_size=3
    ),
)
artifacts = st.one_of(
    valid.map(lambda v: ("json", v)), json_values.map(lambda v: ("json", v)), weird
)


def make(spec: tuple[str, Any]) -> Any:
    kind, value = spec
    return WEIRD[value]() if kind == "weird" else value


policies = st.builds(
    StopPolicy,
    parallel=st.sampled_from(["all", "any", "first", "priority"]),
    priority=st.permutations(["policy_block", "fatal", "completed", "transient"]).map(tuple),
    mode=st.sampled_from(["hard", "polish", "never"]),
    max_transient_retries=st.none() | st.integers(min_value=0, max_value=5),
)


def turn_with(results: list[tuple[Any, str]]) -> list[Any]:
    calls = [
        {"name": f"t{i}", "args": {}, "id": f"c{i}", "type": "tool_call"}
        for i in range(len(results))
    ]
    messages: list[Any] = [HumanMessage("q"), AIMessage(content="", tool_calls=calls)]
    for i, (artifact, status) in enumerate(results):
        messages.append(
            ToolMessage(
                content=f"content {i}",
                artifact=artifact,
                tool_call_id=f"c{i}",
                name=f"t{i}",
                status=status,
            )
        )
    return messages


STOPPING = {"completed": Rule.COMPLETED, "fatal": Rule.FATAL, "policy_block": Rule.POLICY_BLOCK}


def near_miss(key: Any) -> bool:
    """A key that would be `stop`, `reason` or `answer` with case and outer space ignored, or
    with one doubled letter read once (`stopp`)."""
    keys = ("stop", "reason", "answer")
    if type(key) is not str or key in keys:
        return False
    folded = key.strip().lower()
    undoubled = {
        folded[:i] + folded[i + 1 :] for i in range(1, len(folded)) if folded[i - 1] == folded[i]
    }
    return folded in keys or bool(undoubled & set(keys))


def is_text(value: Any) -> bool:
    """What a message content is: a string, or a list of strings and dicts."""
    return type(value) is str or (
        type(value) is list and all(isinstance(block, (str, dict)) for block in value)
    )


def oracle_signal(artifact: Any, status: str) -> tuple[bool, bool, str | None]:
    """An oracle: what one result says, as `(valid, stop, reason)`. A dict is read through the
    plain dict protocol, so a subclass's overridden methods do not count; `stop` must be a real
    bool; a missing reason is `completed` when stopping and `transient` when not; `transient`
    with `stop: true` is invalid; a key that is a signal key only with case or outer space
    ignored (`"STOP"`) and an `answer` that is not text are invalid; a tool error is invalid
    whatever its artifact says."""
    invalid = (False, False, None)
    if status == "error" or not isinstance(artifact, dict):
        return invalid
    try:
        if dict.get(artifact, "untrusted") is True or "envelope_error" in dict.keys(artifact):
            return invalid
        if any(near_miss(key) for key in dict.keys(artifact)):
            return invalid
        if "stop" not in dict.keys(artifact):
            return invalid
        stop = dict.get(artifact, "stop")
        if type(stop) is not bool:
            return invalid
        raw = dict.get(artifact, "reason")
        if raw is None:
            reason = "completed" if stop else "transient"
        elif isinstance(raw, str) and str(raw) in (*STOPPING, "transient"):
            reason = str(raw)
        else:
            return invalid
        if "answer" in dict.keys(artifact) and not is_text(dict.get(artifact, "answer")):
            return invalid
    except Exception:
        return invalid
    if reason == "transient" and stop:
        return invalid
    return True, stop, reason


def oracle(
    said: list[tuple[bool, bool, str | None]],
    errors: int,
    policy: StopPolicy,
    transient_count: int,
    remaining: int | None,
) -> tuple[Rule, Rule | None, set[int]]:
    """An oracle for the turn: `(rule, would_stop, indices of the deciding calls)`.

    `said` has one entry per tool call of the turn, in call order; a call left without a result
    is `(False, False, None)`: it never asks to stop, so under `all` it keeps the run going."""
    valid = [i for i, (ok, _, _) in enumerate(said) if ok]
    stops = [i for i in valid if said[i][1]]
    deciding: list[int] = []
    if policy.parallel == "all":
        deciding = list(range(len(said))) if said and len(stops) == len(said) else []
    elif policy.parallel == "any":
        deciding = stops
    elif policy.parallel == "first":
        deciding = valid[:1] if valid and said[valid[0]][1] else []
    else:  # priority: the most important reason present decides
        ranks = {i: policy.priority.index(str(said[i][2])) for i in valid}
        top = min(ranks.values(), default=None)
        deciding = [i for i in stops if ranks[i] == top]
    transient = errors + sum(1 for _, _, reason in said if reason == "transient")
    rule = Rule.NONE
    if deciding:
        rule = STOPPING[min((str(said[i][2]) for i in deciding), key=policy.priority.index)]
    elif (
        transient
        and policy.max_transient_retries is not None
        and transient_count + transient > policy.max_transient_retries
    ):
        rule = Rule.RETRY_BUDGET
    would_stop = None
    if rule is not Rule.NONE and policy.mode == "never":
        would_stop, rule = rule, Rule.NONE
    if rule is Rule.NONE and said and remaining is not None and remaining <= 2:
        rule = Rule.STEP_BUDGET  # the default loop: tools, then a node that ends at >= 1 step
    return rule, would_stop, set(deciding) if rule in STOPPING.values() else set()


@pytest.mark.mutation  # about 6 s: the independent oracle of every parallel rule and budget
@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    results=st.lists(
        st.tuples(artifacts, st.sampled_from(["success", "success", "error"])),
        min_size=1,
        max_size=4,
    ),
    policy=policies,
    transient_count=st.integers(min_value=0, max_value=6),
    remaining=st.none() | st.integers(min_value=0, max_value=30),
    drop_last=st.booleans(),
)
def test_decide_never_raises_and_stops_only_on_valid_signals(
    results: list[tuple[Any, str]],
    policy: StopPolicy,
    transient_count: int,
    remaining: int | None,
    drop_last: bool,
) -> None:
    results = [(make(spec), status) for spec, status in results]
    messages = turn_with(results)
    said = [oracle_signal(a, s) for a, s in results]
    errors = sum(1 for _, status in results if status == "error")
    if drop_last and len(results) > 1:
        messages = messages[:-1]  # the last call is left without a result
        said[-1] = (False, False, None)
        errors -= results[-1][1] == "error"
    decision = decide(messages, policy, transient_count=transient_count, remaining_steps=remaining)
    SEEN[decision.rule.value] += 1
    SEEN["cases"] += 1
    SEEN["invalid"] += sum(1 for signal in decision.signals if not signal.valid)
    if decision.would_stop is not None:
        SEEN[f"would_stop:{decision.would_stop.value}"] += 1
    rule, would_stop, deciding = oracle(said, errors, policy, transient_count, remaining)
    assert (decision.rule, decision.would_stop) == (rule, would_stop)
    assert decision.stop is (rule is not Rule.NONE)
    if rule in STOPPING.values():
        assert {int(s.tool_call_id[1:]) for s in decision.deciding} == deciding
    assert [s.valid for s in decision.signals] == [ok for ok, _, _ in said]
    record = fold_turn(new_record(policy), decision)
    if decision.stop:
        record = stopped(record, decision)
    json.loads(json.dumps(record, allow_nan=False))


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    turns=st.lists(st.lists(artifacts, min_size=1, max_size=3), min_size=1, max_size=4),
    policy=policies,
)
def test_whole_graph_runs_keep_history_valid_and_records_json(
    turns: list[list[Any]], policy: StopPolicy
) -> None:
    width = max(len(t) for t in turns)
    tools = [
        forced_tool(
            f"t{i}",
            *[(f"content {n}", make(t[i]) if i < len(t) else None) for n, t in enumerate(turns)],
        )
        for i in range(width)
    ]
    script: list[Any] = [turn(*[call(f"t{i}") for i in range(width)]) for _ in turns] + [
        "final answer"
    ] * 2
    model = ScriptedChatModel(script)
    graph = build_react_graph(model, tools, policy=policy)
    state = graph.invoke({"messages": [HumanMessage("q")]}, {"recursion_limit": 50})
    assert_valid_history(state["messages"])
    json.loads(json.dumps(state["stop_record"], allow_nan=False))
    if state["stop_record"]["stopped"] and state["stop_record"]["rule"] in (
        "completed",
        "fatal",
        "policy_block",
    ):
        assert policy.mode != "never"


def test_the_fuzzing_was_not_vacuous() -> None:
    """The generated cases reached every rule and many invalid signals. It reads the counts of
    the fuzzer's run in this session, and runs the fuzzer itself when it has not run (alone, -k)."""
    if not SEEN["cases"]:
        test_decide_never_raises_and_stops_only_on_valid_signals()
    for rule in ("completed", "fatal", "policy_block", "retry_budget", "step_budget", "none"):
        assert SEEN[rule] > 0, rule
    for rule in ("completed", "fatal", "policy_block", "retry_budget"):
        assert SEEN[f"would_stop:{rule}"] > 0, f"would_stop {rule}"
    assert SEEN["invalid"] > 1000
    assert SEEN["cases"] >= 10_000
