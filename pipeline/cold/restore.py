"""``pull``: a sidecar's rows back into a Hermes ``state.db``, byte for byte.

Into the user's database or a new file (built from the sidecar's own DDL, FTS tables and triggers
included, in a temp file renamed into place when complete). Everything is one ``BEGIN
IMMEDIATE`` transaction with Hermes's write discipline, so a crash leaves the database as it was.

Ids are kept where they are free and remapped consistently where they are not:

* a session already present with identical rows is left alone (pulling twice is harmless);
* a session id taken by different rows gets ``<id>-restored`` (``-restored-2``, ...), and every
  reference to it follows: children's ``parent_session_id``, the lineage markers in
  ``model_config``, messages, usage rows;
* if any message id is taken, the unit's messages get fresh ids in their original order (and
  ``display_order``, which names the first id of a logical message, follows);
* a title another session now holds gets `` (restored)``; a parent outside the unit that no
  longer exists becomes NULL, as Hermes's own delete leaves such children.

Hermes's triggers run on the inserts (FTS, display order, message uids); any column a trigger
changed is set back to the archived value and every restored row is compared with the sidecar
before the commit.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.atomic import fsync_dirs
from pipeline.cold.errors import ColdError, SchemaMismatch
from pipeline.cold.notes import sweep_temps
from pipeline.cold.rows import (
    Schema,
    Table,
    begin_immediate,
    check_sqlite_file,
    connect,
    decode_value,
    encode_row,
    read_rows,
    read_schema,
)
from pipeline.cold.sidecar import Sidecar
from pipeline.cold.steps import step

MARKERS = ("_branched_from", "_delegate_from", "_reset_from")


@dataclass
class PullResult:
    db: str
    sidecar: str
    note: str | None = None
    created: bool = False
    restored: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    remapped: dict[str, str] = field(default_factory=dict)
    messages_renumbered: bool = False
    rows: dict[str, int] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)


def _view(target: Schema, side: Sidecar) -> Schema:
    """The target's tables seen through the sidecar's columns, or ``SchemaMismatch``."""
    tables: dict[str, Table] = {}
    for name, cols in side.columns.items():
        if name == "system_prompts":
            if not target.has_system_prompts and side.lines.get(name):
                raise SchemaMismatch("the target database has no system_prompts table (an older Hermes) but the "
                                     "archive refers to prompts in it; pull --into-db NEW.db instead")
            continue
        have = target.tables.get(name)
        if have is None:
            raise SchemaMismatch(f"the target database has no {name} table; pull --into-db NEW.db instead")
        missing = [c for c in cols if c not in have.columns]
        if missing:
            raise SchemaMismatch(f"the target database's {name} table lacks {', '.join(missing)} (an older Hermes "
                                 "schema); restoring would drop them: pull --into-db NEW.db instead")
        tables[name] = Table(name, tuple(cols), have.refs, have.pk, have.owned)
    return Schema(version=target.version, tables=tables, has_system_prompts="system_prompts" in side.columns,
                  session_columns=tables["sessions"].columns)


def _free_id(conn: sqlite3.Connection, sid: str) -> str:
    n = 1
    while True:
        candidate = f"{sid}-restored" if n == 1 else f"{sid}-restored-{n}"
        if not conn.execute("SELECT 1 FROM sessions WHERE id = ?", (candidate,)).fetchone():
            return candidate
        n += 1


class _Restore:
    def __init__(self, conn: sqlite3.Connection, side: Sidecar, view: Schema, result: PullResult) -> None:
        self.conn, self.side, self.view, self.result = conn, side, view, result
        self.cols = {name: list(cols) for name, cols in side.columns.items()}
        self.sid_map: dict[str, str] = {}
        self.mid_map: dict[int, int] = {}
        self.retitled: dict[str, str] = {}  # restored session id → the title it got here

    def run(self) -> None:
        conn, side, view = self.conn, self.side, self.view
        present = read_rows(conn, view, side.sessions)
        have = {r[0].decode() if isinstance(r[0], bytes) else r[0]: r for r in present["sessions"]}
        todo: list[str] = []
        for sid in side.sessions:
            if sid not in have:
                todo.append(sid)
            elif self._identical(sid, present):
                self.result.already.append(sid)
            else:
                self.sid_map[sid] = _free_id(conn, sid)
                todo.append(sid)
        if not todo:
            return
        for sid in todo:
            self.sid_map.setdefault(sid, sid)
        self._renumber_messages(todo)
        self._insert_prompts()
        self._insert_sessions(todo)
        for name in view.tables:
            if name != "sessions":
                self._insert_table(name, todo)
        self._fix_and_check(todo)
        self._relink()
        self.result.restored = [self.sid_map[s] for s in todo]
        self.result.remapped = {a: b for a, b in self.sid_map.items() if a != b}

    # ------------------------------------------------------------------ deciding

    def _identical(self, sid: str, present: dict[str, list[tuple[Any, ...]]]) -> bool:
        for name, table in self.view.tables.items():
            if name != "sessions" and not table.owned:
                continue
            idx = [self.cols[name].index(c) for c in table.refs]
            got = [encode_row(name, r) for r in present[name]
                   if any((v.decode() if isinstance(v, bytes) else v) == sid for v in (r[i] for i in idx))]
            want = [self._as_orphaned(name, line) for line in self.side.lines.get(name, ())
                    if any(json.loads(line)[1:][i] == sid for i in idx)]
            if got != want:
                return False
        return True

    def _as_orphaned(self, name: str, line: str) -> str:
        """A sessions line as it stands here if Hermes orphaned it (its parent deleted): still the same row."""
        cols = self.cols[name]
        if name != "sessions" or "parent_session_id" not in cols:
            return line
        row = json.loads(line)
        i = cols.index("parent_session_id") + 1
        if isinstance(row[i], str) and not self.conn.execute("SELECT 1 FROM sessions WHERE id = ?", (row[i],)).fetchone():
            row[i] = None
            return json.dumps(row, ensure_ascii=False, separators=(",", ":"))
        return line

    def _renumber_messages(self, todo: Sequence[str]) -> None:
        cols = self.cols["messages"]
        sidx = cols.index("session_id")
        ids = [row[0] for row in self.side.rows("messages") if row[sidx] in todo]
        taken = False
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            if self.conn.execute(f"SELECT 1 FROM messages WHERE id IN ({','.join('?' * len(chunk))}) LIMIT 1",
                                 chunk).fetchone():
                taken = True
                break
        if not taken:
            return
        top = self.conn.execute("SELECT MAX(id) FROM messages").fetchone()[0] or 0
        with contextlib.suppress(sqlite3.OperationalError):
            seq = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
            top = max(top, seq[0] if seq else 0)
        self.mid_map = {old: top + n for n, old in enumerate(sorted(ids), start=1)}
        self.result.messages_renumbered = True
        self.result.notices.append(f"message ids {min(ids)}..{max(ids)} are taken here: restored as "
                                   f"{top + 1}..{top + len(ids)}, in the same order")

    # ------------------------------------------------------------------ rows, remapped

    def _remap(self, name: str, row: list[Any]) -> list[Any]:
        cols = self.cols[name]
        row = list(row)
        table = self.view.tables.get(name)
        for c in (table.refs if table else ()):
            i = cols.index(c)
            if isinstance(row[i], str) and row[i] in self.sid_map:
                row[i] = self.sid_map[row[i]]
        if name == "sessions":
            i = cols.index("id")
            row[i] = self.sid_map.get(row[i], row[i])
            if "parent_session_id" in cols:
                p = cols.index("parent_session_id")
                parent = row[p]
                if isinstance(parent, str):
                    if parent in self.sid_map:
                        row[p] = self.sid_map[parent]
                    elif not self.conn.execute("SELECT 1 FROM sessions WHERE id = ?", (parent,)).fetchone():
                        row[p] = None
                        self.result.notices.append(f"{row[i]}: its parent {parent} is not in this database; "
                                                   "restored without the link, as Hermes leaves orphaned children")
            if row[i] in self.retitled:
                row[cols.index("title")] = self.retitled[row[i]]
            if "model_config" in cols and isinstance(row[cols.index("model_config")], str):
                row[cols.index("model_config")] = self._remap_markers(row[cols.index("model_config")])
        if name == "messages" and self.mid_map:
            i = cols.index("id")
            row[i] = self.mid_map.get(row[i], row[i])
            if "display_order" in cols:
                d = cols.index("display_order")
                if isinstance(row[d], int):
                    row[d] = self.mid_map.get(row[d], row[d])
        return row

    def _remap_markers(self, text: str) -> str:
        try:
            cfg = json.loads(text)
        except ValueError:
            return text
        if not isinstance(cfg, dict):
            return text
        for key in MARKERS:
            old = cfg.get(key)
            if isinstance(old, str) and self.sid_map.get(old, old) != old:
                # Only the marker's value changes; the rest of the JSON text keeps its bytes.
                text = text.replace(f'"{key}": {json.dumps(old)}', f'"{key}": {json.dumps(self.sid_map[old])}')
                text = text.replace(f'"{key}":{json.dumps(old)}', f'"{key}":{json.dumps(self.sid_map[old])}')
        return text

    def _insert(self, name: str, row: Sequence[Any]) -> None:
        values, marks = zip(*(decode_value(v) for v in row), strict=True) if row else ((), ())
        cols = ", ".join(f'"{c}"' for c in self.cols[name])
        self.conn.execute(f'INSERT INTO "{name}" ({cols}) VALUES ({", ".join(marks)})', values)
        self.result.rows[name] = self.result.rows.get(name, 0) + 1

    def _insert_prompts(self) -> None:
        for row in self.side.rows("system_prompts"):
            got = self.conn.execute("SELECT prompt FROM system_prompts WHERE hash = ?", (row[0],)).fetchone()
            if got is None:
                self._insert("system_prompts", row)
            elif encode_row("system_prompts", [row[0], got[0]]) != json.dumps(["system_prompts", *row],
                                                                                ensure_ascii=False, separators=(",", ":")):
                raise ColdError(f"system prompt {row[0]} exists here with other text; this database is not one "
                                "the archive can join: pull --into-db NEW.db instead")

    def _insert_sessions(self, todo: Sequence[str]) -> None:
        cols = self.cols["sessions"]
        title = cols.index("title") if "title" in cols else None
        for row in self.side.rows("sessions"):
            if row[0] not in todo:
                continue
            row = self._remap("sessions", row)
            if title is not None and isinstance(row[title], str):
                clash = self.conn.execute("SELECT id FROM sessions WHERE title = ?", (row[title],)).fetchone()
                if clash:
                    new, n = f"{row[title]} (restored)", 2
                    while self.conn.execute("SELECT 1 FROM sessions WHERE title = ?", (new,)).fetchone():
                        new, n = f"{row[title]} (restored {n})", n + 1
                    self.result.notices.append(f"{row[0]}: title {row[title]!r} is taken here; restored as {new!r}")
                    row[title] = self.retitled[row[0]] = new
            self._insert("sessions", row)

    def _insert_table(self, name: str, todo: Sequence[str]) -> None:
        table = self.view.tables[name]
        cols = self.cols[name]
        idx = [cols.index(c) for c in table.refs]
        for row in self.side.rows(name):
            if table.owned and not any(row[i] in todo for i in idx):
                continue
            row = self._remap(name, row)
            if not table.owned:
                key = table.pk or tuple(cols)
                where = " AND ".join(f'"{c}" IS ?' for c in key)
                select = ", ".join(f'"{c}"' for c in cols)
                have = self.conn.execute(f'SELECT {select} FROM "{name}" WHERE {where}',
                                         [decode_value(row[cols.index(c)])[0] for c in key]).fetchone()
                if have is not None:
                    if encode_row(name, have) != json.dumps([name, *row], ensure_ascii=False, separators=(",", ":")):
                        raise ColdError(f"{name}: a row with the same key and other values exists here; "
                                        "pull --into-db NEW.db instead")
                    continue
            self._insert(name, row)

    # ------------------------------------------------------------------ after the inserts

    def _fix_and_check(self, todo: Sequence[str]) -> None:
        """Undo what triggers changed in restored rows, then compare every restored row."""
        new_ids = [self.sid_map[s] for s in todo]
        expected = {name: [json.dumps([name, *self._remap(name, r)], ensure_ascii=False, separators=(",", ":"))
                           for r in self.side.rows(name) if self._belongs(name, r, todo)]
                    for name in self.view.tables}
        for _ in range(2):
            got = read_rows(self.conn, self.view, new_ids)
            bad = {name: (expected[name], [encode_row(name, r) for r in got[name]]) for name in self.view.tables}
            bad = {n: v for n, v in bad.items() if v[0] != v[1]}
            if not bad:
                return
            for name, (want, have) in bad.items():
                if name not in ("messages", "sessions") or len(want) != len(have):
                    break
                cols = self.cols[name]
                for w, h in zip(want, have, strict=True):
                    if w == h:
                        continue
                    wv, hv = json.loads(w)[1:], json.loads(h)[1:]
                    changed = [i for i in range(len(cols)) if wv[i] != hv[i]]
                    sets = ", ".join(f'"{cols[i]}" = {decode_value(wv[i])[1]}' for i in changed)
                    self.conn.execute(f'UPDATE "{name}" SET {sets} WHERE id = ?',
                                      [decode_value(wv[i])[0] for i in changed] + [decode_value(wv[0])[0]])
        table = next(iter(bad))
        raise ColdError(f"restored {table} rows differ from the sidecar after the insert (a trigger of this "
                        "database rewrote them); nothing was restored: pull --into-db NEW.db instead")

    def _belongs(self, name: str, row: Sequence[Any], todo: Sequence[str]) -> bool:
        table = self.view.tables[name]
        if name == "sessions":
            return row[0] in todo
        idx = [self.cols[name].index(c) for c in table.refs]
        return any(row[i] in todo for i in idx)

    def _relink(self) -> None:
        for child, parent in self.side.header.get("external_children") or []:
            new_parent = self.sid_map.get(parent)
            if new_parent is None:
                continue
            cur = self.conn.execute("UPDATE sessions SET parent_session_id = ? WHERE id = ? AND parent_session_id IS NULL",
                                    (new_parent, child))
            if cur.rowcount:
                self.result.notices.append(f"{child}: linked back to its parent {new_parent}")


def _create(path: Path, side: Sidecar, result: PullResult) -> None:
    """A new Hermes database from the sidecar's DDL (virtual tables needing an extension we lack,
    like the CJK FTS, are left out with their triggers, and said so)."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        skipped: set[str] = set()
        conn.execute("BEGIN")
        for kind, name, tbl, sql in side.header.get("ddl") or []:
            if tbl in skipped or any(s in sql for s in skipped if kind == "trigger"):
                continue
            try:
                conn.execute(sql)
            except sqlite3.OperationalError as exc:
                if kind == "table" and sql.upper().startswith("CREATE VIRTUAL"):
                    skipped.add(name)
                    result.notices.append(f"left out {name} ({exc}); Hermes rebuilds its search index on open")
                    continue
                raise ColdError(f"cannot recreate the archived schema ({name}: {exc})") from exc
        if side.header.get("schema_version") is not None:
            conn.execute("INSERT INTO schema_version(version) VALUES (?)", (side.header["schema_version"],))
        conn.execute("COMMIT")
    finally:
        conn.close()


