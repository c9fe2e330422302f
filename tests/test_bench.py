"""`toolstop bench`: the figures are right, deterministic, and the report shows the same figures."""

from __future__ import annotations

import base64
import io
import json
import re
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from helpers import CHROMIUM, chromium
from toolstop.bench.runner import available_configs
from toolstop.bench.workload import MAX_TRANSIENT, make_queries
from toolstop.cli import main
from toolstop.cli.bench import parse_mix
from toolstop.errors import ToolstopConfigError

pytest.importorskip("matplotlib", reason="the bench chart needs the `bench` extra")


def bench(out: Path, *extra: str) -> tuple[dict[str, Any], str]:
    buffer = io.StringIO()
    argv = ["bench", "--queries", "30", "--latency-ms", "0", "--out", str(out), *extra]
    assert main(argv, out=buffer) == 0
    return json.loads((out / "bench.json").read_text()), buffer.getvalue()


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path]:
    out = tmp_path_factory.mktemp("bench")
    document, text = bench(out)
    return document, text, out


def by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in document["configs"]}


def test_hard_mode_uses_the_minimum_and_never_stops_wrongly(result: Any) -> None:
    document, _, _ = result
    configs = by_name(document)
    for router in {c["router"] for c in document["configs"]}:
        hard, never = configs[f"{router}-hard"], configs[f"{router}-never"]
        assert hard["ratio_to_min"] == 1.0
        assert hard["queries_at_minimum"] == hard["queries"] == 30
        assert (hard["wrong_stops"], hard["missed_stops"]) == (0, 0)
        assert never["missed_stops"] == 30  # the baseline never stops by design
        assert never["model_calls"] == hard["model_calls"] + 30  # one paraphrase per query
        assert hard["input_tokens"] < never["input_tokens"]
        static = configs.get(f"{router}-return_direct")  # Pydantic AI has no such flag
        if static is not None:
            assert static["wrong_stops"] > 0  # it stops on transient failures
            assert static["model_calls"] == 30  # one call each: it ends on the first tool result
        polish = configs[f"{router}-polish"]
        assert polish["narration_calls"] == 30
        assert polish["missed_stops"] == 0


def test_a_narrator_takes_the_narration_off_the_agents_model(result: Any) -> None:
    document, text, out = result
    configs = by_name(document)
    routers = [r for r in ("graph", "middleware") if f"{r}-polish+narrator" in configs]
    assert routers  # the hand-built graph always runs
    for router in routers:
        narrated = configs[f"{router}-polish+narrator"]
        hard, polish = configs[f"{router}-hard"], configs[f"{router}-polish"]
        # the agent's model makes hard mode's calls; each stop is narrated by the narrator
        assert (narrated["model_calls"], narrated["narration_calls"]) == (hard["model_calls"], 0)
        assert narrated["input_tokens"] == hard["input_tokens"]
        assert narrated["narrator_calls"] == polish["narration_calls"] == 30
        assert narrated["narrator_input_tokens"] > 0
        assert (narrated["wrong_stops"], narrated["missed_stops"]) == (0, 0)
        assert polish["narrator_calls"] == polish["narrator_input_tokens"] == 0
    prices = document["settings"]["prices"]
    assert prices == {"model": [3.0, 15.0], "narrator": [0.1, 0.4]}
    for config in document["configs"]:
        model = (config["input_tokens"] * 3 + config["output_tokens"] * 15) / 1e6
        narrator = config["narrator_input_tokens"] * 0.1 + config["narrator_output_tokens"] * 0.4
        assert config["cost"] == {
            "model": round(model, 6),
            "narrator": round(narrator / 1e6, 6),
            "total": round(round(model, 6) + round(narrator / 1e6, 6), 6),
        }
        line = (
            f"calls {config['model_calls']} + {config['narrator_calls']}  "
            f"in {config['input_tokens']} + {config['narrator_input_tokens']}  "
            f"out {config['output_tokens']} + {config['narrator_output_tokens']}  "
            f"money {config['cost']['total']:.4f}"
        )
        assert any(x.split() == [config["name"], *line.split()] for x in text.splitlines())
    page = (out / "report.html").read_text()
    for config in document["configs"]:
        name = config["name"]
        cell = f'data-cost-config="{name}" data-cost="cost.total">{config["cost"]["total"]:.4f}<'
        assert cell in page
        assert (
            f'data-cost-config="{name}" data-cost="narrator_calls">{config["narrator_calls"]}<'
            in page
        )


def test_prices_are_the_users(tmp_path: Path) -> None:
    prices = ["--price-in", "1", "--price-out", "2", "--narrator-price-in", "0"]
    document, text = bench(tmp_path, "--queries", "2", *prices, "--narrator-price-out", "0.5")
    assert document["settings"]["prices"] == {"model": [1.0, 2.0], "narrator": [0.0, 0.5]}
    narrated = by_name(document)["graph-polish+narrator"]
    assert narrated["cost"]["narrator"] == round(narrated["narrator_output_tokens"] * 0.5 / 1e6, 6)
    assert "cost at 1/2 (model) + 0/0.5 (narrator) per million tokens in/out:" in text


def figures(config: dict[str, Any], thousands: str = "") -> list[str]:
    """A configuration's row as the table prints it (floats with two decimals)."""
    return [
        config["name"],
        f"{config['model_calls']:{thousands}}",
        f"{config['ratio_to_min']:.2f}",
        f"{config['input_tokens']:{thousands}}",
        f"{config['output_tokens']:{thousands}}",
        f"{config['wall_ms_per_query']:.2f}",
        str(config["wrong_stops"]),
        str(config["missed_stops"]),
    ]


