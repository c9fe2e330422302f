"""The one password masker (`toolstop._redact`): no part of a password is ever shown, whatever
the URL's shape."""

from __future__ import annotations

from urllib.parse import quote

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="needs hypothesis (dev extra)")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from toolstop._printable import printable  # noqa: E402
from toolstop._redact import (  # noqa: E402
    connection_string,
    driver_error,
    is_postgres,
    mask_password,
    redact,
    shown_error,
    without_password,
)
from toolstop._secrets import mask_secrets  # noqa: E402

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
    assert redact("/data/a@b/c.sqlite") == "/data/a@b/c.sqlite"
    assert redact("C:/data/c.sqlite") == "C:/data/c.sqlite"


def test_a_userinfo_looking_password_in_a_path_is_masked() -> None:
    """A mistyped URL is read as a SQLite path; its password is masked all the same."""
    assert redact("postgresql:/u:s3cr3t@host/db") == "postgresql:/u:***@host/db"
    assert redact("postgresql:u:s3cr3t@host/db") == "postgresql:u:***@host/db"
    assert redact("/data/a:s3cr3t@c.sqlite") == "/data/a:***@c.sqlite"
    assert redact("postgresql:/host/db?password=s3cr3t") == "postgresql:/host/db?password=***"


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


# -- every form of PostgreSQL connection string --------------------------------------------------
@pytest.mark.parametrize(
    ("db", "shown"),
    [
        ("postgresql://u@h/db?password=s3cr3t", "postgresql://u@h/db?password=***"),
        # libpq percent-decodes a query's parameter names
        ("postgresql://u@h/db?pass%77ord=s3cr3t", "postgresql://u@h/db?pass%77ord=***"),
        ("postgresql://u@h/db?%70assword=s3cr3t", "postgresql://u@h/db?%70assword=***"),
        ("postgresql://u@h/db?ssl%70assword=s3cr3t", "postgresql://u@h/db?ssl%70assword=***"),
        (
            "postgresql://u@h/db?%70assword=s3cr3t&port=1",
            "postgresql://u@h/db?%70assword=***&port=1",
        ),
        (
            "postgresql://u@h/db?sslmode=require&password=s3cr3t&application_name=a",
            "postgresql://u@h/db?sslmode=require&password=***&application_name=a",
        ),
        ("postgres://u@h/db?sslpassword=s3cr3t#x", "postgres://u@h/db?sslpassword=***"),
        ("postgresql://u@h/db?password=s3&cr3t&port=1", "postgresql://u@h/db?password=***&port=1"),
        ("POSTGRESQL://u:s3cr3t@h/db", "POSTGRESQL://u:***@h/db"),
        ("Postgres://u:s3cr3t@h/db", "Postgres://u:***@h/db"),
        ("host=h dbname=db user=u password=s3cr3t", "host=h dbname=db user=u password=***"),
        ("host=h password = s3cr3t port=5432", "host=h password = *** port=5432"),
        ("host=h password='s3 cr3t' dbname=db", "host=h password=*** dbname=db"),
        ("host=h password='s3\\' cr3t' dbname=db", "host=h password=*** dbname=db"),
        ("host=h password=s3 cr3t dbname=db", "host=h password=*** dbname=db"),
        ("host=h password='s3cr3t", "host=h password=***"),
        ("PASSWORD=s3cr3t host=h", "PASSWORD=*** host=h"),
        # a password holding the query's own delimiters: every candidate span masked
        ("postgresql://u:x?password=y@h/db", "postgresql://u:***"),
        ("postgresql://u@h:5432/db?password=p@ss", "postgresql://u@h:***"),
        ("host=h dbname=db", "host=h dbname=db"),
        ("host=h oauth_client_secret=s3cr3t", "host=h oauth_client_secret=***"),
        (
            "postgresql://h/db?oauth_client_secret=s3cr3t",
            "postgresql://h/db?oauth_client_secret=***",
        ),
        # `&A=` is no libpq parameter: part of the password, masked with it
        ("postgresql://h/db?password=s3&A=x&port=1", "postgresql://h/db?password=***&port=1"),
        # forms libpq refuses or reads as a database name: a password-like key is masked anyway
        ("postgresql://u@h/db?password+=s3cr3t", "postgresql://u@h/db?password+=***"),
        ("postgresql://u@h/db?pass+word=s3cr3t", "postgresql://u@h/db?pass+word=***"),
        ("postgresql://u@h/db?%20password=s3cr3t", "postgresql://u@h/db?%20password=***"),
        ("postgresql://u:s3@h/db;password=s3cr3t", "postgresql://u:***@h/db;password=***"),
        ("postgresql://u@h/db;password=s3cr3t", "postgresql://u@h/db;password=***"),
        (
            "postgresql://u@h/db;password=s3cr3t&sslmode=require",
            "postgresql://u@h/db;password=***&sslmode=require",
        ),
        ("postgresql://h/db?x=1;password=s3cr3t", "postgresql://h/db?x=1;password=***"),
        ("host=h password=s3cr3t;x", "host=h password=***"),
        ("host=h dbname=db;password=s3cr3t port=1", "host=h dbname=db;password=*** port=1"),
        ("host=h dbname=db,db_pwd=s3cr3t", "host=h dbname=db,db_pwd=***"),
        ("host=h dbname=db;password='s3 cr3t'", "host=h dbname=db;password=***"),
    ],
)
def test_every_form_of_connection_string_is_masked(db: str, shown: str) -> None:
    assert redact(db) == shown
    assert "s3" not in redact(db)
    assert redact(redact(db)) == redact(db)


