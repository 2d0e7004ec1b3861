"""LLM summaries inside a run: a model chosen up front, a client started only when needed.

The model is *resolved* before any session is read (cheap: config files only), because its name
is part of every session's fingerprint and content hash: switching models re-summarises. The
client, and with the embedded model the llama.cpp server, is only *started* when the first
session actually needs a summary, so a nightly run where nothing changed starts nothing.

Sessions are summarised a window at a time: a few sessions per call slot are prepared in the main
thread (SQLite reads stay there), their map/reduce calls run concurrently on the client's event
loop with at most ``jobs`` calls in flight, and each is rendered and written, in order, as soon as
its own summary is done (not when the window's last one is), so progress shows session by session
and Ctrl-C loses at most the sessions in flight (their finished calls stay in the cache). With one
call slot (the local model) the window is one session: several would only interleave their calls
and finish together. Any failure of one session falls back to the extractive summary for that
session and is reported; the run goes on.

Each run with a model records its rate beside the summary cache (seconds per session the model
summarised; the server start is excluded, and a session answered from the cache alone is not
counted), so the next run can say up front how long it will take (``Plan``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.models import RunReport, Session, SessionResult, SessionSummary
from pipeline.run.steps import (
    Draft,
    Prepared,
    commit,
    content_hash,
    failed,
    finish,
    guarded,
    prepare,
    skills_lookup,
)

Item = tuple[str, str | None, Session | SessionResult]
Outcome = tuple[str, str | None, SessionResult]

#: Sessions in flight when --jobs is left on auto: a local llama.cpp server serves one request
#: at a time on a small machine, a hosted API takes several.
AUTO_JOBS_LOCAL, AUTO_JOBS_REMOTE = 1, 4
#: Sessions prepared per window for each call slot. The client caps calls in flight at --jobs, so
#: a deeper window only keeps the slots busy while the slowest session of a window finishes.
WINDOW_PER_SLOT = 4
#: Beside the summary cache: model id → the last run's seconds per summarised session.
RATES_FILE = "rates.json"


@dataclass(frozen=True)
class Plan:
    """What a run with a model is about to do, known before its first call."""

    selected: int
    #: sessions whose note is not current, in the order they will be done (newest first)
    pending: tuple[str, ...]
    model: str
    #: the embedded model, served on this machine (nothing leaves it)
    local: bool
    #: the last run's seconds per summarised session with this model, if one was recorded
    seconds_per_session: float | None


class LLMRun:
    """The chosen model for one run, and its lazily opened client and cache."""

    def __init__(self, settings: Settings, report: RunReport, choice: Any) -> None:
        self.settings, self.report, self.choice = settings, report, choice
        self.summariser_id: str = choice.model
        self.jobs = settings.jobs if settings.jobs > 0 else (AUTO_JOBS_LOCAL if choice.embedded else AUTO_JOBS_REMOTE)
        self._stack = ExitStack()
        self._opened = False
        self._client: Any = None
        self._cache: Any = None
        self._busy = 0.0  # seconds spent waiting for summaries, server start excluded
        self._summarised = 0  # sessions the model (not the fallback) summarised

    def __enter__(self) -> LLMRun:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._save_rate()
        finally:
            self._stack.close()

    # -- the rate: how long a session takes with this model ------------------------------

    def _rates_path(self) -> Path:
        folder = self.settings.cache_path.parent if self.settings.cache_path else self.settings.home / "distill"
        return folder / RATES_FILE

    def _rates(self) -> dict[str, Any]:
        try:
            data = json.loads(self._rates_path().read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def plan(self, pending: list[str], *, selected: int) -> Plan:
        entry = self._rates().get(self.summariser_id)
        rate = entry.get("seconds_per_session") if isinstance(entry, dict) else None
        return Plan(selected=selected, pending=tuple(pending), model=self.summariser_id, local=self.choice.embedded,
                    seconds_per_session=float(rate) if isinstance(rate, int | float) and rate > 0 else None)

    def _save_rate(self) -> None:
        if not self._summarised or self.settings.dry_run:
            return
        from pipeline.atomic import atomic_write_text

        rates = self._rates()
        rates[self.summariser_id] = {"seconds_per_session": round(self._busy / self._summarised, 2),
                                     "sessions": self._summarised, "at": datetime.now(UTC).isoformat(timespec="seconds")}
        with contextlib.suppress(OSError):  # only the next run's estimate is lost
            atomic_write_text(self._rates_path(), json.dumps(rates, indent=1, sort_keys=True))

    def _open(self) -> Any:
        if not self._opened:
            from pipeline.llm.client import open_client
            from pipeline.summarize.cache import open_cache

            self._opened = True
            self._client = self._stack.enter_context(open_client(self.settings, self.report, concurrency=self.jobs))
            if self._client is not None:
                self._cache = open_cache(self.settings)
        return self._client

    def summarise_many(self, preps: list[Prepared]) -> Iterator[SessionSummary]:
        """One summary per prepared session, in order, each as soon as it is done; extractive where the
        model fails. All of them are in flight at once (``jobs`` caps the calls)."""
        if not preps:
            return  # nothing to summarise: the client, and the embedded server, are not started
        from pipeline.summarize.extractive import summarise_extractive
        from pipeline.summarize.mapreduce import asummarise_llm

        def fallback(p: Prepared) -> SessionSummary:
            return summarise_extractive(p.session, p.chunks, p.facts, lang=self.settings.lang)

        client = self._open()
        if client is None:
            yield from (fallback(p) for p in preps)
            return

        async def start() -> list[asyncio.Task[SessionSummary]]:
            return [asyncio.ensure_future(
                asummarise_llm(p.session, p.chunks, p.facts, self.settings, client, self._cache, self.report))
                for p in preps]

        async def settled(task: asyncio.Task[SessionSummary]) -> SessionSummary | Exception:
            try:
                return await task
            except Exception as exc:  # reported below; the other sessions go on
                return exc

        # Each ``client.run`` drives the loop until one task is done; the others progress meanwhile.
        # Tasks still pending when this generator is abandoned (Ctrl-C) are cancelled by client.close().
        tasks = client.run(start())
        for p, task in zip(preps, tasks, strict=True):
            began, calls = time.monotonic(), client.usage.calls
            result = client.run(settled(task))
            if isinstance(result, Exception):
                self.report.fallbacks += 1
                self.report.notices.append(f"session {p.session.id}: LLM summary failed ({result}); used extractive")
                result = fallback(p)
            elif result.summarizer == self.summariser_id and client.usage.calls > calls:
                # A session answered from the cache alone would make the model look fast.
                self._summarised += 1
                self._busy += time.monotonic() - began
            yield result


def llm_for(settings: Settings, report: RunReport) -> LLMRun | None:
    """The run's model, or None for extractive summaries (with one notice saying why)."""
    if settings.summarizer == "extractive":
        return None
    from pipeline.llm.choice import resolve_model

    notes: list[str] = []
    choice = resolve_model(settings, notes=notes)
    if choice is None:
        why = "; ".join(notes) or "no model configured"
        if settings.summarizer == "llm":
            raise InputError(f"--summarizer llm: {why}")
        report.notices.append(f"extractive summaries: {why}")
        return None
    report.notices.extend(n for n in notes if n not in report.notices)
    return LLMRun(settings, report, choice)


