"""``push_to_gbrain`` and ``pull_from_gbrain``: notes ⇄ gbrain pages, through gbrain's own operations.

**Push.** Notes go oldest first (a parent before its children, so most link targets exist when a
page is written). A note whose file is unchanged since its last push costs a ``stat``; a note
whose page text is unchanged costs a hash; anything else is one ``put_page``, then the tags it
lost (``remove_tag``: gbrain only ever adds tags on a write), then the edges gbrain does not make
itself (``add_link``): ``derived_from`` to the parent session always, and over MCP, where
``put_page`` extracts no links, every edge the page's links stand for. An edge whose target is not
in gbrain yet waits in the state and is added by the push that brings the target. A project's
page is created when gbrain has none, and never overwritten.

**Pull.** A page distill pushed and a person then edited in gbrain becomes the note's new
version (``gbrain_page.apply_gbrain_edit``: their text, what they added kept under Notes). If
the note changed here too since that push, nothing is overwritten: the run reports a conflict
and saves gbrain's version beside the state for the person to compare. Any other page comes back
as a new note.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pipeline.atomic import atomic_write_text
from pipeline.errors import InputError, OutputError
from pipeline.integrations.gbrain import (
    Client,
    GbrainOpError,
    PageNotFound,
    Transport,
    brain_home,
    open_client,
)
from pipeline.integrations.gbrain_page import (
    DEFAULT_PREFIX,
    DERIVED,
    LINK_SOURCE,
    MENTIONS,
    RELATED,
    Page,
    apply_gbrain_edit,
    build_page,
    check_prefix,
    note_from_page,
    page_slug,
    page_text_of,
    project_page,
    same_page,
    sha256,
)
from pipeline.integrations.gbrain_state import PushRow, PushState
from pipeline.notes.frontmatter import FrontmatterError, load_frontmatter

PushAction = Literal["created", "updated", "unchanged", "failed", "would-create", "would-update"]
PullAction = Literal["created", "updated", "unchanged", "conflict", "failed", "would-create", "would-update"]
#: Folders of the output that hold no session notes.
SKIP_DIRS = frozenset({"skills", "gbrain"})
LOCK_TIMEOUT = 60.0


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PushItem(_Model):
    note: str
    slug: str
    action: PushAction
    version: int = 0
    tags_removed: tuple[str, ...] = ()
    links_added: int = 0
    error: str | None = None


class PushReport(_Model):
    transport: Transport
    brain: str
    prefix: str
    dry_run: bool = False
    items: tuple[PushItem, ...] = ()
    projects_created: tuple[str, ...] = ()
    links_added: int = 0
    seconds: float = 0.0

    def count(self, *actions: str) -> int:
        return sum(item.action in actions for item in self.items)


class PullItem(_Model):
    slug: str
    note: str | None = None
    action: PullAction
    detail: str = ""
    conflict: str | None = None


class PullReport(_Model):
    transport: Transport
    brain: str
    dry_run: bool = False
    items: tuple[PullItem, ...] = ()
    seconds: float = 0.0

    def count(self, *actions: str) -> int:
        return sum(item.action in actions for item in self.items)


# --------------------------------------------------------------------------- the notes


@dataclass
class NoteFile:
    path: Path
    rel: str
    size: int
    mtime_ns: int
    _text: str | None = None
    _meta: dict[str, Any] | None = None
    _body: str = ""

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.path.read_text(encoding="utf-8")
        return self._text

    def load(self) -> tuple[dict[str, Any], str]:
        if self._meta is None:
            self._meta, self._body = load_frontmatter(self.text)
        return self._meta, self._body

    def is_session_note(self) -> bool:
        meta, _ = self.load()
        return meta.get("type") == "conversation" and bool(meta.get("id"))


def scan_notes(out: Path) -> list[NoteFile]:
    """Every ``.md`` under ``out`` but in hidden folders, ``skills/`` and pulled foreign pages; oldest first."""
    found: list[NoteFile] = []
    for root, dirs, files in os.walk(out):
        top = Path(root) == out
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (top and d in SKIP_DIRS))
        for name in files:
            if name.endswith(".md") and not name.startswith("."):
                path = Path(root) / name
                st = path.stat()
                found.append(NoteFile(path, path.relative_to(out).as_posix(), st.st_size, st.st_mtime_ns))
    # Paths start YYYY/MM/YYYY-MM-DD: path order is date order, parents before their children.
    return sorted(found, key=lambda n: n.rel)


def _active_at(meta: dict[str, Any]) -> str:
    for key in ("ended_at", "started_at", "date"):
        if meta.get(key):
            return str(meta[key])
    return ""


def _started(note: NoteFile) -> tuple[str, str]:
    try:
        meta, _ = note.load()
    except (FrontmatterError, OSError, UnicodeDecodeError):
        return ("", note.rel)
    return (str(meta.get("started_at") or meta.get("date") or ""), note.rel)


def _when(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)  # notes write UTC without an offset


def _lock(out: Path) -> Any:
    from filelock import FileLock, Timeout

    lock = FileLock(str(out / ".distill" / "gbrain.lock"), timeout=LOCK_TIMEOUT)
    try:
        lock.acquire()
    except Timeout:
        raise OutputError(f"another distill gbrain push or pull holds {out}/.distill/gbrain.lock; "
                          "wait for it to finish") from None
    return lock


# --------------------------------------------------------------------------- push


def select_notes(
    notes: list[NoteFile], rows: dict[str, PushRow], *, refs: Iterable[str], since: datetime | None, all_: bool,
    out: Path, prefix: str,
) -> list[NoteFile]:
    """The notes named by ``refs`` (session ids, note paths or page slugs), active since ``since``, or all."""
    refs = [r for r in refs if r.strip()]
    if not refs and since is None and not all_:
        raise InputError("name the notes to push: session ids or note paths, --since WHEN, or --all")
    by_rel = {n.rel: n for n in notes}
    row_by_path = {r.note_path: r for r in rows.values()}
    chosen: dict[str, NoteFile] = {}
    for ref in refs:
        note = _find(ref, notes, by_rel, rows, out, prefix)
        if note is None:
            raise InputError(f"{ref}: no note with that session id, path or slug under {out}; "
                             f"`distill gbrain push --all --dry-run` lists what there is")
        try:
            ours = note.is_session_note()
        except (FrontmatterError, OSError, UnicodeDecodeError):
            ours = True  # unreadable: pushing it reports why
        if not ours:
            raise InputError(f"{ref}: not a distill session note (type: conversation with an id); only those "
                             "are pushed")
        chosen[note.rel] = note
    for note in notes:
        if all_:
            chosen[note.rel] = note
        elif since is not None:
            row = row_by_path.get(note.rel)
            current = row is not None and (row.note_size, row.note_mtime_ns) == (note.size, note.mtime_ns)
            active = row.active_at if current and row else None
            if active is None:
                try:
                    if not note.is_session_note():
                        continue
                    active = _active_at(note.load()[0])
                except (FrontmatterError, OSError, UnicodeDecodeError):
                    continue
            when = _when(active) if active else None
            changed = datetime.fromtimestamp(note.mtime_ns / 1e9, UTC)
            if (when and when >= since) or changed >= since:
                chosen[note.rel] = note
    return sorted(chosen.values(), key=lambda n: n.rel)


def _find(ref: str, notes: list[NoteFile], by_rel: dict[str, NoteFile], rows: dict[str, PushRow], out: Path,
          prefix: str) -> NoteFile | None:
    path = Path(ref).expanduser()
    if ref.endswith(".md"):
        full = path if path.is_absolute() else (Path.cwd() / path)
        for candidate in (full, out / ref):
            if candidate.is_file() and candidate.resolve().is_relative_to(out.resolve()):
                return by_rel.get(candidate.resolve().relative_to(out.resolve()).as_posix())
        return by_rel.get(ref)
    if "/" in ref:
        return next((n for n in notes if page_slug(n.rel, prefix) == ref.strip().lower()), None)
    row = rows.get(ref)
    if row and row.note_path in by_rel:
        return by_rel[row.note_path]
    for note in notes:
        try:
            if str(note.load()[0].get("id")) == ref:
                return note
        except (FrontmatterError, OSError, UnicodeDecodeError):
            continue
    return None


def push_to_gbrain(
    out: Path,
    *,
    refs: Iterable[str] = (),
    since: datetime | None = None,
    all_: bool = False,
    prefix: str = DEFAULT_PREFIX,
    transport: Transport = "cli",
    dry_run: bool = False,
    force: bool = False,
    env: Mapping[str, str] | None = None,
    on_item: Callable[[PushItem], None] | None = None,
) -> PushReport:
    """Push the selected notes of ``out`` to gbrain, one page per note; see the module docstring."""
    started = time.monotonic()
    prefix = check_prefix(prefix)
    out = Path(out).expanduser()
    if not out.is_dir():
        raise InputError(f"--out {out}: no such folder of notes; distil some first (`distill --since yesterday`)")
    brain = brain_home(env)
    state = PushState(out, create=not dry_run)
    lock = None if dry_run else _lock(out)
    try:
        rows = {r.note_id: r for r in state.rows(brain)}
        notes = select_notes(scan_notes(out), rows, refs=refs, since=since, all_=all_, out=out, prefix=prefix)
        run = _Push(out, state, brain, prefix, rows, force=force, on_item=on_item)
        if dry_run:
            for note in notes:
                if (planned := run.plan(note)) is not None:
                    run.emit(planned)
            return PushReport(transport=transport, brain=brain, prefix=prefix, dry_run=True, items=tuple(run.items),
                              seconds=time.monotonic() - started)
        pending: list[NoteFile] = []
        for note in notes:
            known = run.quick(note)
            if known is None:
                pending.append(note)
            else:
                run.emit(known)
        # Oldest session first: a parent's page exists before its children link to it.
        pending.sort(key=_started)
        if pending or any(r.pending for r in rows.values()):
            with open_client(transport, env) as client:
                run.client = client
                for note in pending:
                    if (pushed := run.push(note)) is not None:
                        run.emit(pushed)
                run.resolve_pending()
        return PushReport(transport=transport, brain=brain, prefix=prefix, items=tuple(run.items),
                          projects_created=tuple(run.projects_created), links_added=run.links_added,
                          seconds=time.monotonic() - started)
    finally:
        state.close()
        if lock is not None:
            lock.release()


class _Push:
    def __init__(self, out: Path, state: PushState, brain: str, prefix: str, rows: dict[str, PushRow], *,
                 force: bool, on_item: Callable[[PushItem], None] | None) -> None:
        self.out, self.state, self.brain, self.prefix, self.rows = out, state, brain, prefix, rows
        self.force, self.on_item = force, on_item
        self.by_path = {r.note_path: r for r in rows.values()}
        self.projects = state.projects(brain)
        #: Pages gbrain has (as far as this state knows): link targets that exist.
        self.known = {r.slug for r in rows.values()} | self.projects
        self.client: Client | None = None
        self.items: list[PushItem] = []
        self.projects_created: list[str] = []
        self.links_added = 0

    def emit(self, item: PushItem) -> None:
        self.items.append(item)
        if self.on_item:
            self.on_item(item)

    def quick(self, note: NoteFile) -> PushItem | None:
        """``unchanged`` from the note's stat alone, when the file is exactly as it was pushed."""
        row = self.by_path.get(note.rel)
        if (self.force or row is None or row.slug != page_slug(note.rel, self.prefix)
                or (row.note_size, row.note_mtime_ns) != (note.size, note.mtime_ns)):
            return None
        return PushItem(note=note.rel, slug=row.slug, action="unchanged", version=row.version)

    def _page(self, note: NoteFile) -> tuple[Page | None, PushItem | None]:
        try:
            if not note.is_session_note():
                return None, None
            meta, body = note.load()
            return build_page(meta, body, note.rel, self.prefix), None
        except (FrontmatterError, OSError, UnicodeDecodeError) as exc:
            return None, PushItem(note=note.rel, slug=page_slug(note.rel, self.prefix), action="failed",
                                  error=f"cannot read the note: {exc}")

    def plan(self, note: NoteFile) -> PushItem | None:
        page, failed = self._page(note)
        if failed or page is None:
            return failed  # None: a note of the person's own, not a session's
        row = self.rows.get(page.session_id)
        if row is None or row.slug != page.slug:
            return PushItem(note=note.rel, slug=page.slug, action="would-create")
        if row.page_sha == page.sha and not self.force:
            return PushItem(note=note.rel, slug=page.slug, action="unchanged", version=row.version)
        return PushItem(note=note.rel, slug=page.slug, action="would-update", version=row.version,
                        tags_removed=tuple(t for t in row.tags if t not in page.tags))

    def push(self, note: NoteFile) -> PushItem | None:
        page, failed = self._page(note)
        if failed or page is None:
            return failed  # None: a note of the person's own in the same vault, not a session's
        row = self.rows.get(page.session_id)
        same = row is not None and row.slug == page.slug
        if same and row and row.page_sha == page.sha and not self.force:
            self._save(row, note, page, row.version, row.tags, row.links, row.pending)  # the stat moved, not the text
            return PushItem(note=note.rel, slug=page.slug, action="unchanged", version=row.version)
        try:
            return self._write(note, page, row if same else None)
        except PageNotFound as exc:
            return PushItem(note=note.rel, slug=page.slug, action="failed", error=str(exc))
        except GbrainOpError as exc:
            return PushItem(note=note.rel, slug=page.slug, action="failed", error=str(exc))

    def _write(self, note: NoteFile, page: Page, row: PushRow | None) -> PushItem:
        assert self.client is not None
        for slug, name in page.projects:
            self._ensure_project(slug, name)
        res = self.client.call("put_page", {"slug": page.slug, "content": page.text}) or {}
        if res.get("status") == "skipped" and res.get("slug") not in (None, page.slug):
            return PushItem(note=note.rel, slug=page.slug, action="failed", error=(
                f"gbrain kept page {res['slug']}, which has the same id (distill-{page.session_id}); "
                f"delete it there (`gbrain delete {res['slug']}`) or push with the --prefix it was pushed under"))
        written = res.get("status") != "skipped"
        version = max((row.version if row else 0) + (1 if written else 0), 1)
        removed = [t for t in (row.tags if row else []) if t not in page.tags]
        for tag in removed:
            self.client.call("remove_tag", {"slug": page.slug, "tag": tag})
        links, pending, added = self._links(page, row)
        self.known.add(page.slug)
        self._save(row, note, page, version, list(page.tags), links, pending)
        self.links_added += added
        action: PushAction = "updated" if row else "created"
        return PushItem(note=note.rel, slug=page.slug, action=action if written else "unchanged", version=version,
                        tags_removed=tuple(removed), links_added=added)

    def _links(self, page: Page, row: PushRow | None) -> tuple[list[list[str]], list[list[str]], int]:
        """Edges to add with ``add_link``: those gbrain's own extraction will not make."""
        assert self.client is not None
        if self.client.transport == "cli":
            extracted = {(t, k) for t, k in page.links if k in (MENTIONS, RELATED) and t in self.known}
        else:
            extracted = set()
        wanted = set(page.links) - extracted
        have = {(t, k) for t, k in (row.links if row else [])}
        for target, kind in sorted(have - wanted):
            with contextlib.suppress(PageNotFound):  # the target is gone, and the edge with it
                self.client.call("remove_link", {"from": page.slug, "to": target, "link_type": kind,
                                                 "link_source": LINK_SOURCE})
            have.discard((target, kind))
        added, pending = 0, []
        for target, kind in sorted(wanted - have):
            if target in self.known:
                self._add_link(page.slug, target, kind)
                have.add((target, kind))
                added += 1
            else:
                pending.append([target, kind])
        return sorted([list(x) for x in have]), pending, added

    def _add_link(self, src: str, target: str, kind: str) -> None:
        assert self.client is not None
        params = {"from": src, "to": target, "link_type": kind, "link_source": LINK_SOURCE,
                  "context": "distill lineage" if kind == DERIVED else "distill"}
        try:
            self.client.call("add_link", params)
        except PageNotFound:
            raise
        except GbrainOpError as exc:
            if exc.code != "invalid_params":
                raise
            # A gbrain from before link provenance (link_source) refuses the parameter: the edge still counts.
            params.pop("link_source")
            self.client.call("add_link", params)

    def resolve_pending(self) -> None:
        """Edges that waited for their target: added once the target is in gbrain."""
        for row in self.state.rows(self.brain):
            ready = [p for p in row.pending if p[0] in self.known]
            if not ready:
                continue
            for target, kind in ready:
                try:
                    self._add_link(row.slug, target, kind)
                except PageNotFound:
                    continue
                row.links.append([target, kind])
                self.links_added += 1
            row.pending = [p for p in row.pending if p not in ready]
            self.state.save(row)

    def _ensure_project(self, slug: str, name: str) -> None:
        assert self.client is not None
        if slug in self.projects:
            return
        try:
            self.client.call("get_page", {"slug": slug})
        except PageNotFound:
            self.client.call("put_page", {"slug": slug, "content": project_page(name)})
            self.projects_created.append(slug)
        self.state.remember_project(self.brain, slug, name)
        self.projects.add(slug)
        self.known.add(slug)

    def _save(self, row: PushRow | None, note: NoteFile, page: Page, version: int, tags: list[str],
              links: list[list[str]], pending: list[list[str]]) -> None:
        meta, _ = note.load()
        new = PushRow(brain=self.brain, note_id=page.session_id, slug=page.slug, note_path=note.rel,
                      note_size=note.size, note_mtime_ns=note.mtime_ns, note_sha=sha256(note.text),
                      page_sha=page.sha, page_text=page.text, active_at=_active_at(meta), tags=tags, links=links,
                      pending=pending, version=version, pushed_at=datetime.now(UTC).isoformat(timespec="seconds"))
        self.state.save(new)
        self.rows[page.session_id] = new
        self.by_path[note.rel] = new