def test_headline_ratios_and_table(result: Any) -> None:
    document, text, _ = result
    configs = by_name(document)
    lines = text.splitlines()
    assert re.split(r"\s{2,}", lines[0].strip()) == [
        "configuration",
        "calls",
        "vs min",
        "tokens in",
        "tokens out",
        "ms/query",
        "wrong",
        "missed",
    ]
    # one row per configuration, in bench.json's order, with bench.json's figures
    assert [line.split() for line in lines[1 : 1 + len(configs)]] == [
        figures(c) for c in document["configs"]
    ]
    for config in document["configs"]:
        assert config["ratio_to_min"] == round(config["model_calls"] / config["min_model_calls"], 4)
        assert config["wall_ms_per_query"] == pytest.approx(1000 * config["wall_s"] / 30, abs=0.01)
    for router, ratios in document["headline"].items():
        hard, never = configs[f"{router}-hard"], configs[f"{router}-never"]
        wall = round(hard["wall_s"] / never["wall_s"], 4)
        # one repeat: the spread is that repeat's own ratio
        assert (hard["wall_s_by_repeat"], never["wall_s_by_repeat"]) == (
            [hard["wall_s"]],
            [never["wall_s"]],
        )
        assert ratios == {
            "model_calls_hard_vs_never": round(hard["model_calls"] / never["model_calls"], 4),
            "input_tokens_hard_vs_never": round(hard["input_tokens"] / never["input_tokens"], 4),
            "wall_time_hard_vs_never": wall,
            "wall_time_hard_vs_never_spread": [wall, wall],
        }
        pairs = (
            f"model calls {ratios['model_calls_hard_vs_never']}, "
            f"input tokens {ratios['input_tokens_hard_vs_never']}"
        )
        at = lines.index(f"{router}, hard vs never: {pairs}")
        assert lines[at + 1] == f"  wall time {wall} ({wall}-{wall} over 1 repeat)"


def test_the_benchmarks_page_quotes_the_committed_bench_json() -> None:
    """docs/benchmarks.md's bench table and headline are docs/bench/bench.json's figures."""
    root = Path(__file__).resolve().parent.parent
    committed = json.loads((root / "docs" / "bench" / "bench.json").read_text())
    page = (root / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in page.splitlines()
        if re.match(r"\| (graph|middleware)-\w+ \| \d", line)
    ]
    assert rows == [figures(c, ",") for c in committed["configs"]]
    settings = committed["settings"]
    assert (settings["queries"], settings["latency_ms"], settings["model"]) == (
        100,
        20.0,
        "simulated",
    )
    for ratios in committed["headline"].values():
        headline = (
            f"**{ratios['model_calls_hard_vs_never']:.2f}x the model calls, "
            f"{ratios['input_tokens_hard_vs_never']:.2f}x the input tokens "
            f"and {ratios['wall_time_hard_vs_never']:.2f}x the wall time of `never`**"
        )
        assert headline in " ".join(page.split())
    # "most of the wall time is the simulated latency": its share, per configuration
    shares = [
        c["model_calls"] * settings["latency_ms"] / 1000 / c["wall_s"] for c in committed["configs"]
    ]
    low, high = (int(100 * f) for f in (min(shares), max(shares)))
    assert f"{low}-{high}% of each configuration's wall time" in page


def test_the_table_fits_100_columns(result: Any) -> None:
    _, text, _ = result
    lines = [line for line in text.splitlines() if not line.startswith("wrote ")]  # a path
    assert lines
    assert [line for line in lines if len(line) > 100] == []


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--queries", "0", "--queries must be at least 1, got 0"),
        ("--parallel", "1.5", "--parallel must be between 0 and 1, got 1.5"),
        ("--latency-ms", "-1", "--latency-ms must be 0 or more, got -1.0"),
        ("--payload-kb", "0", "--payload-kb must be more than 0, got 0.0"),
        ("--repeat", "0", "--repeat must be at least 1, got 0"),
        ("--narrator-price-out", "-1", "--narrator-price-out must be 0 or more, got -1.0"),
    ],
)
def test_a_number_out_of_range_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    assert main(["bench", flag, value, "--out", str(tmp_path)], out=io.StringIO()) == 2
    assert capsys.readouterr().err == f"toolstop bench: {message}\n"


def test_repeats_give_each_wall_time_ratio_its_spread(tmp_path: Path) -> None:
    document, text = bench(tmp_path, "--queries", "4", "--repeat", "3")
    configs = by_name(document)
    assert document["settings"]["repeat"] == 3
    page = (tmp_path / "report.html").read_text()
    lines = text.splitlines()
    for config in document["configs"]:
        assert config["queries"] == 12  # every query, three times; the warm-up not counted
        assert len(config["wall_s_by_repeat"]) == 3
        assert sum(config["wall_s_by_repeat"]) == pytest.approx(config["wall_s"], abs=1e-3)
    for router, ratios in document["headline"].items():
        hard, never = configs[f"{router}-hard"], configs[f"{router}-never"]
        each = [
            round(h / n, 4)
            for h, n in zip(hard["wall_s_by_repeat"], never["wall_s_by_repeat"], strict=True)
        ]
        low, high = min(each), max(each)
        assert ratios["wall_time_hard_vs_never_spread"] == [low, high]
        wall = ratios["wall_time_hard_vs_never"]
        assert f"  wall time {wall} ({low}-{high} over 3 repeats)" in lines
        spread = f"({low:.2f}-{high:.2f} over 3 repeats)"
        assert f'<span data-spread="wall_time_hard_vs_never">{spread}</span>' in page


def test_deterministic_for_a_seed(tmp_path: Path, result: Any) -> None:
    document, _, _ = result
    again, _ = bench(tmp_path)

    def strip(d: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in c.items() if not k.startswith("wall")} for c in d["configs"]]

    assert strip(again) == strip(document)


def test_outputs_are_written_and_self_contained(result: Any) -> None:
    document, _, out = result
    chart = (out / "chart.png").read_bytes()
    assert chart[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "report.html").read_text()
    assert f'src="data:image/png;base64,{base64.b64encode(chart).decode()}"' in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing loaded from the network
    parser = Cells()
    parser.feed(page)
    keys = ("name", "model_calls", "ratio_to_min", "input_tokens", "output_tokens")
    keys += ("wall_ms_per_query", "wrong_stops", "missed_stops")
    assert parser.cells == {
        (c["name"], key): text
        for c in document["configs"]
        for key, text in zip(keys, figures(c), strict=True)
    }