def windowed(
    items: Iterable[Item], llm: LLMRun, *, settings: Settings, store: Any, distilled_at: datetime,
    stage: Callable[[str, tuple[int, int, int], dict[str, Any]], None] | None = None,
) -> Iterator[Outcome]:
    """Prepare sessions, summarise a window of them concurrently, write each; results in input order.

    ``stage``: see ``steps.commit``."""
    window: list[tuple[str, str | None, Prepared | Draft | SessionResult]] = []
    skills_for = skills_lookup(settings)
    size = llm.jobs * WINDOW_PER_SLOT if llm.jobs > 1 else 1

    def render_and_commit(prep: Prepared, summary: SessionSummary) -> SessionResult:
        draft = finish(prep, summary, distilled_at=distilled_at, link_for=store.link_for, skills_for=skills_for)
        return commit(draft, settings=settings, store=store, stage=stage)

    def flush() -> Iterator[Outcome]:
        summaries = llm.summarise_many([p for _, _, p in window if isinstance(p, Prepared)])
        broken: Exception | None = None
        for sid, fp, got in window:
            if isinstance(got, SessionResult):
                yield sid, fp, got
                continue
            if isinstance(got, Prepared):
                if broken is None:
                    try:
                        summary = next(summaries)
                    except Exception as exc:  # the client could not even start: every session fails alike
                        broken = exc
                if broken is not None:
                    yield sid, fp, failed(sid, broken)
                    continue
                if summary.summarizer != llm.summariser_id:
                    # An extractive fallback: hash it as what it is and forget the fingerprint, so
                    # the next run tries the model again instead of calling this note current.
                    got = replace(got, digest=content_hash(got.session, got.chunks, summary.summarizer))
                    fp = None
                yield sid, fp, guarded(sid, partial(render_and_commit, got, summary))
                continue
            yield sid, fp, guarded(sid, partial(commit, got, settings=settings, store=store, stage=stage))
        window.clear()

    for sid, fp, got in items:
        if isinstance(got, Session):
            current = None if settings.force else partial(store.unchanged, got.id)
            got = guarded_prepare(got, settings, llm.summariser_id, current)
        window.append((sid, fp, got))
        if sum(isinstance(g, Prepared) for _, _, g in window) >= size:
            yield from flush()
    yield from flush()


def guarded_prepare(
    session: Session, settings: Settings, summariser_id: str, current: Callable[[str], bool] | None,
) -> Prepared | Draft | SessionResult:
    try:
        return prepare(session, chunk_tokens=settings.chunk_tokens, summariser_id=summariser_id, is_current=current)
    except Exception as exc:  # one bad session must not stop the run; it is reported
        return failed(session.id, exc)
