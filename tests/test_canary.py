"""A canary: hard mode on a stable share of threads, per-tool modes, and the re-ask verdict."""

from __future__ import annotations

import asyncio
import io
import logging
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from toolstop import Outcome, StopPolicy, ToolstopConfigError, signal
from toolstop._check.routers import available_routers
from toolstop.decision import decide
from toolstop.policy import ArmContext, share
from toolstop.testing import ScriptedChatModel, call, forced_tool

pytestmark = pytest.mark.contract  # on every stack of the matrix

ROUTERS = available_routers()
ANSWER = "Order 42 ships on Monday."


def _agent(router: Any, policy: StopPolicy, *steps: Any, tools: list[Any] | None = None) -> Any:
    model = ScriptedChatModel(list(steps))
    tools = tools or [forced_tool("lookup", (ANSWER, signal(Outcome.COMPLETED)))]
    return router.build(model, tools, policy=policy, checkpointer=InMemorySaver())


def _ask(agent: Any, thread: str, text: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    record: dict[str, Any] = agent.invoke({"messages": [HumanMessage(text)]}, config)["stop_record"]
    return record


# -- the policy --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"canary": 0}, r"share in \(0, 1\]"),
        ({"canary": 1.5}, r"share in \(0, 1\]"),
        ({"canary": True}, "share in"),
        ({"canary": "10%"}, "share in"),
        ({"canary_tools": ("a",)}, "needs a canary"),
        ({"canary": 0.1, "canary_tools": "a"}, "tuple of tool names"),
        ({"canary": 0.1, "canary_tools": ()}, "at least one tool"),
        ({"modes": {"a": "soft"}}, "modes are"),
        ({"modes": ["a"]}, "must map tool names"),
        ({"mode": "never", "canary": 0.1}, "nothing to canary"),
        ({"way_back": object()}, "WayBack"),
    ],
)
def test_a_wrong_canary_fails_when_the_policy_is_built(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ToolstopConfigError, match=match):
        StopPolicy(**kwargs)


def test_the_share_is_stable_across_processes_and_near_the_asked_share() -> None:
    threads = [f"user-{i}" for i in range(4000)]
    here = [share(t, ("lookup",)) for t in threads[:50]]
    code = (
        "from toolstop.policy import share;"
        "print([share(f'user-{i}', ('lookup',)) for i in range(50)])"
    )
    there = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    ).stdout
    assert eval(there) == here  # a list of floats this test printed
    policy = StopPolicy(canary=0.1)
    arms = Counter(policy.run_modes(ArmContext(t, {})).arm for t in threads)
    # binomial(4000, 0.1): mean 400, sd 19; 5 sd either way
    assert 305 <= arms["canary"] <= 495
    assert arms["canary"] + arms["shadow"] == len(threads)


def test_another_canaried_tool_set_reshuffles_the_threads() -> None:
    threads = [f"t{i}" for i in range(2000)]
    first = {t for t in threads if share(t, ("a",)) < 0.2}
    second = {t for t in threads if share(t, ("b",)) < 0.2}
    assert first != second
    assert share("t1", ("a", "b")) == share("t1", ("b", "a"))  # the order of the names is not


def test_the_shadow_arm_shadows_only_the_canaried_tools() -> None:
    policy = StopPolicy(mode="hard", canary=0.5, canary_tools=("exchange",))
    seen = {policy.run_modes(ArmContext(f"t{i}", {})).arm: i for i in range(40)}
    shadow = policy.run_modes(ArmContext(f"t{seen['shadow']}", {}))
    canary = policy.run_modes(ArmContext(f"t{seen['canary']}", {}))
    assert (shadow.mode, shadow.modes) == ("hard", {"exchange": "never"})
    assert (canary.mode, canary.modes) == ("hard", {})


def _turn(*calls: tuple[str, Outcome]) -> list[Any]:
    asking = AIMessage(
        "", tool_calls=[{"name": n, "args": {}, "id": f"c{i}"} for i, (n, _) in enumerate(calls)]
    )
    results = [
        ToolMessage("r", tool_call_id=f"c{i}", name=n, artifact=signal(o))
        for i, (n, o) in enumerate(calls)
    ]
    return [HumanMessage("q"), asking, *results]


