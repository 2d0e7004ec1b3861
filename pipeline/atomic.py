"""Atomic file writes: a temp file in the same directory, fsync, then ``os.replace``.

A crash at any point leaves either the old file or the new one, never half of either: the data is
fsynced *before* the rename, so the name can never point at unwritten blocks.

Making the rename itself durable takes a second fsync, of the directory. One writer of one file
(the index) does it at once (``sync_dir=True``). A writer of many files (``NoteStore``) passes
``sync_dir=False`` and calls ``fsync_dirs`` once per touched directory before it records the
files anywhere (index, fingerprints): half the fsyncs, and a crash can only lose recent renames
that nothing yet refers to, which the next run redoes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def _file_mode() -> int:
    # mkstemp creates 0600 files; notes should get the usual 0666 & ~umask. os.umask can only be
    # read by setting it, so do that once.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_text(path: Path, text: str, *, sync_dir: bool = True, durable: bool = True) -> None:
    """Temp file in the same directory, fsync, ``os.replace``; the temp never outlives a failure.

    ``durable=False`` skips the fsyncs for derived data that a re-run recreates (caches, sidecars):
    the rename still makes the write all-or-nothing, only a power cut may lose it.
    """
    atomic_write_bytes(path, text.encode("utf-8"), sync_dir=sync_dir, durable=durable)


def temp_pattern(path: Path) -> str:
    """Glob (in ``path.parent``) of the temp files ``atomic_write_*`` makes for ``path``: only a
    SIGKILL between create and rename can leave one behind, for the next writer to remove."""
    return f".{path.name}.*.tmp"


def atomic_write_bytes(path: Path, data: bytes, *, sync_dir: bool = True, durable: bool = True) -> None:
    """``atomic_write_text`` for bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if sync_dir and durable:
        fsync_dirs([path.parent])


def fsync_dirs(dirs: Iterable[Path]) -> None:
    """Make renames and new entries in ``dirs`` durable, one fsync each."""
    for directory in dirs:
        # Not possible on every platform (e.g. Windows), hence suppress.
        with contextlib.suppress(OSError):
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
