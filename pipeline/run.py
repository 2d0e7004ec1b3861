"""Compose the stages: select → extract → redact → chunk → facts → summarise → render → write.

Nothing else lives here. Each stage can be called alone; ``run`` only wires them, records what
happened in a ``RunReport``, and keeps going when one session fails (exit 1 at the end).

Re-runs are cheap by design: before reading any message, a session's *fingerprint* (its
sessions rows plus an aggregate over its message rows: count, max id, live/archived counts) is
compared with the one recorded when its note was written. Hermes only ever appends, archives or
rewinds rows, so an unchanged fingerprint means unchanged input. When the fingerprint moved, the
session is read and its *content hash* (the chunks the summariser would see) decides.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from pipeline import __version__
from pipeline.chunk import chunk_session
from pipeline.config import Settings
from pipeline.errors import DistillError, InputError
from pipeline.extract import HermesDB, with_retry
from pipeline.models import Chunk, Facts, RunReport, Session, SessionResult, SessionSummary

Summariser = Callable[[Session, list[Chunk], Facts], SessionSummary]

#: Bump when rendering or summarising changes in a way that should refresh every note.
PIPELINE_REVISION = "1"


def select_sessions(
    db: HermesDB, settings: Settings, *, now: float | None = None, notices: list[str] | None = None
) -> list[str]:
    """Root ids of the logical sessions this run covers, oldest first.

    Sessions named explicitly still obey the source filters (the post-session hook relies on it),
    but each one filtered out is explained in ``notices``.
    """
    now = time.time() if now is None else now
    rows = db.rows()
    if settings.sessions:
        ids = list(dict.fromkeys(db.resolve(ref) for ref in settings.sessions))
    elif settings.select_all or settings.since or settings.idle is not None:
        ids = db.logical_ids()
    else:
        raise InputError("say which sessions: a session id or title, --since WHEN, --idle AGE or --all")
    picked = []
    for sid in ids:
        row = rows[sid]
        source = str(row.data.get("source") or "")
        if "_delegate_from" in row.markers:
            source = "subagent"
        if (settings.include_sources and source not in settings.include_sources) or (
            not settings.include_sources and source in settings.exclude_sources
        ):
            if settings.sessions and notices is not None:
                notices.append(f"{sid}: skipped, its source {source!r} is filtered out; pass --source {source}")
            continue
        last = db.last_active(sid)
        if settings.since and last < settings.since.timestamp():
            continue
        if settings.idle is not None and now - last < settings.idle:
            continue
        picked.append(sid)
    return picked


def fingerprint(db: HermesDB, root_id: str) -> str:
    """Cheap change detector for a logical session, read without touching message bodies."""
    ids = db.chain(root_id)
    marks = ",".join("?" * len(ids))
    flags = "SUM(active), SUM(compacted)" if "compacted" in db.message_cols else "SUM(active), 0"
    agg = with_retry(
        lambda: db.conn.execute(
            f"SELECT session_id, COUNT(*), MAX(id), {flags} FROM messages "
            f"WHERE session_id IN ({marks}) GROUP BY session_id ORDER BY session_id",
            ids,
        ).fetchall()
    )
    rows = db.rows()
    payload = {
        "sessions": [{k: v for k, v in rows[i].data.items() if k != "_last_msg"} for i in ids],
        "messages": [list(r) for r in agg],
        "pipeline": [__version__, PIPELINE_REVISION],
    }
    return _sha(payload)


def content_hash(session: Session, chunks: list[Chunk], summariser_id: str) -> str:
    """What the note is made from: every chunk's hash, the session facts we render, the summariser."""
    meta = session.model_dump(mode="json", exclude={"messages", "problems"})
    return _sha({"chunks": [c.content_hash for c in chunks], "session": meta, "summariser": summariser_id,
                 "pipeline": [__version__, PIPELINE_REVISION]})


def _sha(payload: object) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()


def distill_session(
    session: Session,
    *,
    settings: Settings,
    store: object,
    summarise: Summariser,
    summariser_id: str,
    distilled_at: datetime,
) -> SessionResult:
    """One session through redact → chunk → facts → summarise → render → write."""
    from pipeline.facts import derive_facts
    from pipeline.redact import redact_session
    from pipeline.render import render_note

    session = redact_session(session)
    chunks = chunk_session(session, budget=settings.chunk_tokens)
    if not chunks:
        return SessionResult(session_id=session.id, status="skipped",
                             problems=(*session.problems, "empty session: no messages to distill"))
    digest = content_hash(session, chunks, summariser_id)
    if not settings.force and store.unchanged(session.id, digest):  # type: ignore[attr-defined]
        rel = store.path_for(session.id)  # type: ignore[attr-defined]
        return SessionResult(session_id=session.id, status="unchanged", path=str(settings.out / rel) if rel else None)
    facts = derive_facts(session, chunks)
    summary = summarise(session, chunks, facts)
    note = render_note(
        session, summary, facts, content_hash=digest, distilled_at=distilled_at,
        link_for=store.link_for,  # type: ignore[attr-defined]
    )
    result: SessionResult = store.write(note, force=settings.force, dry_run=settings.dry_run)  # type: ignore[attr-defined]
    if session.problems:
        result = result.model_copy(update={"problems": session.problems})
    return result


