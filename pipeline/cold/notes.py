"""Where archived sessions are found: the note's ``cold`` frontmatter key and a small index.

The note is the truth: its frontmatter key ``cold`` names the sidecar beside it, with its sha256,
size, row counts and every session id it holds (``cold`` is not a key distill generates, so a
re-render keeps it like any key the user added). ``<out>/.distill/cold.json`` maps each archived
session id, sub-agents and branches included, to its unit's note; it is only a cache, rebuilt by
scanning notes when it is missing or stale.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from pipeline.atomic import atomic_write_text, temp_pattern
from pipeline.cold.errors import ColdError
from pipeline.cold.sidecar import SUFFIX
from pipeline.notes.frontmatter import FrontmatterError, load_frontmatter, read_key, set_key
from pipeline.notes.store import META_DIR, NoteStore

INDEX = "cold.json"
KEY = "cold"


def read_note(path: Path) -> tuple[dict[str, Any], str]:
    """(frontmatter, body) of a note; ``ColdError`` naming the note when it cannot be read."""
    try:
        return load_frontmatter(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ColdError(f"{path}: no such note") from None
    except (OSError, UnicodeDecodeError, FrontmatterError) as exc:
        raise ColdError(f"{path}: cannot read the note's frontmatter ({exc}); fix it by hand") from exc


def cold_of(path: Path) -> dict[str, Any] | None:
    """The note's ``cold`` value (its own lines parsed, not the whole frontmatter)."""
    try:
        value = read_key(path.read_text(encoding="utf-8"), KEY)
    except FileNotFoundError:
        raise ColdError(f"{path}: no such note") from None
    except (OSError, UnicodeDecodeError, FrontmatterError) as exc:
        raise ColdError(f"{path}: cannot read the note's frontmatter ({exc}); fix it by hand") from exc
    return value if isinstance(value, dict) else None


def has_cold(path: Path) -> bool:
    """Cheap test before parsing: does the note have a top-level ``cold:`` line at all?"""
    text = path.read_text(encoding="utf-8")
    return text.startswith(f"{KEY}:") or f"\n{KEY}:" in text


def set_cold(path: Path, updates: Mapping[str, Any], *, replace: bool = False,
             current: Mapping[str, Any] | None = None, sync_dir: bool = True) -> None:
    """Set (or merge into) the note's ``cold`` key, leaving every other byte of the note as it was.

    ``current``: the ``cold`` value the caller just read (saves parsing the note again);
    ``sync_dir=False``: the caller fsyncs the directory later, once for many notes.
    """
    text = path.read_text(encoding="utf-8")
    try:
        if replace:
            current = {}
        elif current is None:
            found = read_key(text, KEY)
            current = found if isinstance(found, dict) else {}
        new = set_key(text, KEY, {**current, **updates})
    except FrontmatterError as exc:
        raise ColdError(f"{path}: cannot record the sidecar in the note's frontmatter ({exc})") from exc
    atomic_write_text(path, new, sync_dir=sync_dir)


class TempSweeper:
    """Removes temp files a killed writer left beside a note or sidecar.

    Each directory is listed once per run (listing a month folder of 4,000 files per lineage made
    archiving quadratic). Call ``sweep`` while holding the file's lock: a temp file listed then is
    either a killed writer's, or a live writer's that is renamed (gone) by the time we hold the lock.
    """

    def __init__(self) -> None:
        self._listed: dict[Path, list[str]] = {}

    def sweep(self, path: Path) -> None:
        names = self._listed.get(path.parent)
        if names is None:
            try:
                names = self._listed[path.parent] = [n for n in os.listdir(path.parent) if n.endswith(".tmp")]
            except FileNotFoundError:
                names = self._listed[path.parent] = []
        pattern = temp_pattern(path)
        for name in fnmatch.filter(names, pattern):
            with contextlib.suppress(FileNotFoundError):
                (path.parent / name).unlink()


def sweep_temps(path: Path) -> None:
    """``TempSweeper().sweep(path)`` for a one-off write."""
    TempSweeper().sweep(path)


class ColdIndex:
    """session id → {root, note (relative to out)}; merged and replaced atomically under a lock."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.path = out / META_DIR / INDEX

    def read(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError, OSError):
            return {}
        return data if isinstance(data, dict) else {}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path.with_suffix(".lock")), timeout=60):
            yield

    def record(self, entries: Mapping[str, Mapping[str, str]]) -> None:
        if not entries:
            return
        with self._locked():
            sweep_temps(self.path)
            merged = {**self.read(), **entries}
            atomic_write_text(self.path, json.dumps(merged, ensure_ascii=False, indent=1, sort_keys=True) + "\n")


@dataclass
class Located:
    """What ``pull`` found for a reference: the note (if any) and its sidecar (if any)."""

    note: Path | None
    sidecar: Path | None
    cold: dict[str, Any] | None


def locate(out: Path, ref: str) -> Located:
    """A note path, a sidecar path, or a session id (any member of an archived unit)."""
    path = Path(ref).expanduser()
    if path.is_file() or path.suffix == ".md" or any(ref.endswith(s) for s in SUFFIX.values()):
        if not path.exists():
            raise ColdError(f"{path}: no such file; pass a note, a sidecar or an archived session id")
        if path.suffix == ".md":
            cold = cold_of(path)
            sidecar = path.parent / str(cold["sidecar"]) if cold and cold.get("sidecar") else None
            return Located(path, sidecar, cold)
        note = next((path.with_name(path.name.removesuffix(s) + ".md") for s in SUFFIX.values()
                     if path.name.endswith(s)), None)
        if note is not None and note.is_file():
            cold = cold_of(note)
            if cold and cold.get("sidecar") == path.name:
                return Located(note, path, cold)
        return Located(None, path, None)
    entry = ColdIndex(out).read().get(ref)
    if entry and (out / entry["note"]).is_file():
        note = out / entry["note"]
        cold = cold_of(note)
        if cold and ref in (cold.get("sessions") or []):
            return Located(note, note.parent / str(cold["sidecar"]), cold)
    if out.is_dir():
        store = NoteStore(out, create=False)
        rel = store.path_for(ref)
        if rel:
            note = out / rel
            cold = cold_of(note)
            return Located(note, note.parent / str(cold["sidecar"]) if cold and cold.get("sidecar") else None, cold)
        for note in sorted(out.rglob("*.md")):  # the index was lost: the notes know
            if META_DIR in note.parts:
                continue
            with contextlib.suppress(ColdError):
                cold = cold_of(note)
                if cold and ref in (cold.get("sessions") or []):
                    return Located(note, note.parent / str(cold["sidecar"]), cold)
    raise ColdError(f"{ref}: no note or archive for this session under {out}; pass the note's path, "
                    "or --out with the notes directory it was archived to")
