"""``distill tag``: add and remove tags, set the project, in the note's frontmatter, in place.

Only the ``tags`` and ``projects`` lines (and their records, ``distill_tags``/``distill_projects``,
and ``version``) change; every other byte of the note stays (``notes.frontmatter.edit_frontmatter``).
A tag removed here stays in the record, so a re-render never puts it back; a tag added here is
the person's own, so a re-render never drops it (``notes.store.merge_managed``). The change is
committed on its own; when the note also has a person's uncommitted edits, the commit holds only
this change (applied to the committed text) and the edits stay uncommitted in the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pipeline.archive.errors import DirtyNote
from pipeline.archive.lock import archive_lock, read_only_error
from pipeline.archive.notefile import NoteRecord, as_list
from pipeline.errors import InputError
from pipeline.notes.frontmatter import FrontmatterError, edit_frontmatter, load_frontmatter
from pipeline.notes.render import tag_name


class TagEdit(BaseModel):
    """What ``tag`` was asked to do: tags to add and remove, and a project to set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    project: str | None = None


class Tagged(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    path: str
    tags: tuple[str, ...]
    projects: tuple[str, ...]
    version: int
    changed: bool
    commit: str | None = None


def parse_changes(words: Sequence[str], project: str | None = None) -> TagEdit:
    """``+tag``/``tag`` adds, ``-tag`` removes; each name made a valid Obsidian tag."""
    add: list[str] = []
    remove: list[str] = []
    for word in words:
        sign, name = (word[0], word[1:]) if word[:1] in "+-" else ("+", word)
        tag = tag_name(name)
        if tag is None:
            raise InputError(f"{word!r} is not a tag; use +name to add and -name to remove, e.g. distill tag ID +sqlite -wip")
        (add if sign == "+" else remove).append(tag)
    if project is not None and not project.strip():
        raise InputError("--project needs a name, e.g. --project parsekit")
    if not add and not remove and project is None:
        raise InputError("say what to change: +tag, -tag or --project NAME, e.g. distill tag ID +sqlite -wip")
    return TagEdit(add=tuple(add), remove=tuple(remove), project=project.strip() if project else None)


def _apply(shown: list[str], record: list[str] | None, add: Sequence[str], remove: Sequence[str]
           ) -> tuple[list[str], list[str] | None]:
    """(new list, new record) after adding and removing; the record only grows, for a legacy note."""
    cf = {s.casefold() for s in remove}
    new = [s for s in shown if s.casefold() not in cf]
    have = {s.casefold() for s in new}
    for tag in add:
        if tag.casefold() not in have:
            new.append(tag)
            have.add(tag.casefold())
    if record is None:
        # A note from before distill kept a record: remember just the removals, so a re-render
        # keeps every other tag as it did, and does not bring these back.
        removed = [s for s in shown if s.casefold() in cf]
        return new, (removed or None)
    return new, record


def edit_tags(out: Path, record: NoteRecord, edit: TagEdit, *, commit: bool = True) -> Tagged:
    """Apply ``edit`` to the note of ``record`` under the archive lock, and commit it when versioned."""
    from pipeline.archive.git import Repo
    from pipeline.archive.versions import is_distills
    from pipeline.atomic import atomic_write_text
    from pipeline.notes.store import NoteStore

    out = Path(out)
    with archive_lock(out):
        repo = Repo.find(out) if commit else None
        if repo is not None:
            if why := repo.busy():
                raise DirtyNote(why)
            repo.recover()
        path = out / record.path
        with NoteStore(out, autosave=False).session_lock(record.id):
            text = path.read_text(encoding="utf-8")
            values = _values(text, edit)
            if values is None:
                meta = load_frontmatter(text)[0]
                return Tagged(id=record.id, path=record.path, tags=tuple(as_list(meta.get("tags"))),
                              projects=tuple(as_list(meta.get("projects"))), version=_version(meta), changed=False)
            try:
                new_text = _with_projects(edit_frontmatter(text, values), values, record)
            except FrontmatterError as exc:
                raise InputError(f"{record.path}: {exc}") from exc
            try:
                atomic_write_text(path, new_text)
            except OSError as exc:
                raise read_only_error(out, exc) from exc
        extra = _project_notes(out, record, values) if edit.project is not None else {}
        sha = None
        if repo is not None:
            status = repo.status([record.path]).get(record.path)
            if status is not None and status[0] not in " ?":
                raise DirtyNote(f"{record.path} has changes staged in git; the tag change is written but not "
                                f"committed — commit or unstage them (git -C {out} status)")
            head = repo.blob("HEAD", record.path)
            committed = new_text
            if head is not None and head != text.encode("utf-8") and not is_distills(head, text.encode("utf-8")):
                # The person's uncommitted edits stay theirs: commit this change on the committed text.
                head_values = _values(head.decode("utf-8"), edit)
                try:
                    committed = (_with_projects(edit_frontmatter(head.decode("utf-8"), head_values), head_values, record)
                                 if head_values else head.decode())
                except FrontmatterError:
                    committed = new_text
            sha = repo.commit({record.path: committed.encode("utf-8"), **extra}, _message(record, edit))
    meta = load_frontmatter(new_text)[0]
    return Tagged(id=record.id, path=record.path, tags=tuple(as_list(meta.get("tags"))),
                  projects=tuple(as_list(meta.get("projects"))), version=_version(meta), changed=True, commit=sha)


def _with_projects(text: str, values: dict[str, object], record: NoteRecord) -> str:
    """``text`` with its Related section's project links following a ``projects`` change in ``values``."""
    from pipeline.archive.links import set_project_links
    from pipeline.notes.frontmatter import split_note

    if "projects" not in values or (parts := split_note(text)) is None:
        return text
    opening, block, rest = parts
    closing, _, body = rest.partition("\n")
    return opening + block + closing + "\n" + set_project_links(body, as_list(values["projects"]), record.language)


def _project_notes(out: Path, record: NoteRecord, values: dict[str, object]) -> dict[str, bytes]:
    """Regenerate the index notes of the projects the note left and joined; path → their new text."""
    from pipeline.archive.index import open_index
    from pipeline.archive.links import write_project_note

    names = {*record.projects, *as_list(values.get("projects", []))}
    index, _ = open_index(out)  # reads the note just written: the project lists are current
    try:
        changed = [rel for name in sorted(names) if (rel := write_project_note(out, index, name)) is not None]
    finally:
        index.close()
    return {rel: (out / rel).read_bytes() for rel in changed}


def _version(meta: dict[str, object]) -> int:
    v = meta.get("version")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 1


def _values(text: str, edit: TagEdit) -> dict[str, object] | None:
    """The frontmatter keys to set for ``edit`` on ``text``, or None when nothing would change."""
    try:
        meta, _ = load_frontmatter(text)
    except FrontmatterError as exc:
        raise InputError(f"the note's frontmatter cannot be read ({exc}); fix it by hand first") from exc
    values: dict[str, object] = {}
    tags = as_list(meta.get("tags"))
    record = as_list(meta["distill_tags"]) if "distill_tags" in meta else None
    new_tags, new_record = _apply(tags, record, edit.add, edit.remove)
    if new_tags != tags:
        values["tags"] = new_tags
        if new_record is not None and new_record != record:
            values["distill_tags"] = new_record
    if edit.project is not None:
        projects = as_list(meta.get("projects"))
        precord = as_list(meta["distill_projects"]) if "distill_projects" in meta else None
        drop = [p for p in projects if p.casefold() != edit.project.casefold()]
        new_projects, new_precord = _apply(projects, precord, [edit.project], drop)
        if new_projects != projects:
            values["projects"] = new_projects
            if new_precord is not None and new_precord != precord:
                values["distill_projects"] = new_precord
    if not values:
        return None
    values["version"] = _version(meta) + 1
    return values


def _message(record: NoteRecord, edit: TagEdit) -> str:
    change = " ".join([*(f"+{t}" for t in edit.add), *(f"-{t}" for t in edit.remove),
                       *([f"--project {edit.project}"] if edit.project else [])])
    return f"Tag {record.title}: {change}\n\n{record.id}  {record.path}\n"
