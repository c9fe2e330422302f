"""The check engine's harness (`toolstop._check.harness`): transcripts, breach sentences, goldens,
judging, and how a run is driven through its interrupts.

tests/test_check.py runs the whole matrix on every router; here each rule is pinned on small
transcripts built by hand, on an agent of our own whose runs the test scripts, and on a few real
runs compared whole with their goldens.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from routers import HAS_AGENTS
from toolstop._check import harness
from toolstop._check.harness import (
    CheckResult,
    broken_runs,
    check,
    compare,
    describe,
    goldens_dir,
    invariant_breaches,
    judge,
    load_golden,
    needs_async,
    planned_malformed_signals_hidden,
    run_scenario,
    transcript_of,
    write_golden,
)
from toolstop._check.routers import GRAPH, MIDDLEWARE, Router
from toolstop._check.scenarios import SCENARIOS, Scenario
from toolstop.outcome import Outcome, signal
from toolstop.policy import StopPolicy
from toolstop.testing.forced import forced_tool
from toolstop.testing.scripted import ScriptedChatModel, call

needs_agents = pytest.mark.skipif(not HAS_AGENTS, reason="needs langchain's create_agent")

PAGE = '{"topic": "refund"}'
FENCED = '```json\n{"topic": "refund"}\n```'


def scenario(
    name: str = "s",
    *,
    mode: Any = "hard",
    stops: bool = True,
    on_budget: Any = "message",
    script: tuple[Any, ...] = (),
    review: tuple[dict[str, Any], ...] = (),
    recursion_limit: int | None = None,
    middleware: Any = None,
) -> Scenario:
    return Scenario(
        name=name,
        description=f"The {name} scenario.",
        tools=lambda: [forced_tool("lookup", (PAGE, signal(Outcome.COMPLETED)))],
        script=script,
        policy=StopPolicy(mode=mode, on_budget=on_budget),
        stops=stops,
        review=review,
        recursion_limit=recursion_limit,
        middleware=middleware,
    )


def tool_message(
    content: Any = PAGE,
    *,
    call_id: str = "c1",
    name: str = "lookup",
    artifact: Any = None,
    **kw: Any,
) -> ToolMessage:
    if artifact is None:
        artifact = signal(Outcome.COMPLETED)
    return ToolMessage(content, tool_call_id=call_id, name=name, artifact=artifact, **kw)


def asked(*names: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": n, "args": {}, "id": f"c{i + 1}"} for i, n in enumerate(names)]
    )


def relay(text: str) -> AIMessage:
    return AIMessage(text, response_metadata={"toolstop": {"relay": True}})


def record(**fields: Any) -> dict[str, Any]:
    return {"rule": "completed", "tool_call_ids": ["c1"], **fields}


# -- one message, one signal, one record -------------------------------------------------------
def test_each_message_is_described_by_its_kind_and_tools() -> None:
    assert describe(HumanMessage("q")) == "human"
    assert describe(SystemMessage("s")) == "system"
    assert describe(AIMessage("a")) == "ai"
    assert describe(asked("lookup", "search")) == "ai[lookup,search]"
    assert describe(tool_message()) == "tool[lookup]"
    assert describe(tool_message(status="error")) == "tool[lookup]:error"


def test_each_tool_result_is_described_by_its_signal() -> None:
    def signal_of(artifact: Any) -> str:
        state = {"messages": [tool_message(artifact=artifact)]}
        result = transcript_of(scenario(), GRAPH, [], state, None)["tool_results"]
        assert [r["tool"] for r in result] == ["lookup"]
        return str(result[0]["signal"])

    assert signal_of(signal(Outcome.COMPLETED)) == "completed:stop"
    assert signal_of(signal(Outcome.TRANSIENT)) == "transient:continue"
    assert signal_of(signal(Outcome.FATAL)) == "fatal:stop"
    assert signal_of({"stop": "yes"}) == "invalid:stop_not_bool"


def test_token_counts_are_normalised_and_the_rest_kept() -> None:
    normalise = harness._normalise_record
    assert normalise(None) is None
    assert normalise("text") == "text"
    got = normalise(
        {
            "rule": "completed",
            "input_tokens": 120,
            "output_tokens": 0,
            "would_save": {"model_calls": 1, "input_tokens": 5, "output_tokens": 3},
            "ended_after": {"turn": 2, "input_tokens": 0, "output_tokens": 9},
        }
    )
    assert got == {
        "rule": "completed",
        "input_tokens": "<positive>",
        "output_tokens": 0,
        "would_save": {
            "model_calls": 1,
            "input_tokens": "<positive>",
            "output_tokens": "<positive>",
        },
        "ended_after": {"turn": 2, "input_tokens": 0, "output_tokens": "<positive>"},
    }
    assert normalise({"rule": "fatal", "output_tokens": 4, "would_save": None}) == {
        "rule": "fatal",
        "input_tokens": 0,
        "output_tokens": "<positive>",
        "would_save": None,
    }


def test_the_final_message_is_its_kind_its_text_and_whether_it_is_a_relay() -> None:
    final = harness._final
    assert final([]) == {"type": None, "content": None}
    assert final([HumanMessage("q"), relay("the page")]) == {
        "type": "ai",
        "content": "the page",
        "relay": True,
    }
    assert final([AIMessage([{"type": "text", "text": "a"}, "b"])]) == {
        "type": "ai",
        "content": "ab",
        "relay": False,
    }
    assert final([AIMessage("a", response_metadata={"toolstop": {}})])["relay"] is False
    assert final([tool_message()]) == {"type": "tool[lookup]", "content": PAGE}


# -- transcripts -------------------------------------------------------------------------------
def test_a_transcript_holds_the_run_without_ids() -> None:
    s = scenario("ran")
    model = ScriptedChatModel([call("lookup", query="q"), "spare"])
    model.bind_tools([forced_tool("lookup", ("x", None))]).invoke([HumanMessage("q")])
    messages = [HumanMessage("q"), asked("lookup"), tool_message(), relay(FENCED)]
    state = {"messages": messages, "stop_record": record(input_tokens=7)}
    transcript = transcript_of(s, GRAPH, ["agent", "tools", "finalize"], state, model)
    assert transcript == {
        "scenario": "ran",
        "mode": "hard",
        "router": "graph",
        "description": "The ran scenario.",
        "path": ["agent", "tools", "finalize"],
        "model_calls": [{"saw": ["human"], "tools": ["lookup"], "answer": "ai[lookup]"}],
        "script": {"steps": 0, "unused": 1},
        "tool_results": [{"tool": "lookup", "signal": "completed:stop"}],
        "final": {"type": "ai", "content": FENCED, "relay": True},
        "relay_is_tool_content": True,
        "history_problems": [],
        "stop_record": {
            "rule": "completed",
            "tool_call_ids": ["c1"],
            "input_tokens": "<positive>",
            "output_tokens": 0,
        },
    }
    assert list(transcript) == [
        "scenario", "mode", "router", "description", "path", "model_calls", "script",
        "tool_results", "final", "relay_is_tool_content", "history_problems", "stop_record",
    ]  # fmt: skip
    # no model of the check's own (a real model): no calls, no script
    orphan = {"messages": [HumanMessage("q"), tool_message(), AIMessage("a")]}
    problems = transcript_of(s, GRAPH, [], orphan, None)["history_problems"]
    assert [p.split(" ", 1)[0] for p in problems] == ["openai", "anthropic", "mistral", "mistral"]
    bare = transcript_of(s, GRAPH, [], {}, None)
    assert "model_calls" not in bare
    assert "script" not in bare
    assert bare["tool_results"] == []
    assert bare["final"] == {"type": None, "content": None}
    assert bare["stop_record"] is None
    assert bare["history_problems"] == [
        "end: the thread does not end on an AIMessage without tool calls"
    ]


def test_a_hard_stops_relay_is_checked_against_the_results_it_shows() -> None:
    def relay_ok(
        text: str, rec: dict[str, Any], *messages: Any, mode: Any = "hard", **kw: Any
    ) -> Any:
        state = {"messages": [HumanMessage("q"), *messages, relay(text)], "stop_record": rec}
        return transcript_of(scenario(mode=mode, **kw), GRAPH, [], state, None).get(
            "relay_is_tool_content"
        )

    first, second = tool_message("one", call_id="c1"), tool_message("two", call_id="c2")
    turn = asked("lookup", "lookup")
    # `relayed` first, in its order; then the deciding calls; an id without a result is skipped
    assert relay_ok("two\n\none", record(relayed=["c2", "c1"]), turn, first, second) is True
    assert relay_ok("one\n\ntwo", record(relayed=["c2", "c1"]), turn, first, second) is False
    assert relay_ok("one", record(relayed=[], tool_call_ids=["c1"]), turn, first, second) is True
    assert relay_ok("one", record(tool_call_ids=["c1", "c9"]), turn, first, second) is True
    assert relay_ok("", record(tool_call_ids=None), turn, first, second) is True
    assert relay_ok(FENCED, record(), asked("lookup"), tool_message()) is True
    assert relay_ok("Refunds.", record(), asked("lookup"), tool_message(artifact=signal(
        Outcome.COMPLETED, answer="Refunds."))) is True  # fmt: skip
    assert relay_ok("declined", record(rule="fatal"), asked("lookup"), tool_message("declined"))
    # only a hard stop that completed or failed for good is checked
    assert relay_ok("x", record(rule="retry_budget"), asked("lookup"), tool_message()) is None
    assert relay_ok("x", record(), asked("lookup"), tool_message(), mode="polish") is None
    state = {"messages": [relay("x")], "stop_record": None}
    assert "relay_is_tool_content" not in transcript_of(scenario(), GRAPH, [], state, None)


def test_an_edited_calls_relay_may_be_the_text_after_the_reviewers_note() -> None:
    edited = ({"type": "edit", "edited_action": {"name": "lookup", "args": {}}},)
    noted = tool_message(f"Note: the call was edited.\n{PAGE}")

    def relay_ok(text: str, *, review: Any = edited, rec: Any = None, **kw: Any) -> Any:
        messages = [HumanMessage("q"), asked("lookup"), noted, relay(text)]
        state = {"messages": messages, "stop_record": rec or record()}
        return transcript_of(scenario(review=review, **kw), GRAPH, [], state, None)[
            "relay_is_tool_content"
        ]

    assert relay_ok(FENCED) is True
    assert relay_ok(FENCED, review=({"type": "approve"},)) is False  # no edit: verbatim only
    assert relay_ok("") is False  # an empty relay is never the tool's text
    assert relay_ok("Note: the call was edited.") is False
    assert relay_ok(FENCED, rec=record(tool_call_ids=["c1", "c1"])) is False  # one call only
    assert relay_ok(FENCED, rec=record(tool_call_ids=["c9"])) is False

    after = harness._after_a_note
    results = {"c1": tool_message("a\nb\n{}"), "c2": tool_message("x")}
    assert after(results, ["c1"]) == ["b\n{}", "```json\n{}\n```"]
    assert after(results, ["c2"]) == []
    assert after(results, ["c1", "c2"]) == []
    assert after(results, ["c3"]) == []


# -- driving a run -----------------------------------------------------------------------------
class Agent:
    """An agent of one's own (not a LangGraph graph): its runs and interrupts are scripted."""

    def __init__(
        self,
        state: dict[str, Any] | None = None,
        *,
        interrupts: int = 0,
        node: str = "HumanInTheLoopMiddleware",
        value: Any = None,
        checkpointer: Any = "saver",
        error: Exception | None = None,
    ) -> None:
        self.state = state if state is not None else {}
        self.interrupts = interrupts
        self.node = node
        self.value = value if value is not None else {"action_requests": [{}]}
        self.checkpointer = checkpointer
        self.error = error
        self.runs: list[tuple[Any, Any]] = []
        self.ways: list[str] = []  # how each run was made: invoke or ainvoke
        self.asked: list[Any] = []  # the config each get_state was given

    def invoke(self, inputs: Any, config: Any) -> dict[str, Any]:
        self.ways.append("invoke")
        return self._run(inputs, config)

    def _run(self, inputs: Any, config: Any) -> dict[str, Any]:
        self.runs.append((inputs, config))
        if self.error is not None:
            raise self.error
        return dict(self.state, run=len(self.runs))

    async def ainvoke(self, inputs: Any, config: Any) -> dict[str, Any]:
        self.ways.append("ainvoke")
        return self._run(inputs, config)

    def get_state(self, config: Any, *, subgraphs: bool = False) -> Any:
        self.asked.append(config)
        pending = len(self.runs) <= self.interrupts
        interrupts = [SimpleNamespace(value=self.value)] if pending else []
        tasks = [SimpleNamespace(name=f"{self.node}.after_model.1", interrupts=interrupts)]
        return SimpleNamespace(tasks=[SimpleNamespace(name="other", interrupts=[]), *tasks])

    async def aget_state(self, config: Any, *, subgraphs: bool = False) -> Any:
        return self.get_state(config, subgraphs=subgraphs)


