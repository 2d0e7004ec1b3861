"""LLM summaries: one call for a short session; else map each chunk to a ``ChunkSummary`` and reduce.

Pipeline per session:

1. **Shape** each (already redacted) chunk into a transcript (``pipeline/summarize/shaping.py``): tool
   results cut head+tail with a marker, reasoning left out, images as a marker, carriers skipped
   (their text arrives as the chunk's ``checkpoint``). Session text is fenced as
   ``<session_data>`` and the prompt says instructions inside it are data.
2. **One call for a short session**: a session whose shaped transcript fits one chunk is summarised
   by one instructor call (``SessionBrief``: overview and phase together), with no reduce step.
3. **Map** (longer sessions): one call per chunk, bounded by ``--jobs``. Candidate decisions found
   deterministically (``extractive.decision_candidates``) go in, so the model selects and explains
   instead of inventing. The response schemas (``pipeline/summarize/schema.py``) bound every field
   and list (llama.cpp turns them into its grammar) and reject empty and echo-the-prompt answers;
   instructor re-asks with the error text. The model never echoes what is known without it: the
   user's asks and the files come from the session (``extractive.user_asks``, ``Facts``).
   **Reduce**: one call merges the chunk summaries (not the transcript, not the facts twice) into
   goal, title, key decisions, open items, tags and projects.
4. **Ground**: deterministic ``Facts`` are the authority: the files are ``Facts.output_files``, an
   error the model reports must be made of the session's words, and a text that quotes as code
   something the session never shows (an invented command) is dropped; both are counted in
   ``hallucinations_dropped``. The end state is ``endstate.judge_end_state``, and the last phase may
   not claim "done", nor say it succeeded, when the session did not end resolved.
5. **Language guard**: the prose the model wrote must be in the session's language (or
   ``--lang``). Small models answer a Chinese session in English although the prompt says
   Chinese, and translating the session's words invents claims it never made ("上传/预览" became
   the path-shaped "upload/preview"); such a session gets the extractive summary, reported.

Every prompt keeps its system text the same for every call and puts the session's text last, so
llama.cpp's prompt cache reuses the shared prefix from one call to the next.

Validated chunk and reduce outputs are cached (``pipeline/summarize/cache.py``), keyed by the rendered
prompt, prompt version, model and schema. Any failure falls back to the extractive summary for
that session and is reported; a budget stop does the same for all remaining sessions.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from pipeline.config import Settings
from pipeline.facts.lang import written_language
from pipeline.llm.client import BudgetExceeded, LLMClient
from pipeline.models import (
    NOTE_ERRORS_MAX,
    Chunk,
    Decision,
    Facts,
    Message,
    Phase,
    Problem,
    RunReport,
    Session,
    SessionSummary,
)
from pipeline.redact import redact_chunk, redact_session
from pipeline.summarize.cache import SummaryCache, cache_key, canonical_json, schema_hash
from pipeline.summarize.decisions import MAX_DECISIONS, answered_questions, key_decisions, restates
from pipeline.summarize.prompts import load_prompt
from pipeline.summarize.schema import (
    SCHEMA_VERSION,
    ChunkSummary,
    DecisionOut,
    ErrorFix,
    ReduceSummary,
    SessionBrief,
)
from pipeline.summarize.shaping import defence, defence_obj, grounding_text, shape_transcript

log = logging.getLogger(__name__)

# Generation limits. The schemas bound every field (``maxLength``, ``maxItems``); these are the backstop.
CHUNK_MAX_TOKENS = 768
REDUCE_MAX_TOKENS = 640
SESSION_MAX_TOKENS = 896

#: Language codes → the name the prompt asks the model to write in.
LANGUAGES = {
    "en": "English",
    "zh": "Chinese (简体中文)",
    "ja": "Japanese",
    "ko": "Korean",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "ru": "Russian",
    "uk": "Ukrainian",
    "nl": "Dutch",
    "pl": "Polish",
    "cs": "Czech",
    "sv": "Swedish",
    "ro": "Romanian",
    "hu": "Hungarian",
    "tr": "Turkish",
    "vi": "Vietnamese",
    "id": "Indonesian",
    "ar": "Arabic",
    "fa": "Persian (فارسی)",
    "ur": "Urdu",
}


# --------------------------------------------------------------------------- extractive helpers (lazy)


def _extractive() -> Any | None:
    try:
        from pipeline.summarize import extractive
    except ImportError:
        return None
    return extractive


def _candidates(messages: Sequence[Message]) -> list[str]:
    ex = _extractive()
    if ex is None or not hasattr(ex, "decision_candidates"):
        return []
    return [d.choice[:240] for d in ex.decision_candidates(messages)[:8]]


def _quoted(messages: Sequence[Message]) -> list[Decision]:
    """The decisions the extractive note would list, each quoted from the session."""
    return key_decisions(messages)


def _derived_tags(session: Session, facts: Facts) -> list[str]:
    ex = _extractive()
    return ex.derived_tags(session, facts) if ex is not None and hasattr(ex, "derived_tags") else []


def _end_state(session: Session, facts: Facts) -> tuple[str, str]:
    """(end state, its evidence): decided from the transcript, never by the model."""
    from pipeline.facts.endstate import judge_end_state

    verdict = judge_end_state(session, facts)
    return verdict.state, verdict.evidence


def _fallback(session: Session, chunks: Sequence[Chunk], facts: Facts, lang: str) -> SessionSummary:
    ex = _extractive()
    if ex is not None and hasattr(ex, "summarise_extractive"):
        return ex.summarise_extractive(session, chunks, facts, lang=lang)
    first = next((m.content for m in session.messages if m.role == "user" and m.content), "")
    return SessionSummary(
        title=session.title,
        goal=first[:200] or (session.title or "(no goal)"),
        output_files=tuple(facts.output_files),
        language=lang,
    )


# --------------------------------------------------------------------------- grounding


_TOKEN = re.compile(r"[^\W_]{3,}|[\u3400-\u9fff]")


def _grounded_share(text: str, haystack: str) -> float:
    """The share of ``text``'s words (3+ letters; each CJK character) found in ``haystack``."""
    words = _TOKEN.findall(text.lower())
    return sum(w in haystack for w in words) / len(words) if words else 0.0


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


