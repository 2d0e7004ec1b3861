"""The archive's lock: commands that change notes or commit them take turns.

``<out>/.distill/archive/lock`` (a ``filelock`` lock, released when the process dies, so a crash
never leaves the archive locked). ``distill tag``, ``revert``, the run's link pass and its commit
hold it; writing one session's note also holds that session's lock (``NoteStore.session_lock``),
always taken after this one, so the two never deadlock.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from pipeline.archive.errors import ReadOnlyArchive
from pipeline.errors import OutputError

LOCK_FILE = "archive/lock"  # under <out>/.distill/, beside the index (see ``index.ARCHIVE_DIR``)
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}


def read_only_error(out: Path, exc: OSError) -> ReadOnlyArchive:
    return ReadOnlyArchive(
        f"the archive {out} is read-only ({exc.strerror or exc}); distill can list and search it but not change it "
        "— remount it writable, or copy it and pass --out COPY"
    )


def check_writable(out: Path) -> None:
    """``ReadOnlyArchive`` unless a file can be created in the archive (asked before any work starts)."""
    import tempfile

    folder = Path(out) / ".distill" / "archive"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as exc:
        raise read_only_error(Path(out), exc) from exc


@contextlib.contextmanager
def archive_lock(out: Path, timeout: float = 60.0) -> Iterator[None]:
    """Hold the archive's lock; ``ReadOnlyArchive`` when it cannot even be created."""
    path = Path(out) / ".distill" / LOCK_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path), timeout=timeout)
        lock.acquire()
    except Timeout as exc:
        raise OutputError(f"timed out after {timeout:.0f}s waiting for {path}; is another distill still running?") from exc
    except OSError as exc:
        if exc.errno in _READ_ONLY:
            raise read_only_error(Path(out), exc) from exc
        raise OutputError(f"cannot lock the archive {out}: {exc.strerror or exc}") from exc
    try:
        yield
    finally:
        lock.release()