def test_per_tool_modes_stop_on_live_tools_and_record_the_shadowed() -> None:
    policy = StopPolicy(parallel="any", modes={"exchange": "never"})
    live = decide(_turn(("lookup", Outcome.COMPLETED)), policy)
    assert (live.stop, live.rule.value) == (True, "completed")
    shadowed = decide(_turn(("exchange", Outcome.COMPLETED)), policy)
    assert (shadowed.stop, shadowed.would_stop and shadowed.would_stop.value) == (
        False,
        "completed",
    )
    assert [s.tool for s in shadowed.deciding] == ["exchange"]
    both = decide(_turn(("exchange", Outcome.COMPLETED), ("lookup", Outcome.FATAL)), policy)
    assert (both.stop, both.rule.value) == (True, "fatal")


def test_under_all_a_shadowed_tool_keeps_the_turn_going() -> None:
    policy = StopPolicy(parallel="all", modes={"exchange": "never"})
    turn = _turn(("exchange", Outcome.COMPLETED), ("lookup", Outcome.COMPLETED))
    decision = decide(turn, policy)
    assert not decision.stop
    assert decision.would_stop is not None
    assert decision.would_stop.value == "completed"


def test_a_stop_takes_its_deciding_tools_mode() -> None:
    policy = StopPolicy(mode="never", modes={"lookup": "polish", "book": "hard"})
    assert decide(_turn(("lookup", Outcome.COMPLETED)), policy).narrate
    booked = decide(_turn(("book", Outcome.COMPLETED)), policy)
    assert booked.stop
    assert not booked.narrate


# -- on every router ---------------------------------------------------------------------------
@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_each_thread_keeps_its_arm_and_every_record_says_it(router: Any) -> None:
    policy = StopPolicy(mode="hard", canary=0.3)
    by_arm: Counter[tuple[str, str, str]] = Counter()
    for i in range(30):
        steps = [call("lookup", q="42"), "model answer", call("lookup", q="43"), "answer 2"]
        agent = _agent(router, policy, *steps)
        first = _ask(agent, f"thread-{i}", "when does order 42 ship?")
        second = _ask(agent, f"thread-{i}", "and order 43?")
        assert first["arm"] == second["arm"]
        by_arm[(first["arm"], first["mode"], first["rule"])] += 1
        if first["arm"] == "shadow":
            assert (first["would_stop"], first["stopped"]) == ("completed", False)
        else:
            assert first["stopped"]
            assert "modes" not in first
    assert set(by_arm) == {("canary", "hard", "completed"), ("shadow", "never", "none")}


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_the_next_run_says_whether_the_user_asked_again(router: Any) -> None:
    steps = [
        call("lookup", q="42"),
        call("lookup", q="42"),
        call("lookup", q="42"),
        call("lookup", q="7"),
    ]
    agent = _agent(router, StopPolicy(mode="hard"), *steps)
    first = _ask(agent, "t", "When does my order 42 ship?")
    assert "reask" not in first
    second = _ask(agent, "t", "That did not help. When does order 42 ship?")
    assert second["reask"] == {
        "run": 1, "asked_again": True, "why": "complaint", "stopped": True, "tools": ["lookup"]
    }  # fmt: skip
    third = _ask(agent, "t", "ok thanks, something else")
    assert third["reask"]["why"] == "same_call"  # the same lookup, the same arguments
    fourth = _ask(agent, "t", "next one")
    assert fourth["reask"]["asked_again"] is False  # another call: not asked again
    assert "order" not in repr(fourth["reask"]).casefold()  # no content


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_no_verdict_after_a_run_the_model_answered(router: Any) -> None:
    tools = [forced_tool("lookup", (ANSWER, signal(Outcome.TRANSIENT)))]
    agent = _agent(router, StopPolicy(), call("lookup"), "sorry", "ok", tools=tools)
    _ask(agent, "t", "when does order 42 ship?")
    assert "reask" not in _ask(agent, "t", "that did not help")


def test_a_flag_names_the_arm_or_the_modes_per_thread(caplog: pytest.LogCaptureFixture) -> None:
    said: dict[str, Any] = {"a": True, "b": "shadow", "c": {"lookup": "polish"}, "d": "never"}

    def flag(context: ArmContext) -> Any:
        if context.thread == "boom":
            raise RuntimeError("flag service down")
        return said.get(context.thread, 42)

    policy = StopPolicy(mode="hard", canary=flag)
    got = {t: policy.run_modes(ArmContext(t, {})) for t in ("a", "b", "c", "d")}
    assert (got["a"].arm, got["a"].mode) == ("canary", "hard")
    assert (got["b"].arm, got["b"].mode) == ("shadow", "never")
    assert (got["c"].arm, got["c"].modes) == ("canary", {"lookup": "polish"})
    assert (got["d"].arm, got["d"].mode) == ("shadow", "never")
    with caplog.at_level(logging.WARNING, logger="toolstop"):
        for _ in range(3):
            assert policy.run_modes(ArmContext("boom", {})).arm == "shadow"
            assert policy.run_modes(ArmContext("odd", {})).mode == "never"
    assert (
        len([r for r in caplog.records if "flag" in r.getMessage() or "canary" in r.getMessage()])
        == 2
    )


