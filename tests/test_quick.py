"""The unchanged re-run (``pipeline.cli.record``): answered without pydantic, identical to the full run, and
never answered once any input moved. Every run here is the real ``distill`` process."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import record as quick

ROOT = Path(__file__).resolve().parent.parent
V31 = ROOT / "fixtures" / "hermes" / "state-v31.db"
V22 = ROOT / "fixtures" / "hermes" / "state-v22.db"


class Distill:
    """``python -X importtime -m pipeline ...`` in one working dir and environment, as a user reruns a command."""

    def __init__(self, tmp: Path, db: Path) -> None:
        self.tmp, self.db, self.out = tmp, db, tmp / "out"
        self.env = {k: v for k, v in os.environ.items() if k != quick.DISABLE_ENV}
        self.env.update(HERMES_HOME=str(tmp / "home"), LITELLM_LOCAL_MODEL_COST_MAP="True")

    def __call__(self, *extra: str, full: bool = False) -> tuple[subprocess.CompletedProcess[str], bool]:
        """(the process, whether it ran the full pipeline: it imported pydantic)."""
        env = {**self.env, quick.DISABLE_ENV: "1"} if full else self.env
        args = ["--db", str(self.db), "--all", "--out", str(self.out), "--summarizer", "extractive", *extra]
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pipeline", *args], capture_output=True,
                              text=True, env=env, cwd=self.tmp, timeout=180, check=False)
        imported = [line for line in proc.stderr.splitlines() if line.startswith("import time:")]
        proc.stderr = "\n".join(line for line in proc.stderr.splitlines() if not line.startswith("import time:"))
        return proc, any(line.rstrip().endswith(" pydantic") for line in imported)


@pytest.fixture(params=[V31, V22], ids=["v31", "v22-wal"])
def distill(request: pytest.FixtureRequest, tmp_path: Path) -> Distill:
    db = tmp_path / "state.db"
    shutil.copy(request.param, db)
    for suffix in ("-wal", "-shm"):  # the v22 fixture is a live WAL database: copy it whole
        if Path(f"{request.param}{suffix}").exists():
            shutil.copy(f"{request.param}{suffix}", f"{db}{suffix}")
    return Distill(tmp_path, db)


def session_notes(out: Path) -> list[Path]:
    """The session notes (not the project index notes the run's link pass writes under projects/)."""
    return [p for p in out.rglob("*.md") if p.relative_to(out).parts[0] != "projects"]


def _masked(text: str) -> str:
    """Output with the run's elapsed time taken out: the one thing two identical runs may differ in."""
    import re

    text = re.sub(r'"elapsed_s": [0-9.]+', '"elapsed_s": 0', text)
    return re.sub(r"; [0-9.]+s\) → ", "; Ns) → ", text)


@pytest.mark.parametrize("flags", [("--json",), ()], ids=["json", "text"])
def test_unchanged_rerun_is_answered_without_the_pipeline_and_says_what_the_full_run_says(
    distill: Distill, flags: tuple[str, ...]
) -> None:
    cold, full = distill(*flags)
    assert cold.returncode == 0 and full, cold.stderr
    mtimes = {p: p.stat().st_mtime_ns for p in session_notes(distill.out)}
    fast, full = distill(*flags)
    assert fast.returncode == 0 and not full, fast.stderr
    slow, full = distill(*flags, full=True)
    assert slow.returncode == 0 and full
    assert _masked(fast.stdout) == _masked(slow.stdout)
    assert _masked(fast.stderr) == _masked(slow.stderr)
    if flags:
        report = json.loads(fast.stdout)
        assert report["written"] == 0 and report["unchanged"] == len(mtimes) > 0
    assert {p: p.stat().st_mtime_ns for p in session_notes(distill.out)} == mtimes


def _append_message(db: Path) -> None:
    """A new user message on the newest session, written the way any other SQLite client would."""
    con = sqlite3.connect(db)
    with con:
        sid = con.execute("SELECT id FROM sessions WHERE source = 'cli' ORDER BY started_at DESC LIMIT 1").fetchone()[0]
        con.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, ?)",
                    (sid, "one more thing: add a --verbose flag", 1_900_000_000.0))
    con.close()


def test_any_moved_input_takes_the_full_run(distill: Distill, tmp_path: Path) -> None:
    def written() -> int | None:
        """Notes the run wrote, or None when it was answered from the record."""
        proc, full = distill("--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["written"] if full else None

    assert written() == len(session_notes(distill.out)) > 0
    assert written() is None

    _append_message(distill.db)  # the session grew: its note is re-rendered
    assert written() == 1
    assert written() is None

    note = session_notes(distill.out)[0]
    note.unlink()  # a deleted note comes back
    assert written() == 1 and note.exists()
    assert written() is None

    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / "distill.yaml").write_text("model: openai/some-model\n")  # the model choice may change
    assert written() == 0
    assert written() is None


