"""LLM summaries inside a run: a model chosen up front, a client started only when needed.

The model is *resolved* before any session is read (cheap: config files only), because its name
is part of every session's fingerprint and content hash: switching models re-summarises. The
client, and with the embedded model the llama.cpp server, is only *started* when the first
session actually needs a summary, so a nightly run where nothing changed starts nothing.

Sessions are summarised a window at a time: a few sessions per call slot are prepared in the main
thread (SQLite reads stay there), their map/reduce calls run concurrently on the client's event
loop with at most ``jobs`` calls in flight, then each is rendered and written in order. Any failure of one session falls back to the
extractive summary for that session and is reported; the run goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from datetime import datetime
from functools import partial
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

    def __enter__(self) -> LLMRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _open(self) -> Any:
        if not self._opened:
            from pipeline.llm.client import open_client
            from pipeline.summarize.cache import open_cache

            self._opened = True
            self._client = self._stack.enter_context(open_client(self.settings, self.report, concurrency=self.jobs))
            if self._client is not None:
                self._cache = open_cache(self.settings)
        return self._client

    def summarise_many(self, preps: list[Prepared]) -> list[SessionSummary]:
        """One summary per prepared session, concurrently; extractive where the model fails."""
        from pipeline.summarize.extractive import summarise_extractive
        from pipeline.summarize.mapreduce import asummarise_llm

        def fallback(p: Prepared) -> SessionSummary:
            return summarise_extractive(p.session, p.chunks, p.facts, lang=self.settings.lang)

        client = self._open()
        if client is None:
            return [fallback(p) for p in preps]

        async def gather() -> list[Any]:
            return await asyncio.gather(
                *(asummarise_llm(p.session, p.chunks, p.facts, self.settings, client, self._cache, self.report)
                  for p in preps),
                return_exceptions=True,
            )

        out: list[SessionSummary] = []
        for p, result in zip(preps, client.run(gather()), strict=True):
            if isinstance(result, BaseException):
                self.report.fallbacks += 1
                self.report.notices.append(f"session {p.session.id}: LLM summary failed ({result}); used extractive")
                result = fallback(p)
            out.append(result)
        return out


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
        report.notices.append(f"LLM summaries unavailable: {why}. Using extractive summaries.")
        return None
    report.notices.extend(n for n in notes if n not in report.notices)
    return LLMRun(settings, report, choice)


def windowed(
    items: Iterable[Item], llm: LLMRun, *, settings: Settings, store: Any, distilled_at: datetime,
) -> Iterator[Outcome]:
    """Prepare sessions, summarise a window of them concurrently, write each; results in input order."""
    window: list[tuple[str, str | None, Prepared | Draft | SessionResult]] = []
    skills_for = skills_lookup(settings)

    def render_and_commit(prep: Prepared, summary: SessionSummary) -> SessionResult:
        draft = finish(prep, summary, distilled_at=distilled_at, link_for=store.link_for, skills_for=skills_for)
        return commit(draft, settings=settings, store=store)

    def flush() -> Iterator[Outcome]:
        preps = [p for _, _, p in window if isinstance(p, Prepared)]
        try:
            summaries = iter(llm.summarise_many(preps))
        except Exception as exc:  # the client could not even start: every session fails alike
            summaries = iter([exc] * len(preps))  # type: ignore[list-item]
        for sid, fp, got in window:
            if isinstance(got, SessionResult):
                yield sid, fp, got
                continue
            if isinstance(got, Prepared):
                summary = next(summaries)
                if isinstance(summary, Exception):
                    yield sid, fp, failed(sid, summary)
                    continue
                if summary.summarizer != llm.summariser_id:
                    # An extractive fallback: hash it as what it is and forget the fingerprint, so
                    # the next run tries the model again instead of calling this note current.
                    got = replace(got, digest=content_hash(got.session, got.chunks, summary.summarizer))
                    fp = None
                yield sid, fp, guarded(sid, partial(render_and_commit, got, summary))
                continue
            yield sid, fp, guarded(sid, partial(commit, got, settings=settings, store=store))
        window.clear()

    for sid, fp, got in items:
        if isinstance(got, Session):
            current = None if settings.force else partial(store.unchanged, got.id)
            got = guarded_prepare(got, settings, llm.summariser_id, current)
        window.append((sid, fp, got))
        if sum(isinstance(g, Prepared) for _, _, g in window) >= llm.jobs * WINDOW_PER_SLOT:
            yield from flush()
    yield from flush()


def guarded_prepare(
    session: Session, settings: Settings, summariser_id: str, current: Callable[[str], bool] | None,
) -> Prepared | Draft | SessionResult:
    try:
        return prepare(session, chunk_tokens=settings.chunk_tokens, summariser_id=summariser_id, is_current=current)
    except Exception as exc:  # one bad session must not stop the run; it is reported
        return failed(session.id, exc)
