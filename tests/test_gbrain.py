"""``distill gbrain push|pull`` as a user runs them (issue 21): the installed ``distill`` in a subprocess
with a shell's environment, against the gbrain named by ``GBRAIN_BIN`` (the stand-in in
``tests/gbrain_standin`` unless a real gbrain is given, see ``tests/gbrain_support.py``), a fresh
brain per test. The notes are the eval set's: the shared transcripts and the Hermes fixture
database, distilled with the extractive summariser.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.integrations.gbrain_page import vault_path
from pipeline.notes.frontmatter import edit_frontmatter, load_frontmatter
from pipeline.notes.store import extract_notes
from tests.corpus import build_tree
from tests.gbrain_support import brain_env, call, fresh_brain, run_gbrain
from tests.shell import run_distill

ROOT = Path(__file__).resolve().parent.parent
V31 = ROOT / "fixtures" / "hermes" / "state-v31.db"
PREFIX = "conversations/distill"


@pytest.fixture(scope="module")
def hermes_notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Hermes eval sessions (v31 fixture: lineage, branches, projects) distilled once."""
    home = tmp_path_factory.mktemp("hermes-notes")
    db = home / "state.db"
    shutil.copy(V31, db)
    res = run_distill("--all", "--db", str(db), "--out", str(home / "notes"), "--summarizer", "extractive", home=home)
    assert res.returncode == 0, res.stderr
    return home / "notes"


@pytest.fixture(scope="module")
def eval_notes(tmp_path_factory: pytest.TempPathFactory, hermes_notes: Path) -> Path:
    """Every eval session: the shared transcripts (every format, Chinese included) and the Hermes ones."""
    home = tmp_path_factory.mktemp("eval-notes")
    out = home / "notes"
    shutil.copytree(hermes_notes, out)
    res = run_distill(str(build_tree(home / "transcripts")), "--out", str(out), "--summarizer", "extractive", home=home)
    assert res.returncode == 0, res.stderr
    return out


def _setup(tmp_path: Path, notes: Path) -> tuple[Path, dict[str, str]]:
    out = tmp_path / "notes"
    shutil.copytree(notes, out)
    return out, fresh_brain(tmp_path / "brain")


@pytest.fixture
def setup(tmp_path: Path, hermes_notes: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the Hermes eval notes and a fresh brain, in the test's own folder."""
    return _setup(tmp_path, hermes_notes)


@pytest.fixture
def setup_all(tmp_path: Path, eval_notes: Path) -> tuple[Path, dict[str, str]]:
    """A copy of every eval note and a fresh brain."""
    return _setup(tmp_path, eval_notes)


def distill(tmp: Path, env: dict[str, str], *args: str) -> Any:
    return run_distill(*args, home=tmp, env=env)


def notes_of(out: Path) -> dict[str, Path]:
    """Page slug → note, for every session note."""
    found = {}
    for path in sorted(out.rglob("*.md")):
        if ".distill" in path.parts:
            continue
        meta, _ = load_frontmatter(path.read_text("utf-8"))
        if meta.get("type") == "conversation":
            found[f"{PREFIX}/{path.stem}"] = path
    return found


def meta_of(path: Path) -> dict[str, Any]:
    return load_frontmatter(path.read_text("utf-8"))[0]


def edges(env: dict[str, str], slug: str) -> set[tuple[str, str]]:
    return {(link["to_slug"], link["link_type"]) for link in call(env, "get_links", {"slug": slug})}


def lines(proc: Any, action: str) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith(action)]


# --------------------------------------------------------------------------- push