def test_bad_options_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--mix", "60/40", "--out", str(tmp_path)], out=io.StringIO()) == 2
    assert "--mix takes three" in capsys.readouterr().err
    with pytest.raises(ToolstopConfigError, match="some success or fatal"):
        parse_mix("0/100/0")
    assert parse_mix("6/3/1") == {"success": 6.0, "retryable": 3.0, "fatal": 1.0}


def test_plans_end_on_a_final_outcome_within_the_transient_cap() -> None:
    queries = make_queries(
        500, mix={"success": 1, "retryable": 8, "fatal": 1}, parallel_share=0.5, seed=3
    )
    for query in queries:
        for plan in query.plans.values():
            assert plan[-1] in ("success", "fatal")
            assert plan.count("retryable") <= MAX_TRANSIENT
    assert any(q.parallel for q in queries)


METRICS = ("model_calls", "input_tokens", "output_tokens", "wrong_stops", "missed_stops")


class Cells(HTMLParser):
    """Collects `data-config`/`data-metric` cells and `data-ratio` items from the rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, str], str] = {}
        self._open: tuple[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "td" and found.get("data-config") and found.get("data-metric"):
            self._open = (str(found["data-config"]), str(found["data-metric"]))

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self.cells[self._open] = self.cells.get(self._open, "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._open = None


@pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (.ci/run installs it)"
)
def test_report_renders_in_chromium_with_the_figures_of_bench_json(
    result: Any, tmp_path: Path
) -> None:
    document, _, out = result
    shot = tmp_path / "report.png"
    dom = chromium(out / "report.html", tmp_path / "profile", screenshot=shot)
    parser = Cells()
    parser.feed(dom)
    assert parser.cells, "the rendered page has no figures"
    for config in document["configs"]:
        for metric in METRICS:
            assert parser.cells[(config["name"], metric)] == str(config[metric])
    # the rendered page holds the very chart the bench drew, not a broken or empty image
    chart = base64.b64encode((out / "chart.png").read_bytes()).decode()
    assert f'src="data:image/png;base64,{chart}"' in dom
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_with_a_real_client_over_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("langchain_openai", reason="needs the `openai` extra")
    from toolstop.testing.loopback import LoopbackProvider, reply

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    search = reply(None, ("search", {"query": "refund policy"}))
    # one all-success query: never and polish cost 2 requests, return_direct and hard 1
    per_config = {
        "never": [search, "answer"],
        "return_direct": [search],
        "hard": [search],
        "polish": [search, "narration"],
    }
    routers = {c.router for c in available_configs()}
    script = [
        step
        for router in ("graph", "middleware", "pydantic_ai")
        if router in routers
        for behaviour, steps in per_config.items()
        if f"{router}-{behaviour}" in {c.name for c in available_configs()}
        for step in steps
    ]
    with LoopbackProvider(script * 2) as provider:  # the warm-up, then the query counted
        model = ["--model", "openai:gpt-loopback", "--base-url", provider.base_url]
        shape = ["--queries", "1", "--mix", "1/0/0", "--parallel", "0"]
        argv = ["bench", *shape, "--out", str(tmp_path), *model]
        assert main(argv, out=io.StringIO()) == 0
    assert provider.remaining == 0
    assert provider.rejected == []
    configs = by_name(json.loads((tmp_path / "bench.json").read_text()))
    for router in routers:
        assert configs[f"{router}-hard"]["model_calls"] == 1
        assert configs[f"{router}-never"]["model_calls"] == 2
        assert configs[f"{router}-polish"]["narration_calls"] == 1
        assert configs[f"{router}-hard"]["input_tokens"] > 0  # the provider's usage


def test_overhead_json_is_computed_from_its_measurements(tmp_path: Path) -> None:
    """Each overhead figure follows from the raw measurements stored beside it (no speed check)."""
    import statistics

    from toolstop.bench.overhead import measure_overhead, write_overhead

    document = measure_overhead(
        runs=3, concurrent=4, rounds=3, rss_runs=5, decide_repeat=5, profile_runs=2
    )
    stored = json.loads(write_overhead(document, tmp_path).read_text())
    assert stored == document

    wall = stored["wall_per_run_no_stop"]
    samples = wall["samples_ms"]
    expected_names = {"hand-built graph"}
    if "create_agent" in samples:  # langchain installed
        expected_names |= {
            "create_agent",
            "create_agent+empty wrap_model_call",
            "create_agent+empty wrap_model_call+after_agent",
            "create_agent+empty hooks+toolstop's state",
            "create_agent+StopOnArtifact",
            "create_agent+before_model jump",
        }
    assert set(samples) == set(wall["figures"]) == expected_names
    assert all(len(values) == wall["runs"] == 3 for values in samples.values())
    base = statistics.median(samples[wall["baseline"]])
    floor, state, chosen = (
        "create_agent+empty wrap_model_call+after_agent",
        "create_agent+empty hooks+toolstop's state",
        "create_agent+StopOnArtifact",
    )
    for name, figures in wall["figures"].items():
        median = statistics.median(samples[name])
        expected = {"median_ms": round(median, 4), "vs_create_agent": round(median / base, 4)}
        if name in (chosen, state):  # and against the floor of the design, in the same run
            expected["vs_floor"] = round(median / statistics.median(samples[floor]), 4)
        if name == chosen:  # and against that floor with toolstop's state
            expected["vs_floor_with_state"] = round(median / statistics.median(samples[state]), 4)
        assert figures == expected
    assert wall["figures"][wall["baseline"]]["vs_create_agent"] == 1.0

    concurrent = stored["concurrent_throughput"]
    seconds = concurrent["seconds"]
    routers = {"hand-built graph"} | ({"create_agent", floor, state, chosen} & set(samples))
    assert set(seconds) == set(concurrent["figures"]) == routers
    assert all(len(values) == concurrent["rounds"] == 3 for values in seconds.values())

    def rate_of(name: str) -> float:
        return float(concurrent["concurrent"] / statistics.median(seconds[name]))

    for name, figures in concurrent["figures"].items():
        expected = {
            "runs_per_s": round(rate_of(name), 1),
            "median_seconds": round(statistics.median(seconds[name]), 4),
            "vs_create_agent": round(rate_of(name) / rate_of(concurrent["baseline"]), 4),
        }
        if name in (chosen, state):
            expected["vs_floor"] = round(rate_of(name) / rate_of(floor), 4)
        if name == chosen:
            expected["vs_floor_with_state"] = round(rate_of(name) / rate_of(state), 4)
        assert figures == expected

    scaling = stored["decide_scaling"]
    best = {length: min(values) for length, values in scaling["samples_us"].items()}
    assert scaling["figures"] == {
        "10_messages_us": best["10"],
        "10000_messages_us": best["10000"],
        "ratio_10000_vs_10": round(best["10000"] / best["10"], 4),
    }
    profiled = stored["calls_per_run"]
    assert set(profiled["counts"]) == set(profiled["figures"]) == expected_names
    base_calls = profiled["counts"][profiled["baseline"]]["calls"]
    for name, figures in profiled["figures"].items():
        counts = profiled["counts"][name]
        assert figures == {
            "calls_per_run": round(counts["calls"] / 2),
            "vs_create_agent": round(counts["calls"] / base_calls, 4),
            "toolstop_calls_per_run": round(counts["toolstop_calls"] / 2),
            "toolstop_time_share": round(
                counts["toolstop_seconds"] / counts["profiled_seconds"], 4
            ),
        }
    assert profiled["figures"]["hand-built graph"]["toolstop_calls_per_run"] > 0
    if "create_agent" in samples:  # the bench's own tool and empty hooks are not toolstop's
        for name in ("create_agent", floor, state):
            assert profiled["figures"][name]["toolstop_calls_per_run"] == 0

    rss = stored["rss"]
    assert rss["runs"] == 5
    assert rss["growth_mb"] == round(rss["rss_after_mb"] - rss["rss_before_mb"], 3)

    from toolstop.cli.bench import _print_overhead

    text = io.StringIO()
    _print_overhead(stored, text)
    for name, figures in wall["figures"].items():
        assert f"{name:48s} {figures['median_ms']:8.3f} ms  {figures['vs_create_agent']:.3f}x" in (
            text.getvalue()
        )
    if chosen in wall["figures"]:
        assert (
            "StopOnArtifact vs the floor of its design (its three hooks, empty): "
            f"{wall['figures'][chosen]['vs_floor']:.3f}x (target <= 1.030x: "
            f"{'met' if wall['figures'][chosen]['vs_floor'] <= 1.03 else 'not met'})"
        ) in text.getvalue()
        assert (
            "4 concurrent, StopOnArtifact vs the floor of its design: "
            f"{concurrent['figures'][chosen]['vs_floor']:.3f}x its runs/s (target >= 0.950x: "
            f"{'met' if concurrent['figures'][chosen]['vs_floor'] >= 0.95 else 'not met'})"
        ) in text.getvalue()
        assert (
            "4 concurrent, that floor with toolstop's state vs the floor: "
            f"{concurrent['figures'][state]['vs_floor']:.3f}x its runs/s"
        ) in text.getvalue()
        assert (
            "that floor with toolstop's state vs the floor: "
            f"{wall['figures'][state]['vs_floor']:.3f}x (what the state costs)"
        ) in text.getvalue()
        assert (
            "StopOnArtifact vs that floor with toolstop's state: "
            f"{wall['figures'][chosen]['vs_floor_with_state']:.3f}x (toolstop's own work)"
        ) in text.getvalue()
        assert (
            "4 concurrent, StopOnArtifact vs that floor with toolstop's state: "
            f"{concurrent['figures'][chosen]['vs_floor_with_state']:.3f}x its runs/s"
        ) in text.getvalue()


def test_the_floor_with_state_writes_what_stop_on_artifact_writes() -> None:
    """The bench's floor with toolstop's state writes the keys StopOnArtifact writes, node by
    node: the run with every model call's answer, the record and the run at the end."""
    pytest.importorskip("langchain.agents")
    from langchain_core.messages import HumanMessage

    from toolstop.bench.overhead import CHOSEN, FLOOR_WITH_STATE, _builders, _no_stop_tools
    from toolstop.testing import ScriptedChatModel, call

    def written(name: str) -> list[tuple[str, set[str]]]:
        model = ScriptedChatModel([call("search"), call("search"), "answer"])
        agent = _builders(design_floor=True)[name](model, _no_stop_tools())
        chunks = agent.stream({"messages": [HumanMessage("q")]}, stream_mode="updates")
        return [
            (node.rpartition(".")[2], set(update or {}))
            for chunk in chunks
            for node, update in chunk.items()
        ]

    floor = written(FLOOR_WITH_STATE)
    assert floor == written(CHOSEN)
    assert [keys for node, keys in floor if node == "model"] == [{"messages", "toolstop_run"}] * 3
    assert floor[-1] == ("after_agent", {"stop_record", "toolstop_run"})