def router_of(agent: Agent, built: list[Any] | None = None, **kw: Any) -> Router:
    def build(model: Any, tools: Any, **options: Any) -> Any:
        if built is not None:
            built.append((model, tools, options))
        return agent

    return Router(name="own", build=build, model_node="m", stop_node="s", polish_node="p", **kw)


FINISHED = {
    "messages": [HumanMessage("q"), asked("lookup"), tool_message(), relay(FENCED)],
    "stop_record": record(),
}


def resumes(agent: Agent) -> list[Any]:
    return [inputs.resume for inputs, _ in agent.runs[1:]]


@pytest.mark.parametrize("run_async", [False, True])
def test_every_interrupt_is_answered_until_the_run_ends(run_async: bool) -> None:
    decision = {"type": "edit", "edited_action": {"name": "lookup", "args": {}}}
    agent = Agent(FINISHED, interrupts=2, value={"action_requests": [{}, {}]})
    s = scenario(review=(decision,))
    transcript = run_scenario(s, router_of(agent), run_async=run_async)
    assert len(agent.runs) == 3
    assert agent.runs[0][0]["messages"][0].content == "How do refunds work?"
    # the reviewer's decisions first, then approvals (one per action request)
    assert resumes(agent) == [{"decisions": [decision]}, {"decisions": [{"type": "approve"}] * 2}]
    assert transcript["interrupts"] == ["HumanInTheLoopMiddleware"]
    assert "waiting_for" not in transcript
    assert transcript["path"] == []
    assert transcript["final"]["relay"] is True
    config = agent.runs[0][1]
    assert config["configurable"]["thread_id"].startswith("toolstop-check-s.hard-")
    assert all(c is config for _, c in agent.runs)
    assert len(agent.asked) == 3
    assert all(c is config for c in agent.asked)
    assert agent.ways == ["ainvoke" if run_async else "invoke"] * 3


