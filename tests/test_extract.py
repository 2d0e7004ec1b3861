"""extract + decode on databases written by real Hermes (fixtures/hermes, see its README)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from pipeline.errors import InputError, NotAHermesDatabase, SessionNotFound
from pipeline.models import Message
from pipeline.read.decode import MAX_JSON_DEPTH, decode_row, split_carrier, too_deep
from pipeline.read.hermes import HermesDB, read_sessions, strip_harness, with_retry

HERMES = Path(__file__).resolve().parent.parent / "fixtures" / "hermes"
V31, V22 = HERMES / "state-v31.db", HERMES / "state-v22.db"
PARSER, REFACTOR, DEPLOY = "20261120_080000_f2a74d", "20261120_131945_b12aa1", "20261121_101748_56947a"
DEPLOY_TIP = "20261121_105132_cef61d"


@pytest.fixture(params=[V31, V22], ids=["v31", "v22"])
def real_db(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    dst = tmp_path / "state.db"
    shutil.copy(request.param, dst)
    return dst


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_reading_never_writes(real_db: Path) -> None:
    before = _digest(real_db)
    sessions = list(read_sessions(real_db))
    assert len(sessions) == 12  # 14 rows, two of them continuation segments of "Deploy pipeline"
    assert _digest(real_db) == before
    with HermesDB(real_db) as db, pytest.raises(sqlite3.OperationalError):
        db.conn.execute("CREATE TABLE distill_probe(x)")


def test_session_metadata_and_lineage(real_db: Path) -> None:
    with HermesDB(real_db) as db:
        s = db.read_session(PARSER)
    assert s.title == "Fix parser string unescaping"
    assert s.source == "cli" and s.end_reason == "user_exit"
    assert s.cwd == "/home/ana/src/parsekit"
    assert s.lineage.branches == ("20261120_081651_19f991",)
    assert s.lineage.subagents == ("20261120_081257_ad1b72",)
    assert s.started_at is not None and s.started_at.utcoffset() is not None
    assert s.input_tokens > 0 and s.cost_usd and s.cost_usd > 0
    assert {u.task for u in s.usage} >= {""}
    tool_names = [c.name for m in s.messages for c in m.tool_calls]
    assert {"terminal", "read_file", "patch", "write_file"} <= set(tool_names)
    assert all(isinstance(c.arguments, dict) for m in s.messages for c in m.tool_calls)


def test_legacy_chain_is_one_logical_session(real_db: Path) -> None:
    with HermesDB(real_db) as db:
        assert db.resolve(DEPLOY_TIP) == DEPLOY
        assert db.resolve("Deploy pipeline #3") == DEPLOY  # exact title works too
        assert DEPLOY_TIP not in db.logical_ids()
        s = db.read_session(DEPLOY)
    assert s.lineage.segments == (DEPLOY, "20261121_103803_865922", DEPLOY_TIP)
    assert s.title == "Deploy pipeline"
    assert s.end_reason == "user_exit"  # the chain's tip decides how it ended
    assert sum(m.is_carrier for m in s.messages) == 2


def test_carriers_are_split_from_authentic_text() -> None:
    with HermesDB(V31) as db:
        s = db.read_session(REFACTOR)
    carriers = [m for m in s.messages if m.is_carrier]
    assert [c.row_id for c in carriers] == [83, 120]
    assert all(c.content == "" and c.carrier_summary for c in carriers)
    assert all("[CONTEXT COMPACTION" not in (c.carrier_summary or "") for c in carriers)
    assert all("END OF CONTEXT SUMMARY" not in (c.carrier_summary or "") for c in carriers)
    # Row 120 is a force-user-leading carrier: the live user text after the END marker survives.
    live = [m for m in s.messages if m.row_id == 120 and not m.is_carrier]
    assert [m.content for m in live] == ["what about tokens"]


def test_v22_carriers_found_by_prefix() -> None:
    with HermesDB(V22) as db:
        assert "_compressed_summary" not in db.message_cols
        s = db.read_session(REFACTOR)
    assert sum(m.is_carrier for m in s.messages) == 2


def test_multimodal_and_harness() -> None:
    with HermesDB(V31) as db:
        router = db.read_session("20261122_131238_c379023e")
        restic = db.read_session("20261123_143852_0e5e92")
    first = router.messages[0]
    assert first.images == 1 and "router admin page" in first.content and "[image]" in first.content
    assert not any("Review the conversation above" in m.content for m in restic.messages)
    assert not any(m.content == "Nothing to save." for m in restic.messages)


def test_unknown_reference_and_bad_inputs(tmp_path: Path) -> None:
    with HermesDB(V31) as db, pytest.raises(SessionNotFound, match="no session with that id"):
        db.resolve("nope")
    with pytest.raises(InputError, match="no such file"):
        HermesDB(tmp_path / "missing.db")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(NotAHermesDatabase, match="not an SQLite database"):
        HermesDB(text)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t(x)").connection.commit()
    with pytest.raises(NotAHermesDatabase, match="no Hermes 'sessions'/'messages' tables"):
        HermesDB(other)
    old = tmp_path / "old.db"
    con = sqlite3.connect(old)
    con.executescript("CREATE TABLE sessions(id TEXT); CREATE TABLE messages(id INTEGER, session_id TEXT);")
    con.close()
    with pytest.raises(NotAHermesDatabase, match=r"predates messages\.active"):
        HermesDB(old)


def test_unknown_columns_and_tables_are_ignored(tmp_path: Path) -> None:
    db_path = tmp_path / "state.db"
    shutil.copy(V31, db_path)
    con = sqlite3.connect(db_path)
    con.executescript(
        "ALTER TABLE messages ADD COLUMN future_col TEXT; ALTER TABLE sessions ADD COLUMN future_flag INT;"
        "CREATE TABLE future_table(x);"
    )
    con.close()
    with HermesDB(db_path) as db:
        assert "future_col" not in db.message_cols
        assert len(db.read_session(PARSER).messages) == 20


def test_decode_row_shapes() -> None:
    problems: list[str] = []
    parts = json.dumps([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}])
    [m] = decode_row({"id": 1, "role": "user", "content": "\x01json:" + parts}, problems)
    assert m.content == "look\n[image]" and m.images == 1
    [m] = decode_row({"id": 2, "role": "assistant", "content": "", "tool_calls": "{not json"}, problems)
    assert m.tool_calls == () and "tool_calls is not valid JSON" in problems[-1]
    items = json.dumps([{"type": "message", "content": [{"type": "output_text", "text": "from codex"}]}])
    [m] = decode_row({"id": 3, "role": "assistant", "content": "", "codex_message_items": items}, problems)
    assert m.content == "from codex"
    [m] = decode_row({"id": 4, "role": "user", "content": "a\x00b"}, problems)
    assert m.content == "ab" and "NUL" in problems[-1]
    meta = json.dumps(json.dumps({"model_only": True}))
    assert decode_row({"id": 5, "role": "user", "content": "x", "display_metadata": meta}, problems) == []
    assert decode_row({"id": 6, "role": "user", "content": "x", "observed": 1}, problems) == []


def test_split_carrier_shapes() -> None:
    head = "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted into the summary below. Long rule:"
    end = "--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---"
    assert split_carrier(f"{head}\n## Goal\nship it\n\n{end}\n\nwhat next?") == ("", "## Goal\nship it", "what next?")
    merged = (
        "[PRIOR CONTEXT — for reference only; not a new message]\nprior turn\n"
        f"[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]\n\n{head}\nbody"
    )
    assert split_carrier(merged) == ("prior turn", "body", "")
    assert split_carrier("[CONTEXT SUMMARY]: old style") == ("", "old style", "")


def test_strip_harness_keeps_following_user_turn() -> None:
    msgs = [
        Message(role="user", content="real ask"),
        Message(role="user", content="Review the conversation above and update the skill library."),
        Message(role="assistant", content="Nothing to save."),
        Message(role="user", content="next real ask"),
    ]
    assert [m.content for m in strip_harness(msgs)] == ["real ask", "next real ask"]


def test_with_retry_retries_only_transient_errors() -> None:
    calls = {"n": 0}

    def flaky() -> int:
        calls["n"] += 1
        if calls["n"] < 3:
            raise sqlite3.OperationalError("database is locked")
        return 7

    assert with_retry(flaky) == 7 and calls["n"] == 3

    def broken() -> int:
        calls["n"] += 1
        raise sqlite3.OperationalError("no such table: x")

    calls["n"] = 0
    with pytest.raises(sqlite3.OperationalError):
        with_retry(broken)
    assert calls["n"] == 1


@pytest.mark.parametrize("db_path", [V31, V22], ids=["v31", "v22"])
def test_preloaded_message_stats_give_the_same_fingerprints(db_path: Path) -> None:
    """A run over many sessions reads message counts in one scan; the fingerprints must not change."""
    from pipeline.run.steps import fingerprint

    with HermesDB(db_path) as per_session:
        expected = {sid: fingerprint(per_session, sid) for sid in per_session.logical_ids()}
    with HermesDB(db_path) as bulk:
        bulk.preload_message_stats()
        assert {sid: fingerprint(bulk, sid) for sid in bulk.logical_ids()} == expected
    assert len(expected) >= 5


@pytest.mark.parametrize("depth", [1, 2, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, MAX_JSON_DEPTH + 5])
@pytest.mark.parametrize("leaf", ["1", "[]", "{}", '"[{["'])
def test_the_bracket_count_shortcut_agrees_with_the_walk(depth: int, leaf: str) -> None:
    # ``too_deep(text=...)`` answers "not too deep" from the bracket count alone; it must never say so
    # where the walk over the parsed value says too deep (brackets inside strings only add to the count).
    for opening, closing in (("[", "]"), ('{"k":', "}")):
        raw = opening * depth + leaf + closing * depth
        value = json.loads(raw)
        assert too_deep(value, text=raw) == too_deep(value), raw[:40]
        assert too_deep(value, text=raw.encode()) == too_deep(value)
