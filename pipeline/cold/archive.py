"""``archive``: hot rows in ``state.db`` → a lossless sidecar beside each unit's note (→ pruned).

Per unit, in this order, each step durable before the next (a crash between any two leaves the
old state or the new one, never a session in neither place):

1. the note exists (the caller's ``ensure_notes`` distils missing ones);
2. the rows are read in one read transaction and written to the sidecar atomically (temp file,
   fsync, rename, fsync of the directory);
3. the note's ``cold`` frontmatter records the sidecar's sha256, size and row counts;
4. with ``prune``: the sidecar is read back from disk and checked against the note, then, inside
   one ``BEGIN IMMEDIATE`` transaction, the unit's guards are checked again and its rows compared
   with the sidecar row for row before they are deleted (or, through ``hermes sessions delete``,
   checked again right before each session's delete);
5. the note records ``pruned_at``.

Without ``prune`` the database is only read. ``dry_run`` reads the database and writes nothing.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pipeline.cold.delete as deleting
import pipeline.cold.sidecar as sc
from pipeline.atomic import fsync_dirs
from pipeline.cold.errors import ColdError, SidecarError
from pipeline.cold.notes import ColdIndex, TempSweeper, cold_of, has_cold, set_cold
from pipeline.cold.rows import (
    Schema,
    Sessions,
    Unit,
    begin_immediate,
    check_sqlite_file,
    connect,
    read_rows,
    read_schema,
    with_retry,
)
from pipeline.cold.steps import step
from pipeline.cold.verify import diff, held_reason, live_reason
from pipeline.notes.store import NoteStore

#: A prune transaction holds the write lock about this long, then commits and lets writers in.
TXN_BUDGET_S = 0.5
SIDECAR_BATCH = 50
WOULD_WRITE = "(its note would be written first)"


@dataclass
class Selection:
    refs: list[str] = field(default_factory=list)
    select_all: bool = False
    older_than: float | None = None  # seconds
    sources: list[str] = field(default_factory=list)
    exclude_sources: list[str] = field(default_factory=list)


@dataclass
class UnitResult:
    root: str
    sessions: list[str]
    status: str  # archived, unchanged, would-archive, pruned, would-prune, refused, failed
    reason: str | None = None
    note: str | None = None
    sidecar: str | None = None
    rows: dict[str, int] = field(default_factory=dict)
    data_bytes: int = 0
    sidecar_bytes: int = 0
    deleted: dict[str, int] = field(default_factory=dict)


@dataclass
class DbSize:
    file_bytes: int
    page_size: int
    pages: int
    free_pages: int

    @property
    def used_bytes(self) -> int:
        return (self.pages - self.free_pages) * self.page_size


@dataclass
class ArchiveReport:
    db: str
    out: str
    prune: bool
    dry_run: bool
    via: str | None = None
    results: list[UnitResult] = field(default_factory=list)
    before: DbSize | None = None
    after: DbSize | None = None
    vacuum_into: str | None = None
    vacuum_bytes: int | None = None
    notices: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    def count(self, *status: str) -> int:
        return sum(1 for r in self.results if r.status in status)


def db_size(db: Path) -> DbSize:
    conn = connect(db, write=False)
    try:
        page, pages, free = (with_retry(lambda q=q: conn.execute(q).fetchone()[0])
                             for q in ("PRAGMA page_size", "PRAGMA page_count", "PRAGMA freelist_count"))
    finally:
        conn.close()
    files = sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())
    return DbSize(file_bytes=files, page_size=page, pages=pages, free_pages=free)


@contextlib.contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One read transaction: everything read inside sees one state of the database."""
    with_retry(lambda: conn.execute("BEGIN"))
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def select_units(sessions: Sessions, selection: Selection, *, now: float, notices: list[str]) -> list[Unit]:
    """The units a selection names: by member id, every unit, or every unit idle past --older-than."""
    units = sessions.units()
    if selection.refs:
        picked = list({sessions.unit_of(ref).root: sessions.unit_of(ref) for ref in selection.refs}.values())
    elif selection.select_all or selection.older_than is not None:
        picked = sorted(units.values(), key=lambda u: (sessions.info[u.root].started_at, u.root))
    else:
        raise ColdError("say which sessions: session ids, --older-than AGE (e.g. 30d) or --all")
    out = []
    for unit in picked:
        source = sessions.kind(unit.root) if sessions.kind(unit.root) == "subagent" else sessions.info[unit.root].source
        if (selection.sources and source not in selection.sources) or (
            not selection.sources and source in selection.exclude_sources
        ):
            if selection.refs:
                notices.append(f"{unit.root}: skipped, its source {source!r} is filtered out; pass --source {source}")
            continue
        if selection.older_than is not None and now - unit.last_active < selection.older_than:
            continue
        out.append(unit)
    return out


