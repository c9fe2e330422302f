"""The what-if (`report --from ... --convert`) stays bounded and refuses what the report refuses.

Its lists are cut and folded like the report's tables (names cut to `NAME_LIMIT`, at most
`SHOWN` tools, the rest "other N tools"), and a run with a number out of range
(`records.out_of_range`) is left out of its figures, as the report leaves it out of its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from toolstop.cli import main
from toolstop.report.examples import cut_short_pair
from toolstop.report.records import LIMIT, NAME_LIMIT
from toolstop.report.tally import SHOWN


def _call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _line(line_id: str, later: list[str], *, usage: int | None = None) -> str:
    """pay, then one turn calling every tool of `later`, then an answer."""
    asks: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [_call("p", "pay")]}
    if usage is not None:
        asks["usage"] = {"prompt_tokens": usage, "completion_tokens": 1}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "pay"},
        asks,
        {"role": "tool", "tool_call_id": "p", "content": "paid"},
    ]
    if later:
        calls = [_call(f"c{i}", name) for i, name in enumerate(later)]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        results = [
            {"role": "tool", "tool_call_id": f"c{i}", "content": "ok"} for i in range(len(later))
        ]
        messages += results
    messages.append({"role": "assistant", "content": "Paid."})
    return json.dumps({"id": line_id, "messages": messages}) + "\n"


def _report(tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Any, str]:
    out = tmp_path / "out"
    code = main(["report", "--from", str(log), "--convert", "pay", "--examples", "3",
                 "--price-in", "2", "--out", str(out)])  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    return json.loads((out / "report.json").read_text())["what_if"], printed.out


def test_skipped_tools_are_cut_and_folded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [f"{i:04d}" + "x" * 2005 for i in range(600)]  # 600 names of 2,009 characters
    log = tmp_path / "log.jsonl"
    log.write_text(_line("t" * 5000, names))
    what_if, out = _report(tmp_path, log, capsys)
    assert what_if["cut_short_runs"] == 1
    assert len(what_if["not_run"]) == SHOWN
    assert all(len(entry["tool"]) == NAME_LIMIT for entry in what_if["not_run"])
    assert {entry["tool"] for entry in what_if["not_run"]} <= {
        n[: NAME_LIMIT - 1] + "…" for n in names
    }
    assert what_if["folded"]["not_run"] == {"names": 600 - SHOWN, "at_least": False, "count": 550}
    (example,) = what_if["examples"]
    assert len(example["thread_id"]) == NAME_LIMIT
    assert len(example["not_run"]) <= 20
    assert all(len(name) == NAME_LIMIT for name in example["not_run"])
    assert max(len(line) for line in out.splitlines()) < 60 * NAME_LIMIT
    assert "and 40 more, other 550 tools (550 calls)" in out
    page = (tmp_path / "out" / "report.html").read_text()
    assert "other 550 tools (550 calls)" in page
    assert names[0] not in page


def test_an_absurd_usage_is_refused_as_the_report_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(_line("absurd", ["mail"], usage=2**63 - 1) + _line("fine", ["mail"]))
    what_if, out = _report(tmp_path, log, capsys)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["runs"] == 1  # the report counts the fine run only
    assert (what_if["runs"], what_if["rejected_runs"]) == (1, 1)
    for figures in (what_if["before"], what_if["after"], what_if["saved"]):
        assert all(0 <= value <= LIMIT for key, value in figures.items() if key != "cost")
    assert what_if["saved"]["cost"] < 1
    assert str(2**63 - 1)[:8] not in out
    assert "27670116110564327421" not in out


def test_later_tools_of_an_example_are_cut() -> None:
    name = "later" + "y" * 3000
    messages = [
        HumanMessage("q"),
        AIMessage("", tool_calls=[{"name": "pay", "args": {}, "id": "p"}]),
        ToolMessage("paid", tool_call_id="p", name="pay"),
        AIMessage("", tool_calls=[{"name": name, "args": {}, "id": "m"}]),
        ToolMessage("sent", tool_call_id="m", name=name),
        AIMessage("done"),
    ]
    pair = cut_short_pair(messages, "pay")
    assert pair is not None
    assert pair["later_tools"] == [name[: NAME_LIMIT - 1] + "…"]
