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
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from pipeline.run.window import Plan

#: Above this many selected sessions, their message counts are read in one scan (``preload_message_stats``).
MANY_SESSIONS = 100


def select_sessions(
    db: HermesDB, settings: Settings, *, now: float | None = None, notices: list[str] | None = None,
    newest_first: bool = False,
) -> list[str]:
    """Root ids of the logical sessions this run covers, oldest first (or ``newest_first``).

    Sessions named explicitly still obey the source filters (the post-session hook relies on it),
    but each one filtered out is explained in ``notices``. ``--source`` naming a source no session
    has is a typo until shown otherwise: an error when nothing else was selected, else a notice.
    A selection that comes out empty says what the database does hold.
    """
    now = time.time() if now is None else now
    rows = db.rows()
    if settings.sessions:
        ids = list(dict.fromkeys(db.resolve(ref) for ref in settings.sessions))
    elif settings.select_all or settings.since or settings.idle is not None:
        ids = db.logical_ids()
    else:
        raise InputError("say which sessions: a session id or title, --since WHEN, --idle AGE or --all")
    picked: dict[str, float] = {}  # id → last active
    sources: dict[str, int] = {}
    for sid in ids:
        row = rows[sid]
        source = str(row.data.get("source") or "")
        if "_delegate_from" in row.markers:
            source = "subagent"
        sources[source] = sources.get(source, 0) + 1
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
        picked[sid] = last
    if not settings.sessions:
        _check_sources(settings, sources, selected=len(picked), db=db, notices=notices)
        if not picked and notices is not None:
            notices.append(_nothing_selected(db, ids, settings))
    order = list(picked)
    if settings.limit is not None or newest_first:
        recent = sorted(order, key=lambda sid: picked[sid], reverse=True)[: settings.limit]
        kept = set(recent)
        order = recent if newest_first else [sid for sid in order if sid in kept]
    return order


def _check_sources(
    settings: Settings, sources: dict[str, int], *, selected: int, db: HermesDB, notices: list[str] | None
) -> None:
    missing = [s for s in settings.include_sources if s not in sources]
    if not missing:
        return
    import difflib

    have = ", ".join(f"{s or '(none)'} ({n})" for s, n in sorted(sources.items(), key=lambda kv: -kv[1]))
    hints = [m for s in missing for m in difflib.get_close_matches(s, list(sources), n=1)]
    message = (f"--source {', '.join(missing)}: no session in {db.path} has {'this source' if len(missing) == 1 else 'these sources'}; "
               f"sources there: {have or 'none'}" + (f"; did you mean --source {hints[0]}?" if hints else ""))
    if not selected:
        raise InputError(message)
    if notices is not None:
        notices.append(message)


