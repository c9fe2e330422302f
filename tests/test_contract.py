"""The tool-side contract: `Outcome`, `signal`, and `StopPolicy` validation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolstop import Outcome, StopPolicy, ToolstopConfigError, signal


def test_outcome_values() -> None:
    assert [o.value for o in Outcome] == ["completed", "transient", "fatal", "policy_block"]
    assert Outcome("fatal") is Outcome.FATAL
    assert isinstance(Outcome.COMPLETED, str)


@pytest.mark.parametrize(
    ("outcome", "stop"),
    [("completed", True), ("transient", False), ("fatal", True), ("policy_block", True)],
)
def test_signal_default_stop(outcome: str, stop: bool) -> None:
    artifact = signal(outcome)
    assert artifact == {"stop": stop, "reason": outcome}
    assert json.loads(json.dumps(artifact)) == artifact


def test_signal_extra_and_overrides() -> None:
    assert signal(Outcome.TRANSIENT, retry_after=2) == {
        "stop": False,
        "reason": "transient",
        "retry_after": 2,
    }
    assert signal(Outcome.COMPLETED, stop=False) == {"stop": False, "reason": "completed"}
    assert type(signal(Outcome.FATAL)["reason"]) is str  # plain JSON, not the enum


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("done",), {}, "^unknown outcome 'done'; expected one of: completed, transient, fatal, "),
        (("transient",), {"stop": True}, "^a transient outcome cannot stop the loop; "),
        (("completed",), {"stop": 1}, "must be a bool, got int$"),
        (
            ("fatal",),
            {"reason": "quota"},
            r"^reason='quota': the outcome is the reason; extra keys cannot replace it$",
        ),
    ],
)
def test_signal_rejects_nonsense(args: tuple[Any, ...], kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        signal(*args, **kwargs)


def test_policy_defaults() -> None:
    policy = StopPolicy()
    assert (policy.parallel, policy.mode, policy.max_transient_retries) == ("all", "hard", 3)
    assert policy.priority == ("policy_block", "fatal", "completed", "transient")
    with pytest.raises(AttributeError):
        policy.mode = "never"  # type: ignore[misc]
    with pytest.raises(TypeError):
        StopPolicy("all")  # type: ignore[misc]  # keyword-only


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"parallel": "some"}, "parallel"),
        ({"mode": "soft"}, "mode"),
        (
            {"priority": ("fatal", "bogus")},
            r"^StopPolicy\.priority has unknown reasons \['bogus'\]",
        ),
        ({"priority": ("fatal", "fatal")}, r"^StopPolicy\.priority lists a reason twice"),
        ({"priority": ()}, r"^StopPolicy\.priority must name at least one reason$"),
        ({"priority": "fatal"}, r"^StopPolicy\.priority must be a tuple of reasons, got 'fatal'$"),
        ({"priority": None}, r"^StopPolicy\.priority must be a tuple of reasons, got None$"),
        ({"max_transient_retries": -1}, ">= 0"),
        ({"max_transient_retries": 1.5}, "int or None"),
        ({"max_transient_retries": True}, "int or None"),
        ({"retry_budget_message": "  "}, "non-empty"),
    ],
)
def test_policy_rejects_invalid_values(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ToolstopConfigError, match=match):
        StopPolicy(**kwargs)
    with pytest.raises(ValueError, match=match):
        StopPolicy(**kwargs)


def test_policy_normalises_priority() -> None:
    policy = StopPolicy(priority=[Outcome.FATAL, "completed"])  # type: ignore[arg-type]
    assert policy.priority == ("fatal", "completed")
    assert [type(reason) for reason in policy.priority] == [str, str]  # not the enum members
    assert policy.rank("transient") == 2  # unlisted ranks last


def test_signal_carries_an_answer_only_when_it_is_text() -> None:
    assert signal(Outcome.COMPLETED, answer="Booked.") == {
        "stop": True,
        "reason": "completed",
        "answer": "Booked.",
    }
    blocks = [{"type": "text", "text": "Booked "}, {"type": "text", "text": "seat 4A"}]
    assert signal("fatal", answer=blocks, ref=7) == {
        "stop": True,
        "reason": "fatal",
        "answer": blocks,
        "ref": 7,
    }
    with pytest.raises(ValueError, match=r"^answer must be") as number:
        signal(Outcome.COMPLETED, answer=3)  # type: ignore[arg-type]
    assert str(number.value) == "answer must be a str or a list of text blocks, got int"


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (["ok"], "answer[0] must be a text block {'type': 'text', 'text': str}, got str"),
        (
            [{"type": "text", "text": "ok"}, {"type": "image_url", "image_url": {"url": "x"}}],
            "answer[1] must be a text block {'type': 'text', 'text': str}, got a 'image_url' block",
        ),
        ([{"type": "text", "text": 5}], "answer[0]['text'] must be a str, got int"),
        ([{"type": "text"}], "answer[0]['text'] must be a str, got NoneType"),
        ((("text",),), "answer must be a str or a list of text blocks, got tuple"),
        ("", "answer must have some text (it replaces the content); omit it to show the content"),
        (
            " \n",
            "answer must have some text (it replaces the content); omit it to show the content",
        ),
        ([], "answer must have some text (it replaces the content); omit it to show the content"),
        (
            [{"type": "text", "text": " "}],
            "answer must have some text (it replaces the content); omit it to show the content",
        ),
    ],
)
def test_signal_refuses_an_answer_that_is_not_text_with_a_clear_error(
    answer: Any, error: str
) -> None:
    with pytest.raises(ValueError, match=r"^answer") as refused:
        signal(Outcome.COMPLETED, answer=answer)
    assert str(refused.value) == error


def test_policy_rejects_an_unknown_on_budget_by_name() -> None:
    with pytest.raises(ToolstopConfigError) as refused:
        StopPolicy(on_budget="ask")  # type: ignore[arg-type]
    assert str(refused.value) == (
        "StopPolicy.on_budget must be one of ('message', 'model'), got 'ask'"
    )


def test_a_retry_budget_of_zero_is_allowed() -> None:
    """`max_transient_retries=0`: the first transient failure ends the run (not a config error)."""
    assert StopPolicy(max_transient_retries=0).max_transient_retries == 0
