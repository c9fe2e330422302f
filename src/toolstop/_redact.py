"""One password masker for every database connection string toolstop shows.

Reports, errors and `make serve` show connection strings through it.

PostgreSQL takes a connection string in two forms, and both may carry a password:

- a URL, `postgresql://user:password@host/db?password=...&sslpassword=...` (any scheme case is
  recognised; libpq itself accepts only lower case, so `connection_string` lowers it);
- keyword/value pairs, `host=db dbname=app password=secret` or `password='a b'`.

`password`, `sslpassword` and `oauth_client_secret` are masked in both forms, a URL query's
parameter names percent-decoded first as libpq does (`?pass%77ord=`, `?%70assword=`; libpq does
not decode keyword/value names). In text that is not a URL, a userinfo-looking password (from the
first `:` after a leading `scheme:` to the last `@`, as in the typo `postgresql:/u:secret@host`)
and a `?password=` parameter are masked too.

Any other `key=value` whose key looks like a password's, wherever it stands, is masked as well:
forms libpq refuses or reads as a database name (`?password+=`, `/db;password=`,
`dbname=db;password=`), whose text a driver's error or toolstop's own message would otherwise
echo. A key looks like a password's when, percent-decoded, in lower case and without its
punctuation, it holds `pass`, `pasw`, `pwd`, `psw`, `sword` or `secret` (`pass+word`,
`%20password`, and the misspellings `pasword`, `paswd` and `pssword`).

The masker reads the string as written, not as a parser would: a password may hold an unencoded
`@`, `/`, `?`, `#`, `:` or a space. Every span that may be a password is found in the original
string and the union of the spans is masked. When in doubt it masks more, never less.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from toolstop._printable import printable
from toolstop._secrets import mask_secrets

__all__ = [
    "connection_string",
    "driver_error",
    "is_postgres",
    "malformed_userinfo",
    "mask_password",
    "mask_sources",
    "redact",
    "shown_error",
    "without_password",
]

MASK = "***"

_SCHEME = re.compile(r"\s*(postgres(?:ql)?)://", re.IGNORECASE)
_KEYWORDS = (
    "host|hostaddr|port|dbname|user|password|passfile|require_auth|channel_binding|"
    "connect_timeout|client_encoding|options|application_name|fallback_application_name|"
    "keepalives|keepalives_idle|keepalives_interval|keepalives_count|tcp_user_timeout|"
    "replication|gssencmode|sslmode|requiressl|sslnegotiation|sslcompression|sslcert|sslkey|"
    "sslkeylogfile|sslpassword|sslcertmode|sslrootcert|sslcrl|sslcrldir|sslsni|requirepeer|"
    "ssl_min_protocol_version|ssl_max_protocol_version|min_protocol_version|"
    "max_protocol_version|krbsrvname|gsslib|gssdelegation|service|target_session_attrs|"
    "load_balance_hosts|oauth_issuer|oauth_client_id|oauth_client_secret|oauth_scope"
)
"""libpq's connection parameters."""
_SECRET_KEYS = r"(?:ssl)?password|oauth_client_secret"
_KEYWORD_DSN = re.compile(rf"\s*(?:{_KEYWORDS})\s*=", re.IGNORECASE)
"""A keyword/value connection string starts with one of libpq's keywords and `=`."""
_QUERY_KEY = re.compile(r"[?&]([^=&?#]*)=")
"""A query parameter's name, as written (libpq percent-decodes it: `pass%77ord` is `password`)."""
_QUERY_VALUE = re.compile(rf"(?:(?!&(?:{_KEYWORDS})=).)*", re.DOTALL)
"""A query's password: up to the next `&name=` naming one of libpq's parameters (an unencoded
`&` or `#` is kept in the span: libpq would read the rest as a broken parameter and quote it)."""
_SECRET_KEY = re.compile(_SECRET_KEYS, re.IGNORECASE)


def _query_passwords(db: str) -> list[tuple[int, int]]:
    """The spans of the values of every query parameter whose name, percent-decoded, is a
    password's (`?password=`, `?pass%77ord=`, `?%70assword=`, `?sslpassword=`)."""
    spans = []
    for key in _QUERY_KEY.finditer(db):
        if _SECRET_KEY.fullmatch(unquote(key.group(1)).strip()):
            value = _QUERY_VALUE.match(db, key.end())
            if value is not None:
                spans.append(value.span())
    return spans


_LOOSE_SCHEME = re.compile(r"\s*(?:[A-Za-z][A-Za-z0-9+.-]*)?:/*")


