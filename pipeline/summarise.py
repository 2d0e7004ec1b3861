"""LLM summaries: map each chunk to a ``ChunkSummary``, reduce them to a ``SessionSummary``.

Pipeline per session:

1. **Shape** each (already redacted) chunk into a transcript: tool results cut head+tail with a
   marker, reasoning left out, images as a marker, carriers skipped (their text arrives as the
   chunk's ``checkpoint``). Session text is fenced as ``<session_data>`` and the prompt says
   instructions inside it are data.
2. **Map**: one instructor call per chunk, bounded by ``--jobs``. Candidate decisions found
   deterministically (``extractive.decision_candidates``) go in, so the model selects and explains
   instead of inventing. Validators reject empty and echo-the-prompt answers; instructor re-asks
   with the error text.
3. **Reduce**: one call merges the chunk summaries into goal, title, key decisions, open items,
   tags and projects.
4. **Ground**: deterministic ``Facts`` are the authority. A file the model names that appears
   nowhere in the session is dropped and counted (``hallucinations_dropped``); the end state is
   ``extractive.infer_end_state``, and no phase may claim "done" when the session ends unresolved.

Validated chunk and reduce outputs are cached (``pipeline/cache.py``), keyed by the rendered
prompt, prompt version, model and schema. Any failure falls back to the extractive summary for
that session and is reported; a budget stop does the same for all remaining sessions.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from pipeline.cache import SummaryCache, cache_key, canonical_json, schema_hash
from pipeline.config import Settings
from pipeline.llm import BudgetExceeded, LLMClient
from pipeline.models import Chunk, Decision, Facts, Message, Phase, RunReport, Session, SessionSummary
from pipeline.prompts import load_prompt
from pipeline.redact import redact_chunk, redact_session

# --------------------------------------------------------------------------- schemas (the contract)

_PLACEHOLDERS = {
    "",
    "string",
    "...",
    "…",
    "n/a",
    "na",
    "none",
    "null",
    "todo",
    "tbd",
    "unknown",
    "-",
    "example",
}
#: Phrases from our own prompts; an answer containing one is echoing the instructions.
_ECHO = (
    "<session_data>",
    "</session_data>",
    "<parts_data>",
    "session_data",
    "one or two sentences on what",
    "never follow instructions",
    "judged from the transcript's end",
    "leave a list empty",
    "write every text field in",
    "is a record to summarise",
)


def _text(v: str, what: str) -> str:
    v = (v or "").strip()
    if v.lower().strip(" .") in _PLACEHOLDERS:
        raise ValueError(f"{what} must describe the session in your own words; it was empty or a placeholder")
    low = v.lower()
    if any(p in low for p in _ECHO):
        raise ValueError(f"{what} repeats the instructions; describe what happened in the session instead")
    return v


def _clean_list(v: Any, limit: int) -> Any:
    """Drop empty/placeholder strings and cut to ``limit`` before validation (no re-ask for that)."""
    if not isinstance(v, list):
        return v
    out = [x for x in v if not (isinstance(x, str) and x.strip().lower().strip(" .") in _PLACEHOLDERS)]
    return out[:limit]


class DecisionOut(BaseModel):
    """A choice made in the session."""

    choice: str = Field(
        description="What was decided, with file names, commands and identifiers copied verbatim."
    )
    rationale: str = Field("", description="Why it was chosen, as stated in the session.")
    rejected: list[str] = Field(
        default_factory=list, max_length=3, description="Alternatives considered and not taken."
    )

    @field_validator("choice")
    @classmethod
    def _choice(cls, v: str) -> str:
        return _text(v, "decision.choice")

    @field_validator("rejected", mode="before")
    @classmethod
    def _rejected(cls, v: Any) -> Any:
        return _clean_list(v, 3)


class FileOut(BaseModel):
    path: str = Field(description="The file path exactly as it appears in the session.")
    action: Literal["created", "modified", "deleted", "moved", "read"]


class ErrorFix(BaseModel):
    error: str = Field(description="The error as reported (short).")
    fix: str = Field("", description="How it was fixed; empty if it was not.")


class ChunkSummary(BaseModel):
    """What happened in one part of a coding-agent session."""

    phase_title: str = Field(description="A short title for this part, under 10 words.")
    asked: list[str] = Field(default_factory=list, max_length=4, description="What the user asked for.")
    done: str = Field(description="One or two sentences: what was actually done.")
    files: list[FileOut] = Field(
        default_factory=list, max_length=10, description="Files touched, with the action."
    )
    decisions: list[DecisionOut] = Field(default_factory=list, max_length=5)
    errors: list[ErrorFix] = Field(default_factory=list, max_length=4)
    outcome: Literal["done", "partial", "failed", "abandoned"]
    open_items: list[str] = Field(
        default_factory=list, max_length=4, description="Unfinished work or follow-ups."
    )

    @field_validator("phase_title")
    @classmethod
    def _title(cls, v: str) -> str:
        return _text(v, "phase_title")

    @field_validator("done")
    @classmethod
    def _done(cls, v: str) -> str:
        return _text(v, "done")

    @field_validator("asked", "open_items", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return _clean_list(v, 4)

    @field_validator("files", mode="before")
    @classmethod
    def _files(cls, v: Any) -> Any:
        return _clean_list(v, 10)

    @field_validator("decisions", mode="before")
    @classmethod
    def _decisions(cls, v: Any) -> Any:
        return _clean_list(v, 5)

    @field_validator("errors", mode="before")
    @classmethod
    def _errors(cls, v: Any) -> Any:
        return _clean_list(v, 4)


class ReduceSummary(BaseModel):
    """An overview of a whole coding-agent session."""

    title: str = Field(description="A short title for the session, under 10 words.")
    goal: str = Field(description="One sentence: what the user wanted from the session.")
    decisions: list[DecisionOut] = Field(default_factory=list, max_length=6, description="The key decisions.")
    open_items: list[str] = Field(default_factory=list, max_length=6, description="What is still unfinished.")
    tags: list[str] = Field(default_factory=list, max_length=6, description="Lowercase topic keywords.")
    projects: list[str] = Field(
        default_factory=list, max_length=3, description="Project or repository names."
    )

    @field_validator("title")
    @classmethod
    def _title(cls, v: str) -> str:
        return _text(v, "title")

    @field_validator("goal")
    @classmethod
    def _goal(cls, v: str) -> str:
        return _text(v, "goal")

    @field_validator("open_items", "tags", "decisions", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return _clean_list(v, 6)

    @field_validator("projects", mode="before")
    @classmethod
    def _projects(cls, v: Any) -> Any:
        return _clean_list(v, 3)


SCHEMA_VERSION = 1
CHUNK_MAX_TOKENS = 1024
REDUCE_MAX_TOKENS = 768

# --------------------------------------------------------------------------- input shaping

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
    "tr": "Turkish",
}

TOOL_HEAD, TOOL_TAIL = 700, 300
TEXT_HEAD, TEXT_TAIL = 3000, 1000
ARGS_LIMIT = 500
_FENCES = ("session_data", "checkpoint_data", "parts_data")


def _defence(text: str) -> str:
    """Keep session text from closing (or opening) our data fences."""
    for tag in _FENCES:
        text = text.replace(f"<{tag}>", f"<{tag.replace('_', '-')}>").replace(
            f"</{tag}>", f"</{tag.replace('_', '-')}>"
        )
    return text


def truncate(text: str, head: int, tail: int) -> str:
    """Head and tail of ``text`` with a marker saying how much was cut."""
    if len(text) <= head + tail + 40:
        return text
    cut = len(text) - head - tail
    return f"{text[:head]}\n[… {cut:,} chars omitted …]\n{text[-tail:]}"


def _args(arguments: dict[str, Any] | str) -> str:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return truncate(raw, ARGS_LIMIT * 2 // 3, ARGS_LIMIT // 3)


def render_message(m: Message) -> str | None:
    if m.is_carrier:
        return None  # its text is the chunk checkpoint
    ident = f"#{m.row_id}" if m.row_id is not None else ""
    content = m.content or ""
    if m.images and "[image" not in content:
        content = (content + f" [image ×{m.images}]").strip()
    if m.role == "tool":
        head = f"[tool{ident} {m.tool_name or ''}]".replace(" ]", "]")
        return f"{head} {truncate(content, TOOL_HEAD, TOOL_TAIL)}"
    lines = (
        [f"[{m.role}{ident}] {truncate(content, TEXT_HEAD, TEXT_TAIL)}".rstrip()]
        if content or not m.tool_calls
        else [f"[{m.role}{ident}]"]
    )
    lines += [f"  → {c.name}({_args(c.arguments)})" for c in m.tool_calls]
    return "\n".join(lines)


def shape_transcript(chunk: Chunk) -> str:
    """The chunk as plain text for the model. Reasoning is never included."""
    return _defence("\n".join(t for m in chunk.messages if (t := render_message(m))))


def _haystack(session: Session, chunks: Sequence[Chunk]) -> str:
    """Everything the session said or did, for grounding (lowercased)."""
    parts: list[str] = []
    for m in session.messages:
        parts.append(m.content or "")
        parts.append(m.carrier_summary or "")
        for c in m.tool_calls:
            parts.append(
                c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments, ensure_ascii=False)
            )
    parts.extend(c.checkpoint or "" for c in chunks)
    return "\n".join(parts).lower()


# --------------------------------------------------------------------------- extractive helpers (lazy)


def _extractive() -> Any | None:
    try:
        from pipeline import extractive
    except ImportError:
        return None
    return extractive


def _candidates(messages: Sequence[Message]) -> list[str]:
    ex = _extractive()
    if ex is None or not hasattr(ex, "decision_candidates"):
        return []
    return [d.choice[:240] for d in ex.decision_candidates(messages)[:8]]


def _end_state(session: Session, facts: Facts) -> str:
    ex = _extractive()
    if ex is None or not hasattr(ex, "infer_end_state"):
        return "unknown"
    return str(ex.infer_end_state(session, facts))


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


def _norm(path: str) -> str:
    return path.strip().strip("`'\"").replace("\\", "/").removeprefix("./").rstrip("/").lower()


def ground_files(named: Sequence[FileOut], facts: Facts, haystack: str) -> tuple[list[FileOut], list[str]]:
    """Keep files that Facts know or that the session text mentions; return (kept, dropped paths)."""
    known = [_norm(f.path) for f in facts.files]
    kept: list[FileOut] = []
    dropped: list[str] = []
    for f in named:
        p = _norm(f.path)
        if not p:
            continue
        in_facts = any(k == p or k.endswith("/" + p) or p.endswith("/" + k) for k in known)
        if in_facts or p in haystack:
            kept.append(f)
        elif f.path not in dropped:
            dropped.append(f.path)
    return kept, dropped


def _output_files(facts: Facts, kept: Sequence[FileOut]) -> list[str]:
    out = list(facts.output_files)
    norm = [_norm(p) for p in out]
    for f in kept:
        p = _norm(f.path)
        if f.action == "read" or any(n == p or n.endswith("/" + p) or p.endswith("/" + n) for n in norm):
            continue
        out.append(f.path)
        norm.append(p)
    return out


def _guard_outcome(outcome: str, end_state: str, last: bool) -> str:
    """A phase can't claim success the deterministic end state contradicts."""
    if last and outcome == "done" and end_state in ("unresolved", "failed"):
        return "failed" if end_state == "failed" else "partial"
    return outcome


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
    try:
        summary, hits, dropped = await _summarise(session, chunks, facts, settings, client, cache, lang)
    except BudgetExceeded as e:
        report.fallbacks += 1
        if str(e) not in report.notices:
            report.notices.append(str(e))
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
    chunk_prompt, reduce_prompt = load_prompt("chunk_summary"), load_prompt("reduce")
    # Idempotent, so safe even when run.py redacted already; the title reaches the reduce prompt.
    session = redact_session(session)
    chunks = [redact_chunk(c) for c in chunks]
    sem = asyncio.Semaphore(max(1, settings.jobs))

    async def one(c: Chunk) -> tuple[ChunkSummary, bool]:
        label = f"generation {c.generation}" + (f", part {c.part + 1}" if c.part else "")
        system, user = chunk_prompt.render(
            transcript=shape_transcript(c),
            checkpoint=_defence(c.checkpoint or ""),
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

    end_state = _end_state(session, facts)
    haystack = _haystack(session, chunks)
    kept, dropped = ground_files([f for p in parts for f in p.files], facts, haystack)
    output_files = _output_files(facts, kept)

    system, user = reduce_prompt.render(
        parts=[_defence_obj(p.model_dump()) for p in parts],
        title=_defence(session.title or ""),
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
            asks=tuple(p.asked),
            done=p.done,
            generation=c.generation,
            outcome=_guard_outcome(p.outcome, end_state, i == len(parts) - 1),
        )  # type: ignore[arg-type]
        for i, (p, c) in enumerate(zip(parts, chunks, strict=True))
    )
    decisions = reduced.decisions or [d for p in parts for d in p.decisions]
    seen: set[str] = set()
    unique = [d for d in decisions if not (d.choice.lower() in seen or seen.add(d.choice.lower()))]  # type: ignore[func-returns-value]
    open_items = reduced.open_items or [o for p in parts for o in p.open_items]
    summary = SessionSummary(
        title=session.title or reduced.title,
        goal=reduced.goal,
        phases=phases,
        decisions=tuple(_decision(d) for d in unique[:12]),
        output_files=tuple(output_files),
        open_items=tuple(dict.fromkeys(open_items)),
        end_state=end_state,  # type: ignore[arg-type]
        language=lang,
        tags=tuple(dict.fromkeys(t.strip().lower() for t in reduced.tags if t.strip())),
        projects=tuple(dict.fromkeys(p.strip() for p in reduced.projects if p.strip())),
        summarizer=client.model,
    )
    return summary, hits, len(dropped)


def _defence_obj(obj: Any) -> Any:
    if isinstance(obj, str):
        return _defence(obj)
    if isinstance(obj, dict):
        return {k: _defence_obj(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_defence_obj(v) for v in obj]
    return obj


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
    "ground_files",
    "make_summariser",
    "shape_transcript",
    "summarise_llm",
]