# --------------------------------------------------------------------------- pull


def pull_from_gbrain(
    out: Path,
    *,
    slugs: Iterable[str] = (),
    query: str | None = None,
    limit: int = 10,
    prefix: str = DEFAULT_PREFIX,
    transport: Transport = "cli",
    theirs: bool = False,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    on_item: Callable[[PullItem], None] | None = None,
) -> PullReport:
    """Bring gbrain pages (by slug, or the hits of a search) back into ``out`` as notes."""
    started = time.monotonic()
    prefix = check_prefix(prefix)
    out = Path(out).expanduser()
    slugs = [s.strip() for s in slugs if s.strip()]
    if not slugs and not query:
        raise InputError("name the pages to pull: one or more slugs, or --query WORDS")
    brain = brain_home(env)
    if not dry_run:
        out.mkdir(parents=True, exist_ok=True)
    state = PushState(out, create=not dry_run)
    lock = None if dry_run else _lock(out)
    items: list[PullItem] = []
    try:
        with open_client(transport, env) as client:
            targets = list(dict.fromkeys(slugs))
            if query:
                hits = client.call("search", {"query": query, "limit": limit}) or []
                targets += [h["slug"] for h in hits if isinstance(h, dict) and h.get("slug") not in targets]
            run = _Pull(out, state, brain, prefix, client, theirs=theirs, dry_run=dry_run)
            for slug in dict.fromkeys(targets):
                try:
                    item = run.pull(slug)
                except PageNotFound as exc:
                    hint = f"not in gbrain (a soft-deleted page comes back with `gbrain restore {slug}`)"
                    if len(targets) == 1 and not query:
                        raise InputError(f"{slug}: {hint}") from exc
                    item = PullItem(slug=slug, action="failed", detail=hint)
                except GbrainOpError as exc:
                    item = PullItem(slug=slug, action="failed", detail=str(exc))
                items.append(item)
                if on_item:
                    on_item(item)
    finally:
        state.close()
        if lock is not None:
            lock.release()
    return PullReport(transport=transport, brain=brain, dry_run=dry_run, items=tuple(items),
                      seconds=time.monotonic() - started)


