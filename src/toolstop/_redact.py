"""One password masker for every database URL toolstop shows (reports, errors, `make serve`).

It reads the URL as written, not as `urllib` parses it: a password may hold an unencoded `@`,
`/`, `?`, `#` or `:`, and every character between the first `:` after the user name and the
last `@` is masked. When in doubt it masks more, never less.
"""

from __future__ import annotations

from urllib.parse import unquote

__all__ = ["is_postgres", "mask_password", "redact", "without_password"]

MASK = "***"


def is_postgres(db: str) -> bool:
    """True for a `postgresql://` (or `postgres://`) URL; anything else is a SQLite path."""
    return db.startswith(("postgresql://", "postgres://"))


def _password_span(uri: str) -> tuple[int, int] | None:
    """Where the password of `uri` starts and ends (end exclusive), or None when it has none."""
    start = uri.find("://")
    if start < 0:
        return None
    start += 3
    at = uri.rfind("@", start)
    if at < 0:
        return None
    colon = uri.find(":", start, at)
    if colon < 0:
        return None  # a user name alone: nothing secret
    return colon + 1, at


def password_of(uri: str) -> str | None:
    """The password of `uri` as written (possibly percent-encoded), or None."""
    span = _password_span(uri)
    return None if span is None else uri[span[0] : span[1]]


def without_password(uri: str) -> str:
    """Any URL with its password (if any) shown as `***`."""
    span = _password_span(uri)
    if span is None:
        return uri
    return f"{uri[: span[0]]}{MASK}{uri[span[1] :]}"


def redact(db: str) -> str:
    """`db` without a password, for messages and reports (a SQLite path is shown as it is)."""
    return without_password(db) if is_postgres(db) else db


def mask_password(text: str, uri: str) -> str:
    """`text` (a driver's error, say) with the password of `uri` masked wherever it appears.

    The password is masked as written and percent-decoded."""
    password = password_of(uri)
    if password:
        for shown in sorted({password, unquote(password)}, key=len, reverse=True):
            text = text.replace(shown, MASK)
    return text
