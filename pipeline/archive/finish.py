"""What a run does to the archive after writing its notes: links, then one commit.

Called by ``pipeline.run.runner.run`` once the note index is saved. It never fails the run: the
notes are written and are the truth, so a link or commit that cannot be made now is reported
and made by the next run (``pipeline.archive.versions.pending`` finds distill's uncommitted changes).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pipeline.errors import DistillError


class Finished(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    commit: str | None = None
    linked: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()
    info: tuple[str, ...] = ()  # ``Linked.info``


def finish_run(out: Path, written: Sequence[str], *, git: bool = True, link_limit: int | None = -1,
               subject: str | None = None) -> Finished:
    """Link the notes the run wrote (paths relative to ``out``) and commit everything distill changed.

    ``link_limit``: how many of them get related links (-1: the default cap, None: all).
    """
    from pipeline.archive.links import Linked, link_run
    from pipeline.archive.vectors import embedder_for
    from pipeline.archive.versions import checkpoint

    notices: list[str] = []
    linked = Linked()
    if git:
        # Notes a killed run wrote are "unchanged" to this one, which would leave them unlinked for good.
        written = [*written, *_unfinished(out, written)]
    if written:
        try:
            kwargs = {} if link_limit == -1 else {"limit": link_limit}
            linked = link_run(out, written, embedder=lambda: embedder_for(out), **kwargs)
        except (DistillError, OSError) as exc:
            notices.append(f"links not updated: {exc}; the next run updates them")
    commit = None
    if git:
        try:
            labels = _labels(out, [*written, *linked.notes])
            done = checkpoint(out, [*written, *linked.notes, *linked.projects], labels, subject=subject)
            commit = done.commit
            notices += done.notices
        except (DistillError, OSError) as exc:
            notices.append(f"not committed: {exc}; the next run commits the notes")
    notices = [*linked.notices, *notices]
    return Finished(commit=commit, linked=linked.notes, projects=linked.projects, notices=tuple(notices),
                    info=linked.info)


def ensure_repository(out: Path) -> None:
    """Make an existing output folder a repository before a run writes into it.

    Then every note a run writes is a change git sees, so if the run is killed before its link pass
    and commit, the next run finds those notes (``_unfinished``) instead of calling them unchanged.
    A folder that does not exist yet (a first run) or that sits inside another repository is left
    alone: ``checkpoint`` creates or declines the repository when the run ends, as before.
    """
    from pipeline.archive.git import Repo, toplevel

    out = Path(out)
    try:
        if out.is_dir() and not (out / ".git").exists() and toplevel(out) is None:
            Repo.init(out)
    except (DistillError, OSError):
        pass  # the commit step reports what is wrong with the repository


def _unfinished(out: Path, written: Sequence[str]) -> list[str]:
    """Session notes distill changed but never committed: what an interrupted run left to link."""
    from pipeline.archive.git import Repo
    from pipeline.archive.versions import pending

    try:
        repo = Repo.find(out)
        if repo is None or repo.busy():
            return []
        return [p for p in pending(repo, repo.status(), written) if not p.startswith(("projects/", "skills/"))]
    except (DistillError, OSError):
        return []  # the commit step reports what is wrong with the repository


def relink(out: Path) -> Finished:
    """``distill index --links``: lineage, related and project links for every note, one commit if versioned."""
    from pipeline.archive.git import Repo
    from pipeline.archive.index import open_index

    index, _ = open_index(out)
    try:
        paths = [r["path"] for r in index.query("SELECT path FROM notes WHERE kind = 'session'")]
    finally:
        index.close()
    return finish_run(out, [], git=False) if not paths else _relink(out, paths, Repo.find(out) is not None)


def _relink(out: Path, paths: Sequence[str], versioned: bool) -> Finished:
    from pipeline.archive.links import link_run
    from pipeline.archive.vectors import embedder_for
    from pipeline.archive.versions import checkpoint

    linked = link_run(out, paths, embedder=lambda: embedder_for(out), limit=None, bump=True)
    commit = None
    notices = list(linked.notices)
    if versioned:
        done = checkpoint(out, [*linked.notes, *linked.projects], _labels(out, linked.notes), create=False,
                          subject=f"distill: links for {len(linked.notes)} notes")
        commit, notices = done.commit, [*notices, *done.notices]
    return Finished(commit=commit, linked=linked.notes, projects=linked.projects, notices=tuple(notices))


def _labels(out: Path, paths: Sequence[str]) -> dict[str, str]:
    """Path → "session id  title", for the commit message, from the index (refreshed)."""
    from pipeline.archive.index import open_index

    if not paths:
        return {}
    index, _ = open_index(Path(out))
    try:
        wanted = list(dict.fromkeys(paths))
        found: dict[str, str] = {}
        for i in range(0, len(wanted), 500):
            batch = wanted[i : i + 500]
            for row in index.query(f"SELECT path, id, title FROM notes WHERE kind = 'session' AND path IN "
                                   f"({','.join('?' * len(batch))})", batch):
                found[row["path"]] = f"{row['id']}  {row['title']}"
        return found
    finally:
        index.close()
