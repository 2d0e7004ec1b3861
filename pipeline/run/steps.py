"""The per-session steps every execution strategy shares: redact → chunk → facts → summarise →
render → write, split where a strategy needs to cut: ``prepare`` (before the summariser),
``finish`` (render), ``commit`` (the write, in the process that owns the note store).

Re-runs are cheap by design: before reading any message, a session's *fingerprint* (its
sessions rows plus an aggregate over its message rows: count, max id, live/archived counts) is
compared with the one recorded when its note was written. Hermes only ever appends, archives or
rewinds rows, so an unchanged fingerprint means unchanged input. When the fingerprint moved, the
session is read and its *content hash* (the chunks the summariser would see) decides.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Literal

from pipeline import __version__
from pipeline.chunk import chunk_session
from pipeline.config import Settings
from pipeline.errors import DistillError
from pipeline.models import Chunk, Facts, Note, Session, SessionResult, SessionSummary
from pipeline.read.hermes import HermesDB

Summariser = Callable[[Session, list[Chunk], Facts], SessionSummary]

#: Bump when rendering or summarising changes in a way that should refresh every note.
#: 2: the end state is judged on evidence (harness cuts, work left over) and the note says why, so a
#: note that claimed success wrongly is corrected on the next run, not only after ``--force``.
#: 3: quality round (tuned on the dev split): the session language counts only what the user typed (and a
#: non-Latin script framing their pastes), plus the file and decision rules of that round.
#: 4: the changed-files and ran-commands parts of a phase end like sentences; the last phase's "done"
#: stands only when the session is resolved; a short thank-you after a report of success closes the work.
PIPELINE_REVISION = "4"


def fingerprint(db: HermesDB, root_id: str, state: dict[str, Any] | None = None) -> str:
    """Cheap change detector for a logical session, read without touching message bodies.

    ``state`` is what ``HermesDB.read_session_state`` returned with the session a note was made
    from: recording *that* fingerprint (not one taken before the read) ties the note to exactly
    the snapshot it shows, so a session that changed in between is never called unchanged.
    """
    return _sha({**(state if state is not None else db.state(root_id)), "pipeline": [__version__, PIPELINE_REVISION]})


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
    #: the text of the evidence sidecar: the deterministic signals skill detection needs and a note
    #: does not carry (``pipeline.skills.evidence``)
    sidecar: str | None = None
    #: the note's file text when no earlier note is merged into it (``notes.render.note_text``)
    text: str | None = None
    #: the archive index's row for ``text`` (``archive.index.written_row``), staged once it is written
    index_row: dict[str, Any] | None = None
    #: the fingerprint of the snapshot the session was read from, when a worker read it
    fingerprint: str | None = None


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
    from pipeline.facts.derive import derive_facts
    from pipeline.redact import redact_session

    session = redact_session(session)
    chunks = chunk_session(session, budget=chunk_tokens)
    if not chunks:
        return Draft(session.id, "skipped", problems=(*session.problems, "empty session: no messages to distill"))
    if not any(m.role in ("user", "assistant") for m in session.messages):
        # A run that only started (aider's launch line, a system prompt) has nothing said in it to keep.
        return Draft(session.id, "skipped", problems=(*session.problems, "empty session: no one said anything"))
    digest = content_hash(session, chunks, summariser_id)
    if is_current is not None and is_current(digest):
        return Draft(session.id, "current", digest=digest)
    return Prepared(session, chunks, derive_facts(session, chunks), digest)


def finish(prep: Prepared, summary: SessionSummary, *, distilled_at: datetime,
           link_for: Callable[[str], str], skills_for: Callable[[str], Sequence[str]] | None = None) -> Draft:
    """render: the summarised session → its note (not yet written), plus its skill evidence.

    Also what writing and indexing the note would otherwise do in the process that commits it: the
    file text, the sidecar's text and the note's archive index row. In worker processes that work
    runs on every core instead of in the single committing process, and the index no longer reads
    back every note a cold run just wrote.
    """
    from pipeline.archive.index import written_row
    from pipeline.notes.render import note_text, render_note
    from pipeline.skills.evidence import evidence_from_session, sidecar_text

    skills = skills_for(prep.session.id) if skills_for else ()
    note = render_note(prep.session, summary, prep.facts, content_hash=prep.digest, distilled_at=distilled_at,
                       link_for=link_for, skills=skills)
    sidecar = sidecar_text(evidence_from_session(prep.session, summary, prep.facts, note_path=note.relpath))
    text = note_text(note)
    return Draft(prep.session.id, "note", digest=prep.digest, note=note, problems=prep.session.problems,
                 sidecar=sidecar, text=text, index_row=written_row(note.relpath, text, note.frontmatter, sidecar))


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


def commit(draft: Draft, *, settings: Settings, store: object,
           stage: Callable[[str, tuple[int, int, int], dict[str, Any]], None] | None = None) -> SessionResult:
    """The write half: a ``Draft`` → the note on disk (through ``store``) → its ``SessionResult``.

    ``stage(path, stat, row)`` (``archive.index.RowStager.add``) gets the draft's index row when the
    note was written from the draft's own text, with the written file's stat.
    """
    if draft.status == "skipped":
        return SessionResult(session_id=draft.session_id, status="skipped", problems=draft.problems)
    if draft.status == "current":
        rel = store.path_for(draft.session_id)  # type: ignore[attr-defined]
        return SessionResult(session_id=draft.session_id, status="unchanged",
                             path=str(settings.out / rel) if rel else None)
    assert draft.note is not None
    if draft.sidecar is not None and not settings.dry_run:
        from pipeline.skills.evidence import save_evidence_json

        # Before the note: the note's content hash is what makes the next run skip this session, so
        # a kill between the two writes must leave the note stale (rewritten), never the sidecar.
        save_evidence_json(settings.out, draft.session_id, draft.sidecar)
    result: SessionResult = store.write(draft.note, force=settings.force, dry_run=settings.dry_run,  # type: ignore[attr-defined]
                                        text=draft.text)
    written = store.take_written(draft.session_id)  # type: ignore[attr-defined]
    if written is not None and stage is not None and draft.index_row is not None:
        stage(*written, draft.index_row)
    if draft.problems:
        result = result.model_copy(update={"problems": draft.problems})
    return result


def skills_lookup(settings: Settings) -> Callable[[str], Sequence[str]]:
    """Session id → published skills it was evidence for (a note's ``skills:``), read once, when first asked."""
    by_session: dict[str, list[str]] | None = None

    def lookup(sid: str) -> Sequence[str]:
        nonlocal by_session
        if by_session is None:
            from pipeline.skills.store import SkillStore

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
    stage: Callable[[str, tuple[int, int, int], dict[str, Any]], None] | None = None,
) -> SessionResult:
    """One session through redact → chunk → facts → summarise → render → write.

    ``skills_for`` defaults to ``skills_lookup(settings)``; a caller distilling many sessions
    passes it in, so the skill store is read once rather than once per session. ``stage``: see ``commit``.
    """
    draft = draft_note(
        session, chunk_tokens=settings.chunk_tokens, summarise=summarise, summariser_id=summariser_id,
        distilled_at=distilled_at, link_for=store.link_for,  # type: ignore[attr-defined]
        is_current=None if settings.force else partial(store.unchanged, session.id),  # type: ignore[attr-defined]
        skills_for=skills_for or skills_lookup(settings),
    )
    return commit(draft, settings=settings, store=store, stage=stage)


def guarded(sid: str, fn: Callable[[], SessionResult]) -> SessionResult:
    try:
        return fn()
    except Exception as exc:  # one bad session must not stop the run; it is reported
        return failed(sid, exc)


def failed(sid: str, exc: Exception) -> SessionResult:
    error = str(exc) if isinstance(exc, DistillError) else f"{type(exc).__name__}: {exc}"
    return SessionResult(session_id=sid, status="failed", error=error)


def extractive() -> Summariser:
    from pipeline.summarize.extractive import summarise_extractive

    return summarise_extractive


def extractive_summary(session: Session, chunks: list[Chunk], facts: Facts) -> SessionSummary:
    """The extractive summariser, imported on first use."""
    return extractive()(session, chunks, facts)


