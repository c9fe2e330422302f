"""One masker for the secrets a tool's exception text may carry, before a model or a user sees it.

`mask_secrets(text)` replaces each secret it recognises with `***`:

- URLs of any scheme, whole (`postgresql://***`): their user, password, host and path are
  connection details; a user part with a space in its password (`scheme://u:pa ss@host`) is
  masked up to its last `@` on the line; `user:password@host` without a scheme, its password;
- `key=value`, `key: value`, JSON `"key": "value"` (also escaped, `\\"key\\": \\"value\\"`) pairs
  and XML `<key>value</key>` elements (a CDATA section in them too) whose key names a secret
  (`password`, `PGPASSWORD`, `DB_PASSWORD`, `pass`, `DB_PASS`, `*_PWD`, `*_TOKEN`, `*_SECRET`,
  `api_key`, `api-key`, `x-functions-key`, `Ocp-Apim-Subscription-Key`, an Azure SAS `sig`,
  `AWS_SECRET_ACCESS_KEY`, `client_secret`, `credentials`, `cookie`, ...) or a connection detail
  (`user`, `host`, `port`, `dbname`): the value is masked, quoted or not; a JSON (or Python)
  array or object value keeps its shape, brackets and keys, with every string and scalar in it
  masked (`{"password": [***, ***]}`, `{"api_key": {"value": ***}}`);
- the separators `=>` and `:=` too (`password => ...`); a misspelt password key (`pasword`,
  `pssword`); a command-line option naming a secret before a space (`--password ...`); a
  variable's name in capitals before a space (`PGPASSWORD ...`, `GITHUB_TOKEN ...`); a sentence
  naming one (`the password is ...`, not `password is incorrect`);
- a base64 run (16 characters or more) that decodes to printable text holding a secret, whole;
- `Authorization:` header values and `Bearer` / `Basic` credentials;
- tokens by their shape: AWS access key ids (`AKIA...`, `ASIA...`), OpenAI / Anthropic (`sk-...`,
  `sk-proj-...`), Stripe (`sk_live_...`), GitHub (`ghp_...`, `github_pat_...`), GitLab
  (`glpat-...`), Slack (`xoxb-...`), Google API keys (`AIza...`), Hugging Face (`hf_...`), npm
  (`npm_...`), JSON Web Tokens (`eyJ...`);
- private key blocks (`-----BEGIN ... PRIVATE KEY-----` to its end);
- e-mail addresses, IP addresses, and the quoted server, user, host and database names of a
  driver's message.

Encoding does not hide a secret: the text is also read decoded, HTML entities
(`password&#61;...`, `&quot;password&quot;: &quot;...`, `&lt;password&gt;...`, `Bearer&#32;...`,
nested `&amp;quot;` included), percent-encoding (`password%3D...`, `%253D`) and JSON or Python
escapes (`password\\u003d...`, `\\x3d`, escaped again: `\\\\u003d`), up to four levels; and
without format characters (zero-width spaces and joiners, soft hyphens, bidi controls:
`pass\\u200bword=...`), in NFKC (fullwidth `password=...`). When that reading finds a secret the
text as written does not show masked, the decoded text is returned, masked (what decodes to a
control or format character is kept as written); otherwise the text is kept as written.

Masking is idempotent (masking a masked text changes nothing) and never raises. Every pattern is
bounded, so a long text costs linear time.

Deliberately not handled: a secret with no recognisable key or shape (a bare password in free
text) is not found; raise exceptions whose messages are safe to show.
"""

from __future__ import annotations

import base64
import html
import re
import unicodedata
from urllib.parse import unquote

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
_BARE_USERINFO = re.compile(
    r"(?<![A-Za-z0-9._%+*-])([A-Za-z0-9._%+-]{1,64}):([^\s@:/'\"<>]{1,256})@(?=[A-Za-z0-9\[])"
)
"""`user:password@host` with no scheme (a connection string's user part on its own)."""
_AUTHORIZATION = re.compile(
    r"\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
    r"(?:(?:bearer|basic|digest|token|negotiate|apikey)\s+)?[^\s\"',;]{1,4096}",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,4096}", re.IGNORECASE)
