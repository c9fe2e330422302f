"""The secret masker of tool exception texts (`toolstop._secrets`, used by
`toolstop.tools.tool_error_text`): each shape of secret is masked, in any surrounding text,
masking is idempotent, and it never raises."""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="needs hypothesis (dev extra)")
from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from toolstop._secrets import mask_secrets  # noqa: E402
from toolstop.tools import tool_error_text  # noqa: E402

# (text holding a secret, the secret: none of it may be shown)
KNOWN = [
    ("Authorization: Bearer eyJabc.def-ghi_jkl", "eyJabc.def-ghi_jkl"),
    ("authorization=Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("sent header bearer abcdefgh12345678", "abcdefgh12345678"),
    ("key AKIAIOSFODNN7EXAMPLE was refused", "AKIAIOSFODNN7EXAMPLE"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("openai: sk-abcdefghijklmnopqrstuvwx is invalid", "abcdefghijklmnopqrstuvwx"),
    ("sk-proj-AbCdEfGh1234567890_-xyz rejected", "AbCdEfGh1234567890"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG0123456789"),
    ('{"user": "bob", "password": "hun ter2"}', "hun ter2"),
    ("{'password': 'p\\'w'}", "p\\'w"),
    ("PGPASSWORD=pgsecret psql failed", "pgsecret"),
    ("DB_PASSWORD=dbsecret", "dbsecret"),
    ("SERVICE_TOKEN=tok123 APP_SECRET=shh456", "tok123"),
    ("SERVICE_TOKEN=tok123 APP_SECRET=shh456", "shh456"),
    ("api_key=k3y-value; retry", "k3y-value"),
    ("X-Api-Key: headerkey1", "headerkey1"),
    ("client_secret: cs-998877", "cs-998877"),
    ("mail alice.smith+tag@example.co.uk failed", "alice.smith+tag@example.co.uk"),
    ("postgresql://u:pa ss@db.internal/app failed", "pa ss"),
    ("postgresql://u:pa ss@db.internal/app failed", "ss@"),
    ("redis://:r3dis@cache:6379/0 down", "r3dis"),
    ("https://user:pw123@example.com/hook", "pw123"),
    ("slack xoxb-123456789012-abcdefghijkl", "abcdefghijkl"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "c2lnbmF0dXJl"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "MIIE"),
    ("-----BEGIN PRIVATE KEY----- MIIEvQIBADAN", "MIIEvQIBADAN"),
    ("google AIzaSyA1234567890abcdefghijklmnopqrstuv", "SyA1234567890"),
    ("stripe sk_live_abcdefghij123456", "abcdefghij123456"),
    ("gitlab glpat-abcdefghij0123456789", "abcdefghij0123456789"),
    ("hf hf_abcdefghijklmnopqrstuvwxyz012345", "abcdefghijklmnopqrstuvwxyz012345"),
    ("host=db.internal user=alice password=hunter2 dbname=app", "hunter2"),
    ('connection to server at "10.0.0.5", port 5432 failed for user "alice"', "alice"),
    ("connect 10.0.0.5:5432 refused", "10.0.0.5"),
    ('body: {\\"password\\": \\"hunter2XYZ\\"}', "hunter2XYZ"),  # JSON inside a string
    ('{\\"db_password\\": \\"hun ter2\\", \\"a\\": 1}', "hun ter2"),
    ("<password>hunter2XYZ</password>", "hunter2XYZ"),
    ('<Credentials kind="x">hunter 2XYZ</Credentials>', "hunter 2XYZ"),
    # arrays and objects under a secret's key
    ('{"password": ["hunter2XYZ"]}', "hunter2XYZ"),
    ('{"api_key": {"value": "abc123XYZ"}}', "abc123XYZ"),
    ('"token": ["first1XYZ", "second2XYZ"]', "second2XYZ"),
    ('{\\"password\\": [\\"hunter2XYZ\\"]}', "hunter2XYZ"),
    ("{'password': ['hunter2XYZ']}", "hunter2XYZ"),
    ('{"password": ["hun]ter2XYZ"]}', "ter2XYZ"),
    ('{"secret": {"a": [1, {"b": "deep2XYZ"}]}}', "deep2XYZ"),
    ("password: [hunter2XYZ, hunter3XYZ]", "hunter3XYZ"),
    ('{"password": ["hunter2XYZ", "cut off', "cut off"),
    # HTML entities
    ("password&#61;hunter2XYZ", "hunter2XYZ"),
    ("password&#x3d;hunter2XYZ", "hunter2XYZ"),
    ("password&quot;: &quot;hunter2XYZ&quot;", "hunter2XYZ"),
    ("&quot;password&quot;:&quot;hunter2XYZ&quot;", "hunter2XYZ"),
    ("&lt;password&gt;hunter2XYZ&lt;/password&gt;", "hunter2XYZ"),
    ("Authorization: Bearer&#32;abcdefgh12345678", "abcdefgh12345678"),
    ("Authorization&#58;&nbsp;Bearer abcdefgh12345678", "abcdefgh12345678"),
    ("password&amp;amp;#61;hunter2XYZ", "hunter2XYZ"),  # encoded twice
    # XML CDATA
    ("<password><![CDATA[hunter2XYZ]]></password>", "hunter2XYZ"),
    ("<password> <![CDATA[hun<ter2XYZ]]></password>", "ter2XYZ"),
    ("<db_secret><![CDATA[a]]><![CDATA[hunter2XYZ]]></db_secret>", "hunter2XYZ"),
    ("&lt;password&gt;&lt;![CDATA[hunter2XYZ]]&gt;&lt;/password&gt;", "hunter2XYZ"),
    # Python reprs: prefixed strings, wrappers, tuples
    ("{'password': b'hunter2XYZ'}", "hunter2XYZ"),
    ("{'password': rb'hunter2XYZ'}", "hunter2XYZ"),
    ("{'host': u'db2XYZ.internal'}", "db2XYZ"),
    ("{'password': SecretStr('hunter2XYZ')}", "hunter2XYZ"),
    ("{'password': SecretBytes(b'hunter2XYZ')}", "hunter2XYZ"),
    ("{'password': ('hunter2XYZ',)}", "hunter2XYZ"),
    ("password=bytearray(b'hunter2XYZ')", "hunter2XYZ"),
    ("{'password': ((('hunter2XYZ',),),)}", "hunter2XYZ"),
    ("{'password': SecretStr(')hunter2XYZ')}", "hunter2XYZ"),
    ("{'password': '''hunter2XYZ'''}", "hunter2XYZ"),
    ('{"password": """first\nhunter2XYZ"""}', "hunter2XYZ"),
    # keys the masker once missed (issue 48), and their siblings
    ("DB_PASS=hunter2XYZ", "hunter2XYZ"),
    ('{"pass": "hunter2XYZ"}', "hunter2XYZ"),
    ("MYSQL_PWD=hunter2XYZ", "hunter2XYZ"),
    ("passwd: hunter2XYZ", "hunter2XYZ"),
    ("secret_key=hunter2XYZ", "hunter2XYZ"),
    ("api-key: hunter2XYZ", "hunter2XYZ"),
    ("x-functions-key: hunter2XYZ", "hunter2XYZ"),
    ("Ocp-Apim-Subscription-Key: hunter2XYZ", "hunter2XYZ"),
    ("GET /c/b?sv=2022-11-02&sr=b&sig=hunter2XYZ%2Fab%3D", "hunter2XYZ"),
    ("connect admin:hunter2XYZ@db.internal:5432/app", "hunter2XYZ"),
    # encoded forms: percent-encoding (twice too) and JSON or Python escapes
    ("password%3Dhunter2XYZ", "hunter2XYZ"),
    ("password%253Dhunter2XYZ", "hunter2XYZ"),
    ("%22password%22%3A%22hunter2XYZ%22", "hunter2XYZ"),
    ("password\\u003dhunter2XYZ", "hunter2XYZ"),
    ("\\u0022password\\u0022: \\u0022hunter2XYZ\\u0022", "hunter2XYZ"),
    ("password\\x3dhunter2XYZ", "hunter2XYZ"),
    ("api&#95;key%3Dhunter2XYZ", "hunter2XYZ"),
    # N6: other separators, a flag or a variable before a space, invisible or wide characters
    # in the key, an escape escaped again, a misspelt key, prose, base64
    ("password => hunter2XYZ", "hunter2XYZ"),
    # a second review's variants
    ("password\thunter2TAB", "hunter2TAB"),
    ("password ==> hunter2ARR", "hunter2ARR"),
    ("password -> hunter2DASH", "hunter2DASH"),
    ("sshpass -p hunter2SSH ssh host", "hunter2SSH"),
    ("mysql -phunter2MY -uroot", "hunter2MY"),
    ("curl -u admin:hunter2CURL https://api", "hunter2CURL"),
    ("auth=hunter2AUTH", "hunter2AUTH"),
    ("apikey hunter2KEY", "hunter2KEY"),
    ("the password for the db is hunter2PROSE", "hunter2PROSE"),
    ("password := hunter2XYZ", "hunter2XYZ"),
    ("mysql --password hunter2XYZ -u root", "hunter2XYZ"),
    ("--api-key 'hunter2XYZ'", "hunter2XYZ"),
    ("PGPASSWORD hunter2XYZ psql", "hunter2XYZ"),
    ("GITHUB_TOKEN hunter2XYZ", "hunter2XYZ"),
    ("pass\u200bword=hunter2XYZ", "hunter2XYZ"),
    ("pass\u00adword=hunter2XYZ", "hunter2XYZ"),
    ("\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44\uff1dhunter2XYZ", "hunter2XYZ"),
    ("password\\\\u003dhunter2XYZ", "hunter2XYZ"),
    ("password\\\\\\\\u003dhunter2XYZ", "hunter2XYZ"),
    ("pasword=hunter2XYZ", "hunter2XYZ"),
    ("pssword: hunter2XYZ", "hunter2XYZ"),
    ("passw0rd=hunter2XYZ", "hunter2XYZ"),
    ("the password is hunter2XYZ, use it", "hunter2XYZ"),
    ("your API key was hunter2XYZ", "hunter2XYZ"),
    ("cGFzc3dvcmQ9aHVudGVyMlhZWg== was sent", "aHVudGVyMlhZWg"),
    ("cGFzc3dvcmQ9aHVudGVyMlhZWg== was sent", "cGFzc3dvcmQ9"),
]


@pytest.mark.parametrize(("text", "secret"), KNOWN)
def test_each_shape_of_secret_is_masked(text: str, secret: str) -> None:
    masked = mask_secrets(text)
    assert secret not in masked
    assert "***" in masked or "[private key]" in masked


@pytest.mark.parametrize(
    "text",
    [
        "token expired",
        'duplicate key value violates unique constraint "users_pkey"',
        "Key (id)=(5) already exists",
        "division by zero",
        "the basic plan has no access to this",
        "Unexpected token [ in JSON at position 0",
        "expected [1, 2], got {}",
        "AT&amp;T said &lt;b&gt;no&lt;/b&gt; &#8212; try later",
        "the bus(es) ran late",
        "12 passed: 3 failed, bypass=1, signal=2, compass: north",
        "100% done, 50%3 left; see \\n and \\u00e9",
        "retry in 10:30 minutes",
        "password is incorrect",
        "the token was revoked",
        "run with --verbose --dry-run",
        "\uff21\uff22\uff23 \uff46\uff55\uff4c\uff4c text\u200b kept",
        "aGVsbG8gd29ybGQgaGVsbG8gd29ybGQ=",  # base64 of no secret
    ],
)
def test_ordinary_error_texts_are_kept(text: str) -> None:
    assert mask_secrets(text) == text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('{"password": ["a", "b"], "ok": 1}', '{"password": [***, ***], "ok": 1}'),
        (
            '{"api_key": {"value": "abc", "n": [1, null]}}',
            '{"api_key": {"value": ***, "n": [***, ***]}}',
        ),
        ('{\\"token\\": {\\"id\\": \\"x\\"}}', '{\\"token\\": {\\"id\\": ***}}'),
        ("token: [ at 3", "token: *** at 3"),  # no container: the bracket alone is masked
        # an entity hides nothing: the text keeps its entities, masked as written
        ("AT&amp;T: api_key=abc", "AT&amp;T: api_key=***"),
        # an entity hides a secret: the text is shown decoded, masked
        ("AT&amp;T: api_key&#61;abc", "AT&T: api_key=***"),
        ("<password><![CDATA[a]]></password> ok", "<password>***</password> ok"),
        ("{'password': b'x', 'n': 1}", "{'password': ***, 'n': 1}"),
        ("{'password': SecretStr('x'), 'n': 1}", "{'password': ***, 'n': 1}"),
        ("{'password': ((('x',),),), 'n': 1}", "{'password': ***, 'n': 1}"),
    ],
)
def test_a_masked_text_keeps_its_shape(text: str, shown: str) -> None:
    assert mask_secrets(text) == shown


def test_an_entity_decoding_to_a_control_character_is_not_decoded() -> None:
    masked = mask_secrets("x &#x1b;[2J &#8238; password&#61;hunter2XYZ")
    assert "hunter2XYZ" not in masked
    assert "\x1b" not in masked
    assert "&#8238;" in masked  # the right-to-left override stays an entity


# Secret values from an alphabet and length random text is unlikely to hold by chance.
VALUE = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ0123456789", min_size=20, max_size=40)
TEXT = st.text(max_size=80)


def _embedded(value: str) -> st.SearchStrategy[str]:
    return st.sampled_from(
        [
            f"Authorization: Bearer {value}",
            f"AKIA{value[:16]}",
            f"AWS_SECRET_ACCESS_KEY={value}",
            f"sk-proj-{value}",
            f"sk-{value}",
            f"ghp_{value}",
            f"github_pat_{value}",
            f'{{"password": "{value}"}}',
            f'{{\\"password\\": \\"{value}\\"}}',
            f"<password>{value}</password>",
            f"<db_secret id='1'>{value[:6]} {value[6:]}</db_secret>",
            f"PGPASSWORD={value}",
            f"DB_PASSWORD='{value}'",
            f"SOME_TOKEN={value}",
            f"MY_SECRET: {value}",
            f"api_key={value}",
            f"{value}@example.com",
            f"postgresql://u:{value[:5]} {value[5:]}@h/db",
            f"ftp://me:{value}@files.example",
            f"xoxb-{value}",
            f"eyJ{value}.eyJ{value}.{value}",
            f"AIza{(value * 2)[:35]}",
            f"-----BEGIN EC PRIVATE KEY-----\n{value}\n-----END EC PRIVATE KEY-----",
            # arrays and objects under a secret's key
            f'{{"password": ["{value}"]}}',
            f'{{"password": ["x", "{value[:6]} {value[6:]}"], "n": 1}}',
            f'{{"api_key": {{"value": "{value}"}}}}',
            f'"token": [{{"id": 1, "v": "{value}"}}]',
            f'{{\\"db_secret\\": [\\"{value}\\"]}}',
            f"{{'password': ['{value}']}}",
            f"password: [{value}, {value}]",
            f'{{"password": ["{value}"',  # cut off
            # HTML entities
            f"password&#61;{value}",
            f"password&#x3D;{value}",
            f"password&quot;: &quot;{value}&quot;",
            f"&quot;api_key&quot;:&quot;{value}&quot;",
            f"&lt;password&gt;{value}&lt;/password&gt;",
            f"Authorization: Bearer&#32;{value}",
            f"Authorization&#58; Bearer&nbsp;{value}",
            f"PGPASSWORD&amp;#61;{value}",
            # XML CDATA
            f"<password><![CDATA[{value}]]></password>",
            f"<password><![CDATA[{value[:6]}<{value[6:]}]]></password>",
            f"&lt;password&gt;&lt;![CDATA[{value}]]&gt;&lt;/password&gt;",
            # keys once missed, and encoded forms
            f"DB_PASS={value}",
            f'{{"pass": "{value}"}}',
            f"APP_PWD={value}",
            f"x-functions-key: {value}",
            f"Ocp-Apim-Subscription-Key: {value}",
            f"sv=2022-11-02&sig={value}",
            f"admin:{value}@db.internal",
            f"password%3D{value}",
            f"password%253D{value}",
            f"password\\u003d{value}",
            f"%22password%22%3A%20%22{value}%22",
        ]
    )


@settings(max_examples=500, deadline=None)
@given(data=st.data(), value=VALUE, before=TEXT, after=TEXT)
def test_a_secret_in_random_text_is_always_masked(
    data: st.DataObject, value: str, before: str, after: str
) -> None:
    secret = data.draw(_embedded(value))
    shown = value if "AKIA" not in secret else secret
    if "AIza" in secret:
        shown = secret
    pieces = [shown[start : start + 8] for start in range(len(shown) - 7)]
    assume(not any(piece in before + after for piece in pieces))
    masked = mask_secrets(f"{before} {secret} {after}")
    # no piece of the secret long enough to matter is shown
    for piece in pieces:
        assert piece not in masked, (secret, masked)


@settings(max_examples=1000, deadline=None)
@given(text=st.text(max_size=300))
def test_masking_is_idempotent_and_never_raises(text: str) -> None:
    once = mask_secrets(text)
    assert mask_secrets(once) == once


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(
        st.sampled_from(
            [
                "password=",
                "://",
                "@",
                ":",
                " ",
                '"',
                "'",
                "AKIA",
                "sk-",
                "Bearer ",
                "eyJ",
                ".",
                "-----BEGIN PRIVATE KEY-----",
                "\n",
                "x" * 20,
                "10.0.0.1",
                '"token": ',
                "[",
                "]",
                "{",
                "}",
                ",",
                "\\",
                '\\"',
                "&#61;",
                "&quot;",
                "&lt;",
                "&gt;",
                "&amp;",
                "&#x1b;",
                "<password>",
                "<![CDATA[",
                "]]>",
                "%3D",
                "%25",
                "%0A",
                "\\u003d",
                "\\u0022",
                "DB_PASS",
                "sig=",
                "u:p@",
            ]
        ),
        max_size=30,
    )
)
def test_masking_secret_shaped_noise_is_idempotent(pieces: list[str]) -> None:
    text = "".join(pieces)
    once = mask_secrets(text)
    assert mask_secrets(once) == once