@pytest.mark.parametrize("run_async", [False, True])
def test_a_review_that_asks_again_forever_is_given_up_after_twenty_answers(
    run_async: bool,
) -> None:
    agent = Agent(FINISHED, interrupts=1000, node="MyReview", value="not a dict")
    transcript = run_scenario(scenario(), router_of(agent), run_async=run_async)
    assert len(agent.runs) == 21
    assert resumes(agent) == [{"decisions": [{"type": "approve"}]}] * 20
    assert transcript["waiting_for"] == "MyReview"
    assert transcript["interrupts"] == ["MyReview"] * 20
    assert len(agent.asked) == 21
    assert all(c is agent.runs[0][1] for c in agent.asked)
    assert transcript["final"]["relay"] is True  # the last state is the transcript's
    assert invariant_breaches(scenario(), transcript)[0] == (
        "the run was still waiting at a human-review interrupt from MyReview after 20 answers: "
        "a review that asks again on every resume never ends"
    )


@pytest.mark.parametrize("run_async", [False, True])
def test_an_agent_without_a_checkpointer_is_never_resumed(run_async: bool) -> None:
    agent = Agent(FINISHED, interrupts=5, checkpointer=None)
    transcript = run_scenario(scenario(), router_of(agent), run_async=run_async)
    assert len(agent.runs) == 1
    assert "interrupts" not in transcript
    assert "waiting_for" not in transcript


