"""One note file → a ``NoteRecord``: its frontmatter fields and its sections, read within bounds.

Notes are the truth of the archive; everything here reads them as a person may have left them
(Obsidian may rewrite the properties block, quote differently or turn a date into a YAML date).
Frontmatter is read through ``pipeline.notes.frontmatter.load_frontmatter`` only, so a hostile
block is refused, not expanded. Sections are found by their ``## `` heading in any language the
template writes (``templates/headings.yaml``), outside fenced code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline.notes.frontmatter import FrontmatterError, load_frontmatter
from pipeline.notes.render import section_labels

#: The sections a session note can have, in template order.
SECTION_KEYS = ("goal", "summary", "decisions", "errors", "output_files", "open_items", "lineage", "skills",
                "related", "notes")

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_H2 = re.compile(r"^ {0,3}##[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!<>|=~%])")


class NoteRecord(BaseModel):
    """What the archive knows about one session note, all from the file itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    id: str
    title: str
    date: str | None = None
    started_at: str | None = None
    source: str | None = None
    model: str | None = None
    projects: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    end_state: str | None = None
    message_count: int | None = None
    cost_usd: float | None = None
    language: str | None = None
    version: int | None = None
    goal: str = ""
    decisions: tuple[str, ...] = ()
    output_files: tuple[str, ...] = ()
    open_items: tuple[str, ...] = ()
    text: str = ""

    def semantic_text(self) -> str:
        """What the embedding model sees: goal + decisions, as skill detection embeds them
        (``pipeline.skills.evidence.Evidence.semantic_text``), so the two share one vector cache."""
        parts = [self.goal, *self.decisions[:6]]
        text = " ".join(" ".join(p.split()) for p in parts if p)
        return text if len(text) <= 400 else text[:399].rstrip() + "…"


class NoteFile(BaseModel):
    """A parsed note: its frontmatter, its body and its sections by key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    meta: dict[str, Any]
    body: str
    sections: dict[str, str]

    @property
    def is_session(self) -> bool:
        return self.meta.get("type") == "conversation" and bool(self.meta.get("id"))


def parse_note(text: str) -> NoteFile:
    """Frontmatter (bounded) and sections of a note's text. Raises ``FrontmatterError``."""
    meta, body = load_frontmatter(text)
    return NoteFile(meta=meta, body=body, sections=sections(body))


def read_note(path: Path) -> NoteFile:
    """``parse_note`` of a file; ``FrontmatterError`` also for undecodable or unreadable files."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise FrontmatterError(f"{path} is not UTF-8 text") from exc
    return parse_note(text)


@lru_cache(maxsize=1)
def _label_keys() -> dict[str, str]:
    """Casefolded heading label (every language) → section key."""
    found: dict[str, str] = {}
    for key in SECTION_KEYS:
        for label in section_labels(key):
            found.setdefault(label, key)
    return found


def sections(body: str) -> dict[str, str]:
    """Section key → its text (without the heading), for the generated ``## `` headings of ``body``.

    A ``##`` heading that is not one of the template's (a person's own, inside Notes) belongs to
    the section above it.
    """
    labels = _label_keys()
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    fence: str | None = None
    for line in body.split("\n"):
        if fence is None and (m := _FENCE.match(line)):
            fence = m.group(1)
        elif fence is not None and line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            fence = None
        elif fence is None and (h := _H2.match(line)) and (key := labels.get(h.group(1).strip().casefold())):
            current = found.setdefault(key, [])
            continue
        if current is not None:
            current.append(line)
    return {k: "\n".join(v).strip("\n") for k, v in found.items()}


def _without_sections(body: str, keys: tuple[str, ...]) -> str:
    """``body`` without the generated ``## `` sections ``keys`` (fenced code respected)."""
    labels = _label_keys()
    out: list[str] = []
    skipping = False
    fence: str | None = None
    for line in body.split("\n"):
        if fence is None and (m := _FENCE.match(line)):
            fence = m.group(1)
        elif fence is not None and line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            fence = None
        elif fence is None and (h := _H2.match(line)):
            key = labels.get(h.group(1).strip().casefold())
            if key is not None:
                skipping = key in keys
        if not skipping:
            out.append(line)
    return "\n".join(out)


def plain(text: str) -> str:
    """Markdown text with render's escapes undone (``\\#``, ``&lt;!--``...), for search and embeddings."""
    text = _ESCAPED.sub(r"\1", text)
    return text.replace("&lt;", "<").replace("&#37;", "%").replace("\u200b", "")


_MARKUP = re.compile(r"^ {0,3}(?:#{1,6}[ \t]+|[-*+][ \t]+(?:\[[ xX]\][ \t]+)?|\d+\.[ \t]+|>[ \t]?)|\*\*|__|`+", re.M)
_WIKILINK = re.compile(r"\[\[(?:[^\]|]*\|)?([^\]]*)\]\]")


def searchable(body: str) -> str:
    """A note's body as words for the full-text index: Markdown marks and link targets dropped."""
    text = _WIKILINK.sub(r"\1", plain(body))
    return _MARKUP.sub("", text)


def bullets(section: str) -> list[str]:
    """The top-level ``- `` items of a section (a ``- [ ]`` checkbox marker dropped)."""
    items = []
    for line in section.split("\n"):
        if line.startswith("- "):
            item = line[2:]
            item = re.sub(r"^\[[ xX]\] ", "", item)
            items.append(plain(item).strip())
    return [i for i in items if i]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except ValueError:
        return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def as_list(value: Any) -> list[str]:
    """A list property as strings: a YAML list, or Obsidian's legacy ``"a, b"`` form."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in re.split(r"[,\s]+", value) if v]
    if isinstance(value, list | tuple):
        return [str(v) for v in value if v is not None and str(v)]
    return [str(value)]


def record_of(path: str, note: NoteFile) -> NoteRecord:
    """The ``NoteRecord`` of a parsed session note at ``path`` (relative to the archive)."""
    meta, parts = note.meta, note.sections
    goal = plain(parts.get("goal", "")).strip()
    # Lineage and Related hold other notes' titles (and the link pass rewrites them): not this note's words.
    own = _without_sections(note.body, ("lineage", "related"))
    text_parts: Iterable[str] = (searchable(own), " ".join(as_list(meta.get("tags"))),
                                 " ".join(as_list(meta.get("projects"))), " ".join(as_list(meta.get("output_files"))))
    return NoteRecord(
        path=path,
        id=str(meta["id"]),
        title=str(meta.get("title") or meta["id"]),
        date=_text(meta.get("date")),
        started_at=_text(meta.get("started_at")),
        source=_text(meta.get("source")),
        model=_text(meta.get("model")),
        projects=tuple(as_list(meta.get("projects"))),
        tags=tuple(as_list(meta.get("tags"))),
        end_state=_text(meta.get("end_state")),
        message_count=_int(meta.get("message_count")),
        cost_usd=_float(meta.get("cost_usd")),
        language=_text(meta.get("language")),
        version=_int(meta.get("version")),
        goal=goal,
        decisions=tuple(bullets(parts.get("decisions", ""))),
        output_files=tuple(as_list(meta.get("output_files"))),
        open_items=tuple(bullets(parts.get("open_items", ""))),
        text="\n".join(t for t in text_parts if t),
    )
