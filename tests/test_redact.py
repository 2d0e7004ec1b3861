from __future__ import annotations

import time

import pytest

from pipeline import redact as redact_mod
from pipeline.models import Chunk, Message, Session, ToolCall
from pipeline.redact import RULES, redact, redact_chunk, redact_full, redact_message, redact_session
from tests.secrets_corpus import ALL_SECRETS, BENIGN, MORE_BENIGN, MORE_SECRETS, SECRETS


@pytest.mark.parametrize("s", SECRETS, ids=[f"{i}-{s.kind}" for i, s in enumerate(SECRETS)])
def test_every_secret_disappears(s):
    out = redact(s.context)
    assert s.secret not in out
    assert "[REDACTED:" in out
    if s.kind:
        assert f"[REDACTED:{s.kind}]" in out


@pytest.mark.parametrize("text", BENIGN)
def test_ordinary_text_survives(text):
    assert redact(text) == text


def test_idempotent_and_context_kept():
    for s in SECRETS:
        once = redact(s.context)
        assert redact(once) == once
    out = redact("DATABASE_URL is postgres://app:pg-Pa55word@db.internal:5432/prod")
    assert "postgres://app:" in out and "@db.internal:5432/prod" in out


def test_a_secret_a_reply_quotes_as_code_after_its_name():
    """A reply's Markdown quotes the value it set: "the new secret: `n/Cou…=`", "the password is `…`" (a JWT secret
    reached a note on a new blind set). A name's own mention ("stored in `.env`") and placeholders stay."""
    jwt = "n/Cou2yd6rzNZAnEFzUJESfMhGRoF8G9RY3s495khMg="
    assert jwt not in redact(f"Updated `.env` file with the new secret: `{jwt}`")
    assert "hunter2Xy9" not in redact("the password is `hunter2Xy9`")
    assert "abc123def456ghi789jkl" not in redact("token: `abc123def456ghi789jkl`")
    for text in ("the secret is stored in `.env`", "api_key: `os.environ['KEY']`", "secret: `<your-secret>`",
                 "the password is required", "the token is `null`"):
        assert redact(text) == text, text


def test_all_secrets_in_one_blob():
    blob = "\n".join(s.context for s in SECRETS)
    out = redact(blob)
    for s in SECRETS:
        assert s.secret not in out


def test_json_escaped_inside_string():
    raw = '{"output": "{\\"password\\": \\"hunter22\\", \\"token\\": \\"a1b2c3d4e5f6g7h8i9j0\\"}"}'
    out = redact(raw)
    assert "hunter22" not in out and "a1b2c3d4e5f6g7h8i9j0" not in out


def test_length_changing_lowercase_falls_back_to_ignorecase():
    # 'İ'.lower() is two code points, so the lowered text no longer lines up with the original.
    text = "İstanbul deploy: PASSWORD: Sup3rS3cret and Authorization: Bearer abcdefgh12345678"
    out = redact(text)
    assert "Sup3rS3cret" not in out and "abcdefgh12345678" not in out
    assert out.startswith("İstanbul deploy")


def test_unterminated_private_key_masks_to_end():
    text = "key:\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oHBUqJ0fh5Az"
    assert redact(text) == "key:\n[REDACTED:PRIVATE_KEY]"


def test_empty_and_none_like():
    assert redact("") == ""
    assert redact("password=") == "password="
    assert redact('{"password": ""}') == '{"password": ""}'


