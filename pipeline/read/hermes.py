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
* Nothing is written next to the database. A WAL database with no ``-wal``/``-shm`` beside it (a
  backup, a cleanly closed Hermes) would get both created by an in-place reader, and one in a
  directory we cannot write cannot be read in place at all: those are read from a private copy
  in a 0700 temp directory, removed on close (and swept by the next run if we were killed).
* Every value is checked against its column's type. SQLite stores whatever it is given (``'soon'``
  in a REAL column), so one bad row must cost at most its own session: a value distill can do
  without is dropped and reported in the session's problems; a session without a usable id or
  start time fails alone, with the column named.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
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

from pipeline.atomic import private_tempdir
from pipeline.errors import InputError, NotAHermesDatabase, SessionError, SessionNotFound
from pipeline.models import Lineage, Message, ModelUsage, Session
from pipeline.read.decode import as_text, decode_row, load_json

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
#: Without these a database cannot be read as Hermes sessions at all (one ``Error:`` line, exit 2).
_REQUIRED = {"sessions": ("id", "started_at"), "messages": ("id", "session_id", "role", "content", "active")}

#: sessions columns by the type Hermes declares; a value of another type is reported, not trusted.
_TIME_COLS = ("started_at", "ended_at", "last_activity_at")
_COUNT_COLS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
_COST_COLS = ("estimated_cost_usd", "actual_cost_usd")
_TEXT_COLS = ("source", "title", "title_source", "model", "billing_provider", "parent_session_id", "end_reason",
              "cwd", "git_branch", "git_repo_root", "profile_name")
#: session_model_usage columns we read, by type.
_USAGE_TEXT = ("model", "billing_provider", "task")
_USAGE_COUNTS = ("api_call_count", "input_tokens", "output_tokens")

#: Private copies live in ``<tmp>/distill-db-<pid>-<random>`` (see ``atomic.private_tempdir``).
COPY_PREFIX = "distill-db-"


def _text(raw: bytes) -> str:
    # Real databases hold invalid UTF-8 now and then; the default factory would fail the whole row.
    return raw.decode("utf-8", "replace")


def _dicts(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The rows of ``sql`` as dicts, built from plain tuples: ``dict(sqlite3.Row)`` cost a third more
    (the message rows of a cold run are a hundred thousand)."""
    cur = conn.cursor()
    cur.row_factory = None
    cur.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


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


# ---------------------------------------------------------------------- column values


def number(value: Any) -> float | None:
    """A finite number from a REAL/INTEGER column; ``None`` for NULL, text, blobs, NaN and infinities.

    Numeric text is accepted: a column declared without a type keeps ``'1795161600.5'`` as text.
    """
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        try:
            f = float(value)
        except OverflowError:
            return None
        return f if math.isfinite(f) else None
    if isinstance(value, str) and len(value) < 64:
        try:
            f = float(value)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _shown(value: Any) -> str:
    """A bad value as a problem names it. Only short text is quoted: a long one may be a secret,
    and problems end up in reports and logs (they are redacted there too)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"a {len(bytes(value))}-byte blob"
    if isinstance(value, str):
        return repr(value) if len(value) <= 12 and value.isprintable() else f"text of {len(value)} characters"
    return repr(value)


def clean_session_row(data: dict[str, Any], problems: list[str]) -> str | None:
    """Check one ``sessions`` row in place; returns why the session cannot be distilled, or None.

    Values of the wrong type are replaced (``None`` for times and costs, 0 for counters, decoded
    text for blobs) and each is reported in ``problems``. Only the id and ``started_at`` are
    indispensable: the note's identity, date and path come from them.
    """
    error = None
    sid = data.get("id")
    if not isinstance(sid, str) or not sid.strip():
        error = f"sessions.id is {_shown(sid)}, not a session id; fix or delete that row"
    for col in _TEXT_COLS:
        value = data.get(col)
        if value is not None and not isinstance(value, str):
            data[col] = as_text(value)
            problems.append(f"sessions.{col} holds {_shown(value)}, not text; read as {_shown(data[col])}")
    for col in (*_TIME_COLS, *_COST_COLS, "_last_msg"):
        value = data.get(col)
        if value is None or (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)):
            continue
        data[col] = number(value)
        if data[col] is None and col == "started_at":
            error = error or (f"sessions.started_at holds {_shown(value)}, not an epoch time; "
                              "the note's date and path depend on it, so fix that row")
        elif data[col] is None and col != "_last_msg":
            problems.append(f"sessions.{col} holds {_shown(value)}, not a number; ignored")
    if "started_at" in data and data.get("started_at") is None and error is None:
        error = "sessions.started_at is NULL; the note's date and path depend on it, so fix that row"
    for col in _COUNT_COLS:
        value = data.get(col)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            continue
        got = number(value)
        data[col] = int(got) if got is not None else 0
        if got is None or got != int(got):
            problems.append(f"sessions.{col} holds {_shown(value)}, not a count; read as {data[col]}")
    return error