def _nothing_selected(db: HermesDB, ids: list[str], settings: Settings) -> str:
    """What an empty selection says: what was asked, and how many sessions there are, the newest when."""
    asked = []
    if settings.since:
        asked.append(f"active since {settings.since:%Y-%m-%d %H:%M}")
    if settings.idle is not None:
        asked.append(f"idle for at least {_age(settings.idle)}")
    if settings.include_sources:
        asked.append(f"source {' or '.join(settings.include_sources)}")
    elif settings.exclude_sources:
        asked.append(f"source not {', '.join(settings.exclude_sources)}")
    if not ids:
        return f"no sessions selected: {db.path} has no sessions yet"
    newest = max(db.last_active(sid) for sid in ids)
    when = datetime.fromtimestamp(newest).astimezone()
    return (f"no sessions selected ({'; '.join(asked)}): {db.path} has {len(ids)} sessions, "
            f"the newest active {when:%Y-%m-%d %H:%M} (local time)")


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def run(
    settings: Settings,
    *,
    summarise: Summariser | None = None,
    summariser_id: str = "extractive",
    progress: Callable[[int], Iterable[int]] | None = None,
    on_result: Callable[[SessionResult], None] | None = None,
    on_plan: Callable[[Plan], None] | None = None,
) -> RunReport:
    """Distil the sessions ``settings`` selects into ``settings.out``.

    With no ``summarise`` given, the summariser follows ``settings.summarizer``: a model when one
    is configured or embedded (see ``pipeline.run.window``), else the extractive summariser.

    A run without a model wraps its loop in ``progress(total)``. A run with one works newest first
    and calls ``on_plan`` before the first call (how many sessions need a summary, the last run's
    rate): results arrive one by one through ``on_result``, and the caller shows its own progress.
    Stopped part-way (Ctrl-C), the notes written so far are recorded in the index and fingerprints,
    so the same command goes on where this one stopped.
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
        report.summarizer_local = llm.choice.embedded
    now = datetime.now(UTC)
    with ExitStack() as stack:
        if llm is not None:
            stack.enter_context(llm)
        db = None if settings.inputs else stack.enter_context(HermesDB(settings.db))
        if db is None:
            sessions = [s for path in settings.inputs for s in _file_sessions(path, settings, report.notices)]
            if settings.limit is not None:
                sessions = _newest(sessions, settings.limit)
            ids = [s.id for s in sessions]
        else:
            # With a model a run may take hours: the most recent sessions first, so a run stopped
            # part-way has done the ones a user most likely wants.
            ids = select_sessions(db, settings, notices=report.notices, newest_first=llm is not None)
            if len(ids) > MANY_SESSIONS:
                db.preload_message_stats()
        report.selected = len(ids)
        report.mark_setup_done()
        # A dry run must not even create the output directory; the index is saved once at the end.
        store = NoteStore(settings.out, create=not settings.dry_run, autosave=False)
        if settings.git and not settings.dry_run and ids:
            from pipeline.archive.finish import ensure_repository

            ensure_repository(settings.out)
        seen = _Fingerprints(settings.out)
        # The archive index's rows of the notes this run writes, computed where each note was rendered:
        # the link pass at the end then reads none of them back (``archive.index.RowStager``).
        from pipeline.archive.index import RowStager

        stager = None if settings.dry_run else RowStager(settings.out)
        stage = None if stager is None else stager.add
        steps = range(len(ids)) if llm is not None else _iterate_n(len(ids), progress)
        distil = partial(distill_session, settings=settings, store=store, summarise=summarise,
                         summariser_id=summariser_id, distilled_at=now, skills_for=skills_lookup(settings),
                         stage=stage)
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

            pending = [sid for sid in ids if check is None or not check.current(sid)]
            plan = llm.plan(pending, selected=len(ids))
            if on_plan:
                on_plan(plan)
            results = windowed(((ids[i], *load(ids[i])) for i in steps), llm, settings=settings, store=store,
                               distilled_at=now, stage=stage)
        elif jobs > 1:
            results = _pooled(ids, steps, db, load, jobs, settings=settings, store=store,
                              summariser_id=summariser_id, distilled_at=now, check=check, stage=stage)
        else:
            results = _serial(ids, steps, load, distil)
        try:
            for sid, fp, result in results:
                if fp is not None and result.status in ("written", "unchanged"):
                    seen.set(sid, fp, summariser_id)
                result = _redacted(result)
                report.add(result)
                if on_result:
                    on_result(result)
                if stager is not None:
                    stager.flush()
        finally:  # on Ctrl-C too: what was written is recorded, so the next run skips it
            if not settings.dry_run:
                # The index first: saving it makes the notes' renames durable (see NoteStore.sync),
                # and a fingerprint must never be on disk before the note it vouches for.
                store.save_index()
                seen.save()
            if stager is not None:
                stager.close()
        if not settings.dry_run:
            _finish_archive(settings, report)
    # Notices quote what went wrong (a model's error text, a file name): redacted like results.
    from pipeline.redact import redact

    report.notices[:] = [redact(n) for n in report.notices]
    report.elapsed_s = round(time.perf_counter() - started, 3)
    return report


def _newest(sessions: list[Session], n: int) -> list[Session]:
    """The ``n`` most recently active sessions, in their original order."""
    def last(s: Session) -> float:
        when = s.last_active_at or s.ended_at or s.started_at
        return when.timestamp() if when else 0.0

    kept = {id(s) for s in sorted(sessions, key=last, reverse=True)[:n]}
    return [s for s in sessions if id(s) in kept]


def _redacted(result: SessionResult) -> SessionResult:
    """The result with its error and problems redacted: they quote data (a bad value, an exception's
    text) and go to the terminal, the ``--json`` report and the run record."""
    from pipeline.redact import redact

    update: dict[str, Any] = {}
    if result.error and (clean := redact(result.error)) != result.error:
        update["error"] = clean
    if result.problems and (problems := tuple(redact(p) for p in result.problems)) != result.problems:
        update["problems"] = problems
    return result.model_copy(update=update) if update else result


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
    report.inform(done.info)


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
        # Recorded with the note: the fingerprint of the snapshot the session is read from.
        session, state = db.read_session_state(sid)
        return fingerprint(db, sid, state), session
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
    stage: Callable[[str, tuple[int, int, int], dict[str, Any]], None] | None = None,
) -> Iterator[tuple[str, str | None, SessionResult]]:
    """As ``_serial``, with read → render in worker processes (see ``pipeline.run.pool``).

    From state.db the main process only fingerprints: a session that needs work goes to a worker
    as its id, and the worker reads it. Sessions from files (no ``db``) are sent whole.
    """
    from pipeline.run.pool import DraftPool

    skills_for = skills_lookup(settings)
    #: session id → the fingerprint of the snapshot its note was drafted from (replaces the checked one)
    drafted: dict[str, str] = {}

    def resolve(item: Any, outcome: Draft | SessionResult | None) -> Draft | SessionResult:
        if isinstance(outcome, SessionResult):
            return outcome  # failed in the worker
        confirmed = outcome is not None and (
            outcome.status != "current" or store.unchanged(item.session_id, outcome.digest)  # type: ignore[attr-defined]
        )
        if confirmed:
            if outcome.fingerprint:  # type: ignore[union-attr]
                drafted[item.session_id] = outcome.fingerprint  # type: ignore[union-attr]
            return outcome  # type: ignore[return-value]
        # The worker died, or the index's hash is stale (the note was moved or deleted): redo it here.
        try:
            if db is not None:
                session, state = db.read_session_state(item.session_id)
                drafted[item.session_id] = fingerprint(db, item.session_id, state)
            else:
                session = load(item.session_id)[1]  # type: ignore[assignment]
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
        return guarded(sid, partial(commit, got, settings=settings, store=store, stage=stage))

    def settled(done: Iterable[tuple[str, object, SessionResult]]) -> Iterator[tuple[str, str | None, SessionResult]]:
        for sid, fp, result in done:
            yield sid, drafted.pop(sid, fp), result  # type: ignore[misc]

    with DraftPool(jobs, resolve, commit_one, db=db) as pool:
        yield from settled(_feed(pool, ids, steps, db, load, check, settings=settings, store=store,
                                 summariser_id=summariser_id, distilled_at=distilled_at, skills_for=skills_for))


def _feed(
    pool: Any, ids: list[str], steps: Iterable[int], db: HermesDB | None, load: Callable[[str], Loaded],
    check: _Check | None, *, settings: Settings, store: object, summariser_id: str, distilled_at: datetime,
    skills_for: Callable[[str], Any],
) -> Iterator[tuple[str, object, SessionResult]]:
    """Submit every session to ``pool`` in order; yields results as they are ready."""
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
        self.data: dict[str, list[str]] = self._read()
        self.dirty = False

    def _read(self) -> dict[str, list[str]]:
        # Only a cache: damaged, hand-edited or hostile (nested past the stack), it is started afresh.
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, list) and all(isinstance(x, str) for x in v)}

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
        current = self._read()
        current.update(self.data)
        atomic_write_text(self.path, json.dumps(current, sort_keys=True, indent=0))