class _Back:
    """A way back that sends `lookup` back (what `toolstop.canary.WayBack` answers)."""

    def __init__(self) -> None:
        self.calls = 0

    def sent_back(self, checkpointer: Any) -> frozenset[str]:
        self.calls += 1
        assert checkpointer is not None  # the run's own checkpointer is read
        return frozenset({"lookup"})

    async def asent_back(self, checkpointer: Any) -> frozenset[str]:
        return self.sent_back(checkpointer)


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_tool_sent_back_runs_in_never_mode(router: Any, asynchronous: bool) -> None:
    back = _Back()
    policy = StopPolicy(mode="hard", canary=1.0, way_back=back)
    agent = _agent(router, policy, call("lookup", q="42"), "the model's answer")
    given = {"messages": [HumanMessage("when?")]}
    config = {"configurable": {"thread_id": "t"}}
    if asynchronous:
        record = asyncio.run(agent.ainvoke(given, config))["stop_record"]
    else:
        record = agent.invoke(given, config)["stop_record"]
    assert back.calls >= 1
    assert (record["sent_back"], record["modes"]) == (["lookup"], {"lookup": "never"})
    assert (record["arm"], record["stopped"], record["would_stop"]) == (
        "canary",
        False,
        "completed",
    )


def test_the_adapters_refuse_a_canary() -> None:
    pytest.importorskip("agents")
    from toolstop.openai_agents import stop_on_artifact

    with pytest.raises(ToolstopConfigError, match="LangGraph router"):
        stop_on_artifact(StopPolicy(canary=0.5))
    assert stop_on_artifact(StopPolicy(modes={"a": "never"})) is not None


# -- OpenFeature -------------------------------------------------------------------------------
def _provider(evaluate: Any, default: str = "shadow") -> Any:
    from openfeature.provider.in_memory_provider import InMemoryFlag, InMemoryProvider

    flag = InMemoryFlag(
        default_variant=default,
        variants={"canary": "canary", "shadow": "shadow", "hard": "hard"},
        context_evaluator=evaluate,
    )
    return InMemoryProvider({"toolstop-canary": flag})


def _by_tenant(flag: Any, context: Any) -> Any:
    from openfeature.flag_evaluation import FlagResolutionDetails

    attributes = context.attributes if context is not None else {}
    variant = "canary" if attributes.get("tenant") == "beta" else "shadow"
    return FlagResolutionDetails(value=variant, variant=variant)


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: r.name)
def test_an_openfeature_flag_names_the_arm_from_the_run_config(router: Any) -> None:
    pytest.importorskip("openfeature")
    from openfeature import api

    from toolstop.flags import OpenFeatureArm

    api.set_provider(_provider(_by_tenant))
    try:
        policy = StopPolicy(mode="hard", canary=OpenFeatureArm(attributes=("tenant",)))
        arms = {}
        for tenant in ("beta", "stable"):
            agent = _agent(router, policy, call("lookup", q="42"), "the model's answer")
            config = {"configurable": {"thread_id": f"t-{tenant}", "tenant": tenant}}
            given = {"messages": [HumanMessage("when?")]}
            arms[tenant] = agent.invoke(given, config)["stop_record"]
        assert (arms["beta"]["arm"], arms["beta"]["rule"]) == ("canary", "completed")
        assert (arms["stable"]["arm"], arms["stable"]["would_stop"]) == ("shadow", "completed")
    finally:
        api.clear_providers()


def test_openfeature_sends_only_the_named_values_and_fails_safe() -> None:
    pytest.importorskip("openfeature")
    from openfeature import api

    from toolstop.flags import OpenFeatureArm

    seen: list[Any] = []

    def broken(flag: Any, context: Any) -> Any:
        seen.append(context)
        raise RuntimeError("provider down")

    api.set_provider(_provider(broken))
    try:
        arm = OpenFeatureArm(attributes=("tenant",))
        config = {"configurable": {"thread_id": "t", "tenant": "beta", "api_key": "sk-secret"}}
        policy = StopPolicy(mode="hard", canary=arm)
        assert policy.run_modes(ArmContext("t", config)).arm == "shadow"
        assert seen[0].targeting_key == "t"
        assert dict(seen[0].attributes) == {"tenant": "beta"}
    finally:
        api.clear_providers()
    with pytest.raises(ToolstopConfigError, match="kind"):
        OpenFeatureArm(kind="number")  # type: ignore[arg-type]


