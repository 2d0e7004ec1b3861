"""The archive index: ``<out>/.distill/archive/index.db``, one SQLite file beside the notes.

The notes are the truth; this file is derived from them and can always be deleted. It holds

* ``notes``: one row per Markdown file under the archive with its ``stat`` (mtime, size, inode)
  and, for session notes, the frontmatter fields ``ls`` filters on and the text ``search`` reads;
* ``notes_fts`` (Porter-stemmed ``unicode61``) and ``notes_fts_trigram`` (``trigram``, for Chinese
  and substrings, as Hermes's own ``messages_fts_trigram``): FTS5 tables over title, goal and text,
  kept in step with ``notes`` by ``refresh`` in the same transaction, one statement per table and batch
  (per-row triggers cost twice as much: 0.68 s against 0.31 s for a cold run's 1,810 notes);
* ``vectors``: multilingual-e5-small embeddings of each note's goal and decisions, keyed by the
  text's hash, so a note whose goal did not change keeps its vector across edits.

**Incremental.** ``refresh`` stats every file (a few milliseconds for 2,000 notes) and reads only
the files whose ``(mtime_ns, size, inode)`` differ from their row: a note distill re-rendered
(an atomic replace gives it a new inode), one a person edited in Obsidian (new mtime), a new
one; rows of deleted files are dropped. The stat is taken before the file is read, so a write
racing the read is seen again on the next refresh. Every command that reads the index refreshes
it first; two processes refreshing at once serialise on SQLite's write lock
(``BEGIN IMMEDIATE``), and the second finds nothing left to do.

**Fed by the run.** The worker that rendered a note also computes its row (``session_row``, from the
note's data rather than by parsing the YAML it just wrote) and the run stages it (``stage``: the row in
``staged`` with the ``stat`` of the file it describes, taken from the written temp file before its
rename). ``refresh`` takes a staged row instead of reading the file when the file's ``stat`` is
exactly the staged one, and reads it otherwise; rows still get their rowids in scan order, so the
index is the one a refresh that read every note would build.

**Never an error.** A missing index is built; one SQLite cannot read, or with an older schema, is
deleted and rebuilt; a read-only archive gets an index in memory for the length of the command.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from pipeline.archive.notefile import NoteFile, NoteRecord, read_note, record_of
from pipeline.notes.frontmatter import FrontmatterError

if TYPE_CHECKING:
    import sqlite_utils

    from pipeline.skills.evidence import Evidence

#: ``<out>/.distill/archive/index.db``: a folder of its own, so the WAL files SQLite creates and removes
#: on every open do not move ``.distill``'s mtime, which an unchanged re-run's record watches
#: (``pipeline.cli.record``).
ARCHIVE_DIR = "archive"
INDEX_FILE = "index.db"
#: Bump when the tables change: an index with another version is rebuilt, not migrated (it is derived).
#: 2: the FTS tables are filled by ``refresh`` (no triggers). 3: ``staged`` rows from the run's workers.
SCHEMA_VERSION = 3
#: Top-level folders of the archive that hold no session notes: distill's own, and a vault's hidden ones.
SKIP_DIRS = frozenset({"skills", "projects"})

#: Rows read and inserted per ``executemany``: memory stays flat in the number of notes read at once.
INSERT_BATCH = 200

#: Columns of ``notes`` that hold a list, stored as JSON text.
LIST_COLUMNS = ("projects", "tags", "decisions", "output_files", "open_items")

#: The FTS tables over ``notes`` (external content: ``refresh`` adds and removes their entries; one
#: statement each, since ``executescript`` would commit the transaction they are created in).
_FTS_TABLES = ("notes_fts", "notes_fts_trigram")
_FTS = (
    """CREATE VIRTUAL TABLE notes_fts USING fts5(title, goal, text, content='notes', content_rowid='n',
        tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE VIRTUAL TABLE notes_fts_trigram USING fts5(title, goal, text, content='notes', content_rowid='n',
        tokenize='trigram')""",
)


class IndexStats(BaseModel):
    """What one ``refresh`` did. ``read`` counts files opened: the incremental promise is read == changed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    notes: int
    scanned: int
    read: int
    removed: int
    rebuilt: bool = False
    in_memory: bool = False
    problems: tuple[str, ...] = ()
    elapsed_s: float = 0.0


Stat = tuple[int, int, int]


def scan(out: Path) -> dict[str, Stat]:
    """Relative path → (mtime_ns, size, inode) of every ``.md`` file that may be a session note.

    Hidden folders (``.distill``, ``.git``, ``.obsidian``, ``.trash``) and distill's own
    ``skills/`` and ``projects/`` are skipped; so are temp files (``.name.tmp``).
    """
    found: dict[str, Stat] = {}
    stack: list[tuple[str, str]] = [(str(out), "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            rel = prefix + name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not (prefix == "" and name in SKIP_DIRS):
                        stack.append((entry.path, rel + "/"))
                elif name.endswith(".md") and entry.is_file():
                    st = entry.stat()
                    found[rel] = (st.st_mtime_ns, st.st_size, st.st_ino)
            except OSError:
                continue  # vanished while listing: gone next time too
    return found


class ArchiveIndex:
    """The index of one archive folder. Use as a context manager, or call ``close``.

    ``refresh()`` brings it up to date with the files; the query functions in
    ``pipeline.archive.query`` read it.
    """

    def __init__(self, out: Path) -> None:
        self.out = Path(out).expanduser()
        self.path = self.out / ".distill" / ARCHIVE_DIR / INDEX_FILE
        self.problems: list[str] = []
        self.rebuilt = False
        self.in_memory = False
        self._db: sqlite_utils.Database | None = None
        self.conn = self._open()

    @property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils over the same connection, for writes. Imported on first write: it takes ~0.2 s
        to import (it loads numpy when installed), and a command on an unchanged archive only reads."""
        if self._db is None:
            import sqlite_utils

            self._db = sqlite_utils.Database(self.conn)
        return self._db

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows as dicts."""
        cursor = self.conn.execute(sql, list(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, list(params))

    # ------------------------------------------------------------------ opening

    def _open(self) -> sqlite3.Connection:
        for attempt in range(2):
            conn: sqlite3.Connection | None = None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # derived data: a power cut may only cost a rebuild
                self._migrate(conn)
                return conn
            except OSError as exc:
                return self._memory(f"cannot write the index in {self.path.parent} ({exc.strerror or exc})")
            except sqlite3.OperationalError as exc:
                if conn is not None:
                    conn.close()
                if _read_only(exc):
                    return self._memory(f"cannot write the index {self.path} ({exc})")
                if attempt:
                    raise
                self._discard(f"rebuilt the index {self.path}: {exc}")
            except sqlite3.DatabaseError as exc:  # not a database, malformed: it is only derived data
                if conn is not None:
                    conn.close()
                if attempt:
                    raise
                self._discard(f"rebuilt the index {self.path}: {exc}")
        raise AssertionError("unreachable")

    def _memory(self, why: str) -> sqlite3.Connection:
        self.problems.append(f"{why}; using an index in memory for this command")
        self.in_memory = True
        conn = sqlite3.connect(":memory:", isolation_level=None)
        self._migrate(conn)
        return conn

    def _discard(self, why: str) -> None:
        self.problems.append(why)
        self.rebuilt = True
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def _migrate(self, conn: sqlite3.Connection) -> None:
        if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return
        import sqlite_utils

        db = sqlite_utils.Database(conn)
        with _immediate(conn):
            if db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
                return  # another process created it while we waited
            for name in db.table_names():  # an older schema: derived data, so start again
                if not name.startswith("notes_fts"):
                    db.execute(f"DROP TABLE IF EXISTS [{name}]")
            for name in ("notes_fts", "notes_fts_trigram"):
                db.execute(f"DROP TABLE IF EXISTS [{name}]")
            db["notes"].create(
                {"n": int, "path": str, "kind": str, "problem": str, "mtime_ns": int, "size": int, "ino": int,
                 "id": str, "title": str, "date": str, "started_at": str, "source": str, "model": str,
                 "projects": str, "tags": str, "end_state": str, "message_count": int, "cost_usd": float,
                 "language": str, "version": int, "goal": str, "decisions": str, "output_files": str,
                 "open_items": str, "text": str, "semantic": str, "terms": str, "wordterms": str},
                pk="n", not_null={"path", "kind"},
            )
            db["notes"].create_index(["path"], unique=True)
            db["notes"].create_index(["id"])
            db["vectors"].create({"key": str, "model": str, "vector": bytes}, pk="key")
            db["staged"].create({"path": str, "mtime_ns": int, "size": int, "ino": int, "row": str}, pk="path")
            for statement in _FTS:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ArchiveIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ updating

    def refresh(self) -> IndexStats:
        """Re-read the notes that changed since the last refresh; drop rows of deleted ones."""
        started = time.perf_counter()
        disk = scan(self.out)
        read = removed = 0
        problems: list[str] = []
        try:
            # A read first: an unchanged archive (the common case) then takes no write lock at all.
            if not self._differs(disk):
                return self._stats(disk, 0, 0, problems, started)
            with _immediate(self.conn):
                known = self._known()  # again under the lock: another process may have done the work
                changed = [p for p, st in disk.items() if known.get(p) != st]
                gone = [p for p in known if p not in disk]
                for batch in _batches([*changed, *gone], 500):
                    where = f"path IN ({','.join('?' * len(batch))})"
                    for table in _FTS_TABLES:  # an external-content entry is removed with the text it indexed
                        self.execute(f"INSERT INTO {table}({table}, rowid, title, goal, text) "
                                     f"SELECT 'delete', n, title, goal, text FROM notes WHERE {where}", batch)
                    self.execute(f"DELETE FROM notes WHERE {where}", batch)
                # rows inserted from here on get a rowid above every row left: their FTS entries are added at once
                top = self.execute("SELECT coalesce(max(n), 0) FROM notes").fetchone()[0]
                rows = []
                for rel in changed:
                    row = self._staged(rel, disk[rel])
                    if row is None:
                        row = self._row(rel, disk[rel], problems)
                        read += 1
                    rows.append(row)
                    if len(rows) >= INSERT_BATCH:  # a cold run's 2,000 rows at once held their text twice
                        self._insert(rows)
                        rows = []
                removed = len(gone)
                if rows:
                    self._insert(rows)
                for batch in _batches(changed, 500):  # used, or stale: the file moved on since
                    self.execute(f"DELETE FROM staged WHERE path IN ({','.join('?' * len(batch))})", batch)
                for table in _FTS_TABLES:
                    self.execute(f"INSERT INTO {table}(rowid, title, goal, text) "
                                 f"SELECT n, title, goal, text FROM notes WHERE n > ?", [top])
        except sqlite3.DatabaseError as exc:
            if self.rebuilt or self.in_memory:
                raise
            # Corrupt past the header (a torn copy, a disk error): derived data, so build it again.
            self.close()
            self._discard(f"rebuilt the index {self.path}: {exc}")
            self._db = None
            self.conn = self._open()
            return self.refresh()
        return self._stats(disk, read, removed, problems, started)

    def _known(self) -> dict[str, Stat]:
        return {p: (m, s, i) for p, m, s, i in self.execute("SELECT path, mtime_ns, size, ino FROM notes")}

    def _differs(self, disk: dict[str, Stat]) -> bool:
        known = self._known()
        return len(known) != len(disk) or any(known.get(p) != st for p, st in disk.items())

    def _stats(self, disk: dict[str, Stat], read: int, removed: int, problems: list[str], started: float) -> IndexStats:
        sessions = self.execute("SELECT count(*) FROM notes WHERE kind = 'session'").fetchone()[0]
        return IndexStats(
            notes=sessions, scanned=len(disk), read=read, removed=removed, rebuilt=self.rebuilt,
            in_memory=self.in_memory, problems=(*self.problems, *problems),
            elapsed_s=round(time.perf_counter() - started, 4),
        )

    def rebuild(self) -> IndexStats:
        """Forget every row and read every note again (``distill index --rebuild``)."""
        with _immediate(self.conn):
            self.execute("DELETE FROM notes")
            self.execute("INSERT INTO notes_fts(notes_fts) VALUES ('rebuild')")
            self.execute("INSERT INTO notes_fts_trigram(notes_fts_trigram) VALUES ('rebuild')")
        self.rebuilt = True
        return self.refresh()

    def _insert(self, rows: list[dict[str, Any]]) -> None:
        # Plain executemany, not sqlite-utils' insert_all: importing sqlite-utils costs 0.2-0.4 s
        # (it imports numpy when installed), more than a refresh after a few edits takes.
        columns = list(dict.fromkeys(k for row in rows for k in row))
        sql = f"INSERT INTO notes ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        self.conn.executemany(sql, [[row.get(c) for c in columns] for row in rows])

    def stage(self, rows: Sequence[tuple[str, Stat, dict[str, Any]]]) -> None:
        """Keep ``(path, stat, row)`` for ``refresh``: the row of the file at ``path`` while its stat is ``stat``.

        ``row`` is ``session_row``'s for the exact text the file holds; the stat must come from that
        file (``atomic.atomic_write_bytes`` returns the written temp file's), never from a later
        ``stat`` of the path, which another writer may have replaced in between.
        """
        if not rows:
            return
        with _immediate(self.conn):
            self.conn.executemany(
                "INSERT OR REPLACE INTO staged (path, mtime_ns, size, ino, row) VALUES (?, ?, ?, ?, ?)",
                [(rel, *st, json.dumps({**row, "path": rel})) for rel, st, row in rows])

    def _staged(self, rel: str, st: Stat) -> dict[str, Any] | None:
        found = self.execute("SELECT mtime_ns, size, ino, row FROM staged WHERE path = ?", [rel]).fetchone()
        if found is None or tuple(found[:3]) != st:
            return None
        return {"path": rel, "mtime_ns": st[0], "size": st[1], "ino": st[2], **json.loads(found[3])}

    def _row(self, rel: str, st: Stat, problems: list[str]) -> dict[str, Any]:
        row: dict[str, Any] = {"path": rel, "mtime_ns": st[0], "size": st[1], "ino": st[2], "kind": "other"}
        try:
            note = read_note(self.out / rel)
        except FrontmatterError as exc:
            problems.append(f"{rel}: {exc}")
            return {**row, "kind": "broken", "problem": str(exc)}
        except OSError as exc:
            problems.append(f"{rel}: {exc.strerror or exc}")
            return {**row, "kind": "broken", "problem": str(exc)}
        if not note.is_session:
            return row
        from pipeline.skills.evidence import load_sidecar

        return {**row, **session_row(rel, note, load_sidecar(self.out, str(note.meta["id"])))}

    # ------------------------------------------------------------------ reading

    def records(self, where: str = "", params: Sequence[Any] = ()) -> Iterator[NoteRecord]:
        """``NoteRecord`` of each session row matching ``where`` (SQL over ``notes``)."""
        sql = "SELECT * FROM notes WHERE kind = 'session'" + (f" AND ({where})" if where else "")
        for row in self.query(sql, params):
            yield record_from_row(row)

    def broken(self) -> list[tuple[str, str]]:
        """(path, why) of notes whose frontmatter could not be read."""
        return [(r["path"], r["problem"] or "") for r in self.query("SELECT path, problem FROM notes WHERE kind = 'broken'")]


def written_row(rel: str, text: str, frontmatter: dict[str, Any], sidecar: str | None) -> dict[str, Any] | None:
    """``session_row`` of a note just rendered, for ``ArchiveIndex.stage``: what ``refresh`` would read.

    ``text`` is the file text made from ``frontmatter`` (``notes.render.dump_note``), ``sidecar`` its
    evidence sidecar's text. The YAML is not parsed back where its data says what a parse would give
    (``notes.frontmatter.load_written``). None for a text ``refresh`` would not index as a session note.
    """
    from pipeline.archive.notefile import sections
    from pipeline.notes.frontmatter import load_written
    from pipeline.skills.evidence import Evidence

    try:
        meta, body = load_written(text, frontmatter)
    except FrontmatterError:
        return None  # the refresh reads it and reports the problem
    note = NoteFile(meta=meta, body=body, sections=sections(body))
    if not note.is_session:
        return None
    return session_row(rel, note, None if sidecar is None else Evidence.model_validate_json(sidecar))


class RowStager:
    """Rows of the notes a run writes, staged in the archive index in batches (``ArchiveIndex.stage``).

    ``add`` may be called from any thread (the run's commit threads); ``flush`` writes the rows from
    the thread that made the stager, since an SQLite connection stays in its thread. The index is
    derived data: if it cannot be written, staging stops and ``refresh`` reads the notes as before.
    """

    def __init__(self, out: Path, batch: int = INSERT_BATCH) -> None:
        import threading

        self.out = Path(out)
        self.batch = batch
        self._lock = threading.Lock()
        self._rows: list[tuple[str, Stat, dict[str, Any]]] = []
        self._index: ArchiveIndex | None = None
        self._off = False

    def add(self, rel: str, st: Stat, row: dict[str, Any]) -> None:
        with self._lock:
            if not self._off:
                self._rows.append((rel, st, row))

    def flush(self, *, every: bool = False) -> None:
        """Stage the rows added so far, once there are ``batch`` of them (``every``: any)."""
        with self._lock:
            if self._off or not self._rows or (len(self._rows) < self.batch and not every):
                return
            rows, self._rows = self._rows, []
        try:
            if self._index is None:
                self._index = ArchiveIndex(self.out)
                if self._index.in_memory:  # a read-only archive: nothing to keep for later
                    self._stop()
                    return
            self._index.stage(rows)
        except (sqlite3.Error, OSError):
            self._stop()

    def close(self) -> None:
        try:
            self.flush(every=True)
        finally:
            if self._index is not None:
                self._index.close()
                self._index = None

    def _stop(self) -> None:
        with self._lock:
            self._off, self._rows = True, []


def session_row(rel: str, note: NoteFile, side: Evidence | None) -> dict[str, Any]:
    """The ``notes`` columns of a session note but its stat: its record, search text and lexical terms.

    ``side`` is the note's evidence sidecar as ``skills.evidence.load_sidecar`` reads it (None: none).
    """
    record = record_of(rel, note)
    data = record.model_dump()
    for col in LIST_COLUMNS:
        data[col] = json.dumps(list(data[col]), ensure_ascii=False)
    terms, words = lexical_signal_of(record, side)
    return {**data, "kind": "session", "semantic": record.semantic_text(),
            "terms": json.dumps(terms, ensure_ascii=False), "wordterms": json.dumps(words, ensure_ascii=False)}


def lexical_signal(out: Path, record: NoteRecord) -> tuple[dict[str, int], dict[str, int]]:
    """(identifier terms, goal/decision word terms) of a note: skill detection's lexical features
    (``pipeline.skills.lexical``), with the commands, tools and errors of the run's evidence sidecar."""
    from pipeline.skills.evidence import load_sidecar

    return lexical_signal_of(record, load_sidecar(out, record.id))


def lexical_signal_of(record: NoteRecord, side: Evidence | None) -> tuple[dict[str, int], dict[str, int]]:
    """``lexical_signal`` with the sidecar given."""
    from pipeline.skills.evidence import Evidence
    from pipeline.skills.lexical import lexical_terms, word_terms

    ev = Evidence(
        session_id=record.id, title=record.title[:200], goal=record.goal[:600],
        decisions=tuple(d[:300] for d in record.decisions[:12]), files=tuple(f[:200] for f in record.output_files[:40]),
        commands=side.commands if side else (), tools=side.tools if side else (), errors=side.errors if side else (),
    )
    terms = lexical_terms(ev, words=False)
    words = dict(word_terms(ev))  # identifier terms never start with "w:": the same dict, computed once
    return dict(terms), words


def record_from_row(row: dict[str, Any]) -> NoteRecord:
    data = {k: row[k] for k in NoteRecord.model_fields if k in row}
    for col in LIST_COLUMNS:
        data[col] = tuple(json.loads(row[col] or "[]"))
    data["text"] = row.get("text") or ""
    return NoteRecord.model_validate({k: v for k, v in data.items() if v is not None})


def open_index(out: Path) -> tuple[ArchiveIndex, IndexStats]:
    """The archive's index, refreshed: what every command that reads the archive starts with."""
    index = ArchiveIndex(out)
    try:
        return index, index.refresh()
    except BaseException:
        index.close()
        raise


def _read_only(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


def _batches(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@contextlib.contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once: concurrent refreshes queue here instead of failing later."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
