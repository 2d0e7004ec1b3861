"""distill reads while a real Hermes (PyPI hermes-agent, WAL mode) appends and compacts in place.

The writer is ``tests/hermes_writer.py`` running under a Hermes Python in its own process, through
the real ``hermes_state.SessionDB``. Both sides must finish without errors, and every snapshot
distill takes must be a consistent logical transcript (no turn lost or doubled mid-compaction).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import frontmatter
import pytest

from pipeline.chunk import chunk_session
from pipeline.config import build_settings
from pipeline.read.hermes import HermesDB
from pipeline.run.runner import run

ROOT = Path(__file__).resolve().parent.parent
SESSION = "20261201_120000_live01"
TURN = re.compile(r"^Live turn (\d+): run echo\.$")


def hermes_python() -> str:
    candidates = [os.environ.get("HERMES_PYTHON", ""), str(ROOT / ".venv-hermes/bin/python")]
    for c in candidates:
        if c and Path(c).exists():
            return c
    if os.environ.get("DISTILL_REQUIRE_HERMES"):
        pytest.fail("HERMES_PYTHON is required here (CI installs hermes-agent into .venv-hermes)")
    pytest.skip("no Hermes Python: set HERMES_PYTHON to a venv with `pip install hermes-agent==0.19.0`")


def _turns(db: Path) -> list[int]:
    with HermesDB(db) as h:
        session = h.read_session(h.resolve(SESSION))
    msgs = [m for c in chunk_session(session) for m in c.messages]
    return [int(m_.group(1)) for m in msgs if m.role == "user" and (m_ := TURN.match(m.content))]


@pytest.mark.slow
def test_distill_beside_a_live_hermes_writer(tmp_path: Path) -> None:
    db, out = tmp_path / "state.db", tmp_path / "out"
    env = {**os.environ, "HERMES_HOME": str(tmp_path / "home")}
    writer = subprocess.Popen(
        [hermes_python(), str(ROOT / "tests" / "hermes_writer.py"), "--db", str(db), "--session", SESSION,
         "--seconds", "8", "--pause", "0.01"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait for Hermes to create the db and the session
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                    if con.execute("SELECT 1 FROM sessions WHERE id = ?", (SESSION,)).fetchone():
                        break
            except sqlite3.Error:
                pass
            time.sleep(0.1)
        snapshots = runs = 0
        settings = build_settings(db=db, out=out, sessions=[SESSION], force=True)
        while writer.poll() is None:
            turns = _turns(db)
            # A consistent snapshot: turns 1..n, each exactly once, even across the compaction.
            assert turns == list(range(1, len(turns) + 1)), turns
            snapshots += 1
            report = run(settings)
            assert report.failed == 0, report.results
            runs += 1
        stdout, stderr = writer.communicate(timeout=60)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.returncode == 0, stderr
    stats = json.loads(stdout.strip().splitlines()[-1])
    assert stats["compactions"] == 1 and stats["schema_version"] >= 22
    assert snapshots >= 3 and runs >= 3, "the reader never overlapped the writer"
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # After the writer is done, one more run sees every turn and both generations.
    final = run(build_settings(db=db, out=out, sessions=[SESSION]))
    assert final.failed == 0
    assert _turns(db) == list(range(1, stats["turns"] + 1))
    [note] = [p for p in out.rglob("*.md") if p.relative_to(out).parts[0] != "projects"]  # not project notes
    assert frontmatter.load(note)["generations"] == 2


def test_cli_process_beside_the_writer(tmp_path: Path) -> None:
    """The same from the outside: the ``distill`` process while the writer runs."""
    db, out = tmp_path / "state.db", tmp_path / "out"
    env = {**os.environ, "HERMES_HOME": str(tmp_path / "home")}
    writer = subprocess.Popen(
        [hermes_python(), str(ROOT / "tests" / "hermes_writer.py"), "--db", str(db), "--session", SESSION,
         "--seconds", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        time.sleep(1.5)
        codes = []
        while writer.poll() is None:
            proc = subprocess.run([sys.executable, "-m", "pipeline", "--db", str(db), SESSION, "--out", str(out),
                                   "-q"], capture_output=True, text=True, timeout=60, check=False)
            codes.append((proc.returncode, proc.stderr))
        writer.communicate(timeout=60)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.returncode == 0
    assert codes and all(code == 0 for code, _ in codes), codes
