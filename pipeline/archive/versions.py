"""Versions of the archive: one git commit per run, a note's history, diffs between versions, revert.

**What distill commits.** Only what it wrote: the notes a run (re)wrote or linked, the project
notes it regenerated, a note ``tag`` or ``revert`` changed. A change distill made but did not
commit (the process was killed between writing a note and committing it) is found on the next
commit by its signature: its ``version`` or ``content_hash`` differs from the committed note's, or
it is an untracked file with a ``content_hash`` (every note distill writes has one). A person's
edit changes neither, so it stays uncommitted: distill never commits a file it did not write,
never stages, forces, resets or rewrites (``pipeline.archive.git``).

**Versions.** A note's ``version:`` counts its content changes (``notes.store.merge_note``, ``tag``,
``revert``). ``history`` lists the commits that touched the note with the version each holds;
``diff`` and ``revert`` take a version number (the newest commit holding it) or a commit id.
``revert`` brings back the generated content of that version and keeps the person's Notes, tags
and keys as they are now (the same merge a re-render does), as a new commit.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline.archive.errors import DirtyNote, GitError, VersionNotFound
from pipeline.archive.git import Repo, toplevel
from pipeline.archive.lock import archive_lock, read_only_error
from pipeline.archive.notefile import NoteRecord
from pipeline.notes.frontmatter import FrontmatterError, load_frontmatter


class Version(BaseModel):
    """One committed state of a note."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    number: int | None
    commit: str
    date: str
    author: str
    subject: str
    path: str


