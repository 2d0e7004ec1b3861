"""A distill note as a gbrain page, and back (pure: text in, text out, no I/O).

The page follows gbrain's format and quirks (peers-and-formats.md B.4-B.7):

* **Slug** ``<prefix>/<note file stem>`` (``conversations/distill/2026-11-20-refactor-cli-b12aa1``):
  the stem is already lower-case letters/digits of any script and hyphens, so gbrain keeps it as
  is, and it never changes for a session (``NoteStore`` keeps a note's path across title changes).
* **Frontmatter** the note's, in its order, with three changes: ``id`` becomes
  ``distill-<session id>`` (gbrain drops a write whose ``id`` another page has, so it must not
  collide with gbrain's own transcript pages) and ``session_id`` keeps the session id; dates are
  strings, written quoted (js-yaml turns a bare ``2026-11-30`` into a midnight timestamp, B.6);
  ``related`` gains a link to each project's page (``[[projects/<name>]]``: a ``related_to``
  edge). ``tags`` stays last, where gbrain writes it.
* **Links** a wikilink to another note (``[[2026/11/<stem>|Title]]``) becomes one to its page
  (``[[<prefix>/<stem>|Title]]``); the parent session also gets a ``derived_from`` edge, which no
  frontmatter field makes, so the push adds it with ``add_link``.

``note_from_page`` and ``apply_gbrain_edit`` go the other way for ``distill gbrain pull``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from pipeline.errors import InputError
from pipeline.notes.frontmatter import edit_frontmatter, load_frontmatter, split_note
from pipeline.notes.render import (
    GENERATED_KEYS,
    YamlDate,
    dump_note,
    generated_section_labels,
    section_labels,
    slugify,
)
from pipeline.notes.store import splice_notes

DEFAULT_PREFIX = "conversations/distill"
PROJECTS = "projects"
#: Provenance of the edges distill adds itself (``add_link`` refuses gbrain's managed sources).
LINK_SOURCE = "distill"
MENTIONS, RELATED, DERIVED = "mentions", "related_to", "derived_from"
SENTINEL = "<!-- timeline -->"

_LINK = re.compile(r"(?P<bang>!?)\[\[(?P<target>[^\[\]|#]*)(?P<anchor>#[^\[\]|]*)?(?P<shown>\|[^\[\]]*)?\]\]")
_NOTE_PATH = re.compile(r"^(?:\d{4}/\d{2}|undated)/(?P<stem>[^/]+)$")
_DATED_STEM = re.compile(r"^(?P<y>\d{4})-(?P<m>\d{2})-\d{2}-")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?$")
_JS_MIDNIGHT = re.compile(r"^(\d{4}-\d{2}-\d{2})T00:00:00\.000Z$")
_H2 = re.compile(r"^ {0,3}##[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
#: Keys the push adds to a page that a note does not have.
PAGE_ONLY_KEYS = frozenset({"session_id", "related"})


def check_prefix(prefix: str) -> str:
    """A slug prefix gbrain accepts unchanged: ``/``-separated segments of letters, digits, hyphens."""
    clean = prefix.strip().strip("/").lower()
    segments = clean.split("/")
    if not clean or any(not s or not s[0].isalnum() or not all(c.isalnum() or c == "-" for c in s) for s in segments):
        raise InputError(f"--prefix {prefix!r}: use lower-case path segments of letters, digits and hyphens, "
                         f"e.g. {DEFAULT_PREFIX}")
    return clean


def page_slug(relpath: str, prefix: str) -> str:
    """``2026/11/2026-11-20-x-b12aa1.md`` → ``<prefix>/2026-11-20-x-b12aa1``."""
    return f"{prefix}/{PurePosixPath(relpath).stem.lower()}"


def vault_path(stem: str) -> str:
    """Where a page's note lives: ``YYYY/MM/<stem>.md`` from the date the stem starts with."""
    m = _DATED_STEM.match(stem)
    return f"{m['y']}/{m['m']}/{stem}.md" if m else f"undated/{stem}.md"


def project_slug(name: str) -> str:
    return f"{PROJECTS}/{slugify(str(name))}"


def _relink(text: str, target_of: Any) -> str:
    def swap(m: re.Match[str]) -> str:
        new = target_of(m["target"].strip())
        if new is None:
            return m.group(0)
        return f"{m['bang']}[[{new}{m['anchor'] or ''}{m['shown'] or ''}]]"

    return _LINK.sub(swap, text)