def test_the_reviewer_answers_its_own_interrupts_and_approves_the_others() -> None:
    reviews = harness._Reviews(decisions=[{"type": "reject"}, {"type": "edit"}], reviewer="R")
    assert reviews.answer([("R.after_model", {}), ("X", {})]) == {"decisions": [{"type": "reject"}]}
    assert reviews.answer([("R.after_model.x", None)]) == {"decisions": [{"type": "edit"}]}
    assert reviews.answer([("R.after_model", {"action_requests": [1, 2, 3]})]) == {
        "decisions": [{"type": "approve"}] * 3
    }  # the reviewer's decisions are spent
    assert reviews.answer([("Other", {"action_requests": []})]) == {
        "decisions": [{"type": "approve"}]
    }
    assert reviews.answer([("Node.a.b", ["not", "a", "dict"])]) == {
        "decisions": [{"type": "approve"}]
    }
    assert reviews.approved == ["R", "Other", "Node"]
    assert reviews.waiting is None


def test_a_run_gets_its_own_thread_callbacks_limit_and_middleware() -> None:
    built: list[Any] = []
    agent = Agent(FINISHED)
    handler = object()
    s = scenario("own-run", recursion_limit=9, middleware=lambda: ["mw"])
    run_scenario(s, router_of(agent, built), callbacks=(handler,))
    (model, tools, options), (_, config) = built[0], agent.runs[0]
    assert isinstance(model, ScriptedChatModel)
    assert [t.name for t in tools] == ["lookup"]
    assert options["policy"] is s.policy
    assert options["middleware"] == ["mw"]
    assert options["checkpointer"] is None  # no review, no checkpointer asked for
    thread = config["configurable"]["thread_id"]
    assert thread.startswith("toolstop-check-own-run.hard-")
    assert len(thread) == 36
    assert int(thread[-8:], 16) >= 0
    assert agent.ways == ["invoke"]  # synchronous unless asked
    assert config == {
        "configurable": {"thread_id": thread},
        "callbacks": [handler],
        "recursion_limit": 9,
    }
    run_scenario(scenario("other"), router_of(agent, built))
    assert agent.runs[1][1] == {"configurable": {"thread_id": agent.runs[1][1]["configurable"][
        "thread_id"]}}  # fmt: skip
    assert agent.runs[1][1]["configurable"]["thread_id"] != thread
    assert "middleware" not in built[1][2]


def test_a_review_or_the_checkpointer_option_gives_the_run_a_checkpointer() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    built: list[Any] = []
    run_scenario(scenario(review=({"type": "approve"},)), router_of(Agent(FINISHED), built))
    run_scenario(scenario(), router_of(Agent(FINISHED), built), checkpointer=True)
    assert isinstance(built[0][2]["checkpointer"], InMemorySaver)
    assert isinstance(built[1][2]["checkpointer"], InMemorySaver)
    assert built[0][2]["checkpointer"] is not built[1][2]["checkpointer"]


def test_a_model_of_ones_own_decides_instead_of_the_script() -> None:
    built: list[Any] = []
    model = object()
    transcript = run_scenario(scenario(), router_of(Agent(FINISHED), built), model=model)
    assert built[0][0] is model
    assert "model_calls" not in transcript
    assert "script" not in transcript


def test_the_reviewer_can_be_named() -> None:
    agent = Agent(FINISHED, interrupts=1, node="Mine")
    transcript = run_scenario(
        scenario(review=({"type": "reject"},)), router_of(agent), reviewer="Mine"
    )
    assert resumes(agent) == [{"decisions": [{"type": "reject"}]}]
    assert "interrupts" not in transcript


def test_a_run_that_raises_is_recorded_not_raised() -> None:
    agent = Agent(error=ValueError("broken"), interrupts=0)
    transcript = run_scenario(scenario("err"), router_of(agent))
    assert transcript == {
        "scenario": "err",
        "mode": "hard",
        "router": "own",
        "error": "ValueError: broken",
        "model_calls": [],
    }

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("cannot build")

    own = Router(name="x", build=refuse, model_node="m", stop_node="s", polish_node="p")
    assert run_scenario(scenario(mode="never"), own, model=object()) == {
        "scenario": "s",
        "mode": "never",
        "router": "x",
        "error": "RuntimeError: cannot build",
    }


def test_a_run_that_raises_after_an_interrupt_keeps_who_was_approved() -> None:
    class Failing(Agent):
        def invoke(self, inputs: Any, config: Any) -> dict[str, Any]:
            if self.runs:
                self.runs.append((inputs, config))
                raise KeyError("gone")
            return super().invoke(inputs, config)

    agent = Failing(FINISHED, interrupts=3, node="Mine")
    transcript = run_scenario(scenario(), router_of(agent))
    assert transcript["error"] == "KeyError: 'gone'"
    assert transcript["interrupts"] == ["Mine"]


def test_a_model_called_past_its_script_is_shown_as_an_unscripted_call() -> None:
    s = scenario(script=(call("lookup", query="q"),))
    transcript = run_scenario(s, GRAPH)
    # the relay never comes: the script runs out on the second call, after the tool ran
    s2 = Scenario(
        name="over",
        description="d",
        tools=lambda: [forced_tool("lookup", ("x", signal(Outcome.TRANSIENT)))],
        script=(call("lookup"),),
        stops=False,
    )
    over = run_scenario(s2, GRAPH)
    assert over["error"].startswith("ScriptExhaustedError: ")
    assert over["model_calls"] == [
        {"saw": ["human"], "tools": ["lookup"], "answer": "ai[lookup]"},
        {"saw": ["human", "ai[lookup]", "tool[lookup]"], "tools": ["lookup"],
         "answer": "(unscripted)"},
    ]  # fmt: skip
    assert "error" not in transcript


def test_a_run_that_needs_async_code_is_told_by_its_error() -> None:
    assert needs_async({"error": "NotImplementedError: Synchronous implementation of x"})
    assert needs_async({"error": "TypeError: StructuredTool does not support sync invocation."})
    assert not needs_async({"error": "ValueError: other"})
    assert not needs_async({"error": None})
    assert not needs_async({})