@pytest.mark.parametrize(
    "db",
    [
        "postgresql://u@h/db",
        "postgres://h/db",
        "POSTGRESQL://u@h/db",
        "Postgres://u@h/db",
        " postgresql://u@h/db",
        "host=127.0.0.1 dbname=test",
        "dbname=test",
        "host=/var/run/postgresql user=me",
        "service=prod",
    ],
)
def test_is_postgres_knows_every_form(db: str) -> None:
    assert is_postgres(db)


@pytest.mark.parametrize(
    "db", ["threads.sqlite", "/data/a:b@c.sqlite", "./host.db", "C:\\data\\x.sqlite", ""]
)
def test_a_sqlite_path_is_not_postgres(db: str) -> None:
    assert not is_postgres(db)


def test_libpq_gets_a_lower_case_scheme() -> None:
    assert connection_string("POSTGRESQL://u:p@H/DB") == "postgresql://u:p@H/DB"
    assert connection_string("Postgres://u@h/db") == "postgres://u@h/db"
    assert connection_string("host=h dbname=d") == "host=h dbname=d"


def test_a_keyword_string_is_one_psycopg_accepts() -> None:
    conninfo = pytest.importorskip("psycopg.conninfo")
    for db in ["host=127.0.0.1 dbname=test", "host=h password='a b' dbname=d", "service=prod"]:
        assert conninfo.conninfo_to_dict(db)


@pytest.mark.parametrize(
    ("message", "db"),
    [
        ("password authentication failed: s3cr3t", "postgresql://u@h/db?password=s3cr3t"),
        ("bad value 's3 cr3t'", "host=h password='s3 cr3t'"),
        ("bad value s3\\'x", "host=h password='s3\\'x'"),
        ("bad value s3'x", "host=h password='s3\\'x'"),
        # the driver quoting a password-like pair in a form of its own (decoded differently)
        ('database "db;password=s3\ufffdx" does not exist', "postgresql://h/db;password=s3%FFx"),
        ('database "db;password=s3cr3t" does not exist', "host=h dbname=db;password=s3cr3t"),
    ],
)
def test_a_drivers_message_is_masked_for_every_form(message: str, db: str) -> None:
    assert "s3" not in driver_error(message, db)


@pytest.mark.parametrize("db", ["password=s3 cr3t", "host=h dbname=db;password=s3 cr3t"])
def test_an_unquoted_space_in_a_keyword_password_gives_a_hint_not_the_drivers_text(
    db: str,
) -> None:
    # libpq reads `cr3t` as a broken pair and quotes it: `missing "=" after "cr3t"`
    shown = driver_error('missing "=" after "cr3t" in connection info string', db)
    assert "cr3t" not in shown
    assert "quote it" in shown
    # the whole message, as the CLI shows it, keeps the hint and the text around the mask
    line = mask_password(f"cannot connect to {redact(db)}: {shown}", db)
    assert line.endswith(": the password holds a space; quote it: password='...'")


# Upper case never appears in the rest of these strings, so any piece of the password shown is
# found; the password holds the delimiters of every form.
HOSTILE_PASSWORD = st.text(alphabet="ABCXYZ0123 '\\&=@/?#:%", min_size=1, max_size=24).filter(
    lambda p: any(c in "ABCXYZ" for c in p)
)


def _quoted(password: str) -> str:
    return "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"


@given(password=HOSTILE_PASSWORD, scheme=st.sampled_from(["postgresql", "POSTGRES", "Postgresql"]))
def test_no_part_of_a_password_is_shown_in_any_form(password: str, scheme: str) -> None:
    forms = [
        f"{scheme.lower()}://u@h:5432/db?sslmode=require&password={quote(password, safe='')}",
        f"{scheme.lower()}://u@h/db?password={password}",
        f"{scheme}://u:{password}@h/db",
        f"host=h port=5432 password={_quoted(password)} dbname=db",
        f"password = {_quoted(password)}",
        # forms libpq refuses or reads as a database name
        f"{scheme.lower()}://u@h/db;password={quote(password, safe='')}",
        f"{scheme.lower()}://u@h/db?password+={quote(password, safe='')}&sslmode=require",
        f"host=h dbname=db;password={_quoted(password)} port=5432",
    ]
    if not any(c.isspace() or c in "'\\" for c in password):
        forms.append(f"host=h password={password} dbname=db")
    for db in forms:
        shown = redact(db).replace(scheme, "")
        assert not any(c in "ABCXYZ" for c in shown), (db, shown)
        assert redact(shown) == shown


def test_an_unencoded_ampersand_in_a_query_password_gives_the_hint() -> None:
    # libpq ends the value at `&` and quotes the rest as a broken parameter
    shown = driver_error(
        'invalid URI query parameter: "cr3t"', "postgresql://h/db?password=s3&cr3t"
    )
    assert "cr3t" not in shown
    assert "percent-encode" in shown