def to_page_links(text: str, prefix: str) -> str:
    """Wikilinks to notes (vault paths) → wikilinks to their pages (slugs)."""

    def target(path: str) -> str | None:
        m = _NOTE_PATH.match(path.removesuffix(".md"))
        return f"{prefix}/{m['stem'].lower()}" if m else None

    return _relink(text, target)


def to_note_links(text: str, prefix: str) -> str:
    """Wikilinks to pages under ``prefix`` → wikilinks to their notes' vault paths."""
    head = prefix + "/"

    def target(slug: str) -> str | None:
        if not slug.lower().startswith(head) or "/" in slug[len(head):]:
            return None
        return vault_path(slug[len(head):]).removesuffix(".md")

    return _relink(text, target)


def link_targets(text: str) -> list[str]:
    return [m["target"].strip().lower() for m in _LINK.finditer(text) if m["target"].strip()]


def _map_strings(value: Any, fn: Any) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list | tuple):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value


def as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in re.split(r"[,\s]+", value) if v]
    if isinstance(value, list | tuple):
        return [str(v) for v in value if v is not None and str(v).strip()]
    return [str(value)]


def sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- note → page


@dataclass(frozen=True)
class Page:
    """What one note becomes in gbrain."""

    slug: str
    text: str
    sha: str
    session_id: str
    tags: tuple[str, ...]
    #: (slug, name) of each project page the page links to
    projects: tuple[tuple[str, str], ...]
    #: (target slug, link type) edges the page should have
    links: frozenset[tuple[str, str]]


def build_page(meta: dict[str, Any], body: str, relpath: str, prefix: str) -> Page:
    """The gbrain page for a note (its frontmatter from ``load_frontmatter``, its body and path)."""
    session_id = str(meta["id"])
    slug = page_slug(relpath, prefix)
    relink = lambda s: to_page_links(s, prefix)  # noqa: E731
    fm: dict[str, Any] = {}
    for key, value in meta.items():
        if key == "id":
            fm["id"] = f"distill-{session_id}"
            fm["session_id"] = session_id
        elif key not in ("tags", "related", "session_id"):
            fm[key] = _map_strings(value, relink)
    projects = tuple(dict.fromkeys((project_slug(n), n) for n in as_list(meta.get("projects")) if slugify(n)))
    related = list(dict.fromkeys([*(relink(r) for r in as_list(meta.get("related"))),
                                  *(f"[[{s}]]" for s, _ in projects)]))
    if related:
        fm["related"] = related
    tags = tuple(as_list(meta.get("tags")))
    fm["tags"] = list(tags)
    page_body = relink(body)
    text = dump_note(fm, page_body)
    links = {(t, MENTIONS) for t in link_targets(page_body)}
    links |= {(t, RELATED) for r in related for t in link_targets(r)}
    links |= {(t, DERIVED) for t in link_targets(str(fm.get("parent_session") or ""))}
    return Page(slug=slug, text=text, sha=sha256(text), session_id=session_id, tags=tags, projects=projects,
                links=frozenset((t, kind) for t, kind in links if t != slug))


def project_page(name: str) -> str:
    """A minimal project page, written only when gbrain has none (never over a person's page)."""
    return dump_note({"type": "project", "title": str(name), "tags": ["distill"]},
                     f"# {name}\n\nSessions distilled by distill link here (`related_to`).")


# --------------------------------------------------------------------------- comparing pages


@dataclass(frozen=True)
class PageView:
    """A page as gbrain stores it: the columns it pulls out of the frontmatter, the rest as JSON."""

    type: str
    title: str
    frontmatter: str  # canonical JSON
    tags: tuple[str, ...]
    compiled_truth: str
    timeline: str


def _canonical(fm: dict[str, Any]) -> str:
    return json.dumps(fm, sort_keys=True, ensure_ascii=False, default=str)


def _split_body(body: str) -> tuple[str, str]:
    lines = body.split("\n")
    cut = next((i for i, line in enumerate(lines) if line.strip() in (SENTINEL, "<!--timeline-->")), None)
    if cut is None:
        return body.strip(), ""
    return "\n".join(lines[:cut]).strip(), "\n".join(lines[cut + 1:]).strip()


def view_of_text(text: str) -> PageView:
    """How gbrain reads page text: ``type``/``title``/``tags`` out of the frontmatter, the body split and trimmed."""
    meta, body = load_frontmatter(text)
    fm = {k: v for k, v in meta.items() if k not in ("type", "title", "tags", "slug")}
    truth, timeline = _split_body(body)
    return PageView(type=str(meta.get("type") or ""), title=str(meta.get("title") or "").strip(),
                    frontmatter=_canonical(fm), tags=tuple(sorted(set(as_list(meta.get("tags"))))),
                    compiled_truth=truth, timeline=timeline)