def test_big_text_is_fast():
    base = "\n".join(BENIGN) + "\n"
    big = base * (10_000_000 // len(base))
    big += SECRETS[0].context
    t = time.perf_counter()
    out = redact(big)
    elapsed = time.perf_counter() - t
    assert SECRETS[0].secret not in out
    assert len(out) < len(big)
    assert elapsed < 10, f"10 MB took {elapsed:.1f}s"


def test_rules_are_precompiled():
    assert all(hasattr(r.pattern, "finditer") for r in RULES)


def _session() -> Session:
    secret = SECRETS[0].secret
    return Session(
        id="s1",
        source="cli",
        title=f"debug {secret}",
        cwd="/home/ada/token=abcdef1234567890abcdef",  # paths are never rewritten
        messages=(
            Message(role="user", content=f"my key is {secret}"),
            Message(
                role="assistant",
                content="ok",
                reasoning="the user pasted password=hunter2 earlier",
                tool_calls=(
                    ToolCall(
                        id="c1",
                        name="terminal",
                        arguments={
                            "command": "curl -H 'Authorization: Bearer Zm9vYmFyYmF6cXV4MTIz'",
                            "env": {"password": "pw-1"},
                        },
                    ),
                    ToolCall(id="c2", name="write_file", arguments='{"api_key": "raw-string-args-12345"'),
                ),
            ),
            Message(role="tool", content="total 0", tool_call_id="c1"),
            Message(
                role="system",
                content="summary",
                is_carrier=True,
                carrier_summary="used ghp_4Tq9Lm2Xv8Rb6Nc1Zs7Kd3Wf5Hj0Gp9Ya2Ue",
            ),
        ),
    )


def test_redact_session_covers_every_text_field():
    s = _session()
    r = redact_session(s)
    dumped = r.model_dump_json()
    for needle in (
        SECRETS[0].secret,
        "hunter2",
        "Zm9vYmFyYmF6cXV4MTIz",
        "pw-1",
        "raw-string-args-12345",
        "ghp_4Tq9",
    ):
        assert needle not in dumped
    assert r.cwd == s.cwd
    assert r.messages[2] is s.messages[2]  # untouched messages are not copied
    assert r.messages[1].tool_calls[0].arguments["env"] == {"password": "[REDACTED:PASSWORD]"}


def test_redact_message_unchanged_is_same_object():
    m = Message(role="user", content="nothing secret here")
    assert redact_message(m) is m


def test_redact_chunk_checkpoint():
    c = Chunk(
        session_id="s1",
        generation=1,
        messages=(Message(role="user", content="password: hunter2"),),
        checkpoint="## Critical Context\nAPI key sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ",
    )
    r = redact_chunk(c)
    assert "hunter2" not in r.messages[0].content
    assert "sk-abcdef" not in (r.checkpoint or "")


def _talk(*texts: str) -> Session:
    return Session(id="s-echo", source="cli", started_at="2026-01-20T08:00:00Z",
                   messages=tuple(Message(role="user" if i % 2 == 0 else "assistant", content=t)
                                  for i, t in enumerate(texts)))


def test_a_secret_masked_once_is_masked_wherever_the_session_repeats_it():
    """The user pastes a password alone; the reply labels it and builds a URL from its encoded form."""
    s = _talk("z?8yDzGUiurAM7! 转译字符",
              "密码 `z?8yDzGUiurAM7!` 的 URL 编码结果：z%3F8yDzGUiurAM7%21",
              "写入 .env：DATABASE_URL=postgresql://postgres:z%3F8yDzGUiurAM7%21@db.example.supabase.co:5432/postgres")
    found: dict[str, str] = {}
    r = redact_session(s, found)
    dumped = r.model_dump_json()
    assert "8yDzGUiurAM7" not in dumped
    assert r.messages[0].content.endswith(" 转译字符") and "[REDACTED:" in r.messages[0].content
    assert "z%3F8yDzGUiurAM7%21" in found  # handed on to the session's chunks
    assert redact_session(r) == r  # idempotent


def test_an_echo_in_another_chunk_is_masked_with_what_the_session_found():
    s = _talk("password: hunter2-Prod!", "ok", "later I typed hunter2-Prod! into the prompt by mistake")
    found: dict[str, str] = {}
    redact_session(s, found)
    tail = Chunk(session_id="s-echo", generation=2, messages=(s.messages[2],))
    assert "hunter2" in redact_chunk(tail).messages[0].content  # alone, the chunk shows no label
    assert "hunter2" not in redact_chunk(tail, found).messages[0].content


def test_echoes_spare_words_names_and_paths():
    """Only values no prose would hold by chance are echoed: not a plain word, a variable name or a path."""
    s = _talk("password: postgres", "api_key=OPENAI_API_KEY", "secret: /home/ada/.ssh/id_rsa",
              "sessionToken: readCookieValue(requestHeaders)",
              "Use postgres with OPENAI_API_KEY set; the key file is /home/ada/.ssh/id_rsa; "
              "const t = readCookieValue(requestHeaders)")
    r = redact_session(s)
    assert r.messages[4].content == s.messages[4].content


def test_a_firmware_password_in_a_macro_is_masked_and_so_is_its_bare_echo():
    """An ESP32 session defined ``#define WIFI_PASS "Romacapitale"`` and the user had typed "MGTS_145 / Romacapitale" into
    the chat: the macro was not read as a password, and a letters-only value was never echoed, so the note quoted it.
    A macro or a string variable named for a secret holds one; a long letters-only password is masked where it recurs
    (a short one, "postgres", is too often the word itself: ``test_echoes_spare_words_names_and_paths``)."""
    for code, kind in (('#define WIFI_PASS   "Romacapitale"', "PASSWORD"), ('#define MQTT_PASSWORD "hunter2x"', "PASSWORD"),
                       ('const char* wifi_pass = "Romacapitale";', "PASSWORD"),
                       ('#define BOT_TOKEN "123456:ABCdefGhIjklmnOPQrs"', "TOKEN")):
        assert f"[REDACTED:{kind}]" in redact(code), code
    for code in ("#define PASS_LEN 8", '#define API_KEY "abcd"', 'wifi_pass = ""', '#define PASSIVE_MODE "on"'):
        assert redact(code) == code
    s = _talk("MGTS_145 / Romacapitale", "ok", '#define WIFI_SSID "MGTS_145"\n#define WIFI_PASS   "Romacapitale"')
    r = redact_session(s)
    assert "Romacapitale" not in r.messages[0].content and "MGTS_145 /" in r.messages[0].content


# --------------------------------------------------------------------------- issue 16: more formats, one pass


@pytest.mark.parametrize("s", MORE_SECRETS, ids=[f"{i}-{s.kind}" for i, s in enumerate(MORE_SECRETS)])
def test_more_formats_disappear(s):
    out = redact(s.context)
    assert s.secret not in out
    if s.kind:
        assert f"[REDACTED:{s.kind}]" in out
    assert redact(out) == out


@pytest.mark.parametrize("text", MORE_BENIGN)
def test_newer_rules_leave_ordinary_text_alone(text):
    assert redact(text) == text


def test_the_corpus_covers_fifty_formats():
    assert len({(s.kind, s.secret[:4]) for s in ALL_SECRETS}) >= 50


def test_a_second_label_is_not_the_value():
    assert redact("credential: token: f16f3a9b2c4d5e6f7a8b9c0d1e2f3a4b") == "credential: token: [REDACTED:TOKEN]"
    assert "S3cr3t" not in redact("password: passwd=S3cr3t!x")
    assert redact("password=abc123==") == "password=[REDACTED:PASSWORD]"  # base64 padding is a value


def test_one_pass_screen_agrees_with_running_every_rule():
    """The RE2 set must flag every rule that can fire: with and without it, the same output."""
    texts = [s.context for s in ALL_SECRETS] + list(BENIGN + MORE_BENIGN)
    texts += [a.context + "\n" + b for a, b in zip(ALL_SECRETS, [*BENIGN, *MORE_BENIGN] * 5, strict=False)]
    assert redact_mod._SCREEN is not None, "google-re2 is a dependency: the screen must be on"
    for text in texts:
        assert redact(text) == redact_full(text), text
    assert all(redact_mod.flagged(b) == () or redact(b) == b for b in BENIGN)


def test_screen_holds_on_a_long_random_text():
    """A lazy DFA that ran out of memory would flag nothing: 4 MB of token soup must not get there."""
    import random
    import string

    rnd = random.Random(16)
    soup = "".join(rnd.choice(string.ascii_letters + string.digits + "+/=_-.: \n") for _ in range(4_000_000))
    text = soup + "\n" + MORE_SECRETS[4].context + "\n" + soup[:1000]
    assert MORE_SECRETS[4].secret not in redact(text)


def test_no_secret_in_any_recorded_request_body():
    """Every cassette (tests and evals): no corpus secret in a body, and today's rules leave each body
    as recorded (a rule that changed one would make its replay miss)."""
    import json as _json
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parent.parent
    files = sorted([*root.glob("tests/cassettes/**/*.yaml"), *root.glob("evals/cassettes/**/*.yaml")])
    assert len(files) >= 20
    bodies = 0
    for f in files:
        for inter in (yaml.safe_load(f.read_text("utf-8")) or {}).get("interactions", []):
            body = inter["request"].get("body")
            body = body.get("string") if isinstance(body, dict) else body
            if not body:
                continue
            bodies += 1
            text = body if isinstance(body, str) else body.decode("utf-8", "replace")
            for s in ALL_SECRETS:
                assert s.secret not in text and _json.dumps(s.secret)[1:-1] not in text, (f.name, s.kind)
            for value in _strings(_json.loads(text)):
                assert redact(value) == value, (f.name, value[:200])
    assert bodies >= 50


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_bearer_before_a_word_is_prose_about_the_scheme() -> None:
    """A blind set's review said "**Refresh + Bearer collision** — `extractToken` prefers…": the note read "Refresh +
    Bearer [REDACTED:BEARER_TOKEN]". A letters-only word shorter than any issued token after "Bearer" is prose; a token
    (digits, dots, a long random run) still goes."""
    assert redact("**Refresh + Bearer collision** — extractToken prefers Authorization") == \
        "**Refresh + Bearer collision** — extractToken prefers Authorization"
    assert redact("use Bearer authentication here") == "use Bearer authentication here"
    for token in ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", "abcdefgh12345678", "abcdefghijklmnopqrstuvwxyz"):
        assert "[REDACTED:BEARER_TOKEN]" in redact(f"send it as Bearer {token} please"), token
