"""``Repo.commit`` writes the same objects whichever way its blobs go in, read back by the real git.

Blobs go in through ``git fast-import``, from a pipe: fewer than git's ``fastimport.unpackLimit``
(default 100) as loose objects, more in one pack. Either way they must have the ids ``git hash-object``
gives, leave nothing in the git dir but git's own files, and keep the repository valid (``git fsck``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pipeline.archive.git import Repo

#: git's default ``fastimport.unpackLimit``.
UNPACK_LIMIT = 100


def _git(repo: Path, *args: str, input: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True, check=True).stdout.decode().strip()


def _objects(repo: Path) -> dict[str, int]:
    counts = dict(line.split(": ") for line in _git(repo, "count-objects", "-v").splitlines())
    return {k: int(v) for k, v in counts.items() if k in ("count", "packs")}


@pytest.mark.parametrize("n", [3, UNPACK_LIMIT + 20])
def test_a_commit_stores_every_file_as_git_itself_would(tmp_path: Path, n: int) -> None:
    repo = Repo.init(tmp_path)
    # Text with the stream's own syntax in it ("data 5", "blob", a bare "done" line), an empty file,
    # bytes that are no UTF-8 and no trailing newline: the pack stream is length-prefixed, so none of it
    # may end a blob early.
    changes: dict[str, bytes | None] = {
        f"notes/{i:04d}.md": (b"---\ntitle: n%d\n---\n\nblob\ndata 5\ndone\n" % i if i % 3 else b"\xff\x00done %d" % i)
        for i in range(n)}
    changes["empty.md"] = b""
    commit = repo.commit(changes, "distill: test\n")
    assert commit is not None
    for path, data in changes.items():
        assert _git(tmp_path, "rev-parse", f"HEAD:{path}") == _git(tmp_path, "hash-object", "--stdin", input=data)
    assert subprocess.run(["git", "fsck", "--strict"], cwd=tmp_path, capture_output=True).returncode == 0
    objects = _objects(tmp_path)
    if n + 1 >= UNPACK_LIMIT:
        assert objects["packs"] == 1  # the blobs; the trees and the commit are loose, as write-tree makes them
        assert objects["count"] < 10
    else:
        assert objects["packs"] == 0 and objects["count"] >= n
    leftovers = [p.name for p in (tmp_path / ".git").iterdir() if p.name.startswith("distill-")]
    assert leftovers == []
    # a second commit that changes one of them and deletes another builds on the first
    first = next(iter(changes))
    again = repo.commit({first: b"changed\n", "empty.md": None}, "distill: again\n")
    assert _git(tmp_path, "show", f"HEAD:{first}") == "changed"
    assert _git(tmp_path, "rev-parse", "HEAD^") == commit and again == _git(tmp_path, "rev-parse", "HEAD")
    assert "empty.md" not in _git(tmp_path, "ls-tree", "-r", "--name-only", "HEAD").splitlines()


def test_a_stream_git_refuses_is_an_error_naming_git_and_leaves_no_process(tmp_path: Path) -> None:
    from pipeline.archive.errors import GitError
    from pipeline.archive.git import _git_fed

    Repo.init(tmp_path)
    # git stops reading at the bad command; the rest of a large input must not hang on a full pipe
    with pytest.raises(GitError, match="git fast-import failed"):
        _git_fed(tmp_path, ("fast-import", "--quiet"), [b"no such command\n", b"x" * 8_000_000])
    assert [p for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == os.getpid()] == []


def _parent(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