def unfounded(text: str, haystack: str) -> bool:
    """Whether ``text`` quotes as code (a command, a path, an identifier in backticks) something the session
    never contains. The model invented "`pip install mkdocstrings`" as the fix of an error nobody fixed: a
    quoted command reads as one that was run. ``haystack`` is ``_squash``-ed ``grounding_text``."""
    return any(_squash(m.group(1)) not in haystack for m in _CODE_SPAN.finditer(text))


def ground_errors(named: Sequence[ErrorFix], facts: Facts, haystack: str) -> tuple[list[Problem], int]:
    """Errors the model reported that the session shows, with their fixes, then the ones ``Facts`` found.

    The model's error must be mostly made of the session's words (≥ 0.6 of them), since an error
    string is something the session printed, not a paraphrase; a fix is the model's own account and
    is kept with its error, unless it quotes code the session never shows (``unfounded``; counted).
    Returns (problems, how many the model named that were dropped).
    """
    out: list[Problem] = []
    dropped: set[str] = set()  # distinct texts: one invented error named by every chunk counts once
    squashed = _squash(haystack)
    for e in named:
        if _grounded_share(e.error, haystack) >= 0.6:
            fix = e.fix.strip()
            if fix and unfounded(fix, squashed):
                dropped.add(fix.lower())
                fix = ""
            if not any(p.error.lower() == e.error.lower() for p in out):
                out.append(Problem(error=e.error.strip(), fix=fix))
        else:
            dropped.add(e.error.strip().lower())
    for error in facts.errors:
        low = error.lower()
        if not any(p.error.lower() in low or low in p.error.lower() for p in out):
            out.append(Problem(error=error))
    return out[:NOTE_ERRORS_MAX], len(dropped)


# How a model's account says the work succeeded ("Successfully applied…", "问题已解决").
_SUCCESS_CLAIM = re.compile(
    r"\b(?:success(?:ful(?:ly)?)?|succeeded|resolved|fixed|solved|accomplished|completed|works now|now works"
    r"|is (?:now )?working)\b|成功|已解决|解决了|已修复|修复了|已完成", re.I)


def _guard_done(done: str, end_state: str, last: bool, msgs: Sequence[Message], cwd: str | None, lang: str) -> str:
    """The last part's account may not claim the success the end state does not support.

    The small embedded model wrote "The user has successfully applied for the grant" of a session
    that ended on an unanswered question. The outcome field is held to the end state
    (``_guard_outcome``); the prose is replaced by what the session itself shows (the extractive
    account of that part), since a note that reads "resolved" wrongly is the worst it can say.
    """
    if not last or end_state == "resolved" or not _SUCCESS_CLAIM.search(done):
        return done
    ex = _extractive()
    return ex.done_text(list(msgs), cwd, lang) if ex is not None and hasattr(ex, "done_text") else ""