# -- goldens -----------------------------------------------------------------------------------
def test_goldens_are_read_and_written_per_router_and_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = goldens_dir()
    assert shipped.parts[-3:] == ("toolstop", "_check", "goldens")
    assert (shipped / "graph" / "success.hard.json").is_file()
    s = scenario("golden", mode="polish")
    assert load_golden(s, "graph") is None
    assert load_golden(SCENARIOS["success.hard"], "graph") == json.loads(
        (shipped / "graph" / "success.hard.json").read_text(encoding="utf-8")
    )
    transcript = {"path": ["a", "b"], "final": {"content": "déjà vu"}}
    path = write_golden(transcript, s, "mine", tmp_path / "deep")
    assert path == tmp_path / "deep" / "mine" / "golden.polish.json"
    assert path.read_bytes().decode("utf-8") == (
        '{\n  "path": [\n    "a",\n    "b"\n  ],\n  "final": {\n    "content": "déjà vu"\n  }\n}\n'
    )
    assert load_golden(s, "mine", tmp_path / "deep") == transcript
    assert load_golden(s, "other", tmp_path / "deep") is None
    write_golden(transcript, s, "mine", tmp_path / "deep")  # again, into the existing folder
    monkeypatch.setattr(harness, "goldens_dir", lambda: tmp_path)
    assert write_golden(transcript, s, "own") == tmp_path / "own" / "golden.polish.json"
    assert load_golden(s, "own") == transcript


# -- breaches ----------------------------------------------------------------------------------
def clean(**fields: Any) -> dict[str, Any]:
    """The transcript of a correct hard stop; `fields` replace its own."""
    transcript = {
        "model_calls": [{"saw": ["human"], "tools": ["lookup"], "answer": "ai[lookup]"}],
        "script": {"steps": 1, "unused": 0},
        "tool_results": [{"tool": "lookup", "signal": "completed:stop"}],
        "final": {"type": "ai", "content": "x", "relay": True},
        "relay_is_tool_content": True,
        "history_problems": [],
        "stop_record": {"rule": "completed"},
    }
    return {**transcript, **fields}


RELAY_HIDDEN = (
    "the model was called after a relay AIMessage that followed the tool results: a relay added "
    "in the same update hides the tool-calling AIMessage from the stop check (a wrap_tool_call "
    "returning the relay with the tool result?); relay only on the stop path, after the decision"
)
RETURN_DIRECT = (
    "the run ended on a ToolMessage, not an AIMessage: the stop came from return_direct, not "
    "from the artifact (remove return_direct; let the artifact decide)"
)
NOT_RELAYED = (
    "a hard-mode stop did not end on toolstop's relay: a model call was made after the stop, or "
    "the stop was not taken"
)


def test_a_correct_run_breaks_no_invariant() -> None:
    assert invariant_breaches(scenario(), clean()) == []
    never = scenario(mode="never", stops=False)
    assert invariant_breaches(never, clean(final={"type": "ai"})) == []


def test_each_broken_invariant_is_one_sentence() -> None:
    s = scenario()
    assert invariant_breaches(s, clean(final={"type": "tool[lookup]", "relay": False})) == [
        RETURN_DIRECT,
        NOT_RELAYED,
    ]
    assert invariant_breaches(s, clean(final={"type": None})) == [NOT_RELAYED]
    assert invariant_breaches(s, clean(script={"steps": 3, "unused": 2})) == [
        "the run made fewer model calls than a correct router (2 scripted answers unused): it "
        "stopped where it should have gone back to the model"
    ]
    assert invariant_breaches(s, clean(script=None)) == []
    assert invariant_breaches(s, clean(relay_is_tool_content=False)) == [
        "the final answer of a hard-mode stop is not what the run's results show (each result's "
        "answer, or its content verbatim, in call order)"
    ]
    assert invariant_breaches(s, clean(relay_is_tool_content=None)) == []
    assert invariant_breaches(s, clean(stop_record=None)) == [
        "no stop_record in the final state: the router is not toolstop's"
    ]
    assert invariant_breaches(s, clean(stop_record="completed")) == [
        "no stop_record in the final state: the router is not toolstop's"
    ]


def test_a_history_problem_names_the_provider_that_would_reject_it() -> None:
    problems = ["openai (x): message 1", "mistral (y): end", "end: the thread does not end"]
    assert invariant_breaches(scenario(), clean(history_problems=problems)) == [
        "the history is invalid (openai (x): message 1): openai would reject the next turn",
        "the history is invalid (mistral (y): end): mistral would reject the next turn",
        "the history is invalid (end: the thread does not end): a provider would reject the "
        "next turn",
    ]


def test_a_hard_stop_need_not_relay_where_it_does_not_stop_or_the_model_narrates() -> None:
    unrelayed = clean(final={"type": "ai", "relay": False})
    assert invariant_breaches(scenario(stops=False), unrelayed) == []
    assert invariant_breaches(scenario(mode="polish"), unrelayed) == []
    assert invariant_breaches(scenario(), unrelayed) == [NOT_RELAYED]
    narrated = scenario(on_budget="model")
    for rule in ("retry_budget", "step_budget"):
        assert invariant_breaches(narrated, {**unrelayed, "stop_record": {"rule": rule}}) == []
        assert invariant_breaches(scenario(), {**unrelayed, "stop_record": {"rule": rule}}) == [
            NOT_RELAYED
        ]
    assert invariant_breaches(narrated, {**unrelayed, "stop_record": {"rule": "fatal"}}) == [
        NOT_RELAYED
    ]
    assert invariant_breaches(narrated, {**unrelayed, "stop_record": {}}) == [NOT_RELAYED]


