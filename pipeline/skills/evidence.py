"""Evidence: what one distilled session contributes to skill detection and synthesis.

One ``Evidence`` per session: the distilled goal, decisions and phase titles (what the
summariser understood) plus the deterministic signals from ``Facts``: output files, commands,
tool sequence and error strings. It comes from a ``Session``/``SessionSummary``/``Facts``
triple, or from a note on disk (frontmatter + body), completed by the evidence sidecar
``<out>/.distill/evidence/<id>.json`` when the run saved one (notes do not carry commands).
``session_evidence`` finds one session's evidence, distilling it from state.db if it has no note.

All session text is untrusted data: every field is redacted and size-bounded on the way in.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipeline.models import Facts, Session, SessionSummary
from pipeline.redact import redact

EVIDENCE_DIR = "evidence"  # under <out>/.distill/


class Evidence(BaseModel):
    """What one session contributes to skill detection and synthesis. Redacted, size-bounded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    title: str = ""
    goal: str = ""
    decisions: tuple[str, ...] = ()
    phases: tuple[str, ...] = Field((), description="Phase title, a colon, what was done.")
    files: tuple[str, ...] = Field((), description="Files created or changed, first-touch order.")
    commands: tuple[str, ...] = Field((), description="Shell commands in the order they first ran.")
    tools: tuple[str, ...] = Field((), description="Tool names in first-use order.")
    errors: tuple[str, ...] = ()
    end_state: str = "unknown"
    last_phase_outcome: str = "unknown"
    language: str = "en"
    tags: tuple[str, ...] = ()
    note_path: str | None = None
    skills: tuple[str, ...] = ()

    @property
    def successful(self) -> bool:
        """Resolved, or no verdict but the last phase says done (extractive summaries often can't tell)."""
        return self.end_state == "resolved" or (self.end_state == "unknown" and self.last_phase_outcome == "done")

    def semantic_text(self) -> str:
        """What the embedding model sees: goal + decisions (≲200 tokens, per the benchmark)."""
        parts = [self.goal, *self.decisions[:6]]
        return clip(" ".join(" ".join(p.split()) for p in parts if p), 400)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _r(text: str, limit: int) -> str:
    return clip(redact(" ".join(str(text).split())), limit)


def evidence_from_session(
    session: Session, summary: SessionSummary, facts: Facts, *, note_path: str | None = None
) -> Evidence:
    """Evidence from the pipeline's own objects (what ``run`` has in hand after summarising)."""
    return Evidence(
        session_id=session.id,
        title=_r(summary.title or session.title or "", 200),
        goal=_r(summary.goal, 600),
        decisions=tuple(_r(d.choice + (f" — {d.rationale}" if d.rationale else ""), 300)
                        for d in summary.decisions[:12]),
        phases=tuple(_r(f"{p.title}: {p.done}", 300) for p in summary.phases[:12]),
        files=tuple(dict.fromkeys(_r(p, 200) for p in [*facts.output_files, *summary.output_files]))[:40],
        commands=tuple(_r(c, 300) for c in facts.commands[:80]),
        tools=tuple(facts.tools)[:40],
        errors=tuple(_r(e, 200) for e in facts.errors[:20]),
        end_state=summary.end_state,
        last_phase_outcome=summary.phases[-1].outcome if summary.phases else "unknown",
        language=summary.language or facts.language,
        tags=tuple(summary.tags[:12]),
        note_path=note_path,
    )


_H2 = re.compile(r"^##\s+(.+?)\s*$", re.M)
_H3 = re.compile(r"^###\s+(?:\d+\.\s+)?(.+?)\s*$", re.M)
_OUTCOME_LINE = re.compile(r"^\*\*[^*]+:\*\*\s*(\S.*)$", re.M)


def _sections(body: str) -> dict[str, str]:
    """``## Label`` → text, labels casefolded."""
    out: dict[str, str] = {}
    marks = list(_H2.finditer(body))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        out[m.group(1).strip().casefold()] = body[m.end(): end].strip()
    return out


def _unescape(text: str) -> str:
    return text.replace("\\#", "#").replace("\\-", "-").replace("\\", "")


def evidence_from_note(path: Path, out: Path | None = None, problems: list[str] | None = None) -> Evidence | None:
    """Evidence from a distilled note: frontmatter + Goal/Summary/Decisions sections.

    Notes do not carry commands, tools or errors; the sidecar written by ``save_evidence`` (when
    the run keeps one) fills those in. Returns None for files that are not distill session notes.
    The frontmatter is read within limits (``notes.frontmatter``); a note that breaks them is
    skipped and named in ``problems``.
    """
    from pipeline.notes.frontmatter import FrontmatterError, FrontmatterLimit, load_frontmatter

    try:
        meta, content = load_frontmatter(path.read_text(encoding="utf-8"))
    except FrontmatterLimit as exc:
        if problems is not None:
            problems.append(f"{path}: skipped, {exc}; fix or delete its frontmatter")
        return None
    except (OSError, UnicodeDecodeError, FrontmatterError):
        return None
    if meta.get("type") != "conversation" or not meta.get("id"):
        return None
    try:
        ev = _note_evidence(path, out, meta, content)
    except (ValueError, KeyError, TypeError) as exc:  # values a person edited into impossible shapes
        if problems is not None:
            problems.append(f"{path}: skipped, its frontmatter does not read as a distill note ({type(exc).__name__})")
        return None
    if out is not None and (side := _load_sidecar(out, ev.session_id)) is not None:
        ev = ev.model_copy(update={k: getattr(side, k) for k in ("commands", "tools", "errors")})
    return ev