_SECRET_NAME = (
    r"[A-Za-z0-9_.-]{0,40}?(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|"
    r"access[_-]?key|private[_-]?key|account[_-]?key|client[_-]?key|auth[_-]?key|"
    r"functions?[_-]?key|subscription[_-]?key|credentials?|"
    r"cookie|session[_-]?id|signature)[A-Za-z0-9_.-]{0,40}"
    r"|[A-Za-z0-9_.-]{0,40}?pa?s{1,2}w[o0]?r?d[A-Za-z0-9_.-]{0,40}"
    r"|(?:[A-Za-z0-9_.-]{0,40}?[_.-])?pass(?![A-Za-z])[A-Za-z0-9_.-]{0,40}"
    r"|sig|auth|user(?:name)?|host|hostaddr|port|dbname"
)
"""A key naming a secret: `pass` only as a word of its own (`pass`, `DB_PASS`, not `passed` or
`bypass`), `sig` only whole (an Azure SAS signature, not `signal`); a password's key misspelt
(`pasword`, `paswd`, `pssword`, `passw0rd`) too."""
_PAIR = re.compile(
    rf"(?<![A-Za-z0-9_.-])((?:\\?[\"'])?)({_SECRET_NAME})((?:\\?[\"'])?)"
    r"(\s{0,8}(?:==?>|->|:=|[=:])\s{0,8}|\t{1,8})"
    r"(\\[\"'][^\n]{0,4096}?(?:\\[\"']|$)"
    r"|[rRbBuUfF]{0,2}(?:\"\"\"[\s\S]{0,4096}?(?:\"\"\"|\Z)|'''[\s\S]{0,4096}?(?:'''|\Z))"
    r"|\"(?:[^\"\\\n]|\\.){0,4096}\"?|'(?:[^'\\\n]|\\.){0,4096}'?"
    r"|[rRbBuUfF]{1,2}(?:\"(?:[^\"\\\n]|\\.){0,4096}\"?|'(?:[^'\\\n]|\\.){0,4096}'?)"
    r"|(?:[A-Za-z_][\w.]{0,64})?\("
    r"|[^\s,;)}\]\"']{1,4096})",
    re.IGNORECASE | re.MULTILINE,
)
"""A key naming a secret (quoted or not, or only closed by a quote: `password": "..."`), `=`,
`:`, `=>` or `:=`, and its value (double- or single-quoted, or bare); the quotes may be escaped
(`{\\"password\\": \\"...\\"}`, JSON inside a JSON string). A Python repr's value is whole: a
prefixed or triple-quoted string (`b'...'`, `rb'...'`), a call or a tuple (`SecretStr('...')`,
`('...',)`, nested to any depth: `_balanced_end`). A value opening with `[` or `{` may be an
array or object (`_container`)."""
_VALUE = r"(\"[^\"\n]{0,4096}\"?|'[^'\n]{0,4096}'?|[^\s,;'\"]{1,4096})"
_FLAG = re.compile(
    rf"(?<![A-Za-z0-9_.-])(--?(?:{_SECRET_NAME}))(\s{{1,8}})(?![-\s=:]){_VALUE}", re.IGNORECASE
)
"""A command line's option naming a secret and its value after a space (`--password X`)."""
_ENV_NAME = (
    r"[A-Z0-9_]{0,40}(?:PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API_?KEY|ACCESS_KEY|PRIVATE_KEY)"
    r"[A-Z0-9_]{0,40}|[A-Z0-9_]{0,40}_PWD"
)
_ENV = re.compile(rf"(?<![A-Za-z0-9_.-])({_ENV_NAME})(\s{{1,8}})(?![-\s=:]){_VALUE}")
"""An environment variable's name naming a secret, in capitals, then its value after a space
(`PGPASSWORD X`, as `env` or a shell's error shows it)."""
_PROSE = re.compile(
    r"(?<![A-Za-z0-9_.-])((?:password|passwd|passphrase|pa?s{1,2}w[o0]?r?d|secret|token|"
    r"api[ _-]?key)(?:\s{1,8}(?:for|of)\s{1,8}[^\n.;:=]{1,40}?)?\s{1,8}(?:is|was)\s{1,8})"
    r"(?!(?:incorrect|invalid|wrong|required|missing|not|expired|empty|too|the|a|an|set|unset|"
    r"null|none|blank|correct|valid|being|already|no|changed|reset|disabled|enabled|locked|"
    r"needed|mandatory|in|for|very|revoked|undefined)\b)"
    rf"{_VALUE}",
    re.IGNORECASE,
)
"""A secret named in a sentence: `password is X`, `the token was X` (not `password is
incorrect`)."""
_CLIENT_FLAG = re.compile(
    r"(\b(?:mysql|mysqldump|mysqladmin|mariadb|sshpass)\b[^\n]{0,200}?\s-p)(\s?)([^\s-][^\s]{0,4096})"
)
"""A client's `-p` password option (`mysql -pX`, `sshpass -p X`)."""
_USER_FLAG = re.compile(r"((?:^|\s)(?:-u|--user)\s{1,8}[^\s:]{1,256}:)([^\s]{1,4096})")
"""`curl -u user:X` (`--user` too): the password after the colon."""
_APIKEY_WORD = re.compile(
    rf"(?<![A-Za-z0-9_.-])(api[_-]?key)(\s{{1,8}})(?!(?:is|was|for|of|and|or)\b)(?![-\s=:]){_VALUE}",
    re.IGNORECASE,
)
"""`apikey X`: an API key named, then its value after a space."""
_CALL = re.compile(r"(?:[A-Za-z_][\w.]{0,64})?\(")
"""A value that is a call or a tuple: masked to its closing parenthesis."""
_CONTAINER_START = re.compile(r"[\[{]\s{0,64}(?:\\?[\"'\[\]{}]|\*\*\*)")
"""An array or object whose first item is a string, an array, an object or a mask: read as one
even when its end is cut off."""
_FLAT_CONTAINER = re.compile(r"[\[{][^\[\]{}\n]{0,256}[\]}]")
"""Any other array or object is read as one only when it is flat, short and closed on its line
(`[a, b]`)."""
_CONTAINER_MAX = 4096
_XML = re.compile(
    rf"<({_SECRET_NAME})((?:\s[^<>]{{0,256}})?)>"
    r"(?:[^<]{0,64}<!\[CDATA\[(?:(?!\]\]>)[\s\S]){0,4096}(?:\]\]>)?){0,8}[^<]{0,4096}",
    re.IGNORECASE,
)
"""An XML element naming a secret and its text (CDATA sections included):
`<password>...</password>`, `<password><![CDATA[...]]></password>`."""
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