def _clean_usage(row: Mapping[str, Any], problems: list[str]) -> dict[str, Any]:
    data = dict(row)
    for col in _USAGE_TEXT:
        if col in data and data[col] is not None and not isinstance(data[col], str):
            bad, data[col] = data[col], as_text(data[col])
            problems.append(f"session_model_usage.{col} holds {_shown(bad)}, not text")
    for col in _USAGE_COUNTS:
        value = data.get(col)
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool)):
            got = number(value)
            data[col] = int(got) if got is not None else 0
            if got is None or got != int(got):
                problems.append(f"session_model_usage.{col} holds {_shown(value)}, not a count; read as {data[col]}")
    for col in _COST_COLS:
        value = data.get(col)
        if value is not None and number(value) is None:
            problems.append(f"session_model_usage.{col} holds {_shown(value)}, not a number; ignored")
        data[col] = number(value) if value is not None else None
    return data


@dataclass
class _Row:
    """A sessions row plus what the whole-table scan tells us about its relatives."""

    data: dict[str, Any]
    markers: dict[str, str] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    #: values of the wrong type that were dropped or replaced (reported with the session)
    problems: list[str] = field(default_factory=list)
    #: why this session cannot be distilled (reported as its failure), else None
    error: str | None = None
    key: str = ""

    @property
    def id(self) -> str:
        return self.key


