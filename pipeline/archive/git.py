"""A small wrapper over the ``git`` binary, for the archive's versions.

Why the binary and not a library: ``git`` is what the person uses on the same folder, so distill
sees exactly what ``git status`` shows them (their config, ``.gitignore``, line endings), and it
adds no dependency. GitPython is itself a wrapper over the binary (in maintenance mode), and
dulwich re-implements index and status handling in Python, where a difference from the person's
``git`` would show up as a phantom change. The commands used are plumbing, stable across versions.

Commits are made with plumbing, never ``git add``/``git commit``: a temporary index is filled from
``HEAD`` plus exactly the files distill changed, written as a tree, committed with ``commit-tree``
and moved onto ``HEAD`` with a compare-and-swap ``update-ref`` (a concurrent commit by the person
makes it fail, never lose theirs). So distill never stages or commits a file it did not write,
never runs hooks, never touches what the person has staged, and can commit a text that is not the
working file (its own change without the person's uncommitted edits). Nothing here forces,
resets or rewrites history.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pipeline.archive.errors import GitError, NotVersioned

#: distill's own commits say who made them: a person's commits keep their identity.
AUTHOR = ("distill", "distill@localhost")
ZERO = "0" * 40
#: In the git dir: the commit being made and its index lines, until the person's index points at it.
JOURNAL = "distill-commit"
#: Settings that would change what distill commits or ask for input; the person's others apply.
_CONFIG = ("core.quotepath=off", "core.autocrlf=false", "core.safecrlf=false", "commit.gpgsign=false",
           "core.fsmonitor=false")
_TIMEOUT = 120


class LogEntry(BaseModel):
    """One commit that touched a file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    commit: str
    author: str
    date: str
    subject: str
    path: str


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    # A GIT_DIR or GIT_INDEX_FILE inherited from a hook or a shell would point git elsewhere.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"})
    env.update(extra or {})
    return env


def _git(cwd: Path, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None,
         check: bool = True) -> subprocess.CompletedProcess[bytes]:
    cmd = ["git", *(a for c in _CONFIG for a in ("-c", c)), *args]
    try:
        proc = subprocess.run(cmd, cwd=cwd, input=input, capture_output=True, env=_env(env), timeout=_TIMEOUT,
                              check=False)
    except FileNotFoundError as exc:
        raise GitError("the git binary is not installed; install git, or pass --no-git to keep no versions") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0]} in {cwd} did not finish in {_TIMEOUT}s") from exc
    if check and proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed in {cwd}: {msg[-1] if msg else proc.returncode}")
    return proc


