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
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pipeline import __version__
from pipeline.chunk import chunk_session
from pipeline.config import Settings
from pipeline.errors import DistillError, InputError
from pipeline.extract import HermesDB
from pipeline.models import Chunk, Facts, Note, RunReport, Session, SessionResult, SessionSummary

Summariser = Callable[[Session, list[Chunk], Facts], SessionSummary]

#: Bump when rendering or summarising changes in a way that should refresh every note.
PIPELINE_REVISION = "1"
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


def fingerprint(db: HermesDB, root_id: str) -> str:
    """Cheap change detector for a logical session, read without touching message bodies."""
    ids = db.chain(root_id)
    agg = db.message_stats(ids)
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


@dataclass(frozen=True)
class Draft:
    """A session taken as far as it goes without the output directory: a note, or why there is none.

    ``status`` is ``note`` (``note`` set), ``current`` (the note on disk was made from ``digest``,
    per the caller's check) or ``skipped`` (nothing to distill).
    """

    session_id: str
    status: Literal["note", "current", "skipped"]
    digest: str | None = None
    note: Note | None = None
    problems: tuple[str, ...] = ()
    #: the deterministic signals skill detection needs and a note does not carry (``pipeline.evidence``)
    evidence: Any = None


@dataclass
class Prepared:
    """A session ready for its summariser: redacted, chunked, hashed, with its facts."""

    session: Session
    chunks: list[Chunk]
    facts: Facts
    digest: str


def prepare(
    session: Session, *, chunk_tokens: int, summariser_id: str, is_current: Callable[[str], bool] | None
) -> Prepared | Draft:
    """redact → chunk → facts; a ``Draft`` instead when there is nothing (new) to summarise.

    ``is_current(digest)`` (``None`` under ``--force``) short-cuts a session whose note was already
    made from the same inputs, before the costly half runs.
    """
    from pipeline.facts import derive_facts
    from pipeline.redact import redact_session

    session = redact_session(session)
    chunks = chunk_session(session, budget=chunk_tokens)
    if not chunks:
        return Draft(session.id, "skipped", problems=(*session.problems, "empty session: no messages to distill"))
    digest = content_hash(session, chunks, summariser_id)
    if is_current is not None and is_current(digest):
        return Draft(session.id, "current", digest=digest)
    return Prepared(session, chunks, derive_facts(session, chunks), digest)


def finish(prep: Prepared, summary: SessionSummary, *, distilled_at: datetime,
           link_for: Callable[[str], str], skills_for: Callable[[str], Sequence[str]] | None = None) -> Draft:
    """render: the summarised session → its note (not yet written), plus its skill evidence."""
    from pipeline.evidence import evidence_from_session
    from pipeline.render import render_note

    skills = skills_for(prep.session.id) if skills_for else ()
    note = render_note(prep.session, summary, prep.facts, content_hash=prep.digest, distilled_at=distilled_at,
                       link_for=link_for, skills=skills)
    evidence = evidence_from_session(prep.session, summary, prep.facts, note_path=note.relpath)
    return Draft(prep.session.id, "note", digest=prep.digest, note=note, problems=prep.session.problems,
                 evidence=evidence)


def draft_note(
    session: Session,
    *,
    chunk_tokens: int,
    summarise: Summariser,
    summariser_id: str,
    distilled_at: datetime,
    link_for: Callable[[str], str],
    is_current: Callable[[str], bool] | None,
    skills_for: Callable[[str], Sequence[str]] | None = None,
) -> Draft:
    """redact → chunk → facts → summarise → render. Pure but for the three lookups passed in."""
    prep = prepare(session, chunk_tokens=chunk_tokens, summariser_id=summariser_id, is_current=is_current)
    if isinstance(prep, Draft):
        return prep
    summary = summarise(prep.session, prep.chunks, prep.facts)
    return finish(prep, summary, distilled_at=distilled_at, link_for=link_for, skills_for=skills_for)


def commit(draft: Draft, *, settings: Settings, store: object) -> SessionResult:
    """The write half: a ``Draft`` → the note on disk (through ``store``) → its ``SessionResult``."""
    if draft.status == "skipped":
        return SessionResult(session_id=draft.session_id, status="skipped", problems=draft.problems)
    if draft.status == "current":
        rel = store.path_for(draft.session_id)  # type: ignore[attr-defined]
        return SessionResult(session_id=draft.session_id, status="unchanged",
                             path=str(settings.out / rel) if rel else None)
    assert draft.note is not None
    result: SessionResult = store.write(draft.note, force=settings.force, dry_run=settings.dry_run)  # type: ignore[attr-defined]
    if draft.evidence is not None and not settings.dry_run:
        from pipeline.evidence import save_evidence

        save_evidence(settings.out, draft.evidence)
    if draft.problems:
        result = result.model_copy(update={"problems": draft.problems})
    return result


def skills_lookup(settings: Settings) -> Callable[[str], Sequence[str]]:
    """Session id → published skills it was evidence for (a note's ``skills:``), read once, when first asked."""
    by_session: dict[str, list[str]] | None = None

    def lookup(sid: str) -> Sequence[str]:
        nonlocal by_session
        if by_session is None:
            from pipeline.skills import SkillStore

            by_session = {}
            for name, record in SkillStore(settings.out, settings.home).published().items():
                for evidence_id in record.get("evidence", []):
                    by_session.setdefault(evidence_id, []).append(name)
        return sorted(by_session.get(sid, ()))

    return lookup