OVERHEAD_ROWS = {
    "create_agent": "`create_agent` (bare)",
    "create_agent+empty wrap_model_call": (
        "+ an empty `wrap_model_call` hook (the empty-hook floor)"
    ),
    "create_agent+empty wrap_model_call+after_agent": (
        "+ empty `wrap_model_call` and `after_agent` hooks (the floor of StopOnArtifact's design)"
    ),
    "create_agent+empty hooks+toolstop's state": (
        "+ the same empty hooks carrying toolstop's state (written as StopOnArtifact writes it)"
    ),
    "create_agent+StopOnArtifact": "+ `StopOnArtifact` (`wrap_model_call` + `after_agent`, chosen)",
    "create_agent+before_model jump": "+ `before_model` jump (the common alternative)",
    "hand-built graph": "hand-built graph",
}
"""docs/benchmarks.md's overhead table: configuration in overhead.json -> its row label."""


OVERHEAD_RUNS = range(29, 34)
"""The five consecutive runs docs/benchmarks.md quotes (docs/bench/overhead-runs/)."""


def test_the_overhead_table_is_the_stored_runs() -> None:
    """Each row is docs/bench/overhead.json's figures and the range of the five stored runs
    (`OVERHEAD_RUNS`) it is the first of; the concurrency rows likewise; the table of the
    target has each run's ratios to the floor of StopOnArtifact's design."""
    folder = Path(__file__).parent.parent / "docs" / "bench"
    table = json.loads((folder / "overhead.json").read_text(encoding="utf-8"))
    runs = [
        json.loads((folder / "overhead-runs" / f"run{n}.json").read_text(encoding="utf-8"))
        for n in OVERHEAD_RUNS
    ]
    assert runs[0] == table
    page = (Path(__file__).parent.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    wall, calls = table["wall_per_run_no_stop"]["figures"], table["calls_per_run"]["figures"]
    assert set(wall) == set(OVERHEAD_ROWS)
    for name, label in OVERHEAD_ROWS.items():
        ratios = [r["wall_per_run_no_stop"]["figures"][name]["vs_create_agent"] for r in runs]
        spread = "1.000x" if name == "create_agent" else f"{min(ratios):.3f}-{max(ratios):.3f}x"
        row = (
            f"| {label} | {wall[name]['median_ms']:.2f} ms | {wall[name]['vs_create_agent']:.3f}x "
            f"| {calls[name]['calls_per_run']:,} | {calls[name]['vs_create_agent']:.3f}x "
            f"| {spread} |"
        )
        assert row in page, row
    for name, label in (
        ("hand-built graph", "hand-built graph vs bare `create_agent`"),
        ("create_agent+StopOnArtifact", "`create_agent` + `StopOnArtifact` vs bare"),
    ):
        ratios = [r["concurrent_throughput"]["figures"][name]["vs_create_agent"] for r in runs]
        this = table["concurrent_throughput"]["figures"][name]["vs_create_agent"]
        row = (
            f"| 1,000 concurrent runs/s, {label} | {this:.3f}x "
            f"({min(ratios):.3f}-{max(ratios):.3f}x"
        )
        assert row in page, row
    chosen, state = "create_agent+StopOnArtifact", "create_agent+empty hooks+toolstop's state"
    for number, run in zip(OVERHEAD_RUNS, runs, strict=True):
        wall = run["wall_per_run_no_stop"]["figures"]
        concurrent = run["concurrent_throughput"]["figures"]
        graph = wall["hand-built graph"]["vs_create_agent"]
        row = (
            f"| {number} | {wall[chosen]['vs_floor']:.3f}x | "
            f"{concurrent[chosen]['vs_floor']:.3f}x | {graph:.3f}x | "
            f"{wall[state]['vs_floor']:.3f}x | {wall[chosen]['vs_floor_with_state']:.3f}x | "
            f"{concurrent[chosen]['vs_floor_with_state']:.3f}x |"
        )
        assert row in page, row


BENCH_DOCS = Path(__file__).parent.parent / "docs" / "bench"
"""Where the scripts behind docs/benchmarks.md's breakdowns live, each beside its JSON."""


def _bench_script(name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """docs/bench/NAME.py as a module, registered under NAME for the test (its TypedDicts and
    dataclasses resolve through `sys.modules`)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, BENCH_DOCS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, script)
    spec.loader.exec_module(script)
    return script


def test_the_state_profile_is_computed_from_its_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/bench/state_calls.py: each part of StopOnArtifact's state adds work, as stored."""
    pytest.importorskip("langchain.agents")
    path = BENCH_DOCS / "state_calls.py"
    script = _bench_script("state_calls", monkeypatch)
    monkeypatch.setattr(script, "RUNS", 2)
    fresh = script.main()
    stored = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    for document in (fresh, stored):
        counts, bare = document["calls_per_run"], document["bare_create_agent_calls_per_run"]
        assert list(counts) == list(script.CONFIGS)
        assert document["vs_bare"] == {name: round(n / bare, 4) for name, n in counts.items()}
        names = list(counts)
        adds = document["adds_to_the_row_before"]
        assert adds == {b: counts[b] - counts[a] for a, b in pairwise(names)}
        assert all(added > 0 for added in adds.values())  # every part costs something
        assert counts[names[0]] > bare
    # docs/benchmarks.md's breakdown quotes the stored counts.
    page = (Path(__file__).parent.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    quoted = " ".join(page.split())
    stop_record, run, write, own = stored["adds_to_the_row_before"].values()
    assert (
        f"`stop_record` written once per run {stop_record}, the private run channel {run}, "
        f"the run state written on every model call {write}, toolstop's own work {own}"
    ) in quoted


def test_the_state_instructions_are_computed_from_their_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/bench/state_instructions.py: it counts the configurations of state_calls.py, each of
    which it can run; its figures come from its counts, as stored; the benchmarks page quotes them.
    """
    pytest.importorskip("langchain.agents")
    folder = BENCH_DOCS
    script = _bench_script("state_instructions", monkeypatch)
    monkeypatch.setitem(sys.modules, "state_calls", None)  # the script loads it; undone after
    names = [script.BARE, *script._state_calls().CONFIGS]
    for name in names:
        script.run(name, 2)  # the scripted model fails unless every run used its four steps
    stored = json.loads((folder / "state_instructions.json").read_text(encoding="utf-8"))
    per_run = stored["instructions_per_run"]
    assert list(per_run) == [str(seed) for seed in script.SEEDS]
    assert stored["figures"] == script.figures(per_run)
    page = (Path(__file__).parent.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for seed, counts in per_run.items():
        assert list(counts) == names
        added = stored["figures"][seed]["points_added"]
        assert all(points > 0 for points in added.values())  # every part costs something
        vs_floor = stored["figures"][seed]["vs_floor"]
        cells = " | ".join(f"{vs_floor[name]:.4f}x" for name in names[2:])
        own = added[names[-1]]
        assert f"| {seed} | {cells} | {own:.2f} |" in page, (seed, cells, own)


def test_the_wall_parts_are_computed_from_their_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/bench/wall_parts.py: its figures and points come from its samples, as stored; the
    prototype without the `after_agent` node has no such node and still writes its record."""
    pytest.importorskip("langchain.agents")
    from langchain_core.messages import HumanMessage

    from toolstop.bench.overhead import _no_stop_tools, wall_figures
    from toolstop.testing import ScriptedChatModel, call

    folder = BENCH_DOCS
    monkeypatch.syspath_prepend(str(folder))
    script = _bench_script("wall_parts", monkeypatch)
    fresh = script.main(runs=2, repeats=1)
    stored = json.loads((folder / "wall_parts.json").read_text(encoding="utf-8"))
    assert len(stored["repeats"]) == script.REPEATS
    for repeat in fresh["repeats"] + stored["repeats"]:
        assert list(repeat["samples_ms"]) == list(script.BUILDERS)
        assert repeat["figures"] == wall_figures(repeat["samples_ms"])
        assert repeat["points"] == script.points(repeat["figures"])
    model = ScriptedChatModel([call("search"), "answer"])
    agent = script.BUILDERS[script.PROTOTYPE](model, _no_stop_tools())
    assert not [n for n in agent.get_graph().nodes if n.endswith("after_agent")]
    state = agent.invoke({"messages": [HumanMessage("q")]})
    assert (state["stop_record"]["model_calls"], state["stop_record"]["tool_turns"]) == (2, 1)
    # docs/benchmarks.md quotes the stored runs.
    page = " ".join((folder.parent / "benchmarks.md").read_text("utf-8").split())
    figures = [r["figures"] for r in stored["repeats"]]
    for name in ("StopOnArtifact", script.PROTOTYPE):
        low = min(f[name]["vs_create_agent"] for f in figures)
        high = max(f[name]["vs_create_agent"] for f in figures)
        assert f"{low:.3f}-{high:.3f}x" in page, name


def test_the_tool_error_counts_include_the_tool_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/bench/tool_error_calls.py counts calls in the threads ToolNode runs tools in (a
    cProfile count of the calling thread saw no cost for a wrap_tool_call hook); the stored
    figures follow from the stored counts and docs/routers.md and composition.md quote them."""
    pytest.importorskip("langchain.agents")
    import threading

    folder = BENCH_DOCS
    script = _bench_script("tool_error_calls", monkeypatch)

    def nothing() -> None:
        pass

    def in_a_thread() -> None:
        worker = threading.Thread(target=lambda: [nothing() for _ in range(1000)])
        worker.start()
        worker.join()

    assert script._calls_in_every_thread(in_a_thread) > 1000
    monkeypatch.setattr(script, "RUNS", 1)
    for document in (script.main(), json.loads((folder / "tool_error_calls.json").read_text())):
        counts = document["calls_per_run"]
        base = counts["StopOnArtifact"]
        assert all(n > base for name, n in counts.items() if name != "StopOnArtifact")
        assert document["vs_stop_on_artifact"] == {n: round(c / base, 3) for n, c in counts.items()}
    stored = json.loads((folder / "tool_error_calls.json").read_text())["calls_per_run"]
    retry, error = (stored[n] for n in stored if n != "StopOnArtifact")
    base = stored["StopOnArtifact"]
    routers = " ".join((folder.parent / "routers.md").read_text("utf-8").split())
    assert f"({retry:,} and {error:,} against StopOnArtifact's {base:,} alone" in routers
    composition = " ".join((folder.parent / "composition.md").read_text("utf-8").split())
    assert f"({retry:,} and {error:,} vs {base:,} for StopOnArtifact alone" in composition


def test_the_gc_throughput_figures_are_computed_from_their_bursts() -> None:
    """docs/bench/gc_throughput.json: each half's figures come from its own bursts."""
    from toolstop.bench.overhead import throughput_figures

    path = Path(__file__).parent.parent / "docs" / "bench" / "gc_throughput.json"
    stored = json.loads(path.read_text(encoding="utf-8"))
    for half in ("gc_on", "gc_off"):
        measured = stored[half]
        assert all(len(v) == measured["rounds"] for v in measured["seconds"].values())
        recomputed = throughput_figures(measured["concurrent"], measured["seconds"])
        for figures in recomputed.values():  # stored before `vs_floor` was reported
            figures.pop("vs_floor", None)
        assert measured["figures"] == recomputed
    assert set(stored["gc_on"]["seconds"]) == set(stored["gc_off"]["seconds"])
    page = " ".join((path.parent.parent / "benchmarks.md").read_text("utf-8").split())
    on, off = stored["gc_on"]["figures"], stored["gc_off"]["figures"]
    soa = "create_agent+StopOnArtifact"
    assert (
        f"`StopOnArtifact` {on[soa]['vs_create_agent']:.3f}x -> {off[soa]['vs_create_agent']:.3f}x"
        in page
    )
    bare = "create_agent"
    assert (
        f"{on[bare]['runs_per_s']} runs/s with the collector on and {off[bare]['runs_per_s']}"
        in page
    )


COMMIT_LABELS = {
    "old": "a2a35af",
    "base": "868c87f",
    "start": "5a7f1de",
    "new": "#51, second pass",
}
"""docs/bench/commits-*.json's source labels -> the commit docs/benchmarks.md names."""


COMMIT_RATIOS = {
    "soa/floor": ("soa", "floor"),
    "soa/floor_m": ("soa", "floor_m"),
    "soa/bare": ("soa", "bare"),
    "graph/bare": ("graph", "bare"),
    "floor/bare": ("floor", "bare"),
}
"""docs/bench/commits.py's ratios: name -> (numerator, denominator) configuration."""


def _assert_paired(
    figures: dict[str, Any], children: list[dict[str, list[float]]], ratios: dict[str, Any]
) -> None:
    """Each ratio's `paired` figure, per-child medians and their spread follow from the samples
    (`docs/bench/commits.py`'s `figures`), computed here independently."""
    import statistics

    for ratio, (a, b) in ratios.items():
        pairs = [x / y for c in children for x, y in zip(c[a], c[b], strict=True)]
        assert figures[ratio]["paired"] == round(statistics.median(pairs), 4)
        per_child = [
            round(statistics.median(x / y for x, y in zip(c[a], c[b], strict=True)), 4)
            for c in children
        ]
        assert figures[ratio]["per_child"] == per_child
        assert figures[ratio]["spread"] == [min(per_child), max(per_child)]


def _cell(figures: dict[str, Any], ratio: str) -> str:
    """A ratio as docs/benchmarks.md quotes it: the paired figure and the children's spread."""
    low, high = figures[ratio]["spread"]
    return f"{figures[ratio]['paired']:.3f}x ({low:.3f}-{high:.3f})"


def test_the_commits_side_by_side_are_their_samples() -> None:
    """docs/bench/commits.py: each ratio follows from the stored samples (the median of the
    per-round ratios, pooled and per child; the ratio of the medians), and docs/benchmarks.md
    quotes them, per stack, commit and measure (CPU time, wall time)."""
    import statistics

    page = (Path(__file__).parent.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    stored = sorted(BENCH_DOCS.glob("commits-*.json"))
    assert len(stored) == 2
    ratios = COMMIT_RATIOS
    for path in stored:
        document = json.loads(path.read_text(encoding="utf-8"))
        versions = document["stack"]
        stack = f"langchain {versions['langchain']}, langgraph {versions['langgraph']}"
        assert set(document["figures"]) == {"cpu", "wall"}
        for measure, by_label in document["samples_ms"].items():
            assert set(by_label) == set(COMMIT_LABELS)
            for label, children in by_label.items():
                assert len(children) == document["cycles"]
                assert all(
                    len(values) == document["rounds"] for c in children for values in c.values()
                )
                f = document["figures"][measure][label]
                _assert_paired(f, children, ratios)
                for ratio, (a, b) in ratios.items():
                    pooled = {n: [v for c in children for v in c[n]] for n in (a, b)}
                    medians = statistics.median(pooled[a]) / statistics.median(pooled[b])
                    assert f[ratio]["medians"] == round(medians, 4)

                row = (
                    f"| {stack} | {COMMIT_LABELS[label]} | {measure} | {_cell(f, 'soa/floor')} | "
                    f"{_cell(f, 'soa/floor_m')} | {_cell(f, 'graph/bare')} | "
                    f"{_cell(f, 'floor/bare')} |"
                )
                assert row in page, row


THIRD_PASS_LABELS = {
    "a2a35af": "a2a35af",
    "5a7f1de": "5a7f1de",
    "second": "b8a7145 (second pass)",
    "third": "a0584b9 (third pass)",
}
"""docs/bench/commits_third*-1.4.2.json's source labels -> the commit docs/benchmarks.md names."""


def _stored_runs(pattern: str, names: list[str]) -> list[tuple[Path, dict[str, Any]]]:
    """docs/bench's runs of docs/bench/commits.py matching `pattern`, exactly the files `names`."""
    stored = sorted(BENCH_DOCS.glob(pattern))
    assert [p.name for p in stored] == names
    return [(path, json.loads(path.read_text(encoding="utf-8"))) for path in stored]


def _paired_cpu(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], list[Any]]]:
    """Each checkout's CPU figures in a stored run, with its samples, once `_assert_paired` has
    checked the figures against the samples."""
    for label, children in document["samples_ms"]["cpu"].items():
        figures = document["figures"]["cpu"][label]
        _assert_paired(figures, children, COMMIT_RATIOS)
        yield label, figures, children


def test_the_third_pass_side_by_side_is_its_samples() -> None:
    """The third pass's runs of docs/bench/commits.py, with and without `--bind`: each paired
    ratio follows from the stored samples, and docs/benchmarks.md quotes the CPU figures."""
    page = (Path(__file__).parent.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    stored = _stored_runs(
        "commits_third*-1.4.2.json", ["commits_third-1.4.2.json", "commits_third_bind-1.4.2.json"]
    )
    for path, document in stored:
        bind = document.get("bind", False)
        assert bind == ("bind" in path.name)
        workload = "`--bind`, as providers bind" if bind else "`bind_tools` returns the model"
        for label, f, _ in _paired_cpu(document):
            row = (
                f"| {workload} | {THIRD_PASS_LABELS[label]} | {_cell(f, 'soa/floor')} | "
                f"{_cell(f, 'soa/floor_m')} | {_cell(f, 'graph/bare')} | "
                f"{f['floor/bare']['paired']:.3f}x |"
            )
            assert row in page, row


def _assert_experiment_quoted(name: str, labels: dict[str, str]) -> None:
    """docs/bench/`name`-*.json (docs/bench/commits.py `--bind` on a patched checkout, both
    stacks): each paired ratio follows from the stored samples, the empty tool hook's share
    (`floor/floor_m`, which commits.py does not compute) is computed here, and
    docs/benchmarks.md quotes the CPU figures under the names `labels` gives the checkouts."""
    import statistics

    page = (Path(__file__).parent.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    stored = _stored_runs(f"{name}-*.json", [f"{name}-1.4.2.json", f"{name}-1.5.2.json"])
    for path, document in stored:
        assert document["bind"] is True
        stack = document["stack"]["langchain"]
        assert path.name == f"{name}-{stack}.json"
        for label, f, children in _paired_cpu(document):
            hook = statistics.median(
                x / y for c in children for x, y in zip(c["floor"], c["floor_m"], strict=True)
            )
            row = (
                f"| {stack} | {labels[label]} | {f['soa/floor']['paired']:.3f}x | "
                f"{f['soa/floor_m']['paired']:.3f}x | {hook:.3f}x |"
            )
            assert row in page, row


def test_the_decision_alone_beside_the_floors_is_its_samples() -> None:
    """The experiment of the decision alone (`docs/bench/experiment_decision.patch`)."""
    labels = {"a2a35af": "a2a35af", "decision": "the decision alone", "72a2bf8": "72a2bf8"}
    _assert_experiment_quoted("experiment_decision", labels)


def test_the_router_without_its_tool_hook_beside_the_floors_is_its_samples() -> None:
    """The experiment without the tool hook: the patch deletes StopOnArtifact's two tool hooks
    and nothing else, and the figures are quoted as `_assert_experiment_quoted` checks."""
    patch = (BENCH_DOCS / "experiment_nohook.patch").read_text(encoding="utf-8")
    changed = [
        line
        for line in patch.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed
    assert all(line.startswith("-") for line in changed)
    hooks = [line for line in changed if line[1:].lstrip().startswith(("def ", "async def "))]
    assert [h.split("(")[0].split()[-1] for h in hooks] == ["wrap_tool_call", "awrap_tool_call"]
    labels = {
        "a2a35af": "a2a35af",
        "head": "7d0c998",
        "nohook": "7d0c998 without the tool hook",
    }
    _assert_experiment_quoted("experiment_nohook", labels)


def test_the_side_by_side_on_a_real_result_is_its_samples() -> None:
    """docs/bench/commits.py `--json` (a JSON result of 40 records) on both stacks: each paired
    ratio follows from the stored samples, and docs/benchmarks.md quotes the CPU figures."""
    page = (Path(__file__).parent.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    stored = _stored_runs(
        "commits_json-*.json", ["commits_json-1.4.2.json", "commits_json-1.5.2.json"]
    )
    for path, document in stored:
        assert document["bind"] is True
        assert document["json"] is True
        stack = document["stack"]["langchain"]
        assert path.name == f"commits_json-{stack}.json"
        for label, f, _ in _paired_cpu(document):
            row = (
                f"| {stack} | {label} | {_cell(f, 'soa/floor')} | {_cell(f, 'soa/floor_m')} | "
                f"{_cell(f, 'graph/bare')} |"
            )
            assert row in page, row


def test_the_own_time_of_the_hooks_is_measured_and_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/bench/own_time.py times StopOnArtifact's three hooks (4 model calls, 3 tool calls
    and one run end per run), then the two run-end functions twice in a row, and leaves the
    hooks and functions as they were."""
    pytest.importorskip("langchain.agents")
    import toolstop._lifecycle as lifecycle
    from toolstop.middleware import StopOnArtifact

    script = _bench_script("own_time", monkeypatch)
    before = dict(vars(StopOnArtifact)), lifecycle.judge_turn, lifecycle.reads_as_error
    own = script.measure(2)
    assert {name: h["calls_per_run"] for name, h in own["hooks"].items()} == {
        "wrap_model_call": 4,
        "wrap_tool_call": 3,
        "after_agent": 1,
    }
    assert all(h["median_us"] > 0 for h in own["hooks"].values())
    twice = script.measure(2, twice=True)
    assert set(twice["median_us"]) == {
        "judge_turn, first",
        "judge_turn, second",
        "reads_as_error, first",
        "reads_as_error, second",
    }
    after = dict(vars(StopOnArtifact)), lifecycle.judge_turn, lifecycle.reads_as_error
    assert after == before


def test_the_commits_call_counts_are_their_counts() -> None:
    """docs/bench/commits_calls.py: the ratios follow from the stored counts, as quoted."""
    page = (Path(__file__).parent.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    stored = sorted(BENCH_DOCS.glob("commits_calls-*.json"))
    assert len(stored) == 2
    for path in stored:
        document = json.loads(path.read_text(encoding="utf-8"))
        versions = document["stack"]
        stack = f"langchain {versions['langchain']}, langgraph {versions['langgraph']}"
        for label, calls in document["calls_per_run"].items():
            f = document["figures"][label]
            assert f["soa/floor"] == round(calls["soa"] / calls["floor"], 4)
            assert f["soa/floor_m"] == round(calls["soa"] / calls["floor_m"], 4)
            assert f["graph/bare"] == round(calls["graph"] / calls["bare"], 4)
            row = (
                f"| {stack} | {COMMIT_LABELS[label]} | {calls['soa']:,} | {f['soa/floor']:.3f}x "
                f"| {f['soa/floor_m']:.3f}x | {calls['graph']:,} | {f['graph/bare']:.3f}x |"
            )
            assert row in page, row


def test_the_narrator_table_quotes_the_stored_narrator_json() -> None:
    """docs/benchmarks.md's narrator table and its ratios are docs/bench/narrator.json's."""
    root = Path(__file__).resolve().parent.parent
    stored = by_name(json.loads((root / "docs" / "bench" / "narrator.json").read_text()))
    page = (root / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in page.splitlines()
        if re.match(r"\| (never|hard|polish|polish\+narrator) \| \d", line)
    ]
    modes = ("never", "hard", "polish", "polish+narrator")
    assert rows == [
        [
            mode,
            f"{c['model_calls']:,}",
            f"{c['input_tokens']:,} / {c['output_tokens']:,}",
            f"{c['narrator_calls']:,}",
            f"{c['narrator_input_tokens']:,} / {c['narrator_output_tokens']:,}",
            f"{c['cost']['total']:.4f}",
        ]
        for mode in modes
        for c in [stored[f"graph-{mode}"]]
    ]
    for router in ("middleware", "pydantic_ai"):  # the same calls and tokens, as the page says
        for mode in modes:
            if f"{router}-{mode}" in stored:
                same = ("model_calls", "input_tokens", "narrator_calls", "narrator_input_tokens")
                assert all(
                    stored[f"{router}-{mode}"][k] == stored[f"graph-{mode}"][k] for k in same
                )
    narrated, hard = stored["graph-polish+narrator"]["cost"], stored["graph-hard"]["cost"]
    polish = stored["graph-polish"]["cost"]
    text = " ".join(page.split())
    assert (
        f"**{narrated['total'] / polish['total']:.2f}x the money of `polish` without one, "
        f"{narrated['total'] / hard['total']:.2f}x `hard`'s**"
    ) in text