# -- explain -----------------------------------------------------------------------------------
def test_explain_says_the_arm_and_whether_the_user_asked_again(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sqlite = pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the `sqlite` extra")
    SqliteSaver = sqlite.SqliteSaver

    from toolstop._check.routers import GRAPH
    from toolstop.cli import main

    db = str(tmp_path / "threads.sqlite")
    policy = StopPolicy(mode="hard", canary=0.5, canary_tools=("lookup",))
    with SqliteSaver.from_conn_string(db) as saver:
        for thread in ("a", "b", "c", "d"):
            agent = GRAPH.build(
                ScriptedChatModel([call("lookup", q="42"), "It ships Monday.", "Sorry."]),
                [forced_tool("lookup", (ANSWER, signal(Outcome.COMPLETED)))],
                policy=policy,
                checkpointer=saver,
            )
            config = {"configurable": {"thread_id": thread}}
            agent.invoke({"messages": [HumanMessage("When does order 42 ship?")]}, config)
            agent.invoke({"messages": [HumanMessage("That is wrong, try again")]}, config)
    arms = {}
    for thread in ("a", "b", "c", "d"):
        assert main(["explain", thread, "--db", db]) == 0
        text = capsys.readouterr().out
        arms[thread] = "canary arm: canary" in text
        assert "asked again after run 1 (" in text
        assert ": yes (complaint)" in text
        if not arms[thread]:
            assert "canary arm: shadow (lookup never)" in text
            assert "would have stopped on lookup" in text
    assert set(arms.values()) == {True, False}


def test_explain_reads_a_hostile_canary_record_without_trusting_it() -> None:
    from toolstop._printable import printable_data
    from toolstop.report.explain import _modes, _print_canary, _reask

    evil = "\x1b[2J" + "x" * 100_000
    assert _reask({"asked_again": "yes"}) is None
    assert _reask([1]) is None
    verdict = _reask({"asked_again": True, "run": True, "why": evil, "tools": evil, "arm": 3})
    assert verdict is not None
    assert (verdict["run"], verdict["tools"], verdict["arm"]) == (None, [], None)
    modes = _modes({evil: evil, **{f"t{i}": "never" for i in range(50)}})
    assert len(modes) == 20
    run = {"arm": evil[:50], "modes": modes, "sent_back": [evil[:50]], "reask": verdict}
    out = io.StringIO()
    _print_canary(printable_data(run), out)  # as print_explanation escapes every run
    assert "\x1b" not in out.getvalue()
    assert "asked again after run None" in out.getvalue()


def test_a_canary_of_a_sub_agent_tool_holds_its_forwarded_stop_in_the_shadow_arm() -> None:
    """Two levels: a sub-agent that stops (hard) as a tool of a parent under a canary of that
    tool; the parent's canary arm ends on the forwarded stop, the shadow arm's model answers."""
    from toolstop import build_react_graph, subagent_tool

    saver = InMemorySaver()
    seen: Counter[tuple[Any, ...]] = Counter()
    for n in range(16):
        child = build_react_graph(
            ScriptedChatModel([call("refund_status")]),
            [forced_tool("refund_status", (ANSWER, signal(Outcome.COMPLETED)))],
        )
        tool = subagent_tool(child, name="refunds", description="Answers refund questions.")
        parent = build_react_graph(
            ScriptedChatModel([call("refunds", request="status?"), "It ships.", "Sorry!"]),
            [tool],
            policy=StopPolicy(mode="hard", canary=0.5, canary_tools=("refunds",)),
            checkpointer=saver,
        )
        config = {"configurable": {"thread_id": f"parent-{n}"}}
        first = parent.invoke({"messages": [HumanMessage("When does it ship?")]}, config)
        second = parent.invoke({"messages": [HumanMessage("That is wrong, try again")]}, config)
        record, reask = first["stop_record"], second["stop_record"]["reask"]
        seen[(record["arm"], record["rule"], record["would_stop"], record["model_calls"])] += 1
        assert (reask["arm"], reask["asked_again"]) == (record["arm"], True)
    assert set(seen) == {("canary", "completed", None, 1), ("shadow", "none", "completed", 2)}
