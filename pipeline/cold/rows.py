"""Rows exactly as stored: how a lineage's rows are found, read and written as text, losslessly.

A value is encoded by its SQLite storage class, never by its column's declared type (Hermes adds
columns without version bumps and SQLite lets any column hold any class):

* NULL → ``null``; INTEGER → a JSON integer; REAL → a JSON number with a fraction or exponent
  (Python's ``repr`` round-trips every double; ``±inf`` become ``{"f": "inf"}``);
* TEXT → a JSON string when it is valid UTF-8, else ``{"tx": base64}`` (real databases hold the
  odd invalid byte; it is put back with ``CAST(? AS TEXT)`` so the stored bytes do not change);
* BLOB → ``{"b": base64}``.

The connection's ``text_factory`` returns TEXT as ``_Text`` (a ``bytes`` subclass), so TEXT and
BLOB stay apart without a ``typeof()`` per column. One encoded row is a compact JSON array led by
its table name; comparing a sidecar with a database is comparing these lines.

A **unit** is what is archived, pruned and restored together: a session, its compression chain,
its branches and its sub-agents (every child through ``parent_session_id`` and every
``_delegate_from`` marker), but not ``/new`` reset children, which Hermes treats as a separate
conversation (``_reset_from``, or the legacy same-``session_key`` rule of ``hermes_state_common``).
"""

from __future__ import annotations

import base64
import json
import math
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pipeline.cold.errors import ColdError
from pipeline.errors import InputError, NotAHermesDatabase

T = TypeVar("T")

#: Hermes's own write discipline (hermes_state.SessionDB): a 1 s busy timeout, then up to 15
#: BEGIN IMMEDIATE attempts 20-150 ms apart at random, which breaks the convoy SQLite's
#: deterministic backoff creates between several writers.
BUSY_TIMEOUT_S = 1.0
WRITE_ATTEMPTS = 15
RETRY_MIN_S, RETRY_MAX_S = 0.020, 0.150
_TRANSIENT = ("locked", "busy", "disk i/o error", "schema has changed")

#: Columns through which a row of another table names a session (besides foreign keys).
SESSION_REF_COLUMNS = frozenset({
    "session_id", "parent_session_id", "origin_session_id", "origin_session", "child_session_id",
    "conversation_id",
})
#: Coordination state, not history: a live lock or lease makes prune refuse the unit; an expired
#: one is reclaimed by Hermes itself. Neither is archived.
COORDINATION_TABLES = frozenset({"compression_locks", "session_turn_leases"})
#: Hermes's reset boundaries (hermes_state_common._RESET_END_REASONS): a child of a parent that
#: ended so, sharing its session_key, is a /new reset child from before the ``_reset_from`` marker.
RESET_END_REASONS = frozenset({"session_reset", "session_switch", "idle", "daily", "suspended",
                               "resume_pending_expired"})
_FTS_SHADOW = ("_data", "_idx", "_content", "_docsize", "_config")


class _Text(bytes):
    """TEXT as the bytes SQLite stores, told apart from a BLOB by its type."""


# --------------------------------------------------------------------------- values


def encode_value(value: Any) -> Any:
    """One stored value as JSON data that decodes back to the same storage class and bytes."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"f": repr(value)}
    if isinstance(value, _Text):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"tx": base64.b64encode(value).decode("ascii")}
    if isinstance(value, bytes):
        return {"b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, str):  # a connection without our text_factory
        return value
    raise TypeError(f"unexpected SQLite value {type(value).__name__}")


def decode_value(data: Any) -> tuple[Any, str]:
    """JSON data → (the value to bind, the SQL placeholder that stores it with its class)."""
    if isinstance(data, dict):
        if "tx" in data:
            return base64.b64decode(data["tx"]), "CAST(? AS TEXT)"
        if "b" in data:
            return base64.b64decode(data["b"]), "?"
        if "f" in data:
            return float(data["f"]), "?"
        raise ValueError(f"unknown value tag {sorted(data)}")
    if isinstance(data, bool):  # never written; a hand-edited file
        raise ValueError("boolean is not an SQLite value")
    return data, "?"


def encode_row(table: str, values: Sequence[Any]) -> str:
    return json.dumps([table, *map(encode_value, values)], ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False)


def value_bytes(value: Any) -> int:
    """Bytes a value takes as data (text and blobs by length, numbers 8): the 'raw row size'."""
    if value is None:
        return 0
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return 8


# --------------------------------------------------------------------------- connections


def is_transient(exc: sqlite3.OperationalError) -> bool:
    return any(s in str(exc).lower() for s in _TRANSIENT)


def with_retry(fn: Callable[[], T], *, attempts: int = WRITE_ATTEMPTS) -> T:
    """Run ``fn``, retrying with Hermes's jitter while another connection holds the lock."""
    for attempt in range(attempts):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if attempt == attempts - 1 or not is_transient(exc):
                raise
            time.sleep(random.uniform(RETRY_MIN_S, RETRY_MAX_S))
    raise AssertionError("unreachable")


