"""A process pool for the CPU-bound middle of a run: redact → chunk → facts → summarise → render.

With the extractive summariser every session costs CPU and nothing else, and sessions are
independent, so ``--jobs N`` worker processes divide the wall time by up to N. The split keeps
every piece of state in the main process:

* the main process reads state.db (one read-only connection, one snapshot per session), checks
  fingerprints, and *commits*: it writes notes, the index and fingerprints (a single writer);
* a worker gets a session *id* plus the two things rendering needs from the output directory: the
  content hash the index records for the session (so an unchanged session stops after chunking)
  and the wikilinks of its related sessions. It reads and decodes the session itself, through its
  own read-only connection and the main process's copy of the sessions table (so it sees the
  lineage that was fingerprinted), and returns a ``Draft``. Shipping ids instead of ``Session``
  models keeps reading, decoding and pickling off the main process, which was the bottleneck;
* commits run on a few threads of the main process (``COMMIT_THREADS``): each note is still
  written to a temp file, fsynced and renamed, but the fsyncs of concurrent commits overlap and
  the file system batches them into one journal commit, instead of the run waiting on each.

Workers never outlive the run. A SIGKILL of the main process (what the OOM killer sends) runs
no cleanup, and a worker blocked on its task queue would wait forever, holding state.db open. So
each worker watches a pipe whose only write end is the main process's: when that process dies,
however it dies, the kernel closes it and the worker exits.

Results are reported in submission order, and a session is not submitted while a session it
links to is still in flight (drafted or being committed), so notes, links and the report are
byte-for-byte those of a serial run. At most ``WINDOW_PER_JOB × jobs`` sessions are in flight: memory stays flat in the number of
sessions. Workers are forked when the platform allows it (they inherit the imported modules, so
start-up costs milliseconds); elsewhere they are spawned.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import datetime

from pipeline.errors import DistillError
from pipeline.models import Lineage, Session, SessionResult
from pipeline.read.hermes import HermesDB
from pipeline.run.steps import Draft, draft_note, fingerprint

#: Sessions in flight per worker: enough to keep workers busy while the main process commits.
WINDOW_PER_JOB = 3
#: Below this many sessions to distill, starting workers costs more than it saves.
MIN_SESSIONS = 8
MAX_AUTO_JOBS = 4
#: Threads committing notes at once. Their fsyncs share journal commits: 4 concurrent fsyncs cost
#: about what one does (measured on ext4: 3.3 ms per file alone, 0.3 ms with 4 threads).
COMMIT_THREADS = 4


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
    session_id: str
    session: Session | None  # given when it does not come from state.db (transcript files)
    known_hash: str | None
    links: dict[str, str]
    skills: tuple[str, ...]
    chunk_tokens: int
    summariser_id: str
    distilled_at: datetime


#: The worker's reader of state.db, set by ``_attach`` when the worker starts.
_READER: HermesDB | None = None


def _attach(args: tuple[object, ...] | None, lifeline: tuple[int, int, int, bool] | None = None) -> None:
    global _READER
    if lifeline is not None:
        _watch_parent(*lifeline)
    if args is not None:
        _READER = HermesDB.attach(*args)  # type: ignore[arg-type]


def _watch_parent(read_fd: int, write_fd: int, parent: int, forked: bool) -> None:
    """Exit this worker as soon as the process that started it is gone, however it died.

    Forked, it watches the pipe (its own copy of the write end closed first: it would keep the
    pipe open forever). Spawned (no fork on the platform), the fds were not inherited and it polls
    its parent's pid instead.
    """
    if forked:
        os.close(write_fd)

    def by_pipe() -> None:
        while True:
            try:
                if os.read(read_fd, 1) == b"":  # EOF: every write end is closed, the parent is dead
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        os._exit(1)

    def by_polling() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=by_pipe if forked else by_polling, name="distill-lifeline", daemon=True).start()


def _draft_extractive(job: _Job) -> Draft | SessionResult:
    """Runs in a worker. Failures come back as a failed result: exceptions need not pickle."""
    from pipeline.notes.render import default_link
    from pipeline.summarize.extractive import summarise_extractive

    try:
        session, state = job.session, None
        if session is None:
            assert _READER is not None, "worker started without a database reader"
            session, state = _READER.read_session_state(job.session_id)
        draft = draft_note(
            session, chunk_tokens=job.chunk_tokens, summarise=summarise_extractive,
            summariser_id=job.summariser_id, distilled_at=job.distilled_at,
            link_for=lambda sid: job.links.get(sid) or default_link(sid),
            is_current=None if job.known_hash is None else job.known_hash.__eq__,
            skills_for=lambda _sid: job.skills,
        )
        if state is not None and _READER is not None:
            draft = dataclasses.replace(draft, fingerprint=fingerprint(_READER, job.session_id, state))
        return draft
    except DistillError as exc:
        return SessionResult(session_id=job.session_id, status="failed", error=str(exc))
    except Exception as exc:  # reported per session, as in a serial run
        return SessionResult(session_id=job.session_id, status="failed", error=f"{type(exc).__name__}: {exc}")


#: Main thread: a worker's outcome (``None``: the worker died) → what to commit, or a final result.
Resolve = Callable[["_Item", "Draft | SessionResult | None"], "Draft | SessionResult"]
#: A commit thread: what ``Resolve`` returned → the session's result. Must not raise.
Commit = Callable[[str, "Draft | SessionResult"], SessionResult]


@dataclass
class _Item:
    session_id: str
    tag: object  # the caller's context (e.g. the fingerprint), handed back with the result
    future: Future[Draft | SessionResult] | None = None  # the worker's draft
    commit: Future[SessionResult] | None = None  # the commit thread's result
    result: SessionResult | None = None
    related: frozenset[str] = frozenset()
    submitted: bool = False


class DraftPool:
    """Ordered, bounded fan-out of ``draft_note`` (extractive) over worker processes.

    ``submit`` a session id or ``add`` a result that needs no work; ``drain`` yields every item
    whose turn has come, in the order given, as ``(session id, tag, result)``. A draft goes
    through ``resolve`` (main thread) and then ``commit`` (one of ``COMMIT_THREADS`` threads).
    """

    def __init__(self, jobs: int, resolve: Resolve, commit: Commit, *, db: HermesDB | None) -> None:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self.jobs = jobs
        self._resolve = resolve
        self._commit = commit
        # The lifeline: the read end goes to every worker, the write end stays here (see module docstring).
        self._lifeline = os.pipe()
        self._executor: ProcessPoolExecutor | None = ProcessPoolExecutor(
            jobs, mp_context=context, initializer=_attach,
            initargs=(db.worker_args() if db is not None else None,
                      (*self._lifeline, os.getpid(), context.get_start_method() == "fork")),
        )
        # Start the workers now, before the caller starts threads (a progress bar): forking a
        # process with other threads running can leave a lock held in the child forever.
        self._executor.submit(int).result()
        self._committer: ThreadPoolExecutor | None = ThreadPoolExecutor(COMMIT_THREADS, "distill-commit")
        self._queue: deque[_Item] = deque()  # waiting for a worker, in order
        self._committing: deque[_Item] = deque()  # resolved, being committed, in order
        self._in_flight: dict[str, int] = {}

    def __enter__(self) -> DraftPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._committer is not None:
            self._committer.shutdown(wait=True, cancel_futures=True)
            self._committer = None
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
        for fd in self._lifeline:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lifeline = ()

    def add(self, session_id: str, tag: object, result: SessionResult) -> Iterator[tuple[str, object, SessionResult]]:
        self._queue.append(_Item(session_id, tag, result=result))
        yield from self._ready()

    def submit(
        self, session_id: str, lineage: Lineage, tag: object, *, session: Session | None = None, known_hash: str | None,
        link_for: Callable[[str], str], chunk_tokens: int, summariser_id: str, distilled_at: datetime,
        skills_for: Callable[[str], Sequence[str]] = lambda _sid: (),
    ) -> Iterator[tuple[str, object, SessionResult]]:
        """Queue ``session_id``; yields what is finished, waiting only while the window is full."""
        related = frozenset(lineage_ids(lineage) - {session_id})
        # Its links must see the notes of related sessions committed before it, as in a serial run.
        while any(self._in_flight.get(sid) for sid in related):
            yield from self._step()
        item = _Item(session_id, tag, related=related, submitted=True)
        if self._executor is not None:
            job = _Job(session_id, session, known_hash, {sid: link_for(sid) for sid in related}, tuple(skills_for(session_id)),
                       chunk_tokens, summariser_id, distilled_at)
            try:
                item.future = self._executor.submit(_draft_extractive, job)
            except BrokenProcessPool:
                self._executor = None  # the rest run in-process (see _advance)
        self._in_flight[session_id] = self._in_flight.get(session_id, 0) + 1
        self._queue.append(item)
        while len(self._queue) > WINDOW_PER_JOB * self.jobs:
            yield from self._advance()
        yield from self._ready()

    def drain(self) -> Iterator[tuple[str, object, SessionResult]]:
        while self._queue or self._committing:
            yield from self._step()

    def _step(self) -> Iterator[tuple[str, object, SessionResult]]:
        """Make progress, waiting if need be: retire the oldest commit, else start the next one."""
        if self._committing:
            yield from self._retire()
        else:
            yield from self._advance()

    def _ready(self) -> Iterator[tuple[str, object, SessionResult]]:
        # Without a future the item is a result, or runs in-process: its turn has come either way.
        while self._queue and (self._queue[0].future is None or self._queue[0].future.done()):
            yield from self._advance()
        while self._committing and (self._committing[0].commit is None or self._committing[0].commit.done()):
            yield from self._retire()

    def _advance(self) -> Iterator[tuple[str, object, SessionResult]]:
        """The oldest queued item: wait for its worker, resolve it, hand it to a commit thread."""
        item = self._queue.popleft()
        if item.result is None:
            try:
                outcome: Draft | SessionResult | None = item.future.result() if item.future else None
            except BrokenProcessPool:
                # A worker died (killed, out of memory): finish this and later sessions in-process.
                self._executor = None
                outcome = None
            item.future = None
            resolved = self._resolve(item, outcome)
            if self._committer is None:
                item.result = self._commit(item.session_id, resolved)
            else:
                item.commit = self._committer.submit(self._commit, item.session_id, resolved)
        self._committing.append(item)
        # Bounded: a committed note waits here only until the ones before it are done.
        while len(self._committing) > 2 * COMMIT_THREADS:
            yield from self._retire()

    def _retire(self) -> Iterator[tuple[str, object, SessionResult]]:
        item = self._committing.popleft()
        result = item.result if item.commit is None else item.commit.result()
        assert result is not None
        if item.submitted:
            self._in_flight[item.session_id] -= 1
        yield item.session_id, item.tag, result