class History(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    title: str
    path: str
    versions: tuple[Version, ...]
    uncommitted: bool


class Diff(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    path: str
    old: str
    new: str
    text: str


class Checkpoint(BaseModel):
    """What a run's commit did."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    commit: str | None = None
    paths: tuple[str, ...] = ()
    created_repository: bool = False
    notices: tuple[str, ...] = ()


# --------------------------------------------------------------------------- signatures


def signature(data: bytes | None) -> tuple[Any, Any] | None:
    """(version, content_hash) of a note's text: what only distill changes. None when unreadable.

    Read with the bounded reader like every other frontmatter; a commit reads it only for the notes
    that changed and that the caller did not already name (``pending``), so a run parses few.
    """
    if data is None:
        return None
    try:
        meta, _ = load_frontmatter(data.decode("utf-8"))
    except (FrontmatterError, UnicodeDecodeError):
        return None
    version = meta.get("version")
    return (version if isinstance(version, int) and not isinstance(version, bool) else None), meta.get("content_hash")


def is_distills(head: bytes | None, working: bytes) -> bool:
    """Whether the change from ``head`` to ``working`` was made by distill (see the module docstring)."""
    now = signature(working)
    if now is None or now[1] is None:
        return False
    return head is None or signature(head) != now


def pending(repo: Repo, status: Mapping[str, str], known: Sequence[str] = ()) -> list[str]:
    """Notes distill changed but did not commit (an interrupted run or command); ``known`` are skipped."""
    found = []
    skip = set(known)
    candidates = [p for p, st in status.items()
                  if p.endswith(".md") and st[0] in " ?" and st[1] in "M?" and p not in skip]
    heads = repo.blobs(f"HEAD:{p}" for p in candidates if status[p] != "??") if repo.head() else {}
    for path in candidates:
        try:
            working = (repo.root / path).read_bytes()
        except OSError:
            continue
        if is_distills(heads.get(f"HEAD:{path}"), working):
            found.append(path)
    return found


# --------------------------------------------------------------------------- the run's commit


def checkpoint(out: Path, written: Sequence[str], labels: Mapping[str, str] | None = None, *,
               create: bool = True, subject: str | None = None) -> Checkpoint:
    """Commit the notes a run wrote (relative paths), plus any change of distill's left uncommitted.

    Creates the repository when ``out`` is in none (``create``). Never raises for a state of the
    person's repository: a merge in progress, a staged note or a folder inside another repository
    is reported in ``notices`` and the changes wait for the next commit.
    """
    labels = labels or {}
    out = Path(out)
    notices: list[str] = []
    created = False
    repo = Repo.find(out)
    if repo is None:
        if not create:
            return Checkpoint()
        top = toplevel(out)
        if top is not None:
            return Checkpoint(notices=(f"not versioned: {out} is inside the git repository {top}; distill "
                                       f"versions a folder that is its own repository (git init {out}, or --no-git)",))
        repo = Repo.init(out)
        created = True
    if why := repo.busy():
        return Checkpoint(created_repository=created, notices=(f"not committed: {why}; the next run commits them",))
    with archive_lock(out):
        repo.recover()  # a commit a killed run left half done, before its state is read
        status = repo.status()
        wanted = list(dict.fromkeys([*written, *pending(repo, status, written)]))
        changes: dict[str, bytes | None] = {}
        kinds: dict[str, str] = {}
        for path in wanted:
            st = status.get(path)
            if st is None:
                continue  # rewritten with the same bytes, or already committed
            if st[0] not in " ?":
                notices.append(f"not committed: {path} has changes staged in git; commit or unstage them")
                continue
            try:
                changes[path] = (out / path).read_bytes()
            except FileNotFoundError:
                continue
            kinds[path] = "new" if st == "??" else ("updated" if path in written else "recovered")
        if not changes:
            return Checkpoint(created_repository=created, notices=tuple(notices))
        message = _message(kinds, labels, subject)
        commit = repo.commit(changes, message)
    return Checkpoint(commit=commit, paths=tuple(changes), created_repository=created, notices=tuple(notices))


def _message(kinds: Mapping[str, str], labels: Mapping[str, str], subject: str | None) -> str:
    counts: dict[str, int] = {}
    for kind in kinds.values():
        counts[kind] = counts.get(kind, 0) + 1
    parts = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    head = subject or f"distill: {len(kinds)} note{'s' if len(kinds) != 1 else ''} ({parts})"
    lines = [f"{kind:<9} {labels.get(path, path)}" for path, kind in sorted(kinds.items(), key=lambda kv: kv[0])]
    return head + "\n\n" + "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- history


def history(out: Path, record: NoteRecord) -> History:
    """The committed versions of a note, newest first, and whether it has uncommitted changes."""
    repo = Repo.open(out, "distill history")
    entries = repo.log(record.path)
    blobs = repo.blobs(f"{e.commit}:{e.path}" for e in entries)
    versions = []
    for e in entries:
        sig = signature(blobs.get(f"{e.commit}:{e.path}"))
        number = sig[0] if sig and isinstance(sig[0], int) else None
        versions.append(Version(number=number, commit=e.commit, date=e.date, author=e.author, subject=e.subject,
                                path=e.path))
    dirty = record.path in repo.status([record.path])
    return History(id=record.id, title=record.title, path=record.path, versions=tuple(versions), uncommitted=dirty)


def find_version(hist: History, spec: str) -> Version:
    """The version ``spec`` names: a number (the newest commit holding it) or a commit id (prefix)."""
    spec = spec.strip().removeprefix("v")
    if spec.isdigit():
        for v in hist.versions:
            if v.number == int(spec):
                return v
    elif len(spec) >= 4:
        found = [v for v in hist.versions if v.commit.startswith(spec.lower())]
        if len(found) == 1:
            return found[0]
    have = ", ".join(f"v{v.number}" if v.number else v.commit[:8] for v in hist.versions) or "none"
    raise VersionNotFound(f"{hist.id} has no version {spec!r} (committed versions: {have}); "
                          f"see distill history {hist.id}")


def diff(out: Path, record: NoteRecord, old: str | None = None, new: str | None = None) -> Diff:
    """Unified diff of a note between two versions; ``new`` defaults to the file as it is now, and with
    neither given, the last change: uncommitted edits if any, else the newest commit against its parent."""
    repo = Repo.open(out, "distill diff")
    hist = history(out, record)
    if not hist.versions:
        raise VersionNotFound(f"{record.id} has no committed version yet; the next distill run commits it")
    current = (out / record.path).read_bytes()
    if old is None and new is None:
        if hist.uncommitted:
            a, a_label = repo.blob(hist.versions[0].commit, hist.versions[0].path), _label(hist.versions[0])
        elif len(hist.versions) > 1:
            a, a_label = repo.blob(hist.versions[1].commit, hist.versions[1].path), _label(hist.versions[1])
        else:
            a, a_label = b"", "(none)"
        b, b_label = current, "working file" if hist.uncommitted else _label(hist.versions[0])
    else:
        va = find_version(hist, old or "")
        a, a_label = repo.blob(va.commit, va.path), _label(va)
        if new is None:
            b, b_label = current, "working file"
        else:
            vb = find_version(hist, new)
            b, b_label = repo.blob(vb.commit, vb.path), _label(vb)
    text = "".join(difflib.unified_diff(
        (a or b"").decode("utf-8", "replace").splitlines(keepends=True),
        (b or b"").decode("utf-8", "replace").splitlines(keepends=True),
        fromfile=f"a/{record.path} ({a_label})", tofile=f"b/{record.path} ({b_label})"))
    return Diff(id=record.id, path=record.path, old=a_label, new=b_label, text=text)


def _label(v: Version) -> str:
    return f"v{v.number} {v.commit[:8]}" if v.number is not None else v.commit[:8]


# --------------------------------------------------------------------------- revert


class Reverted(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    path: str
    to: str
    version: int
    commit: str | None


def revert(out: Path, record: NoteRecord, to: str) -> Reverted:
    """Bring back the generated content of version ``to``, keep the person's Notes, tags and keys, commit.

    Refuses (``DirtyNote``) when the note has edits that are not committed: they would be overwritten.
    """
    from pipeline.atomic import atomic_write_text
    from pipeline.models import Note
    from pipeline.notes.render import GENERATED_KEYS
    from pipeline.notes.store import NoteStore, merge_note, strip_notes

    out = Path(out)
    repo = Repo.open(out, "distill revert")
    if why := repo.busy():
        raise GitError(why)
    with archive_lock(out):
        repo.recover()
        hist = history(out, record)
        target = find_version(hist, to)
        path = out / record.path
        with NoteStore(out, autosave=False).session_lock(record.id):
            current = path.read_bytes()
            head = repo.blob("HEAD", record.path)
            if head is None:
                raise DirtyNote(f"{record.path} is not committed yet; the next distill run commits it, then revert")
            if current != head:
                if not is_distills(head, current):
                    raise DirtyNote(
                        f"{record.path} has edits that are not committed, and revert would overwrite them; "
                        f"commit them first (git -C {out} commit -m 'my edits' -- {record.path}) "
                        f"or undo them (git -C {out} restore -- {record.path}), then run distill revert again")
                # distill's own change, left uncommitted by an interrupted run: record it before replacing it
                repo.commit({record.path: current}, f"distill: recover {record.path} (written by an interrupted run)\n")
            old_text = (repo.blob(target.commit, target.path) or b"").decode("utf-8")
            old_meta, old_body = load_frontmatter(old_text)
            generated = {k: v for k, v in old_meta.items() if k in GENERATED_KEYS}
            # What distill derived then is the record it kept (a note from before the record: its lists).
            for key, record_key in (("tags", "distill_tags"), ("projects", "distill_projects")):
                if record_key in old_meta:
                    generated[key] = old_meta[record_key]
            note = Note(session_id=record.id, relpath=record.path, frontmatter=generated,
                        body=strip_notes(old_body), content_hash=str(old_meta.get("content_hash") or ""))
            text, _ = merge_note(note, current.decode("utf-8"))
            if text.encode("utf-8") == current:
                return Reverted(id=record.id, path=record.path, to=to, version=record.version or 1, commit=None)
            try:
                atomic_write_text(path, text)
            except OSError as exc:
                raise read_only_error(out, exc) from exc
        version = load_frontmatter(text)[0].get("version")
        label = _label(target)
        commit = repo.commit({record.path: text.encode("utf-8")},
                             f"Revert {record.title} to {label}\n\n{record.id}  {record.path}\n")
    return Reverted(id=record.id, path=record.path, to=label, version=int(version or 1), commit=commit)

