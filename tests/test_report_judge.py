"""`toolstop report --judge MODEL`: a chat model's counts beside the heuristic's advice.

Offline: a real `ChatOpenAI` client talks to the loopback provider over HTTP, which answers from a
script (each label, an unparseable reply) and fails like the API once the script is used up (an
HTTP 500)."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from judge_runs import recorded
from toolstop.cli import main
from toolstop.report.model_judge import LABELS, RUBRIC, Sample, parse_label
from toolstop.report.reader import RunEnd

SECRET = "sk-live0123456789abcdefXYZ"
PASSWORD = "hunter2hunter2"
RUNS = 6


@tool
def lookup_order(order_id: str) -> str:
    """Where an order is (its text carries a key)."""
    return f"Order {order_id} ships Monday. api_key={SECRET} <b>bold</b>"


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    answers = [f"Order {n} ships Monday. {PASSWORD=}" for n in range(RUNS)]
    return recorded(tmp_path_factory.mktemp("judge") / "agent.sqlite", lookup_order, answers)


class Terminal(io.StringIO):
    """A stdin that is a terminal, with the user's typed answer."""

    def isatty(self) -> bool:
        return True


def report(database: Path, out: Path, *argv: str) -> tuple[int, str]:
    text = io.StringIO()
    code = main(["report", "--db", str(database), "--out", str(out), *argv], out=text)
    return code, text.getvalue()


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_openai", reason="needs the `openai` extra")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


SCRIPT = [
    '{"label": "convert"}',
    "convert_with_answer",
    '```json\n{"label": "keep"}\n```',
    "I would say it could be converted, probably.",
    '"Keep"',
]
"""Five replies for six calls: the sixth gets the loopback's HTTP 500 (script used up)."""


def test_the_judge_counts_each_label_an_unparseable_reply_and_a_failed_call(
    database: Path, tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolstop.testing.loopback import LoopbackProvider

    with LoopbackProvider(SCRIPT) as provider:
        code, text = report(
            database, tmp_path, "--judge", "openai:gpt-4o-mini", "--base-url",
            provider.base_url, "--yes",
        )  # fmt: skip
        bodies = list(provider.raw_requests)
    stderr = capsys.readouterr().err
    assert code == 0, (text, stderr)
    assert "Traceback" not in stderr
    assert f"the judge makes {RUNS} call(s) to openai:gpt-4o-mini" in stderr
    assert "1 of 6 judge call(s) failed" in stderr
    document = json.loads((tmp_path / "report.json").read_text())
    [entry] = document["candidates"]
    assert entry["model_judge"] == {
        "model": "openai:gpt-4o-mini",
        "samples": RUNS,
        "counts": {"convert": 1, "convert_with_answer": 1, "keep": 2},
        "unparseable": 1,
        "failed": 1,
        "error": entry["model_judge"]["error"],
    }
    assert "Error code: 500" in entry["model_judge"]["error"]
    judge = document["model_judge"]
    assert (judge["calls"], judge["failed"], judge["unparseable"]) == (RUNS, 1, 1)
    assert judge["estimated_tokens"] > 0
    assert entry["advice"] in ("convert", "convert_with_answer", "keep", "too_few")  # unchanged
    # the CLI summary and the page carry the counts beside the heuristic's advice
    assert (
        "  lookup_order: convert 1, convert_with_answer 1, keep 2 of 6 sampled "
        f"(1 unparseable, 1 failed) (heuristic: {entry['advice']})"
    ) in text.splitlines()
    page = (tmp_path / "report.html").read_text()
    assert "<th>model judge (openai:gpt-4o-mini)</th>" in page
    assert "convert 1, convert_with_answer 1, keep 2 of 6 sampled" in page
    # every request: the rubric, the fenced pair, masked; no secret in any body
    sent = [json.loads(body) for body in bodies]
    assert len(sent) >= RUNS + 1  # the failing call was retried
    for body in sent[:RUNS]:
        system, user = body["messages"]
        assert system == {"role": "system", "content": RUBRIC}
        assert re.search(r"<<<TOOL RESULT [0-9a-f]{12}\nOrder ", user["content"])
        assert "api_key=***" in user["content"]
        assert re.search(r"<<<FINAL ANSWER [0-9a-f]{12}\nOrder ", user["content"])
    for body in bodies:
        assert SECRET.encode() not in body
        assert PASSWORD.encode() not in body


def test_the_judge_refuses_without_a_terminal_or_yes(
    database: Path, tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolstop.testing.loopback import LoopbackProvider

    with LoopbackProvider([]) as provider:
        code, _ = report(
            database, tmp_path / "out", "--judge", "openai:x", "--base-url", provider.base_url
        )
        assert provider.raw_requests == []
    assert code == 2
    assert "stdin is not a terminal: pass --yes" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("typed", "judged"), [("n\n", False), ("", False), ("y\n", True)])
def test_in_a_terminal_the_judge_asks_first(
    database: Path,
    tmp_path: Path,
    no_key: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    typed: str,
    judged: bool,
) -> None:
    from toolstop.testing.loopback import LoopbackProvider

    monkeypatch.setattr(sys, "stdin", Terminal(typed))
    with LoopbackProvider(["keep"] * 2) as provider:
        code, _ = report(
            database, tmp_path / "out", "--judge", "openai:x", "--base-url", provider.base_url,
            "--judge-samples", "2",
        )  # fmt: skip
        calls = len(provider.raw_requests)
    stderr = capsys.readouterr().err
    assert (
        f"the judge makes 2 call(s) to openai:x at {provider.base_url}, sent no key "
        "(1 tool(s), at most 2 each), about "
    ) in stderr
    assert "judge now? [y/N] " in stderr
    if judged:
        assert (code, calls) == (0, 2)
        [entry] = json.loads((tmp_path / "out" / "report.json").read_text())["candidates"]
        assert entry["model_judge"]["counts"] == {"convert": 0, "convert_with_answer": 0, "keep": 2}
    else:
        assert (code, calls) == (1, 0)
        assert "not judged; nothing written" in stderr
        assert not (tmp_path / "out").exists()


def test_the_sample_is_the_same_whatever_the_order() -> None:
    ends = [
        RunEnd(
            thread_id=f"t{n}",
            checkpoint_ns="",
            checkpoint_id=f"c{n}",
            record={"run": 1},
            ended_at=None,
        )
        for n in range(50)
    ]
    forward, backward = Sample(5), Sample(5)
    for end in ends:
        forward.add("tool", end)
    for end in reversed(ends):
        backward.add("tool", end)
    assert forward.runs() == backward.runs()
    assert len(forward.runs()["tool"]) == 5
    smallest = sorted(ends, key=Sample.key)[:5]
    assert forward.runs()["tool"] == smallest
    assert Sample(0).runs() == {}


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ('{"label": "convert"}', "convert"),
        ('{"label": "convert_with_answer", "why": "restates fields"}', "convert_with_answer"),
        ('```json\n{"label": "keep"}\n```', "keep"),
        ("Convert with answer.", "convert_with_answer"),
        ("`keep`", "keep"),
        ('"convert"', "convert"),
        (AIMessage([{"type": "text", "text": "keep"}]), "keep"),
        ("convert or keep", None),
        ('{"label": "maybe"}', None),
        ('{"answer": "convert"}', None),
        ("[1, 2]", None),
        ("", None),
        ("The answer is: convert", None),
        (None, None),
        ("keep" * 1000, None),
        ("[" * 2000, None),  # deeper than Python recurses: unparseable, not a RecursionError
        ('{"label": ' * 600, None),
    ],
)
def test_a_reply_is_a_label_or_unparseable(reply: Any, label: str | None) -> None:
    assert parse_label(reply) == label
    assert label is None or label in LABELS