def _guard_outcome(outcome: str, end_state: str, last: bool) -> str:
    """A phase can't claim success the deterministic end state does not support."""
    from pipeline.facts.endstate import last_phase_outcome

    return last_phase_outcome(outcome, end_state) if last else outcome


class WrongLanguage(ValueError):
    """The model wrote its summary in another language than the one asked for."""


def model_prose(summary: SessionSummary) -> str:
    """The text the model wrote (not the session's own title, which may be in any language)."""
    parts = [summary.goal]
    for ph in summary.phases:
        parts += [ph.title, ph.done, *ph.asks]
    for d in summary.decisions:
        parts += [d.choice, d.rationale]
    parts += list(summary.open_items)
    parts += [e.fix for e in summary.errors]  # the errors themselves are the session's own text
    return "\n".join(p for p in parts if p)


def check_language(summary: SessionSummary, lang: str) -> None:
    """Raise ``WrongLanguage`` when the model's prose is clearly in another language than ``lang``."""
    wanted = lang.split("-")[0].lower()
    written = written_language([model_prose(summary)])
    if written is not None and written != wanted:
        raise WrongLanguage(f"the model wrote {written}, not {wanted}")


def _decision(d: DecisionOut) -> Decision:
    return Decision(choice=d.choice, rationale=d.rationale, rejected=tuple(x for x in d.rejected if x))


# --------------------------------------------------------------------------- map / reduce


async def _cached_call(
    client: LLMClient,
    cache: SummaryCache | None,
    model: type[BaseModel],
    stage: str,
    prompt_key: str,
    system: str,
    user: str,
    max_tokens: int,
) -> tuple[Any, bool]:
    key = cache_key(
        stage=stage,
        system=system,
        user=user,
        prompt=prompt_key,
        model=client.model,
        schema=schema_hash(model),
        schema_version=SCHEMA_VERSION,
    )
    if cache is not None and (hit := cache.get(key)) is not None:
        try:
            return model.model_validate_json(hit), True
        except ValueError:
            pass  # schema drift without a version bump: treat as a miss and overwrite
    obj = await client.structured(model, system, user, max_tokens=max_tokens)
    if cache is not None:  # only validated objects reach this line
        cache.put(key, obj.model_dump_json(), stage=stage, model=client.model, prompt=prompt_key)
    return obj, False


async def asummarise_llm(
    session: Session,
    chunks: Sequence[Chunk],
    facts: Facts,
    settings: Settings,
    client: LLMClient,
    cache: SummaryCache | None,
    report: RunReport,
) -> SessionSummary:
    """Summarise one session with the model; on any failure, the extractive summary (reported)."""
    lang = settings.lang or facts.language or "en"
    if client.exhausted or not chunks:
        if client.exhausted:
            report.fallbacks += 1
        return _fallback(session, chunks, facts, lang)
    cost_before = client.usage.cost_usd
    if getattr(client, "progress", False):  # the embedded model: minutes per call
        title = f" {(session.title or '')[:60]!r}" if session.title else ""  # an untitled session: just its id
        plan = "one call" if len(chunks) == 1 else f"{len(chunks)} chunks, then the merge"
        log.info("summarising %s%s: %s", session.id, title, plan)
    try:
        summary, hits, dropped = await _summarise(session, chunks, facts, settings, client, cache, lang)
    except BudgetExceeded as e:
        report.fallbacks += 1
        if str(e) not in report.notices:
            report.notices.append(str(e))
        return _fallback(session, chunks, facts, lang)
    except WrongLanguage as e:
        report.fallbacks += 1
        report.notices.append(f"session {session.id}: {e}; used the extractive summary")
        return _fallback(session, chunks, facts, lang)
    except Exception as e:  # any model/transport/validation failure: this session goes extractive
        report.fallbacks += 1
        cause = e.__cause__ or e
        report.notices.append(
            f"session {session.id}: LLM summary failed ({type(cause).__name__}: "
            f"{str(cause)[:200]}); used the extractive summary"
        )
        return _fallback(session, chunks, facts, lang)
    finally:
        client.report_into(report)
    report.cache_hits += hits
    report.hallucinations_dropped += dropped
    return summary.model_copy(update={"cost_usd": round(client.usage.cost_usd - cost_before, 6)})


