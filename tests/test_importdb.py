"""``import_sessions``: converted sessions written as Hermes rows, then read back by extract."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pipeline.errors import InputError, NotAHermesDatabase
from pipeline.hermes.importdb import CONTENT_JSON_PREFIX, encode_content, import_sessions
from pipeline.models import Session
from pipeline.read.detect import read_sessions
from tests.corpus import corpus_file

FILES = [
    "claude-code/cloak-squads-grant-setup.jsonl",
    "claude-code/session-logs-auto-worklog-skill-zh.jsonl",  # one compaction
    "codex/fundwise-grant-skill.jsonl",  # call without output
    "specstory/skillz-combine-design-docs.md",
    "aider/mozgoslav-rag-hotkey-ru.md",  # three sessions
]


def sessions() -> list[Session]:
    return [s for f in FILES for s in read_sessions(corpus_file(f))]


def test_import_writes_hermes_rows(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    src = sessions()
    assert import_sessions(src, db, allow_existing=False) == len(src) == 7
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == 30
    for s in src:
        row = conn.execute("SELECT * FROM sessions WHERE id=?", (s.id,)).fetchone()
        assert row["source"] == s.source and json.loads(row["model_config"])["_imported_by"] == s.origin
        n = conn.execute("SELECT COUNT(*) FROM messages WHERE session_id=?", (s.id,)).fetchone()[0]
        assert n == len(s.messages)
    call_row = conn.execute(
        "SELECT tool_calls FROM messages WHERE session_id='6677d86c-a0d1-484d-946c-b89a8c928c0b' AND tool_calls IS NOT NULL ORDER BY id"
    ).fetchone()
    call = json.loads(call_row[0])[0]
    assert call["type"] == "function" and isinstance(call["function"]["arguments"], str)
    assert json.loads(call["function"]["arguments"])["command"]
    carrier = conn.execute("SELECT role, display_kind, active FROM messages WHERE _compressed_summary=1").fetchall()
    assert [tuple(r) for r in carrier] == [("user", "hidden", 1)]
    assert conn.execute("SELECT COUNT(*) FROM messages WHERE active=0 AND compacted=1").fetchone()[0] > 0
    assert conn.execute("SELECT COUNT(*) FROM messages WHERE role='tool' AND tool_call_id IS NULL").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM messages WHERE role!='tool' AND tool_name IS NOT NULL").fetchone()[0] == 0


def test_round_trip_through_hermes_reader(tmp_path: Path) -> None:
    extract = pytest.importorskip("pipeline.read.hermes")
    db = tmp_path / "state.db"
    src = {s.id: s for s in sessions()}
    import_sessions(src.values(), db, allow_existing=False)
    back = {s.id: s for s in extract.read_sessions(db, list(src))}
    assert set(back) == set(src)
    for sid, s in src.items():
        b = back[sid]
        assert b.source == s.source and b.title == s.title and b.cwd == s.cwd
        assert [m.role for m in b.messages] == [m.role for m in s.messages], sid
        assert [m.content for m in b.messages if not m.is_carrier] == [m.content for m in s.messages if not m.is_carrier]
        assert [(c.name, c.arguments) for m in b.messages for c in m.tool_calls] == [
            (c.name, c.arguments) for m in s.messages for c in m.tool_calls
        ]
        assert sum(m.is_carrier for m in b.messages) == sum(m.is_carrier for m in s.messages)
        assert [(m.active, m.compacted) for m in b.messages] == [(m.active, m.compacted) for m in s.messages]


def test_existing_db_needs_consent_and_reimport_is_a_no_op(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    src = sessions()[:2]
    import_sessions(src, db, allow_existing=False)
    with pytest.raises(InputError, match="already exists"):
        import_sessions(src, db, allow_existing=False)
    assert import_sessions(src, db, allow_existing=True) == 0
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 2


def test_not_a_hermes_db(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    sqlite3.connect(db).execute("CREATE TABLE t(x)").connection.commit()
    with pytest.raises(NotAHermesDatabase, match="sessions/messages"):
        import_sessions(sessions()[:1], db, allow_existing=True)


def test_never_a_partial_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pipeline.hermes.importdb as mod

    db = tmp_path / "state.db"
    real = mod._message_row
    calls = {"n": 0}

    def flaky(s: Session, m: object, ts: float) -> dict:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("disk full")
        return real(s, m, ts)

    monkeypatch.setattr(mod, "_message_row", flaky)
    with pytest.raises(RuntimeError):
        import_sessions(sessions()[:1], db, allow_existing=False)
    # A new database is built under a temp name and renamed when complete: nothing is left at all.
    assert not db.exists() and list(tmp_path.iterdir()) == []
    db2 = tmp_path / "existing.db"
    import_sessions([], db2, allow_existing=False)
    calls["n"] = 0
    with pytest.raises(RuntimeError):
        import_sessions(sessions()[:1], db2, allow_existing=True)
    conn = sqlite3.connect(db2)
    assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0


def test_title_clash_gets_suffix_and_list_content_prefix(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    a, b = sessions()[:2]
    b = b.model_copy(update={"title": a.title})
    import_sessions([a, b], db, allow_existing=False)
    titles = {r[0] for r in sqlite3.connect(db).execute("SELECT title FROM sessions")}
    assert titles == {a.title, f"{a.title} (2)"}
    assert encode_content([{"type": "text", "text": "x"}]) == CONTENT_JSON_PREFIX + '[{"type": "text", "text": "x"}]'
    assert encode_content("plain") == "plain"
