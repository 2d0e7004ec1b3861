"""Atomic file writes: a temp file in the same directory, fsync, then ``os.replace``.

A crash at any point leaves either the old file or the new one, never half of either.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def _file_mode() -> int:
    # mkstemp creates 0600 files; notes should get the usual 0666 & ~umask. os.umask can only be
    # read by setting it, so do that once.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_text(path: Path, text: str) -> None:
    """Temp file in the same directory, fsync, ``os.replace``; the temp never outlives a failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    # Make the rename itself durable; not possible on every platform (e.g. Windows), hence suppress.
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