def _depth(sessions: Sessions, sid: str) -> int:
    depth, seen = 0, {sid}
    while (parent := sessions.info[sid].parent) in sessions.info and parent not in seen:
        seen.add(parent)
        sid, depth = parent, depth + 1
    return depth


class Archiver:
    """One archive (and prune) run over one database and one notes directory."""

    def __init__(self, db: Path, out: Path, *, home: Path, prune: bool = False, dry_run: bool = False,
                 idle: float = 86400.0, via: str = "auto", compression: str = "zstd",
                 now: float | None = None, on_result: Callable[[UnitResult], None] | None = None) -> None:
        self.db = Path(db).expanduser()
        self.out = Path(out).expanduser()
        self.home = home
        self.prune = prune
        self.dry_run = dry_run
        self.idle = idle
        self.compression = compression
        self.now = time.time() if now is None else now
        self.on_result = on_result
        self.report = ArchiveReport(db=str(self.db), out=str(self.out), prune=prune, dry_run=dry_run)
        self.via = self._via(via) if prune else None
        self.report.via = self.via
        self.store = NoteStore(self.out, create=False)
        self.index_entries: dict[str, dict[str, str]] = {}
        self.sweeper = TempSweeper()
        #: directories holding renames not yet fsynced; fsynced once before any prune
        self.unsynced: set[Path] = set()
        #: root → the ``cold`` value of its note as this run last read or wrote it
        self.cold: dict[str, dict[str, Any]] = {}

    def _via(self, via: str) -> str:
        if via not in ("auto", "hermes", "sqlite"):
            raise ColdError(f"--via {via}: use auto, hermes or sqlite")
        hermes = deleting.hermes_command()
        usable = hermes is not None and deleting.hermes_can_delete_in(self.db, self.home)
        if via == "hermes" and not usable:
            why = "no `hermes` command on PATH" if hermes is None else f"{self.db} is not $HERMES_HOME/state.db"
            raise ColdError(f"--via hermes: {why}; use --via sqlite")
        return "hermes" if via == "hermes" or (via == "auto" and usable) else "sqlite"

    def _done(self, result: UnitResult) -> UnitResult:
        self.report.results.append(result)
        if self.on_result:
            self.on_result(result)
        return result

    # ------------------------------------------------------------------ the run

    def run(self, selection: Selection, *, ensure_notes: Callable[[list[str]], dict[str, str]] | None = None,
            vacuum_into: Path | None = None) -> ArchiveReport:
        started = time.perf_counter()
        check_sqlite_file(self.db)
        if vacuum_into is not None and Path(vacuum_into).exists():
            raise ColdError(f"--vacuum-into {vacuum_into}: already exists; name a new file")
        conn = connect(self.db, write=False)
        try:
            with snapshot(conn):
                schema = read_schema(conn, self.db)
                sessions = Sessions(conn, schema)
            units = select_units(sessions, selection, now=self.now, notices=self.report.notices)
            ready = []
            for unit in units:
                reason = live_reason(sessions, unit, now=self.now, idle=self.idle)
                if reason:
                    self._done(UnitResult(unit.root, list(unit.ids), "refused", reason=reason))
                else:
                    ready.append(unit)
            self.report.before = db_size(self.db) if self.prune else None
            notes = self._notes(ready, ensure_notes, sessions)
            archived = [self._archive(conn, schema, sessions, unit, notes.get(unit.root)) for unit in ready]
        finally:
            conn.close()
            fsync_dirs(sorted(self.unsynced))  # every sidecar and note durable before a prune
            ColdIndex(self.out).record(self.index_entries)
        pending = [(u, r) for u, r in zip(ready, archived, strict=True) if r is not None]
        # Children's units first: pruning a parent first would orphan a reset child (Hermes's delete
        # sets its parent_session_id to NULL), a change to rows that are about to be checked.
        pending.sort(key=lambda p: -_depth(sessions, p[0].root))
        if self.prune and pending:
            if self.dry_run:
                for unit, result in pending:
                    self._would_prune(unit, result, sessions, schema)
            elif self.via == "hermes":
                self._prune_hermes(pending)
            else:
                self._prune_sqlite(pending)
        elif not self.prune:
            for _, result in pending:
                self._done(result)
        if self.prune:
            fsync_dirs(sorted(self.unsynced))
            self.report.after = db_size(self.db)
        if vacuum_into is not None and not self.dry_run:
            self._vacuum(Path(vacuum_into))
        self.report.elapsed_s = round(time.perf_counter() - started, 3)
        return self.report

    # ------------------------------------------------------------------ notes and sidecars

    def _notes(self, units: Sequence[Unit], ensure: Callable[[list[str]], dict[str, str]] | None,
               sessions: Sessions) -> dict[str, Path | str]:
        """root → the note's path, or why it has none."""
        store = self.store = NoteStore(self.out, create=False)
        missing = [u.root for u in units if not store.path_for(u.root)]
        why: dict[str, str] = {}
        if missing and ensure is not None and not self.dry_run:
            why = ensure(missing)
            store = self.store = NoteStore(self.out, create=False)  # the run just added entries
        out: dict[str, Path | str] = {}
        for unit in units:
            rel = store.path_for(unit.root)
            if rel:
                out[unit.root] = self.out / rel
            elif self.dry_run and ensure is not None and sessions.info[unit.root].has_messages:
                out[unit.root] = WOULD_WRITE
            elif not sessions.info[unit.root].has_messages:
                out[unit.root] = why.get(unit.root) or "empty session: no messages to distill"
            else:
                out[unit.root] = why.get(unit.root) or "no note could be written for it"
        return out

    def _archive(self, conn: sqlite3.Connection, schema: Schema, sessions: Sessions, unit: Unit,
                 note: Path | str | None) -> UnitResult | None:
        """Write (or confirm) the unit's sidecar; the result, or None when it was refused."""
        result = UnitResult(unit.root, list(unit.ids), "archived")
        if not isinstance(note, Path):
            if self.dry_run and note == WOULD_WRITE:
                result.status, result.note = "would-archive", note
            else:
                self._done(UnitResult(unit.root, list(unit.ids), "refused", reason=f"no note: {note}"))
                return None
        with snapshot(conn):
            rows = read_rows(conn, schema, unit.ids)
        payload = sc.build(unit, schema, rows, source_db=self.db)
        result.rows, result.data_bytes = payload.rows, payload.data_bytes
        if not isinstance(note, Path):
            return result
        result.note = str(note)
        path = sc.sidecar_path(note, self.compression)
        lock = contextlib.nullcontext() if self.dry_run else self.store.session_lock(unit.root)
        with lock:
            if not self.dry_run:
                self.sweeper.sweep(path)
                self.sweeper.sweep(note)
            existing = cold_of(note) if has_cold(note) else None
            if existing and existing.get("sidecar"):
                old_path = note.parent / str(existing["sidecar"])
                try:
                    old = sc.load(old_path, existing)
                except SidecarError as exc:
                    old = None
                    gone = [s for s in existing.get("sessions") or [] if s not in sessions.info]
                    if gone:
                        self._done(UnitResult(unit.root, list(unit.ids), "refused", note=str(note), reason=(
                            f"sidecar does not verify: {exc}; {len(gone)} of its sessions were already pruned, "
                            "so restore the sidecar from a backup")))
                        return None
                    if self.prune:
                        # Never prune on the strength of a sidecar this run found damaged: say so, and
                        # let an archive without --prune rewrite it from the database.
                        self._done(UnitResult(unit.root, list(unit.ids), "refused", note=str(note), reason=(
                            f"sidecar does not verify: {exc}; `distill archive {unit.root}` (without --prune) "
                            "rewrites it from the database")))
                        return None
                    self.report.notices.append(f"{unit.root}: replaced a damaged sidecar ({exc.reason})")
                if old is not None:
                    gone = [s for s in old.sessions if s not in sessions.info]
                    if old.trailer.get("rows_sha256") == payload.rows_sha256 or gone:
                        # Unchanged, or partly pruned already (then the old sidecar is the only copy
                        # of the pruned sessions: never overwrite it; prune checks and finishes).
                        result.status = "unchanged"
                        result.sidecar, result.sidecar_bytes = str(old_path), old_path.stat().st_size
                        result.sessions = old.sessions
                        self.cold[unit.root] = existing
                        return result
            result.sidecar = str(path)
            if self.dry_run:
                result.status = "would-archive"
                return result
            written = sc.write(path, payload, self.compression, sync_dir=False)
            step("sidecar-written")
            cold = written.frontmatter(unit, schema.version, _now_iso())
            set_cold(note, cold, replace=True, sync_dir=False)
            self.cold[unit.root] = cold
            self.unsynced.add(note.parent)
            step("note-updated")
        result.sidecar_bytes = written.bytes
        rel = note.relative_to(self.out).as_posix()
        # Saved once after the archive pass: only a cache (pull falls back to the notes), and saving
        # it per unit would rewrite it 2,000 times in a 2,000-lineage run.
        self.index_entries.update({sid: {"root": unit.root, "note": rel} for sid in unit.ids})
        return result

    # ------------------------------------------------------------------ pruning

    def _load(self, result: UnitResult) -> sc.Sidecar | str:
        """The sidecar read back from disk and checked against the note, or why it cannot be."""
        try:
            assert result.note and result.sidecar
            cold = self.cold.get(result.root) or cold_of(Path(result.note))
            return sc.load(Path(result.sidecar), cold)
        except (SidecarError, ColdError) as exc:
            return f"sidecar does not verify: {exc}"

    def _refuse(self, result: UnitResult, reason: str) -> None:
        result.status, result.reason = "refused", reason
        self._done(result)

    def _would_prune(self, unit: Unit, result: UnitResult, sessions: Sessions, schema: Schema) -> None:
        conn = connect(self.db, write=False)
        try:
            with snapshot(conn):
                reason = held_reason(conn, sessions, unit, now=self.now)
                if not reason and result.status == "unchanged":
                    loaded = self._load(result)
                    reason = loaded if isinstance(loaded, str) else diff(conn, schema, sessions, unit.ids, loaded)
        finally:
            conn.close()
        if reason:
            self._refuse(result, reason)
        else:
            result.status = "would-prune"
            result.deleted = dict(result.rows)
            self._done(result)

    def _check(self, conn: sqlite3.Connection, schema: Schema, sessions: Sessions, result: UnitResult,
               loaded: sc.Sidecar) -> str | None:
        """Guards and the row-for-row comparison, on ``conn`` inside the caller's transaction
        (``sessions`` read in that transaction)."""
        present = [s for s in loaded.sessions if s in sessions.info]
        if not present:
            return None
        members = {sid for p in present for sid in sessions.unit_of(p).ids}
        unit = Unit(root=loaded.header["root"], ids=tuple(loaded.sessions) + tuple(sorted(members - set(loaded.sessions))),
                    kinds={}, last_active=max(sessions.info[s].last_active for s in members))
        live = [sid for sid in unit.ids if sid in sessions.info and sessions.info[sid].ended_at is None]
        if live:
            return f"{live[0]} is not ended (still live in Hermes)"
        if self.now - unit.last_active < self.idle:
            return live_reason(sessions, Unit(unit.root, tuple(members), {}, unit.last_active), now=self.now,
                               idle=self.idle)
        live_unit = Unit(unit.root, tuple(s for s in unit.ids if s in sessions.info), {}, unit.last_active)
        return held_reason(conn, sessions, live_unit, now=self.now) or diff(conn, schema, sessions,
                                                                             sorted(members), loaded)

    def _prune_sqlite(self, pending: Sequence[tuple[Unit, UnitResult]]) -> None:
        conn = connect(self.db, write=True)
        try:
            for start in range(0, len(pending), SIDECAR_BATCH):
                loaded: list[tuple[UnitResult, sc.Sidecar]] = []
                for _, result in pending[start : start + SIDECAR_BATCH]:
                    got = self._load(result)
                    if isinstance(got, str):
                        self._refuse(result, got)
                    else:
                        loaded.append((result, got))
                while loaded:
                    loaded = self._prune_batch(conn, loaded)
        finally:
            conn.close()

    def _prune_batch(self, conn: sqlite3.Connection, loaded: list[tuple[UnitResult, sc.Sidecar]]
                     ) -> list[tuple[UnitResult, sc.Sidecar]]:
        """One write transaction over as many units as fit in ``TXN_BUDGET_S``; returns the rest."""
        begin_immediate(conn)
        started = time.monotonic()
        done: list[tuple[UnitResult, dict[str, int]]] = []
        refused: list[tuple[UnitResult, str]] = []
        try:
            schema = read_schema(conn, self.db)
            sessions = Sessions(conn, schema)  # read once per transaction, told of each delete
            n = 0
            for result, side in loaded:
                if n and time.monotonic() - started > TXN_BUDGET_S:
                    break
                n += 1
                reason = self._check(conn, schema, sessions, result, side)
                if reason:
                    refused.append((result, reason))
                    continue
                step("verified")
                present = [s for s in side.sessions if conn.execute(
                    "SELECT 1 FROM sessions WHERE id = ?", (s,)).fetchone()]
                # A savepoint per unit: a unit the database refuses to delete (a constraint we do not
                # know) is reported and left whole, and the rest of the batch goes on.
                conn.execute("SAVEPOINT unit")
                try:
                    counts = deleting.delete_rows(conn, schema, present)
                except sqlite3.DatabaseError as exc:
                    conn.execute("ROLLBACK TO unit")
                    conn.execute("RELEASE unit")
                    refused.append((result, f"the database refused the delete ({exc}); nothing of it was deleted"))
                    continue
                conn.execute("RELEASE unit")
                sessions.forget(present)
                done.append((result, counts))
                step("deleted")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        step("committed")
        for result, reason in refused:
            self._refuse(result, reason)
        for result, counts in done:
            self._pruned(result, counts)
        return loaded[n:]

    def _pruned(self, result: UnitResult, counts: dict[str, int]) -> None:
        result.status, result.deleted = "pruned", counts
        assert result.note
        with self.store.session_lock(result.root):
            set_cold(Path(result.note), {"pruned_at": _now_iso()}, current=self.cold.get(result.root), sync_dir=False)
        self.unsynced.add(Path(result.note).parent)
        self._done(result)

    def _prune_hermes(self, pending: Sequence[tuple[Unit, UnitResult]]) -> None:
        hermes = deleting.hermes_command()
        assert hermes is not None
        conn = connect(self.db, write=False)
        try:
            for _, result in pending:
                side = self._load(result)
                if isinstance(side, str):
                    self._refuse(result, side)
                    continue
                counts: dict[str, int] = {}
                reason = None
                for n, sid in enumerate(reversed(side.sessions)):
                    with snapshot(conn):
                        schema = read_schema(conn, self.db)
                        # Checked again right before every delete: the narrowest window this path has.
                        reason = self._check(conn, schema, Sessions(conn, schema), result, side)
                        exists = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone()
                        rows = read_rows(conn, schema, [sid]) if exists else {}
                    if reason:
                        if n:
                            reason = f"partly pruned, stopped: {reason}"
                        break
                    if n == 0:
                        step("verified")
                    if not exists:
                        continue
                    try:
                        deleting.hermes_delete(hermes, self.db, sid)
                    except ColdError as exc:
                        reason = str(exc)
                        break
                    for table, got in rows.items():
                        counts[table] = counts.get(table, 0) + len(got)
                if reason:
                    self._refuse(result, reason)
                    continue
                step("deleted")
                with snapshot(conn):
                    left = [s for s in side.sessions
                            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (s,)).fetchone()]
                if left:
                    self._refuse(result, f"`hermes sessions delete` left {left[0]} in the database")
                    continue
                step("committed")
                self._pruned(result, counts)
        finally:
            conn.close()

    def _vacuum(self, target: Path) -> None:
        conn = connect(self.db, write=False)
        try:
            with_retry(lambda: conn.execute("VACUUM INTO ?", (str(target),)))
        except sqlite3.Error as exc:
            raise ColdError(f"--vacuum-into {target}: {exc}") from exc
        finally:
            conn.close()
        self.report.vacuum_into = str(target)
        self.report.vacuum_bytes = target.stat().st_size


def archive(db: Path, out: Path, selection: Selection, *, home: Path, ensure_notes: Callable[[list[str]], dict[str, str]] | None = None,
            vacuum_into: Path | None = None, **options: Any) -> ArchiveReport:
    """Archive (and with ``prune=True`` prune) the units ``selection`` names; see ``Archiver``."""
    return Archiver(db, out, home=home, **options).run(selection, ensure_notes=ensure_notes, vacuum_into=vacuum_into)