def distill_session(
    session: Session,
    *,
    settings: Settings,
    store: object,
    summarise: Summariser,
    summariser_id: str,
    distilled_at: datetime,
    skills_for: Callable[[str], Sequence[str]] | None = None,
) -> SessionResult:
    """One session through redact → chunk → facts → summarise → render → write.

    ``skills_for`` defaults to ``skills_lookup(settings)``; a caller distilling many sessions
    passes it in, so the skill store is read once rather than once per session.
    """
    draft = draft_note(
        session, chunk_tokens=settings.chunk_tokens, summarise=summarise, summariser_id=summariser_id,
        distilled_at=distilled_at, link_for=store.link_for,  # type: ignore[attr-defined]
        is_current=None if settings.force else partial(store.unchanged, session.id),  # type: ignore[attr-defined]
        skills_for=skills_for or skills_lookup(settings),
    )
    return commit(draft, settings=settings, store=store)


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
    is configured or embedded (see ``pipeline.llmrun``), else the extractive summariser.
    """
    from pipeline.write import NoteStore

    started = time.perf_counter()
    report = RunReport(db=None if settings.inputs else str(settings.db), out=str(settings.out),
                       summarizer=summariser_id, dry_run=settings.dry_run)
    llm = None
    if summarise is None and settings.summarizer != "extractive":
        # Imported only when a model may be used: a nightly re-run with nothing new to distill
        # should not pay for asyncio, litellm or the extractive rules (see evals/bench_core.py).
        from pipeline.llmrun import llm_for

        llm = llm_for(settings, report)
    builtin = summarise is None and llm is None
    summarise = summarise or _extractive_summary
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
            from pipeline.llmrun import windowed

            results = windowed(((ids[i], *load(ids[i])) for i in steps), llm, settings=settings, store=store,
                               distilled_at=now, guarded=_guarded)
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
    except Exception as exc:  # one bad session must not stop the run; it is reported
        return _failed(sid, exc)


def _failed(sid: str, exc: Exception) -> SessionResult:
    error = str(exc) if isinstance(exc, DistillError) else f"{type(exc).__name__}: {exc}"
    return SessionResult(session_id=sid, status="failed", error=error)


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
        return None, _failed(sid, exc)


def _serial(
    ids: list[str], steps: Iterable[int], load: Callable[[str], Loaded], distil: Callable[[Session], SessionResult]
) -> Iterator[tuple[str, str | None, SessionResult]]:
    for i in steps:
        fp, got = load(ids[i])
        result = _guarded(ids[i], partial(distil, got)) if isinstance(got, Session) else got
        yield ids[i], fp, result


def _pooled(
    ids: list[str], steps: Iterable[int], db: HermesDB | None, load: Callable[[str], Loaded], jobs: int, *,
    settings: Settings, store: object, summariser_id: str, distilled_at: datetime, check: _Check | None,
) -> Iterator[tuple[str, str | None, SessionResult]]:
    """As ``_serial``, with read → render in worker processes (see ``pipeline.parallel``).

    From state.db the main process only fingerprints: a session that needs work goes to a worker
    as its id, and the worker reads it. Sessions from files (no ``db``) are sent whole.
    """
    from pipeline.parallel import DraftPool

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
                session, chunk_tokens=settings.chunk_tokens, summarise=_extractive(),
                summariser_id=summariser_id, distilled_at=distilled_at,
                link_for=store.link_for,  # type: ignore[attr-defined]
                is_current=None if settings.force else partial(store.unchanged, item.session_id),  # type: ignore[attr-defined]
                skills_for=skills_for,
            )
        except Exception as exc:  # one bad session must not stop the run; it is reported
            return _failed(item.session_id, exc)

    def commit_one(sid: str, got: Draft | SessionResult) -> SessionResult:
        if isinstance(got, SessionResult):
            return got
        return _guarded(sid, partial(commit, got, settings=settings, store=store))

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
                yield from pool.add(sid, None, _failed(sid, exc))
                continue
            known = None if settings.force else store.recorded_hash(sid)  # type: ignore[attr-defined]
            yield from pool.submit(
                sid, lineage, fp, known_hash=known, link_for=store.link_for,  # type: ignore[attr-defined]
                chunk_tokens=settings.chunk_tokens, summariser_id=summariser_id, distilled_at=distilled_at,
                skills_for=skills_for,
            )
        yield from pool.drain()


def _extractive() -> Summariser:
    from pipeline.extractive import summarise_extractive

    return summarise_extractive


def _extractive_summary(session: Session, chunks: list[Chunk], facts: Facts) -> SessionSummary:
    """The extractive summariser, imported on first use."""
    return _extractive()(session, chunks, facts)


def _worker_count(settings: Settings, *, builtin: bool, sessions: int) -> int:
    """Worker processes for this run: only for the built-in extractive summariser, on enough sessions."""
    from pipeline.parallel import MIN_SESSIONS, auto_jobs

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

