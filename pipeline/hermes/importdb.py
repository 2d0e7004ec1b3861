"""Write converted sessions into a Hermes-shaped ``state.db`` (``distill import --into-db``).

Rows look like the ones Hermes's ``SessionDB`` writes (schema v30 column names and encodings):
``content`` as text, or ``"\\x00json:" + json.dumps(parts)`` for list content; ``tool_calls``
as a JSON list of OpenAI-style calls whose ``arguments`` is a JSON *string*; ``tool_name`` /
``tool_call_id`` only on tool rows; a compaction carrier flagged ``_compressed_summary=1`` with
``display_kind='hidden'``; rows of earlier generations ``active=0, compacted=1``.

The DDL below is our own minimal v30-compatible subset (the columns a reader or Hermes needs;
Hermes's own reconcile step adds any column it misses when it opens the file). Each session is
one ``BEGIN IMMEDIATE`` transaction, retried with jitter while another writer holds the lock,
so a session is either fully present or absent. Writing into an existing database needs
``allow_existing=True``: it is someone's live history.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipeline.errors import InputError, NotAHermesDatabase
from pipeline.models import Message, Session
from pipeline.read.decode import PAYLOAD_IDENTITY

SCHEMA_VERSION = 30
CONTENT_JSON_PREFIX = "\x00json:"
_RETRIES = 8

_DDL = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS system_prompts (hash TEXT PRIMARY KEY, prompt TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    created_source TEXT,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    system_prompt_hash TEXT,
    parent_session_id TEXT REFERENCES sessions(id),
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0,
    cwd TEXT,
    git_branch TEXT,
    git_repo_root TEXT,
    git_metadata_generation INTEGER NOT NULL DEFAULT 0,
    billing_provider TEXT,
    estimated_cost_usd REAL,
    actual_cost_usd REAL,
    cost_status TEXT,
    cost_source TEXT,
    title TEXT,
    title_source TEXT,
    last_activity_at REAL,
    api_call_count INTEGER DEFAULT 0,
    profile_name TEXT,
    rewind_count INTEGER NOT NULL DEFAULT 0,
    archived INTEGER NOT NULL DEFAULT 0,
    pinned INTEGER NOT NULL DEFAULT 0,
    hidden INTEGER NOT NULL DEFAULT 0,
    tool_names TEXT
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    reasoning_content TEXT,
    reasoning_details TEXT,
    observed INTEGER DEFAULT 0,
    _compressed_summary INTEGER NOT NULL DEFAULT 0,
    active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0,
    display_kind TEXT,
    display_metadata TEXT,
    message_uid TEXT
);
CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source);
CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp);
CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL;
"""


def encode_content(content: Any) -> str | None:
    """Hermes's ``_encode_content``: strings as-is, lists/dicts JSON behind the sentinel prefix."""
    if content is None or isinstance(content, str):
        return content
    return CONTENT_JSON_PREFIX + json.dumps(content, ensure_ascii=False)


def _tool_calls_json(m: Message) -> str | None:
    if not m.tool_calls:
        return None
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {
                "name": c.name,
                "arguments": c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments, ensure_ascii=False),
            },
        }
        for c in m.tool_calls
    ]
    return json.dumps(calls, ensure_ascii=False)


def _exists(db: Path) -> bool:
    return db.exists() and db.stat().st_size > 0


def _connect(db: Path, allow_existing: bool) -> sqlite3.Connection:
    existed = _exists(db)
    if existed and not allow_existing:
        raise InputError(f"{db}: already exists; pass the consent flag to add sessions to it, or choose a new file")
    if not db.parent.exists():
        raise InputError(f"{db.parent}: directory does not exist; create it first")
    # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, one transaction per session.
    conn = sqlite3.connect(db, timeout=1.0, isolation_level=None)
    if existed:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"sessions", "messages"} <= tables:
            conn.close()
            raise NotAHermesDatabase(f"{db}: has no Hermes sessions/messages tables; point --into-db at a Hermes state.db or a new file")
    else:
        # A new database is built under a temp name (see import_sessions): no journal file to leave.
        conn.execute("PRAGMA journal_mode=MEMORY")
        conn.executescript(_DDL)
        conn.execute("INSERT INTO schema_version(version) VALUES (?)", (SCHEMA_VERSION,))
    return conn


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def _session_row(s: Session, conn: sqlite3.Connection) -> dict[str, Any]:
    stamps = [m.timestamp for m in s.messages if m.timestamp is not None]
    started = s.started_at.timestamp() if s.started_at else (min(stamps) if stamps else time.time())
    ended = s.ended_at.timestamp() if s.ended_at else (max(stamps) if stamps else None)
    config = {k: v for k, v in {
        "_branched_from": s.lineage.branched_from,
        "_delegate_from": s.lineage.delegated_from,
        "_reset_from": s.lineage.reset_from,
        "_imported_by": s.origin,  # so a later reader can tell an import from a native session
    }.items() if v}
    parent = s.lineage.parent
    if parent and not conn.execute("SELECT 1 FROM sessions WHERE id=?", (parent,)).fetchone():
        config["_import_parent"] = parent  # keep the link without a dangling foreign key
        parent = None
    return {
        "id": s.id, "source": s.source, "created_source": s.source, "model": s.model,
        "model_config": json.dumps(config), "parent_session_id": parent,
        "started_at": started, "ended_at": ended, "end_reason": s.end_reason or "imported",
        "message_count": sum(1 for m in s.messages if m.active),
        "tool_call_count": sum(len(m.tool_calls) for m in s.messages if m.active),
        "input_tokens": s.input_tokens, "output_tokens": s.output_tokens,
        "cache_read_tokens": s.cache_read_tokens, "cache_write_tokens": s.cache_write_tokens,
        "reasoning_tokens": s.reasoning_tokens, "cwd": s.cwd, "git_branch": s.git_branch,
        "git_repo_root": s.git_repo_root, "billing_provider": s.provider, "estimated_cost_usd": s.cost_usd,
        "title": s.title, "title_source": s.title_source or ("import" if s.title else None),
        "last_activity_at": s.last_active_at.timestamp() if s.last_active_at else ended,
        "profile_name": s.profile,
    }


