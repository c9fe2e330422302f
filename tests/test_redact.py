"""The one password masker (`toolstop._redact`): no part of a password is ever shown, whatever
the URL's shape."""

from __future__ import annotations

from urllib.parse import quote

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="needs hypothesis (dev extra)")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from toolstop._redact import (  # noqa: E402
    driver_error,
    mask_password,
    mask_secrets,
    printable,
    redact,
    shown_error,
    without_password,
)

# Every character a password may hold unencoded, the URL's own delimiters among them.
PASSWORD = st.text(alphabet="ABCXYZ0123456789@/?#:%!$&'()*+,;=[]~-._", min_size=1, max_size=24)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:p@ss@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u:pa/ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pa?ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pa#ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pa:ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:p%40ss@h/db?sslmode=require", "postgresql://u:***@h/db?sslmode=require"),
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql://h:5432/db", "postgresql://h:5432/db"),
        ("postgresql:///db", "postgresql:///db"),
    ],
)
def test_the_password_is_masked_whatever_the_urls_shape(url: str, shown: str) -> None:
    assert without_password(url) == shown


@given(password=PASSWORD, user=st.sampled_from(["", "alice", "bob.smith"]))
def test_no_part_of_a_password_is_ever_shown(password: str, user: str) -> None:
    for written in {password, quote(password, safe="")}:
        url = f"postgresql://{user}:{written}@db.example:5432/prod?sslmode=require"
        assert redact(url) == f"postgresql://{user}:***@db.example:5432/prod?sslmode=require"


@given(password=PASSWORD.filter(lambda p: "*" not in p))  # "*" is the mask's own character
def test_a_drivers_message_quoting_the_password_is_masked(password: str) -> None:
    encoded = quote(password, safe="")
    url = f"postgresql://alice:{encoded}@db.example/prod"
    message = f"failed for {password} and {encoded} then"  # lowercase: never in PASSWORD
    assert mask_password(message, url) == "failed for *** and *** then"


def test_a_sqlite_path_is_shown_as_it_is() -> None:
    assert redact("/data/a:b@c.sqlite") == "/data/a:b@c.sqlite"


@given(
    # upper case: never in the hint, so any piece of the password shown would be found
    head=st.text(alphabet="ABCXYZ", min_size=1, max_size=8),
    tail=st.text(alphabet="ABCXYZ", min_size=1, max_size=8),
    delimiter=st.sampled_from("@/?#"),
)
def test_a_driver_reading_a_malformed_password_differently_shows_none_of_it(
    head: str, tail: str, delimiter: str
) -> None:
    url = f"postgresql://alice:{head}{delimiter}{tail}@db.example/prod"
    # libpq ends the userinfo at the first delimiter and quotes the rest as the host
    message = f"failed to resolve host '{tail}@db.example'"
    shown = driver_error(message, url)
    assert head not in shown
    assert tail not in shown
    assert shown.endswith(
        f"percent-encode the password ({delimiter!r} is {quote(delimiter, safe='')})"
    )


def test_a_well_formed_password_keeps_the_drivers_reason() -> None:
    url = "postgresql://alice:p%40ss@db.example/prod"
    assert driver_error("password authentication failed for p@ss", url) == (
        "password authentication failed for ***"
    )


SECRETS = [
    ("Incorrect API key provided: sk-proj-abcdefghijklmnop1234", "sk-proj-abcdefghijklmnop1234"),
    ("groq said gsk_ABCDEFGHIJKLMNOPQRSTUV", "gsk_ABCDEFGHIJKLMNOPQRSTUV"),
    ("upstream refused: api_key=hunter2-hunter2", "hunter2-hunter2"),
    ('{"token": "abc.def.ghi"}', "abc.def.ghi"),
    ("headers: Authorization: Bearer eyJhbGciOi.JIUzI1", "eyJhbGciOi.JIUzI1"),
    ("could not connect to postgresql://app:s3cr@t@db:5432/x", "s3cr@t"),
    ("password=correct horse", "correct"),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS, ids=[s[1][:12] for s in SECRETS])
def test_an_errors_secret_is_masked(text: str, secret: str) -> None:
    masked = mask_secrets(text)
    assert secret not in masked
    assert "***" in masked


def test_an_error_is_shown_on_one_line_with_its_controls_escaped() -> None:
    error = RuntimeError("line one\nline two \x1b[2J\u202egnp.exe \u00e9t\u00e9")
    assert shown_error(error) == (
        "RuntimeError: line one\\nline two \\x1b[2J\\u202egnp.exe \u00e9t\u00e9"
    )
    assert printable("plain text, accents: \u00e9") == "plain text, accents: \u00e9"
    assert shown_error(ValueError()) == "ValueError"
    assert shown_error(ValueError("x" * 400), limit=10) == f"ValueError: {'x' * 10}..."