def _string_end(text: str, start: int, limit: int, escaped: bool) -> int:
    """Where the string literal opening at `start` ends (exclusive), or `limit` when it does not.

    Quoted by `"` or `'` (a backslash escapes the next character); with `escaped`, by `\\"` (JSON
    inside a JSON string: its own escaped quote is `\\\\\\"`)."""
    if escaped:
        at = start + 2
        while at < limit:
            if text[at] != "\\":
                at += 1
                continue
            run = at
            while run < limit and text[run] == "\\":
                run += 1
            if run < limit and text[run] == '"' and (run - at) % 4 == 1:
                return run + 1
            at = run + 1 if run < limit and text[run] == '"' else run
        return limit
    quote, at = text[start], start + 1
    while at < limit:
        if text[at] == "\\":
            at += 2
        elif text[at] == quote:
            return at + 1
        else:
            at += 1
    return limit


def _is_key(text: str, end: int, limit: int) -> bool:
    """True when the item ending at `end` is followed by `:` (an object's key)."""
    while end < limit and text[end].isspace():
        end += 1
    return end < limit and text[end] == ":"


def _container(text: str, start: int, escaped: bool) -> tuple[str, int] | None:
    """The array or object opening at `start` with every string and scalar in it masked (keys,
    brackets, commas and spaces kept), and where it ends; None when it is no container.

    Read for at most `_CONTAINER_MAX` characters. One cut off before its end is masked to there
    when its first item is a string, array, object or mask (`_CONTAINER_START`); any other is a
    container only when flat, short and closed (`_FLAT_CONTAINER`: the `[` of `token: [ at 3`
    is plain text)."""
    cut_off_too = _CONTAINER_START.match(text, start) is not None
    if not cut_off_too and _FLAT_CONTAINER.match(text, start) is None:
        return None
    limit = min(len(text), start + _CONTAINER_MAX)
    parts: list[str] = []
    depth, at = 0, start
    while at < limit:
        char = text[at]
        if char in "[{":
            depth += 1
            parts.append(char)
            at += 1
        elif char in "]}":
            depth -= 1
            parts.append(char)
            at += 1
            if depth == 0:
                return "".join(parts), at
        elif char in ",:" or char.isspace():
            parts.append(char)
            at += 1
        else:
            if text.startswith('\\"', at) if escaped else char in "\"'":
                end = _string_end(text, at, limit, escaped)
            else:
                end = at + 1
                while end < limit and not (
                    text[end] in "[]{},:\"'"
                    or text[end].isspace()
                    or (escaped and text.startswith('\\"', end))
                ):
                    end += 1
            parts.append(text[at:end] if _is_key(text, end, limit) else MASK)
            at = end
    return ("".join(parts), limit) if cut_off_too else None