def check_sqlite_file(path: Path) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such file; pass --db PATH or set HERMES_HOME to your Hermes home")
    if not path.is_file():
        raise InputError(f"{path}: not a file; pass the state.db file itself with --db")
    with path.open("rb") as fh:
        if fh.read(16) != b"SQLite format 3\x00":
            raise NotAHermesDatabase(f"{path}: not an SQLite database; pass a Hermes state.db with --db")


def connect(path: Path, *, write: bool) -> sqlite3.Connection:
    """A connection for cold storage: raw TEXT, autocommit (we issue BEGIN ourselves).

    Read-only connections use Hermes's ``read_only_db_uri`` form; writers set ``foreign_keys``
    as Hermes does, so the same cascades and checks apply to our deletes and inserts.
    """
    path = Path(path).expanduser()
    if write:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        conn.execute("PRAGMA foreign_keys=ON")
    else:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                               isolation_level=None)
        conn.execute("PRAGMA query_only=1")
    conn.text_factory = _Text
    return conn


def begin_immediate(conn: sqlite3.Connection) -> None:
    """Take the write lock at the start of the transaction, retrying the way Hermes does."""
    with_retry(lambda: conn.execute("BEGIN IMMEDIATE"))


def _s(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


# --------------------------------------------------------------------------- the schema


@dataclass(frozen=True)
class Table:
    """A table that holds rows of a session, with what we need to read and restore them."""

    name: str
    columns: tuple[str, ...]
    #: columns whose value names a session id
    refs: tuple[str, ...]
    #: primary-key columns (a row's identity when restoring), () for none
    pk: tuple[str, ...]
    #: prune deletes its rows (it has a foreign key to sessions, like messages): Hermes's delete
    #: removes these, and with foreign_keys on a session cannot go while they remain
    owned: bool

    def select(self) -> str:
        return ", ".join(f'"{c}"' for c in self.columns)


@dataclass
class Schema:
    """What one database holds, by ``PRAGMA table_info``/``foreign_key_list``, never by version."""

    version: int | None
    tables: dict[str, Table]  # sessions, messages, then other tables that name a session
    has_system_prompts: bool
    session_columns: tuple[str, ...]
    #: sqlite_master entries (type, name, tbl_name, sql) to recreate the database in a new file
    ddl: list[tuple[str, str, str, str]] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return list(self.tables)


def _columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, int]]:
    return [(_s(r[1]), int(r[5])) for r in conn.execute(f'PRAGMA table_info("{table}")')]