def view_of_page(page: dict[str, Any]) -> PageView:
    """The same view of a ``get_page`` answer."""
    return PageView(type=str(page.get("type") or ""), title=str(page.get("title") or "").strip(),
                    frontmatter=_canonical(page.get("frontmatter") or {}),
                    tags=tuple(sorted(set(str(t) for t in page.get("tags") or []))),
                    compiled_truth=str(page.get("compiled_truth") or "").strip(),
                    timeline=str(page.get("timeline") or "").strip())


# --------------------------------------------------------------------------- page → note


def _local_value(key: str, value: Any) -> Any:
    """A page value as a note holds it: dates unquoted again (Obsidian types them), js-yaml's midnights undone."""
    if isinstance(value, str):
        m = _JS_MIDNIGHT.match(value)
        if m:
            return YamlDate(m.group(1))
        if _DATE.match(value) or _DATETIME.match(value):
            return YamlDate(value)
    return value


def note_from_page(page: dict[str, Any], prefix: str) -> tuple[str, str, str | None]:
    """``(relpath, text, session id)`` of the note for a page nobody here has a note of.

    A page distill pushed (it has ``session_id``) goes back to its ``YYYY/MM/<stem>.md`` with its
    session id as ``id``; any other page to ``gbrain/<slug>.md``.
    """
    fm = dict(page.get("frontmatter") or {})
    session_id = fm.pop("session_id", None)
    slug = str(page["slug"])
    meta: dict[str, Any] = {"type": page.get("type") or "note"}
    if session_id is not None:
        meta["id"] = str(session_id)
        fm.pop("id", None)
    elif "id" in fm:
        meta["id"] = fm.pop("id")
    meta["title"] = page.get("title") or slug.rsplit("/", 1)[-1]
    projects = {f"[[{project_slug(n)}]]" for n in as_list(fm.get("projects"))}
    for key, value in fm.items():
        if key == "related":
            value = [r for r in as_list(value) if r not in projects]
            if not value:
                continue
        meta[key] = _local_value(key, _map_strings(value, lambda s: to_note_links(s, prefix)))
    meta["tags"] = [str(t) for t in page.get("tags") or []]
    body = to_note_links(str(page.get("compiled_truth") or ""), prefix)
    if page.get("timeline"):
        body += f"\n\n{SENTINEL}\n\n{page['timeline']}"
    head = prefix + "/"
    if session_id is not None and slug.startswith(head) and "/" not in slug[len(head):]:
        rel = vault_path(slug[len(head):])
    else:
        rel = f"gbrain/{slug}.md"
    return rel, dump_note(meta, body), None if session_id is None else str(session_id)


@dataclass(frozen=True)
class Edit:
    """What a person changed in gbrain since the push, as ``apply_gbrain_edit`` carried it over."""

    moved_lines: int = 0
    tags_added: tuple[str, ...] = ()
    tags_removed: tuple[str, ...] = ()
    title: str | None = None
    keys: tuple[str, ...] = ()


def _sections(lines: list[str]) -> list[tuple[int, str]]:
    found, fence = [], None
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0]
        elif fence is not None and m and m.group(1)[0] == fence:
            fence = None
        elif fence is None and (h := _H2.match(line)):
            found.append((i, h.group(1).strip().casefold()))
    return found


def _notes_span(lines: list[str]) -> tuple[int, int] | None:
    """(heading line, end) of the last Notes section: it ends at the next *generated* ``##`` heading."""
    heads = _sections(lines)
    notes, generated = section_labels("notes"), generated_section_labels() - section_labels("notes")
    start = next((i for i, label in reversed(heads) if label in notes), None)
    if start is None:
        return None
    return start, next((i for i, label in heads if i > start and label in generated), len(lines))


def _blocks(indices: Iterable[int], lines: list[str]) -> list[str]:
    blocks: list[list[str]] = []
    last = -2
    for j in sorted(indices):
        if j != last + 1:
            blocks.append([])
        blocks[-1].append(lines[j])
        last = j
    return ["\n".join(b).strip("\n") for b in blocks]