def _loose_userinfo_span(text: str) -> tuple[int, int] | None:
    """A userinfo-looking password in text that is not a URL (`postgresql:/u:secret@host/db`, a
    mistyped scheme read as a SQLite path): after a leading `scheme:` and its slashes, from the
    first `:` to the last `@`; with no `:` after it, from the first `:` (`user:secret@host`)."""
    at = text.rfind("@")
    if at < 0:
        return None
    scheme = _LOOSE_SCHEME.match(text)
    start = scheme.end() if scheme is not None else 0
    colon = text.find(":", start, at)
    if colon < 0 and scheme is not None and text[scheme.end() - 1] == ":":
        colon = scheme.end() - 1  # `user:secret@host`, no scheme: the "scheme" was the user
    return None if colon < 0 else (colon + 1, at)


_KEYWORD_PASSWORD = re.compile(
    rf"(?:^|\s)(?:{_SECRET_KEYS})\s*=\s*"
    r"('(?:[^'\\]|\\.)*(?:'|$)|\S+(?:\s+(?![A-Za-z_]+\s*=)\S+)*)",
    re.IGNORECASE | re.DOTALL,
)
"""A keyword DSN's password: quoted (to the closing quote, or to the end when there is none), or
unquoted up to the next `keyword=` (a space in it is kept in the span: libpq would read the rest
as a broken pair and quote it in its error)."""


_LOOSE_KEY = re.compile(r"([^\s=&?;,/'\"#:@()]+)\s*=\s*")
"""A `key=` anywhere in the text: the key is the run of characters before `=` up to a delimiter
of either form of connection string."""
_LOOSE_VALUE = re.compile(
    rf"'(?:[^'\\]|\\.)*(?:'|$)|(?:(?!&(?:{_KEYWORDS})\s*=|\s+[A-Za-z_]+\s*=).)*",
    re.IGNORECASE | re.DOTALL,
)
"""A loose pair's value: quoted, or up to the next `&keyword=` of a query or ` key=` pair."""
_SECRETISH = ("pass", "pasw", "pwd", "psw", "sword", "secret")
"""Pieces of a password's key, misspellings included (`pasword`, `paswd`, `pssword`): a key
holding one (`passfile` too) is masked; when in doubt, mask more."""
_TEXT_PAIR = re.compile(
    r"([^\s=&?;,/'\"#:@()]+)(\s*=\s*)(?!\*\*\*|'\.\.\.')('(?:[^'\\]|\\.)*'?|[^\s\"',;&)]+)"
)
"""A `key=value` in a message: the value quoted, or up to a quote, a space or a delimiter (not
one masked already, nor the `'...'` of the hint to quote a password)."""


def _secretish(key: str) -> bool:
    """True when `key`, percent-decoded, in lower case and without punctuation, names a
    password (`password+`, `pass+word`, `%20password`, `sslpassword`, `oauth_client_secret`)."""
    for _ in range(3):
        key = unquote(key)
    name = re.sub(r"[^a-z0-9]", "", key.lower())
    return any(part in name for part in _SECRETISH)


def _loose_passwords(db: str) -> list[tuple[int, int]]:
    """The spans of the values of every `key=value` in `db` whose key looks like a password's,
    wherever it stands (`/db;password=`, `?password+=`, `dbname=db;password=`)."""
    spans = []
    for key in _LOOSE_KEY.finditer(db):
        if _secretish(key.group(1)):
            value = _LOOSE_VALUE.match(db, key.end())
            if value is not None:
                spans.append((value.start(), len(db[: value.end()].rstrip())))
    return spans


def is_postgres(db: str) -> bool:
    """True for a PostgreSQL connection string; anything else is a SQLite path.

    A `postgresql://` or `postgres://` URL (in any case), or libpq keyword/value pairs
    (`host=... dbname=...`)."""
    return bool(_SCHEME.match(db) or _KEYWORD_DSN.match(db))


def connection_string(db: str) -> str:
    """`db` as libpq accepts it: a URL's scheme in lower case (libpq refuses `POSTGRESQL://`)."""
    found = _SCHEME.match(db)
    if found is None:
        return db
    return f"{found.group(1).lower()}://{db[found.end() :]}"


_URL = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*://")


def _is_url(db: str) -> bool:
    """True when `db` starts with a scheme (a keyword string may hold `://` in a password)."""
    return _URL.match(db) is not None


def _userinfo_span(uri: str) -> tuple[int, int] | None:
    """Where the password of a URL's userinfo starts and ends (end exclusive), or None."""
    start = uri.find("://")
    if start < 0 or not _is_url(uri):
        return None
    start += 3
    at = uri.rfind("@", start)
    if at < 0:
        return None
    colon = uri.find(":", start, at)
    if colon < 0:
        return None  # a user name alone: nothing secret
    return colon + 1, at


