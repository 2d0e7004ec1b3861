"""write: atomic, no-clobber, idempotent notes; the user's edits survive; concurrent runs stay sane."""

from __future__ import annotations

import json
import multiprocessing
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import frontmatter
import pytest

from pipeline.errors import OutputError, SessionError
from pipeline.models import Facts, Note, Phase, Session, SessionSummary
from pipeline.notes.frontmatter import load_frontmatter
from pipeline.notes.render import render_note
from pipeline.notes.store import INDEX_FILE, META_DIR, NoteStore, extract_notes

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
SID = "20261120_080000_abc123"

HOSTILE_TITLES = [
    "Fix: the reader: again",
    "She said \"no\" and 'yes'",
    "---",
    "a\nb\n---\nc: d",
    "修复 SQLite 读取器",
    "🚀 ship it",
    "# | ^ [x] [[y]] %%",
    "1234e567",
]


def make_note(
    sid: str = SID,
    title: str = "Fix flaky reader",
    *,
    content_hash: str = "sha256:1",
    language: str = "en",
    tags: tuple[str, ...] = ("sqlite",),
    started: datetime = START,
    goal: str = "Make the reader stable.",
) -> Note:
    session = Session(id=sid, source="cli", title=title, started_at=started)
    summary = SessionSummary(
        goal=goal,
        phases=(Phase(title="Work", done="Did it.", outcome="done"),),
        language=language,
        tags=tags,
    )
    return render_note(session, summary, Facts(), content_hash=content_hash, distilled_at=START)


def parse(path: str | Path) -> frontmatter.Post:
    # As distill reads a note (``load_frontmatter``): dates are the strings written, unquoted or not.
    meta, body = load_frontmatter(Path(path).read_text(encoding="utf-8"))
    return frontmatter.Post(body.strip(), **meta)


def index(out: Path) -> dict[str, Any]:
    return json.loads((out / META_DIR / INDEX_FILE).read_text(encoding="utf-8"))