class _Pull:
    def __init__(self, out: Path, state: PushState, brain: str, prefix: str, client: Client, *, theirs: bool,
                 dry_run: bool) -> None:
        self.out, self.state, self.brain, self.prefix, self.client = out, state, brain, prefix, client
        self.theirs, self.dry_run = theirs, dry_run
        self.rows = {r.slug: r for r in state.rows(brain)}
        self._notes: list[NoteFile] | None = None

    def pull(self, slug: str) -> PullItem:
        page = self.client.call("get_page", {"slug": slug, "include_content": True})
        slug = str(page["slug"])
        row = self.rows.get(slug)
        if row is not None and (self.out / row.note_path).is_file():
            return self._onto_pushed(page, row)
        rel, text, session_id = note_from_page(page, self.prefix)
        local = self._note_of(session_id) if session_id else None
        if local is not None:
            return self._onto_unknown(page, local, session_id or "")
        path = self.out / rel
        if path.exists():
            if path.read_text(encoding="utf-8") == text:
                return PullItem(slug=slug, note=rel, action="unchanged")
            if not self.theirs:
                return self._conflict(page, rel, "a file of that name exists here")
        if self.dry_run:
            return PullItem(slug=slug, note=rel, action="would-create")
        atomic_write_text(path, text)
        self._record(page, rel, text, session_id or f"gbrain:{slug}", pushed=page_text_of(page))
        return PullItem(slug=slug, note=rel, action="created")

    def _onto_pushed(self, page: dict[str, Any], row: PushRow) -> PullItem:
        path = self.out / row.note_path
        local = path.read_text(encoding="utf-8")
        edited_here = sha256(local) != row.note_sha
        if same_page(row.page_text, page):
            detail = "changed here since the push; `distill gbrain push` sends it" if edited_here else ""
            return PullItem(slug=row.slug, note=row.note_path, action="unchanged", detail=detail)
        if edited_here and not self.theirs:
            return self._conflict(page, row.note_path, "changed here and in gbrain since the last push")
        if self.dry_run:
            return PullItem(slug=row.slug, note=row.note_path, action="would-update")
        if edited_here:
            self._save_copy(row.note_path, local, "local")
        text, edit = apply_gbrain_edit(local, row.page_text, page, self.prefix)
        atomic_write_text(path, text)
        self._record(page, row.note_path, text, row.note_id, pushed=page_text_of(page), row=row)
        return PullItem(slug=row.slug, note=row.note_path, action="updated", detail=_describe(edit))

    def _onto_unknown(self, page: dict[str, Any], note: NoteFile, session_id: str) -> PullItem:
        """A page of a session that has a note here, but no push state (another machine pushed it)."""
        meta, body = note.load()
        built = build_page(meta, body, note.rel, self.prefix)
        if same_page(built.text, page):
            if not self.dry_run:
                self._record(page, note.rel, note.text, session_id, pushed=built.text)
            return PullItem(slug=str(page["slug"]), note=note.rel, action="unchanged")
        if not self.theirs:
            return self._conflict(page, note.rel, "no push from here to compare with, and the two differ")
        if self.dry_run:
            return PullItem(slug=str(page["slug"]), note=note.rel, action="would-update")
        self._save_copy(note.rel, note.text, "local")
        text, edit = apply_gbrain_edit(note.text, built.text, page, self.prefix)
        atomic_write_text(note.path, text)
        self._record(page, note.rel, text, session_id, pushed=page_text_of(page))
        return PullItem(slug=str(page["slug"]), note=note.rel, action="updated", detail=_describe(edit))

    def _conflict(self, page: dict[str, Any], rel: str, why: str) -> PullItem:
        _, theirs_text, _ = note_from_page(page, self.prefix)
        copy = None if self.dry_run else self._save_copy(rel, theirs_text, "gbrain")
        slug = str(page["slug"])
        return PullItem(slug=slug, note=rel, action="conflict", conflict=copy, detail=(
            f"{why}; nothing was overwritten. Compare the note with gbrain's version"
            f"{f' ({copy})' if copy else ''}, then keep yours with `distill gbrain push {rel}` (gbrain keeps its "
            f"version in its history) or take gbrain's with `distill gbrain pull {slug} --theirs`"))

    def _save_copy(self, rel: str, text: str, side: str) -> str:
        stem = rel.removesuffix(".md").replace("/", "__")
        path = self.out / ".distill" / "gbrain" / "conflicts" / f"{stem}.{side}.md"
        atomic_write_text(path, text)
        return str(path.relative_to(self.out))

    def _note_of(self, session_id: str) -> NoteFile | None:
        if self._notes is None:
            self._notes = scan_notes(self.out)
        for note in self._notes:
            try:
                if str(note.load()[0].get("id")) == session_id:
                    return note
            except (FrontmatterError, OSError, UnicodeDecodeError):
                continue
        return None

    def _record(self, page: dict[str, Any], rel: str, text: str, note_id: str, *, pushed: str,
                row: PushRow | None = None) -> None:
        """The note as now written is in step with the page as gbrain now holds it."""
        st = (self.out / rel).stat()
        tags = [str(t) for t in page.get("tags") or []]
        meta, _ = load_frontmatter(text)
        new = PushRow(brain=self.brain, note_id=note_id, slug=str(page["slug"]), note_path=rel, note_size=st.st_size,
                      note_mtime_ns=st.st_mtime_ns, note_sha=sha256(text), page_sha=sha256(pushed), page_text=pushed,
                      active_at=_active_at(meta), tags=tags, links=row.links if row else [],
                      pending=row.pending if row else [], version=row.version if row else 1,
                      pushed_at=datetime.now(UTC).isoformat(timespec="seconds"))
        self.state.save(new)
        self.rows[new.slug] = new


def _describe(edit: Any) -> str:
    parts = []
    if edit.moved_lines:
        parts.append(f"{edit.moved_lines} added line(s) moved under Notes")
    parts += [f"+tag {t}" for t in edit.tags_added] + [f"-tag {t}" for t in edit.tags_removed]
    if edit.title:
        parts.append(f"title: {edit.title}")
    parts += [f"+{k}" for k in edit.keys]
    return ", ".join(parts) or "gbrain's version taken"