async def _summarise(
    session: Session,
    chunks: Sequence[Chunk],
    facts: Facts,
    settings: Settings,
    client: LLMClient,
    cache: SummaryCache | None,
    lang: str,
) -> tuple[SessionSummary, int, int]:
    language = LANGUAGES.get(lang, lang)
    # Idempotent, so safe even when run.py redacted already; the title reaches the prompt.
    found: dict[str, str] = {}
    session = redact_session(session, found)
    chunks = [redact_chunk(c, found) for c in chunks]
    end_state, end_evidence = _end_state(session, facts)
    output_files = list(facts.output_files)
    if len(chunks) == 1:
        return await _summarise_one(session, chunks[0], facts, settings, client, cache, lang, end_state, end_evidence)

    chunk_prompt, reduce_prompt = load_prompt("chunk_summary"), load_prompt("reduce")
    sem = asyncio.Semaphore(max(1, settings.jobs))

    async def one(c: Chunk) -> tuple[ChunkSummary, bool]:
        label = f"generation {c.generation}" + (f", part {c.part + 1}" if c.part else "")
        system, user = chunk_prompt.render(
            transcript=shape_transcript(c, settings.chunk_tokens),
            checkpoint=defence(c.checkpoint or ""),
            candidates=_candidates(c.messages),
            language=language,
            part_label=label,
        )
        async with sem:
            return await _cached_call(
                client, cache, ChunkSummary, "chunk", chunk_prompt.key, system, user, CHUNK_MAX_TOKENS
            )

    results = await asyncio.gather(*(one(c) for c in chunks))
    parts = [r[0] for r in results]
    hits = sum(1 for r in results if r[1])
    asks = [_asks(c.messages, lang) for c in chunks]

    haystack = grounding_text(session, chunks)
    errors, errors_dropped = ground_errors([e for p in parts for e in p.errors], facts, haystack)

    system, user = reduce_prompt.render(
        # The reduce call gets the part summaries and the session's own asks, not the transcript again.
        parts=[defence_obj({**p.model_dump(), "asked": a}) for p, a in zip(parts, asks, strict=True)],
        title=defence(session.title or ""),
        language=language,
        output_files=output_files[:30],
        end_state=end_state,
    )
    reduced, hit = await _cached_call(
        client, cache, ReduceSummary, "reduce", reduce_prompt.key, system, user, REDUCE_MAX_TOKENS
    )
    hits += int(hit)

    phases = tuple(
        Phase(
            title=p.phase_title,
            asks=tuple(a),
            done=_guard_done(p.done, end_state, i == len(parts) - 1, c.messages, session.cwd, lang),
            generation=c.generation,
            outcome=_guard_outcome(p.outcome, end_state, i == len(parts) - 1),
        )  # type: ignore[arg-type]
        for i, (p, a, c) in enumerate(zip(parts, asks, chunks, strict=True))
    )
    decisions = reduced.decisions or [d for p in parts for d in p.decisions]
    open_items = reduced.open_items or [o for p in parts for o in p.open_items]
    summary, dropped = _assemble(session, reduced, phases, decisions, open_items, errors, facts, client, lang,
                                 end_state, end_evidence, haystack)
    return summary, hits, errors_dropped + dropped


async def _summarise_one(
    session: Session,
    chunk: Chunk,
    facts: Facts,
    settings: Settings,
    client: LLMClient,
    cache: SummaryCache | None,
    lang: str,
    end_state: str,
    end_evidence: str,
) -> tuple[SessionSummary, int, int]:
    """A session that fits one chunk: one call (``SessionBrief``) instead of a chunk call plus a reduce."""
    prompt = load_prompt("session_summary")
    system, user = prompt.render(
        transcript=shape_transcript(chunk, settings.chunk_tokens),
        checkpoint=defence(chunk.checkpoint or ""),
        candidates=_candidates(chunk.messages),
        language=LANGUAGES.get(lang, lang),
        title=defence(session.title or ""),
        end_state=end_state,
        output_files=list(facts.output_files)[:30],
    )
    brief, hit = await _cached_call(client, cache, SessionBrief, "session", prompt.key, system, user,
                                    SESSION_MAX_TOKENS)
    haystack = grounding_text(session, [chunk])
    errors, errors_dropped = ground_errors(brief.errors, facts, haystack)
    phase = Phase(
        title=brief.title, asks=tuple(_asks(chunk.messages, lang)),
        done=_guard_done(brief.done, end_state, True, chunk.messages, session.cwd, lang),
        generation=chunk.generation, outcome=_guard_outcome(brief.outcome, end_state, True),  # type: ignore[arg-type]
    )
    summary, dropped = _assemble(session, brief, (phase,), brief.decisions, brief.open_items, errors, facts, client,
                                 lang, end_state, end_evidence, haystack)
    return summary, int(hit), errors_dropped + dropped