def _password_spans(db: str) -> list[tuple[int, int]]:
    """Every span of `db` that may be a password, merged, in order."""
    spans = [m.span(1) for m in _KEYWORD_PASSWORD.finditer(db)]
    userinfo = _userinfo_span(db) if _is_url(db) else _loose_userinfo_span(db)
    if userinfo is not None:
        spans.append(userinfo)
    spans += _query_passwords(db)
    spans += _loose_passwords(db)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _passwords(db: str) -> list[str]:
    """The passwords of `db` as written (possibly percent-encoded or quoted)."""
    return [db[start:end] for start, end in _password_spans(db)]


def password_of(uri: str) -> str | None:
    """The password of a URL's userinfo as written (possibly percent-encoded), or None."""
    span = _userinfo_span(uri)
    return None if span is None else uri[span[0] : span[1]]


def without_password(uri: str) -> str:
    """Any URL or keyword connection string with its passwords (if any) shown as `***`."""
    shown, last = [], 0
    for start, end in _password_spans(uri):
        shown += [uri[last:start], MASK]
        last = end
    return "".join([*shown, uri[last:]])


def redact(db: str) -> str:
    """`db` without a password, for messages and reports.

    A SQLite path is shown as it is unless it holds a userinfo-looking `user:password@`, a
    `password=` pair or a `?password=` parameter (a mistyped connection string is masked as
    one)."""
    return without_password(db)


def mask_password(text: str, uri: str) -> str:
    """`text` (a driver's error, say) with every password of `uri` masked wherever it appears.

    Each password is masked as written, percent-decoded and unquoted; then the value of any
    `key=value` in `text` whose key looks like a password's (the driver quoting a piece of the
    string in a form of its own)."""
    shown = set()
    for password in _passwords(uri):
        inner = password[1:].removesuffix("'") if password.startswith("'") else password
        shown |= {password, unquote(password), inner, re.sub(r"\\(.)", r"\1", inner)}
    for secret in sorted((s for s in shown if s), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return _TEXT_PAIR.sub(
        lambda m: f"{m.group(1)}{m.group(2)}{MASK}" if _secretish(m.group(1)) else m.group(0), text
    )


def mask_sources(text: str, *sources: str | None) -> str:
    """`text` with the passwords of every source masked (`mask_password` of each).

    The one masker for text that may quote a `--db`, `--from`, `--log` or `--base-url` value,
    or any other string a user gave that may be a connection string."""
    for source in sources:
        if source:
            text = mask_password(text, source)
    return text


_DELIMITERS = "@/?#"
"""Characters that end a URL's userinfo for a driver: unencoded in a password, a driver reads
the URL differently (libpq takes the host from after the first `@`) and quotes a piece of the
password as a host name in its error."""


def malformed_userinfo(uri: str) -> str | None:
    """The first unencoded delimiter in `uri`'s password, or None.

    `@`, `/`, `?` or `#` in the user part; `&` or `#` in a `password=` parameter."""
    password = password_of(uri)
    found = next((c for c in password or "" if c in _DELIMITERS), None)
    if found is None and _is_url(uri):
        query = (uri[start:end] for start, end in _query_passwords(uri))
        found = next((c for value in query for c in value if c in "&#"), None)
    return found


def _unquoted_space(db: str) -> bool:
    """True when a keyword DSN's unquoted password holds a space (libpq reads a broken pair)."""
    if _is_url(db):
        return False
    return any(not p.startswith("'") and any(c.isspace() for c in p) for p in _passwords(db))


def driver_error(text: str, uri: str) -> str:
    """A driver's error about `uri`, safe to show: the password masked.

    When the password is written so that the driver reads it differently (an unencoded delimiter
    in a URL, an unquoted space in a keyword string), not the driver's text at all (it may quote
    any piece of the password as a host, a database or a broken pair) but the hint to fix it."""
    delimiter = malformed_userinfo(uri)
    if delimiter is not None:
        return (
            f"the password holds an unencoded {delimiter!r}, so the driver reads the URL "
            f"differently; percent-encode the password ({delimiter!r} is "
            f"{quote(delimiter, safe='')})"
        )
    if _unquoted_space(uri):
        return "the password holds a space; quote it: password='...'"
    return mask_password(text, uri)


def shown_error(error: BaseException, limit: int = 300) -> str:
    """`Type: message` of `error`, safe to print.

    Secrets masked (`mask_secrets`), controls escaped (`printable`), at most `limit` characters
    of the message; an exception whose `__str__` raises is shown by its type alone."""
    try:
        message = str(error)
    except Exception:
        message = ""
    text = printable(mask_secrets(message))
    if len(text) > limit:
        text = f"{text[:limit]}..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