def test_a_model_call_after_a_relay_is_the_hidden_relay_loop() -> None:
    def hidden(*seen: list[str]) -> bool:
        calls: list[Any] = [{"saw": s, "tools": [], "answer": "ai"} for s in seen]
        return RELAY_HIDDEN in invariant_breaches(scenario(), clean(model_calls=calls))

    assert hidden(["human"], ["human", "ai[lookup]", "tool[lookup]", "ai"])
    assert hidden(["human", "ai[a]", "tool[a]:error", "ai", "human"])
    assert not hidden(["human", "ai[lookup]", "tool[lookup]", "ai[lookup]"])
    assert not hidden(["human", "ai", "tool[lookup]"])
    assert not hidden(["tool[lookup]", "human", "ai"])
    assert not hidden([])
    calls = ["not a call", {"saw": ["tool[x]", "ai"]}]
    assert invariant_breaches(scenario(), clean(model_calls=calls))[0] == RELAY_HIDDEN
    assert not harness._relay_hidden({"model_calls": None})
    assert invariant_breaches(scenario(), clean(model_calls=["x", 3])) == []


def test_a_run_that_raised_is_said_once_and_nothing_else_is_checked() -> None:
    s = scenario()
    calls = [{"saw": ["human", "tool[a]", "ai"], "answer": "ai"}]
    assert invariant_breaches(s, {"error": "ValueError: no", "model_calls": calls}) == [
        RELAY_HIDDEN,
        "the run raised ValueError: no; a router must end every run cleanly",
    ]
    assert invariant_breaches(s, {"error": "ScriptExhaustedError: out", "waiting_for": "R"}) == [
        "the run was still waiting at a human-review interrupt from R after 20 answers: a review "
        "that asks again on every resume never ends",
        "the model was called more often than a correct router calls it: the run did not stop "
        "where it should have (ScriptExhaustedError: out)",
    ]
    assert invariant_breaches(s, {"error": "X: ScriptExhaustedError"}) == [
        "the run raised X: ScriptExhaustedError; a router must end every run cleanly"
    ]
    assert invariant_breaches(s, clean(waiting_for="")) == []


def test_a_run_where_no_tool_ran_says_whether_one_was_asked_for() -> None:
    def why(**fields: Any) -> list[str]:
        return invariant_breaches(scenario(stops=False), clean(tool_results=[], **fields))

    never_called = [
        "the model never called a tool, so the stop could not be checked (a scripted run always "
        "calls one; a real model may need a clearer question or tool support)"
    ]
    assert why(model_calls=[{"saw": ["human"], "answer": "ai"}]) == never_called
    assert why(model_calls=None) == never_called
    assert why(model_calls=["ai[x]", {"saw": []}]) == never_called
    calls = [
        {"saw": [], "answer": "ai[lookup,search]"},
        {"saw": [], "answer": "ai"},
        {"saw": [], "answer": "ai[search]"},
        {"saw": [], "answer": "(unscripted)"},
    ]
    assert why(model_calls=calls, stop_record={"rule": "step_budget"}) == [
        "the model called lookup, search, but the run ended with rule 'step_budget' before any "
        "tool ran, so the stop after a tool could not be checked"
    ]
    assert why(model_calls=calls, stop_record={"rule": None}) == [
        "the model called lookup, search, but the run ended before any tool ran, so the stop "
        "after a tool could not be checked"
    ]
    assert why(model_calls=calls[:1], stop_record="x")[0] == (
        "the model called lookup, search, but the run ended before any tool ran, so the stop "
        "after a tool could not be checked"
    )


# -- comparing with a golden -------------------------------------------------------------------
def test_no_golden_is_one_sentence() -> None:
    assert compare(None, clean()) == [
        "no golden transcript for this scenario and router: write them with --update-goldens "
        "(with the same --goldens DIR, and --agent/--tools for your own agent)"
    ]


def test_each_differing_field_is_explained_in_the_goldens_order() -> None:
    expected = {
        "router": "graph",
        "description": "old",
        "path": ["agent", "tools", "finalize"],
        "model_calls": [{"saw": ["human"]}],
        "tool_results": [{"tool": "lookup", "signal": "completed:stop"}],
        "final": {"type": "ai", "content": "x" * 100},
    }
    actual = {
        "router": "mine",
        "description": "new",
        "path": None,
        "final": {"type": "tool[lookup]", "content": "y"},
        "model_calls": [{"saw": ["human"]}, {"saw": ["human", "ai"]}],
        "tool_results": [{"tool": "lookup", "signal": "completed:stop"}],
        "extra": 1,
    }
    assert compare(expected, actual) == [
        "expected path agent > tools > finalize, got none (the run did not finish)",
        "expected 1 model calls, got 2 (an extra model call: the router did not stop on the "
        "artifact)",
        f"expected the final ai '{'x' * 79}, got tool[lookup] 'y'",  # each repr cut at 80
        "extra differs: expected None, got 1",
    ]
    assert compare(expected, {**expected, "router": "r", "description": "d"}) == []
    assert compare({"path": ["a"]}, {"path": ["a"], "router": "r", "description": "d"}) == []