def test_a_long_text_is_masked_in_bounded_time() -> None:
    # a quadratic pattern would take minutes here; the per-test timeout is the hang guard
    for text in [
        "a." * 200_000,
        "a" * 400_000,
        "x@" * 200_000,
        "password=" * 50_000,
        "password: [" * 40_000,  # a container that never closes, at every pair
        "password: [[]" * 40_000,
        '{"password": [' + '"a", ' * 80_000,
        "&amp;" * 80_000,
        "password&#61;x " * 30_000,
        "<password><![CDATA[" * 20_000,
        "u:p@" * 50_000,  # user:password@host without a scheme, at every position
        "a" * 200_000 + ":" + "b" * 200_000 + "@h",
        "%3D" * 60_000,  # percent-encoding, decoded to four levels
        "%25" * 60_000,
        "password%3Dx " * 15_000,
        "\\u003d" * 30_000,
        "DB_PASS=" * 50_000,
        "sig=" * 100_000,
        "password => " * 40_000,
        "password ==> " * 40_000,
        "password\t" * 40_000,
        "mysql -p" * 40_000,
        "mysql " + "x " * 100_000,
        "curl -u a:" * 40_000,
        "apikey " * 40_000,
        "the password for " + "x " * 100_000,
        "--password " * 40_000,
        "PGPASSWORD " * 40_000,
        "A_" * 40 + "B" * 200_000,
        "password is " * 40_000,
        "pass\u200bword=x " * 20_000,
        "\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44\uff1d" * 30_000,
        "\\" * 200_000 + "u003d",
        "\\\\u003d" * 30_000,
        "QUFB" * 100_000,  # one long base64 run
        "cGFzc3dvcmQ9eA== " * 20_000,  # base64 of password=x, at every word
    ]:
        mask_secrets(text)


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_an_exception_whose_str_raises_is_shown_by_its_type() -> None:
    assert tool_error_text(Unprintable()) == "Error: Unprintable"


def test_a_secret_past_the_read_limit_is_not_shown_in_pieces() -> None:
    error = ValueError("x" * 16_380 + " password=hunter2hunter2")
    assert "hunter2" not in tool_error_text(error)
    assert tool_error_text(error).startswith("Error: ValueError: xxx")


@pytest.mark.parametrize(("text", "secret"), [(t, s) for t, s in KNOWN if "\n" not in t])
def test_the_models_error_text_shows_no_secret(text: str, secret: str) -> None:
    assert secret not in tool_error_text(RuntimeError(text))