def test_push_then_read_back_search_links_and_tags(tmp_path: Path, setup_all: tuple[Path, dict[str, str]]) -> None:
    out, env = setup_all
    notes = notes_of(out)
    assert len(notes) >= 20 and any("实现" in slug for slug in notes)  # CJK slugs too
    res = distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert len(lines(res, "created")) == len(notes)
    assert f"{len(notes)} notes: {len(notes)} created, 0 updated, 0 unchanged, 0 failed" in res.stderr
    for slug, path in notes.items():
        meta = meta_of(path)
        page = call(env, "get_page", {"slug": slug})
        assert page["type"] == "conversation" and page["title"] == meta["title"]
        assert page["tags"] == sorted(meta["tags"])
        fm = page["frontmatter"]
        assert fm["session_id"] == meta["id"] and fm["id"] == f"distill-{meta['id']}"
        assert fm["date"] == meta["date"]  # a string, never coerced to a timestamp
        assert page["compiled_truth"].startswith(f"# {meta['title'][:20]}")
    # search finds a note by the words of its title
    slug, path = next((s, p) for s, p in notes.items() if "sqlite" not in s and len(meta_of(p)["title"]) > 12)
    hits = call(env, "search", {"query": meta_of(path)["title"], "limit": 5})
    assert slug in [h["slug"] for h in hits]
    # lineage: the branch's page derives from its parent's; projects have pages and related_to edges
    branch = f"{PREFIX}/2026-11-20-fix-parser-string-unescaping-branch-19f991"
    parent = f"{PREFIX}/2026-11-20-fix-parser-string-unescaping-f2a74d"
    assert {(parent, "derived_from"), (parent, "mentions"), ("projects/parsekit", "related_to")} <= edges(env, branch)
    assert call(env, "get_page", {"slug": "projects/parsekit"})["type"] == "project"
    backlinks = {link["from_slug"] for link in call(env, "get_backlinks", {"slug": "projects/parsekit"})}
    assert {branch, parent} <= backlinks


def test_push_twice_makes_no_new_version(tmp_path: Path, setup_all: tuple[Path, dict[str, str]]) -> None:
    out, env = setup_all
    assert distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out)).returncode == 0
    some = list(notes_of(out).items())[:4]
    for _, path in some:
        path.touch()  # a sync tool touched the file: same text, new mtime
    again = distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert not lines(again, "created") and not lines(again, "updated")
    assert "0 created, 0 updated" in again.stderr
    for slug, _ in some:
        assert call(env, "get_versions", {"slug": slug}) == []
    forced = distill(tmp_path, env, "gbrain", "push", "--out", str(out), "--force", *(str(p) for _, p in some))
    assert forced.returncode == 0 and "0 created, 0 updated, 4 unchanged" in forced.stderr  # gbrain skipped them
    for slug, _ in some:
        assert call(env, "get_versions", {"slug": slug}) == []


def test_changed_note_makes_one_version_and_a_removed_tag_leaves_gbrain(
        tmp_path: Path, setup: tuple[Path, dict[str, str]]) -> None:
    out, env = setup
    assert distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out)).returncode == 0
    slug, path = next((s, p) for s, p in notes_of(out).items() if len(meta_of(p)["tags"]) >= 3)
    dropped = meta_of(path)["tags"][-1]
    text = edit_frontmatter(path.read_text("utf-8"), {"tags": meta_of(path)["tags"][:-1]})
    path.write_text(text.rstrip("\n") + "\n\nChecked again on Monday: still fine.\n", "utf-8")
    dry = distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out), "--dry-run")
    assert dry.returncode == 0 and lines(dry, "would-update") == [f"would-update {slug}  (-tag {dropped})"]
    res = distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert lines(res, "updated") == [f"updated      {slug}  (-tag {dropped}; version 2)"]
    assert len(call(env, "get_versions", {"slug": slug})) == 1
    assert dropped not in call(env, "get_tags", {"slug": slug})
    assert "Checked again on Monday" in call(env, "get_page", {"slug": slug})["compiled_truth"]


def test_a_lost_push_state_makes_no_versions(tmp_path: Path, setup: tuple[Path, dict[str, str]]) -> None:
    """A push that died after gbrain wrote but before the state did: the next one resumes cleanly."""
    out, env = setup
    assert distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out)).returncode == 0
    state = out / ".distill" / "gbrain.db"
    con = sqlite3.connect(state)
    con.execute("DELETE FROM pages WHERE rowid % 2 = 0")  # half the rows never made it
    con.commit()
    con.close()
    res = distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert not lines(res, "created") and not lines(res, "updated")
    for slug in list(notes_of(out))[:6]:
        assert call(env, "get_versions", {"slug": slug}) == []


def test_dry_run_sends_nothing_and_a_persons_own_notes_are_left_alone(
        tmp_path: Path, setup: tuple[Path, dict[str, str]]) -> None:
    out, env = setup
    (out / "Welcome.md").write_text("# Welcome\n\nMy own note in the vault.\n")  # --out inside a vault
    (out / "ideas").mkdir()
    (out / "ideas" / "later.md").write_text("---\ntags: [idea]\n---\n\nSome day.\n")
    res = distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out), "--dry-run")
    assert res.returncode == 0, res.stderr
    assert len(lines(res, "would-create")) == len(notes_of(out)) == len(res.stdout.splitlines())
    assert call(env, "list_pages", {}) == []
    res = distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out))
    assert res.returncode == 0 and len(lines(res, "created")) == len(notes_of(out)), res.stderr
    named = distill(tmp_path, env, "gbrain", "push", "Welcome.md", "--out", str(out))
    assert named.returncode == 2 and "Welcome.md: not a distill session note" in named.stderr