def read_schema(conn: sqlite3.Connection, path: Path) -> Schema:
    master = [tuple(_s(v) if v is not None else "" for v in r) for r in conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid")]
    names = {name for kind, name, _, _ in master if kind == "table"}
    if not {"sessions", "messages"} <= names:
        raise NotAHermesDatabase(f"{path}: no Hermes 'sessions'/'messages' tables; pass a Hermes state.db with --db")
    virtual = {name for kind, name, _, sql in master if kind == "table" and sql.upper().startswith("CREATE VIRTUAL")}
    shadow = {f"{v}{suffix}" for v in virtual for suffix in _FTS_SHADOW}
    tables: dict[str, Table] = {}
    order = ["sessions", "messages", *sorted(names - {"sessions", "messages"})]
    for name in order:
        if name.startswith("sqlite_") or name in virtual or name in shadow or name in COORDINATION_TABLES:
            continue
        if name == "system_prompts":
            continue  # referenced by hash from sessions; handled on its own
        cols = _columns(conn, name)
        colnames = tuple(c for c, _ in cols)
        pk = tuple(c for c, n in sorted((c for c in cols if c[1]), key=lambda c: c[1]))
        if name == "sessions":
            tables[name] = Table(name, colnames, ("id",), ("id",), owned=True)
            continue
        fks = [(_s(r[2]), _s(r[3])) for r in conn.execute(f'PRAGMA foreign_key_list("{name}")')]
        fk_cols = tuple(c for target, c in fks if target == "sessions")
        refs = tuple(dict.fromkeys((*fk_cols, *(c for c in colnames if c in SESSION_REF_COLUMNS))))
        if refs:
            tables[name] = Table(name, colnames, refs, pk, owned=bool(fk_cols))
    version = None
    if "schema_version" in names:
        row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        version = int(row[0]) if row and row[0] is not None else None
    ddl = [(kind, name, tbl, sql) for kind, name, tbl, sql in master
           if sql and not name.startswith("sqlite_") and name not in shadow]
    return Schema(version=version, tables=tables, has_system_prompts="system_prompts" in names,
                  session_columns=tables["sessions"].columns, ddl=ddl)


SYSTEM_PROMPTS = Table("system_prompts", ("hash", "prompt"), (), ("hash",), owned=False)


# --------------------------------------------------------------------------- units


@dataclass(frozen=True)
class SessionInfo:
    id: str
    parent: str | None
    source: str
    markers: dict[str, str]
    end_reason: str | None
    session_key: str | None
    started_at: float
    ended_at: float | None
    last_active: float
    pinned: bool
    has_messages: bool = True


@dataclass(frozen=True)
class Unit:
    """Sessions archived, pruned and restored together; ``ids`` lists parents before children."""

    root: str
    ids: tuple[str, ...]
    kinds: dict[str, str]
    #: newest activity of any member (started, ended, last activity, last message), epoch seconds
    last_active: float = 0.0
    #: sessions outside the unit whose parent is in it (reset children): (child, parent). Hermes
    #: orphans them on delete; pull links them back.
    external_children: tuple[tuple[str, str], ...] = ()


def _json_object(raw: Any) -> dict[str, Any]:
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if not raw or not isinstance(raw, str):
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class Sessions:
    """The sessions table of one database, read once, grouped into units."""

    def __init__(self, conn: sqlite3.Connection, schema: Schema) -> None:
        cols = set(schema.session_columns)

        def col(name: str, default: str = "NULL") -> str:
            return f's."{name}"' if name in cols else default

        sql = (
            f"SELECT s.id, s.parent_session_id, s.source, {col('model_config')}, s.end_reason, "
            f"{col('session_key')}, s.started_at, s.ended_at, {col('last_activity_at')}, {col('pinned', '0')}, "
            "(SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = s.id) FROM sessions s"
        )
        self.info: dict[str, SessionInfo] = {}
        for r in with_retry(lambda: conn.execute(sql).fetchall()):
            cfg = _json_object(r[3])
            markers = {k: str(cfg[k]) for k in ("_branched_from", "_delegate_from", "_reset_from") if cfg.get(k)}
            stamps = [float(v) for v in (r[6], r[7], r[8], r[10]) if isinstance(v, int | float)]
            sid = _s(r[0])
            self.info[sid] = SessionInfo(
                id=sid, parent=_s(r[1]) if r[1] is not None else None, source=_s(r[2] or b""), markers=markers,
                end_reason=_s(r[4]) if r[4] is not None else None, session_key=_s(r[5]) if r[5] else None,
                started_at=float(r[6]) if isinstance(r[6], int | float) else 0.0,
                ended_at=float(r[7]) if isinstance(r[7], int | float) else None,
                last_active=max(stamps) if stamps else 0.0, pinned=bool(r[9]), has_messages=r[10] is not None,
            )
        self._units: dict[str, Unit] | None = None
        self._member: dict[str, Unit] | None = None

    def _is_reset_child(self, child: SessionInfo) -> bool:
        if "_reset_from" in child.markers:
            return True
        parent = self.info.get(child.parent or "")
        return bool(parent and parent.end_reason in RESET_END_REASONS and child.session_key
                    and child.session_key == parent.session_key)

    def _up(self, s: SessionInfo) -> str | None:
        """The session this one belongs under in its unit, if any."""
        delegate = s.markers.get("_delegate_from")
        if delegate and delegate in self.info and delegate != s.id:
            return delegate
        if s.parent and s.parent in self.info and s.parent != s.id and not self._is_reset_child(s):
            return s.parent
        return None

    def units(self) -> dict[str, Unit]:
        """Every unit, keyed by root id."""
        if self._units is not None:
            return self._units
        up = {sid: self._up(s) for sid, s in self.info.items()}
        down: dict[str, list[str]] = {}
        for sid, parent in up.items():
            if parent:
                down.setdefault(parent, []).append(sid)
        kids: dict[str, list[str]] = {}  # every child by parent_session_id, reset children included
        for s in self.info.values():
            if s.parent:
                kids.setdefault(s.parent, []).append(s.id)

        def top(sid: str) -> str:
            seen = {sid}
            while (nxt := up[sid]) and nxt not in seen:  # a cycle (corrupt lineage) stops here
                seen.add(nxt)
                sid = nxt
            return sid

        roots: dict[str, list[str]] = {}
        for sid in self.info:
            roots.setdefault(top(sid), []).append(sid)
        units: dict[str, Unit] = {}
        for root, members in roots.items():
            order, queue, seen = [], [root], {root}
            while queue:
                sid = queue.pop(0)
                order.append(sid)
                for kid in sorted(down.get(sid, []), key=lambda k: (self.info[k].started_at, k)):
                    if kid not in seen:
                        seen.add(kid)
                        queue.append(kid)
            order.extend(sorted(set(members) - seen))  # members of a cycle: keep them, last
            member_set = set(order)
            external = tuple(sorted((kid, parent) for parent in order for kid in kids.get(parent, ())
                                    if kid not in member_set))
            units[root] = Unit(root=root, ids=tuple(order), kinds={sid: self.kind(sid) for sid in order},
                               last_active=max(self.info[s].last_active for s in order),
                               external_children=external)  # type: ignore[arg-type]
        self._units = units
        return units

    def kind(self, sid: str) -> str:
        s = self.info[sid]
        if "_delegate_from" in s.markers or s.source == "subagent":
            return "subagent"
        if "_branched_from" in s.markers:
            return "branch"
        parent = self.info.get(s.parent or "")
        if parent and parent.end_reason == "compression":
            return "continuation"
        return "child" if s.parent else "root"

    def forget(self, ids: Iterable[str]) -> None:
        """The sessions were deleted in the caller's transaction: drop them and their units.

        Only when a unit loses some members and keeps others (not what prune does) is everything
        regrouped; otherwise the other units stand as they are (regrouping 2,000 sessions after each
        of 2,000 deletes was most of a prune's time).
        """
        gone = set(ids)
        for sid in gone:
            self.info.pop(sid, None)
        if self._units is None:
            return
        member = self._members()
        hit = {member[sid].root for sid in gone if sid in member}
        if any(set(self._units[root].ids) - gone for root in hit):
            self._units = self._member = None
            return
        for root in hit:
            for sid in self._units.pop(root).ids:
                member.pop(sid, None)

    def _members(self) -> dict[str, Unit]:
        if self._member is None:
            self._member = {m: unit for unit in self.units().values() for m in unit.ids}
        return self._member

    def unit_of(self, sid: str) -> Unit:
        member = self._members()
        if sid in member:
            return member[sid]
        raise ColdError(f"{sid}: no such session in this database; `hermes sessions list` shows ids")


# --------------------------------------------------------------------------- reading a unit's rows


def _chunks(items: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def read_rows(conn: sqlite3.Connection, schema: Schema, ids: Sequence[str]) -> dict[str, list[tuple[Any, ...]]]:
    """Every stored row of every table that names one of ``ids``, read on ``conn`` (the caller
    holds the transaction). Sessions come in ``ids`` order, messages by id, other tables sorted
    by their encoded form: the order a sidecar stores them in."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for name, table in schema.tables.items():
        rows: list[tuple[Any, ...]] = []
        for chunk in _chunks(list(ids)):
            marks = ",".join("?" * len(chunk))
            where = " OR ".join(f'"{c}" IN ({marks})' for c in table.refs)
            rows.extend(conn.execute(f'SELECT {table.select()} FROM "{name}" WHERE {where}',
                                     list(chunk) * len(table.refs)).fetchall())
        if name == "sessions":
            pos = {sid: i for i, sid in enumerate(ids)}
            rows.sort(key=lambda r: pos[_s(r[0])])
        elif name == "messages":
            rows = sorted({r[0]: r for r in rows}.values(), key=lambda r: r[0])
        else:
            rows = sorted(set(rows), key=lambda r: encode_row(name, r))
        out[name] = rows
    if schema.has_system_prompts:
        cols = schema.session_columns
        hashes = sorted({_s(v) for r in out["sessions"] for c in ("system_prompt_hash", "tool_names")
                         if c in cols and (v := r[cols.index(c)]) is not None})
        prompts: list[tuple[Any, ...]] = []
        for chunk in _chunks(hashes):
            prompts.extend(conn.execute(
                f"SELECT hash, prompt FROM system_prompts WHERE hash IN ({','.join('?' * len(chunk))})",
                list(chunk)).fetchall())
        out["system_prompts"] = sorted(prompts, key=lambda r: encode_row("system_prompts", r))
    return out


def owner_ids(table: Table, schema_columns: Sequence[str], row: Sequence[Any]) -> set[str]:
    """The session ids a row names through its reference columns."""
    return {_s(row[schema_columns.index(c)]) for c in table.refs if row[schema_columns.index(c)] is not None}


def prompt_hashes(session_columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> set[str]:
    out = set()
    for r in rows:
        for c in ("system_prompt_hash", "tool_names"):
            if c in session_columns and (v := r[session_columns.index(c)]) is not None:
                out.add(_s(v))
    return out