def _note_evidence(path: Path, out: Path | None, meta: dict[str, Any], content: str) -> Evidence:
    from pipeline.notes.render import headings_for, section_labels

    sections = _sections(content)

    def section(key: str) -> str:
        return next((sections[label] for label in section_labels(key) if label in sections), "")

    outcomes = {v.casefold(): k for k, v in headings_for(str(meta.get("language") or "en"))["outcomes"].items()}
    summary = section("summary")
    phases = [m.group(1) for m in _H3.finditer(summary)]
    last = _OUTCOME_LINE.findall(summary)
    decisions = [_unescape(line[2:]) for line in section("decisions").splitlines() if line.startswith("- ")]
    return Evidence(
        session_id=str(meta["id"]),
        title=_r(str(meta.get("title") or ""), 200),
        goal=_r(_unescape(section("goal")), 600),
        decisions=tuple(_r(d, 300) for d in decisions[:12]),
        phases=tuple(_r(_unescape(p), 300) for p in phases[:12]),
        files=tuple(_r(f, 200) for f in _strs(meta.get("output_files"))[:40]),
        end_state=str(meta.get("end_state") or "unknown"),
        last_phase_outcome=outcomes.get(last[-1].strip().casefold(), "unknown") if last else "unknown",
        language=str(meta.get("language") or "en"),
        tags=tuple(t for t in _strs(meta.get("tags")) if not t.startswith(("distill", "source/")))[:12],
        note_path=str(path.relative_to(out)) if out and path.is_relative_to(out) else str(path),
        skills=tuple(_strs(meta.get("skills"))),
    )


def _strs(value: object) -> list[str]:
    """A list-valued frontmatter key as strings; a person may have left a scalar or a mapping there."""
    if isinstance(value, list | tuple):
        return [str(v) for v in value if v is not None and not isinstance(v, dict | list)]
    return [value] if isinstance(value, str) and value else []


def _sidecar_path(out: Path, session_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session_id)[:120]
    return Path(out) / ".distill" / EVIDENCE_DIR / f"{safe}.json"


def save_evidence(out: Path, evidence: Evidence) -> Path:
    """Keep the deterministic signals a note lacks (commands, tools, errors) next to the index."""
    return save_evidence_json(out, evidence.session_id, sidecar_text(evidence))


def sidecar_text(evidence: Evidence) -> str:
    """The sidecar's text for ``evidence`` (what ``load_sidecar`` reads back)."""
    return evidence.model_dump_json(indent=1)


def save_evidence_json(out: Path, session_id: str, text: str) -> Path:
    """``save_evidence`` of a sidecar's text already made (``sidecar_text``, in a worker process)."""
    from pipeline.atomic import atomic_write_text

    path = _sidecar_path(out, session_id)
    # Derived from state.db and rewritten by the next run, so not worth an fsync per session.
    atomic_write_text(path, text, durable=False)
    return path


def load_sidecar(out: Path, session_id: str) -> Evidence | None:
    """The evidence sidecar the run saved for ``session_id`` (commands, tools, errors), or None."""
    return _load_sidecar(out, session_id)


def _load_sidecar(out: Path, session_id: str) -> Evidence | None:
    try:
        return Evidence.model_validate_json(_sidecar_path(out, session_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def load_evidence(out: Path, problems: list[str] | None = None) -> list[Evidence]:
    """Every distilled session under ``out``: notes first, sidecars for sessions without a note.

    Notes that cannot be read safely are skipped and named in ``problems``.
    """
    out = Path(out)
    found: dict[str, Evidence] = {}
    for path in sorted(out.rglob("*.md")):
        rel = path.relative_to(out).parts
        if rel and rel[0] in (".distill", "skills"):
            continue
        if (ev := evidence_from_note(path, out, problems)) is not None:
            found.setdefault(ev.session_id, ev)
    side_dir = out / ".distill" / EVIDENCE_DIR
    for path in sorted(side_dir.glob("*.json")) if side_dir.is_dir() else ():
        try:
            ev = Evidence.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found.setdefault(ev.session_id, ev)
    return list(found.values())


def evidence_json(items: Sequence[Evidence]) -> str:
    return json.dumps([e.model_dump(mode="json") for e in items], ensure_ascii=False, indent=1)


def session_evidence(session_id: str, settings: Any) -> Evidence:
    """A distilled session's evidence (note + sidecar), else read it from state.db and distil it now."""
    from pipeline.errors import SessionNotFound

    for ev in load_evidence(settings.out):
        if ev.session_id == session_id:
            return ev
    if not Path(settings.db).is_file():
        raise SessionNotFound(f"session {session_id!r} is not distilled under {settings.out} and there is no "
                              f"state.db at {settings.db}; run `distill {session_id}` first")
    from pipeline.chunk import chunk_session
    from pipeline.facts.derive import derive_facts
    from pipeline.read.hermes import HermesDB
    from pipeline.redact import redact_session
    from pipeline.summarize.extractive import summarise_extractive

    with HermesDB(settings.db) as db:
        session = redact_session(db.read_session(db.resolve(session_id)))
    chunks = chunk_session(session, budget=settings.chunk_tokens)
    facts = derive_facts(session, chunks)
    return evidence_from_session(session, summarise_extractive(session, chunks, facts), facts)


def candidate_key(session_ids: Iterable[str]) -> str:
    """A skill candidate's stable id: a hash of its evidence sessions, in any order."""
    return "c-" + hashlib.sha256("\n".join(sorted(session_ids)).encode()).hexdigest()[:12]