def apply_gbrain_edit(local: str, pushed: str, page: dict[str, Any], prefix: str) -> tuple[str, Edit]:
    """The note ``local`` (unchanged since it was pushed as ``pushed``) with a person's gbrain edits.

    Their text becomes this version of the note, and what they *added* outside the Notes section
    moves under Notes, the section every re-render keeps: distill owns the generated sections,
    so text left there would be lost the next time the session is distilled. Tags they added or
    removed, a new title and keys of their own are set in the frontmatter; every other byte of
    the note's frontmatter stays (``edit_frontmatter``).
    """
    before, after = view_of_text(pushed), view_of_page(page)
    old_lines, new_lines = before.compiled_truth.split("\n"), after.compiled_truth.split("\n")
    span = _notes_span(new_lines)
    added: set[int] = set()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for op, _, _, j1, j2 in matcher.get_opcodes():
        if op in ("insert", "replace"):
            # The title (H1) stays where it is, whoever wrote it: a note without one reads badly.
            added |= {j for j in range(j1, j2) if new_lines[j].strip() and not new_lines[j].startswith("# ")
                      and not (span and span[0] < j < span[1])}
    kept = [line for j, line in enumerate(new_lines) if j not in added]
    moved = _blocks(added, new_lines)
    if after.timeline and after.timeline != before.timeline:
        moved.append(after.timeline)
    kept_span = _notes_span(kept)
    existing = "\n".join(kept[kept_span[0] + 1: kept_span[1]]).strip("\n") if kept_span else ""
    notes = "\n\n".join(part for part in [existing, *moved] if part.strip())
    body = to_note_links("\n".join(kept), prefix)
    body = splice_notes(body.rstrip("\n") + "\n", to_note_links(notes, prefix)) if notes else body

    meta, _ = load_frontmatter(local)
    pushed_meta, _ = load_frontmatter(pushed)
    page_tags, pushed_tags = list(after.tags), set(as_list(pushed_meta.get("tags")))
    local_tags = as_list(meta.get("tags"))
    gone = [t for t in pushed_tags if t not in page_tags]
    new = [t for t in page_tags if t not in pushed_tags and t not in local_tags]
    values: dict[str, Any] = {}
    if new or gone:
        values["tags"] = [t for t in local_tags if t not in gone] + new
    title = after.title if after.title != before.title else None
    if title:
        values["title"] = title
    page_fm = page.get("frontmatter") or {}
    own = [k for k in page_fm if k not in pushed_meta and k not in GENERATED_KEYS and k not in PAGE_ONLY_KEYS
           and k not in meta]
    for key in own:
        values[key] = _local_value(key, _map_strings(page_fm[key], lambda s: to_note_links(s, prefix)))
    if isinstance(meta.get("version"), int) and not isinstance(meta.get("version"), bool):
        values["version"] = meta["version"] + 1  # a content version (archive); absent before it exists
    text = edit_frontmatter(local, values) if values else local
    parts = split_note(text)
    if parts is None:  # edit_frontmatter guarantees a block; a note without one is not distill's
        raise InputError("the note has no frontmatter; it is not a distill note")
    opening, block, rest = parts
    close = rest.split("\n", 1)[0] + "\n"
    text = f"{opening}{block}{close}\n{body.strip(chr(10))}\n"
    return text, Edit(moved_lines=len(added), tags_added=tuple(new), tags_removed=tuple(gone), title=title,
                      keys=tuple(own))


def page_text_of(page: dict[str, Any]) -> str:
    """The page's Markdown: ``get_page``'s ``content`` (``include_content``), else rebuilt from its fields."""
    if isinstance(page.get("content"), str) and page["content"].strip():
        return str(page["content"])
    meta = {"type": page.get("type"), "title": page.get("title"), **(page.get("frontmatter") or {}),
            "tags": list(page.get("tags") or [])}
    body = str(page.get("compiled_truth") or "")
    if page.get("timeline"):
        body += f"\n\n{SENTINEL}\n\n{page['timeline']}"
    return dump_note(meta, body)


def same_page(pushed: str, page: dict[str, Any]) -> bool:
    """Whether gbrain still holds what was pushed (nobody edited the page since)."""
    return view_of_text(pushed) == view_of_page(page)


def parse_page_text(text: str) -> dict[str, Any]:
    """Page text as a ``get_page``-shaped dict (for comparisons and tests)."""
    meta, body = load_frontmatter(text)
    truth, timeline = _split_body(body)
    return {"type": meta.get("type"), "title": meta.get("title"), "tags": as_list(meta.get("tags")),
            "frontmatter": {k: v for k, v in meta.items() if k not in ("type", "title", "tags", "slug")},
            "compiled_truth": truth, "timeline": timeline}

