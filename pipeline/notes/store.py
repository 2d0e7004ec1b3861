"""Write stage: ``Note`` → a file under the output dir. Atomic, no-clobber, idempotent.

The output dir is a vault the user also edits, so three rules hold:

* **Nothing is ever half-written.** Text goes to a hidden temp file in the same directory, is
  fsynced, then ``os.replace``d over the target (atomic on POSIX and Windows). The directories
  the renames touched are fsynced once, when the index is saved, and always before it: an index
  entry (or a run's fingerprint) never vouches for a rename a crash could still undo.
* **The user's work survives a re-render.** The ``## Notes`` section (any language) and any
  frontmatter key, tag or alias the user added are carried into the new text. The frontmatter is
  edited in place (``notes.frontmatter.edit_frontmatter``): only distill's own keys change, the
  user's keys keep their bytes and order. Tags and projects a person added stay and ones they
  removed stay removed (``merge_managed``); ``version`` counts the changes of content.
* **A re-run is cheap.** ``.distill/index.json`` maps session id → {path, content_hash, title}, so
  "nothing changed" costs a dict lookup and a stat. The index is only a cache: the notes'
  own frontmatter (``id``, ``content_hash``) is the truth, and lookups fall back to it.

Two ``distill`` processes may run at once (a cron run and the Hermes plugin). Writes of one session
are serialised by a file lock; the index is merged with what is on disk under its own lock and
replaced atomically, so neither process loses the other's entries.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import threading
import time
import zlib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any, Literal

from filelock import FileLock, Timeout

from pipeline.atomic import atomic_write_text, fsync_dirs, sweep_temps, temp_path
from pipeline.errors import OutputError, SessionError
from pipeline.models import Note, SessionResult
from pipeline.notes.frontmatter import (
    MAX_BYTES,
    FrontmatterError,
    FrontmatterLimit,
    edit_frontmatter,
    load_frontmatter,
    split_note,
)
from pipeline.notes.render import (
    GENERATED_KEYS,
    default_link,
    dump_note,
    generated_section_labels,
    section_labels,
    short_id,
)

META_DIR = ".distill"
INDEX_FILE = "index.json"
#: Lock files are striped by session id: per-session exclusion without one file per session.
LOCK_STRIPES = 64
AUTOSAVE_INTERVAL = 1.0

_H2 = re.compile(r"^ {0,3}##[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}(?=[^`]*$)|~{3,})")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*$")
_FRONTMATTER = re.compile(r"\A---\s*\n.*?\n---\s*(?:\n|\Z)", re.DOTALL)
_YEAR = re.compile(r"^\d{4}$")
_MONTH = re.compile(r"^\d{2}$")


class NoteStore:
    """The output directory: where each session's note lives and whether it is current.

    ``create=False`` checks the directory could be created but touches nothing (for dry runs).
    ``autosave`` saves the index after a write, at most once per ``AUTOSAVE_INTERVAL`` seconds
    (saving is O(index size), so saving after every write would make a full run quadratic).
    Either way, call ``save_index()`` or use ``with NoteStore(...)`` to flush the rest; an entry
    that is never saved costs nothing but a lookup in the note's folder on the next run.
    """

    def __init__(
        self, out_dir: Path, *, create: bool = True, autosave: bool = True, lock_timeout: float = 60.0
    ) -> None:
        self.out_dir = Path(out_dir).expanduser()
        self.meta_dir = self.out_dir / META_DIR
        self.index_path = self.meta_dir / INDEX_FILE
        self.autosave = autosave
        self.lock_timeout = lock_timeout
        self.problems: list[str] = []
        self._mutex = threading.Lock()
        self._dirty: dict[str, dict[str, str]] = {}
        self._unsynced: set[Path] = set()  # directories holding renames not yet fsynced
        self._saved_at = float("-inf")  # so a one-session run saves right after its write
        self._ensured = False  # the probe in _ensure_dirs costs a file create+unlink: once per store
        #: note path → session id, for paths handed out this run: concurrent writes never share one
        self._claimed: dict[str, str] = {}
        self._locating = threading.Lock()  # a path is looked up and claimed in one step
        #: folder → (its mtime when listed, file names): see ``_named_like``
        self._listings: dict[Path, tuple[int, list[str]]] = {}
        self._file_locks: dict[Path, FileLock] = {}
        #: session id → (path, stat) of a note written from a text the caller made (``take_written``)
        self._written: dict[str, tuple[str, tuple[int, int, int]]] = {}
        if create:
            self._ensure_dirs()
        else:
            self._check_creatable()
        self._index: dict[str, dict[str, str]] = self._read_index()

    # ------------------------------------------------------------------ context manager

    def __enter__(self) -> NoteStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.save_index()

    # ------------------------------------------------------------------ queries

    def path_for(self, session_id: str) -> str | None:
        """Relative path of the session's existing note, or ``None``. Survives title changes."""
        entry = self._entry(session_id)
        if entry and (self.out_dir / entry["path"]).is_file():
            return entry["path"]
        return None

    def link_for(self, session_id: str) -> str:
        """Wikilink to the session's note: ``[[YYYY/MM/stem|title]]`` when known, else the id as text."""
        entry = self._entry(session_id)
        if not entry:
            return default_link(session_id)
        target = entry["path"].removesuffix(".md")
        # `|`, `[`, `]` and newlines would end or split the link; the title is display text only.
        title = " ".join(re.sub(r"[\[\]|]", " ", entry.get("title") or "").split())
        return f"[[{target}|{title}]]" if title else f"[[{target}]]"

    def recorded_hash(self, session_id: str) -> str | None:
        """The content hash the index records for the session's note; ``unchanged`` confirms it."""
        entry = self._entry(session_id)
        return entry.get("content_hash") if entry else None

    def unchanged(self, session_id: str, content_hash: str) -> bool:
        """True when the session's note exists and was rendered from the same inputs."""
        entry = self._entry(session_id)
        if not entry:
            return False
        path = self.out_dir / entry["path"]
        if not path.is_file():
            return False
        if entry.get("content_hash") == content_hash:
            return True
        # The index may be stale (another process wrote since we loaded it): the file decides.
        meta = _read_meta(path)
        if meta is not None and meta.get("content_hash") == content_hash:
            self._record(session_id, entry["path"], content_hash, str(meta.get("title") or ""))
            return True
        return False

    # ------------------------------------------------------------------ writing

    def write(self, note: Note, *, force: bool = False, dry_run: bool = False, text: str | None = None) -> SessionResult:
        """Write ``note`` (merged with the user's edits). Status: written, unchanged or would-write.

        ``text`` is ``note_text(note)`` when the caller already made it (a worker process did): it is
        the file's text when there is no note to merge with. A note written from it is remembered for
        ``take_written``. Raises ``OutputError`` when the file system refuses; the old note is then left intact.
        """
        sid = note.session_id
        _check_relpath(note)
        if dry_run:
            rel = self._locate(note, claim=False)
            if not force and self._current(sid, rel, note.content_hash):
                return SessionResult(session_id=sid, status="unchanged", path=str(self.out_dir / rel))
            return SessionResult(session_id=sid, status="would-write", path=str(self.out_dir / rel))

        if not self._ensured:
            self._ensure_dirs()
        with self._session_lock(sid):
            where = self.out_dir / note.relpath
            try:
                with self._locating:
                    rel = self._locate(note)
                target = where = self.out_dir / rel
                if not force and self._current(sid, rel, note.content_hash):
                    return SessionResult(session_id=sid, status="unchanged", path=str(target))
                old = _read_old(target)
                made = text if old is None else None
                new, problems = (made, []) if made is not None else merge_note(note, old)
            except FrontmatterLimit as exc:
                # Someone (or a sync tool) left YAML that would hang or balloon the parser: touch nothing.
                where = getattr(exc, "path", None) or where
                raise SessionError(sid, f"note {where}: {exc}; it was left untouched. Fix or delete its "
                                        "frontmatter, then run distill again") from exc
            title = str(note.frontmatter.get("title") or "")
            status: Literal["written", "unchanged"] = "unchanged" if new == old else "written"
            if status == "written":
                try:
                    st = atomic_write_text(target, new, sync_dir=False)
                except OSError as exc:
                    raise OutputError(f"cannot write note {target}: {exc.strerror or exc}") from exc
                if made is not None:
                    with self._mutex:
                        self._written[sid] = (rel, (st.st_mtime_ns, st.st_size, st.st_ino))
                with self._locating:
                    self._listed(target)
                with self._mutex:
                    self._unsynced.add(target.parent)
            self._record(sid, rel, note.content_hash, title)
        if self.autosave and time.monotonic() - self._saved_at >= AUTOSAVE_INTERVAL:
            self.save_index()
        return SessionResult(session_id=sid, status=status, path=str(target), problems=tuple(problems))

    def take_written(self, session_id: str) -> tuple[str, tuple[int, int, int]] | None:
        """(path, (mtime_ns, size, inode)) of the note ``write`` just wrote from the caller's ``text``, once.

        That stat is the written file's (``atomic.atomic_write_bytes``), so whatever the caller derived
        from the text describes the file for as long as its stat is this one (``archive.index.stage``).
        """
        with self._mutex:
            return self._written.pop(session_id, None)

    def sync(self) -> None:
        """fsync the directories of notes written so far (and their parents up to the output dir)."""
        with self._mutex:
            pending, self._unsynced = self._unsynced, set()
        dirs: set[Path] = set()
        for directory in pending:
            # A new YYYY/MM folder is itself an entry in its parent.
            while directory not in dirs and (directory == self.out_dir or self.out_dir in directory.parents):
                dirs.add(directory)
                directory = directory.parent
        fsync_dirs(sorted(dirs))

    def save_index(self) -> None:
        """Merge this process's new entries into the on-disk index and replace it atomically."""
        self.sync()  # the notes' renames are durable before any index entry points at them
        with self._mutex:
            if not self._dirty:
                return
            dirty = dict(self._dirty)
        with self._lock(self.meta_dir / "index.lock"):
            merged = {**self._read_index(), **dirty}
            text = json.dumps(merged, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
            try:
                atomic_write_text(self.index_path, text)
            except OSError as exc:
                raise OutputError(f"cannot write index {self.index_path}: {exc.strerror or exc}") from exc
        with self._mutex:
            self._saved_at = time.monotonic()
            self._index = merged  # now includes other processes' entries too
            for sid, entry in dirty.items():
                if self._dirty.get(sid) == entry:
                    del self._dirty[sid]

    # ------------------------------------------------------------------ internals

    def _entry(self, session_id: str) -> dict[str, str] | None:
        with self._mutex:
            return self._dirty.get(session_id) or self._index.get(session_id)

    def _record(self, session_id: str, rel: str, content_hash: str, title: str) -> None:
        with self._mutex:
            self._dirty[session_id] = {"path": rel, "content_hash": content_hash, "title": title}

    def _current(self, session_id: str, rel: str, content_hash: str) -> bool:
        entry = self._entry(session_id)
        if entry and entry["path"] == rel:
            return self.unchanged(session_id, content_hash)
        meta = _read_meta(self.out_dir / rel)  # found without the index (lost or stale)
        if meta is not None and meta.get("id") == session_id and meta.get("content_hash") == content_hash:
            # Put it back in the index: a run killed before saving the index lost the entry, and
            # without it every later run would re-render this session to learn it is current.
            self._record(session_id, rel, content_hash, str(meta.get("title") or ""))
            return True
        return False

    def _locate(self, note: Note, *, claim: bool = True) -> str:
        """The session's existing note path, else ``note.relpath`` (suffixed if another note owns it).

        ``claim`` reserves the path for this session until the run ends: writes run concurrently
        (``pipeline.run.runner._pooled``), and two sessions must not pick the same free name at once.
        """
        sid = note.session_id
        claims = self._claimed if claim else {}
        if known := self.path_for(sid):
            return self._claim(claims, sid, known)
        candidate = self.out_dir / note.relpath
        # Without an index entry, look where this session's notes are named: same month folder,
        # file name ending in its short id. Cheap, and keeps the path stable if the index was lost.
        for path in self._named_like(candidate.parent, short_id(sid)):
            if _owned_by(path, sid):
                return self._claim(claims, sid, path.relative_to(self.out_dir).as_posix())
        rel = PurePosixPath(note.relpath)
        n = 1
        # Same slug and short id, different session: on disk, or handed to a write still in flight.
        # A file there may also be this session's own, written by a concurrent run after the folder
        # was listed (its mtime can tick too coarsely to show that): its frontmatter says whose it is.
        while claims.get(rel.as_posix(), sid) != sid or (
            (self.out_dir / rel).exists() and not _owned_by(self.out_dir / rel, sid)
        ):
            n += 1
            rel = PurePosixPath(note.relpath).with_name(f"{PurePosixPath(note.relpath).stem}-{n}.md")
        return self._claim(claims, sid, rel.as_posix())

    def _named_like(self, directory: Path, short: str) -> list[Path]:
        """``sorted(directory.glob(f"*-{short}*.md"))``, from a cached listing of the folder.

        A cold run looks up every new session in its month folder; listing the folder each time
        made that quadratic (2,000 notes in one folder: 1.5 s of listdir, 4 s of matching). The
        listing is reused while the folder's mtime is unchanged, and this store's own writes are
        added to it (``_listed``); another process's write shows up as a changed mtime (when the
        clock ticked between the two writes; ``_locate`` checks the owner of a file at the target path).
        """
        try:
            mtime = directory.stat().st_mtime_ns
        except (FileNotFoundError, NotADirectoryError):
            return []
        cached = self._listings.get(directory)
        if cached is None or cached[0] != mtime:
            try:
                cached = (mtime, os.listdir(directory))
            except (FileNotFoundError, NotADirectoryError):
                return []
            self._listings[directory] = cached
        marker = f"-{short}"
        names = [n for n in cached[1] if marker in n]  # a cheap screen before the exact pattern
        if any(c in short for c in "*?["):
            return [directory / n for n in sorted(fnmatch.filter(names, f"*-{short}*.md"))]
        # ``*-<short>*.md`` spelled out: fnmatch compiles a regex per new pattern, and every session
        # has its own (1 ms each, a second of a cold run over 2,000 sessions).
        # normcase as fnmatch applies it (case-insensitive on Windows).
        mark = os.path.normcase(marker)
        return [directory / n for n in sorted(names) if _ends_md_after(os.path.normcase(n), mark)]

    def _listed(self, path: Path) -> None:
        """Add a file this store just wrote to its folder's cached listing."""
        cached = self._listings.get(path.parent)
        if cached is None:
            return
        try:
            mtime = path.parent.stat().st_mtime_ns
        except OSError:
            self._listings.pop(path.parent, None)
            return
        names = cached[1] if path.name in cached[1] else [*cached[1], path.name]
        self._listings[path.parent] = (mtime, names)

    @staticmethod
    def _claim(claims: dict[str, str], session_id: str, rel: str) -> str:
        claims.setdefault(rel, session_id)
        return rel

    def _ensure_dirs(self) -> None:
        try:
            self.meta_dir.mkdir(parents=True, exist_ok=True)
            # mkdir succeeding is not proof (read-only mounts, ACLs): write and remove a probe file.
            os.unlink(temp_path(self.meta_dir / "probe"))
            self._ensured = True
            self._sweep()
        except OSError as exc:
            raise OutputError(
                f"cannot write to output directory {self.out_dir}: {exc.strerror or exc}; "
                "pass --out with a writable directory"
            ) from exc

    def _sweep(self) -> None:
        """Remove temp files a killed distill left in this output tree (``atomic.sweep_temps``).

        Only the folders distill writes are visited (``YYYY/MM``, ``.distill``, ``skills``), not
        the rest of a vault the output directory may share.
        """
        dirs = [self.out_dir]
        for year in _subdirs(self.out_dir, _YEAR):
            dirs += [year, *_subdirs(year, _MONTH)]
        for top in (self.meta_dir, self.out_dir / "skills"):
            if top.is_dir():
                dirs += [Path(d) for d, _, _ in os.walk(top)]
        for directory in dirs:
            sweep_temps(directory)

    def _check_creatable(self) -> None:
        path = self.out_dir
        while not path.exists() and path != path.parent:
            path = path.parent
        if not path.is_dir():
            raise OutputError(
                f"cannot create output directory {self.out_dir}: {path} is not a directory; "
                "pass --out with a writable directory"
            )

    def _read_index(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.index_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as exc:
            # Only a cache: start empty (lookups fall back to the notes) and say so.
            self.problems.append(f"ignored unreadable index {self.index_path}: {exc}")
            return {}
        if not isinstance(data, dict):
            self.problems.append(f"ignored malformed index {self.index_path}")
            return {}
        # Entries are trusted only as far as their shape: a path leaving the output directory (an
        # edited or planted index) would make the next write land outside it.
        return {k: v for k, v in data.items()
                if isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
                and isinstance(v.get("path"), str) and _safe_relpath(v["path"])}

    def session_lock(self, session_id: str) -> contextlib.AbstractContextManager[object]:
        """The lock ``write`` holds for ``session_id``'s note: take it to edit that note in place."""
        return self._session_lock(session_id)

    def _session_lock(self, session_id: str) -> contextlib.AbstractContextManager[object]:
        stripe = zlib.crc32(session_id.encode("utf-8")) % LOCK_STRIPES
        return self._lock(self.meta_dir / "locks" / f"{stripe:02x}.lock")

    @contextlib.contextmanager
    def _lock(self, path: Path) -> Iterator[None]:
        lock = self._file_locks.get(path)
        if lock is None:  # one FileLock per lock file and store: building one costs more than using it
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = self._file_locks.setdefault(path, FileLock(str(path), timeout=self.lock_timeout))
        try:
            with lock:
                yield
        except Timeout as exc:
            raise OutputError(
                f"timed out after {self.lock_timeout}s waiting for {path}; is another distill still running?"
            ) from exc


def _ends_md_after(name: str, marker: str) -> bool:
    """``fnmatch(name, f"*{marker}*.md")`` for a marker without wildcards."""
    return name.endswith(".md") and marker in name[:-3]


# --------------------------------------------------------------------------- merging with user edits


def merge_note(note: Note, old_text: str | None) -> tuple[str, list[str]]:
    """The new file text for ``note``, keeping the user's Notes section, tags, aliases and keys.

    The old frontmatter is edited in place, so keys distill does not own keep their bytes, order
    and comments; ``version`` goes up by one when anything but ``distilled_at`` changed.
    """
    if old_text is None:
        return dump_note(note.frontmatter, note.body), []
    problems: list[str] = []
    in_place = True
    try:
        # Bounded (``notes.frontmatter``): a limit broken raises ``FrontmatterLimit`` to the caller.
        old_meta, old_body = load_frontmatter(old_text)
    except FrontmatterLimit:
        raise
    except FrontmatterError as exc:
        # Keep the Notes text even when the user broke the YAML; their keys cannot be recovered.
        problems.append(f"existing frontmatter unreadable ({exc}); user properties dropped")
        old_meta, old_body, in_place = {}, _FRONTMATTER.sub("", old_text, count=1), False
    meta = merge_frontmatter(note.frontmatter, old_meta)
    body = splice_notes(carry_related(note.body, old_body), extract_notes(old_body))
    source = old_text if in_place else None
    old_version = _as_version(old_meta.get("version"))
    same = {**meta, "version": old_version}
    if "distilled_at" in old_meta:
        same["distilled_at"] = old_meta["distilled_at"]
    if _compose(source, old_meta, same, body) == old_text:
        meta["version"] = old_version  # only the render time moved: the same content
    else:
        meta["version"] = old_version + 1
    return _compose(source, old_meta, meta, body), problems


def _as_version(value: Any) -> int:
    """A note's ``version``; a note from before versions counts as version 1."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _compose(old_text: str | None, old_meta: dict[str, Any], meta: dict[str, Any], body: str) -> str:
    """``meta`` + ``body`` as file text: distill's keys edited into ``old_text``'s block when there is one."""
    if old_text is not None:
        values = {k: v for k, v in meta.items() if k in GENERATED_KEYS and (k not in old_meta or old_meta[k] != v)}
        remove = [k for k in old_meta if k in GENERATED_KEYS and k not in meta]
        try:
            parts = split_note(edit_frontmatter(old_text, values, remove))
        except FrontmatterError:
            parts = None  # e.g. YAML anchors tie a user key to a generated one: write the block afresh
        if parts is not None:
            opening, block, rest = parts
            closing = rest.split("\n", 1)[0]
            return f"{opening}{block}{closing}\n\n{body.strip(chr(10))}\n"
    return dump_note(meta, body)


#: Lists distill derives and a person may edit, each with the key recording what distill derived.
MANAGED_LISTS = {"tags": "distill_tags", "projects": "distill_projects"}


def merge_frontmatter(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """Generated values win; aliases are a union; tags and projects merge as ``merge_managed`` says;
    ``related`` (written by the archive's link pass) is carried until it is recomputed; user-only keys
    are kept."""
    merged = dict(new)
    if "aliases" in new or "aliases" in old:
        merged["aliases"] = _union(_as_list(new.get("aliases")), _as_list(old.get("aliases")))
    for key, record in MANAGED_LISTS.items():
        if key not in new and key not in old:
            continue
        old_record = old.get(record)
        shown, managed = merge_managed(
            _as_list(new.get(key)), _as_list(old.get(key)), None if old_record is None else _as_list(old_record)
        )
        merged[key], merged[record] = shown, managed
    if "related" not in new and "related" in old:
        merged["related"] = old["related"]
    for key, value in old.items():
        if key not in merged and key not in GENERATED_KEYS:
            merged[key] = value
    if "tags" in merged:  # keep tags last, as gbrain serialises them
        merged["tags"] = merged.pop("tags")
    return merged


def merge_managed(derived: list[str], shown: list[str], managed: list[str] | None) -> tuple[list[str], list[str]]:
    """(the list to show, the record to keep) when distill now derives ``derived`` for a list a person edits.

    ``managed`` is the record from the last write: what distill derived then, plus what a person has
    removed since. An entry in the record but not in ``shown`` was removed by a person and stays
    removed; an entry in ``shown`` but not in the record is the person's own and stays. A note
    written before the record existed (``None``) keeps every entry it shows, as distill did then.
    Case-insensitive, as Obsidian's tags are.
    """
    shown_cf = {s.casefold() for s in shown}
    record = managed or []
    record_cf = {m.casefold() for m in record}
    removed = record_cf - shown_cf
    own = shown if managed is None else [s for s in shown if s.casefold() not in record_cf]
    new_shown = _union([d for d in derived if d.casefold() not in removed], own)
    new_record = _union(derived, [m for m in record if m.casefold() in removed])
    return new_shown, new_record


def carry_related(body: str, old_body: str) -> str:
    """``body`` with the old note's Related section (written by the link pass) when ``body`` has none.

    A re-render does not know the related notes; carrying them avoids rewriting them each time.
    """
    old = extract_section(old_body, "related")
    if old is None or extract_section(body, "related") is not None:
        return body
    lines = body.rstrip("\n").split("\n")
    heads = _h2_lines(lines)
    at = next((i for i, label in reversed(heads) if label in _notes_labels()), len(lines))
    block = [old[0], "", *old[1].strip("\n").split("\n"), ""] if old[1].strip() else [old[0], ""]
    return "\n".join([*lines[:at], *block, *lines[at:]]) + "\n"


def extract_section(body: str, key: str) -> tuple[str, str] | None:
    """(heading line, text) of the generated ``## `` section ``key`` (any language), or None."""
    lines = body.split("\n")
    heads = _h2_lines(lines)
    labels = section_labels(key)
    start = next((i for i, label in heads if label in labels), None)
    if start is None:
        return None
    end = next((i for i, _ in heads if i > start), len(lines))
    return lines[start], "\n".join(lines[start + 1 : end]).strip("\n")


def extract_notes(body: str) -> str:
    """Text under the Notes heading (any language) up to the next generated ``##`` section or EOF.

    Only *generated* headings end it, so ``##`` subsections the user wrote inside Notes are kept.
    """
    lines = body.split("\n")
    heads = _h2_lines(lines)
    start = next((i for i, label in heads if label in _notes_labels()), None)
    if start is None:
        return ""
    end = next((i for i, label in heads if i > start and label in _generated_labels()), len(lines))
    return "\n".join(lines[start + 1 : end]).strip("\n")


def splice_notes(body: str, notes: str) -> str:
    """Put ``notes`` under the (last) Notes heading of a freshly rendered body."""
    if not notes.strip():
        return body
    lines = body.rstrip("\n").split("\n")
    heads = _h2_lines(lines)
    at = next((i for i, label in reversed(heads) if label in _notes_labels()), None)
    if at is None:
        return body.rstrip("\n") + "\n\n" + notes + "\n"
    end = next((i for i, label in heads if i > at and label in _generated_labels()), len(lines))
    tail = ["", *lines[end:]] if end < len(lines) else []
    return "\n".join([*lines[: at + 1], "", notes, *tail]) + "\n"


def strip_notes(body: str) -> str:
    """``body`` with the text under its (last) Notes heading removed, the heading kept."""
    lines = body.rstrip("\n").split("\n")
    heads = _h2_lines(lines)
    at = next((i for i, label in reversed(heads) if label in _notes_labels()), None)
    if at is None:
        return body
    end = next((i for i, label in heads if i > at and label in _generated_labels()), len(lines))
    tail = ["", *lines[end:]] if end < len(lines) else []
    return "\n".join([*lines[: at + 1], *tail]) + "\n"


def _h2_lines(lines: list[str]) -> list[tuple[int, str]]:
    """(line index, casefolded label) of every ``## `` heading outside fenced code."""
    found: list[tuple[int, str]] = []
    fence: str | None = None
    for i, line in enumerate(lines):
        if fence is None and (m := _FENCE_OPEN.match(line)):
            fence = m.group(1)
        elif fence is not None:
            close = _FENCE_CLOSE.match(line)
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence):
                fence = None
        elif h := _H2.match(line):
            found.append((i, h.group(1).strip().casefold()))
    return found


@lru_cache(maxsize=1)
def _notes_labels() -> frozenset[str]:
    return section_labels("notes")


@lru_cache(maxsize=1)
def _generated_labels() -> frozenset[str]:
    return generated_section_labels() - _notes_labels()


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):  # Obsidian's legacy "a, b" / "a b" form
        return [v for v in re.split(r"[,\s]+", value) if v]
    if isinstance(value, list | tuple):
        return [str(v) for v in value if v is not None and str(v)]
    return [str(value)]


def _union(first: list[str], second: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for item in [*first, *second]:
        seen.setdefault(item.casefold(), item)
    return list(seen.values())


# --------------------------------------------------------------------------- file system


def _subdirs(directory: Path, name: re.Pattern[str]) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(directory) if name.match(e.name) and e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _safe_relpath(relpath: str) -> bool:
    rel = PurePosixPath(relpath)
    return not (rel.is_absolute() or ".." in rel.parts or "\\" in relpath or ":" in relpath
                or rel.suffix != ".md" or not rel.parts or rel.parts[0] in (META_DIR, "skills"))


def _check_relpath(note: Note) -> None:
    # relpath comes from render, but a note is a plain model anyone can build: never let it escape.
    if not _safe_relpath(note.relpath):
        raise SessionError(note.session_id, f"unsafe note path {note.relpath!r}")


def _owned_by(path: Path, session_id: str) -> bool:
    """Whether the note at ``path`` says, in its frontmatter, that it is ``session_id``'s.

    A note whose frontmatter breaks the limits cannot say: ``FrontmatterLimit`` is raised rather
    than a guess that would write a second note beside it.
    """
    meta = _read_meta(path, strict=True)
    return meta is not None and str(meta.get("id")) == session_id


def _read_meta(path: Path, *, strict: bool = False) -> dict[str, Any] | None:
    """A note's frontmatter, or ``None`` when it is missing or unreadable.

    Only the head of the file is read: frontmatter larger than ``MAX_BYTES`` is refused anyway.
    ``strict`` raises ``FrontmatterLimit`` (with ``path``) for a hostile block instead of ``None``.
    """
    try:
        with path.open("rb") as fh:
            head = fh.read(MAX_BYTES + 4096).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        meta, _ = load_frontmatter(head)
    except FrontmatterLimit as exc:
        if strict:
            exc.path = path  # type: ignore[attr-defined]
            raise
        return None
    except FrontmatterError:
        return None
    return meta if meta else None


def _read_old(path: Path) -> str | None:
    """The note's current text, to merge with (``FrontmatterLimit`` when it is not text at all)."""
    if not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        # Not UTF-8 (a tool re-encoded it): merging would mangle it, so keep it and write nothing.
        raise FrontmatterLimit("the note is not UTF-8 text") from None


