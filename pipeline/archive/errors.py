"""Typed errors of the archive commands. Each message names the input and the next command to run."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.errors import InputError, OutputError


class NoteNotFound(InputError):
    """No distilled note has that id, id prefix or title (``closest`` holds the nearest ids)."""

    def __init__(self, ref: str, out: object, closest: Sequence[str] = (), ambiguous: bool = False) -> None:
        self.ref, self.closest, self.ambiguous = ref, tuple(closest), ambiguous
        if ambiguous:
            msg = f"{ref!r} matches {len(closest)} notes in {out}: {', '.join(closest[:5])}; give more of the id"
        elif closest:
            msg = f"no note {ref!r} in {out}; closest: {', '.join(closest)} (distill ls lists them all)"
        else:
            msg = f"no note {ref!r} in {out}; distill ls lists the notes, distill search QUERY finds one"
        super().__init__(msg)


class NotVersioned(InputError):
    """The archive folder is not a git repository, and the command needs its history."""


class DirtyNote(InputError):
    """A note has changes that are not committed, and the command would overwrite or commit them."""


class VersionNotFound(InputError):
    """A version number or commit that a note never had."""


class GitError(OutputError):
    """The ``git`` binary failed (or is missing) for a reason the archive cannot fix by itself."""


class ReadOnlyArchive(OutputError):
    """The archive folder cannot be written (a read-only mount, permissions)."""