def test_each_kind_of_difference_has_its_sentence() -> None:
    explain = harness._explain_difference
    assert explain("model_calls", 3, [1]) == (
        "expected 3 model calls, got 1 (a missing model call: the run stopped too early)"
    )
    assert explain("model_calls", None, 2) == (
        "expected None model calls, got 2 (an extra model call: the router did not stop on the "
        "artifact)"
    )
    assert explain("model_calls", 1, None) == (
        "expected 1 model calls, got None (a missing model call: the run stopped too early)"
    )
    extra, missing = "an extra model call: the router", "a missing model call: the run"
    assert extra in explain("model_calls", 0, 1)
    assert missing in explain("model_calls", 0, None)
    assert missing in explain("model_calls", None, 0)
    assert explain("model_calls", [{"saw": ["a"]}], [{"saw": ["b"]}]) == (
        "the model calls saw different messages or tools than expected"
    )
    assert explain("path", "x", ["a"]) == "expected path none (the run did not finish), got a"
    assert explain("final", {"type": "ai", "content": "a"}, None) == (
        "final differs: expected {'type': 'ai', 'content': 'a'}, got None"
    )
    assert explain("final", {}, {"type": "ai"}) == "expected the final None None, got ai None"
    assert explain("final", "a", {}) == "final differs: expected 'a', got {}"
    fatal = {"rule": "fatal", "run": 1, "x": 1}
    assert explain("stop_record", fatal, {"rule": "fatal", "run": 2}) == (
        "the stop record differs in run, x"
    )
    assert explain("stop_record", {"b": 1, "a": 1}, {"rule": "completed"}) == (
        "the stop record differs in a, b, rule (rule None expected, 'completed' recorded)"
    )
    assert explain("stop_record", {"rule": "fatal"}, {"rule": "completed", "run": 1}) == (
        "the stop record differs in rule, run (rule 'fatal' expected, 'completed' recorded)"
    )
    assert explain("stop_record", None, {"rule": "x"}) == (
        "expected stop_record None, got {'rule': 'x'}"
    )
    assert explain("stop_record", {"rule": "x"}, "y") == (
        "expected stop_record {'rule': 'x'}, got 'y'"
    )
    assert explain("script", {"unused": 0}, {"unused": 1}) == (
        "script differs: expected {'unused': 0}, got {'unused': 1}"
    )


# -- judging -----------------------------------------------------------------------------------
def test_a_run_is_judged_by_its_breaches_and_its_differences_once_each() -> None:
    s = scenario()
    golden = {"path": ["a"], "final": {"type": "ai"}}
    actual = {"path": ["b"], "final": {"type": "ai"}}
    result = judge(s, "graph", actual, ["x", "y", "x"], golden=golden, compared=True)
    assert result.breaches == ["x", "y", "expected path a, got b"]
    assert result.expected is golden
    assert result.actual is actual
    assert result.router == "graph"
    assert result.scenario is s
    assert not result.passed
    judged = judge(s, "graph", actual, ["expected path a, got b"], golden=golden, compared=True)
    assert judged.breaches == ["expected path a, got b"]
    assert judge(s, "r", actual, [], golden=golden, compared=False).breaches == []
    assert judge(s, "r", actual, [], golden=golden, compared=False).passed
    errored = {"error": "ValueError: no", "path": ["c"]}
    assert judge(s, "r", errored, ["e"], golden=golden, compared=True).breaches == ["e"]
    shown = {"path": ["shown"]}
    assert judge(s, "r", actual, [], golden=golden, compared=True, expected=shown).expected is shown
    breaches = ["kept"]
    judge(s, "r", actual, breaches, golden=golden, compared=True)
    assert breaches == ["kept"]  # the caller's list is not changed


def test_a_result_summary_is_one_json_row() -> None:
    s = scenario("row", mode="polish")
    expected = {"path": ["a"], "model_calls": [{}, {}]}
    actual = {"path": ["b"], "model_calls": 3}
    result = CheckResult(scenario=s, router="r", expected=expected, actual=actual, breaches=["x"])
    assert result.summary() == {
        "scenario": "row",
        "mode": "polish",
        "router": "r",
        "expected_path": ["a"],
        "actual_path": ["b"],
        "expected_model_calls": 2,
        "actual_model_calls": 3,
        "passed": False,
        "breaches": ["x"],
    }
    assert list(result.summary()) == [
        "scenario", "mode", "router", "expected_path", "actual_path", "expected_model_calls",
        "actual_model_calls", "passed", "breaches",
    ]  # fmt: skip
    bare = CheckResult(scenario=s, router="r", expected=None, actual={"model_calls": "x"})
    row = bare.summary()
    assert row["expected_path"] is None
    assert row["actual_path"] is None
    assert row["expected_model_calls"] is None
    assert row["actual_model_calls"] is None
    assert row["passed"] is True
    assert row["breaches"] == []
    assert "interrupts" not in row  # only a run your own review paused has them
    paused = CheckResult(scenario=s, router="r", expected=None, actual={"interrupts": ["Own"]})
    assert paused.summary()["interrupts"] == ["Own"]


def test_a_golden_is_not_written_from_a_run_that_breaks_an_invariant() -> None:
    s = scenario()
    golden = {"path": ["a"]}
    moved = judge(s, "r", {"path": ["b"]}, [], golden=golden, compared=True)
    broken = judge(s, "r", {"path": ["a"]}, ["invariant"], golden=golden, compared=True)
    both = judge(s, "r", {"path": ["b"]}, ["invariant"], golden=golden, compared=True)
    errored = judge(s, "r", {"error": "E: x", "path": ["b"]}, ["expected path a, got b"],
                    golden=golden, compared=False)  # fmt: skip
    fine = judge(s, "r", {"path": ["a"]}, [], golden=golden, compared=True)
    seen: list[Any] = []

    def golden_of(result: CheckResult) -> Any:
        seen.append(result)
        return golden

    assert broken_runs([moved, broken, both, errored, fine], golden_of) == [broken, both, errored]
    assert moved in seen
    assert errored not in seen
    new = judge(s, "r", {"path": ["b"]}, [], golden=None, compared=True)
    assert broken_runs([new], lambda r: None) == []