def all_notes(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*.md") if META_DIR not in p.parts)


def leftovers(out: Path) -> list[Path]:
    return [p for p in out.rglob("*.tmp")]


# --------------------------------------------------------------------------- basics


def test_write_creates_note_and_index(tmp_path: Path) -> None:
    out = tmp_path / "vault" / "distilled"
    store = NoteStore(out)
    note = make_note()
    result = store.write(note)
    assert result.status == "written"
    assert result.path == str(out / note.relpath)
    post = parse(result.path)
    assert post.metadata == note.frontmatter
    assert index(out)[SID] == {"path": note.relpath, "content_hash": "sha256:1", "title": "Fix flaky reader"}
    assert store.path_for(SID) == note.relpath
    assert store.link_for(SID) == "[[2026/11/2026-11-20-fix-flaky-reader-abc123|Fix flaky reader]]"
    assert store.link_for("unknown") == "unknown"
    assert leftovers(out) == []


@pytest.mark.parametrize("title", HOSTILE_TITLES)
def test_hostile_titles_parse_back_identical(tmp_path: Path, title: str) -> None:
    store = NoteStore(tmp_path)
    note = make_note(title=title)
    store.write(note)
    store.write(make_note(title=title, content_hash="sha256:2"))  # the merge path, too
    (path,) = all_notes(tmp_path)
    assert parse(path).metadata == {**note.frontmatter, "content_hash": "sha256:2", "version": 2}
    assert "|" not in store.link_for(SID).split("|", 1)[1].rstrip("]")
    assert store.link_for(SID).count("[[") == 1 and store.link_for(SID).count("]]") == 1


def test_unchanged_is_skipped(tmp_path: Path) -> None:
    store = NoteStore(tmp_path)
    note = make_note()
    path = Path(store.write(note).path or "")
    before = path.stat().st_mtime_ns
    assert store.unchanged(SID, "sha256:1")
    assert not store.unchanged(SID, "sha256:2")
    assert store.write(note).status == "unchanged"
    assert path.stat().st_mtime_ns == before
    # A fresh process (new store) knows from the index alone.
    assert NoteStore(tmp_path).write(note).status == "unchanged"
    assert NoteStore(tmp_path).write(note, force=True).status in ("written", "unchanged")
    path.unlink()
    assert not NoteStore(tmp_path).unchanged(SID, "sha256:1")
    assert NoteStore(tmp_path).write(note).status == "written"


def test_unchanged_trusts_the_file_over_a_stale_index(tmp_path: Path) -> None:
    NoteStore(tmp_path).write(make_note())
    data = index(tmp_path)
    data[SID]["content_hash"] = "stale"
    (tmp_path / META_DIR / INDEX_FILE).write_text(json.dumps(data))
    assert NoteStore(tmp_path).unchanged(SID, "sha256:1")


def test_dry_run_touches_nothing(tmp_path: Path) -> None:
    out = tmp_path / "not-yet"
    store = NoteStore(out, create=False)
    result = store.write(make_note(), dry_run=True)
    assert result.status == "would-write"
    assert not out.exists()
    NoteStore(out).write(make_note())
    assert NoteStore(out, create=False).write(make_note(), dry_run=True).status == "unchanged"
    assert NoteStore(out).write(make_note(content_hash="new"), dry_run=True).status == "would-write"
    assert parse(all_notes(out)[0]).metadata["content_hash"] == "sha256:1"


# --------------------------------------------------------------------------- stability and user edits


def test_path_is_stable_when_title_changes(tmp_path: Path) -> None:
    store = NoteStore(tmp_path)
    first = store.write(make_note(title="Old title"))
    second = NoteStore(tmp_path).write(make_note(title="A new title", content_hash="sha256:2"))
    assert second.path == first.path
    assert len(all_notes(tmp_path)) == 1
    assert parse(second.path or "").metadata["title"] == "A new title"
    assert NoteStore(tmp_path).link_for(SID).endswith("|A new title]]")


def test_path_is_found_without_the_index(tmp_path: Path) -> None:
    first = NoteStore(tmp_path).write(make_note(title="Old title"))
    (tmp_path / META_DIR / INDEX_FILE).unlink()
    store = NoteStore(tmp_path)
    assert store.write(make_note(title="Renamed")).status == "unchanged"  # same hash, found by id
    result = store.write(make_note(title="Renamed", content_hash="sha256:2"))
    assert result.path == first.path
    assert len(all_notes(tmp_path)) == 1


def test_corrupt_index_is_ignored(tmp_path: Path) -> None:
    NoteStore(tmp_path).write(make_note())
    (tmp_path / META_DIR / INDEX_FILE).write_text("{not json")
    store = NoteStore(tmp_path)
    assert store.problems and "index" in store.problems[0]
    assert store.write(make_note()).status == "unchanged"
    store.write(make_note(content_hash="x"))
    assert index(tmp_path)[SID]["content_hash"] == "x"


def test_other_session_with_same_path_is_not_clobbered(tmp_path: Path) -> None:
    store = NoteStore(tmp_path)
    a = store.write(make_note("20261120_080000_abc123"))
    b = store.write(make_note("20261120_090000_abc123"))  # same day, title and short id
    assert a.path != b.path and (b.path or "").endswith("-abc123-2.md")
    assert parse(a.path or "").metadata["id"] == "20261120_080000_abc123"
    assert parse(b.path or "").metadata["id"] == "20261120_090000_abc123"


def test_concurrent_writes_never_share_a_free_path(tmp_path: Path) -> None:
    # Commits run on several threads (pipeline.run.pool): two sessions whose notes would get the
    # same name must not both claim it before either file exists.
    from concurrent.futures import ThreadPoolExecutor

    store = NoteStore(tmp_path)
    sids = [f"20261120_0{h}0000_abc123" for h in range(8, 10)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda sid: store.write(make_note(sid)), sids))
    paths = {r.path for r in results}
    assert len(paths) == len(sids)
    assert {parse(p or "").metadata["id"] for p in paths} == set(sids)


def test_named_like_matches_glob_and_sees_other_writers(tmp_path: Path) -> None:
    import os
    import time

    store = NoteStore(tmp_path / "out")
    folder = tmp_path / "out" / "2026" / "11"
    folder.mkdir(parents=True)
    for name in ("a-abc123.md", "b-abc123-2.md", ".a-abc123.md.x.tmp", "c-abc124.md", "d-abc123.txt"):
        (folder / name).write_text("x")
    assert store._named_like(folder, "abc123") == sorted(folder.glob("*-abc123*.md"))
    assert store._named_like(folder / "missing", "abc123") == []
    # Another process adds a note later: the folder's mtime moves, so the cached listing is not trusted.
    later = time.time_ns() + 5_000_000_000
    (folder / "e-abc123.md").write_text("x")
    os.utime(folder, ns=(later, later))
    assert store._named_like(folder, "abc123") == sorted(folder.glob("*-abc123*.md"))


USER_NOTES = """My own thoughts.

- [x] checked by hand
```sh
## not a heading, code
```

## My subsection

More of mine."""