def _message_row(s: Session, m: Message, fallback_ts: float) -> dict[str, Any]:
    tool = m.role == "tool"
    return {
        "session_id": s.id, "role": m.role, "content": encode_content(m.content),
        "tool_call_id": m.tool_call_id if tool else None, "tool_calls": _tool_calls_json(m),
        "tool_name": m.tool_name if tool else None,
        "timestamp": m.timestamp if m.timestamp is not None else fallback_ts,
        "reasoning": m.reasoning, "_compressed_summary": int(m.is_carrier),
        "active": int(m.active), "compacted": int(m.compacted),
        "display_kind": "hidden" if m.is_carrier else None, "message_uid": _stable_identity(m),
    }


def _stable_identity(m: Message) -> str | None:
    # A payload identity is a per-process hash: read back, the row's payload gives it again.
    return None if m.identity is None or m.identity.startswith(PAYLOAD_IDENTITY) else m.identity


def _insert(conn: sqlite3.Connection, table: str, row: dict[str, Any], cols: set[str]) -> None:
    row = {k: v for k, v in row.items() if k in cols}  # an older Hermes db may lack newer columns
    names = ", ".join(f'"{k}"' for k in row)
    conn.execute(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))


def _unique_title(conn: sqlite3.Connection, title: str | None) -> str | None:
    # Hermes enforces unique titles; a clash gets a numbered suffix rather than a failed import.
    if not title:
        return title
    candidate, n = title, 1
    while conn.execute("SELECT 1 FROM sessions WHERE title=?", (candidate,)).fetchone():
        n += 1
        candidate = f"{title} ({n})"
    return candidate


def _write_one(conn: sqlite3.Connection, s: Session, scols: set[str], mcols: set[str]) -> bool:
    for attempt in range(_RETRIES):
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.5))
            continue
        try:
            if conn.execute("SELECT 1 FROM sessions WHERE id=?", (s.id,)).fetchone():
                conn.execute("ROLLBACK")
                return False  # already imported: importing twice must not duplicate rows
            row = _session_row(s, conn)
            row["title"] = _unique_title(conn, row["title"])
            _insert(conn, "sessions", row, scols)
            for m in s.messages:
                _insert(conn, "messages", _message_row(s, m, row["started_at"]), mcols)
            conn.execute("COMMIT")
            return True
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    raise InputError(f"could not lock the database to import session {s.id}; is Hermes writing to it? retry later")


def import_sessions(sessions: Iterable[Session], db: Path, *, allow_existing: bool) -> int:
    """Write each session (one transaction each) into ``db``; returns how many were added.

    Sessions whose id is already present are skipped, so re-running an import is harmless.
    A new database is written under a temp name beside ``db`` and renamed into place when every
    session is in: an import that is killed leaves no half-made ``db`` (which a rerun would then
    refuse as "already exists"), only a temp file the next write there sweeps.
    """
    db = Path(db).expanduser()
    if _exists(db) or not db.parent.exists():
        conn = _connect(db, allow_existing)
        try:
            scols, mcols = _columns(conn, "sessions"), _columns(conn, "messages")
            return sum(_write_one(conn, s, scols, mcols) for s in sessions)
        finally:
            conn.close()
    from pipeline.atomic import sweep_temps, temp_path

    sweep_temps(db.parent)
    tmp = temp_path(db)
    try:
        conn = _connect(tmp, allow_existing=False)
        try:
            scols, mcols = _columns(conn, "sessions"), _columns(conn, "messages")
            added = sum(_write_one(conn, s, scols, mcols) for s in sessions)
            conn.execute("PRAGMA journal_mode=WAL")  # what Hermes uses; lets readers run beside it
        finally:
            conn.close()  # the last close checkpoints: the file is complete without a -wal
        os.replace(tmp, db)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return added


__all__ = ["CONTENT_JSON_PREFIX", "encode_content", "import_sessions"]