def test_since_and_ids_select_notes_and_the_alias_works(tmp_path: Path, setup: tuple[Path, dict[str, str]]) -> None:
    out, env = setup
    notes = notes_of(out)
    path = notes[f"{PREFIX}/2026-11-23-release-checklist-d039b9"]
    one = distill(tmp_path, env, "push", "--to", "gbrain", "20261123_171935_d039b9", "--out", str(out))
    assert one.returncode == 0, one.stderr
    assert lines(one, "created") == [f"created      {PREFIX}/{path.stem}  (version 1)"]
    old = datetime(2026, 11, 21, tzinfo=UTC).timestamp()
    for note in notes.values():
        os.utime(note, (old, old))  # written long ago...
    refactor = notes[f"{PREFIX}/2026-11-20-refactor-cli-into-commands-package-b12aa1"]
    fix = notes[f"{PREFIX}/2026-11-20-fix-parser-string-unescaping-f2a74d"]
    fix.touch()  # ...but this one was edited just now
    since = distill(tmp_path, env, "gbrain", "push", "--since", "2026-11-22", "--out", str(out), "--dry-run")
    assert since.returncode == 0, since.stderr
    chosen = {line.split()[1] for line in since.stdout.splitlines()}
    assert {f"{PREFIX}/{path.stem}", f"{PREFIX}/{fix.stem}"} <= chosen  # active since, or changed since
    assert f"{PREFIX}/{refactor.stem}" not in chosen


def test_mcp_transport_makes_the_same_pages_and_edges(tmp_path: Path, setup_all: tuple[Path, dict[str, str]]) -> None:
    out, cli_env = setup_all
    mcp_env = fresh_brain(tmp_path / "brain-mcp")
    shutil.copytree(out, tmp_path / "notes-mcp")
    assert distill(tmp_path, cli_env, "gbrain", "push", "--all", "--out", str(out)).returncode == 0
    res = distill(tmp_path, mcp_env, "gbrain", "push", "--all", "--transport", "mcp", "--out", str(tmp_path / "notes-mcp"))
    assert res.returncode == 0, res.stderr
    assert "→ gbrain (mcp," in res.stderr
    slugs = [*notes_of(out), "projects/parsekit"]
    for slug in slugs:
        a, b = call(cli_env, "get_page", {"slug": slug}), call(mcp_env, "get_page", {"slug": slug})
        assert (a["compiled_truth"], a["tags"], a["frontmatter"]) == (b["compiled_truth"], b["tags"], b["frontmatter"])
        assert edges(cli_env, slug) == edges(mcp_env, slug), slug
    again = distill(tmp_path, mcp_env, "gbrain", "push", "--all", "--transport", "mcp", "--out", str(tmp_path / "notes-mcp"))
    assert again.returncode == 0 and "0 created, 0 updated" in again.stderr
    slug = f"{PREFIX}/2026-11-23-release-checklist-d039b9"
    _edit_in_gbrain(mcp_env, slug, _person_edit)
    pulled = distill(tmp_path, mcp_env, "gbrain", "pull", slug, "--transport", "mcp", "--out", str(tmp_path / "notes-mcp"))
    assert pulled.returncode == 0 and lines(pulled, "updated"), pulled.stderr


