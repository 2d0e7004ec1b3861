"""Everyday use (issue 17), tested the way a user runs it: the installed ``distill`` in a subprocess
with the environment a shell gives (``tests/shell.py``), never the in-process app."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import frontmatter

from tests.shell import run_distill

ROOT = Path(__file__).resolve().parent.parent
V31 = ROOT / "fixtures" / "hermes" / "state-v31.db"
#: 12 logical sessions in the fixture, minus the subagent, cron and tool ones skipped by default.
DEFAULT_NOTES = 9


def _db(tmp_path: Path, fixture: Path = V31) -> Path:
    db = tmp_path / "state.db"
    shutil.copy(fixture, db)
    return db


def _imported(stderr: str, module: str) -> bool:
    """Whether ``PYTHONPROFILEIMPORTTIME`` output on stderr shows ``module`` imported."""
    return any(line.startswith("import time:") and line.split("|")[-1].strip() == module
               for line in stderr.splitlines())


def test_unchanged_rerun_is_answered_from_the_record_in_a_users_shell(tmp_path: Path) -> None:
    """README: an unchanged re-run prints the last report without importing pydantic (~50 ms)."""
    db = _db(tmp_path)
    args = ("--db", str(db), "--all", "--out", str(tmp_path / "notes"), "--summarizer", "extractive")
    env = {"PYTHONPROFILEIMPORTTIME": "1"}  # in both runs, as any variable a user's shell exports
    first = run_distill(*args, home=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    assert _imported(first.stderr, "pydantic")
    records = list((tmp_path / ".hermes" / "distill" / "runs").glob("*.json"))
    assert len(records) == 1
    again = run_distill(*args, home=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    assert not _imported(again.stderr, "pydantic"), "the re-run took the full path, not the record"
    assert f"{DEFAULT_NOTES} selected, 0 written, {DEFAULT_NOTES} unchanged" in again.stderr


def _keys(note: Path) -> list[str]:
    return list(frontmatter.load(note).metadata)


def test_rerender_keeps_the_frontmatter_key_order(tmp_path: Path) -> None:
    db, out = _db(tmp_path), tmp_path / "notes"
    args = ("--db", str(db), "--all", "--out", str(out), "--summarizer", "extractive")
    assert run_distill(*args, home=tmp_path).returncode == 0
    notes = sorted(out.rglob("*.md"))
    first = {note: _keys(note) for note in notes}
    assert all(keys.index("aliases") == 3 for keys in first.values())  # type, id, title, aliases, ...
    note = notes[0]
    post = frontmatter.load(note)
    post["rating"] = 5  # a key of the user's own, kept after the generated ones
    note.write_text(frontmatter.dumps(post) + "\n", "utf-8")
    again = run_distill(*args, "--force", home=tmp_path)
    assert again.returncode == 0, again.stderr
    for path, keys in first.items():
        want = [*keys[:-1], "rating", keys[-1]] if path == note else keys
        assert _keys(path) == want, path


def test_extractive_summary_line_reports_calls_tokens_and_cost(tmp_path: Path) -> None:
    proc = run_distill("--db", str(_db(tmp_path)), "--all", "--summarizer", "extractive", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(rf"{DEFAULT_NOTES} selected, {DEFAULT_NOTES} written, 0 unchanged, 0 skipped, 0 failed "
                        r"\(extractive: 0 model calls, 0 tokens in, 0 out, \$0; [\d.]+s\) → .*",
                        proc.stderr.splitlines()[-1])
    assert "need a summary" not in proc.stderr  # no model, no plan or progress


def test_what_selects_nothing_or_is_mistyped_says_so(tmp_path: Path) -> None:
    db = str(_db(tmp_path))
    quiet_day = run_distill("--db", db, "--since", "yesterday", home=tmp_path)
    assert quiet_day.returncode == 0
    assert re.search(r"no sessions selected \(active since \S+ 00:00; .*\): \S+ has 12 sessions, "
                     r"the newest active 2026-11-23 \d\d:\d\d", quiet_day.stderr), quiet_day.stderr

    def error(*args: str) -> str:
        proc = run_distill(*args, home=tmp_path)
        assert proc.returncode == 2 and proc.stdout == "", proc
        [line] = proc.stderr.splitlines()
        assert line.startswith("Error: ")
        return line

    typo = error("--db", db, "--all", "--source", "clii")
    assert "--source clii" in typo and "cli (7)" in typo and typo.endswith("did you mean --source cli?")
    assert error("--db", db, "skils", "pending").endswith("did you mean `distill skills pending`?")
    assert error("--db", db, "--idle", "2").startswith("Error: --idle '2': not an age")


def test_version(tmp_path: Path) -> None:
    from pipeline import __version__

    proc = run_distill("--version", home=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, f"distill {__version__}\n")


def test_demo_touches_nothing_in_the_hermes_home(tmp_path: Path) -> None:
    from evals.stub_llm_server import StubServer

    work = tmp_path / "work"
    work.mkdir()
    with StubServer(delay=0) as stub:  # a configured model: the demo's summaries are cached too
        env = {"DISTILL_MODEL": "openai/stub", "DISTILL_API_BASE": stub.api_base}
        for _ in range(2):
            proc = run_distill("--demo", home=tmp_path, env=env, cwd=work)
            assert proc.returncode == 0, proc.stderr
        assert stub.calls
    assert len(list((work / "distill-demo").rglob("*.md"))) >= 3
    assert not (tmp_path / ".hermes").exists(), sorted(map(str, (tmp_path / ".hermes").rglob("*")))
