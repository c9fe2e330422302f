"""Every command's error path masks a `--db`, `--from` or `--log` value's password, whatever
its form: a mistyped scheme, a driver's scheme (`postgresql+psycopg://`), a misspelt key.

One masker (`toolstop._redact.mask_sources`) serves them all; each path is tried here with
each form, and the printed text is searched for the password."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from toolstop._redact import mask_sources, redact
from toolstop.cli import main

SECRET = "Zq9s3cr3tWx"

FORMS = [
    f"postgresql:/u:{SECRET}@db/app",  # the typo docs/security.md promises to mask
    f"postgresql+psycopg://u:{SECRET}@db/app",
    f"postgresql+psycopg2://u:{SECRET}@127.0.0.1:1/app",
    f"u:{SECRET}@db/app",  # no scheme at all
    f"pasword={SECRET}",  # misspelt keys
    f"paswd={SECRET}",
    f"pssword={SECRET}",
    f"host=db dbname=app pasword={SECRET}",
    f"postgresql://u@127.0.0.1:1/app?pasword={SECRET}",
    f"db.sqlite;DB_PASS={SECRET}",
]


def printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    out = io.StringIO()
    try:
        code = main(argv, out=out)
    except SystemExit as exit_:  # argparse's own errors
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out + captured.err


@pytest.mark.parametrize("value", FORMS)
@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--db", "{v}", "--out", "{out}"],
        ["report", "--from", "{v}", "--out", "{out}"],
        ["report", "--log", "{v}", "--out", "{out}"],
        ["explain", "t-1", "--db", "{v}"],
        ["demo", "--thread", "t-1", "--db", "{v}/missing/x.sqlite"],
        ["check", "--db", "{v}"],  # no such option: argparse quotes it
        ["bench", "--from", "{v}"],
        ["{v}"],  # not a command: argparse quotes it
    ],
    ids=["report-db", "report-from", "report-log", "explain", "demo", "check", "bench", "cmd"],
)
def test_no_error_path_prints_the_password(
    argv: list[str],
    value: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    args = [a.replace("{v}", value).replace("{out}", str(tmp_path / "out")) for a in argv]
    code, text = printed(args, capsys)
    assert code in (1, 2), text
    assert text.strip(), "an error is said"
    assert SECRET not in text, text
    assert "***" in text, text  # the value is quoted, masked, not dropped


@pytest.mark.parametrize("value", FORMS)
def test_demo_shows_the_database_masked_where_it_keeps_the_thread(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / value).parent.mkdir(parents=True, exist_ok=True)
    code, text = printed(["demo", "--thread", "t-1", "--db", value], capsys)
    if code == 0:
        assert f"messages in {redact(value)})" in text
    assert SECRET not in text, text


@pytest.mark.parametrize("value", FORMS)
def test_every_form_is_masked_as_the_masker_sees_it(value: str) -> None:
    assert SECRET not in redact(value)
    assert SECRET not in mask_sources(f"cannot read {value}: the folder {value} is gone", value)
    assert mask_sources("nothing to hide", value, None) == "nothing to hide"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (f"pasword={SECRET}", "pasword=***"),
        (f"host=db paswd={SECRET} dbname=app", "host=db paswd=*** dbname=app"),
        (f"postgresql:/u:{SECRET}@db/app", "postgresql:/u:***@db/app"),
        (f"postgresql+psycopg://u:{SECRET}@db/app", "postgresql+psycopg://u:***@db/app"),
        ("host=db dbname=app user=u", "host=db dbname=app user=u"),  # nothing to mask
    ],
)
def test_a_value_is_shown_with_only_its_password_masked(value: str, shown: str) -> None:
    assert redact(value) == shown
