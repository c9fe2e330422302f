"""`--configurable KEY=VALUE` and `--config JSON` on `check --agent` and `bench --agent`: the
tools and prompts of LangGraph's customer-support tutorial read
`config["configurable"]["passenger_id"]`; and the bench says where its stops come from."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest

from toolstop._check.run_config import merged_config
from toolstop.cli import main
from toolstop.cli._run_config import run_config
from toolstop.errors import ToolstopConfigError
from user_agent import in_folder, write_module

__all__ = ["in_folder"]  # the fixture, imported for pytest

PASSENGER = '''
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool

from toolstop import Outcome, build_react_graph, signal


@tool(response_format="content_and_artifact")
def fetch_user_flight_information(config: RunnableConfig) -> tuple[str, dict]:
    """Fetch all tickets for the user along with their flights."""
    passenger_id = config.get("configurable", {}).get("passenger_id")
    if not passenger_id:
        return "No passenger ID configured.", signal(Outcome.FATAL)
    return f"Passenger {passenger_id}: flight LX0112, seat 18E.", signal(Outcome.COMPLETED)


TOOLS = [fetch_user_flight_information]


def prompt(state, config):
    """The tutorial's prompt fills {user_info} from the config: without it the run fails."""
    passenger_id = config["configurable"]["passenger_id"]
    return [("system", f"Current user: {passenger_id}"), *state["messages"]]


def make_graph_agent(model, tools, policy, checkpointer=None):
    return build_react_graph(model, tools, policy=policy, checkpointer=checkpointer)


def make_prompted_agent(model, tools, policy, checkpointer=None):
    return build_react_graph(
        model, tools, policy=policy, prompt=prompt, checkpointer=checkpointer
    )