def _balanced_end(text: str, start: int) -> int:
    """Where the parenthesis opening at `start` closes (exclusive), strings in it skipped; the
    end of the line, or `_CONTAINER_MAX` characters on, when it does not close before."""
    limit = min(len(text), start + _CONTAINER_MAX)
    depth, at = 0, start
    while at < limit and text[at] != "\n":
        char = text[at]
        if char in "\"'":
            at = _string_end(text, at, limit, escaped=False)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return at + 1
        at += 1
    return at


def _mask_pairs(text: str) -> str:
    """`text` with the value of every `_PAIR` masked: a whole array or object as `_container`."""
    parts, at = [], 0
    while (found := _PAIR.search(text, at)) is not None:
        value, end = MASK, found.end()
        call = _CALL.match(text, found.start(5))
        if call is not None and call.end() == found.end():  # the pattern stops at the `(`
            end = _balanced_end(text, call.end() - 1)
        elif found.group(5)[0] in "[{":
            container = _container(text, found.start(5), found.group(1).startswith("\\"))
            if container is not None:
                value, end = container
        parts += [text[at : found.start()], *found.group(1, 2, 3, 4), value]
        at = end
    parts.append(text[at:])
    return "".join(parts)


_BASE64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{16,4096}={0,2}(?![A-Za-z0-9+/=_-])")
"""A run that may be base64 (16 characters or more)."""


def _masked_base64(found: re.Match[str]) -> str:
    """`MASK` when the run decodes (base64, to printable ASCII) to a text holding a secret."""
    run = found.group()
    try:
        decoded = base64.b64decode(run + "=" * (-len(run) % 4), validate=True).decode("ascii")
    except ValueError:  # binascii.Error, UnicodeDecodeError
        return run
    if not decoded.isprintable() or _mask_once(decoded) == decoded:
        return run
    return MASK


def _mask_once(text: str) -> str:
    text = _PRIVATE_KEY.sub("[private key]", text)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}://{MASK}@", text)
    text = _URL.sub(lambda m: f"{m.group(1)}://{MASK}", text)
    text = _BARE_USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    text = _AUTHORIZATION.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _mask_pairs(text)
    text = _FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _ENV.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _PROSE.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _CLIENT_FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _USER_FLAG.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _APIKEY_WORD.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _BASE64.sub(_masked_base64, text)
    text = _XML.sub(lambda m: f"<{m.group(1)}{m.group(2)}>{MASK}", text)
    text = _TOKENS.sub(MASK, text)
    text = _EMAIL.sub(MASK, text)
    text = _QUOTED_DETAIL.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return _ADDRESS.sub(MASK, text)


