from __future__ import annotations

import time

import pytest

from pipeline.models import Chunk, Message, Session, ToolCall
from pipeline.redact import RULES, redact, redact_chunk, redact_message, redact_session
from tests.secrets_corpus import BENIGN, SECRETS


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