def test_the_judge_needs_a_database_and_a_valid_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.jsonl"
    log.write_text("")
    text = io.StringIO()
    argv = ["report", "--log", str(log), "--judge", "openai:x", "--yes", "--out", str(tmp_path)]
    assert main(argv, out=text) == 2
    assert "--judge needs --db" in capsys.readouterr().err
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    db = tmp_path / "none.sqlite"
    for spec, said in [
        ("nonsense", "--judge takes PROVIDER:NAME"),
        ("openai:x", "OPENAI_API_KEY is not set; set it to use openai:x, or leave out --judge"),
    ]:
        argv = ["report", "--db", str(db), "--judge", spec, "--yes", "--out", str(tmp_path)]
        assert main(argv, out=text) == 2
        assert said in capsys.readouterr().err


def test_the_rollout_page_shows_the_rubric_the_judge_sends() -> None:
    page = Path(__file__).parent.parent / "docs" / "rollout.md"
    assert f"```text\n{RUBRIC}\n```" in page.read_text(encoding="utf-8")


def test_the_same_database_sends_the_same_sample(
    database: Path, tmp_path: Path, no_key: None
) -> None:
    from toolstop.testing.loopback import LoopbackProvider

    sent = []
    for attempt in range(2):
        with LoopbackProvider(["keep"] * 3) as provider:
            code, _ = report(
                database, tmp_path / str(attempt), "--judge", "openai:x", "--base-url",
                provider.base_url, "--yes", "--judge-samples", "3",
            )  # fmt: skip
            assert code == 0
            contents = [json.loads(b)["messages"][1]["content"] for b in provider.raw_requests]
            # the fences' tags are drawn afresh for each call; the pairs are what must repeat
            sent.append([re.sub(r"\b[0-9a-f]{12}\b", "TAG", c) for c in contents])
    assert len(sent[0]) == 3
    assert len(set(sent[0])) == 3  # three different runs
    assert sent[0] == sent[1]