def _asks(messages: Sequence[Message], lang: str) -> list[str]:
    """What the user asked in these messages, read from the session (the model is not asked to echo it)."""
    ex = _extractive()
    return ex.user_asks(messages, lang)[:4] if ex is not None and hasattr(ex, "user_asks") else []


def _assemble(
    session: Session,
    overview: ReduceSummary,
    phases: tuple[Phase, ...],
    decisions: Sequence[DecisionOut],
    open_items: Sequence[str],
    errors: Sequence[Problem],
    facts: Facts,
    client: LLMClient,
    lang: str,
    end_state: str,
    end_evidence: str,
    haystack: str,
) -> tuple[SessionSummary, int]:
    """The ``SessionSummary``, with what the model quoted as code but the session never shows dropped
    (``unfounded``): a decision, an open item, a rationale or a sentence of a phase's account. Returns
    it and how many texts were dropped."""
    squashed = _squash(haystack)
    dropped = 0

    def founded(text: str) -> bool:
        nonlocal dropped
        bad = unfounded(text, squashed)
        dropped += bad
        return not bad

    def account(done: str) -> str:
        return " ".join(s for s in re.split(r"(?<=[.!?。！？])\s+", done) if founded(s))

    seen: set[str] = set()
    unique = [d for d in decisions if not (d.choice.lower() in seen or seen.add(d.choice.lower()))]  # type: ignore[func-returns-value]
    kept = [_decision(d if founded(d.rationale) else d.model_copy(update={"rationale": ""}))
            for d in unique if founded(d.choice)]
    # The options the user picked when the agent asked are read from the session, not left to the model: each is
    # quoted (question, option, the agent's own description of it), and a small model drops them as often as not.
    answered = [d for _i, d in answered_questions(session.messages) if d.choice.lower() not in seen]
    # The model explains the decisions it picks; it does not get to lose the others. A small model keeps a third of
    # the decisions the session states (0.40 recall on the test part, where the extractive note's quoted ones reach
    # 0.60), so the decisions the extractive note quotes that no pick of the model restates follow the model's, in
    # the session's order.
    listed = [*answered, *kept]
    quoted = [d for d in _quoted(session.messages) if not any(restates(d.choice, x.choice) for x in listed)]
    summary = SessionSummary(
        title=session.title or overview.title,
        goal=overview.goal,
        phases=tuple(p.model_copy(update={"done": account(p.done)}) for p in phases),
        decisions=(*listed, *quoted)[:MAX_DECISIONS],
        output_files=tuple(facts.output_files),
        open_items=tuple(dict.fromkeys(o for o in open_items if founded(o))),
        errors=tuple(errors),
        end_state=end_state,  # type: ignore[arg-type]
        end_evidence=end_evidence,
        language=lang,
        # The facts' tags first (the model often gives none), then the model's topics.
        tags=tuple(dict.fromkeys([*_derived_tags(session, facts),
                                  *(t.strip().lower() for t in overview.tags if t.strip())]))[:8],
        projects=tuple(dict.fromkeys(p.strip() for p in overview.projects if p.strip())),
        summarizer=client.model,
    )
    check_language(summary, lang)
    return summary, dropped


def summarise_llm(
    session: Session,
    chunks: Sequence[Chunk],
    facts: Facts,
    settings: Settings,
    client: LLMClient,
    cache: SummaryCache | None,
    report: RunReport,
) -> SessionSummary:
    """Synchronous entry point: runs ``asummarise_llm`` on the client's event loop."""
    return client.run(asummarise_llm(session, chunks, facts, settings, client, cache, report))


def make_summariser(
    settings: Settings, client: LLMClient, cache: SummaryCache | None, report: RunReport
) -> Callable[[Session, list[Chunk], Facts], SessionSummary]:
    """A ``run.Summariser``: ``(session, chunks, facts) -> SessionSummary``."""

    def summarise(session: Session, chunks: list[Chunk], facts: Facts) -> SessionSummary:
        return summarise_llm(session, chunks, facts, settings, client, cache, report)

    return summarise


__all__ = [
    "ChunkSummary",
    "ReduceSummary",
    "asummarise_llm",
    "canonical_json",
    "make_summariser",
    "shape_transcript",
    "summarise_llm",
]