# -- check -------------------------------------------------------------------------------------
def test_check_runs_every_scenario_on_every_router_it_applies_to(tmp_path: Path) -> None:
    plain, limited, skipped = scenario("plain"), scenario("limited", middleware=list), scenario("x")
    built: dict[str, list[Any]] = {"one": [], "two": []}
    one = Router(
        name="one",
        build=lambda model, tools, **kw: built["one"].append(model) or Agent(FINISHED),
        model_node="m", stop_node="s", polish_node="p", skips=("x",),
    )  # fmt: skip
    two = Router(
        name="two",
        build=lambda model, tools, **kw: built["two"].append(model) or Agent(FINISHED),
        model_node="m", stop_node="s", polish_node="p", takes_middleware=True,
    )  # fmt: skip
    golden = run_scenario(plain, one)
    write_golden(golden, plain, "theirs", tmp_path)
    write_golden({**golden, "path": ["old"]}, plain, "two", tmp_path)
    write_golden({**golden, "path": ["not read"]}, plain, "one", tmp_path)
    seen: list[CheckResult] = []
    results = check(
        iter([limited, skipped, plain]),
        [one, two],
        golden_for={"one": "theirs"},
        directory=tmp_path,
        on_result=seen.append,
    )
    assert [(r.router, r.scenario.name) for r in results] == [
        ("one", "plain"), ("two", "limited"), ("two", "x"), ("two", "plain"),
    ]  # fmt: skip
    assert seen == results
    assert len(built["one"]) == 2
    assert len(built["two"]) == 3
    assert results[0].passed
    assert results[0].expected == golden
    assert results[3].breaches == ["expected path old, got "]  # an agent of its own: no path
    assert results[3].expected is not None
    assert results[3].expected["path"] == ["old"]
    assert results[1].expected is None
    assert results[1].breaches[-1].startswith("no golden")
    assert all(isinstance(m, ScriptedChatModel) for m in built["one"] + built["two"])
    # a model of one's own decides: invariants only, nothing expected
    model = object()
    real = check([plain], [one], directory=tmp_path, model=model)
    assert built["one"][-1] is model
    assert real[0].expected is None
    assert real[0].passed


def test_check_without_a_golden_mapping_uses_each_routers_own(tmp_path: Path) -> None:
    plain = scenario("plain")
    own = router_of(Agent(FINISHED))
    write_golden({**run_scenario(plain, own), "path": ["theirs"]}, plain, "own", tmp_path)
    (result,) = check([plain], [own], directory=tmp_path)
    assert result.expected is not None
    assert result.expected["path"] == ["theirs"]
    assert result.breaches == ["expected path theirs, got "]


# -- quiet logs --------------------------------------------------------------------------------
def test_only_the_planned_malformed_signal_warnings_are_hidden(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("toolstop")
    before = list(logger.filters)
    with caplog.at_level(logging.WARNING, logger="toolstop"):
        with planned_malformed_signals_hidden():
            logger.warning("malformed", extra={"toolstop_signal": {"tool": "x"}})
            logger.warning("other")
            assert len(logger.filters) == len(before) + 1
        logger.warning("malformed again", extra={"toolstop_signal": {}})
    assert [r.getMessage() for r in caplog.records] == ["other", "malformed again"]
    assert logger.filters == before
    with pytest.raises(RuntimeError), planned_malformed_signals_hidden():
        raise RuntimeError("inside")
    assert logger.filters == before


# -- real runs, whole (last: the slowest) ------------------------------------------------------
@pytest.mark.parametrize(
    "key", ["success.hard", "fatal.polish", "retryable-then-success.never", "answer.hard"]
)
def test_a_run_on_the_graph_is_its_golden_whole(key: str) -> None:
    scenario = SCENARIOS[key]
    assert run_scenario(scenario, GRAPH) == load_golden(scenario, "graph")


@needs_agents
@pytest.mark.parametrize("key", ["review-edit.hard", "limit-run.hard"])
def test_a_run_on_the_middleware_is_its_golden_whole(key: str) -> None:
    scenario = SCENARIOS[key]
    assert run_scenario(scenario, MIDDLEWARE) == load_golden(scenario, "middleware")


def test_a_run_through_astream_is_the_same_run() -> None:
    scenario = SCENARIOS["retryable-then-success.hard"]
    assert run_scenario(scenario, GRAPH, run_async=True) == load_golden(scenario, "graph")
    assert run_scenario(scenario, GRAPH, checkpointer=True) == load_golden(scenario, "graph")


@needs_agents
def test_a_review_through_astream_is_the_same_run() -> None:
    scenario = SCENARIOS["review-edit.hard"]
    assert run_scenario(scenario, MIDDLEWARE, run_async=True) == load_golden(scenario, "middleware")


def test_the_check_compares_with_the_shipped_goldens_by_default() -> None:
    (result,) = check([SCENARIOS["success.hard"]], [GRAPH])
    assert result.passed
    assert result.expected == load_golden(SCENARIOS["success.hard"], "graph")


def test_in_a_running_loop_the_async_run_goes_to_a_thread_of_its_own() -> None:
    async def inside() -> Any:
        return run_scenario(SCENARIOS["success.hard"], GRAPH, run_async=True)

    assert asyncio.run(inside()) == load_golden(SCENARIOS["success.hard"], "graph")