def _git_fed(cwd: Path, args: Sequence[str], chunks: Iterable[bytes]) -> None:
    """``_git`` for an input written piece by piece (its output is dropped). The child never outlives
    this call: on a timeout or any error it is killed and reaped."""
    cmd = ["git", *(a for c in _CONFIG for a in ("-c", c)), *args]
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: git cannot block on a full stderr pipe
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err,
                                    env=_env())
        except FileNotFoundError as exc:
            raise GitError("the git binary is not installed; install git, or pass --no-git to keep no versions") from exc
        try:
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):  # git stopped reading: its exit status says why
                for chunk in chunks:
                    proc.stdin.write(chunk)
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
            code = proc.wait(timeout=_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise GitError(f"git {args[0]} in {cwd} did not finish in {_TIMEOUT}s") from exc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if code != 0:
            err.seek(0)
            msg = err.read().decode("utf-8", "replace").strip().splitlines()
            raise GitError(f"git {args[0]} failed in {cwd}: {msg[-1] if msg else code}")


def toplevel(path: Path) -> Path | None:
    """The work tree ``path`` is inside, or None."""
    proc = _git(path, "rev-parse", "--show-toplevel", check=False)
    if proc.returncode != 0:
        return None
    return Path(proc.stdout.decode().strip()).resolve()


class Repo:
    """The archive folder as a git repository (its own, with the folder at its root)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.git_dir = Path(self.text("rev-parse", "--absolute-git-dir"))

    # ------------------------------------------------------------------ finding

    @classmethod
    def find(cls, out: Path) -> Repo | None:
        """The repository whose root is ``out``, or None (``out`` in no repository, or deeper in another's)."""
        if not (Path(out) / ".git").exists():
            return None
        top = toplevel(Path(out))
        return cls(out) if top == Path(out).resolve() else None

    @classmethod
    def open(cls, out: Path, command: str) -> Repo:
        """``find``, or ``NotVersioned`` naming what to do."""
        repo = cls.find(out)
        if repo is None:
            top = toplevel(Path(out)) if Path(out).is_dir() else None
            where = f" (it is inside the repository {top})" if top else ""
            raise NotVersioned(
                f"{command} needs the archive's history, but {out} is not a git repository{where}; "
                f"the next `distill` run creates one (unless run with --no-git), or run: git init {out}"
            )
        return repo

    @classmethod
    def init(cls, out: Path) -> Repo:
        """A new repository at ``out`` that ignores distill's own ``.distill/`` folder."""
        _git(Path(out), "-c", "init.defaultBranch=main", "init", "-q")
        repo = cls(out)
        repo.exclude(".distill/")
        return repo

    def exclude(self, pattern: str) -> None:
        """Add ``pattern`` to ``.git/info/exclude`` (local to this clone: no file in the work tree changes)."""
        path = self.git_dir / "info" / "exclude"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text("utf-8") if path.exists() else ""
        if pattern not in text.splitlines():
            with path.open("a", encoding="utf-8") as fh:
                fh.write(("" if text.endswith("\n") or not text else "\n") + pattern + "\n")

    # ------------------------------------------------------------------ reading

    def git(self, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None,
            check: bool = True) -> subprocess.CompletedProcess[bytes]:
        return _git(self.root, *args, input=input, env=env, check=check)

    def text(self, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None) -> str:
        return _git(self.root, *args, input=input, env=env).stdout.decode("utf-8", "surrogateescape").strip()

    def head(self) -> str | None:
        proc = self.git("rev-parse", "-q", "--verify", "HEAD^{commit}", check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def busy(self) -> str | None:
        """Why committing now would step on the person's git work (a merge, a rebase...), or None."""
        for name, what in (("MERGE_HEAD", "a merge"), ("rebase-merge", "a rebase"), ("rebase-apply", "a rebase"),
                           ("CHERRY_PICK_HEAD", "a cherry-pick"), ("REVERT_HEAD", "a revert"),
                           ("BISECT_LOG", "a bisect")):
            if (self.git_dir / name).exists():
                return f"{what} is in progress in {self.root}; finish or abort it (git -C {self.root} status)"
        return None

    def blob(self, rev: str, path: str) -> bytes | None:
        """The file ``path`` at ``rev``, or None when it did not exist there."""
        proc = self.git("cat-file", "blob", f"{rev}:{path}", check=False)
        return proc.stdout if proc.returncode == 0 else None

    def blobs(self, specs: Iterable[str]) -> dict[str, bytes | None]:
        """``rev:path`` → contents (None when missing), in one ``cat-file --batch``."""
        specs = list(dict.fromkeys(specs))
        if not specs:
            return {}
        out = self.git("cat-file", "--batch", input="".join(s + "\n" for s in specs).encode()).stdout
        found: dict[str, bytes | None] = {}
        pos = 0
        for spec in specs:
            end = out.index(b"\n", pos)
            header = out[pos:end].decode()
            pos = end + 1
            if header.endswith(" missing") or header.endswith(" ambiguous"):
                found[spec] = None
                continue
            size = int(header.rsplit(" ", 1)[1])
            found[spec] = out[pos : pos + size]
            pos += size + 1
        return found

    def status(self, paths: Iterable[str] = ()) -> dict[str, str]:
        """Path → two-letter porcelain status (``" M"``: changed in the work tree; ``"M "``: staged;
        ``"??"``: untracked) for every changed path (under ``paths``)."""
        args = ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"]
        out = self.git(*args, "--", *paths).stdout.decode("utf-8", "surrogateescape")
        found: dict[str, str] = {}
        for item in out.split("\0"):
            if len(item) > 3:
                found[item[3:]] = item[:2]
        return found

    def log(self, path: str) -> list[LogEntry]:
        """Commits that changed ``path`` (following renames), newest first, each with its path then."""
        fmt = "%x1e%H%x1f%an%x1f%aI%x1f%s"
        out = self.text("log", "--follow", "--name-only", f"--format={fmt}", "--", path)
        entries = []
        for chunk in out.split("\x1e"):
            if not chunk.strip():
                continue
            head, _, names = chunk.partition("\n")
            commit, author, date, subject = head.split("\x1f")
            name = next((n for n in names.splitlines() if n.strip()), path)
            entries.append(LogEntry(commit=commit, author=author, date=date, subject=subject, path=name))
        return entries

    # ------------------------------------------------------------------ writing

    def commit(self, changes: Mapping[str, bytes | None], message: str) -> str | None:
        """Commit ``changes`` (path → contents, None to delete) on top of ``HEAD``; returns the commit,
        or None when the tree would not change. Other files, the person's staged changes and hooks are
        left alone (see the module docstring)."""
        if not changes:
            return None
        self.recover()
        head = self.head()
        self._clean_stage()
        objects = self._write_blobs([d for d in changes.values() if d is not None])
        lines: list[str] = []
        shas = iter(objects)
        for path, data in changes.items():
            lines.append(f"0 {ZERO}\t{path}" if data is None else f"100644 {next(shas)}\t{path}")
        info = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
        temp = self.git_dir / f"distill-index-{os.getpid()}"
        env = {"GIT_INDEX_FILE": str(temp)}
        try:
            self.git("read-tree", *([head] if head else ["--empty"]), env=env)
            self.git("update-index", "--index-info", input=info, env=env)
            tree = self.text("write-tree", env=env)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
        if head and tree == self.text("rev-parse", f"{head}^{{tree}}"):
            return None
        name, email = AUTHOR
        ident = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
                 "GIT_COMMITTER_EMAIL": email}
        commit = self.text("commit-tree", tree, *(["-p", head] if head else []), input=message.encode("utf-8"),
                           env=ident)
        subject = message.splitlines()[0] if message else "distill"
        # Moving HEAD and then the person's index is two steps: a journal lets the next commit finish
        # the second if the process dies between them (``recover``).
        journal = self.git_dir / JOURNAL
        journal.write_bytes(commit.encode() + b"\n" + info)
        # Compare-and-swap: if the person committed meanwhile, this fails and nothing of theirs is lost.
        self.git("update-ref", "-m", f"distill: {subject}", "HEAD", commit, head or ZERO)
        self._sync_index(commit, info)
        journal.unlink()
        return commit

    def recover(self) -> None:
        """Finish a commit a killed process left half done: HEAD moved, the index not yet (see ``commit``)."""
        journal = self.git_dir / JOURNAL
        try:
            commit, _, info = journal.read_bytes().partition(b"\n")
        except FileNotFoundError:
            return
        if self.head() == commit.decode():
            self._sync_index(commit.decode(), info)
        journal.unlink()  # else HEAD never moved: the objects it wrote are unreferenced, and git gc drops them

    def _write_blobs(self, blobs: list[bytes]) -> list[str]:
        """Store ``blobs`` as git objects, straight from a pipe; their ids, in order.

        ``fast-import`` and not ``hash-object``: the latter reads files, so every blob needed a scratch
        file (a creation and a deletion each), which cost more than the hashing on a cold run of 2,000
        notes. git's own ``fastimport.unpackLimit`` (default 100) decides the storage: fewer objects are
        written loose, as ``git add`` would write them; a backlog goes in one pack.
        """
        if not blobs:
            return []
        marks = self.git_dir / f"distill-marks-{os.getpid()}"
        # Blob by blob into the pipe: the stream in one piece would hold every note a second time.
        stream = (b"blob\nmark :%d\ndata %d\n%s\n" % (i, len(data), data) for i, data in enumerate(blobs, 1))
        try:
            _git_fed(self.root, ("fast-import", "--quiet", "--done", f"--export-marks={marks}"),
                     itertools.chain(stream, [b"done\n"]))
            ids = dict(line.split(" ", 1) for line in marks.read_text("ascii").splitlines())
        finally:
            with contextlib.suppress(FileNotFoundError):
                marks.unlink()
        return [ids[f":{i}"] for i in range(1, len(blobs) + 1)]

    def _clean_stage(self) -> None:
        """Remove scratch files, also those of a process that was killed (the caller holds the archive lock)."""
        stage = self.git_dir / "distill-stage"
        if stage.is_dir():
            for file in stage.iterdir():
                file.unlink()
            stage.rmdir()
        for temp in (*self.git_dir.glob("distill-index-*"), *self.git_dir.glob("distill-marks-*")):
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()

    def _sync_index(self, commit: str, info: bytes) -> None:
        """Point the person's index at what was committed for those paths, so ``git status`` shows no
        staged change for them (their other entries stay as they were)."""
        if (self.git_dir / "index").exists():
            self.git("update-index", "--index-info", input=info)
        else:
            self.git("read-tree", commit)  # a repository distill made: its index starts as HEAD
