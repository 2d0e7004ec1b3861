"""Stage 1: read Hermes sessions from ``state.db``, read-only, beside a live Hermes.

Design:

* The database is opened through a ``file:`` URI with ``mode=ro`` built from the resolved path
  (Hermes's own ``read_only_db_uri``), with a short busy timeout and jittered retries on the
  transient ``database is locked`` / ``disk I/O error`` a WAL checkpoint can cause. We never write,
  never checkpoint, never touch the FTS tables (a stock SQLite cannot even open the CJK one).
* Columns are chosen by ``PRAGMA table_info``, never by ``schema_version``: columns appear without
  version bumps, and we must read everything from the first schema with ``messages.active`` to v31.
* Each session is read inside one read transaction, so it is a consistent snapshot even while
  Hermes appends or compacts.
* Rows are decoded here (structured content, tool calls, codex items, carriers, harness turns);
  deciding which rows form the logical transcript (dedupe, generations) is ``chunk``'s job.
* A legacy rotating-compression chain (parent ``end_reason='compression'`` → continuation child)
  is one logical session named by its root id; branches, subagents and resets stay links.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pipeline.errors import InputError, NotAHermesDatabase, SessionNotFound
from pipeline.models import Lineage, Message, ModelUsage, Session
from pipeline.read.decode import decode_row

T = TypeVar("T")

BUSY_TIMEOUT_MS = 2000
_RETRYABLE = ("database is locked", "disk i/o error", "database is busy", "database schema has changed")

# Columns we read when present. Anything else (new columns, unknown tables) is ignored.
_SESSION_COLS = (
    "id", "source", "title", "title_source", "model", "model_config", "billing_provider",
    "parent_session_id", "started_at", "ended_at", "end_reason", "last_activity_at",
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
    "estimated_cost_usd", "actual_cost_usd", "cwd", "git_branch", "git_repo_root", "profile_name",
)
_MESSAGE_COLS = (
    "id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name", "timestamp",
    "reasoning", "reasoning_content", "codex_message_items", "observed", "_compressed_summary",
    "active", "compacted", "display_kind", "display_metadata", "display_order", "message_uid",
)


def _text(raw: bytes) -> str:
    # Real databases hold invalid UTF-8 now and then; the default factory would fail the whole row.
    return raw.decode("utf-8", "replace")


def with_retry(fn: Callable[[], T], *, attempts: int = 6) -> T:
    """Run ``fn``, retrying the transient errors a concurrent Hermes writer can cause."""
    for attempt in range(attempts):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if attempt == attempts - 1 or not any(s in str(exc).lower() for s in _RETRYABLE):
                raise
            time.sleep(0.05 * (2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


@dataclass
class _Row:
    """A sessions row plus what the whole-table scan tells us about its relatives."""

    data: dict[str, Any]
    markers: dict[str, str] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.data["id"])


class HermesDB:
    """A read-only view of one ``state.db``. Use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).expanduser()
        self._tmpdir: Path | None = None
        self.conn = self._connect()
        self.session_cols, self.message_cols, self.tables = self._probe()
        self._rows: dict[str, _Row] | None = None
        self._stats: dict[str, tuple[Any, ...]] | None = None  # see message_stats

    # ------------------------------------------------------------------ opening
    def _connect(self) -> sqlite3.Connection:
        path = self.path
        if not path.exists():
            raise InputError(f"{path}: no such file; pass --db PATH or set HERMES_HOME to your Hermes home")
        if not path.is_file():
            raise InputError(f"{path}: not a file; pass the state.db file itself with --db")
        with path.open("rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                raise NotAHermesDatabase(f"{path}: not an SQLite database; pass a Hermes state.db with --db")
        try:
            return self._open_uri(path)
        except sqlite3.OperationalError as exc:
            # A WAL database in a directory we cannot write (no -shm can be created) cannot be
            # opened read-only in place; read a private copy of db + wal instead, like gbrain does.
            if "unable to open" not in str(exc) and "readonly" not in str(exc):
                raise InputError(f"{path}: cannot open ({exc})") from exc
            self._tmpdir = Path(tempfile.mkdtemp(prefix="distill-db-"))
            for suffix in ("", "-wal"):
                src = Path(str(path) + suffix)
                if src.exists():
                    shutil.copy2(src, self._tmpdir / f"state.db{suffix}")
            return self._open_uri(self._tmpdir / "state.db")

    def worker_args(self) -> tuple[Any, ...]:
        """What ``attach`` needs to read sessions in another process; reads the sessions table now."""
        return self._opened, self.session_cols, self.message_cols, self.tables, self.rows()

    @classmethod
    def attach(cls, opened: Path, session_cols: list[str], message_cols: list[str], tables: set[str],
               rows: dict[str, _Row]) -> HermesDB:
        """A second reader of the same file (a worker process), with the caller's sessions table.

        Sharing the table keeps every process on the lineage the main process fingerprinted. The
        caller owns any private copy of the database: this reader never deletes it.
        """
        db = cls.__new__(cls)
        db.path, db._opened, db._tmpdir = opened, opened, None
        db.conn = cls._open(opened)
        db.session_cols, db.message_cols, db.tables, db._rows = session_cols, message_cols, tables, rows
        return db

    def _open_uri(self, path: Path) -> sqlite3.Connection:
        self._opened = path
        return self._open(path)

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        uri = path.resolve().as_uri() + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        conn.text_factory = _text
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA query_only = 1")
        return conn

    def _probe(self) -> tuple[list[str], list[str], set[str]]:
        try:
            tables = {
                r[0] for r in with_retry(
                    lambda: self.conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')").fetchall()
                )
            }
        except sqlite3.DatabaseError as exc:
            raise NotAHermesDatabase(f"{self.path}: unreadable SQLite file ({exc}); is it a Hermes state.db?") from exc
        if not {"sessions", "messages"} <= tables:
            raise NotAHermesDatabase(
                f"{self.path}: no Hermes 'sessions'/'messages' tables; pass a Hermes state.db with --db"
            )
        scols = [r[1] for r in self.conn.execute("PRAGMA table_info(sessions)")]
        mcols = [r[1] for r in self.conn.execute("PRAGMA table_info(messages)")]
        if "active" not in mcols:
            raise NotAHermesDatabase(
                f"{self.path}: this Hermes database predates messages.active; upgrade Hermes once to migrate it"
            )
        return [c for c in _SESSION_COLS if c in scols], [c for c in _MESSAGE_COLS if c in mcols], tables

    def close(self) -> None:
        self.conn.close()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    def __enter__(self) -> HermesDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: everything read inside sees the same database state."""
        with_retry(lambda: self.conn.execute("BEGIN"))
        try:
            yield self.conn
        finally:
            self.conn.execute("COMMIT")

    # ------------------------------------------------------------------ the sessions table
    def rows(self) -> dict[str, _Row]:
        """All sessions rows, with lineage markers and children, read once per run."""
        if self._rows is not None:
            return self._rows
        cols = ", ".join(f's."{c}"' for c in self.session_cols)
        activity = "(SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = s.id) AS _last_msg"
        sql = f"SELECT {cols}, {activity} FROM sessions s ORDER BY s.started_at, s.id"
        rows: dict[str, _Row] = {}
        for r in with_retry(lambda: self.conn.execute(sql).fetchall()):
            row = _Row(dict(r))
            cfg = _json_object(row.data.get("model_config"))
            row.markers = {k: str(cfg[k]) for k in ("_branched_from", "_delegate_from", "_reset_from") if cfg.get(k)}
            rows[row.id] = row
        for row in rows.values():
            parent = row.data.get("parent_session_id")
            if parent in rows:
                rows[parent].children.append(row.id)
        self._rows = rows
        return rows

    def preload_message_stats(self) -> None:
        """Read ``message_stats`` for every session in one scan (for runs over many sessions).

        One GROUP BY over the messages index instead of a query per session: a re-run over 2,000
        sessions spent 0.2 s in those queries. The numbers are as of this call; a session that changes
        later gets a fingerprint older than its content, so the next run looks at it again.
        """
        sql = f"SELECT session_id, COUNT(*), MAX(id), {self._flags()} FROM messages GROUP BY session_id"
        self._stats = {r[0]: tuple(r) for r in with_retry(lambda: self.conn.execute(sql).fetchall())}

    def message_stats(self, ids: list[str]) -> list[tuple[Any, ...]]:
        """(session_id, message count, max row id, live rows, archived rows) per session with messages."""
        if self._stats is not None:
            return [self._stats[i] for i in sorted(ids) if i in self._stats]
        marks = ",".join("?" * len(ids))
        return [tuple(r) for r in with_retry(lambda: self.conn.execute(
            f"SELECT session_id, COUNT(*), MAX(id), {self._flags()} FROM messages "
            f"WHERE session_id IN ({marks}) GROUP BY session_id ORDER BY session_id", ids).fetchall())]

    def _flags(self) -> str:
        return "SUM(active), SUM(compacted)" if "compacted" in self.message_cols else "SUM(active), 0"

    def is_continuation(self, row: _Row) -> bool:
        """A legacy compression child: same logical session as its parent."""
        parent = self.rows().get(row.data.get("parent_session_id") or "")
        return (
            parent is not None
            and parent.data.get("end_reason") == "compression"
            and not row.markers
            and row.data.get("source") != "tool"
        )

    def chain(self, root_id: str) -> list[str]:
        """Follow continuation children forward from ``root_id`` (Hermes caps chains at 1000)."""
        rows, ids = self.rows(), [root_id]
        while len(ids) < 1000:
            nxt = [c for c in rows[ids[-1]].children if self.is_continuation(rows[c])]
            if not nxt:
                break
            # Prefer a child that itself continued, then the most recently active one.
            nxt.sort(key=lambda c: (rows[c].data.get("end_reason") == "compression", _last_active(rows[c])))
            ids.append(nxt[-1])
        return ids

    def root_of(self, session_id: str) -> str:
        rows, sid = self.rows(), session_id
        while sid in rows and self.is_continuation(rows[sid]):
            sid = rows[sid].data["parent_session_id"]
        return sid

    def logical_ids(self) -> list[str]:
        """Root ids of every logical session, oldest first."""
        return [sid for sid, row in self.rows().items() if not self.is_continuation(row)]

    def last_active(self, root_id: str) -> float:
        return max(_last_active(self.rows()[sid]) for sid in self.chain(root_id))

    def resolve(self, ref: str) -> str:
        """Session id or exact title → root id of its logical session."""
        rows = self.rows()
        if ref in rows:
            return self.root_of(ref)
        titled = [sid for sid, r in rows.items() if r.data.get("title") == ref]
        if titled:
            return self.root_of(titled[0])
        raise SessionNotFound(
            f"{ref}: no session with that id or exact title in {self.path}; `hermes sessions list` shows ids"
        )

    # ------------------------------------------------------------------ one logical session
    def read_session(self, root_id: str) -> Session:
        rows = self.rows()
        segment_ids = self.chain(root_id)
        cols = ", ".join(f'"{c}"' for c in self.message_cols)
        where = "(active = 1 OR compacted = 1)" if "compacted" in self.message_cols else "active = 1"
        sql = f"SELECT {cols} FROM messages WHERE session_id = ? AND {where} ORDER BY id"
        messages: list[Message] = []
        problems: list[str] = []

        def read() -> tuple[list[sqlite3.Row], list[sqlite3.Row]]:
            with self.snapshot() as conn:
                msg_rows = [r for sid in segment_ids for r in conn.execute(sql, (sid,)).fetchall()]
                usage = self._usage_rows(conn, segment_ids)
            return msg_rows, usage

        msg_rows, usage_rows = with_retry(read)
        multi = len(segment_ids) > 1
        for r in sorted(msg_rows, key=lambda r: r["id"]):
            messages.extend(decode_row(dict(r), problems, segment=r["session_id"] if multi else None))
        messages = strip_harness(messages)
        return self._session(rows[root_id], [rows[s] for s in segment_ids], messages, usage_rows, problems)

    def lineage(self, root_id: str) -> Lineage:
        """The logical session's links, from the sessions table alone (no message is read)."""
        rows = self.rows()
        return self._lineage(rows[root_id], [rows[s] for s in self.chain(root_id)])

    def _lineage(self, root: _Row, segments: list[_Row]) -> Lineage:
        rows = self.rows()
        kids = [rows[c] for seg in segments for c in seg.children if not self.is_continuation(rows[c])]

        def kind(r: _Row) -> str:
            if "_branched_from" in r.markers or r.data.get("source") == "branch":
                return "branch"
            if "_delegate_from" in r.markers or r.data.get("source") == "subagent":
                return "subagent"
            return "child"

        return Lineage(
            parent=root.data.get("parent_session_id"),
            segments=tuple(s.id for s in segments) if len(segments) > 1 else (),
            children=tuple(k.id for k in kids if kind(k) == "child"),
            branches=tuple(k.id for k in kids if kind(k) == "branch"),
            subagents=tuple(k.id for k in kids if kind(k) == "subagent"),
            branched_from=root.markers.get("_branched_from"),
            delegated_from=root.markers.get("_delegate_from"),
            reset_from=root.markers.get("_reset_from"),
        )

    def _usage_rows(self, conn: sqlite3.Connection, ids: list[str]) -> list[sqlite3.Row]:
        if "session_model_usage" not in self.tables:
            return []
        marks = ",".join("?" * len(ids))
        return conn.execute(f"SELECT * FROM session_model_usage WHERE session_id IN ({marks})", ids).fetchall()

    def _session(
        self, root: _Row, segments: list[_Row], messages: list[Message], usage_rows: list[sqlite3.Row],
        problems: list[str],
    ) -> Session:
        usage = tuple(
            ModelUsage(
                model=u["model"] or "", provider=u["billing_provider"] or None, task=_get(u, "task") or "",
                api_calls=_get(u, "api_call_count") or 0, input_tokens=u["input_tokens"] or 0,
                output_tokens=u["output_tokens"] or 0,
                cost_usd=_get(u, "actual_cost_usd") or _get(u, "estimated_cost_usd"),
            )
            for u in usage_rows
        )
        return Session(
            id=root.id,
            origin="hermes-state",
            **session_fields(root.data, [s.data for s in segments],
                             last_active=max(_last_active(s) for s in segments)),
            usage=usage,
            lineage=self._lineage(root, segments),
            messages=tuple(messages),
            problems=tuple(problems),
        )


# ---------------------------------------------------------------------- helpers


def session_fields(
    root: Mapping[str, Any], segments: Sequence[Mapping[str, Any]], *, last_active: Any = None,
    to_dt: Callable[[Any], datetime | None] | None = None,
) -> dict[str, Any]:
    """``Session`` fields from Hermes ``sessions`` columns, for one session or a compression chain.

    Shared by the state.db reader and the JSONL-export reader, which carry the same columns: the
    root names the logical session, the tip says how it ended, counters add up over segments.
    """
    to_dt = to_dt or _dt
    tip = segments[-1]

    def total(col: str) -> int:
        return sum(int(s.get(col) or 0) for s in segments)

    costs = [s.get("actual_cost_usd") or s.get("estimated_cost_usd") for s in segments]
    known = [float(c) for c in costs if c is not None]
    return {
        "source": root.get("source") or "unknown",
        "title": root.get("title"),
        "title_source": root.get("title_source"),
        "model": tip.get("model") or root.get("model"),
        "provider": tip.get("billing_provider") or root.get("billing_provider"),
        "started_at": to_dt(root.get("started_at")),
        "ended_at": to_dt(tip.get("ended_at")),
        "last_active_at": to_dt(last_active),
        "end_reason": tip.get("end_reason"),
        "cwd": root.get("cwd") or tip.get("cwd"),
        "git_branch": root.get("git_branch") or tip.get("git_branch"),
        "git_repo_root": root.get("git_repo_root"),
        "profile": root.get("profile_name"),
        "input_tokens": total("input_tokens"),
        "output_tokens": total("output_tokens"),
        "cache_read_tokens": total("cache_read_tokens"),
        "cache_write_tokens": total("cache_write_tokens"),
        "reasoning_tokens": total("reasoning_tokens"),
        "cost_usd": sum(known) if known else None,
    }


HARNESS_PREFIXES = (
    "Review the conversation above and update the skill library",
    "Review the conversation above and consider saving to memory",
    "Review the conversation above and",
)


def strip_harness(messages: list[Message]) -> list[Message]:
    """Drop Hermes background-review harness turns: the prompt and every reply up to the next user turn."""
    out: list[Message] = []
    skipping = False
    for m in messages:
        if m.role in ("user", "system") and m.content.lstrip().startswith(HARNESS_PREFIXES):
            skipping = True
            continue
        if skipping and m.role != "user":
            continue
        skipping = False
        out.append(m)
    return out


def _get(row: sqlite3.Row, key: str) -> Any:
    return row[key] if key in row.keys() else None  # noqa: SIM118 (sqlite3.Row "in" tests values)


def _json_object(raw: Any) -> dict[str, Any]:
    if not raw or not isinstance(raw, str):
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _last_active(row: _Row) -> float:
    d = row.data
    return max(float(d.get(k) or 0) for k in ("started_at", "ended_at", "last_activity_at", "_last_msg"))


def _dt(epoch: Any) -> datetime | None:
    if epoch in (None, ""):
        return None
    try:
        return datetime.fromtimestamp(float(epoch), tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def read_sessions(db_path: Path, refs: list[str] | None = None) -> Iterator[Session]:
    """Convenience: yield logical sessions (all, or the given ids/titles) from one database."""
    with HermesDB(db_path) as db:
        ids = [db.resolve(r) for r in refs] if refs else db.logical_ids()
        for sid in dict.fromkeys(ids):
            yield db.read_session(sid)
