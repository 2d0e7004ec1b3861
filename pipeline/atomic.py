"""Atomic file writes: a temp file in the same directory, fsync, then ``os.replace``.

A crash at any point leaves either the old file or the new one, never half of either: the data is
fsynced *before* the rename, so the name can never point at unwritten blocks.

Making the rename itself durable takes a second fsync, of the directory. One writer of one file
(the index) does it at once (``sync_dir=True``). A writer of many files (``NoteStore``) passes
``sync_dir=False`` and calls ``fsync_dirs`` once per touched directory before it records the
files anywhere (index, fingerprints): half the fsyncs, and a crash can only lose recent renames
that nothing yet refers to, which the next run redoes.

A process killed between creating a temp file and renaming it (SIGKILL, the OOM killer, a power
cut) leaves the temp behind: hidden, 0600, holding session text, and picked up by sync tools. So
temp names carry their writer's pid (``.<name>.<pid>.<random>.tmp``) and ``sweep_temps`` removes
those whose writer is gone. It runs before the first write into each directory in a process, and
``NoteStore`` runs it over its whole output tree when it opens; a temp whose writer is still
alive (another distill, right now) is never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

TEMP_SUFFIX = ".tmp"
#: ``.<name>.<pid>.<8 random>.tmp``: a file (or a directory being removed) written by process ``pid``.
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[A-Za-z0-9_]{8}\.tmp$")
#: Temps named before the pid was part of the name (``.<name>.<8 random>.tmp``), and the old probe file.
_LEGACY = re.compile(r"^\.(?:.+\.[A-Za-z0-9_]{8}\.tmp|probe-[A-Za-z0-9_]{8})$")
#: A legacy temp this old has no live writer: writes take milliseconds.
LEGACY_AGE_S = 3600.0

_swept: set[str] = set()
_swept_lock = threading.Lock()


@lru_cache(maxsize=1)
def _file_mode() -> int:
    # mkstemp creates 0600 files; notes should get the usual 0666 & ~umask. os.umask can only be
    # read by setting it, so do that once.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def temp_path(path: Path, *, directory: bool = False) -> Path:
    """A fresh temp name beside ``path`` that ``sweep_temps`` recognises (created, empty)."""
    prefix, parent = f".{path.name}.{os.getpid()}.", path.parent
    if directory:
        return Path(tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=TEMP_SUFFIX))
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=prefix, suffix=TEMP_SUFFIX)
    os.close(fd)
    return Path(tmp)


#: Folders this process made or found, so each write need not ask the file system again (a cold run
#: writes two files per session into a handful of folders; ``mkdir`` of an existing one is a syscall
#: that fails, and a second that checks it is a folder).
_folders: set[str] = set()


def _temp_beside(path: Path) -> tuple[int, str]:
    """A new temp file (open fd, name) in ``path``'s folder, made first if need be, after sweeping it once."""
    folder = path.parent
    key = str(folder)
    if key not in _folders:
        folder.mkdir(parents=True, exist_ok=True)
        _folders.add(key)
    sweep_once(folder)
    prefix = f".{path.name}.{os.getpid()}."
    try:
        return tempfile.mkstemp(dir=folder, prefix=prefix, suffix=TEMP_SUFFIX)
    except FileNotFoundError:  # removed since this process last wrote there
        folder.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(dir=folder, prefix=prefix, suffix=TEMP_SUFFIX)


def atomic_write_text(
    path: Path, text: str, *, sync_dir: bool = True, durable: bool = True, mode: int | None = None
) -> os.stat_result:
    """Temp file in the same directory, fsync, ``os.replace``; the temp never outlives a failure.

    ``durable=False`` skips the fsyncs for derived data that a re-run recreates (caches, sidecars):
    the rename still makes the write all-or-nothing, only a power cut may lose it. ``mode`` is the
    new file's permission bits (default ``0666 & ~umask``). Returns the written file's ``stat``,
    taken before the rename (see ``atomic_write_bytes``).
    """
    return atomic_write_bytes(path, text.encode("utf-8"), sync_dir=sync_dir, durable=durable, mode=mode)


def temp_pattern(path: Path) -> str:
    """Glob (in ``path.parent``) of the temp files ``atomic_write_*`` makes for ``path``: only a
    SIGKILL between create and rename can leave one behind, for ``sweep_temps`` to remove."""
    return f".{path.name}.*{TEMP_SUFFIX}"


