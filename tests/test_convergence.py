"""An incremental run converges to a fresh one: once Hermes stops writing, the note a series of
incremental runs left is the note a run into an empty folder writes (apart from ``distilled_at``).

Two ways this used to fail: the fingerprint (what decides "unchanged" without reading messages)
left out what the content hash includes (usage rows, lineage), and the session list and the
messages were read at different moments while Hermes wrote.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import time
from pathlib import Path

from tests.hostile_cases import TARGET, V31, distill, notes, report, sql
from tests.test_concurrency import ROOT, SESSION, hermes_python

#: What may differ between a note kept up to date and one written once: when it was rendered, and
#: ``version``, which counts the content changes the incremental note went through.
_STAMP = re.compile(r"^(distilled_at|version): .*$", re.M)


def _note(out: Path, sid: str) -> str:
    [path] = [p for p in notes(out) if sid[-6:] in p.name]
    return _STAMP.sub(r"\1: X", path.read_text("utf-8"))


def _run(tmp: Path, db: Path, out: Path, sid: str) -> dict:
    return report(distill(tmp, "--db", db, sid, "--out", out, "--summarizer", "extractive", "--json"))


def test_usage_rows_and_new_children_are_not_missed(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    db.write_bytes(V31.read_bytes())
    inc = tmp_path / "incremental"
    _run(tmp_path, db, inc, TARGET)
    # Hermes bills an API call after the turn's messages are written: only the usage table moves.
    sql(db, "INSERT OR REPLACE INTO session_model_usage(session_id, model, billing_provider, task, api_call_count, "
            "input_tokens, output_tokens, estimated_cost_usd) VALUES (?, 'openai/gpt-4.1-mini', 'openai', '', 3, "
            "91000, 1200, 0.05)", params=(TARGET,))
    first = _run(tmp_path, db, inc, TARGET)
    assert first["results"][0]["status"] == "written", "the usage change was called unchanged"
    # A subagent is spawned from the session: its note's lineage gains a link.
    sql(db, "INSERT INTO sessions(id, source, parent_session_id, started_at, model_config) VALUES "
            "('20261123_170000_child1', 'subagent', ?, 1795453000.0, ?)",
        params=(TARGET, json.dumps({"_delegate_from": TARGET})))
    second = _run(tmp_path, db, inc, TARGET)
    assert second["results"][0]["status"] == "written", "the new child was called unchanged"
    fresh = tmp_path / "fresh"
    _run(tmp_path, db, fresh, TARGET)
    assert _note(inc, TARGET) == _note(fresh, TARGET)


def test_incremental_runs_beside_a_live_writer_converge(tmp_path: Path) -> None:
    """Real Hermes (``SessionDB``, WAL) appends and compacts while distill re-runs incrementally."""
    db, inc, fresh = tmp_path / "state.db", tmp_path / "incremental", tmp_path / "fresh"
    env = {**os.environ, "HERMES_HOME": str(tmp_path / "hermes")}
    writer = subprocess.Popen(
        [hermes_python(), str(ROOT / "tests" / "hermes_writer.py"), "--db", str(db), "--session", SESSION,
         "--seconds", "6", "--pause", "0.01"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and writer.poll() is None:
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                    if con.execute("SELECT 1 FROM sessions WHERE id = ?", (SESSION,)).fetchone():
                        break
            except sqlite3.Error:
                pass
            time.sleep(0.1)
        runs = 0
        while writer.poll() is None and runs < 40:
            _run(tmp_path, db, inc, SESSION)
            runs += 1
        _, stderr = writer.communicate(timeout=60)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0, stderr
    assert runs >= 2, "distill never ran while Hermes wrote"
    _run(tmp_path, db, inc, SESSION)  # Hermes has stopped: one more incremental run
    _run(tmp_path, db, fresh, SESSION)
    assert _note(inc, SESSION) == _note(fresh, SESSION)