def _fixed_point(text: str) -> str:
    """`_mask_once` applied until nothing changes (a masked secret can bring two pieces of text
    together that another pattern then recognises)."""
    for _ in range(8):
        masked = _mask_once(text)
        if masked == text:
            return masked
        text = masked
    return text


_AMPERSANDS = re.compile(r"&(?:amp;?|#0*38;?|#x0*26;?)+", re.IGNORECASE)
"""An encoded `&` encoded again any number of times (`&amp;amp;`): one `&`."""
_ENTITY = re.compile(r"&(?:#[0-9]{1,8};?|#[xX][0-9a-fA-F]{1,8};?|[A-Za-z][A-Za-z0-9]{1,31};?)")


_PERCENT = re.compile(r"(?:%[0-9a-fA-F]{2}){1,64}")
"""A run of percent-encoded bytes (`%3D`, the UTF-8 of one character or more)."""
_BACKSLASH = re.compile(r"\\{1,16}(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2}))")
"""A JSON or Python escape of one character (`\\u003d`, `\\x3d`), escaped again any number of
times (`\\\\u003d`)."""


def _unsafe(decoded: str) -> bool:
    """True when `decoded` holds a control or format character (kept encoded)."""
    return any(unicodedata.category(c).startswith("C") or c in "\u2028\u2029" for c in decoded)


def _decoded_entity(found: re.Match[str]) -> str:
    decoded = html.unescape(found.group())
    return found.group() if _unsafe(decoded) else decoded


def _decoded_percent(found: re.Match[str]) -> str:
    decoded = unquote(found.group(), errors="replace")
    return found.group() if _unsafe(decoded) or "\ufffd" in decoded else decoded


def _decoded_backslash(found: re.Match[str]) -> str:
    decoded = chr(int(found.group(1) or found.group(2), 16))
    return found.group() if _unsafe(decoded) or "\ud800" <= decoded <= "\udfff" else decoded


_FORMAT = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
"""A format character (Unicode category Cf: zero-width spaces and joiners, bidi controls, soft
hyphens), invisible: `pass\\u200bword` reads as `password`."""


def _normal(text: str) -> str:
    """`text` without format characters, in NFKC (a fullwidth `password=` is `password=`)."""
    return unicodedata.normalize("NFKC", _FORMAT.sub("", text))


def _decoded_once(text: str) -> str:
    """`text` with one level of HTML entities, percent-encoding and `\\u`/`\\x` escapes decoded,
    without format characters, in NFKC."""
    if "&" in text:
        text = _ENTITY.sub(_decoded_entity, _AMPERSANDS.sub("&", text))
    if "%" in text:
        text = _PERCENT.sub(_decoded_percent, text)
    if "\\" in text:
        text = _BACKSLASH.sub(_decoded_backslash, text)
    return _normal(text)


def _unescaped(text: str) -> str:
    """`text` decoded to four levels: HTML entities (`&amp;quot;` is `"`), percent-encoding
    (`password%3D`, `%253D`) and JSON or Python escapes (`password\\u003d`); what decodes to a
    control or format character is kept as written."""
    for _ in range(4):
        decoded = _decoded_once(text)
        if decoded == text:
            break
        text = decoded
    return text


def mask_secrets(text: str) -> str:
    """`text` with every secret it recognises shown as `***` (see the module docstring).

    The result is a fixed point: masking it again changes nothing. A text whose HTML entities
    hide a secret is returned decoded, masked; any other keeps its entities as written."""
    masked = _fixed_point(text)
    decoded = _unescaped(text)
    if decoded == text:
        return masked
    shown = _fixed_point(decoded)
    return masked if _unescaped(masked) == shown else shown