def restore(side: Sidecar, into: Path, *, conn: sqlite3.Connection | None = None) -> PullResult:
    """Put ``side``'s rows into ``into`` (created if missing); see the module docstring.

    ``conn``: an open write connection to ``into`` to reuse (pulling many lineages: closing the last
    connection of a WAL database checkpoints it, 30 ms a lineage); the caller closes it.
    """
    into = Path(into).expanduser()
    result = PullResult(db=str(into), sidecar=str(side.path))
    target, tmp = into, None
    if not into.exists():
        sweep_temps(into)  # a pull killed while building a new file left its temp copy
        if not into.parent.is_dir():
            raise ColdError(f"--into-db {into}: directory {into.parent} does not exist; create it first")
        fd, name = tempfile.mkstemp(dir=into.parent, prefix=f".{into.name}.", suffix=".tmp")
        os.close(fd)
        tmp = target = Path(name)
        result.created = True
        _create(target, side, result)
    else:
        check_sqlite_file(into)
    try:
        own = conn is None or tmp is not None
        db = connect(target, write=True) if own else conn
        assert db is not None
        try:
            view = _view(read_schema(db, target), side)
            begin_immediate(db)
            try:
                _Restore(db, side, view, result).run()
                step("pull-inserted")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        finally:
            if own:
                db.close()
        if tmp is not None:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, into)
            fsync_dirs([into.parent])
            tmp = None
        step("pull-committed")
    finally:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    return result
