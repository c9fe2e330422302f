"""One password masker for every database URL toolstop shows (reports, errors, `make serve`).

It reads the URL as written, not as `urllib` parses it: a password may hold an unencoded `@`,
`/`, `?`, `#` or `:`, and every character between the first `:` after the user name and the
last `@` is masked. When in doubt it masks more, never less.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

__all__ = [
    "driver_error",
    "is_postgres",
    "malformed_userinfo",
    "mask_password",
    "mask_secrets",
    "printable",
    "redact",
    "shown_error",
    "without_password",
]

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


_DELIMITERS = "@/?#"
"""Characters that end a URL's userinfo for a driver: unencoded in a password, a driver reads
the URL differently (libpq takes the host from after the first `@`) and quotes a piece of the
password as a host name in its error."""


def malformed_userinfo(uri: str) -> str | None:
    """The first unencoded delimiter in `uri`'s password (`@`, `/`, `?`, `#`), or None."""
    password = password_of(uri)
    return next((c for c in password or "" if c in _DELIMITERS), None)


def driver_error(text: str, uri: str) -> str:
    """A driver's error about `uri`, safe to show: the password masked.

    When the password holds an unencoded delimiter, not the driver's text at all (it read the URL
    differently and may quote any piece of the password as a host or a database) but the hint to
    percent-encode it."""
    delimiter = malformed_userinfo(uri)
    if delimiter is not None:
        return (
            f"the password holds an unencoded {delimiter!r}, so the driver reads the URL "
            f"differently; percent-encode the password ({delimiter!r} is "
            f"{quote(delimiter, safe='')})"
        )
    return mask_password(text, uri)


_KEY = re.compile(
    r"\b(?:sk|pk|rk|gsk|xai|hf|ghp|gho|ghs|github_pat|glpat|AKIA|AIza)[-_]?[A-Za-z0-9_\-]{12,}"
)
"""A provider's API key as it is written (OpenAI `sk-...`, Groq `gsk_...`, GitHub, AWS, Google)."""

_ASSIGNED = re.compile(
    r"(?i)\b((?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd"
    r"|authorization)[\"']?\s*[=:]\s*[\"']?(?:bearer\s+)?)[^\s\"',;&}]+"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/\-]+=*")
_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^\s/:@]*:)\S+(@)", re.IGNORECASE)


def mask_secrets(text: str) -> str:
    """`text` (an exception's message, say) with what looks like a secret shown as `***`.

    API keys by their provider's prefix, `api_key=...` / `token: ...` / `password=...` values,
    bearer tokens and the password of any URL in it.

    Deliberately broad: a word that only looks like a key is masked too. Not handled: a secret
    with no recognisable prefix or label (nothing tells it from other text)."""
    text = _USERINFO.sub(rf"\g<1>{MASK}\g<2>", text)
    text = _ASSIGNED.sub(rf"\g<1>{MASK}", text)
    text = _BEARER.sub(rf"\g<1>{MASK}", text)
    return _KEY.sub(MASK, text)


def printable(text: str) -> str:
    """`text` on one line, every character a terminal would act on written as its escape.

    Newlines, escape sequences and bidi controls become `\\n`, `\\x1b`, `\\u202e`; the rest
    (accents included) is shown as it is."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown_error(error: BaseException, limit: int = 300) -> str:
    """`Type: message` of `error`, safe to print.

    Secrets masked (`mask_secrets`), controls escaped (`printable`), at most `limit` characters
    of the message."""
    text = printable(mask_secrets(str(error)))
    if len(text) > limit:
        text = f"{text[:limit]}..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
