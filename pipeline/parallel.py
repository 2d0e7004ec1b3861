"""A process pool for the CPU-bound middle of a run: redact → chunk → facts → summarise → render.

With the extractive summariser every session costs CPU and nothing else, and sessions are
independent, so ``--jobs N`` worker processes divide the wall time by up to N. The split keeps
every piece of state in the main process:

* the main process reads state.db (one read-only connection, one snapshot per session), checks
  fingerprints, and *commits*: it writes notes, the index and fingerprints (a single writer);
* a worker gets a ``Session`` plus the two things rendering needs from the output directory: the
  content hash the index records for the session (so an unchanged session stops after chunking)
  and the wikilinks of its related sessions. It returns a ``Draft``.

Results are committed in submission order, and a session is not submitted while a session it
links to is still in flight, so notes, links and the report are byte-for-byte those of a serial
run. At most ``WINDOW_PER_JOB × jobs`` sessions are in flight: memory stays flat in the number of
sessions. Workers are forked when the platform allows it (they inherit the imported modules, so
start-up costs milliseconds); elsewhere they are spawned.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import datetime

from pipeline.errors import DistillError
from pipeline.models import Lineage, Session, SessionResult
from pipeline.run import Draft, draft_note

#: Sessions in flight per worker: enough to keep workers busy while the main process commits.
WINDOW_PER_JOB = 3
#: Below this many sessions to distill, starting workers costs more than it saves.
MIN_SESSIONS = 8
MAX_AUTO_JOBS = 4


def auto_jobs() -> int:
    """``min(usable CPUs, 4)``: the default worker count for the extractive summariser."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on macOS / Windows
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_AUTO_JOBS))


def lineage_ids(lineage: Lineage) -> set[str]:
    """Every session id a note for this lineage can link to."""
    ids: set[str] = set()
    for value in lineage.model_dump().values():
        if isinstance(value, str):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(v for v in value if isinstance(v, str))
    return ids


@dataclass(frozen=True)
class _Job:
    session: Session
    known_hash: str | None
    links: dict[str, str]
    skills: tuple[str, ...]
    chunk_tokens: int
    summariser_id: str
    distilled_at: datetime


def _draft_extractive(job: _Job) -> Draft | SessionResult:
    """Runs in a worker. Failures come back as a failed result: exceptions need not pickle."""
    from pipeline.extractive import summarise_extractive
    from pipeline.render import default_link

    try:
        return draft_note(
            job.session, chunk_tokens=job.chunk_tokens, summarise=summarise_extractive,
            summariser_id=job.summariser_id, distilled_at=job.distilled_at,
            link_for=lambda sid: job.links.get(sid) or default_link(sid),
            is_current=None if job.known_hash is None else job.known_hash.__eq__,
            skills_for=lambda _sid: job.skills,
        )
    except DistillError as exc:
        return SessionResult(session_id=job.session.id, status="failed", error=str(exc))
    except Exception as exc:  # reported per session, as in a serial run
        return SessionResult(session_id=job.session.id, status="failed", error=f"{type(exc).__name__}: {exc}")


#: What the caller does with a finished item: commit a worker's draft, or redo it in-process.
Finish = Callable[["_Item", "Draft | SessionResult | None"], SessionResult]


@dataclass
class _Item:
    session_id: str
    tag: object  # the caller's context (e.g. the fingerprint), handed back with the result
    future: Future[Draft | SessionResult] | None = None
    session: Session | None = None
    result: SessionResult | None = None
    related: frozenset[str] = frozenset()


class DraftPool:
    """Ordered, bounded fan-out of ``draft_note`` (extractive) over worker processes.

    ``submit`` a session or ``add`` a result that needs no work; ``drain`` yields every item
    whose turn has come, in the order given, as ``(session id, tag, result)``.
    """

    def __init__(self, jobs: int, finish: Finish) -> None:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self.jobs = jobs
        self._finish = finish
        self._executor: ProcessPoolExecutor | None = ProcessPoolExecutor(jobs, mp_context=context)
        # Start the workers now, before the caller starts threads (a progress bar): forking a
        # process with other threads running can leave a lock held in the child forever.
        self._executor.submit(int).result()
        self._queue: deque[_Item] = deque()
        self._in_flight: dict[str, int] = {}

    def __enter__(self) -> DraftPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def add(self, session_id: str, tag: object, result: SessionResult) -> Iterator[tuple[str, object, SessionResult]]:
        self._queue.append(_Item(session_id, tag, result=result))
        yield from self._ready()

    def submit(
        self, session: Session, tag: object, *, known_hash: str | None, link_for: Callable[[str], str],
        chunk_tokens: int, summariser_id: str, distilled_at: datetime,
        skills_for: Callable[[str], Sequence[str]] = lambda _sid: (),
    ) -> Iterator[tuple[str, object, SessionResult]]:
        """Queue ``session``; yields what is finished, waiting only while the window is full."""
        related = frozenset(lineage_ids(session.lineage) - {session.id})
        # Its links must see the notes of related sessions committed before it, as in a serial run.
        while any(self._in_flight.get(sid) for sid in related):
            yield from self._pop()
        item = _Item(session.id, tag, session=session, related=related)
        if self._executor is not None:
            job = _Job(session, known_hash, {sid: link_for(sid) for sid in related}, tuple(skills_for(session.id)),
                       chunk_tokens, summariser_id, distilled_at)
            try:
                item.future = self._executor.submit(_draft_extractive, job)
            except BrokenProcessPool:
                self._executor = None  # the rest run in-process (see _pop)
        self._in_flight[session.id] = self._in_flight.get(session.id, 0) + 1
        self._queue.append(item)
        while len(self._queue) > WINDOW_PER_JOB * self.jobs:
            yield from self._pop()
        yield from self._ready()

    def drain(self) -> Iterator[tuple[str, object, SessionResult]]:
        while self._queue:
            yield from self._pop()

    def _ready(self) -> Iterator[tuple[str, object, SessionResult]]:
        # Without a future the item is a result, or runs in-process: its turn has come either way.
        while self._queue and (self._queue[0].future is None or self._queue[0].future.done()):
            yield from self._pop()

    def _pop(self) -> Iterator[tuple[str, object, SessionResult]]:
        item = self._queue.popleft()
        if item.result is not None:
            yield item.session_id, item.tag, item.result
            return
        try:
            outcome: Draft | SessionResult | None = item.future.result() if item.future else None
        except BrokenProcessPool:
            # A worker died (killed, out of memory): finish this and later sessions in-process.
            self._executor = None
            outcome = None
        result = self._finish(item, outcome)
        self._in_flight[item.session_id] -= 1
        yield item.session_id, item.tag, result