def run(
    settings: Settings,
    *,
    summarise: Summariser | None = None,
    summariser_id: str = "extractive",
    progress: Callable[[int], Iterable[int]] | None = None,
    on_result: Callable[[SessionResult], None] | None = None,
) -> RunReport:
    """Distil the sessions ``settings`` selects from ``settings.db`` into ``settings.out``."""
    from pipeline.extractive import summarise_extractive
    from pipeline.write import NoteStore

    started = time.perf_counter()
    summarise = summarise or summarise_extractive
    report = RunReport(db=None if settings.inputs else str(settings.db), out=str(settings.out),
                       summarizer=summariser_id, dry_run=settings.dry_run)
    now = datetime.now(UTC)

    def record(result: SessionResult) -> None:
        report.add(result)
        if on_result:
            on_result(result)

    if settings.inputs:
        sessions = [s for path in settings.inputs for s in _file_sessions(path, settings, report.notices)]
        report.selected = len(sessions)
        # A dry run must not even create the output directory; the index is saved once at the end.
        store = NoteStore(settings.out, create=not settings.dry_run, autosave=False)
        for i in _iterate_n(len(sessions), progress):
            record(_guarded(sessions[i].id, partial(
                distill_session, sessions[i], settings=settings, store=store, summarise=summarise,
                summariser_id=summariser_id, distilled_at=now)))
    else:
        with HermesDB(settings.db) as db:
            ids = select_sessions(db, settings, notices=report.notices)
            report.selected = len(ids)
            store = NoteStore(settings.out, create=not settings.dry_run, autosave=False)
            seen = _Fingerprints(settings.out)
            for i in _iterate_n(len(ids), progress):
                record(_one(db, ids[i], settings, store, seen, summarise, summariser_id, now))
            if not settings.dry_run:
                seen.save()
    if not settings.dry_run:
        store.save_index()
    report.elapsed_s = round(time.perf_counter() - started, 3)
    return report


def _file_sessions(path: Path, settings: Settings, notices: list[str]) -> Iterator[Session]:
    """Sessions from a transcript file or directory, with the same source filters as state.db."""
    from pipeline.sources import read_sessions

    for session in read_sessions(path, settings.input_format):
        source = "subagent" if session.lineage.delegated_from else session.source
        if (settings.include_sources and source not in settings.include_sources) or (
            not settings.include_sources and source in settings.exclude_sources
        ):
            notices.append(f"{session.id}: skipped, its source {source!r} is filtered out; pass --source {source}")
            continue
        yield session


def _guarded(sid: str, fn: Callable[[], SessionResult]) -> SessionResult:
    try:
        return fn()
    except DistillError as exc:
        return SessionResult(session_id=sid, status="failed", error=str(exc))
    except Exception as exc:  # one bad session must not stop the run; it is reported
        return SessionResult(session_id=sid, status="failed", error=f"{type(exc).__name__}: {exc}")


def _iterate_n(n: int, progress: Callable[[int], Iterable[int]] | None) -> Iterable[int]:
    return range(n) if progress is None else progress(n)


def _one(
    db: HermesDB, sid: str, settings: Settings, store: object, seen: _Fingerprints,
    summarise: Summariser, summariser_id: str, now: datetime,
) -> SessionResult:
    def work() -> SessionResult:
        fp = fingerprint(db, sid)
        existing = store.path_for(sid)  # type: ignore[attr-defined]
        if not settings.force and existing and seen.get(sid) == (fp, summariser_id):
            return SessionResult(session_id=sid, status="unchanged", path=str(settings.out / existing))
        session = db.read_session(sid)
        result = distill_session(session, settings=settings, store=store, summarise=summarise,
                                 summariser_id=summariser_id, distilled_at=now)
        if result.status in ("written", "unchanged"):
            seen.set(sid, fp, summariser_id)
        return result

    return _guarded(sid, work)


class _Fingerprints:
    """``<out>/.distill/fingerprints.json``: session id → (fingerprint, summariser) at last write."""

    def __init__(self, out: Path) -> None:
        self.path = Path(out) / ".distill" / "fingerprints.json"
        try:
            self.data: dict[str, list[str]] = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError):
            self.data = {}
        self.dirty = False

    def get(self, sid: str) -> tuple[str, str] | None:
        value = self.data.get(sid)
        return (value[0], value[1]) if value and len(value) == 2 else None

    def set(self, sid: str, fp: str, summariser_id: str) -> None:
        if self.data.get(sid) != [fp, summariser_id]:
            self.data[sid] = [fp, summariser_id]
            self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        from pipeline.atomic import atomic_write_text

        # Merge with what a concurrent run may have saved meanwhile; entries are independent.
        try:
            current = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError):
            current = {}
        current.update(self.data)
        atomic_write_text(self.path, json.dumps(current, sort_keys=True, indent=0))

