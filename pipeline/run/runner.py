"""The run: select sessions, pick an execution strategy, fill the ``RunReport``.

Nothing else lives here. Each stage can be called alone (``pipeline.run.steps`` holds the
per-session steps); ``run`` only wires them, records what happened in a ``RunReport``, and keeps
going when one session fails (exit 1 at the end).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.models import RunReport, Session, SessionResult
from pipeline.read.hermes import HermesDB
from pipeline.run.steps import (
    Draft,
    Summariser,
    commit,
    distill_session,
    draft_note,
    extractive,
    extractive_summary,
    failed,
    fingerprint,
    guarded,
    skills_lookup,
)

#: Above this many selected sessions, their message counts are read in one scan (``preload_message_stats``).
MANY_SESSIONS = 100


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


def run(
    settings: Settings,
    *,
    summarise: Summariser | None = None,
    summariser_id: str = "extractive",
    progress: Callable[[int], Iterable[int]] | None = None,
    on_result: Callable[[SessionResult], None] | None = None,
) -> RunReport:
    """Distil the sessions ``settings`` selects into ``settings.out``.

    With no ``summarise`` given, the summariser follows ``settings.summarizer``: a model when one
    is configured or embedded (see ``pipeline.run.window``), else the extractive summariser.
    """
    from pipeline.notes.store import NoteStore

    started = time.perf_counter()
    report = RunReport(db=None if settings.inputs else str(settings.db), out=str(settings.out),
                       summarizer=summariser_id, dry_run=settings.dry_run)
    llm = None
    if summarise is None and settings.summarizer != "extractive":
        # Imported only when a model may be used: a nightly re-run with nothing new to distill
        # should not pay for asyncio, litellm or the extractive rules (see evals/bench_core.py).
        from pipeline.run.window import llm_for

        llm = llm_for(settings, report)
    builtin = summarise is None and llm is None
    summarise = summarise or extractive_summary
    if llm is not None:
        summariser_id = report.summarizer = llm.summariser_id
    now = datetime.now(UTC)
    with ExitStack() as stack:
        if llm is not None:
            stack.enter_context(llm)
        db = None if settings.inputs else stack.enter_context(HermesDB(settings.db))
        if db is None:
            sessions = [s for path in settings.inputs for s in _file_sessions(path, settings, report.notices)]
            ids = [s.id for s in sessions]
        else:
            ids = select_sessions(db, settings, notices=report.notices)
            if len(ids) > MANY_SESSIONS:
                db.preload_message_stats()
        report.selected = len(ids)
        report.mark_setup_done()
        # A dry run must not even create the output directory; the index is saved once at the end.
        store = NoteStore(settings.out, create=not settings.dry_run, autosave=False)
        seen = _Fingerprints(settings.out)
        steps = _iterate_n(len(ids), progress)
        distil = partial(distill_session, settings=settings, store=store, summarise=summarise,
                         summariser_id=summariser_id, distilled_at=now, skills_for=skills_lookup(settings))
        check = None if db is None else _Check(db, store, seen, settings, summariser_id)
        if check is None:
            load: Callable[[str], Loaded] = {s.id: (None, s) for s in sessions}.__getitem__
        else:
            load = partial(_load, check, db)
        jobs = _worker_count(settings, builtin=builtin, sessions=len(ids))
        if jobs > 1 and check is not None and not settings.force:
            # Worker processes cost a fork each: count the sessions that need work before starting
            # any, so a nightly re-run with little or nothing new stays in this process.
            jobs = _worker_count(settings, builtin=builtin, sessions=sum(1 for sid in ids if not check.current(sid)))
        if llm is not None:
            from pipeline.run.window import windowed

            results = windowed(((ids[i], *load(ids[i])) for i in steps), llm, settings=settings, store=store,
                               distilled_at=now)
        elif jobs > 1:
            results = _pooled(ids, steps, db, load, jobs, settings=settings, store=store,
                              summariser_id=summariser_id, distilled_at=now, check=check)
        else:
            results = _serial(ids, steps, load, distil)
        for sid, fp, result in results:
            if fp is not None and result.status in ("written", "unchanged"):
                seen.set(sid, fp, summariser_id)
            report.add(result)
            if on_result:
                on_result(result)
        if not settings.dry_run:
            # The index first: saving it makes the notes' renames durable (see NoteStore.sync),
            # and a fingerprint must never be on disk before the note it vouches for.
            store.save_index()
            seen.save()
            _finish_archive(settings, report)
    report.elapsed_s = round(time.perf_counter() - started, 3)
    return report


def _finish_archive(settings: Settings, report: RunReport) -> None:
    """Links for the notes this run wrote, then one commit of the archive (``pipeline.archive.finish``)."""
    import os

    from pipeline.archive.finish import finish_run

    written = [os.path.relpath(r.path, settings.out).replace(os.sep, "/")
               for r in report.results if r.status == "written" and r.path]
    if not written and not settings.git:
        return
    done = finish_run(settings.out, written, git=settings.git)
    report.notices.extend(done.notices)


def _file_sessions(path: Path, settings: Settings, notices: list[str]) -> Iterator[Session]:
    """Sessions from a transcript file or directory, with the same source filters as state.db."""
    from pipeline.read.detect import read_sessions

    for session in read_sessions(path, settings.input_format):
        source = "subagent" if session.lineage.delegated_from else session.source
        if (settings.include_sources and source not in settings.include_sources) or (
            not settings.include_sources and source in settings.exclude_sources
        ):
            notices.append(f"{session.id}: skipped, its source {source!r} is filtered out; pass --source {source}")
            continue
        yield session


def _iterate_n(n: int, progress: Callable[[int], Iterable[int]] | None) -> Iterable[int]:
    return range(n) if progress is None else progress(n)


Loaded = tuple[str | None, Session | SessionResult]


class _Check:
    """Per session id, once: its fingerprint, and its note's path when that note is current for it.

    The pre-count of sessions that need work and the run itself ask the same question; a failure
    is not remembered, so the caller that reports it sees it.
    """

    def __init__(self, db: HermesDB, store: object, seen: _Fingerprints, settings: Settings, summariser_id: str) -> None:
        self.db, self.store, self.seen, self.settings, self.summariser_id = db, store, seen, settings, summariser_id
        self._done: dict[str, tuple[str, str | None]] = {}

    def __call__(self, sid: str) -> tuple[str, str | None]:
        if sid not in self._done:
            fp = fingerprint(self.db, sid)
            # The fingerprint first: a stat of the note is only worth it when the input is unchanged.
            current = (not self.settings.force and self.seen.get(sid) == (fp, self.summariser_id)
                       and self.store.path_for(sid)) or None  # type: ignore[attr-defined]
            self._done[sid] = (fp, current)
        return self._done[sid]

    def current(self, sid: str) -> bool:
        try:
            return self(sid)[1] is not None
        except Exception:  # unreadable now: it needs work, and the run reports why
            return False

    def unchanged(self, sid: str, rel: str) -> SessionResult:
        return SessionResult(session_id=sid, status="unchanged", path=str(self.settings.out / rel))


def _load(check: _Check, db: HermesDB, sid: str) -> Loaded:
    """(fingerprint, the session to distill), or a result when the fingerprint says it is unchanged."""
    try:
        fp, current = check(sid)
        if current:
            return fp, check.unchanged(sid, current)
        return fp, db.read_session(sid)
    except Exception as exc:  # one bad session must not stop the run; it is reported
        return None, failed(sid, exc)


def _serial(
    ids: list[str], steps: Iterable[int], load: Callable[[str], Loaded], distil: Callable[[Session], SessionResult]
) -> Iterator[tuple[str, str | None, SessionResult]]:
    for i in steps:
        fp, got = load(ids[i])
        result = guarded(ids[i], partial(distil, got)) if isinstance(got, Session) else got
        yield ids[i], fp, result


def _pooled(
    ids: list[str], steps: Iterable[int], db: HermesDB | None, load: Callable[[str], Loaded], jobs: int, *,
    settings: Settings, store: object, summariser_id: str, distilled_at: datetime, check: _Check | None,
) -> Iterator[tuple[str, str | None, SessionResult]]:
    """As ``_serial``, with read → render in worker processes (see ``pipeline.run.pool``).

    From state.db the main process only fingerprints: a session that needs work goes to a worker
    as its id, and the worker reads it. Sessions from files (no ``db``) are sent whole.
    """
    from pipeline.run.pool import DraftPool

    skills_for = skills_lookup(settings)

    def resolve(item: Any, outcome: Draft | SessionResult | None) -> Draft | SessionResult:
        if isinstance(outcome, SessionResult):
            return outcome  # failed in the worker
        confirmed = outcome is not None and (
            outcome.status != "current" or store.unchanged(item.session_id, outcome.digest)  # type: ignore[attr-defined]
        )
        if confirmed:
            return outcome  # type: ignore[return-value]
        # The worker died, or the index's hash is stale (the note was moved or deleted): redo it here.
        try:
            session = db.read_session(item.session_id) if db is not None else load(item.session_id)[1]
            assert isinstance(session, Session)
            return draft_note(
                session, chunk_tokens=settings.chunk_tokens, summarise=extractive(),
                summariser_id=summariser_id, distilled_at=distilled_at,
                link_for=store.link_for,  # type: ignore[attr-defined]
                is_current=None if settings.force else partial(store.unchanged, item.session_id),  # type: ignore[attr-defined]
                skills_for=skills_for,
            )
        except Exception as exc:  # one bad session must not stop the run; it is reported
            return failed(item.session_id, exc)

    def commit_one(sid: str, got: Draft | SessionResult) -> SessionResult:
        if isinstance(got, SessionResult):
            return got
        return guarded(sid, partial(commit, got, settings=settings, store=store))

    with DraftPool(jobs, resolve, commit_one, db=db) as pool:
        for i in steps:
            sid = ids[i]
            if db is None:
                fp, got = load(sid)
                if isinstance(got, Session):
                    yield from pool.submit(
                        sid, got.lineage, fp, session=got, known_hash=None if settings.force else store.recorded_hash(sid),  # type: ignore[attr-defined]
                        link_for=store.link_for, chunk_tokens=settings.chunk_tokens,  # type: ignore[attr-defined]
                        summariser_id=summariser_id, distilled_at=distilled_at, skills_for=skills_for,
                    )
                else:
                    yield from pool.add(sid, fp, got)
                continue
            assert check is not None
            try:
                fp, current = check(sid)
                if current:
                    yield from pool.add(sid, fp, check.unchanged(sid, current))
                    continue
                lineage = db.lineage(sid)
            except Exception as exc:  # as in _load: reported, and no fingerprint is recorded
                yield from pool.add(sid, None, failed(sid, exc))
                continue
            known = None if settings.force else store.recorded_hash(sid)  # type: ignore[attr-defined]
            yield from pool.submit(
                sid, lineage, fp, known_hash=known, link_for=store.link_for,  # type: ignore[attr-defined]
                chunk_tokens=settings.chunk_tokens, summariser_id=summariser_id, distilled_at=distilled_at,
                skills_for=skills_for,
            )
        yield from pool.drain()


def _worker_count(settings: Settings, *, builtin: bool, sessions: int) -> int:
    """Worker processes for this run: only for the built-in extractive summariser, on enough sessions."""
    from pipeline.run.pool import MIN_SESSIONS, auto_jobs

    if not builtin or sessions < MIN_SESSIONS:
        return 1  # a caller's summariser may hold clients or state that cannot cross processes
    return settings.jobs if settings.jobs > 0 else auto_jobs()


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