def test_a_page_too_big_for_one_argument_goes_through_stdin(tmp_path: Path, setup: tuple[Path, dict[str, str]]) -> None:
    out, env = setup
    slug, path = next(iter(notes_of(out).items()))
    long = "\n\n".join(f"Paragraph {i}: " + "a note a person kept adding to. " * 12 for i in range(500))
    path.write_text(path.read_text("utf-8").rstrip("\n") + "\n\n" + long + "\n", "utf-8")
    assert len(path.read_bytes()) > 150_000
    res = distill(tmp_path, env, "gbrain", "push", str(path), "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "Paragraph 499:" in call(env, "get_page", {"slug": slug})["compiled_truth"]


# --------------------------------------------------------------------------- pull


def _edit_in_gbrain(env: dict[str, str], slug: str, edit: Any) -> None:
    page = call(env, "get_page", {"slug": slug, "include_content": True})
    call(env, "put_page", {"slug": slug, "content": edit(page["content"])})


def _person_edit(text: str) -> str:
    text = text.replace("\ntags:\n", "\ntags:\n  - reviewed\n", 1)  # `tags`, not `distill_tags`
    text = text.replace("\n## Summary", "\nA remark a person added to the goal in gbrain.\n\n## Summary", 1)
    return text.rstrip("\n") + "\n\nTheir closing thought, written in gbrain.\n"


def test_edit_in_gbrain_then_pull(tmp_path: Path, setup: tuple[Path, dict[str, str]]) -> None:
    out, env = setup
    assert distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out)).returncode == 0
    slug = f"{PREFIX}/2026-11-23-release-checklist-d039b9"
    path = notes_of(out)[slug]
    before = path.read_text("utf-8")
    _edit_in_gbrain(env, slug, _person_edit)
    res = distill(tmp_path, env, "gbrain", "pull", slug, "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert lines(res, "updated") == [f"updated      {path.relative_to(out)} ← {slug}  "
                                     "(1 added line(s) moved under Notes, +tag reviewed)"]
    after = path.read_text("utf-8")
    meta_before, _ = load_frontmatter(before)
    meta_after, body_after = load_frontmatter(after)
    assert meta_after["tags"] == [*meta_before["tags"], "reviewed"]
    assert meta_after["version"] == meta_before["version"] + 1  # the person's edit is a content version
    assert ({k: v for k, v in meta_after.items() if k not in ("tags", "version")}
            == {k: v for k, v in meta_before.items() if k not in ("tags", "version")})
    notes = extract_notes(body_after)
    assert "A remark a person added to the goal in gbrain." in notes
    assert "Their closing thought, written in gbrain." in notes
    assert body_after.count("A remark a person added") == 1  # moved, not copied
    # The frontmatter's bytes are kept but for the version and the tags list (its last key).
    v = meta_before["version"]
    assert before.split("\n---\n", 1)[0].replace(f"\nversion: {v}\n", f"\nversion: {v + 1}\n") in after
    again = distill(tmp_path, env, "gbrain", "pull", slug, "--out", str(out))
    assert again.returncode == 0 and lines(again, "unchanged")
    # a re-run of distill keeps what came from gbrain (Notes and the tag survive a re-render)
    rerun = run_distill("--all", "--db", str(_db(tmp_path)), "--out", str(out), "--summarizer", "extractive",
                        "--force", home=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    kept = path.read_text("utf-8")
    assert "Their closing thought" in extract_notes(load_frontmatter(kept)[1]) and "reviewed" in meta_of(path)["tags"]


def _db(tmp_path: Path) -> Path:
    db = tmp_path / "state.db"
    if not db.exists():
        shutil.copy(V31, db)
    return db


def test_a_note_edited_here_and_in_gbrain_is_a_conflict(tmp_path: Path, setup: tuple[Path, dict[str, str]]) -> None:
    out, env = setup
    assert distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out)).returncode == 0
    slug = f"{PREFIX}/2026-11-23-release-checklist-d039b9"
    path = notes_of(out)[slug]
    path.write_text(path.read_text("utf-8").rstrip("\n") + "\n\nMy local remark.\n", "utf-8")
    local = path.read_text("utf-8")
    _edit_in_gbrain(env, slug, _person_edit)
    res = distill(tmp_path, env, "gbrain", "pull", slug, "--out", str(out))
    assert res.returncode == 1
    [line] = lines(res, "conflict")
    assert "changed here and in gbrain since the last push; nothing was overwritten" in line
    assert f"distill gbrain pull {slug} --theirs" in line
    assert path.read_text("utf-8") == local
    theirs = out / ".distill" / "gbrain" / "conflicts" / f"{path.relative_to(out).as_posix()[:-3].replace('/', '__')}.gbrain.md"
    assert "Their closing thought, written in gbrain." in theirs.read_text("utf-8")
    taken = distill(tmp_path, env, "gbrain", "pull", slug, "--out", str(out), "--theirs")
    assert taken.returncode == 0, taken.stderr
    assert "Their closing thought" in path.read_text("utf-8")
    assert "My local remark." in theirs.with_name(theirs.name.replace(".gbrain.md", ".local.md")).read_text("utf-8")