class HermesDB:
    """A read-only view of one ``state.db``. Use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).expanduser()
        self._tmpdir: Path | None = None
        self.conn = self._connect()
        try:
            self.session_cols, self.message_cols, self.tables = self._probe()
        except BaseException:
            self.close()
            raise
        self._rows: dict[str, _Row] | None = None
        self._stats: dict[str, tuple[Any, ...]] | None = None  # see message_stats
        self._usage: dict[str, list[tuple[Any, ...]]] | None = None

    # ------------------------------------------------------------------ opening
    def _connect(self) -> sqlite3.Connection:
        path = self.path
        if not path.exists():
            raise InputError(f"{path}: no such file; pass --db PATH or set HERMES_HOME to your Hermes home")
        if not path.is_file():
            raise InputError(f"{path}: not a file; pass the state.db file itself with --db")
        try:
            with path.open("rb") as fh:
                header = fh.read(100)
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc}); check its permissions") from exc
        if header[:16] != b"SQLite format 3\x00":
            raise NotAHermesDatabase(f"{path}: not an SQLite database; pass a Hermes state.db with --db")
        wal = len(header) > 19 and header[18] == 2
        sidecars = [Path(f"{path}{s}").exists() for s in ("-wal", "-shm")]
        if wal and not all(sidecars):
            # Opening a WAL database in place creates -wal and -shm beside it (or fails where we
            # cannot write). Hermes keeps both while it has the database open, so their absence
            # means nobody is writing it: a backup, or a cleanly closed Hermes. Read a copy.
            return self._open_copy()
        try:
            conn = self._open_uri(path)
            # SQLite opens lazily: a read-only directory or a hot journal shows up on the first read.
            with_retry(lambda: conn.execute("SELECT count(*) FROM sqlite_master").fetchone())
            return conn
        except sqlite3.OperationalError as exc:
            with contextlib.suppress(UnboundLocalError, sqlite3.Error):
                conn.close()
            text = str(exc).lower()
            if "locked" in text or "busy" in text:
                raise InputError(f"{path}: locked by another process ({exc}); try again when it is done") from exc
            if not any(s in text for s in ("unable to open", "readonly", "read-only", "attempt to write")):
                raise NotAHermesDatabase(f"{path}: unreadable SQLite file ({exc}); is it a Hermes state.db?") from exc
            # A WAL database whose -shm we cannot write, or a hot journal in a read-only directory.
            return self._open_copy()
        except sqlite3.DatabaseError as exc:
            raise NotAHermesDatabase(f"{path}: unreadable SQLite file ({exc}); is it a Hermes state.db?") from exc

    def _open_copy(self) -> sqlite3.Connection:
        """Copy the database (and its -wal / hot journal) into a private directory and open that.

        The copy is taken again if the files change while being copied (a writer started), so it is
        one consistent state; the directory is 0700 and named with our pid, so a copy left by a killed
        run is removed by the next one (``atomic.private_tempdir``).
        """
        path = self.path
        self._tmpdir = private_tempdir(COPY_PREFIX)
        try:
            for _attempt in range(5):
                before = _stamps(path)
                for suffix in ("", "-wal", "-journal"):
                    src = Path(f"{path}{suffix}")
                    dst = self._tmpdir / f"state.db{suffix}"
                    dst.unlink(missing_ok=True)
                    if src.exists():
                        shutil.copyfile(src, dst)
                if _stamps(path) == before:
                    break
            else:
                raise InputError(f"{path}: kept changing while it was copied for reading; try again")
            conn = self._open_uri(self._tmpdir / "state.db")
            with_retry(lambda: conn.execute("SELECT count(*) FROM sqlite_master").fetchone())
            return conn
        except OSError as exc:
            self.close()
            raise InputError(f"{path}: cannot copy it for reading ({exc.strerror or exc}); "
                             f"check the free space in {tempfile.gettempdir()}") from exc
        except sqlite3.DatabaseError as exc:
            self.close()
            raise NotAHermesDatabase(f"{path}: unreadable SQLite file ({exc}); is it a Hermes state.db?") from exc

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
        db._stats = db._usage = None
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
            if not {"sessions", "messages"} <= tables:
                raise NotAHermesDatabase(
                    f"{self.path}: no Hermes 'sessions'/'messages' tables; pass a Hermes state.db with --db"
                )
            scols = [r[1] for r in self.conn.execute("PRAGMA table_info(sessions)")]
            mcols = [r[1] for r in self.conn.execute("PRAGMA table_info(messages)")]
        except sqlite3.DatabaseError as exc:
            raise NotAHermesDatabase(f"{self.path}: unreadable SQLite file ({exc}); is it a Hermes state.db?") from exc
        if "active" not in mcols and "session_id" in mcols:
            raise NotAHermesDatabase(
                f"{self.path}: this Hermes database predates messages.active; upgrade Hermes once to migrate it"
            )
        for table, have in (("sessions", scols), ("messages", mcols)):
            if missing := [c for c in _REQUIRED[table] if c not in have]:
                raise NotAHermesDatabase(
                    f"{self.path}: table {table} has no column {', '.join(missing)}; this is not a Hermes "
                    "state.db distill can read (pass a Hermes state.db with --db)"
                )
        return [c for c in _SESSION_COLS if c in scols], [c for c in _MESSAGE_COLS if c in mcols], tables

    def close(self) -> None:
        with contextlib.suppress(AttributeError, sqlite3.Error):
            self.conn.close()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

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
    def _session_sql(self, where: str = "") -> str:
        cols = ", ".join(f's."{c}"' for c in self.session_cols)
        activity = ("(SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = s.id) AS _last_msg"
                    if "timestamp" in self.message_cols else "NULL AS _last_msg")
        return f"SELECT {cols}, {activity} FROM sessions s {where}"

    def _last_msg_numeric(self, conn: sqlite3.Connection, sid: str) -> float | None:
        # MAX() ranks text above numbers, so one 'soon' hides every real timestamp: ask again for
        # the numeric ones only (rare, so the indexed MAX stays the fast path).
        value = conn.execute(
            "SELECT MAX(timestamp) FROM messages WHERE session_id = ? AND typeof(timestamp) IN ('integer','real')",
            (sid,)).fetchone()[0]
        return number(value)

    def _make_row(self, raw: sqlite3.Row, n: int, conn: sqlite3.Connection) -> _Row:
        data = dict(raw)
        if data.get("_last_msg") is not None and number(data["_last_msg"]) is None and isinstance(data.get("id"), str):
            data["_last_msg"] = self._last_msg_numeric(conn, data["id"])
        row = _Row(data)
        row.error = clean_session_row(data, row.problems)
        row.key = data["id"] if isinstance(data.get("id"), str) and data["id"].strip() else f"(sessions row {n})"
        cfg = _json_object(data.get("model_config"))
        row.markers = {k: str(cfg[k]) for k in ("_branched_from", "_delegate_from", "_reset_from") if cfg.get(k)}
        return row

    def rows(self) -> dict[str, _Row]:
        """All sessions rows, with lineage markers and children, read once per run."""
        if self._rows is not None:
            return self._rows
        order = "ORDER BY s.started_at, s.id"
        try:
            raw = with_retry(lambda: self.conn.execute(self._session_sql(order)).fetchall())
            rows: dict[str, _Row] = {}
            for n, r in enumerate(raw, 1):
                row = self._make_row(r, n, self.conn)
                rows.setdefault(row.key, row)
        except sqlite3.DatabaseError as exc:
            raise NotAHermesDatabase(
                f"{self.path}: cannot read its sessions table ({exc}); if it is damaged, "
                f"`sqlite3 {self.path} .recover` can rescue what is left"
            ) from exc
        for row in rows.values():
            parent = row.data.get("parent_session_id")
            if parent in rows and parent != row.key:
                rows[parent].children.append(row.key)
        self._rows = rows
        return rows

    def preload_message_stats(self) -> None:
        """Read ``message_stats`` (and usage rows) for every session in one scan each.

        One GROUP BY over the messages index instead of a query per session: a re-run over 2,000
        sessions spent 0.2 s in those queries. The numbers are as of this call; a session that changes
        later gets a fingerprint older than its content, so the next run looks at it again.
        """
        sql = f"SELECT session_id, COUNT(*), MAX(id), {self._flags()} FROM messages GROUP BY session_id"
        self._stats = {r[0]: tuple(r) for r in with_retry(lambda: self.conn.execute(sql).fetchall())}
        self._usage = {}
        if "session_model_usage" in self.tables:
            for r in with_retry(lambda: self.conn.execute("SELECT * FROM session_model_usage").fetchall()):
                self._usage.setdefault(r["session_id"], []).append(_usage_key(r))

    def message_stats(self, ids: list[str]) -> list[tuple[Any, ...]]:
        """(session_id, message count, max row id, live rows, archived rows) per session with messages."""
        if self._stats is not None:
            return [self._stats[i] for i in sorted(ids) if i in self._stats]
        return self._stats_query(self.conn, ids)

    def _stats_query(self, conn: sqlite3.Connection, ids: list[str]) -> list[tuple[Any, ...]]:
        marks = ",".join("?" * len(ids))
        return [tuple(r) for r in with_retry(lambda: conn.execute(
            f"SELECT session_id, COUNT(*), MAX(id), {self._flags()} FROM messages "
            f"WHERE session_id IN ({marks}) GROUP BY session_id ORDER BY session_id", ids).fetchall())]

    def _flags(self) -> str:
        return "SUM(active), SUM(compacted)" if "compacted" in self.message_cols else "SUM(active), 0"

    def is_continuation(self, row: _Row) -> bool:
        """A legacy compression child: same logical session as its parent."""
        parent = self.rows().get(row.data.get("parent_session_id") or "")
        return (
            parent is not None
            and parent is not row
            and parent.data.get("end_reason") == "compression"
            and not row.markers
            and row.data.get("source") != "tool"
        )

    def chain(self, root_id: str) -> list[str]:
        """Follow continuation children forward from ``root_id`` (Hermes caps chains at 1000)."""
        rows, ids = self.rows(), [root_id]
        while len(ids) < 1000:
            nxt = [c for c in rows[ids[-1]].children if self.is_continuation(rows[c]) and c not in ids]
            if not nxt:
                break
            # Prefer a child that itself continued, then the most recently active one.
            nxt.sort(key=lambda c: (rows[c].data.get("end_reason") == "compression", _last_active(rows[c])))
            ids.append(nxt[-1])
        return ids

    def root_of(self, session_id: str) -> str:
        rows, sid, seen = self.rows(), session_id, set()
        while sid in rows and self.is_continuation(rows[sid]) and sid not in seen:  # a parent cycle ends it
            seen.add(sid)
            sid = rows[sid].data["parent_session_id"]
        return sid

    def logical_ids(self) -> list[str]:
        """Root ids of every logical session, oldest first."""
        ids = [sid for sid, row in self.rows().items() if not self.is_continuation(row)]
        # A continuation cycle (a → b → a, only a damaged table has one) has no root: its first row stands in.
        covered = {s for sid in ids for s in self.chain(sid)}
        for sid in self.rows():
            if sid not in covered:
                ids.append(sid)
                covered.update(self.chain(sid))
        return ids

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

    # ------------------------------------------------------------------ what a session is made of
    def state(self, root_id: str) -> dict[str, Any]:
        """What the logical session's note is made from, read without touching message bodies.

        The sessions rows of its chain, the aggregate of its message rows (count, max id, live and
        archived counts), its usage rows and its lineage. ``read_session_state`` returns the same
        dict for the snapshot it read, so a fingerprint of one equals a fingerprint of the other
        exactly when nothing a note shows has changed in between.
        """
        ids = self.chain(root_id)
        rows = self.rows()
        if self._usage is not None:
            usage = sorted((u for i in ids for u in self._usage.get(i, [])), key=_json_key)
        else:
            usage = sorted((_usage_key(u) for u in with_retry(lambda: self._usage_rows(self.conn, ids))), key=_json_key)
        return self._state([rows[i] for i in ids], self.message_stats(ids), usage, root_id)

    def _state(self, segments: list[_Row], stats: list[tuple[Any, ...]], usage: list[tuple[Any, ...]],
               root_id: str) -> dict[str, Any]:
        return {
            "sessions": [{k: v for k, v in r.data.items() if k != "_last_msg"} for r in segments],
            "messages": [list(s) for s in stats],
            "usage": [list(u) for u in usage],
            "lineage": self.lineage(root_id).model_dump(mode="json"),
        }

    # ------------------------------------------------------------------ one logical session
    def read_session(self, root_id: str) -> Session:
        return self.read_session_state(root_id)[0]

    def read_session_state(self, root_id: str) -> tuple[Session, dict[str, Any]]:
        """The logical session and its ``state``, both read in one snapshot.

        Raises ``SessionError`` when its sessions row cannot be distilled (see ``clean_session_row``).
        """
        rows = self.rows()
        segment_ids = self.chain(root_id)
        for sid in segment_ids:
            if rows[sid].error:
                raise SessionError(root_id, rows[sid].error or "")
        cols = ", ".join(f'"{c}"' for c in self.message_cols)
        where = "(active = 1 OR compacted = 1)" if "compacted" in self.message_cols else "active = 1"
        sql = f"SELECT {cols} FROM messages WHERE session_id = ? AND {where} ORDER BY id"
        one = self._session_sql("WHERE s.id = ?")

        def read() -> tuple[list[_Row], list[dict[str, Any]], list[sqlite3.Row], list[tuple[Any, ...]]]:
            with self.snapshot() as conn:
                # The sessions rows again, in the same snapshot as the messages: a note made of a
                # row from one moment and messages from another is a state that never existed.
                segments = []
                for n, sid in enumerate(segment_ids):
                    found = conn.execute(one, (sid,)).fetchone()
                    if found is None:
                        raise SessionError(root_id, f"session {sid} was deleted while this run read it")
                    segment = self._make_row(found, n, conn)
                    segment.markers, segment.children = rows[sid].markers, rows[sid].children
                    segments.append(segment)
                msg_rows = [r for sid in segment_ids for r in _dicts(conn, sql, (sid,))]
                usage = self._usage_rows(conn, segment_ids)
                stats = self._stats_query(conn, segment_ids)
            return segments, msg_rows, usage, stats

        try:
            segments, msg_rows, usage_rows, stats = with_retry(read)
        except sqlite3.DatabaseError as exc:
            raise SessionError(root_id, f"cannot read its rows from {self.path} ({exc})") from exc
        for seg in segments:
            if seg.error:
                raise SessionError(root_id, seg.error)
        problems: list[str] = [p for seg in segments for p in seg.problems]
        messages: list[Message] = []
        multi = len(segment_ids) > 1
        for r in sorted(msg_rows, key=lambda r: _order(r["id"])):
            messages.extend(decode_row(r, problems, segment=r["session_id"] if multi else None))
        messages = strip_harness(messages)
        usage = [_clean_usage(u, problems) for u in usage_rows]
        session = self._session(segments[0], segments, messages, usage, problems)
        return session, self._state(segments, stats, sorted((_usage_key(u) for u in usage_rows), key=_json_key), root_id)

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
        self, root: _Row, segments: list[_Row], messages: list[Message], usage_rows: list[dict[str, Any]],
        problems: list[str],
    ) -> Session:
        usage = tuple(
            ModelUsage(
                model=u.get("model") or "", provider=u.get("billing_provider") or None, task=u.get("task") or "",
                api_calls=u.get("api_call_count") or 0, input_tokens=u.get("input_tokens") or 0,
                output_tokens=u.get("output_tokens") or 0,
                cost_usd=u.get("actual_cost_usd") or u.get("estimated_cost_usd"),
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
    Values that are not numbers count as missing (the state.db reader reports them first).
    """
    to_dt = to_dt or _dt
    tip = segments[-1]

    def total(col: str) -> int:
        return sum(int(number(s.get(col)) or 0) for s in segments)

    def text(value: Any) -> str | None:
        return None if value is None else as_text(value)

    costs = [number(s.get("actual_cost_usd")) or number(s.get("estimated_cost_usd")) for s in segments]
    known = [c for c in costs if c is not None]
    return {
        "source": text(root.get("source")) or "unknown",
        "title": text(root.get("title")),
        "title_source": text(root.get("title_source")),
        "model": text(tip.get("model") or root.get("model")),
        "provider": text(tip.get("billing_provider") or root.get("billing_provider")),
        "started_at": to_dt(root.get("started_at")),
        "ended_at": to_dt(tip.get("ended_at")),
        "last_active_at": to_dt(last_active),
        "end_reason": text(tip.get("end_reason")),
        "cwd": text(root.get("cwd") or tip.get("cwd")),
        "git_branch": text(root.get("git_branch") or tip.get("git_branch")),
        "git_repo_root": text(root.get("git_repo_root")),
        "profile": text(root.get("profile_name")),
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


def _usage_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """A usage row as a sortable, JSON-able tuple (for fingerprints): every column but the session id."""
    return tuple(as_text(row[k]) if isinstance(row[k], bytes) else row[k] for k in row.keys() if k != "session_id")  # noqa: SIM118


def _json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _order(value: Any) -> tuple[int, Any]:
    # messages.id is an INTEGER PRIMARY KEY in Hermes; a hand-made table may hold anything there.
    return (0, value) if isinstance(value, int | float) else (1, str(value))


def _json_object(raw: Any) -> dict[str, Any]:
    value = load_json(raw) if isinstance(raw, str) and raw else None
    return value if isinstance(value, dict) else {}


def _last_active(row: _Row) -> float:
    d = row.data
    return max(number(d.get(k)) or 0.0 for k in ("started_at", "ended_at", "last_activity_at", "_last_msg"))


def _dt(epoch: Any) -> datetime | None:
    value = number(epoch)
    if value is None:
        return None
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return None


def _stamps(path: Path) -> list[tuple[int, int, int] | None]:
    out: list[tuple[int, int, int] | None] = []
    for suffix in ("", "-wal", "-journal"):
        try:
            st = os.stat(f"{path}{suffix}")
        except FileNotFoundError:
            out.append(None)
        else:
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return out


def read_sessions(db_path: Path, refs: list[str] | None = None) -> Iterator[Session]:
    """Convenience: yield logical sessions (all, or the given ids/titles) from one database."""
    with HermesDB(db_path) as db:
        ids = [db.resolve(r) for r in refs] if refs else db.logical_ids()
        for sid in dict.fromkeys(ids):
            yield db.read_session(sid)