def test_commands_it_cannot_vouch_for_always_run(distill: Distill) -> None:
    assert distill()[0].returncode == 0
    for extra in (("--force",), ("--dry-run",), ("--since", "2000-01-01")):
        assert distill(*extra)[1] is True, extra
        assert distill(*extra)[1] is True, extra  # no record either
    assert not quick.vouchable(["skills", "pending"])
    assert not quick.vouchable(["--idle=2h"])
    assert quick.vouchable(["20261130_101500_abc123", "--out", "notes"])


def test_failed_run_leaves_no_record(tmp_path: Path) -> None:
    bad = Distill(tmp_path, tmp_path / "missing.db")
    assert bad()[0].returncode == 2
    assert not quick.records_dir(bad.env).exists() or not list(quick.records_dir(bad.env).glob("*.json"))


def test_record_key_follows_command_line_directory_and_environment(tmp_path: Path) -> None:
    env = {"HERMES_HOME": str(tmp_path), "PWD": "/a", "SHLVL": "1"}
    base = quick._key(["--all"], env, "/w")
    assert quick._key(["--all"], {**env, "PWD": "/b", "SHLVL": "3"}, "/w") == base  # shell bookkeeping only
    assert quick._key(["--all", "-q"], env, "/w") != base
    assert quick._key(["--all"], env, "/v") != base
    assert quick._key(["--all"], {**env, "DISTILL_MODEL": "openai/x"}, "/w") != base


def test_records_are_pruned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quick, "MAX_RECORDS", 3)
    folder = tmp_path / "runs"
    folder.mkdir()
    for i in range(5):
        (folder / f"{i}.json").write_text("{}")
        os.utime(folder / f"{i}.json", ns=(i * 10**9, i * 10**9))
    quick._prune(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["2.json", "3.json", "4.json"]


def test_no_record_vouches_for_a_note_that_is_gone(tmp_path: Path) -> None:
    note = tmp_path / "out" / "2026" / "11" / "a.md"
    note.parent.mkdir(parents=True)
    note.write_text("---\nid: a\n---\n")
    report = {"db": "x", "out": str(tmp_path / "out"), "summarizer": "extractive", "selected": 1, "written": 1,
              "unchanged": 0, "skipped": 0, "failed": 0, "dry_run": False, "fallbacks": 0, "notices": [],
              "results": [{"session_id": "a", "status": "written", "path": str(note), "error": None, "problems": []}]}
    env = {"HERMES_HOME": str(tmp_path / "home")}
    args = {"before": quick.db_stamps(tmp_path / "state.db"), "out": tmp_path / "out", "home": tmp_path / "home",
            "report": report, "setup_notices": 0, "env": env, "cwd": str(tmp_path)}
    assert quick.save(["--all"], **args) is not None
    note.unlink()
    assert quick.save(["--all"], **args) is None


def _cloned(db: Path, copies: int) -> None:
    """``db`` with each top-level session copied ``copies`` times (new ids, no title: titles are unique)."""
    con = sqlite3.connect(db)
    s_cols = [r[1] for r in con.execute("PRAGMA table_info(sessions)")]
    m_cols = [r[1] for r in con.execute("PRAGMA table_info(messages)") if r[1] not in ("id", "message_uid")]
    roots = [r[0] for r in con.execute("SELECT id FROM sessions WHERE parent_session_id IS NULL")]
    with con:
        for k in range(copies):
            for sid in roots:
                new = f"{sid}-copy{k}"
                picked = ", ".join("?" if c == "id" else "NULL" if c == "title" else f'"{c}"' for c in s_cols)
                con.execute(f"INSERT INTO sessions ({', '.join(s_cols)}) SELECT {picked} FROM sessions WHERE id = ?",
                            (new, sid))
                picked = ", ".join("?" if c == "session_id" else f'"{c}"' for c in m_cols)
                con.execute(f"INSERT INTO messages ({', '.join(m_cols)}) SELECT {picked} FROM messages "
                            "WHERE session_id = ? ORDER BY id", (new, sid))
    con.close()


def test_a_cold_run_that_links_only_the_newest_notes_is_answered_next_time(tmp_path: Path) -> None:
    from pipeline.archive.links import LINK_MAX

    db = tmp_path / "state.db"
    shutil.copy(V31, db)
    _cloned(db, LINK_MAX // 6)  # some sources are not distilled by default: enough copies to pass LINK_MAX
    run = Distill(tmp_path, db)
    cold, full = run()
    assert cold.returncode == 0 and full, cold.stderr
    # the cold run says it linked only the newest notes: that is about its own work, not a problem a re-run
    # must look at again, so the very next run is answered from the record
    assert f"related links computed for the newest {LINK_MAX} of the" in cold.stdout + cold.stderr
    fast, full = run()
    assert fast.returncode == 0 and not full, fast.stderr
    assert "related links computed" not in fast.stdout + fast.stderr