def test_user_notes_tags_and_keys_survive(tmp_path: Path) -> None:
    store = NoteStore(tmp_path)
    path = Path(store.write(make_note()).path or "")
    post = parse(path)
    post.metadata["tags"] = [*post.metadata["tags"], "my-tag"]
    post.metadata["aliases"] = [*post.metadata["aliases"], "Reader fix"]
    post.metadata["rating"] = 5
    post.metadata["cssclasses"] = ["wide"]
    post.metadata["title"] = "user edit of a generated key"
    post.content = post.content + "\n\n" + USER_NOTES
    path.write_text(frontmatter.dumps(post) + "\n", encoding="utf-8")
    order = list(parse(path).metadata)  # python-frontmatter wrote the keys sorted

    result = store.write(make_note(title="Fix flaky reader v2", content_hash="sha256:2", tags=("wal",)))
    assert result.status == "written" and result.path == str(path)
    new = parse(path)
    # "sqlite" is no longer derived, so it goes; the user's own tag stays.
    assert new.metadata["tags"] == ["distill", "source/cli", "wal", "my-tag"]
    assert new.metadata["distill_tags"] == ["distill", "source/cli", "wal"]
    assert new.metadata["aliases"] == [SID, "Reader fix"]
    assert new.metadata["rating"] == 5 and new.metadata["cssclasses"] == ["wide"]
    assert new.metadata["title"] == "Fix flaky reader v2"
    assert new.metadata["version"] == 2
    assert list(new.metadata) == order  # the user's key order is kept
    assert new.content.endswith("## Notes\n\n" + USER_NOTES)
    assert extract_notes(new.content) == USER_NOTES
    # And again: idempotent, no duplication.
    store.write(make_note(title="Fix flaky reader v2", content_hash="sha256:3", tags=("wal",)))
    assert parse(path).content.count("My own thoughts.") == 1


def test_user_notes_survive_a_language_change(tmp_path: Path) -> None:
    store = NoteStore(tmp_path)
    path = Path(store.write(make_note(language="zh")).path or "")
    text = path.read_text(encoding="utf-8")
    assert text.endswith("## 笔记\n")
    path.write_text(text + "\n我的笔记\n", encoding="utf-8")
    store.write(make_note(language="en", content_hash="sha256:2"))
    body = parse(path).content
    assert body.endswith("## Notes\n\n我的笔记")
    assert "## 笔记" not in body


def test_notes_survive_broken_user_yaml(tmp_path: Path) -> None:
    store = NoteStore(tmp_path)
    path = Path(store.write(make_note()).path or "")
    text = path.read_text(encoding="utf-8").replace("type: conversation", "type: [unclosed", 1)
    path.write_text(text + "\nkeep me\n", encoding="utf-8")
    result = store.write(make_note(content_hash="sha256:2"))
    assert result.problems and "frontmatter" in result.problems[0]
    post = parse(path)
    assert post.metadata["type"] == "conversation"
    assert post.content.endswith("## Notes\n\nkeep me")


# --------------------------------------------------------------------------- failures


def test_crash_during_replace_keeps_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = NoteStore(tmp_path)
    path = Path(store.write(make_note()).path or "")
    before = path.read_bytes()

    def boom(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OutputError, match="No space left on device") as err:
        store.write(make_note(content_hash="sha256:2"))
    assert str(path) in str(err.value)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert not NoteStore(tmp_path).unchanged(SID, "sha256:2")


@pytest.mark.parametrize("create", [True, False])
def test_unwritable_out_dir(tmp_path: Path, create: bool) -> None:
    # Tests run as root, so permissions do not stop writes; a path under a regular file always fails.
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    out = blocker / "sub"
    with pytest.raises(OutputError, match=str(out)):
        NoteStore(out, create=create)


def test_unsafe_relpath_is_refused(tmp_path: Path) -> None:
    store = NoteStore(tmp_path)
    note = make_note().model_copy(update={"relpath": "../escape.md"})
    with pytest.raises(SessionError, match="unsafe note path"):
        store.write(note)
    assert not (tmp_path.parent / "escape.md").exists()


def test_batched_index(tmp_path: Path) -> None:
    with NoteStore(tmp_path, autosave=False) as store:
        for i in range(3):
            store.write(make_note(f"20261120_08000{i}_aaaaa{i}"))
        assert not (tmp_path / META_DIR / INDEX_FILE).exists()
        assert store.path_for("20261120_080000_aaaaa0")  # visible before saving
    assert len(index(tmp_path)) == 3