def atomic_write_bytes(
    path: Path, data: bytes, *, sync_dir: bool = True, durable: bool = True, mode: int | None = None
) -> os.stat_result:
    """``atomic_write_text`` for bytes.

    The ``stat`` returned is the temp file's, once written: the rename keeps its inode, size and
    mtime, so it is the stat of ``path`` holding exactly ``data`` (a later ``stat(path)`` could
    already see another writer's file).
    """
    path = Path(path)
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
            written = os.fstat(fh.fileno())
        os.chmod(tmp, _file_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if sync_dir and durable:
        fsync_dirs([path.parent])
    return written


class DurableBatch:
    """``atomic_write_bytes`` of many files, made durable together.

    ``write`` puts the data in a temp file beside its target, neither synced nor renamed yet; ``commit``
    makes the data of every temp durable at once (their fsyncs issued together, so they share journal
    commits), then renames each over its target in the order written, then fsyncs their directories. The guarantee is ``atomic_write_bytes``'s: a name is only ever given to data already
    on disk, and a crash before ``commit`` leaves temps (named for ``sweep_temps``) and the old files.
    What it saves is the wait: an fsync commits the file system's journal, 1-10 ms each on a busy disk,
    so a pass editing 200 notes one fsync at a time spent seconds waiting.

    Leaving the ``with`` block commits; an exception there discards the temps instead. A caller that
    must keep others from writing a target between its read and the rename holds its lock until
    ``commit`` returns.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[int, str, Path]] = []  # (open fd, temp, target)

    def __enter__(self) -> DurableBatch:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()

    def __len__(self) -> int:
        return len(self._pending)

    def write(self, path: Path, data: bytes, *, mode: int | None = None) -> os.stat_result:
        """Stage ``data`` for ``path``; returns the stat ``path`` will have once committed."""
        path = Path(path)
        fd, tmp = _temp_beside(path)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.chmod(tmp, _file_mode() if mode is None else mode)
            written = os.fstat(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        self._pending.append((fd, tmp, path))
        return written

    def commit(self) -> None:
        """Sync every staged temp, rename each over its target, fsync their directories."""
        dirs = sorted({path.parent for _, _, path in self._pending})
        try:
            _sync_all([fd for fd, _, _ in self._pending])
            while self._pending:
                fd, tmp, path = self._pending[0]
                self._pending[0] = (-1, tmp, path)  # closed from here on, whatever close says
                os.close(fd)
                os.replace(tmp, path)
                del self._pending[0]
        except BaseException:
            self.discard()  # the temps not renamed yet: their targets keep the old files
            raise
        fsync_dirs(dirs)

    def discard(self) -> None:
        """Remove the temps not renamed yet."""
        pending, self._pending = self._pending, []
        for fd, tmp, _ in pending:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


#: Threads fsyncing a batch's files at once: concurrent fsyncs share the file system's journal commits.
SYNC_THREADS = 8


def _sync_all(fds: list[int]) -> None:
    """Make the data written to ``fds`` durable, their fsyncs issued together.

    Not ``syncfs``: that flushes every dirty page of the file system, other programs' and this run's
    unsynced caches included, and took a second where the notes' own fsyncs take a tenth.
    """
    if len(fds) <= 1:
        for fd in fds:
            os.fsync(fd)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(SYNC_THREADS, len(fds)), thread_name_prefix="distill-fsync") as pool:
        list(pool.map(os.fsync, fds))  # the first error, if any, is raised here


def remove_tree(path: Path) -> None:
    """Remove a directory as one step: renamed to a temp name first, so a crash midway leaves only
    a temp (swept later), never a half-removed directory under its real name."""
    if not path.exists():
        return
    doomed = temp_path(path, directory=True)
    os.rmdir(doomed)
    os.replace(path, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


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


# --------------------------------------------------------------------------- sweeping


def sweep_once(directory: Path) -> None:
    """``sweep_temps(directory)`` the first time this process writes there."""
    key = str(directory)
    with _swept_lock:
        if key in _swept:
            return
        _swept.add(key)
    with contextlib.suppress(OSError):
        sweep_temps(directory)


def sweep_temps(directory: Path) -> list[Path]:
    """Remove the temp files (and half-removed directories) in ``directory`` whose writer is gone.

    Only names distill makes, only entries the current user owns, and only when the pid in the
    name is not a live process that started before the temp was written.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return removed
    uid = os.getuid() if hasattr(os, "getuid") else None
    now = time.time()
    for entry in entries:
        name = entry.name
        if not name.startswith(".") or not (name.endswith(TEMP_SUFFIX) or name.startswith(".probe-")):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if uid is not None and st.st_uid != uid:
            continue
        m = _TEMP.match(name)
        if m:
            if writer_alive(int(m["pid"]), st.st_mtime):
                continue
        elif not (_LEGACY.match(name) and now - st.st_mtime > LEGACY_AGE_S):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


def writer_alive(pid: int, since: float) -> bool:
    """Whether process ``pid`` exists, is not a zombie, and started before ``since`` (an mtime).

    The start time catches a pid reused after a reboot or a wrap-around: a process that started
    after the temp file was last written cannot be the one writing it.
    """
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive
    except OSError:
        return False
    started = _process_start(pid)
    if started is None:
        return True  # cannot tell (not Linux): assume it is the writer
    state, start = started
    return state != "Z" and start <= since + 1.0


def _process_start(pid: int) -> tuple[str, float] | None:
    """(state letter, start time in epoch seconds) from ``/proc``; None where there is no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = int(fields[19])  # field 22 of stat: start time in clock ticks after boot
        return fields[0], _boot_time() + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


@lru_cache(maxsize=1)
def _boot_time() -> float:
    with open("/proc/stat", "rb") as fh:
        for line in fh:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    raise ValueError("no btime in /proc/stat")


def private_tempdir(prefix: str) -> Path:
    """A 0700 directory ``<tmp>/<prefix><pid>-<random>``, after removing those of dead processes.

    For scratch copies of the user's files (Hermes config, the database): a killed distill must
    not leave them in ``/tmp`` for good.
    """
    root = Path(tempfile.gettempdir())
    pattern = re.compile(re.escape(prefix) + r"(\d+)-")
    uid = os.getuid() if hasattr(os, "getuid") else None
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            m = pattern.match(entry.name)
            if not m or not entry.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if (uid is None or st.st_uid == uid) and not writer_alive(int(m[1]), st.st_mtime):
                    shutil.rmtree(entry.path, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
