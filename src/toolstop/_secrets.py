"""One masker for the secrets a tool's exception text may carry, before a model or a user sees it.

`mask_secrets(text)` replaces each secret it recognises with `***`:

- URLs of any scheme, whole (`postgresql://***`): their user, password, host and path are
  connection details; a user part with a space in its password (`scheme://u:pa ss@host`) is
  masked up to its last `@` on the line;
- `key=value`, `key: value`, JSON `"key": "value"` (also escaped, `\\"key\\": \\"value\\"`) pairs
  and XML `<key>value</key>` elements whose key names a secret (`password`,
  `PGPASSWORD`, `DB_PASSWORD`, `*_TOKEN`, `*_SECRET`, `api_key`, `AWS_SECRET_ACCESS_KEY`,
  `client_secret`, `credentials`, `cookie`, ...) or a connection detail (`user`, `host`, `port`,
  `dbname`): the value is masked, quoted or not;
- `Authorization:` header values and `Bearer` / `Basic` credentials;
- tokens by their shape: AWS access key ids (`AKIA...`, `ASIA...`), OpenAI / Anthropic (`sk-...`,
  `sk-proj-...`), Stripe (`sk_live_...`), GitHub (`ghp_...`, `github_pat_...`), GitLab
  (`glpat-...`), Slack (`xoxb-...`), Google API keys (`AIza...`), Hugging Face (`hf_...`), npm
  (`npm_...`), JSON Web Tokens (`eyJ...`);
- private key blocks (`-----BEGIN ... PRIVATE KEY-----` to its end);
- e-mail addresses, IP addresses, and the quoted server, user, host and database names of a
  driver's message.

Masking is idempotent (masking a masked text changes nothing) and never raises. Every pattern is
bounded, so a long text costs linear time.

Deliberately not handled: a secret with no recognisable key or shape (a bare password in free
text) is not found; raise exceptions whose messages are safe to show.
"""

from __future__ import annotations

import re

__all__ = ["mask_secrets"]

MASK = "***"

_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----.*?(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY"
    r"( BLOCK)?-----|\Z)",
    re.DOTALL,
)
_USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,30})://[^\n@]{0,256}:[^\n]{0,256}@")
"""A URL's user and password, to the last `@` on the line (a password may hold a space)."""
_URL = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,30})://[^\s'\"<>]*")
_AUTHORIZATION = re.compile(
    r"\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
    r"(?:(?:bearer|basic|digest|token|negotiate|apikey)\s+)?[^\s\"',;]{1,4096}",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,4096}", re.IGNORECASE)
_SECRET_NAME = (
    r"[A-Za-z0-9_.-]{0,40}?(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|"
    r"access[_-]?key|private[_-]?key|account[_-]?key|client[_-]?key|auth[_-]?key|credentials?|"
    r"cookie|session[_-]?id|signature)[A-Za-z0-9_.-]{0,40}"
    r"|user(?:name)?|host|hostaddr|port|dbname"
)
_PAIR = re.compile(
    rf"(?<![A-Za-z0-9_.-])((?:\\?[\"'])?)({_SECRET_NAME})\1(\s{{0,8}}[=:]\s{{0,8}})"
    r"(\\[\"'][^\n]{0,4096}?(?:\\[\"']|$)"
    r"|\"(?:[^\"\\\n]|\\.){0,4096}\"?|'(?:[^'\\\n]|\\.){0,4096}'?|[^\s,;)}\]\"']{1,4096})",
    re.IGNORECASE | re.MULTILINE,
)
"""A key naming a secret, `=` or `:`, and its value (double- or single-quoted, or bare); the
quotes may be escaped (`{\\"password\\": \\"...\\"}`, JSON inside a JSON string)."""
_XML = re.compile(
    rf"<({_SECRET_NAME})((?:\s[^<>]{{0,256}})?)>[^<]{{0,4096}}",
    re.IGNORECASE,
)
"""An XML element naming a secret and its text: `<password>...</password>`."""
_TOKENS = re.compile(
    r"\b(?:"
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}"
    r"|sk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]{16,4096}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{10,4096}"
    r"|gh[pousr]_[A-Za-z0-9]{20,4096}"
    r"|github_pat_[A-Za-z0-9_]{20,4096}"
    r"|glpat-[A-Za-z0-9_-]{20,4096}"
    r"|xox[abposre]-[A-Za-z0-9-]{10,4096}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|hf_[A-Za-z0-9]{30,4096}"
    r"|gsk_[A-Za-z0-9]{20,4096}"
    r"|xai-[A-Za-z0-9]{20,4096}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|eyJ[A-Za-z0-9_-]{4,4096}\.[A-Za-z0-9_-]{4,4096}\.[A-Za-z0-9_-]{0,4096}"
    r")"
)
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}")
_QUOTED_DETAIL = re.compile(
    r"\b(server at|user|host|database|role)(\s+)(\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}')",
    re.IGNORECASE,
)
_ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\[[0-9a-fA-F:]{2,45}\](?::\d+)?")


def _mask_once(text: str) -> str:
    text = _PRIVATE_KEY.sub("[private key]", text)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}://{MASK}@", text)
    text = _URL.sub(lambda m: f"{m.group(1)}://{MASK}", text)
    text = _AUTHORIZATION.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}{MASK}", text)
    text = _XML.sub(lambda m: f"<{m.group(1)}{m.group(2)}>{MASK}", text)
    text = _TOKENS.sub(MASK, text)
    text = _EMAIL.sub(MASK, text)
    text = _QUOTED_DETAIL.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return _ADDRESS.sub(MASK, text)


def mask_secrets(text: str) -> str:
    """`text` with every secret it recognises shown as `***` (see the module docstring).

    Applied until nothing changes (a masked secret can bring two pieces of text together that
    another pattern then recognises), so the result is a fixed point: masking it again changes
    nothing."""
    for _ in range(8):
        masked = _mask_once(text)
        if masked == text:
            return masked
        text = masked
    return text