# --------------------------------------------------------------------------- concurrency


def _worker(out: str, notes: list[Note], barrier: Any, autosave: bool) -> None:
    barrier.wait()
    store = NoteStore(Path(out), autosave=autosave)
    for note in notes:
        store.write(note, force=True)
    store.save_index()


@pytest.mark.parametrize("autosave", [True, False])
def test_two_processes_write_the_same_notes(tmp_path: Path, autosave: bool) -> None:
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs fork")
    ctx = multiprocessing.get_context("fork")
    day = timedelta(days=1)
    notes = [
        make_note(
            f"2026112{i % 10}_0800{i:02d}_c{i:05d}",
            f"Note {i}: ---",
            started=START + i * day,
            goal="g" * 2000,
        )
        for i in range(30)
    ]
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), notes, barrier, autosave)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]

    files = all_notes(tmp_path)
    assert len(files) == len(notes)
    by_id = {n.session_id: n for n in notes}
    for path in files:
        post = parse(path)
        assert post.metadata == by_id[post.metadata["id"]].frontmatter
    data = index(tmp_path)
    assert set(data) == set(by_id)
    assert all((tmp_path / entry["path"]).is_file() for entry in data.values())
    assert leftovers(tmp_path) == []


def test_note_dirs_are_fsynced_once_before_the_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A note's rename is made durable before any index entry can point at it, one fsync per folder."""
    import pipeline.atomic
    import pipeline.notes.store

    events: list[tuple[str, Any]] = []
    real_write, real_sync = pipeline.notes.store.atomic_write_text, pipeline.notes.store.fsync_dirs
    monkeypatch.setattr(pipeline.notes.store, "atomic_write_text",
                        lambda path, text, **kw: (events.append(("write", path.name, kw)), real_write(path, text, **kw)))
    monkeypatch.setattr(pipeline.notes.store, "fsync_dirs",
                        lambda dirs: (events.append(("sync", sorted(dirs))), real_sync(dirs)))
    store = NoteStore(tmp_path / "out", autosave=False)
    for i in range(3):
        store.write(make_note(sid=f"20261120_080000_abc12{i}"))
    assert [e[0] for e in events] == ["write", "write", "write"]
    assert all(e[2] == {"sync_dir": False} for e in events)
    store.save_index()
    kinds = [e[0] for e in events]
    assert kinds == ["write", "write", "write", "sync", "write"]  # fsync the folders, then the index
    synced = events[3][1]
    assert tmp_path / "out" / "2026" / "11" in synced and tmp_path / "out" / "2026" in synced
    assert events[4][1] == INDEX_FILE and events[4][2] == {}


def test_a_durable_batch_renames_only_synced_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every temp's data is fsynced before any of them is renamed, and nothing is left half done."""
    import pipeline.atomic
    from pipeline.atomic import DurableBatch

    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(pipeline.atomic.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(pipeline.atomic.os, "replace",
                        lambda src, dst: (events.append("replace"), real_replace(src, dst))[1])
    old = tmp_path / "a.md"
    old.write_text("old", encoding="utf-8")
    with DurableBatch() as batch:
        st = batch.write(old, b"new a")
        batch.write(tmp_path / "sub" / "b.md", b"new b")
        assert old.read_text(encoding="utf-8") == "old"  # nothing renamed before the commit
    assert events[:2] == ["fsync", "fsync"] and events[2:4] == ["replace", "replace"]
    assert old.read_text(encoding="utf-8") == "new a" and (tmp_path / "sub" / "b.md").read_text(encoding="utf-8") == "new b"
    now = old.stat()
    assert (st.st_mtime_ns, st.st_size, st.st_ino) == (now.st_mtime_ns, now.st_size, now.st_ino)
    assert leftovers(tmp_path) == []

    # An error before the commit (or in it) leaves the old files and no temp.
    with pytest.raises(RuntimeError), DurableBatch() as batch:
        batch.write(old, b"newer")
        raise RuntimeError("a note could not be edited")
    assert old.read_text(encoding="utf-8") == "new a" and leftovers(tmp_path) == []

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pipeline.atomic.os, "fsync", full)
    with pytest.raises(OSError, match="No space"), DurableBatch() as batch:
        batch.write(old, b"newest")
        batch.write(tmp_path / "c.md", b"c")
    assert old.read_text(encoding="utf-8") == "new a" and not (tmp_path / "c.md").exists()
    assert leftovers(tmp_path) == []
