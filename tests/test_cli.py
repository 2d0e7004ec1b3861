"""The ``distill`` command end to end, run the way a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import frontmatter
import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app, main, parse_age, parse_when
from pipeline.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
V31 = ROOT / "fixtures" / "hermes" / "state-v31.db"
V22 = ROOT / "fixtures" / "hermes" / "state-v22.db"
#: 12 logical sessions in each real fixture, minus the subagent, cron and tool ones skipped by default.
DEFAULT_NOTES = 9
runner = CliRunner()


def invoke(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(params=[V31, V22], ids=["v31", "v22"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    dst = tmp_path / "state.db"
    shutil.copy(request.param, dst)
    return dst


def notes(out: Path) -> list[Path]:
    """Session notes: not distill's own folder, nor the project index notes the link pass writes."""
    return sorted(p for p in out.rglob("*.md") if ".distill" not in p.parts and p.relative_to(out).parts[0] != "projects")


def test_all_then_rerun_rewrites_nothing(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stdout, stderr = invoke("--db", db, "--all", "--out", out)
    assert code == 0, stderr
    files = notes(out)
    assert len(files) == DEFAULT_NOTES
    for f in files:
        post = frontmatter.load(f)
        assert {"id", "title", "source", "started_at", "message_count", "tags", "content_hash"} <= set(post.metadata)
        text = f.read_text("utf-8")
        assert "[CONTEXT COMPACTION" not in text
        assert "Review the conversation above" not in text
        rel = f.relative_to(out).as_posix()
        assert not any(ch in rel for ch in '#|^:[]'), rel
    mtimes = {f: f.stat().st_mtime_ns for f in files}
    code, stdout, _ = invoke("--db", db, "--all", "--out", out, "--json")
    assert code == 0
    report = json.loads(stdout)
    assert report["written"] == 0 and report["unchanged"] == DEFAULT_NOTES
    assert {f: f.stat().st_mtime_ns for f in notes(out)} == mtimes


def test_grown_session_is_rerendered_and_user_notes_survive(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    shutil.copy(V31, db)
    out = tmp_path / "out"
    assert invoke("--db", db, "20261123_164640_84ac8f", "--out", out)[0] == 0
    [note] = notes(out)
    note.write_text(note.read_text("utf-8").rstrip() + "\n\nmy own remark that must survive\n", "utf-8")
    post = frontmatter.load(note)
    post["tags"] = [*post["tags"], "my-tag"]
    note.write_text(frontmatter.dumps(post) + "\n", "utf-8")
    con = sqlite3.connect(db)  # stands in for Hermes appending a turn
    con.execute(
        "INSERT INTO messages(session_id, role, content, timestamp, active) VALUES (?, 'user', ?, ?, 1)",
        ("20261123_164640_84ac8f", "and what about git restore?", 1795452600.0),
    )
    con.commit()
    con.close()
    code, stdout, _ = invoke("--db", db, "20261123_164640_84ac8f", "--out", out)
    assert code == 0 and "written" in stdout
    [again] = notes(out)
    text = again.read_text("utf-8")
    assert "my own remark that must survive" in text
    assert "my-tag" in frontmatter.load(again)["tags"]


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stdout, _ = invoke("--db", V31, "--all", "--out", out, "--dry-run")
    assert code == 0
    assert stdout.count("would-write") == DEFAULT_NOTES
    assert notes(out) == [] if out.exists() else True


def test_selection_by_id_title_source_and_since(tmp_path: Path) -> None:
    out = tmp_path / "o1"
    assert invoke("--db", V31, "Release checklist", "--out", out)[0] == 0
    assert len(notes(out)) == 1
    out = tmp_path / "o2"
    assert invoke("--db", V31, "--all", "--source", "telegram", "--out", out)[0] == 0
    assert len(notes(out)) == 2
    out = tmp_path / "o3"
    code, _, _ = invoke("--db", V31, "--since", "yesterday", "--out", out)
    assert code == 0 and notes(out) == []  # the fixture's sessions are from November
    out = tmp_path / "o4"
    assert invoke("--db", V31, "--all", "--source", "cron", "--out", out)[0] == 0
    assert len(notes(out)) == 1


def test_explicit_id_of_a_skipped_source_says_why(tmp_path: Path) -> None:
    code, stdout, _ = invoke("--db", V31, "20261123_113656_c83b62", "--out", tmp_path / "o", "--json")
    assert code == 0
    notices = json.loads(stdout)["notices"]
    assert any("its source 'tool' is filtered out; pass --source tool" in n for n in notices), notices
    assert not (tmp_path / "o").exists() or notes(tmp_path / "o") == []


def test_default_db_comes_from_hermes_home_and_profile(hermes_home: Path) -> None:
    shutil.copy(V31, hermes_home / "state.db")
    assert invoke("20261123_164640_84ac8f")[0] == 0
    assert len(notes(hermes_home / "distilled")) == 1
    prof = hermes_home / "profiles" / "work"
    prof.mkdir(parents=True)
    shutil.copy(V22, prof / "state.db")
    assert invoke("--profile", "work", "20261123_164640_84ac8f")[0] == 0
    assert len(notes(prof / "distilled")) == 1
    # A mistyped profile names the ones there are, instead of a missing state.db.
    code, _, stderr = invoke("--profile", "wrok", "--all")
    assert code == 2 and stderr == (f"Error: --profile wrok: no such Hermes profile ({hermes_home / 'profiles' / 'wrok'} "
                                    "does not exist); profiles with a state.db: work\n")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "no such file"),
        ("text", "not an SQLite database"),
        ("foreign", "no Hermes 'sessions'/'messages' tables"),
        ("unknown-id", "no session with that id or exact title"),
        ("bad-out", "not a directory"),
        ("nothing", "say which sessions"),
        ("bad-since", "--since"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path: Path, setup: str, message: str) -> None:
    db, out, extra = tmp_path / "state.db", tmp_path / "out", ["--all"]
    shutil.copy(V31, db)
    if setup == "missing":
        db = tmp_path / "nope.db"
    elif setup == "text":
        db.write_text("not a database")
    elif setup == "foreign":
        db.unlink()
        sqlite3.connect(db).execute("CREATE TABLE t(x)").connection.commit()
    elif setup == "unknown-id":
        extra = ["no-such-session"]
    elif setup == "bad-out":
        out.write_text("a file")
    elif setup == "nothing":
        extra = []
    elif setup == "bad-since":
        extra = ["--since", "last tuesdayish"]
    code, stdout, stderr = invoke("--db", db, "--out", out, *extra)
    assert code == 2
    assert stderr.startswith("Error: ") and message in stderr and stderr.count("\n") == 1
    assert "Traceback" not in stderr + stdout
    assert not out.is_dir() or notes(out) == []


def test_help_for_main_and_tools() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "distill --since yesterday" in result.stdout
    for flag in ("--db", "--profile", "--out", "--all", "--since", "--source", "--exclude-source",
                 "--dry-run", "--force", "--json", "--quiet", "--demo", "--idle", "--jobs"):
        assert flag in result.stdout


def test_main_dispatches_tool_names(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "Distill Hermes sessions" in capsys.readouterr().out


def test_parse_when_and_age() -> None:
    from datetime import datetime

    now = datetime(2026, 12, 2, 15, 30).astimezone()
    assert parse_when("yesterday", now).isoformat().startswith("2026-12-01T00:00:00")
    assert parse_when("today", now).hour == 0
    assert (now - parse_when("6h", now)).total_seconds() == 6 * 3600
    assert parse_when("2026-11-30", now).day == 30
    assert parse_age("90m") == 5400 and parse_age("1w") == 604800
    with pytest.raises(InputError):
        parse_age("soon")


def test_console_script_and_demo(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("distill")
    if not exe.exists():
        pytest.skip("the distill console script is not installed in this environment")
    env = {**os.environ, "HERMES_HOME": str(tmp_path / "home")}
    proc = subprocess.run([str(exe), "--demo", "--out", str(tmp_path / "demo")], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert len(notes(tmp_path / "demo")) >= 3
    assert not (tmp_path / "home" / "distilled").exists()


def test_an_aider_run_that_only_started_gets_no_note(tmp_path: Path) -> None:
    """A new set's aider history held nine runs, one of them only aider's launch line (the user quit at once): it got
    a note titled "(no request recorded)". A run where nobody said anything is skipped, and the report says why."""
    exe = Path(sys.executable).with_name("distill")
    if not exe.exists():
        pytest.skip("the distill console script is not installed in this environment")
    history = tmp_path / ".aider.chat.history.md"
    history.write_text("# aider chat started at 2026-07-03 09:00:00\n\n> /home/b/.local/bin/aider road.cs\n\n"
                       "# aider chat started at 2026-07-03 09:05:00\n\n> /home/b/.local/bin/aider road.cs\n\n"
                       "#### /ask why do no roads appear?  \n\nThe chunks are never added to the scene tree.\n\n"
                       "> Tokens: 1.4k sent, 1.0k received.\n", encoding="utf-8")
    env = {**os.environ, "HERMES_HOME": str(tmp_path / "home")}
    proc = subprocess.run([str(exe), str(history), "--out", str(tmp_path / "notes"), "--no-git"], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    names = [p.name for p in notes(tmp_path / "notes")]
    assert len(names) == 1 and names[0].startswith("2026-07-03-why-do-no-roads-appear"), names
    assert "no one said anything" in proc.stdout + proc.stderr


def test_two_runs_at_once_do_not_corrupt(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "pipeline", "--db", str(V31), "--all", "--out", str(out), "--force", "-q"]
    procs = [subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    files = notes(out)
    assert len(files) == DEFAULT_NOTES
    for f in files:
        assert frontmatter.load(f)["id"]
    assert not list(out.rglob("*.tmp"))


# ``entry`` as the console script runs it, in a process that has loaded litellm (as every LLM run has).
_ENTRY_WITH_LITELLM = "import sys, litellm; from pipeline.cli.app import entry; sys.argv[0] = 'distill'; entry()"


def test_quick_exit_after_litellm_keeps_output_and_exit_codes(tmp_path: Path) -> None:
    env = {**os.environ, "HERMES_HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = tmp_path / "out"
    ok = subprocess.run([sys.executable, "-c", _ENTRY_WITH_LITELLM, "--db", str(V31), "--all", "--out", str(out),
                         "--summarizer", "extractive", "--json"], capture_output=True, text=True, env=env,
                        timeout=180, check=False)
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)  # the whole report reached the pipe before the process ended
    assert report["written"] == DEFAULT_NOTES == len(notes(out))
    assert (out / ".distill" / "index.json").is_file()
    bad = subprocess.run([sys.executable, "-c", _ENTRY_WITH_LITELLM, "--db", str(tmp_path / "missing.db"), "--all"],
                         capture_output=True, text=True, env=env, timeout=180, check=False)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith("Error:"), bad.stderr


def test_transcript_files_are_inputs(tmp_path: Path, transcripts: Path) -> None:
    files = sorted(p for p in transcripts.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".md", ".json")
                   and p.name != "README.md")
    assert files, "the transcript folder is empty"
    out = tmp_path / "out"
    code, stdout, stderr = invoke(*files[:3], "--out", out, "--json")
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["db"] is None and report["written"] >= 3
    # sorted: two aider histories (one holds several chat sessions), then a Claude Code project file
    assert {frontmatter.load(f)["source"] for f in notes(out)} == {"aider", "claude-code"}


def test_import_into_db_then_distill(tmp_path: Path, transcripts: Path) -> None:
    src = next(p for p in sorted((transcripts / "codex").rglob("*.jsonl")))
    db = tmp_path / "imported.db"
    with pytest.raises(SystemExit) as exc:
        main(["import", "--into-db", str(db), str(src)])
    assert exc.value.code in (0, None)
    code, stdout, stderr = invoke("--db", db, "--all", "--out", tmp_path / "out", "--source", "codex", "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["written"] == 1
    with pytest.raises(SystemExit) as exc:  # an existing database needs explicit consent
        main(["import", "--into-db", str(db), str(src)])
    assert exc.value.code == 2


def _texts(out: Path) -> dict[str, str]:
    # distilled_at is the run's clock; everything else must not depend on how the run was split.
    return {
        f.relative_to(out).as_posix(): "".join(
            line for line in f.read_text("utf-8").splitlines(keepends=True) if not line.startswith("distilled_at:")
        )
        for f in notes(out)
    }


def test_jobs_change_speed_only(db: Path, tmp_path: Path) -> None:
    """Worker processes give the same notes, links, index and report order as a serial run."""
    runs = {}
    for jobs in ("1", "3"):
        out = tmp_path / f"out-{jobs}"
        code, stdout, stderr = invoke("--db", db, "--all", "--out", out, "--jobs", jobs, "--json",
                                      "--exclude-source", "none")
        assert code == 0, stderr
        report = json.loads(stdout)
        index = json.loads((out / ".distill" / "index.json").read_text("utf-8"))
        runs[jobs] = (_texts(out), [(r["session_id"], r["status"]) for r in report["results"]], index)
    assert len(runs["1"][0]) >= 8  # enough sessions that the pool is used
    assert runs["1"] == runs["3"]


def test_rerun_with_nothing_new_starts_no_workers(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pipeline.run.pool as parallel

    pools: list[int] = []
    real_init = parallel.DraftPool.__init__

    def counting_init(self: parallel.DraftPool, jobs: int, *args: object, **kwargs: object) -> None:
        pools.append(jobs)
        real_init(self, jobs, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parallel.DraftPool, "__init__", counting_init)
    args = ("--db", db, "--all", "--out", tmp_path / "out", "--jobs", "3", "--exclude-source", "none")
    assert invoke(*args)[0] == 0
    assert pools == [3]  # enough new sessions: workers were started
    code, stdout, stderr = invoke(*args, "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["unchanged"] == len(notes(tmp_path / "out"))
    assert pools == [3]  # nothing to distill: no process was forked for it


def test_jobs_rerun_with_stale_index_rewrites_the_missing_note(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert invoke("--db", db, "--all", "--out", out, "--jobs", "2")[0] == 0
    (out / ".distill" / "fingerprints.json").unlink()  # every session is read and hashed again
    gone = notes(out)[0]
    gone.unlink()  # the index still says its content hash is current
    code, stdout, stderr = invoke("--db", db, "--all", "--out", out, "--jobs", "2", "--json")
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["written"] == 1 and report["unchanged"] == DEFAULT_NOTES - 1
    assert gone.is_file()


def test_jobs_flag_is_validated() -> None:
    code, _, stderr = invoke("--all", "--jobs", "0")
    assert code == 2 and "--jobs" in stderr