'''


def parsed(*argv: str) -> argparse.Namespace:
    from toolstop.cli._run_config import add_run_config_arguments

    parser = argparse.ArgumentParser()
    add_run_config_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_run_config_from_the_flags() -> None:
    assert run_config(parsed()) == {}
    pair = run_config(parsed("--configurable", "passenger_id=3442 587242"))
    assert pair == {"configurable": {"passenger_id": "3442 587242"}}
    both = parsed(
        "--config",
        '{"configurable": {"tenant": 7, "passenger_id": "x"}, "tags": ["trial"]}',
        "--configurable",
        "passenger_id=a=b",
    )
    assert run_config(both) == {
        "configurable": {"tenant": 7, "passenger_id": "a=b"},  # the pair wins, split once
        "tags": ["trial"],
    }


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--configurable", "passenger_id"], "--configurable takes KEY=VALUE, got 'passenger_id'"),
        (["--configurable", "=x"], "--configurable takes KEY=VALUE"),
        (["--config", "{"], "--config is not JSON"),
        (["--config", "[1]"], "--config takes a JSON object, got list"),
        (["--config", '{"callbacks": []}'], "not callbacks"),
        (["--config", '{"configurable": 1}'], "`configurable` must be a JSON object"),
        (["--configurable", "thread_id=t"], "cannot set thread_id: each run has a thread"),
    ],
)
def test_a_wrong_run_config_is_one_sentence(argv: list[str], said: str) -> None:
    with pytest.raises(ToolstopConfigError, match=None) as error:
        run_config(parsed(*argv))
    assert said in str(error.value)


def test_the_commands_own_keys_win_and_yours_are_merged() -> None:
    base = {"callbacks": ["c"], "configurable": {"thread_id": "t"}, "tags": ["run"]}
    extra = {"configurable": {"passenger_id": "p", "thread_id": "x"}, "tags": ["mine"]}
    assert merged_config(base, extra) == {
        "callbacks": ["c"],
        "configurable": {"passenger_id": "p", "thread_id": "t"},
        "tags": ["mine", "run"],
    }
    assert merged_config(base, None) is base
    assert merged_config(base, {}) is base


def test_check_agent_passes_the_configurable_to_every_run(in_folder: Path) -> None:
    write_module(in_folder, "passenger", PASSENGER)
    argv = ["check", "--agent", "passenger:make_prompted_agent", "--tools", "passenger:TOOLS"]
    argv += ["--scenario", "success", "--json"]
    text = io.StringIO()
    assert main(argv, out=text) == 1  # the prompt reads the passenger id: every run raises
    assert "KeyError: 'passenger_id'" in text.getvalue()
    text = io.StringIO()
    assert main([*argv, "--configurable", "passenger_id=3442 587242"], out=text) == 0
    document = json.loads(text.getvalue())
    assert [r["passed"] for r in document["results"]] == [True] * 3


def test_the_run_config_flags_go_with_agent_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--configurable", "a=b"], out=io.StringIO()) == 2
    assert "go with --agent" in capsys.readouterr().err
    assert main(["bench", "--config", "{}"], out=io.StringIO()) == 2
    assert "go with --agent" in capsys.readouterr().err


def bench(folder: Path, *extra: str) -> tuple[int, str, dict[str, Any]]:
    (folder / "q.txt").write_text("What time is my flight? Fetch my user flight information.\n")
    argv = ["bench", "--agent", "passenger:make_graph_agent", "--tools", "passenger:TOOLS"]
    argv += ["--questions", "q.txt", "--latency-ms", "0", "--out", "out", *extra]
    text = io.StringIO()
    code = main(argv, out=text)
    return code, text.getvalue(), json.loads((folder / "out" / "bench.json").read_text())


def test_bench_agent_passes_the_configurable_and_says_when_stops_are_failures(
    in_folder: Path,
) -> None:
    pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")
    write_module(in_folder, "passenger", PASSENGER)
    code, text, document = bench(in_folder)
    assert code == 0
    assert text.splitlines()[0].endswith(": 1 question, model: simulated")
    hard = {c["behaviour"]: c for c in document["configs"]}["hard"]
    assert hard["rules"] == {"fatal": 1}
    assert document["stops_from_failures"]["hard"] == {
        "stops": 1,
        "rules": {"fatal": 1},
        "tool_errors": 0,
        "tool_calls": 1,
    }
    assert (
        "warning: hard: 1 of 1 stop ended on a failure (fatal 1): that part of the saving comes "
        "from failures, not from answers (a tool that reads the run's config needs "
        "--configurable KEY=VALUE;"
    ) in text
    assert "reviews" not in text.splitlines()[1]  # no review paused a run: no column

    code, text, document = bench(in_folder, "--configurable", "passenger_id=3442 587242")
    assert code == 0
    hard = {c["behaviour"]: c for c in document["configs"]}["hard"]
    assert hard["rules"] == {"completed": 1}
    assert document["stops_from_failures"] == {}
    assert "warning:" not in text
    assert document["settings"]["configurable"] == ["passenger_id"]  # the keys, not the id
    assert "3442" not in json.dumps(document)


def test_the_failure_note_of_a_baseline_with_raising_tools() -> None:
    from toolstop.cli.bench_agent import _failure_note, stops_from_failures

    rows = [
        {"behaviour": "never", "rules": {"none": 2}, "tool_errors": 1, "tool_calls": 3},
        {"behaviour": "hard", "rules": {"completed": 1, "retry_budget": 1}, "tool_calls": 3},
        {"behaviour": "polish", "rules": {"completed": 2}, "tool_errors": 0, "tool_calls": 2},
    ]
    found = stops_from_failures(rows)
    assert list(found) == ["never", "hard"]
    assert _failure_note("never", found["never"]).startswith(
        "never: 1 of 3 tool calls raised: the baseline measures failed tools too"
    )
    assert _failure_note("hard", found["hard"]).startswith(
        "hard: 1 of 2 stops ended on a failure (retry_budget 1): that part of the saving"
    )


def test_the_table_shows_reviews_when_a_review_paused_a_run() -> None:
    from toolstop.bench.report import render_table
    from toolstop.cli.bench_agent import table_columns

    row = {
        "behaviour": "hard",
        "queries": 1,
        "model_calls": 2,
        "input_tokens": 10,
        "output_tokens": 5,
        "wall_ms_per_query": 1.0,
        "errors": 0,
        "tool_errors": 0,
        "reviews": 0,
    }
    assert ("reviews", "reviews") not in table_columns([row])
    out = io.StringIO()
    render_table([{**row, "reviews": 3}], out, columns=table_columns([{**row, "reviews": 3}]))
    header, line = out.getvalue().splitlines()
    assert header.split()[-1] == "reviews"
    assert line.split()[-1] == "3"