def test_delete_in_gbrain_and_restore(tmp_path: Path, setup: tuple[Path, dict[str, str]]) -> None:
    out, env = setup
    assert distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out)).returncode == 0
    slug = f"{PREFIX}/2026-11-23-release-checklist-d039b9"
    call(env, "delete_page", {"slug": slug})
    gone = distill(tmp_path, env, "gbrain", "pull", slug, "--out", str(out))
    assert gone.returncode == 2
    assert gone.stderr.strip() == (f"Error: {slug}: not in gbrain (a soft-deleted page comes back with "
                                   f"`gbrain restore {slug}`)")
    assert distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out)).returncode == 0  # no resurrection
    assert call(env, "restore_page", {"slug": slug})["status"] == "restored"
    back = distill(tmp_path, env, "gbrain", "pull", slug, "--out", str(out))
    assert back.returncode == 0 and lines(back, "unchanged")
    assert call(env, "get_versions", {"slug": slug}) == []


def test_pull_brings_back_lost_notes_and_foreign_pages(tmp_path: Path, setup: tuple[Path, dict[str, str]]) -> None:
    out, env = setup
    assert distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out)).returncode == 0
    slug = f"{PREFIX}/2026-11-23-release-checklist-d039b9"
    path = notes_of(out)[slug]
    original = meta_of(path)
    path.unlink()
    (out / ".distill" / "gbrain.db").unlink()  # another machine: no push state either
    call(env, "put_page", {"slug": "concepts/release-trains", "content":
                           "---\ntype: concept\ntitle: Release trains\ntags: [process]\n---\n\nShip on a schedule; "
                           "see [[conversations/distill/2026-11-23-release-checklist-d039b9]].\n"})
    # The spelling, `distill pull --from gbrain`, is `distill gbrain pull`.
    res = distill(tmp_path, env, "pull", "--from", "gbrain", "--query", "release", "--out", str(out))
    assert res.returncode == 0, res.stderr
    restored = out / vault_path(path.stem)
    assert restored == path and path.is_file()
    meta = meta_of(path)
    assert meta["id"] == original["id"] and meta["date"] == original["date"] and "session_id" not in meta
    assert "\ndate: 2026-11-23\n" in path.read_text("utf-8")  # unquoted again: an Obsidian date
    foreign = out / "gbrain" / "concepts" / "release-trains.md"
    assert "[[2026/11/2026-11-23-release-checklist-d039b9]]" in foreign.read_text("utf-8")
    again = distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out))
    assert again.returncode == 0 and not lines(again, "created") and not lines(again, "updated")


# --------------------------------------------------------------------------- errors and help


def test_errors_are_one_line_naming_the_next_step(tmp_path: Path, setup: tuple[Path, dict[str, str]]) -> None:
    out, env = setup
    no_gbrain = {k: v for k, v in env.items() if k != "GBRAIN_BIN"}
    res = run_distill("gbrain", "push", "--all", "--out", str(out), home=tmp_path, env=no_gbrain)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("Error: gbrain not found") and "GBRAIN_BIN" in res.stderr
    empty = brain_env(tmp_path / "no-brain")
    res = run_distill("gbrain", "push", "--all", "--out", str(out), home=tmp_path, env=empty)
    assert res.returncode == 2 and "gbrain init --pglite" in res.stderr and "Traceback" not in res.stderr
    for args, words in [
        (["gbrain", "push", "nosuchsession"], "nosuchsession: no note with that session id"),
        (["gbrain", "push"], "name the notes to push"),
        (["gbrain", "push", "--all", "--prefix", "Bad Prefix/"], "--prefix 'Bad Prefix/'"),
        (["gbrain", "push", "--all", "--transport", "http"], "--transport 'http': use cli or mcp"),
        (["push", "--to", "notion", "--all"], "--to 'notion': distill pushes to gbrain only"),
        (["gbrain", "pull"], "name the pages to pull"),
    ]:
        res = run_distill(*args, "--out", str(out), home=tmp_path, env=env)
        assert res.returncode == 2 and res.stderr.startswith("Error: ") and words in res.stderr, (args, res.stderr)
        assert res.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [["gbrain", "push"], ["gbrain", "pull"], ["push"]])
def test_commands_have_help_with_an_example(tmp_path: Path, args: list[str]) -> None:
    res = run_distill(*args, "--help", home=tmp_path)
    assert res.returncode == 0 and "Example" in res.stdout


def test_json_report(tmp_path: Path, setup: tuple[Path, dict[str, str]]) -> None:
    out, env = setup
    res = distill(tmp_path, env, "gbrain", "push", "--all", "--out", str(out), "--json")
    report = json.loads(res.stdout)
    assert report["transport"] == "cli" and {i["action"] for i in report["items"]} == {"created"}
    assert report["brain"] == str((Path(env["GBRAIN_HOME"]) / ".gbrain").resolve())
    assert run_gbrain(env, "call", "get_page", json.dumps({"slug": report["items"][0]["slug"]})).returncode == 0
